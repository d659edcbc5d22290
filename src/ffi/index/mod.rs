//! C entry points of the index (`lshk_index_*`).
//!
//! # Borrowed family and tables handles
//! lshk_index_simhash / _dwta / _tables hand out handles to the index's own
//! hash family and tables. They are real handles (every read-only
//! `lshk_simhash_*` / `lshk_dwta_*` / `lshk_tables_*` call accepts them),
//! created once per index in their own handle slots and marked *borrowed*:
//! lshk_simhash_free / lshk_dwta_free / lshk_tables_free and
//! lshk_tables_update refuse them with INVALID_ARGUMENT (no double free, no
//! change under concurrent queries). lshk_index_free retires them: a
//! borrowed handle used after its index was freed is reported as
//! INVALID_HANDLE (best effort, like every freed handle).

use std::ffi::c_void;

use super::dwta::lshk_dwta;
use super::simhash::lshk_simhash;
use super::tables::lshk_tables;
use super::*;
use crate::index::{Family, Index, IndexParams, QueryParams, QueryStats, Storage, Transform};
use crate::matmul::Weights;
use crate::source::graph::Walk;
use crate::source::ivf::Codes;
use crate::source::lsh::hash::dwta::Dwta;
use crate::source::lsh::hash::simhash::SimHash;
use crate::source::lsh::tables::Tables;

/// A built or loaded index: hash family, tables, weights and bias. The
/// functions taking a non-const `lshk_index *` (lshk_index_train_labels,
/// _train_iul, _update_rows, _rehash_rows, _rehash_dirty, _rebuild,
/// _set_codes, _free) need EXCLUSIVE access: no other call may use it or
/// its borrowed family/tables handles meanwhile (e.g. a reader-writer
/// lock: queries shared, training exclusive); later ones see the change.
pub struct lshk_index {
    _private: [u8; 0],
}

/// Candidate source: LSH tables over SimHash codes (signed random
/// projections; knobs in lshk_index_params::lsh).
pub const LSHK_SOURCE_SIMHASH: u32 = 0;

/// lshk_query_params::threads: every core the process may use.
pub const LSHK_QUERY_THREADS_ALL: u32 = u32::MAX;
const _: () = assert!(LSHK_QUERY_THREADS_ALL == crate::source::QUERY_THREADS_ALL);
/// Candidate source: LSH tables over DWTA codes (densified winner-take-all
/// bin maxima; knobs in lshk_index_params::lsh).
pub const LSHK_SOURCE_DWTA: u32 = 1;
/// Candidate source: the FGD graph, an HNSW graph over the bias-fused
/// transformed rows (knobs in lshk_index_params::graph and
/// lshk_query_params::graph).
pub const LSHK_SOURCE_GRAPH: u32 = 2;
/// Candidate source: IVF lists, k-means over the rows [w, b] with int8
/// and/or 4-bit codes, an exact re-rank and an adaptive stop (knobs in
/// lshk_index_params::ivf and lshk_query_params::ivf).
pub const LSHK_SOURCE_IVF: u32 = 3;
/// Candidate source: the hashing forest, L trees split by perpendicular
/// bisectors; a query's candidates are the set of the classes of largest
/// cosine among its leaves (knobs in lshk_index_params::forest and
/// lshk_query_params::forest). Needs F32 or BORROWED_F32 storage.
pub const LSHK_SOURCE_FOREST: u32 = 4;
/// Weights: the caller's f32 W, used in place: alive and unchanged while
/// the index (or one loaded with it) lives, except rows changed while no
/// call uses the index, then passed to lshk_index_update_rows (LSH) or
/// followed by lshk_index_rebuild (forest).
pub const LSHK_STORAGE_BORROWED_F32: u32 = 0;
/// Weights: an f32 copy.
pub const LSHK_STORAGE_F32: u32 = 1;
/// Weights: bf16 (round to nearest even).
pub const LSHK_STORAGE_BF16: u32 = 2;
/// Weights: IEEE binary16 (round to nearest even; |w| > 65504 is refused).
pub const LSHK_STORAGE_F16: u32 = 3;
/// Weights: symmetric per-row int8 with one f32 scale per row.
pub const LSHK_STORAGE_I8: u32 = 4;
/// No transform: rows and queries are hashed as they are.
pub const LSHK_TRANSFORM_NONE: u32 = 0;
/// Bias augmentation: rows [w, b] (b = 0 without bias), queries [q, 1].
pub const LSHK_TRANSFORM_BIAS_AUG: u32 = 1;
/// MIPS transform (Neyshabur & Srebro): rows [w/U, sqrt(max(0, 1 -
/// |w/U|^2))] with U the largest row norm, queries [q/|q|, 0].
pub const LSHK_TRANSFORM_MIPS: u32 = 2;
/// IVF codes: none; every row of a visited list is scored exactly
/// (FAISS's IVFFlat). The lists keep an f32 copy of their own.
pub const LSHK_IVF_CODES_NONE: u32 = 0;
/// IVF codes: int8 per row (one f32 scale per row), the query quantised to
/// 7 bits, then the `rerank` best re-scored exactly.
pub const LSHK_IVF_CODES_I8: u32 = 1;
/// IVF codes: 4-bit product quantisation of each row's residual to its
/// list centroid (`pq_m` codes a row), scored from per-query byte tables,
/// then the `rerank` best re-scored exactly. Needs at least 16 rows, and a
/// larger `rerank` than CODES_I8 for the same recall (docs/ivf.md).
pub const LSHK_IVF_CODES_PQ4: u32 = 2;
/// IVF codes: both, in three stages: the 4-bit codes scan the visited
/// lists, the best 256 are re-scored from their int8 codes, then the
/// `rerank` best of those exactly (rerank 0: the top k by int8 scores).
/// For wide rows (d >= 256): int8's recall near the 4-bit pass's cost.
pub const LSHK_IVF_CODES_PQ4_I8: u32 = 3;
/// Graph walk: every row scored with the graph's stored rows (default).
pub const LSHK_GRAPH_WALK_EXACT: u32 = 0;
/// Graph walk: int8 scores on compact per-node records, then the best
/// `rerank` of the pool re-scored with the stored rows.
pub const LSHK_GRAPH_WALK_INT8: u32 = 1;

