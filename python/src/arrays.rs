//! numpy arrays in and out: arguments turned into the (pointer, rows,
//! columns, stride) the C API takes, and outputs allocated through numpy's
//! C API before a C call writes them.
//!
//! Arguments: float data must be float32 (TypeError otherwise: a silent cast
//! of a large float64 W would double its memory and change its values);
//! integer arrays of another integer dtype are converted (range-checked, a
//! copy). A 2-D array whose rows are contiguous (inner stride = item size,
//! row stride a positive multiple of it, aligned) is passed in place with
//! its row stride; any other layout is copied first. Shapes are checked
//! before any call (ValueError).
//!
//! Outputs: every allocation here is fallible: a failure is numpy's
//! MemoryError (or ValueError for a shape beyond `isize::MAX` bytes), never
//! a panic, which pyo3 would raise as PanicException (a BaseException).

use std::ffi::{c_int, c_void};
use std::ptr;

use numpy::npyffi::{get_type_object, npy_intp, NpyTypes, PyArrayObject};
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods, PY_ARRAY_API,
};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dt {
    F32,
    F16,
    U16,
    I8,
    U32,
    U64,
}

impl Dt {
    pub(crate) fn kind_size(self) -> (u8, usize) {
        match self {
            Dt::F32 => (b'f', 4),
            Dt::F16 => (b'f', 2),
            Dt::U16 => (b'u', 2),
            Dt::I8 => (b'i', 1),
            Dt::U32 => (b'u', 4),
            Dt::U64 => (b'u', 8),
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dt::F32 => "float32",
            Dt::F16 => "float16",
            Dt::U16 => "uint16",
            Dt::I8 => "int8",
            Dt::U32 => "uint32",
            Dt::U64 => "uint64",
        }
    }
    pub(crate) fn is_int(self) -> bool {
        matches!(self, Dt::U16 | Dt::I8 | Dt::U32 | Dt::U64)
    }
    pub(crate) fn range(self) -> (i128, i128) {
        match self {
            Dt::U16 => (0, u16::MAX as i128),
            Dt::I8 => (i8::MIN as i128, i8::MAX as i128),
            Dt::U32 => (0, u32::MAX as i128),
            Dt::U64 => (0, u64::MAX as i128),
            _ => (0, 0),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nd {
    One,
    Two,
    OneOrTwo,
}

/// An array argument as the C API takes it. `arr` keeps the memory alive
/// (the caller's array, or the copy made of it).
pub(crate) struct Mat<'py> {
    pub(crate) arr: Bound<'py, PyUntypedArray>,
    pub(crate) ptr: usize,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    /// Elements between row starts (>= cols; cols for a single row).
    pub(crate) stride: usize,
    /// The argument was 1-D (one row).
    pub(crate) one_d: bool,
}

impl Mat<'_> {
    pub(crate) fn len(&self) -> usize {
        self.rows * self.cols
    }
}

pub(crate) fn numpy_mod(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

pub(crate) fn data_ptr(arr: &Bound<'_, PyUntypedArray>) -> usize {
    // SAFETY: a live ndarray object; reading its data pointer field.
    unsafe { (*arr.as_array_ptr()).fields.data as usize }
}

/// Converts `obj` to an array argument of element type `dt`: zero-copy when
/// the dtype and layout allow (see the module doc), a copy of a non-row-
/// contiguous or misaligned layout, a range-checked copy of another integer
/// dtype, TypeError for another float dtype, ValueError for a bad ndim.
/// `dense`: rows must also be adjacent (stride == cols), for C arguments
/// that take no stride.
pub(crate) fn mat<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    name: &str,
    dt: Dt,
    nd: Nd,
    dense: bool,
) -> PyResult<Mat<'py>> {
    let (kind, size) = dt.kind_size();
    let mut arr: Bound<'py, PyUntypedArray> = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => numpy_mod(py)?
            .call_method1("asarray", (obj, dt.name()))
            .map_err(|e| {
                PyTypeError::new_err(format!(
                    "{name}: expected a numpy array of {} (or a sequence convertible to one): {e}",
                    dt.name()
                ))
            })?
            .cast_into::<PyUntypedArray>()?,
    };
    let d = arr.dtype();
    let same = d.kind() == kind
        && d.itemsize() == size
        && d.is_native_byteorder() != Some(false)
        && !d.has_fields();
    if !same {
        let dk = d.kind();
        if dt.is_int() && (dk == b'i' || dk == b'u') {
            if arr.len() > 0 {
                let (lo, hi) = dt.range();
                let mn = arr.call_method0("min")?;
                let mx = arr.call_method0("max")?;
                if mn.lt(lo)? || mx.gt(hi)? {
                    return Err(PyValueError::new_err(format!(
                        "{name}: values must lie in {lo}..={hi} to convert to {} (got min {mn}, max {mx})",
                        dt.name()
                    )));
                }
            }
            arr = arr
                .call_method1("astype", (dt.name(),))?
                .cast_into::<PyUntypedArray>()?;
        } else {
            let want = if dt.is_int() {
                "an integer".to_string()
            } else {
                format!("a {}", dt.name())
            };
            return Err(PyTypeError::new_err(format!(
                "{name}: must be {want} array, got dtype {}{}",
                d.str()?,
                if dt == Dt::F32 {
                    format!(" (convert it with {name}.astype(numpy.float32))")
                } else {
                    String::new()
                }
            )));
        }
    }
    let ndim = arr.ndim();
    let ok_nd = match nd {
        Nd::One => ndim == 1,
        Nd::Two => ndim == 2,
        Nd::OneOrTwo => ndim == 1 || ndim == 2,
    };
    if !ok_nd {
        let want = match nd {
            Nd::One => "1-D",
            Nd::Two => "2-D",
            Nd::OneOrTwo => "1-D or 2-D",
        };
        return Err(PyValueError::new_err(format!(
            "{name}: must be a {want} array, got shape {:?}",
            arr.shape()
        )));
    }
    let one_d = ndim == 1;
    let (rows, cols) = if one_d {
        (1, arr.shape()[0])
    } else {
        (arr.shape()[0], arr.shape()[1])
    };
    let layout_ok = |a: &Bound<'py, PyUntypedArray>| -> Option<usize> {
        if !a.is_aligned() {
            return None;
        }
        let st = a.strides();
        let inner = if one_d { st[0] } else { st[1] };
        if cols > 1 && inner != size as isize {
            return None;
        }
        if one_d || rows <= 1 {
            return Some(cols);
        }
        let s0 = st[0];
        if s0 <= 0 || !(s0 as usize).is_multiple_of(size) || (s0 as usize / size) < cols {
            return None;
        }
        let stride = s0 as usize / size;
        if dense && stride != cols {
            return None;
        }
        Some(stride)
    };
    let stride = match layout_ok(&arr) {
        Some(s) => s,
        None => {
            let kw = PyDict::new(py);
            kw.set_item("order", "C")?;
            kw.set_item("copy", true)?;
            arr = numpy_mod(py)?
                .call_method("array", (&arr,), Some(&kw))?
                .cast_into::<PyUntypedArray>()?;
            cols
        }
    };
    Ok(Mat {
        ptr: data_ptr(&arr),
        arr,
        rows,
        cols,
        stride,
        one_d,
    })
}

