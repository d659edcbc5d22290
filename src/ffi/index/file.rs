//! lshk_index_save / _load.

use super::*;

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
/// the last rename wins. What `path` may name: nothing yet, a regular
/// file (replaced), or a symbolic link to a regular file (the target is
/// replaced, the link stays); anything else that exists (a directory,
/// FIFO, socket, device node, dangling link) is refused with IO_ERROR and
/// left as it is. Every lshk save follows these rules.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (empty path),
/// IO_ERROR (including a `path` that is not a regular file).
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
/// rows and dim; it is used in place and must stay alive and unchanged
/// until lshk_index_free); NULL there is INVALID_ARGUMENT. For a file that
/// stores its weights it must be NULL (non-NULL is INVALID_ARGUMENT, so a
/// caller never believes its own W is used when the file's is).
/// `w_stride`: for an lshk_index file, 0 = the stride the file records,
/// otherwise it must equal it (INVALID_ARGUMENT); a 0.2 file that needs W
/// records none, so there it must be W's stride (>= dim).
///
/// 0.2 files load too, each as the index of its source: an lshk_index
/// file as it is; an IVF file (lshk_ivf_save) as an IVF-source index
/// (borrowed_w and w_stride as its lshk_ivf_load took them: the W it was
/// built on when it borrowed, w_stride >= dim, else NULL and the storage
/// is F32); a forest file (lshk_forest_save) and a graph file
/// (lshk_graph_save) as a forest- or graph-source index on BORROWED_F32
/// storage, which needs the W they were built from (a graph with a bias
/// only when its rows are f32, from which the bias is recovered exactly).
///
/// Errors: NULL_POINTER (`path`, `out`), IO_ERROR (cannot open or map, or
/// not a regular file: a FIFO, device or directory is refused without
/// blocking; every lshk load does the same),
/// BAD_FILE_FORMAT (truncated, corrupt, foreign, newer version, or
/// content inconsistent with its params; the message names the problem),
/// INVALID_ARGUMENT (empty path, misaligned `out`, borrowed_w misuse as
/// above), NON_FINITE (borrowed W holds NaN/inf or a value no query could
/// be scored against, as lshk_index_build refuses), ALLOCATION_FAILED. On failure `*out` is not written.
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
        check_out(out)?;
        // SAFETY: forwarded caller contracts (borrowed_w holds the file's
        // shape at its stride).
        let p = unsafe { c_path(path)? };
        let idx = unsafe { Index::load_any(p, borrowed_w, w_stride)? };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = new_handle(idx) };
        Ok(())
    })
}
