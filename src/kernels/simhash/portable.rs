//! SimHash, portable tier: `wide::f32x16` at the build's baseline target
//! features (four SSE2 registers per vector on x86-64, NEON on aarch64).
//! Chosen at compile time only; the tier for targets without the
//! hand-written AVX2/AVX-512 kernels. Safe Rust (1-3 sparse rows go through the
//! shared per-row path in `mod.rs`).
//!
//! Dense planes: 2 rows x 1 packed panel of 16 planes per tile (8 SSE
//! registers of accumulators), `mul_add` per input coordinate, sign bits from
//! `simd_gt(0)` + `to_bitmask` (NaN gives 0). Sparse ±1 planes: 16 rows at a
//! time transposed into a `dim x 16` block, then adds/subtracts of block rows
//! from the planes' index lists.

use std::cell::RefCell;

use wide::f32x16;

use super::{emit_codes, words_per_row};
use super::{Planes, SparseView, PANEL};

const ROWS: usize = 2;
const SPARSE_ROWS: usize = 16;

thread_local! {
    static BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[inline(always)]
fn load16(s: &[f32], at: usize) -> f32x16 {
    let a: [f32; 16] = s[at..at + 16].try_into().unwrap();
    f32x16::new(a)
}

pub fn hash(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    match h.sparse() {
        Some(sp) => sparse::<false>(h, sp, x, n, stride, codes, &mut []),
        None => dense::<false>(h, x, n, stride, codes, &mut []),
    }
}

pub fn project(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, out: &mut [f32]) {
    match h.sparse() {
        Some(sp) => sparse::<true>(h, sp, x, n, stride, &mut [], out),
        None => dense::<true>(h, x, n, stride, &mut [], out),
    }
}

fn dense<const PROJ: bool>(
    h: &Planes<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let (dim, np, npanels) = (h.dim(), h.num_planes(), h.num_panels());
    let words = words_per_row(npanels);
    let pk = h.packed();
    let (k, l) = (h.bits(), h.tables() as usize);
    let zero = f32x16::splat(0.0);
    BITS.with(|b| {
        let mut bits = b.borrow_mut();
        if bits.len() < ROWS * words {
            bits.resize(ROWS * words, 0);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(ROWS);
            bits[..rr * words].fill(0);
            for panel in 0..npanels {
                let base = panel * dim * PANEL;
                let mut acc = [zero; ROWS];
                for j in 0..dim {
                    let w = load16(pk, base + j * PANEL);
                    for r in 0..rr {
                        let xb = f32x16::splat(x[(i + r) * stride + j]);
                        acc[r] = xb.mul_add(w, acc[r]);
                    }
                }
                for (r, a) in acc.iter().enumerate().take(rr) {
                    if PROJ {
                        let lanes = (np - panel * PANEL).min(PANEL);
                        let o = (i + r) * np + panel * PANEL;
                        out[o..o + lanes].copy_from_slice(&a.to_array()[..lanes]);
                    } else {
                        let m = a.simd_gt(zero).to_bitmask() as u64;
                        let bit = panel * PANEL;
                        bits[r * words + bit / 64] |= m << (bit % 64);
                    }
                }
            }
            if !PROJ {
                for r in 0..rr {
                    emit_codes(&bits[r * words..], k, l as u32, &mut codes[(i + r) * l..]);
                }
            }
            i += rr;
        }
    });
}

fn sparse<const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let (dim, np) = (h.dim(), h.num_planes());
    if n < 4 {
        // A block transpose costs more than it saves for so few rows.
        super::sparse_rows::<PROJ>(h, sp, x, n, stride, codes, out);
        return;
    }
    let words = np.div_ceil(64);
    let (k, l) = (h.bits(), h.tables() as usize);
    let zero = f32x16::splat(0.0);
    BLOCK.with(|blk| {
        BITS.with(|b| {
            let mut block = blk.borrow_mut();
            let mut bits = b.borrow_mut();
            if block.len() < dim * SPARSE_ROWS {
                block.resize(dim * SPARSE_ROWS, 0.0);
            }
            if bits.len() < SPARSE_ROWS * words {
                bits.resize(SPARSE_ROWS * words, 0);
            }
            let mut i = 0;
            while i < n {
                let rr = (n - i).min(SPARSE_ROWS);
                for j in 0..dim {
                    for r in 0..SPARSE_ROWS {
                        block[j * SPARSE_ROWS + r] =
                            if r < rr { x[(i + r) * stride + j] } else { 0.0 };
                    }
                }
                bits[..rr * words].fill(0);
                for p in 0..np {
                    let (s, m, e) = (
                        sp.start[p] as usize,
                        sp.mid[p] as usize,
                        sp.start[p + 1] as usize,
                    );
                    let mut acc = [zero; 2];
                    for (u, &j) in sp.idx[s..m].iter().enumerate() {
                        acc[u & 1] += load16(&block, j as usize * SPARSE_ROWS);
                    }
                    for (u, &j) in sp.idx[m..e].iter().enumerate() {
                        acc[u & 1] -= load16(&block, j as usize * SPARSE_ROWS);
                    }
                    let v = acc[0] + acc[1];
                    if PROJ {
                        let a = v.to_array();
                        for r in 0..rr {
                            out[(i + r) * np + p] = a[r];
                        }
                    } else {
                        let mask = v.simd_gt(zero).to_bitmask();
                        for r in 0..rr {
                            bits[r * words + p / 64] |= (((mask >> r) & 1) as u64) << (p % 64);
                        }
                    }
                }
                if !PROJ {
                    for r in 0..rr {
                        emit_codes(&bits[r * words..], k, l as u32, &mut codes[(i + r) * l..]);
                    }
                }
                i += rr;
            }
        })
    });
}
