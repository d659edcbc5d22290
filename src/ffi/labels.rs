//! C entry points of label-aware buckets (`lshk_index_train_labels`).

use super::index::{lshk_index, IndexHandle};
use super::tables::lshk_tables;
use super::*;
use crate::labels::{LabelParams, LabelPolicy};
use crate::tables::Tables;

/// Label policy: a trained bucket holds the rows hashed to it AND its top
/// labels.
pub const LSHK_LABEL_POLICY_BESIDE: u32 = 0;
/// Label policy: a trained bucket holds only its top labels.
pub const LSHK_LABEL_POLICY_INSTEAD: u32 = 1;

const _: () = {
    assert!(LSHK_LABEL_POLICY_BESIDE == LabelPolicy::Beside as u32);
    assert!(LSHK_LABEL_POLICY_INSTEAD == LabelPolicy::Instead as u32);
};

/// Parameters of lshk_index_train_labels. Obtain defaults from
/// lshk_label_params_default(), then change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_label_params {
    /// sizeof(lshk_label_params) as the caller knows it.
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

/// Label-aware buckets (HALOS): hashes `n` training queries (row i at
/// `queries + i * q_stride`, `q_stride >= dim`, in floats) with the index's
/// family (after its query transform), counts per table and bucket how
/// often each label occurs with the queries that fall there, and rebuilds
/// the index's tables: every bucket gains (policy BESIDE) or is replaced by
/// (policy INSTEAD) its `label_cap` most frequent labels (ties to the
/// smaller id). Labels are CSR: query i has the labels
/// `labels[label_offsets[i] .. label_offsets[i+1]]` (`label_offsets` holds
/// n + 1 non-decreasing entries, the first need not be 0: a window of a
/// larger CSR array works, and labels before label_offsets[0] are not read;
/// `labels` holds at least label_offsets[n] row ids < rows; several labels
/// per query are normal). `p` NULL =
/// defaults. The result is deterministic (independent of thread count).
/// The training is saved with the index (lshk_index_save) and reported by
/// lshk_index_label_info after a load.
///
/// EXCLUSIVE ACCESS: unlike every other index function this one changes
/// the index; no other call on `idx` (queries included) or on its borrowed
/// tables handle may run concurrently. The borrowed tables handle stays
/// valid and sees the new buckets. An index is trained at most once.
///
/// Everything is validated before the index changes; on error it is
/// unchanged. Errors: NULL_POINTER (`queries` with n > 0, `label_offsets`,
/// `labels` with label_offsets[n] > 0), INVALID_HANDLE, INVALID_ARGUMENT
/// (q_stride < dim, struct_size too small, a bad policy, label_offsets
/// decreasing (the message names the position), an index already
/// trained, a borrowed handle), INDEX_OUT_OF_RANGE (a label >= rows; the
/// message names its position), NON_FINITE (NaN/infinity in a query, or a query whose scores could
/// overflow f32),
/// SIZE_OVERFLOW, ALLOCATION_FAILED.
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
/// receives the training parameters. The caller sets
/// `params->struct_size = sizeof(lshk_label_params)` before the call (too
/// small -> INVALID_ARGUMENT); lshk writes the other fields only. Outputs
/// are written only on success. Thread-safe (read-only).
///
/// Errors: NULL_POINTER (`trained`), INVALID_HANDLE, INVALID_ARGUMENT.
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
    st: Option<crate::labels::LabelState>,
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

/// Adds label entries to standalone tables (HALOS label-aware buckets
/// without an index): `codes` holds the per-table codes of `n` training
/// queries (`n * L` values, `codes[i*L + l]`, hashed with the same family
/// and transform as the rows the tables were built from); query i's labels
/// are `labels[label_offsets[i] .. label_offsets[i+1]]` (row ids;
/// label_offsets[0] need not be 0, as in lshk_index_train_labels).
/// Each bucket keeps its `p->label_cap` most frequent labels (ties to the
/// smaller id; 0 keeps all), beside or instead of its rows (`p->policy`);
/// ids stay ascending and deduplicated. `p` NULL = defaults.
///
/// Needs exclusive access (no concurrent gather on `t`). Afterwards the
/// tables are frozen: lshk_tables_update and a second
/// lshk_tables_add_labels are refused (INVALID_ARGUMENT). Tables lent by an
/// index are refused too (use lshk_index_train_labels).
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
        let merged = crate::labels::tables_with_labels(tab, c, n, off, ys, &lp, 0)?;
        *tab = merged;
        Ok(())
    })
}
