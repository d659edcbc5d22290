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

use std::arch::x86_64::*;

const W: usize = 16;

/// The complex product of eight values.
#[inline(always)]
unsafe fn prod(a: __m512, b: __m512) -> __m512 {
    // SAFETY: register-only avx512f operations (enabled by the caller).
    unsafe {
        let t1 = _mm512_mul_ps(_mm512_moveldup_ps(a), b);
        let t2 = _mm512_mul_ps(_mm512_movehdup_ps(a), _mm512_permute_ps::<0xB1>(b));
        _mm512_mask_sub_ps(_mm512_add_ps(t1, t2), 0x5555, t1, t2)
    }
}

/// `conj(a) b`.
#[inline(always)]
unsafe fn prod_conj(a: __m512, b: __m512) -> __m512 {
    // SAFETY: register-only avx512f operations (enabled by the caller).
    unsafe {
        let t1 = _mm512_mul_ps(_mm512_moveldup_ps(a), b);
        let t2 = _mm512_mul_ps(_mm512_movehdup_ps(a), _mm512_permute_ps::<0xB1>(b));
        _mm512_mask_sub_ps(_mm512_add_ps(t1, t2), 0xAAAA, t1, t2)
    }
}

/// `ar ar + ai ai` in both lanes of each pair.
#[inline(always)]
unsafe fn norm2(a: __m512) -> __m512 {
    // SAFETY: register-only avx512f operations (enabled by the caller).
    unsafe {
        let re = _mm512_moveldup_ps(a);
        let im = _mm512_movehdup_ps(a);
        _mm512_add_ps(_mm512_mul_ps(re, re), _mm512_mul_ps(im, im))
    }
}

/// Mask of the first `n` (< 16) lanes.
#[inline(always)]
fn tail_mask(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// The body of the three binary kernels: `op(a, b) * s` per step of eight
/// complex values, the tail as one masked step.
#[inline(always)]
unsafe fn binary(
    a: &[f32],
    b: &[f32],
    s: f32,
    out: &mut [f32],
    op: impl Fn(__m512, __m512) -> __m512,
) {
    let len = out.len();
    let n = len / W * W;
    debug_assert!(a.len() == len && b.len() == len);
    // SAFETY: a, b and out hold len floats (the kernel's precondition):
    // full 16-float accesses stay below n <= len, and the tail's masked
    // loads/stores touch only lanes below len (masked-off lanes are not
    // accessed); avx512f is enabled by the calling kernel.
    unsafe {
        let sv = _mm512_set1_ps(s);
        let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let mut k = 0;
        while k < n {
            let r = op(_mm512_loadu_ps(pa.add(k)), _mm512_loadu_ps(pb.add(k)));
            _mm512_storeu_ps(po.add(k), _mm512_mul_ps(r, sv));
            k += W;
        }
        if n < len {
            let m = tail_mask(len - n);
            let x = _mm512_maskz_loadu_ps(m, pa.add(n));
            let y = _mm512_maskz_loadu_ps(m, pb.add(n));
            _mm512_mask_storeu_ps(po.add(n), m, _mm512_mul_ps(op(x, y), sv));
        }
    }
}

/// See [`super::BinaryFn`] and [`super::cmul1`].
///
/// # Safety
/// [`super::BinaryFn`]: equal even lengths; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn cmul_f32_avx512(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: lengths per the contract; prod is register-only avx512f.
    unsafe { binary(a, b, s, out, |x, y| prod(x, y)) }
}

/// See [`super::BinaryFn`] and [`super::cmulc1`].
///
/// # Safety
/// As [`cmul_f32_avx512`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn cmulc_f32_avx512(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: as cmul_f32_avx512.
    unsafe { binary(a, b, s, out, |x, y| prod_conj(x, y)) }
}

/// See [`super::BinaryFn`] and [`super::cdiv1`].
///
/// # Safety
/// As [`cmul_f32_avx512`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn cdiv_f32_avx512(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: as cmul_f32_avx512 (vdivps is register-only).
    unsafe {
        binary(a, b, s, out, |x, y| {
            _mm512_div_ps(prod_conj(x, y), norm2(x))
        })
    }
}

/// See [`super::ProjectFn`] and [`super::proj1`].
///
/// # Safety
/// `a.len() == out.len()`, even; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn project_f32_avx512(a: &[f32], eps: f32, s: f32, out: &mut [f32]) {
    let len = out.len();
    let n = len / W * W;
    debug_assert!(a.len() == len);
    // SAFETY: as in `binary`: full steps below n <= len, the tail masked
    // to the lanes below len; avx512f is enabled.
    unsafe {
        let sv = _mm512_set1_ps(s);
        let ev = _mm512_set1_ps(eps);
        let (pa, po) = (a.as_ptr(), out.as_mut_ptr());
        let step = |x: __m512| {
            let m = _mm512_add_ps(_mm512_sqrt_ps(norm2(x)), ev);
            _mm512_mul_ps(_mm512_div_ps(x, m), sv)
        };
        let mut k = 0;
        while k < n {
            _mm512_storeu_ps(po.add(k), step(_mm512_loadu_ps(pa.add(k))));
            k += W;
        }
        if n < len {
            let m = tail_mask(len - n);
            _mm512_mask_storeu_ps(po.add(n), m, step(_mm512_maskz_loadu_ps(m, pa.add(n))));
        }
    }
}

// The names of the tier table (`tier_table!` in `../mod.rs`).
pub use self::{
    cdiv_f32_avx512 as cdiv, cmul_f32_avx512 as cmul, cmulc_f32_avx512 as cmulc,
    project_f32_avx512 as project,
};
