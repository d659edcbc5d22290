//! Index queries: the pipeline's driver over blocks of queries, and the
//! split of a batch over threads ([`QueryParams::threads`]).

use super::*;
use crate::par::{Spare, Warm};

#[derive(Default)]
pub(super) struct QueryScratch {
    pub(super) gather: GatherResult,
    pub(super) scores: Vec<f32>,
    out_scores: Vec<f32>,
    codes: super::codes::CodeScratch,
}

thread_local! {
    /// The calling thread's query buffers (queries and candidate sets).
    pub(super) static QSCRATCH: Warm<QueryScratch> = Warm::new(&SPARE_QSCRATCH);
}

static SPARE_QSCRATCH: Spare<QueryScratch> = Spare::new();

impl Index {
    /// The checks of a batch of queries every query path makes: shape and
    /// finite values, then the range the stored rows can be scored in.
    pub(crate) fn check_query_values(&self, q: &[f32], nq: usize, q_stride: usize) -> Result<()> {
        self.check_queries(q, nq, q_stride, "q")?;
        // int8 rows (and row codes) are summed as codes (up to 127) times
        // q, then scaled.
        let a = if self.p.storage == Storage::I8 || self.codes.is_some() {
            self.vmax.max(127.0)
        } else {
            self.vmax
        };
        crate::error::check_query_range(q, nq, self.dim, q_stride, a, "q")
    }

    /// The top `k` rows of each of `nq` queries (`q` row `i` at
    /// `i * q_stride`, `q_stride >= dim`) into `out_ids[i*k ..]` and
    /// `out_scores[i*k ..]` (both at least `nq * k` long): logits of the
    /// original W and bias, descending, ties to the smaller id, padded with
    /// `u32::MAX` / `-inf` when a query has fewer than k candidates. `k = 0`
    /// or `nq = 0` writes nothing. Queries must be finite. `g.probes > 0`
    /// (SimHash only) multi-probes; `g.bits_per_table` may be 0 (then K) or
    /// must equal K. A graph-family index ignores `g` and searches with
    /// the default [`crate::source::graph::SearchParams`] (see
    /// [`Index::query_with`]). Thread-safe; nothing is written on error.
    #[allow(clippy::too_many_arguments)]
    pub fn query(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: u32,
        g: &GatherParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut QueryStats>,
    ) -> Result<()> {
        let qp = QueryParams::from(*g);
        self.query_impl(q, nq, q_stride, k, &qp, out_ids, Some(out_scores), stats)
    }

    /// [`Index::query`] with the options of every family: `qp.gather` for
    /// the LSH families, `qp.graph` (ef, walk, rerank) for the graph family;
    /// each family ignores the other's.
    #[allow(clippy::too_many_arguments)]
    pub fn query_with(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: u32,
        qp: &QueryParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut QueryStats>,
    ) -> Result<()> {
        self.query_impl(q, nq, q_stride, k, qp, out_ids, Some(out_scores), stats)
    }

