//! DWTA, AVX2 tier (avx2).
//!
//! Dense: bins in lanes. A group of 16 bins is two ymm of 8 bins, processed
//! as two independent chains. For each position p, one `vmovdqu` loads the
//! p-th coordinates of 8 bins from the transposed map and `vgatherdps`
//! (`_mm256_i32gather_ps`) fetches the row's values there. A lane wins when
//! `vcmpps` with `_CMP_NLE_UQ` (not `v <= max`: true when v is larger or the
//! running max is still NaN = "no winner yet") AND `_CMP_ORD_Q(v, v)` (v is
//! not NaN): so NaN never wins, equal values (including -0/+0) keep the
//! earlier position, and a NaN-only prefix is skipped. Two `vblendvps` carry
//! the running max and its position. The positions are stored once per group
//! and packed into keys.
//!
//! Sparse: 8 entries at a time, `vpgatherdd` fetches the used-coordinate
//! bitmap words (`index >> 5`), `vpsrlvd` moves each entry's bit to bit 0,
//! and `vmovmskps` of (bit << 31) AND `_CMP_ORD_Q(value)` gives the lanes
//! that touch a bin with a non-NaN value. Only those few lanes are folded
//! into the bins, one after the other ([`super::fold_entry`]): AVX2 has no
//! scatter and no `vpconflictd`, and sequential read-modify-write is exact
//! whatever bins repeat. Then the shared densification.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{fold_entries, fold_entry, pack_keys, sparse_rows, GROUP};
use crate::dwta::Dwta;

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

pub fn dense(h: &Dwta, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    // SAFETY: the dispatcher selects this tier only when the CPU has avx2;
    // lengths were checked by Dwta::hash_dense_isa.
    unsafe { dense_avx2(h, x, n, stride, codes) }
}

pub fn sparse(h: &Dwta, indptr: &[usize], indices: &[u32], values: &[f32], codes: &mut [u32]) {
    sparse_rows(h, indptr, indices, values, codes, |h, idx, val, best| {
        // SAFETY: as in `dense`; every index is < dim (validated CSR).
        unsafe { fold_avx2(h, idx, val, best) }
    });
}

/// Bin hashes of the 16 bins of group `base` (`B` rows of 16 coordinates)
/// for one row, stored to `out[0..16]`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn group_avx2(row: *const f32, base: *const i32, bs: usize, out: *mut u32) {
    // SAFETY (whole body): base holds bs*16 coordinates, each < dim, and
    // `row` holds dim readable floats (caller); out holds 16 u32.
    unsafe {
        let mut m0 = _mm256_set1_ps(f32::NAN);
        let mut m1 = m0;
        let mut p0 = _mm256_setzero_ps();
        let mut p1 = p0;
        for p in 0..bs {
            let pv = _mm256_castsi256_ps(_mm256_set1_epi32(p as i32));
            let i0 = _mm256_loadu_si256(base.add(p * GROUP).cast());
            let i1 = _mm256_loadu_si256(base.add(p * GROUP + 8).cast());
            let v0 = _mm256_i32gather_ps::<4>(row, i0);
            let v1 = _mm256_i32gather_ps::<4>(row, i1);
            let w0 = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_NLE_UQ>(v0, m0),
                _mm256_cmp_ps::<_CMP_ORD_Q>(v0, v0),
            );
            let w1 = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_NLE_UQ>(v1, m1),
                _mm256_cmp_ps::<_CMP_ORD_Q>(v1, v1),
            );
            m0 = _mm256_blendv_ps(m0, v0, w0);
            m1 = _mm256_blendv_ps(m1, v1, w1);
            p0 = _mm256_blendv_ps(p0, pv, w0);
            p1 = _mm256_blendv_ps(p1, pv, w1);
        }
        _mm256_storeu_ps(out.cast(), p0);
        _mm256_storeu_ps(out.add(8).cast(), p1);
    }
}

#[target_feature(enable = "avx2")]
unsafe fn dense_avx2(h: &Dwta, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
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
                    group_avx2(
                        row,
                        mt.add(g * bs * GROUP),
                        bs,
                        hash.as_mut_ptr().add(g * GROUP),
                    );
                }
            }
            pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
        }
    });
}

#[target_feature(enable = "avx2")]
unsafe fn fold_avx2(h: &Dwta, idx: &[u32], val: &[f32], best: &mut [u64]) {
    let used = h.used_bitmap().as_ptr().cast::<i32>();
    let chunks = idx.len() / 8;
    for c in 0..chunks {
        // SAFETY: c*8 + 8 <= len for idx and val; every index < dim < 2^31,
        // so index >> 5 < used.len().
        let mut m = unsafe {
            let iv = _mm256_loadu_si256(idx.as_ptr().add(c * 8).cast());
            let w = _mm256_i32gather_epi32::<4>(used, _mm256_srli_epi32::<5>(iv));
            let bit = _mm256_srlv_epi32(w, _mm256_and_si256(iv, _mm256_set1_epi32(31)));
            let hit = _mm256_castsi256_ps(_mm256_slli_epi32::<31>(bit));
            let v = _mm256_loadu_ps(val.as_ptr().add(c * 8));
            let ord = _mm256_cmp_ps::<_CMP_ORD_Q>(v, v);
            _mm256_movemask_ps(_mm256_and_ps(hit, ord)) as u32
        };
        while m != 0 {
            let u = c * 8 + m.trailing_zeros() as usize;
            m &= m - 1;
            fold_entry(h, idx[u], val[u], best);
        }
    }
    fold_entries(h, &idx[chunks * 8..], &val[chunks * 8..], best);
}
