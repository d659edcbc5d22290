//! C entry points of IUL, learned SimHash hyperplanes (`lshk_iul_*`,
//! `lshk_index_train_iul`).

use super::index::{lshk_index, IndexHandle};
use super::*;
use crate::bail;
use crate::source::lsh::iul::{
    IulData, IulLoss, IulOptions, IulParams, IulReport, IulShape, Thresholds,
};

/// lshk_iul_params::flags: read `t1` / `t2` as rank cut-offs (whole
/// numbers >= 0) instead of score values: a missed label is a positive when
/// it is among the query's top `t1` rows by q'.w' (t1 = 0: no positives), a
/// retrieved non-label a negative when it is not among the top `t2` (t2 =
/// 0: every one). Computed once per training query, before the first round
/// (a pass over every row).
pub const LSHK_IUL_RANK_THRESHOLDS: u32 = 1;
/// lshk_iul_params::flags: keep the planes of the round with the best
/// validation label recall (the starting planes when no round beats them);
/// that round's report has `kept = 1`. Needs a non-empty validation split
/// (validation_fraction > 0); without one the last round's planes are
/// kept, as without the flag.
pub const LSHK_IUL_KEEP_BEST: u32 = 2;
/// lshk_iul_params::flags: Adam epochs until one lowers the round's loss
/// by < 0.1 %, at most `epochs` (examples/iul_eval.md).
pub const LSHK_IUL_TO_CONVERGENCE: u32 = 4;
/// lshk_iul_params::flags: log loss on the relaxed all-K-bits collision.
pub const LSHK_IUL_COLLISION_LOSS: u32 = 8;
const IUL_FLAGS: u32 = LSHK_IUL_RANK_THRESHOLDS
    | LSHK_IUL_KEEP_BEST
    | LSHK_IUL_TO_CONVERGENCE
    | LSHK_IUL_COLLISION_LOSS;
/// The loss decrease below which LSHK_IUL_TO_CONVERGENCE stops a round.
const CONVERGENCE_TOLERANCE: f64 = 1e-3;

/// Parameters of lshk_index_train_iul, from lshk_iul_params_default(); a
/// struct_size above sizeof(lshk_iul_params) (newer header) is accepted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_iul_params {
    /// sizeof(lshk_iul_params).
    pub struct_size: u32,
    /// Rounds of (collect pairs, Adam epochs, rebuild the tables); 0
    /// validates and changes nothing (default 3).
    pub rounds: u32,
    /// Adam epochs over the round's pairs (default 4).
    pub epochs: u32,
    /// Pairs per Adam step, >= 1 (default 256).
    pub batch: u32,
    /// Positive threshold: a label y missing from a query's candidates
    /// makes a positive pair when q'.w'_y > t1 (dot in the hashed space:
    /// after the index's transform). Finite (default 0). With
    /// LSHK_IUL_RANK_THRESHOLDS a rank cut-off instead.
    pub t1: f32,
    /// Negative threshold: a candidate j that is not a label makes a
    /// negative pair when q'.w'_j < t2. Finite (default 0). With
    /// LSHK_IUL_RANK_THRESHOLDS a rank cut-off instead.
    pub t2: f32,
    /// Adam learning rate, finite and > 0 (default 0.01). Adam's β1 = 0.9,
    /// β2 = 0.999, ε = 1e-8.
    pub learning_rate: f32,
    /// Fraction of the queries held out for the reports' validation
    /// metrics, in [0, 1) (default 0.1).
    pub validation_fraction: f32,
    /// After balancing (both sides cut to the smaller one), at most this
    /// many pairs per side (0 = no cap, default).
    pub max_pairs: u32,
    /// LSHK_IUL_* bits (default 0: score thresholds, the last round's
    /// planes kept); other bits are INVALID_ARGUMENT. (`reserved` in 0.2.)
    pub flags: u32,
    /// Seed of the validation split, the balancing subsample and the
    /// epoch shuffles (one SplitMix64 stream; default 1).
    pub seed: u64,
}

