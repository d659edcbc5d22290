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
//! DWTA), the FGD graph ([`crate::source::graph`]) for [`Family::Graph`], built
//! from the same rows and bias with [`IndexParams::graph`] and searched
//! with [`QueryParams::graph`], or the IVF lists ([`crate::source::ivf`]) for
//! [`Family::Ivf`], with [`IndexParams::ivf`] and [`QueryParams::ivf`]
//! (src/ivf/family.rs), or the hashing forest ([`crate::source::forest`]) for
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
//! [`crate::source::lsh::tables::fold_code`]) into that many buckets.
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
//!   [`crate::source::labels`]); with it the tables may hold a row in several
//!   buckets of a table.
//! * `WEIGHTS` (absent for [`Storage::BorrowedF32`]): `rows x dim`, no row
//!   padding, f32 / bf16 bits / f16 bits / i8; with int8 also `WSCALES`
//!   (`rows` f32).
//! * `CODES` and `CSCALES` (with row codes, [`Index::set_codes`]): the
//!   rows' int8 codes (`rows x dim`) and their `rows` f32 scales.
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

use std::path::Path;
use std::sync::Arc;

use crate::bail;
use crate::error::{checked_mul, first_non_finite, strided_len, try_vec, Error, Result, Status};
use crate::format::{self, cast_slice, Container, SectionOut};
use crate::matmul::{self, WeightMatrix, Weights};
use crate::source::lsh::hash::dwta::Dwta;
use crate::source::lsh::hash::simhash::SimHash;
use crate::source::lsh::hash::{FamilyShape, HashFamily};
use crate::source::lsh::tables::{GatherInput, GatherParams, GatherResult, Tables, MAX_ROWS};

mod build;
mod codes;
mod file;
mod iul;
mod labels;
mod lsh;
mod ops;
mod pipeline;
mod query;
pub(crate) use crate::source::{transform_query, transform_row, CandidateSource, Resolved};
pub use crate::source::{
    IndexParams, QueryParams, QueryStats, Storage, Transform, QUERY_THREADS_ALL,
};
pub use pipeline::Scorer;
mod train;
mod train_logq;
mod update;
mod weights;
use weights::{WBuf, WStore};

pub use update::{RehashClock, RehashSchedule, LNS_REHASH_LAMBDA, LNS_REHASH_PERIOD};

pub use crate::source::lsh::default_range_bits;
use crate::source::lsh::BUILD_UNIT;
pub use crate::source::Family;
pub(crate) use crate::source::{norm, SourceRegistration};

/// Queries processed together (bounds the per-thread scratch).
pub const QUERY_BLOCK: usize = 64;

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
///                                  weights stored, bit 2 caller-given family,
///                                  bit 3 row codes stored
/// 88 u32 row codes' rerank (0 without codes)   92 u32 reserved, 0
/// ```
/// A record longer than 96 bytes is accepted when its version is known
/// (later versions append fields).
pub const PARAMS_LEN: usize = 96;

const FLAG_BIAS: u32 = 1;
const FLAG_WEIGHTS: u32 = 2;
const FLAG_GIVEN: u32 = 4;
const FLAG_CODES: u32 = 8;

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
    /// The scorer's code stage ([`Index::set_codes`]), if any.
    codes: Option<codes::RowCodes>,
    /// Label-aware training ([`crate::source::labels`]), if any.
    pub(crate) labels: Option<crate::source::labels::LabelState>,
    /// Rows updated since their last rehash ([`Index::update_rows`]).
    dirty: update::Dirty,
    /// The largest |value| of the stored rows and bias (the `A` of
    /// [`crate::error::score_limit`]): set at build and load, raised by
    /// row updates and rehashes; derived, never stored.
    pub(crate) vmax: f32,
    /// The workers a batch is split over ([`QueryParams::threads`]), kept
    /// between calls and joined when the index is dropped.
    pub(crate) pool: crate::par::Pool,
}

// Send + Sync are derived: the weight and table arrays are `crate::buf::Buf`s
// (checked in buf.rs's tests).

/// The borrowed W given to a load.
enum BorrowedW<'a> {
    Slice(&'a [f32]),
    /// A C pointer and the floats the caller says it holds (`usize::MAX`
    /// when it did not say: the file's shape is then taken on trust).
    Ptr(*const f32, usize),
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

impl Index {
    /// The gather parameters a query of this index runs with: `g` with
    /// `bits_per_table` 0 resolved to K, and multi-probing checked (SimHash
    /// only, `bits_per_table` 0 or K, probes at most `min(2^K - 1,
    /// MAX_PROBES)`). The one check behind [`Index::query`] and
    /// [`Index::candidates`].
    pub(crate) fn resolve_gather(&self, g: &GatherParams) -> Result<GatherParams> {
        if g.probes == 0 {
            return Ok(*g);
        }
        self.lsh("multi-probing")?.resolve_gather(&self.p, g)
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

    /// What the candidate source sees of the index (built per call).
    pub(crate) fn view(&self) -> crate::source::IndexView<'_> {
        crate::source::IndexView {
            p: &self.p,
            dim: self.dim,
            hash_dim: self.hash_dim,
            storage: self.storage(),
            weights: self.weights(),
            weight_stride: self.weight_stride(),
            bias: self.bias(),
            split: None,
        }
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
    pub fn graph(&self) -> Option<&crate::source::graph::Graph> {
        let s: &dyn CandidateSource = &*self.src;
        s.as_any().downcast_ref()
    }
    /// The family's name in messages ("SimHash", "DWTA", "graph").
    pub(crate) fn source_name(&self) -> &'static str {
        let f = self.p.family;
        if f.is_hash() {
            crate::source::lsh::hash::registration(f).name
        } else {
            source_registration(f).name
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
    /// An IVF index with int8 codes also keeps, as panels, the lists that
    /// AVX-512 batches have shared: this grows with such batches, by at
    /// most the lists' int8 codes again (docs/ivf.md, "Lists kept as
    /// panels").
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.src.memory_bytes()
            + self.bias.as_ref().map_or(0, |b| b.len() * 4)
            + self.w.owned_bytes(self.rows)
            + self
                .codes
                .as_ref()
                .map_or(0, |c| c.w.owned_bytes(self.rows))
    }
}

/// The registered candidate-source families (one line per family).
pub(crate) static SOURCES: &[&SourceRegistration] = &[
    &crate::source::lsh::REGISTRATION,
    &crate::source::graph::family::REGISTRATION,
    &crate::source::ivf::family::REGISTRATION,
    &crate::source::forest::family::REGISTRATION,
];

/// The registration of family `f`.
pub(crate) fn source_registration(f: Family) -> &'static SourceRegistration {
    SOURCES
        .iter()
        .find(|r| (r.accepts)(f))
        .expect("every Family variant has a candidate source")
}
