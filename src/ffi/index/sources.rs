//! The operations only some candidate sources have (IVF calibration,
//! forest rebuild), and the candidate sets and their union (every
//! source), as `lshk_index_*` calls.

use std::cell::RefCell;

use super::*;
use crate::source::ivf::Calibration;
use crate::source::lsh::tables::GatherResult;

/// What lshk_index_calibrate measured on the sample queries (the caller
/// sets struct_size; lshk writes every other field).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_calibration {
    /// sizeof(lshk_calibration).
    pub struct_size: u32,
    /// 1 when `query` met the target recall on the sample, else 0 (then
    /// `query` holds the best point measured).
    pub met: u32,
    /// The query parameters to pass to lshk_index_query: the defaults with
    /// `ivf` set to the cheaper (by rows scanned) of the fixed and the
    /// adaptive point.
    pub query: lshk_query_params,
    /// Recall@k of `query` on the sample.
    pub recall: f32,
    /// The smallest fixed nprobe that met the target (or the best
    /// measured), with its recall.
    pub fixed_nprobe: u32,
    pub fixed_recall: f32,
    /// The smallest adaptive reach (steps of 1/16, at most 16) that met
    /// the target (or the best measured), with its recall.
    pub adaptive_reach: f32,
    pub adaptive_recall: f32,
    /// The 95 % lower confidence bound of `recall` (over the per-query
    /// recalls), which is what must reach the target.
    pub recall_lower: f32,
    /// Mean rows scanned per sample query: `query`'s, the fixed point's
    /// and the adaptive point's.
    pub scanned: f64,
    pub fixed_scanned: f64,
    pub adaptive_scanned: f64,
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_calibration {
    const C_NAME: &'static str = "lshk_calibration";
}

/// IVF source: chooses the query knobs for a recall target from `nq`
/// sample queries (row i at `q + i * q_stride`; a few hundred held-out
/// queries of the real workload): from their exact top-k, the smallest
/// fixed nprobe and the smallest adaptive reach whose recall@k with
/// `rerank` exact re-scores reaches `target_recall` (in (0, 1]) by its
/// 95 % lower confidence bound; returns the one scanning fewer rows
/// (docs/ivf.md, "Calibration"). Only measured points are returned, so
/// `out->recall_lower >= target_recall` when `out->met` is 1.
/// Deterministic (rows scanned, not time, decide). `threads`: for the
/// sample's searches (0 = all cores).
///
/// Errors: NULL_POINTER (`idx`, `out`, `q` with nq > 0), INVALID_HANDLE,
/// UNSUPPORTED (not IVF), INVALID_ARGUMENT (nq or k 0, target_recall not
/// in (0, 1], q_stride < dim, `out` misaligned, overlapping `q` or its
/// struct_size too small), NON_FINITE (as lshk_index_query), SIZE_OVERFLOW.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out` must be a
/// writable lshk_calibration whose struct_size the caller set.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_calibrate(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    target_recall: f32,
    rerank: u32,
    threads: u32,
    out: *mut lshk_calibration,
) -> lshk_status {
    boundary("lshk_index_calibrate", || {
        // SAFETY: forwarded caller contracts.
        let h = unsafe { index_ref(idx)? };
        h.idx.ivf_source("lshk_index_calibrate")?;
        let Some(size) = (unsafe { check_out_struct(out, "out")? }) else {
            bail!(NullPointer, "`out` is NULL");
        };
        let ql = strided_len(nq, h.idx.dim(), q_stride, "q")?;
        check_disjoint(&[span(out, 1, "out")?], &[span(q, ql, "q")?])?;
        // SAFETY: caller contract: q holds ql floats.
        let qs = unsafe { slice_in(q, ql, "q")? };
        let c: Calibration = h.idx.calibrate(
            qs,
            nq,
            q_stride,
            k as usize,
            target_recall,
            rerank,
            threads as usize,
        )?;
        let qp = QueryParams {
            ivf: c.params,
            ..Default::default()
        };
        let r = lshk_calibration {
            struct_size: size,
            met: u32::from(c.met),
            query: query_params_to_c(&qp),
            recall: c.recall,
            fixed_nprobe: c.fixed.0,
            fixed_recall: c.fixed.1,
            adaptive_reach: c.adaptive.0,
            adaptive_recall: c.adaptive.1,
            recall_lower: c.recall_lower,
            scanned: c.scanned,
            fixed_scanned: c.fixed.2,
            adaptive_scanned: c.adaptive.2,
        };
        // SAFETY: checked writable and aligned above.
        unsafe { *out = r };
        Ok(())
    })
}

