//! Index files: paths as C strings, and the check of a caller's W against
//! the shape a file records before the C loader reads that W.
//!
//! `lshk_index_load` reads `(rows - 1) * w_stride + dim` floats from a W
//! whose length it cannot know, taking rows and dim from the file (an
//! lshk_index file, or the IVF, graph or forest file of lshk 0.2). A numpy
//! array knows its shape, so W goes to the loader only when it matches.

use std::ffi::{c_char, CString};
use std::ptr;

use lshk::ffi as c;
use lshk::ffi::index::lshk_index;
use lshk::format::{Container, KIND_GRAPH, KIND_INDEX, KIND_IVF};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrays::Mat;
use crate::errors::{check, CResult, IntoPy};

/// Every kind of file lshk_index_load reads.
const KINDS: [u32; 4] = [KIND_INDEX, KIND_IVF, KIND_GRAPH, lshk::forest::KIND_FOREST];

pub(crate) fn c_path(path: &Bound<'_, PyAny>) -> PyResult<CString> {
    let os = path.py().import("os")?.call_method1("fsencode", (path,))?;
    let bytes: Vec<u8> = os.extract()?;
    CString::new(bytes).map_err(|_| PyValueError::new_err("path: contains a NUL byte"))
}

/// What a file records of the weights it was built on.
pub(crate) struct WShape {
    pub(crate) kind: u32,
    pub(crate) rows: usize,
    pub(crate) dim: usize,
    /// The row stride of an lshk_index file; 0.2 files record none (the
    /// loader takes W's own).
    pub(crate) stride: Option<usize>,
}

/// The weights' shape recorded in the file at `path`, as the C loader will
/// read it; None when the file cannot be read that far. Only read, not
/// validated: see `check_w_shape`.
fn peek_w_shape(path: &CString) -> Option<WShape> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
    let (c, kind) = Container::open_any(p, &KINDS).ok()?;
    let u64_at = |rec: &[u8], o: usize| -> Option<usize> {
        let b: [u8; 8] = rec.get(o..o + 8)?.try_into().ok()?;
        usize::try_from(u64::from_le_bytes(b)).ok()
    };
    let u32_at = |rec: &[u8], o: usize| -> Option<usize> {
        let b: [u8; 4] = rec.get(o..o + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(b) as usize)
    };
    // The records' layouts: src/index/file.rs (PARAMS: u64 rows at 48,
    // dim at 56, w_stride at 64), src/ivf/file.rs (IVFPARAM: u32 rows at
    // 4, dim at 8), src/graph/file.rs (GPARAM: the same), src/forest.rs
    // (FPARAMS: u64 rows at 8, dim at 16).
    let (rows, dim, stride) = match kind {
        KIND_INDEX => {
            let r = c.section("PARAMS").ok()?;
            (u64_at(r, 48)?, u64_at(r, 56)?, Some(u64_at(r, 64)?))
        }
        KIND_IVF | KIND_GRAPH => {
            let r = c
                .section(if kind == KIND_IVF {
                    "IVFPARAM"
                } else {
                    "GPARAM"
                })
                .ok()?;
            (u32_at(r, 4)?, u32_at(r, 8)?, None)
        }
        _ => {
            let r = c.section("FPARAMS").ok()?;
            (u64_at(r, 8)?, u64_at(r, 16)?, None)
        }
    };
    Some(WShape {
        kind,
        rows,
        dim,
        stride,
    })
}

/// Loads `path` with no W, only to learn whether the file itself is sound:
/// `Ok(true)` when it holds its weights (the index loaded, and is freed
/// again), `Ok(false)` when it needs the caller's W (the loader's
/// INVALID_ARGUMENT), else the loader's failure (BAD_FILE_FORMAT for a
/// corrupt, foreign or inconsistent file, IO_ERROR, ...).
fn load_without_w(py: Python<'_>, path: &CString) -> CResult<bool> {
    let pp = path.as_ptr() as usize;
    let r = py.detach(move || -> CResult<()> {
        let mut out: *mut lshk_index = ptr::null_mut();
        // SAFETY: a NUL-terminated path alive in `path`; no W.
        check(unsafe { c::index::lshk_index_load(pp as *const c_char, ptr::null(), 0, &mut out) })?;
        // SAFETY: the handle just loaded, freed once.
        unsafe { c::index::lshk_index_free(out) };
        Ok(())
    });
    match r {
        Ok(()) => Ok(true),
        Err(f) if f.status == c::LSHK_STATUS_INVALID_ARGUMENT => Ok(false),
        Err(f) => Err(f),
    }
}

/// A caller's W goes to the C loader only when the file records exactly
/// its shape (and, for an lshk_index file, its row stride); the recorded
/// shape is returned. Otherwise the file is first loaded without W, so that
/// a corrupt or unreadable file raises the loader's own LshkError
/// (BAD_FILE_FORMAT, IO_ERROR, ...) and only a sound file with another
/// shape (or one that holds its weights) raises ValueError.
pub(crate) fn check_w_shape(
    py: Python<'_>,
    m: &Mat<'_>,
    name: &str,
    cpath: &CString,
) -> PyResult<WShape> {
    let peek = peek_w_shape(cpath);
    if let Some(s) = &peek {
        let stride_ok = s
            .stride
            .is_none_or(|st| st == m.stride || m.rows <= 1 && st >= s.dim);
        if m.rows == s.rows && m.cols == s.dim && stride_ok {
            return Ok(peek.expect("matched above"));
        }
    }
    let holds_w = load_without_w(py, cpath).py_err(py)?;
    if holds_w {
        return Err(PyValueError::new_err(format!(
            "{name}: the file holds its weights, so {name} must be None"
        )));
    }
    Err(PyValueError::new_err(match peek {
        Some(s) => format!(
            "{name}: the file's weights are {} x {}{}, got {} x {} (row stride {})",
            s.rows,
            s.dim,
            s.stride
                .map_or(String::new(), |st| format!(" at row stride {st}")),
            m.rows,
            m.cols,
            m.stride
        ),
        None => format!("{name}: the file's weight shape cannot be read"),
    }))
}
