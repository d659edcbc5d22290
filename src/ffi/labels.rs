//! C entry points of label-aware buckets (`lshk_index_train_labels`).

use super::index::{lshk_index, IndexHandle};
use super::tables::lshk_tables;
use super::*;
use crate::source::labels::{LabelParams, LabelPolicy};
use crate::source::lsh::tables::Tables;

/// Label policy: a trained bucket holds the rows hashed to it AND its top
/// labels.
pub const LSHK_LABEL_POLICY_BESIDE: u32 = 0;
/// Label policy: a trained bucket holds only its top labels.
pub const LSHK_LABEL_POLICY_INSTEAD: u32 = 1;

const _: () = {
    assert!(LSHK_LABEL_POLICY_BESIDE == LabelPolicy::Beside as u32);
    assert!(LSHK_LABEL_POLICY_INSTEAD == LabelPolicy::Instead as u32);
};

/// Parameters of lshk_index_train_labels (see lshk_label_params_default).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_label_params {
    /// sizeof(lshk_label_params).
    pub struct_size: u32,
    /// Labels kept per bucket: the most frequent ones, ties to the smaller
    /// id (0 = keep every label seen). Default 64.
    pub label_cap: u32,
    /// LSHK_LABEL_POLICY_* (default BESIDE).
    pub policy: u32,
}

/// Default label parameters: label_cap 64, policy BESIDE, struct_size =
/// sizeof(lshk_label_params).
#[no_mangle]
pub extern "C" fn lshk_label_params_default() -> lshk_label_params {
    let d = LabelParams::default();
    lshk_label_params {
        struct_size: std::mem::size_of::<lshk_label_params>() as u32,
        label_cap: d.label_cap,
        policy: d.policy as u32,
    }
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_label_params {
    const DEFAULT_FN: &'static str = "lshk_label_params_default";
    fn defaults() -> Self {
        lshk_label_params_default()
    }
}

pub(crate) unsafe fn read_label_params(p: *const lshk_label_params) -> Result<LabelParams> {
    // SAFETY: forwarded caller contract.
    let cp = unsafe { read_param_struct(p, "p")? };
    let policy = LabelPolicy::from_u32(cp.policy).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "policy {} is not an LSHK_LABEL_POLICY_* value (0..=1)",
                cp.policy
            ),
        )
    })?;
    Ok(LabelParams {
        label_cap: cp.label_cap,
        policy,
    })
}

/// Label-aware buckets (lshk's extension; not HALOS's IUL): hashes `n`
/// training queries (row i at `queries + i * q_stride`) with the index's
/// family (after its query transform), counts per table and bucket how
/// often each label occurs with the queries falling there, and rebuilds
/// the tables: every bucket gains (policy BESIDE) or is replaced by
/// (INSTEAD) its `label_cap` most frequent labels (ties to the smaller
/// id). An IVF source labels its lists (docs/ivf.md, "Label-aware
/// lists"). Query i's labels are
/// `labels[label_offsets[i] .. label_offsets[i+1]]`, row ids < rows
/// (`label_offsets`: n + 1 non-decreasing entries; the first need not be 0,
/// so a window of a larger CSR array works). `p` NULL = defaults.
/// Deterministic (for any thread count); saved with the index and reported
/// by lshk_index_label_info. An index is trained at most once. EXCLUSIVE
/// access (see lshk_index); the borrowed tables handle stays valid and sees
/// the new buckets.
///
/// Errors (the index is unchanged): NULL_POINTER (`queries` with n > 0,
/// `label_offsets`, `labels` with label_offsets[n] > 0), INVALID_HANDLE,
/// UNSUPPORTED (neither LSH nor IVF), INVALID_ARGUMENT (q_stride < dim,
/// struct_size too small, a bad policy, label_offsets decreasing, an index
/// already trained, a borrowed handle), INDEX_OUT_OF_RANGE (a label >=
/// rows), NON_FINITE (as lshk_index_query), SIZE_OVERFLOW,
/// ALLOCATION_FAILED. Messages name the offending position.
///
/// # Safety
/// `queries` must hold (n-1)*q_stride + dim readable floats (n > 0),
/// `label_offsets` n + 1 values, `labels` label_offsets[n] values; `p`
/// NULL or a valid params struct.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_train_labels(
    idx: *mut lshk_index,
    queries: *const f32,
    n: usize,
    q_stride: usize,
    label_offsets: *const usize,
    labels: *const u32,
    p: *const lshk_label_params,
) -> lshk_status {
    boundary("lshk_index_train_labels", || {
        // SAFETY: forwarded caller contract (idx NULL or from lshk).
        let h = unsafe { handle_mut::<IndexHandle>(slot_mut(idx), "idx")? };
        if h.idx.ivf().is_none() {
            h.idx.lsh("lshk_index_train_labels")?;
        }
        // SAFETY: forwarded caller contract.
        let lp = unsafe { read_label_params(p)? };
        // SAFETY: forwarded caller contract.
        let (q, off, ys) =
            unsafe { training_pairs(queries, n, q_stride, h.idx.dim(), label_offsets, labels)? };
        h.idx.train_labels(q, n, q_stride, off, ys, &lp)
    })
}