/// Forest source: builds the trees again from the current W (e.g. a
/// borrowed W the caller changed while no call used the index) with the
/// forest's parameters, or `*new_seed` when `new_seed` is not NULL. W and
/// the bias are checked again; the query range follows them. EXCLUSIVE
/// access. On error the index is unchanged.
///
/// Errors: NULL_POINTER (`idx`), INVALID_HANDLE, UNSUPPORTED (not a
/// forest), INVALID_ARGUMENT (misaligned `new_seed`),
/// NON_FINITE (W holds NaN, infinity or values no query could be scored
/// against), ALLOCATION_FAILED.
///
/// # Safety
/// `idx` NULL or a live handle no other thread uses; `new_seed` NULL or
/// readable.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_rebuild(
    idx: *mut lshk_index,
    new_seed: *const u64,
) -> lshk_status {
    boundary("lshk_index_rebuild", || {
        // SAFETY: forwarded caller contract (exclusive access).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        let seed = if new_seed.is_null() {
            None
        } else {
            if !new_seed.is_aligned() {
                bail!(InvalidArgument, "`new_seed` is misaligned");
            }
            // SAFETY: non-NULL, aligned, readable by contract.
            Some(unsafe { *new_seed })
        };
        h.idx.rebuild(seed)
    })
}

/// LSH, graph, forest: codes LSHK_IVF_CODES_I8 scores all candidates from
/// int8 codes of the rows (rows x dim bytes, as LSHK_STORAGE_I8's), then
/// the best max(rerank, k) of each query exactly from W; NONE (a build's):
/// all exactly. Codes follow row updates, rehashes and rebuilds and are
/// saved; I8 again changes only rerank. EXCLUSIVE access. Errors:
/// NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (IVF), INVALID_ARGUMENT (codes
/// not NONE or I8, rerank 0 with I8, I8 storage), ALLOCATION_FAILED.
///
/// # Safety
/// `idx` NULL or a live handle no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_set_codes(
    idx: *mut lshk_index,
    codes: u32,
    rerank: u32,
) -> lshk_status {
    boundary("lshk_index_set_codes", || {
        // SAFETY: forwarded caller contract (exclusive access).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        let c = Codes::from_u32(codes)
            .ok_or_else(|| Error::new(Status::InvalidArgument, format!("unknown codes {codes}")))?;
        h.idx.set_codes(c, rerank)
    })
}

thread_local! {
    /// lshk_index_candidates' sets (reused per thread).
    static SETS: RefCell<GatherResult> = RefCell::new(GatherResult::default());
}

fn check_needed(needed: *mut usize) -> Result<()> {
    if needed.is_null() {
        bail!(NullPointer, "`needed` is NULL");
    }
    if !needed.is_aligned() {
        bail!(InvalidArgument, "`needed` is misaligned");
    }
    Ok(())
}

/// The candidate sets of `nq` queries (query i at `q + i * q_stride`) the
/// source hands the scorer for a top-`k` query with `qp` (NULL =
/// defaults), unscored: the sets LSH negative sampling and the forest's
/// selective softmax train on (forest: the max(set_size, k) classes of
/// largest cosine; k may be 0). Output as lshk_tables_gather: query i's
/// distinct ids (ascending for LSH and the forest, best first for IVF and
/// the graph) in `ids[offsets[i] .. offsets[i+1]]` (nq + 1 offsets),
/// `*needed` the total; when `ids_len` < *needed: BUFFER_TOO_SMALL, only
/// `*needed` written.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// a bad knob as in lshk_index_query, misaligned or overlapping pointers),
/// BUFFER_TOO_SMALL, NON_FINITE (as lshk_index_query), SIZE_OVERFLOW,
/// ALLOCATION_FAILED.
///
/// # Safety
/// `q` holds (nq-1)*q_stride + dim readable floats; `ids` ids_len writable
/// u32, `offsets` nq + 1 writable size_t, `needed` writable; outputs do not
/// overlap inputs.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_candidates(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    qp: *const lshk_query_params,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    needed: *mut usize,
) -> lshk_status {
    boundary("lshk_index_candidates", || {
        // SAFETY: forwarded caller contracts.
        let h = unsafe { index_ref(idx)? };
        let qpr = unsafe { read_query_params(qp, "qp")? };
        let ql = strided_len(nq, h.idx.dim(), q_stride, "q")?;
        let n1 = nq
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "nq + 1 overflows"))?;
        // SAFETY: caller contract for q.
        let qs = unsafe { slice_in(q, ql, "q")? };
        check_needed(needed)?;
        let so = span(offsets, n1, "offsets")?;
        if offsets.is_null() {
            bail!(NullPointer, "`offsets` is NULL (it needs nq + 1 entries)");
        }
        span(ids, ids_len, "ids")?;
        SETS.with(|r| {
            let mut r = r.borrow_mut();
            h.idx.candidate_sets(qs, nq, q_stride, k, &qpr, &mut r)?;
            let need = r.ids.len();
            let wr = if ids_len < need { 0 } else { need };
            check_disjoint(
                &[span(ids, wr, "ids")?, so, span(needed, 1, "needed")?],
                &[
                    span_of(qs, "q"),
                    span(qp, usize::from(!qp.is_null()), "qp")?,
                ],
            )?;
            // SAFETY: `needed` checked non-NULL and aligned.
            unsafe { *needed = need };
            if ids_len < need {
                bail!(
                    BufferTooSmall,
                    "ids_len is {ids_len}, the {nq} queries have {need} candidates \
                     (reported in *needed)"
                );
            }
            // SAFETY: caller contract for the outputs (lengths checked).
            unsafe {
                slice_out(ids, need, "ids")?.copy_from_slice(&r.ids);
                slice_out(offsets, n1, "offsets")?.copy_from_slice(&r.offsets);
            }
            Ok(())
        })
    })
}

