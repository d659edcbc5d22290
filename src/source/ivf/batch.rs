//! Batches: the queries of one call share their passes over memory.
//!
//! [`Ivf::search_stats`] answers two or more queries in blocks of up to
//! [`BATCH`], and a block shares two passes that a query alone streams
//! from L2/L3 (or DRAM):
//!
//! 1. **Centroid scores.** The centroids' int8 codes are taken in blocks of
//!    about 16 KiB ([`CENT_BLOCK_BYTES`], half of L1d) and every query of
//!    the batch scores a block before the next one is read: one pass over
//!    the centroids per batch instead of per query (a cache-blocked GEMM on
//!    the same int8 kernel).
//! 2. **List rows** (int8 codes with fixed selection, `reach = 0`). Each
//!    query picks its lists as alone; the (list, query) pairs are then
//!    visited list by list, so the queries that probe the same list score
//!    its codes back to back and all but the first read them from L1/L2.
//!    A list's scores go straight into the query's running top `r` (a
//!    [`TopK`] buffer of at most `r + max(r, 32)` entries), so it keeps no
//!    per-row buffer: its working set is one list's codes plus 64 small
//!    buffers.
//!
//! 3. **Adaptive selection** (`reach > 0`, int8 codes, lists not
//!    label-trained): which list comes next depends on the scores of the
//!    lists before it, so the lists are shared in rounds
//!    ([`Ivf::adaptive_rounds`]): each query proposes its next lists that
//!    pass its k-th score as it stands, the round scores them list by
//!    list, and each query then keeps, in its order, those that still pass.
//!    Before the rounds each query visits its first two lists as alone;
//!    the queries whose order then projects them onto every list's shape
//!    directions ([`Ivf::shares_projections`]) share that pass too, where the
//!    tier has panel kernels and at least [`LIST_PANEL_MIN_QUERIES`] of
//!    them do: the directions are re-laid as panels once per call
//!    ([`Ivf::project_group`]) and scored four queries per load.
//!
//! A list that several queries score in one pass is re-laid as panels
//! and scored four queries per load of its codes where the tier has panel
//! kernels; the index keeps the panels for later batches ([`ListPanels`]).
//! Then each query re-ranks and selects its top `k` as alone.
//! 4-bit or exact first passes share the centroid pass only.
//!
//! **Results are bit-identical to answering the queries one at a time**:
//! every row's int8 score is the same integer dot product and the same f32
//! epilogue whichever run it is part of ([`crate::kernels::qdot`]), the
//! candidates kept are the best `r` by (score, position) under a total
//! order whichever order they are offered in ([`topk_offer`] is the
//! single-query selection's own loop), and the rest is the single-query
//! code. `tests/ivf_batch.rs` checks this on every tier, for
//! every code kind, selection and label-trained lists.

use super::split::Member;
use super::*;
use crate::matmul::{topk_drain, topk_offer_floored, TopK};
use crate::quant::qdot::PANEL_QUERIES;

/// Queries answered together.
pub(super) const BATCH: usize = 64;

/// A proposal of a round of adaptive selection: `(query, list, offset of
/// its scores in the round's buffer, optimistic estimate)`.
pub(super) type Prop = (u32, u32, usize, f32);

/// A list that at least this many queries of a batch visit is re-laid as
/// panels and scored four queries per load of its codes (where the tier
/// has panel kernels); fewer share too little to pay for the re-lay.
pub(super) const LIST_PANEL_MIN_QUERIES: usize = 4;

/// Adaptive selection in a batch: the lists each query may take into one
/// round (those that pass its running k-th score when the round starts).
/// More share more (a list is re-laid as panels once for the queries that
/// propose it in the same round), fewer waste less (a proposal that fails
/// at its turn was scored for nothing); 32, 64, 128, 192 and all at once
/// were measured, and 128-192 were fastest on the real layers of
/// docs/ivf.md. Rounds start at [`FIRST_ROUND_LISTS`] and double up to it.
pub(super) const ROUND_LISTS: usize = 128;

/// The lists each query may propose in the first round after its best
/// list; the rounds after double it, up to [`ROUND_LISTS`].
pub(super) const FIRST_ROUND_LISTS: usize = 4;

