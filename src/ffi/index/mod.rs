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

use std::ffi::{c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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

pub(crate) fn check_out<T>(out: *mut T) -> Result<()> {
    if out.is_null() {
        bail!(NullPointer, "`out` is NULL");
    }
    if !(out as usize).is_multiple_of(std::mem::align_of::<T>()) {
        bail!(InvalidArgument, "`out` is misaligned");
    }
    Ok(())
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

/// Checks a stats struct's size before any work (NULL = not wanted).
unsafe fn check_stats(s: *mut lshk_query_stats) -> Result<()> {
    // SAFETY: forwarded caller contract.
    unsafe { check_out_struct(s, "stats") }.map(drop)
}

struct Progress {
    f: unsafe extern "C" fn(*mut libc::c_void, u64, u64),
    user: *mut libc::c_void,
}
// SAFETY: the callback is only ever called on the thread that called
// lshk_index_build (documented); the pointer is passed through untouched.
unsafe impl Sync for Progress {}

/// Builds an index over `rows` rows of `dim` floats (row r at
/// `w + r * w_stride`, `w_stride >= dim`, in elements) with an optional
/// `bias` (`rows` floats, NULL = none): transforms the rows (params
/// `transform`), hashes them with the family, builds the tables, and
/// copies/converts W per `storage` (BORROWED_F32 keeps `w` itself: it must
/// stay alive and unchanged until lshk_index_free). `p` NULL = defaults.
/// Progress (optional) as described at lshk_progress_fn.
///
/// On success `*out` receives a new handle (free it with lshk_index_free);
/// on failure `*out` is not written.
///
/// Errors: NULL_POINTER (`out`, `w` with rows > 0), INVALID_ARGUMENT (rows
/// 0, dim 0, stride < dim, struct_size too small, a bad family/storage/
/// transform value, a bad K/L/B/range_bits, planes_len or dwta_map_len not
/// matching, |w| > 65504 with F16 storage), INDEX_OUT_OF_RANGE (a
/// caller-given map coordinate >= dim'),
/// NON_FINITE (NaN or infinity in W or the bias; the message names the
/// row), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `w` must hold (rows-1)*w_stride + dim readable floats, `bias` (if not
/// NULL) `rows` floats; `p` NULL or a valid params struct whose pointers
/// hold `planes_len` / `dwta_map_len` elements.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_build(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_index_params,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_build", || {
        // SAFETY: forwarded caller contracts.
        unsafe { build_body(w, bias, rows, dim, w_stride, p, std::ptr::null(), out) }
    })
}

/// lshk_index_build with the graph family's build parameters: `gp` (NULL =
/// lshk_graph_params_default()) is used when `p->family` is
/// LSHK_FAMILY_GRAPH and ignored (still checked) otherwise. The graph is
/// the one lshk_graph_build builds from W, the bias and `gp` (its m,
/// ef_construction, storage of its own rows, threads and seed); `p`'s LSH
/// fields are ignored, its `storage` keeps W for the exact logits as for
/// every family, and its `transform` must be NONE (the graph has its own).
/// Progress is reported once, on completion.
///
/// Errors: those of lshk_index_build, and INVALID_ARGUMENT (struct_size of
/// `gp` too small, a bad graph storage value, m outside 2..=256,
/// ef_construction 0, gp->reserved not 0, a graph index with a transform
/// or caller-given planes/map, rows >= 2^32 - 1 for a graph).
///
/// # Safety
/// As lshk_index_build; `gp` NULL or a readable lshk_graph_params.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_build_ex(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_index_params,
    gp: *const lshk_graph_params,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_build_ex", || {
        // SAFETY: forwarded caller contracts.
        unsafe { build_body(w, bias, rows, dim, w_stride, p, gp, out) }
    })
}

