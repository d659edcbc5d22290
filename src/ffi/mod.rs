//! The C ABI. Every `extern "C"` function of lshk lives under this module;
//! kernels never see raw C pointers.
//!
//! Rules every entry point follows (stated for users in docs/c-api.md;
//! tests/bad_input_coverage.rs checks that every export has bad-input cases):
//! * one panic boundary ([`boundary`]) turns a panic into `LSHK_STATUS_PANIC`;
//! * values that arrive from C as enums are `u32` and are validated;
//! * pointers are checked (NULL only with length 0, alignment, lengths that
//!   fit the address space) before a slice is formed ([`slice_in`] ...);
//! * outputs are written only after every check passed;
//! * handles are validated through their slot's magic tag ([`handle`]).

#![allow(non_camel_case_types)]

pub mod dwta;
pub mod handle;
pub mod hrr;
pub mod index;
pub mod iul;
pub mod labels;
pub mod matmul;
pub mod simhash;
pub mod tables;
pub mod train;
pub mod train_logq;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

#[allow(unused_imports)]
pub(crate) use crate::bail;
use crate::error::{Error, Result, Status};
use crate::isa::{self, Isa};

pub(crate) use handle::*;

/// Outcome of a call: `LSHK_STATUS_OK` (0) or one of the error codes below.
pub type lshk_status = u32;

/// Success.
pub const LSHK_STATUS_OK: lshk_status = 0;
/// A required pointer was NULL (a pointer may be NULL only with length 0).
pub const LSHK_STATUS_NULL_POINTER: lshk_status = 1;
/// An argument is outside its documented domain (dim 0, K > 32, a bad enum
/// value, stride < dim, unsorted CSR indices, a misaligned pointer, ...).
pub const LSHK_STATUS_INVALID_ARGUMENT: lshk_status = 2;
/// An output buffer is shorter than the call needs.
pub const LSHK_STATUS_BUFFER_TOO_SMALL: lshk_status = 3;
/// An id or index is >= the number of rows it refers to.
pub const LSHK_STATUS_INDEX_OUT_OF_RANGE: lshk_status = 4;
/// The requested ISA tier is not available on this CPU.
pub const LSHK_STATUS_UNSUPPORTED_ISA: lshk_status = 5;
/// The operating system reported an I/O failure.
pub const LSHK_STATUS_IO_ERROR: lshk_status = 6;
/// A file is truncated, corrupt, foreign or of an unsupported version.
pub const LSHK_STATUS_BAD_FILE_FORMAT: lshk_status = 7;
/// Memory could not be allocated.
pub const LSHK_STATUS_ALLOCATION_FAILED: lshk_status = 8;
/// lshk panicked internally (a bug); the panic was stopped at the boundary.
pub const LSHK_STATUS_PANIC: lshk_status = 9;
/// The handle is not a live handle of the expected type (freed, foreign).
pub const LSHK_STATUS_INVALID_HANDLE: lshk_status = 10;
/// A size computation (e.g. n * dim) overflows the address space.
pub const LSHK_STATUS_SIZE_OVERFLOW: lshk_status = 11;
/// Input data holds NaN or infinity where finite values are required, or
/// finite values whose arithmetic would overflow f32: an IVF index refuses
/// rows with a |value| above sqrt(FLT_MAX / (16 (dim + 2))), every index
/// refuses a query when max(max_j |q_j|, 1) times the largest |value| it
/// stores exceeds FLT_MAX / (8 (dim + 2)) (its scores could overflow), and
/// an LSH index refuses rows no query could be scored against
/// (docs/hardening.md, "Value ranges").
pub const LSHK_STATUS_NON_FINITE: lshk_status = 12;
/// The operation does not apply to the index's candidate source (e.g.
/// label training on a graph source, calibration of a source without
/// lists, the hash family of an IVF source); the message names both.
pub const LSHK_STATUS_UNSUPPORTED: lshk_status = 13;

/// An instruction-set tier: one of the `LSHK_ISA_*` values.
pub type lshk_isa = u32;
/// Plain Rust, the reference every other tier is tested against.
pub const LSHK_ISA_SCALAR: lshk_isa = 0;
/// Portable SIMD (the `wide` crate) at the build's baseline features.
pub const LSHK_ISA_PORTABLE: lshk_isa = 1;
/// AVX2 + FMA (and POPCNT, BMI1, which every AVX2 CPU has).
pub const LSHK_ISA_AVX2: lshk_isa = 2;
/// AVX-512 F/BW/DQ/VL (plus the AVX2 tier's features). Same accuracy bounds
/// as every other tier (bf16 weights are widened to f32, never multiplied
/// with `vdpbf16ps`).
pub const LSHK_ISA_AVX512: lshk_isa = 3;

