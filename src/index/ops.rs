//! The operations only some candidate sources have, as methods of the one
//! index: each checks the source first and refuses another with
//! `Unsupported` (naming the operation and the index's source), before
//! anything is read or written.

use super::*;
use crate::source::forest::Forest;
use crate::source::ivf::{Calibration, Ivf};

impl Index {
    pub(super) fn unsupported(&self, what: &str, needs: &str) -> Error {
        Error::new(
            Status::Unsupported,
            format!(
                "{what} needs {needs}; this index is the {} source",
                self.source_name()
            ),
        )
    }

    /// The IVF lists of an IVF-source index, or `Unsupported`.
    pub(crate) fn ivf_source(&self, what: &str) -> Result<&Ivf> {
        self.src
            .as_any()
            .downcast_ref::<Ivf>()
            .ok_or_else(|| self.unsupported(what, "the IVF source"))
    }

    pub(crate) fn ivf_source_mut(&mut self, what: &str) -> Result<&mut Ivf> {
        let e = self.unsupported(what, "the IVF source");
        let src: &mut dyn CandidateSource = &mut *self.src;
        src.as_any_mut().downcast_mut::<Ivf>().ok_or(e)
    }

    /// The IVF lists of an IVF-source index (`None` for another source).
    pub fn ivf(&self) -> Option<&Ivf> {
        self.src.as_any().downcast_ref::<Ivf>()
    }

    /// The forest of a forest-source index (`None` for another source).
    pub fn forest(&self) -> Option<&Forest> {
        self.src.as_any().downcast_ref::<Forest>()
    }

    /// IVF source: the query options that reach `target` recall@`k` on the
    /// `nq` sample queries `q` (rows at `q_stride`) with `rerank` exact
    /// re-scores, from [`Ivf::calibrate`]; its `params` are the `ivf`
    /// field of the [`QueryParams`] to query with. Deterministic; `threads`
    /// (0 = all cores) runs the sample's searches in parallel.
    ///
    /// Errors: `Unsupported` (another source), and those of
    /// [`Ivf::calibrate`].
    #[allow(clippy::too_many_arguments)]
    pub fn calibrate(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        target: f32,
        rerank: u32,
        threads: usize,
    ) -> Result<Calibration> {
        let ivf = self.ivf_source("calibrate")?;
        self.check_queries(q, nq, q_stride, "q")?;
        crate::error::check_query_range(q, nq, self.dim, q_stride, self.vmax, "q")?;
        ivf.calibrate(q, nq, q_stride, k, target, rerank, threads)
    }

    /// Forest source: builds the trees again from the index's current W
    /// (a borrowed W the caller changed while no call used the index, as
    /// in training), with the forest's parameters or with `seed`. W and
    /// the bias are checked again (finite, within the scoring range) and
    /// the index's query range follows them. On error the index is
    /// unchanged. Exclusive access, like every `&mut self` method.
    ///
    /// Errors: `Unsupported` (another source), `NonFinite`,
    /// `AllocationFailed`.
    pub fn rebuild(&mut self, seed: Option<u64>) -> Result<()> {
        let mut p = self
            .forest()
            .ok_or_else(|| self.unsupported("rebuild", "the forest source"))?
            .params();
        if let Some(s) = seed {
            p.seed = s;
        }
        let (rows, dim, st) = (self.rows, self.dim, self.weight_stride());
        let Weights::F32(w) = self.weights() else {
            unreachable!("a forest-source index keeps W as f32 (checked at build and load)")
        };
        if let Some((r, j)) = first_non_finite(w, rows, dim, st) {
            bail!(
                NonFinite,
                "w row {r} column {j} is {} (finite weights needed)",
                w[r * st + j]
            );
        }
        let a = self.value_max();
        crate::error::check_scorable(a, dim, "the rows' values")?;
        let nf = Forest::build(w, rows, dim, st, &p)?;
        self.refresh_codes(None)?;
        self.src = Box::new(nf);
        self.vmax = a;
        Ok(())
    }

    /// The candidate sets of `nq` queries (`q` row `i` at `i * q_stride`)
    /// as the source hands them to the scorer for a top-`k` query with
    /// `qp`: CSR into `out` (`out.ids[out.offsets[i]..out.offsets[i+1]]`,
    /// each query's ids distinct; their order is the source's). The LSH
    /// negative sampling and the forest's selective softmax train on these
    /// sets. Thread-safe.
    #[allow(clippy::too_many_arguments)]
    pub fn candidate_sets(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: u32,
        qp: &QueryParams,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.check_query_values(q, nq, q_stride)?;
        self.src.check_query(&self.view(), qp)?;
        out.ids.clear();
        out.counts.clear();
        out.offsets.clear();
        out.offsets.push(0);
        let mut st = QueryStats::default();
        let view = self.view();
        // The thread's query buffers, as the queries use them (nothing is
        // allocated once they have grown).
        super::query::QSCRATCH.with(|cell| -> Result<()> {
            let mut guard = cell.borrow_mut();
            let s = &mut *guard;
            let mut i0 = 0;
            while i0 < nq {
                let b = (nq - i0).min(QUERY_BLOCK);
                self.src.candidates(
                    &view,
                    &q[i0 * q_stride..],
                    b,
                    q_stride,
                    k as usize,
                    qp,
                    &mut s.gather,
                    &mut s.scores,
                    &mut st,
                )?;
                let base = out.ids.len();
                out.ids.extend_from_slice(&s.gather.ids);
                out.offsets
                    .extend(s.gather.offsets[1..=b].iter().map(|&o| base + o));
                i0 += b;
            }
            Ok(())
        })
    }
}
