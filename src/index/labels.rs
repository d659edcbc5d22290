//! The index's label-aware buckets ([`crate::source::labels`]): the query
//! codes they count by, their training and the candidates they serve.

use super::*;
use crate::par::threads_for;
use crate::source::labels::{check_labels, count_labels, LabelParams, LabelState};
use crate::source::lsh::tables::merge_tables;

/// Queries hashed per block in [`Index::query_codes`].
const CODE_BLOCK: usize = 1024;

impl Index {
    /// The codes (`n x L`, row-major, unfolded) the index's family gives
    /// the `n` queries (`q` row `i` at `i * q_stride`), after the index's
    /// query transform: what a query gathers with. Queries must be finite.
    /// Uses every core for large `n`.
    pub fn query_codes(&self, q: &[f32], n: usize, q_stride: usize, out: &mut [u32]) -> Result<()> {
        self.lsh("query_codes")?;
        self.check_queries(q, n, q_stride, "queries")?;
        let nc = checked_mul(n, self.num_tables() as usize, "n * L")?;
        if out.len() < nc {
            bail!(
                BufferTooSmall,
                "codes hold {} values, n * L = {nc} needed",
                out.len()
            );
        }
        if n == 0 {
            return Ok(());
        }
        self.query_codes_unchecked(q, n, q_stride, &mut out[..nc])
    }

    /// `query_codes` after its checks (`n >= 1`, `out` exactly `n * L`):
    /// the index's pipeline ([`Index::hash_queries`]) in blocks of
    /// [`CODE_BLOCK`] queries, on every core for large `n`.
    fn query_codes_unchecked(
        &self,
        q: &[f32],
        n: usize,
        q_stride: usize,
        out: &mut [u32],
    ) -> Result<()> {
        let l = self.num_tables() as usize;
        let work = |i0: usize, c: &mut [u32]| -> Result<()> {
            let m = c.len() / l;
            let mut tq = self.transform_scratch(CODE_BLOCK.min(m))?;
            let mut b0 = 0;
            while b0 < m {
                let b = (m - b0).min(CODE_BLOCK);
                let qb = &q[(i0 + b0) * q_stride..];
                let cb = &mut c[b0 * l..(b0 + b) * l];
                self.hash_queries(qb, b, q_stride, &mut tq, cb, None)?;
                b0 += b;
            }
            Ok(())
        };
        let nthreads = threads_for(0, n.div_ceil(CODE_BLOCK));
        if nthreads == 1 {
            return work(0, out);
        }
        let per = n.div_ceil(nthreads);
        crate::par::try_map(out.chunks_mut(per * l).enumerate(), |(j, c)| {
            work(j * per, c)
        })
        .map(|_| ())
    }

    /// The candidate sets the index's query would score, for `nq` queries:
    /// CSR in `out` (ids ascending per query), exactly as [`Index::query`]
    /// gathers them with `g` (`g.probes > 0` multi-probes a SimHash index;
    /// `g.bits_per_table` 0 or K). Thread-safe.
    pub fn candidates(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        g: &GatherParams,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_queries(q, nq, q_stride, g, None, out)
    }

    /// Adds label-aware entries to the index's buckets from training data
    /// (module documentation): `n` queries (`queries` row `i` at
    /// `i * q_stride`, `q_stride >= dim`, finite) with CSR labels (row ids
    /// `< rows`). Everything is validated before the index changes; on
    /// error it is unchanged. Needs exclusive access: no query (and no use
    /// of the index's tables) may run concurrently. An index is trained at
    /// most once (`InvalidArgument` afterwards). Uses every core.
    pub fn train_labels(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &LabelParams,
    ) -> Result<()> {
        if self.ivf().is_some() {
            let (a, dim) = (self.vmax, self.dim());
            if n > 0 {
                self.check_queries(queries, n, q_stride, "queries")?;
                crate::error::check_query_range(queries, n, dim, q_stride, a, "queries")?;
            }
            let ivf = self.ivf_source_mut("train_labels")?;
            return ivf.train_labels(queries, n, q_stride, label_offsets, labels, p);
        }
        self.lsh("train_labels")?;
        if let Some(s) = &self.labels {
            bail!(
                InvalidArgument,
                "the index is already trained with labels ({} pairs, label_cap {}, {:?}); \
                 build or load an untrained index to train again",
                s.pairs,
                s.params.label_cap,
                s.params.policy
            );
        }
        let l = self.num_tables() as usize;
        self.check_queries(queries, n, q_stride, "queries")?;
        check_labels(n, self.rows(), label_offsets, labels)?;
        let mut codes = try_vec::<u32>(checked_mul(n, l, "n * L")?, "training query codes")?;
        if n > 0 {
            self.query_codes_unchecked(queries, n, q_stride, &mut codes)?;
        }
        let lab = count_labels(
            &codes,
            n,
            l,
            self.range_bits(),
            label_offsets,
            labels,
            p.label_cap,
            0,
        )?;
        drop(codes);
        let merged = merge_tables(&self.lsh("train_labels")?.tables, &lab, p.policy)?;
        // In place: the Box (and a borrowed C handle to it) keeps its address.
        *self.lsh_mut("train_labels")?.tables = merged;
        self.labels = Some(LabelState {
            params: *p,
            queries: n as u64,
            pairs: (label_offsets[n] - label_offsets[0]) as u64,
        });
        Ok(())
    }

    /// The label training of the index (also after a load), if any.
    pub fn label_state(&self) -> Option<LabelState> {
        self.labels
            .or_else(|| self.ivf().and_then(|i| i.label_state()))
    }
}
