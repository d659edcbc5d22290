//! DWTA, AVX2 tier (avx2).
//!
//! Dense, two schemes (both exact; chosen per call by
//! [`super::use_row_blocks`] and the number of rows):
//!
//! * Rows in lanes (the default for several rows when `dim <= K*L*B` and
//!   `dim <= 2048`): 8, 16 or 32 rows are converted to order-preserving
//!   integer keys (`vpsrad`/`vpxor`/`vpsubd`, NaN -> `i32::MIN` with
//!   `vpcmpgtd` + `vpblendvb`) and transposed (`vunpcklps`/`vshufps`/
//!   `vperm2f128` 8x8 tiles) into a `dim x rows` block. Each bin position is
//!   then one scalar map load and 1-4 contiguous `vmovdqu` of 8 rows,
//!   `vpcmpgtd` (strictly greater: ties keep the earlier position; NaN =
//!   `i32::MIN` never beats the initial `i32::MIN`), `vpmaxsd` for the
//!   running max and `vpblendvb` for its position. Keys are packed in
//!   registers (`vpslld` + `vpor`). No gathers: at 64 rows this measured
//!   0.17 µs per row on Zen 3, against 1.29 µs for bins in lanes with
//!   `vgatherdps` and 0.91 µs with the scalar-load gather below (see
//!   `benches/dwta.md`).
//! * Bins in lanes (one row, or huge `dim`): a group of 16 bins is two ymm of
//!   8 bins, processed as two independent chains. For each position p, the
//!   transposed map gives the p-th coordinates of the 16 bins contiguously;
//!   the row's values there are loaded one by one into two ymm. That is a
//!   gather, but not `vgatherdps`: on Zen 3, 2,400 elements took 1.40 µs
//!   with `vgatherdps` ymm, 1.75 µs with xmm gathers and 0.86 µs with 8
//!   scalar loads + inserts (min of 30, same process), and this kernel went
//!   from 1.35 to 0.95 µs per row. A lane wins when `vcmpps` with
//!   `_CMP_NLE_UQ` (not `v <= max`: true when v is larger or the running max
//!   is still NaN = "no winner yet") AND `_CMP_ORD_Q(v, v)` (v is not NaN):
//!   NaN never wins, equal values (including -0/+0) keep the earlier
//!   position, a NaN-only prefix is skipped. Two `vblendvps` carry the
//!   running max and its position. (Gathering precomputed integer keys
//!   instead measured the same: the loads bound this loop.)
//!
//! Sparse: 8 entries at a time, `vpmulld` + `vpsrld` hash the indices to
//! coordinate-filter bits, `vpgatherdd` fetches the filter words, `vpsrlvd`
//! moves each entry's bit to bit 0, and `vmovmskps` of (bit << 31) AND
//! `_CMP_ORD_Q(value)` gives the lanes that may touch a bin with a non-NaN
//! value. Only those few lanes (~4% at Amazon-670K's shape) are looked up in
//! the inverse map and folded into the bins, one after the other
//! ([`super::fold_entry`]): AVX2 has no
//! scatter and no `vpconflictd`, and sequential read-modify-write is exact
//! whatever bins repeat. Then the shared densification.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{fold_entries, fold_entry, pack_keys, sparse_rows, use_row_blocks, BinState, GROUP};
use super::{DwtaView, FILTER_MUL};

