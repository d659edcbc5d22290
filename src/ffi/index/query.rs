//! lshk_index_query / _query_ex (split out of ffi/index.rs, code unchanged).

use super::*;

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
/// query value, or a query whose scores could overflow f32), SIZE_OVERFLOW. Nothing is written on error.
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
        ivf: Default::default(),
        forest: Default::default(),
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
