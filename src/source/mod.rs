//! Candidate-source families behind one seam.
//!
//! An index ([`crate::index::Index`]) gets a query's candidates from one
//! [`CandidateSource`]: the LSH tables over a hash family
//! ([`lsh::Lsh`], the SimHash and DWTA families), the IVF lists, the FGD
//! graph or the hashing forest. The index's build, query, save, load and
//! `memory_bytes` look the family's [`SourceRegistration`] up once (the
//! index's registry) and call the
//! trait object; none of them `match`es on the family. Everything else of
//! an index (the checks, the weights and bias, the exact scorer, the top-k,
//! the `PARAMS` record, `BIAS` / `WEIGHTS` sections) is shared.
//!
//! # Adding a candidate-source family
//! A folder with the family's own code (e.g. `src/source/graph/`), a file in it
//! with `impl CandidateSource` and a `pub(crate) static REGISTRATION:
//! SourceRegistration` (its build from the rows, its load from the file's
//! sections), one line in the index's `SOURCES` and one variant in
//! [`Family`] with the next free id. docs/architecture.md
//! lists the steps; the graph family (`src/source/graph/family.rs`) is the
//! example.

use std::any::Any;
use std::sync::Arc;

use crate::bail;
use crate::error::{Error, Result};
use crate::format::{Container, SectionOut};
use crate::matmul::Weights;

pub mod forest;
pub mod graph;
pub mod ivf;
pub mod labels;
pub mod lsh;
pub mod params;

pub use params::lsh::{GatherParams, GatherResult};

/// Largest `range_bits` of a bucketed source (the LSH tables' buckets, the
/// label-aware lists' label buckets).
pub const MAX_RANGE_BITS: u32 = 24;
/// Largest number of rows of any source: ids are u32 and the AVX2/AVX-512
/// gathers index with signed 32-bit lanes.
pub const MAX_ROWS: usize = i32::MAX as usize;

/// The "lowbias32" 32-bit integer hash (Chris Wellons' hash-prospector),
/// frozen as part of the bucket-folding contract.
#[inline(always)]
pub const fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The bucket of `code` in a table of `2^range_bits` buckets
/// (`1 <= range_bits <= 24`): `code` itself when it is `< 2^range_bits`,
/// else the top `range_bits` bits of `mix32(code)`.
#[inline(always)]
pub const fn fold_code(code: u32, range_bits: u32) -> u32 {
    if code >> range_bits == 0 {
        code
    } else {
        mix32(code) >> (32 - range_bits)
    }
}

/// Family of an index (its id in the file's params record and in the C
/// API's `lshk_index_params.family`): a hash family (registered in
/// `lsh::hash::FAMILIES`, whose candidates come from LSH tables) or another
/// candidate-source family (registered in the index's
/// `index::SOURCES`). Ids are never renumbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Family {
    SimHash = 0,
    Dwta = 1,
    /// The FGD graph ([`crate::source::graph`]); not a hash family.
    Graph = 2,
    /// The IVF lists ([`crate::source::ivf`]); not a hash family.
    Ivf = 3,
    /// The hashing forest ([`crate::source::forest`]); not a hash family.
    Forest = 4,
}

impl Family {
    /// Every family, in id order.
    pub const ALL: [Family; 5] = [
        Family::SimHash,
        Family::Dwta,
        Family::Graph,
        Family::Ivf,
        Family::Forest,
    ];

    pub fn from_u32(v: u32) -> Option<Family> {
        Self::ALL.get(v as usize).copied()
    }
}

/// Down-casts of a family to its concrete type ([`crate::index::Index::simhash`]);
/// implemented for every `'static` type. Call it on `&dyn HashFamily`
/// (`&*boxed`), not on the box (which is itself `Any`).
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// How the index keeps W.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Storage {
    /// The caller's f32 W is used in place (it must stay alive and
    /// unchanged); only through [`Index::build_borrowed`] or the C API.
    BorrowedF32 = 0,
    /// A copy in f32.
    F32 = 1,
    /// bf16 (round to nearest even).
    Bf16 = 2,
    /// IEEE binary16 (round to nearest even; |w| > 65504 is refused).
    F16 = 3,
    /// Symmetric per-row int8 with one f32 scale per row.
    I8 = 4,
}

