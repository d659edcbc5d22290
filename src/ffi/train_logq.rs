//! C entry point of the LSH sampling probabilities (the seed's
//! `p_i ∝ 1 - (1 - p^K)^L`, per candidate, for a logQ correction):
//! `lshk_index_inclusion_prob`. The semantics are those of
//! [`crate::source::lsh::train_logq`] (docs/training.md).

use super::index::{index_ref, lshk_index};
use super::*;

/// The probability that LSH sampling with this SimHash index puts each
/// candidate into its query's set, for a logQ correction of sampled
/// softmax: for query `i < nq` (`dim` floats at `q + i * q_stride`) and
/// each candidate `ids[offsets[i] .. offsets[i+1]]` (CSR, `nq + 1`
/// offsets, 0 first, non-decreasing), `out_prob[j] = 1 - (1 - p^K)^l`,
/// `p = 1 - θ/π`, with θ the angle between the query and the row as the
/// index hashes them (after its transform; the row from the stored weights
/// and bias) and `l = tables_used[i]` (the tables whose buckets joined
/// query i's set, each <= L; `tables_used` NULL: L for every query; l = 0
/// gives 0). Exact over Gaussian planes (sparsity 0) with one bucket per
/// code; an approximation with other planes, folded codes (range_bits <
/// K), bucket_cap or multi-probing; rows not yet rehashed count as stored
/// (docs/training.md, "Sampling probabilities"). Computed in double: the
/// same bits on every machine.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (no LSH tables),
/// INVALID_ARGUMENT (a DWTA index, label-aware buckets, bad offsets,
/// q_stride < dim, a tables_used value > L, misaligned or overlapping
/// pointers), INDEX_OUT_OF_RANGE (an id >= rows), NON_FINITE (a NaN or
/// infinite query value), SIZE_OVERFLOW.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats (nothing when nq
/// is 0); `offsets` nq + 1 readable size_t; `ids` and `out_prob`
/// offsets[nq] elements; `tables_used` NULL or nq readable u32;
/// `out_prob` may not overlap any input.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_inclusion_prob(
    idx: *const lshk_index,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    ids: *const u32,
    offsets: *const usize,
    tables_used: *const u32,
    out_prob: *mut f64,
) -> lshk_status {
    boundary("lshk_index_inclusion_prob", || {
        // SAFETY (every slice below): the documented caller contract gives
        // each pointer the element count computed here; slice_in / span
        // check NULL, alignment and overflow first.
        let h = unsafe { index_ref(idx)? };
        let i = &h.idx;
        let n1 = nq
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "nq + 1 overflows"))?;
        // SAFETY: as above.
        let offs = unsafe { slice_in(offsets, n1, "offsets")? };
        let total = offs[nq];
        crate::matmul::check_offsets(offs, nq, total, "ids")?;
        let ql = crate::error::strided_len(nq, i.dim(), q_stride, "q")?;
        // SAFETY: as above.
        let qs = unsafe { slice_in(q, ql, "q")? };
        // SAFETY: as above.
        let idv = unsafe { slice_in(ids, total, "ids")? };
        let tl = if tables_used.is_null() { 0 } else { nq };
        // SAFETY: as above (NULL allowed: no per-query counts).
        let tv = unsafe { slice_in(tables_used, tl, "tables_used")? };
        check_disjoint(
            &[span(out_prob, total, "out_prob")?],
            &[
                span_of(qs, "q"),
                span_of(offs, "offsets"),
                span_of(idv, "ids"),
                span_of(tv, "tables_used"),
            ],
        )?;
        // SAFETY: as above; overlaps no input (checked).
        let out = unsafe { slice_out(out_prob, total, "out_prob")? };
        let t = (!tables_used.is_null()).then_some(tv);
        i.inclusion_probabilities(qs, nq, q_stride, idv, offs, t, out)
    })
}
