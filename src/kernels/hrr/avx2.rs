//! HRR frequency-domain kernels, AVX2 tier (256-bit, four complex values
//! per step; FMA is deliberately not used, see `super`).
//!
//! Instructions and why:
//! * `vmovsldup` / `vmovshdup`: the real parts / imaginary parts of four
//!   interleaved complex values, each duplicated into its pair of lanes.
//! * `vpermilps` (`0xB1`): the second operand with re and im swapped in
//!   each pair, so one multiply gives `(ai bi, ai br)`.
//! * `vaddsubps`: subtracts in even lanes and adds in odd lanes, which is
//!   exactly the complex product's `(ar br - ai bi, ar bi + ai br)` in one
//!   instruction; for `conj(a) b` the second product is negated first
//!   (`vxorps` with the sign bit, exact), so `x - (-y)` rounds as `x + y`.
//! * `vdivps`, `vsqrtps`: correctly rounded, as the scalar `/` and `sqrt`.
//! * The tail (fewer than four complex values) runs the per-element
//!   functions of `super`, so every output has the scalar tier's bits.
//!
//! The loops are `super::binary_simd` and `super::project_simd`, shared
//! with the AVX-512 tier; this file holds the complex products.

use std::arch::x86_64::*;

use super::{CDIV, CMUL, CMULC};
use crate::kernels::simd::Avx2;

impl super::Tile for Avx2 {
    const MASKED_TAIL: bool = false;
    #[inline(always)]
    unsafe fn prod(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only avx operations (enabled by the caller).
        unsafe {
            let t1 = _mm256_mul_ps(_mm256_moveldup_ps(a), b);
            let t2 = _mm256_mul_ps(_mm256_movehdup_ps(a), _mm256_permute_ps::<0xB1>(b));
            _mm256_addsub_ps(t1, t2)
        }
    }
    #[inline(always)]
    unsafe fn prod_conj(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only avx operations (enabled by the caller).
        unsafe {
            let t1 = _mm256_mul_ps(_mm256_moveldup_ps(a), b);
            let t2 = _mm256_mul_ps(_mm256_movehdup_ps(a), _mm256_permute_ps::<0xB1>(b));
            _mm256_addsub_ps(t1, _mm256_xor_ps(t2, _mm256_set1_ps(-0.0)))
        }
    }
    #[inline(always)]
    unsafe fn norm2(a: __m256) -> __m256 {
        // SAFETY: register-only avx operations (enabled by the caller).
        unsafe {
            let re = _mm256_moveldup_ps(a);
            let im = _mm256_movehdup_ps(a);
            _mm256_add_ps(_mm256_mul_ps(re, re), _mm256_mul_ps(im, im))
        }
    }
}

super::simd_entries!("avx2,fma", Avx2);
