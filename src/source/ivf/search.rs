//! Answering queries: list estimates, adaptive or fixed list selection,
//! int8 / PQ4 scoring of the visited lists, exact re-ranking (module docs
//! of `ivf`).
//!
//! Over ~900 lines on purpose: it is one query's path, stage after stage
//! (centroid estimates, fixed or adaptive list choice, the int8, PQ4 and
//! PQ4 -> int8 scans, the exact re-rank) over one shared [`Scratch`];
//! batches are in `batch.rs`, building in `build.rs`. Split it by code
//! (`Codes`) if another code is added.

use super::batch::BATCH;
use super::*;
use crate::kernels::select::{self, set_bits, set_bits_in};
use crate::matmul::chunk_floor;
use crate::par::{Spare, Warm};

#[derive(Default)]
pub(super) struct Scratch {
    pub(super) cscore: Vec<f32>,
    pub(super) lists: Vec<u32>,
    lscore: Vec<f32>,
    pub(super) qq: Option<QQuery>,
    approx: Vec<f32>,
    pos: Vec<u32>,
    pub(super) cand: Vec<u32>,
    pub(super) cand_sc: Vec<f32>,
    cand_ids: Vec<u32>,
    exact: Vec<f32>,
    top: TopK,
    /// Min-heap of the k best approximate scores (adaptive selection).
    theta: Vec<f32>,
    /// Lists still to visit, as [`rank_key`]s (adaptive selection), or
    /// every list's key ([`Ivf::select_fixed`]'s linear-time selection).
    pub(super) order: Vec<u64>,
    /// The other buffer of [`sort_rank_keys`].
    pub(super) order_tmp: Vec<u64>,
    /// The query's PQ tables ([`Codes::Pq4`]).
    lut: Option<Pq4Lut>,
    /// `<[q, 1], c_l>` per list before the spread term ([`Codes::Pq4`]).
    cbase: Vec<f32>,
    /// The 4-bit scores' optimistic keys, beside `approx` (written per
    /// list by [`Ivf::scan_lists`]: one contiguous run a list).
    keys: Vec<f32>,
    /// The keys' factor on a row's coding error ([`Ivf::key_factor`]).
    key_c: f32,
    /// The selection masks ([`theta_update`], [`Ivf::adaptive_order`]).
    pub(super) masks: Vec<u64>,
    /// The scratch of [`Ivf::search_batch`] (taken out while it runs).
    pub(super) batch: super::batch::Batch,
    /// The query's list spreads from the lists' shapes
    /// ([`Ivf::adaptive_rest`]).
    pub(super) qspread: Vec<f32>,
    /// The candidates' direction rows and their projections, when the
    /// shaped order gathers them ([`Ivf::shaped_order`]).
    dpos: Vec<u32>,
    dproj: Vec<f32>,
    /// Where `cscore` holds the 4-bit upper bounds of the lists not in
    /// `known` ([`Ivf::list_bounds`]): the variant and the query's norm
    /// that make them exact; `None` where every estimate is exact.
    pub(super) bounded: Option<(Variant, f32)>,
    /// The lists whose estimate in `cscore` is exact (bits), when
    /// `bounded`.
    pub(super) known: Vec<u64>,
    /// The lists to score exactly, and their int8 scores
    /// ([`Ivf::refine_lists`]).
    pub(super) rlist: Vec<u32>,
    rscore: Vec<f32>,
}

/// With the lists' shapes, adaptive selection computes a list's shaped
/// spread only where the plain test passes at this many times the reach
/// (the projections cost `LIST_DIRS` int8 dot products a list): on
/// w2v-gutenberg about 60 % of the lists, and the recall of the shaped rule
/// within 0.001 of computing them all (docs/ivf.md, "Lists with a shape").
const SHAPE_PREFILTER: f32 = 1.75;
/// A batch shares one pass over every list's shape directions among the
/// queries with at least `1 / SHAPE_GATHER` of the lists as candidates
/// (four queries per load of the directions); a query alone, and the
/// others, gather their candidates' directions (the same bits either way).
const SHAPE_GATHER: usize = 8;

/// A list's estimate from its centroid's int8 score `c`: `c + (bias + |q|
/// spread)`, in this order (the 4-bit bounds add the same term in the same
/// order, and a list made exact must get these bits).
#[inline(always)]
fn estimate_of(c: f32, bias: f32, qn: f32, spread: f32) -> f32 {
    c + (bias + qn * spread)
}

/// What gathering a row of int8 codes costs beyond reading it, in bytes
/// of a run: the shaped order scores every list's directions in one run
/// rather than gather its candidates' where the gather would cost as much
/// (its sum and scale are loaded alone, its start is scattered).
const GATHER_ROW_BYTES: usize = 64;

/// The lists adaptive selection tests after its first two
/// ([`Ivf::rest_masks`]): their bits in `s.masks[..nw]`, and whether the
/// test is the shaped one.
#[derive(Clone, Copy)]
pub(super) struct RestMasks {
    shaped: bool,
    nw: usize,
}

/// How many bits of `masks` are set.
fn count_set(masks: &[u64]) -> usize {
    masks.iter().map(|w| w.count_ones() as usize).sum()
}

thread_local! {
    pub(super) static SCRATCH: Warm<Scratch> = Warm::new(&SPARE_SCRATCH);
}

static SPARE_SCRATCH: Spare<Scratch> = Spare::new();

/// Up to this many lists are chosen with a heap (cheap when few lists
/// beat the running threshold), more with a linear-time selection.
pub(super) const SELECT_BY_HEAP: usize = 32;

pub(super) fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// Keeps, in order, the first of the entries of `cand` (with their scores
/// in `sc`) that map to each id by `id_of`, skipping [`TOPK_PAD_ID`]
/// entries; returns how many remain at the front. `keys` is scratch.
pub(super) fn keep_first_per_id(
    keys: &mut Vec<u64>,
    cand: &mut [u32],
    sc: &mut [f32],
    id_of: impl Fn(u32) -> u32,
) -> usize {
    keys.clear();
    keys.extend(
        cand.iter()
            .enumerate()
            .filter(|e| *e.1 != TOPK_PAD_ID)
            .map(|(i, &c)| (u64::from(id_of(c)) << 32) | i as u64),
    );
    keys.sort_unstable();
    // Mark the later copies (same id, later entry) with a pad id.
    for w in 1..keys.len() {
        if keys[w] >> 32 == keys[w - 1] >> 32 {
            cand[keys[w] as u32 as usize] = TOPK_PAD_ID;
        }
    }
    let mut j = 0;
    for i in 0..cand.len() {
        if cand[i] != TOPK_PAD_ID {
            cand[j] = cand[i];
            sc[j] = sc[i];
            j += 1;
        }
    }
    j
}

/// The quantised-query slot `qq`, (re)made for rows of `dp` bytes when it
/// is empty or was sized for another index (the scratch is per thread, not
/// per index).
pub(super) fn query_slot(qq: &mut Option<QQuery>, dp: usize) -> &mut QQuery {
    if qq.as_ref().is_none_or(|x| x.dim_pad() != dp) {
        *qq = Some(QQuery::new(dp).expect("dim_pad of stored codes is valid"));
    }
    qq.as_mut().unwrap()
}