    /// [`Index::query_with`] with optional scores (the C API's path; not
    /// part of the Rust API: use [`Index::query`]).
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub fn query_impl(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: u32,
        qp: &QueryParams,
        out_ids: &mut [u32],
        out_scores: Option<&mut [f32]>,
        stats: Option<&mut QueryStats>,
    ) -> Result<()> {
        // ---- checks
        self.check_query_values(q, nq, q_stride)?;
        let kk = k as usize;
        let need = checked_mul(nq, kk, "nq * k")?;
        if out_ids.len() < need {
            bail!(
                BufferTooSmall,
                "`out_ids` holds {} values, nq * k = {need} needed",
                out_ids.len()
            );
        }
        if let Some(s) = &out_scores {
            if s.len() < need {
                bail!(
                    BufferTooSmall,
                    "`out_scores` holds {} values, nq * k = {need} needed",
                    s.len()
                );
            }
        }
        self.src.check_query(&self.view(), qp)?;
        let mut st = QueryStats {
            queries: nq as u64,
            candidates_total: 0,
            candidates_min: if nq == 0 { 0 } else { u64::MAX },
            candidates_max: 0,
            ..Default::default()
        };
        if nq > 0 {
            // Contiguous ranges of queries, one per thread: a query's answer
            // does not depend on the queries beside it (each source's
            // candidates are per query; the IVF's shared passes over a
            // batch give each query what it gets alone), so every split
            // answers the same bits.
            let t = query_threads(qp.threads).min(nq);
            // A source that shares work within a batch (the IVF's list
            // scans) splits batches that contiguous ranges would cut below
            // a full block itself, keeping every query of a block on each
            // list it scans.
            let split =
                t > 1 && nq.div_ceil(t) < QUERY_BLOCK && self.src.splits_batches(&self.view(), qp);
            if t == 1 || split {
                // The calling thread: no job list, nothing allocated.
                let mut part = QueryStats::default();
                self.query_range(
                    q,
                    nq,
                    q_stride,
                    kk,
                    qp,
                    &mut out_ids[..need],
                    out_scores,
                    &mut part,
                    // Its threads wait for each other at every round of
                    // a block: no more of them than the cores.
                    split.then_some((&self.pool, t.min(crate::par::cores()))),
                )?;
                merge_stats(&mut st, &part);
            } else {
                // One contiguous range per thread: smaller ranges would
                // even out uneven queries but share fewer IVF list scans.
                // The ranges' outputs are carved from the caller's by
                // index, their counts merged under a lock and the first
                // error (in range order) kept, so that a call on the
                // index's started workers allocates nothing.
                let per = nq.div_ceil(t);
                let ranges = nq.div_ceil(per);
                let ids = SendPtr(out_ids.as_mut_ptr());
                let sc = out_scores.map(|o| SendPtr(o.as_mut_ptr()));
                let merged = std::sync::Mutex::new((st, None::<(usize, Error)>));
                self.pool.for_each(t, ranges, |r| {
                    let (i0, n) = (r * per, per.min(nq - r * per));
                    // SAFETY: range r's outputs are elements
                    // [i0 kk, (i0 + n) kk) of out_ids and out_scores (each
                    // at least need = nq kk long, checked above), disjoint
                    // from every other range's, and `for_each` runs each
                    // range once and returns only after all have returned,
                    // while the caller's borrows are still held.
                    let (oi, os) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(ids.get().add(i0 * kk), n * kk),
                            sc.map(|p| {
                                std::slice::from_raw_parts_mut(p.get().add(i0 * kk), n * kk)
                            }),
                        )
                    };
                    let mut part = QueryStats::default();
                    let res = self.query_range(
                        &q[i0 * q_stride..],
                        n,
                        q_stride,
                        kk,
                        qp,
                        oi,
                        os,
                        &mut part,
                        None,
                    );
                    let mut m = merged.lock().unwrap_or_else(|e| e.into_inner());
                    match res {
                        Ok(()) => merge_stats(&mut m.0, &part),
                        Err(e) => {
                            if m.1.as_ref().is_none_or(|(r0, _)| r < *r0) {
                                m.1 = Some((r, e));
                            }
                        }
                    }
                });
                let (all, err) = merged.into_inner().unwrap_or_else(|e| e.into_inner());
                if let Some((_, e)) = err {
                    return Err(e);
                }
                st = all;
            }
        }
        if let Some(out) = stats {
            *out = st;
        }
        Ok(())
    }
}

/// A pointer into the caller's output, lent to the ranges of a threaded
/// query (each writes only its own elements).
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);

// SAFETY: the ranges that share it write disjoint elements (see the use).
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so that a closure captures the wrapper,
    /// which is `Sync`, not the raw field).
    fn get(self) -> *mut T {
        self.0
    }
}

/// Adds a range's counts to the call's.
fn merge_stats(st: &mut QueryStats, p: &QueryStats) {
    st.candidates_total += p.candidates_total;
    st.candidates_min = st.candidates_min.min(p.candidates_min);
    st.candidates_max = st.candidates_max.max(p.candidates_max);
    st.lists += p.lists;
    st.scanned += p.scanned;
    st.reranked += p.reranked;
}