/// The body of lshk_index_build / lshk_index_build_ex.
///
/// # Safety
/// The contracts of lshk_index_build_ex.
#[allow(clippy::too_many_arguments)]
unsafe fn build_body(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_index_params,
    gp: *const lshk_graph_params,
    out: *mut *mut lshk_index,
) -> Result<()> {
    {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_param_struct(p, "p")? };
        let family = Family::from_u32(cp.family).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!("family {} is not an LSHK_FAMILY_* value (0..=2)", cp.family),
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
        let planes = if cp.planes.is_null() {
            if cp.planes_len != 0 {
                bail!(
                    NullPointer,
                    "`planes` is NULL but planes_len is {}",
                    cp.planes_len
                );
            }
            None
        } else {
            // SAFETY: caller contract: planes holds planes_len floats.
            Some(unsafe { slice_in(cp.planes, cp.planes_len, "planes")? }.to_vec())
        };
        let dwta_map = if cp.dwta_map.is_null() {
            if cp.dwta_map_len != 0 {
                bail!(
                    NullPointer,
                    "`dwta_map` is NULL but dwta_map_len is {}",
                    cp.dwta_map_len
                );
            }
            None
        } else {
            // SAFETY: caller contract: dwta_map holds dwta_map_len u32.
            Some(unsafe { slice_in(cp.dwta_map, cp.dwta_map_len, "dwta_map")? }.to_vec())
        };
        // SAFETY: forwarded caller contract.
        let graph = unsafe { super::graph::read_graph_params(gp, "gp")? };
        let ip = IndexParams {
            graph,
            family,
            bits: cp.bits_per_table,
            tables: cp.tables,
            sparsity: cp.sparsity,
            bin_size: cp.bin_size,
            seed: cp.seed,
            range_bits: cp.range_bits,
            bucket_cap: cp.bucket_cap,
            storage,
            transform,
            threads: cp.build_threads,
            planes,
            dwta_map,
        };
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let need = strided_len(rows, dim, w_stride, "w")?;
        // SAFETY: caller contract for w and bias.
        let ws = unsafe { slice_in(w, need, "w")? };
        let bs = if bias.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { slice_in(bias, rows, "bias")? })
        };
        let prog = cp.progress.map(|f| Progress {
            f,
            user: cp.progress_user,
        });
        let cb = |d: u64, t: u64| {
            if let Some(pr) = &prog {
                // SAFETY: a caller-supplied callback with its own pointer,
                // called as documented.
                unsafe { (pr.f)(pr.user, d, t) }
            }
        };
        let cbr: Option<&(dyn Fn(u64, u64) + Sync)> = if prog.is_some() { Some(&cb) } else { None };
        // SAFETY: with BORROWED_F32 the C caller keeps W alive and unchanged
        // until lshk_index_free (documented contract).
        let idx = unsafe { Index::build_borrowed(ws, bs, rows, dim, w_stride, &ip, cbr)? };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = new_handle(idx) };
        Ok(())
    }
}

/// The top `k` rows of each of `nq` queries (query i at `q + i * q_stride`,
/// `q_stride >= dim` elements): candidates (LSH: hash -> gather; graph:
/// the graph search) -> logits of the ORIGINAL W and bias for the
/// candidates -> top-k. Writes `out_ids[i*k .. i*k + k]`
/// (and `out_scores`, when not NULL) per query: descending by score, equal
/// scores by smaller id, padded with UINT32_MAX / -INFINITY when a query has
/// fewer than k candidates. Both outputs hold at least nq*k elements.
/// `k = 0` or `nq = 0` writes no ids or scores (stats are still written).
/// `g` NULL = lshk_gather_params_default(); `g->probes > 0` (SimHash only)
/// multi-probes, with `g->bits_per_table` 0 (meaning K) or K. A graph
/// index ignores `g` and searches with lshk_graph_query_params_default()
/// (other options: lshk_index_query_ex). `stats`
/// (NULL = none; set its struct_size) receives the batch's candidate
/// counts. Thread-safe: many threads may query one index at once; each
/// thread reuses its own scratch, so after a warm-up call of the same size
/// a query allocates nothing.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// struct_size of `g` or `stats` too small, probes on DWTA or too many,
/// bits_per_table != K, misaligned or overlapping outputs), BUFFER_TOO_SMALL, NON_FINITE (a NaN or infinite
/// query value), SIZE_OVERFLOW. Nothing is written on error.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out_ids` nq*k
/// writable u32; `out_scores` NULL or nq*k writable floats; `stats` NULL or
/// a writable lshk_query_stats; none may overlap.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_query(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    g: *const lshk_gather_params,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_query_stats,
) -> lshk_status {
    boundary("lshk_index_query", || {
        // SAFETY: forwarded caller contracts.
        unsafe {
            query_body(
                idx,
                q,
                nq,
                q_stride,
                k,
                g,
                std::ptr::null(),
                out_ids,
                out_scores,
                stats,
            )
        }
    })
}

