//! Candidate-source families behind one seam.
//!
//! An [`Index`] gets a query's candidates from one [`CandidateSource`]: the
//! LSH tables over a hash family ([`super::lsh::Lsh`], the SimHash and DWTA
//! families) or the FGD graph ([`crate::graph::family`]). The index's
//! build, query, save, load and `memory_bytes` look the family's
//! [`SourceRegistration`] up once ([`source_registration`]) and call the
//! trait object; none of them `match`es on the family. Everything else of
//! an index (the checks, the weights and bias, the exact scorer, the top-k,
//! the `PARAMS` record, `BIAS` / `WEIGHTS` sections) is shared.
//!
//! # Adding a candidate-source family
//! A folder with the family's own code (e.g. `src/graph/`), a file in it
//! with `impl CandidateSource` and a `pub(crate) static REGISTRATION:
//! SourceRegistration` (its build from the rows, its load from the file's
//! sections), one line in [`SOURCES`] and one variant in
//! [`crate::hash::Family`] with the next free id. docs/architecture.md
//! lists the steps; the graph family (`src/graph/family.rs`) is the
//! example.

use super::*;
use crate::format::SectionOut;
use crate::hash::AsAny;

/// The query options of an index, per family kind: `gather` applies to the
/// LSH families (SimHash, DWTA), `graph` to the graph family, `ivf` to the
/// IVF family, `forest` to the forest family; each family ignores the
/// others'.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueryParams {
    pub gather: GatherParams,
    pub graph: crate::graph::SearchParams,
    pub ivf: crate::ivf::SearchParams,
    pub forest: crate::forest::ForestQuery,
}

impl From<GatherParams> for QueryParams {
    fn from(gather: GatherParams) -> Self {
        QueryParams {
            gather,
            ..Default::default()
        }
    }
}

/// Where a query's candidate ids come from (module documentation). Every
/// method is called once per call or per block of at most
/// [`QUERY_BLOCK`] queries, never per element.
pub(crate) trait CandidateSource: AsAny + Send + Sync {
    /// The query options' check, once per call before any work.
    fn check_query(&self, ix: &Index, qp: &QueryParams) -> Result<()>;
    /// The candidate sets (CSR in `out`; each query's ids distinct) of
    /// `n` checked queries (`q` row `i` at `i * q_stride`, `dim` floats)
    /// for a top-`k` query. A source whose [`Self::final_scores`] holds
    /// writes each candidate's score into `scores` (one per id of `out`).
    /// A source with counters of its own (the IVF lists) adds them to `st`.
    #[allow(clippy::too_many_arguments)]
    fn candidates(
        &self,
        ix: &Index,
        q: &[f32],
        n: usize,
        q_stride: usize,
        k: usize,
        qp: &QueryParams,
        out: &mut GatherResult,
        scores: &mut Vec<f32>,
        st: &mut QueryStats,
    ) -> Result<()>;
    /// Whether the candidates come with their final scores: exact logits of
    /// rows equal to the index's own, computed by the source's exact stage
    /// (then the index's scorer does not score them again, and the answers
    /// are the source's to the bit).
    fn final_scores(&self, _ix: &Index, _qp: &QueryParams) -> bool {
        false
    }
    /// The family's file sections (beside `PARAMS`, `BIAS`, `LABELS`,
    /// `WEIGHTS`); `keep` holds bytes the sections borrow (records).
    fn sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>>;
    /// Bytes held.
    fn memory_bytes(&self) -> usize;
}

/// What a family's build gets: the checked rows and the index's settings.
pub(crate) struct BuildInput<'a> {
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub rows: usize,
    pub dim: usize,
    pub w_stride: usize,
    /// The dimension after the index's transform.
    pub hash_dim: usize,
    pub transform: Transform,
    pub mips_u: f32,
    pub p: &'a IndexParams,
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    /// The index's own f32 copy of W (compact, at its stride) with
    /// [`Storage::F32`]: a source that re-ranks from f32 rows borrows it
    /// instead of keeping a copy of its own. It lives in the index beside
    /// the source and is dropped after it.
    pub own_f32: Option<(&'a [f32], usize)>,
}

