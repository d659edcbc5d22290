//! C entry points of the training kernels:
//! `lshk_softmax_xent_csr[_isa]`, `lshk_gather_dq_{f32,bf16}[_isa]`,
//! `lshk_rows_update_sgd[_isa]` and the lazy Adam state `lshk_adam_*`.
//! The semantics are those of [`crate::train`] (docs/training.md).

use super::*;
use crate::train::{self, Adam, AdamParams, Batch, DqWeights};

/// Lazy Adam state over the rows of one W: per element first and second
/// moments, per row a step count (docs/training.md). Created by
/// lshk_adam_new, released by lshk_adam_free; lshk_adam_step and
/// lshk_adam_set_params need exclusive access.
pub struct lshk_adam {
    _private: [u8; 0],
}

impl HandleKind for Adam {
    const MAGIC: u64 = 0x4d41_4441_4b48_534c; // "LSHKADAM"
    const NAME: &'static str = "lshk_adam";
}

/// Adam's hyper-parameters (see lshk_adam_params_default).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_adam_params {
    /// sizeof(lshk_adam_params).
    pub struct_size: u32,
    /// Learning rate, finite (default 1e-3).
    pub lr: f32,
    /// First-moment decay, 0 <= beta1 < 1 (default 0.9).
    pub beta1: f32,
    /// Second-moment decay, 0 <= beta2 < 1 (default 0.999).
    pub beta2: f32,
    /// Added to sqrt(v_hat), finite and > 0 (default 1e-8).
    pub eps: f32,
}

// SAFETY: #[repr(C)], struct_size first, plain float fields (every bit
// pattern is a valid value; the floats are validated before use).
unsafe impl ParamStruct for lshk_adam_params {
    const DEFAULT_FN: &'static str = "lshk_adam_params_default";
    fn defaults() -> Self {
        lshk_adam_params_default()
    }
}

/// Default Adam parameters: lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8;
/// struct_size = sizeof(lshk_adam_params).
#[no_mangle]
pub extern "C" fn lshk_adam_params_default() -> lshk_adam_params {
    let d = AdamParams::default();
    lshk_adam_params {
        struct_size: std::mem::size_of::<lshk_adam_params>() as u32,
        lr: d.lr,
        beta1: d.beta1,
        beta2: d.beta2,
        eps: d.eps,
    }
}

fn adam_params(p: &lshk_adam_params) -> AdamParams {
    AdamParams {
        lr: p.lr,
        beta1: p.beta1,
        beta2: p.beta2,
        eps: p.eps,
    }
}

fn tier_of(tier: Option<lshk_isa>) -> Result<Isa> {
    match tier {
        Some(t) => isa_from_c(t),
        None => Ok(crate::isa::active()),
    }
}

/// Borrows the CSR offsets (`nb + 1` entries) and returns them with
/// `offsets[nb]`, after checking them.
///
/// # Safety
/// `offsets` holds nb + 1 readable size_t (caller contract).
unsafe fn offsets_in<'a>(offsets: *const usize, nb: usize) -> Result<(&'a [usize], usize)> {
    let n1 = nb
        .checked_add(1)
        .ok_or_else(|| Error::new(Status::SizeOverflow, "nb + 1 overflows"))?;
    // SAFETY: forwarded caller contract.
    let offs = unsafe { slice_in(offsets, n1, "offsets")? };
    let total = offs[nb];
    crate::matmul::check_offsets(offs, nb, total, "ids")?;
    Ok((offs, total))
}

#[allow(clippy::too_many_arguments)]
unsafe fn xent_impl(
    func: &str,
    tier: Option<lshk_isa>,
    logits: *const f32,
    targets: *const f32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    loss: *mut f32,
    grad: *mut f32,
) -> lshk_status {
    boundary(func, || {
        let tier = tier_of(tier)?;
        // SAFETY (all slices): the documented caller contract gives each
        // pointer the element count computed here; slice_in/span check
        // NULL, alignment and overflow first.
        let (offs, n) = unsafe { offsets_in(offsets, nb)? };
        let in_place = std::ptr::eq(logits, grad) && n > 0;
        // SAFETY: as above.
        let z = unsafe { slice_in(logits, n, "logits")? };
        // SAFETY: as above.
        let y = unsafe { slice_in(targets, n, "targets")? };
        check_disjoint(
            &[span(grad, n, "grad")?, span(loss, nb, "loss")?],
            &[
                span_of(if in_place { &[] } else { z }, "logits"),
                span_of(y, "targets"),
                span_of(offs, "offsets"),
            ],
        )?;
        // SAFETY: as above; `loss` overlaps nothing.
        let l = unsafe { slice_out(loss, nb, "loss")? };
        if in_place {
            // SAFETY: as above; `grad` is `logits`, no other view is used.
            let g = unsafe { slice_out(grad, n, "grad")? };
            return train::softmax_xent_in_place(tier, threads as usize, g, y, offs, l);
        }
        // SAFETY: as above; `grad` overlaps no input.
        let g = unsafe { slice_out(grad, n, "grad")? };
        train::softmax_xent(tier, threads as usize, z, y, offs, l, g)
    })
}

