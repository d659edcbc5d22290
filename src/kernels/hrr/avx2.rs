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

use std::arch::x86_64::*;

use super::{binary_tail, cdiv1, cmul1, cmulc1, project_tail};

const W: usize = 8;

/// The complex product of four values: `(ar br - ai bi, ar bi + ai br)`.
#[inline(always)]
unsafe fn prod(a: __m256, b: __m256) -> __m256 {
    // SAFETY: register-only avx operations (enabled by the caller).
    unsafe {
        let t1 = _mm256_mul_ps(_mm256_moveldup_ps(a), b);
        let t2 = _mm256_mul_ps(_mm256_movehdup_ps(a), _mm256_permute_ps::<0xB1>(b));
        _mm256_addsub_ps(t1, t2)
    }
}

/// `conj(a) b`: `(ar br + ai bi, ar bi - ai br)`.
#[inline(always)]
unsafe fn prod_conj(a: __m256, b: __m256) -> __m256 {
    // SAFETY: register-only avx operations (enabled by the caller).
    unsafe {
        let t1 = _mm256_mul_ps(_mm256_moveldup_ps(a), b);
        let t2 = _mm256_mul_ps(_mm256_movehdup_ps(a), _mm256_permute_ps::<0xB1>(b));
        _mm256_addsub_ps(t1, _mm256_xor_ps(t2, _mm256_set1_ps(-0.0)))
    }
}

/// `ar ar + ai ai` in both lanes of each pair.
#[inline(always)]
unsafe fn norm2(a: __m256) -> __m256 {
    // SAFETY: register-only avx operations (enabled by the caller).
    unsafe {
        let re = _mm256_moveldup_ps(a);
        let im = _mm256_movehdup_ps(a);
        _mm256_add_ps(_mm256_mul_ps(re, re), _mm256_mul_ps(im, im))
    }
}

/// The body shared by the three binary kernels: `op(a, b)` per step of
/// four complex values, then `* s`; the tail by `tail`.
#[inline(always)]
unsafe fn binary(
    a: &[f32],
    b: &[f32],
    s: f32,
    out: &mut [f32],
    op: impl Fn(__m256, __m256) -> __m256,
    tail: impl Fn(f32, f32, f32, f32, f32) -> (f32, f32),
) {
    let n = out.len() / W * W;
    debug_assert!(a.len() == out.len() && b.len() == out.len());
    // SAFETY: a, b and out hold out.len() >= n floats (the kernel's
    // precondition), so every 8-float access at k < n is in bounds; avx is
    // enabled by the calling kernel.
    unsafe {
        let sv = _mm256_set1_ps(s);
        let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let mut k = 0;
        while k < n {
            let r = op(_mm256_loadu_ps(pa.add(k)), _mm256_loadu_ps(pb.add(k)));
            _mm256_storeu_ps(po.add(k), _mm256_mul_ps(r, sv));
            k += W;
        }
    }
    binary_tail(a, b, s, out, n, tail);
}

/// See [`super::BinaryFn`] and [`super::cmul1`].
///
/// # Safety
/// [`super::BinaryFn`]: equal even lengths; the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn cmul_f32_avx2(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: lengths per the contract; prod is register-only avx.
    unsafe { binary(a, b, s, out, |x, y| prod(x, y), cmul1) }
}

/// See [`super::BinaryFn`] and [`super::cmulc1`].
///
/// # Safety
/// As [`cmul_f32_avx2`].
#[target_feature(enable = "avx2,fma")]
pub unsafe fn cmulc_f32_avx2(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: as cmul_f32_avx2.
    unsafe { binary(a, b, s, out, |x, y| prod_conj(x, y), cmulc1) }
}

/// See [`super::BinaryFn`] and [`super::cdiv1`].
///
/// # Safety
/// As [`cmul_f32_avx2`].
#[target_feature(enable = "avx2,fma")]
pub unsafe fn cdiv_f32_avx2(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: as cmul_f32_avx2 (vdivps is register-only).
    unsafe {
        binary(
            a,
            b,
            s,
            out,
            |x, y| _mm256_div_ps(prod_conj(x, y), norm2(x)),
            cdiv1,
        )
    }
}

/// See [`super::ProjectFn`] and [`super::proj1`].
///
/// # Safety
/// `a.len() == out.len()`, even; the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn project_f32_avx2(a: &[f32], eps: f32, s: f32, out: &mut [f32]) {
    let n = out.len() / W * W;
    debug_assert!(a.len() == out.len());
    // SAFETY: a and out hold out.len() >= n floats, so every 8-float access
    // at k < n is in bounds; avx is enabled.
    unsafe {
        let sv = _mm256_set1_ps(s);
        let ev = _mm256_set1_ps(eps);
        let (pa, po) = (a.as_ptr(), out.as_mut_ptr());
        let mut k = 0;
        while k < n {
            let x = _mm256_loadu_ps(pa.add(k));
            let m = _mm256_add_ps(_mm256_sqrt_ps(norm2(x)), ev);
            _mm256_storeu_ps(po.add(k), _mm256_mul_ps(_mm256_div_ps(x, m), sv));
            k += W;
        }
    }
    project_tail(a, eps, s, out, n);
}

// The names of the tier table (`tier_table!` in `../mod.rs`).
pub use self::{
    cdiv_f32_avx2 as cdiv, cmul_f32_avx2 as cmul, cmulc_f32_avx2 as cmulc,
    project_f32_avx2 as project,
};
