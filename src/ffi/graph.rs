//! C entry points of the FGD graph (`lshk_graph_*`): the fast graph
//! decoder, an HNSW graph over the bias-fused transformed rows, searched
//! for the largest logits (see `crate::graph`).

use std::cell::RefCell;

use super::*;
use crate::error::checked_mul;
use crate::graph::{Graph, GraphParams, GraphStats, SearchParams, Storage, Walk};

/// An FGD graph: each row x_i with its bias b_i becomes
/// X_i = [x_i; b_i; sqrt(U^2 - |[x_i; b_i]|^2)] (U the largest norm of
/// [x_i; b_i]), a query h becomes [h; 1; 0], and an HNSW graph over the
/// X_i is searched for the largest inner products, which are the logits
/// h . x_i + b_i. The graph keeps its own copy of the transformed rows
/// (f32, bf16 or int8). Every function taking `const lshk_graph *`
/// (queries included) is safe to call from many threads at once, without
/// locks; a graph never changes after it was built or loaded.
/// lshk_graph_free needs exclusive access.
pub struct lshk_graph {
    _private: [u8; 0],
}

/// Graph row storage: f32 (4 bytes per element).
pub const LSHK_GRAPH_STORAGE_F32: u32 = 0;
/// Graph row storage: bf16 (2 bytes per element, relative rounding 2^-8).
pub const LSHK_GRAPH_STORAGE_BF16: u32 = 1;
/// Graph row storage: int8 with one f32 scale per row (1 byte per element).
pub const LSHK_GRAPH_STORAGE_I8: u32 = 2;

const _: () = {
    assert!(LSHK_GRAPH_STORAGE_F32 == Storage::F32 as u32);
    assert!(LSHK_GRAPH_STORAGE_BF16 == Storage::Bf16 as u32);
    assert!(LSHK_GRAPH_STORAGE_I8 == Storage::I8 as u32);
};

/// Build parameters of lshk_graph_build. Obtain defaults from
/// lshk_graph_params_default(), then change fields; `struct_size` lets
/// later versions add fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_graph_params {
    /// sizeof(lshk_graph_params) as the caller knows it.
    pub struct_size: u32,
    /// Links per node on the upper levels, 2..=256 (level 0 keeps up to
    /// 2 m). Default 16.
    pub m: u32,
    /// Pool size of the build's searches, >= 1 (default 200). The build
    /// time grows about linearly with it.
    pub ef_construction: u32,
    /// LSHK_GRAPH_STORAGE_* (default F32).
    pub storage: u32,
    /// Build threads (0 = all cores, default). The graph does not depend
    /// on it.
    pub threads: u32,
    /// Must be 0.
    pub reserved: u32,
    /// Seed of the levels.
    pub seed: u64,
}

/// Counts of one lshk_graph_query call, summed over its queries.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_graph_stats {
    /// sizeof(lshk_graph_stats) as the caller knows it (set it before the
    /// call; lshk does not change it).
    pub struct_size: u32,
    /// Not written by lshk.
    pub reserved: u32,
    /// Rows scored (inner products computed), upper levels included.
    pub distances: u64,
}

/// Graph walk: every row scored with the stored rows (the default).
pub const LSHK_GRAPH_WALK_EXACT: u32 = 0;
/// Graph walk: int8 scores on compact per-node records (the query
/// quantised to int8), then the best `rerank` of the pool re-scored with
/// the stored rows (the returned scores are those of WALK_EXACT's).
pub const LSHK_GRAPH_WALK_INT8: u32 = 1;

const _: () = {
    assert!(LSHK_GRAPH_WALK_EXACT == Walk::Exact as u32);
    assert!(LSHK_GRAPH_WALK_INT8 == Walk::Int8 as u32);
};

/// Query parameters of lshk_graph_query_ex. Obtain defaults from
/// lshk_graph_query_params_default(), then change fields; `struct_size`
/// lets later versions add fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_graph_query_params {
    /// sizeof(lshk_graph_query_params) as the caller knows it.
    pub struct_size: u32,
    /// LSHK_GRAPH_WALK_* (default EXACT).
    pub walk: u32,
    /// Pool size, >= 1 (the pool is max(ef, k)); default 100.
    pub ef: u32,
    /// WALK_INT8: how many of the pool's best (by int8 score) are
    /// re-scored with the stored rows; 0 = the whole pool (default); at
    /// least k are. Ignored by WALK_EXACT.
    pub rerank: u32,
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_graph_query_params {
    const DEFAULT_FN: &'static str = "lshk_graph_query_params_default";
    fn defaults() -> Self {
        lshk_graph_query_params_default()
    }
}

