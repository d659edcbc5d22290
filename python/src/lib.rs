//! Python bindings of lshk (the `lshk._lshk` extension module).
//!
//! Every call goes through lshk's C ABI entry points (`lshk::ffi::*`, linked
//! statically into this module): the argument checks, status codes, error
//! messages, panic boundary and results are exactly those of `liblshk.so`.
//! This layer only turns numpy arrays into (pointer, length, stride)
//! arguments, releases the GIL around the call, and turns a failed status
//! into `lshk.LshkError` carrying the status and
//! `lshk_last_error_message()`.
//!
//! Arrays: float data must be float32 (TypeError otherwise: a silent cast of
//! a large float64 W would double its memory and change its values); integer
//! arrays of another integer dtype are converted (range-checked, a copy).
//! A 2-D array whose rows are contiguous (inner stride = item size, row
//! stride a positive multiple of it, aligned) is passed in place with its
//! row stride; any other layout is copied first. Shapes are checked before
//! any call (ValueError).
//!
//! Outputs are numpy arrays allocated before the C call through numpy's C
//! API, and every allocation here is fallible: a failure is numpy's
//! MemoryError (or ValueError for a shape beyond `isize::MAX` bytes), never
//! a panic, which pyo3 would raise as PanicException (a BaseException).

#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

use lshk::ffi as c;
use lshk::ffi::dwta::lshk_dwta;
use lshk::ffi::index::lshk_index;
use lshk::ffi::ivf::lshk_ivf;
use lshk::ffi::simhash::lshk_simhash;
use lshk::ffi::tables::lshk_tables;
use numpy::npyffi::{get_type_object, npy_intp, NpyTypes, PyArrayObject};
use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods, PY_ARRAY_API,
};
use pyo3::exceptions::{PyException, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

pyo3::create_exception!(
    _lshk,
    LshkError,
    PyException,
    "A failed lshk call. `status` is the C API's lshk_status code (int), \
`status_name` its name (e.g. 'LSHK_STATUS_INVALID_ARGUMENT') and `message` \
the C API's lshk_last_error_message(), which starts with the C function's \
name. str(error) is the message."
);

// ---------------------------------------------------------------------------
// errors

/// A failed C call, captured on the thread that made it (the message is
/// thread-local in lshk).
struct Failure {
    status: u32,
    message: String,
}

type CResult<T> = Result<T, Failure>;

fn last_error_message() -> String {
    let mut buf = vec![0u8; 256];
    // SAFETY: buf holds buf.len() writable bytes.
    let n = unsafe { c::lshk_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    if n >= buf.len() {
        buf.resize(n + 1, 0);
        // SAFETY: as above, with the larger buffer.
        unsafe { c::lshk_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    }
    buf.truncate(n);
    String::from_utf8_lossy(&buf).into_owned()
}

/// `Ok` for LSHK_STATUS_OK, else the status with this thread's message.
fn check(status: u32) -> CResult<()> {
    if status == c::LSHK_STATUS_OK {
        Ok(())
    } else {
        Err(Failure {
            status,
            message: last_error_message(),
        })
    }
}

fn status_name(status: u32) -> String {
    // SAFETY: lshk_status_name returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(c::lshk_status_name(status)) }
        .to_string_lossy()
        .into_owned()
}

fn lshk_error(py: Python<'_>, f: Failure) -> PyErr {
    let err = LshkError::new_err(f.message.clone());
    let v = err.value(py);
    let _ = v.setattr("status", f.status);
    let _ = v.setattr("status_name", status_name(f.status));
    let _ = v.setattr("message", f.message);
    err
}

trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}
impl<T> IntoPy<T> for CResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|f| lshk_error(py, f))
    }
}

// ---------------------------------------------------------------------------
// arrays in

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dt {
    F32,
    F16,
    U16,
    I8,
    U32,
    U64,
}

impl Dt {
    fn kind_size(self) -> (u8, usize) {
        match self {
            Dt::F32 => (b'f', 4),
            Dt::F16 => (b'f', 2),
            Dt::U16 => (b'u', 2),
            Dt::I8 => (b'i', 1),
            Dt::U32 => (b'u', 4),
            Dt::U64 => (b'u', 8),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dt::F32 => "float32",
            Dt::F16 => "float16",
            Dt::U16 => "uint16",
            Dt::I8 => "int8",
            Dt::U32 => "uint32",
            Dt::U64 => "uint64",
        }
    }
    fn is_int(self) -> bool {
        matches!(self, Dt::U16 | Dt::I8 | Dt::U32 | Dt::U64)
    }
    fn range(self) -> (i128, i128) {
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
enum Nd {
    One,
    Two,
    OneOrTwo,
}

/// An array argument as the C API takes it. `arr` keeps the memory alive
/// (the caller's array, or the copy made of it).
struct Mat<'py> {
    arr: Bound<'py, PyUntypedArray>,
    ptr: usize,
    rows: usize,
    cols: usize,
    /// Elements between row starts (>= cols; cols for a single row).
    stride: usize,
    /// The argument was 1-D (one row).
    one_d: bool,
}

impl Mat<'_> {
    fn len(&self) -> usize {
        self.rows * self.cols
    }
}

fn numpy_mod(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

fn data_ptr(arr: &Bound<'_, PyUntypedArray>) -> usize {
    // SAFETY: a live ndarray object; reading its data pointer field.
    unsafe { (*arr.as_array_ptr()).fields.data as usize }
}

/// Converts `obj` to an array argument of element type `dt`: zero-copy when
/// the dtype and layout allow (see the module doc), a copy of a non-row-
/// contiguous or misaligned layout, a range-checked copy of another integer
/// dtype, TypeError for another float dtype, ValueError for a bad ndim.
/// `dense`: rows must also be adjacent (stride == cols), for C arguments
/// that take no stride.
fn mat<'py>(
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
fn vec1<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>, name: &str, dt: Dt) -> PyResult<Mat<'py>> {
    mat(py, obj, name, dt, Nd::One, true)
}

fn opt_vec1<'py>(
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

fn ptr_or_null(m: &Option<Mat<'_>>) -> usize {
    m.as_ref().map_or(0, |m| m.ptr)
}

fn len_of(m: &Option<Mat<'_>>) -> usize {
    m.as_ref().map_or(0, |m| m.len())
}

/// The columns of `m` must be the index's / family's `dim` (the C API takes
/// only a stride and would read `dim` floats per row).
fn need_cols(m: &Mat<'_>, name: &str, dim: usize) -> PyResult<()> {
    if m.cols != dim {
        return Err(PyValueError::new_err(format!(
            "{name}: must have dim = {dim} columns, got {}",
            m.cols
        )));
    }
    Ok(())
}

fn expect_len(m: &Mat<'_>, name: &str, len: usize, what: &str) -> PyResult<()> {
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
fn np_dims(shape: &[usize], item: usize) -> PyResult<([npy_intp; 2], usize)> {
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
unsafe fn new_array<'py, T: Element>(
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
fn out_array<'py, T: Element>(
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
unsafe fn lent_array<'py, T: Element>(
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
fn array_from<'py, T: Element + Copy>(py: Python<'py>, v: &[T]) -> PyResult<Bound<'py, PyAny>> {
    let a = out_array::<T>(py, &[v.len()])?;
    // SAFETY: `a` is a new C-contiguous array of v.len() elements of T that
    // nothing else references yet.
    unsafe { ptr::copy_nonoverlapping(v.as_ptr(), a.data(), v.len()) };
    Ok(a.into_any())
}

/// A zero-filled Vec of `n` elements, MemoryError when it cannot be
/// allocated (`vec!` would abort the process).
fn try_vec<T: Clone + Default>(n: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PyMemoryError::new_err(format!("{what}: cannot allocate {n} elements")))?;
    v.resize(n, T::default());
    Ok(v)
}

fn out_ptr<T: Element>(a: &Bound<'_, PyArrayDyn<T>>) -> usize {
    a.data() as usize
}

/// A top-k call of an index: `q` (1-D or 2-D, `dim` columns) parsed, the
/// (ids, scores) arrays shaped like it ((k,) or (nq, k)), and
/// `f(q, nq, q_stride, ids, scores)` run with the GIL released; then the
/// tuple (ids, scores) or, with `stats`, (ids, scores, stats(dict)).
#[allow(clippy::type_complexity)]
fn topk_call<'py>(
    py: Python<'py>,
    q: &Bound<'py, PyAny>,
    dim: usize,
    k: u32,
    f: impl FnOnce(usize, usize, usize, usize, usize) -> c::lshk_status + Send,
    stats: Option<&dyn Fn(&Bound<'py, PyDict>) -> PyResult<()>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let q = mat(py, q, "q", Dt::F32, Nd::OneOrTwo, false)?;
    need_cols(&q, "q", dim)?;
    let nq = q.rows;
    let shape: &[usize] = if q.one_d {
        &[k as usize]
    } else {
        &[nq, k as usize]
    };
    let ids = out_array::<u32>(py, shape)?;
    let scores = out_array::<f32>(py, shape)?;
    let (qp, qs, ip, sp) = (q.ptr, q.stride, out_ptr(&ids), out_ptr(&scores));
    py.detach(move || check(f(qp, nq, qs, ip, sp))).py_err(py)?;
    drop(q);
    match stats {
        Some(fill) => {
            let d = PyDict::new(py);
            fill(&d)?;
            PyTuple::new(py, [ids.into_any(), scores.into_any(), d.into_any()])
        }
        None => PyTuple::new(py, [ids.into_any(), scores.into_any()]),
    }
}

fn enum_arg(v: &Bound<'_, PyAny>, what: &str, names: &[(&str, u32)]) -> PyResult<u32> {
    if let Ok(s) = v.cast::<PyString>() {
        let s = s.to_cow()?.to_ascii_lowercase();
        for (n, code) in names {
            if *n == s {
                return Ok(*code);
            }
        }
        let all: Vec<_> = names.iter().map(|(n, _)| format!("'{n}'")).collect();
        return Err(PyValueError::new_err(format!(
            "{what}: unknown value '{s}' (one of {}, or the C API's integer)",
            all.join(", ")
        )));
    }
    // an int is passed through unchanged: lshk validates it
    v.extract::<u32>()
        .map_err(|_| PyTypeError::new_err(format!("{what}: expected a str or an int")))
}

