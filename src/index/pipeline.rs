//! The one query pipeline of an index: check →
//! transform → hash (fused hash + project when probing) → gather → score.
//! [`Index::query`], [`Index::candidates`], [`Index::candidates_budget`],
//! [`Index::query_codes`] (and through it label training,
//! [`Index::train_labels`]) and IUL ([`Index::train_iul`]) all go through
//! these stages; each check exists once:
//! * the queries' length and values: [`Index::check_queries`];
//! * the gather parameters, multi-probing included: `resolve_gather`;
//! * label CSR: [`crate::source::labels::check_labels`].
//!
//! The three seams meet here, each called once per block:
//! * the hash family, [`crate::source::lsh::hash::HashFamily`] (a trait object chosen
//!   at build / load from the registry);
//! * the candidate source, `CandidateSource` (`source.rs`): the LSH
//!   tables over the hash family (`lsh.rs`: transform → hash → plain,
//!   multi-probe and budgeted gathers; label-aware buckets are entries of
//!   the same CSR after [`Index::train_labels`]) or the FGD graph
//!   (`crate::source::graph`'s `family.rs`);
//! * the scorer, [`Scorer`]: the exact gathered matmul of [`WeightMatrix`],
//!   which picks its kernel per storage (f32, bf16, f16, int8) once per
//!   call; with row codes ([`Index::set_codes`], `codes.rs`) the same
//!   trait over the int8 codes scores every candidate first, and the
//!   index's rows only each query's shortlist.
//!
//! The index's fields keep the concrete source and scorer types because
//! the public API hands them out (`Index::tables`, `Index::weights`, the C
//! API's borrowed table handle); the pipeline only sees the traits.
//! Every stage dispatches once per call or per block, never per element.

use super::*;
use crate::source::lsh::tables::BudgetRule;
use crate::source::transform_queries;

/// How gathered candidates get their logits (module documentation).
pub trait Scorer: Send + Sync {
    /// `out[offsets[i]..offsets[i + 1]]` = the logits of query `i` (`q` row
    /// `i` at `i * q_stride`) for the rows `ids[offsets[i]..offsets[i + 1]]`.
    fn score(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()>;
}

impl Scorer for WeightMatrix<'_> {
    fn score(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        self.matmul(q, nq, q_stride, ids, offsets, out)
    }
}

/// Forced ids per query: CSR `(offsets, ids)` ([`Index::candidates_budget`]).
type Forced<'a> = Option<(&'a [usize], &'a [u32])>;

impl Index {
    /// The one query check: `q` holds `n` queries of `dim` floats at
    /// `q_stride` (`BufferTooSmall`, or `InvalidArgument` for a stride
    /// below dim), all finite (`NonFinite` naming query and coordinate).
    /// `what` names the buffer in messages.
    pub(crate) fn check_queries(
        &self,
        q: &[f32],
        n: usize,
        q_stride: usize,
        what: &str,
    ) -> Result<()> {
        let need = strided_len(n, self.dim, q_stride, what)?;
        if q.len() < need {
            bail!(
                BufferTooSmall,
                "`{what}` holds {} floats, {n} queries of stride {q_stride} need {need}",
                q.len()
            );
        }
        crate::source::labels::check_finite(q, n, self.dim, q_stride)
    }

    /// The transform stage: the `n` transformed queries (`hash_dim` floats
    /// each, contiguous) of `q` into `out` (at least `n * hash_dim`).
    pub(crate) fn transform_queries(&self, q: &[f32], n: usize, q_stride: usize, out: &mut [f32]) {
        transform_queries(
            self.p.transform,
            self.dim,
            self.hash_dim,
            q,
            n,
            q_stride,
            out,
        );
    }

    /// The transform and hash stages of the LSH source
    /// ([`crate::source::lsh::Lsh::hash_queries`]) for `n` checked queries.
    pub(crate) fn hash_queries(
        &self,
        q: &[f32],
        n: usize,
        q_stride: usize,
        tq: &mut [f32],
        codes: &mut [u32],
        proj: Option<&mut [f32]>,
    ) -> Result<()> {
        let lsh = self.lsh("hashing queries")?;
        lsh.hash_queries(&self.view(), q, n, q_stride, tq, codes, proj)
    }

    /// Transform scratch for `n` queries (empty without a transform).
    pub(crate) fn transform_scratch(&self, n: usize) -> Result<Vec<f32>> {
        if self.p.transform == Transform::None {
            return Ok(Vec::new());
        }
        try_vec::<f32>(checked_mul(n, self.hash_dim, "nq * dim'")?, "queries")
    }

    /// The gather stage for `nq` unchecked queries: check, hash, then
    /// [`Tables::gather`] (no `budget`) or [`Tables::gather_budget`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gather_queries(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        g: &GatherParams,
        budget: Option<(BudgetRule, Forced<'_>)>,
        out: &mut GatherResult,
    ) -> Result<()> {
        let tables = &self.lsh("candidates")?.tables;
        let l = self.p.tables as usize;
        self.check_queries(q, nq, q_stride, "q")?;
        let gp = self.resolve_gather(g)?;
        let mut codes = try_vec::<u32>(checked_mul(nq, l, "nq * L")?, "query codes")?;
        let mut proj = if gp.probes > 0 {
            try_vec::<f32>(
                checked_mul(nq, self.p.bits as usize * l, "nq * K * L")?,
                "projections",
            )?
        } else {
            Vec::new()
        };
        if nq > 0 {
            let mut tq = self.transform_scratch(nq)?;
            let p = (gp.probes > 0).then_some(&mut proj[..]);
            self.hash_queries(q, nq, q_stride, &mut tq, &mut codes, p)?;
        }
        let forced = budget.and_then(|b| b.1);
        let input = GatherInput {
            codes: &codes,
            q: nq,
            projections: (gp.probes > 0).then_some(&proj[..]),
            forced_offsets: forced.map(|f| f.0),
            forced_ids: forced.map_or(&[], |f| f.1),
        };
        let rule = budget.map_or(BudgetRule::MidBucket, |b| b.0);
        tables.gather_budget(&gp, rule, &input, false, out)
    }
}