/// S(X): the union of `count` class ids (e.g. the ids of
/// lshk_index_candidates over a batch; each < rows, repeats counted), each
/// with its count c_j; when more than `cap` distinct classes (cap 0: no
/// cap), `cap` of them are drawn without replacement with probabilities
/// proportional to c_j, renormalised after each draw (Efraimidis-Spirakis
/// keys ln(u_j)/c_j with u_j from SplitMix64(seed ^ (j + 1) *
/// 0x9E3779B97F4A7C15); docs/training.md). Writes the kept ids ascending
/// into `out_ids`, their counts into `out_counts` (NULL = not wanted) and
/// their number into `*needed`; when `out_len` < *needed the call returns
/// BUFFER_TOO_SMALL and writes only `*needed`. Any source.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INDEX_OUT_OF_RANGE (an id >=
/// rows), INVALID_ARGUMENT (misaligned or overlapping pointers),
/// BUFFER_TOO_SMALL, SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `ids` holds `count` readable u32; `out_ids` and `out_counts` (when not
/// NULL) `out_len` writable u32; `needed` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_union(
    idx: *const lshk_index,
    ids: *const u32,
    count: usize,
    cap: usize,
    seed: u64,
    out_ids: *mut u32,
    out_counts: *mut u32,
    out_len: usize,
    needed: *mut usize,
) -> lshk_status {
    boundary("lshk_index_union", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { index_ref(idx)? };
        // SAFETY: caller contract (count readable ids).
        let ins = unsafe { slice_in(ids, count, "ids")? };
        check_needed(needed)?;
        span(out_ids, out_len, "out_ids")?;
        span(
            out_counts,
            if out_counts.is_null() { 0 } else { out_len },
            "out_counts",
        )?;
        UNION_OUT.with(|cell| {
            let (u, c) = &mut *cell.borrow_mut();
            crate::source::forest::union_capped(h.idx.rows(), ins, cap, seed, u, c)?;
            let need = u.len();
            let wr = if out_len < need { 0 } else { need };
            check_disjoint(
                &[
                    span(out_ids, wr, "out_ids")?,
                    span(
                        out_counts,
                        if out_counts.is_null() { 0 } else { wr },
                        "out_counts",
                    )?,
                    span(needed, 1, "needed")?,
                ],
                &[span_of(ins, "ids")],
            )?;
            // SAFETY: `needed` checked non-NULL and aligned.
            unsafe { *needed = need };
            if out_len < need {
                bail!(
                    BufferTooSmall,
                    "out_len is {out_len}, the union holds {need} classes (reported in *needed)"
                );
            }
            // SAFETY: caller contract for the outputs (lengths checked).
            unsafe {
                slice_out(out_ids, need, "out_ids")?.copy_from_slice(u);
                if !out_counts.is_null() {
                    slice_out(out_counts, need, "out_counts")?.copy_from_slice(c);
                }
            }
            Ok(())
        })
    })
}

thread_local! {
    /// lshk_index_union's result before it is copied out (reused).
    static UNION_OUT: RefCell<(Vec<u32>, Vec<u32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}