const FAMILIES: &[(&str, u32)] = &[
    ("simhash", c::index::LSHK_FAMILY_SIMHASH),
    ("dwta", c::index::LSHK_FAMILY_DWTA),
    ("graph", c::index::LSHK_FAMILY_GRAPH),
];
/// The graph family's own row storage (lshk_graph_params.storage).
const GRAPH_STORAGES: &[(&str, u32)] = &[
    ("f32", c::graph::LSHK_GRAPH_STORAGE_F32),
    ("bf16", c::graph::LSHK_GRAPH_STORAGE_BF16),
    ("i8", c::graph::LSHK_GRAPH_STORAGE_I8),
];
const WALKS: &[(&str, u32)] = &[
    ("exact", c::graph::LSHK_GRAPH_WALK_EXACT),
    ("int8", c::graph::LSHK_GRAPH_WALK_INT8),
];
const STORAGES: &[(&str, u32)] = &[
    ("borrowed_f32", c::index::LSHK_STORAGE_BORROWED_F32),
    ("f32", c::index::LSHK_STORAGE_F32),
    ("bf16", c::index::LSHK_STORAGE_BF16),
    ("f16", c::index::LSHK_STORAGE_F16),
    ("i8", c::index::LSHK_STORAGE_I8),
];
const TRANSFORMS: &[(&str, u32)] = &[
    ("none", c::index::LSHK_TRANSFORM_NONE),
    ("bias_aug", c::index::LSHK_TRANSFORM_BIAS_AUG),
    ("mips", c::index::LSHK_TRANSFORM_MIPS),
];
const CODES: &[(&str, u32)] = &[
    ("none", c::ivf::LSHK_IVF_CODES_NONE),
    ("i8", c::ivf::LSHK_IVF_CODES_I8),
    ("pq4", c::ivf::LSHK_IVF_CODES_PQ4),
    ("pq4_i8", c::ivf::LSHK_IVF_CODES_PQ4_I8),
];
const POLICIES: &[(&str, u32)] = &[
    ("beside", c::labels::LSHK_LABEL_POLICY_BESIDE),
    ("instead", c::labels::LSHK_LABEL_POLICY_INSTEAD),
];

fn name_of(names: &[(&str, u32)], code: u32) -> String {
    names
        .iter()
        .find(|(_, c)| *c == code)
        .map_or_else(|| code.to_string(), |(n, _)| n.to_string())
}

fn c_path(path: &Bound<'_, PyAny>) -> PyResult<CString> {
    let os = path.py().import("os")?.call_method1("fsencode", (path,))?;
    let bytes: Vec<u8> = os.extract()?;
    CString::new(bytes).map_err(|_| PyValueError::new_err("path: contains a NUL byte"))
}

/// The weights' shape recorded in an index (`KIND_INDEX`: rows, dim,
/// w_stride) or IVF (`KIND_IVF`: rows, dim) file, as the C loader will read
/// it to know how many floats a borrowed W holds ((rows - 1) * w_stride +
/// dim from a pointer whose length it cannot know). None when the file
/// cannot be read that far. Only read, not validated: see
/// `check_borrowed_shape`.
fn peek_w_shape(path: &CString, kind: u32) -> Option<(usize, usize, Option<usize>)> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
    let c = lshk::format::Container::open(p, kind).ok()?;
    if kind == lshk::format::KIND_INDEX {
        // PARAMS: u64 rows at 48, dim at 56, w_stride at 64 (src/index/file.rs)
        let rec = c.section("PARAMS").ok()?;
        let at = |o: usize| -> Option<usize> {
            let b: [u8; 8] = rec.get(o..o + 8)?.try_into().ok()?;
            usize::try_from(u64::from_le_bytes(b)).ok()
        };
        Some((at(48)?, at(56)?, Some(at(64)?)))
    } else {
        // IVFPARAM: u32 rows at 4, dim at 8 (src/ivf/file.rs)
        let rec = c.section("IVFPARAM").ok()?;
        let at = |o: usize| -> Option<usize> {
            let b: [u8; 4] = rec.get(o..o + 4)?.try_into().ok()?;
            Some(u32::from_le_bytes(b) as usize)
        };
        Some((at(4)?, at(8)?, None))
    }
}

/// Loads `path` with no W (`kind`'s C loader), only to learn whether the
/// file itself is sound: `Ok(true)` when it stores its weights (the index
/// loaded, and is freed again), `Ok(false)` when it needs a borrowed W (the
/// loader's INVALID_ARGUMENT), else the loader's failure (BAD_FILE_FORMAT
/// for a corrupt, foreign or inconsistent file, IO_ERROR, ...).
fn load_without_w(py: Python<'_>, path: &CString, kind: u32) -> CResult<bool> {
    let pp = path.as_ptr() as usize;
    let r = py.detach(move || -> CResult<()> {
        if kind == lshk::format::KIND_INDEX {
            let mut out: *mut lshk_index = ptr::null_mut();
            // SAFETY: a NUL-terminated path alive in `path`; no W.
            check(unsafe {
                c::index::lshk_index_load(pp as *const c_char, ptr::null(), &mut out)
            })?;
            // SAFETY: the handle just loaded, freed once.
            unsafe { c::index::lshk_index_free(out) };
        } else {
            let mut out: *mut lshk_ivf = ptr::null_mut();
            // SAFETY: as above.
            check(unsafe { c::ivf::lshk_ivf_load(pp as *const c_char, ptr::null(), 0, &mut out) })?;
            // SAFETY: the handle just loaded, freed once.
            unsafe { c::ivf::lshk_ivf_free(out) };
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(true),
        Err(f) if f.status == c::LSHK_STATUS_INVALID_ARGUMENT => Ok(false),
        Err(f) => Err(f),
    }
}

/// A borrowed W goes to the C loader only when the file records exactly its
/// shape (and, for an index, its row stride): the loader reads that many
/// floats from it. Otherwise the file is first loaded without W, so that a
/// corrupt or unreadable file raises the loader's own LshkError
/// (BAD_FILE_FORMAT, IO_ERROR, ...) and only a sound file with another
/// shape raises ValueError.
fn check_borrowed_shape(
    py: Python<'_>,
    m: &Mat<'_>,
    name: &str,
    cpath: &CString,
    kind: u32,
) -> PyResult<()> {
    let peek = peek_w_shape(cpath, kind);
    if let Some((rows, dim, stride)) = peek {
        let stride_ok = stride.is_none_or(|s| s == m.stride || m.rows <= 1 && s >= dim);
        if m.rows == rows && m.cols == dim && stride_ok {
            return Ok(());
        }
    }
    let stores_w = load_without_w(py, cpath, kind).py_err(py)?;
    if stores_w {
        return Err(PyValueError::new_err(format!(
            "{name}: the file stores its weights, so {name} must be None"
        )));
    }
    Err(PyValueError::new_err(match peek {
        Some((rows, dim, stride)) => format!(
            "{name}: the file's weights are {rows} x {dim}{}, got {} x {} (row stride {})",
            stride.map_or(String::new(), |s| format!(" at row stride {s}")),
            m.rows,
            m.cols,
            m.stride
        ),
        None => format!("{name}: the file's weight shape cannot be read"),
    }))
}

/// A raw handle that crosses into GIL-free sections. lshk's handles are
/// thread-safe for the calls made through `&self` (const calls).
struct Handle<T>(*mut T);
// SAFETY: lshk handles may be used from any thread; const calls are
// thread-safe, and mutating calls take `&mut self` (exclusive borrow).
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Handle<T> {}

// ---------------------------------------------------------------------------
// progress callback

struct Progress {
    cb: Py<PyAny>,
    err: Option<PyErr>,
}

unsafe extern "C" fn progress_trampoline(user: *mut c_void, done: u64, total: u64) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `user` is the &mut Progress passed by Index.__new__, alive
        // for the whole build call, and used only on the building thread.
        let p = unsafe { &mut *(user as *mut Progress) };
        if p.err.is_some() {
            return;
        }
        Python::attach(|py| {
            if let Err(e) = p.cb.call1(py, (done, total)) {
                p.err = Some(e);
            }
        });
    }));
    let _ = r;
}

// ---------------------------------------------------------------------------
// Index

/// An LSH index over the rows of W (C API lshk_index_*).
#[pyclass(module = "lshk")]
struct Index {
    h: Handle<lshk_index>,
    /// Columns of W (queries must have as many).
    dim: usize,
    /// W for BORROWED_F32 storage (kept alive with the index).
    #[allow(dead_code)] // only held: keeps a borrowed W alive
    w_owner: Option<Py<PyAny>>,
}

impl Drop for Index {
    fn drop(&mut self) {
        if !self.h.0.is_null() {
            // SAFETY: a live handle owned by this object, freed once.
            unsafe { c::index::lshk_index_free(self.h.0) };
        }
    }
}

/// Code bits of the C default index (SimHash, K = 12 bits per table).
const DEFAULT_CODE_BITS: u32 = 12;

/// The DWTA default of K (bins per table) for `bin_size` B: a DWTA code is
/// K * log2(B) bits, at most 32, so the C default K = 12 (SimHash's) fails
/// with every B but 2 and 4. K = 12 / log2(B) (at least 1) gives the same
/// 12-bit codes as SimHash's default: 4 bins for the default B = 8. A B that
/// is not a power of two in 2..=256 keeps `k` and lshk_index_build reports
/// the bin size.
fn dwta_default_bins(bin_size: u32, k: u32) -> u32 {
    if bin_size.is_power_of_two() && (2..=256).contains(&bin_size) {
        (DEFAULT_CODE_BITS / bin_size.trailing_zeros()).max(1)
    } else {
        k
    }
}