// The C constants are literals (cbindgen prints them as such); they must
// agree with the Rust enums.
const _: () = {
    assert!(LSHK_STATUS_OK == Status::Ok as u32);
    assert!(LSHK_STATUS_NULL_POINTER == Status::NullPointer as u32);
    assert!(LSHK_STATUS_INVALID_ARGUMENT == Status::InvalidArgument as u32);
    assert!(LSHK_STATUS_BUFFER_TOO_SMALL == Status::BufferTooSmall as u32);
    assert!(LSHK_STATUS_INDEX_OUT_OF_RANGE == Status::IndexOutOfRange as u32);
    assert!(LSHK_STATUS_UNSUPPORTED_ISA == Status::UnsupportedIsa as u32);
    assert!(LSHK_STATUS_IO_ERROR == Status::IoError as u32);
    assert!(LSHK_STATUS_BAD_FILE_FORMAT == Status::BadFileFormat as u32);
    assert!(LSHK_STATUS_ALLOCATION_FAILED == Status::AllocationFailed as u32);
    assert!(LSHK_STATUS_PANIC == Status::Panic as u32);
    assert!(LSHK_STATUS_INVALID_HANDLE == Status::InvalidHandle as u32);
    assert!(LSHK_STATUS_SIZE_OVERFLOW == Status::SizeOverflow as u32);
    assert!(LSHK_STATUS_NON_FINITE == Status::NonFinite as u32);
    assert!(LSHK_STATUS_UNSUPPORTED == Status::Unsupported as u32);
    assert!(LSHK_ISA_SCALAR == Isa::Scalar as u32);
    assert!(LSHK_ISA_PORTABLE == Isa::Portable as u32);
    assert!(LSHK_ISA_AVX2 == Isa::Avx2 as u32);
    assert!(LSHK_ISA_AVX512 == Isa::Avx512 as u32);
};

thread_local! {
    static LAST_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Records `msg` as this thread's last error message.
pub(crate) fn set_last_error(msg: &str) {
    LAST_ERROR.with(|e| {
        let mut e = e.borrow_mut();
        e.clear();
        // A NUL inside the message would truncate it in C: drop those.
        e.extend(msg.bytes().filter(|&b| b != 0));
    });
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// The panic boundary every status-returning entry point goes through:
/// runs `f`, records the message of a failure for
/// `lshk_last_error_message`, and turns a panic into `LSHK_STATUS_PANIC`.
pub(crate) fn boundary<F: FnOnce() -> Result<()>>(func: &str, f: F) -> lshk_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => LSHK_STATUS_OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{func}: {}", e.message));
            e.status as u32
        }
        Err(p) => {
            set_last_error(&format!(
                "{func}: internal panic (a bug in lshk, please report it): {}",
                panic_message(&*p)
            ));
            LSHK_STATUS_PANIC
        }
    }
}

/// Like [`boundary`] for functions that return a value instead of a status:
/// a panic yields `default`.
pub(crate) fn boundary_value<T, F: FnOnce() -> T>(func: &str, default: T, f: F) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            set_last_error(&format!(
                "{func}: internal panic (a bug in lshk, please report it): {}",
                panic_message(&*p)
            ));
            default
        }
    }
}

/// Borrows `len` elements at `ptr` as a slice after checking it: NULL is
/// allowed only when `len` is 0, the pointer must be aligned for `T`, and
/// `len * size_of::<T>()` must fit in `isize`.
///
/// # Safety
/// When the checks pass, the caller (ultimately the C caller, per the
/// documented contract) guarantees that `ptr` points to `len` readable,
/// initialised elements that stay valid and unmodified for `'a`.
pub(crate) unsafe fn slice_in<'a, T>(ptr: *const T, len: usize, name: &str) -> Result<&'a [T]> {
    check_ptr(ptr, len, name)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: non-NULL, aligned, size fits isize (checked above); validity of
    // the memory is the documented obligation of the C caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Mutable counterpart of [`slice_in`] for output buffers.
///
/// # Safety
/// As [`slice_in`], and the memory must be writable and not aliased by any
/// other argument of the call.
pub(crate) unsafe fn slice_out<'a, T>(ptr: *mut T, len: usize, name: &str) -> Result<&'a mut [T]> {
    check_ptr(ptr, len, name)?;
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in slice_in; exclusivity is the caller's documented duty.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A caller's buffer as a byte range, for overlap checks before any slice
/// is formed (`len` elements of `T` at `ptr`; empty for NULL or len 0).
#[derive(Clone, Copy)]
pub(crate) struct Span<'n> {
    start: usize,
    end: usize,
    name: &'n str,
}

/// The buffer's range, after the checks slice_in/slice_out make (NULL only
/// with len 0, alignment, at most isize::MAX bytes), so that those errors
/// keep their own status when a call has several problems.
pub(crate) fn span<T>(ptr: *const T, len: usize, name: &str) -> Result<Span<'_>> {
    check_ptr(ptr, len, name)?;
    let start = ptr as usize;
    Ok(Span {
        start,
        end: if ptr.is_null() {
            start
        } else {
            start + len * std::mem::size_of::<T>()
        },
        name,
    })
}