const _: () = {
    assert!(LSHK_SOURCE_SIMHASH == Family::SimHash as u32);
    assert!(LSHK_SOURCE_DWTA == Family::Dwta as u32);
    assert!(LSHK_SOURCE_GRAPH == Family::Graph as u32);
    assert!(LSHK_SOURCE_IVF == Family::Ivf as u32);
    assert!(LSHK_SOURCE_FOREST == Family::Forest as u32);
    assert!(LSHK_STORAGE_BORROWED_F32 == Storage::BorrowedF32 as u32);
    assert!(LSHK_STORAGE_F32 == Storage::F32 as u32);
    assert!(LSHK_STORAGE_BF16 == Storage::Bf16 as u32);
    assert!(LSHK_STORAGE_F16 == Storage::F16 as u32);
    assert!(LSHK_STORAGE_I8 == Storage::I8 as u32);
    assert!(LSHK_TRANSFORM_NONE == Transform::None as u32);
    assert!(LSHK_TRANSFORM_BIAS_AUG == Transform::BiasAug as u32);
    assert!(LSHK_TRANSFORM_MIPS == Transform::Mips as u32);
    assert!(LSHK_IVF_CODES_NONE == Codes::None as u32);
    assert!(LSHK_IVF_CODES_I8 == Codes::I8 as u32);
    assert!(LSHK_IVF_CODES_PQ4 == Codes::Pq4 as u32);
    assert!(LSHK_IVF_CODES_PQ4_I8 == Codes::Pq4I8 as u32);
    assert!(LSHK_GRAPH_WALK_EXACT == Walk::Exact as u32);
    assert!(LSHK_GRAPH_WALK_INT8 == Walk::Int8 as u32);
    assert!(crate::source::ivf::DEFAULT_REFINE == 256);
};

/// Build progress: `done` of `total` rows. Called on the thread that
/// called lshk_index_build, with non-decreasing done < total (LSH: after
/// every 16,384 hashed rows, or at least every 50 ms), then exactly once
/// with done == total when the index is complete (the other sources report
/// only that).
pub type lshk_progress_fn =
    Option<unsafe extern "C" fn(user: *mut libc::c_void, done: u64, total: u64)>;

