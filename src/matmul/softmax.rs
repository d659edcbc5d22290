//! The softmax epilogue ([`softmax`]).

use crate::bail;
use crate::error::Result;

use super::check_offsets;

/// Softmax of one segment, in place; returns the log-sum-exp.
fn softmax_segment(x: &mut [f32]) -> f32 {
    if x.is_empty() {
        return f32::NEG_INFINITY;
    }
    if x.iter().any(|v| v.is_nan()) {
        x.fill(f32::NAN);
        return f32::NAN;
    }
    let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    if m == f32::INFINITY {
        let c = x.iter().filter(|&&v| v == m).count() as f32;
        x.iter_mut()
            .for_each(|v| *v = if *v == m { 1.0 / c } else { 0.0 });
        return f32::INFINITY;
    }
    if m == f32::NEG_INFINITY {
        x.fill(f32::NAN);
        return f32::NEG_INFINITY;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - m).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
    m + (sum.ln() as f32)
}

/// Per query segment of `scores` (CSR `offsets`), the softmax
/// `out[j] = exp(x_j - m) / sum_t exp(x_t - m)` with `m` the segment's
/// maximum (so nothing overflows), summed in f64. `lse[i]` (if given, `nq`
/// entries) receives `m + ln(sum)`, the log-sum-exp. Special cases: a NaN
/// score makes its whole segment NaN (lse NaN); a `+inf` score shares the
/// mass equally with the other `+inf` scores, the rest get 0 (lse `+inf`);
/// an all `-inf` segment gives NaN (lse `-inf`); an empty segment writes
/// nothing (lse `-inf`). Each probability is within
/// `(2|x_j - m| + 8) * 2^-24` relative of the exact value.
pub fn softmax(
    scores: &[f32],
    offsets: &[usize],
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    check_softmax(scores.len(), offsets, out.len(), lse.as_deref())?;
    out.copy_from_slice(scores);
    softmax_run(out, offsets, lse);
    Ok(())
}

/// [`softmax`] in place: `x` holds the scores and receives the probabilities.
pub fn softmax_in_place(x: &mut [f32], offsets: &[usize], lse: Option<&mut [f32]>) -> Result<()> {
    check_softmax(x.len(), offsets, x.len(), lse.as_deref())?;
    softmax_run(x, offsets, lse);
    Ok(())
}

fn check_softmax(n: usize, offsets: &[usize], out_len: usize, lse: Option<&[f32]>) -> Result<()> {
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nq + 1 >= 1 entries");
    }
    let nq = offsets.len() - 1;
    check_offsets(offsets, nq, n, "scores")?;
    if out_len != n {
        bail!(
            InvalidArgument,
            "`out` has {out_len} entries, `scores` {n}; they must be equal"
        );
    }
    if let Some(l) = lse {
        if l.len() < nq {
            bail!(BufferTooSmall, "`lse` holds {} floats, nq = {nq}", l.len());
        }
    }
    Ok(())
}

fn softmax_run(x: &mut [f32], offsets: &[usize], mut lse: Option<&mut [f32]>) {
    for i in 0..offsets.len() - 1 {
        let l = softmax_segment(&mut x[offsets[i]..offsets[i + 1]]);
        if let Some(ls) = lse.as_deref_mut() {
            ls[i] = l;
        }
    }
}
