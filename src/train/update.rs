//! The row updates: the batch grouped by row (a stable counting sort),
//! the per-row rule ([`Rule`]: SGD here, Adam in `adam.rs`) and the
//! thread split at row boundaries ([`update_rows`]).

use std::cell::RefCell;

use crate::bail;
use crate::error::{strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::train::{self as kt, Rows};
use crate::matmul::check_offsets;

use super::dq::check_ids;
use crate::par::threads_for;

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
    /// Zero between calls ([`group_direct`]).
    hist: Vec<u32>,
    /// Zero between calls ([`group_direct`]): one byte a row, padded to
    /// a multiple of 8.
    seen: Vec<u8>,
}

/// Positions `0..ids.len()` ordered by row id, equal ids in increasing
/// position: a stable LSD counting sort on the id, 11 bits per pass, as
/// many passes as the largest id needs (2 below 2^22 rows). The order is
/// exactly that of sorting the unique keys `id << 32 | position`, which
/// `sort_unstable` does more slowly (benches/train.md, "Grouping by row").
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

/// [`update_rows`] groups by one counting sort keyed by the whole row id
/// ([`group_direct`]) when `rows <= 4 n + 65,536` for `n` positions, else
/// by [`order_by_row`]'s radix passes over the positions. The direct sort
/// wins while its counters stay in L2; with many more rows than positions
/// (670,091 rows, n = 65,536: 2.7 MB of counters, no longer in L2) the
/// radix passes win (benches/train.md, "Grouping by row"). The direct one
/// keeps a counter and a byte per row in the thread's scratch, hence the
/// bound in `n`.
const DIRECT_GROUP_ROWS_PER_POS: usize = 4;
const DIRECT_GROUP_MIN_ROWS: usize = 65_536;

fn use_direct(rows: usize, n: usize) -> bool {
    rows <= DIRECT_GROUP_ROWS_PER_POS
        .saturating_mul(n)
        .saturating_add(DIRECT_GROUP_MIN_ROWS)
}

/// Groups the batch by row into `g` (`rowid`, `starts` without its final
/// `n`, `gs`, `ss`), directly or by the radix passes: the same result.
/// `g`'s vectors are cleared and have room for `n` (+1) entries.
fn group(b: &Batch, rows: usize, g: &mut Group, direct: bool) -> Result<()> {
    if direct {
        return group_direct(b, rows, g);
    }
    order_by_row(b.ids, &mut g.order, &mut g.tmp);
    fill_samples(b.offsets, &mut g.sample);
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
    Ok(())
}

/// The grouping of [`update_rows`] in one counting sort keyed by the whole
/// row id, in time `O(n + rows / 8)`: per position the row's counter is
/// incremented and its byte set in a byte map of the rows (plain stores:
/// a bitmap's read-modify-write of one word by neighbouring ids is a
/// chain of store-to-load forwards); the map, read 8 bytes at a time and
/// cleared, gives the touched rows in ascending order, hence `rowid`,
/// `starts` and each row's first slot; one scatter of every position's
/// gradient and sample in position order (so equal ids keep increasing
/// positions: exactly the order of [`order_by_row`]); then the touched
/// counters are reset. `hist` (one counter a row) and `seen` (one byte a
/// row, padded to 8) are zero between calls, so nothing of size `rows` is
/// cleared: a memset of the counters and a branch per row over them would
/// be a large share of an L3 SGD update (benches/train.md, "Grouping by
/// row").
fn group_direct(b: &Batch, rows: usize, g: &mut Group) -> Result<()> {
    let n = b.ids.len();
    grow_zeroed(&mut g.hist, rows)?;
    grow_zeroed(&mut g.seen, rows.next_multiple_of(8))?;
    let (hist, seen) = (&mut g.hist[..rows], &mut g.seen[..rows.next_multiple_of(8)]);
    for &id in b.ids {
        let id = id as usize;
        // SAFETY: every id is < rows (checked by the caller); hist holds
        // rows counters and seen at least rows bytes.
        unsafe {
            *hist.get_unchecked_mut(id) += 1;
            *seen.get_unchecked_mut(id) = 1;
        }
    }
    // Room for every group: the caller reserved n (+1) entries.
    g.starts.resize(n + 1, 0);
    g.rowid.resize(n, 0);
    let (starts, rowid) = (&mut g.starts[..], &mut g.rowid[..]);
    let (mut sum, mut groups) = (0u32, 0usize);
    for (wi, word) in seen.chunks_exact_mut(8).enumerate() {
        // Eight rows' bytes at once; byte `b` (little-endian) is row
        // `8 wi + b`.
        let mut x = u64::from_le_bytes((&*word).try_into().unwrap());
        if x == 0 {
            continue;
        }
        word.fill(0);
        while x != 0 {
            let byte = (x.trailing_zeros() / 8) as usize;
            x &= !(0xffu64 << (8 * byte));
            let r = wi * 8 + byte;
            starts[groups] = sum as usize;
            rowid[groups] = r as u32;
            groups += 1;
            let c = hist[r];
            hist[r] = sum;
            sum += c;
        }
    }
    g.starts.truncate(groups);
    g.rowid.truncate(groups);
    g.gs.resize(n, 0.0);
    g.ss.resize(n, 0);
    let (gs, ss) = (&mut g.gs[..n], &mut g.ss[..n]);
    let (ids, grad) = (b.ids, &b.grad[..n]);
    for s in 0..b.offsets.len() - 1 {
        for j in b.offsets[s]..b.offsets[s + 1] {
            // SAFETY: j < n (offsets checked against ids); ids[j] < rows
            // (above); hist[id] is a slot < n (the prefix sums of the
            // counts), gs and ss hold n entries.
            unsafe {
                let d = hist.get_unchecked_mut(*ids.get_unchecked(j) as usize);
                *gs.get_unchecked_mut(*d as usize) = *grad.get_unchecked(j);
                *ss.get_unchecked_mut(*d as usize) = s as u32;
                *d += 1;
            }
        }
    }
    for &r in &g.rowid {
        hist[r as usize] = 0;
    }
    Ok(())
}

