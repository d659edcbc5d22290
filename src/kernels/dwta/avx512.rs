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
//!
//! This file holds the vectors, the key scatter and the 16-bin group
//! (`drive::Lanes`); the row-block choice, the bin and row loops,
//! the sparse chunk loop and the entry points are `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, Lanes};
use super::{DwtaView, FILTER_MUL, GROUP};

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

/// This tier's vectors for [`super::drive`]: sixteen rows, bins or
/// entries per zmm.
struct Avx512;

impl Lanes for Avx512 {
    type K = __m512i;
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512i {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_setzero_si512() }
    }
    #[inline(always)]
    unsafe fn min() -> __m512i {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_set1_epi32(i32::MIN) }
    }
    #[inline(always)]
    unsafe fn position(p: usize) -> __m512i {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_set1_epi32(p as i32) }
    }
    #[inline(always)]
    unsafe fn load(p: *const i32) -> __m512i {
        // SAFETY: 16 readable i32 at p (caller); avx512f enabled.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u32, v: __m512i) {
        // SAFETY: 16 writable u32 at p (caller); avx512f enabled.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }
    /// `vpcmpgtd` into a mask, `vpmaxsd`, a masked `vmovdqa32`.
    #[inline(always)]
    unsafe fn update(val: __m512i, mx: &mut __m512i, pos: &mut __m512i, pv: __m512i) {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe {
            let gt = _mm512_cmpgt_epi32_mask(val, *mx);
            *mx = _mm512_max_epi32(*mx, val);
            *pos = _mm512_mask_mov_epi32(*pos, gt, pv);
        }
    }
    #[inline(always)]
    unsafe fn shl_or(code: __m512i, pos: __m512i, sh: __m128i) -> __m512i {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_or_si512(code, _mm512_sll_epi32(pos, sh)) }
    }
    /// One `vpscatterdd` of 16 coordinates' keys per row.
    #[inline(always)]
    unsafe fn fill_block(
        x: *const f32,
        stride: usize,
        rr: usize,
        dim: usize,
        block: *mut i32,
        w: usize,
    ) {
        let full = dim / 16 * 16;
        // SAFETY: rows 0..rr of x hold dim floats, block dim*w keys
        // (caller): scatter offsets are < 16*w from block + c0*w with
        // c0 + 16 <= dim. Features enabled.
        unsafe {
            let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let lanes = _mm512_mullo_epi32(iota, _mm512_set1_epi32(w as i32));
            for r in 0..rr {
                let xr = x.add(r * stride);
                let off = _mm512_add_epi32(lanes, _mm512_set1_epi32(r as i32));
                let mut c0 = 0;
                while c0 < full {
                    let kv = keys16(_mm512_loadu_ps(xr.add(c0)));
                    _mm512_i32scatter_epi32::<4>(block.add(c0 * w), off, kv);
                    c0 += 16;
                }
                for c in full..dim {
                    *block.add(c * w + r) = super::ordered_key(*xr.add(c));
                }
            }
        }
    }
    /// `vgatherdps` of the row's values at the group's p-th coordinates;
    /// masked `vcmpps` and moves carry the running max and its position.
    #[inline(always)]
    unsafe fn group(row: *const f32, base: *const i32, bs: usize, out: *mut u32) {
        // SAFETY: base holds bs*16 coordinates < dim, row dim floats, out
        // 16 u32 (caller); features enabled.
        unsafe {
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
            _mm512_storeu_si512(out.cast(), pos);
        }
    }
    /// `vpmulld` + `vpsrld`, `vpgatherdd`, `vpsrlvd` and `vptestmd` under
    /// the non-NaN mask of the values.
    #[inline(always)]
    unsafe fn hits(idx: *const u32, val: *const f32, filter: *const i32, shift: __m128i) -> u32 {
        // SAFETY: 16 entries at idx and val, filter words in bounds
        // (caller); features enabled.
        unsafe {
            let iv = _mm512_loadu_si512(idx.cast());
            let hb = _mm512_srl_epi32(
                _mm512_mullo_epi32(iv, _mm512_set1_epi32(FILTER_MUL as i32)),
                shift,
            );
            let w = _mm512_i32gather_epi32::<4>(_mm512_srli_epi32::<5>(hb), filter);
            let bit = _mm512_srlv_epi32(w, _mm512_and_si512(hb, _mm512_set1_epi32(31)));
            let v = _mm512_loadu_ps(val);
            let ord = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
            _mm512_mask_test_epi32_mask(ord, bit, _mm512_set1_epi32(1)) as u32
        }
    }
}

entries! {
    /// Rows in lanes, `V` zmm (16 * V rows) per bin position.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn rows = rows(Avx512);
    /// Bins in lanes (one row, or huge `dim`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn bins = bins(Avx512);
    /// The sparse filter, sixteen entries at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn fold = fold(Avx512);
}
