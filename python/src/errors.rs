//! The C API's failures as Python exceptions, and the small wrappers that
//! carry C handles and parameter structs into GIL-free sections.
//!
//! A failed status becomes `lshk.LshkError` (or its subclass
//! `lshk.UnsupportedError` for LSHK_STATUS_UNSUPPORTED: an operation the
//! index's candidate source does not have) carrying the status, its name
//! and `lshk_last_error_message()`, read on the thread that made the call
//! (the message is thread-local in lshk).

use std::ffi::CStr;

use lshk::ffi as c;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    lshk,
    LshkError,
    PyException,
    "A failed lshk call. `status` is the C API's lshk_status code (int), \
`status_name` its name (e.g. 'LSHK_STATUS_INVALID_ARGUMENT') and `message` \
the C API's lshk_last_error_message(), which starts with the C function's \
name. str(error) is the message."
);

pyo3::create_exception!(
    lshk,
    UnsupportedError,
    LshkError,
    "LSHK_STATUS_UNSUPPORTED: the operation does not apply to the index's \
candidate source (e.g. calibrate on an LSH index, train_labels on a graph \
index, tables() of an IVF index); the message names both. A subclass of \
LshkError with the same attributes."
);

/// The largest status code this library defines (LSHK_STATUS_UNSUPPORTED).
pub(crate) const LAST_STATUS: u32 = c::LSHK_STATUS_UNSUPPORTED;

/// A failed C call, captured on the thread that made it.
pub(crate) struct Failure {
    pub(crate) status: u32,
    pub(crate) message: String,
}

pub(crate) type CResult<T> = Result<T, Failure>;

pub(crate) fn last_error_message() -> String {
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
pub(crate) fn check(status: u32) -> CResult<()> {
    if status == c::LSHK_STATUS_OK {
        Ok(())
    } else {
        Err(Failure {
            status,
            message: last_error_message(),
        })
    }
}

pub(crate) fn status_name(status: u32) -> String {
    // SAFETY: lshk_status_name returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(c::lshk_status_name(status)) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn lshk_error(py: Python<'_>, f: Failure) -> PyErr {
    let err = if f.status == c::LSHK_STATUS_UNSUPPORTED {
        UnsupportedError::new_err(f.message.clone())
    } else {
        LshkError::new_err(f.message.clone())
    };
    let v = err.value(py);
    let _ = v.setattr("status", f.status);
    let _ = v.setattr("status_name", status_name(f.status));
    let _ = v.setattr("message", f.message);
    err
}

pub(crate) trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for CResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|f| lshk_error(py, f))
    }
}

/// A raw handle that crosses into GIL-free sections. lshk's handles are
/// thread-safe for the calls made through `&self` (const calls).
pub(crate) struct Handle<T>(pub(crate) *mut T);
// SAFETY: lshk handles may be used from any thread; const calls are
// thread-safe, and mutating calls take `&mut self` (exclusive borrow).
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Handle<T> {}

/// The address of a value on the calling frame (a parameter struct, an
/// output struct), for the GIL-free section of the same call; the frame
/// outlives that section.
#[derive(Clone, Copy)]
pub(crate) struct Addr(pub(crate) usize);

impl Addr {
    pub(crate) fn of<T>(v: &T) -> Self {
        Addr(v as *const T as usize)
    }
    pub(crate) fn of_mut<T>(v: &mut T) -> Self {
        Addr(v as *mut T as usize)
    }
    pub(crate) fn get<T>(self) -> *const T {
        self.0 as *const T
    }
    pub(crate) fn get_mut<T>(self) -> *mut T {
        self.0 as *mut T
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LshkError", py.get_type::<LshkError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    let statuses = pyo3::types::PyDict::new(py);
    for s in 0..=LAST_STATUS {
        statuses.set_item(status_name(s), s)?;
    }
    m.add("STATUS", statuses)?;
    Ok(())
}
