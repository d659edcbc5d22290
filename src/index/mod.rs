//! The index: one object from a query batch to its top-k rows.
//!
//! [`Index::build`] optionally transforms the rows of W (see [`Transform`]),
//! hashes every transformed row with a SimHash or DWTA family built over the
//! transformed dimension, and builds [`Tables`] from the codes. W itself is
//! kept per [`Storage`] (borrowed, copied, or converted to bf16 / f16 /
//! int8), the bias is copied.
//!
//! [`Index::query`] runs, per batch of at most [`QUERY_BLOCK`] queries:
//! transform the queries (into thread-local scratch), hash them, gather the
//! candidates ([`Tables::gather`], ids ascending per query), compute the
//! candidates' logits from the ORIGINAL weights and bias
//! ([`WeightMatrix::matmul`]; the transform only steers retrieval), and keep
//! the top k ([`crate::matmul::topk`]: descending, ties to the smaller id,
//! padded with `u32::MAX` / `-inf`). It takes `&self`, holds no lock, and
//! reuses thread-local scratch, so after a warm-up call of the same or larger
//! shape a query allocates nothing (tested with a counting allocator in
//! `tests/index_alloc.rs`).
//!
//! # Families
//! The candidates come from the family's candidate source
//! ([`source`]): the LSH tables above for the hash families (SimHash,
//! DWTA), the FGD graph ([`crate::graph`]) for [`Family::Graph`], built
//! from the same rows and bias with [`IndexParams::graph`] and searched
//! with [`QueryParams::graph`], or the IVF lists ([`crate::ivf`]) for
//! [`Family::Ivf`], with [`IndexParams::ivf`] and [`QueryParams::ivf`]
//! (src/ivf/family.rs), or the hashing forest ([`crate::forest`]) for
//! [`Family::Forest`], with [`IndexParams::forest`] and
//! [`QueryParams::forest`] (src/forest/family.rs). Everything after the candidates (exact logits of W
//! per [`Storage`] and the bias, top-k) is the same for every family; a
//! source whose candidates already carry exact logits of the index's rows
//! (the IVF's exact stage on f32 rows) keeps them. The calls that need
//! hash tables (tables, codes, candidates, label and IUL training,
//! updates) refuse a graph, IVF or forest index with `InvalidArgument`.
//!
//! # Defaults
//! `range_bits = 0` picks `min(code_bits, 20, ceil(log2(max(rows, 2))) + 1)`
//! where `code_bits` is K for SimHash and `K * log2(B)` for DWTA: every code
//! gets its own bucket when the code space is small; beyond about 2 buckets
//! per row (and beyond 2^20 buckets, 4 MiB of offsets per table) more
//! buckets would only be empty ones, so codes are folded (see
//! [`crate::tables::fold_code`]) into that many buckets.
//!
//! # File format
//! [`Index::save`] writes an lshk container ([`crate::format`], kind
//! [`format::KIND_INDEX`]) with these sections, all little-endian:
//! * `PARAMS`: the fixed record described at [`PARAMS_LEN`] (its own
//!   version field, [`PARAMS_VERSION`]; a newer one is refused).
//! * (graph family: instead of the four LSH sections below, the graph's
//!   `GPARAM`, `GROWS`, `GSCALES`, `GLEVELS`, `GLINKS0`, `GUPPER`, as in a
//!   graph file.)
//! * `PLANES` (SimHash): `K*L x dim'` f32 planes, or `DWTAMAP` (DWTA):
//!   `K*L*B` u32 coordinates. A family built from the seed is regenerated on
//!   load and must equal the stored planes / map bit for bit.
//! * `TOFFS`: for each table in order, its `2^range_bits + 1` u32 bucket
//!   offsets; `TIDLEN`: `L` u64, the number of ids of each table; `TIDS`:
//!   the tables' ids, concatenated. (The index's tables are frozen: no
//!   row-to-bucket map is kept or stored, see [`Tables::freeze`].)
//! * `BIAS` (optional): `rows` f32.
//! * `LABELS` (optional): the label training of the index (see
//!   [`crate::labels`]); with it the tables may hold a row in several
//!   buckets of a table.
//! * `WEIGHTS` (absent for [`Storage::BorrowedF32`]): `rows x dim`, no row
//!   padding, f32 / bf16 bits / f16 bits / i8; with int8 also `WSCALES`
//!   (`rows` f32).
//!
//! [`Index::load`] maps the file; the weights and the tables (bucket
//! offsets and ids) are used IN PLACE from the mapping (zero copy: the
//! mapping lives as long as the index, and its pages are the page cache's,
//! shared by every process that loads the same file). Only the hash family
//! (rebuilt from its seed or given planes/map) and the bias are read into
//! memory. Loading still reads every byte once (checksums, then the
//! consistency checks). Everything is validated: a checksummed file whose content
//! is inconsistent (sizes that disagree with the params, ids `>= rows`,
//! offsets that decrease, unknown enum values, non-finite weights, ...)
//! is `BadFileFormat` with a message naming what is wrong.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::bail;
use crate::dwta::Dwta;
use crate::error::{checked_mul, first_non_finite, strided_len, try_vec, Error, Result, Status};
use crate::format::{self, cast_slice, Container, SectionOut};
use crate::hash::{FamilyShape, HashFamily};
use crate::matmul::{self, WeightMatrix, Weights};
use crate::simhash::SimHash;
use crate::tables::{GatherInput, GatherParams, GatherResult, Tables, U32s, MAX_ROWS};

