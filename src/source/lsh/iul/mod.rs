//! Learned SimHash hyperplanes (IUL, the HALOS paper §3.5).
//!
//! # The loss (this library's exact reading)
//! Table `l` of a SimHash family owns the `K` planes `θ_l` (`K x dim`, rows
//! `l*K .. (l+1)*K` of the family's `K*L x dim` planes). For a pair of
//! vectors `(q, w)` (a query and a row of W, both in the HASHED space, i.e.
//! after the index's transform) and a label `y` (1 positive, 0 negative):
//!
//! ```text
//! a = tanh(θ_l q)            (K-vector: tanh of every projection)
//! b = tanh(θ_l w)
//! s = a · b                  (plain dot, NOT divided by K)
//! ℓ = −y log σ(s) − (1 − y) log(1 − σ(s)) = softplus(s) − y s
//! L_l = (1 / n) Σ_pairs ℓ    (mean over the n pairs of a batch)
//! ```
//! With saturated tanh, `a · b = K − 2 · hamming(code(q), code(w))`, so the
//! loss pushes positives towards equal codes and negatives apart. The
//! tables are independent: the total objective `Σ_l L_l` is minimised with
//! one Adam state per plane coordinate, which equals L separate per-table
//! optimisations. Reported losses are `Σ_l L_l / L` (per table, per pair).
//!
//! [`IulLoss::Collision`] (through [`train_with`]) replaces `ℓ` by the log
//! loss on `p = Π_k (1 + a_k b_k) / 2`, the relaxed probability that all K
//! bits of the table agree; the gradient below keeps its form, with
//! `σ(s_i) − y_i` replaced per bit by `∂ℓ/∂(a_k b_k)`.
//!
//! # Gradient (analytic, batched)
//! With `g_i = (σ(s_i) − y_i) / n`, `Gq[i,k] = g_i b_ik (1 − a_ik²)`,
//! `Gw[i,k] = g_i a_ik (1 − b_ik²)`: `∂L_l/∂θ_l = Gqᵀ Xq + Gwᵀ Xw`. The
//! projections of a batch are one [`SimHash::project`](crate::source::lsh::hash::simhash::SimHash::project) call per side
//! (every plane of every table at once, on the active tier); the gradient
//! is `K*L x n` times `n x dim` as f32x8 multiply-adds (`wide`). A plain
//! f64 version ([`loss_grad_f64`]) is the oracle, checked against central
//! finite differences in `tests/iul.rs`.
//!
//! # Adam
//! β1 = 0.9, β2 = 0.999, ε = 1e-8, bias-corrected:
//! `m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
//! θ ← θ − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + ε)`, one step per
//! minibatch of `batch` pairs; the state restarts every round.
//!
//! # Training ([`train`])
//! 1. The generator is one [`SplitMix64::new(seed)`](crate::rng::SplitMix64::new) stream, used in this
//!    order: shuffle of the query indices `0..n` (the first
//!    `floor(n * validation_fraction)` of the shuffled order are the
//!    validation split, the rest train; both then sorted ascending); then,
//!    per round, the balancing draws ([`balance`]) and one shuffle of the
//!    pair order per epoch.
//! 2. Each round: hash the rows with the current planes and build the
//!    tables (same `range_bits`, `bucket_cap`, table seed); gather each
//!    training query's candidate set S (plain gather, every table, no
//!    probes); collect pairs ([`collect_pairs`]): positives `(q, w_y)` for
//!    labels `y ∉ S` with `q·w_y > t1`, negatives `(q, w_j)` for `j ∈ S`,
//!    `j` not a label, with `q·w_j < t2` (dots in f32 in the hashed space);
//!    balance them; `epochs` epochs of minibatch Adam (with
//!    [`IulOptions::tolerance`], until the loss stops falling); rebuild
//!    the tables with the new planes; report ([`IulReport`]).
//! 3. A round with no positive or no negative pair leaves the planes as
//!    they are (its report says 0 pairs).
//! 4. With [`Thresholds::Rank`], `t1` / `t2` are rank cut-offs turned into
//!    per-query score thresholds once, before the first round
//!    ([`rank_thresholds`]; the HALOS paper's "usually t1 > t2" reads as
//!    scores; as ranks the positives' cut-off is the tighter one). With
//!    `keep_best`, the planes of the round with the best validation label
//!    recall are returned (the starting planes when no round beats them;
//!    that round's report says `kept`); rounds still chain from the last
//!    round's planes.
//! 5. [`train_with`] adds the options of [`IulOptions`]: the loss form
//!    ([`IulLoss::Collision`] relaxes the K-bit collision itself), the
//!    convergence tolerance and a per-epoch hook; its defaults are
//!    [`train`].

