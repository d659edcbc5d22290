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
//! Modules: `arrays` (numpy arguments and outputs), `errors` (exceptions,
//! handles), `enums` (the C enums by name), `files` (paths, the W a file
//! records), `index` (`lshk.Index`, every candidate source), `training`
//! (label training, IUL), `kernels` (hash families, tables, stateless
//! kernels), `train` (the training kernels: softmax cross-entropy, dq, SGD
//! row updates, the rehash schedule), `hrr` (holographic reduced
//! representations: bind, unbind, projection, class vectors).

#![deny(unsafe_op_in_unsafe_fn)]

mod arrays;
mod enums;
mod errors;
mod files;
mod hrr;
mod index;
mod kernels;
mod train;
mod training;

use std::ffi::CStr;

use pyo3::prelude::*;

#[pymodule]
fn _lshk(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    index::register(m)?;
    kernels::register(m)?;
    train::register(m)?;
    hrr::register(m)?;
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(lshk::ffi::lshk_version()) };
    m.add("__version__", v.to_string_lossy().into_owned())?;
    Ok(())
}
