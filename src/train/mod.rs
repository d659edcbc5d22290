//! The backward pass of a sublinear output layer (issue 14, item 1): the
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

use std::cell::RefCell;

use crate::bail;
use crate::error::{checked_mul, strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::matmul::PREFETCH_ROWS;
use crate::kernels::train::{self as kt, AdamCoef, Rows};
use crate::matmul::check_offsets;

pub use crate::kernels::train::{exp_neg, EXP_REL};

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

/// Resolves a thread count (0 = every core) and caps it at `work` units.
fn threads_for(threads: usize, work: usize) -> usize {
    crate::par::threads(threads).min(work).max(1)
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

// ---------------------------------------------------------------- xent

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
/// threads (0 = every core); the result is the same for every tier and
/// thread count. Error bounds: [`XentBound`].
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
    let t = threads_for(threads, nb);
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

// ---------------------------------------------------------------- dq

/// The rows of W for [`gather_dq`]: f32, or bf16 bit patterns (widened to
/// f32 exactly).
#[derive(Clone, Copy, Debug)]
pub enum DqWeights<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

impl DqWeights<'_> {
    fn len(&self) -> usize {
        match self {
            DqWeights::F32(w) => w.len(),
            DqWeights::Bf16(w) => w.len(),
        }
    }
}

/// `IndexOutOfRange` naming the first id `>= rows` (position and sample).
fn check_ids(ids: &[u32], rows: usize, offsets: &[usize]) -> Result<()> {
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    if ids.is_empty() || max < rows {
        return Ok(());
    }
    let pos = ids.iter().position(|&id| id as usize >= rows).unwrap_or(0);
    let b = offsets.partition_point(|&o| o <= pos).saturating_sub(1);
    Err(Error::new(
        Status::IndexOutOfRange,
        format!(
            "index out of range: ids[{pos}] = {} (sample {b}) but W has {rows} rows",
            ids[pos]
        ),
    ))
}

/// The transposed gathered product: for each sample `b < nb`
/// (`nb = offsets.len() - 1`), `dq[b * dq_stride .. + dim] =
/// sum_j grad[j] * W[ids[j]]` over its segment, each element summed in
/// position order from +0 (an empty segment gives 0). W: `rows` rows of
/// `dim` elements at stride `w_stride`. Every tier and thread count gives
/// the same bits; against exact arithmetic each element is within
/// `gamma(n) * sum_j |g_j w_jk|` (`n` the segment length; one more
/// rounding per product: `gamma(n + 1)`).
#[allow(clippy::too_many_arguments)]
pub fn gather_dq(
    tier: Isa,
    threads: usize,
    w: DqWeights<'_>,
    rows: usize,
    dim: usize,
    w_stride: usize,
    grad: &[f32],
    ids: &[u32],
    offsets: &[usize],
    dq: &mut [f32],
    dq_stride: usize,
) -> Result<()> {
    isa::check_supported(tier)?;
    if dim == 0 {
        bail!(InvalidArgument, "dim must be >= 1");
    }
    let need = strided_len(rows, dim, w_stride, "w")?;
    if w.len() < need {
        bail!(
            BufferTooSmall,
            "`w` holds {} elements, {rows} rows of stride {w_stride} need {need}",
            w.len()
        );
    }
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nb + 1 >= 1 entries");
    }
    let nb = offsets.len() - 1;
    check_offsets(offsets, nb, ids.len(), "ids")?;
    if grad.len() != ids.len() {
        bail!(
            InvalidArgument,
            "`grad` has {} entries, `ids` {}; they must be equal",
            grad.len(),
            ids.len()
        );
    }
    let dql = strided_len(nb, dim, dq_stride, "dq")?;
    if dq.len() < dql {
        bail!(
            BufferTooSmall,
            "`dq` holds {} floats, {nb} rows of stride {dq_stride} need {dql}",
            dq.len()
        );
    }
    check_ids(ids, rows, offsets)?;
    let ks = kt::kernels(tier);
    let t = threads_for(threads, nb);
    let run = |b0: usize, b1: usize, out: &mut [f32]| {
        for b in b0..b1 {
            let (s, e) = (offsets[b], offsets[b + 1]);
            let o = &mut out[(b - b0) * dq_stride..(b - b0) * dq_stride + dim];
            // SAFETY: dim >= 1, o holds dim floats, grad/ids segments
            // match, ids < rows and w spans the strided matrix (checked
            // above), tier supported.
            unsafe {
                match w {
                    DqWeights::F32(w) => (ks.dq_f32)(
                        &Rows {
                            w,
                            stride: w_stride,
                            dim,
                            scales: &[],
                        },
                        &grad[s..e],
                        &ids[s..e],
                        o,
                    ),
                    DqWeights::Bf16(w) => (ks.dq_bf16)(
                        &Rows {
                            w,
                            stride: w_stride,
                            dim,
                            scales: &[],
                        },
                        &grad[s..e],
                        &ids[s..e],
                        o,
                    ),
                }
            }
        }
    };
    if t == 1 {
        run(0, nb, dq);
        return Ok(());
    }
    let cuts = segment_cuts(offsets, t);
    let mut jobs = Vec::with_capacity(t);
    let mut rest = &mut dq[..dql];
    for k in 0..t {
        let (b0, b1) = (cuts[k], cuts[k + 1]);
        // The last rows of dq may be shorter than a stride, and the last
        // threads may get no sample.
        let take = if k + 1 == t {
            rest.len()
        } else {
            ((b1 - b0) * dq_stride).min(rest.len())
        };
        let (mine, r) = rest.split_at_mut(take);
        rest = r;
        jobs.push((b0, b1, mine));
    }
    crate::par::map(jobs, |(b0, b1, mine)| run(b0, b1, mine));
    Ok(())
}

