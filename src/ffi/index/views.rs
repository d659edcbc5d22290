//! Read-only views of an index: memory, shape, weights, the borrowed
//! family/tables handles, and lshk_index_free.

use super::*;

/// Bytes held by the index: family, tables, bias, and the weights it owns
/// or maps from its file (a borrowed W is the caller's and not counted).
/// An IVF index with int8 codes also keeps, as panels, the lists that
/// AVX-512 batches have shared: this grows with such batches, by at most
/// the lists' int8 codes again (docs/ivf.md, "Lists kept as panels").
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

/// Fills `*out` (the caller sets its struct_size) with what the index is:
/// source, storage, transform, shape and the source's main sizes.
///
/// Errors: NULL_POINTER (`idx`, `out`), INVALID_HANDLE, INVALID_ARGUMENT
/// (misaligned `out`, struct_size too small).
///
/// # Safety
/// `out` must be a writable lshk_index_info whose struct_size is set.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_describe(
    idx: *const lshk_index,
    out: *mut lshk_index_info,
) -> lshk_status {
    boundary("lshk_index_describe", || {
        // SAFETY: forwarded caller contracts.
        let h = unsafe { index_ref(idx)? };
        let Some(size) = (unsafe { check_out_struct(out, "out")? }) else {
            bail!(NullPointer, "`out` is NULL");
        };
        let i = &h.idx;
        let (nlist, codes) = i.ivf().map_or((0, i.codes().0 as u32), |v| {
            (v.nlist() as u32, v.params().codes as u32)
        });
        let tables = match i.forest() {
            Some(f) => f.params().trees,
            None => i.num_tables(),
        };
        let info = lshk_index_info {
            struct_size: size,
            source: i.family() as u32,
            storage: i.storage() as u32,
            transform: i.transform() as u32,
            rows: i.rows(),
            dim: i.dim(),
            bits_per_table: i.bits(),
            tables,
            nlist,
            codes,
            labelled: u32::from(i.label_state().is_some()),
            reserved: 0,
        };
        // SAFETY: checked writable and aligned above.
        unsafe { out.write(info) };
        Ok(())
    })
}

/// Fills `*out` (the caller sets its struct_size; lshk writes the fields
/// after it) with a view of the W and bias the index's logits come from
/// (see lshk_weights_view), valid until lshk_index_free.
///
/// Errors: NULL_POINTER (`idx`, `out`), INVALID_HANDLE, INVALID_ARGUMENT
/// (misaligned `out`, `out->struct_size` too small).
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

/// Releases an index and retires its borrowed family/tables handles.
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

/// The index's SimHash family as a borrowed handle (the same one at each
/// call) valid until lshk_index_free: const `lshk_simhash_*` functions
/// accept it (it hashes over dim' = dim + 1 with a transform);
/// lshk_simhash_free refuses it (INVALID_ARGUMENT).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (another source).
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
                Unsupported,
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
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (another source).
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
                Unsupported,
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
/// Errors: NULL_POINTER, INVALID_HANDLE, UNSUPPORTED (no LSH tables).
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