/// Default query parameters: WALK_EXACT, ef 100, rerank 0 (the whole
/// pool); struct_size = sizeof(lshk_graph_query_params).
#[no_mangle]
pub extern "C" fn lshk_graph_query_params_default() -> lshk_graph_query_params {
    let d = SearchParams::default();
    lshk_graph_query_params {
        struct_size: std::mem::size_of::<lshk_graph_query_params>() as u32,
        walk: d.walk as u32,
        ef: d.ef as u32,
        rerank: d.rerank as u32,
    }
}

impl HandleKind for Graph {
    const MAGIC: u64 = 0x4850_4152_474b_4853; // "SHKGRAPH"
    const NAME: &'static str = "lshk_graph";
}

unsafe fn graph_ref<'a>(h: *const lshk_graph) -> Result<&'a Graph> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk).
    unsafe { handle_ref::<Graph>(slot(h), "graph") }
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_graph_params {
    const DEFAULT_FN: &'static str = "lshk_graph_params_default";
    fn defaults() -> Self {
        lshk_graph_params_default()
    }
}

/// Default build parameters: m 16, ef_construction 200, STORAGE_F32, all
/// cores, a fixed seed; struct_size = sizeof(lshk_graph_params).
#[no_mangle]
pub extern "C" fn lshk_graph_params_default() -> lshk_graph_params {
    let d = GraphParams::default();
    lshk_graph_params {
        struct_size: std::mem::size_of::<lshk_graph_params>() as u32,
        m: d.m,
        ef_construction: d.ef_construction,
        storage: d.storage as u32,
        threads: d.threads,
        reserved: 0,
        seed: d.seed,
    }
}

/// Builds an FGD graph over `rows` rows of `dim` floats (row r at
/// `w + r * w_stride`, `w_stride >= dim`, in elements) with an optional
/// `bias` (`rows` floats, NULL = none): the rows are transformed (see
/// lshk_graph) and copied into the graph (W is not kept), then inserted
/// into an HNSW graph in row order. `p` NULL = lshk_graph_params_default().
/// The graph is a pure function of W, the bias and the parameters: the
/// same on every ISA tier and for every thread count.
///
/// On success `*out` receives a new handle (free it with
/// lshk_graph_free); on failure `*out` is not written.
///
/// Errors: NULL_POINTER (`out`, `w`), INVALID_ARGUMENT (rows 0, rows >=
/// 2^32 - 1, dim 0, stride < dim, struct_size too small, a bad `storage`
/// value, m outside 2..=256, ef_construction 0, reserved not 0, a
/// misaligned pointer), NON_FINITE (NaN or infinity in W or the bias, the
/// message naming the row; a row norm whose square overflows f32),
/// SIZE_OVERFLOW,
/// ALLOCATION_FAILED.
///
/// # Safety
/// `w` must hold (rows-1)*w_stride + dim readable floats, `bias` (if not
/// NULL) `rows` floats; `p` NULL or a valid params struct.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_build(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_graph_params,
    out: *mut *mut lshk_graph,
) -> lshk_status {
    boundary("lshk_graph_build", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let gp = unsafe { read_graph_params(p, "p")? };
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
        let g = Graph::build(ws, bs, rows, dim, w_stride, &gp)?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(g).cast() };
        Ok(())
    })
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_graph_stats {
    const C_NAME: &'static str = "lshk_graph_stats";
}

thread_local! {
    /// Scores of a query whose caller passed `out_scores = NULL`.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The approximate top `k` logits `h . x_i + b_i` for each of `nq` queries
/// (query i at `q + i * q_stride`, `q_stride >= dim` elements), searching
/// the graph with a pool of max(ef, k) nodes (HNSW's efSearch: larger is
/// slower and finds more of the true top-k). Writes
/// `out_ids[i*k .. i*k + k]` (and `out_scores`, when not NULL) per query:
/// descending by logit, equal logits by smaller id, padded with UINT32_MAX
/// / -INFINITY when the graph has fewer than k rows. The scores are logits
/// (not distances) of the stored rows: with STORAGE_F32 within the f32
/// dot-product bound of the exact ones; softmax over them with
/// lshk_softmax. With ef >= rows every row is scored and the result is the
/// exact top-k. `k = 0` or `nq = 0` writes no ids or scores (stats are
/// still written). `stats` (NULL = none; set its struct_size) receives the
/// batch's counts. Thread-safe: each thread reuses its own scratch (the
/// visited set), so after a warm-up call a query allocates nothing.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// ef 0, struct_size of `stats` too small, misaligned or overlapping
/// buffers), NON_FINITE (a NaN or infinite query value, or a query whose scores could overflow f32), SIZE_OVERFLOW.
/// Nothing is written on error.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out_ids` nq*k
/// writable u32; `out_scores` NULL or nq*k writable floats; `stats` NULL or
/// a writable lshk_graph_stats.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_query(
    graph: *const lshk_graph,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    ef: u32,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_graph_stats,
) -> lshk_status {
    boundary("lshk_graph_query", || {
        let sp = SearchParams {
            ef: ef as usize,
            walk: Walk::Exact,
            rerank: 0,
        };
        // SAFETY: forwarded caller contracts.
        unsafe { query_impl(graph, &sp, q, nq, q_stride, k, out_ids, out_scores, stats) }
    })
}