/// Appends the sample of every position of the CSR `offsets` (`s`,
/// `offsets[s + 1] - offsets[s]` times, for each `s`) to `out`.
fn fill_samples(offsets: &[usize], out: &mut Vec<u32>) {
    for (s, o) in offsets.windows(2).enumerate() {
        out.extend(std::iter::repeat_n(s as u32, o[1] - o[0]));
    }
}

/// Grows `v` to at least `len` zeros (keeping its zero contents).
fn grow_zeroed<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> Result<()> {
    if v.len() < len {
        v.try_reserve(len - v.len())
            .map_err(|_| Error::new(Status::AllocationFailed, "row update: scratch"))?;
        v.resize(len, T::default());
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

/// What one row update does with the rows of a thread's part.
pub(super) trait Rule: Sync {
    /// Per-row state arrays split with W (Adam: m, v, steps); `()` for SGD.
    type Part<'a>: Send;
    /// Splits off rows `0..n` of the state (n rows).
    fn split<'a>(part: Self::Part<'a>, n: usize, dim: usize) -> (Self::Part<'a>, Self::Part<'a>);
    /// Updates every group of `grp` (rows of the part `w`, whose first row
    /// is `grp.row0`), each with its gradient `sum_t g[t] q[s[t]]` (summed
    /// by the kernel).
    fn apply_rows(
        &self,
        part: &mut Self::Part<'_>,
        w: &mut [f32],
        w_stride: usize,
        grp: &kt::Groups<'_>,
        q: &Rows<'_, f32>,
    );
}

/// SGD on the grouped rows ([`kt::SgdRowsFn`]: the same bits as the
/// position-by-position pass).
struct SgdRows {
    f: kt::SgdRowsFn,
    lr: f32,
}

impl Rule for SgdRows {
    type Part<'a> = ();
    fn split<'a>(_: Self::Part<'a>, _: usize, _: usize) -> (Self::Part<'a>, Self::Part<'a>) {
        ((), ())
    }
    fn apply_rows(
        &self,
        _: &mut (),
        w: &mut [f32],
        w_stride: usize,
        grp: &kt::Groups<'_>,
        q: &Rows<'_, f32>,
    ) {
        // SAFETY: every group's row is in the part (update_rows cuts the
        // parts at group boundaries) and holds dim = q.dim values, the
        // positions are inside g and s, every s[t] is a sample < nb and q
        // spans nb strided rows (checked), tier supported (checked).
        unsafe { (self.f)(w, w_stride, grp, q, self.lr) }
    }
}