mod build;
mod file;
mod lsh;
mod ops;
mod pipeline;
mod query;
pub(crate) mod source;
pub use pipeline::Scorer;
pub(crate) use source::CandidateSource;
pub use source::QueryParams;
mod train;
mod update;
mod weights;
use weights::{WBuf, WStore};

pub use update::{RehashClock, RehashSchedule, LNS_REHASH_LAMBDA, LNS_REHASH_PERIOD};

pub use crate::hash::Family;

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
    fn elem_bytes(self) -> usize {
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
    /// [`crate::graph::Graph::build`] builds with them. The LSH fields
    /// above are ignored, `storage` keeps W for the logits as for every
    /// family, `transform` must be [`Transform::None`].
    pub graph: crate::graph::GraphParams,
    /// IVF family: the lists' build parameters (nlist, iters, codes, ...);
    /// the lists are the ones [`crate::ivf::Ivf::build`] builds with them
    /// (borrowing W when `storage` is [`Storage::BorrowedF32`], else on a
    /// copy of their own). The LSH fields above are ignored, `transform`
    /// must be [`Transform::None`].
    pub ivf: crate::ivf::IvfParams,
    /// IVF family: optional per-row weights steering the k-means (one
    /// finite weight >= 0 per row, not all 0; [`crate::ivf::Ivf::build_weighted`]).
    /// Other families refuse them (`InvalidArgument`).
    pub ivf_row_weights: Option<Vec<f32>>,
    /// Forest family: the trees' build parameters; the trees are the ones
    /// [`crate::forest::Forest::build`] builds with them over the rows
    /// (storage must be [`Storage::F32`] or [`Storage::BorrowedF32`]).
    pub forest: crate::forest::ForestParams,
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
            graph: crate::graph::GraphParams::default(),
            ivf: crate::ivf::IvfParams::default(),
            ivf_row_weights: None,
            forest: crate::forest::ForestParams::default(),
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
    /// IVF source: rows scored in the visited lists, from their codes (or
    /// exactly, without codes), summed over the batch (0 otherwise).
    pub scanned: u64,
    /// IVF source: rows re-scored exactly by the lists' re-rank stage,
    /// summed over the batch (0 otherwise).
    pub reranked: u64,
}

/// Queries processed together (bounds the per-thread scratch).
pub const QUERY_BLOCK: usize = 64;
/// Rows hashed per work unit during a build.
const BUILD_UNIT: usize = 16384;

/// Version of the `PARAMS` record this library writes and reads.
pub const PARAMS_VERSION: u32 = 1;
/// Length in bytes of the `PARAMS` record (version 1), little-endian:
/// ```text
///  0 u32 params version (1)      4 u32 family        8 u32 K
/// 12 u32 L                      16 u32 sparsity     20 u32 bin size B
/// 24 u64 seed                   32 u32 range_bits   36 u32 bucket_cap
/// 40 u32 storage                44 u32 transform    48 u64 rows
/// 56 u64 dim                    64 u64 w_stride     72 u64 dim' (hash dim)
/// 80 f32 MIPS U (1 otherwise)   84 u32 flags: bit 0 bias stored, bit 1
///                                  weights stored, bit 2 caller-given family
/// 88 u64 reserved, 0
/// ```
/// A record longer than 96 bytes is accepted when its version is known
/// (later versions append fields).
pub const PARAMS_LEN: usize = 96;

const FLAG_BIAS: u32 = 1;
const FLAG_WEIGHTS: u32 = 2;
const FLAG_GIVEN: u32 = 4;

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

impl Resolved {
    /// The family's shape over `hash_dim`.
    pub(crate) fn shape(&self, hash_dim: usize) -> FamilyShape {
        FamilyShape {
            hash_dim,
            bits: self.bits,
            tables: self.tables,
            sparsity: self.sparsity,
            bin_size: self.bin_size,
            seed: self.seed,
        }
    }
}

