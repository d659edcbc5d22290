//! The softmax cross-entropy over candidate segments ([`softmax_xent`]).

use crate::bail;
use crate::error::Result;
use crate::isa::{self, Isa};
use crate::kernels::train as kt;
use crate::matmul::check_offsets;

use super::segment_cuts;
use crate::par::threads_auto;

fn check_xent(
    n: usize,
    targets: &[f32],
    offsets: &[usize],
    grad_len: usize,
    loss_len: usize,
) -> Result<usize> {
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nb + 1 >= 1 entries");
    }
    let nb = offsets.len() - 1;
    check_offsets(offsets, nb, n, "logits")?;
    if targets.len() != n {
        bail!(
            InvalidArgument,
            "`targets` has {} entries, `logits` {n}; they must be equal",
            targets.len()
        );
    }
    if grad_len != n {
        bail!(
            InvalidArgument,
            "`grad` has {grad_len} entries, `logits` {n}; they must be equal"
        );
    }
    if loss_len < nb {
        bail!(BufferTooSmall, "`loss` holds {loss_len} floats, nb = {nb}");
    }
    if let Some(j) = targets.iter().position(|v| !v.is_finite()) {
        bail!(
            NonFinite,
            "targets[{j}] is {} (finite values needed)",
            targets[j]
        );
    }
    if let Some(j) = targets.iter().position(|&v| v < 0.0) {
        bail!(
            InvalidArgument,
            "targets[{j}] is {}: target weights must be >= 0",
            targets[j]
        );
    }
    Ok(nb)
}

fn check_finite_logits(x: &[f32]) -> Result<()> {
    if let Some(j) = x.iter().position(|v| !v.is_finite()) {
        bail!(NonFinite, "logits[{j}] is {} (finite values needed)", x[j]);
    }
    Ok(())
}

/// Per segment `b` of the CSR `offsets` (`nb + 1` entries): `loss[b]` and
/// `grad[j] = softmax(z)_j - t_j` for the logits `z = logits[segment]` and
/// the target distribution `t = y / sum(y)` of the weights
/// `y = targets[segment]` (see the module docs; `grad` may not alias
/// `logits`, use [`softmax_xent_in_place`]). Logits must be finite
/// (`NonFinite`), targets finite and `>= 0`. Runs on `tier` with `threads`
/// threads (0 = every core, as many as the work pays for: at least 2^18
/// logits a thread; an explicit count is kept); the result is the same for
/// every tier and thread count. Error bounds: [`XentBound`](super::XentBound).
pub fn softmax_xent(
    tier: Isa,
    threads: usize,
    logits: &[f32],
    targets: &[f32],
    offsets: &[usize],
    loss: &mut [f32],
    grad: &mut [f32],
) -> Result<()> {
    isa::check_supported(tier)?;
    check_xent(logits.len(), targets, offsets, grad.len(), loss.len())?;
    check_finite_logits(logits)?;
    grad.copy_from_slice(logits);
    xent_run(tier, threads, grad, targets, offsets, loss);
    Ok(())
}

/// [`softmax_xent`] in place: `x` holds the logits and receives the
/// gradient.
pub fn softmax_xent_in_place(
    tier: Isa,
    threads: usize,
    x: &mut [f32],
    targets: &[f32],
    offsets: &[usize],
    loss: &mut [f32],
) -> Result<()> {
    isa::check_supported(tier)?;
    check_xent(x.len(), targets, offsets, x.len(), loss.len())?;
    check_finite_logits(x)?;
    xent_run(tier, threads, x, targets, offsets, loss);
    Ok(())
}

fn xent_segments(
    f: kt::XentFn,
    x: &mut [f32],
    y: &[f32],
    offsets: &[usize],
    base: usize,
    loss: &mut [f32],
) {
    for (b, l) in loss.iter_mut().enumerate() {
        let (s, e) = (offsets[b] - base, offsets[b + 1] - base);
        *l = if s == e {
            0.0
        } else {
            // SAFETY: the segment is non-empty, x and y have its length,
            // the logits are finite (checked), the tier is supported.
            unsafe { f(&mut x[s..e], &y[s..e]) }
        };
    }
}

/// Logits a thread gets at least when the caller asks for every core
/// (`threads = 0`): 2^18, where a second thread started per call begins
/// to pay (benches/train.md, "Every core for xent and dq").
const XENT_MIN_LOGITS_PER_THREAD: usize = 1 << 18;

fn xent_run(
    tier: Isa,
    threads: usize,
    x: &mut [f32],
    y: &[f32],
    offsets: &[usize],
    loss: &mut [f32],
) {
    let f = kt::kernels(tier).xent;
    let nb = offsets.len() - 1;
    let t = threads_auto(threads, nb, x.len(), XENT_MIN_LOGITS_PER_THREAD);
    if t == 1 {
        xent_segments(f, x, y, offsets, 0, &mut loss[..nb]);
        return;
    }
    let cuts = segment_cuts(offsets, t);
    let mut jobs = Vec::with_capacity(t);
    let (mut xr, mut lr) = (x, &mut loss[..nb]);
    for k in 0..t {
        let (b0, b1) = (cuts[k], cuts[k + 1]);
        let (xs, xrest) = xr.split_at_mut(offsets[b1] - offsets[b0]);
        let (ls, lrest) = lr.split_at_mut(b1 - b0);
        xr = xrest;
        lr = lrest;
        jobs.push((xs, ls, b0, b1));
    }
    crate::par::map(jobs, |(xs, ls, b0, b1)| {
        let offs = &offsets[b0..=b1];
        xent_segments(f, xs, &y[offsets[b0]..offsets[b1]], offs, offs[0], ls)
    });
}
