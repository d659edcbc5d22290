//! lshk_index_save / _load.

use super::*;

/// Saves the index to `path` (a NUL-terminated file name): a versioned,
/// little-endian lshk container with a CRC-32C per section (params, hash
/// family, tables, bias, and the weights unless they are borrowed). Atomic
/// (docs/hardening.md, "Saving is atomic"): written to a temporary file
/// `.<name>.tmp-<pid>-<nanos>-<seq>` beside `path` (a crash may leave it;
/// lshk never reads it), then renamed over `path`, so `path` holds the old
/// index or the new one; of concurrent saves to one path the last rename
/// wins. `path` may name nothing, a regular file or a symbolic link to one
/// (the target is replaced); anything else is refused with IO_ERROR and left
/// as it is. Every lshk save follows these rules.
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

/// Loads an index saved by lshk_index_save. The file is memory-mapped; its
/// stored weights and tables are used in place until lshk_index_free (pages
/// shared with other processes mapping it), the family and bias are copied.
/// Every byte is verified once. Replace a loaded file only by saving a new
/// one (write + rename), never by rewriting it in place.
///
/// `borrowed_w`: for a file without stored weights (saved from a
/// BORROWED_F32 index) the same W as at build time (same rows and dim; used
/// in place: alive and unchanged until lshk_index_free); for any other file
/// NULL. Either misuse is INVALID_ARGUMENT. `w_stride`: 0 = the stride the
/// file records, else equal to it; a 0.2 file that needs W records none:
/// then W's stride (>= dim).
///
/// 0.2 files load as an index of their source (docs/migration-0.3.md,
/// "Files"); forest and graph files on BORROWED_F32 storage, given their W.
///
/// Errors: NULL_POINTER (`path`, `out`), IO_ERROR (cannot open or map; not a
/// regular file, refused without blocking, as by every lshk load),
/// BAD_FILE_FORMAT (truncated, corrupt, foreign, newer version or
/// inconsistent; the message names the problem), INVALID_ARGUMENT (empty
/// path, misaligned `out`, borrowed_w misuse), NON_FINITE (a borrowed W
/// lshk_index_build would refuse), ALLOCATION_FAILED.
///
/// # Safety
/// `path` must be a NUL-terminated string; a non-NULL `borrowed_w` must
/// hold (rows-1)*w_stride + dim readable floats of the saved shape.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_load(
    path: *const libc::c_char,
    borrowed_w: *const f32,
    w_stride: usize,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_load", || {
        // SAFETY: forwarded caller contracts (borrowed_w holds the file's
        // shape at its stride).
        unsafe { load_into(path, borrowed_w, usize::MAX, w_stride, out) }
    })
}

/// The load of lshk_index_load and lshk_index_load_borrowed: checks
/// `out`, loads (`w_len` = `usize::MAX` when W's length is not known) and
/// writes the new handle.
///
/// # Safety
/// As the two callers: `path` NUL-terminated; a non-NULL `w` holds `w_len`
/// floats or, with `usize::MAX`, the file's shape at its stride.
unsafe fn load_into(
    path: *const libc::c_char,
    w: *const f32,
    w_len: usize,
    w_stride: usize,
    out: *mut *mut lshk_index,
) -> Result<()> {
    check_out(out)?;
    // SAFETY: forwarded caller contracts.
    let p = unsafe { c_path(path)? };
    let idx = unsafe { Index::load_any(p, w, w_len, w_stride)? };
    // SAFETY: `out` checked non-NULL and aligned above.
    unsafe { *out = new_handle(idx) };
    Ok(())
}

/// lshk_index_load for a file that needs W (saved from a BORROWED_F32
/// index, or a 0.2 file that does not hold W), with W's length checked:
/// `borrowed_w` holds `w_len` floats, and a file whose shape needs more,
/// `(rows - 1) * w_stride + dim`, is refused before W is read. Otherwise as
/// lshk_index_load with a non-NULL `borrowed_w` (the same W as at build
/// time, used in place, alive and unchanged until lshk_index_free;
/// `w_stride` 0 = the recorded stride). Prefer it to lshk_index_load
/// whenever W's length is known.
///
/// Errors: as lshk_index_load; NULL_POINTER also for `borrowed_w`;
/// BUFFER_TOO_SMALL when `w_len` is below the file's shape;
/// INVALID_ARGUMENT for a file that stores its weights.
///
/// # Safety
/// `path` must be a NUL-terminated string; `borrowed_w` must hold `w_len`
/// readable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_load_borrowed(
    path: *const libc::c_char,
    borrowed_w: *const f32,
    w_len: usize,
    w_stride: usize,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_load_borrowed", || {
        if borrowed_w.is_null() {
            check_out(out)?;
            bail!(NullPointer, "`borrowed_w` is NULL");
        }
        // SAFETY: forwarded caller contracts (borrowed_w holds w_len
        // floats; the loader reads no more than the file's shape and
        // refuses a shape above w_len).
        unsafe { load_into(path, borrowed_w, w_len, w_stride, out) }
    })
}