/// One training round's report (fixed layout). "before" values use the
/// planes the round started with, "after" those it ended with. Collision
/// probability: fraction of (pair, table) where both vectors share a
/// bucket, over the round's balanced pairs (positives collide in no table
/// before, by construction). Validation: mean candidates per validation
/// query and label recall (label among the candidates), NaN when the
/// validation split is empty. Losses are per table and per pair; NaN when
/// the round found no positive or no negative pair (planes unchanged).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_iul_report {
    pub round: u32,
    /// 1 when LSHK_IUL_KEEP_BEST kept this round's planes, else 0 (at most
    /// one report; none when the starting planes were kept). (`reserved`,
    /// always 0, in 0.2.0.)
    pub kept: u32,
    /// Balanced pairs (positives == negatives).
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
}

/// Default IUL parameters (see lshk_iul_params).
#[no_mangle]
pub extern "C" fn lshk_iul_params_default() -> lshk_iul_params {
    let d = IulParams::default();
    lshk_iul_params {
        struct_size: std::mem::size_of::<lshk_iul_params>() as u32,
        rounds: d.rounds,
        epochs: d.epochs,
        batch: d.batch,
        t1: d.t1,
        t2: d.t2,
        learning_rate: d.learning_rate,
        validation_fraction: d.validation_fraction,
        max_pairs: d.max_pairs,
        flags: 0,
        seed: d.seed,
    }
}

// SAFETY: #[repr(C)], struct_size first, plain integer/float fields.
unsafe impl ParamStruct for lshk_iul_params {
    const DEFAULT_FN: &'static str = "lshk_iul_params_default";
    fn defaults() -> Self {
        lshk_iul_params_default()
    }
}

/// Reads and validates the parameter struct (NULL = defaults).
///
/// # Safety
/// `p` is NULL or points to a readable lshk_iul_params of `struct_size` bytes.
unsafe fn read_params(p: *const lshk_iul_params) -> Result<lshk_iul_params> {
    // SAFETY: forwarded caller contract.
    let cp = unsafe { read_param_struct(p, "p")? };
    check_flags(&cp)?;
    Ok(cp)
}

fn check_flags(cp: &lshk_iul_params) -> Result<()> {
    if cp.flags & !IUL_FLAGS != 0 {
        bail!(
            InvalidArgument,
            "p->flags is {:#x}; only LSHK_IUL_RANK_THRESHOLDS (1), LSHK_IUL_KEEP_BEST (2), \
             LSHK_IUL_TO_CONVERGENCE (4) and LSHK_IUL_COLLISION_LOSS (8) are defined",
            cp.flags
        );
    }
    Ok(())
}

fn to_rust(cp: &lshk_iul_params) -> IulParams {
    IulParams {
        t1: cp.t1,
        t2: cp.t2,
        learning_rate: cp.learning_rate,
        rounds: cp.rounds,
        epochs: cp.epochs,
        batch: cp.batch,
        max_pairs: cp.max_pairs,
        validation_fraction: cp.validation_fraction,
        seed: cp.seed,
        thresholds: if cp.flags & LSHK_IUL_RANK_THRESHOLDS != 0 {
            Thresholds::Rank
        } else {
            Thresholds::Score
        },
        keep_best: cp.flags & LSHK_IUL_KEEP_BEST != 0,
    }
}

/// The training options the flags select.
fn options(cp: &lshk_iul_params) -> IulOptions<'static> {
    IulOptions {
        loss: if cp.flags & LSHK_IUL_COLLISION_LOSS != 0 {
            IulLoss::Collision
        } else {
            IulLoss::Dot
        },
        tolerance: if cp.flags & LSHK_IUL_TO_CONVERGENCE != 0 {
            CONVERGENCE_TOLERANCE
        } else {
            0.0
        },
        on_epoch: None,
    }
}

