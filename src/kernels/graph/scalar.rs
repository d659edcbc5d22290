//! Graph-search dot kernels, scalar tier: the oracle. One row at a time,
//! written exactly as the operation of the module documentation: sixteen
//! lane sums, a multiply and an add per element (two roundings), the fixed
//! reduction tree. No intrinsics.

use super::{reduce16, Rows, LANES};
use crate::kernels::matmul::bf16_to_f32;

#[inline]
fn dot_with<T: Copy>(
    r: &Rows<'_, T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
    cv: impl Fn(T) -> f32,
) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let row = &r.w[id as usize * r.dim..(id as usize + 1) * r.dim];
        let mut acc = [0.0f32; LANES];
        for (wc, qc) in row.chunks_exact(LANES).zip(q[..r.dim].chunks_exact(LANES)) {
            for l in 0..LANES {
                let p = cv(wc[l]) * qc[l];
                acc[l] += p;
            }
        }
        *o = reduce16(&acc);
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
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_with(r, q, ids, out, |w| w as f32);
    for (o, &id) in out.iter_mut().zip(ids) {
        *o *= r.scales[id as usize];
    }
}

/// The walk kernel's oracle: one row at a time, one byte at a time.
///
/// # Safety
/// See [`super::WalkFn`] (this tier indexes with bounds checks anyway).
pub unsafe fn walk(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    for (o, &id) in out.iter_mut().zip(ids) {
        let start = id as usize * r.stride;
        let codes = &r.base[start..start + r.dim];
        let mut acc = 0i32;
        for (&c, &qv) in codes.iter().zip(&q[..r.dim]) {
            acc = acc.wrapping_add((c as i32).wrapping_mul(qv as i32));
        }
        *o = acc;
    }
}
