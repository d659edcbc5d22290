//! C entry points of the hashing forest (issue 14, item 4): `lshk_forest_*`.
//! The semantics are those of [`crate::forest`] (docs/training.md).

use super::*;
use crate::forest::{self, Forest, ForestParams, ForestResult};

/// A hashing forest over the rows of a class-weight matrix (L trees split
/// by perpendicular bisectors; docs/training.md). Built by
/// lshk_forest_build or lshk_forest_load, released by lshk_forest_free.
/// Functions taking a `const lshk_forest *` are thread-safe;
/// lshk_forest_rebuild and lshk_forest_free need exclusive access.
pub struct lshk_forest {
    _private: [u8; 0],
}

impl HandleKind for Forest {
    const MAGIC: u64 = 0x5453_5246_4b48_534c; // "LSHKFRST"
    const NAME: &'static str = "lshk_forest";
}

/// Build parameters of a forest. Obtain defaults from
/// lshk_forest_params_default(); `struct_size` must be at least
/// sizeof(lshk_forest_params) (a larger value from a newer header is
/// accepted, its unknown tail ignored).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_forest_params {
    /// sizeof(lshk_forest_params).
    pub struct_size: u32,
    /// L, the number of trees, 1..=4096 (default 8).
    pub trees: u32,
    /// B: a node holding at least this many classes is split, >= 2
    /// (default 64).
    pub leaf_size: u32,
    /// Build threads (0 = all cores, default); the forest does not depend
    /// on it.
    pub build_threads: u32,
    /// Seed of the split draws (default 1).
    pub seed: u64,
    /// 1: build the trees over the unit rows w / |w| (splits by direction
    /// only, so they stay balanced when a few row norms grow during
    /// training; docs/training.md); 0: over the rows themselves (default).
    /// Other values: INVALID_ARGUMENT.
    pub normalize_rows: u32,
    /// Must be 0 (INVALID_ARGUMENT otherwise); room for a later option.
    pub reserved: u32,
}

/// Default forest parameters: 8 trees, leaf_size 64, all cores, seed 1,
/// raw rows (normalize_rows 0), struct_size = sizeof(lshk_forest_params).
#[no_mangle]
pub extern "C" fn lshk_forest_params_default() -> lshk_forest_params {
    let d = ForestParams::default();
    lshk_forest_params {
        struct_size: std::mem::size_of::<lshk_forest_params>() as u32,
        trees: d.trees,
        leaf_size: d.leaf_size,
        build_threads: d.threads,
        seed: d.seed,
        normalize_rows: d.normalize_rows as u32,
        reserved: 0,
    }
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_forest_params {
    const DEFAULT_FN: &'static str = "lshk_forest_params_default";
    fn defaults() -> Self {
        lshk_forest_params_default()
    }
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

unsafe fn forest_ref<'a>(f: *const lshk_forest) -> Result<&'a Forest> {
    // SAFETY: forwarded caller contract (f is NULL or from lshk).
    unsafe { handle_ref::<Forest>(slot(f), "forest") }
}

/// Builds a forest over `rows` rows (>= 2) of `dim` floats of `w` (row r at
/// `w + r * w_stride`, `w_stride >= dim` elements; finite): L trees, each
/// node holding at least B classes split by the perpendicular bisector of
/// two of its classes drawn from the tree's own SplitMix64 stream (exact
/// rules in docs/training.md). `params` NULL = defaults. The result is the
/// same for every thread count. W is not kept: queries take it again. On
/// success `*out` receives the handle (free it with lshk_forest_free); on
/// failure `*out` is not written.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (rows < 2, dim 0 or > 2^20,
/// w_stride < dim, trees outside 1..=4096, leaf_size < 2, normalize_rows
/// other than 0 / 1, reserved not 0, struct_size too small, misaligned
/// pointers), NON_FINITE (W), SIZE_OVERFLOW,
/// ALLOCATION_FAILED.
///
/// # Safety
/// `w` holds (rows-1)*w_stride + dim readable floats; `params` NULL or a
/// readable lshk_forest_params; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_build(
    w: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    params: *const lshk_forest_params,
    out: *mut *mut lshk_forest,
) -> lshk_status {
    boundary("lshk_forest_build", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_param_struct(params, "params")? };
        let wl = strided_len(rows, dim, w_stride, "w")?;
        // SAFETY: caller contract (wl readable floats).
        let ws = unsafe { slice_in(w, wl, "w")? };
        if cp.normalize_rows > 1 {
            bail!(
                InvalidArgument,
                "params->normalize_rows is {}; it must be 0 or 1",
                cp.normalize_rows
            );
        }
        if cp.reserved != 0 {
            bail!(
                InvalidArgument,
                "params->reserved is {}; it must be 0",
                cp.reserved
            );
        }
        let p = ForestParams {
            trees: cp.trees,
            leaf_size: cp.leaf_size,
            seed: cp.seed,
            threads: cp.build_threads,
            normalize_rows: cp.normalize_rows == 1,
        };
        let f = Forest::build(ws, rows, dim, w_stride, &p)?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(f).cast() };
        Ok(())
    })
}