/// Softmax cross-entropy over per-sample candidate segments (CSR), for
/// training: for every sample `b < nb` with segment `offsets[b] ..
/// offsets[b+1]` (nb + 1 offsets, 0 first, non-decreasing), logits
/// `z = logits[segment]` and target weights `y = targets[segment]` (any
/// non-negative weights; 1 per true label gives the uniform distribution
/// over them), with `t = y / sum(y)`:
///
/// * `loss[b] = log(sum_j exp(z_j)) - sum_j t_j z_j` (max-subtracted);
/// * `grad[j] = softmax(z)_j - t_j`, the gradient of loss[b] in z_j.
///
/// A segment whose weights sum to 0 has loss 0 and gradient 0; an empty
/// segment has loss 0. `grad == logits` (in place) is allowed; any other
/// overlap is not. The exponential is lshk's own (relative error <= 2^-19,
/// plus 2^-125); error bounds in docs/training.md. Same bits on every tier
/// and thread count (`threads`: 0 = every core, as many as the work pays
/// for: at least 2^18 logits a thread, so a small batch stays on the
/// calling thread; an explicit count is kept; samples are split into
/// contiguous ranges). Stateless and thread-safe.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (bad offsets, misaligned,
/// overlap, a negative target weight), NON_FINITE (a NaN or infinite logit
/// or target, named), SIZE_OVERFLOW.
///
/// # Safety
/// `offsets` holds nb + 1 entries; `logits`, `targets`, `grad` offsets[nb]
/// floats; `loss` nb floats (each NULL only with 0 elements).
#[no_mangle]
pub unsafe extern "C" fn lshk_softmax_xent_csr(
    logits: *const f32,
    targets: *const f32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    loss: *mut f32,
    grad: *mut f32,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        xent_impl(
            "lshk_softmax_xent_csr",
            None,
            logits,
            targets,
            offsets,
            nb,
            threads,
            loss,
            grad,
        )
    }
}