/// The training queries and their CSR labels as slices (the lengths the
/// caller promised), with `label_offsets` checked non-decreasing.
///
/// # Safety
/// As lshk_index_train_labels: `queries` holds (n-1)*q_stride + dim
/// floats, `label_offsets` n + 1 values, `labels` label_offsets[n].
pub(crate) unsafe fn training_pairs<'a>(
    queries: *const f32,
    n: usize,
    q_stride: usize,
    dim: usize,
    label_offsets: *const usize,
    labels: *const u32,
) -> Result<(&'a [f32], &'a [usize], &'a [u32])> {
    let qlen = crate::error::strided_len(n, dim, q_stride, "queries")?;
    let n1 = n
        .checked_add(1)
        .ok_or_else(|| Error::new(Status::SizeOverflow, "n + 1 overflows"))?;
    // SAFETY: the caller promised these lengths.
    let q = unsafe { slice_in(queries, qlen, "queries")? };
    // SAFETY: as above.
    let off = unsafe { slice_in(label_offsets, n1, "label_offsets")? };
    if let Some(i) = off.windows(2).position(|w| w[1] < w[0]) {
        bail!(
            InvalidArgument,
            "label_offsets decreases at {}: {} < {}",
            i + 1,
            off[i + 1],
            off[i]
        );
    }
    // SAFETY: label_offsets[n] labels, as promised.
    let ys = unsafe { slice_in(labels, off[n], "labels")? };
    Ok((q, off, ys))
}

/// Whether the index was trained with labels (also after a load):
/// `*trained` = 1 or 0; when trained and `params` is not NULL, `*params`
/// (the caller sets its struct_size; lshk writes the other fields) receives
/// the training parameters.
///
/// Errors: NULL_POINTER (`trained`), INVALID_HANDLE, INVALID_ARGUMENT
/// (struct_size too small, misaligned).
///
/// # Safety
/// `trained` writable; `params` NULL or a writable params struct holding
/// its struct_size.
#[no_mangle]
pub unsafe extern "C" fn lshk_index_label_info(
    idx: *const lshk_index,
    trained: *mut u32,
    params: *mut lshk_label_params,
) -> lshk_status {
    boundary("lshk_index_label_info", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { handle_ref::<IndexHandle>(slot(idx), "idx")? };
        // SAFETY: forwarded caller contract.
        unsafe { write_label_info(h.idx.label_state(), trained, params) }
    })
}