/// How many approximate candidates of a query with `n` are re-ranked: at
/// least `k`, never more than there are candidates (a huge rerank must not
/// size the scratch).
pub(super) fn rerank_len(sp: &SearchParams, k: usize, n: usize) -> usize {
    (sp.rerank as usize).max(k).min(n.max(k))
}

/// The 4-bit codes' shortlists are chosen by an optimistic key, not by
/// the approximate score alone. A row's 4-bit score misses its exact one
/// by `<q, r - r̂>` (`r̂` its coded residual), at most `|q| e` with `e =
/// |r - r̂|` the row's coding error, and of spread about `|q| e /
/// sqrt(dim)` in a random direction. That error is not of one size: a row
/// far out of its list (a hub row of a heavy-tailed layer, often a true
/// top-k row) is coded worst, scores too low and drops out of a shortlist
/// of fixed length however many lists are visited: a recall ceiling. The
/// key `approx + G |q| e / sqrt(dim)` ranks such a row by what it may be
/// worth, so the shortlist keeps it. `G` is 3.5 for `Codes::Pq4I8`'s int8
/// stage (256 rows whose int8 scores then sort the rest out) and 2 for
/// `Codes::Pq4`'s exact re-rank, where a larger `G` would crowd out rows
/// whose approximate score alone is right (measured: docs/ivf.md, "No
/// ceilings").
pub(super) const PQ4_I8_KEY_G: f32 = 3.5;
/// See [`PQ4_I8_KEY_G`].
pub(super) const PQ4_KEY_G: f32 = 2.0;
/// `Codes::Pq4`'s exact re-rank keeps at least `n / PQ4_RERANK_PER` of the
/// `n` rows scanned: without an int8 stage, rows whose approximate
/// scores all lie within the 4-bit error of the k-th (a layer with no
/// hub rows) are a fixed fraction of the scan, and a fixed `rerank`
/// would again stop recall short of 1 as the scan grows.
pub(super) const PQ4_RERANK_PER: usize = 64;

/// `|q|`, summed in order in f32 (the same expression for every path).
pub(super) fn norm(q: &[f32]) -> f32 {
    q.iter().map(|&v| v * v).sum::<f32>().sqrt()
}

/// Larger score first, then smaller id (list ranking; the oracle of
/// [`rank_key`] in the tests).
#[cfg(test)]
pub(super) fn by_rank(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// The index of the largest value (the first one on ties; the estimates
/// are finite), by the tier's kernel (`kernels::select`).
#[inline]
pub(super) fn argmax_first(sel: &select::Kernels, v: &[f32]) -> usize {
    (sel.argmax)(v)
}

/// A sort key that orders `(score, id)` as [`by_rank`] does (score
/// descending, then id ascending) for finite scores.
pub(super) use crate::matmul::rank_key_total as rank_key;

/// Sorts `keys` ascending, as `sort_unstable` does, when keys with the
/// same high half come in ascending order of their low half (the
/// [`rank_key`]s of lists pushed in id order; a batch's `(list << 32) |
/// query` pairs pushed query by query): a stable radix sort on the high
/// half (8-bit digits, least significant first, skipping a digit that
/// every key shares), which leaves equal high halves in the order they
/// came in. No comparisons, so no mispredicted branches on the few hundred
/// keys of an adaptive query. `tmp` is the other buffer.
pub(super) fn sort_rank_keys(keys: &mut Vec<u64>, tmp: &mut Vec<u64>) {
    let n = keys.len();
    if n < 64 {
        keys.sort_unstable();
        return;
    }
    let mut hist = [[0u32; 256]; 4];
    for &x in keys.iter() {
        let h = (x >> 32) as u32;
        for (d, hd) in hist.iter_mut().enumerate() {
            hd[((h >> (8 * d)) & 0xff) as usize] += 1;
        }
    }
    tmp.clear();
    tmp.resize(n, 0);
    for (d, hd) in hist.iter().enumerate() {
        if hd.iter().any(|&c| c as usize == n) {
            continue;
        }
        let mut start = [0u32; 256];
        let mut acc = 0;
        for (st, &c) in start.iter_mut().zip(hd) {
            *st = acc;
            acc += c;
        }
        for &x in keys.iter() {
            let b = ((x >> (32 + 8 * d)) & 0xff) as usize;
            tmp[start[b] as usize] = x;
            start[b] += 1;
        }
        std::mem::swap(keys, tmp);
    }
}

/// A visited list of at least this many rows has its rows tested by the
/// [`select`] kernel; a shorter one by chunks of 16 inline, which costs
/// less than the kernel's call on a few dozen rows, while the kernel wins
/// on a list of hundreds (`benches/qdot.md`, "The selection masks").
const GT_KERNEL_MIN_ROWS: usize = 128;

/// Adds the scores `sc` of a visited list to the `k` best of `heap`
/// (adaptive selection's running k-th score). Only a score above the
/// current k-th changes it: a vector compare of the rows against the k-th
/// score first (16 rows at a time inline on short lists, the whole list
/// as bits by `kernels::select` into `masks` on long ones), then only the
/// rows that pass it, one by one against the k-th score as it rises. With
/// `multi` (label-trained lists) a score already held is skipped: a row
/// in two lists has the same int8 score in both and counts once (a
/// distinct row with exactly the same score is skipped too, which only
/// lowers the bound).
pub(super) fn theta_update(
    heap: &mut Vec<f32>,
    k: usize,
    sc: &[f32],
    multi: bool,
    sel: &select::Kernels,
    masks: &mut Vec<u64>,
) {
    let mut th = theta_of(heap, k);
    let full = heap.len() >= k;
    let mut push = |x: f32, th: &mut f32| {
        if x > *th && !(multi && heap.contains(&x)) {
            theta_push(heap, k, x);
            *th = theta_of(heap, k);
        }
    };
    let mut inline = |part: &[f32], th: &mut f32| {
        for c in part.chunks(16) {
            if c.iter().fold(false, |a, &x| a | (x > *th)) {
                for &x in c {
                    if x > *th {
                        push(x, th);
                    }
                }
            }
        }
    };
    // Before k scores are held every row passes, and the kernel tests the
    // whole list against one threshold: a first list would push each of
    // its rows. A floor instead, where the list has room for it
    // (`chunk_floor`: k distinct rows reach it, so the k best of heap and
    // list all do, and a row below it never enters); a row at it may
    // (ties), so the masks test `> next_down(floor)`, which is `>= floor`.
    // Not with `multi`: its skipped duplicates could leave fewer than k
    // distinct scores.
    let (part, cut) = if let Some(floor) = (!full && !multi).then(|| chunk_floor(sc, k)).flatten() {
        (sc, floor.next_down())
    } else {
        // Otherwise the first rows go inline, the k-th score rising chunk
        // by chunk, so that the masks of the rest pass only contenders.
        let head = if full {
            0
        } else {
            sc.len().min(GT_KERNEL_MIN_ROWS)
        };
        inline(&sc[..head], &mut th);
        let rest = &sc[head..];
        if rest.len() < GT_KERNEL_MIN_ROWS {
            inline(rest, &mut th);
            return;
        }
        (rest, th)
    };
    let nw = select::words(part.len());
    grow(masks, nw);
    (sel.gt_masks)(part, cut, &mut masks[..nw]);
    for j in set_bits(&masks[..nw]) {
        let x = part[j];
        if x > th {
            push(x, &mut th);
        }
    }
}

/// A list's optimistic estimate, `e_l + (reach - 1) |q| spread_l`, from its
/// estimate `e`, `extra = (reach - 1) |q|` and its spread: the one
/// expression every adaptive path compares with the k-th score, so that a
/// batch and a query alone decide on the same bits.
#[inline(always)]
pub(super) fn optimistic(e: f32, extra: f32, spread: f32) -> f32 {
    e + extra * spread
}

/// The k-th best score pushed so far (`-inf` before `k` scores).
pub(super) fn theta_of(heap: &[f32], k: usize) -> f32 {
    if heap.len() < k {
        f32::NEG_INFINITY
    } else {
        heap[0]
    }
}

/// Keeps the `k` largest scores in a binary min-heap.
pub(super) fn theta_push(heap: &mut Vec<f32>, k: usize, x: f32) {
    if heap.len() < k {
        heap.push(x);
        let mut i = heap.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if heap[p] <= heap[i] {
                break;
            }
            heap.swap(p, i);
            i = p;
        }
    } else if k > 0 && x > heap[0] {
        heap[0] = x;
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < k && heap[l] < heap[m] {
                m = l;
            }
            if r < k && heap[r] < heap[m] {
                m = r;
            }
            if m == i {
                break;
            }
            heap.swap(m, i);
            i = m;
        }
    }
}