/// lshk_softmax_xent_csr on one chosen tier `isa` (tests, benchmarks).
/// Errors: as lshk_softmax_xent_csr, plus INVALID_ARGUMENT (not an
/// LSHK_ISA_* value) and UNSUPPORTED_ISA (this CPU lacks the tier).
///
/// # Safety
/// As lshk_softmax_xent_csr.
#[no_mangle]
pub unsafe extern "C" fn lshk_softmax_xent_csr_isa(
    isa: lshk_isa,
    logits: *const f32,
    targets: *const f32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    loss: *mut f32,
    grad: *mut f32,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        xent_impl(
            "lshk_softmax_xent_csr_isa",
            Some(isa),
            logits,
            targets,
            offsets,
            nb,
            threads,
            loss,
            grad,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn dq_impl(
    func: &str,
    tier: Option<lshk_isa>,
    bf16: bool,
    w: *const libc::c_void,
    rows: usize,
    dim: usize,
    w_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    dq: *mut f32,
    dq_stride: usize,
) -> lshk_status {
    boundary(func, || {
        let tier = tier_of(tier)?;
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let wl = strided_len(rows, dim, w_stride, "w")?;
        let dql = strided_len(nb, dim, dq_stride, "dq")?;
        // SAFETY (all slices): the documented caller contract; slice_in
        // checks NULL, alignment and overflow first.
        let (wv, wspan) = unsafe {
            if bf16 {
                let s = slice_in(w.cast::<u16>(), wl, "w")?;
                (DqWeights::Bf16(s), span_of(s, "w"))
            } else {
                let s = slice_in(w.cast::<f32>(), wl, "w")?;
                (DqWeights::F32(s), span_of(s, "w"))
            }
        };
        // SAFETY: as above.
        let (offs, n) = unsafe { offsets_in(offsets, nb)? };
        // SAFETY: as above.
        let g = unsafe { slice_in(grad, n, "grad")? };
        // SAFETY: as above.
        let idv = unsafe { slice_in(ids, n, "ids")? };
        check_disjoint(
            &[span(dq, dql, "dq")?],
            &[
                wspan,
                span_of(g, "grad"),
                span_of(idv, "ids"),
                span_of(offs, "offsets"),
            ],
        )?;
        // SAFETY: as above; `dq` overlaps no input.
        let out = unsafe { slice_out(dq, dql, "dq")? };
        train::gather_dq(
            tier,
            threads as usize,
            wv,
            rows,
            dim,
            w_stride,
            g,
            idv,
            offs,
            out,
            dq_stride,
        )
    })
}

/// The element type of gather_dq's rows from a C storage value.
fn dq_dtype(dtype: u32) -> Result<bool> {
    use super::index::{LSHK_STORAGE_BF16, LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32};
    match dtype {
        LSHK_STORAGE_F32 | LSHK_STORAGE_BORROWED_F32 => Ok(false),
        LSHK_STORAGE_BF16 => Ok(true),
        v => bail!(
            InvalidArgument,
            "dtype {v} is not LSHK_STORAGE_F32 (1), _BORROWED_F32 (0) or _BF16 (2)"
        ),
    }
}

/// The transposed gathered product (the backward of the gathered matmul in
/// the queries): for every sample `b < nb` and `k < dim`,
/// `dq[b * dq_stride + k] = sum_j grad[j] * w[ids[j] * w_stride + k]` over
/// its segment `offsets[b] .. offsets[b+1]` (empty: zeros; a repeated id
/// counts each time). Each element is summed in position order from 0,
/// product and sum rounded separately: the same bits on every tier and
/// thread count (`threads`: 0 = every core, as many as the work pays for:
/// at least 2^20 gathered coordinates, ids x dim, a thread; an explicit
/// count is kept), within
/// `gamma(n_b + 1) * sum_j |grad_j w_jk|` of the exact value (bf16 rows
/// are widened exactly; the bound holds for the stored values). Stateless,
/// thread-safe.
///
/// * `dtype`: LSHK_STORAGE_F32 or _BORROWED_F32 (float rows) or _BF16
///   (uint16_t bf16 bit patterns).
/// * `w`: `rows` rows of `dim` elements at stride `w_stride >= dim`.
/// * `offsets`: nb + 1 entries; `grad` and `ids` offsets[nb] entries, each
///   id < rows.
/// * `dq`: nb rows of `dim` floats at stride `dq_stride >= dim`; must not
///   overlap any input.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (a bad dtype, dim 0, stride <
/// dim, bad offsets, misaligned, overlap), INDEX_OUT_OF_RANGE (the first
/// id >= rows, named), SIZE_OVERFLOW.
///
/// # Safety
/// The pointers hold the element counts above (or are NULL with 0).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_gather_dq(
    dtype: u32,
    w: *const libc::c_void,
    rows: usize,
    dim: usize,
    w_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    dq: *mut f32,
    dq_stride: usize,
) -> lshk_status {
    let bf16 = match dq_dtype(dtype) {
        Ok(b) => b,
        Err(e) => return boundary("lshk_gather_dq", || Err(e)),
    };
    // SAFETY: forwarded caller contract.
    unsafe {
        dq_impl(
            "lshk_gather_dq",
            None,
            bf16,
            w,
            rows,
            dim,
            w_stride,
            grad,
            ids,
            offsets,
            nb,
            threads,
            dq,
            dq_stride,
        )
    }
}

/// lshk_gather_dq on one chosen tier (see lshk_softmax_xent_csr_isa).
///
/// # Safety
/// As lshk_gather_dq.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_gather_dq_isa(
    isa: lshk_isa,
    dtype: u32,
    w: *const libc::c_void,
    rows: usize,
    dim: usize,
    w_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
    dq: *mut f32,
    dq_stride: usize,
) -> lshk_status {
    let bf16 = match dq_dtype(dtype) {
        Ok(b) => b,
        Err(e) => return boundary("lshk_gather_dq_isa", || Err(e)),
    };
    // SAFETY: forwarded caller contract.
    unsafe {
        dq_impl(
            "lshk_gather_dq_isa",
            Some(isa),
            bf16,
            w,
            rows,
            dim,
            w_stride,
            grad,
            ids,
            offsets,
            nb,
            threads,
            dq,
            dq_stride,
        )
    }
}

/// The slices of a row update's C arguments: W (mutable) and the batch.
struct UpdateArgs<'a> {
    w: &'a mut [f32],
    batch: Batch<'a>,
}