/// The range of a slice already validated by slice_in/slice_out.
pub(crate) fn span_of<'n, T>(s: &[T], name: &'n str) -> Span<'n> {
    let start = s.as_ptr() as usize;
    Span {
        start,
        end: start + std::mem::size_of_val(s),
        name,
    }
}

/// Refuses (INVALID_ARGUMENT, naming both) any output overlapping an input
/// or another output. Called after the lengths are known and before any
/// output is written, so a refused call writes nothing.
pub(crate) fn check_disjoint(outs: &[Span<'_>], ins: &[Span<'_>]) -> Result<()> {
    let hit = |a: &Span<'_>, b: &Span<'_>| {
        a.start < a.end && b.start < b.end && a.start < b.end && b.start < a.end
    };
    for (i, o) in outs.iter().enumerate() {
        for x in ins.iter().chain(&outs[i + 1..]) {
            if hit(o, x) {
                bail!(InvalidArgument, "`{}` overlaps `{}`", o.name, x.name);
            }
        }
    }
    Ok(())
}

/// Writes each value to its pointer unless the pointer is NULL (an output
/// the caller does not want), after checking every pointer's alignment, so
/// a misaligned one is INVALID_ARGUMENT with nothing written.
///
/// # Safety
/// Every non-NULL pointer must be writable.
pub(crate) unsafe fn write_u32_outs(outs: &[(*mut u32, u32, &str)]) -> Result<()> {
    for &(p, _, name) in outs {
        if !p.is_aligned() {
            bail!(InvalidArgument, "`{name}` is misaligned");
        }
    }
    for &(p, v, _) in outs {
        if !p.is_null() {
            // SAFETY: non-NULL, aligned (checked), writable (caller).
            unsafe { *p = v };
        }
    }
    Ok(())
}

fn check_ptr<T>(ptr: *const T, len: usize, name: &str) -> Result<()> {
    if ptr.is_null() {
        if len == 0 {
            return Ok(());
        }
        return Err(Error::new(
            Status::NullPointer,
            format!("`{name}` is NULL but its length is {len}"),
        ));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "`{name}` is not aligned to {} bytes",
                std::mem::align_of::<T>()
            ),
        ));
    }
    match len.checked_mul(std::mem::size_of::<T>()) {
        Some(b) if b <= isize::MAX as usize => Ok(()),
        _ => Err(Error::new(
            Status::SizeOverflow,
            format!("`{name}`: {len} elements overflow the address space"),
        )),
    }
}

pub(crate) use crate::error::strided_len;

/// A C parameter struct: `#[repr(C)]`, first field `uint32_t struct_size`,
/// with a `lshk_*_default()` constructor.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with `struct_size: u32` as their first
/// field, and every bit pattern of their fields must be a valid value
/// (integers, floats, nullable pointers, `Option<extern fn>`).
pub(crate) unsafe trait ParamStruct: Copy {
    /// The C name of the `_default()` function, for messages.
    const DEFAULT_FN: &'static str;
    fn defaults() -> Self;
}

/// Reads a caller's parameter struct: NULL gives the defaults; otherwise
/// the pointer must be aligned and `struct_size` at least this library's
/// `sizeof` (a larger value is accepted: fields a newer header added are
/// ignored). `arg` names the argument in messages.
///
/// # Safety
/// `p` is NULL or points to a readable struct of `struct_size` bytes.
pub(crate) unsafe fn read_param_struct<T: ParamStruct>(p: *const T, arg: &str) -> Result<T> {
    if p.is_null() {
        return Ok(T::defaults());
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("`{arg}` is misaligned"),
        ));
    }
    // SAFETY: non-NULL and aligned; T's first field is its u32 struct_size
    // (ParamStruct contract), which every caller's struct holds.
    let size = unsafe { *p.cast::<u32>() } as usize;
    let want = std::mem::size_of::<T>();
    if size < want {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "{arg}->struct_size is {size}, this library needs at least {want} \
                 (initialise it with {}())",
                T::DEFAULT_FN
            ),
        ));
    }
    // SAFETY: struct_size >= size_of::<T>(): the caller's struct holds every
    // field read here, and any bit pattern is valid (ParamStruct contract).
    Ok(unsafe { *p })
}

