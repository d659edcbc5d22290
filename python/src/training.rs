//! Training an index from labelled queries: label-aware buckets or lists
//! (lshk_index_train_labels, LSH and IVF sources) and learned SimHash
//! planes (lshk_index_train_iul). The `Index` methods of the same names
//! call these; each changes the index, so they take its handle from a
//! `&mut self` (exclusive) borrow.

use std::ptr;

use lshk::ffi as c;
use lshk::ffi::index::lshk_index;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{check_csr_end, expect_len, mat, need_cols, vec1, Dt, Mat, Nd};
use crate::enums::{enum_arg, name_of, POLICIES};
use crate::errors::{check, Addr, Handle, IntoPy};

/// Checked training pairs: the queries (`dim` columns) and their CSR labels
/// (query i's labels are `labels[label_offsets[i]..label_offsets[i+1]]`).
struct Pairs<'py> {
    q: Mat<'py>,
    off: Mat<'py>,
    lab: Mat<'py>,
}

fn pairs<'py>(
    py: Python<'py>,
    queries: &Bound<'py, PyAny>,
    label_offsets: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
    dim: usize,
) -> PyResult<Pairs<'py>> {
    let q = mat(py, queries, "queries", Dt::F32, Nd::Two, false)?;
    need_cols(&q, "queries", dim)?;
    let off = vec1(py, label_offsets, "label_offsets", Dt::U64)?;
    expect_len(&off, "label_offsets", q.rows + 1, "queries + 1")?;
    let lab = vec1(py, labels, "labels", Dt::U32)?;
    check_csr_end(&off, &lab)?;
    Ok(Pairs { q, off, lab })
}

/// lshk_index_train_labels on the index `h` (exclusively borrowed by the
/// caller) of `dim` columns.
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_labels<'py>(
    py: Python<'py>,
    h: &Handle<lshk_index>,
    dim: usize,
    queries: &Bound<'py, PyAny>,
    label_offsets: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
    label_cap: Option<u32>,
    policy: Option<&Bound<'py, PyAny>>,
) -> PyResult<()> {
    let mut p = c::labels::lshk_label_params_default();
    if let Some(v) = label_cap {
        p.label_cap = v;
    }
    if let Some(v) = policy {
        p.policy = enum_arg(v, "policy", POLICIES)?;
    }
    let t = pairs(py, queries, label_offsets, labels, dim)?;
    let (hp, qp, n, qs) = (h.0 as usize, t.q.ptr, t.q.rows, t.q.stride);
    let (op, lp, pp) = (t.off.ptr, t.lab.ptr, Addr::of(&p));
    py.detach(move || {
        // SAFETY: the shapes were checked by `pairs` (queries n rows at
        // stride qs, n + 1 offsets, at least offsets[n] labels), held by
        // `t`; `p` lives on this frame; the caller holds the index
        // exclusively.
        check(unsafe {
            c::labels::lshk_index_train_labels(
                hp as *mut lshk_index,
                qp as *const f32,
                n,
                qs,
                op as *const usize,
                lp as *const u32,
                pp.get(),
            )
        })
    })
    .py_err(py)?;
    drop(t);
    Ok(())
}

/// None when the index was not trained with labels, else
/// {"label_cap": int, "policy": str} (lshk_index_label_info).
pub(crate) fn label_info<'py>(
    py: Python<'py>,
    h: &Handle<lshk_index>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let mut trained = 0u32;
    let mut p = c::labels::lshk_label_params_default();
    // SAFETY: a live handle; writable outputs on this frame.
    check(unsafe { c::labels::lshk_index_label_info(h.0, &mut trained, &mut p) }).py_err(py)?;
    if trained == 0 {
        return Ok(None);
    }
    let d = PyDict::new(py);
    d.set_item("label_cap", p.label_cap)?;
    d.set_item("policy", name_of(POLICIES, p.policy))?;
    Ok(Some(d))
}

/// lshk_index_train_iul with the parameters `p` on the index `h`
/// (exclusively borrowed by the caller); one dict per round.
pub(crate) fn train_iul<'py>(
    py: Python<'py>,
    h: &Handle<lshk_index>,
    dim: usize,
    queries: &Bound<'py, PyAny>,
    label_offsets: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
    p: &c::iul::lshk_iul_params,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let t = pairs(py, queries, label_offsets, labels, dim)?;
    // SAFETY: all-zero is a valid bit pattern of this POD struct.
    let zero: c::iul::lshk_iul_report = unsafe { std::mem::zeroed() };
    let rounds = p.rounds as usize;
    let mut reports = Vec::new();
    reports
        .try_reserve_exact(rounds)
        .map_err(|_| PyMemoryError::new_err(format!("rounds: cannot allocate {rounds} reports")))?;
    reports.resize(rounds, zero);
    let (hp, qp, n, qs, op, lp) = (
        h.0 as usize,
        t.q.ptr,
        t.q.rows,
        t.q.stride,
        t.off.ptr,
        t.lab.ptr,
    );
    let pp = Addr::of(p);
    let (rp, rl) = (reports.as_mut_ptr() as usize, reports.len());
    py.detach(move || {
        // SAFETY: shapes checked by `pairs`; `reports` holds rl entries;
        // the caller holds the index exclusively.
        check(unsafe {
            c::iul::lshk_index_train_iul(
                hp as *mut lshk_index,
                qp as *const f32,
                n,
                qs,
                op as *const usize,
                lp as *const u32,
                pp.get(),
                if rl == 0 {
                    ptr::null_mut()
                } else {
                    rp as *mut c::iul::lshk_iul_report
                },
                rl,
            )
        })
    })
    .py_err(py)?;
    drop(t);
    reports
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("round", r.round)?;
            d.set_item("kept", r.kept != 0)?;
            d.set_item("positives", r.positives)?;
            d.set_item("negatives", r.negatives)?;
            d.set_item("loss_before", r.loss_before)?;
            d.set_item("loss_after", r.loss_after)?;
            d.set_item("pos_collision_before", r.pos_collision_before)?;
            d.set_item("pos_collision_after", r.pos_collision_after)?;
            d.set_item("neg_collision_before", r.neg_collision_before)?;
            d.set_item("neg_collision_after", r.neg_collision_after)?;
            d.set_item("mean_candidates_before", r.mean_candidates_before)?;
            d.set_item("mean_candidates_after", r.mean_candidates_after)?;
            d.set_item("label_recall_before", r.label_recall_before)?;
            d.set_item("label_recall_after", r.label_recall_after)?;
            Ok(d)
        })
        .collect()
}
