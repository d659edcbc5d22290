//! lshk_index_build / _build_ex (split out of ffi/index.rs, code unchanged).

use super::*;

struct Progress {
    f: unsafe extern "C" fn(*mut libc::c_void, u64, u64),
    user: *mut libc::c_void,
}
// SAFETY: the callback is only ever called on the thread that called
// lshk_index_build (documented); the pointer is passed through untouched.
unsafe impl Sync for Progress {}

/// Builds an index over `rows` rows of `dim` floats (row r at
/// `w + r * w_stride`, `w_stride >= dim`, in elements) with an optional
/// `bias` (`rows` floats, NULL = none): transforms the rows (params
/// `transform`), hashes them with the family, builds the tables, and
/// copies/converts W per `storage` (BORROWED_F32 keeps `w` itself: it must
/// stay alive and unchanged until lshk_index_free). `p` NULL = defaults.
/// Progress (optional) as described at lshk_progress_fn.
///
/// On success `*out` receives a new handle (free it with lshk_index_free);
/// on failure `*out` is not written.
///
/// Errors: NULL_POINTER (`out`, `w` with rows > 0), INVALID_ARGUMENT (rows
/// 0, dim 0, stride < dim, struct_size too small, a bad family/storage/
/// transform value, a bad K/L/B/range_bits, planes_len or dwta_map_len not
/// matching, |w| > 65504 with F16 storage), INDEX_OUT_OF_RANGE (a
/// caller-given map coordinate >= dim'),
/// NON_FINITE (NaN or infinity in W or the bias, the message naming the
/// row; a |value| above FLT_MAX / (8 (dim + 2)), against which no query
/// could be scored within f32), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `w` must hold (rows-1)*w_stride + dim readable floats, `bias` (if not
/// NULL) `rows` floats; `p` NULL or a valid params struct whose pointers
/// hold `planes_len` / `dwta_map_len` elements.
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
        // SAFETY: forwarded caller contracts.
        unsafe { build_body(w, bias, rows, dim, w_stride, p, std::ptr::null(), out) }
    })
}

/// lshk_index_build with the graph family's build parameters: `gp` (NULL =
/// lshk_graph_params_default()) is used when `p->family` is
/// LSHK_FAMILY_GRAPH and ignored (still checked) otherwise. The graph is
/// the one lshk_graph_build builds from W, the bias and `gp` (its m,
/// ef_construction, storage of its own rows, threads and seed); `p`'s LSH
/// fields are ignored, its `storage` keeps W for the exact logits as for
/// every family, and its `transform` must be NONE (the graph has its own).
/// Progress is reported once, on completion.
///
/// Errors: those of lshk_index_build, and INVALID_ARGUMENT (struct_size of
/// `gp` too small, a bad graph storage value, m outside 2..=256,
/// ef_construction 0, gp->reserved not 0, a graph index with a transform
/// or caller-given planes/map, rows >= 2^32 - 1 for a graph).
///
/// # Safety
/// As lshk_index_build; `gp` NULL or a readable lshk_graph_params.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_index_build_ex(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_index_params,
    gp: *const lshk_graph_params,
    out: *mut *mut lshk_index,
) -> lshk_status {
    boundary("lshk_index_build_ex", || {
        // SAFETY: forwarded caller contracts.
        unsafe { build_body(w, bias, rows, dim, w_stride, p, gp, out) }
    })
}

/// The body of lshk_index_build / lshk_index_build_ex.
///
/// # Safety
/// The contracts of lshk_index_build_ex.
#[allow(clippy::too_many_arguments)]
unsafe fn build_body(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_index_params,
    gp: *const lshk_graph_params,
    out: *mut *mut lshk_index,
) -> Result<()> {
    {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_param_struct(p, "p")? };
        // The IVF and forest families (Rust's Family::Ivf, Family::Forest)
        // have no build parameters in this ABI generation: C builds them
        // with lshk_ivf_build and lshk_forest_build.
        let family = Family::from_u32(cp.family)
            .filter(|&f| !matches!(f, Family::Ivf | Family::Forest))
            .ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    format!("family {} is not an LSHK_FAMILY_* value (0..=2)", cp.family),
                )
            })?;
        let storage = Storage::from_u32(cp.storage).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "storage {} is not an LSHK_STORAGE_* value (0..=4)",
                    cp.storage
                ),
            )
        })?;
        let transform = Transform::from_u32(cp.transform).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "transform {} is not an LSHK_TRANSFORM_* value (0..=2)",
                    cp.transform
                ),
            )
        })?;
        let planes = if cp.planes.is_null() {
            if cp.planes_len != 0 {
                bail!(
                    NullPointer,
                    "`planes` is NULL but planes_len is {}",
                    cp.planes_len
                );
            }
            None
        } else {
            // SAFETY: caller contract: planes holds planes_len floats.
            Some(unsafe { slice_in(cp.planes, cp.planes_len, "planes")? }.to_vec())
        };
        let dwta_map = if cp.dwta_map.is_null() {
            if cp.dwta_map_len != 0 {
                bail!(
                    NullPointer,
                    "`dwta_map` is NULL but dwta_map_len is {}",
                    cp.dwta_map_len
                );
            }
            None
        } else {
            // SAFETY: caller contract: dwta_map holds dwta_map_len u32.
            Some(unsafe { slice_in(cp.dwta_map, cp.dwta_map_len, "dwta_map")? }.to_vec())
        };
        // SAFETY: forwarded caller contract.
        let graph = unsafe { super::graph::read_graph_params(gp, "gp")? };
        let ip = IndexParams {
            graph,
            family,
            bits: cp.bits_per_table,
            tables: cp.tables,
            sparsity: cp.sparsity,
            bin_size: cp.bin_size,
            seed: cp.seed,
            range_bits: cp.range_bits,
            bucket_cap: cp.bucket_cap,
            storage,
            transform,
            threads: cp.build_threads,
            planes,
            dwta_map,
            ivf: Default::default(),
            forest: Default::default(),
        };
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
                // SAFETY: a caller-supplied callback with its own pointer,
                // called as documented.
                unsafe { (pr.f)(pr.user, d, t) }
            }
        };
        let cbr: Option<&(dyn Fn(u64, u64) + Sync)> = if prog.is_some() { Some(&cb) } else { None };
        // SAFETY: with BORROWED_F32 the C caller keeps W alive and unchanged
        // until lshk_index_free (documented contract).
        let idx = unsafe { Index::build_borrowed(ws, bs, rows, dim, w_stride, &ip, cbr)? };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = new_handle(idx) };
        Ok(())
    }
}