use crate::bail;
use crate::error::{checked_mul, strided_len, Result, Status};

mod grad;
mod rounds;

use grad::dot;
pub use grad::{
    adam_fit, adam_fit_with, loss_grad, loss_grad_f64, loss_grad_f64_with, loss_grad_with, AdamFit,
};
pub use rounds::{balance, collect_pairs, collect_pairs_with, train, train_with};

/// Adam β1.
pub const BETA1: f64 = 0.9;
/// Adam β2.
pub const BETA2: f64 = 0.999;
/// Adam ε.
pub const EPS: f64 = 1e-8;

/// Lower bound of a relaxed bit agreement `(1 + a_k b_k) / 2` in the
/// collision loss (keeps `ln` finite when a bit disagrees completely).
pub const COLLISION_FLOOR: f64 = 1e-6;

/// The loss form of the training (`a = tanh(θ_l q)`, `b = tanh(θ_l w)`,
/// K-vectors, per table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IulLoss {
    /// `ℓ = softplus(s) − y s` with `s = a · b` (the module documentation):
    /// the logistic loss on the relaxed code similarity. A positive's loss
    /// is small once most bits agree; it does not ask for all K.
    #[default]
    Dot,
    /// The relaxed collision probability `p = Π_k (1 + a_k b_k) / 2`
    /// (with saturated tanh, 1 when all K bits agree, else 0) under the
    /// log loss `ℓ = −y ln p − (1 − y) ln(1 − p)`: a positive is only
    /// satisfied when every bit of its table agrees, a negative as soon as
    /// one bit differs. Each factor is floored at [`COLLISION_FLOOR`].
    Collision,
}

/// Options of [`train_with`] beyond [`IulParams`] (the defaults give
/// [`train`]).
#[derive(Default)]
pub struct IulOptions<'a> {
    /// Loss form (default [`IulLoss::Dot`]).
    pub loss: IulLoss,
    /// 0 (default): exactly `epochs` Adam epochs per round. > 0: train
    /// each round to convergence: stop after the first epoch whose
    /// full-data loss on the round's pairs fell by less than `tolerance`
    /// times the loss before it, `epochs` being the most (finite, >= 0).
    pub tolerance: f64,
    /// Called before each round's first epoch (epoch 0) and after each
    /// epoch, with the round's balanced pairs and the current planes.
    pub on_epoch: Option<&'a mut dyn FnMut(&EpochView<'_>)>,
}

/// What [`IulOptions::on_epoch`] sees.
pub struct EpochView<'a> {
    pub round: u32,
    /// 0 before training, then 1, 2, ...
    pub epoch: u32,
    /// Full-data loss on the round's pairs (per table, per pair).
    pub loss: f64,
    /// The planes (`K*L x dim`).
    pub planes: &'a [f32],
    /// The round's pairs in the hashed space, positives first:
    /// `xq`, `xw` are `(positives + negatives) x dim`.
    pub xq: &'a [f32],
    pub xw: &'a [f32],
    pub positives: usize,
    pub negatives: usize,
}

/// How [`IulParams::t1`] / [`IulParams::t2`] are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Thresholds {
    /// Score values: a missed label y is a positive when `q·w_y > t1`, a
    /// retrieved non-label j a negative when `q·w_j < t2`.
    #[default]
    Score,
    /// Rank cut-offs (whole numbers >= 0) over every row's `q·w`: a missed
    /// label is a positive when it is among the query's top `t1` rows
    /// (`q·w_y >= s_(t1)`, the `t1`-th largest dot; `t1 = 0`: no
    /// positives), a retrieved non-label a negative when it is not among
    /// the top `t2` (`q·w_j < s_(t2)`; `t2 = 0`: every one). Computed once
    /// per training query (a pass over every row, the same f32 dot as the
    /// pairs use), as the ranks do not depend on the planes.
    Rank,
}