/// Input transform applied before hashing (never to the logits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Transform {
    None = 0,
    /// Rows `[w, b]` (b = 0 without a bias), queries `[q, 1]`: the hash sees
    /// the logit's geometry including the bias (HALOS).
    BiasAug = 1,
    /// Neyshabur & Srebro's MIPS-to-cosine transform: rows
    /// `[w/U, sqrt(max(0, 1 - |w/U|^2))]` with U the largest row norm,
    /// queries `[q/|q|, 0]` (a zero query stays zero).
    Mips = 2,
}

impl Storage {
    pub fn from_u32(v: u32) -> Option<Storage> {
        [
            Storage::BorrowedF32,
            Storage::F32,
            Storage::Bf16,
            Storage::F16,
            Storage::I8,
        ]
        .get(v as usize)
        .copied()
    }
    pub(crate) fn elem_bytes(self) -> usize {
        match self {
            Storage::BorrowedF32 | Storage::F32 => 4,
            Storage::Bf16 | Storage::F16 => 2,
            Storage::I8 => 1,
        }
    }
}

impl Transform {
    pub fn from_u32(v: u32) -> Option<Transform> {
        [Transform::None, Transform::BiasAug, Transform::Mips]
            .get(v as usize)
            .copied()
    }
}

/// Build parameters (see the C `lshk_index_params` for each field).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexParams {
    pub family: Family,
    /// K: bits per table (SimHash) or bins per table (DWTA).
    pub bits: u32,
    /// L.
    pub tables: u32,
    /// SimHash planes: 0 Gaussian, 1 ±1, s >= 2 sparse.
    pub sparsity: u32,
    /// DWTA bin size B.
    pub bin_size: u32,
    pub seed: u64,
    /// 0: the default rule of the module documentation.
    pub range_bits: u32,
    /// 0: keep all ids.
    pub bucket_cap: u32,
    pub storage: Storage,
    pub transform: Transform,
    /// Build threads (0: every core).
    pub threads: u32,
    /// Caller-given SimHash planes, `K*L x dim'` (dim' = dim after the
    /// transform).
    pub planes: Option<Vec<f32>>,
    /// Caller-given DWTA bin map, `K*L*B` coordinates `< dim'`.
    pub dwta_map: Option<Vec<u32>>,
    /// Graph family: the graph's build parameters (m, ef_construction,
    /// the storage of its own rows, threads, seed); the graph is the one
    /// [`crate::source::graph::Graph::build`] builds with them. The LSH fields
    /// above are ignored, `storage` keeps W for the logits as for every
    /// family, `transform` must be [`Transform::None`].
    pub graph: params::graph::GraphParams,
    /// IVF family: the lists' build parameters (nlist, iters, codes, ...);
    /// the lists are the ones [`crate::source::ivf::Ivf::build`] builds with them
    /// (borrowing W when `storage` is [`Storage::BorrowedF32`], else on a
    /// copy of their own). The LSH fields above are ignored, `transform`
    /// must be [`Transform::None`].
    pub ivf: params::ivf::IvfParams,
    /// IVF family: optional per-row weights steering the k-means (one
    /// finite weight >= 0 per row, not all 0; [`crate::source::ivf::Ivf::build_weighted`]).
    /// Other families refuse them (`InvalidArgument`).
    pub ivf_row_weights: Option<Vec<f32>>,
    /// Forest family: the trees' build parameters; the trees are the ones
    /// [`crate::source::forest::Forest::build`] builds with them over the rows
    /// (storage must be [`Storage::F32`] or [`Storage::BorrowedF32`]).
    pub forest: params::forest::ForestParams,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            family: Family::SimHash,
            bits: 12,
            tables: 50,
            sparsity: 0,
            bin_size: 8,
            seed: 1,
            range_bits: 0,
            bucket_cap: 0,
            storage: Storage::F32,
            transform: Transform::None,
            threads: 0,
            planes: None,
            dwta_map: None,
            graph: params::graph::GraphParams::default(),
            ivf: params::ivf::IvfParams::default(),
            ivf_row_weights: None,
            forest: params::forest::ForestParams::default(),
        }
    }
}