/// `POSITIONS.0[p]` = p in every lane (loaded instead of broadcast).
#[repr(C, align(32))]
struct Positions([[i32; 8]; 256]);
static POSITIONS: Positions = {
    let mut t = [[0i32; 8]; 256];
    let mut p = 0;
    while p < 256 {
        t[p] = [p as i32; 8];
        p += 1;
    }
    Positions(t)
};

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// See [`super::DenseFn`].
pub unsafe fn dense(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    if !use_row_blocks(h) {
        // SAFETY: the caller guarantees the DenseFn contract: the CPU has
        // avx2 (checked by Dwta::hash_dense_isa) and the lengths were checked.
        unsafe { dense_bins_avx2(h, x, n, stride, codes) };
        return;
    }
    let l = h.tables() as usize;
    let mut i = 0;
    while i < n {
        let r = n - i;
        let (xs, cs) = (&x[i * stride..], &mut codes[i * l..]);
        // SAFETY: as above; rows i.. of x and codes exist (checked lengths).
        // Block sizes by measured cost: one row is cheaper with bins in lanes,
        // otherwise the smallest block that holds the rows left.
        let done = unsafe {
            match r {
                1 => dense_bins_avx2(h, xs, 1, stride, cs),
                2..=8 => dense_rows_avx2::<1>(h, xs, r, stride, cs),
                9..=16 => dense_rows_avx2::<2>(h, xs, r, stride, cs),
                _ => dense_rows_avx2::<4>(h, xs, r.min(32), stride, cs),
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
        unsafe { fold_avx2(h, idx, val, st) }
    });
}

/// Bin hashes of the 16 bins of group `base` (`B` rows of 16 coordinates)
/// for one row, stored to `out[0..16]` (bins in lanes).
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
            // The p-th coordinates of the 16 bins, loaded one by one and
            // inserted (`vmovss`/`vinsertps`/`vinsertf128`): on Zen 3 this
            // measured 1.4x faster than `vgatherdps` (see the module doc).
            let b = base.add(p * GROUP);
            let ld = |u: usize| *row.add(*b.add(u) as usize);
            let v0 = _mm256_setr_ps(ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7));
            let v1 = _mm256_setr_ps(ld(8), ld(9), ld(10), ld(11), ld(12), ld(13), ld(14), ld(15));
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

/// Order-preserving integer keys of 8 floats ([`super::ordered_key`]):
/// sign-magnitude to two's complement (`-0` and `+0` both 0), NaN to
/// `i32::MIN`.
#[target_feature(enable = "avx2")]
#[inline]
fn keys8(v: __m256) -> __m256i {
    let bits = _mm256_castps_si256(v);
    let abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFF_FFFF));
    let sign = _mm256_srai_epi32::<31>(bits);
    let k = _mm256_sub_epi32(_mm256_xor_si256(abs, sign), sign);
    let nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F80_0000));
    _mm256_blendv_epi8(k, _mm256_set1_epi32(i32::MIN), nan)
}

/// Transposes the keys of `rr` (1..=8) rows into lanes `off .. off + 8` of
/// `block[c*W + lane]` for every coordinate c; lanes of rows `>= rr` get
/// `i32::MIN`.
#[target_feature(enable = "avx2")]
#[allow(non_snake_case)]
unsafe fn transpose_keys(
    x: *const f32,
    stride: usize,
    rr: usize,
    dim: usize,
    block: *mut i32,
    W: usize,
    off: usize,
) {
    let fill = _mm256_set1_epi32(i32::MIN);
    let full = dim / 8 * 8;
    // SAFETY (whole body): rows 0..rr of x hold dim readable floats each;
    // block holds dim*W i32 and off + 8 <= W (caller).
    unsafe {
        let mut c0 = 0;
        while c0 < full {
            let mut r = [fill; 8];
            for (u, rv) in r.iter_mut().enumerate().take(rr) {
                *rv = keys8(_mm256_loadu_ps(x.add(u * stride + c0)));
            }
            let r: [__m256; 8] = r.map(|v| _mm256_castsi256_ps(v));
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let o = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (u, ov) in o.iter().enumerate() {
                _mm256_storeu_ps(block.add((c0 + u) * W + off).cast(), *ov);
            }
            c0 += 8;
        }
        for c in full..dim {
            for r in 0..8 {
                *block.add(c * W + off + r) = if r < rr {
                    super::ordered_key(*x.add(r * stride + c))
                } else {
                    i32::MIN
                };
            }
        }
    }
}