/// An LSH index over the rows of an output layer (see the module docs).
pub struct Index {
    rows: usize,
    dim: usize,
    hash_dim: usize,
    mips_u: f32,
    p: Resolved,
    /// The candidate source (the seam of [`source`]: LSH tables over a
    /// hash family, or the graph), chosen by the family at build / load.
    src: Box<dyn CandidateSource>,
    bias: Option<Vec<f32>>,
    w: WStore,
    /// Label-aware training ([`crate::labels`]), if any.
    pub(crate) labels: Option<crate::labels::LabelState>,
    /// Rows updated since their last rehash ([`Index::update_rows`]).
    dirty: update::Dirty,
    /// The largest |value| of the stored rows and bias (the `A` of
    /// [`crate::error::score_limit`]): set at build and load, raised by
    /// row updates and rehashes; derived, never stored.
    pub(crate) vmax: f32,
}

// Send + Sync are derived: the weight and table arrays are `crate::buf::Buf`s
// (checked in buf.rs's tests).

/// The borrowed W given to a load.
enum BorrowedW<'a> {
    Slice(&'a [f32]),
    Ptr(*const f32),
}

impl Index {
    /// [`Index::vmax`] from the stored rows and bias.
    fn value_max(&self) -> f32 {
        let b = self.bias.as_deref().unwrap_or(&[]);
        self.w
            .value_max(self.rows, self.dim)
            .max(crate::error::max_abs_rows(b, 1, b.len(), b.len()))
    }
}

fn ceil_log2(x: usize) -> u32 {
    usize::BITS - (x.max(2) - 1).leading_zeros()
}

