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

/// See [`super::NibFn`]: the oracle of the 4-bit panel kernels, one row
/// at a time in plain Rust.
///
/// # Safety
/// The preconditions of [`super::NibFn`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn nib(
    panels: *const u8,
    dim_pad: usize,
    npanels: usize,
    nsums: *const i32,
    consts: *const f32,
    q: *const u8,
    qc: &[f32; 4],
    out: *mut f32,
) {
    let rows = 16 * npanels;
    const NC: usize = super::NIB_CONSTS;
    // SAFETY: the NibFn preconditions give these lengths; `out` does not
    // overlap the inputs.
    let (panels, q, nsums, consts, out) = unsafe {
        (
            std::slice::from_raw_parts(panels, rows * dim_pad / 2),
            std::slice::from_raw_parts(q, dim_pad),
            std::slice::from_raw_parts(nsums, rows),
            std::slice::from_raw_parts(consts, rows * NC),
            std::slice::from_raw_parts_mut(out, rows),
        )
    };
    let half = dim_pad / 2;
    for row in 0..rows {
        let (p, r) = (row / 16, row % 16);
        let base = p * 8 * dim_pad;
        let mut raw = 0i32;
        for g in 0..dim_pad / 8 {
            for k in 0..4 {
                let byte = panels[base + 64 * g + 4 * r + k];
                let (lo, hi) = ((byte & 15) as i32, (byte >> 4) as i32);
                raw = raw
                    .wrapping_add(q[4 * g + k] as i32 * lo)
                    .wrapping_add(q[half + 4 * g + k] as i32 * hi);
            }
        }
        let m = super::correct(raw, nsums[row]);
        let c = |i: usize| consts[p * 16 * NC + 16 * i + r];
        let v = (m as f32 * (c(0) * qc[0]) + c(1) * qc[1]) + c(2) * qc[2];
        out[row] = v + (c(3) + qc[3] * c(4));
    }
}