/// LSH-source build knobs (SimHash and DWTA), inside lshk_index_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_lsh_params {
    /// K: bits per table (SimHash, 1..=32) or bins per table (DWTA, with
    /// K*log2(bin_size) <= 32). Default 12.
    pub bits_per_table: u32,
    /// L, the number of tables (default 50).
    pub tables: u32,
    /// SimHash planes: 0 Gaussian, 1 dense ±1, s >= 2 sparse ±1 with
    /// ceil(dim'/s) nonzeros (default 0). Ignored with caller-given planes.
    pub sparsity: u32,
    /// DWTA bin size B, a power of two in 2..=256 (default 8).
    pub bin_size: u32,
    /// Buckets per table = 2^range_bits (1..=24). Default 0 =
    /// min(code bits, 20, ceil(log2(max(rows, 2))) + 1), where code bits is
    /// K for SimHash and K*log2(B) for DWTA; longer codes are folded.
    pub range_bits: u32,
    /// Keep at most this many ids per bucket, sampled reproducibly
    /// (default 0 = keep all).
    pub bucket_cap: u32,
    /// Seed of the family and of the bucket_cap sampling (default 1).
    pub seed: u64,
    /// Optional caller-given SimHash planes: K*L rows of dim' floats
    /// (dim' = dim, or dim + 1 with a transform), copied. NULL = from seed.
    pub planes: *const f32,
    /// Number of floats at `planes` (must be K*L*dim').
    pub planes_len: usize,
    /// Optional caller-given DWTA bin map: K*L*B coordinates < dim',
    /// copied. NULL = from seed.
    pub dwta_map: *const u32,
    /// Number of entries at `dwta_map`.
    pub dwta_map_len: usize,
}

/// IVF-source build knobs, inside lshk_index_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_ivf_params {
    /// Lists (k-means clusters), 1..=rows; 0 = round(4 sqrt(rows))
    /// (default 0).
    pub nlist: u32,
    /// Lloyd iterations of k-means, >= 1 (default 10).
    pub iters: u32,
    /// Rows sampled (seeded) to train k-means, >= nlist after clamping to
    /// rows; 0 = min(rows, 64 * nlist) (default 0).
    pub train_rows: u32,
    /// LSHK_IVF_CODES_* (default I8).
    pub codes: u32,
    /// Sub-quantisers of CODES_PQ4 and CODES_PQ4_I8 (4 bits each; must
    /// divide dim, at most 16,384); 0 (default) = dim / 2 (odd dim: the
    /// largest divisor not above dim / 2). Must be 0 with other codes.
    pub pq_m: u32,
    /// Must be 0.
    pub reserved: u32,
    /// Seed of the training sample and k-means' empty-list splits
    /// (default 0x1f5eed00c0de0001).
    pub seed: u64,
    /// Optional per-row weights steering the k-means (`n_weights` == rows
    /// floats, finite, >= 0, not all 0; read during the build only): each
    /// centroid is the weighted mean of its training rows, so lists are
    /// finer where the weight is (docs/ivf.md, "Row weights"). NULL = all 1.
    pub row_weights: *const f32,
    /// Number of floats at `row_weights`.
    pub n_weights: usize,
}

/// Graph-source build knobs, inside lshk_index_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_graph_params {
    /// Links per node on the upper levels, 2..=256 (level 0 keeps up to
    /// 2 m). Default 16.
    pub m: u32,
    /// Pool size of the build's searches, >= 1 (default 200).
    pub ef_construction: u32,
    /// The storage of the graph's own (transformed) rows, which its walk
    /// scores: LSHK_STORAGE_F32 (default), _BF16 or _I8.
    pub storage: u32,
    /// Must be 0.
    pub reserved: u32,
    /// Seed of the levels (default 0x5eedf6d0).
    pub seed: u64,
}

/// Forest-source build knobs, inside lshk_index_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_forest_params {
    /// L, the number of trees, 1..=4096 (default 8).
    pub trees: u32,
    /// B: a node holding at least this many classes is split, >= 2
    /// (default 64).
    pub leaf_size: u32,
    /// 1 (default): split by direction only (over w / |w|; stays balanced
    /// when a few row norms grow during training); 0: over the rows.
    pub normalize_rows: u32,
    /// Must be 0.
    pub reserved: u32,
    /// Seed of the split draws (default 1).
    pub seed: u64,
}