fn gather_params(
    min_count: Option<u32>,
    max_candidates: Option<u32>,
    probes: Option<u32>,
    bits_per_table: Option<u32>,
) -> c::tables::lshk_gather_params {
    let mut g = c::tables::lshk_gather_params_default();
    if let Some(v) = min_count {
        g.min_count = v;
    }
    if let Some(v) = max_candidates {
        g.max_candidates = v;
    }
    if let Some(v) = probes {
        g.probes = v;
    }
    if let Some(v) = bits_per_table {
        g.bits_per_table = v;
    }
    g
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (w, bias=None, *, family=None, bits_per_table=None, tables=None,
        sparsity=None, bin_size=None, seed=None, range_bits=None, bucket_cap=None,
        storage=None, transform=None, build_threads=None, planes=None, dwta_map=None,
        progress=None, m=None, ef_construction=None, graph_storage=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        w: &Bound<'py, PyAny>,
        bias: Option<&Bound<'py, PyAny>>,
        family: Option<&Bound<'py, PyAny>>,
        bits_per_table: Option<u32>,
        tables: Option<u32>,
        sparsity: Option<u32>,
        bin_size: Option<u32>,
        seed: Option<u64>,
        range_bits: Option<u32>,
        bucket_cap: Option<u32>,
        storage: Option<&Bound<'py, PyAny>>,
        transform: Option<&Bound<'py, PyAny>>,
        build_threads: Option<u32>,
        planes: Option<&Bound<'py, PyAny>>,
        dwta_map: Option<&Bound<'py, PyAny>>,
        progress: Option<Py<PyAny>>,
        m: Option<u32>,
        ef_construction: Option<u32>,
        graph_storage: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let mut p = c::index::lshk_index_params_default();
        if let Some(f) = family {
            p.family = enum_arg(f, "family", FAMILIES)?;
        }
        // The graph family's build parameters (lshk_index_build_ex's
        // lshk_graph_params); `build_threads` and `seed` go to the graph too.
        let mut gp = c::graph::lshk_graph_params_default();
        let is_graph = p.family == c::index::LSHK_FAMILY_GRAPH;
        if !is_graph && (m.is_some() || ef_construction.is_some() || graph_storage.is_some()) {
            return Err(PyValueError::new_err(
                "m, ef_construction and graph_storage apply to family='graph' only",
            ));
        }
        if let Some(v) = m {
            gp.m = v;
        }
        if let Some(v) = ef_construction {
            gp.ef_construction = v;
        }
        if let Some(s) = graph_storage {
            gp.storage = enum_arg(s, "graph_storage", GRAPH_STORAGES)?;
        }
        if is_graph {
            if let Some(v) = build_threads {
                gp.threads = v;
            }
            if let Some(v) = seed {
                gp.seed = v;
            }
        }
        if let Some(s) = storage {
            p.storage = enum_arg(s, "storage", STORAGES)?;
        }
        if let Some(t) = transform {
            p.transform = enum_arg(t, "transform", TRANSFORMS)?;
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = $f { p.$f = v; } )* };
        }
        set!(
            bits_per_table,
            tables,
            sparsity,
            bin_size,
            seed,
            range_bits,
            bucket_cap,
            build_threads
        );
        if bits_per_table.is_none() && p.family == c::index::LSHK_FAMILY_DWTA {
            p.bits_per_table = dwta_default_bins(p.bin_size, p.bits_per_table);
        }
        let w = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
        let bias = opt_vec1(py, bias, "bias", Dt::F32)?;
        if let Some(b) = &bias {
            expect_len(b, "bias", w.rows, "one per row of w")?;
        }
        let planes = match planes {
            Some(o) if !o.is_none() => Some(mat(py, o, "planes", Dt::F32, Nd::OneOrTwo, true)?),
            _ => None,
        };
        let dwta_map = match dwta_map {
            Some(o) if !o.is_none() => Some(mat(py, o, "dwta_map", Dt::U32, Nd::OneOrTwo, true)?),
            _ => None,
        };
        p.planes = ptr_or_null(&planes) as *const f32;
        p.planes_len = len_of(&planes);
        p.dwta_map = ptr_or_null(&dwta_map) as *const u32;
        p.dwta_map_len = len_of(&dwta_map);
        let mut prog = progress
            .filter(|cb| !cb.is_none(py))
            .map(|cb| Progress { cb, err: None });
        if let Some(pr) = prog.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user = (pr as *mut Progress).cast();
        }
        let (wp, bp, rows, dim, stride) = (w.ptr, ptr_or_null(&bias), w.rows, w.cols, w.stride);
        let params = ParamsPtr(&p as *const _ as usize);
        let gparams = ParamsPtr(&gp as *const _ as usize);
        let r = py.detach(move || -> CResult<usize> {
            let mut out: *mut lshk_index = ptr::null_mut();
            // The LSH families go through lshk_index_build itself (its
            // messages name it), the graph through lshk_index_build_ex.
            // SAFETY: w/bias/planes/map point to live arrays of the checked
            // shapes (held by `w`, `bias`, `planes`, `dwta_map` until after
            // this call); `params` and `gparams` point to `p` and `gp`,
            // alive on this frame.
            let s = unsafe {
                if is_graph {
                    c::index::lshk_index_build_ex(
                        wp as *const f32,
                        bp as *const f32,
                        rows,
                        dim,
                        stride,
                        params.0 as *const c::index::lshk_index_params,
                        gparams.0 as *const c::graph::lshk_graph_params,
                        &mut out,
                    )
                } else {
                    c::index::lshk_index_build(
                        wp as *const f32,
                        bp as *const f32,
                        rows,
                        dim,
                        stride,
                        params.0 as *const c::index::lshk_index_params,
                        &mut out,
                    )
                }
            };
            check(s)?;
            Ok(out as usize)
        });
        let h = r.py_err(py)?;
        let idx = Index {
            h: Handle(h as *mut lshk_index),
            dim,
            w_owner: (p.storage == c::index::LSHK_STORAGE_BORROWED_F32)
                .then(|| w.arr.clone().into_any().unbind()),
        };
        if let Some(Progress { err: Some(e), .. }) = prog {
            drop(idx);
            return Err(e);
        }
        drop((planes, dwta_map));
        Ok(idx)
    }

    /// Loads an index saved by `save` (or by lshk_index_save from C/C++).
    #[staticmethod]
    #[pyo3(signature = (path, borrowed_w=None))]
    fn load<'py>(
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        borrowed_w: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let cpath = c_path(path)?;
        let w = match borrowed_w {
            Some(o) if !o.is_none() => Some(mat(py, o, "borrowed_w", Dt::F32, Nd::Two, false)?),
            _ => None,
        };
        if let Some(m) = &w {
            check_borrowed_shape(py, m, "borrowed_w", &cpath, lshk::format::KIND_INDEX)?;
        }
        let wp = ptr_or_null(&w);
        let pp = cpath.as_ptr() as usize;
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_index = ptr::null_mut();
                // SAFETY: a NUL-terminated path alive in `cpath`; the
                // borrowed W (if any) is held by `w`.
                check(unsafe {
                    c::index::lshk_index_load(pp as *const c_char, wp as *const f32, &mut out)
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        let mut idx = Index {
            h: Handle(h as *mut lshk_index),
            dim: 0,
            w_owner: None,
        };
        let (rows, dim, _, _) = idx.shape(py)?;
        idx.dim = dim;
        if let Some(m) = &w {
            if m.rows != rows || m.cols != dim {
                return Err(PyValueError::new_err(format!(
                    "borrowed_w: the file's index has {rows} x {dim} weights, got {} x {}",
                    m.rows, m.cols
                )));
            }
        }
        idx.w_owner = w.map(|m| m.arr.into_any().unbind());
        Ok(idx)
    }

    /// Saves the index (the C API's file format, crash-safe rename).
    fn save(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let cpath = c_path(path)?;
        let (h, pp) = (self.h.0 as usize, cpath.as_ptr() as usize);
        py.detach(move || {
            // SAFETY: live handle; NUL-terminated path held by `cpath`.
            check(unsafe { c::index::lshk_index_save(h as *const lshk_index, pp as *const c_char) })
        })
        .py_err(py)
    }

    /// Top-k rows per query. See lshk/__init__.pyi.
    #[pyo3(signature = (q, k=10, *, min_count=None, max_candidates=None, probes=None,
        bits_per_table=None, stats=false, ef=None, walk=None, rerank=None))]
    #[allow(clippy::too_many_arguments)]
    fn query<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        min_count: Option<u32>,
        max_candidates: Option<u32>,
        probes: Option<u32>,
        bits_per_table: Option<u32>,
        stats: bool,
        ef: Option<u32>,
        walk: Option<&Bound<'py, PyAny>>,
        rerank: Option<u32>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let g = gather_params(min_count, max_candidates, probes, bits_per_table);
        // The graph family's query options (lshk_index_query_ex's
        // lshk_graph_query_params); the LSH families ignore them, so giving
        // one to such an index is a mistake worth saying.
        let mut gq = c::graph::lshk_graph_query_params_default();
        let ex = ef.is_some() || walk.is_some() || rerank.is_some();
        if ex {
            if family_of(self.h.0)? != c::index::LSHK_FAMILY_GRAPH {
                return Err(PyValueError::new_err(
                    "ef, walk and rerank apply to a family='graph' index only",
                ));
            }
            if let Some(v) = ef {
                gq.ef = v;
            }
            if let Some(w) = walk {
                gq.walk = enum_arg(w, "walk", WALKS)?;
            }
            if let Some(v) = rerank {
                gq.rerank = v;
            }
        }
        let mut st = c::index::lshk_query_stats {
            struct_size: std::mem::size_of::<c::index::lshk_query_stats>() as u32,
            queries: 0,
            candidates_total: 0,
            candidates_min: 0,
            candidates_max: 0,
        };
        let (h, gp) = (self.h.0 as usize, &g as *const _ as usize);
        let gqp = &gq as *const _ as usize;
        let stp = if stats { &mut st as *mut _ as usize } else { 0 };
        let call = move |qp: usize, nq: usize, qs: usize, ip: usize, sp: usize| {
            // Graph options go through lshk_index_query_ex, anything else
            // through lshk_index_query itself (its messages name it; a graph
            // index queried without options uses the default options).
            // SAFETY: q holds nq rows at stride qs (checked by `mat`); the
            // outputs hold nq*k elements each; g/gq/st live on this frame.
            unsafe {
                if ex {
                    c::index::lshk_index_query_ex(
                        h as *const lshk_index,
                        qp as *const f32,
                        nq,
                        qs,
                        k,
                        gp as *const c::tables::lshk_gather_params,
                        gqp as *const c::graph::lshk_graph_query_params,
                        ip as *mut u32,
                        sp as *mut f32,
                        stp as *mut c::index::lshk_query_stats,
                    )
                } else {
                    c::index::lshk_index_query(
                        h as *const lshk_index,
                        qp as *const f32,
                        nq,
                        qs,
                        k,
                        gp as *const c::tables::lshk_gather_params,
                        ip as *mut u32,
                        sp as *mut f32,
                        stp as *mut c::index::lshk_query_stats,
                    )
                }
            }
        };
        let fill = |d: &Bound<'py, PyDict>| -> PyResult<()> {
            // SAFETY: the call above has returned; st is this frame's.
            let st = unsafe { &*(stp as *const c::index::lshk_query_stats) };
            d.set_item("queries", st.queries)?;
            d.set_item("candidates_total", st.candidates_total)?;
            d.set_item("candidates_min", st.candidates_min)?;
            d.set_item("candidates_max", st.candidates_max)
        };
        topk_call(py, q, self.dim, k, call, stats.then_some(&fill as _))
    }

    /// Bytes held by the index (lshk_index_memory_bytes).
    fn memory_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        let mut n = 0usize;
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_memory_bytes(self.h.0, &mut n) }).py_err(py)?;
        Ok(n)
    }

    /// (rows, dim, K, L).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, usize, u32, u32)> {
        let (mut r, mut d, mut k, mut l) = (0usize, 0usize, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::index::lshk_index_shape(self.h.0, &mut r, &mut d, &mut k, &mut l) })
            .py_err(py)?;
        Ok((r, d, k, l))
    }

    /// The weights the index scores with, as read-only numpy views.
    fn weights<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let me = slf.borrow();
        // SAFETY: all-zero is a valid bit pattern of this POD struct.
        let mut v: c::index::lshk_weights_view = unsafe { std::mem::zeroed() };
        v.struct_size = std::mem::size_of::<c::index::lshk_weights_view>() as u32;
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_weights(me.h.0, &mut v) }).py_err(py)?;
        let d = PyDict::new(py);
        let owner = slf.clone().into_any();
        let (rows, dim, stride) = (v.rows, v.dim, v.w_stride);
        fn view2<'py, T: Element>(
            p: *const c_void,
            rows: usize,
            dim: usize,
            stride: usize,
            owner: &Bound<'py, PyAny>,
        ) -> PyResult<Bound<'py, PyAny>> {
            let item = std::mem::size_of::<T>();
            let row_bytes = stride
                .checked_mul(item)
                .ok_or_else(|| PyValueError::new_err("the weights' row stride overflows"))?;
            // SAFETY: the index lends `rows` rows of `dim` elements at
            // `stride`, valid until lshk_index_free; the view's base is the
            // Index object, which keeps the handle alive.
            unsafe { lent_array::<T>(owner.py(), p, &[rows, dim], &[row_bytes, item], owner) }
        }
        let w = match v.storage {
            c::index::LSHK_STORAGE_BF16 => view2::<u16>(v.w, rows, dim, stride, &owner)?,
            c::index::LSHK_STORAGE_F16 => {
                view2::<u16>(v.w, rows, dim, stride, &owner)?.call_method1("view", ("float16",))?
            }
            c::index::LSHK_STORAGE_I8 => view2::<i8>(v.w, rows, dim, stride, &owner)?,
            _ => view2::<f32>(v.w, rows, dim, stride, &owner)?,
        };
        let vec = |p: *const f32| -> PyResult<Option<Bound<'py, PyAny>>> {
            if p.is_null() {
                return Ok(None);
            }
            // SAFETY: `rows` floats lent by the index (see view2).
            let a = unsafe { lent_array::<f32>(py, p.cast(), &[rows], &[4], &owner)? };
            Ok(Some(a))
        };
        d.set_item("storage", name_of(STORAGES, v.storage))?;
        d.set_item("w", w)?;
        d.set_item("scales", vec(v.scales)?)?;
        d.set_item("bias", vec(v.bias)?)?;
        d.set_item("rows", rows)?;
        d.set_item("dim", dim)?;
        d.set_item("w_stride", stride)?;
        Ok(d)
    }

    /// HALOS label-aware buckets (lshk_index_train_labels).
    #[pyo3(signature = (queries, label_offsets, labels, *, label_cap=None, policy=None))]
    fn train_labels<'py>(
        &mut self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        label_cap: Option<u32>,
        policy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let h = self.h.0 as usize;
        let t = LabelTraining::new(
            py,
            queries,
            label_offsets,
            labels,
            label_cap,
            policy,
            self.dim,
        )?;
        // SAFETY: the shapes were checked by LabelTraining::new; exclusive
        // access through &mut self.
        t.run(py, move |q, n, qs, o, l, p| unsafe {
            c::labels::lshk_index_train_labels(h as *mut lshk_index, q, n, qs, o, l, p)
        })
    }

    /// None when the index was not trained with labels, else
    /// {"label_cap": int, "policy": str}.
    fn label_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // SAFETY: live handle, writable outputs.
        label_info_of(py, |t, p| unsafe {
            c::labels::lshk_index_label_info(self.h.0, t, p)
        })
    }

    /// IUL plane learning (lshk_index_train_iul); returns one dict per round.
    #[pyo3(signature = (queries, label_offsets, labels, *, rounds=None, epochs=None, batch=None,
        t1=None, t2=None, learning_rate=None, validation_fraction=None, max_pairs=None,
        rank_thresholds=false, keep_best=false, seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn train_iul<'py>(
        &mut self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        rounds: Option<u32>,
        epochs: Option<u32>,
        batch: Option<u32>,
        t1: Option<f32>,
        t2: Option<f32>,
        learning_rate: Option<f32>,
        validation_fraction: Option<f32>,
        max_pairs: Option<u32>,
        rank_thresholds: bool,
        keep_best: bool,
        seed: Option<u64>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut p = c::iul::lshk_iul_params_default();
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = $f { p.$f = v; } )* };
        }
        set!(
            rounds,
            epochs,
            batch,
            t1,
            t2,
            learning_rate,
            validation_fraction,
            max_pairs,
            seed
        );
        if rank_thresholds {
            p.flags |= c::iul::LSHK_IUL_RANK_THRESHOLDS;
        }
        if keep_best {
            p.flags |= c::iul::LSHK_IUL_KEEP_BEST;
        }
        let q = mat(py, queries, "queries", Dt::F32, Nd::Two, false)?;
        need_cols(&q, "queries", self.dim)?;
        let off = vec1(py, label_offsets, "label_offsets", Dt::U64)?;
        expect_len(&off, "label_offsets", q.rows + 1, "queries + 1")?;
        let lab = vec1(py, labels, "labels", Dt::U32)?;
        check_csr_end(py, &off, &lab)?;
        // SAFETY: all-zero is a valid bit pattern of this POD struct.
        let zero: c::iul::lshk_iul_report = unsafe { std::mem::zeroed() };
        let rounds = p.rounds as usize;
        let mut reports = Vec::new();
        reports.try_reserve_exact(rounds).map_err(|_| {
            PyMemoryError::new_err(format!("rounds: cannot allocate {rounds} reports"))
        })?;
        reports.resize(rounds, zero);
        let (h, qp, n, qs, op, lp) = (self.h.0 as usize, q.ptr, q.rows, q.stride, off.ptr, lab.ptr);
        let pp = &p as *const _ as usize;
        let (rp, rl) = (reports.as_mut_ptr() as usize, reports.len());
        py.detach(move || {
            // SAFETY: shapes checked above; `reports` holds rl entries;
            // exclusive access through &mut self.
            check(unsafe {
                c::iul::lshk_index_train_iul(
                    h as *mut lshk_index,
                    qp as *const f32,
                    n,
                    qs,
                    op as *const usize,
                    lp as *const u32,
                    pp as *const c::iul::lshk_iul_params,
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

    /// The index's SimHash family (a borrowed view; None for DWTA and graph).
    fn simhash(slf: &Bound<'_, Self>) -> PyResult<Option<SimHash>> {
        let me = slf.borrow();
        let mut out: *const lshk_simhash = ptr::null();
        if family_of(me.h.0)? != c::index::LSHK_FAMILY_SIMHASH {
            return Ok(None);
        }
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_simhash(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Some(SimHash {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        }))
    }

    /// The index's DWTA family (a borrowed view; None for SimHash and graph).
    fn dwta(slf: &Bound<'_, Self>) -> PyResult<Option<Dwta>> {
        let me = slf.borrow();
        let mut out: *const lshk_dwta = ptr::null();
        if family_of(me.h.0)? != c::index::LSHK_FAMILY_DWTA {
            return Ok(None);
        }
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_dwta(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Some(Dwta {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        }))
    }

    /// The index's tables (a borrowed view).
    fn tables(slf: &Bound<'_, Self>) -> PyResult<Tables> {
        let me = slf.borrow();
        let mut out: *const lshk_tables = ptr::null();
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_tables(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Tables {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        })
    }

    /// "simhash", "dwta" or "graph".
    #[getter]
    fn family(&self) -> PyResult<String> {
        Ok(name_of(FAMILIES, family_of(self.h.0)?))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (r, d, k, l) = self.shape(py)?;
        if family_of(self.h.0)? == c::index::LSHK_FAMILY_GRAPH {
            return Ok(format!("lshk.Index(rows={r}, dim={d}, family='graph')"));
        }
        Ok(format!("lshk.Index(rows={r}, dim={d}, K={k}, L={l})"))
    }
}

/// The family of an index: lshk_index_simhash fails for a DWTA or graph
/// index, lshk_index_dwta for a SimHash or graph index, so ask which one it
/// lends without raising.
fn family_of(h: *mut lshk_index) -> PyResult<u32> {
    let mut s: *const lshk_simhash = ptr::null();
    // SAFETY: live handle, writable output.
    if unsafe { c::index::lshk_index_simhash(h, &mut s) } == c::LSHK_STATUS_OK {
        return Ok(c::index::LSHK_FAMILY_SIMHASH);
    }
    let mut d: *const lshk_dwta = ptr::null();
    // SAFETY: live handle, writable output.
    Ok(
        if unsafe { c::index::lshk_index_dwta(h, &mut d) } == c::LSHK_STATUS_OK {
            c::index::LSHK_FAMILY_DWTA
        } else {
            c::index::LSHK_FAMILY_GRAPH
        },
    )
}

/// `labels` must hold at least `offsets[-1]` entries (the C API reads that
/// many; a shorter array would be read past its end).
fn check_csr_end(py: Python<'_>, off: &Mat<'_>, lab: &Mat<'_>) -> PyResult<()> {
    let _ = py;
    if off.len() == 0 {
        return Ok(());
    }
    // SAFETY: `off` holds off.len() u64 at off.ptr (contiguous, checked).
    let last = unsafe { *(off.ptr as *const u64).add(off.len() - 1) };
    if last > lab.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "labels: holds {} values but label_offsets[-1] = {last}",
            lab.len()
        )));
    }
    Ok(())
}