/// A C output struct whose first field is the caller's `uint32_t
/// struct_size` (stats, views, reports): the caller sets it to its
/// `sizeof`, the library writes the rest.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with `struct_size: u32` as their first
/// field.
pub(crate) unsafe trait OutStruct {
    /// The C type name, for messages.
    const C_NAME: &'static str;
}

/// `out`, where a call writes its result (a new handle, a struct): not
/// NULL (`NullPointer`) and aligned for `T` (`InvalidArgument`).
pub(crate) fn check_out<T>(out: *mut T) -> Result<()> {
    if out.is_null() {
        return Err(Error::new(Status::NullPointer, "`out` is NULL"));
    }
    if !(out as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::new(Status::InvalidArgument, "`out` is misaligned"));
    }
    Ok(())
}

/// A C path argument: not NULL (`NullPointer`), not empty
/// (`InvalidArgument`), its bytes as they are (any encoding).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn c_path<'a>(path: *const libc::c_char) -> Result<&'a std::path::Path> {
    use std::os::unix::ffi::OsStrExt;
    if path.is_null() {
        return Err(Error::new(Status::NullPointer, "`path` is NULL"));
    }
    // SAFETY: caller contract: a NUL-terminated string.
    let c = unsafe { std::ffi::CStr::from_ptr(path) };
    if c.to_bytes().is_empty() {
        return Err(Error::new(Status::InvalidArgument, "`path` is empty"));
    }
    Ok(std::path::Path::new(std::ffi::OsStr::from_bytes(
        c.to_bytes(),
    )))
}

/// Checks a caller's output struct before any work: `None` for NULL (the
/// caller decides whether that is allowed); otherwise the pointer must be
/// aligned and `struct_size` at least this library's `sizeof` (a larger
/// value is accepted, the tail is left alone), which is returned. `arg`
/// names the argument in messages.
///
/// # Safety
/// `p` is NULL or points to a readable struct holding its `struct_size`.
pub(crate) unsafe fn check_out_struct<T: OutStruct>(p: *const T, arg: &str) -> Result<Option<u32>> {
    if p.is_null() {
        return Ok(None);
    }
    if !p.is_aligned() {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("`{arg}` is misaligned"),
        ));
    }
    // SAFETY: non-NULL and aligned; T's first field is its u32 struct_size
    // (OutStruct contract), which the caller's struct holds.
    let size = unsafe { *p.cast::<u32>() };
    let want = std::mem::size_of::<T>();
    if (size as usize) < want {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "{arg}->struct_size is {size}, this library needs at least {want} \
                 (set it to sizeof({}))",
                T::C_NAME
            ),
        ));
    }
    Ok(Some(size))
}

/// A query's optional stats struct (`lshk_query_stats`, `lshk_ivf_stats`,
/// `lshk_graph_stats`): NULL, or aligned with a large enough
/// `struct_size` ([`check_out_struct`]).
///
/// # Safety
/// As [`check_out_struct`].
pub(crate) unsafe fn check_stats<T: OutStruct>(s: *const T) -> Result<()> {
    // SAFETY: forwarded caller contract.
    unsafe { check_out_struct(s, "stats") }.map(drop)
}

/// Validates a tier value that arrived from C.
pub(crate) fn isa_from_c(v: lshk_isa) -> Result<Isa> {
    Isa::from_u32(v).ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!("{v} is not an lshk_isa value (0..=3)"),
        )
    })
}

