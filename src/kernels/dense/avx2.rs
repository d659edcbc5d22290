//! Dense layer tile, AVX2 tier (avx2 + fma).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 256-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 16 ahead during the first pass over a tile
//!   (measured ~20 % faster at B = 1 on Zen 3; the stream is memory bound).
//! * `vhaddps` + `vextractf128`: the four rows of a block are reduced
//!   together at the end of a dot product (three `vhaddps` and one add give
//!   four logits); the `dim % 8` tail is added in scalar (a fused
//!   multiply-add per element, `f32::mul_add` compiles to `vfmadd` here).

use std::arch::x86_64::*;

/// Rows ahead of the current 4-row block that the first pass prefetches.
const PREFETCH_ROWS: usize = 16;

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only AVX operations; the caller enables avx.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_hadd_ps(s, s);
        let s = _mm_hadd_ps(s, s);
        _mm_cvtss_f32(s)
    }
}

/// Prefetches the four rows of `stride` floats (`dim` used) that start at
/// `base` (also used by the AVX-512 tier). The address may lie beyond the
/// matrix: a prefetch never faults, and `wrapping_add` never creates UB.
///
/// # Safety
/// None beyond SSE, which every x86-64 CPU has: the instruction is a hint
/// and never faults (it is `unsafe` only because of its target feature).
#[inline(always)]
pub(super) unsafe fn prefetch_block(base: *const f32, stride: usize, dim: usize) {
    let (base, row_bytes) = (base.cast::<i8>(), dim * 4);
    let mut off = 0;
    while off < 4 * row_bytes {
        // `off / row_bytes` is the row within the block, skipping stride
        // padding.
        let p = base.wrapping_add(off + (off / row_bytes) * (stride - dim) * 4);
        // SAFETY: a prefetch hint on an x86-64 CPU (SSE); it never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        off += 64;
    }
}

/// `[sum(a), sum(b), sum(c), sum(d)]` (also the AVX-512 tier's last step).
#[inline(always)]
pub(super) unsafe fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256) -> __m128 {
    // SAFETY: register-only AVX operations; the caller enables avx.
    unsafe {
        let abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
        _mm_add_ps(
            _mm256_castps256_ps128(abcd),
            _mm256_extractf128_ps::<1>(abcd),
        )
    }
}

/// This tier's vectors for the shared block and driver ([`super::drive`]).
struct Avx2;

impl super::Vf32 for Avx2 {
    type V = __m256;
    const LANES: usize = 8;
    const PREFETCH_ROWS: usize = PREFETCH_ROWS;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: register-only; the caller enables avx.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> __m256 {
        // SAFETY: eight readable floats at p (caller); avx enabled.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: register-only; the caller enables fma.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        // SAFETY: register-only; the caller enables avx.
        unsafe { hsum(v) }
    }
    #[inline(always)]
    unsafe fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256, s: &mut [f32; 4]) {
        // SAFETY: register-only, then four floats stored into `s`; avx
        // enabled by the caller.
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), hsum4(a, b, c, d)) }
    }
}

/// See [`super::TileFn`].
///
/// # Safety
/// The preconditions of [`super::TileFn`]; the CPU supports avx2 and fma.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn tile_f32(
    w: &[f32],
    stride: usize,
    nrows: usize,
    dim: usize,
    q: &[f32],
    q_stride: usize,
    nq: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    // SAFETY: forwarded contract of TileFn; this function enables the
    // features of Avx2's block.
    unsafe { super::drive::<Avx2>(w, stride, nrows, dim, q, q_stride, nq, out, out_stride) }
}