// ---------------------------------------------------------------- updates

/// One batch of a row update: the inputs `q` (`nb` rows of `dim` at
/// stride `q_stride`), and per position `j` of the CSR `offsets` the row
/// `ids[j]` and its logit gradient `grad[j]` (from [`softmax_xent`]).
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub q: &'a [f32],
    pub q_stride: usize,
    pub ids: &'a [u32],
    pub offsets: &'a [usize],
    pub grad: &'a [f32],
}

#[derive(Default)]
struct Group {
    order: Vec<u32>,
    tmp: Vec<u32>,
    sample: Vec<u32>,
    gs: Vec<f32>,
    ss: Vec<u32>,
    starts: Vec<usize>,
    rowid: Vec<u32>,
    hist: Vec<u32>,
}

/// Positions `0..ids.len()` ordered by row id, equal ids in increasing
/// position: a stable LSD counting sort on the id, 11 bits per pass, as
/// many passes as the largest id needs (2 below 2^22 rows). The order is
/// exactly that of sorting the unique keys `id << 32 | position` (which
/// the first version did with `sort_unstable`, 1.5-2x slower here).
/// `order` and `tmp` have room for the positions (reserved by the caller).
fn order_by_row(ids: &[u32], order: &mut Vec<u32>, tmp: &mut Vec<u32>) {
    const BITS: u32 = 11;
    const MASK: u32 = (1 << BITS) - 1;
    let n = ids.len();
    order.clear();
    order.extend(0..n as u32);
    tmp.clear();
    tmp.resize(n, 0);
    let max = ids.iter().copied().max().unwrap_or(0);
    let passes = (u32::BITS - max.leading_zeros()).div_ceil(BITS).max(1);
    let mut hist = [0usize; 1 << BITS];
    for p in 0..passes {
        let shift = p * BITS;
        hist.fill(0);
        for &pos in order.iter() {
            hist[((ids[pos as usize] >> shift) & MASK) as usize] += 1;
        }
        let mut sum = 0;
        for h in hist.iter_mut() {
            let c = *h;
            *h = sum;
            sum += c;
        }
        for &pos in order.iter() {
            let d = ((ids[pos as usize] >> shift) & MASK) as usize;
            tmp[hist[d]] = pos;
            hist[d] += 1;
        }
        std::mem::swap(order, tmp);
    }
}

/// [`update_rows`] groups by one counting sort over all `rows` ids (a
/// histogram of `rows` counters) when `rows <= 4 n + 65,536` for `n`
/// positions, else by [`order_by_row`]'s radix passes over the positions.
const DIRECT_GROUP_ROWS_PER_POS: usize = 4;
const DIRECT_GROUP_MIN_ROWS: usize = 65_536;