impl Ivf {
    /// The top-`k` of `W q + b` for `nq` queries (`q` rows at `q_stride`),
    /// into `out_ids` / `out_scores` (`nq * k` each): largest first, equal
    /// scores by smaller id, padded with [`TOPK_PAD_ID`] / `-inf` when the
    /// visited lists hold fewer than `k` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        self.search_stats(
            isa::active(),
            q,
            nq,
            q_stride,
            k,
            sp,
            out_ids,
            out_scores,
            None,
        )
    }

    /// [`Ivf::search`] on one tier, with optional per-call counts (summed
    /// over the queries).
    #[allow(clippy::too_many_arguments)]
    pub fn search_stats(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut SearchStats>,
    ) -> Result<()> {
        self.check_search(tier, q, nq, q_stride, k, sp, out_ids, out_scores)?;
        let mut st = SearchStats::default();
        if k > 0 {
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                if nq >= 2 {
                    // Blocks of queries share their passes over the
                    // centroids and lists (module `batch`); same results.
                    for a in (0..nq).step_by(BATCH) {
                        let nb = BATCH.min(nq - a);
                        self.search_batch(
                            tier,
                            &q[a * q_stride..],
                            nb,
                            q_stride,
                            k,
                            sp,
                            &mut s,
                            &mut out_ids[a * k..(a + nb) * k],
                            &mut out_scores[a * k..(a + nb) * k],
                            &mut st,
                            None,
                        );
                    }
                    return;
                }
                for i in 0..nq {
                    self.search_one(
                        tier,
                        &q[i * q_stride..i * q_stride + self.dim],
                        k,
                        sp,
                        &mut s,
                        &mut out_ids[i * k..(i + 1) * k],
                        &mut out_scores[i * k..(i + 1) * k],
                        &mut st,
                    );
                }
            });
        }
        if let Some(o) = stats {
            *o = st;
        }
        Ok(())
    }

    /// The checks of [`Ivf::search_stats`]: a supported tier, valid
    /// parameters, buffers that hold `nq` queries and `nq * k` answers,
    /// finite queries within the index's range.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_search(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &[u32],
        out_scores: &[f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        sp.check()?;
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        if q.len() < ql {
            bail!(
                BufferTooSmall,
                "`q` holds {} floats, {nq} queries of stride {q_stride} need {ql}",
                q.len()
            );
        }
        let need = checked_mul(nq, k, "nq * k")?;
        if out_ids.len() < need || out_scores.len() < need {
            bail!(
                BufferTooSmall,
                "outputs hold {} ids and {} scores, nq * k = {need} needed",
                out_ids.len(),
                out_scores.len()
            );
        }
        crate::error::check_finite_rows(q, nq, self.dim, q_stride, "q")?;
        self.check_query_range(q, nq, q_stride)
    }

    /// Quantises `q` into `s.qq` and writes every list's estimate
    /// `e_l = <[q, 1], c_l> + |q| spread_l` into `s.cscore[..nlist]` (with
    /// [`Codes::Pq4`] also the query's tables and `s.cbase`). Returns `|q|`.
    pub(super) fn list_estimates(&self, v: Variant, q: &[f32], s: &mut Scratch) -> f32 {
        let nlist = self.nlist;
        query_slot(&mut s.qq, self.cq.dim_pad())
            .set(q)
            .expect("queries are checked finite");
        let qq = s.qq.as_ref().unwrap();
        grow(&mut s.cscore, nlist);
        // Row-major even where the index has panels: with one query the
        // panel kernel loads every code byte once too, and is no faster
        // (benches/qdot.md, "The centroid pass"); batches use the panels.
        self.cq
            .score_run_with(v, 0, nlist, qq, None, &mut s.cscore[..nlist])
            .expect("centroid run");
        let qn = norm(q);
        self.finish_estimates(q, qn, s);
        qn
    }

    /// The rest of [`Ivf::list_estimates`] once `s.cscore[..nlist]` holds
    /// the centroids' int8 scores `<q, c_l>` of the query `q` (norm `qn`):
    /// adds the list bias and spread terms, and with [`Codes::Pq4`] sets the
    /// query's tables and `s.cbase`.
    pub(super) fn finish_estimates(&self, q: &[f32], qn: f32, s: &mut Scratch) {
        let nlist = self.nlist;
        if let Some(pq) = &self.pq {
            // The list constants of the residual scores, and the query's
            // tables (once per query, shared by every list).
            grow(&mut s.cbase, nlist);
            for ((d, &c), &b) in s.cbase[..nlist]
                .iter_mut()
                .zip(&s.cscore[..nlist])
                .zip(&self.cbias)
            {
                *d = c + b;
            }
            if s.lut.as_ref().is_none_or(|l| l.m() != pq.m()) {
                s.lut = Some(Pq4Lut::new(pq.m()).expect("m of stored codes is valid"));
            }
            s.lut
                .as_mut()
                .unwrap()
                .set(pq.codebook(), q)
                .expect("queries are checked finite");
        }
        let cs = &mut s.cscore[..nlist];
        for ((c, b), t) in cs.iter_mut().zip(&self.cbias).zip(&self.spread) {
            *c = estimate_of(*c, *b, qn, *t);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn search_one(
        &self,
        tier: Isa,
        q: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let v = Variant::of(tier).expect("tier checked");
        s.bounded = None;
        let bounds = self.pq.is_none() && (sp.reach > 0.0 || sp.nprobe == 1);
        let qn = match bounds.then(|| self.list_bounds(v, q, s)).flatten() {
            Some(qn) => qn,
            None => self.list_estimates(v, q, s),
        };
        self.visit_and_finish(tier, v, q, qn, k, sp, s, out_ids, out_scores, st);
    }

    /// A single query's start from the 4-bit centroids ([`Ivf::cnib`],
    /// where the index has them and `v` a kernel for them), for adaptive
    /// selection and for a fixed one of one list (with `nprobe` 2 or more
    /// the lists whose bound reaches the `nprobe`-th exact estimate are
    /// many, and scoring them again costs more than the pass saves:
    /// docs/ivf.md, "The centroid pass in 4 bits"): every list's
    /// estimate in `s.cscore` is then an upper bound of what
    /// [`Ivf::list_estimates`] gives (the same `cbias` and spread terms
    /// added in the same order to a bound of the int8 score, and f32
    /// addition is monotone), none known exact yet (`s.bounded`). The
    /// selection scores from the int8 codes each list whose bound reaches a
    /// test ([`Ivf::first_exact`], [`Ivf::plain_masks`]), so it visits
    /// the lists it would from the exact estimates: a list whose bound fails
    /// a test fails it exactly, the tests only grow stricter, and the
    /// lists that pass are compared by exact estimates. Returns the
    /// query's norm; `None` (the estimates still to compute) without the
    /// 4-bit centroids, or where the bound is not computed (a zero or tiny
    /// query: [`NibPanels::bounds`]).
    pub(super) fn list_bounds(&self, v: Variant, q: &[f32], s: &mut Scratch) -> Option<f32> {
        let nib = self.cnib.as_ref().filter(|_| NibPanels::has_kernel(v))?;
        query_slot(&mut s.qq, self.cq.dim_pad())
            .set(q)
            .expect("queries are checked finite");
        let qn = norm(q);
        grow(&mut s.cscore, nib.padded_rows());
        if !nib
            .bounds(v, s.qq.as_ref().unwrap(), qn, &mut s.cscore)
            .expect("centroid bounds")
        {
            // A zero or tiny query: the int8 pass.
            return None;
        }
        let nw = select::words(self.nlist);
        s.known.clear();
        s.known.resize(nw, 0);
        s.bounded = Some((v, qn));
        Some(qn)
    }

    /// Makes exact ([`Ivf::list_estimates`]' value) the estimates of the
    /// lists in `s.rlist` (each not yet in `s.known`), from one gather of
    /// their int8 centroid codes; marks them known.
    pub(super) fn refine_lists(&self, v: Variant, qn: f32, s: &mut Scratch) {
        let m = s.rlist.len();
        if m == 0 {
            return;
        }
        grow(&mut s.rscore, m);
        self.cq
            .score_rows_at(
                v,
                &s.rlist,
                s.qq.as_ref().unwrap(),
                None,
                &mut s.rscore[..m],
            )
            .expect("centroid rows");
        for (&l, &c) in s.rlist.iter().zip(&s.rscore[..m]) {
            let l = l as usize;
            // The expression of `finish_estimates`, bit for bit.
            s.cscore[l] = estimate_of(c, self.cbias[l], qn, self.spread[l]);
            s.known[l / 64] |= 1u64 << (l % 64);
        }
    }

    /// The first list of adaptive selection from bounded estimates: the
    /// best bound's list is scored exactly, then every list whose bound
    /// reaches that exact estimate; the best of those that still reach it
    /// (ties by smaller id) is the best exact estimate of all, since every
    /// other list's is below its bound, below that estimate.
    pub(super) fn first_exact(
        &self,
        v: Variant,
        sel: &select::Kernels,
        qn: f32,
        s: &mut Scratch,
    ) -> usize {
        let top = argmax_first(sel, &s.cscore[..self.nlist]);
        s.rlist.clear();
        s.rlist.push(top as u32);
        self.refine_lists(v, qn, s);
        let nw = self.plain_masks(sel, 0.0, s.cscore[top], s);
        let cs = &s.cscore[..self.nlist];
        set_bits(&s.masks[..nw])
            .map(|l| rank_key(cs[l], l as u32))
            .min()
            .map_or(top, |key| key as u32 as usize)
    }

    /// With `s.masks[..nw]` the plain test `s.cscore[l] + extra spread_l >=
    /// th` of every list, where some estimates are bounds (`s.bounded`):
    /// scores exactly ([`Ivf::refine_lists`]) the passing lists not yet
    /// known, and clears the bits of those whose exact estimate fails, so
    /// that the masks are the test of the exact estimates. Nothing to do
    /// when every estimate is exact.
    fn refine_masks(&self, extra: f32, th: f32, nw: usize, s: &mut Scratch) {
        let Some((v, qn)) = s.bounded else {
            return;
        };
        s.rlist.clear();
        let unknown = s.masks[..nw]
            .iter()
            .zip(&s.known[..nw])
            .map(|(&m, &k)| m & !k);
        s.rlist.extend(set_bits_in(unknown).map(|l| l as u32));
        self.refine_lists(v, qn, s);
        for &l in &s.rlist {
            let l = l as usize;
            // The test of the `opt_masks` kernels, bit for bit.
            if optimistic(s.cscore[l], extra, self.spread[l]) < th {
                s.masks[l / 64] &= !(1u64 << (l % 64));
            }
        }
    }

    /// With the list estimates of `q` in `s` ([`Ivf::list_estimates`]):
    /// visits its lists, scores their rows and writes its top `k`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn visit_and_finish(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        qn: f32,
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let nprobe = (sp.nprobe as usize).min(self.nlist);
        if self.pq.is_some() {
            s.key_c = self.key_factor(q, sp);
        }
        let n = if sp.reach > 0.0 {
            self.visit_adaptive(tier, v, q, qn, k, nprobe, sp.reach, s, st)
        } else {
            self.visit_fixed(tier, v, q, nprobe, s, st)
        };
        st.scanned += n as u64;
        let approx = std::mem::take(&mut s.approx);
        let mut pos = std::mem::take(&mut s.pos);
        self.finish(
            tier,
            q,
            k,
            sp,
            &approx[..n],
            &mut pos[..n],
            s,
            out_ids,
            out_scores,
            st,
        );
        s.approx = approx;
        s.pos = pos;
    }

    /// The top `k` of one query from the approximate scores `approx` of
    /// the rows at positions `pos` it visited (list order): re-ranked
    /// exactly unless `sp.rerank` is 0 or the scores are exact. `pos` is
    /// overwritten. Uses the rest of `s` as scratch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        tier: Isa,
        q: &[f32],
        k: usize,
        sp: &SearchParams,
        approx: &[f32],
        pos: &mut [u32],
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let n = approx.len();
        if self.refines(sp) {
            self.refine_and_rerank(tier, q, k, sp, approx, pos, s, out_ids, out_scores, st);
            return;
        }
        if (self.codes.is_none() && self.pq.is_none()) || sp.rerank == 0 {
            // Exact scores (Codes::None) or approximate ones returned as
            // they are.
            for p in pos.iter_mut() {
                *p = self.ids[*p as usize];
            }
            if self.labels.is_none() {
                topk_segment(approx, Some(pos), k, &mut s.top, out_ids, out_scores);
            } else {
                self.topk_unique(approx, pos, k, s, out_ids, out_scores);
            }
            return;
        }
        let mut r = rerank_len(sp, k, n);
        let mut keyed = false;
        if self.pq.is_some() {
            // 4-bit scores: the shortlist grows with the scan and is
            // chosen by the optimistic keys.
            r = r.max(n / PQ4_RERANK_PER).min(n.max(k));
            keyed = self.pq4_keys();
        }
        grow(&mut s.cand, r);
        grow(&mut s.cand_sc, r);
        topk_segment(
            if keyed { &s.keys[..n] } else { approx },
            Some(pos),
            r,
            &mut s.top,
            &mut s.cand[..r],
            &mut s.cand_sc[..r],
        );
        self.rerank(tier, q, k, r, s, out_ids, out_scores, st);
    }

    /// Whether the 4-bit pass's candidates go to the int8 stage
    /// ([`Ivf::refine_and_rerank`]: `Codes::Pq4I8` with `refine > 0`) rather
    /// than straight to the exact re-rank.
    fn refines(&self, sp: &SearchParams) -> bool {
        self.pq.is_some() && self.codes.is_some() && sp.refine > 0
    }

    /// The factor `g |q| / sqrt(dim)` of a row's coding error in its
    /// optimistic key, `g` [`PQ4_I8_KEY_G`] where the int8 stage follows
    /// ([`Ivf::refines`]) and [`PQ4_KEY_G`] where the exact re-rank does.
    fn key_factor(&self, q: &[f32], sp: &SearchParams) -> f32 {
        let g = if self.refines(sp) {
            PQ4_I8_KEY_G
        } else {
            PQ4_KEY_G
        };
        g * norm(q) / (self.dim as f32).sqrt()
    }

    /// Whether `s.keys[..n]` holds the optimistic keys `approx + c e` of the
    /// 4-bit scores `s.approx[..n]` (`c` [`Ivf::key_factor`], `e` the row's
    /// coding error), which [`Ivf::scan_lists`] writes beside them; false
    /// when the index holds no coding errors (a file written before them:
    /// its shortlists rank by the scores).
    fn pq4_keys(&self) -> bool {
        self.pq.as_ref().is_some_and(|pq| !pq.errors().is_empty())
    }

    /// [`Codes::Pq4I8`]'s stages after the 4-bit pass (`approx` at
    /// positions `pos`): its best `max(refine, rerank, k)` candidates
    /// re-scored from their int8 codes, then the best `rerank` of those
    /// exactly (with `rerank = 0`, the top `k` by the int8 scores).
    #[allow(clippy::too_many_arguments)]
    fn refine_and_rerank(
        &self,
        tier: Isa,
        q: &[f32],
        k: usize,
        sp: &SearchParams,
        approx: &[f32],
        pos: &[u32],
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let n = approx.len();
        let r = rerank_len(sp, k, n);
        let r1 = (sp.refine as usize).max(r).min(n.max(k));
        grow(&mut s.cand, r1);
        grow(&mut s.cand_sc, r1);
        let keyed = self.pq4_keys();
        topk_set(
            if keyed { &s.keys[..n] } else { approx },
            Some(pos),
            r1,
            &mut s.top,
            &mut s.cand[..r1],
            &mut s.cand_sc[..r1],
        );
        let m = s.cand[..r1]
            .iter()
            .take_while(|&&p| p != TOPK_PAD_ID)
            .count();
        st.refined += m as u64;
        let codes = self.codes.as_ref().expect("PQ4_I8 keeps int8 codes");
        let bias = (!self.bias_pos.is_empty()).then_some(&self.bias_pos[..]);
        codes
            .score_rows_at(
                Variant::of(tier).expect("tier checked"),
                &s.cand[..m],
                s.qq.as_ref().expect("query quantised"),
                bias,
                &mut s.cand_sc[..m],
            )
            .expect("candidates are stored positions");
        grow(&mut s.cand_ids, r1);
        grow(&mut s.exact, r1);
        if sp.rerank == 0 {
            // The int8 scores are the answer (each row once: no labels
            // with 4-bit codes).
            for (d, &p) in s.cand_ids[..m].iter_mut().zip(&s.cand[..m]) {
                *d = self.ids[p as usize];
            }
            topk_segment(
                &s.cand_sc[..m],
                Some(&s.cand_ids[..m]),
                k,
                &mut s.top,
                out_ids,
                out_scores,
            );
            return;
        }
        // The best r by int8 score (ties by smaller position), best first
        // as every path hands them to `rerank` (the exact kernels' result
        // may depend on a row's place in their blocks), then exact.
        topk_segment(
            &s.cand_sc[..m],
            Some(&s.cand[..m]),
            r,
            &mut s.top,
            &mut s.cand_ids[..r],
            &mut s.exact[..r],
        );
        s.cand[..r].copy_from_slice(&s.cand_ids[..r]);
        self.rerank(tier, q, k, r, s, out_ids, out_scores, st);
    }

    /// Re-scores the `r` best approximate candidates `s.cand[..r]`
    /// (positions, best first, padded with [`TOPK_PAD_ID`]) exactly and
    /// writes the top `k`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rerank(
        &self,
        tier: Isa,
        q: &[f32],
        k: usize,
        r: usize,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let mut m = s.cand[..r]
            .iter()
            .take_while(|&&p| p != TOPK_PAD_ID)
            .count();
        if self.labels.is_some() {
            // A row in several lists is re-scored once.
            m = self.dedup_positions(m, s);
        }
        st.reranked += m as u64;
        self.exact_scores(tier, q, m, s);
        topk_segment(
            &s.exact[..m],
            Some(&s.cand_ids[..m]),
            k,
            &mut s.top,
            out_ids,
            out_scores,
        );
    }

    /// Keeps the first position of every id among the candidate positions
    /// `s.cand[..m]` (best first), in order; returns how many remain.
    fn dedup_positions(&self, m: usize, s: &mut Scratch) -> usize {
        let ids = &self.ids;
        keep_first_per_id(&mut s.order, &mut s.cand[..m], &mut s.cand_sc[..m], |p| {
            ids[p as usize]
        })
    }

    /// The top-`k` of `approx` by the ids in `ids`, each id once
    /// (label-trained lists may hold a row twice): the best `r` entries, `r`
    /// doubled until they hold `k` distinct ids or every entry.
    fn topk_unique(
        &self,
        approx: &[f32],
        ids: &[u32],
        k: usize,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        let n = approx.len();
        let mut r = (2 * k).min(n).max(1);
        loop {
            grow(&mut s.cand, r);
            grow(&mut s.cand_sc, r);
            topk_segment(
                approx,
                Some(ids),
                r,
                &mut s.top,
                &mut s.cand[..r],
                &mut s.cand_sc[..r],
            );
            let j = keep_first_per_id(&mut s.order, &mut s.cand[..r], &mut s.cand_sc[..r], |id| id);
            if j >= k || r >= n {
                let j = j.min(k);
                out_ids[..j].copy_from_slice(&s.cand[..j]);
                out_scores[..j].copy_from_slice(&s.cand_sc[..j]);
                out_ids[j..k].fill(TOPK_PAD_ID);
                out_scores[j..k].fill(f32::NEG_INFINITY);
                return;
            }
            r = (2 * r).min(n);
        }
    }

    /// Scores the rows of lists `l0..l1` (positions `offsets[l0] ..
    /// offsets[l1]`) into `s.approx[n..]` (their positions into
    /// `s.pos[n..]`): from the int8 or 4-bit codes, or exactly from the
    /// owned f32 copy with [`Codes::None`]. Returns the rows scored.
    #[allow(clippy::too_many_arguments)]
    fn scan_lists(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        l0: usize,
        l1: usize,
        s: &mut Scratch,
        n: usize,
    ) -> usize {
        let (a, b) = (self.offsets[l0] as usize, self.offsets[l1] as usize);
        let len = b - a;
        grow(&mut s.approx, n + len);
        grow(&mut s.pos, n + len);
        let out = &mut s.approx[n..n + len];
        match (&self.codes, &self.pq) {
            (_, Some(pq)) => {
                // One run per list: each starts on its own block and adds
                // its own centroid's score.
                let bias = (!self.bias_pos.is_empty()).then(|| &self.bias_pos[a..b]);
                let lut = s.lut.as_ref().expect("tables set");
                for l in l0..l1 {
                    let (la, lb) = (
                        self.offsets[l] as usize - a,
                        self.offsets[l + 1] as usize - a,
                    );
                    pq.score_list(
                        tier,
                        l,
                        lut,
                        s.cbase[l],
                        bias.map(|x| &x[la..lb]),
                        &mut out[la..lb],
                    );
                }
                // The optimistic keys as the scores come (`pq4_keys`).
                let err = pq.errors();
                if !err.is_empty() {
                    grow(&mut s.keys, n + len);
                    let c = s.key_c;
                    for ((key, &x), &e) in s.keys[n..n + len].iter_mut().zip(&*out).zip(&err[a..b])
                    {
                        *key = x + c * e;
                    }
                }
            }
            _ => self.score_rows(tier, v, q, s.qq.as_ref(), a, b, out),
        }
        for (d, p) in s.pos[n..n + len].iter_mut().zip(a as u32..) {
            *d = p;
        }
        len
    }

    /// Scores the stored rows at positions `a..b` into `out[..b - a]`:
    /// from the int8 codes with the quantised query `qq` ([`Codes::I8`]),
    /// or exactly from the owned f32 copy with `q` ([`Codes::None`]). Not
    /// for [`Codes::Pq4`] (its scores need the query's tables).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn score_rows(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        qq: Option<&QQuery>,
        a: usize,
        b: usize,
        out: &mut [f32],
    ) {
        let len = b - a;
        let out = &mut out[..len];
        let bias = (!self.bias_pos.is_empty()).then(|| &self.bias_pos[a..b]);
        match (&self.codes, &self.pq) {
            (Some(codes), _) => {
                let qq = qq.expect("query quantised");
                codes
                    .score_run_with(v, a, len, qq, bias, out)
                    .expect("runs lie within the stored rows");
            }
            (None, Some(_)) => unreachable!("4-bit codes are scored by scan_lists"),
            (None, None) => {
                let Exact::Owned(rows) = &self.exact else {
                    unreachable!("codes None always owns its rows")
                };
                let dim = self.dim;
                if len > 0 {
                    // SAFETY: positions a..b are rows of the owned copy
                    // (stride dim), `out` holds len values; dim >= 1; the
                    // tier is supported (checked by the caller).
                    unsafe {
                        (kd::kernels(tier).tile)(
                            &rows[a * dim..],
                            dim,
                            len,
                            dim,
                            q,
                            dim,
                            1,
                            out,
                            len,
                        )
                    };
                }
                if let Some(bb) = bias {
                    for (o, &x) in out.iter_mut().zip(bb) {
                        *o += x;
                    }
                }
            }
        }
    }

    /// Fixed selection: the `nprobe` best lists by `s.cscore`, scanned in
    /// id order with adjacent lists merged into one run (fewer calls, and
    /// the kernel's in-run prefetch carries across the boundary; the result
    /// does not depend on the order). Returns the rows scanned.
    fn visit_fixed(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        nprobe: usize,
        s: &mut Scratch,
        st: &mut SearchStats,
    ) -> usize {
        let nsel = match s.bounded {
            // One list from bounded estimates (search_one bounds a fixed
            // selection only for nprobe 1): the best exact estimate.
            Some((_, qn)) => {
                let first = self.first_exact(v, select::kernels(tier), qn, s);
                grow(&mut s.lists, 1);
                s.lists[0] = first as u32;
                1
            }
            None => self.select_fixed(nprobe, s),
        };
        let mut n = 0;
        let mut i = 0;
        while i < nsel {
            let mut j = i + 1;
            while j < nsel && s.lists[j] == s.lists[j - 1] + 1 {
                j += 1;
            }
            st.lists += (j - i) as u64;
            let (l0, l1) = (s.lists[i] as usize, s.lists[j - 1] as usize + 1);
            i = j;
            n += self.scan_lists(tier, v, q, l0, l1, s, n);
        }
        n
    }

    /// The `nprobe` best lists by `s.cscore` (ties by smaller id) into
    /// `s.lists`, in id order; returns how many there are.
    pub(super) fn select_fixed(&self, nprobe: usize, s: &mut Scratch) -> usize {
        let nlist = self.nlist;
        grow(&mut s.lists, nprobe);
        grow(&mut s.lscore, nprobe);
        if nprobe <= SELECT_BY_HEAP {
            topk_segment(
                &s.cscore[..nlist],
                None,
                nprobe,
                &mut s.top,
                &mut s.lists[..nprobe],
                &mut s.lscore[..nprobe],
            );
        } else {
            // Many lists: a linear-time selection of the same set (the
            // nprobe best by score, ties by smaller id; scores are finite)
            // on integer keys (`rank_key`: no comparator calls).
            s.order.clear();
            s.order.extend(
                s.cscore[..nlist]
                    .iter()
                    .zip(0u32..)
                    .map(|(&c, l)| rank_key(c, l)),
            );
            if nprobe < nlist {
                s.order.select_nth_unstable(nprobe - 1);
            }
            for (d, &e) in s.lists[..nprobe].iter_mut().zip(&s.order[..nprobe]) {
                *d = e as u32;
            }
        }
        s.lists[..nprobe].sort_unstable();
        s.lists[..nprobe]
            .iter()
            .take_while(|&&l| l != TOPK_PAD_ID)
            .count()
    }

    /// Adaptive selection ([`SearchParams`]): the best list, then every list
    /// whose optimistic estimate reaches the running k-th score, best
    /// estimate first, at most `cap` lists. Returns the rows scanned.
    #[allow(clippy::too_many_arguments)]
    fn visit_adaptive(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        qn: f32,
        k: usize,
        cap: usize,
        reach: f32,
        s: &mut Scratch,
        st: &mut SearchStats,
    ) -> usize {
        let nlist = self.nlist;
        // The best list by estimate (ties by smaller id).
        let sel = select::kernels(tier);
        let first = if s.bounded.is_some() {
            self.first_exact(v, sel, qn, s)
        } else {
            argmax_first(sel, &s.cscore[..nlist])
        };
        // Optimistic estimate of list l: e_l + (reach - 1) |q| spread_l.
        let extra = (reach - 1.0) * qn;
        s.theta.clear();
        let multi = self.labels.is_some();
        let mut n = 0;
        let visit = |s: &mut Scratch, l: usize, n: &mut usize| {
            let m = self.scan_lists(tier, v, q, l, l + 1, s, *n);
            theta_update(
                &mut s.theta,
                k,
                &s.approx[*n..*n + m],
                multi,
                sel,
                &mut s.masks,
            );
            *n += m;
        };
        visit(s, first, &mut n);
        let mut visited = 1usize;
        // 4-bit codes under-estimate the best rows' scores (a row far out
        // along the query is pulled towards its cell's centre), so their
        // running k-th score alone admits too many lists. The exact k-th
        // score of the first list's k best candidates is a lower bound of
        // the final k-th exact score: the threshold is the larger of the
        // two. (int8 scores are close enough: not done there.)
        let floor = if self.pq.is_some() {
            self.exact_kth(tier, q, k, s, n)
        } else {
            f32::NEG_INFINITY
        };
        // Every other list that can still pass; the k-th score only grows,
        // so a list that fails now never passes later.
        let th = theta_of(&s.theta, k).max(floor);
        let mut shaped = false;
        s.order.clear();
        if let Some(second) = self.adaptive_second(sel, extra, th, first, cap, s) {
            visit(s, second, &mut n);
            visited += 1;
            let th2 = theta_of(&s.theta, k).max(floor);
            let rm = self.rest_masks(sel, qn, extra, th2, [first, second], s);
            shaped = self.adaptive_rest(v, qn, extra, th2, rm, None, s);
        }
        let order = std::mem::take(&mut s.order);
        let qspread = std::mem::take(&mut s.qspread);
        let spread = if shaped { &qspread } else { &self.spread };
        for &key in &order {
            if visited >= cap {
                break;
            }
            let l = key as u32 as usize;
            if optimistic(s.cscore[l], extra, spread[l]) < theta_of(&s.theta, k).max(floor) {
                continue;
            }
            visit(s, l, &mut n);
            visited += 1;
        }
        s.order = order;
        s.qspread = qspread;
        st.lists += visited as u64;
        n
    }

    /// Adaptive selection's second list: of the lists (but `first`) whose
    /// optimistic estimate `cs[l] + extra spread_l` reaches `th` (the k-th
    /// score after the first list), the best estimate, ties by smaller id;
    /// none when `cap` is 1 or no list passes. Leaves the test's bits in
    /// `s.masks`.
    pub(super) fn adaptive_second(
        &self,
        sel: &select::Kernels,
        extra: f32,
        th: f32,
        first: usize,
        cap: usize,
        s: &mut Scratch,
    ) -> Option<usize> {
        if cap < 2 {
            return None;
        }
        let nw = self.plain_masks(sel, extra, th, s);
        let cs = &s.cscore[..self.nlist];
        set_bits(&s.masks[..nw])
            .filter(|&l| l != first)
            .map(|l| rank_key(cs[l], l as u32))
            .min()
            .map(|key| key as u32 as usize)
    }

    /// The plain test of every list, `s.cscore[l] + extra spread_l >= th`,
    /// as bits into `s.masks` (one vector compare per 8 or 16 lists, so
    /// that only the passing lists are read); returns the words written.
    /// Where some estimates are still bounds (`s.bounded`), the lists whose
    /// bound passes are made exact and tested again
    /// ([`Ivf::refine_masks`]): the bits are those of the exact estimates.
    fn plain_masks(&self, sel: &select::Kernels, extra: f32, th: f32, s: &mut Scratch) -> usize {
        let nlist = self.nlist;
        let nw = select::words(nlist);
        grow(&mut s.masks, nw);
        (sel.opt_masks)(
            &s.cscore[..nlist],
            &self.spread[..nlist],
            extra,
            th,
            &mut s.masks[..nw],
        );
        self.refine_masks(extra, th, nw, s);
        nw
    }

    /// The lists adaptive selection may visit after its first two, with
    /// `th` the k-th score after them and `rm` their candidates
    /// ([`Ivf::rest_masks`]), into `s.order` as [`rank_key`]s of `cs =
    /// s.cscore` sorted best estimate first, ties by smaller id; returns
    /// whether their test is the shaped one.
    ///
    /// The plain test is `cs[l] + extra spread_l >= th`. When the index has
    /// the lists' shapes (and no label training) the test takes the
    /// query's shaped spreads instead, for the lists that pass the plain
    /// test at [`SHAPE_PREFILTER`] times the reach ([`Ivf::shaped_order`]):
    /// then their spreads are in `s.qspread` and their estimates in
    /// `s.cscore` are the shaped ones. A query whose first two lists leave
    /// nothing to test (most of W1's) never computes a projection. `s.qq`
    /// holds the query's quantised form, `qn` its norm. `proj`: the query's
    /// projections onto every list's directions, where a batch has scored
    /// them already (where [`Ivf::shares_projections`] holds; the same
    /// bits as scoring them here).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn adaptive_rest(
        &self,
        v: Variant,
        qn: f32,
        extra: f32,
        th: f32,
        rm: RestMasks,
        proj: Option<&[f32]>,
        s: &mut Scratch,
    ) -> bool {
        s.order.clear();
        if rm.shaped {
            self.shaped_order(v, qn, extra, th, rm.nw, proj, s);
        } else {
            let cs = &s.cscore[..self.nlist];
            s.order
                .extend(set_bits(&s.masks[..rm.nw]).map(|l| rank_key(cs[l], l as u32)));
        }
        // One u64 key per list: the high half orders the (finite) score
        // descending, the low half the id ascending; no comparator calls.
        sort_rank_keys(&mut s.order, &mut s.order_tmp);
        rm.shaped
    }

    /// [`Ivf::adaptive_rest`]'s candidates after the first two lists
    /// (`seen`): the plain test's bits into `s.masks` (at
    /// [`SHAPE_PREFILTER`] times the reach where the test is the shaped
    /// one), `seen` cleared.
    pub(super) fn rest_masks(
        &self,
        sel: &select::Kernels,
        qn: f32,
        extra: f32,
        th: f32,
        seen: [usize; 2],
        s: &mut Scratch,
    ) -> RestMasks {
        let shaped = self.shape.is_some() && self.labels.is_none() && qn > 0.0;
        let ex = if shaped {
            SHAPE_PREFILTER * (extra + qn) - qn
        } else {
            extra
        };
        let nw = self.plain_masks(sel, ex, th, s);
        for l in seen {
            s.masks[l / 64] &= !(1u64 << (l % 64));
        }
        RestMasks { shaped, nw }
    }

    /// Whether a batch should share the projections onto every list's
    /// directions with the query whose candidates `rm` are in `s.masks`:
    /// its test is the shaped one and at least `1 / SHAPE_GATHER` of the
    /// lists are candidates.
    pub(super) fn shares_projections(&self, rm: RestMasks, s: &Scratch) -> bool {
        rm.shaped && count_set(&s.masks[..rm.nw]) * SHAPE_GATHER >= self.nlist
    }

    /// The directions of the lists' shapes, if the index has them (row
    /// `LIST_DIRS l + j` is list `l`'s direction `j`).
    pub(super) fn shape_dirs(&self) -> Option<&QRows> {
        self.shape.as_ref().map(|sh| &sh.dirs)
    }

    /// [`Ivf::adaptive_rest`]'s shaped order, once `s.masks[..nw]` holds the
    /// prefilter's candidates: each candidate's shaped spread into
    /// `s.qspread` and its estimate in `s.cscore` moved to it, and those
    /// whose optimistic estimate reaches `th` pushed onto `s.order`. The
    /// projections are `proj` where a batch has scored every list's (a
    /// shared pass), else the candidates' direction rows gathered in one
    /// call (the same bits either way).
    #[allow(clippy::too_many_arguments)]
    fn shaped_order(
        &self,
        v: Variant,
        qn: f32,
        extra: f32,
        th: f32,
        nw: usize,
        proj: Option<&[f32]>,
        s: &mut Scratch,
    ) {
        let sh = self.shape.as_ref().expect("the index has shapes");
        let nlist = self.nlist;
        grow(&mut s.qspread, nlist);
        // f64 for the squares (no overflow for any f32 projection), one
        // multiply by 1 / |q| in place of a division per list, the terms
        // summed in one fixed order (`kappa |q|^2` first, then the
        // directions in turn).
        let (q2, inv) = (f64::from(qn) * f64::from(qn), 1.0 / f64::from(qn));
        let spread_of = |p: &[f32], kappa: f32, far: f32| -> f32 {
            let sq = |x: f32| f64::from(x) * f64::from(x);
            let var = f64::from(kappa) * q2 + sq(p[0]) + sq(p[1]) + sq(p[2]) + sq(p[3]);
            ((var.sqrt() * inv) as f32).max(far)
        };
        // One pass over every list's rows (or the batch's `proj`) where the
        // candidates' gather would read about as many bytes: a gathered row
        // costs about `GATHER_ROW_BYTES` more than its codes (its sum and
        // scale loaded alone, a scattered start).
        let dp = sh.dirs.dim_pad();
        let nc = count_set(&s.masks[..nw]);
        let qq = s.qq.as_ref().expect("the query is quantised");
        if proj.is_some() || nc * (dp + GATHER_ROW_BYTES) >= nlist * dp {
            let mut own = std::mem::take(&mut s.dproj);
            let proj = match proj {
                Some(p) => p,
                None => {
                    let nd = nlist * LIST_DIRS;
                    grow(&mut own, nd);
                    sh.dirs
                        .score_run_with(v, 0, nd, qq, None, &mut own[..nd])
                        .expect("shape run");
                    &own[..nd]
                }
            };
            // Every list's spread in one branch-free pass, then only the
            // candidates are read.
            let out = &mut s.qspread[..nlist];
            let (kappa, far) = (&sh.kappa[..nlist], &sh.far[..nlist]);
            for l in 0..nlist {
                out[l] = spread_of(&proj[l * LIST_DIRS..][..LIST_DIRS], kappa[l], far[l]);
            }
            s.dproj = own;
        } else {
            // The candidates' direction rows in one gathered call.
            s.dpos.clear();
            for l in set_bits(&s.masks[..nw]) {
                s.dpos
                    .extend((0..LIST_DIRS as u32).map(|j| (l * LIST_DIRS) as u32 + j));
            }
            let m = s.dpos.len();
            grow(&mut s.dproj, m);
            sh.dirs
                .score_rows_at(v, &s.dpos, qq, None, &mut s.dproj[..m])
                .expect("shape rows");
            for (p, &r) in s.dproj[..m]
                .chunks_exact(LIST_DIRS)
                .zip(s.dpos.iter().step_by(LIST_DIRS))
            {
                let l = r as usize / LIST_DIRS;
                s.qspread[l] = spread_of(p, sh.kappa[l], sh.far[l]);
            }
        }
        // The candidates' shaped estimates; each that passes is written at
        // the end of `s.order` and kept by advancing its length (no branch
        // on the test, which passes about half the time).
        s.order.resize(nc, 0);
        let mut n = 0;
        for l in set_bits(&s.masks[..nw]) {
            let sq = s.qspread[l];
            let c = &mut s.cscore[l];
            *c += qn * (sq - self.spread[l]);
            s.order[n] = rank_key(*c, l as u32);
            n += usize::from(optimistic(*c, extra, sq) >= th);
        }
        s.order.truncate(n);
    }

    /// The k-th best exact score among the `k` best approximate candidates
    /// `s.approx[..n]` (positions `s.pos[..n]`), `-inf` if there are fewer
    /// than `k`. Uses `s.cand`, `s.cand_sc`, `s.cand_ids` and `s.exact` as
    /// scratch.
    fn exact_kth(&self, tier: Isa, q: &[f32], k: usize, s: &mut Scratch, n: usize) -> f32 {
        if n < k || k == 0 {
            return f32::NEG_INFINITY;
        }
        grow(&mut s.cand, k);
        grow(&mut s.cand_sc, k);
        topk_segment(
            &s.approx[..n],
            Some(&s.pos[..n]),
            k,
            &mut s.top,
            &mut s.cand[..k],
            &mut s.cand_sc[..k],
        );
        self.exact_scores(tier, q, k, s);
        s.exact[..k].iter().fold(f32::INFINITY, |a, &e| a.min(e))
    }

    /// Exact scores `w_r . q + b_r` of the candidate positions `s.cand[..m]`
    /// into `s.exact[..m]`, their original ids into `s.cand_ids[..m]`.
    fn exact_scores(&self, tier: Isa, q: &[f32], m: usize, s: &mut Scratch) {
        grow(&mut s.cand_ids, m);
        grow(&mut s.exact, m);
        for (d, &p) in s.cand_ids[..m].iter_mut().zip(&s.cand[..m]) {
            *d = self.ids[p as usize];
        }
        let ks = km::kernels(tier);
        let (ids, pos, out) = (&s.cand_ids[..m], &s.cand[..m], &mut s.exact[..m]);
        let dim = self.dim;
        // SAFETY (every kernel call): each fetched index is a position <
        // rows of the owned copy, or an original id < rows of the borrowed
        // or index rows (which hold `rows` rows at their stride, checked
        // when attached); q holds dim floats; out holds m; the tier is
        // supported (checked by the caller).
        match &self.exact {
            Exact::Owned(v) => {
                let r = Rows {
                    w: v,
                    stride: dim,
                    dim,
                    scales: &[],
                };
                unsafe { (ks.f32)(&r, q, pos, out) }
            }
            &Exact::Borrowed { ref w, stride } => unsafe {
                (ks.f32)(
                    &Rows {
                        w,
                        stride,
                        dim,
                        scales: &[],
                    },
                    q,
                    ids,
                    out,
                )
            },
            &Exact::Narrow { ref w, stride } => match w {
                NarrowRows::Bf16(w) => unsafe {
                    (ks.bf16)(
                        &Rows {
                            w,
                            stride,
                            dim,
                            scales: &[],
                        },
                        q,
                        ids,
                        out,
                    )
                },
                NarrowRows::F16(w) => unsafe {
                    (ks.f16)(
                        &Rows {
                            w,
                            stride,
                            dim,
                            scales: &[],
                        },
                        q,
                        ids,
                        out,
                    )
                },
                NarrowRows::I8 { w, scales } => unsafe {
                    (ks.i8)(
                        &Rows {
                            w,
                            stride,
                            dim,
                            scales,
                        },
                        q,
                        ids,
                        out,
                    )
                },
            },
        }
        if !self.bias_pos.is_empty() {
            for (e, &p) in s.exact[..m].iter_mut().zip(&s.cand[..m]) {
                *e += self.bias_pos[p as usize];
            }
        }
    }
}
