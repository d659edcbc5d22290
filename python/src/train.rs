//! The training kernels of a sublinear output layer (docs/training.md):
//! the softmax cross-entropy over CSR candidate segments
//! (lshk_softmax_xent_csr), the transposed gathered product that gives the
//! inputs' gradient (lshk_gather_dq), the SGD update of the rows a batch
//! touches (lshk_rows_update_sgd) and the rehash schedule
//! (lshk_rehash_next). `lshk.torch` builds its autograd on these.

use lshk::ffi as c;
use numpy::PyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays::{expect_len, last_offset, mat, out_array, out_ptr, vec1, Dt, Mat, Nd};
use crate::errors::{check, IntoPy};

/// CSR offsets of `nb + 1 >= 1` entries whose last one is `len` (the
/// length of the per-position arrays beside them).
fn csr_offsets<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    len: usize,
    what: &str,
) -> PyResult<Mat<'py>> {
    let off = vec1(py, offsets, "offsets", Dt::U64)?;
    if off.len() == 0 {
        return Err(PyValueError::new_err(
            "offsets: must hold nb + 1 >= 1 values",
        ));
    }
    if last_offset(&off) != len as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset must equal len({what}) = {len}, got {}",
            last_offset(&off)
        )));
    }
    Ok(off)
}

/// Per sample (CSR segment) the softmax cross-entropy of the logits
/// against the target weights: (loss (nb,), grad (n,)).
#[pyfunction]
#[pyo3(signature = (logits, targets, offsets, *, threads=0))]
fn softmax_xent_csr<'py>(
    py: Python<'py>,
    logits: &Bound<'py, PyAny>,
    targets: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    threads: u32,
) -> PyResult<Bound<'py, PyTuple>> {
    let z = vec1(py, logits, "logits", Dt::F32)?;
    let t = vec1(py, targets, "targets", Dt::F32)?;
    expect_len(&t, "targets", z.len(), "one per logit")?;
    let off = csr_offsets(py, offsets, z.len(), "logits")?;
    let nb = off.len() - 1;
    let n = z.len();
    let loss = out_array::<f32>(py, &[nb])?;
    let grad = out_array::<f32>(py, &[n])?;
    let (zp, tp, op, lp, gp) = (z.ptr, t.ptr, off.ptr, out_ptr(&loss), out_ptr(&grad));
    py.detach(move || {
        // SAFETY: logits and targets hold n floats, offsets nb + 1 entries
        // ending at n (checked above, held by z, t, off); loss holds nb
        // and grad n new floats, which overlap no input.
        check(unsafe {
            c::train::lshk_softmax_xent_csr(
                zp as *const f32,
                tp as *const f32,
                op as *const usize,
                nb,
                threads,
                lp as *mut f32,
                gp as *mut f32,
            )
        })
    })
    .py_err(py)?;
    drop((z, t, off));
    PyTuple::new(py, [loss.into_any(), grad.into_any()])
}

/// dq[b] = sum over sample b's segment of grad[j] * w[ids[j]]: (nb, dim).
#[pyfunction]
#[pyo3(signature = (w, grad, ids, offsets, *, threads=0))]
fn gather_dq<'py>(
    py: Python<'py>,
    w: &Bound<'py, PyAny>,
    grad: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    threads: u32,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let wm = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
    let g = vec1(py, grad, "grad", Dt::F32)?;
    let idm = vec1(py, ids, "ids", Dt::U32)?;
    expect_len(&idm, "ids", g.len(), "one per gradient")?;
    let off = csr_offsets(py, offsets, g.len(), "grad")?;
    let nb = off.len() - 1;
    let dim = wm.cols;
    let dq = out_array::<f32>(py, &[nb, dim])?;
    let (wp, rows, ws) = (wm.ptr, wm.rows, wm.stride);
    let (gp, ip, op, dp) = (g.ptr, idm.ptr, off.ptr, out_ptr(&dq));
    py.detach(move || {
        // SAFETY: w holds rows x dim floats at stride ws (mat, held by wm);
        // grad and ids offsets[nb] entries and offsets nb + 1 (checked,
        // held by g, idm, off); dq holds nb x dim new floats at stride dim.
        check(unsafe {
            c::train::lshk_gather_dq(
                c::index::LSHK_STORAGE_F32,
                wp as *const std::ffi::c_void,
                rows,
                dim,
                ws,
                gp as *const f32,
                ip as *const u32,
                op as *const usize,
                nb,
                threads,
                dp as *mut f32,
                dim,
            )
        })
    })
    .py_err(py)?;
    drop((wm, g, idm, off));
    Ok(dq)
}

