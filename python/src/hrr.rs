//! Holographic reduced representations (docs/hrr.md): the `Hrr` handle
//! (lshk_hrr_new / _bind / _unbind / _project / _free) and the seeded class
//! vectors (lshk_hrr_class_vectors).
//!
//! An `lshk_hrr` handle owns FFT scratch buffers, so the C API lets one
//! thread at a time use it. Each `Hrr` object therefore holds its own lock,
//! taken with the GIL released: calls from several Python threads on one
//! object run one after another, calls on different objects in parallel.

use std::ptr;
use std::sync::Mutex;

use lshk::ffi as c;
use lshk::ffi::hrr::lshk_hrr;
use numpy::PyArrayDyn;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrays::{mat, out_array, out_ptr, out_shape, Dt, Mat, Nd};
use crate::enums::{enum_arg, Names};
use crate::errors::{check, Handle, IntoPy};

/// lshk_hrr_unbind's `inverse`.
const INVERSES: Names = &[
    ("approx", c::hrr::LSHK_HRR_INVERSE_APPROX),
    ("exact", c::hrr::LSHK_HRR_INVERSE_EXACT),
];

/// The ISA tiers of lshk_hrr_new_isa.
const ISAS: Names = &[
    ("scalar", c::LSHK_ISA_SCALAR),
    ("portable", c::LSHK_ISA_PORTABLE),
    ("avx2", c::LSHK_ISA_AVX2),
    ("avx512", c::LSHK_ISA_AVX512),
];

/// FFT plans and buffers for vectors of `dim` floats (an `lshk_hrr`
/// handle). Every call takes the object's lock (with the GIL released), as
/// the handle serves one thread at a time.
#[pyclass(module = "lshk")]
pub(crate) struct Hrr {
    h: Handle<lshk_hrr>,
    /// Serialises the calls on `h` (the C handle's scratch buffers).
    lock: Mutex<()>,
    dim: usize,
}

impl Drop for Hrr {
    fn drop(&mut self) {
        if !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once; `&mut self` means no
            // call is using it.
            unsafe { c::hrr::lshk_hrr_free(self.h.0) };
        }
    }
}

/// A row-wise argument of `dim` floats per row, rows adjacent (the C calls
/// take no stride).
fn rows_arg<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    name: &str,
    dim: usize,
) -> PyResult<Mat<'py>> {
    let m = mat(py, obj, name, Dt::F32, Nd::OneOrTwo, true)?;
    if m.cols != dim {
        return Err(PyValueError::new_err(format!(
            "{name}: must have dim = {dim} columns, got {}",
            m.cols
        )));
    }
    Ok(m)
}

/// The number of rows `n` of the batched argument and the rows of the
/// one-or-n argument `k` (a key): 1 or n.
fn key_rows(k: &Mat<'_>, kname: &str, n: usize) -> PyResult<usize> {
    if k.rows == 1 || k.rows == n {
        Ok(k.rows)
    } else {
        Err(PyValueError::new_err(format!(
            "{kname}: must hold 1 row (used for every row) or n = {n} rows, got {}",
            k.rows
        )))
    }
}

impl Hrr {
    /// Runs `f(handle)` with the object's lock held and the GIL released.
    fn call(&self, py: Python<'_>, f: impl FnOnce(usize) -> u32 + Send) -> PyResult<()> {
        let h = self.h.0 as usize;
        let lock = &self.lock;
        py.detach(move || {
            // A poisoned lock (a panic while held) leaves nothing to repair:
            // the guard protects no data, and the handle's buffers are
            // scratch that every call overwrites.
            let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
            check(f(h))
        })
        .py_err(py)
    }
}

#[pymethods]
impl Hrr {
    /// Plans the transforms for vectors of `dim` floats (1 <= dim <= 2^24);
    /// `isa` pins a tier ("scalar", "portable", "avx2", "avx512" or the C
    /// integer; the results do not depend on it), None: the active tier.
    #[new]
    #[pyo3(signature = (dim, *, isa=None))]
    fn new(py: Python<'_>, dim: usize, isa: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut out: *mut lshk_hrr = ptr::null_mut();
        let isa = match isa {
            Some(v) if !v.is_none() => Some(enum_arg(v, "isa", ISAS)?),
            _ => None,
        };
        check(match isa {
            None => c::hrr::lshk_hrr_new(dim, &mut out),
            Some(t) => c::hrr::lshk_hrr_new_isa(dim, t, &mut out),
        })
        .py_err(py)?;
        Ok(Hrr {
            h: Handle(out),
            lock: Mutex::new(()),
            dim,
        })
    }

