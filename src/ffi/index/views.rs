//! Read-only views of an index: memory, shape, weights, the borrowed
//! family/tables handles, and lshk_index_free (split out of ffi/index.rs,
//! code unchanged).

use super::*;

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
