//! Graph-search dot kernels, portable tier (`wide::f32x8` at the build's
//! baseline target features). Each row's 16 lane sums are two `f32x8`
//! (lanes 0..8 and 8..16), updated with a separate multiply and add
//! (`*` and `+`, never `mul_add`, which would fuse where FMA exists), then
//! reduced with the shared fixed tree: bit-identical to the oracle. Four
//! rows at a time; no prefetch (there is no portable hint).

use wide::f32x8;

use super::{reduce16, Rows, LANES};
use crate::kernels::matmul::bf16_to_f32;

const ROWS: usize = 4;

#[inline(always)]
fn load8<T: Copy>(s: &[T], cv: &impl Fn(T) -> f32) -> f32x8 {
    let mut a = [0.0f32; 8];
    for (d, &v) in a.iter_mut().zip(s) {
        *d = cv(v);
    }
    f32x8::from(a)
}

#[inline(always)]
fn finish(lo: f32x8, hi: f32x8) -> f32 {
    let mut acc = [0.0f32; LANES];
    acc[..8].copy_from_slice(&lo.to_array());
    acc[8..].copy_from_slice(&hi.to_array());
    reduce16(&acc)
}

#[inline(always)]
fn dot_generic<T: Copy>(
    r: &Rows<'_, T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
    cv: impl Fn(T) -> f32,
) {
    let dim = r.dim;
    let q = &q[..dim];
    let row = |id: u32| &r.w[id as usize * dim..(id as usize + 1) * dim];
    let mut i = 0;
    while i < ids.len() {
        let rr = (ids.len() - i).min(ROWS);
        let rows: [&[T]; ROWS] = std::array::from_fn(|k| row(ids[i + k.min(rr - 1)]));
        let mut lo = [f32x8::ZERO; ROWS];
        let mut hi = [f32x8::ZERO; ROWS];
        for (b, qc) in q.chunks_exact(LANES).enumerate() {
            let q0 = load8(&qc[..8], &|x| x);
            let q1 = load8(&qc[8..], &|x| x);
            for k in 0..ROWS {
                let w = &rows[k][b * LANES..(b + 1) * LANES];
                lo[k] += load8(&w[..8], &cv) * q0;
                hi[k] += load8(&w[8..], &cv) * q1;
            }
        }
        for k in 0..rr {
            out[i + k] = finish(lo[k], hi[k]);
        }
        i += rr;
    }
}

/// # Safety
/// See [`super::DotFn`] (this tier indexes with bounds checks).
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, |w| w)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, bf16_to_f32)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, |w| w as f32);
    for (o, &id) in out.iter_mut().zip(ids) {
        *o *= r.scales[id as usize];
    }
}

/// The walk kernel (`wide::i32x8`: bytes widened to i32, multiplied and
/// added lane-wise, the lanes summed at the end; integer, so exact).
///
/// # Safety
/// See [`super::WalkFn`] (this tier indexes with bounds checks).
pub unsafe fn walk(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    use wide::i32x8;
    let dim = r.dim;
    for (o, &id) in out.iter_mut().zip(ids) {
        let start = id as usize * r.stride;
        let codes = &r.base[start..start + dim];
        let mut acc = i32x8::ZERO;
        for (c, qc) in codes.chunks_exact(8).zip(q[..dim].chunks_exact(8)) {
            let cw = i32x8::from(std::array::from_fn::<i32, 8, _>(|l| c[l] as i32));
            let qw = i32x8::from(std::array::from_fn::<i32, 8, _>(|l| qc[l] as i32));
            acc += cw * qw;
        }
        *o = acc.to_array().iter().fold(0i32, |a, &b| a.wrapping_add(b));
    }
}
