//! The mutable index: row updates, rehashes and the rehash schedule.

use super::*;

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

/// Writes new values of rows `ids[0 .. count)` of W and marks them dirty
/// (for lshk_index_rehash_dirty); the tables are unchanged until then, so
/// queries score with the new weights and retrieve with the old buckets.
/// `rows` (row j at `rows + j * row_stride`, finite; f16: |w| <= 65504) is
/// converted to the storage (bf16 / f16 round to nearest even, int8
/// requantises row and scale). BORROWED_F32: the caller changes its own W
/// in place (while no call uses the index) and passes rows = NULL, which
/// only marks the ids. `bias` (NULL = unchanged): `count` finite values,
/// only for an index with a bias. A repeated id takes its last values.
/// Weights mapped from a file are first copied into memory. EXCLUSIVE
/// access (see lshk_index).
///
/// Errors: NULL_POINTER (idx; ids with count > 0), INVALID_HANDLE,
/// UNSUPPORTED (no LSH tables), INVALID_ARGUMENT (rows given for a borrowed
/// W; row_stride < dim; a bias for an index without one; label-aware
/// buckets; f16 range; misaligned pointers), INDEX_OUT_OF_RANGE (an id >=
/// rows), NON_FINITE, SIZE_OVERFLOW, ALLOCATION_FAILED. On error the index
/// is unchanged.
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
/// current W into every table and clears their dirty marks; only their
/// buckets are recomputed. Afterwards every query equals one on a fresh
/// lshk_index_build with the same parameters over the current W and bias,
/// bit for bit, for F32 and BORROWED_F32 storage (other storages hash the
/// stored, rounded rows, a build the caller's f32 rows). The first call on
/// a built or loaded index restores each row's bucket map (4 * rows * L
/// bytes, then kept): from the tables when bucket_cap is 0, else by
/// rehashing every row; with MIPS a change of the largest row norm U also
/// rehashes every row. `*out_rehashed` (NULL = not wanted): the number of
/// rows rehashed. EXCLUSIVE access.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (no LSH tables),
/// INVALID_ARGUMENT (label-aware buckets, misaligned pointers),
/// INDEX_OUT_OF_RANGE, NON_FINITE (a borrowed W row holds NaN or
/// infinity), SIZE_OVERFLOW, ALLOCATION_FAILED. On error the index is
/// unchanged.
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

/// Rehashes every dirty row (passed to lshk_index_update_rows since its
/// last rehash) as lshk_index_rehash_rows does; `*out_rehashed` (NULL =
/// not wanted): the number rehashed (0 when none was dirty). EXCLUSIVE.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (no LSH tables),
/// INVALID_ARGUMENT (label-aware buckets, misaligned `out_rehashed`),
/// NON_FINITE, ALLOCATION_FAILED. On error the index is unchanged.
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
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (misaligned).
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
/// < 1, lambda not finite or < 0, misaligned `out_next`).
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
