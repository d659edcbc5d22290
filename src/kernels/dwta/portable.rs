//! DWTA, portable tier: `wide::f32x8` at the build's baseline target
//! features (two SSE2 registers per vector on x86-64, NEON on aarch64).
//! Chosen at compile time only; safe Rust throughout.
//!
//! Dense: bins in lanes, two vectors of 8 bins per group of 16 (the
//! transposed map's layout). `wide` has no gather, so the 8 values of a
//! vector are loaded one by one; the compare (`simd_le` | `is_nan`, i.e.
//! "does not win") and the two blends are vector operations.
//! Sparse: entries one at a time ([`super::fold_entries`]), then the shared
//! densification.

use std::cell::RefCell;

use wide::f32x8;

use super::{fold_entries, pack_keys, sparse_rows, GROUP};
use crate::dwta::Dwta;

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

#[inline(always)]
fn gather8(row: &[f32], idx: &[i32]) -> f32x8 {
    let mut a = [0.0f32; 8];
    for (d, &c) in a.iter_mut().zip(idx) {
        *d = row[c as usize];
    }
    f32x8::new(a)
}

pub fn dense(h: &Dwta, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
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

pub fn sparse(h: &Dwta, indptr: &[usize], indices: &[u32], values: &[f32], codes: &mut [u32]) {
    sparse_rows(h, indptr, indices, values, codes, fold_entries);
}