/// Releases a forest. NULL is a no-op; a freed or foreign handle is
/// INVALID_HANDLE.
///
/// # Safety
/// `forest` is NULL or a handle from lshk_forest_build / _load that no
/// other thread is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_free(forest: *mut lshk_forest) -> lshk_status {
    boundary("lshk_forest_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Forest>(slot_mut(forest), "forest") }
    })
}

/// The forest's shape: rows, dim and number of trees (each output may be
/// NULL when not wanted). Thread-safe.
///
/// Errors: INVALID_HANDLE, NULL_POINTER (forest), INVALID_ARGUMENT
/// (misaligned outputs). Nothing is written on error.
///
/// # Safety
/// Each non-NULL output is writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_shape(
    forest: *const lshk_forest,
    rows: *mut usize,
    dim: *mut usize,
    trees: *mut u32,
) -> lshk_status {
    boundary("lshk_forest_shape", || {
        // SAFETY: forwarded caller contract.
        let f = unsafe { forest_ref(forest)? };
        if !rows.is_aligned() || !dim.is_aligned() || !trees.is_aligned() {
            bail!(InvalidArgument, "an output pointer is misaligned");
        }
        // SAFETY: each non-NULL output is aligned (checked) and writable.
        unsafe {
            if !rows.is_null() {
                *rows = f.rows();
            }
            if !dim.is_null() {
                *dim = f.dim();
            }
            if !trees.is_null() {
                *trees = f.params().trees;
            }
        }
        Ok(())
    })
}

thread_local! {
    static FRESULT: std::cell::RefCell<ForestResult> = std::cell::RefCell::new(ForestResult::default());
}