/// Training parameters (defaults in [`IulParams::default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IulParams {
    /// Positive threshold (see [`Thresholds`] for the two readings).
    pub t1: f32,
    /// Negative threshold (see [`Thresholds`]).
    pub t2: f32,
    /// Score values (default) or rank cut-offs.
    pub thresholds: Thresholds,
    /// Keep the planes of the round with the best validation label recall
    /// (the starting planes count as round "-1": if no round beats them,
    /// they are kept). Needs a non-empty validation split; with an empty
    /// one the last round's planes are kept, as without this flag.
    pub keep_best: bool,
    /// Adam learning rate (> 0).
    pub learning_rate: f32,
    /// Rounds of (collect pairs, train, rebuild); 0 changes nothing.
    pub rounds: u32,
    /// Adam epochs over the pairs per round.
    pub epochs: u32,
    /// Pairs per Adam step (>= 1).
    pub batch: u32,
    /// After balancing, at most this many pairs per side (0: no cap).
    pub max_pairs: u32,
    /// Fraction of the queries held out for the validation metrics, in [0, 1).
    pub validation_fraction: f32,
    pub seed: u64,
}

impl Default for IulParams {
    /// t1 = 0, t2 = 0 (scores), no keep-best, learning rate 0.01, 3
    /// rounds, 4 epochs, batch 256, max_pairs 0, validation fraction 0.1,
    /// seed 1.
    fn default() -> Self {
        IulParams {
            t1: 0.0,
            t2: 0.0,
            thresholds: Thresholds::Score,
            keep_best: false,
            learning_rate: 0.01,
            rounds: 3,
            epochs: 4,
            batch: 256,
            max_pairs: 0,
            validation_fraction: 0.1,
            seed: 1,
        }
    }
}

/// One round's report. "Before" values use the planes the round started
/// with, "after" values the planes it ended with. Collision probability:
/// the fraction of (pair, table) where both vectors land in the same
/// bucket, over the round's balanced pairs. Validation metrics: mean
/// candidates per validation query and label recall (fraction of
/// (validation query, label) entries whose label is among the candidates);
/// NaN when the validation split is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IulReport {
    pub round: u32,
    pub positives: u64,
    pub negatives: u64,
    pub loss_before: f64,
    pub loss_after: f64,
    pub pos_collision_before: f64,
    pub pos_collision_after: f64,
    pub neg_collision_before: f64,
    pub neg_collision_after: f64,
    pub mean_candidates_before: f64,
    pub mean_candidates_after: f64,
    pub label_recall_before: f64,
    pub label_recall_after: f64,
    /// With [`IulParams::keep_best`]: these are the planes returned (at
    /// most one round; none when the starting planes were kept).
    pub kept: bool,
}

/// The shape of the family and its tables.
#[derive(Clone, Copy, Debug)]
pub struct IulShape {
    pub dim: usize,
    pub bits: u32,
    pub tables: u32,
    pub range_bits: u32,
    pub bucket_cap: u32,
    pub table_seed: u64,
}

/// Training data: rows (`n_rows x dim`, stride `row_stride`), queries
/// (`n_queries x dim`, stride `q_stride`), labels as CSR
/// (`label_offsets`: `n_queries + 1` non-decreasing values from 0;
/// `labels[label_offsets[i]..label_offsets[i+1]]` are query i's rows).
#[derive(Clone, Copy, Debug)]
pub struct IulData<'a> {
    pub rows: &'a [f32],
    pub n_rows: usize,
    pub row_stride: usize,
    pub queries: &'a [f32],
    pub n_queries: usize,
    pub q_stride: usize,
    pub label_offsets: &'a [usize],
    pub labels: &'a [u32],
}

/// Pairs `(query index, row)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairs {
    pub pos: Vec<(u32, u32)>,
    pub neg: Vec<(u32, u32)>,
}