/// lshk_index_query with the query options of every family: `g` (NULL =
/// defaults) for the LSH families, `gq` (NULL =
/// lshk_graph_query_params_default(): WALK_EXACT, ef 100, rerank 0) for
/// the graph family; each family ignores the other's (both are still
/// checked). Graph: per query the graph's pool of max(ef, k) nodes, best
/// first by the walk's own score; its best `rerank` (0 = the whole pool,
/// at least k) are the candidates, whose logits the index computes from
/// its W and bias (exact, as for every family); `stats` counts them.
///
/// Errors: those of lshk_index_query, and INVALID_ARGUMENT (struct_size of
/// `gq` too small, a `walk` that is not an LSHK_GRAPH_WALK_* value, ef 0
/// on a graph index, WALK_INT8 on a graph of dim > 65,472). Nothing is
/// written on error.
///
/// # Safety
/// As lshk_index_query; `gq` NULL or a readable lshk_graph_query_params.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_query_ex(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    g: *const lshk_gather_params,
    gq: *const lshk_graph_query_params,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_query_stats,
) -> lshk_status {
    boundary("lshk_index_query_ex", || {
        // SAFETY: forwarded caller contracts.
        unsafe { query_body(idx, q, nq, q_stride, k, g, gq, out_ids, out_scores, stats) }
    })
}

/// The body of lshk_index_query / lshk_index_query_ex.
///
/// # Safety
/// The contracts of lshk_index_query_ex.
#[allow(clippy::too_many_arguments)]
unsafe fn query_body(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    g: *const lshk_gather_params,
    gq: *const lshk_graph_query_params,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_query_stats,
) -> Result<()> {
    // SAFETY: forwarded caller contracts.
    let h = unsafe { index_ref(idx)? };
    let gp = unsafe { read_params(g)? };
    let sp = unsafe { read_search_params(gq, "gq")? };
    unsafe { check_stats(stats)? };
    let i = &h.idx;
    let ql = strided_len(nq, i.dim(), q_stride, "q")?;
    let need = crate::error::checked_mul(nq, k as usize, "nq * k")?;
    // SAFETY: caller contract for q, out_ids, out_scores.
    let qs = unsafe { slice_in(q, ql, "q")? };
    // The outputs may not overlap each other, `q` or the params (checked
    // on the raw ranges, before mutable slices exist).
    check_disjoint(
        &[
            span(out_ids, need, "out_ids")?,
            span(
                out_scores,
                if out_scores.is_null() { 0 } else { need },
                "out_scores",
            )?,
            span(stats, usize::from(!stats.is_null()), "stats")?,
        ],
        &[
            span(q, ql, "q")?,
            span(g, usize::from(!g.is_null()), "g")?,
            span(gq, usize::from(!gq.is_null()), "gq")?,
        ],
    )?;
    // SAFETY: caller contract (nq * k writable values each), disjoint from
    // each other and from q (checked).
    let ids = unsafe { slice_out(out_ids, need, "out_ids")? };
    let sc = if out_scores.is_null() {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe { slice_out(out_scores, need, "out_scores")? })
    };
    let qp = QueryParams {
        gather: gp,
        graph: sp,
    };
    let mut st = QueryStats::default();
    i.query_impl(qs, nq, q_stride, k, &qp, ids, sc, Some(&mut st))?;
    if !stats.is_null() {
        // SAFETY: checked non-NULL, aligned and large enough above.
        unsafe {
            (*stats).queries = st.queries;
            (*stats).candidates_total = st.candidates_total;
            (*stats).candidates_min = st.candidates_min;
            (*stats).candidates_max = st.candidates_max;
        }
    }
    Ok(())
}

pub(crate) unsafe fn c_path<'a>(path: *const libc::c_char) -> Result<&'a Path> {
    if path.is_null() {
        bail!(NullPointer, "`path` is NULL");
    }
    // SAFETY: caller contract: a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(path) };
    if c.to_bytes().is_empty() {
        bail!(InvalidArgument, "`path` is empty");
    }
    Ok(Path::new(std::ffi::OsStr::from_bytes(c.to_bytes())))
}

