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
//! Then each query re-ranks and selects its top `k` as alone. Adaptive
//! selection (`reach > 0`: which list comes next depends on the scores of
//! the lists before it) and 4-bit or exact first passes share the centroid
//! pass only.
//!
//! **Results are bit-identical to answering the queries one at a time**:
//! every row's int8 score is the same integer dot product and the same f32
//! epilogue whichever run it is part of ([`crate::kernels::qdot`]), the
//! candidates kept are the best `r` by (score, position) under a total
//! order whichever order they are offered in ([`topk_offer`] is the
//! single-query selection's own loop), and the rest is the single-query
//! code. `tests/ivf_batch.rs` checks this on every tier, for
//! every code kind, selection and label-trained lists.

use super::*;
use crate::matmul::{topk_drain, topk_offer, TopK};
use crate::quant::qdot::PANEL_QUERIES;

/// Queries answered together.
pub(super) const BATCH: usize = 64;

/// A list that at least this many queries of a batch visit is re-laid as
/// panels and scored four queries per load of its codes (where the tier
/// has panel kernels); fewer share too little to pay for the re-lay.
pub(super) const LIST_PANEL_MIN_QUERIES: usize = 4;

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
    /// `(list << 32) | query`, sorted: the shared pass's order.
    pairs: Vec<u64>,
    /// Rows each query scans.
    n: Vec<usize>,
    /// Each query's running top `r` (or `k`) ([`topk_offer`]).
    tops: Vec<TopK>,
    /// One list's scores.
    tmp: Vec<f32>,
    /// One list's rows as panels (shared pass, panel kernels).
    lpan: QPanels,
    /// Their scores, [`PANEL_QUERIES`] queries at the panels' padded rows.
    ptmp: Vec<f32>,
}

impl Ivf {
    /// Offers the scores `sc` of the rows at positions `a ..` to a query's
    /// running top: `r` by position for the re-rank (the query scans `n`
    /// rows), or `k` by id without one.
    fn offer(&self, sp: &SearchParams, k: usize, a: usize, n: usize, sc: &[f32], top: &mut TopK) {
        if sp.rerank > 0 {
            topk_offer(sc, |j| (a + j) as u32, rerank_len(sp, k, n), top);
        } else {
            topk_offer(sc, |j| self.ids[a + j], k, top);
        }
    }

    /// The top `k` of `nb` (`>= 1`) checked queries (`q` at `q_stride`),
    /// into `out_ids` / `out_scores` (`nb * k` each, `k >= 1`), bit for bit
    /// what [`Ivf::search_stats`] gives them one at a time.
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
    ) {
        let v = Variant::of(tier).expect("tier checked");
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
        let nprobe = (sp.nprobe as usize).min(nlist);
        query_slot(&mut s.qq, dp);
        grow(&mut s.cscore, nlist);
        if shared {
            grow(&mut b.lists, nb * nprobe);
            grow(&mut b.nsel, nb);
        }
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

        if shared {
            // 2. The list rows, list by list, each query's scores offered
            // to its running top `r` (re-rank candidates by position) or
            // top `k` (by id, no re-rank) as they come: `topk_offer` over
            // the pieces gives exactly what the single-query path selects
            // from all of them.
            b.pairs.clear();
            grow(&mut b.n, nb);
            let mut longest = 0;
            for i in 0..nb {
                let mut n = 0;
                for &l in &b.lists[i * nprobe..i * nprobe + b.nsel[i]] {
                    let l = l as usize;
                    let len = (self.offsets[l + 1] - self.offsets[l]) as usize;
                    n += len;
                    longest = longest.max(len);
                    b.pairs.push(((l as u64) << 32) | i as u64);
                }
                b.n[i] = n;
                st.lists += b.nsel[i] as u64;
                st.scanned += n as u64;
            }
            b.pairs.sort_unstable();
            while b.tops.len() < nb {
                b.tops.push(TopK::default());
            }
            for h in &mut b.tops[..nb] {
                h.clear();
            }
            grow(&mut b.tmp, longest);
            let rerank = sp.rerank > 0;
            let codes = self.codes.as_ref().expect("int8 codes (shared pass)");
            let panels = QPanels::has_kernel(v);
            let mut p0 = 0;
            while p0 < b.pairs.len() {
                let l = (b.pairs[p0] >> 32) as usize;
                let p1 = p0 + b.pairs[p0..].partition_point(|&x| (x >> 32) as usize == l);
                let (a, e) = (self.offsets[l] as usize, self.offsets[l + 1] as usize);
                let len = e - a;
                if panels && p1 - p0 >= LIST_PANEL_MIN_QUERIES && len > 0 {
                    // Many queries on this list: its rows re-laid as panels
                    // once, then scored four queries per load of the codes
                    // (the same bits as the row-major kernel; the bias
                    // added after, as that kernel's epilogue does).
                    b.lpan
                        .set_rows(Some(v), codes, a, len)
                        .expect("list rows within the codes");
                    let pr = b.lpan.padded_rows();
                    grow(&mut b.ptmp, PANEL_QUERIES * pr);
                    for c in b.pairs[p0..p1].chunks(PANEL_QUERIES) {
                        let mut qs = [&b.qq[0]; PANEL_QUERIES];
                        for (t, &x) in c.iter().enumerate() {
                            qs[t] = &b.qq[x as u32 as usize];
                        }
                        b.lpan
                            .score(v, 0, pr, &qs[..c.len()], &mut b.ptmp, pr)
                            .expect("list panels");
                        for (t, &x) in c.iter().enumerate() {
                            let i = x as u32 as usize;
                            let sc = &mut b.ptmp[t * pr..t * pr + len];
                            if !self.bias_pos.is_empty() {
                                for (o, &bb) in sc.iter_mut().zip(&self.bias_pos[a..e]) {
                                    *o += bb;
                                }
                            }
                            self.offer(sp, k, a, b.n[i], sc, &mut b.tops[i]);
                        }
                    }
                } else {
                    for &x in &b.pairs[p0..p1] {
                        let i = x as u32 as usize;
                        let sc = &mut b.tmp[..len];
                        self.score_rows(tier, v, query(i), Some(&b.qq[i]), a, e, sc);
                        self.offer(sp, k, a, b.n[i], sc, &mut b.tops[i]);
                    }
                }
                p0 = p1;
            }
            // 3. Per query: re-rank and top k.
            for i in 0..nb {
                let (oi, os) = (
                    &mut out_ids[i * k..(i + 1) * k],
                    &mut out_scores[i * k..(i + 1) * k],
                );
                if rerank {
                    let r = rerank_len(sp, k, b.n[i]);
                    grow(&mut s.cand, r);
                    grow(&mut s.cand_sc, r);
                    topk_drain(&mut b.tops[i], r, &mut s.cand[..r], &mut s.cand_sc[..r]);
                    self.rerank(tier, query(i), k, r, s, oi, os, st);
                } else {
                    topk_drain(&mut b.tops[i], k, oi, os);
                }
            }
        }
        s.batch = b;
    }
}