/// Bytes of centroid codes scored by every query of a batch before the next
/// block is read.
pub(super) const CENT_BLOCK_BYTES: usize = 16384;

/// The scratch of [`Ivf::search_batch`] (part of the thread's `Scratch`;
/// grows to the largest batch seen and is reused).
#[derive(Default)]
pub(crate) struct Batch {
    /// The quantised queries.
    qq: Vec<QQuery>,
    /// Their norms.
    qn: Vec<f32>,
    /// Centroid scores, `nlist` per query (the panels' padded rows when the
    /// panels score them; the padding rows score 0 and are not read).
    raw: Vec<f32>,
    /// Selected lists, `nprobe` slots per query (shared pass only).
    lists: Vec<u32>,
    /// How many of each query's slots are used.
    nsel: Vec<usize>,
    /// `(list << 32) | query` (or `| proposal`), sorted: the shared
    /// pass's order; `pairs_tmp` the radix sort's other buffer.
    pairs: Vec<u64>,
    pairs_tmp: Vec<u64>,
    /// Rows a shared round scores per list ([`Member::share`]).
    lrows: Vec<usize>,
    /// Rows each query scans.
    n: Vec<usize>,
    /// Each query's running top `r` (or `k`) ([`topk_offer`]).
    tops: Vec<TopK>,
    /// One list's scores.
    tmp: Vec<f32>,
    /// Each query's running k best approximate scores (its k-th decides).
    theta: Vec<Vec<f32>>,
    /// A visited list's selection masks ([`theta_update`]).
    masks: Vec<u64>,
    /// Each query's candidate lists after its first, best estimate first,
    /// with their optimistic estimates, at `ord_rng[i].0 .. ord_rng[i].1`
    /// (ranges filled as the queries' orders are made, not in query order).
    ord: Vec<(u32, f32)>,
    ord_rng: Vec<(usize, usize)>,
    /// Each query's next candidate, and lists visited.
    cur: Vec<usize>,
    vis: Vec<usize>,
    /// The round's proposals, in each query's order.
    props: Vec<Prop>,
    /// Their scores.
    seg: Vec<f32>,
    /// Their scores, [`PANEL_QUERIES`] queries at the panels' padded rows.
    ptmp: Vec<f32>,
    /// Adaptive selection: each query's first two lists and the k-th score
    /// after them ([`Ivf::adaptive_start`]), and whether its order
    /// projects it onto every list's directions ([`Ivf::shares_projections`]).
    start: Vec<Option<([usize; 2], f32)>>,
    whole: Vec<bool>,
    /// The queries whose projections `gproj` holds, and those projections
    /// ([`Ivf::project_group`]).
    group: Vec<usize>,
    gproj: Vec<f32>,
}

/// One batch call's queries and search: `nb` checked queries at
/// `q_stride` in `q`, their top `k` under `sp`, on `tier` (`v` its int8
/// kernels).
#[derive(Clone, Copy)]
struct Call<'a> {
    tier: Isa,
    v: Variant,
    q: &'a [f32],
    nb: usize,
    q_stride: usize,
    dim: usize,
    k: usize,
    sp: &'a SearchParams,
}

impl Call<'_> {
    /// Query `i` of the call.
    fn query(&self, i: usize) -> &[f32] {
        &self.q[i * self.q_stride..i * self.q_stride + self.dim]
    }
}