/// The name of a status code, e.g. `"LSHK_STATUS_NULL_POINTER"`; for a value
/// that is not a status code, `"LSHK_STATUS_UNKNOWN"`. Never NULL; the string
/// is static. Thread-safe.
#[no_mangle]
pub extern "C" fn lshk_status_name(status: lshk_status) -> *const libc::c_char {
    let s: &'static [u8] = match Status::from_code(status) {
        Some(s) => match s {
            Status::Ok => b"LSHK_STATUS_OK\0",
            Status::NullPointer => b"LSHK_STATUS_NULL_POINTER\0",
            Status::InvalidArgument => b"LSHK_STATUS_INVALID_ARGUMENT\0",
            Status::BufferTooSmall => b"LSHK_STATUS_BUFFER_TOO_SMALL\0",
            Status::IndexOutOfRange => b"LSHK_STATUS_INDEX_OUT_OF_RANGE\0",
            Status::UnsupportedIsa => b"LSHK_STATUS_UNSUPPORTED_ISA\0",
            Status::IoError => b"LSHK_STATUS_IO_ERROR\0",
            Status::BadFileFormat => b"LSHK_STATUS_BAD_FILE_FORMAT\0",
            Status::AllocationFailed => b"LSHK_STATUS_ALLOCATION_FAILED\0",
            Status::Panic => b"LSHK_STATUS_PANIC\0",
            Status::InvalidHandle => b"LSHK_STATUS_INVALID_HANDLE\0",
            Status::SizeOverflow => b"LSHK_STATUS_SIZE_OVERFLOW\0",
            Status::NonFinite => b"LSHK_STATUS_NON_FINITE\0",
            Status::Unsupported => b"LSHK_STATUS_UNSUPPORTED\0",
        },
        None => b"LSHK_STATUS_UNKNOWN\0",
    };
    s.as_ptr().cast()
}

/// Copies this thread's last error message into `buf` (NUL-terminated,
/// truncated to `buf_len - 1` bytes if the buffer is short) and returns the
/// full message length in bytes, excluding the NUL: call with
/// `buf = NULL, buf_len = 0` to learn the size needed. Returns 0 (and writes
/// an empty string when `buf_len > 0`) if no call on this thread has failed.
/// The message is kept until the next failure on the same thread.
///
/// # Safety
/// `buf` must point to `buf_len` writable bytes, or be NULL with `buf_len` 0.
#[no_mangle]
pub unsafe extern "C" fn lshk_last_error_message(buf: *mut libc::c_char, buf_len: usize) -> usize {
    boundary_value("lshk_last_error_message", 0, || {
        LAST_ERROR.with(|e| {
            let e = e.borrow();
            if !buf.is_null() && buf_len > 0 {
                let n = e.len().min(buf_len - 1);
                // SAFETY: `buf` holds `buf_len` writable bytes (caller
                // contract) and n + 1 <= buf_len.
                unsafe {
                    std::ptr::copy_nonoverlapping(e.as_ptr(), buf.cast::<u8>(), n);
                    *buf.add(n) = 0;
                }
            }
            e.len()
        })
    })
}

/// The library version, e.g. `"0.1.0"` (static string; equals
/// `LSHK_VERSION_STRING` of the header it was built with).
#[no_mangle]
pub extern "C" fn lshk_version() -> *const libc::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The best tier this CPU supports (ignores any cap).
#[no_mangle]
pub extern "C" fn lshk_isa_detected() -> lshk_isa {
    boundary_value("lshk_isa_detected", LSHK_ISA_SCALAR, || {
        isa::detected() as u32
    })
}

/// The tier kernels run on now: the detected tier, lowered by the
/// environment variable `LSHK_MAX_ISA` (read once, at the first call into
/// lshk) and by `lshk_isa_set_max`.
#[no_mangle]
pub extern "C" fn lshk_isa_active() -> lshk_isa {
    boundary_value("lshk_isa_active", LSHK_ISA_SCALAR, || isa::active() as u32)
}

/// Caps the tier for the whole process at `max`. The cap can be lowered or
/// raised again, but never above what `LSHK_MAX_ISA` allows or the CPU has
/// (asking for more than the CPU has is not an error: the tier stays at the
/// best available). Not meant to race with running kernels: a call in flight
/// finishes on the tier it started with.
///
/// Errors: `LSHK_STATUS_INVALID_ARGUMENT` if `max` is not an `LSHK_ISA_*`.
#[no_mangle]
pub extern "C" fn lshk_isa_set_max(max: lshk_isa) -> lshk_status {
    boundary("lshk_isa_set_max", || {
        let isa = isa_from_c(max)?;
        isa::set_max(isa);
        Ok(())
    })
}

/// The name of a tier (`"scalar"`, `"portable"`, `"avx2"`, `"avx512"`), or
/// `"unknown"`. Static string.
#[no_mangle]
pub extern "C" fn lshk_isa_name(isa: lshk_isa) -> *const libc::c_char {
    let s: &'static [u8] = match Isa::from_u32(isa) {
        Some(Isa::Scalar) => b"scalar\0",
        Some(Isa::Portable) => b"portable\0",
        Some(Isa::Avx2) => b"avx2\0",
        Some(Isa::Avx512) => b"avx512\0",
        None => b"unknown\0",
    };
    s.as_ptr().cast()
}