/// Build parameters of lshk_index_build: the source, W's storage and each
/// source's knobs (a source reads only its own). Start from
/// lshk_index_params_default(); `struct_size` lets fields be added.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_index_params {
    /// sizeof(lshk_index_params) as the caller knows it.
    pub struct_size: u32,
    /// LSHK_SOURCE_* (default SIMHASH).
    pub source: u32,
    /// LSHK_STORAGE_* of W for the exact scores (default F32). IVF re-ranks
    /// from the index's rows in this storage (W is held once); only lists
    /// with codes NONE on BF16, F16 or I8 keep an f32 copy to scan.
    pub storage: u32,
    /// LSHK_TRANSFORM_* (default NONE; any other on LSH sources only).
    pub transform: u32,
    /// Build threads (0 = all cores, default); no index depends on it.
    pub build_threads: u32,
    /// LSH knobs (SIMHASH, DWTA).
    pub lsh: lshk_lsh_params,
    /// IVF knobs.
    pub ivf: lshk_ivf_params,
    /// Graph knobs.
    pub graph: lshk_graph_params,
    /// Forest knobs.
    pub forest: lshk_forest_params,
    /// Optional progress callback (NULL = none).
    pub progress: lshk_progress_fn,
    /// Passed unchanged to `progress`.
    pub progress_user: *mut libc::c_void,
}

/// LSH-source query knobs, inside lshk_query_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_lsh_query {
    /// Keep the ids found in at least this many tables (default 1; 0 acts
    /// as 1).
    pub min_count: u32,
    /// Budget of distinct ids per query (default 0 = no limit); tables are
    /// visited in order until it is reached (lshk_tables_gather's rule).
    pub max_candidates: u32,
    /// Extra buckets visited per table by query-directed multi-probing
    /// (SimHash; default 0; at most min(2^K - 1, 4096)).
    pub probes: u32,
    /// 0 (default) or K.
    pub bits_per_table: u32,
}

/// IVF-source query knobs, inside lshk_query_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_ivf_query {
    /// Lists visited per query, >= 1 (values above nlist act as nlist):
    /// exactly this many when `reach` is 0, at most this many otherwise
    /// (default UINT32_MAX: no cap).
    pub nprobe: u32,
    /// Approximate candidates re-scored exactly per query (at least k;
    /// CODES_PQ4: at least 1/64 of the rows scanned). 0 = no re-rank: the
    /// top k by the codes, scored from the stored W. Default 32.
    pub rerank: u32,
    /// Adaptive stop (default 2; finite, >= 0; 0 = visit exactly the
    /// `nprobe` best lists): after the best list, a list is scanned while
    /// `<[q, 1], c> + reach |q| spread` (a spread along q after two lists)
    /// is at least the k-th best score so far (docs/ivf.md).
    pub reach: f32,
    /// CODES_PQ4_I8 only: the best max(refine, rerank, k) of the 4-bit
    /// pass (docs/ivf.md, "No ceilings") get int8 scores before the exact
    /// re-rank; 0 = no int8 stage. Default 256.
    pub refine: u32,
}

/// Graph-source query knobs, inside lshk_query_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_graph_query {
    /// LSHK_GRAPH_WALK_* (default EXACT).
    pub walk: u32,
    /// Pool size, >= 1 (the pool is max(ef, k)); default 100.
    pub ef: u32,
    /// The pool's best (by the walk's score) that become candidates; 0 =
    /// the whole pool (default), at least k.
    pub rerank: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// Forest-source query knobs, inside lshk_query_params.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_forest_query {
    /// Q, the candidate set size (at least k is used); default 256.
    pub set_size: u32,
    /// HF-A's tau_cp in [0, 1] (0 = off, the default): keep the fewest of
    /// the Q classes, by logit, whose softmax mass in the set reaches it.
    pub confidence: f32,
}