/// What a family's load gets: the mapped file and the checked `PARAMS`.
pub(crate) struct LoadInput<'a> {
    pub c: &'a Arc<Container>,
    pub rows: usize,
    pub dim: usize,
    pub hash_dim: usize,
    pub has_bias: bool,
    /// The record's family fields (K, L, range_bits, ...), as read.
    pub p: &'a Resolved,
    /// A `LABELS` section is present (label-aware buckets).
    pub labelled: bool,
    /// The index's f32 W (rows at its stride), checked: the borrowed W of
    /// an index on [`Storage::BorrowedF32`], or the mapped f32 weights of
    /// one on [`Storage::F32`]; `None` otherwise.
    pub w: Option<(&'a [f32], usize)>,
    /// Words a `BadFileFormat` error (prefixed with the path).
    pub bad: &'a dyn Fn(String) -> Error,
}

/// How the index builds and loads a candidate-source family.
pub(crate) struct SourceRegistration {
    /// The family's name in messages.
    pub name: &'static str,
    /// Whether the family id `f` is this source's.
    pub accepts: fn(f: Family) -> bool,
    /// Checks the family's parameters and builds the source from the rows;
    /// fills the family fields of `r` that the `PARAMS` record keeps
    /// (e.g. the resolved `range_bits`).
    pub build: fn(b: &BuildInput<'_>, r: &mut Resolved) -> Result<Box<dyn CandidateSource>>,
    /// The source of a file, every section checked (`BadFileFormat`).
    pub load: fn(l: &LoadInput<'_>) -> Result<Box<dyn CandidateSource>>,
}

/// The build checks of a source that is not LSH tables (the graph, the
/// IVF): no transform (`why` says what the source does instead), no
/// caller-given planes or DWTA map; the LSH fields of the `PARAMS` record
/// are 0 and its seed and threads are the source's.
pub(crate) fn non_lsh_build(
    name: &str,
    why: &str,
    p: &IndexParams,
    r: &mut Resolved,
    seed: u64,
    threads: u32,
) -> Result<()> {
    if p.transform != Transform::None {
        bail!(
            InvalidArgument,
            "the {name} family {why}: transform must be NONE, not {:?}",
            p.transform
        );
    }
    if p.planes.is_some() || p.dwta_map.is_some() {
        bail!(
            InvalidArgument,
            "caller-given planes or DWTA map but the family is the {name}"
        );
    }
    (r.bits, r.tables, r.sparsity, r.bin_size) = (0, 0, 0, 0);
    (r.range_bits, r.bucket_cap, r.given) = (0, 0, false);
    (r.seed, r.threads) = (seed, threads);
    Ok(())
}

/// The load checks of a source that is not LSH tables: no `LABELS`
/// section, transform NONE (`BadFileFormat`).
pub(crate) fn non_lsh_load(name: &str, l: &LoadInput<'_>) -> Result<()> {
    if l.labelled {
        return Err((l.bad)(format!(
            "a LABELS section in a {name}-family index (label training is LSH-only)"
        )));
    }
    if l.p.transform != Transform::None {
        return Err((l.bad)(format!(
            "params: transform {:?} in a {name}-family index (NONE expected)",
            l.p.transform
        )));
    }
    Ok(())
}

/// The registered candidate-source families (one line per family).
pub(crate) static SOURCES: &[&SourceRegistration] = &[
    &super::lsh::REGISTRATION,
    &crate::graph::family::REGISTRATION,
    &crate::ivf::family::REGISTRATION,
    &crate::forest::family::REGISTRATION,
];

/// The registration of family `f`.
pub(crate) fn source_registration(f: Family) -> &'static SourceRegistration {
    SOURCES
        .iter()
        .find(|r| (r.accepts)(f))
        .expect("every Family variant has a candidate source")
}