/// Per-batch candidate statistics of [`Index::query`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryStats {
    pub queries: u64,
    /// Sum over the batch of the candidates per query.
    pub candidates_total: u64,
    /// 0 for an empty batch.
    pub candidates_min: u64,
    pub candidates_max: u64,
    /// IVF source: lists visited, summed over the batch (0 otherwise).
    pub lists: u64,
    /// Rows the source scored to find its candidates, summed over the
    /// batch: IVF, the rows of the visited lists (from their codes, or
    /// exactly without codes); graph, the rows its walk scored (all
    /// levels); 0 for LSH and forest.
    pub scanned: u64,
    /// Rows re-scored exactly after their codes, summed over the batch:
    /// the IVF lists' re-rank, or the shortlists of row codes
    /// ([`crate::index::Index::set_codes`]); 0 otherwise.
    pub reranked: u64,
}

/// The resolved, validated parameters an index was built with (the
/// `PARAMS` record; the LSH fields are 0 for the graph family).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Resolved {
    pub(crate) family: Family,
    pub(crate) bits: u32,
    pub(crate) tables: u32,
    pub(crate) sparsity: u32,
    pub(crate) bin_size: u32,
    pub(crate) seed: u64,
    pub(crate) range_bits: u32,
    pub(crate) bucket_cap: u32,
    pub(crate) storage: Storage,
    pub(crate) transform: Transform,
    pub(crate) threads: u32,
    pub(crate) given: bool,
}

/// Writes the transformed row of `w` (bias `b`) into `out` (hash_dim long).
#[inline]
pub(crate) fn transform_row(t: Transform, w: &[f32], b: f32, inv_u: f64, out: &mut [f32]) {
    let d = w.len();
    match t {
        Transform::None => out.copy_from_slice(w),
        Transform::BiasAug => {
            out[..d].copy_from_slice(w);
            out[d] = b;
        }
        Transform::Mips => {
            let mut s = 0f64;
            for (o, &x) in out[..d].iter_mut().zip(w) {
                let v = x as f64 * inv_u;
                *o = v as f32;
                s += v * v;
            }
            out[d] = (1.0 - s).max(0.0).sqrt() as f32;
        }
    }
}

/// The `n` transformed queries (`hash_dim` floats each, contiguous) of
/// `q` (row `i` at `i * q_stride`, `dim` floats) into `out` (at least
/// `n * hash_dim`).
pub(crate) fn transform_queries(
    t: Transform,
    dim: usize,
    hd: usize,
    q: &[f32],
    n: usize,
    q_stride: usize,
    out: &mut [f32],
) {
    for i in 0..n {
        transform_query(
            t,
            &q[i * q_stride..i * q_stride + dim],
            &mut out[i * hd..(i + 1) * hd],
        );
    }
}

/// The Euclidean norm of `v`, in f64.
pub(crate) fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
}

/// Writes the transformed query into `out` (hash_dim long).
#[inline]
pub(crate) fn transform_query(t: Transform, q: &[f32], out: &mut [f32]) {
    let d = q.len();
    match t {
        Transform::None => out.copy_from_slice(q),
        Transform::BiasAug => {
            out[..d].copy_from_slice(q);
            out[d] = 1.0;
        }
        Transform::Mips => {
            let n = norm(q);
            let inv = if n > 0.0 { 1.0 / n } else { 0.0 };
            for (o, &x) in out[..d].iter_mut().zip(q) {
                *o = (x as f64 * inv) as f32;
            }
            out[d] = 0.0;
        }
    }
}