/// Query parameters of lshk_index_query and _candidates: each source's
/// knobs (a source reads its own); start from lshk_query_params_default().
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_query_params {
    /// sizeof(lshk_query_params) as the caller knows it.
    pub struct_size: u32,
    /// Threads lshk_index_query splits a batch over (contiguous ranges of
    /// queries, or shared IVF list scans where a range would be under 64
    /// queries; the same answers for every count): 0 (default) and 1 the
    /// calling thread, n up to n (at most nq), LSHK_QUERY_THREADS_ALL every
    /// core the process may use. The index keeps them between calls.
    pub threads: u32,
    pub lsh: lshk_lsh_query,
    pub ivf: lshk_ivf_query,
    pub graph: lshk_graph_query,
    pub forest: lshk_forest_query,
}

/// Counts of one lshk_index_query call, summed over its queries.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_query_stats {
    /// sizeof(lshk_query_stats), set by the caller; lshk never changes it.
    pub struct_size: u32,
    /// Not written by lshk.
    pub reserved: u32,
    /// Queries in the batch.
    pub queries: u64,
    /// Candidates the scorer ranked, summed over the batch.
    pub candidates_total: u64,
    /// Fewest candidates of one query (0 for an empty batch).
    pub candidates_min: u64,
    /// Most candidates of one query.
    pub candidates_max: u64,
    /// IVF: lists visited (0 for other sources).
    pub lists: u64,
    /// Rows the source scored to find its candidates: IVF, the rows of the
    /// visited lists (from their codes; exactly, without codes); graph,
    /// the rows its walk scored (all levels); 0 for LSH and forest.
    pub scanned: u64,
    /// Rows re-scored exactly after codes: IVF's re-rank, row codes' shortlists.
    pub reranked: u64,
}

/// What lshk_index_describe reports of an index.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_index_info {
    /// sizeof(lshk_index_info), set by the caller; lshk never changes it.
    pub struct_size: u32,
    /// LSHK_SOURCE_*.
    pub source: u32,
    /// LSHK_STORAGE_* of W.
    pub storage: u32,
    /// LSHK_TRANSFORM_*.
    pub transform: u32,
    /// Rows of W.
    pub rows: usize,
    /// Columns of W (before any transform).
    pub dim: usize,
    /// LSH: K (bits or bins per table); 0 for other sources.
    pub bits_per_table: u32,
    /// LSH: L (tables); forest: trees; 0 for other sources.
    pub tables: u32,
    /// IVF: lists; 0 for other sources.
    pub nlist: u32,
    /// LSHK_IVF_CODES_*: IVF, its lists'; others, lshk_index_set_codes'.
    pub codes: u32,
    /// 1 when trained with labels (lshk_index_train_labels), else 0.
    pub labelled: u32,
    /// Written as 0.
    pub reserved: u32,
}

/// A read-only view of a weight matrix, as lshk_index_weights fills it
/// (the W and bias an index's logits come from) or as a caller describes
/// its own for lshk_gathered_matmul. lshk_gathered_matmul on an index's
/// view computes the scores lshk_index_query ranks (the original W and b:
/// a transform steers only retrieval), within the kernel's error bound (a
/// score's last bits may differ, on every tier: blocking and dense tiles
/// depend on the ids' positions). An index's view stays valid and
/// unchanged until lshk_index_free (a loaded index's may point into the
/// mapped file: never write through it).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_weights_view {
    /// sizeof(lshk_weights_view), set by the caller; lshk never changes it.
    pub struct_size: u32,
    /// LSHK_STORAGE_* (an index's: its storage), the element type of `w`:
    /// BORROWED_F32 and F32 float; BF16, F16 uint16_t bits; I8 int8_t.
    pub storage: u32,
    /// Row `r` starts at element `r * w_stride` of `w`.
    pub w: *const c_void,
    /// int8 storage: `rows` per-row scales (row r is `scales[r] * w[r]`);
    /// NULL otherwise.
    pub scales: *const f32,
    /// `rows` floats, or NULL when the index has no bias.
    pub bias: *const f32,
    /// Rows of W.
    pub rows: usize,
    /// Columns of W (before any transform).
    pub dim: usize,
    /// Elements (not bytes) between row starts; >= dim.
    pub w_stride: usize,
}

/// The handle's object: the index plus its borrowed sub-object handles
/// (0 for a family without them: the graph).
pub(crate) struct IndexHandle {
    pub(crate) idx: Index,
    fam_slot: usize,
    tab_slot: usize,
}