/// The threads [`QueryParams::threads`] asks for: 0 and 1 the calling
/// thread, [`QUERY_THREADS_ALL`] every core the process may use.
fn query_threads(t: u32) -> usize {
    match t {
        0 => 1,
        QUERY_THREADS_ALL => crate::par::threads(0),
        t => t as usize,
    }
}

impl Index {
    /// The pipeline for `n` checked queries (`q` row `i` at
    /// `i * q_stride`) on the calling thread, block after block: candidates
    /// -> scores (unless the source's are final) -> top-k into `out_ids`
    /// and `out_scores` (`n * k` each; `None`: scratch). Counts into `st`
    /// (its `candidates_min` starts at `u64::MAX` here).
    #[allow(clippy::too_many_arguments)]
    fn query_range(
        &self,
        q: &[f32],
        n: usize,
        q_stride: usize,
        kk: usize,
        qp: &QueryParams,
        out_ids: &mut [u32],
        mut out_scores: Option<&mut [f32]>,
        st: &mut QueryStats,
        split: Option<(&crate::par::Pool, usize)>,
    ) -> Result<()> {
        st.candidates_min = u64::MAX;
        let wm = self.weight_matrix();
        // The pipeline's stages behind their seams (pipeline.rs and
        // source/mod.rs), each dispatched once per block.
        let (source, scorer): (&dyn CandidateSource, &dyn Scorer) = (&*self.src, &wm);
        let view = crate::source::IndexView {
            split,
            ..self.view()
        };
        let final_scores = source.final_scores(&view, qp);
        // The code stage: code scores of every candidate, exact ones of
        // each query's best `shortlist` (none when the source's scores are
        // final: the IVF's).
        let cm = match &self.codes {
            Some(rc) if !final_scores && kk > 0 => Some((self.code_matrix(rc), rc.rerank)),
            _ => None,
        };
        let shortlist = cm.as_ref().map_or(0, |c| (c.1 as usize).max(kk));
        // The candidates' first scores: the codes' (exact ones follow for
        // the shortlists), the exact ones, or none (the source's are final).
        let first: Option<&dyn Scorer> = match &cm {
            Some(c) => Some(&c.0),
            None => (!final_scores).then_some(scorer),
        };
        QSCRATCH.with(|cell| -> Result<()> {
            let mut guard = cell.borrow_mut();
            let s = &mut *guard;
            let mut i0 = 0;
            while i0 < n {
                let b = (n - i0).min(QUERY_BLOCK);
                let qb = &q[i0 * q_stride..];
                source.candidates(
                    &view,
                    qb,
                    b,
                    q_stride,
                    kk,
                    qp,
                    &mut s.gather,
                    &mut s.scores,
                    st,
                )?;
                let cands = s.gather.ids.len();
                s.scores.resize(cands, 0.0);
                if let Some(sc) = first {
                    sc.score(
                        qb,
                        b,
                        q_stride,
                        &s.gather.ids,
                        &s.gather.offsets,
                        &mut s.scores,
                    )?;
                }
                for w in s.gather.offsets.windows(2) {
                    let c = (w[1] - w[0]) as u64;
                    st.candidates_total += c;
                    st.candidates_min = st.candidates_min.min(c);
                    st.candidates_max = st.candidates_max.max(c);
                }
                let oi = &mut out_ids[i0 * kk..(i0 + b) * kk];
                let os: &mut [f32] = match out_scores.as_deref_mut() {
                    Some(o) => &mut o[i0 * kk..(i0 + b) * kk],
                    None => {
                        s.out_scores.resize(b * kk, 0.0);
                        &mut s.out_scores[..]
                    }
                };
                if cm.is_some() {
                    st.reranked += self.code_stage(
                        qb,
                        b,
                        q_stride,
                        kk,
                        shortlist,
                        &s.gather.ids,
                        &s.gather.offsets,
                        &s.scores,
                        scorer,
                        &mut s.codes,
                        oi,
                        os,
                    )?;
                } else {
                    matmul::topk(
                        &s.scores,
                        Some(&s.gather.ids),
                        &s.gather.offsets,
                        kk,
                        oi,
                        os,
                    )?;
                }
                i0 += b;
            }
            Ok(())
        })
    }
}
