//! The graph as a family of [`crate::Index`]: the FGD
//! graph is the index's candidate source ([`CandidateSource`]), registered
//! with one line in the index's registry (`index::SOURCES`). This file is all
//! the index knows of it.
//!
//! * Build: the graph over the index's rows and bias with
//!   [`crate::index::IndexParams`]'s `graph` ([`super::GraphParams`]: the
//!   same graph as [`Graph::build`] with them). The index keeps W per its
//!   `storage` as for every family: the graph steers retrieval (its own
//!   bias-fused FGD transform), the index's scorer computes the returned
//!   logits of the original W and bias.
//! * Query ([`crate::index::QueryParams::graph`]: `ef`, `walk`,
//!   `rerank`): per query the graph's pool, best first by the walk's score,
//!   of which the best `rerank` (0 = all, at least k) are the candidates;
//!   the index re-scores them exactly and keeps the top k.
//! * File: the graph's own sections (`GPARAM`, `GROWS`, `GSCALES`,
//!   `GLEVELS`, `GLINKS0`, `GUPPER`; see the graph's `file` module) beside
//!   the index's `PARAMS`, `BIAS` and `WEIGHTS`, checked as in a graph file,
//!   and against the index's `PARAMS` (rows, dim, bias, seed).
//! * Refused: a transform other than NONE (the graph has its own),
//!   caller-given planes or maps, label training (`LABELS`).

use super::Graph;
use crate::error::{Result, Status};
use crate::format::SectionOut;
use crate::source::GatherResult;
use crate::source::{
    non_lsh_build, non_lsh_load, BuildInput, CandidateSource, IndexView, LoadInput, QueryParams,
    SourceRegistration,
};
use crate::source::{Family, QueryStats, Resolved};

/// The graph family's registration.
pub(crate) static REGISTRATION: SourceRegistration = SourceRegistration {
    name: "graph",
    accepts: |f| f == Family::Graph,
    build,
    load,
};

impl CandidateSource for Graph {
    fn check_query(&self, _ix: &IndexView<'_>, qp: &QueryParams) -> Result<()> {
        self.check_search(&qp.graph)
    }

    fn candidates(
        &self,
        _ix: &IndexView<'_>,
        q: &[f32],
        n: usize,
        q_stride: usize,
        k: usize,
        qp: &QueryParams,
        out: &mut GatherResult,
        _scores: &mut Vec<f32>,
        st: &mut QueryStats,
    ) -> Result<()> {
        st.scanned +=
            self.candidates_into(crate::isa::active(), q, n, q_stride, k, &qp.graph, out)?;
        Ok(())
    }

    fn sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        keep.push(self.param_record());
        let keep: &'a Vec<Vec<u8>> = keep;
        self.file_sections(&keep[keep.len() - 1])
    }

    fn memory_bytes(&self) -> usize {
        Graph::memory_bytes(self)
    }
}

fn build(b: &BuildInput<'_>, r: &mut Resolved) -> Result<Box<dyn CandidateSource>> {
    let p = b.p;
    non_lsh_build(
        "graph",
        "has its own (FGD, bias-fused) transform",
        p,
        r,
        p.graph.seed,
        p.graph.threads,
    )?;
    let g = Graph::build(b.w, b.bias, b.rows, b.dim, b.w_stride, &p.graph)?;
    Ok(Box::new(g))
}

fn load(l: &LoadInput<'_>) -> Result<Box<dyn CandidateSource>> {
    let bad = l.bad;
    non_lsh_load("graph", l)?;
    let g = Graph::from_container(l.c).map_err(|e| match e.status {
        Status::BadFileFormat => bad(e.message),
        _ => e,
    })?;
    if g.rows() != l.rows || g.dim() != l.dim || g.has_bias() != l.has_bias {
        return Err(bad(format!(
            "GPARAM: a graph of {} x {} (bias {}) in an index of {} x {} (bias {})",
            g.rows(),
            g.dim(),
            g.has_bias(),
            l.rows,
            l.dim,
            l.has_bias
        )));
    }
    if g.params().seed != l.p.seed {
        return Err(bad("GPARAM: the seed differs from PARAMS'".into()));
    }
    Ok(Box::new(g))
}