/// Raw pointer to a params struct on the calling frame, for the GIL-free
/// section of the same call.
#[derive(Clone, Copy)]
struct ParamsPtr(usize);

// ---------------------------------------------------------------------------
// Label training, shared by Index and Ivf

/// Checked training pairs of a `train_labels` call: the queries, the CSR
/// labels and the parameters, as the C call takes them.
struct LabelTraining<'py> {
    q: Mat<'py>,
    off: Mat<'py>,
    lab: Mat<'py>,
    p: c::labels::lshk_label_params,
}

impl<'py> LabelTraining<'py> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        label_cap: Option<u32>,
        policy: Option<&Bound<'py, PyAny>>,
        dim: usize,
    ) -> PyResult<Self> {
        let mut p = c::labels::lshk_label_params_default();
        if let Some(v) = label_cap {
            p.label_cap = v;
        }
        if let Some(v) = policy {
            p.policy = enum_arg(v, "policy", POLICIES)?;
        }
        let q = mat(py, queries, "queries", Dt::F32, Nd::Two, false)?;
        need_cols(&q, "queries", dim)?;
        let off = vec1(py, label_offsets, "label_offsets", Dt::U64)?;
        expect_len(&off, "label_offsets", q.rows + 1, "queries + 1")?;
        let lab = vec1(py, labels, "labels", Dt::U32)?;
        check_csr_end(py, &off, &lab)?;
        Ok(LabelTraining { q, off, lab, p })
    }

    /// Calls `f(queries, n, q_stride, label_offsets, labels, params)` with
    /// the GIL released.
    fn run(
        &self,
        py: Python<'py>,
        f: impl FnOnce(
                *const f32,
                usize,
                usize,
                *const usize,
                *const u32,
                *const c::labels::lshk_label_params,
            ) -> c::lshk_status
            + Send,
    ) -> PyResult<()> {
        let (qp, n, qs) = (self.q.ptr, self.q.rows, self.q.stride);
        let (op, lp, pp) = (self.off.ptr, self.lab.ptr, &self.p as *const _ as usize);
        py.detach(move || {
            check(f(
                qp as *const f32,
                n,
                qs,
                op as *const usize,
                lp as *const u32,
                pp as *const c::labels::lshk_label_params,
            ))
        })
        .py_err(py)
    }
}

