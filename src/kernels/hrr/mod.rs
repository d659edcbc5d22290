//! Frequency-domain kernels of holographic reduced representations (HRR,
//! see [`crate::hrr`]): the pointwise complex operations between the real
//! FFTs of binding, unbinding and projection.
//!
//! A spectrum is stored as `realfft` returns it: `d / 2 + 1` complex values
//! of f32, interleaved `re, im, re, im, ...` (`num_complex::Complex<f32>`
//! is `#[repr(C)]`), so every slice here holds `2 * (d / 2 + 1)` floats.
//! The factor `s` (`1 / d` as f32, the normalisation of the unnormalised
//! inverse FFT) is folded into the pointwise step.
//!
//! Every tier performs, per complex value, exactly the operations of the
//! per-element functions below ([`cmul1`], [`cmulc1`], [`cdiv1`],
//! [`proj1`]), each rounded to nearest in f32 in that order, never fused
//! (no FMA): `a - b` is computed as `a + (-b)` or with `addsub`, which
//! IEEE 754 defines as the same rounding, `sqrt` and division are
//! correctly rounded on every tier. So **every tier returns the same bits
//! as the scalar oracle**, and a bind or unbind differs between tiers only
//! if the FFT library's own SIMD dispatch differs (it does not within one
//! process).

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// `out[k] = (a[k] * b[k]) * s` (complex product), see [`cmul1`].
///
/// # Safety
/// `a.len() == b.len() == out.len()`, an even number; the CPU supports the
/// tier of the function.
pub type BinaryFn = unsafe fn(&[f32], &[f32], f32, &mut [f32]);

/// `out[k] = (a[k] / (|a[k]| + eps)) * s`, see [`proj1`].
///
/// # Safety
/// `a.len() == out.len()`, an even number; the CPU supports the tier.
pub type ProjectFn = unsafe fn(&[f32], f32, f32, &mut [f32]);

/// The entry points of one tier.
pub struct Kernels {
    pub name: &'static str,
    /// Binding: `a * b * s`.
    pub cmul: BinaryFn,
    /// Unbinding with the approximate inverse: `conj(a) * b * s` (the
    /// spectrum of `x†_i = x_{-i mod d}` is `conj(F(x))` for real `x`).
    pub cmulc: BinaryFn,
    /// Unbinding with the exact inverse: `b / a * s`.
    pub cdiv: BinaryFn,
    /// Projection to unit magnitude: `a / (|a| + eps) * s`.
    pub project: ProjectFn,
}

/// `((ar br - ai bi) s, (ar bi + ai br) s)`.
#[inline(always)]
pub fn cmul1(ar: f32, ai: f32, br: f32, bi: f32, s: f32) -> (f32, f32) {
    ((ar * br - ai * bi) * s, (ar * bi + ai * br) * s)
}

/// `conj(a) b s = ((ar br + ai bi) s, (ar bi - ai br) s)`.
#[inline(always)]
pub fn cmulc1(ar: f32, ai: f32, br: f32, bi: f32, s: f32) -> (f32, f32) {
    ((ar * br + ai * bi) * s, (ar * bi - ai * br) * s)
}

/// `b / a s`: with `n = ar ar + ai ai`,
/// `(((ar br + ai bi) / n) s, ((ar bi - ai br) / n) s)`. A zero `a` gives
/// NaN or infinity (the exact inverse does not exist there).
#[inline(always)]
pub fn cdiv1(ar: f32, ai: f32, br: f32, bi: f32, s: f32) -> (f32, f32) {
    let n = ar * ar + ai * ai;
    (((ar * br + ai * bi) / n) * s, ((ar * bi - ai * br) / n) * s)
}

/// `a / (|a| + eps) s`: with `m = sqrt(ar ar + ai ai) + eps`,
/// `((ar / m) s, (ai / m) s)`.
#[inline(always)]
pub fn proj1(ar: f32, ai: f32, eps: f32, s: f32) -> (f32, f32) {
    let m = (ar * ar + ai * ai).sqrt() + eps;
    ((ar / m) * s, (ai / m) * s)
}

/// Applies a per-element function to the complex values `from..` (the
/// tails of the SIMD tiers, and the whole scalar tier).
#[inline(always)]
pub(crate) fn binary_tail(
    a: &[f32],
    b: &[f32],
    s: f32,
    out: &mut [f32],
    from: usize,
    f: impl Fn(f32, f32, f32, f32, f32) -> (f32, f32),
) {
    let mut k = from;
    while k + 1 < out.len() {
        let (r, i) = f(a[k], a[k + 1], b[k], b[k + 1], s);
        out[k] = r;
        out[k + 1] = i;
        k += 2;
    }
}

/// As [`binary_tail`] for the projection.
#[inline(always)]
pub(crate) fn project_tail(a: &[f32], eps: f32, s: f32, out: &mut [f32], from: usize) {
    let mut k = from;
    while k + 1 < out.len() {
        let (r, i) = proj1(a[k], a[k + 1], eps, s);
        out[k] = r;
        out[k + 1] = i;
        k += 2;
    }
}

crate::kernels::tier_table! {
    /// The kernels of `tier` (the caller has checked that the CPU supports it).
    Kernels [name] {
        cmul: cmul,
        cmulc: cmulc,
        cdiv: cdiv,
        project: project,
    }
}
