//! The row updates: the batch grouped by row (a stable counting sort),
//! the per-row rule ([`Rule`]: SGD here, Adam in `adam.rs`) and the
//! thread split at row boundaries ([`update_rows`]).

use std::cell::RefCell;

use crate::bail;
use crate::error::{strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::matmul::PREFETCH_ROWS;
use crate::kernels::train::{self as kt, Rows};
use crate::matmul::check_offsets;

use super::dq::check_ids;
use super::threads_for;

/// One batch of a row update: the inputs `q` (`nb` rows of `dim` at
/// stride `q_stride`), and per position `j` of the CSR `offsets` the row
/// `ids[j]` and its logit gradient `grad[j]` (from [`softmax_xent`](super::softmax_xent)).
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
pub(super) fn check_update(
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
pub(super) trait Rule: Sync {
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

/// Groups the batch by row and runs `rule` on every row that occurs, with
/// `threads` threads owning contiguous row ranges (see the module docs).
#[allow(clippy::too_many_arguments)]
pub(super) fn update_rows<R: Rule>(
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