/// Rows in lanes: `W` (8 or 16) rows at a time are transposed into a
/// `dim x W` block of integer keys; each bin then needs one scalar map load
/// and `W/8` contiguous `vmovdqu` per position, `vpcmpgtd` (strictly
/// greater: ties keep the earlier position; NaN = `i32::MIN` never beats the
/// initial `i32::MIN`), `vpmaxsd` for the running max and `vpblendvb` for
/// its position. Keys are packed in registers (`vpslld` + `vpor`) and stored
/// per table.
#[target_feature(enable = "avx2")]
unsafe fn dense_rows_avx2<const V: usize>(
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
    let ptab = &POSITIONS;
    #[allow(non_snake_case)]
    let W = 8 * V;
    BLOCK.with(|bl| {
        let mut block = bl.borrow_mut();
        if block.len() < dim * W {
            block.resize(dim * W, 0);
        }
        let bp = block.as_mut_ptr();
        let mut tmp = [0u32; 32];
        let mut i0 = 0;
        while i0 < n {
            let rr = (n - i0).min(W);
            // SAFETY: rows i0..i0+rr exist (checked lengths); block holds
            // dim*W keys; every map entry is < dim; codes holds n*L values.
            unsafe {
                let xr = x.as_ptr().add(i0 * stride);
                for v in 0..V {
                    let rv = rr.saturating_sub(v * 8).min(8);
                    transpose_keys(xr.add(v * 8 * stride), stride, rv, dim, bp, W, v * 8);
                }
                for t in 0..l {
                    let mut code = [_mm256_setzero_si256(); V];
                    for kk in 0..k {
                        let bin = map.as_ptr().add((t * k + kk) * bs);
                        let mut mx = [_mm256_set1_epi32(i32::MIN); V];
                        let mut pos = [_mm256_setzero_si256(); V];
                        for p in 0..bs {
                            let c = *bin.add(p) as usize;
                            let pv = _mm256_load_si256(ptab.0.as_ptr().add(p).cast());
                            for v in 0..V {
                                let val = _mm256_loadu_si256(bp.add(c * W + v * 8).cast());
                                let gt = _mm256_cmpgt_epi32(val, mx[v]);
                                mx[v] = _mm256_max_epi32(mx[v], val);
                                pos[v] = _mm256_blendv_epi8(pos[v], pv, gt);
                            }
                        }
                        let sh = _mm_cvtsi32_si128((kk as u32 * lb) as i32);
                        for v in 0..V {
                            code[v] = _mm256_or_si256(code[v], _mm256_sll_epi32(pos[v], sh));
                        }
                    }
                    for (v, cv) in code.iter().enumerate() {
                        _mm256_storeu_si256(tmp.as_mut_ptr().add(v * 8).cast(), *cv);
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

#[target_feature(enable = "avx2")]
unsafe fn dense_bins_avx2(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
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
unsafe fn fold_avx2(h: &DwtaView<'_>, idx: &[u32], val: &[f32], st: &mut BinState) {
    let filter = h.filter().as_ptr().cast::<i32>();
    let shift = _mm_cvtsi32_si128(h.filter_shift() as i32);
    let chunks = idx.len() / 8;
    for c in 0..chunks {
        // SAFETY: c*8 + 8 <= len for idx and val; a filter bit is below
        // 2^(32 - shift) = 32 * filter.len(), so its word is in bounds.
        let mut m = unsafe {
            let iv = _mm256_loadu_si256(idx.as_ptr().add(c * 8).cast());
            let hb = _mm256_srl_epi32(
                _mm256_mullo_epi32(iv, _mm256_set1_epi32(FILTER_MUL as i32)),
                shift,
            );
            let w = _mm256_i32gather_epi32::<4>(filter, _mm256_srli_epi32::<5>(hb));
            let bit = _mm256_srlv_epi32(w, _mm256_and_si256(hb, _mm256_set1_epi32(31)));
            let hit = _mm256_castsi256_ps(_mm256_slli_epi32::<31>(bit));
            let v = _mm256_loadu_ps(val.as_ptr().add(c * 8));
            let ord = _mm256_cmp_ps::<_CMP_ORD_Q>(v, v);
            _mm256_movemask_ps(_mm256_and_ps(hit, ord)) as u32
        };
        while m != 0 {
            let u = c * 8 + m.trailing_zeros() as usize;
            m &= m - 1;
            fold_entry(h, idx[u], val[u], st);
        }
    }
    fold_entries(h, &idx[chunks * 8..], &val[chunks * 8..], st);
}