/// Saves the index to `path` (a NUL-terminated file name): a versioned,
/// little-endian lshk container with a CRC-32C per section (params, hash
/// family, tables, bias, and the weights unless they are borrowed). The
/// file is written to a temporary file in the same directory, flushed and
/// renamed over `path`, so a crash never leaves a torn index at `path`:
/// it holds the old index or the new one. A crash mid-write can leave the
/// hidden temporary file `.<name>.tmp-<pid>-<nanos>-<seq>` next to it;
/// lshk never reads such files, so they may be deleted whenever no save is
/// running. Thread-safe (the index is only read); concurrent saves to one
/// path (threads or processes) each write their own temporary file and
/// the last rename wins.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (empty path),
/// IO_ERROR.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_save(
    idx: *const lshk_index,
    path: *const libc::c_char,
) -> lshk_status {
    boundary("lshk_index_save", || {
        // SAFETY: forwarded caller contracts.
        let h = unsafe { index_ref(idx)? };
        let p = unsafe { c_path(path)? };
        h.idx.save(p)
    })
}

/// Loads an index saved by lshk_index_save. The file is memory-mapped and
/// the stored weights and the tables are used in place (no copy; the
/// mapping lives until lshk_index_free, and its pages are shared with
/// other processes mapping the same file); the hash family and the bias
/// are read into memory. Every byte is read once to verify checksums and
/// consistency. Replace an index file by saving a new one (write + rename,
/// as lshk_index_save does), never by rewriting it in place while loaded.
///
/// `borrowed_w`: for a file saved from a BORROWED_F32 index (whose weights
/// are not stored) it must point to the same W as at build time (same
/// rows, dim and w_stride; it is used in place and must stay alive and
/// unchanged until lshk_index_free); NULL there is INVALID_ARGUMENT. For a
/// file that stores its weights it must be NULL (non-NULL is
/// INVALID_ARGUMENT, so a caller never believes its own W is used when the
/// file's is).
///
/// Errors: NULL_POINTER (`path`, `out`), IO_ERROR (cannot open or map),
/// BAD_FILE_FORMAT (truncated, corrupt, foreign, newer version, or
/// content inconsistent with its params; the message names the problem),
/// INVALID_ARGUMENT (empty path, misaligned `out`, borrowed_w misuse as
/// above), NON_FINITE (borrowed W holds NaN/inf), ALLOCATION_FAILED. On failure `*out` is not written.
///
/// # Safety
/// `path` must be a NUL-terminated string; a non-NULL `borrowed_w` must
/// hold (rows-1)*w_stride + dim readable floats of the saved shape.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_load(
    path: *const libc::c_char,
    borrowed_w: *const f32,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_load", || {
        check_out(out)?;
        // SAFETY: forwarded caller contracts.
        let p = unsafe { c_path(path)? };
        let idx = unsafe { Index::load_raw(p, borrowed_w)? };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = new_handle(idx) };
        Ok(())
    })
}

/// Bytes held by the index: family, tables, bias, and the weights it owns
/// or maps from its file (a borrowed W is the caller's and not counted).
///
/// Errors: NULL_POINTER, INVALID_HANDLE.
///
/// # Safety
/// `out` must be a writable size_t.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_memory_bytes(
    idx: *const lshk_index,
    out: *mut usize,
) -> lshk_status {
    boundary("lshk_index_memory_bytes", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = h.idx.memory_bytes() };
        Ok(())
    })
}

/// Shape of the index: writes rows, dim (of W, before any transform), K
/// (bits per table, or DWTA bins per table) and L into the non-NULL
/// pointers among `rows`, `dim`, `k`, `l` (K and L are 0 for a graph
/// index).
///
/// Errors: NULL_POINTER (`idx`), INVALID_HANDLE, INVALID_ARGUMENT (a
/// misaligned output). Nothing is written on error.
///
/// # Safety
/// Non-NULL outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_shape(
    idx: *const lshk_index,
    rows: *mut usize,
    dim: *mut usize,
    k: *mut u32,
    l: *mut u32,
) -> lshk_status {
    boundary("lshk_index_shape", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        for (ok, name) in [
            (rows.is_null() || rows.is_aligned(), "rows"),
            (dim.is_null() || dim.is_aligned(), "dim"),
            (k.is_null() || k.is_aligned(), "k"),
            (l.is_null() || l.is_aligned(), "l"),
        ] {
            if !ok {
                bail!(InvalidArgument, "`{name}` is misaligned");
            }
        }
        // SAFETY: non-NULL outputs are aligned (checked) and writable.
        unsafe {
            if !rows.is_null() {
                *rows = h.idx.rows();
            }
            if !dim.is_null() {
                *dim = h.idx.dim();
            }
            if !k.is_null() {
                *k = h.idx.bits();
            }
            if !l.is_null() {
                *l = h.idx.num_tables();
            }
        }
        Ok(())
    })
}

