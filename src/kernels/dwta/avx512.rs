//! DWTA, AVX-512 tier (avx512f/bw/dq/vl). Written to mirror the AVX2 tier;
//! it compiles everywhere but has only been run where the CPU has AVX-512.
//!
//! Dense: bins in lanes, one zmm = one group of 16 bins. For each position
//! p, `vmovdqu32` loads the group's p-th coordinates from the transposed map
//! and `vgatherdps` (`_mm512_i32gather_ps`) fetches the row's values. The
//! winning lanes are a mask: `_CMP_ORD_Q(v, v)` (v not NaN) feeding a masked
//! `vcmpps` with `_CMP_NLE_UQ(v, max)` (not `v <= max`: v larger, or no
//! winner yet because the running max is still NaN). Masked moves
//! (`vmovaps`/`vmovdqa32` with a k-register) carry the running max and its
//! position: NaN never wins and ties keep the earlier position.
//!
//! Sparse: 16 entries at a time, `vpgatherdd` fetches the used-coordinate
//! bitmap words, `vpsrlvd` + `vptestmd` give a mask of entries that touch a
//! bin, ANDed with the non-NaN mask of the values. Only those (about 2% of
//! entries at Amazon-670K's shape) are folded into the bins, sequentially
//! ([`super::fold_entry`]); sequential read-modify-write is exact for bins
//! that repeat, so `vpconflictd` is not needed: with so few hits a
//! gather/max/scatter loop with conflict detection would cost more than it
//! saves. Then the shared densification.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{fold_entries, fold_entry, pack_keys, sparse_rows, GROUP};
use crate::dwta::Dwta;

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

pub fn dense(h: &Dwta, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    // SAFETY: the dispatcher selects this tier only when the CPU has
    // avx512f/bw/dq/vl; lengths were checked by Dwta::hash_dense_isa.
    unsafe { dense_avx512(h, x, n, stride, codes) }
}

pub fn sparse(h: &Dwta, indptr: &[usize], indices: &[u32], values: &[f32], codes: &mut [u32]) {
    sparse_rows(h, indptr, indices, values, codes, |h, idx, val, best| {
        // SAFETY: as in `dense`; every index is < dim (validated CSR).
        unsafe { fold_avx512(h, idx, val, best) }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dense_avx512(h: &Dwta, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    let (bs, groups, l) = (h.bin_size() as usize, h.num_groups(), h.tables() as usize);
    let mt = h.map_t().as_ptr();
    HASH.with(|hs| {
        let mut hash = hs.borrow_mut();
        hash.resize(groups * GROUP, 0);
        for i in 0..n {
            // SAFETY: row i < n starts at i*stride and holds dim floats
            // (checked); map_t holds groups*bs*16 coordinates < dim; hash
            // holds groups*16 u32.
            unsafe {
                let row = x.as_ptr().add(i * stride);
                for g in 0..groups {
                    let base = mt.add(g * bs * GROUP);
                    let mut m = _mm512_set1_ps(f32::NAN);
                    let mut pos = _mm512_setzero_si512();
                    for p in 0..bs {
                        let iv = _mm512_loadu_si512(base.add(p * GROUP).cast());
                        let v = _mm512_i32gather_ps::<4>(iv, row);
                        let ord = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
                        let win = _mm512_mask_cmp_ps_mask::<_CMP_NLE_UQ>(ord, v, m);
                        m = _mm512_mask_mov_ps(m, win, v);
                        pos = _mm512_mask_mov_epi32(pos, win, _mm512_set1_epi32(p as i32));
                    }
                    _mm512_storeu_si512(hash.as_mut_ptr().add(g * GROUP).cast(), pos);
                }
            }
            pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
        }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn fold_avx512(h: &Dwta, idx: &[u32], val: &[f32], best: &mut [u64]) {
    let used = h.used_bitmap().as_ptr().cast::<i32>();
    let chunks = idx.len() / 16;
    for c in 0..chunks {
        // SAFETY: c*16 + 16 <= len for idx and val; every index < dim <
        // 2^31, so index >> 5 < used.len().
        let mut m = unsafe {
            let iv = _mm512_loadu_si512(idx.as_ptr().add(c * 16).cast());
            let w = _mm512_i32gather_epi32::<4>(_mm512_srli_epi32::<5>(iv), used);
            let bit = _mm512_srlv_epi32(w, _mm512_and_si512(iv, _mm512_set1_epi32(31)));
            let v = _mm512_loadu_ps(val.as_ptr().add(c * 16));
            let ord = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
            _mm512_mask_test_epi32_mask(ord, bit, _mm512_set1_epi32(1)) as u32
        };
        while m != 0 {
            let u = c * 16 + m.trailing_zeros() as usize;
            m &= m - 1;
            fold_entry(h, idx[u], val[u], best);
        }
    }
    fold_entries(h, &idx[chunks * 16..], &val[chunks * 16..], best);
}