/// The grouping of [`update_rows`] in one counting sort keyed by the whole
/// row id: counts per row, their prefix sums (which also give `rowid` and
/// `starts` in ascending row order), then one scatter of every position's
/// gradient and sample in position order, so equal ids keep increasing
/// positions: exactly the order of [`order_by_row`], without its second
/// pass and without gathering through a permutation.
fn group_direct(b: &Batch, rows: usize, g: &mut Group) -> Result<()> {
    let n = b.ids.len();
    reserve(&mut g.hist, rows)?;
    g.hist.resize(rows, 0);
    for &id in b.ids {
        g.hist[id as usize] += 1;
    }
    let mut sum = 0u32;
    for (r, h) in g.hist.iter_mut().enumerate() {
        let c = *h;
        if c != 0 {
            g.starts.push(sum as usize);
            g.rowid.push(r as u32);
        }
        *h = sum;
        sum += c;
    }
    g.gs.resize(n, 0.0);
    g.ss.resize(n, 0);
    for s in 0..b.offsets.len() - 1 {
        for j in b.offsets[s]..b.offsets[s + 1] {
            let d = &mut g.hist[b.ids[j] as usize];
            g.gs[*d as usize] = b.grad[j];
            g.ss[*d as usize] = s as u32;
            *d += 1;
        }
    }
    Ok(())
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

fn reserve<T>(v: &mut Vec<T>, n: usize) -> Result<()> {
    v.clear();
    v.try_reserve(n)
        .map_err(|_| Error::new(Status::AllocationFailed, "row update: scratch"))
}

/// Checks W and the batch; returns nb.
fn check_update(
    w_len: usize,
    rows: usize,
    dim: usize,
    w_stride: usize,
    b: &Batch,
) -> Result<usize> {
    if dim == 0 {
        bail!(InvalidArgument, "dim must be >= 1");
    }
    let need = strided_len(rows, dim, w_stride, "w")?;
    if w_len < need {
        bail!(
            BufferTooSmall,
            "`w` holds {w_len} floats, {rows} rows of stride {w_stride} need {need}"
        );
    }
    if b.offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nb + 1 >= 1 entries");
    }
    let nb = b.offsets.len() - 1;
    let ql = strided_len(nb, dim, b.q_stride, "q")?;
    if b.q.len() < ql {
        bail!(
            BufferTooSmall,
            "`q` holds {} floats, {nb} rows of stride {} need {ql}",
            b.q.len(),
            b.q_stride
        );
    }
    check_offsets(b.offsets, nb, b.ids.len(), "ids")?;
    if b.grad.len() != b.ids.len() {
        bail!(
            InvalidArgument,
            "`grad` has {} entries, `ids` {}; they must be equal",
            b.grad.len(),
            b.ids.len()
        );
    }
    if b.ids.len() > u32::MAX as usize {
        bail!(
            InvalidArgument,
            "{} positions: at most 2^32 - 1",
            b.ids.len()
        );
    }
    check_ids(b.ids, rows, b.offsets)?;
    if let Some(j) = b.grad.iter().position(|v| !v.is_finite()) {
        bail!(
            NonFinite,
            "grad[{j}] is {} (finite values needed)",
            b.grad[j]
        );
    }
    crate::error::check_finite_rows(b.q, nb, dim, b.q_stride, "q")?;
    Ok(nb)
}

/// What one row update does with the row's summed gradient `acc`.
trait Rule: Sync {
    /// Per-row state arrays split with W (Adam: m, v, steps); `()` for SGD.
    type Part<'a>: Send;
    /// Splits off rows `0..n` of the state (n rows).
    fn split<'a>(part: Self::Part<'a>, n: usize, dim: usize) -> (Self::Part<'a>, Self::Part<'a>);
    /// Prefetches row `r` (relative to the part) of the state.
    fn prefetch(&self, part: &Self::Part<'_>, r: usize, dim: usize, pf: kt::PrefetchFn);
    /// Applies the update to row `r` (relative) of W (`w`, dim floats).
    /// Applies the update to row `r` (relative) of W (`w`, dim floats),
    /// whose gradient is `sum_t g[t] q[s[t]]` (summed by the kernel).
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        part: &mut Self::Part<'_>,
        r: usize,
        dim: usize,
        w: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    );
}

struct Sgd {
    f: kt::SgdFn,
    lr: f32,
}

impl Rule for Sgd {
    type Part<'a> = ();
    fn split<'a>(_: Self::Part<'a>, _: usize, _: usize) -> (Self::Part<'a>, Self::Part<'a>) {
        ((), ())
    }
    fn prefetch(&self, _: &(), _: usize, _: usize, _: kt::PrefetchFn) {}
    fn apply(
        &self,
        _: &mut (),
        _: usize,
        _: usize,
        w: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    ) {
        // SAFETY: w holds dim = q.dim values, g and s match, every s[t] is
        // a sample < nb and q spans nb strided rows (checked), tier
        // supported (checked).
        unsafe { (self.f)(w, q, g, s, self.lr) }
    }
}

