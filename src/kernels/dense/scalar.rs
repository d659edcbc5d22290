//! Dense layer tile, scalar oracle: one plain sequential f32 dot product
//! per (row, query), written for clarity.

/// See [`super::TileFn`].
///
/// # Safety
/// The preconditions of [`super::TileFn`] (checked by the caller; this tier
/// indexes with bounds checks anyway).
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
    for i in 0..nq {
        let qi = &q[i * q_stride..i * q_stride + dim];
        for r in 0..nrows {
            let wr = &w[r * stride..r * stride + dim];
            let mut s = 0.0f32;
            for (a, b) in wr.iter().zip(qi) {
                s += a * b;
            }
            out[i * out_stride + r] = s;
        }
    }
}