/// None when untrained, else {"label_cap": int, "policy": str}, from a
/// `*_label_info` C call.
fn label_info_of<'py>(
    py: Python<'py>,
    f: impl FnOnce(*mut u32, *mut c::labels::lshk_label_params) -> c::lshk_status,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let mut trained = 0u32;
    let mut p = c::labels::lshk_label_params_default();
    check(f(&mut trained, &mut p)).py_err(py)?;
    if trained == 0 {
        return Ok(None);
    }
    let d = PyDict::new(py);
    d.set_item("label_cap", p.label_cap)?;
    d.set_item("policy", name_of(POLICIES, p.policy))?;
    Ok(Some(d))
}

// ---------------------------------------------------------------------------
// Ivf

/// The IVF index (k-means lists, int8 / 4-bit codes, exact re-rank; C API
/// lshk_ivf_*). The recommended top-k index.
#[pyclass(module = "lshk")]
struct Ivf {
    h: Handle<lshk_ivf>,
    dim: usize,
    #[allow(dead_code)] // only held: keeps a borrowed W alive
    w_owner: Option<Py<PyAny>>,
}

impl Drop for Ivf {
    fn drop(&mut self) {
        if !self.h.0.is_null() {
            // SAFETY: a live handle owned by this object, freed once.
            unsafe { c::ivf::lshk_ivf_free(self.h.0) };
        }
    }
}

#[pymethods]
impl Ivf {
    #[new]
    #[pyo3(signature = (w, bias=None, *, nlist=None, iters=None, train_rows=None, codes=None,
        borrow=None, threads=None, pq_m=None, seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        w: &Bound<'py, PyAny>,
        bias: Option<&Bound<'py, PyAny>>,
        nlist: Option<u32>,
        iters: Option<u32>,
        train_rows: Option<u32>,
        codes: Option<&Bound<'py, PyAny>>,
        borrow: Option<bool>,
        threads: Option<u32>,
        pq_m: Option<u32>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let mut p = c::ivf::lshk_ivf_params_default();
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = $f { p.$f = v; } )* };
        }
        set!(nlist, iters, train_rows, threads, pq_m, seed);
        if let Some(cd) = codes {
            p.codes = enum_arg(cd, "codes", CODES)?;
        }
        // borrow=None: borrow W unless codes="none", which scores the
        // index's own f32 copy and cannot borrow (lshk_ivf_build refuses
        // borrow with CODES_NONE).
        p.borrow = borrow.unwrap_or(p.codes != c::ivf::LSHK_IVF_CODES_NONE) as u32;
        let w = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
        let bias = opt_vec1(py, bias, "bias", Dt::F32)?;
        if let Some(b) = &bias {
            expect_len(b, "bias", w.rows, "one per row of w")?;
        }
        let (wp, bp, rows, dim, stride) = (w.ptr, ptr_or_null(&bias), w.rows, w.cols, w.stride);
        let pp = &p as *const _ as usize;
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_ivf = ptr::null_mut();
                // SAFETY: w/bias point to live arrays of the checked shapes;
                // `p` lives on this frame.
                check(unsafe {
                    c::ivf::lshk_ivf_build(
                        wp as *const f32,
                        bp as *const f32,
                        rows,
                        dim,
                        stride,
                        pp as *const c::ivf::lshk_ivf_params,
                        &mut out,
                    )
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        Ok(Ivf {
            h: Handle(h as *mut lshk_ivf),
            dim,
            w_owner: (p.borrow != 0).then(|| w.arr.into_any().unbind()),
        })
    }

    /// Loads an index saved by `save` (or lshk_ivf_save). `w`: the same W
    /// as at build time when it was built with borrow=True, else None.
    #[staticmethod]
    #[pyo3(signature = (path, w=None))]
    fn load<'py>(
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        w: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let cpath = c_path(path)?;
        let w = match w {
            Some(o) if !o.is_none() => Some(mat(py, o, "w", Dt::F32, Nd::Two, false)?),
            _ => None,
        };
        if let Some(m) = &w {
            check_borrowed_shape(py, m, "w", &cpath, lshk::format::KIND_IVF)?;
        }
        let (wp, ws) = (ptr_or_null(&w), w.as_ref().map_or(0, |m| m.stride));
        let pp = cpath.as_ptr() as usize;
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_ivf = ptr::null_mut();
                // SAFETY: NUL-terminated path held by `cpath`; W held by `w`.
                check(unsafe {
                    c::ivf::lshk_ivf_load(pp as *const c_char, wp as *const f32, ws, &mut out)
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        let mut ivf = Ivf {
            h: Handle(h as *mut lshk_ivf),
            dim: 0,
            w_owner: None,
        };
        let (rows, dim, _) = ivf.shape(py)?;
        ivf.dim = dim;
        if let Some(m) = &w {
            if m.rows != rows || m.cols != dim {
                return Err(PyValueError::new_err(format!(
                    "w: the file's index has {rows} x {dim} weights, got {} x {}",
                    m.rows, m.cols
                )));
            }
        }
        ivf.w_owner = w.map(|m| m.arr.into_any().unbind());
        Ok(ivf)
    }

    fn save(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let cpath = c_path(path)?;
        let (h, pp) = (self.h.0 as usize, cpath.as_ptr() as usize);
        py.detach(move || {
            // SAFETY: live handle; NUL-terminated path held by `cpath`.
            check(unsafe { c::ivf::lshk_ivf_save(h as *const lshk_ivf, pp as *const c_char) })
        })
        .py_err(py)
    }

    /// Label-aware lists (lshk_ivf_train_labels): each list gains (policy
    /// "beside") or is replaced by (policy "instead") the `label_cap` most
    /// frequent labels of the training queries that visit it first. Once
    /// per index; not with codes "pq4" or "pq4_i8".
    #[pyo3(signature = (queries, label_offsets, labels, *, label_cap=None, policy=None))]
    fn train_labels<'py>(
        &mut self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        label_cap: Option<u32>,
        policy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let h = self.h.0 as usize;
        let t = LabelTraining::new(
            py,
            queries,
            label_offsets,
            labels,
            label_cap,
            policy,
            self.dim,
        )?;
        // SAFETY: the shapes were checked by LabelTraining::new; exclusive
        // access through &mut self.
        t.run(py, move |q, n, qs, o, l, p| unsafe {
            c::ivf::lshk_ivf_train_labels(h as *mut lshk_ivf, q, n, qs, o, l, p)
        })
    }

    /// None when the index was not trained with labels, else
    /// {"label_cap": int, "policy": str} (lshk_ivf_label_info).
    fn label_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // SAFETY: live handle, writable outputs.
        label_info_of(py, |t, p| unsafe {
            c::ivf::lshk_ivf_label_info(self.h.0, t, p)
        })
    }

    #[pyo3(signature = (q, k=10, *, nprobe=None, rerank=None, reach=None, stats=false))]
    #[allow(clippy::too_many_arguments)]
    fn query<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        nprobe: Option<u32>,
        rerank: Option<u32>,
        reach: Option<f32>,
        stats: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut s = c::ivf::lshk_ivf_search_default();
        if let Some(v) = nprobe {
            s.nprobe = v;
        }
        if let Some(v) = rerank {
            s.rerank = v;
        }
        if let Some(v) = reach {
            s.reach = v;
        }
        let mut st = c::ivf::lshk_ivf_stats {
            struct_size: std::mem::size_of::<c::ivf::lshk_ivf_stats>() as u32,
            reserved: 0,
            scanned: 0,
            reranked: 0,
            lists: 0,
        };
        let (h, spp) = (self.h.0 as usize, &s as *const _ as usize);
        let stp = if stats { &mut st as *mut _ as usize } else { 0 };
        let call = move |qp: usize, nq: usize, qs: usize, ip: usize, sp: usize| {
            // SAFETY: q holds nq rows at stride qs; outputs nq*k elements;
            // s/st live on this frame.
            unsafe {
                c::ivf::lshk_ivf_query(
                    h as *const lshk_ivf,
                    qp as *const f32,
                    nq,
                    qs,
                    k,
                    spp as *const c::ivf::lshk_ivf_search,
                    ip as *mut u32,
                    sp as *mut f32,
                    stp as *mut c::ivf::lshk_ivf_stats,
                )
            }
        };
        let fill = |d: &Bound<'py, PyDict>| -> PyResult<()> {
            // SAFETY: the call above has returned; st is this frame's.
            let st = unsafe { &*(stp as *const c::ivf::lshk_ivf_stats) };
            d.set_item("scanned", st.scanned)?;
            d.set_item("reranked", st.reranked)?;
            d.set_item("lists", st.lists)
        };
        topk_call(py, q, self.dim, k, call, stats.then_some(&fill as _))
    }

    /// The search parameters that reach `target` recall@k on the sample
    /// queries `q` (2-D, held-out queries of the real workload;
    /// lshk_ivf_calibrate): a dict with "nprobe", "rerank", "reach" (pass
    /// them to query), "recall", "recall_lower" (its 95 % lower bound, which
    /// must reach the target), "scanned", "met", and the two candidates
    /// "fixed" (nprobe, recall, scanned) and "adaptive" (reach, recall,
    /// scanned).
    #[pyo3(signature = (q, k=10, target=0.99, *, rerank=32, threads=0))]
    fn calibrate<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        target: f32,
        rerank: u32,
        threads: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let m = mat(py, q, "q", Dt::F32, Nd::Two, false)?;
        need_cols(&m, "q", self.dim)?;
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut c: c::ivf::lshk_ivf_calibration = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<c::ivf::lshk_ivf_calibration>() as u32;
        let (h, qp, nq, qs) = (self.h.0 as usize, m.ptr, m.rows, m.stride);
        let cp = &mut c as *mut _ as usize;
        py.detach(move || {
            // SAFETY: q holds nq rows at stride qs (mat); c lives on this
            // frame and is written only by this call.
            check(unsafe {
                c::ivf::lshk_ivf_calibrate(
                    h as *const lshk_ivf,
                    qp as *const f32,
                    nq,
                    qs,
                    k,
                    target,
                    rerank,
                    threads,
                    cp as *mut c::ivf::lshk_ivf_calibration,
                )
            })
        })
        .py_err(py)?;
        drop(m);
        let d = PyDict::new(py);
        d.set_item("nprobe", c.search.nprobe)?;
        d.set_item("rerank", c.search.rerank)?;
        d.set_item("reach", c.search.reach)?;
        d.set_item("recall", c.recall)?;
        d.set_item("recall_lower", c.recall_lower)?;
        d.set_item("scanned", c.scanned)?;
        d.set_item("met", c.met != 0)?;
        d.set_item("fixed", (c.fixed_nprobe, c.fixed_recall, c.fixed_scanned))?;
        d.set_item(
            "adaptive",
            (c.adaptive_reach, c.adaptive_recall, c.adaptive_scanned),
        )?;
        Ok(d)
    }

    /// (rows, dim, nlist).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, usize, u32)> {
        let (mut r, mut d, mut n) = (0usize, 0usize, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::ivf::lshk_ivf_shape(self.h.0, &mut r, &mut d, &mut n) }).py_err(py)?;
        Ok((r, d, n))
    }

    fn memory_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        let mut n = 0usize;
        // SAFETY: live handle, writable output.
        check(unsafe { c::ivf::lshk_ivf_memory_bytes(self.h.0, &mut n) }).py_err(py)?;
        Ok(n)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (r, d, n) = self.shape(py)?;
        Ok(format!("lshk.Ivf(rows={r}, dim={d}, nlist={n})"))
    }
}