/// In place: w[ids[j]] -= (lr * grad[j]) * q[b(j)] for every position j in
/// order (b(j) the sample whose segment holds j).
#[pyfunction]
#[pyo3(signature = (w, q, grad, ids, offsets, lr, *, threads=0))]
#[allow(clippy::too_many_arguments)]
fn rows_update_sgd<'py>(
    py: Python<'py>,
    w: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    grad: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    lr: f32,
    threads: u32,
) -> PyResult<()> {
    let wm = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
    if !wm.arr.as_any().is(w) {
        return Err(PyValueError::new_err(
            "w: is updated in place, so it must be a float32 numpy array whose rows are \
             contiguous (this one would have to be copied)",
        ));
    }
    let writeable: bool = w.getattr("flags")?.getattr("writeable")?.extract()?;
    if !writeable {
        return Err(PyValueError::new_err(
            "w: is updated in place but is read-only",
        ));
    }
    let qm = mat(py, q, "q", Dt::F32, Nd::Two, false)?;
    if qm.cols != wm.cols {
        return Err(PyValueError::new_err(format!(
            "q: must have dim = {} columns (w's), got {}",
            wm.cols, qm.cols
        )));
    }
    let g = vec1(py, grad, "grad", Dt::F32)?;
    let idm = vec1(py, ids, "ids", Dt::U32)?;
    expect_len(&idm, "ids", g.len(), "one per gradient")?;
    let off = csr_offsets(py, offsets, g.len(), "grad")?;
    let nb = off.len() - 1;
    if qm.rows != nb {
        return Err(PyValueError::new_err(format!(
            "q: must have one row per segment (nb = {nb}), got {}",
            qm.rows
        )));
    }
    let (wp, rows, dim, ws) = (wm.ptr, wm.rows, wm.cols, wm.stride);
    let (qp, qs, gp, ip, op) = (qm.ptr, qm.stride, g.ptr, idm.ptr, off.ptr);
    py.detach(move || {
        // SAFETY: w is the caller's writable array of rows x dim floats at
        // stride ws (checked in place above, held by wm); q nb rows at
        // stride qs; grad and ids offsets[nb] entries, offsets nb + 1
        // (checked, held by qm, g, idm, off). lshk refuses a w that
        // overlaps an input.
        check(unsafe {
            c::train::lshk_rows_update_sgd(
                wp as *mut f32,
                rows,
                dim,
                ws,
                qp as *const f32,
                qs,
                gp as *const f32,
                ip as *const u32,
                op as *const usize,
                nb,
                lr,
                threads,
            )
        })
    })
    .py_err(py)?;
    drop((wm, qm, g, idm, off));
    Ok(())
}

/// The iteration of the next rehash after one at `t`:
/// t + max(1, floor(initial_period * exp(lambda * t))).
#[pyfunction]
#[pyo3(signature = (t, initial_period=50.0, lambda_=1e-4))]
fn rehash_next(py: Python<'_>, t: u64, initial_period: f64, lambda_: f64) -> PyResult<u64> {
    let mut out = 0u64;
    // SAFETY: `out` is a writable u64 on this frame.
    check(unsafe { c::index::lshk_rehash_next(initial_period, lambda_, t, &mut out) })
        .py_err(py)?;
    Ok(out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(softmax_xent_csr, m)?)?;
    m.add_function(wrap_pyfunction!(gather_dq, m)?)?;
    m.add_function(wrap_pyfunction!(rows_update_sgd, m)?)?;
    m.add_function(wrap_pyfunction!(rehash_next, m)?)?;
    Ok(())
}
