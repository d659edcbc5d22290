//! SimHash, AVX2 tier (avx2 + fma).
//!
//! Dense planes: a register-blocked micro-kernel over the same packed
//! 16-plane panels as AVX-512, each panel row being two ymm: 4 rows x 1
//! panel (8 ymm accumulators; 16 registers in all) with `vbroadcastss` of
//! each row's value feeding `vfmadd231ps`. Signs come from `vcmpps`
//! (`_CMP_GT_OQ`: NaN gives 0) and `vmovmskps`, 8 bits per ymm, so the
//! projections never leave the registers unless `project` asks for them.
//! One row alone uses 1 x 4 panels (eight independent FMA chains).
//!
//! Sparse ±1 planes: 32 rows at a time are transposed into a `dim x 32`
//! scratch block (16 KiB for d = 128: L1-resident); each plane adds the
//! block rows of its positive coordinates and subtracts those of its negative
//! ones (four ymm per index, so one index load feeds four vector loads; two
//! partial sums per quarter). The 32-bit sign masks of 64 planes are then
//! transposed into the rows' bit strings with `vpslld` + `vmovmskps`.
//!
//! This file holds the vectors and the mask transpose (`drive::Lanes`);
//! the tile, the row/panel and sparse block drivers and the entry points
//! are `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, Lanes};
use super::{Planes, SparseView};

/// This tier's vectors for [`super::drive`]: a panel row is two ymm.
struct Avx2;

impl Lanes for Avx2 {
    type V = __m256;
    type P = [__m256; 2];
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn zero_panel() -> [__m256; 2] {
        // SAFETY: register-only; the caller enables avx.
        unsafe { [_mm256_setzero_ps(); 2] }
    }
    #[inline(always)]
    unsafe fn load_panel(p: *const f32) -> [__m256; 2] {
        // SAFETY: 16 floats at p, 64-byte aligned (caller); avx enabled.
        unsafe { [_mm256_load_ps(p), _mm256_load_ps(p.add(8))] }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> __m256 {
        // SAFETY: register-only; the caller enables avx.
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn fmadd_panel(x: __m256, w: [__m256; 2], acc: [__m256; 2]) -> [__m256; 2] {
        // SAFETY: register-only; the caller enables fma.
        unsafe {
            [
                _mm256_fmadd_ps(x, w[0], acc[0]),
                _mm256_fmadd_ps(x, w[1], acc[1]),
            ]
        }
    }
    #[inline(always)]
    unsafe fn panel_signs(a: [__m256; 2]) -> u32 {
        // SAFETY: register-only; the caller enables avx.
        unsafe {
            let z = _mm256_setzero_ps();
            (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(a[0], z)) as u32)
                | ((_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(a[1], z)) as u32) << 8)
        }
    }
    #[inline(always)]
    unsafe fn store_panel(a: [__m256; 2], dst: *mut f32, lanes: usize) {
        let mut tmp = [0.0f32; 16];
        // SAFETY: tmp holds 16 floats, dst `lanes` <= 16 (caller); avx
        // enabled.
        unsafe {
            _mm256_storeu_ps(tmp.as_mut_ptr(), a[0]);
            _mm256_storeu_ps(tmp.as_mut_ptr().add(8), a[1]);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, lanes);
        }
    }
    #[inline(always)]
    unsafe fn signed_sum<const Q: usize>(
        block: *const f32,
        plus: &[u32],
        minus: &[u32],
    ) -> [__m256; Q] {
        // SAFETY: the caller's block bounds; avx enabled.
        unsafe { signed_sum::<Q>(block, plus, minus) }
    }
    #[inline(always)]
    unsafe fn storeu(v: __m256, dst: *mut f32) {
        // SAFETY: 8 writable floats at dst (caller); avx enabled.
        unsafe { _mm256_storeu_ps(dst, v) }
    }
    #[inline(always)]
    unsafe fn signs(v: __m256) -> u32 {
        // SAFETY: register-only; the caller enables avx.
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(v, _mm256_setzero_ps())) as u32 }
    }
    /// Collects the masks of 64 planes, then transposes them into one word
    /// per row ([`transpose_masks`]).
    #[inline(always)]
    unsafe fn put_plane(
        masks: &mut [u32; 64],
        mask: u32,
        p: usize,
        np: usize,
        rr: usize,
        bits: *mut u64,
        words: usize,
    ) {
        masks[p % 64] = mask;
        if p % 64 == 63 || p + 1 == np {
            let w = p / 64;
            // SAFETY: bits holds rr rows of `words` (caller); avx2 enabled.
            unsafe { transpose_masks(masks, p % 64 + 1, rr, bits.add(w), words) };
        }
    }
}

