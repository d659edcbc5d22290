//! lshk_index_query.

use super::*;

/// The top `k` rows of each of `nq` queries (query i at `q + i * q_stride`):
/// the source's candidates (LSH: hash -> gather; IVF: the lists' codes and
/// re-rank; graph: the walk; forest: the leaves' set) -> the logits of the
/// ORIGINAL W and bias for them (the stored W; IVF's exact re-rank, which
/// reads the stored W, passes through; with lshk_index_set_codes, for the
/// best `rerank` by the codes) -> top-k, into
/// `out_ids[i*k .. i*k + k]` and `out_scores` (NULL = not wanted), nq*k
/// each: descending by score, ties to the smaller id, padded with
/// UINT32_MAX / -INFINITY. k = 0 or nq = 0 writes no ids or scores (stats
/// still). `qp` NULL = defaults. `stats` (NULL = none; set its struct_size)
/// receives the batch's counts. Each thread reuses its own scratch: after a
/// warm-up call of the same size a query allocates nothing.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// struct_size of `qp` or `stats` too small, a reserved field not 0, a
/// walk that is not an LSHK_GRAPH_WALK_* value; the reading source's
/// knobs: LSH probes on DWTA or too many, bits_per_table not 0 or K; IVF
/// nprobe 0, reach negative or not finite; graph ef 0, WALK_INT8 at dim >
/// 65,472; misaligned or overlapping outputs), BUFFER_TOO_SMALL,
/// NON_FINITE (a NaN or infinite query value, or a query whose scores
/// could overflow f32), SIZE_OVERFLOW.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out_ids` nq*k
/// writable u32; `out_scores` NULL or nq*k writable floats; `qp` NULL or a
/// readable lshk_query_params; `stats` NULL or a writable
/// lshk_query_stats; outputs overlap neither each other nor the inputs.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_query(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    qp: *const lshk_query_params,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_query_stats,
) -> lshk_status {
    boundary("lshk_index_query", || {
        // SAFETY: forwarded caller contracts.
        let h = unsafe { index_ref(idx)? };
        let qpr = unsafe { read_query_params(qp, "qp")? };
        unsafe { check_stats(stats)? };
        let i = &h.idx;
        let ql = strided_len(nq, i.dim(), q_stride, "q")?;
        let need = crate::error::checked_mul(nq, k as usize, "nq * k")?;
        // SAFETY: caller contract: q holds ql floats.
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
            &[
                span(q, ql, "q")?,
                span(qp, usize::from(!qp.is_null()), "qp")?,
            ],
        )?;
        // SAFETY: caller contract; checked disjoint above.
        let ids = unsafe { slice_out(out_ids, need, "out_ids")? };
        let sc = if out_scores.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { slice_out(out_scores, need, "out_scores")? })
        };
        let mut st = QueryStats::default();
        i.query_impl(qs, nq, q_stride, k, &qpr, ids, sc, Some(&mut st))?;
        if !stats.is_null() {
            // SAFETY: checked writable and aligned by check_stats; only
            // the fields after struct_size are written.
            unsafe {
                (*stats).queries = st.queries;
                (*stats).candidates_total = st.candidates_total;
                (*stats).candidates_min = st.candidates_min;
                (*stats).candidates_max = st.candidates_max;
                (*stats).lists = st.lists;
                (*stats).scanned = st.scanned;
                (*stats).reranked = st.reranked;
            }
        }
        Ok(())
    })
}