/// The default `range_bits` (module documentation).
pub fn default_range_bits(family: Family, bits: u32, bin_size: u32, rows: usize) -> u32 {
    let code_bits = (crate::hash::registration(family).code_bits)(bits, bin_size);
    code_bits.min(20).min(ceil_log2(rows) + 1).max(1)
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
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

/// Writes the transformed query into `out` (hash_dim long).
#[inline]
fn transform_query(t: Transform, q: &[f32], out: &mut [f32]) {
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

impl Index {
    /// The gather parameters a query of this index runs with: `g` with
    /// `bits_per_table` 0 resolved to K, and multi-probing checked (SimHash
    /// only, `bits_per_table` 0 or K, probes at most `min(2^K - 1,
    /// MAX_PROBES)`). The one check behind [`Index::query`] and
    /// [`Index::candidates`].
    pub(crate) fn resolve_gather(&self, g: &GatherParams) -> Result<GatherParams> {
        let mut gp = *g;
        if gp.probes > 0 {
            if !self.lsh("multi-probing")?.fam.has_probe_order() {
                bail!(
                    InvalidArgument,
                    "multi-probing (probes > 0) needs a family with a probe order (SimHash); \
                     this index is {}",
                    crate::hash::registration(self.p.family).name
                );
            }
            if gp.bits_per_table == 0 {
                gp.bits_per_table = self.p.bits;
            } else if gp.bits_per_table != self.p.bits {
                bail!(
                    InvalidArgument,
                    "gather bits_per_table is {} but the index has K = {} (pass 0 or K)",
                    gp.bits_per_table,
                    self.p.bits
                );
            }
            let kb = self.p.bits;
            let maxp = if kb >= 32 { u32::MAX } else { (1u32 << kb) - 1 };
            if gp.probes > crate::tables::MAX_PROBES || gp.probes > maxp {
                bail!(
                    InvalidArgument,
                    "probes is {}; at most min(2^K - 1, {}) = {}",
                    gp.probes,
                    crate::tables::MAX_PROBES,
                    maxp.min(crate::tables::MAX_PROBES)
                );
            }
        }
        Ok(gp)
    }

    /// Builds an index over `rows` rows of `dim` floats of `w` (row `r` at
    /// `r * w_stride`), with an optional `bias` (`rows` values). W is
    /// copied or converted per `p.storage`; [`Storage::BorrowedF32`] is
    /// refused here (use [`Index::build_borrowed`]). `progress(done, total)`
    /// is called on the calling thread as rows get hashed (after every unit
    /// of 16,384 rows, or at least every 50 ms while hashing), with
    /// non-decreasing `done < total = rows`, then once with `done == total`
    /// when the index is complete. With several build threads the calling
    /// thread only reports and waits; the threads hash.
    pub fn build(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IndexParams,
        progress: Option<&(dyn Fn(u64, u64) + Sync)>,
    ) -> Result<Index> {
        if p.storage == Storage::BorrowedF32 {
            bail!(
                InvalidArgument,
                "storage BorrowedF32 keeps a pointer to W: use Index::build_borrowed \
                 (unsafe) or the C API"
            );
        }
        Self::build_impl(w, bias, rows, dim, w_stride, p, progress)
    }

    /// [`Index::build`] that also accepts [`Storage::BorrowedF32`], where
    /// the index keeps using `w` in place.
    ///
    /// # Safety
    /// With `BorrowedF32`, `w` must stay alive and unchanged for as long as
    /// the index (or anything loaded from its file with these weights)
    /// lives.
    pub unsafe fn build_borrowed(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IndexParams,
        progress: Option<&(dyn Fn(u64, u64) + Sync)>,
    ) -> Result<Index> {
        Self::build_impl(w, bias, rows, dim, w_stride, p, progress)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The dimension the family hashes (dim + 1 with a transform).
    pub fn hash_dim(&self) -> usize {
        self.hash_dim
    }
    /// K (bits per table for SimHash, bins per table for DWTA; 0 for the
    /// graph family).
    pub fn bits(&self) -> u32 {
        self.p.bits
    }
    /// L (0 for the graph family).
    pub fn num_tables(&self) -> u32 {
        self.p.tables
    }
    pub fn family(&self) -> Family {
        self.p.family
    }
    pub fn storage(&self) -> Storage {
        self.p.storage
    }
    pub fn transform(&self) -> Transform {
        self.p.transform
    }
    pub fn range_bits(&self) -> u32 {
        self.p.range_bits
    }
    /// U of the MIPS transform (1 otherwise).
    pub fn mips_u(&self) -> f32 {
        self.mips_u
    }
    pub fn simhash(&self) -> Option<&SimHash> {
        self.lsh_family()?.as_any().downcast_ref()
    }
    pub fn dwta(&self) -> Option<&Dwta> {
        self.lsh_family()?.as_any().downcast_ref()
    }
    /// The hash family through its seam, `None` for the graph family.
    pub fn lsh_family(&self) -> Option<&dyn HashFamily> {
        self.lsh("").ok().map(|l| &*l.fam)
    }
    /// The LSH tables, `None` for the graph family.
    pub fn lsh_tables(&self) -> Option<&Tables> {
        self.lsh("").ok().map(|l| &*l.tables)
    }
    /// The hash family through its seam.
    ///
    /// # Panics
    /// On a graph-family index (use [`Index::lsh_family`]).
    pub fn hash_family(&self) -> &dyn HashFamily {
        self.lsh_family()
            .expect("Index::hash_family on a graph-family index (see Index::lsh_family)")
    }
    /// The LSH tables.
    ///
    /// # Panics
    /// On a graph-family index (use [`Index::lsh_tables`]).
    pub fn tables(&self) -> &Tables {
        self.lsh_tables()
            .expect("Index::tables on a graph-family index (see Index::lsh_tables)")
    }
    /// The graph of a graph-family index.
    pub fn graph(&self) -> Option<&crate::graph::Graph> {
        let s: &dyn CandidateSource = &*self.src;
        s.as_any().downcast_ref()
    }
    /// The family's name in messages ("SimHash", "DWTA", "graph").
    pub(crate) fn source_name(&self) -> &'static str {
        let f = self.p.family;
        if f.is_hash() {
            crate::hash::registration(f).name
        } else {
            source::source_registration(f).name
        }
    }
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }
    /// The stored weights (row stride [`Index::weight_stride`]).
    pub fn weights(&self) -> Weights<'_> {
        self.w.weights(self.rows)
    }
    pub fn weight_stride(&self) -> usize {
        self.w.stride
    }
    /// The weight matrix (with the bias) the logits come from.
    pub fn weight_matrix(&self) -> WeightMatrix<'_> {
        let m = WeightMatrix::new(self.weights(), self.rows, self.dim, self.w.stride)
            .expect("weights validated at build/load");
        match &self.bias {
            Some(b) => m.with_bias(b).expect("bias validated"),
            None => m,
        }
    }

    /// Writes the transformed query (`hash_dim` floats) of `q` (`dim`
    /// floats) into `out`: what the family hashes.
    pub fn transform_query(&self, q: &[f32], out: &mut [f32]) {
        transform_query(self.p.transform, &q[..self.dim], &mut out[..self.hash_dim]);
    }

    /// Bytes held by the index: family, tables, bias, and the weights it
    /// owns or maps (borrowed weights are the caller's and not counted).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.src.memory_bytes()
            + self.bias.as_ref().map_or(0, |b| b.len() * 4)
            + self.w.owned_bytes(self.rows)
    }
}
