//! HRR frequency-domain kernels, scalar oracle: one plain loop over the
//! complex values, each computed by the per-element function of `super`.

use super::{binary_tail, cdiv1, cmul1, cmulc1, project_tail};

/// See [`super::BinaryFn`] and [`super::cmul1`].
///
/// # Safety
/// None beyond [`super::BinaryFn`]'s lengths (bounds-checked here anyway).
pub unsafe fn cmul(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary_tail(a, b, s, out, 0, cmul1);
}

/// See [`super::BinaryFn`] and [`super::cmulc1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cmulc(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary_tail(a, b, s, out, 0, cmulc1);
}

/// See [`super::BinaryFn`] and [`super::cdiv1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn cdiv(a: &[f32], b: &[f32], s: f32, out: &mut [f32]) {
    binary_tail(a, b, s, out, 0, cdiv1);
}

/// See [`super::ProjectFn`] and [`super::proj1`].
///
/// # Safety
/// As [`cmul`].
pub unsafe fn project(a: &[f32], eps: f32, s: f32, out: &mut [f32]) {
    project_tail(a, eps, s, out, 0);
}