entries! {
    /// Dense planes: 4 rows x 1 panel per tile, 1 x 4 for a single row.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dense = dense(Avx2, 4, 4, 1);
    /// Sparse planes: blocks of 32 rows (four ymm per index); a remainder
    /// of at most 8 rows uses one-ymm blocks so a single row does not pay
    /// for 32.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn sparse = sparse_split(Avx2, 4);
}

/// Transposes the sign masks of `count` (<= 64) planes (bit r of
/// `masks[q]` = row r's bit for plane q) into one u64 word per row:
/// `dst[r * words] = Σ_q bit_r(masks[q]) << q`, for rows 0..rr. Per row,
/// each 8-plane group is shifted so bit r becomes the lane's sign bit and
/// read with `vmovmskps`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn transpose_masks(masks: &[u32; 64], count: usize, rr: usize, dst: *mut u64, words: usize) {
    let mut v = [_mm256_setzero_si256(); 8];
    for (g, vg) in v.iter_mut().enumerate() {
        // SAFETY: masks holds 64 u32 = 8 groups of 8.
        *vg = unsafe { _mm256_loadu_si256(masks.as_ptr().add(8 * g).cast()) };
    }
    let live = if count == 64 {
        u64::MAX
    } else {
        (1u64 << count) - 1
    };
    for r in 0..rr {
        let sh = _mm_cvtsi32_si128(31 - r as i32);
        let mut word = 0u64;
        for (g, vg) in v.iter().enumerate() {
            let m =
                _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_sll_epi32(*vg, sh))) as u32 as u64;
            word |= m << (8 * g);
        }
        // SAFETY: row r < rr rows of `words` from dst (caller).
        unsafe { *dst.add(r * words) = word & live };
    }
}

/// `Σ block[plus] - Σ block[minus]`, each block row `8*Q` floats (Q ymm),
/// two partial sums per ymm to hide the add latency.
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::needless_range_loop)] // a[q], b[q], rows q: parallel arrays
unsafe fn signed_sum<const Q: usize>(
    block: *const f32,
    plus: &[u32],
    minus: &[u32],
) -> [__m256; Q] {
    let w = 8 * Q;
    let mut a = [_mm256_setzero_ps(); 4];
    let mut b = [_mm256_setzero_ps(); 4];
    // SAFETY: each index j < dim, so block[j*w .. j*w + w] is in bounds
    // (caller's invariant).
    unsafe {
        for (list, sign) in [(plus, 1.0f32), (minus, -1.0f32)] {
            let mut pairs = list.chunks_exact(2);
            for c in &mut pairs {
                let (r0, r1) = (block.add(c[0] as usize * w), block.add(c[1] as usize * w));
                for q in 0..Q {
                    if sign > 0.0 {
                        a[q] = _mm256_add_ps(a[q], _mm256_loadu_ps(r0.add(8 * q)));
                        b[q] = _mm256_add_ps(b[q], _mm256_loadu_ps(r1.add(8 * q)));
                    } else {
                        a[q] = _mm256_sub_ps(a[q], _mm256_loadu_ps(r0.add(8 * q)));
                        b[q] = _mm256_sub_ps(b[q], _mm256_loadu_ps(r1.add(8 * q)));
                    }
                }
            }
            if let [j] = pairs.remainder() {
                let r0 = block.add(*j as usize * w);
                for q in 0..Q {
                    let v = _mm256_loadu_ps(r0.add(8 * q));
                    a[q] = if sign > 0.0 {
                        _mm256_add_ps(a[q], v)
                    } else {
                        _mm256_sub_ps(a[q], v)
                    };
                }
            }
        }
    }
    let mut r = [_mm256_setzero_ps(); Q];
    for ((rq, aq), bq) in r.iter_mut().zip(a).zip(b) {
        *rq = _mm256_add_ps(aq, bq);
    }
    r
}