/// Fills `*out` with a view of the weights (and bias) the index's logits
/// come from, for callers who want the kernels directly (see
/// lshk_weights_view). Set `out->struct_size = sizeof(lshk_weights_view)`
/// first. The view borrows from the index: valid until lshk_index_free.
///
/// Errors: NULL_POINTER (`idx`, `out`), INVALID_HANDLE, INVALID_ARGUMENT
/// (misaligned `out`, `out->struct_size` too small). Nothing but the view's
/// fields after `struct_size` is written, and only on success.
///
/// # Safety
/// `out` must be a writable lshk_weights_view whose struct_size is set.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_weights(
    idx: *const lshk_index,
    out: *mut lshk_weights_view,
) -> lshk_status {
    boundary("lshk_index_weights", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        // SAFETY: forwarded caller contract.
        let Some(size) = (unsafe { check_out_struct(out, "out")? }) else {
            bail!(NullPointer, "`out` is NULL");
        };
        let idx = &h.idx;
        let (w, scales): (*const c_void, *const f32) = match idx.weights() {
            Weights::F32(w) => (w.as_ptr().cast(), std::ptr::null()),
            Weights::Bf16(w) | Weights::F16(w) => (w.as_ptr().cast(), std::ptr::null()),
            Weights::I8 { w, scales } => (w.as_ptr().cast(), scales.as_ptr()),
        };
        let view = lshk_weights_view {
            struct_size: size,
            storage: idx.storage() as u32,
            w,
            scales,
            bias: idx.bias().map_or(std::ptr::null(), |b| b.as_ptr()),
            rows: idx.rows(),
            dim: idx.dim(),
            w_stride: idx.weight_stride(),
        };
        // SAFETY: checked non-NULL, aligned and (struct_size) large enough.
        unsafe { out.write(view) };
        Ok(())
    })
}

/// Releases an index (and retires its borrowed family/tables handles).
/// NULL is a no-op; a freed or foreign handle is INVALID_HANDLE.
///
/// # Safety
/// `idx` is NULL or a handle from lshk_index_build/_load that no other
/// thread is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_free(idx: *mut lshk_index) -> lshk_status {
    boundary("lshk_index_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<IndexHandle>(slot_mut(idx), "idx") }
    })
}

/// The index's SimHash family, as a borrowed handle valid until
/// lshk_index_free: every `lshk_simhash_*` function taking a const handle
/// accepts it (it hashes over dim', i.e. dim + 1 with a transform);
/// lshk_simhash_free refuses it (INVALID_ARGUMENT). Always the same handle
/// for one index.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (a DWTA or
/// graph index).
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_simhash(
    idx: *const lshk_index,
    out: *mut *const lshk_simhash,
) -> lshk_status {
    boundary("lshk_index_simhash", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        if h.idx.family() != Family::SimHash {
            bail!(
                InvalidArgument,
                "the index's family is {}, not SimHash",
                h.idx.source_name()
            );
        }
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = h.fam_slot as *const lshk_simhash };
        Ok(())
    })
}

/// The index's DWTA family as a borrowed handle (see lshk_index_simhash).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (a SimHash or
/// graph index).
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_dwta(
    idx: *const lshk_index,
    out: *mut *const lshk_dwta,
) -> lshk_status {
    boundary("lshk_index_dwta", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        if h.idx.family() != Family::Dwta {
            bail!(
                InvalidArgument,
                "the index's family is {}, not DWTA",
                h.idx.source_name()
            );
        }
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = h.fam_slot as *const lshk_dwta };
        Ok(())
    })
}

/// The index's tables as a borrowed handle valid until lshk_index_free:
/// lshk_tables_gather / _stats / _memory_bytes ... accept it;
/// lshk_tables_free and lshk_tables_update refuse it (INVALID_ARGUMENT).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (a graph index:
/// it has no tables).
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_tables(
    idx: *const lshk_index,
    out: *mut *const lshk_tables,
) -> lshk_status {
    boundary("lshk_index_tables", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        h.idx.lsh("lshk_index_tables")?;
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = h.tab_slot as *const lshk_tables };
        Ok(())
    })
}

