//! DWTA, AVX-512 tier (avx512f/bw/dq/vl). Written to mirror the AVX2 tier;
//! it compiles everywhere but has only been run where the CPU has AVX-512.
//!
//! Dense, the same two schemes as AVX2 (chosen by
//! [`super::use_row_blocks`] and the number of rows):
//!
//! * Rows in lanes: 16 or 32 rows are converted to order-preserving integer
//!   keys (NaN -> `i32::MIN` via `vpcmpgtd` into a mask and a masked move)
//!   and written into a `dim x rows` block with `vpscatterdd` (one scatter
//!   of 16 coordinates per row: simple, and cheap next to the bin loop).
//!   Each bin position is one scalar map load and 1-2 contiguous `vmovdqu32`
//!   of 16 rows, `vpcmpgtd` into a mask (strictly greater: ties keep the
//!   earlier position; NaN never beats the initial `i32::MIN`), `vpmaxsd`
//!   and a masked `vmovdqa32` of the position. Keys are packed in registers
//!   (`vpslld` + `vpord`). Lanes of rows past the end hold stale keys whose
//!   results are never stored.
//! * Bins in lanes (one row, or huge `dim`): one zmm = one group of 16 bins.
//!   For each position p, `vmovdqu32` loads the group's p-th coordinates
//!   from the transposed map and `vgatherdps` (`_mm512_i32gather_ps`)
//!   fetches the row's values. The winning lanes are a mask:
//!   `_CMP_ORD_Q(v, v)` (v not NaN) feeding a masked `vcmpps` with
//!   `_CMP_NLE_UQ(v, max)` (not `v <= max`: v larger, or no winner yet
//!   because the running max is still NaN). Masked moves carry the running
//!   max and its position: NaN never wins and ties keep the earlier
//!   position.
//!
//! Sparse: 16 entries at a time, `vpmulld` + `vpsrld` hash the indices to
//! coordinate-filter bits, `vpgatherdd` fetches the filter words, and
//! `vpsrlvd` with `vptestmd` give a mask of entries that may touch a bin,
//! ANDed with the non-NaN mask of the values. Only those (~4% of entries at Amazon-670K's
//! shape) are looked up and folded into the bins, sequentially
//! ([`super::fold_entry`]); sequential read-modify-write is exact for bins
//! that repeat, so `vpconflictd` is not needed: with so few hits a
//! gather/max/scatter loop with conflict detection would cost more than it
//! saves. Then the shared densification.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{fold_entries, fold_entry, pack_keys, sparse_rows, use_row_blocks, BinState, GROUP};
use super::{DwtaView, FILTER_MUL};

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// See [`super::DenseFn`].
pub unsafe fn dense(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    if !use_row_blocks(h) {
        // SAFETY: the caller guarantees the DenseFn contract: the CPU has
        // avx512f/bw/dq/vl (checked by Dwta::hash_dense_isa) and the lengths
        // were checked.
        unsafe { dense_gather_avx512(h, x, n, stride, codes) };
        return;
    }
    let l = h.tables() as usize;
    let mut i = 0;
    while i < n {
        let r = n - i;
        let (xs, cs) = (&x[i * stride..], &mut codes[i * l..]);
        // SAFETY: as above; rows i.. of x and codes exist (checked lengths).
        let done = unsafe {
            match r {
                1 => dense_gather_avx512(h, xs, 1, stride, cs),
                2..=16 => dense_rows_avx512::<1>(h, xs, r, stride, cs),
                _ => dense_rows_avx512::<2>(h, xs, r.min(32), stride, cs),
            }
            r.min(32)
        };
        i += done;
    }
}

/// # Safety
/// See [`super::SparseFn`].
pub unsafe fn sparse(
    h: &DwtaView<'_>,
    indptr: &[usize],
    indices: &[u32],
    values: &[f32],
    codes: &mut [u32],
) {
    sparse_rows(h, indptr, indices, values, codes, |h, idx, val, st| {
        // SAFETY: as in `dense`; every index is < dim (validated CSR).
        unsafe { fold_avx512(h, idx, val, st) }
    });
}

/// Order-preserving integer keys of 16 floats ([`super::ordered_key`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
fn keys16(v: __m512) -> __m512i {
    let bits = _mm512_castps_si512(v);
    let abs = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFF_FFFF));
    let sign = _mm512_srai_epi32::<31>(bits);
    let k = _mm512_sub_epi32(_mm512_xor_si512(abs, sign), sign);
    let nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7F80_0000));
    _mm512_mask_mov_epi32(k, nan, _mm512_set1_epi32(i32::MIN))
}