/// The CSR labels (`n1` = n + 1 offsets), offsets validated.
///
/// # Safety
/// `label_offsets` holds n1 values and `labels` `label_offsets[n]` values.
unsafe fn read_labels<'a>(
    label_offsets: *const usize,
    labels: *const u32,
    n1: usize,
) -> Result<(&'a [usize], &'a [u32])> {
    // SAFETY: caller contract (n + 1 offsets readable).
    let offs = unsafe { slice_in(label_offsets, n1, "label_offsets")? };
    if offs[0] != 0 {
        bail!(
            InvalidArgument,
            "label_offsets[0] is {}; it must be 0",
            offs[0]
        );
    }
    if let Some(i) = offs.windows(2).position(|w| w[1] < w[0]) {
        bail!(
            InvalidArgument,
            "label_offsets decrease at {}: {} then {}",
            i + 1,
            offs[i],
            offs[i + 1]
        );
    }
    // SAFETY: caller contract (label_offsets[n] labels readable).
    let labs = unsafe { slice_in(labels, offs[n1 - 1], "labels")? };
    Ok((offs, labs))
}

/// The report array (NULL with length 0 = none wanted).
///
/// # Safety
/// `reports` holds `reports_len` writable entries.
unsafe fn reports_out<'a>(
    reports: *mut lshk_iul_report,
    reports_len: usize,
    rounds: u32,
) -> Result<&'a mut [lshk_iul_report]> {
    let rounds = rounds as usize;
    if !(reports.is_null() && reports_len == 0) && reports_len < rounds {
        bail!(
            BufferTooSmall,
            "reports holds {reports_len} entries, rounds = {rounds} needed"
        );
    }
    // SAFETY: caller contract (reports_len entries writable).
    unsafe { slice_out(reports, reports_len, "reports") }
}

fn report_to_c(r: &IulReport) -> lshk_iul_report {
    lshk_iul_report {
        round: r.round,
        kept: u32::from(r.kept),
        positives: r.positives,
        negatives: r.negatives,
        loss_before: r.loss_before,
        loss_after: r.loss_after,
        pos_collision_before: r.pos_collision_before,
        pos_collision_after: r.pos_collision_after,
        neg_collision_before: r.neg_collision_before,
        neg_collision_after: r.neg_collision_after,
        mean_candidates_before: r.mean_candidates_before,
        mean_candidates_after: r.mean_candidates_after,
        label_recall_before: r.label_recall_before,
        label_recall_after: r.label_recall_after,
    }
}