// ------------------------------------------------- mutable index (issue 14)

/// LNS's initial rehash period (iterations): pass it with
/// LSHK_LNS_REHASH_LAMBDA to lshk_rehash_next.
pub const LSHK_LNS_REHASH_PERIOD: f64 = 50.0;
/// LNS's default decay rate λ of the rehash frequency, per iteration
/// (1e-4: the period grows e-fold every 10,000 iterations).
pub const LSHK_LNS_REHASH_LAMBDA: f64 = 1e-4;

const _: () = {
    assert!(LSHK_LNS_REHASH_PERIOD == crate::index::LNS_REHASH_PERIOD);
    assert!(LSHK_LNS_REHASH_LAMBDA == crate::index::LNS_REHASH_LAMBDA);
};

/// Writes new values of rows `ids[0 .. count)` of the index's W and marks
/// them dirty (to be rehashed by lshk_index_rehash_dirty); the tables are
/// not changed. `rows` (row j at `rows + j * row_stride`, `row_stride >=
/// dim` elements, finite; f16 storage: |w| <= 65504) is converted to the
/// index's storage (bf16 / f16 round to nearest even, int8 requantises the
/// row and its scale). With LSHK_STORAGE_BORROWED_F32 the caller changes
/// its own W in place (while no call uses the index) and passes rows =
/// NULL: the ids are only marked. `bias` (NULL = unchanged): `count` new
/// bias values (finite), only for an index built with a bias. A repeated
/// id takes its last values. Weights mapped from a file are first copied
/// into memory the index owns. Between this call and a rehash, queries
/// score with the new weights and retrieve with the old buckets.
///
/// EXCLUSIVE access: no other call may use the index (or its borrowed
/// family/tables handles) meanwhile, as for lshk_index_train_labels.
///
/// Errors: NULL_POINTER (idx; ids with count > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (rows given for a borrowed W; row_stride < dim; a bias
/// for an index without one; an index with label-aware buckets; f16 range;
/// misaligned pointers), INDEX_OUT_OF_RANGE (an id >= rows), NON_FINITE,
/// SIZE_OVERFLOW, ALLOCATION_FAILED. On error the index is unchanged.
///
/// # Safety
/// `ids` holds `count` readable u32; `rows` NULL or (count-1)*row_stride +
/// dim readable floats; `bias` NULL or `count` readable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_update_rows(
    idx: *mut lshk_index,
    ids: *const u32,
    count: usize,
    rows: *const f32,
    row_stride: usize,
    bias: *const f32,
) -> lshk_status {
    boundary("lshk_index_update_rows", || {
        // SAFETY: forwarded caller contract (idx is NULL or from lshk).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        // SAFETY: caller contract (count readable ids).
        let ids = unsafe { slice_in(ids, count, "ids")? };
        let dim = h.idx.dim();
        let rows = if rows.is_null() {
            None
        } else {
            let rl = strided_len(count, dim, row_stride, "rows")?;
            // SAFETY: caller contract (rl readable floats).
            Some((unsafe { slice_in(rows, rl, "rows")? }, row_stride))
        };
        let bias = if bias.is_null() {
            None
        } else {
            // SAFETY: caller contract (count readable floats).
            Some(unsafe { slice_in(bias, count, "bias")? })
        };
        h.idx.update_rows(ids, rows, bias)
    })
}

