//! HRR frequency-domain kernels, AVX-512 tier (avx512f + bw + dq + vl;
//! eight complex values per zmm step, FMA deliberately not used, see
//! `super`).
//!
//! Instructions and why:
//! * `vmovsldup` / `vmovshdup` / `vpermilps 0xB1` on zmm: duplicated real
//!   parts, duplicated imaginary parts, pair-swapped second operand, as in
//!   the AVX2 tier.
//! * AVX-512 has no `vaddsubps`: the sum `t1 + t2` and a masked
//!   `vsubps` (mask `0x5555`, the even lanes) give the complex product's
//!   `(ar br - ai bi, ar bi + ai br)` with the same roundings; for
//!   `conj(a) b` the odd lanes subtract instead (mask `0xAAAA`).
//! * The tail (fewer than eight complex values) is one masked step:
//!   `vmovups` with a zeroing load mask and a store mask, so there is no
//!   scalar loop (the masked-off lanes compute on zeros and are never
//!   stored; FP exceptions are masked).
//! * `vdivps`, `vsqrtps`: correctly rounded, as the scalar `/` and `sqrt`.
//!
//! The loops are `super::binary_simd` and `super::project_simd`, shared
//! with the AVX2 tier; this file holds the complex products.

use std::arch::x86_64::*;

use super::{CDIV, CMUL, CMULC};
use crate::kernels::simd::Avx512;

impl super::Tile for Avx512 {
    const MASKED_TAIL: bool = true;
    #[inline(always)]
    unsafe fn prod(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only avx512f operations (enabled by the caller).
        unsafe {
            let t1 = _mm512_mul_ps(_mm512_moveldup_ps(a), b);
            let t2 = _mm512_mul_ps(_mm512_movehdup_ps(a), _mm512_permute_ps::<0xB1>(b));
            _mm512_mask_sub_ps(_mm512_add_ps(t1, t2), 0x5555, t1, t2)
        }
    }
    #[inline(always)]
    unsafe fn prod_conj(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only avx512f operations (enabled by the caller).
        unsafe {
            let t1 = _mm512_mul_ps(_mm512_moveldup_ps(a), b);
            let t2 = _mm512_mul_ps(_mm512_movehdup_ps(a), _mm512_permute_ps::<0xB1>(b));
            _mm512_mask_sub_ps(_mm512_add_ps(t1, t2), 0xAAAA, t1, t2)
        }
    }
    #[inline(always)]
    unsafe fn norm2(a: __m512) -> __m512 {
        // SAFETY: register-only avx512f operations (enabled by the caller).
        unsafe {
            let re = _mm512_moveldup_ps(a);
            let im = _mm512_movehdup_ps(a);
            _mm512_add_ps(_mm512_mul_ps(re, re), _mm512_mul_ps(im, im))
        }
    }
}

super::simd_entries!("avx512f,avx512bw,avx512dq,avx512vl", Avx512);