/// Validates parameters, shape and data (everything [`train`] needs).
pub fn validate(planes: &[f32], shape: &IulShape, d: &IulData<'_>, p: &IulParams) -> Result<()> {
    let np = checked_mul(shape.bits as usize, shape.tables as usize, "K * L")?;
    if shape.dim == 0 || shape.bits == 0 || shape.bits > 32 || shape.tables == 0 {
        bail!(
            InvalidArgument,
            "dim {}, K {}, L {}: need dim >= 1, 1 <= K <= 32, L >= 1",
            shape.dim,
            shape.bits,
            shape.tables
        );
    }
    if planes.len() != checked_mul(np, shape.dim, "K * L * dim")? {
        bail!(
            InvalidArgument,
            "planes hold {} values, K*L*dim = {} expected",
            planes.len(),
            np * shape.dim
        );
    }
    if let Some(i) = planes.iter().position(|v| !v.is_finite()) {
        bail!(NonFinite, "plane value {i} is {}", planes[i]);
    }
    if !(p.t1.is_finite() && p.t2.is_finite()) {
        bail!(
            NonFinite,
            "thresholds t1 = {}, t2 = {} must be finite",
            p.t1,
            p.t2
        );
    }
    if p.thresholds == Thresholds::Rank {
        for (name, t) in [("t1", p.t1), ("t2", p.t2)] {
            if !(t >= 0.0 && t.fract() == 0.0 && t <= MAX_RANK) {
                bail!(
                    InvalidArgument,
                    "{name} is {t}; rank cut-offs are whole numbers in 0..={MAX_RANK}"
                );
            }
        }
    }
    if !(p.learning_rate.is_finite() && p.learning_rate > 0.0) {
        bail!(
            InvalidArgument,
            "learning_rate is {}; it must be finite and > 0",
            p.learning_rate
        );
    }
    if p.batch == 0 {
        bail!(InvalidArgument, "batch must be >= 1");
    }
    if !(p.validation_fraction >= 0.0 && p.validation_fraction < 1.0) {
        bail!(
            InvalidArgument,
            "validation_fraction is {}; it must be in [0, 1)",
            p.validation_fraction
        );
    }
    if d.n_rows == 0 {
        bail!(InvalidArgument, "rows must be >= 1");
    }
    if d.n_rows > crate::source::MAX_ROWS {
        bail!(
            InvalidArgument,
            "{} rows; at most {}",
            d.n_rows,
            crate::source::MAX_ROWS
        );
    }
    let need = strided_len(d.n_rows, shape.dim, d.row_stride, "rows")?;
    if d.rows.len() < need {
        bail!(
            BufferTooSmall,
            "rows hold {} floats, {need} needed",
            d.rows.len()
        );
    }
    if d.n_queries == 0 {
        bail!(InvalidArgument, "at least one training query is needed");
    }
    let need = strided_len(d.n_queries, shape.dim, d.q_stride, "queries")?;
    if d.queries.len() < need {
        bail!(
            BufferTooSmall,
            "queries hold {} floats, {need} needed",
            d.queries.len()
        );
    }
    crate::source::labels::check_label_csr(
        d.n_queries,
        d.n_rows,
        d.label_offsets,
        d.labels,
        true,
        Status::InvalidArgument,
    )?;
    crate::error::check_finite_coords(d.rows, d.n_rows, shape.dim, d.row_stride, "row")?;
    crate::error::check_finite_coords(d.queries, d.n_queries, shape.dim, d.q_stride, "query")?;
    if shape.range_bits == 0 || shape.range_bits > crate::source::MAX_RANGE_BITS {
        bail!(
            InvalidArgument,
            "range_bits is {}; it must be in 1..={}",
            shape.range_bits,
            crate::source::MAX_RANGE_BITS
        );
    }
    Ok(())
}

/// The largest rank cut-off (2^24: every whole number up to it is exact
/// in f32).
pub const MAX_RANK: f32 = 16_777_216.0;

/// Per query, the score thresholds `(p, n)` of [`collect_pairs_with`]
/// equivalent to rank cut-offs `t1`, `t2` ([`Thresholds::Rank`]): `p` just
/// below `s_(t1)` (so `q·w > p` iff `q·w >= s_(t1)`), `n = s_(t2)`, where
/// `s_(t)` is the t-th largest `q·w` over every row (`+inf` for t = 0,
/// `-inf` for t > rows). One pass over the rows per query.
pub fn rank_thresholds(
    d: &IulData<'_>,
    dim: usize,
    query_ids: &[u32],
    t1: u32,
    t2: u32,
) -> Vec<(f32, f32)> {
    let mut dots = vec![0f32; d.n_rows];
    let kth = |dots: &mut [f32], t: u32| -> f32 {
        let t = t as usize;
        if t == 0 {
            f32::INFINITY
        } else if t > dots.len() {
            f32::NEG_INFINITY
        } else {
            *dots.select_nth_unstable_by(t - 1, |a, b| b.total_cmp(a)).1
        }
    };
    query_ids
        .iter()
        .map(|&qi| {
            let qi = qi as usize;
            let q = &d.queries[qi * d.q_stride..qi * d.q_stride + dim];
            for (r, o) in dots.iter_mut().enumerate() {
                *o = dot(q, &d.rows[r * d.row_stride..r * d.row_stride + dim]);
            }
            let p = kth(&mut dots, t1).next_down();
            (p, kth(&mut dots, t2))
        })
        .collect()
}