/// A 1-D argument (ids, offsets, labels, bias, ...).
pub(crate) fn vec1<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    name: &str,
    dt: Dt,
) -> PyResult<Mat<'py>> {
    mat(py, obj, name, dt, Nd::One, true)
}

pub(crate) fn opt_vec1<'py>(
    py: Python<'py>,
    obj: Option<&Bound<'py, PyAny>>,
    name: &str,
    dt: Dt,
) -> PyResult<Option<Mat<'py>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(vec1(py, o, name, dt)?)),
        _ => Ok(None),
    }
}

pub(crate) fn ptr_or_null(m: &Option<Mat<'_>>) -> usize {
    m.as_ref().map_or(0, |m| m.ptr)
}

pub(crate) fn len_of(m: &Option<Mat<'_>>) -> usize {
    m.as_ref().map_or(0, |m| m.len())
}

/// The columns of `m` must be the index's / family's `dim` (the C API takes
/// only a stride and would read `dim` floats per row).
pub(crate) fn need_cols(m: &Mat<'_>, name: &str, dim: usize) -> PyResult<()> {
    if m.cols != dim {
        return Err(PyValueError::new_err(format!(
            "{name}: must have dim = {dim} columns, got {}",
            m.cols
        )));
    }
    Ok(())
}

pub(crate) fn expect_len(m: &Mat<'_>, name: &str, len: usize, what: &str) -> PyResult<()> {
    if m.len() != len {
        return Err(PyValueError::new_err(format!(
            "{name}: must hold {len} values ({what}), got {}",
            m.len()
        )));
    }
    Ok(())
}