/// Learns the SimHash planes of a SimHash index with IUL (the HALOS paper
/// §3.5), then replaces them and rebuilds the tables (same range_bits,
/// bucket_cap and seed); the index then saves its planes in its file.
///
/// Per round: every training query's candidate set S is gathered from the
/// current tables; positive pairs (q, w_y) for labels y not in S with
/// q'.w'_y > t1, negative pairs (q, w_j) for j in S not a label with
/// q'.w'_j < t2 (q', w': the vectors the family hashes, after the index's
/// transform; W decoded from its storage); both sides are cut to the
/// smaller one by a seeded uniform subsample; then `epochs` epochs of
/// minibatch Adam on, per table l over its K planes θ,
/// mean over pairs of softplus(s) - y s with s = tanh(θ q') . tanh(θ w')
/// (the dot of two K-vectors, not divided by K; y = 1 positive, 0
/// negative); then the tables are rebuilt.
///
/// `queries`: `n` finite rows of `dim` floats (before the transform) at
/// `q_stride`. Query i's labels are
/// `labels[label_offsets[i] .. label_offsets[i + 1]]`, each < rows (n + 1
/// non-decreasing offsets from 0). `p` NULL = defaults. The first `rounds`
/// of the `reports_len` `reports` are written (NULL with 0: none).
/// Deterministic for a fixed seed. EXCLUSIVE access (see lshk_index); the
/// borrowed handles stay valid and see the new planes.
///
/// Errors (the index unchanged): NULL_POINTER, INVALID_HANDLE, UNSUPPORTED
/// (no LSH tables), INVALID_ARGUMENT (DWTA index, n = 0, q_stride < dim,
/// bad parameters, struct_size too small, unknown flags bits, label >=
/// rows, offsets not starting at 0 or decreasing, `reports` overlapping an
/// input), BUFFER_TOO_SMALL (reports_len < rounds), NON_FINITE (queries,
/// thresholds), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `queries` must hold (n - 1) * q_stride + dim floats, `label_offsets`
/// n + 1 values, `labels` `label_offsets[n]` values, `reports` reports_len
/// entries; `idx` must not be used concurrently.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_train_iul(
    idx: *mut lshk_index,
    queries: *const f32,
    n: usize,
    q_stride: usize,
    label_offsets: *const usize,
    labels: *const u32,
    p: *const lshk_iul_params,
    reports: *mut lshk_iul_report,
    reports_len: usize,
) -> lshk_status {
    boundary("lshk_index_train_iul", || {
        // SAFETY: forwarded caller contract (idx is NULL or from lshk).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        h.idx.lsh("lshk_index_train_iul")?;
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_params(p)? };
        if n == 0 {
            bail!(
                InvalidArgument,
                "n is 0: at least one training query is needed"
            );
        }
        let dim = h.idx.dim();
        let ql = crate::error::strided_len(n, dim, q_stride, "queries")?;
        // SAFETY: caller contract (ql floats readable).
        let q = unsafe { slice_in(queries, ql, "queries")? };
        let n1 = n
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "n + 1 overflows"))?;
        // SAFETY: caller contract (n + 1 offsets readable).
        let offs = unsafe { slice_in(label_offsets, n1, "label_offsets")? };
        if offs[0] != 0 {
            bail!(
                InvalidArgument,
                "label_offsets[0] is {}; it must be 0",
                offs[0]
            );
        }
        if let Some(i) = offs.windows(2).position(|w| w[1] < w[0]) {
            bail!(
                InvalidArgument,
                "label_offsets decrease at {}: {} then {}",
                i + 1,
                offs[i],
                offs[i + 1]
            );
        }
        // SAFETY: caller contract (label_offsets[n] labels readable).
        let labs = unsafe { slice_in(labels, offs[n], "labels")? };
        let rounds = cp.rounds as usize;
        if !(reports.is_null() && reports_len == 0) && reports_len < rounds {
            bail!(
                BufferTooSmall,
                "reports holds {reports_len} entries, rounds = {rounds} needed"
            );
        }
        // The reports may not overlap the inputs (checked on the raw
        // ranges, before a mutable slice aliasing them could exist).
        check_disjoint(
            &[span(reports, reports_len, "reports")?],
            &[
                span_of(q, "queries"),
                span_of(offs, "label_offsets"),
                span_of(labs, "labels"),
            ],
        )?;
        // SAFETY: caller contract (reports_len entries writable); checked
        // for NULL/alignment before any work.
        let out = unsafe { slice_out(reports, reports_len, "reports")? };
        let rp = to_rust(&cp);
        let reps = h
            .idx
            .train_iul_with(q, n, q_stride, offs, labs, &rp, &mut options(&cp))?;
        for (o, r) in out.iter_mut().zip(&reps) {
            *o = report_to_c(r);
        }
        Ok(())
    })
}

