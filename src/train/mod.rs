//! The backward pass of a sublinear output layer: the
//! softmax cross-entropy over per-sample candidate segments, the
//! transposed gathered product `dq`, and the SGD / lazy-Adam row updates.
//! `docs/training.md` has the long form (semantics, determinism, bounds, C
//! usage).
//!
//! A batch is CSR, exactly as the forward gathered matmul takes it: sample
//! `b < nb` owns the positions `offsets[b] .. offsets[b + 1]` of `ids`
//! (candidate rows of W), of the logits and of the gradients.
//!
//! * [`softmax_xent`]: per segment, `loss_b = -sum_j t_j log softmax(z)_j`
//!   with the target distribution `t_j = y_j / sum_j y_j` (the caller's
//!   non-negative weights, e.g. 1 for each true label: uniform over the
//!   sample's labels), and the gradient `softmax(z)_j - t_j` with respect to
//!   the logits. Max-subtracted; the exponential is the kernel family's own
//!   ([`exp_neg`], relative error `<= EXP_REL = 2^-19`). A segment whose
//!   weights sum to 0 has loss 0 and gradient 0; an empty one has loss 0.
//! * [`gather_dq`]: `dq[b] = sum_j g_j W[ids[j]]` over sample `b`'s segment.
//! * [`rows_update_sgd`] and [`Adam::step`]: each row `r` that occurs in
//!   the batch gets `G_r = sum_{j: ids[j] = r} g_j q_{b(j)}` (summed in
//!   position order, so in sample order) and then one update; rows that do
//!   not occur are not touched (Adam: lazy, with a per-row step count).
//!
//! # Same bits on every tier and thread count
//! Every kernel computes the same f32 operations in the same order on every
//! tier (see [`crate::kernels::train`]), and threads split the work so that
//! no result depends on the split: segments are independent (each thread
//! takes a contiguous range of samples), and the updates group the batch's
//! (row, position) pairs by row first (a stable counting sort of the
//! positions by row id), so each row's gradient is summed in position order by one
//! thread, which owns a contiguous range of rows (W, and Adam's moments and
//! step counts, are split at row boundaries: no two threads write the same
//! row). The result is bit-identical for any tier and any thread count.

mod adam;
mod dq;
mod update;
mod xent;

pub use crate::kernels::train::{exp_neg, EXP_REL};
pub use adam::{Adam, AdamParams};
pub use dq::{gather_dq, DqWeights};
pub use update::{rows_update_sgd, Batch};
pub use xent::{softmax_xent, softmax_xent_in_place};

/// `u = 2^-24`.
const U: f64 = 1.0 / 16_777_216.0;

/// `gamma(n) = n u / (1 - n u)`.
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// The derived error bounds of one segment of [`softmax_xent`] (see
/// `docs/training.md`): with `n` candidates, exact probabilities `p_j`,
/// exact targets `t_j`, `A = sum_j t_j (m - z_j)` and `S = sum_j e^{z_j - m}`
/// (`>= 1`), every tier satisfies
/// `|g_j - (p_j - t_j)| <= grad_p * p_j + grad_t * t_j + u |p_j - t_j| + 2^-125`
/// and `|loss - L| <= loss_abs + loss_a * A + 2 u ln S`.
#[derive(Clone, Copy, Debug)]
pub struct XentBound {
    pub grad_p: f64,
    pub grad_t: f64,
    pub loss_abs: f64,
    pub loss_a: f64,
}

impl XentBound {
    pub fn new(n: usize) -> XentBound {
        let g = gamma(n);
        // p = e (1 + d_e) / (S (1 + d_S)) with |d_e| <= EXP_REL,
        // |d_S| <= EXP_REL + g (+ the flushed terms, below 2^-125 each with
        // S >= 1), then 1/S and the product: 2 roundings, and the
        // difference with t: 1 more. First-order terms, with 1 % slack for
        // the second-order ones.
        let grad_p = 1.01 * (2.0 * EXP_REL + g + 3.0 * U);
        // t = y (1/Y): Y summed (gamma(n)), 1/Y and the product.
        let grad_t = 1.01 * (g + 2.0 * U);
        // ln S: |ln(S(1+d)) - ln S| <= |d| (1 + |d|); rounding of A
        // (differences, products, sum: gamma(n + 2)), of A / Y and Y itself
        // (gamma(n + 1)), of the final f32.
        let loss_abs = 1.01 * (EXP_REL + g) + 2.0 * (n as f64) * 2f64.powi(-125);
        let loss_a = 1.01 * (gamma(n + 2) + gamma(n + 1) + 2.0 * U);
        XentBound {
            grad_p,
            grad_t,
            loss_abs,
            loss_a,
        }
    }
}

/// Splits the segments into `t` contiguous ranges of about equal element
/// counts: `cuts[k] .. cuts[k + 1]` for thread `k` (`cuts` has `t + 1`
/// entries, the first 0, the last `nb`).
fn segment_cuts(offsets: &[usize], t: usize) -> Vec<usize> {
    let nb = offsets.len() - 1;
    let total = offsets[nb];
    let mut cuts = Vec::with_capacity(t + 1);
    cuts.push(0);
    for k in 1..t {
        let target = (total as u128 * k as u128 / t as u128) as usize;
        let b = offsets[..nb].partition_point(|&o| o < target);
        cuts.push(b.max(*cuts.last().unwrap()).min(nb));
    }
    cuts.push(nb);
    cuts
}
