//! DWTA, portable tier: `wide::f32x8` at the build's baseline target
//! features (two SSE2 registers per vector on x86-64, NEON on aarch64).
//! Chosen at compile time only; safe Rust throughout.
//!
//! Dense, the same two schemes as the AVX2 tier:
//! * rows in lanes (several rows, [`super::use_row_blocks`]): 8 rows are
//!   converted to order-preserving integer keys and transposed (scalar) into
//!   a `dim x 8` block; per bin position one contiguous `i32x8` load,
//!   `simd_gt` (strict: ties keep the earlier position; NaN = `i32::MIN`
//!   never wins), `max` and a `select` of the position;
//! * bins in lanes (one row, huge dim): two vectors of 8 bins per group of
//!   16 (the transposed map's layout). `wide` has no gather, so the 8 values
//!   of a vector are loaded one by one; the compare (`simd_le` | `is_nan`,
//!   i.e. "does not win") and the two blends are vector operations.
//!
//! Sparse: entries one at a time ([`super::fold_entries`]), then the shared
//! densification.

use std::cell::RefCell;

use wide::{f32x8, i32x8};

use super::DwtaView;
use super::{fold_entries, ordered_key, pack_keys, sparse_rows, use_row_blocks, GROUP};

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// Rows in lanes, 8 rows per block (see the module documentation).
fn dense_rows(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    let (dim, bs) = (h.dim(), h.bin_size() as usize);
    let (k, l, lb) = (
        h.bins_per_table() as usize,
        h.tables() as usize,
        h.log2_bin_size(),
    );
    let map = h.map();
    BLOCK.with(|bl| {
        let mut block = bl.borrow_mut();
        if block.len() < dim * 8 {
            block.resize(dim * 8, 0);
        }
        let mut i0 = 0;
        while i0 < n {
            let rr = (n - i0).min(8);
            for c in 0..dim {
                for r in 0..8 {
                    block[c * 8 + r] = if r < rr {
                        ordered_key(x[(i0 + r) * stride + c])
                    } else {
                        i32::MIN
                    };
                }
            }
            for t in 0..l {
                let mut code = [0u32; 8];
                for kk in 0..k {
                    let bin = &map[(t * k + kk) * bs..(t * k + kk + 1) * bs];
                    let mut mx = i32x8::splat(i32::MIN);
                    let mut pos = i32x8::splat(0);
                    for (p, &c) in bin.iter().enumerate() {
                        let c = c as usize;
                        let a: [i32; 8] = block[c * 8..c * 8 + 8].try_into().unwrap();
                        let v = i32x8::new(a);
                        let gt = v.simd_gt(mx);
                        mx = mx.max(v);
                        pos = gt.select(i32x8::splat(p as i32), pos);
                    }
                    for (cv, &pv) in code.iter_mut().zip(pos.to_array().iter()) {
                        *cv |= (pv as u32) << (kk as u32 * lb);
                    }
                }
                for (r, &cv) in code.iter().enumerate().take(rr) {
                    codes[(i0 + r) * l + t] = cv;
                }
            }
            i0 += rr;
        }
    });
}

#[inline(always)]
fn gather8(row: &[f32], idx: &[i32]) -> f32x8 {
    let mut a = [0.0f32; 8];
    for (d, &c) in a.iter_mut().zip(idx) {
        *d = row[c as usize];
    }
    f32x8::new(a)
}

pub fn dense(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    if n >= 2 && use_row_blocks(h) {
        return dense_rows(h, x, n, stride, codes);
    }
    dense_gather(h, x, n, stride, codes);
}

/// Bins in lanes, one row at a time (see the module documentation).
fn dense_gather(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    let (bs, groups, l) = (h.bin_size() as usize, h.num_groups(), h.tables() as usize);
    let mt = h.map_t();
    HASH.with(|hs| {
        let mut hash = hs.borrow_mut();
        hash.resize(groups * GROUP, 0);
        for i in 0..n {
            let row = &x[i * stride..i * stride + h.dim()];
            for g in 0..groups {
                let base = &mt[g * bs * GROUP..(g + 1) * bs * GROUP];
                let mut m = [f32x8::splat(f32::NAN); 2];
                let mut pos = [f32x8::splat(0.0); 2];
                for p in 0..bs {
                    let pv = f32x8::splat(p as f32);
                    for u in 0..2 {
                        let v = gather8(row, &base[p * GROUP + u * 8..p * GROUP + u * 8 + 8]);
                        // Loses when v <= max or v is NaN; a NaN max (no
                        // winner yet) loses to every non-NaN v.
                        let lose = v.simd_le(m[u]) | v.is_nan();
                        m[u] = lose.select(m[u], v);
                        pos[u] = lose.select(pos[u], pv);
                    }
                }
                for u in 0..2 {
                    for (d, &pf) in hash[g * GROUP + u * 8..g * GROUP + u * 8 + 8]
                        .iter_mut()
                        .zip(pos[u].to_array().iter())
                    {
                        *d = pf as u32;
                    }
                }
            }
            pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
        }
    });
}

pub fn sparse(
    h: &DwtaView<'_>,
    indptr: &[usize],
    indices: &[u32],
    values: &[f32],
    codes: &mut [u32],
) {
    sparse_rows(h, indptr, indices, values, codes, fold_entries);
}
