//! Quantised dot products, scalar oracle: one plain loop per row, i32
//! products summed in order (wrapping, as documented in `super`), then the
//! `64 * sum` correction and the f32 epilogue of [`super::score_of`].

use super::{correct, score_of, Epilogue};

/// `sum_j q[j] * row[j]` in wrapping i32 arithmetic.
fn raw_dot(row: &[i8], q: &[u8]) -> i32 {
    row.iter()
        .zip(q)
        .fold(0i32, |s, (&c, &u)| s.wrapping_add(u as i32 * c as i32))
}

/// See [`super::DotFn`].
///
/// # Safety
/// The preconditions of [`super::DotFn`] (this tier indexes with bounds
/// checks anyway).
pub unsafe fn dot(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) {
    let q = &q[..dim_pad];
    for r in 0..nrows {
        let row = &codes[r * dim_pad..(r + 1) * dim_pad];
        out[r] = correct(raw_dot(row, q), sums[r]);
    }
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`] (bounds-checked here anyway).
pub unsafe fn score(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let q = &q[..dim_pad];
    for r in 0..nrows {
        let row = &codes[r * dim_pad..(r + 1) * dim_pad];
        let d = correct(raw_dot(row, q), sums[r]);
        out[r] = score_of(d, epi.scales[r], epi.scale_q, epi.bias.map(|b| b[r]));
    }
}

/// See [`super::GatherFn`]: each position as its one-row run.
///
/// # Safety
/// The preconditions of [`super::GatherFn`] (bounds-checked here anyway).
pub unsafe fn gather(
    codes: &[i8],
    dim_pad: usize,
    pos: &[u32],
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let q = &q[..dim_pad];
    super::gather_each(pos, sums, epi, out, |p| {
        raw_dot(&codes[p * dim_pad..(p + 1) * dim_pad], q)
    });
}