/// # Safety
/// The pointers hold the element counts of the row-update functions.
#[allow(clippy::too_many_arguments)]
unsafe fn update_args<'a>(
    w: *mut f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    q: *const f32,
    q_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
) -> Result<UpdateArgs<'a>> {
    if dim == 0 {
        bail!(InvalidArgument, "dim must be >= 1");
    }
    let wl = strided_len(rows, dim, w_stride, "w")?;
    let ql = strided_len(nb, dim, q_stride, "q")?;
    // SAFETY (all slices): the documented caller contract; slice_in/span
    // check NULL, alignment and overflow first.
    let (offs, n) = unsafe { offsets_in(offsets, nb)? };
    // SAFETY: as above.
    let qs = unsafe { slice_in(q, ql, "q")? };
    // SAFETY: as above.
    let g = unsafe { slice_in(grad, n, "grad")? };
    // SAFETY: as above.
    let idv = unsafe { slice_in(ids, n, "ids")? };
    check_disjoint(
        &[span(w, wl, "w")?],
        &[
            span_of(qs, "q"),
            span_of(g, "grad"),
            span_of(idv, "ids"),
            span_of(offs, "offsets"),
        ],
    )?;
    // SAFETY: as above; `w` overlaps no input.
    let ws = unsafe { slice_out(w, wl, "w")? };
    Ok(UpdateArgs {
        w: ws,
        batch: Batch {
            q: qs,
            q_stride,
            ids: idv,
            offsets: offs,
            grad: g,
        },
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn sgd_impl(
    func: &str,
    tier: Option<lshk_isa>,
    w: *mut f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    q: *const f32,
    q_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    lr: f32,
    threads: u32,
) -> lshk_status {
    boundary(func, || {
        let tier = tier_of(tier)?;
        // SAFETY: forwarded caller contract.
        let a =
            unsafe { update_args(w, rows, dim, w_stride, q, q_stride, grad, ids, offsets, nb)? };
        train::rows_update_sgd(
            tier,
            threads as usize,
            a.w,
            rows,
            dim,
            w_stride,
            &a.batch,
            lr,
        )
    })
}

/// SGD on the rows of a batch, in place: for every position j in
/// increasing order, row r = ids[j] gets `w[r] -= (lr * grad[j]) * q[b(j)]`,
/// `b(j)` the sample whose segment holds j (`grad` from
/// lshk_softmax_xent_csr; the step rounded, then per element the product
/// and the difference). A repeated row (within or across samples) receives
/// every occurrence's update in position order (exactly:
/// `w[r] - lr * sum_j grad[j] q[b(j)]`); other rows are untouched. When
/// 2 n >= rows (n positions) the batch is grouped by row first, each row
/// read and written once: the same operations and bits. Threads own
/// contiguous row ranges: the same bits on every tier and thread count (0 =
/// every core). Needs exclusive access to `w`.
///
/// * `w`: `rows` rows of `dim` floats at stride `w_stride >= dim`, updated.
/// * `q`: nb rows of `dim` floats at stride `q_stride >= dim`.
/// * `offsets`: nb + 1 entries; `grad`, `ids`: offsets[nb] entries.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (dim 0, stride < dim, bad
/// offsets, misaligned, `w` overlapping an input), INDEX_OUT_OF_RANGE,
/// NON_FINITE (a NaN or infinite `grad`, `q` or `lr`), SIZE_OVERFLOW,
/// ALLOCATION_FAILED (scratch: 8 bytes per position in batch order;
/// grouped by row, 32 per position and 5 per row).
///
/// # Safety
/// The pointers hold the element counts above (or are NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn lshk_rows_update_sgd(
    w: *mut f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    q: *const f32,
    q_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    lr: f32,
    threads: u32,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        sgd_impl(
            "lshk_rows_update_sgd",
            None,
            w,
            rows,
            dim,
            w_stride,
            q,
            q_stride,
            grad,
            ids,
            offsets,
            nb,
            lr,
            threads,
        )
    }
}

/// lshk_rows_update_sgd on one chosen tier (see lshk_softmax_xent_csr_isa).
///
/// # Safety
/// As lshk_rows_update_sgd.
#[no_mangle]
pub unsafe extern "C" fn lshk_rows_update_sgd_isa(
    isa: lshk_isa,
    w: *mut f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    q: *const f32,
    q_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    lr: f32,
    threads: u32,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        sgd_impl(
            "lshk_rows_update_sgd_isa",
            Some(isa),
            w,
            rows,
            dim,
            w_stride,
            q,
            q_stride,
            grad,
            ids,
            offsets,
            nb,
            lr,
            threads,
        )
    }
}