/// Writes `*trained` and, when trained and `params` is not NULL, the
/// training parameters (lshk_index_label_info, lshk_ivf_label_info); checks
/// every output before writing any.
///
/// # Safety
/// `trained` NULL or writable; `params` NULL or a writable params struct
/// holding its struct_size.
pub(crate) unsafe fn write_label_info(
    st: Option<crate::source::labels::LabelState>,
    trained: *mut u32,
    params: *mut lshk_label_params,
) -> Result<()> {
    {
        if trained.is_null() {
            bail!(NullPointer, "`trained` is NULL");
        }
        if !(trained as usize).is_multiple_of(std::mem::align_of::<u32>()) {
            bail!(InvalidArgument, "`trained` is misaligned");
        }
        if !params.is_null() {
            if !(params as usize).is_multiple_of(std::mem::align_of::<lshk_label_params>()) {
                bail!(InvalidArgument, "`params` is misaligned");
            }
            // SAFETY: non-NULL, aligned; the caller set struct_size.
            let size = unsafe { (*params).struct_size } as usize;
            let want = std::mem::size_of::<lshk_label_params>();
            if size < want {
                bail!(
                    InvalidArgument,
                    "params->struct_size is {size}, this library needs at least {want}"
                );
            }
        }
        // SAFETY: checked non-NULL and aligned above.
        unsafe {
            *trained = st.is_some() as u32;
            if let (Some(s), false) = (st, params.is_null()) {
                (*params).label_cap = s.params.label_cap;
                (*params).policy = s.params.policy as u32;
            }
        }
        Ok(())
    }
}

/// Adds label entries to standalone tables (label-aware buckets without an
/// index): `codes[i*L + l]` are the codes of `n` training queries (hashed
/// like the tables' rows); query i's labels are
/// `labels[label_offsets[i] .. label_offsets[i+1]]` (row ids; CSR as in
/// lshk_index_train_labels). Each bucket keeps its `p->label_cap` most
/// frequent labels (ties to the smaller id; 0 keeps all), beside or instead
/// of its rows (`p->policy`); ids stay ascending and distinct. `p` NULL =
/// defaults. Needs exclusive access. Afterwards the tables are frozen:
/// lshk_tables_update and a second lshk_tables_add_labels are refused
/// (INVALID_ARGUMENT), as are tables lent by an index.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (borrowed or
/// frozen tables, decreasing label_offsets, bad policy, struct_size),
/// INDEX_OUT_OF_RANGE (a label >= rows, with its position), SIZE_OVERFLOW,
/// ALLOCATION_FAILED. The tables are unchanged on error.
///
/// # Safety
/// `t` NULL or from lshk_tables_build; `codes` holds n*L u32,
/// `label_offsets` n+1 values, `labels` label_offsets[n] u32; `p` NULL or
/// a readable lshk_label_params.
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_add_labels(
    t: *mut lshk_tables,
    codes: *const u32,
    n: usize,
    label_offsets: *const usize,
    labels: *const u32,
    p: *const lshk_label_params,
) -> lshk_status {
    boundary("lshk_tables_add_labels", || {
        // SAFETY: forwarded caller contract (exclusive access).
        let tab = unsafe { handle_mut::<Tables>(slot_mut(t), "t")? };
        // SAFETY: forwarded caller contract.
        let lp = unsafe { read_label_params(p)? };
        let need = crate::error::checked_mul(n, tab.tables(), "n*L")?;
        let n1 = n
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "n + 1 overflows"))?;
        // SAFETY: the caller promised these lengths.
        let c = unsafe { slice_in(codes, need, "codes")? };
        // SAFETY: as above.
        let off = unsafe { slice_in(label_offsets, n1, "label_offsets")? };
        if let Some(i) = off.windows(2).position(|w| w[1] < w[0]) {
            bail!(
                InvalidArgument,
                "label_offsets decreases at {}: {} < {}",
                i + 1,
                off[i + 1],
                off[i]
            );
        }
        // SAFETY: label_offsets[n] labels, as promised.
        let ys = unsafe { slice_in(labels, off[n], "labels")? };
        let merged = crate::source::lsh::tables::tables_with_labels(tab, c, n, off, ys, &lp, 0)?;
        *tab = merged;
        Ok(())
    })
}