/// lshk_graph_query with query parameters `p` (NULL =
/// lshk_graph_query_params_default()): `p->walk` picks the level-0 walk
/// (LSHK_GRAPH_WALK_INT8: int8 scores on compact records, then the best
/// `p->rerank` of the pool re-scored with the stored rows, so the returned
/// scores are the same kind as WALK_EXACT's). Results, padding, stats
/// (with WALK_INT8 the re-scored rows count too) and thread-safety as
/// lshk_graph_query; both walks are deterministic and the same on every
/// ISA tier.
///
/// Errors: those of lshk_graph_query, and INVALID_ARGUMENT for a
/// misaligned `p`, a `p->struct_size` smaller than this library's
/// sizeof(lshk_graph_query_params), a `walk` that is not an
/// LSHK_GRAPH_WALK_* value, `ef` 0, or WALK_INT8 on a graph with more
/// than 65,472 columns. Nothing is written on error.
///
/// # Safety
/// As lshk_graph_query; `p` NULL or a readable lshk_graph_query_params.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_graph_query_ex(
    graph: *const lshk_graph,
    p: *const lshk_graph_query_params,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_graph_stats,
) -> lshk_status {
    boundary("lshk_graph_query_ex", || {
        // SAFETY: forwarded caller contract.
        let sp = unsafe { read_search_params(p, "p")? };
        // SAFETY: forwarded caller contracts.
        unsafe { query_impl(graph, &sp, q, nq, q_stride, k, out_ids, out_scores, stats) }
    })
}

/// Reads and checks a caller's build parameters (NULL = defaults; `arg`
/// names the argument in messages): lshk_graph_build's and
/// lshk_index_build_ex's. The ranges (m, ef_construction) are checked by
/// the build.
///
/// # Safety
/// `p` is NULL or a readable lshk_graph_params of its struct_size.
pub(crate) unsafe fn read_graph_params(
    p: *const lshk_graph_params,
    arg: &str,
) -> Result<GraphParams> {
    // SAFETY: forwarded caller contract.
    let cp = unsafe { read_param_struct(p, arg)? };
    let storage = Storage::from_u32(cp.storage).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "storage {} is not an LSHK_GRAPH_STORAGE_* value (0..=2)",
                cp.storage
            ),
        )
    })?;
    if cp.reserved != 0 {
        bail!(
            InvalidArgument,
            "{arg}->reserved is {}; it must be 0",
            cp.reserved
        );
    }
    Ok(GraphParams {
        m: cp.m,
        ef_construction: cp.ef_construction,
        threads: cp.threads,
        storage,
        seed: cp.seed,
    })
}

/// Reads and checks a caller's query parameters (NULL = defaults; `arg`
/// names the argument in messages): lshk_graph_query_ex's and
/// lshk_index_query_ex's.
///
/// # Safety
/// `p` is NULL or a readable lshk_graph_query_params of its struct_size.
pub(crate) unsafe fn read_search_params(
    p: *const lshk_graph_query_params,
    arg: &str,
) -> Result<SearchParams> {
    // SAFETY: forwarded caller contract.
    let cp = unsafe { read_param_struct(p, arg)? };
    let walk = Walk::from_u32(cp.walk).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!("walk {} is not an LSHK_GRAPH_WALK_* value (0..=1)", cp.walk),
        )
    })?;
    Ok(SearchParams {
        ef: cp.ef as usize,
        walk,
        rerank: cp.rerank as usize,
    })
}