impl HandleKind for IndexHandle {
    const MAGIC: u64 = 0x5844_4e49_4b48_534c; // "LSHKINDX"
    const NAME: &'static str = "lshk_index";
}

impl Drop for IndexHandle {
    fn drop(&mut self) {
        // SAFETY: both slots came from handle_new_borrowed in new_handle and
        // are retired exactly once, here, before the index (and with it the
        // family and tables they point to) is dropped.
        unsafe {
            for s in [self.fam_slot, self.tab_slot] {
                if s != 0 {
                    handle_retire_borrowed(s as *mut Slot);
                }
            }
        }
    }
}

fn new_handle(idx: Index) -> *mut lshk_index {
    // The family and tables are boxed inside the index: their addresses do
    // not change when the index moves into the handle.
    let fam_slot = match (idx.simhash(), idx.dwta()) {
        (Some(h), _) => handle_new_borrowed::<SimHash>(h) as usize,
        (None, Some(h)) => handle_new_borrowed::<Dwta>(h) as usize,
        (None, None) => 0,
    };
    let tab_slot = idx
        .lsh_tables()
        .map_or(0, |t| handle_new_borrowed::<Tables>(t) as usize);
    handle_new(IndexHandle {
        idx,
        fam_slot,
        tab_slot,
    })
    .cast()
}

pub(crate) unsafe fn index_ref<'a>(h: *const lshk_index) -> Result<&'a IndexHandle> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk).
    unsafe { handle_ref::<IndexHandle>(slot(h), "idx") }
}

// SAFETY: #[repr(C)], struct_size first; fields are integers, floats,
// nullable raw pointers and an `Option` of a function pointer, for which
// every bit pattern is valid (a NULL callback is `None`).
unsafe impl ParamStruct for lshk_index_params {
    const DEFAULT_FN: &'static str = "lshk_index_params_default";
    fn defaults() -> Self {
        lshk_index_params_default()
    }
}

// SAFETY: #[repr(C)], struct_size first, integer and float fields (every
// bit pattern is a valid value; the float is validated before use).
unsafe impl ParamStruct for lshk_query_params {
    const DEFAULT_FN: &'static str = "lshk_query_params_default";
    fn defaults() -> Self {
        lshk_query_params_default()
    }
}

/// The C number of a graph's row storage: the one LSHK_STORAGE_* enum.
fn graph_storage_to_c(s: Storage) -> u32 {
    s as u32
}

fn graph_storage_from_c(v: u32) -> Result<Storage> {
    match Storage::from_u32(v) {
        Some(s @ (Storage::F32 | Storage::Bf16 | Storage::I8)) => Ok(s),
        _ => bail!(
            InvalidArgument,
            "graph.storage {v} is not LSHK_STORAGE_F32, _BF16 or _I8 (the graph's own rows)"
        ),
    }
}

/// The defaults documented at each field of lshk_index_params and its knob
/// structs, every pointer NULL; struct_size = sizeof(lshk_index_params).
#[no_mangle]
pub extern "C" fn lshk_index_params_default() -> lshk_index_params {
    let d = IndexParams::default();
    lshk_index_params {
        struct_size: std::mem::size_of::<lshk_index_params>() as u32,
        source: d.family as u32,
        storage: d.storage as u32,
        transform: d.transform as u32,
        build_threads: d.threads,
        lsh: lshk_lsh_params {
            bits_per_table: d.bits,
            tables: d.tables,
            sparsity: d.sparsity,
            bin_size: d.bin_size,
            range_bits: d.range_bits,
            bucket_cap: d.bucket_cap,
            seed: d.seed,
            planes: std::ptr::null(),
            planes_len: 0,
            dwta_map: std::ptr::null(),
            dwta_map_len: 0,
        },
        ivf: lshk_ivf_params {
            nlist: d.ivf.nlist,
            iters: d.ivf.iters,
            train_rows: d.ivf.train_rows,
            codes: d.ivf.codes as u32,
            pq_m: d.ivf.pq_m,
            reserved: 0,
            seed: d.ivf.seed,
            row_weights: std::ptr::null(),
            n_weights: 0,
        },
        graph: lshk_graph_params {
            m: d.graph.m,
            ef_construction: d.graph.ef_construction,
            storage: graph_storage_to_c(d.graph.storage),
            reserved: 0,
            seed: d.graph.seed,
        },
        forest: lshk_forest_params {
            trees: d.forest.trees,
            leaf_size: d.forest.leaf_size,
            normalize_rows: u32::from(d.forest.normalize_rows),
            reserved: 0,
            seed: d.forest.seed,
        },
        progress: None,
        progress_user: std::ptr::null_mut(),
    }
}