/// `shape` (at most 2-D) as numpy dimensions, or ValueError when an array
/// of it would exceed numpy's size limit (`isize::MAX` bytes of `item`-byte
/// elements), so no size computation below can overflow.
pub(crate) fn np_dims(shape: &[usize], item: usize) -> PyResult<([npy_intp; 2], usize)> {
    let mut dims = [0 as npy_intp; 2];
    let bytes = shape
        .iter()
        .try_fold(item, |b, &d| b.checked_mul(d))
        .filter(|&b| b <= isize::MAX as usize);
    if shape.len() > dims.len() || bytes.is_none() {
        return Err(PyValueError::new_err(format!(
            "an output of shape {shape:?} with {item}-byte elements is larger than the largest \
             array possible (isize::MAX bytes)"
        )));
    }
    for (d, &s) in dims.iter_mut().zip(shape) {
        // no overflow: each extent is at most the byte count, <= isize::MAX
        *d = s as npy_intp;
    }
    Ok((dims, shape.len()))
}

/// numpy's PyArray_NewFromDescr for T's dtype with `dims` (and `strides`,
/// `data`: NULL for a new C-ordered allocation), flags 0: the new array, or
/// the Python error numpy set (MemoryError when it cannot allocate).
///
/// # Safety
/// `strides` is NULL or holds `dims.len()` entries; `data` is NULL or
/// addresses every element `dims` and `strides` describe while the array
/// lives.
pub(crate) unsafe fn new_array<'py, T: Element>(
    py: Python<'py>,
    dims: &mut [npy_intp],
    strides: *mut npy_intp,
    data: *mut c_void,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the numpy API is loaded (PY_ARRAY_API) and the GIL is held
    // (`py`); the descriptor reference is stolen (into_dtype_ptr gives a
    // new one); the rest is the caller's contract. Returns a new
    // reference, or NULL with a Python error set.
    let p = unsafe {
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            T::get_dtype(py).into_dtype_ptr(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            strides,
            data,
            0,
            ptr::null_mut(),
        )
    };
    // SAFETY: `p` is an owned reference or NULL (then the error is fetched).
    unsafe { Bound::from_owned_ptr_or_err(py, p) }
}

/// A new uninitialised C-ordered array of `shape` (1-D when `shape.len() ==
/// 1`); the C call must write every element before Python sees it. Never
/// panics: a shape too large for any array raises ValueError (`np_dims`), an
/// allocation numpy cannot make raises numpy's MemoryError.
pub(crate) fn out_array<'py, T: Element>(
    py: Python<'py>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let (mut dims, nd) = np_dims(shape, std::mem::size_of::<T>())?;
    // SAFETY: `dims` holds `nd` valid extents; NULL strides and data make
    // numpy allocate a C-ordered array.
    let a = unsafe { new_array::<T>(py, &mut dims[..nd], ptr::null_mut(), ptr::null_mut())? };
    // SAFETY: numpy made an ndarray of T's dtype; PyArrayDyn accepts any
    // number of dimensions.
    Ok(unsafe { a.cast_into_unchecked::<PyArrayDyn<T>>() })
}