/// The candidate sets S(x) of `nx` samples (sample i at `x + i *
/// x_stride`, `x_stride >= dim`, finite) with set size `q` >= 1: per tree,
/// the walk to the first node holding fewer than q classes takes the
/// classes under its parent; the trees' classes are pooled and the q with
/// the largest cosine with the sample (rows of `w`: the forest's rows and
/// dim, stride `w_stride`, finite; it may differ from the build's W) are
/// kept, ties to the smaller id (docs/training.md). Output as
/// lshk_tables_gather: sample i's ids ascending in `ids[offsets[i] ..
/// offsets[i+1]]`, `offsets` nx + 1 entries, `*needed` the total (at most
/// nx * min(q, rows)); when `ids_len` < *needed the call returns
/// BUFFER_TOO_SMALL and writes only `*needed`. Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (q 0, strides <
/// dim, misaligned or overlapping pointers), BUFFER_TOO_SMALL, NON_FINITE
/// (w or x), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `w` holds (rows-1)*w_stride + dim readable floats, `x`
/// (nx-1)*x_stride + dim; `ids` ids_len writable u32, `offsets` nx + 1
/// writable size_t, `needed` writable; outputs do not overlap inputs.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_forest_query(
    forest: *const lshk_forest,
    w: *const f32,
    w_stride: usize,
    x: *const f32,
    nx: usize,
    x_stride: usize,
    q: u32,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    needed: *mut usize,
) -> lshk_status {
    boundary("lshk_forest_query", || {
        // SAFETY: forwarded caller contract.
        let f = unsafe { forest_ref(forest)? };
        let wl = strided_len(f.rows(), f.dim(), w_stride, "w")?;
        let xl = strided_len(nx, f.dim(), x_stride, "x")?;
        let n1 = nx
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "nx + 1 overflows"))?;
        // SAFETY: caller contract for the inputs.
        let ws = unsafe { slice_in(w, wl, "w")? };
        let xs = unsafe { slice_in(x, xl, "x")? };
        check_needed(needed)?;
        let so = span(offsets, n1, "offsets")?;
        if offsets.is_null() {
            bail!(NullPointer, "`offsets` is NULL (it needs nx + 1 entries)");
        }
        span(ids, ids_len, "ids")?;
        FRESULT.with(|r| {
            let mut r = r.borrow_mut();
            f.query(ws, w_stride, xs, nx, x_stride, q, &mut r)?;
            let need = r.ids.len();
            let wr = if ids_len < need { 0 } else { need };
            check_disjoint(
                &[span(ids, wr, "ids")?, so, span(needed, 1, "needed")?],
                &[span_of(ws, "w"), span_of(xs, "x")],
            )?;
            // SAFETY: `needed` checked non-NULL and aligned.
            unsafe { *needed = need };
            if ids_len < need {
                bail!(
                    BufferTooSmall,
                    "ids_len is {ids_len}, the {nx} samples have {need} candidates \
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

/// S(X): the union of `count` class ids (e.g. the `ids` of
/// lshk_forest_query over a batch; each < rows, repeats counted), each with
/// its count c_j; when more than `cap` distinct classes (cap 0: no cap),
/// `cap` of them are drawn without replacement with probabilities
/// proportional to c_j, renormalised after each draw (Efraimidis-Spirakis
/// keys ln(u_j)/c_j with u_j from SplitMix64(seed ^ (j + 1) *
/// 0x9E3779B97F4A7C15); docs/training.md). Writes the kept ids ascending
/// into `out_ids`, their counts into `out_counts` (NULL = not wanted) and
/// their number into `*needed`; when `out_len` < *needed the call returns
/// BUFFER_TOO_SMALL and writes only `*needed`. Thread-safe.
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
pub unsafe extern "C" fn lshk_forest_union(
    forest: *const lshk_forest,
    ids: *const u32,
    count: usize,
    cap: usize,
    seed: u64,
    out_ids: *mut u32,
    out_counts: *mut u32,
    out_len: usize,
    needed: *mut usize,
) -> lshk_status {
    boundary("lshk_forest_union", || {
        // SAFETY: forwarded caller contract.
        let f = unsafe { forest_ref(forest)? };
        // SAFETY: caller contract (count readable ids).
        let ins = unsafe { slice_in(ids, count, "ids")? };
        check_needed(needed)?;
        span(out_ids, out_len, "out_ids")?;
        span(
            out_counts,
            if out_counts.is_null() { 0 } else { out_len },
            "out_counts",
        )?;
        let (mut u, mut c) = (Vec::new(), Vec::new());
        forest::union_capped(f.rows(), ins, cap, seed, &mut u, &mut c)?;
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
            slice_out(out_ids, need, "out_ids")?.copy_from_slice(&u);
            if !out_counts.is_null() {
                slice_out(out_counts, need, "out_counts")?.copy_from_slice(&c);
            }
        }
        Ok(())
    })
}

/// Builds the forest again from `w` (the same rows and dim, stride
/// `w_stride`, finite) with its parameters, or with `*new_seed` when
/// `new_seed` is not NULL (e.g. every T training iterations); a unit-row
/// forest (normalize_rows 1) stays one. EXCLUSIVE access. On error the
/// forest is unchanged.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (w_stride < dim,
/// misaligned pointers), NON_FINITE, SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `w` holds (rows-1)*w_stride + dim readable floats; `new_seed` NULL or
/// readable.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_rebuild(
    forest: *mut lshk_forest,
    w: *const f32,
    w_stride: usize,
    new_seed: *const u64,
) -> lshk_status {
    boundary("lshk_forest_rebuild", || {
        // SAFETY: forwarded caller contract.
        let f = unsafe { handle_mut::<Forest>(slot_mut(forest), "forest")? };
        let wl = strided_len(f.rows(), f.dim(), w_stride, "w")?;
        // SAFETY: caller contract.
        let ws = unsafe { slice_in(w, wl, "w")? };
        let seed = if new_seed.is_null() {
            None
        } else {
            // SAFETY: caller contract (one readable u64).
            Some(unsafe { slice_in(new_seed, 1, "new_seed")? }[0])
        };
        f.rebuild(ws, w_stride, seed)
    })
}

/// Writes the forest to `path` (an lshk container: temporary file, fsync,
/// rename, as lshk_index_save). Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (empty or
/// non-UTF-8-safe path), IO_ERROR (including a `path` that is not a
/// regular file: see lshk_index_save).
///
/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_save(
    forest: *const lshk_forest,
    path: *const libc::c_char,
) -> lshk_status {
    boundary("lshk_forest_save", || {
        // SAFETY: forwarded caller contracts.
        let f = unsafe { forest_ref(forest)? };
        let p = unsafe { c_path(path)? };
        f.save(p)
    })
}

/// Loads a forest saved by lshk_forest_save (every invariant checked),
/// with its build parameters (normalize_rows included: a unit-row forest
/// is written with FPARAMS version 2, a raw-row one with version 1, so
/// files from before the option still load). On success `*out` receives a
/// new handle; on failure it is not written.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (empty path, misaligned `out`),
/// IO_ERROR (including a path that is not a regular file),
/// BAD_FILE_FORMAT, ALLOCATION_FAILED.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_forest_load(
    path: *const libc::c_char,
    out: *mut *mut lshk_forest,
) -> lshk_status {
    boundary("lshk_forest_load", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let p = unsafe { c_path(path)? };
        let f = Forest::load(p)?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(f).cast() };
        Ok(())
    })
}