/// The defaults documented at each field of lshk_query_params' knob
/// structs; struct_size = sizeof(lshk_query_params).
#[no_mangle]
pub extern "C" fn lshk_query_params_default() -> lshk_query_params {
    query_params_to_c(&QueryParams::default())
}

/// The C form of `q` (every source's knobs).
pub(crate) fn query_params_to_c(q: &QueryParams) -> lshk_query_params {
    lshk_query_params {
        struct_size: std::mem::size_of::<lshk_query_params>() as u32,
        threads: q.threads,
        lsh: lshk_lsh_query {
            min_count: q.gather.min_count,
            max_candidates: q.gather.max_candidates,
            probes: q.gather.probes,
            bits_per_table: q.gather.bits_per_table,
        },
        ivf: lshk_ivf_query {
            nprobe: q.ivf.nprobe,
            rerank: q.ivf.rerank,
            reach: q.ivf.reach,
            refine: q.ivf.refine,
        },
        graph: lshk_graph_query {
            walk: q.graph.walk as u32,
            ef: u32::try_from(q.graph.ef).unwrap_or(u32::MAX),
            rerank: u32::try_from(q.graph.rerank).unwrap_or(u32::MAX),
            reserved: 0,
        },
        forest: lshk_forest_query {
            set_size: q.forest.set_size,
            confidence: q.forest.confidence,
        },
    }
}

fn reserved_zero(v: u32, what: impl std::fmt::Display) -> Result<()> {
    if v != 0 {
        bail!(InvalidArgument, "{what} is {v}; it must be 0");
    }
    Ok(())
}

/// Reads and checks a caller's query parameters (NULL = defaults; `arg`
/// names the argument in messages). The values each source checks itself
/// (e.g. reach, ef) are checked by the query, on the source that reads
/// them.
///
/// # Safety
/// `p` is NULL or a readable lshk_query_params of its struct_size.
pub(crate) unsafe fn read_query_params(
    p: *const lshk_query_params,
    arg: &str,
) -> Result<QueryParams> {
    // SAFETY: forwarded caller contract.
    let c = unsafe { read_param_struct(p, arg)? };
    // The argument's name is formatted into a message only on an error:
    // this runs on every query call.
    reserved_zero(c.graph.reserved, format_args!("{arg}->graph.reserved"))?;
    crate::source::forest::check_confidence(
        c.forest.confidence,
        format_args!("{arg}->forest.confidence"),
    )?;
    let walk = Walk::from_u32(c.graph.walk).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "{arg}->graph.walk {} is not an LSHK_GRAPH_WALK_* value (0..=1)",
                c.graph.walk
            ),
        )
    })?;
    Ok(QueryParams {
        gather: crate::source::lsh::tables::GatherParams {
            min_count: c.lsh.min_count,
            max_candidates: c.lsh.max_candidates,
            probes: c.lsh.probes,
            bits_per_table: c.lsh.bits_per_table,
        },
        graph: crate::source::graph::SearchParams {
            ef: c.graph.ef as usize,
            walk,
            rerank: c.graph.rerank as usize,
        },
        ivf: crate::source::ivf::SearchParams {
            nprobe: c.ivf.nprobe,
            rerank: c.ivf.rerank,
            reach: c.ivf.reach,
            refine: c.ivf.refine,
        },
        forest: crate::source::forest::ForestQuery {
            set_size: c.forest.set_size,
            confidence: c.forest.confidence,
        },
        threads: c.threads,
    })
}