/// A read-only array over memory lent by an lshk handle: `shape` elements
/// of T at byte strides `strides`, with `owner` as its base, so the lender
/// lives as long as the view. Errors as `out_array`.
///
/// # Safety
/// `data` must address every element `shape`/`strides` describe, valid
/// while `owner` lives.
pub(crate) unsafe fn lent_array<'py, T: Element>(
    py: Python<'py>,
    data: *const c_void,
    shape: &[usize],
    strides: &[usize],
    owner: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let (mut dims, nd) = np_dims(shape, std::mem::size_of::<T>())?;
    let mut st = [0 as npy_intp; 2];
    for (s, &v) in st.iter_mut().zip(strides) {
        *s = npy_intp::try_from(v)
            .map_err(|_| PyValueError::new_err("a lent array's stride overflows"))?;
    }
    // SAFETY: dims/strides hold `nd` entries; `data` addresses every
    // element they describe, valid while `owner` (the base set below)
    // lives; flags 0 make the array read-only.
    let a = unsafe { new_array::<T>(py, &mut dims[..nd], st.as_mut_ptr(), data as *mut c_void)? };
    // SAFETY: `a` is an ndarray; PyArray_SetBaseObject steals the new
    // reference to `owner` (also on failure).
    let r = unsafe {
        PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            a.as_ptr() as *mut PyArrayObject,
            owner.clone().into_ptr(),
        )
    };
    if r < 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(a)
}

/// A new 1-D array holding a copy of `v` (errors as `out_array`).
pub(crate) fn array_from<'py, T: Element + Copy>(
    py: Python<'py>,
    v: &[T],
) -> PyResult<Bound<'py, PyAny>> {
    let a = out_array::<T>(py, &[v.len()])?;
    // SAFETY: `a` is a new C-contiguous array of v.len() elements of T that
    // nothing else references yet.
    unsafe { ptr::copy_nonoverlapping(v.as_ptr(), a.data(), v.len()) };
    Ok(a.into_any())
}

/// A zero-filled Vec of `n` elements, MemoryError when it cannot be
/// allocated (`vec!` would abort the process).
pub(crate) fn try_vec<T: Clone + Default>(n: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PyMemoryError::new_err(format!("{what}: cannot allocate {n} elements")))?;
    v.resize(n, T::default());
    Ok(v)
}

pub(crate) fn out_ptr<T: Element>(a: &Bound<'_, PyArrayDyn<T>>) -> usize {
    a.data() as usize
}

/// The output shape of a row-wise call: `(cols,)` for a 1-D argument,
/// else `(rows, cols)`.
pub(crate) fn out_shape(one_d: bool, rows: usize, cols: usize) -> Vec<usize> {
    if one_d {
        vec![cols]
    } else {
        vec![rows, cols]
    }
}

/// Offsets of a CSR argument, or [0, len] (one segment) when None.
pub(crate) fn offsets_or_one<'py>(
    py: Python<'py>,
    offsets: Option<&Bound<'py, PyAny>>,
    len: usize,
) -> PyResult<Mat<'py>> {
    match offsets {
        Some(o) if !o.is_none() => vec1(py, o, "offsets", Dt::U64),
        _ => {
            let a = array_from(py, &[0u64, len as u64])?;
            vec1(py, &a, "offsets", Dt::U64)
        }
    }
}

pub(crate) fn last_offset(off: &Mat<'_>) -> u64 {
    if off.len() == 0 {
        return 0;
    }
    // SAFETY: off holds off.len() contiguous u64.
    unsafe { *(off.ptr as *const u64).add(off.len() - 1) }
}

/// `labels` must hold at least `offsets[-1]` entries (the C API reads that
/// many; a shorter array would be read past its end).
pub(crate) fn check_csr_end(off: &Mat<'_>, lab: &Mat<'_>) -> PyResult<()> {
    let last = last_offset(off);
    if last > lab.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "labels: holds {} values but label_offsets[-1] = {last}",
            lab.len()
        )));
    }
    Ok(())
}