// ---------------------------------------------------------------------------
// kernels: SimHash, Dwta, Tables

/// A SimHash family (lshk_simhash_*). From `SimHash(...)`,
/// `SimHash.from_planes(...)` or `Index.simhash()` (a borrowed view).
#[pyclass(module = "lshk")]
struct SimHash {
    h: Handle<lshk_simhash>,
    /// The owning Index of a borrowed handle (never freed here).
    owner: Option<Py<PyAny>>,
}

impl Drop for SimHash {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::simhash::lshk_simhash_free(self.h.0) };
        }
    }
}

fn hash_into<'py>(
    py: Python<'py>,
    x: &Mat<'py>,
    width: usize,
    f: impl FnOnce(usize, usize, usize, usize, usize) -> u32 + Send,
    out: usize,
    out_len: usize,
) -> PyResult<()> {
    let _ = width;
    let (xp, n, xs) = (x.ptr, x.rows, x.stride);
    py.detach(move || check(f(xp, n, xs, out, out_len)))
        .py_err(py)
}

fn out_shape(one_d: bool, rows: usize, cols: usize) -> Vec<usize> {
    if one_d {
        vec![cols]
    } else {
        vec![rows, cols]
    }
}

#[pymethods]
impl SimHash {
    #[new]
    #[pyo3(signature = (dim, bits_per_table, tables, *, sparsity=0, seed=1))]
    fn new(
        py: Python<'_>,
        dim: u32,
        bits_per_table: u32,
        tables: u32,
        sparsity: u32,
        seed: u64,
    ) -> PyResult<Self> {
        let mut out: *mut lshk_simhash = ptr::null_mut();
        check(c::simhash::lshk_simhash_new(
            dim,
            bits_per_table,
            tables,
            sparsity,
            seed,
            &mut out,
        ))
        .py_err(py)?;
        Ok(SimHash {
            h: Handle(out),
            owner: None,
        })
    }

    /// From K*L planes of `dim` floats (shape (K*L, dim) or flat), copied.
    #[staticmethod]
    fn from_planes<'py>(
        py: Python<'py>,
        planes: &Bound<'py, PyAny>,
        bits_per_table: u32,
        tables: u32,
    ) -> PyResult<Self> {
        let m = mat(py, planes, "planes", Dt::F32, Nd::Two, true)?;
        let mut out: *mut lshk_simhash = ptr::null_mut();
        let expect = bits_per_table as usize * tables as usize;
        if m.rows != expect {
            return Err(PyValueError::new_err(format!(
                "planes: must have K*L = {expect} rows, got {}",
                m.rows
            )));
        }
        let dim =
            u32::try_from(m.cols).map_err(|_| PyValueError::new_err("planes: dim too large"))?;
        // SAFETY: m holds K*L*dim contiguous floats.
        check(unsafe {
            c::simhash::lshk_simhash_from_planes(
                m.ptr as *const f32,
                dim,
                bits_per_table,
                tables,
                &mut out,
            )
        })
        .py_err(py)?;
        Ok(SimHash {
            h: Handle(out),
            owner: None,
        })
    }

    /// (dim, K, L).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(u32, u32, u32)> {
        let (mut d, mut k, mut l) = (0u32, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::simhash::lshk_simhash_shape(self.h.0, &mut d, &mut k, &mut l) })
            .py_err(py)?;
        Ok((d, k, l))
    }

    /// A copy of the planes, shape (K*L, dim).
    fn planes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (d, k, l) = self.shape(py)?;
        let shape = [k as usize * l as usize, d as usize];
        let out = out_array::<f32>(py, &shape)?;
        // SAFETY: out holds K*L*dim writable floats.
        check(unsafe {
            c::simhash::lshk_simhash_copy_planes(self.h.0, out.data(), shape[0] * shape[1])
        })
        .py_err(py)?;
        Ok(out)
    }

    /// Codes of the rows of x: shape (n, L) uint32 ((L,) for a 1-D x).
    fn hash<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (d, _, l) = self.shape(py)?;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<u32>(py, &out_shape(x.one_d, x.rows, l as usize))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            l as usize,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol u32.
                unsafe {
                    c::simhash::lshk_simhash_hash(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut u32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * l as usize,
        )?;
        Ok(out)
    }

    /// Projections of the rows of x on every plane: shape (n, L*K) float32.
    fn project<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (d, k, l) = self.shape(py)?;
        let width = k as usize * l as usize;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<f32>(py, &out_shape(x.one_d, x.rows, width))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            width,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol floats.
                unsafe {
                    c::simhash::lshk_simhash_project(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut f32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * width,
        )?;
        Ok(out)
    }
}

/// A DWTA family (lshk_dwta_*).
#[pyclass(module = "lshk")]
struct Dwta {
    h: Handle<lshk_dwta>,
    owner: Option<Py<PyAny>>,
}

impl Drop for Dwta {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::dwta::lshk_dwta_free(self.h.0) };
        }
    }
}

#[pymethods]
impl Dwta {
    #[new]
    #[pyo3(signature = (dim, bins_per_table, tables, *, bin_size=8, seed=1))]
    fn new(
        py: Python<'_>,
        dim: u32,
        bins_per_table: u32,
        tables: u32,
        bin_size: u32,
        seed: u64,
    ) -> PyResult<Self> {
        let mut out: *mut lshk_dwta = ptr::null_mut();
        check(c::dwta::lshk_dwta_new(
            dim,
            bins_per_table,
            tables,
            bin_size,
            seed,
            &mut out,
        ))
        .py_err(py)?;
        Ok(Dwta {
            h: Handle(out),
            owner: None,
        })
    }