    /// The vectors' dimension d.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// Circular convolution row by row: out[r] = x[r] ⊛ y[r]
    /// (`real(ifft(fft(x) * fft(y)))`). `y` has shape (n, dim) or (dim,);
    /// `x` one row (used for every row of y) or n. Returns y's shape.
    fn bind<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let ym = rows_arg(py, y, "y", self.dim)?;
        let xm = rows_arg(py, x, "x", self.dim)?;
        let n = ym.rows;
        let xr = key_rows(&xm, "x", n)?;
        let out = out_array::<f32>(py, &out_shape(ym.one_d, n, self.dim))?;
        let (xp, yp, op) = (xm.ptr, ym.ptr, out_ptr(&out));
        self.call(py, move |h| {
            // SAFETY: h is this object's live handle, used by this thread
            // alone (the lock); x holds xr rows of dim adjacent floats, y n
            // (checked, held by xm, ym); out holds n x dim new floats.
            unsafe {
                c::hrr::lshk_hrr_bind(
                    h as *mut lshk_hrr,
                    xp as *const f32,
                    xr,
                    yp as *const f32,
                    n,
                    op as *mut f32,
                )
            }
        })?;
        drop((xm, ym));
        Ok(out)
    }

    /// Unbinding row by row: out[r] = key[r]† ⊛ s[r]. `inverse`: "approx"
    /// (`key†_i = key_{-i mod d}`, spectrum conj(fft(key)): the circular
    /// correlation) or "exact" (`ifft(fft(s) / fft(key))`). `s` has shape
    /// (n, dim) or (dim,); `key` one row or n. Returns s's shape.
    #[pyo3(signature = (key, s, inverse=None))]
    fn unbind<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        s: &Bound<'py, PyAny>,
        inverse: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let inv = match inverse {
            Some(v) if !v.is_none() => enum_arg(v, "inverse", INVERSES)?,
            _ => c::hrr::LSHK_HRR_INVERSE_APPROX,
        };
        let sm = rows_arg(py, s, "s", self.dim)?;
        let km = rows_arg(py, key, "key", self.dim)?;
        let n = sm.rows;
        let kr = key_rows(&km, "key", n)?;
        let out = out_array::<f32>(py, &out_shape(sm.one_d, n, self.dim))?;
        let (kp, sp, op) = (km.ptr, sm.ptr, out_ptr(&out));
        self.call(py, move |h| {
            // SAFETY: h is this object's live handle, used by this thread
            // alone (the lock); key holds kr rows of dim adjacent floats, s
            // n (checked, held by km, sm); out holds n x dim new floats.
            unsafe {
                c::hrr::lshk_hrr_unbind(
                    h as *mut lshk_hrr,
                    inv,
                    kp as *const f32,
                    kr,
                    sp as *const f32,
                    n,
                    op as *mut f32,
                )
            }
        })?;
        drop((km, sm));
        Ok(out)
    }

    /// Projection to unit magnitude in the Fourier domain, row by row:
    /// `real(ifft(fft(x) / (|fft(x)| + 1e-5)))`. Returns x's shape.
    fn project<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let xm = rows_arg(py, x, "x", self.dim)?;
        let n = xm.rows;
        let out = out_array::<f32>(py, &out_shape(xm.one_d, n, self.dim))?;
        let (xp, op) = (xm.ptr, out_ptr(&out));
        self.call(py, move |h| {
            // SAFETY: h is this object's live handle, used by this thread
            // alone (the lock); x holds n rows of dim adjacent floats (held
            // by xm); out holds n x dim new floats.
            unsafe {
                c::hrr::lshk_hrr_project(h as *mut lshk_hrr, xp as *const f32, n, op as *mut f32)
            }
        })?;
        drop(xm);
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!("lshk.Hrr(dim={})", self.dim)
    }
}

/// Rows `first .. first + m` of the projected class vectors of `(seed,
/// dim)`: shape (m, dim) float32, the same bits on every version, tier,
/// platform and thread count (docs/hrr.md).
#[pyfunction]
#[pyo3(signature = (seed, dim, m, *, first=0, threads=0))]
fn hrr_class_vectors<'py>(
    py: Python<'py>,
    seed: u64,
    dim: usize,
    m: usize,
    first: u64,
    threads: u32,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    // checked here so that no output is allocated for a dim lshk refuses
    if dim == 0 || dim > 1 << 24 {
        return Err(PyValueError::new_err(format!(
            "dim: must lie in 1..=2^24, got {dim}"
        )));
    }
    let out = out_array::<f32>(py, &[m, dim])?;
    let op = out_ptr(&out);
    py.detach(move || {
        // SAFETY: out holds m x dim new floats (out_array checked the size).
        check(unsafe {
            c::hrr::lshk_hrr_class_vectors(seed, dim, first, m, threads, op as *mut f32)
        })
    })
    .py_err(py)?;
    Ok(out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Hrr>()?;
    m.add_function(wrap_pyfunction!(hrr_class_vectors, m)?)?;
    Ok(())
}