impl Ivf {
    /// Adaptive selection's start for query `i` of a batch (its estimates
    /// in `s.cscore`, its quantised form in `s.qq`, as
    /// [`Ivf::visit_and_finish`] finds them): its best list, then its
    /// second, visited and offered as the single-query loop does. Returns
    /// the two lists and the k-th score after them when there is a second
    /// list (the rest is then [`Ivf::adaptive_order`]'s), `None` when the
    /// query has no more lists to consider.
    fn adaptive_start(
        &self,
        c: &Call,
        qi: &[f32],
        i: usize,
        s: &mut Scratch,
        b: &mut Batch,
    ) -> Option<([usize; 2], f32)> {
        let Call { tier, v, k, sp, .. } = *c;
        let nlist = self.nlist;
        let cap = (sp.nprobe as usize).min(nlist);
        while b.theta.len() <= i {
            b.theta.push(Vec::new());
        }
        while b.tops.len() <= i {
            b.tops.push(TopK::default());
        }
        for x in [&mut b.n, &mut b.cur, &mut b.vis] {
            grow(x, i + 1);
        }
        b.theta[i].clear();
        b.tops[i].clear();
        let extra = (sp.reach - 1.0) * b.qn[i];
        let cs = &s.cscore[..nlist];
        let sel = crate::kernels::select::kernels(tier);
        let first = argmax_first(sel, cs);
        let (a, e) = (
            self.offsets[first] as usize,
            self.offsets[first + 1] as usize,
        );
        grow(&mut b.tmp, e - a);
        let sc = &mut b.tmp[..e - a];
        self.score_rows(tier, v, qi, s.qq.as_ref(), a, e, sc);
        theta_update(&mut b.theta[i], k, sc, false, sel, &mut s.masks);
        self.offer(sp, k, a, usize::MAX, sc, &mut b.tops[i]);
        (b.n[i], b.vis[i], b.cur[i]) = (e - a, 1, 0);
        let th = theta_of(&b.theta[i], k);
        // The second list, as the single-query loop chooses it.
        let l = self.adaptive_second(sel, extra, th, first, cap, s)?;
        let (a, e) = (self.offsets[l] as usize, self.offsets[l + 1] as usize);
        grow(&mut b.tmp, e - a);
        let sc = &mut b.tmp[..e - a];
        self.score_rows(tier, v, qi, s.qq.as_ref(), a, e, sc);
        theta_update(&mut b.theta[i], k, sc, false, sel, &mut s.masks);
        self.offer(sp, k, a, usize::MAX, sc, &mut b.tops[i]);
        b.n[i] += e - a;
        b.vis[i] = 2;
        Some(([first, l], theta_of(&b.theta[i], k)))
    }

    /// Adaptive selection's order for query `i` of a batch once
    /// [`Ivf::adaptive_start`] has visited its first lists (`rest`: the
    /// k-th score after them and the candidates in `s.masks`
    /// ([`Ivf::rest_masks`]), `None` without a second list; its estimates
    /// in `s.cscore`, its quantised form in `s.qq`): its candidates in
    /// order with their optimistic estimates into `b.ord` (their range into
    /// `b.ord_rng[i]`), as the single-query loop orders them; `proj` its
    /// projections onto the lists' directions where the batch has scored
    /// them. The rounds of [`Ivf::adaptive_rounds`] do the rest.
    fn adaptive_order(
        &self,
        c: &Call,
        i: usize,
        rest: Option<(f32, RestMasks)>,
        proj: Option<&[f32]>,
        s: &mut Scratch,
        b: &mut Batch,
    ) {
        let Call { v, sp, .. } = *c;
        let extra = (sp.reach - 1.0) * b.qn[i];
        s.order.clear();
        let shaped =
            rest.is_some_and(|(th2, rm)| self.adaptive_rest(v, b.qn[i], extra, th2, rm, proj, s));
        let (cs, spread) = (
            &s.cscore[..self.nlist],
            if shaped { &s.qspread } else { &self.spread },
        );
        let a = b.ord.len();
        b.ord.extend(s.order.iter().map(|&key| {
            let l = key as u32;
            (l, optimistic(cs[l as usize], extra, spread[l as usize]))
        }));
        b.ord_rng[i] = (a, b.ord.len());
    }

    /// The projections of a batch's queries onto every list's directions,
    /// shared: the queries from `i` on whose order projects onto them all
    /// (`b.whole`), up to [`PANEL_QUERIES`] of them, scored per load of the
    /// directions' panels `dpan` into `b.gproj` (query `b.group[t]` at
    /// `t * stride`, `stride` the panels' padded rows).
    fn project_group(&self, v: Variant, dpan: &QPanels, i: usize, b: &mut Batch) {
        b.group.clear();
        b.group.extend(
            (i..b.whole.len())
                .filter(|&j| b.whole[j])
                .take(PANEL_QUERIES),
        );
        let rows = dpan.padded_rows();
        grow(&mut b.gproj, PANEL_QUERIES * rows);
        let mut qs = [&b.qq[i]; PANEL_QUERIES];
        for (t, &j) in b.group.iter().enumerate() {
            qs[t] = &b.qq[j];
        }
        let ng = b.group.len();
        let ok = dpan
            .score(v, 0, rows, &qs[..ng], &mut b.gproj[..ng * rows], rows)
            .expect("direction panels");
        debug_assert!(ok, "the caller checked for a panel kernel");
    }

