//! HRR frequency-domain kernels, portable tier (`wide::f32x8` at the
//! build's baseline target features: SSE2 on x86-64, NEON on aarch64).
//!
//! Eight complex values per step, deinterleaved: `wide` has no lane
//! shuffles, so the real parts and the imaginary parts are gathered into
//! one `f32x8` each by array construction (the compiler emits shuffles),
//! the per-element formulas of `super` run lane-wise on them (the same
//! operations in the same order, so the same bits), and the results are
//! interleaved back. The tail (fewer than eight values) runs the
//! per-element functions of `super`.

use wide::f32x8;

use super::{binary_tail, cdiv1, cmul1, cmulc1, project_tail};

/// Floats per step: eight complex values.
const W: usize = 16;

/// The real parts and the imaginary parts of eight interleaved complex
/// values (a deinterleave the compiler turns into shuffles).
#[inline(always)]
fn split(v: &[f32]) -> (f32x8, f32x8) {
    let v: &[f32; W] = v[..W].try_into().unwrap();
    (
        f32x8::new([v[0], v[2], v[4], v[6], v[8], v[10], v[12], v[14]]),
        f32x8::new([v[1], v[3], v[5], v[7], v[9], v[11], v[13], v[15]]),
    )
}

/// Interleaves real and imaginary parts back into `out[..16]`.
#[inline(always)]
fn join(re: f32x8, im: f32x8, out: &mut [f32]) {
    let (r, i) = (re.to_array(), im.to_array());
    let o: &mut [f32; W] = (&mut out[..W]).try_into().unwrap();
    for k in 0..8 {
        o[2 * k] = r[k];
        o[2 * k + 1] = i[k];
    }
}

/// The body of the binary kernels: `op(ar, ai, br, bi)` on eight complex
/// values per step, then `* s`.
#[inline(always)]
fn binary(
    a: &[f32],
    b: &[f32],
    s: f32,
    out: &mut [f32],
    op: impl Fn(f32x8, f32x8, f32x8, f32x8) -> (f32x8, f32x8),
    tail: impl Fn(f32, f32, f32, f32, f32) -> (f32, f32),
) {
    let sv = f32x8::splat(s);
    let n = out.len() / W * W;
    let mut k = 0;
    while k < n {
        let (ar, ai) = split(&a[k..]);
        let (br, bi) = split(&b[k..]);
        let (re, im) = op(ar, ai, br, bi);
        join(re * sv, im * sv, &mut out[k..]);
        k += W;
    }
    binary_tail(a, b, s, out, n, tail);
}

/// See [`super::BinaryFn`] and [`super::cmul1`].
///
/// # Safety
/// [`super::BinaryFn`]'s lengths (bounds-checked here anyway).
pub unsafe fn cmul(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary(
        a,
        b,
        s,
        out,
        |ar, ai, br, bi| (ar * br - ai * bi, ar * bi + ai * br),
        cmul1,
    );
}

/// See [`super::BinaryFn`] and [`super::cmulc1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cmulc(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary(
        a,
        b,
        s,
        out,
        |ar, ai, br, bi| (ar * br + ai * bi, ar * bi - ai * br),
        cmulc1,
    );
}

/// See [`super::BinaryFn`] and [`super::cdiv1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cdiv(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary(
        a,
        b,
        s,
        out,
        |ar, ai, br, bi| {
            let n = ar * ar + ai * ai;
            ((ar * br + ai * bi) / n, (ar * bi - ai * br) / n)
        },
        cdiv1,
    );
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
        let (ar, ai) = split(&a[k..]);
        let m = (ar * ar + ai * ai).sqrt() + ev;
        join((ar / m) * sv, (ai / m) * sv, &mut out[k..]);
        k += W;
    }
    project_tail(a, eps, s, out, n);
}
