//! Quantised dot products, portable tier (`wide` at the build's baseline
//! target features: SSE2 on x86-64, NEON on aarch64).
//!
//! `wide` has no u8 x i8 multiply-add (`vpmaddubsw`), so both operands are
//! widened to i16 (`i16x16::from(u8x16)`, `i16x16::from(i8x16)`, exact) and
//! multiplied with `i16x16::dot` (`pmaddwd`: products summed in adjacent
//! pairs into i32x8, `|pair| <= 2 * 127 * 128`, exact). Four rows at a time
//! share each widened query chunk; one i32x8 accumulator per row, reduced
//! with `reduce_add` (wrapping, like the other tiers). `dim_pad` is a
//! multiple of 64, so there is no tail.

use wide::{i16x16, i32x8, i8x16, u8x16};

use super::{correct, score_of, Epilogue};

const ROWS: usize = 4;

#[inline(always)]
fn widen_i8(s: &[i8]) -> i16x16 {
    i16x16::from(i8x16::new(<[i8; 16]>::try_from(&s[..16]).unwrap()))
}

#[inline(always)]
fn widen_u8(s: &[u8]) -> i16x16 {
    i16x16::from(u8x16::new(<[u8; 16]>::try_from(&s[..16]).unwrap()))
}

/// `raw` sums of `R` consecutive rows starting at row `r0`.
#[inline(always)]
fn raw_block<const R: usize>(codes: &[i8], dim_pad: usize, r0: usize, q: &[u8]) -> [i32; R] {
    let rows: [&[i8]; R] =
        std::array::from_fn(|k| &codes[(r0 + k) * dim_pad..(r0 + k + 1) * dim_pad]);
    let mut acc = [i32x8::ZERO; R];
    let mut j = 0;
    while j < dim_pad {
        let qv = widen_u8(&q[j..]);
        for k in 0..R {
            acc[k] += widen_i8(&rows[k][j..]).dot(qv);
        }
        j += 16;
    }
    std::array::from_fn(|k| acc[k].reduce_add())
}

/// Runs the blocks of the run, handing each row's corrected `d_r` to `put`.
#[inline(always)]
fn run(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    mut put: impl FnMut(usize, i32),
) {
    let q = &q[..dim_pad];
    let mut r = 0;
    while r + ROWS <= nrows {
        let raw = raw_block::<ROWS>(codes, dim_pad, r, q);
        for (k, &v) in raw.iter().enumerate() {
            put(r + k, correct(v, sums[r + k]));
        }
        r += ROWS;
    }
    while r < nrows {
        let [v] = raw_block::<1>(codes, dim_pad, r, q);
        put(r, correct(v, sums[r]));
        r += 1;
    }
}

/// See [`super::DotFn`].
///
/// # Safety
/// The preconditions of [`super::DotFn`] (this tier indexes with bounds
/// checks, so a violation panics instead of misbehaving).
pub unsafe fn dot(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) {
    run(codes, dim_pad, nrows, q, sums, |r, d| out[r] = d);
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`] (bounds-checked here).
pub unsafe fn score(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    run(codes, dim_pad, nrows, q, sums, |r, d| {
        out[r] = score_of(d, epi.scales[r], epi.scale_q, epi.bias.map(|b| b[r]));
    });
}

/// See [`super::GatherFn`]: each position as its one-row run.
///
/// # Safety
/// The preconditions of [`super::GatherFn`] (bounds-checked here).
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
        let [v] = raw_block::<1>(codes, dim_pad, p, q);
        v
    });
}