/// Rehashes rows `ids[0 .. count)` (any order, repeats allowed) from the
/// index's current W into every table now, and clears their dirty marks.
/// Only those rows move (the buckets they leave or join are recomputed);
/// afterwards every query equals one on a fresh lshk_index_build with the
/// same parameters over the current W and bias, bit for bit, for F32 and
/// BORROWED_F32 storage (bf16 / f16 / int8: the stored, rounded rows are
/// hashed, where a build hashes the caller's f32 rows). The first call on
/// a built or loaded index restores each row's bucket map (4 * rows * L
/// bytes, kept from then on): from the tables when bucket_cap is 0, else
/// by rehashing every row once; with the MIPS transform a change of the
/// largest row norm U also rehashes every row. `out_rehashed` (NULL = not
/// wanted) receives the number of rows rehashed.
///
/// EXCLUSIVE access, as lshk_index_update_rows.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (label-aware
/// buckets, misaligned pointers), INDEX_OUT_OF_RANGE, NON_FINITE (a
/// borrowed W row holds NaN or infinity), SIZE_OVERFLOW,
/// ALLOCATION_FAILED. On error the index is unchanged and `*out_rehashed`
/// is not written.
///
/// # Safety
/// `ids` holds `count` readable u32; `out_rehashed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_rehash_rows(
    idx: *mut lshk_index,
    ids: *const u32,
    count: usize,
    out_rehashed: *mut usize,
) -> lshk_status {
    boundary("lshk_index_rehash_rows", || {
        // SAFETY: forwarded caller contract (idx is NULL or from lshk).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        // SAFETY: caller contract (count readable ids).
        let ids = unsafe { slice_in(ids, count, "ids")? };
        if !out_rehashed.is_aligned() {
            bail!(InvalidArgument, "`out_rehashed` is misaligned");
        }
        check_disjoint(
            &[span(
                out_rehashed,
                usize::from(!out_rehashed.is_null()),
                "out_rehashed",
            )?],
            &[span_of(ids, "ids")],
        )?;
        let n = h.idx.rehash_rows(ids)?;
        if !out_rehashed.is_null() {
            // SAFETY: non-NULL, aligned (checked), writable (contract).
            unsafe { *out_rehashed = n };
        }
        Ok(())
    })
}

/// Rehashes every dirty row (those passed to lshk_index_update_rows since
/// their last rehash), as lshk_index_rehash_rows does; `out_rehashed` (NULL
/// = not wanted) receives the number of rows rehashed (0 when none was
/// dirty). EXCLUSIVE access, as lshk_index_update_rows.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (label-aware
/// buckets, misaligned `out_rehashed`), NON_FINITE, ALLOCATION_FAILED. On
/// error the index is unchanged and `*out_rehashed` is not written.
///
/// # Safety
/// `out_rehashed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_rehash_dirty(
    idx: *mut lshk_index,
    out_rehashed: *mut usize,
) -> lshk_status {
    boundary("lshk_index_rehash_dirty", || {
        // SAFETY: forwarded caller contract (idx is NULL or from lshk).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        if !out_rehashed.is_aligned() {
            bail!(InvalidArgument, "`out_rehashed` is misaligned");
        }
        let n = h.idx.rehash_dirty()?;
        if !out_rehashed.is_null() {
            // SAFETY: non-NULL, aligned (checked), writable (contract).
            unsafe { *out_rehashed = n };
        }
        Ok(())
    })
}

/// The number of dirty rows (updated since their last rehash) into `*out`.
/// Thread-safe (reads only).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (misaligned
/// `out`). On error `*out` is not written.
///
/// # Safety
/// `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_dirty_rows(
    idx: *const lshk_index,
    out: *mut usize,
) -> lshk_status {
    boundary("lshk_index_dirty_rows", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        check_out(out)?;
        // SAFETY: checked non-NULL and aligned; writable (contract).
        unsafe { *out = h.idx.dirty_rows() };
        Ok(())
    })
}

/// The rehash schedule (stateless): after a rehash at iteration `t` (or
/// the start, t = 0), the next is due at `t + period(t)` with
/// `period(t) = max(1, floor(initial_period * exp(lambda * t)))`
/// (saturating; written to `*out_next`). lambda = 0: a fixed period;
/// lambda > 0: LNS's exponentially decaying frequency; LNS:
/// LSHK_LNS_REHASH_PERIOD (50) and LSHK_LNS_REHASH_LAMBDA (1e-4), giving
/// 50, 100, 150, 200, 251, 302, ... Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (initial_period not finite or
/// < 1, lambda not finite or < 0, misaligned `out_next`). On error
/// `*out_next` is not written.
///
/// # Safety
/// `out_next` must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_rehash_next(
    initial_period: f64,
    lambda: f64,
    t: u64,
    out_next: *mut u64,
) -> lshk_status {
    boundary("lshk_rehash_next", || {
        check_out(out_next)?;
        let s = crate::index::RehashSchedule {
            initial_period,
            lambda,
        };
        s.check()?;
        // SAFETY: checked non-NULL and aligned; writable (contract).
        unsafe { *out_next = s.next_after(t) };
        Ok(())
    })
}
