//! Dense layer tile, portable tier (`wide::f32x8` at the build's baseline
//! target features). Register block of 4 rows x 2 queries, one f32x8
//! accumulator each; the `dim % 8` tail in scalar. Without FMA in the
//! baseline `mul_add` rounds twice, which the bound of `crate::dense`
//! covers.

use wide::f32x8;

#[inline(always)]
fn v8(s: &[f32]) -> f32x8 {
    f32x8::from(<[f32; 8]>::try_from(&s[..8]).unwrap())
}

#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn block<const R: usize, const Q: usize>(
    w: &[f32],
    stride: usize,
    r0: usize,
    dim: usize,
    q: &[f32],
    q_stride: usize,
    i0: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let full = dim / 8 * 8;
    let rows: [&[f32]; R] = std::array::from_fn(|k| &w[(r0 + k) * stride..(r0 + k) * stride + dim]);
    let qs: [&[f32]; Q] =
        std::array::from_fn(|k| &q[(i0 + k) * q_stride..(i0 + k) * q_stride + dim]);
    let mut acc = [[f32x8::ZERO; Q]; R];
    let mut d = 0;
    while d < full {
        let qv: [f32x8; Q] = std::array::from_fn(|k| v8(&qs[k][d..]));
        for r in 0..R {
            let wv = v8(&rows[r][d..]);
            for k in 0..Q {
                acc[r][k] = wv.mul_add(qv[k], acc[r][k]);
            }
        }
        d += 8;
    }
    for r in 0..R {
        for k in 0..Q {
            let mut s = acc[r][k].reduce_add();
            for j in full..dim {
                s = rows[r][j].mul_add(qs[k][j], s);
            }
            out[(i0 + k) * out_stride + r0 + r] = s;
        }
    }
}

/// See [`super::TileFn`].
///
/// # Safety
/// The preconditions of [`super::TileFn`] (this tier indexes with bounds
/// checks, so a violation panics instead of misbehaving).
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile_f32(
    w: &[f32],
    stride: usize,
    nrows: usize,
    dim: usize,
    q: &[f32],
    q_stride: usize,
    nq: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let mut i = 0;
    while i < nq {
        let two = i + 2 <= nq;
        let mut r = 0;
        while r < nrows {
            let four = r + 4 <= nrows;
            match (four, two) {
                (true, true) => block::<4, 2>(w, stride, r, dim, q, q_stride, i, out, out_stride),
                (true, false) => block::<4, 1>(w, stride, r, dim, q, q_stride, i, out, out_stride),
                (false, true) => block::<1, 2>(w, stride, r, dim, q, q_stride, i, out, out_stride),
                (false, false) => block::<1, 1>(w, stride, r, dim, q, q_stride, i, out, out_stride),
            }
            r += if four { 4 } else { 1 };
        }
        i += if two { 2 } else { 1 };
    }
}
