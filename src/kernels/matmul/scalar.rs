//! Gathered matmul, scalar tier: the oracle. One row at a time, elements
//! converted to f32 exactly and accumulated left to right in f32 with
//! `mul_add` (one rounding per element). No intrinsics.

use super::{bf16_to_f32, f16_to_f32, Rows};

#[inline]
fn dot_with<T: Copy>(
    r: &Rows<'_, T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
    cv: impl Fn(T) -> f32,
) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let row = &r.w[id as usize * r.stride..id as usize * r.stride + r.dim];
        let mut acc = 0.0f32;
        for (&w, &x) in row.iter().zip(&q[..r.dim]) {
            acc = cv(w).mul_add(x, acc);
        }
        *o = acc;
    }
}

/// # Safety
/// See [`super::DotFn`] (this tier indexes with bounds checks anyway).
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_with(r, q, ids, out, |w| w)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_with(r, q, ids, out, bf16_to_f32)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_with(r, q, ids, out, f16_to_f32)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_with(r, q, ids, out, |w| w as f32);
    for (o, &id) in out.iter_mut().zip(ids) {
        *o *= r.scales[id as usize];
    }
}

/// The tier table's `prefetch` (`tier_table!` in `../mod.rs`): none on
/// this tier.
pub use super::no_prefetch as prefetch;