/// Rows in lanes with `V` zmm (16*V rows) per bin position.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dense_rows_avx512<const V: usize>(
    h: &DwtaView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
) {
    let (dim, bs) = (h.dim(), h.bin_size() as usize);
    let (k, l, lb) = (
        h.bins_per_table() as usize,
        h.tables() as usize,
        h.log2_bin_size(),
    );
    let map = h.map();
    let w = 16 * V;
    BLOCK.with(|bl| {
        let mut block = bl.borrow_mut();
        if block.len() < dim * w {
            block.resize(dim * w, i32::MIN);
        }
        let bp = block.as_mut_ptr();
        let full = dim / 16 * 16;
        let mut tmp = [0u32; 32];
        let mut i0 = 0;
        while i0 < n {
            let rr = (n - i0).min(w);
            // SAFETY: rows i0..i0+rr exist (checked lengths); block holds
            // dim*w keys, scatter offsets are < 16*w from block + c0*w with
            // c0 + 16 <= dim; every map entry is < dim; codes holds n*L.
            unsafe {
                let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                let lanes = _mm512_mullo_epi32(iota, _mm512_set1_epi32(w as i32));
                for r in 0..rr {
                    let xr = x.as_ptr().add((i0 + r) * stride);
                    let off = _mm512_add_epi32(lanes, _mm512_set1_epi32(r as i32));
                    let mut c0 = 0;
                    while c0 < full {
                        let kv = keys16(_mm512_loadu_ps(xr.add(c0)));
                        _mm512_i32scatter_epi32::<4>(bp.add(c0 * w), off, kv);
                        c0 += 16;
                    }
                    for c in full..dim {
                        *bp.add(c * w + r) = super::ordered_key(*xr.add(c));
                    }
                }
                for t in 0..l {
                    let mut code = [_mm512_setzero_si512(); V];
                    for kk in 0..k {
                        let bin = map.as_ptr().add((t * k + kk) * bs);
                        let mut mx = [_mm512_set1_epi32(i32::MIN); V];
                        let mut pos = [_mm512_setzero_si512(); V];
                        for p in 0..bs {
                            let c = *bin.add(p) as usize;
                            let pv = _mm512_set1_epi32(p as i32);
                            for v in 0..V {
                                let val = _mm512_loadu_si512(bp.add(c * w + v * 16).cast());
                                let gt = _mm512_cmpgt_epi32_mask(val, mx[v]);
                                mx[v] = _mm512_max_epi32(mx[v], val);
                                pos[v] = _mm512_mask_mov_epi32(pos[v], gt, pv);
                            }
                        }
                        let sh = _mm_cvtsi32_si128((kk as u32 * lb) as i32);
                        for v in 0..V {
                            code[v] = _mm512_or_si512(code[v], _mm512_sll_epi32(pos[v], sh));
                        }
                    }
                    for (v, cv) in code.iter().enumerate() {
                        _mm512_storeu_si512(tmp.as_mut_ptr().add(v * 16).cast(), *cv);
                    }
                    for (r, &cv) in tmp.iter().enumerate().take(rr) {
                        *codes.get_unchecked_mut((i0 + r) * l + t) = cv;
                    }
                }
            }
            i0 += rr;
        }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dense_gather_avx512(
    h: &DwtaView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
) {
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
unsafe fn fold_avx512(h: &DwtaView<'_>, idx: &[u32], val: &[f32], st: &mut BinState) {
    let filter = h.filter().as_ptr().cast::<i32>();
    let shift = _mm_cvtsi32_si128(h.filter_shift() as i32);
    let chunks = idx.len() / 16;
    for c in 0..chunks {
        // SAFETY: c*16 + 16 <= len for idx and val; a filter bit is below
        // 2^(32 - shift) = 32 * filter.len(), so its word is in bounds.
        let mut m = unsafe {
            let iv = _mm512_loadu_si512(idx.as_ptr().add(c * 16).cast());
            let hb = _mm512_srl_epi32(
                _mm512_mullo_epi32(iv, _mm512_set1_epi32(FILTER_MUL as i32)),
                shift,
            );
            let w = _mm512_i32gather_epi32::<4>(_mm512_srli_epi32::<5>(hb), filter);
            let bit = _mm512_srlv_epi32(w, _mm512_and_si512(hb, _mm512_set1_epi32(31)));
            let v = _mm512_loadu_ps(val.as_ptr().add(c * 16));
            let ord = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
            _mm512_mask_test_epi32_mask(ord, bit, _mm512_set1_epi32(1)) as u32
        };
        while m != 0 {
            let u = c * 16 + m.trailing_zeros() as usize;
            m &= m - 1;
            fold_entry(h, idx[u], val[u], st);
        }
    }
    fold_entries(h, &idx[chunks * 16..], &val[chunks * 16..], st);
}