    /// Adaptive selection for the `nb` queries of a batch once
    /// [`Ivf::adaptive_start`] and [`Ivf::adaptive_order`] have started each: bit for bit
    /// [`Ivf::visit_and_finish`]'s answers.
    ///
    /// Rounds: each query proposes its next lists in order that pass its
    /// k-th score as it stands (at most [`FIRST_ROUND_LISTS`] in the first
    /// round, doubling up to [`ROUND_LISTS`], and no more than its
    /// `nprobe` cap leaves); the round's lists are scored list by list for
    /// every query that proposed them (as panels when several do); then
    /// each query takes its proposals in order and keeps those that still
    /// pass its k-th score at their turn, exactly the test of the
    /// single-query loop (the k-th score only grows, so a list skipped at
    /// the proposal would be skipped at its turn too). A proposal that
    /// fails at its turn was scored for nothing: the price of sharing, kept
    /// small by the short first rounds (a query whose k-th score jumps
    /// after its first lists stops proposing early). With `coop` these
    /// queries are one member's part of a block whose members score each
    /// round's lists together (module `split`): every member takes part in
    /// every round until no member proposes. Leaves each query's running
    /// top in `b.tops` and its rows scanned in `b.n` for
    /// [`Ivf::drain_batch`].
    fn adaptive_rounds(&self, c: &Call, b: &mut Batch, st: &mut SearchStats, coop: Option<Member>) {
        let Call {
            tier, nb, k, sp, ..
        } = *c;
        let nlist = self.nlist;
        let cap = (sp.nprobe as usize).min(nlist);
        let len = |l: usize| (self.offsets[l + 1] - self.offsets[l]) as usize;
        let sel = crate::kernels::select::kernels(tier);
        let mut round_lists = FIRST_ROUND_LISTS;
        loop {
            // The round's proposals.
            b.props.clear();
            let mut seg = 0;
            for i in 0..nb {
                let ord = &b.ord[b.ord_rng[i].0..b.ord_rng[i].1];
                let th = theta_of(&b.theta[i], k);
                let room = cap.saturating_sub(b.vis[i]).min(round_lists);
                let mut taken = 0;
                while taken < room && b.cur[i] < ord.len() {
                    let (l, opt) = ord[b.cur[i]];
                    b.cur[i] += 1;
                    if opt < th {
                        continue;
                    }
                    b.props.push((i as u32, l, seg, opt));
                    seg += len(l as usize);
                    taken += 1;
                }
            }
            match coop {
                None => {
                    if b.props.is_empty() {
                        break;
                    }
                    round_lists = (2 * round_lists).min(ROUND_LISTS);
                    self.score_props(c, seg, b);
                }
                Some(m) => {
                    // Every member's proposals, scored by the members a
                    // share of the round's lists each (module `split`).
                    grow(&mut b.seg, seg);
                    m.publish(&b.props, &mut b.seg[..seg], &b.qq[..nb]);
                    if m.proposals() == 0 {
                        break;
                    }
                    round_lists = (2 * round_lists).min(ROUND_LISTS);
                    m.share(len, &mut b.lrows, nlist, &mut b.pairs, &mut b.pairs_tmp);
                    self.score_pairs(
                        c,
                        &b.pairs,
                        (&mut b.ptmp, &mut b.tmp),
                        |x| m.query(x),
                        |x, _, sc| m.write(x, sc),
                    );
                    m.scored();
                }
            }
            // Each query's proposals in order, each kept if it passes now.
            for &(i, l, off, opt) in &b.props {
                let (i, l) = (i as usize, l as usize);
                if b.vis[i] >= cap || opt < theta_of(&b.theta[i], k) {
                    continue;
                }
                let a = self.offsets[l] as usize;
                let sc = &b.seg[off..off + len(l)];
                theta_update(&mut b.theta[i], k, sc, false, sel, &mut b.masks);
                self.offer(sp, k, a, usize::MAX, sc, &mut b.tops[i]);
                b.n[i] += sc.len();
                b.vis[i] += 1;
            }
        }
        for i in 0..nb {
            st.lists += b.vis[i] as u64;
            st.scanned += b.n[i] as u64;
        }
    }