/// Checks a caller's build parameters (as read_param_struct read them)
/// and turns them into the Rust form; the caller-given arrays are copied.
///
/// # Safety
/// The pointers in `cp` hold their stated lengths.
pub(crate) unsafe fn read_index_params(cp: &lshk_index_params) -> Result<IndexParams> {
    let family = Family::from_u32(cp.source).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!("source {} is not an LSHK_SOURCE_* value (0..=4)", cp.source),
        )
    })?;
    let storage = Storage::from_u32(cp.storage).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "storage {} is not an LSHK_STORAGE_* value (0..=4)",
                cp.storage
            ),
        )
    })?;
    let transform = Transform::from_u32(cp.transform).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "transform {} is not an LSHK_TRANSFORM_* value (0..=2)",
                cp.transform
            ),
        )
    })?;
    reserved_zero(cp.ivf.reserved, "p->ivf.reserved")?;
    reserved_zero(cp.graph.reserved, "p->graph.reserved")?;
    reserved_zero(cp.forest.reserved, "p->forest.reserved")?;
    let codes = Codes::from_u32(cp.ivf.codes).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "ivf.codes {} is not an LSHK_IVF_CODES_* value (0..=3)",
                cp.ivf.codes
            ),
        )
    })?;
    if cp.forest.normalize_rows > 1 {
        bail!(
            InvalidArgument,
            "p->forest.normalize_rows is {}; it must be 0 or 1",
            cp.forest.normalize_rows
        );
    }
    let graph_storage = graph_storage_from_c(cp.graph.storage)?;
    // SAFETY: forwarded caller contract (each pointer holds its length).
    let copy = |ptr: *const f32, len: usize, what: &str| -> Result<Option<Vec<f32>>> {
        if ptr.is_null() {
            if len != 0 {
                bail!(NullPointer, "`{what}` is NULL but its length is {len}");
            }
            return Ok(None);
        }
        Ok(Some(unsafe { slice_in(ptr, len, what)? }.to_vec()))
    };
    let planes = copy(cp.lsh.planes, cp.lsh.planes_len, "lsh.planes")?;
    let row_weights = copy(cp.ivf.row_weights, cp.ivf.n_weights, "ivf.row_weights")?;
    let dwta_map = if cp.lsh.dwta_map.is_null() {
        if cp.lsh.dwta_map_len != 0 {
            bail!(
                NullPointer,
                "`lsh.dwta_map` is NULL but dwta_map_len is {}",
                cp.lsh.dwta_map_len
            );
        }
        None
    } else {
        // SAFETY: as above.
        Some(unsafe { slice_in(cp.lsh.dwta_map, cp.lsh.dwta_map_len, "lsh.dwta_map")? }.to_vec())
    };
    let t = cp.build_threads;
    Ok(IndexParams {
        family,
        bits: cp.lsh.bits_per_table,
        tables: cp.lsh.tables,
        sparsity: cp.lsh.sparsity,
        bin_size: cp.lsh.bin_size,
        seed: cp.lsh.seed,
        range_bits: cp.lsh.range_bits,
        bucket_cap: cp.lsh.bucket_cap,
        storage,
        transform,
        threads: t,
        planes,
        dwta_map,
        graph: crate::source::graph::GraphParams {
            m: cp.graph.m,
            ef_construction: cp.graph.ef_construction,
            threads: t,
            storage: graph_storage,
            seed: cp.graph.seed,
        },
        ivf: crate::source::ivf::IvfParams {
            nlist: cp.ivf.nlist,
            iters: cp.ivf.iters,
            train_rows: cp.ivf.train_rows,
            codes,
            pq_m: cp.ivf.pq_m,
            threads: t,
            seed: cp.ivf.seed,
            ..Default::default()
        },
        ivf_row_weights: row_weights,
        forest: crate::source::forest::ForestParams {
            trees: cp.forest.trees,
            leaf_size: cp.forest.leaf_size,
            seed: cp.forest.seed,
            threads: t,
            normalize_rows: cp.forest.normalize_rows == 1,
        },
    })
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_query_stats {
    const C_NAME: &'static str = "lshk_query_stats";
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_weights_view {
    const C_NAME: &'static str = "lshk_weights_view";
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_index_info {
    const C_NAME: &'static str = "lshk_index_info";
}

// Declared in this order so that cbindgen keeps the header's item order (it
// emits this file's items, then each submodule's in declaration order;
// blank lines keep rustfmt from sorting).
mod build;

mod query;

mod file;

mod views;

mod update;

mod sources;

pub use build::*;
pub use file::*;
pub use query::*;
pub use sources::*;
pub use update::*;
pub use views::*;