    /// From a bin map of K*L*bin_size coordinates (< dim), copied.
    #[staticmethod]
    fn from_map<'py>(
        py: Python<'py>,
        map: &Bound<'py, PyAny>,
        dim: u32,
        bins_per_table: u32,
        tables: u32,
        bin_size: u32,
    ) -> PyResult<Self> {
        let m = mat(py, map, "map", Dt::U32, Nd::OneOrTwo, true)?;
        let mut out: *mut lshk_dwta = ptr::null_mut();
        // SAFETY: m holds m.len() contiguous u32.
        check(unsafe {
            c::dwta::lshk_dwta_from_map(
                m.ptr as *const u32,
                m.len(),
                dim,
                bins_per_table,
                tables,
                bin_size,
                &mut out,
            )
        })
        .py_err(py)?;
        Ok(Dwta {
            h: Handle(out),
            owner: None,
        })
    }

    /// (dim, K, L, bin_size).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(u32, u32, u32, u32)> {
        let (mut d, mut k, mut l, mut b) = (0u32, 0u32, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::dwta::lshk_dwta_shape(self.h.0, &mut d, &mut k, &mut l, &mut b) })
            .py_err(py)?;
        Ok((d, k, l, b))
    }

    /// A copy of the bin map (K*L*bin_size uint32).
    fn map<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (_, k, l, b) = self.shape(py)?;
        let n = k as usize * l as usize * b as usize;
        let out = out_array::<u32>(py, &[n])?;
        // SAFETY: out holds n writable u32.
        check(unsafe { c::dwta::lshk_dwta_copy_map(self.h.0, out.data(), n) }).py_err(py)?;
        Ok(out)
    }

    /// Codes of dense rows: shape (n, L) uint32 ((L,) for a 1-D x).
    fn hash<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (d, _, l, _) = self.shape(py)?;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<u32>(py, &out_shape(x.one_d, x.rows, l as usize))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            l as usize,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol u32.
                unsafe {
                    c::dwta::lshk_dwta_hash_dense(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut u32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * l as usize,
        )?;
        Ok(out)
    }

    /// Codes of CSR sparse rows (indptr n+1, indices, values): (n, L).
    fn hash_sparse<'py>(
        &self,
        py: Python<'py>,
        indptr: &Bound<'py, PyAny>,
        indices: &Bound<'py, PyAny>,
        values: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (_, _, l, _) = self.shape(py)?;
        let ip = vec1(py, indptr, "indptr", Dt::U64)?;
        let ix = vec1(py, indices, "indices", Dt::U32)?;
        let vs = vec1(py, values, "values", Dt::F32)?;
        if ip.len() == 0 {
            return Err(PyValueError::new_err("indptr: must hold n + 1 >= 1 values"));
        }
        if ix.len() != vs.len() {
            return Err(PyValueError::new_err(format!(
                "indices and values: must have the same length, got {} and {}",
                ix.len(),
                vs.len()
            )));
        }
        check_csr_end(py, &ip, &ix)?;
        let n = ip.len() - 1;
        let out = out_array::<u32>(py, &[n, l as usize])?;
        let (h, a, b, cc, op, ol) = (
            self.h.0 as usize,
            ip.ptr,
            ix.ptr,
            vs.ptr,
            out_ptr(&out),
            n * l as usize,
        );
        py.detach(move || {
            // SAFETY: indptr n + 1 values, indices/values >= indptr[n]
            // entries (checked); out holds ol u32.
            check(unsafe {
                c::dwta::lshk_dwta_hash_sparse(
                    h as *const _,
                    a as *const usize,
                    b as *const u32,
                    cc as *const f32,
                    n,
                    op as *mut u32,
                    ol,
                )
            })
        })
        .py_err(py)?;
        Ok(out)
    }
}

/// LSH tables built from per-table codes (lshk_tables_*).
#[pyclass(module = "lshk")]
struct Tables {
    h: Handle<lshk_tables>,
    owner: Option<Py<PyAny>>,
}

impl Drop for Tables {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::tables::lshk_tables_free(self.h.0) };
        }
    }
}

#[pymethods]
impl Tables {
    /// From codes of shape (n, L) (e.g. SimHash.hash of the rows).
    #[new]
    #[pyo3(signature = (codes, range_bits, *, bucket_cap=0, seed=1, threads=0))]
    fn new<'py>(
        py: Python<'py>,
        codes: &Bound<'py, PyAny>,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
    ) -> PyResult<Self> {
        let m = mat(py, codes, "codes", Dt::U32, Nd::Two, true)?;
        let l =
            u32::try_from(m.cols).map_err(|_| PyValueError::new_err("codes: too many tables"))?;
        let (cp, n) = (m.ptr, m.rows);
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_tables = ptr::null_mut();
                // SAFETY: codes holds n*L contiguous u32.
                check(unsafe {
                    c::tables::lshk_tables_build(
                        cp as *const u32,
                        n,
                        l,
                        range_bits,
                        bucket_cap,
                        seed,
                        threads,
                        &mut out,
                    )
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        Ok(Tables {
            h: Handle(h as *mut _),
            owner: None,
        })
    }

    /// (n, L, range_bits).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, u32, u32)> {
        let (mut n, mut l, mut r) = (0usize, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::tables::lshk_tables_shape(self.h.0, &mut n, &mut l, &mut r) })
            .py_err(py)?;
        Ok((n, l, r))
    }

    fn memory_bytes(&self) -> usize {
        // SAFETY: live handle.
        unsafe { c::tables::lshk_tables_memory_bytes(self.h.0) }
    }

    /// Candidates (CSR) of queries given by their codes (q, L):
    /// returns (ids, offsets) or (ids, offsets, counts).
    #[pyo3(signature = (codes, *, min_count=None, max_candidates=None, probes=None,
        bits_per_table=None, projections=None, forced_offsets=None, forced_ids=None, counts=false))]
    #[allow(clippy::too_many_arguments)]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        codes: &Bound<'py, PyAny>,
        min_count: Option<u32>,
        max_candidates: Option<u32>,
        probes: Option<u32>,
        bits_per_table: Option<u32>,
        projections: Option<&Bound<'py, PyAny>>,
        forced_offsets: Option<&Bound<'py, PyAny>>,
        forced_ids: Option<&Bound<'py, PyAny>>,
        counts: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let (n, l, _) = self.shape(py)?;
        let cm = mat(py, codes, "codes", Dt::U32, Nd::OneOrTwo, true)?;
        if cm.cols != l as usize {
            return Err(PyValueError::new_err(format!(
                "codes: must have L = {l} columns, got {}",
                cm.cols
            )));
        }
        let q = cm.rows;
        let proj = match projections {
            Some(o) if !o.is_none() => {
                Some(mat(py, o, "projections", Dt::F32, Nd::OneOrTwo, true)?)
            }
            _ => None,
        };
        let fo = opt_vec1(py, forced_offsets, "forced_offsets", Dt::U64)?;
        let fi = opt_vec1(py, forced_ids, "forced_ids", Dt::U32)?;
        if fo.is_some() != fi.is_some() {
            return Err(PyValueError::new_err(
                "forced_offsets and forced_ids: give both or neither",
            ));
        }
        if let Some(f) = &fo {
            expect_len(f, "forced_offsets", q + 1, "queries + 1")?;
        }
        let g = gather_params(min_count, max_candidates, probes, bits_per_table);
        let mut cap = q.saturating_mul(256).min(q.saturating_mul(n)).max(1);
        let offsets = out_array::<u64>(py, &[q + 1])?;
        let (h, cp, pp, pl, fop, fip, fil, op) = (
            self.h.0 as usize,
            cm.ptr,
            ptr_or_null(&proj),
            len_of(&proj),
            ptr_or_null(&fo),
            ptr_or_null(&fi),
            len_of(&fi),
            out_ptr(&offsets),
        );
        let gp = &g as *const _ as usize;
        loop {
            let mut ids = try_vec::<u32>(cap, "candidate ids")?;
            let mut cnt = try_vec::<u32>(if counts { cap } else { 0 }, "candidate counts")?;
            let (ip, cntp) = (
                ids.as_mut_ptr() as usize,
                if counts { cnt.as_mut_ptr() as usize } else { 0 },
            );
            let r = py.detach(move || -> (u32, usize, String) {
                let mut needed = 0usize;
                // SAFETY: codes q*L u32, projections pl floats, forced
                // arrays as checked; ids/counts hold `cap`, offsets q + 1.
                let s = unsafe {
                    c::tables::lshk_tables_gather(
                        h as *const _,
                        cp as *const u32,
                        q,
                        gp as *const c::tables::lshk_gather_params,
                        pp as *const f32,
                        pl,
                        fop as *const usize,
                        fip as *const u32,
                        fil,
                        ip as *mut u32,
                        cap,
                        op as *mut usize,
                        cntp as *mut u32,
                        &mut needed,
                    )
                };
                let msg = if s == c::LSHK_STATUS_OK {
                    String::new()
                } else {
                    last_error_message()
                };
                (s, needed, msg)
            });
            match r {
                (c::LSHK_STATUS_OK, needed, _) => {
                    // lshk reports success only with needed <= cap
                    let needed = needed.min(cap);
                    let ids = array_from(py, &ids[..needed])?;
                    let offsets = offsets.into_any();
                    return if counts {
                        let cnt = array_from(py, &cnt[..needed])?;
                        PyTuple::new(py, [ids, offsets, cnt])
                    } else {
                        PyTuple::new(py, [ids, offsets])
                    };
                }
                (c::LSHK_STATUS_BUFFER_TOO_SMALL, needed, _) if needed > cap => cap = needed,
                (status, _, message) => return Err(lshk_error(py, Failure { status, message })),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// stateless kernels

/// Offsets of a CSR argument, or [0, len] (one segment) when None.
fn offsets_or_one<'py>(
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

fn last_offset(off: &Mat<'_>) -> u64 {
    if off.len() == 0 {
        return 0;
    }
    // SAFETY: off holds off.len() contiguous u64.
    unsafe { *(off.ptr as *const u64).add(off.len() - 1) }
}

/// out[j] = W[ids[j]] . q[i] + bias[ids[j]] for j in query i's segment.
#[pyfunction]
#[pyo3(signature = (w, q, ids, offsets=None, *, bias=None, scales=None, bf16=false))]
#[allow(clippy::too_many_arguments)]
fn gathered_matmul<'py>(
    py: Python<'py>,
    w: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    offsets: Option<&Bound<'py, PyAny>>,
    bias: Option<&Bound<'py, PyAny>>,
    scales: Option<&Bound<'py, PyAny>>,
    bf16: bool,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let wa = w
        .cast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err("w: must be a numpy array"))?;
    let d = wa.dtype();
    let dt = match (d.kind(), d.itemsize()) {
        (b'f', 4) => Dt::F32,
        (b'f', 2) => Dt::F16,
        (b'u', 2) if bf16 => Dt::U16,
        (b'i', 1) => Dt::I8,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "w: must be float32, float16, int8 (with scales) or uint16 bf16 bits (with bf16=True), got {}",
                d.str()?
            )))
        }
    };
    if bf16 && dt != Dt::U16 {
        return Err(PyTypeError::new_err(
            "w: bf16=True needs a uint16 array of bf16 bits",
        ));
    }
    let wm = mat(py, w, "w", dt, Nd::Two, false)?;
    let qm = mat(py, q, "q", Dt::F32, Nd::OneOrTwo, false)?;
    need_cols(&qm, "q", wm.cols)?;
    let idm = vec1(py, ids, "ids", Dt::U32)?;
    let off = offsets_or_one(py, offsets, idm.len())?;
    expect_len(&off, "offsets", qm.rows + 1, "queries + 1")?;
    if last_offset(&off) != idm.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset must equal len(ids) = {}",
            idm.len()
        )));
    }
    let bm = opt_vec1(py, bias, "bias", Dt::F32)?;
    if let Some(b) = &bm {
        expect_len(b, "bias", wm.rows, "one per row of w")?;
    }
    let sm = opt_vec1(py, scales, "scales", Dt::F32)?;
    match (&sm, dt) {
        (Some(s), Dt::I8) => expect_len(s, "scales", wm.rows, "one per row of w")?,
        (None, Dt::I8) => return Err(PyValueError::new_err("scales: needed with int8 w")),
        (Some(_), _) => return Err(PyValueError::new_err("scales: only with int8 w")),
        _ => {}
    }
    let n = idm.len();
    let out = out_array::<f32>(py, &[n])?;
    let a = (
        wm.ptr,
        wm.rows,
        wm.cols,
        wm.stride,
        ptr_or_null(&bm),
        qm.ptr,
        qm.rows,
        qm.stride,
        idm.ptr,
        off.ptr,
        out_ptr(&out),
        ptr_or_null(&sm),
    );
    py.detach(move || {
        let (wp, rows, dim, ws, bp, qp, nq, qs, ip, op, outp, sp) = a;
        let (bp, qp, ip, op, outp) = (
            bp as *const f32,
            qp as *const f32,
            ip as *const u32,
            op as *const usize,
            outp as *mut f32,
        );
        // SAFETY: every array holds the elements its shape says (checked
        // above: w rows x dim at stride ws, q nq rows, ids/offsets CSR with
        // offsets[nq] == len(ids), out len(ids)).
        let s = unsafe {
            match dt {
                Dt::F32 => c::matmul::lshk_gathered_matmul_f32(
                    wp as *const f32,
                    rows,
                    dim,
                    ws,
                    bp,
                    qp,
                    nq,
                    qs,
                    ip,
                    op,
                    outp,
                    n,
                ),
                Dt::U16 => c::matmul::lshk_gathered_matmul_bf16(
                    wp as *const u16,
                    rows,
                    dim,
                    ws,
                    bp,
                    qp,
                    nq,
                    qs,
                    ip,
                    op,
                    outp,
                    n,
                ),
                Dt::F16 => c::matmul::lshk_gathered_matmul_f16(
                    wp as *const u16,
                    rows,
                    dim,
                    ws,
                    bp,
                    qp,
                    nq,
                    qs,
                    ip,
                    op,
                    outp,
                    n,
                ),
                _ => c::matmul::lshk_gathered_matmul_i8(
                    wp as *const i8,
                    sp as *const f32,
                    rows,
                    dim,
                    ws,
                    bp,
                    qp,
                    nq,
                    qs,
                    ip,
                    op,
                    outp,
                    n,
                ),
            }
        };
        check(s)
    })
    .py_err(py)?;
    Ok(out)
}