    /// The end of a batch's shared pass: per query, its running top
    /// (`b.tops`, `b.n` rows scanned) re-ranked exactly into its top `k`,
    /// or drained as its top `k` without a re-rank, as alone.
    fn drain_batch(
        &self,
        c: &Call,
        s: &mut Scratch,
        b: &mut Batch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let Call {
            tier,
            q,
            nb,
            q_stride,
            k,
            sp,
            ..
        } = *c;
        let dim = self.dim;
        for i in 0..nb {
            let (oi, os) = (
                &mut out_ids[i * k..(i + 1) * k],
                &mut out_scores[i * k..(i + 1) * k],
            );
            if sp.rerank > 0 {
                let r = rerank_len(sp, k, b.n[i]);
                grow(&mut s.cand, r);
                grow(&mut s.cand_sc, r);
                topk_drain(&mut b.tops[i], r, &mut s.cand[..r], &mut s.cand_sc[..r]);
                let qi = &q[i * q_stride..i * q_stride + dim];
                self.rerank(tier, qi, k, r, s, oi, os, st);
            } else {
                topk_drain(&mut b.tops[i], k, oi, os);
            }
        }
    }

    /// Scores the rows of every proposal of `b.props` (`seg` scores in all)
    /// into `b.seg` at its offset ([`Ivf::score_pairs`]).
    fn score_props(&self, c: &Call, seg: usize, b: &mut Batch) {
        grow(&mut b.seg, seg);
        b.pairs.clear();
        b.pairs.extend(
            b.props
                .iter()
                .enumerate()
                .map(|(j, &(_, l, _, _))| (u64::from(l) << 32) | j as u64),
        );
        // By list, then proposal: the keys come in proposal order, so the
        // stable radix sort on their high half gives the sorted order.
        sort_rank_keys(&mut b.pairs, &mut b.pairs_tmp);
        let (props, out, qq) = (&b.props, &mut b.seg, &b.qq);
        self.score_pairs(
            c,
            &b.pairs,
            (&mut b.ptmp, &mut b.tmp),
            |x| {
                let i = props[x as u32 as usize].0 as usize;
                (&qq[i], c.query(i))
            },
            |x, _, sc| {
                let off = props[x as u32 as usize].2;
                out[off..off + sc.len()].copy_from_slice(sc);
            },
        );
    }

