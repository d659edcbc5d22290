//! HRR frequency-domain kernels, portable tier (`wide::f32x8` at the
//! build's baseline target features: SSE2 on x86-64, NEON on aarch64).
//!
//! Four complex values per step. `wide` has no lane shuffles, so the
//! duplicated real parts, duplicated imaginary parts and the pair-swapped
//! second operand are built as arrays (the compiler emits shuffles); the
//! `addsub` of the x86 tiers is a multiply of the second product by
//! `[-1, 1, ...]` (exact) and an add, which IEEE 754 rounds exactly as the
//! scalar subtraction. The tail (fewer than four values) runs the
//! per-element functions of `super`.

use wide::f32x8;

use super::{binary_tail, cdiv1, cmul1, cmulc1, project_tail};

const W: usize = 8;

#[inline(always)]
fn load(s: &[f32]) -> f32x8 {
    f32x8::new(<[f32; W]>::try_from(&s[..W]).unwrap())
}

#[inline(always)]
fn store(v: f32x8, out: &mut [f32]) {
    out[..W].copy_from_slice(&v.to_array());
}

/// `(re, re, ...)`, `(im, im, ...)` and the pair-swapped `(im, re, ...)`
/// of eight interleaved floats.
#[inline(always)]
fn split(v: &[f32]) -> (f32x8, f32x8, f32x8) {
    let v: [f32; W] = v[..W].try_into().unwrap();
    let re = [v[0], v[0], v[2], v[2], v[4], v[4], v[6], v[6]];
    let im = [v[1], v[1], v[3], v[3], v[5], v[5], v[7], v[7]];
    let sw = [v[1], v[0], v[3], v[2], v[5], v[4], v[7], v[6]];
    (f32x8::new(re), f32x8::new(im), f32x8::new(sw))
}

/// Even lanes `-1`, odd lanes `+1`: `t1 + ALT * t2` is `addsub(t1, t2)`.
const ALT: f32x8 = f32x8::new([-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]);

/// `(ar br - ai bi, ar bi + ai br)` lane pairs (the complex product).
#[inline(always)]
fn prod(a: &[f32], b: &[f32]) -> f32x8 {
    let (ar, ai, _) = split(a);
    let (_, _, bs) = split(b);
    ar * load(b) + ALT * (ai * bs)
}

/// `(ar br + ai bi, ar bi - ai br)` lane pairs (`conj(a) b`).
#[inline(always)]
fn prod_conj(a: &[f32], b: &[f32]) -> f32x8 {
    let (ar, ai, _) = split(a);
    let (_, _, bs) = split(b);
    ar * load(b) - ALT * (ai * bs)
}

/// `ar ar + ai ai` in both lanes of each pair.
#[inline(always)]
fn norm2(a: &[f32]) -> f32x8 {
    let (ar, ai, _) = split(a);
    ar * ar + ai * ai
}

/// See [`super::BinaryFn`] and [`super::cmul1`].
///
/// # Safety
/// [`super::BinaryFn`]'s lengths (bounds-checked here anyway).
pub unsafe fn cmul(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    let sv = f32x8::splat(s);
    let n = out.len() / W * W;
    let mut k = 0;
    while k < n {
        store(prod(&a[k..], &b[k..]) * sv, &mut out[k..]);
        k += W;
    }
    binary_tail(a, b, s, out, n, cmul1);
}

/// See [`super::BinaryFn`] and [`super::cmulc1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cmulc(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    let sv = f32x8::splat(s);
    let n = out.len() / W * W;
    let mut k = 0;
    while k < n {
        store(prod_conj(&a[k..], &b[k..]) * sv, &mut out[k..]);
        k += W;
    }
    binary_tail(a, b, s, out, n, cmulc1);
}

/// See [`super::BinaryFn`] and [`super::cdiv1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cdiv(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    let sv = f32x8::splat(s);
    let n = out.len() / W * W;
    let mut k = 0;
    while k < n {
        let q = prod_conj(&a[k..], &b[k..]) / norm2(&a[k..]);
        store(q * sv, &mut out[k..]);
        k += W;
    }
    binary_tail(a, b, s, out, n, cdiv1);
}

/// See [`super::ProjectFn`] and [`super::proj1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn project(a: &[f32], eps: f32, s: f32, out: &mut [f32]) {
    let sv = f32x8::splat(s);
    let ev = f32x8::splat(eps);
    let n = out.len() / W * W;
    let mut k = 0;
    while k < n {
        let m = norm2(&a[k..]).sqrt() + ev;
        store((load(&a[k..]) / m) * sv, &mut out[k..]);
        k += W;
    }
    project_tail(a, eps, s, out, n);
}
