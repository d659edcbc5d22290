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

#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::F32x;

/// What a SIMD tier adds to its vector ops for these kernels: the complex
/// products of `LANES / 2` interleaved values and the squared magnitude;
/// the loops ([`binary_simd`], [`project_simd`]) are shared.
///
/// # Safety (every method)
/// Register-only; the caller enables the tier's features.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Tile: F32x {
    /// `true`: the tail is one masked step on the vectors; `false`: the
    /// per-element functions ([`binary_tail`], [`project_tail`]).
    const MASKED_TAIL: bool;
    /// `(ar br - ai bi, ar bi + ai br)` per pair, as [`cmul1`] before `* s`.
    unsafe fn prod(a: Self::V, b: Self::V) -> Self::V;
    /// `conj(a) b = (ar br + ai bi, ar bi - ai br)` per pair.
    unsafe fn prod_conj(a: Self::V, b: Self::V) -> Self::V;
    /// `ar ar + ai ai` in both lanes of each pair.
    unsafe fn norm2(a: Self::V) -> Self::V;
}

/// The operation of [`binary_simd`]: [`cmul1`].
pub(crate) const CMUL: u8 = 0;
/// [`cmulc1`].
pub(crate) const CMULC: u8 = 1;
/// [`cdiv1`].
pub(crate) const CDIV: u8 = 2;

/// The SIMD tiers' [`BinaryFn`] for the operation `OP`: `op(a, b) * s` per
/// vector, the tail masked or by the per-element function. Inlined into
/// each tier's `#[target_feature]` entry point.
///
/// # Safety
/// [`BinaryFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn binary_simd<S: Tile, const OP: u8>(
    a: &[f32],
    b: &[f32],
    s: f32,
    out: &mut [f32],
) {
    let len = out.len();
    let n = len / S::LANES * S::LANES;
    debug_assert!(a.len() == len && b.len() == len);
    // (No closure around intrinsics: see `crate::kernels::train`'s lanes!.)
    #[inline(always)]
    unsafe fn op<S: Tile, const OP: u8>(x: S::V, y: S::V) -> S::V {
        // SAFETY: register-only (caller enables the features).
        unsafe {
            match OP {
                CMUL => S::prod(x, y),
                CMULC => S::prod_conj(x, y),
                _ => S::div(S::prod_conj(x, y), S::norm2(x)),
            }
        }
    }
    // SAFETY: a, b and out hold len floats (the kernel's precondition):
    // full vector accesses stay below n <= len, and the masked tail touches
    // only lanes below len (masked-off lanes are not accessed).
    unsafe {
        let sv = S::splat(s);
        let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
        let mut k = 0;
        while k < n {
            let r = op::<S, OP>(S::loadu(pa.add(k)), S::loadu(pb.add(k)));
            S::storeu(po.add(k), S::mul(r, sv));
            k += S::LANES;
        }
        if S::MASKED_TAIL && n < len {
            let m = S::tail(len - n);
            let x = S::ld(m, pa.add(n));
            let y = S::ld(m, pb.add(n));
            S::st(m, po.add(n), S::mul(op::<S, OP>(x, y), sv));
        }
    }
    if !S::MASKED_TAIL {
        match OP {
            CMUL => binary_tail(a, b, s, out, n, cmul1),
            CMULC => binary_tail(a, b, s, out, n, cmulc1),
            _ => binary_tail(a, b, s, out, n, cdiv1),
        }
    }
}

/// The SIMD tiers' [`ProjectFn`]: `(x / (sqrt(norm2(x)) + eps)) * s` per
/// vector, the tail masked or by [`proj1`].
///
/// # Safety
/// [`ProjectFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn project_simd<S: Tile>(a: &[f32], eps: f32, s: f32, out: &mut [f32]) {
    let len = out.len();
    let n = len / S::LANES * S::LANES;
    debug_assert!(a.len() == len);
    #[inline(always)]
    unsafe fn step<S: Tile>(x: S::V, ev: S::V, sv: S::V) -> S::V {
        // SAFETY: register-only (caller enables the features).
        unsafe {
            let m = S::add(S::sqrt(S::norm2(x)), ev);
            S::mul(S::div(x, m), sv)
        }
    }
    // SAFETY: as in binary_simd.
    unsafe {
        let sv = S::splat(s);
        let ev = S::splat(eps);
        let (pa, po) = (a.as_ptr(), out.as_mut_ptr());
        let mut k = 0;
        while k < n {
            S::storeu(po.add(k), step::<S>(S::loadu(pa.add(k)), ev, sv));
            k += S::LANES;
        }
        if S::MASKED_TAIL && n < len {
            let m = S::tail(len - n);
            S::st(m, po.add(n), step::<S>(S::ld(m, pa.add(n)), ev, sv));
        }
    }
    if !S::MASKED_TAIL {
        project_tail(a, eps, s, out, n);
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

/// The entry points of the two SIMD tiers, listed once: `avx2.rs` and
/// `avx512.rs` each instantiate them with their target features and vector
/// type (`crate::kernels::simd::entries!` writes the functions).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_entries {
    ($feat:literal, $T:ty) => {
        $crate::kernels::simd::entries! { $feat;
            /// See [`super::BinaryFn`] and [`super::cmul1`].
            fn cmul(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) => super::binary_simd::<$T, CMUL>;
            /// See [`super::BinaryFn`] and [`super::cmulc1`].
            fn cmulc(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) => super::binary_simd::<$T, CMULC>;
            /// See [`super::BinaryFn`] and [`super::cdiv1`].
            fn cdiv(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) => super::binary_simd::<$T, CDIV>;
            /// See [`super::ProjectFn`] and [`super::proj1`].
            fn project(a: &[f32], eps: f32, s: f32, out: &mut [f32]) => super::project_simd::<$T>;
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_entries;