/// The k best candidates per CSR segment: (ids (nq, k), scores (nq, k)).
#[pyfunction]
#[pyo3(signature = (scores, k, offsets=None, ids=None))]
fn topk<'py>(
    py: Python<'py>,
    scores: &Bound<'py, PyAny>,
    k: u32,
    offsets: Option<&Bound<'py, PyAny>>,
    ids: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let sc = vec1(py, scores, "scores", Dt::F32)?;
    let one = offsets.is_none_or(|o| o.is_none());
    let off = offsets_or_one(py, offsets, sc.len())?;
    if off.len() == 0 {
        return Err(PyValueError::new_err(
            "offsets: must hold nq + 1 >= 1 values",
        ));
    }
    if last_offset(&off) > sc.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset exceeds len(scores) = {}",
            sc.len()
        )));
    }
    let idm = opt_vec1(py, ids, "ids", Dt::U32)?;
    if let Some(i) = &idm {
        expect_len(i, "ids", sc.len(), "one per score")?;
    }
    let nq = off.len() - 1;
    let shape = out_shape(one, nq, k as usize);
    let oi = out_array::<u32>(py, &shape)?;
    let os = out_array::<f32>(py, &shape)?;
    let a = (
        sc.ptr,
        ptr_or_null(&idm),
        off.ptr,
        out_ptr(&oi),
        out_ptr(&os),
    );
    py.detach(move || {
        // SAFETY: scores/ids hold >= offsets[nq] entries, offsets nq + 1,
        // outputs nq*k each.
        check(unsafe {
            c::matmul::lshk_topk(
                a.0 as *const f32,
                a.1 as *const u32,
                a.2 as *const usize,
                nq,
                k,
                a.3 as *mut u32,
                a.4 as *mut f32,
            )
        })
    })
    .py_err(py)?;
    PyTuple::new(py, [oi.into_any(), os.into_any()])
}

/// Softmax per CSR segment; with return_lse=True also the log-sum-exps.
#[pyfunction]
#[pyo3(signature = (scores, offsets=None, *, return_lse=false))]
fn softmax<'py>(
    py: Python<'py>,
    scores: &Bound<'py, PyAny>,
    offsets: Option<&Bound<'py, PyAny>>,
    return_lse: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let sc = vec1(py, scores, "scores", Dt::F32)?;
    let off = offsets_or_one(py, offsets, sc.len())?;
    if off.len() == 0 {
        return Err(PyValueError::new_err(
            "offsets: must hold nq + 1 >= 1 values",
        ));
    }
    if last_offset(&off) > sc.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset exceeds len(scores) = {}",
            sc.len()
        )));
    }
    let nq = off.len() - 1;
    let out = out_array::<f32>(py, &[sc.len()])?;
    // positions past offsets[nq] are not written by lshk: zero them
    let outp = out_ptr(&out);
    // SAFETY: out holds sc.len() floats.
    unsafe { ptr::write_bytes(outp as *mut f32, 0, sc.len()) };
    let lse = out_array::<f32>(py, &[nq])?;
    let lp = if return_lse { out_ptr(&lse) } else { 0 };
    let (sp, op) = (sc.ptr, off.ptr);
    py.detach(move || {
        // SAFETY: scores/out hold >= offsets[nq] floats, offsets nq + 1, lse nq.
        check(unsafe {
            c::matmul::lshk_softmax(
                sp as *const f32,
                op as *const usize,
                nq,
                outp as *mut f32,
                lp as *mut f32,
            )
        })
    })
    .py_err(py)?;
    if return_lse {
        Ok(PyTuple::new(py, [out.into_any(), lse.into_any()])?.into_any())
    } else {
        Ok(out.into_any())
    }
}

/// Per-row symmetric int8 quantization: (codes int8 (rows, dim), scales).
#[pyfunction]
fn quantize_rows_i8<'py>(py: Python<'py>, w: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let wm = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
    let out = out_array::<i8>(py, &[wm.rows, wm.cols])?;
    let sc = out_array::<f32>(py, &[wm.rows])?;
    // SAFETY: w rows x dim at stride; out rows x dim dense; scales rows.
    check(unsafe {
        c::matmul::lshk_quantize_rows_i8(
            wm.ptr as *const f32,
            wm.rows,
            wm.cols,
            wm.stride,
            out.data(),
            wm.cols,
            sc.data(),
        )
    })
    .py_err(py)?;
    PyTuple::new(py, [out.into_any(), sc.into_any()])
}

/// f32 -> bf16 bits (uint16), round to nearest even.
#[pyfunction]
fn to_bf16<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let a = numpy_mod(py)?.call_method1("ascontiguousarray", (x,))?;
    let m = mat(py, &a, "x", Dt::F32, Nd::OneOrTwo, true)?;
    let out = out_array::<u16>(py, &out_shape(m.one_d, m.rows, m.cols))?;
    // SAFETY: m holds len floats; out len u16.
    check(unsafe { c::matmul::lshk_convert_f32_to_bf16(m.ptr as *const f32, m.len(), out.data()) })
        .py_err(py)?;
    Ok(out.into_any())
}

/// The active ISA tier name ("scalar", "portable", "avx2", "avx512").
#[pyfunction]
fn isa_active() -> String {
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(c::lshk_isa_name(c::lshk_isa_active())) }
        .to_string_lossy()
        .into_owned()
}

#[pymodule]
fn _lshk(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LshkError", py.get_type::<LshkError>())?;
    m.add_class::<Index>()?;
    m.add_class::<Ivf>()?;
    m.add_class::<SimHash>()?;
    m.add_class::<Dwta>()?;
    m.add_class::<Tables>()?;
    m.add_function(wrap_pyfunction!(gathered_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(topk, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(quantize_rows_i8, m)?)?;
    m.add_function(wrap_pyfunction!(to_bf16, m)?)?;
    m.add_function(wrap_pyfunction!(isa_active, m)?)?;
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(c::lshk_version()) };
    m.add("__version__", v.to_string_lossy().into_owned())?;
    let statuses = PyDict::new(py);
    for s in 0..=12u32 {
        statuses.set_item(status_name(s), s)?;
    }
    m.add("STATUS", statuses)?;
    Ok(())
}