struct AdamRule {
    f: kt::AdamFn,
    p: AdamParams,
}

/// Adam's per-row state, split with W: rows of m and v (dim each), steps.
struct AdamPart<'a> {
    m: &'a mut [f32],
    v: &'a mut [f32],
    t: &'a mut [u32],
}

impl Rule for AdamRule {
    type Part<'a> = AdamPart<'a>;
    fn split<'a>(p: Self::Part<'a>, n: usize, dim: usize) -> (Self::Part<'a>, Self::Part<'a>) {
        let (m0, m1) = p.m.split_at_mut(n * dim);
        let (v0, v1) = p.v.split_at_mut(n * dim);
        let (t0, t1) = p.t.split_at_mut(n);
        (
            AdamPart {
                m: m0,
                v: v0,
                t: t0,
            },
            AdamPart {
                m: m1,
                v: v1,
                t: t1,
            },
        )
    }
    fn prefetch(&self, p: &AdamPart<'_>, r: usize, dim: usize, pf: kt::PrefetchFn) {
        let bytes = (dim * 4).min(crate::kernels::matmul::PREFETCH_MAX_BYTES);
        pf(p.m.as_ptr().wrapping_add(r * dim).cast(), bytes);
        pf(p.v.as_ptr().wrapping_add(r * dim).cast(), bytes);
    }
    fn apply(
        &self,
        p: &mut AdamPart<'_>,
        r: usize,
        dim: usize,
        w: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    ) {
        let t = p.t[r].saturating_add(1);
        p.t[r] = t;
        let c = self.p.coef(t);
        let (m, v) = (
            &mut p.m[r * dim..(r + 1) * dim],
            &mut p.v[r * dim..(r + 1) * dim],
        );
        // SAFETY: w, m and v hold dim = q.dim values, g and s match, every
        // s[t] is a sample < nb and q spans nb strided rows (checked), tier
        // supported (checked).
        unsafe { (self.f)(w, m, v, q, g, s, &c) }
    }
}