    /// The list-major pass of a batch: for the `(list << 32) | x` keys of
    /// `pairs` (sorted by list), the rows of each list scored for the
    /// query `query_of(x)` of every key, and handed to `sink(x, a, scores)`
    /// (`a` the list's first position; the scores include the bias). A
    /// list that [`LIST_PANEL_MIN_QUERIES`] or more keys share is re-laid
    /// as panels once and scored four queries per load of its codes where
    /// the tier has panel kernels (the same bits as the row-major kernel;
    /// the bias added after, as that kernel's epilogue does); the others
    /// row-major. `scratch`: the panels, their scores and one list's scores.
    fn score_pairs<'q>(
        &self,
        c: &Call,
        pairs: &[u64],
        scratch: (&mut Vec<f32>, &mut Vec<f32>),
        query_of: impl Fn(u64) -> (&'q QQuery, &'q [f32]),
        mut sink: impl FnMut(u64, usize, &mut [f32]),
    ) {
        let Call { tier, v, .. } = *c;
        let (ptmp, tmp) = scratch;
        let codes = self.codes.as_ref().expect("int8 codes (shared passes)");
        let panels = QPanels::has_kernel(v);
        let mut p0 = 0;
        while p0 < pairs.len() {
            let l = (pairs[p0] >> 32) as usize;
            let p1 = p0 + pairs[p0..].partition_point(|&x| (x >> 32) as usize == l);
            let (a, e) = (self.offsets[l] as usize, self.offsets[l + 1] as usize);
            let len = e - a;
            if panels && p1 - p0 >= LIST_PANEL_MIN_QUERIES && len > 0 {
                let pan = self.lpan.get_or_relay(l, || {
                    let mut p = QPanels::default();
                    p.set_rows(Some(v), codes, a, len)
                        .expect("list rows within the codes");
                    p
                });
                let pr = pan.padded_rows();
                grow(ptmp, PANEL_QUERIES * pr);
                for c in pairs[p0..p1].chunks(PANEL_QUERIES) {
                    let mut qs = [query_of(c[0]).0; PANEL_QUERIES];
                    for (t, &x) in c.iter().enumerate() {
                        qs[t] = query_of(x).0;
                    }
                    pan.score(v, 0, pr, &qs[..c.len()], ptmp, pr)
                        .expect("list panels");
                    for (t, &x) in c.iter().enumerate() {
                        let sc = &mut ptmp[t * pr..t * pr + len];
                        if !self.bias_pos.is_empty() {
                            for (o, &bb) in sc.iter_mut().zip(&self.bias_pos[a..e]) {
                                *o += bb;
                            }
                        }
                        sink(x, a, sc);
                    }
                }
            } else {
                grow(tmp, len);
                for &x in &pairs[p0..p1] {
                    let (qq, qi) = query_of(x);
                    let sc = &mut tmp[..len];
                    self.score_rows(tier, v, qi, Some(qq), a, e, sc);
                    sink(x, a, sc);
                }
            }
            p0 = p1;
        }
    }

    /// Offers the scores `sc` of the rows at positions `a ..` to a query's
    /// running top: `r` by position for the re-rank (the query scans `n`
    /// rows; `usize::MAX` when that is not known yet: then the most it can
    /// re-rank, and the drain cuts to its `r` at the end), or `k` by id
    /// without one.
    fn offer(&self, sp: &SearchParams, k: usize, a: usize, n: usize, sc: &[f32], top: &mut TopK) {
        if sp.rerank > 0 {
            topk_offer_floored(sc, |j| (a + j) as u32, rerank_len(sp, k, n), top);
        } else {
            topk_offer_floored(sc, |j| self.ids[a + j], k, top);
        }
    }

    /// The top `k` of `nb` (`>= 1`) checked queries (`q` at `q_stride`),
    /// into `out_ids` / `out_scores` (`nb * k` each, `k >= 1`), bit for bit
    /// what [`Ivf::search_stats`] gives them one at a time. `coop`: these
    /// are one member's queries of a block split over threads
    /// ([`Ivf::search_split`]; adaptive rounds only).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search_batch(
        &self,
        tier: Isa,
        q: &[f32],
        nb: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
        coop: Option<Member>,
    ) {
        // Every estimate of a batch is exact (no 4-bit bounds).
        s.bounded = None;
        let v = Variant::of(tier).expect("tier checked");
        let c = Call {
            tier,
            v,
            q,
            nb,
            q_stride,
            dim: self.dim,
            k,
            sp,
        };
        let (nlist, dim, dp) = (self.nlist, self.dim, self.cq.dim_pad());
        let query = |i: usize| &q[i * q_stride..i * q_stride + dim];
        let mut b = std::mem::take(&mut s.batch);

        // The queries, quantised once.
        if b.qq.first().is_some_and(|x| x.dim_pad() != dp) {
            b.qq.clear();
        }
        while b.qq.len() < nb {
            b.qq.push(QQuery::new(dp).expect("dim_pad of stored codes is valid"));
        }
        grow(&mut b.qn, nb);
        for i in 0..nb {
            b.qq[i].set(query(i)).expect("queries are checked finite");
            b.qn[i] = norm(query(i));
        }

        // 1. Centroid scores: a block of codes, every query, next block.
        // With a panel kernel (AVX-512) four queries at a time share each
        // load of a block's codes; row `l` of query `i` at `i * cs + l`.
        // `cs` rows per query: the panels' padded rows, or `nlist`.
        let cpan = self.cpan.as_ref().filter(|_| QPanels::has_kernel(v));
        let (cs, block) = match cpan {
            Some(p) => (p.padded_rows(), (CENT_BLOCK_BYTES / dp / 32).max(1) * 32),
            None => (nlist, (CENT_BLOCK_BYTES / dp).max(4)),
        };
        grow(&mut b.raw, nb * cs);
        let mut c0 = 0;
        while c0 < cs {
            let len = block.min(cs - c0);
            if let Some(cp) = cpan {
                for i in (0..nb).step_by(PANEL_QUERIES) {
                    let e = (i + PANEL_QUERIES).min(nb);
                    let mut qs = [&b.qq[i]; PANEL_QUERIES];
                    for (t, q) in b.qq[i..e].iter().enumerate() {
                        qs[t] = q;
                    }
                    let o = i * cs + c0;
                    let out = &mut b.raw[o..(e - 1) * cs + c0 + len];
                    cp.score(v, c0, len, &qs[..e - i], out, cs)
                        .expect("centroid panels");
                }
            } else {
                for i in 0..nb {
                    let o = i * cs + c0;
                    self.cq
                        .score_run_with(v, c0, len, &b.qq[i], None, &mut b.raw[o..o + len])
                        .expect("centroid run");
                }
            }
            c0 += len;
        }

        // Per query: the list estimates, then either its whole search
        // (adaptive selection, 4-bit or exact first pass) or its lists for
        // the shared pass.
        // The shared pass: int8 codes only (not PQ4_I8, whose first pass is
        // 4-bit), fixed selection, and not the one
        // case whose selection needs every score at once (label-trained
        // lists without re-ranking: each id once, `topk_unique`).
        let shared = sp.reach == 0.0
            && self.codes.is_some()
            && self.pq.is_none()
            && !(self.labels.is_some() && sp.rerank == 0);
        // Adaptive selection shares its list passes in rounds (below): int8
        // codes, no label-trained lists (whose k-th score skips repeats).
        let adaptive = self.shares_rounds(sp);
        debug_assert!(adaptive || coop.is_none(), "only the rounds are shared");
        if adaptive {
            b.ord.clear();
            b.ord_rng.clear();
            b.ord_rng.resize(nb, (0, 0));
        }
        let nprobe = (sp.nprobe as usize).min(nlist);
        query_slot(&mut s.qq, dp);
        grow(&mut s.cscore, nlist);
        if shared {
            grow(&mut b.lists, nb * nprobe);
            grow(&mut b.nsel, nb);
        }
        grow(&mut b.whole, nb);
        let can_share = self.shape_dirs().is_some() && QPanels::has_kernel(v);
        let sel = crate::kernels::select::kernels(tier);
        for i in 0..nb {
            s.cscore[..nlist].copy_from_slice(&b.raw[i * cs..i * cs + nlist]);
            // The query's codes where the single-query code looks for them
            // (swapped, not copied; swapped back below).
            std::mem::swap(s.qq.as_mut().expect("set above"), &mut b.qq[i]);
            self.finish_estimates(query(i), b.qn[i], s);
            if shared {
                let ns = self.select_fixed(nprobe, s);
                b.lists[i * nprobe..i * nprobe + ns].copy_from_slice(&s.lists[..ns]);
                b.nsel[i] = ns;
            } else if adaptive {
                // The query's order now, unless it may share the pass
                // over every list's directions (then after this loop).
                let start = self.adaptive_start(&c, query(i), i, s, &mut b);
                grow(&mut b.start, i + 1);
                b.start[i] = start;
                let extra = (sp.reach - 1.0) * b.qn[i];
                let rest = start
                    .map(|(seen, th2)| (th2, self.rest_masks(sel, b.qn[i], extra, th2, seen, s)));
                b.whole[i] =
                    can_share && rest.is_some_and(|(_, rm)| self.shares_projections(rm, s));
                if !b.whole[i] {
                    self.adaptive_order(&c, i, rest, None, s, &mut b);
                }
            } else {
                self.visit_and_finish(
                    tier,
                    v,
                    query(i),
                    b.qn[i],
                    k,
                    sp,
                    s,
                    &mut out_ids[i * k..(i + 1) * k],
                    &mut out_scores[i * k..(i + 1) * k],
                    st,
                );
            }
            std::mem::swap(s.qq.as_mut().expect("set above"), &mut b.qq[i]);
        }

        if adaptive {
            // The orders of the queries that project onto every list's
            // directions: where 4 or more do, that pass is shared (the
            // directions' panels, re-laid by the first batch that shares
            // them and kept, scored four queries per load); else each
            // gathers its candidates' rows.
            b.whole.truncate(nb);
            let share = (b.whole.iter().filter(|&&w| w).count() >= LIST_PANEL_MIN_QUERIES)
                .then(|| self.dir_panels(v))
                .flatten();
            b.group.clear();
            for i in 0..nb {
                if !b.whole[i] {
                    continue;
                }
                if let Some(dpan) = share {
                    if !b.group.contains(&i) {
                        self.project_group(v, dpan, i, &mut b);
                    }
                }
                // The query's estimates and candidates again (the scratch
                // has served the queries after it since).
                s.cscore[..nlist].copy_from_slice(&b.raw[i * cs..i * cs + nlist]);
                std::mem::swap(s.qq.as_mut().expect("set above"), &mut b.qq[i]);
                self.finish_estimates(query(i), b.qn[i], s);
                let (seen, th2) = b.start[i].expect("a query that projects has a second list");
                let extra = (sp.reach - 1.0) * b.qn[i];
                let rest = Some((th2, self.rest_masks(sel, b.qn[i], extra, th2, seen, s)));
                if let Some(dpan) = share {
                    let t = b.group.iter().position(|&j| j == i).expect("in the group");
                    let rows = dpan.padded_rows();
                    let gproj = std::mem::take(&mut b.gproj);
                    let p = &gproj[t * rows..(t + 1) * rows];
                    self.adaptive_order(&c, i, rest, Some(p), s, &mut b);
                    b.gproj = gproj;
                } else {
                    self.adaptive_order(&c, i, rest, None, s, &mut b);
                }
                std::mem::swap(s.qq.as_mut().expect("set above"), &mut b.qq[i]);
            }
            self.adaptive_rounds(&c, &mut b, st, coop);
            self.drain_batch(&c, s, &mut b, out_ids, out_scores, st);
        }
        if shared {
            // 2. The list rows, list by list, each query's scores offered
            // to its running top `r` (re-rank candidates by position) or
            // top `k` (by id, no re-rank) as they come: `topk_offer` over
            // the pieces gives exactly what the single-query path selects
            // from all of them.
            b.pairs.clear();
            grow(&mut b.n, nb);
            for i in 0..nb {
                let mut n = 0;
                for &l in &b.lists[i * nprobe..i * nprobe + b.nsel[i]] {
                    let l = l as usize;
                    let len = (self.offsets[l + 1] - self.offsets[l]) as usize;
                    n += len;
                    b.pairs.push(((l as u64) << 32) | i as u64);
                }
                b.n[i] = n;
                st.lists += b.nsel[i] as u64;
                st.scanned += n as u64;
            }
            // Pushed query by query, so a list's queries come in order: the
            // stable radix sort on the list half gives the sorted order.
            sort_rank_keys(&mut b.pairs, &mut b.pairs_tmp);
            while b.tops.len() < nb {
                b.tops.push(TopK::default());
            }
            for h in &mut b.tops[..nb] {
                h.clear();
            }
            let (n, tops, qq) = (&b.n, &mut b.tops, &b.qq);
            self.score_pairs(
                &c,
                &b.pairs,
                (&mut b.ptmp, &mut b.tmp),
                |x| {
                    let i = x as u32 as usize;
                    (&qq[i], c.query(i))
                },
                |x, a, sc| {
                    let i = x as u32 as usize;
                    self.offer(sp, k, a, n[i], sc, &mut tops[i]);
                },
            );
            // 3. Per query: re-rank and top k.
            self.drain_batch(&c, s, &mut b, out_ids, out_scores, st);
        }
        s.batch = b;
    }
}
