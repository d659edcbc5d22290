//! SimHash, AVX-512 tier (avx512f/bw/dq/vl + fma).
//!
//! Dense planes: a register-blocked micro-kernel like an sgemm tile: 6 rows
//! x 4 panels (6 x 64 planes = 24 zmm accumulators); per input coordinate it
//! loads one 16-plane row of each panel and broadcasts each row's value
//! (`vbroadcastss` folded into `vfmadd231ps`). The sign of each accumulator
//! is taken with `vcmpps` into a mask register (`_CMP_GT_OQ`: NaN gives 0),
//! so only 16 bits per panel leave the registers — the projections are never
//! stored unless `project` asks for them. One row alone uses 1 x 8 panels so
//! eight independent FMA chains cover the FMA latency.
//!
//! Sparse ±1 planes: 32 rows at a time are transposed into a `dim x 32`
//! scratch block (L1-resident for dim <= 256); each plane then adds the
//! block rows of its positive coordinates and subtracts those of its negative
//! ones (two zmm per index, four partial sums per half to hide the add
//! latency). A plane's 32 sign bits (one per row) are scattered into the
//! rows' bit strings.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{emit_codes, words_per_row};
use super::{Planes, SparseView, PANEL};

const ROWS: usize = 6;
const SPARSE_ROWS: usize = 32;

thread_local! {
    static BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// See [`super::HashFn`].
pub unsafe fn hash(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    // SAFETY: the caller guarantees the HashFn contract: the CPU has
    // avx512f/bw/dq/vl and fma (checked by SimHash::hash_isa) and the
    // lengths were checked.
    unsafe {
        match h.sparse() {
            Some(sp) => sparse::<false>(h, sp, x, n, stride, codes, &mut []),
            None => dense::<false>(h, x, n, stride, codes, &mut []),
        }
    }
}

/// # Safety
/// See [`super::ProjectFn`].
pub unsafe fn project(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, out: &mut [f32]) {
    // SAFETY: as in `hash`.
    unsafe {
        match h.sparse() {
            Some(sp) => sparse::<true>(h, sp, x, n, stride, &mut [], out),
            None => dense::<true>(h, x, n, stride, &mut [], out),
        }
    }
}

/// Pointers shared by the tiles of one call.
#[derive(Clone, Copy)]
struct Ctx {
    dim: usize,
    stride: usize,
    pk: *const f32,
    np: usize,
    words: usize,
}

/// One RR x PP tile: rows `x .. x + RR*stride`, panels `panel0 ..
/// panel0 + PP`. Writes sign bits into `bits[r*words ..]` or projections
/// into `out[r*np ..]`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[inline]
unsafe fn tile<const RR: usize, const PP: usize, const PROJ: bool>(
    c: Ctx,
    x: *const f32,
    panel0: usize,
    bits: *mut u64,
    out: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); PP]; RR];
    let panel_len = c.dim * PANEL;
    // SAFETY (whole body): panels panel0..panel0+PP exist in `pk` (caller),
    // rows 0..RR of x hold `dim` readable values each (checked lengths), and
    // bits/out have RR rows of `words`/`np` entries (caller).
    unsafe {
        let base = c.pk.add(panel0 * panel_len);
        for j in 0..c.dim {
            let mut w = [_mm512_setzero_ps(); PP];
            for (p, wp) in w.iter_mut().enumerate() {
                *wp = _mm512_load_ps(base.add(p * panel_len + j * PANEL));
            }
            for (r, ar) in acc.iter_mut().enumerate() {
                let xb = _mm512_set1_ps(*x.add(r * c.stride + j));
                for p in 0..PP {
                    ar[p] = _mm512_fmadd_ps(xb, w[p], ar[p]);
                }
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            for (p, a) in ar.iter().enumerate() {
                let panel = panel0 + p;
                if PROJ {
                    let lanes = (c.np - panel * PANEL).min(PANEL);
                    let m: __mmask16 = if lanes == PANEL {
                        0xFFFF
                    } else {
                        (1u16 << lanes) - 1
                    };
                    _mm512_mask_storeu_ps(out.add(r * c.np + panel * PANEL), m, *a);
                } else {
                    let m = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(*a, _mm512_setzero_ps());
                    let bit = panel * PANEL;
                    *bits.add(r * c.words + bit / 64) |= (m as u64) << (bit % 64);
                }
            }
        }
    }
}