/// The query options of an index, per family kind: `gather` applies to the
/// LSH families (SimHash, DWTA), `graph` to the graph family, `ivf` to the
/// IVF family, `forest` to the forest family; each family ignores the
/// others'. `threads` applies to every source.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueryParams {
    pub gather: GatherParams,
    pub graph: params::graph::SearchParams,
    pub ivf: params::ivf::SearchParams,
    pub forest: params::forest::ForestQuery,
    /// Threads a batch is split over (the same answers to the bit for
    /// every count): 0 and 1 the calling thread (the default), `n` up to
    /// `n` (never more than the batch has queries), [`QUERY_THREADS_ALL`]
    /// every core the process may use. The split gives each thread a
    /// contiguous range of the queries; where that would leave a thread
    /// less than a block of 64 and the IVF shares its adaptive list scans
    /// in rounds, the threads (at most one a core) instead share every
    /// block's scans, each scoring a part of each round's lists for all
    /// its queries.
    /// The index keeps the threads between calls (started by the first
    /// call that asks, joined when it is dropped); a call that finds them
    /// busy with another thread's call starts its own.
    pub threads: u32,
}

/// [`QueryParams::threads`]: every core the process may use.
pub const QUERY_THREADS_ALL: u32 = u32::MAX;

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
/// What a source sees of its index when it answers a query: the resolved
/// parameters, the dimensions and the index's rows (the index builds one
/// per call; the source never sees the index itself).
#[derive(Clone, Copy)]
pub(crate) struct IndexView<'a> {
    pub p: &'a Resolved,
    /// Columns of W (the query length).
    pub dim: usize,
    /// The dimension after the index's transform.
    pub hash_dim: usize,
    pub storage: Storage,
    /// The index's rows, in its storage.
    pub weights: Weights<'a>,
    /// Elements between rows of `weights`.
    pub weight_stride: usize,
    /// The index's bias (finite, one per row), if it has one.
    pub bias: Option<&'a [f32]>,
    /// The index's query threads and how many a call may use, where the
    /// source splits each batch over them itself
    /// ([`CandidateSource::splits_batches`]); `None` on one thread.
    pub split: Option<(&'a crate::par::Pool, usize)>,
}

pub(crate) trait CandidateSource: AsAny + Send + Sync {
    /// The query options' check, once per call before any work.
    fn check_query(&self, ix: &IndexView<'_>, qp: &QueryParams) -> Result<()>;
    /// The candidate sets (CSR in `out`; each query's ids distinct) of
    /// `n` checked queries (`q` row `i` at `i * q_stride`, `dim` floats)
    /// for a top-`k` query. A source whose [`Self::final_scores`] holds
    /// writes each candidate's score into `scores` (one per id of `out`).
    /// A source with counters of its own (the IVF lists) adds them to `st`.
    #[allow(clippy::too_many_arguments)]
    fn candidates(
        &self,
        ix: &IndexView<'_>,
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
    fn final_scores(&self, _ix: &IndexView<'_>, _qp: &QueryParams) -> bool {
        false
    }
    /// Whether the source splits a batch over threads itself
    /// ([`IndexView::split`]), sharing work between its queries that
    /// contiguous ranges of queries, one per thread, would not share.
    fn splits_batches(&self, _ix: &IndexView<'_>, _qp: &QueryParams) -> bool {
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
    /// The index's own rows (compact, at their stride) in its storage,
    /// `None` with [`Storage::BorrowedF32`] (then `w` is the index's W): a
    /// source that re-ranks from rows uses them instead of keeping a copy
    /// of its own. They live in the index beside the source and are
    /// dropped after it.
    pub own_rows: Option<(Weights<'a>, usize)>,
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
    /// The index's W (rows at its stride) in its storage, checked: the
    /// borrowed W of an index on [`Storage::BorrowedF32`], or its stored
    /// (mapped) weights.
    pub w: Option<(Weights<'a>, usize)>,
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
