//! lshk_index_build.

use super::*;

/// The caller's progress callback, called from the build's threads.
struct Progress {
    f: unsafe extern "C" fn(*mut libc::c_void, u64, u64),
    user: *mut libc::c_void,
}
// SAFETY: the callback is only ever called from the thread that called
// lshk_index_build (the build reports progress there); `user` is passed
// through unchanged, as the C contract says.
unsafe impl Sync for Progress {}

/// Builds an index over `rows` rows of `dim` floats (row r at
/// `w + r * w_stride`) with an optional `bias` (`rows` floats, NULL = none;
/// scores are `w_r . q + b_r`): the source `p->source` is built with its
/// knobs, and W is kept per `p->storage` for the exact scores (see
/// LSHK_STORAGE_BORROWED_F32). `p` NULL = defaults. The index is a pure
/// function of W, the bias and `p`: the same on every tier and thread
/// count. Progress as at lshk_progress_fn. Free it with lshk_index_free.
///
/// Errors: NULL_POINTER (`out`, `w`, a knob's array NULL with a length),
/// INVALID_ARGUMENT (rows 0, dim 0, stride < dim, struct_size too small, a
/// value not among its LSHK_* constants, a reserved field not 0; LSH: a bad
/// K/L/B/range_bits, planes_len or dwta_map_len not matching, caller-given
/// arrays of the wrong width for the transform; IVF: nlist > rows, iters 0,
/// train_rows < nlist, pq_m not 0 without PQ4 codes or not dividing dim,
/// PQ4 codes with < 16 rows, n_weights != rows, a negative weight or all 0;
/// graph: m outside 2..=256, ef_construction 0, rows >= 2^32 - 1; forest:
/// rows < 2, trees outside 1..=4096, leaf_size < 2, normalize_rows not 0/1,
/// storage not F32/BORROWED_F32; a transform on a non-LSH source; row
/// weights on a non-IVF source; |w| > 65504 with F16 storage),
/// INDEX_OUT_OF_RANGE (a caller-given map coordinate >= dim'), NON_FINITE
/// (NaN or infinity in W, the bias or the row weights, naming the row; a
/// |value| above FLT_MAX / (8 (dim + 2)), or for IVF above
/// sqrt(FLT_MAX / (16 (dim + 2)))), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `w` must hold (rows-1)*w_stride + dim readable floats, `bias` (if not
/// NULL) `rows` floats; `p` NULL or a valid params struct whose pointers
/// hold their stated lengths.
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
        check_out(out)?;
        // SAFETY: forwarded caller contract (p NULL or a readable struct
        // whose pointers hold their stated lengths).
        let cp = unsafe { read_param_struct(p, "p")? };
        let ip = unsafe { read_index_params(&cp)? };
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
                // SAFETY: the caller's callback and its user pointer.
                unsafe { (pr.f)(pr.user, d, t) }
            }
        };
        let cbr: Option<&(dyn Fn(u64, u64) + Sync)> = if prog.is_some() { Some(&cb) } else { None };
        // SAFETY: with BORROWED_F32 the caller keeps W alive and unchanged
        // until lshk_index_free (documented contract).
        let idx = unsafe { Index::build_borrowed(ws, bs, rows, dim, w_stride, &ip, cbr)? };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = new_handle(idx) };
        Ok(())
    })
}