/// Groups the batch by row and runs `rule` on every row that occurs, with
/// `threads` threads owning contiguous row ranges (see the module docs).
#[allow(clippy::too_many_arguments)]
fn update_rows<R: Rule>(
    tier: Isa,
    threads: usize,
    w: &mut [f32],
    rows: usize,
    dim: usize,
    w_stride: usize,
    b: &Batch,
    rule: &R,
    state: R::Part<'_>,
) -> Result<()> {
    let ks = kt::kernels(tier);
    let n = b.ids.len();
    let nb = b.offsets.len() - 1;
    GROUP.with(|g| {
        let g = &mut *g.borrow_mut();
        reserve(&mut g.order, n)?;
        reserve(&mut g.tmp, n)?;
        reserve(&mut g.sample, n)?;
        reserve(&mut g.gs, n)?;
        reserve(&mut g.ss, n)?;
        reserve(&mut g.starts, n + 1)?;
        reserve(&mut g.rowid, n)?;
        if rows
            <= DIRECT_GROUP_ROWS_PER_POS
                .saturating_mul(n)
                .saturating_add(DIRECT_GROUP_MIN_ROWS)
        {
            group_direct(b, rows, g)?;
        } else {
            order_by_row(b.ids, &mut g.order, &mut g.tmp);
            for s in 0..nb {
                let len = b.offsets[s + 1] - b.offsets[s];
                g.sample.extend(std::iter::repeat_n(s as u32, len));
            }
            for (t, &pos) in g.order.iter().enumerate() {
                let j = pos as usize;
                let id = b.ids[j];
                g.gs.push(b.grad[j]);
                g.ss.push(g.sample[j]);
                if t == 0 || g.rowid.last() != Some(&id) {
                    g.starts.push(t);
                    g.rowid.push(id);
                }
            }
        }
        g.starts.push(n);
        let groups = g.starts.len() - 1;
        if groups == 0 {
            return Ok(());
        }
        let th = threads_for(threads, groups);
        let (rowid, gs, ss, starts) = (&g.rowid, &g.gs, &g.ss, &g.starts);
        let id_of = |grp: usize| rowid[grp] as usize;
        let qrows = Rows {
            w: b.q,
            stride: b.q_stride,
            dim,
            scales: &[],
        };
        // Thread k: groups cut[k] .. cut[k + 1], rows first_row(k) ..
        // first_row(k + 1) of W and of the state.
        let cut = |k: usize| groups * k / th;
        let first_row = |k: usize| match k {
            0 => 0,
            _ if k == th => rows,
            _ => id_of(cut(k)),
        };
        let work =
            |g0: usize, g1: usize, row0: usize, wpart: &mut [f32], mut spart: R::Part<'_>| {
                let pf_bytes = (dim * 4).min(crate::kernels::matmul::PREFETCH_MAX_BYTES);
                for grp in g0..(g0 + PREFETCH_ROWS).min(g1) {
                    let r = id_of(grp) - row0;
                    (ks.prefetch)(wpart.as_ptr().wrapping_add(r * w_stride).cast(), pf_bytes);
                    rule.prefetch(&spart, r, dim, ks.prefetch);
                }
                for grp in g0..g1 {
                    if grp + PREFETCH_ROWS < g1 {
                        let r = id_of(grp + PREFETCH_ROWS) - row0;
                        (ks.prefetch)(wpart.as_ptr().wrapping_add(r * w_stride).cast(), pf_bytes);
                        rule.prefetch(&spart, r, dim, ks.prefetch);
                    }
                    let (s, e) = (starts[grp], starts[grp + 1]);
                    let r = id_of(grp) - row0;
                    rule.apply(
                        &mut spart,
                        r,
                        dim,
                        &mut wpart[r * w_stride..r * w_stride + dim],
                        &qrows,
                        &gs[s..e],
                        &ss[s..e],
                    );
                }
            };
        if th == 1 {
            work(0, groups, 0, w, state);
            return Ok(());
        }
        let mut jobs = Vec::with_capacity(th);
        let (mut wrest, mut srest) = (&mut *w, state);
        for k in 0..th {
            let (r0, r1) = (first_row(k), first_row(k + 1));
            let wtake = if k + 1 == th {
                wrest.len()
            } else {
                (r1 - r0) * w_stride
            };
            let (wmine, wr) = wrest.split_at_mut(wtake);
            wrest = wr;
            let (smine, sr) = R::split(srest, r1 - r0, dim);
            srest = sr;
            jobs.push((cut(k), cut(k + 1), r0, wmine, smine));
        }
        crate::par::map(jobs, |(g0, g1, r0, wmine, smine)| {
            work(g0, g1, r0, wmine, smine)
        });
        Ok(())
    })
}

/// Plain SGD on the rows of the batch: every row `r` that occurs gets
/// `W[r] = W[r] - lr * G_r` with `G_r = sum_{j: ids[j] = r} grad[j] *
/// q[b(j)]` (summed in position order, each element from +0, product and
/// sum rounded separately; the update rounds the product and the
/// difference). A row that occurs twice in one sample counts twice. W is
/// `rows` rows of `dim` floats at stride `w_stride`; `grad` and `q` must be
/// finite (`NonFinite`), `lr` finite. Same bits for every tier and thread
/// count (0 = every core).
#[allow(clippy::too_many_arguments)]
pub fn rows_update_sgd(
    tier: Isa,
    threads: usize,
    w: &mut [f32],
    rows: usize,
    dim: usize,
    w_stride: usize,
    batch: &Batch,
    lr: f32,
) -> Result<()> {
    isa::check_supported(tier)?;
    if !lr.is_finite() {
        bail!(NonFinite, "lr is {lr} (a finite learning rate is needed)");
    }
    check_update(w.len(), rows, dim, w_stride, batch)?;
    let rule = Sgd {
        f: kt::kernels(tier).sgd,
        lr,
    };
    update_rows(tier, threads, w, rows, dim, w_stride, batch, &rule, ())
}

/// Adam's hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamParams {
    /// Learning rate (finite).
    pub lr: f32,
    /// First-moment decay, `0 <= beta1 < 1`.
    pub beta1: f32,
    /// Second-moment decay, `0 <= beta2 < 1`.
    pub beta2: f32,
    /// Added to `sqrt(v_hat)`, `> 0`, finite.
    pub eps: f32,
}

