//! Learned SimHash hyperplanes (IUL, the HALOS paper §3.5; issue 7 part 2).
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
//! # Gradient (analytic, batched)
//! With `g_i = (σ(s_i) − y_i) / n`, `Gq[i,k] = g_i b_ik (1 − a_ik²)`,
//! `Gw[i,k] = g_i a_ik (1 − b_ik²)`: `∂L_l/∂θ_l = Gqᵀ Xq + Gwᵀ Xw`. The
//! projections of a batch are one [`SimHash::project`] call per side
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
//! 1. The generator is one [`SplitMix64::new(seed)`] stream, used in this
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
//!    balance them; `epochs` epochs of minibatch Adam; rebuild the tables
//!    with the new planes; report ([`IulReport`]).
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

use crate::bail;
use crate::error::{checked_mul, strided_len, try_vec, Result, Status};
use crate::rng::SplitMix64;
use crate::simhash::SimHash;
use crate::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};
use wide::f32x8;

/// Adam β1.
pub const BETA1: f64 = 0.9;
/// Adam β2.
pub const BETA2: f64 = 0.999;
/// Adam ε.
pub const EPS: f64 = 1e-8;

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
    if d.n_rows > crate::tables::MAX_ROWS {
        bail!(
            InvalidArgument,
            "{} rows; at most {}",
            d.n_rows,
            crate::tables::MAX_ROWS
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
    crate::labels::check_label_csr(
        d.n_queries,
        d.n_rows,
        d.label_offsets,
        d.labels,
        true,
        Status::InvalidArgument,
    )?;
    crate::error::check_finite_coords(d.rows, d.n_rows, shape.dim, d.row_stride, "row")?;
    crate::error::check_finite_coords(d.queries, d.n_queries, shape.dim, d.q_stride, "query")?;
    if shape.range_bits == 0 || shape.range_bits > crate::tables::MAX_RANGE_BITS {
        bail!(
            InvalidArgument,
            "range_bits is {}; it must be in 1..={}",
            shape.range_bits,
            crate::tables::MAX_RANGE_BITS
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

/// f32 dot with 8 independent lanes (deterministic order).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = f32x8::ZERO;
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        let x = f32x8::from(<[f32; 8]>::try_from(x).unwrap());
        let y = f32x8::from(<[f32; 8]>::try_from(y).unwrap());
        acc = x.mul_add(y, acc);
    }
    let mut s = acc.reduce_add();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// `y += a * x` (f32x8).
#[inline]
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let av = f32x8::splat(a);
    let mut cy = y.chunks_exact_mut(8);
    let mut cx = x.chunks_exact(8);
    for (yy, xx) in (&mut cy).zip(&mut cx) {
        let xv = f32x8::from(<[f32; 8]>::try_from(xx).unwrap());
        let yv = f32x8::from(<[f32; 8]>::try_from(&*yy).unwrap());
        yy.copy_from_slice(&xv.mul_add(av, yv).to_array());
    }
    for (yy, xx) in cy.into_remainder().iter_mut().zip(cx.remainder()) {
        *yy += a * xx;
    }
}

#[inline]
fn softplus(s: f64) -> f64 {
    s.max(0.0) + (-s.abs()).exp().ln_1p()
}

#[inline]
fn sigmoid(s: f64) -> f64 {
    if s >= 0.0 {
        1.0 / (1.0 + (-s).exp())
    } else {
        let e = s.exp();
        e / (1.0 + e)
    }
}

/// Reference loss and gradient in f64 (plain loops): `planes` `K*L x dim`,
/// `xq`, `xw` `n x dim`, `y` n labels (1 or 0). Returns `Σ_l L_l` and its
/// gradient (`K*L x dim`).
pub fn loss_grad_f64(
    planes: &[f64],
    dim: usize,
    bits: usize,
    tables: usize,
    xq: &[f64],
    xw: &[f64],
    y: &[f64],
) -> (f64, Vec<f64>) {
    let n = y.len();
    let mut grad = vec![0f64; planes.len()];
    let mut loss = 0f64;
    for i in 0..n {
        let (q, w) = (&xq[i * dim..(i + 1) * dim], &xw[i * dim..(i + 1) * dim]);
        for l in 0..tables {
            let mut a = vec![0f64; bits];
            let mut b = vec![0f64; bits];
            for k in 0..bits {
                let th = &planes[(l * bits + k) * dim..(l * bits + k + 1) * dim];
                a[k] = th.iter().zip(q).map(|(t, x)| t * x).sum::<f64>().tanh();
                b[k] = th.iter().zip(w).map(|(t, x)| t * x).sum::<f64>().tanh();
            }
            let s: f64 = a.iter().zip(&b).map(|(x, z)| x * z).sum();
            loss += (softplus(s) - y[i] * s) / n as f64;
            let g = (sigmoid(s) - y[i]) / n as f64;
            for k in 0..bits {
                let gq = g * b[k] * (1.0 - a[k] * a[k]);
                let gw = g * a[k] * (1.0 - b[k] * b[k]);
                let row = &mut grad[(l * bits + k) * dim..(l * bits + k + 1) * dim];
                for j in 0..dim {
                    row[j] += gq * q[j] + gw * w[j];
                }
            }
        }
    }
    (loss, grad)
}

/// Scratch for the batched f32 loss/gradient.
#[derive(Default)]
struct Batch {
    pq: Vec<f32>,
    pw: Vec<f32>,
    gq: Vec<f32>,
    gw: Vec<f32>,
}

/// Batched f32 loss and gradient: `Σ_l L_l` (accumulated in f64) and, when
/// `grad` is given, its gradient (overwritten). `xq`, `xw`: `n x dim`
/// contiguous. Projections through `fam` (built from `planes`).
fn loss_grad_f32(
    fam: &SimHash,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    grad: Option<&mut [f32]>,
    s: &mut Batch,
) -> Result<f64> {
    let n = y.len();
    let (dim, k, l) = (fam.dim(), fam.bits() as usize, fam.tables() as usize);
    let np = k * l;
    s.pq.resize(n * np, 0.0);
    s.pw.resize(n * np, 0.0);
    fam.project(xq, n, dim, &mut s.pq)?;
    fam.project(xw, n, dim, &mut s.pw)?;
    s.gq.resize(n * np, 0.0);
    s.gw.resize(n * np, 0.0);
    let mut loss = 0f64;
    let inv_n = 1.0 / n as f64;
    #[allow(clippy::needless_range_loop)]
    for i in 0..n {
        let (pq, pw) = (
            &mut s.pq[i * np..(i + 1) * np],
            &mut s.pw[i * np..(i + 1) * np],
        );
        pq.iter_mut().for_each(|v| *v = v.tanh());
        pw.iter_mut().for_each(|v| *v = v.tanh());
        for t in 0..l {
            let (a, b) = (&pq[t * k..(t + 1) * k], &pw[t * k..(t + 1) * k]);
            let sv: f64 = a
                .iter()
                .zip(b)
                .map(|(x, z)| (*x as f64) * (*z as f64))
                .sum();
            let yi = y[i] as f64;
            loss += (softplus(sv) - yi * sv) * inv_n;
            let g = ((sigmoid(sv) - yi) * inv_n) as f32;
            for kk in 0..k {
                let p = i * np + t * k + kk;
                s.gq[p] = g * b[kk] * (1.0 - a[kk] * a[kk]);
                s.gw[p] = g * a[kk] * (1.0 - b[kk] * b[kk]);
            }
        }
    }
    if let Some(grad) = grad {
        grad.fill(0.0);
        // grad[p, :] += Gq[i, p] * xq[i, :] + Gw[i, p] * xw[i, :], plane-major
        // so one gradient row stays in L1 while the batch streams.
        for p in 0..np {
            let row = &mut grad[p * dim..(p + 1) * dim];
            for i in 0..n {
                axpy(row, s.gq[i * np + p], &xq[i * dim..(i + 1) * dim]);
                axpy(row, s.gw[i * np + p], &xw[i * dim..(i + 1) * dim]);
            }
        }
    }
    Ok(loss)
}

/// Adam state for one round.
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
    lr: f64,
}

impl Adam {
    fn new(len: usize, lr: f32) -> Result<Self> {
        Ok(Adam {
            m: try_vec(len, "Adam m")?,
            v: try_vec(len, "Adam v")?,
            t: 0,
            lr: lr as f64,
        })
    }
    fn step(&mut self, theta: &mut [f32], g: &[f32]) {
        self.t += 1;
        let c1 = 1.0 - BETA1.powi(self.t);
        let c2 = 1.0 - BETA2.powi(self.t);
        for ((th, &gi), (m, v)) in theta
            .iter_mut()
            .zip(g)
            .zip(self.m.iter_mut().zip(self.v.iter_mut()))
        {
            let gi = gi as f64;
            let mm = BETA1 * *m as f64 + (1.0 - BETA1) * gi;
            let vv = BETA2 * *v as f64 + (1.0 - BETA2) * gi * gi;
            *m = mm as f32;
            *v = vv as f32;
            let upd = self.lr * (mm / c1) / ((vv / c2).sqrt() + EPS);
            *th = (*th as f64 - upd) as f32;
        }
    }
}

/// Minibatch Adam on the pairs `(xq[i], xw[i], y[i])` (`n x dim`
/// contiguous): `epochs` epochs, pair order shuffled by `rng` each epoch.
/// Returns the full-data loss (per table, per pair) before training and
/// after each epoch (`epochs + 1` values). `planes` is updated in place.
#[allow(clippy::too_many_arguments)]
pub fn adam_fit(
    planes: &mut [f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    lr: f32,
    epochs: u32,
    batch: usize,
    rng: &mut SplitMix64,
) -> Result<Vec<f64>> {
    let n = y.len();
    let lf = tables as f64;
    let mut s = Batch::default();
    let mut losses = Vec::with_capacity(epochs as usize + 1);
    let full = |planes: &[f32], s: &mut Batch| -> Result<f64> {
        let fam = SimHash::from_planes(planes, dim, bits, tables)?;
        let mut tot = 0f64;
        let mut i = 0;
        while i < n {
            let b = (n - i).min(4096);
            tot += loss_grad_f32(
                &fam,
                &xq[i * dim..(i + b) * dim],
                &xw[i * dim..(i + b) * dim],
                &y[i..i + b],
                None,
                s,
            )? * b as f64;
            i += b;
        }
        Ok(if n == 0 { 0.0 } else { tot / n as f64 / lf })
    };
    losses.push(full(planes, &mut s)?);
    if n == 0 {
        return Ok(losses);
    }
    let mut adam = Adam::new(planes.len(), lr)?;
    let mut grad = try_vec::<f32>(planes.len(), "IUL gradient")?;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let (mut bq, mut bw, mut by) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..epochs {
        rng.shuffle(&mut order);
        for chunk in order.chunks(batch) {
            bq.clear();
            bw.clear();
            by.clear();
            for &i in chunk {
                let i = i as usize;
                bq.extend_from_slice(&xq[i * dim..(i + 1) * dim]);
                bw.extend_from_slice(&xw[i * dim..(i + 1) * dim]);
                by.push(y[i]);
            }
            let fam = SimHash::from_planes(planes, dim, bits, tables)?;
            loss_grad_f32(&fam, &bq, &bw, &by, Some(&mut grad), &mut s)?;
            adam.step(planes, &grad);
        }
        losses.push(full(planes, &mut s)?);
    }
    Ok(losses)
}

/// Pairs for the queries `query_ids` (indices into `d`'s queries) given
/// their candidate sets (`cands`: CSR, one entry per element of
/// `query_ids`, ids ascending), in collection order: queries in the order
/// given; positives in label order (a label listed twice gives two pairs),
/// negatives in ascending id order. Not balanced.
pub fn collect_pairs(
    d: &IulData<'_>,
    dim: usize,
    query_ids: &[u32],
    cands: &GatherResult,
    t1: f32,
    t2: f32,
) -> Pairs {
    collect_pairs_with(d, dim, query_ids, cands, |_| (t1, t2))
}

/// [`collect_pairs`] with per-query thresholds: `thr(i)` gives `(t1, t2)`
/// for the i-th element of `query_ids`.
pub fn collect_pairs_with(
    d: &IulData<'_>,
    dim: usize,
    query_ids: &[u32],
    cands: &GatherResult,
    thr: impl Fn(usize) -> (f32, f32),
) -> Pairs {
    let mut out = Pairs::default();
    for (i, &qi) in query_ids.iter().enumerate() {
        let (t1, t2) = thr(i);
        let qi_u = qi as usize;
        let q = &d.queries[qi_u * d.q_stride..qi_u * d.q_stride + dim];
        let s = &cands.ids[cands.offsets[i]..cands.offsets[i + 1]];
        let labs = &d.labels[d.label_offsets[qi_u]..d.label_offsets[qi_u + 1]];
        let row = |r: u32| &d.rows[r as usize * d.row_stride..r as usize * d.row_stride + dim];
        for &y in labs {
            if s.binary_search(&y).is_err() && dot(q, row(y)) > t1 {
                out.pos.push((qi, y));
            }
        }
        for &j in s {
            if !labs.contains(&j) && dot(q, row(j)) < t2 {
                out.neg.push((qi, j));
            }
        }
    }
    out
}

/// Balancing rule: both sides are cut to `m = min(|pos|, |neg|)` (and to
/// `max_pairs` when it is > 0) by keeping a uniform subset: a partial
/// Fisher–Yates pass over the side's indices (`for i in 0..m { j = i +
/// rng.below(len - i); swap }`), kept indices sorted back into collection
/// order. Positives are cut first, then negatives (a side already of size
/// m draws nothing).
pub fn balance(p: &mut Pairs, max_pairs: u32, rng: &mut SplitMix64) {
    let mut m = p.pos.len().min(p.neg.len());
    if max_pairs > 0 {
        m = m.min(max_pairs as usize);
    }
    for side in [&mut p.pos, &mut p.neg] {
        if side.len() == m {
            continue;
        }
        let mut idx: Vec<u32> = (0..side.len() as u32).collect();
        for i in 0..m {
            let j = i + rng.below((idx.len() - i) as u64) as usize;
            idx.swap(i, j);
        }
        let mut keep = idx[..m].to_vec();
        keep.sort_unstable();
        *side = keep.iter().map(|&k| side[k as usize]).collect();
    }
}

/// Hashes the rows with `fam` and builds the tables.
fn build_tables(fam: &SimHash, shape: &IulShape, d: &IulData<'_>) -> Result<Tables> {
    let l = shape.tables as usize;
    let mut codes = try_vec::<u32>(checked_mul(d.n_rows, l, "rows * L")?, "row codes")?;
    fam.hash(d.rows, d.n_rows, d.row_stride, &mut codes)?;
    Tables::build(
        &codes,
        d.n_rows,
        shape.tables,
        shape.range_bits,
        shape.bucket_cap,
        shape.table_seed,
        0,
    )
}

/// Candidate sets of `ids` (plain gather), in blocks of 1024 queries,
/// concatenated into one CSR.
fn gather_all(fam: &SimHash, t: &Tables, d: &IulData<'_>, ids: &[u32]) -> Result<GatherResult> {
    let (dim, l) = (fam.dim(), fam.tables() as usize);
    let mut out = GatherResult {
        offsets: vec![0],
        ..Default::default()
    };
    let mut qb = Vec::new();
    let mut codes = Vec::new();
    let mut r = GatherResult::default();
    for chunk in ids.chunks(1024) {
        qb.clear();
        for &i in chunk {
            let i = i as usize;
            qb.extend_from_slice(&d.queries[i * d.q_stride..i * d.q_stride + dim]);
        }
        codes.resize(chunk.len() * l, 0);
        fam.hash(&qb, chunk.len(), dim, &mut codes)?;
        let input = GatherInput {
            codes: &codes,
            q: chunk.len(),
            projections: None,
            forced_offsets: None,
            forced_ids: &[],
        };
        t.gather(&GatherParams::default(), &input, false, &mut r)?;
        let base = out.ids.len();
        out.ids.extend_from_slice(&r.ids);
        out.offsets.extend(r.offsets[1..].iter().map(|o| o + base));
    }
    Ok(out)
}

/// (mean candidates, label recall) of the queries `ids`.
fn validation(fam: &SimHash, t: &Tables, d: &IulData<'_>, ids: &[u32]) -> Result<(f64, f64)> {
    if ids.is_empty() {
        return Ok((f64::NAN, f64::NAN));
    }
    let c = gather_all(fam, t, d, ids)?;
    let (mut hit, mut tot) = (0u64, 0u64);
    for (i, &qi) in ids.iter().enumerate() {
        let s = &c.ids[c.offsets[i]..c.offsets[i + 1]];
        let qi = qi as usize;
        for y in &d.labels[d.label_offsets[qi]..d.label_offsets[qi + 1]] {
            tot += 1;
            hit += s.binary_search(y).is_ok() as u64;
        }
    }
    let recall = if tot == 0 {
        f64::NAN
    } else {
        hit as f64 / tot as f64
    };
    Ok((c.ids.len() as f64 / ids.len() as f64, recall))
}

/// Fraction of (pair, table) that share a bucket.
fn collision(fam: &SimHash, range_bits: u32, xq: &[f32], xw: &[f32], n: usize) -> Result<f64> {
    if n == 0 {
        return Ok(f64::NAN);
    }
    let l = fam.tables() as usize;
    let (mut cq, mut cw) = (vec![0u32; n * l], vec![0u32; n * l]);
    fam.hash(xq, n, fam.dim(), &mut cq)?;
    fam.hash(xw, n, fam.dim(), &mut cw)?;
    let same = cq
        .iter()
        .zip(&cw)
        .filter(|(a, b)| fold_code(**a, range_bits) == fold_code(**b, range_bits))
        .count();
    Ok(same as f64 / (n * l) as f64)
}

/// Trains `planes` (`K*L x dim`, row-major, the family's layout) on `d`
/// (see the module documentation). Returns the new planes and one report
/// per round. Everything is validated first; deterministic for a fixed
/// seed (any thread count).
pub fn train(
    planes: &[f32],
    shape: &IulShape,
    d: &IulData<'_>,
    p: &IulParams,
) -> Result<(Vec<f32>, Vec<IulReport>)> {
    validate(planes, shape, d, p)?;
    let dim = shape.dim;
    let mut rng = SplitMix64::new(p.seed);
    let mut perm: Vec<u32> = (0..d.n_queries as u32).collect();
    rng.shuffle(&mut perm);
    let nval = ((d.n_queries as f64) * p.validation_fraction as f64).floor() as usize;
    let (mut val, mut tr) = (perm[..nval].to_vec(), perm[nval..].to_vec());
    val.sort_unstable();
    tr.sort_unstable();
    let mut cur = planes.to_vec();
    let mut reports = Vec::with_capacity(p.rounds as usize);
    let mut fam = SimHash::from_planes(&cur, dim, shape.bits, shape.tables)?;
    let mut tabs = build_tables(&fam, shape, d)?;
    let mut val_before = validation(&fam, &tabs, d, &val)?;
    let ranks = match p.thresholds {
        Thresholds::Score => Vec::new(),
        Thresholds::Rank => rank_thresholds(d, dim, &tr, p.t1 as u32, p.t2 as u32),
    };
    // keep_best: (validation label recall, planes, round) of the best so far.
    let mut best: Option<(f64, Vec<f32>, Option<usize>)> =
        (p.keep_best && !val.is_empty()).then(|| (val_before.1, cur.clone(), None));
    for round in 0..p.rounds {
        let cands = gather_all(&fam, &tabs, d, &tr)?;
        let mut pairs = match p.thresholds {
            Thresholds::Score => collect_pairs(d, dim, &tr, &cands, p.t1, p.t2),
            Thresholds::Rank => collect_pairs_with(d, dim, &tr, &cands, |i| ranks[i]),
        };
        drop(cands);
        balance(&mut pairs, p.max_pairs, &mut rng);
        let n = pairs.pos.len() + pairs.neg.len();
        let mut xq = try_vec::<f32>(checked_mul(n, dim, "pairs * dim")?, "pair queries")?;
        let mut xw = try_vec::<f32>(n * dim, "pair rows")?;
        let mut y = Vec::with_capacity(n);
        for (i, &(qi, r)) in pairs.pos.iter().chain(&pairs.neg).enumerate() {
            let (qi, r) = (qi as usize, r as usize);
            xq[i * dim..(i + 1) * dim]
                .copy_from_slice(&d.queries[qi * d.q_stride..qi * d.q_stride + dim]);
            xw[i * dim..(i + 1) * dim]
                .copy_from_slice(&d.rows[r * d.row_stride..r * d.row_stride + dim]);
            y.push(if i < pairs.pos.len() { 1.0 } else { 0.0 });
        }
        let np = pairs.pos.len();
        let nn = pairs.neg.len();
        let (pq, pw) = (&xq[..np * dim], &xw[..np * dim]);
        let (nq, nw) = (&xq[np * dim..], &xw[np * dim..]);
        let pos_b = collision(&fam, shape.range_bits, pq, pw, np)?;
        let neg_b = collision(&fam, shape.range_bits, nq, nw, nn)?;
        let losses = if np == 0 || nn == 0 {
            vec![f64::NAN]
        } else {
            adam_fit(
                &mut cur,
                dim,
                shape.bits,
                shape.tables,
                &xq,
                &xw,
                &y,
                p.learning_rate,
                p.epochs,
                p.batch as usize,
                &mut rng,
            )?
        };
        fam = SimHash::from_planes(&cur, dim, shape.bits, shape.tables)?;
        tabs = build_tables(&fam, shape, d)?;
        let val_after = validation(&fam, &tabs, d, &val)?;
        reports.push(IulReport {
            round,
            positives: np as u64,
            negatives: nn as u64,
            loss_before: losses[0],
            loss_after: *losses.last().unwrap(),
            pos_collision_before: pos_b,
            pos_collision_after: collision(&fam, shape.range_bits, pq, pw, np)?,
            neg_collision_before: neg_b,
            neg_collision_after: collision(&fam, shape.range_bits, nq, nw, nn)?,
            mean_candidates_before: val_before.0,
            mean_candidates_after: val_after.0,
            label_recall_before: val_before.1,
            label_recall_after: val_after.1,
            kept: false,
        });
        if let Some(b) = best.as_mut() {
            // NaN recall (no labels in the validation split) never wins.
            if val_after.1 > b.0 {
                *b = (val_after.1, cur.clone(), Some(round as usize));
            }
        }
        val_before = val_after;
    }
    if let Some((_, planes, round)) = best {
        cur = planes;
        if let Some(r) = round {
            reports[r].kept = true;
        }
    }
    Ok((cur, reports))
}

impl crate::index::Index {
    /// Trains the index's SimHash planes with IUL ([`train`]) on `n`
    /// queries (`queries` row i at `i * q_stride`, `dim` floats, finite)
    /// and their labels (CSR, see [`IulData`]), then swaps the planes in
    /// and rebuilds the tables (same range_bits, bucket_cap, seed). Pairs
    /// use the rows and queries in the hashed space (after the index's
    /// transform; rows decoded from the stored weights), so `t1`/`t2`
    /// apply to those dot products (the logit minus bias for
    /// `Transform::None`, the logit for `BiasAug`).
    ///
    /// Errors: `InvalidArgument` (DWTA index, bad parameters or labels),
    /// `BufferTooSmall`, `NonFinite`; on error the index is unchanged.
    /// `rounds = 0` validates and changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn train_iul(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &IulParams,
    ) -> Result<Vec<IulReport>> {
        let Some(fam) = self.simhash() else {
            bail!(
                InvalidArgument,
                "IUL trains SimHash planes; this index is DWTA"
            );
        };
        let hd = self.hash_dim();
        self.check_queries(queries, n, q_stride, "queries")?;
        let mut tq = try_vec::<f32>(checked_mul(n, hd, "n * dim'")?, "transformed queries")?;
        self.transform_queries(queries, n, q_stride, &mut tq);
        let rows = self.hashed_rows()?;
        let shape = IulShape {
            dim: hd,
            bits: self.bits(),
            tables: self.num_tables(),
            range_bits: self.range_bits(),
            bucket_cap: self.tables().bucket_cap(),
            table_seed: self.tables().seed(),
        };
        let data = IulData {
            rows: &rows,
            n_rows: self.rows(),
            row_stride: hd,
            queries: &tq,
            n_queries: n,
            q_stride: hd,
            label_offsets,
            labels,
        };
        let (planes, reports) = train(fam.planes(), &shape, &data, p)?;
        if p.rounds > 0 {
            self.set_simhash_planes(&planes, &rows)?;
        }
        Ok(reports)
    }
}

/// The batched f32 loss `Σ_l L_l` and its gradient (into `grad`,
/// `K*L x dim`), for tests and callers: `xq`, `xw` `n x dim` contiguous,
/// `y` n labels (1 or 0).
#[allow(clippy::too_many_arguments)]
pub fn loss_grad(
    planes: &[f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    grad: &mut [f32],
) -> Result<f64> {
    let fam = SimHash::from_planes(planes, dim, bits, tables)?;
    let n = y.len();
    if xq.len() < checked_mul(n, dim, "n * dim")? || xw.len() < n * dim {
        bail!(BufferTooSmall, "xq / xw hold fewer than n * dim values");
    }
    if grad.len() != planes.len() {
        bail!(BufferTooSmall, "grad must hold K*L*dim values");
    }
    if n == 0 {
        grad.fill(0.0);
        return Ok(0.0);
    }
    loss_grad_f32(
        &fam,
        &xq[..n * dim],
        &xw[..n * dim],
        y,
        Some(grad),
        &mut Batch::default(),
    )
}
