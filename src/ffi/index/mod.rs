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
use super::graph::{lshk_graph_params, lshk_graph_query_params, read_search_params};
use super::simhash::lshk_simhash;
use super::tables::{lshk_gather_params, lshk_tables, read_params};
use super::*;
use crate::dwta::Dwta;
use crate::index::{Family, Index, IndexParams, QueryParams, QueryStats, Storage, Transform};
use crate::matmul::Weights;
use crate::simhash::SimHash;
use crate::tables::Tables;

/// A built or loaded index: hash family, tables, weights and bias.
/// Every function taking `const lshk_index *` (queries included) is safe
/// to call from many threads at once, without locks. The functions taking
/// a non-const `lshk_index *` change or free the index and need EXCLUSIVE
/// access: lshk_index_train_labels, lshk_index_train_iul,
/// lshk_index_update_rows, lshk_index_rehash_rows, lshk_index_rehash_dirty
/// and lshk_index_free. While one of them runs, no other call may use the
/// index or its borrowed family/tables handles (e.g. guard the index with
/// a reader-writer lock: queries shared, training exclusive). Queries
/// started after it returns see the changed index.
pub struct lshk_index {
    _private: [u8; 0],
}

/// Hash family: SimHash (signed random projections).
pub const LSHK_FAMILY_SIMHASH: u32 = 0;
/// Hash family: DWTA (densified winner-take-all bin maxima).
pub const LSHK_FAMILY_DWTA: u32 = 1;
/// Graph family (FGD): an HNSW graph over the bias-fused transformed rows
/// is the candidate source (no hashing, no tables); build parameters
/// through lshk_index_build_ex's lshk_graph_params, query options through
/// lshk_index_query_ex's lshk_graph_query_params. The returned
/// scores are the index's exact logits, as for every family. LSH-only
/// calls (lshk_index_simhash / _dwta / _tables, label and IUL training,
/// row updates and rehashes) refuse a graph index with INVALID_ARGUMENT.
pub const LSHK_FAMILY_GRAPH: u32 = 2;
/// Weights: the caller's f32 W is used in place, not copied; it must stay
/// alive and unchanged while the index (or one loaded with it) lives,
/// except for rows changed while no call uses the index and then passed to
/// lshk_index_update_rows (training).
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

const _: () = {
    assert!(LSHK_FAMILY_SIMHASH == Family::SimHash as u32);
    assert!(LSHK_FAMILY_DWTA == Family::Dwta as u32);
    assert!(LSHK_FAMILY_GRAPH == Family::Graph as u32);
    assert!(LSHK_STORAGE_BORROWED_F32 == Storage::BorrowedF32 as u32);
    assert!(LSHK_STORAGE_F32 == Storage::F32 as u32);
    assert!(LSHK_STORAGE_BF16 == Storage::Bf16 as u32);
    assert!(LSHK_STORAGE_F16 == Storage::F16 as u32);
    assert!(LSHK_STORAGE_I8 == Storage::I8 as u32);
    assert!(LSHK_TRANSFORM_NONE == Transform::None as u32);
    assert!(LSHK_TRANSFORM_BIAS_AUG == Transform::BiasAug as u32);
    assert!(LSHK_TRANSFORM_MIPS == Transform::Mips as u32);
};

/// Build progress: `done` of `total` rows hashed. Called on the thread
/// that called lshk_index_build, after every 16,384 hashed rows (or at
/// least every 50 ms while hashing), with non-decreasing done < total, then
/// exactly once with done == total when the index is complete.
pub type lshk_progress_fn =
    Option<unsafe extern "C" fn(user: *mut libc::c_void, done: u64, total: u64)>;

/// Build parameters. Obtain defaults from lshk_index_params_default(), then
/// change fields; `struct_size` lets later versions add fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_index_params {
    /// sizeof(lshk_index_params) as the caller knows it.
    pub struct_size: u32,
    /// LSHK_FAMILY_* (default SIMHASH).
    pub family: u32,
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
    /// Seed of the family and of the bucket_cap sampling (default 1).
    pub seed: u64,
    /// Buckets per table = 2^range_bits (1..=24). Default 0 =
    /// min(code bits, 20, ceil(log2(max(rows, 2))) + 1), where code bits is
    /// K for SimHash and K*log2(B) for DWTA; longer codes are folded.
    pub range_bits: u32,
    /// Keep at most this many ids per bucket, sampled reproducibly
    /// (default 0 = keep all).
    pub bucket_cap: u32,
    /// LSHK_STORAGE_* (default F32 copy).
    pub storage: u32,
    /// LSHK_TRANSFORM_* (default NONE).
    pub transform: u32,
    /// Threads of the build (0 = all cores, default).
    pub build_threads: u32,
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
    /// Optional progress callback (NULL = none).
    pub progress: lshk_progress_fn,
    /// Passed unchanged to `progress`.
    pub progress_user: *mut libc::c_void,
}