/// Runs `tile::<rr, PP>` for a runtime row count `rr` in 1..=ROWS.
macro_rules! tile_rows {
    ($rr:expr, $pp:literal, $proj:ident, $($a:expr),*) => {
        match $rr {
            1 => tile::<1, $pp, $proj>($($a),*),
            2 => tile::<2, $pp, $proj>($($a),*),
            3 => tile::<3, $pp, $proj>($($a),*),
            4 => tile::<4, $pp, $proj>($($a),*),
            5 => tile::<5, $pp, $proj>($($a),*),
            _ => tile::<6, $pp, $proj>($($a),*),
        }
    };
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn dense<const PROJ: bool>(
    h: &Planes<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let npanels = h.num_panels();
    let c = Ctx {
        dim: h.dim(),
        stride,
        pk: h.packed().as_ptr(),
        np: h.num_planes(),
        words: words_per_row(npanels),
    };
    let (k, l) = (h.bits(), h.tables() as usize);
    BITS.with(|b| {
        let mut bits = b.borrow_mut();
        if bits.len() < ROWS * c.words {
            bits.resize(ROWS * c.words, 0);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(ROWS);
            bits[..rr * c.words].fill(0);
            // SAFETY: row i + rr - 1 < n exists in x (checked); out has n
            // rows of np values when PROJ (checked); bits holds ROWS rows.
            unsafe {
                let xr = x.as_ptr().add(i * stride);
                let bp = bits.as_mut_ptr();
                let op = if PROJ {
                    out.as_mut_ptr().add(i * c.np)
                } else {
                    std::ptr::null_mut()
                };
                let mut p = 0;
                if rr == 1 {
                    while p + 8 <= npanels {
                        tile::<1, 8, PROJ>(c, xr, p, bp, op);
                        p += 8;
                    }
                }
                while p + 4 <= npanels {
                    tile_rows!(rr, 4, PROJ, c, xr, p, bp, op);
                    p += 4;
                }
                while p < npanels {
                    tile_rows!(rr, 1, PROJ, c, xr, p, bp, op);
                    p += 1;
                }
            }
            if !PROJ {
                for r in 0..rr {
                    emit_codes(&bits[r * c.words..], k, l as u32, &mut codes[(i + r) * l..]);
                }
            }
            i += rr;
        }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn sparse<const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let dim = h.dim();
    let np = h.num_planes();
    if n < 4 {
        super::sparse_rows::<PROJ>(h, sp, x, n, stride, codes, out);
        return;
    }
    let words = np.div_ceil(64);
    let (k, l) = (h.bits(), h.tables() as usize);
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
            let mut tmp = [0.0f32; SPARSE_ROWS];
            let mut i = 0;
            while i < n {
                let rr = (n - i).min(SPARSE_ROWS);
                // Transpose rows i..i+rr into block[j*ROWS + r]; padding
                // rows are zero.
                if rr < SPARSE_ROWS {
                    block[..dim * SPARSE_ROWS].fill(0.0);
                }
                for r in 0..rr {
                    let row = &x[(i + r) * stride..(i + r) * stride + dim];
                    for (j, v) in row.iter().enumerate() {
                        block[j * SPARSE_ROWS + r] = *v;
                    }
                }
                bits[..rr * words].fill(0);
                let bp = block.as_ptr();
                for p in 0..np {
                    let (s, m, e) = (
                        sp.start[p] as usize,
                        sp.mid[p] as usize,
                        sp.start[p + 1] as usize,
                    );
                    // SAFETY: every index is < dim (Planes::new's contract), so
                    // idx*32 + 16 + 16 <= dim*32 = block length.
                    let (lo, hi) = unsafe {
                        let (lo_p, hi_p) = signed_sum(bp, &sp.idx[s..m]);
                        let (lo_m, hi_m) = signed_sum(bp, &sp.idx[m..e]);
                        (_mm512_sub_ps(lo_p, lo_m), _mm512_sub_ps(hi_p, hi_m))
                    };
                    if PROJ {
                        // SAFETY: tmp holds 32 floats.
                        unsafe {
                            _mm512_storeu_ps(tmp.as_mut_ptr(), lo);
                            _mm512_storeu_ps(tmp.as_mut_ptr().add(16), hi);
                        }
                        for r in 0..rr {
                            out[(i + r) * np + p] = tmp[r];
                        }
                    } else {
                        let z = _mm512_setzero_ps();
                        let mask = (_mm512_cmp_ps_mask::<_CMP_GT_OQ>(lo, z) as u32)
                            | ((_mm512_cmp_ps_mask::<_CMP_GT_OQ>(hi, z) as u32) << 16);
                        let (w, sh) = (p / 64, p % 64);
                        for r in 0..rr {
                            bits[r * words + w] |= (((mask >> r) & 1) as u64) << sh;
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

/// Sum of block rows `idx` (each 32 floats: two zmm), four partial sums per
/// half.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[inline]
unsafe fn signed_sum(block: *const f32, idx: &[u32]) -> (__m512, __m512) {
    let mut lo = [_mm512_setzero_ps(); 4];
    let mut hi = [_mm512_setzero_ps(); 4];
    let chunks = idx.chunks_exact(4);
    let rest = chunks.remainder();
    // SAFETY: each index j < dim, so block[j*32 .. j*32+32] is in bounds
    // (caller's invariant).
    unsafe {
        for c in chunks {
            for u in 0..4 {
                let r = block.add(c[u] as usize * SPARSE_ROWS);
                lo[u] = _mm512_add_ps(lo[u], _mm512_loadu_ps(r));
                hi[u] = _mm512_add_ps(hi[u], _mm512_loadu_ps(r.add(16)));
            }
        }
        for (u, &j) in rest.iter().enumerate() {
            let r = block.add(j as usize * SPARSE_ROWS);
            lo[u] = _mm512_add_ps(lo[u], _mm512_loadu_ps(r));
            hi[u] = _mm512_add_ps(hi[u], _mm512_loadu_ps(r.add(16)));
        }
    }
    (
        _mm512_add_ps(_mm512_add_ps(lo[0], lo[1]), _mm512_add_ps(lo[2], lo[3])),
        _mm512_add_ps(_mm512_add_ps(hi[0], hi[1]), _mm512_add_ps(hi[2], hi[3])),
    )
}