/// Groups the batch by row and runs `rule` on every row that occurs, with
/// `threads` threads owning contiguous row ranges (see the module docs).
#[allow(clippy::too_many_arguments)]
pub(super) fn update_rows<R: Rule>(
    threads: usize,
    min_positions_per_thread: usize,
    w: &mut [f32],
    rows: usize,
    dim: usize,
    w_stride: usize,
    b: &Batch,
    rule: &R,
    state: R::Part<'_>,
) -> Result<()> {
    let n = b.ids.len();
    GROUP.with(|g| {
        let g = &mut *g.borrow_mut();
        reserve(&mut g.order, n)?;
        reserve(&mut g.tmp, n)?;
        reserve(&mut g.sample, n)?;
        reserve(&mut g.gs, n)?;
        reserve(&mut g.ss, n)?;
        reserve(&mut g.starts, n + 1)?;
        reserve(&mut g.rowid, n)?;
        group(b, rows, g, use_direct(rows, n))?;
        g.starts.push(n);
        let groups = g.starts.len() - 1;
        if groups == 0 {
            return Ok(());
        }
        let th = threads_for(threads, groups.min(n.div_ceil(min_positions_per_thread)));
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
                let grp = kt::Groups {
                    row: &rowid[g0..g1],
                    start: &starts[g0..=g1],
                    row0,
                    g: gs,
                    s: ss,
                };
                rule.apply_rows(&mut spart, wpart, w_stride, &grp, &qrows);
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

thread_local! {
    static SEQ: RefCell<Seq> = RefCell::new(Seq::default());
}

/// The scratch of [`rows_update_sgd`]: each position's sample, and the
/// positions ordered by owning thread (increasing within each thread).
#[derive(Default)]
struct Seq {
    sample: Vec<u32>,
    pos: Vec<u32>,
    /// [`row_cuts`]' sorted sample of the ids.
    quantiles: Vec<u32>,
}

/// The first row of each of `th` threads' row ranges (`th + 1` entries:
/// 0, ..., `rows`), cut so that the threads get about equal numbers of
/// positions: quantiles of up to 4,096 evenly spaced ids, sorted (`tmp` is
/// scratch). Any cuts give the same result; these only balance the work.
fn row_cuts(ids: &[u32], rows: usize, th: usize, tmp: &mut Vec<u32>) -> Vec<usize> {
    let n = ids.len();
    let m = n.min(4096);
    tmp.clear();
    tmp.extend((0..m).map(|i| ids[i * n / m]));
    tmp.sort_unstable();
    let mut cuts = Vec::with_capacity(th + 1);
    cuts.push(0);
    for k in 1..th {
        let c = (tmp[k * m / th] as usize).max(*cuts.last().unwrap());
        cuts.push(c);
    }
    cuts.push(rows);
    cuts
}

/// Plain SGD on the rows of the batch, applied position by position: for
/// every position `j` in increasing order, the row `r = ids[j]` gets
/// `W[r] = W[r] - (lr * grad[j]) * q[b(j)]` (`b(j)` the sample whose
/// segment holds `j`; the step `lr * grad[j]` rounded, then per element the
/// product and the difference). A row that occurs at several positions, in
/// one sample or several, receives each update in position order: in exact
/// arithmetic this is `W[r] - lr * sum_j grad[j] q[b(j)]`, the batch's
/// gradient step; in f32 it differs from summing first only by the
/// rounding of the intermediate rows. Rows that do not occur are not
/// touched. W is `rows` rows of `dim` floats at stride `w_stride`; `grad`
/// and `q` must be finite (`NonFinite`), `lr` finite.
///
/// Two ways to run it, with the same bits (every row sees the same
/// sequence of operations): when rows repeat often (`2 n >= rows`), the
/// batch is grouped by row (as for Adam) and each row is read and written
/// once, its positions applied in registers; otherwise the positions are
/// applied in batch order, one read and write of the row each (one pass,
/// like the forward gathered matmul, nothing sorted). Threads own
/// contiguous ranges of rows and apply their rows' positions in increasing
/// order: the same bits for every tier, path and thread count (0 = every
/// core).
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
    sgd_with(tier, threads, w, rows, dim, w_stride, batch, lr, None)
}

/// Whether [`rows_update_sgd`] groups the batch by row first: when
/// `2 n >= rows` for `n` positions (uniform ids would then repeat at a
/// fifth of the positions or more, and each repeat saves a row's read and
/// write): grouping pays on w2v-gutenberg's training step (131,072
/// positions over 35,388 rows) and costs on the L3 benchmark's batch
/// (4,096 positions over 16,384 rows) (benches/train.md, "Grouping by
/// row").
fn sgd_grouped(rows: usize, n: usize) -> bool {
    n.saturating_mul(2) >= rows
}

/// [`rows_update_sgd`] with the path forced (`Some(true)`: grouped by row,
/// `Some(false)`: position by position) or chosen (`None`); every choice
/// gives the same bits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgd_with(
    tier: Isa,
    threads: usize,
    w: &mut [f32],
    rows: usize,
    dim: usize,
    w_stride: usize,
    batch: &Batch,
    lr: f32,
    grouped: Option<bool>,
) -> Result<()> {
    isa::check_supported(tier)?;
    if !lr.is_finite() {
        bail!(NonFinite, "lr is {lr} (a finite learning rate is needed)");
    }
    check_update(w.len(), rows, dim, w_stride, batch)?;
    let n = batch.ids.len();
    if n == 0 {
        return Ok(());
    }
    if grouped.unwrap_or_else(|| sgd_grouped(rows, n)) {
        let rule = SgdRows {
            f: kt::kernels(tier).sgd_rows,
            lr,
        };
        return update_rows(
            threads,
            SGD_MIN_POSITIONS_PER_THREAD,
            w,
            rows,
            dim,
            w_stride,
            batch,
            &rule,
            (),
        );
    }
    let f = kt::kernels(tier).sgd_seq;
    let q = Rows {
        w: batch.q,
        stride: batch.q_stride,
        dim,
        scales: &[],
    };
    SEQ.with(|sc| {
        let sc = &mut *sc.borrow_mut();
        reserve(&mut sc.sample, n)?;
        reserve(&mut sc.pos, n)?;
        fill_samples(batch.offsets, &mut sc.sample);
        let th = threads_for(threads, n.div_ceil(SGD_MIN_POSITIONS_PER_THREAD));
        // Thread k's positions pos[a..b] with rows from row0 in `mine`.
        let run = |pos: &[u32], row0: usize, mine: &mut [f32]| {
            let sq = kt::SgdSeq {
                pos,
                ids: batch.ids,
                grad: batch.grad,
                sample: &sc.sample,
                row0,
            };
            // SAFETY: the positions `pos` have ids in row0 .. row0 + the
            // rows of `mine` (one thread: every position and all of W;
            // several: W split at the cuts the positions were partitioned
            // by), each row holding dim = q.dim values; every index is < n
            // = ids.len() = grad.len() = sample.len(); samples are < nb and
            // q spans nb strided rows (checked); tier supported (checked).
            unsafe { f(mine, w_stride, &sq, &q, lr) }
        };
        if th == 1 {
            // The identity order, without the split's buffers.
            sc.pos.extend(0..n as u32);
            run(&sc.pos, 0, w);
            return Ok(());
        }
        let (cuts, start) = {
            let cuts = row_cuts(batch.ids, rows, th, &mut sc.quantiles);
            // Stable partition of the positions by owning thread.
            let owner = |id: u32| cuts[1..th].partition_point(|&c| c <= id as usize);
            let mut start = vec![0usize; th + 1];
            for &id in batch.ids {
                start[owner(id) + 1] += 1;
            }
            for k in 0..th {
                start[k + 1] += start[k];
            }
            sc.pos.resize(n, 0);
            let mut next = start.clone();
            for (j, &id) in batch.ids.iter().enumerate() {
                let k = owner(id);
                sc.pos[next[k]] = j as u32;
                next[k] += 1;
            }
            (cuts, start)
        };
        let mut jobs = Vec::with_capacity(th);
        let mut rest = &mut *w;
        for k in 0..th {
            let take = if k + 1 == th {
                rest.len()
            } else {
                (cuts[k + 1] - cuts[k]) * w_stride
            };
            let (mine, r) = rest.split_at_mut(take);
            rest = r;
            jobs.push((k, mine, start[k], start[k + 1]));
        }
        let pos = &sc.pos;
        // One job runs on the calling thread. Thread k's positions have
        // ids in cuts[k] .. cuts[k + 1], the rows of `mine`.
        crate::par::map(jobs, |(k, mine, a, b)| run(&pos[a..b], cuts[k], mine));
        Ok(())
    })
}

/// [`rows_update_sgd`] gives each thread at least this many positions:
/// threads are spawned per call, which costs more than a small batch's
/// update takes (the L3 benchmark's 4,096 positions are slower on 2 threads
/// than on one: benches/train.md, "Threads:").
const SGD_MIN_POSITIONS_PER_THREAD: usize = 16_384;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// SGD's two paths (grouped by row, position by position) give the
    /// same bits on every tier and thread count, on batches where rows
    /// repeat a lot, a little and not at all, dims covering every block
    /// split and tail, and both groupings (direct and radix).
    #[test]
    fn sgd_paths_agree() {
        let mut r = SplitMix64::new(13);
        let unif = |r: &mut SplitMix64| (r.next_f64_open() * 2.0 - 1.0) as f32;
        let cases: &[(usize, usize, usize, usize)] = &[
            (7, 3, 5, 9),
            (50, 16, 20, 30),
            (2000, 33, 12, 40),
            (300, 112, 40, 200),
            (90, 255, 6, 50),
            (400_000, 5, 9, 20),
            (3000, 9, 120, 700),
            (20_000, 4, 200, 600),
            // Every count of held vectors of q (0-8) on both widths.
            (300, 27, 10, 30),
            (300, 45, 10, 30),
            (500, 50, 10, 60),
            (300, 60, 10, 30),
            (500, 70, 8, 40),
            (600, 85, 8, 40),
            (300, 100, 6, 30),
            (1000, 128, 10, 100),
        ];
        for &(rows, dim, nb, k) in cases {
            let stride = dim + 1;
            let w0: Vec<f32> = (0..rows * stride).map(|_| unif(&mut r)).collect();
            let q: Vec<f32> = (0..nb * dim).map(|_| unif(&mut r)).collect();
            let mut offsets = vec![0usize];
            for b in 0..nb {
                let len = if b % 4 == 1 {
                    0
                } else {
                    1 + r.below(k as u64) as usize
                };
                offsets.push(offsets[b] + len);
            }
            let n = offsets[nb];
            let pool = 1 + r.below(rows as u64);
            let ids: Vec<u32> = (0..n).map(|_| r.below(pool) as u32).collect();
            let grad: Vec<f32> = (0..n).map(|_| unif(&mut r)).collect();
            let b = Batch {
                q: &q,
                q_stride: dim,
                ids: &ids,
                offsets: &offsets,
                grad: &grad,
            };
            let mut want = w0.clone();
            let s = Isa::Scalar;
            sgd_with(s, 1, &mut want, rows, dim, stride, &b, 0.3, Some(false)).unwrap();
            for t in Isa::supported() {
                for th in [1, 2, 3] {
                    for grouped in [false, true] {
                        let mut w = w0.clone();
                        let g = Some(grouped);
                        sgd_with(t, th, &mut w, rows, dim, stride, &b, 0.3, g).unwrap();
                        assert!(
                            w.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{t:?} threads {th} grouped {grouped} rows {rows} dim {dim}"
                        );
                    }
                }
            }
        }
    }

    fn reserve_all(g: &mut Group, n: usize) {
        for v in [
            &mut g.order,
            &mut g.tmp,
            &mut g.sample,
            &mut g.ss,
            &mut g.rowid,
        ] {
            reserve(v, n).unwrap();
        }
        reserve(&mut g.gs, n).unwrap();
        reserve(&mut g.starts, n + 1).unwrap();
    }

    /// The direct grouping (whose counters and bitmap persist between
    /// calls) and the radix one give the same groups, over batches of
    /// several row counts in a row, ids up to 2^24 (two and three radix
    /// passes), repeated ids and empty samples.
    #[test]
    fn direct_and_radix_grouping_agree() {
        let mut r = SplitMix64::new(7);
        let mut direct = Group::default();
        let mut radix = Group::default();
        for round in 0..60 {
            let rows = match round % 4 {
                0 => 1 + r.below(50) as usize,
                1 => 1 + r.below(5_000) as usize,
                2 => 1 << 22,
                _ => (1 << 24) - r.below(1000) as usize,
            };
            let nb = 1 + r.below(9) as usize;
            let mut offsets = vec![0usize];
            for s in 0..nb {
                let len = if s % 4 == 2 { 0 } else { r.below(300) as usize };
                offsets.push(offsets[s] + len);
            }
            let n = offsets[nb];
            let ids: Vec<u32> = (0..n)
                .map(|_| {
                    if round % 3 == 0 {
                        r.below(rows.min(40) as u64) as u32
                    } else {
                        r.below(rows as u64) as u32
                    }
                })
                .collect();
            let grad: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let b = Batch {
                q: &[],
                q_stride: 1,
                ids: &ids,
                offsets: &offsets,
                grad: &grad,
            };
            reserve_all(&mut direct, n);
            reserve_all(&mut radix, n);
            group(&b, rows, &mut direct, true).unwrap();
            group(&b, rows, &mut radix, false).unwrap();
            assert_eq!(direct.rowid, radix.rowid, "round {round}");
            assert_eq!(direct.starts, radix.starts, "round {round}");
            assert_eq!(direct.gs, radix.gs, "round {round}");
            assert_eq!(direct.ss, radix.ss, "round {round}");
            // Positions of a row in increasing order, rows ascending.
            assert!(direct.rowid.windows(2).all(|w| w[0] < w[1]));
            assert!(direct.hist.iter().all(|&c| c == 0), "round {round}");
            assert!(direct.seen.iter().all(|&c| c == 0), "round {round}");
        }
    }
}