/// Per-batch candidate statistics of lshk_index_query.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_query_stats {
    /// sizeof(lshk_query_stats) as the caller knows it (set it before the
    /// call; lshk does not change it).
    pub struct_size: u32,
    /// Queries in the batch.
    pub queries: u64,
    /// Candidates summed over the batch.
    pub candidates_total: u64,
    /// Fewest candidates of one query (0 for an empty batch).
    pub candidates_min: u64,
    /// Most candidates of one query.
    pub candidates_max: u64,
}

/// A read-only view of the weights an index computes its logits from, as
/// filled by lshk_index_weights. The fields plug straight into the
/// gathered-matmul call of the storage's element type:
///
/// | storage                    | `w` points to        | call                           |
/// |----------------------------|----------------------|--------------------------------|
/// | LSHK_STORAGE_BORROWED_F32  | the caller's floats  | lshk_gathered_matmul_f32       |
/// | LSHK_STORAGE_F32           | floats               | lshk_gathered_matmul_f32       |
/// | LSHK_STORAGE_BF16          | uint16_t bf16 bits   | lshk_gathered_matmul_bf16      |
/// | LSHK_STORAGE_F16           | uint16_t binary16    | lshk_gathered_matmul_f16       |
/// | LSHK_STORAGE_I8            | int8_t, + `scales`   | lshk_gathered_matmul_i8        |
///
/// e.g. `lshk_gathered_matmul_bf16(v.w, v.rows, v.dim, v.w_stride, v.bias,
/// q, nq, q_stride, ids, offsets, out, out_len)` computes the scores
/// lshk_index_query ranks (the original W and b: a transform steers only
/// retrieval) with the same kernel; on the SIMD tiers a score's last bits
/// may differ, as rows are summed in blocks and a row's block depends on
/// its position in `ids` (both are within the kernel's documented error
/// bound). The pointers stay valid, and the memory unchanged, until
/// lshk_index_free (for a loaded index they may point into the mapped
/// file: never write through them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_weights_view {
    /// sizeof(lshk_weights_view) as the caller knows it (set it before the
    /// call; lshk does not change it).
    pub struct_size: u32,
    /// LSHK_STORAGE_* the index was built with (the element type of `w`).
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

// SAFETY: #[repr(C)], struct_size first; fields are integers, nullable raw
// pointers and an `Option` of a function pointer, for which every bit
// pattern is valid (a NULL callback is `None`).
unsafe impl ParamStruct for lshk_index_params {
    const DEFAULT_FN: &'static str = "lshk_index_params_default";
    fn defaults() -> Self {
        lshk_index_params_default()
    }
}

/// Default build parameters: SimHash, K = 12, L = 50, Gaussian planes,
/// bin_size 8, seed 1, range_bits 0 (automatic), bucket_cap 0, F32 copy
/// storage, no transform, all cores, no caller-given planes or map, no
/// progress callback; struct_size = sizeof(lshk_index_params).
#[no_mangle]
pub extern "C" fn lshk_index_params_default() -> lshk_index_params {
    let d = IndexParams::default();
    lshk_index_params {
        struct_size: std::mem::size_of::<lshk_index_params>() as u32,
        family: d.family as u32,
        bits_per_table: d.bits,
        tables: d.tables,
        sparsity: d.sparsity,
        bin_size: d.bin_size,
        seed: d.seed,
        range_bits: d.range_bits,
        bucket_cap: d.bucket_cap,
        storage: d.storage as u32,
        transform: d.transform as u32,
        build_threads: d.threads,
        planes: std::ptr::null(),
        planes_len: 0,
        dwta_map: std::ptr::null(),
        dwta_map_len: 0,
        progress: None,
        progress_user: std::ptr::null_mut(),
    }
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_query_stats {
    const C_NAME: &'static str = "lshk_query_stats";
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_weights_view {
    const C_NAME: &'static str = "lshk_weights_view";
}

// Declared in the file's old order, so cbindgen writes the header in the
// same order as before the split (it emits this file's items, then each
// submodule's in declaration order; blank lines keep rustfmt from sorting).
mod build;

mod query;

mod file;

mod views;

mod update;

pub use build::*;
pub use file::*;
pub use query::*;
pub use update::*;
pub use views::*;