impl Default for AdamParams {
    /// `lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8` (Kingma & Ba).
    fn default() -> Self {
        AdamParams {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

impl AdamParams {
    /// Checks the documented ranges.
    pub fn check(&self) -> Result<()> {
        if !self.lr.is_finite() {
            bail!(
                NonFinite,
                "lr is {} (a finite learning rate is needed)",
                self.lr
            );
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                bail!(InvalidArgument, "{name} is {b}: it must be in [0, 1)");
            }
        }
        if !(self.eps > 0.0 && self.eps.is_finite()) {
            bail!(
                InvalidArgument,
                "eps is {}: it must be finite and > 0",
                self.eps
            );
        }
        Ok(())
    }

    /// The coefficients of a row's `t`-th update (`t >= 1`): the bias
    /// corrections `1 / (1 - beta^t)` in f64 (`beta^t` by `f64::powi`,
    /// repeated squaring: a few multiplications where `powf` took most of
    /// a row's time in the L3 regime), rounded to f32.
    pub fn coef(&self, t: u32) -> AdamCoef {
        let e = t.min(i32::MAX as u32) as i32;
        let corr = |b: f32| (1.0 / (1.0 - (b as f64).powi(e))) as f32;
        AdamCoef {
            lr: self.lr,
            beta1: self.beta1,
            one_minus_beta1: 1.0 - self.beta1,
            beta2: self.beta2,
            one_minus_beta2: 1.0 - self.beta2,
            c1: corr(self.beta1),
            c2: corr(self.beta2),
            eps: self.eps,
        }
    }
}

/// Lazy Adam over the rows of W: per element first and second moments
/// (`m`, `v`, 0 at the start) and per row a step count `t_r`. A step
/// touches only the rows that occur in the batch: row `r` gets its summed
/// gradient `G_r` (as in [`rows_update_sgd`]), `t_r += 1`, and the update
/// of [`crate::kernels::train::AdamFn`] with the bias corrections of its
/// own count `t_r` (so a row's first update is a full-size Adam step,
/// whenever it happens; TensorFlow's LazyAdam corrects with the global step
/// instead). Rows not in the batch keep their moments (no decay while
/// untouched).
#[derive(Clone, Debug)]
pub struct Adam {
    rows: usize,
    dim: usize,
    params: AdamParams,
    m: Vec<f32>,
    v: Vec<f32>,
    steps: Vec<u32>,
}

impl Adam {
    /// State for `rows` rows of `dim` values (`dim >= 1`): 8 bytes per
    /// element plus 4 per row, zeroed.
    pub fn new(rows: usize, dim: usize, params: AdamParams) -> Result<Adam> {
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        params.check()?;
        let n = checked_mul(rows, dim, "rows * dim")?;
        crate::error::check_fits_memory((n as u128) * 8 + rows as u128 * 4, "the Adam state")?;
        Ok(Adam {
            rows,
            dim,
            params,
            m: crate::error::try_vec(n, "Adam first moments")?,
            v: crate::error::try_vec(n, "Adam second moments")?,
            steps: crate::error::try_vec(rows, "Adam step counts")?,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn params(&self) -> AdamParams {
        self.params
    }
    /// Changes the hyper-parameters for the next steps (e.g. a learning
    /// rate schedule); the moments and counts are kept.
    pub fn set_params(&mut self, p: AdamParams) -> Result<()> {
        p.check()?;
        self.params = p;
        Ok(())
    }
    /// First moments, row-major (`rows * dim`).
    pub fn m(&self) -> &[f32] {
        &self.m
    }
    /// Second moments, row-major (`rows * dim`).
    pub fn v(&self) -> &[f32] {
        &self.v
    }
    /// Step count of each row.
    pub fn steps(&self) -> &[u32] {
        &self.steps
    }

    /// One lazy Adam step on W (`rows` x `dim` as given to [`Adam::new`],
    /// stride `w_stride`) for `batch`; same checks as [`rows_update_sgd`].
    /// Same bits for every tier and thread count (0 = every core).
    pub fn step(
        &mut self,
        tier: Isa,
        threads: usize,
        w: &mut [f32],
        w_stride: usize,
        batch: &Batch,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        check_update(w.len(), self.rows, self.dim, w_stride, batch)?;
        let rule = AdamRule {
            f: kt::kernels(tier).adam,
            p: self.params,
        };
        let part = AdamPart {
            m: &mut self.m,
            v: &mut self.v,
            t: &mut self.steps,
        };
        update_rows(
            tier, threads, w, self.rows, self.dim, w_stride, batch, &rule, part,
        )
    }
}