/// Creates lazy Adam state for a W of `rows` rows of `dim` values: moments
/// 0, step counts 0 (`8 * rows * dim + 4 * rows` bytes). `params` NULL
/// means the defaults. Free it with lshk_adam_free.
///
/// Errors: NULL_POINTER (`out`), INVALID_ARGUMENT (dim 0, beta1 or beta2
/// outside [0, 1), eps not finite and > 0, struct_size too small,
/// misaligned), NON_FINITE (lr), SIZE_OVERFLOW (rows * dim),
/// ALLOCATION_FAILED (also up front when the state exceeds the machine's
/// physical memory).
///
/// # Safety
/// `params` is NULL or points to a readable lshk_adam_params of
/// `struct_size` bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_adam_new(
    rows: usize,
    dim: usize,
    params: *const lshk_adam_params,
    out: *mut *mut lshk_adam,
) -> lshk_status {
    boundary("lshk_adam_new", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let p = unsafe { read_param_struct(params, "params")? };
        let a = Adam::new(rows, dim, adam_params(&p))?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(a).cast() };
        Ok(())
    })
}

/// Releases Adam state.
///
/// # Safety
/// `adam` is NULL or a handle from lshk_adam_new that no other thread is
/// using.
#[no_mangle]
pub unsafe extern "C" fn lshk_adam_free(adam: *mut lshk_adam) -> lshk_status {
    boundary("lshk_adam_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Adam>(slot_mut(adam), "adam") }
    })
}

/// Replaces the hyper-parameters for the following steps (a learning-rate
/// schedule, say); the moments and step counts are kept. NULL `params`
/// means the defaults.
///
/// Errors (nothing changed): NULL_POINTER (`adam`), INVALID_HANDLE,
/// INVALID_ARGUMENT and NON_FINITE as lshk_adam_new. Needs exclusive
/// access.
///
/// # Safety
/// As lshk_adam_new; `adam` is not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn lshk_adam_set_params(
    adam: *mut lshk_adam,
    params: *const lshk_adam_params,
) -> lshk_status {
    boundary("lshk_adam_set_params", || {
        // SAFETY: forwarded caller contract.
        let a = unsafe { handle_mut::<Adam>(slot_mut(adam), "adam")? };
        // SAFETY: forwarded caller contract.
        let p = unsafe { read_param_struct(params, "params")? };
        a.set_params(adam_params(&p))
    })
}

/// One lazy Adam step on the rows of a batch, in place: every row `r` that
/// occurs among `ids` gets its summed gradient
/// `G_r = sum_{j: ids[j] = r} grad[j] * q[b(j)]` (summed in position order
/// from +0), its step count `t_r += 1`, and, element by element in f32,
/// `m = b1 m + (1-b1) G`, `v = b2 v + (1-b2) G^2`,
/// `w -= lr (m c1) / (sqrt(v c2) + eps)` with the bias corrections
/// `c1 = 1/(1 - b1^t_r)`, `c2 = 1/(1 - b2^t_r)` of the row's own count
/// (in double, rounded to float). Rows not in the batch are untouched (no
/// decay of their moments). Same bits on every tier and thread count (0 =
/// every core). `rows` and `dim` must be those given to lshk_adam_new; the
/// other arguments as lshk_rows_update_sgd.
///
/// Errors (nothing written, state unchanged): NULL_POINTER, INVALID_HANDLE,
/// INVALID_ARGUMENT (rows or dim differ from the state's, and as
/// lshk_rows_update_sgd), INDEX_OUT_OF_RANGE, NON_FINITE, SIZE_OVERFLOW,
/// ALLOCATION_FAILED. Needs exclusive access to `adam` and `w`.
///
/// # Safety
/// As lshk_rows_update_sgd; `adam` is not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn lshk_adam_step(
    adam: *mut lshk_adam,
    w: *mut f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    q: *const f32,
    q_stride: usize,
    grad: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nb: usize,
    threads: u32,
) -> lshk_status {
    boundary("lshk_adam_step", || {
        // SAFETY: forwarded caller contract.
        let st = unsafe { handle_mut::<Adam>(slot_mut(adam), "adam")? };
        if rows != st.rows() || dim != st.dim() {
            bail!(
                InvalidArgument,
                "W is {rows} x {dim} but the Adam state is {} x {}",
                st.rows(),
                st.dim()
            );
        }
        // SAFETY: forwarded caller contract.
        let a =
            unsafe { update_args(w, rows, dim, w_stride, q, q_stride, grad, ids, offsets, nb)? };
        st.step(
            crate::isa::active(),
            threads as usize,
            a.w,
            w_stride,
            &a.batch,
        )
    })
}