/// The body of lshk_graph_query / lshk_graph_query_ex.
///
/// # Safety
/// The contracts of lshk_graph_query.
#[allow(clippy::too_many_arguments)]
unsafe fn query_impl(
    graph: *const lshk_graph,
    sp: &SearchParams,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_graph_stats,
) -> Result<()> {
    // SAFETY: forwarded caller contracts.
    let g = unsafe { graph_ref(graph)? };
    unsafe { check_stats(stats)? };
    let dim = g.dim();
    let ql = strided_len(nq, dim, q_stride, "q")?;
    let need = checked_mul(nq, k as usize, "nq * k")?;
    // SAFETY: caller contract for q.
    let qs = unsafe { slice_in(q, ql, "q")? };
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
        &[span(q, ql, "q")?],
    )?;
    // SAFETY: caller contract (nq * k writable values each), disjoint
    // from each other and from q (checked).
    let ids = unsafe { slice_out(out_ids, need, "out_ids")? };
    let mut st = GraphStats::default();
    let tier = isa::active();
    // ef 0 and NaN/inf queries are refused by Graph::search_with
    // before it writes anything.
    if out_scores.is_null() {
        SCORES.with(|v| -> Result<()> {
            let mut v = v.borrow_mut();
            if v.len() < need {
                v.resize(need, 0.0);
            }
            g.search_with(
                tier,
                qs,
                nq,
                q_stride,
                k as usize,
                sp,
                ids,
                &mut v[..need],
                Some(&mut st),
            )
        })?;
    } else {
        // SAFETY: as for out_ids.
        let sc = unsafe { slice_out(out_scores, need, "out_scores")? };
        g.search_with(
            tier,
            qs,
            nq,
            q_stride,
            k as usize,
            sp,
            ids,
            sc,
            Some(&mut st),
        )?;
    }
    if !stats.is_null() {
        // SAFETY: checked non-NULL, aligned and large enough above.
        unsafe { (*stats).distances = st.distances };
    }
    Ok(())
}

/// Saves the graph to `path` (a NUL-terminated file name): an lshk
/// container of file kind 3 with a CRC-32C per section (parameters, rows,
/// levels, links), written to a temporary file in the same directory,
/// flushed and renamed over `path` as lshk_index_save does (see it for
/// what `path` may name). Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (empty path),
/// IO_ERROR (including a `path` that is not a regular file).
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_save(
    graph: *const lshk_graph,
    path: *const libc::c_char,
) -> lshk_status {
    boundary("lshk_graph_save", || {
        // SAFETY: forwarded caller contracts.
        let g = unsafe { graph_ref(graph)? };
        let p = unsafe { c_path(path)? };
        g.save(p)
    })
}

/// Loads a graph saved by lshk_graph_save (every section and every link is
/// checked, then read into memory; the file is not kept open).
///
/// Errors: NULL_POINTER (`path`, `out`), IO_ERROR (including a path that is
/// not a regular file), BAD_FILE_FORMAT (truncated, corrupt, not a graph
/// file, newer version, content inconsistent with its parameters, or
/// stored values that are not finite or exceed U; the message names the
/// problem),
/// INVALID_ARGUMENT (empty path, misaligned `out`), SIZE_OVERFLOW. On
/// failure `*out` is not written.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_load(
    path: *const libc::c_char,
    out: *mut *mut lshk_graph,
) -> lshk_status {
    boundary("lshk_graph_load", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let p = unsafe { c_path(path)? };
        let g = Graph::load(p)?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(g).cast() };
        Ok(())
    })
}

/// Shape of the graph: writes rows and dim into the non-NULL pointers
/// among `rows`, `dim`.
///
/// Errors: NULL_POINTER (`graph`), INVALID_HANDLE, INVALID_ARGUMENT (a
/// misaligned output). Nothing is written on error.
///
/// # Safety
/// Non-NULL outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_shape(
    graph: *const lshk_graph,
    rows: *mut usize,
    dim: *mut usize,
) -> lshk_status {
    boundary("lshk_graph_shape", || {
        // SAFETY: forwarded caller contract.
        let g = unsafe { graph_ref(graph)? };
        for (ok, name) in [(rows.is_aligned(), "rows"), (dim.is_aligned(), "dim")] {
            if !ok {
                bail!(InvalidArgument, "`{name}` is misaligned");
            }
        }
        // SAFETY: non-NULL outputs are aligned (checked) and writable.
        unsafe {
            if !rows.is_null() {
                *rows = g.rows();
            }
            if !dim.is_null() {
                *dim = g.dim();
            }
        }
        Ok(())
    })
}

/// Bytes held by the graph: the transformed rows, the links and levels.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (misaligned
/// `out`).
///
/// # Safety
/// `out` must be a writable size_t.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_memory_bytes(
    graph: *const lshk_graph,
    out: *mut usize,
) -> lshk_status {
    boundary("lshk_graph_memory_bytes", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let g = unsafe { graph_ref(graph)? };
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = g.memory_bytes() };
        Ok(())
    })
}

/// Releases a graph. NULL is a no-op; a freed or foreign handle is
/// INVALID_HANDLE.
///
/// # Safety
/// `graph` is NULL or a handle from lshk_graph_build/_load that no other
/// thread is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_graph_free(graph: *mut lshk_graph) -> lshk_status {
    boundary("lshk_graph_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Graph>(slot_mut(graph), "graph") }
    })
}
