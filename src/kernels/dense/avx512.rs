//! Dense layer tile, AVX-512 tier (avx512f/dq).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 512-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 32 ahead during the first pass over a tile
//!   (the B = 1 stream is memory bound). Measured on Zen 4, B = 1: no
//!   prefetch 18.6-18.9 M logits/s from DRAM, 16 rows ahead 29.3-30.5,
//!   32 ahead 31.0-32.9, 64 ahead 30.8-31.2.
//! * The four rows of a block are reduced together: each 512-bit
//!   accumulator is folded to 256 bits (`vextractf32x8` + `vaddps`), then
//!   three `vhaddps` and one add give the four logits. A separate
//!   `_mm512_reduce_add_ps` per output (the first version) cost about as
//!   many instructions as the FMAs at d = 128 and left this tier slower
//!   than AVX2 at B = 1 on Zen 4. The `dim % 16` tail is added in scalar
//!   (a fused multiply-add per element, `f32::mul_add` compiles to `vfmadd`
//!   here).

use std::arch::x86_64::*;

/// Rows ahead of the current 4-row block that the first pass prefetches.
const PREFETCH_ROWS: usize = 32;

/// `v[0..8] + v[8..16]`.
#[inline(always)]
unsafe fn fold256(v: __m512) -> __m256 {
    // SAFETY: register-only AVX-512 operations; the caller enables
    // avx512f and avx512dq.
    unsafe { _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps::<1>(v)) }
}

/// `[sum(a), sum(b), sum(c), sum(d)]`: each folded to 256 bits, then the
/// AVX2 tier's four-way reduction.
#[inline(always)]
unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    // SAFETY: register-only AVX/AVX-512 operations; the caller enables
    // avx512f/dq and avx2 (a superset of what the AVX2 helper needs).
    unsafe { super::avx2::hsum4(fold256(a), fold256(b), fold256(c), fold256(d)) }
}

#[inline(always)]
unsafe fn hsum(v: __m512) -> f32 {
    // SAFETY: register-only AVX-512 operation; the caller enables avx512f.
    unsafe { _mm512_reduce_add_ps(v) }
}

/// This tier's vectors for the shared block and driver ([`super::drive`]).
struct Avx512;

impl super::Vf32 for Avx512 {
    type V = __m512;
    const LANES: usize = 16;
    const PREFETCH_ROWS: usize = PREFETCH_ROWS;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> __m512 {
        // SAFETY: sixteen readable floats at p (caller); avx512f enabled.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn hsum(v: __m512) -> f32 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { hsum(v) }
    }
    #[inline(always)]
    unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512, s: &mut [f32; 4]) {
        // SAFETY: register-only, then four floats stored into `s`; the
        // caller enables avx512f/dq and avx2.
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), hsum4(a, b, c, d)) }
    }
}

/// See [`super::TileFn`].
///
/// # Safety
/// The preconditions of [`super::TileFn`]; the CPU supports avx512f/bw/dq/vl.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
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
    // features of Avx512's block.
    unsafe { super::drive::<Avx512>(w, stride, nrows, dim, q, q_stride, nq, out, out_stride) }
}