/// IUL without an index: trains `planes_in` (`planes_len` = K*L*dim
/// floats, the SimHash layout: plane l*K + k is bit k of table l) over
/// `n_rows` rows of `dim` floats (row r at `rows + r * row_stride`) and `n`
/// queries with CSR labels (as lshk_index_train_iul), with tables of
/// `2^range_bits` buckets (1..=24; codes folded as by lshk_tables_build; no
/// bucket cap). Writes the learned planes to `planes_out`
/// (`planes_out_len >= planes_len`) and `rounds` reports (as
/// lshk_index_train_iul). Rows and queries are used as given (no
/// transform); thresholds apply to their plain dot products. Deterministic
/// for a fixed seed; thread-safe (touches only its arguments).
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (dim 0, K not in 1..=32, L 0,
/// planes_len != K*L*dim, range_bits, n = 0, n_rows = 0, strides < dim,
/// labels >= n_rows, bad offsets, bad parameters, `planes_out` or
/// `reports` overlapping an input), BUFFER_TOO_SMALL
/// (planes_out_len, reports_len), NON_FINITE (planes, rows, queries,
/// thresholds), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// Every pointer must hold the number of elements its length argument
/// says (`rows`: (n_rows - 1) * row_stride + dim floats, `queries`:
/// (n - 1) * q_stride + dim, `label_offsets`: n + 1, `labels`:
/// `label_offsets[n]`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_simhash_train_iul(
    planes_in: *const f32,
    planes_len: usize,
    dim: usize,
    bits_per_table: u32,
    tables: u32,
    range_bits: u32,
    rows: *const f32,
    n_rows: usize,
    row_stride: usize,
    queries: *const f32,
    n: usize,
    q_stride: usize,
    label_offsets: *const usize,
    labels: *const u32,
    p: *const lshk_iul_params,
    planes_out: *mut f32,
    planes_out_len: usize,
    reports: *mut lshk_iul_report,
    reports_len: usize,
) -> lshk_status {
    boundary("lshk_simhash_train_iul", || {
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_params(p)? };
        // SAFETY: caller contract (planes_len floats readable).
        let pin = unsafe { slice_in(planes_in, planes_len, "planes_in")? };
        if n == 0 {
            bail!(
                InvalidArgument,
                "n is 0: at least one training query is needed"
            );
        }
        if n_rows == 0 {
            bail!(InvalidArgument, "n_rows is 0");
        }
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let rl = crate::error::strided_len(n_rows, dim, row_stride, "rows")?;
        // SAFETY: caller contract.
        let r = unsafe { slice_in(rows, rl, "rows")? };
        let ql = crate::error::strided_len(n, dim, q_stride, "queries")?;
        // SAFETY: caller contract.
        let q = unsafe { slice_in(queries, ql, "queries")? };
        let n1 = n
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "n + 1 overflows"))?;
        // SAFETY: forwarded caller contract.
        let (offs, labs) = unsafe { read_labels(label_offsets, labels, n1)? };
        // A planes_len that does not match the shape is INVALID_ARGUMENT
        // (reported by iul::train), not a too-small planes_out.
        let want = (bits_per_table as usize)
            .checked_mul(tables as usize)
            .and_then(|x| x.checked_mul(dim));
        if want == Some(planes_len) && planes_out_len < planes_len {
            bail!(
                BufferTooSmall,
                "planes_out holds {planes_out_len} floats, planes_len = {planes_len} needed"
            );
        }
        // The outputs may not overlap the inputs or each other (checked on
        // the raw ranges, before mutable slices aliasing them could exist).
        check_disjoint(
            &[
                span(planes_out, planes_out_len, "planes_out")?,
                span(reports, reports_len, "reports")?,
            ],
            &[
                span_of(pin, "planes_in"),
                span_of(r, "rows"),
                span_of(q, "queries"),
                span_of(offs, "label_offsets"),
                span_of(labs, "labels"),
            ],
        )?;
        // SAFETY: caller contract (planes_out_len floats writable).
        let pout = unsafe { slice_out(planes_out, planes_out_len, "planes_out")? };
        // SAFETY: forwarded caller contract.
        let out = unsafe { reports_out(reports, reports_len, cp.rounds)? };
        let shape = IulShape {
            dim,
            bits: bits_per_table,
            tables,
            range_bits,
            bucket_cap: 0,
            table_seed: 0,
        };
        let data = IulData {
            rows: r,
            n_rows,
            row_stride,
            queries: q,
            n_queries: n,
            q_stride,
            label_offsets: offs,
            labels: labs,
        };
        let (learned, reps) = crate::source::lsh::iul::train_with(
            pin,
            &shape,
            &data,
            &to_rust(&cp),
            &mut options(&cp),
        )?;
        pout[..learned.len()].copy_from_slice(&learned);
        for (o, r) in out.iter_mut().zip(&reps) {
            *o = report_to_c(r);
        }
        Ok(())
    })
}
