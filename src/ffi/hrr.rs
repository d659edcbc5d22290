//! C entry points of holographic reduced representations (`lshk_hrr_*`):
//! binding, unbinding and projection by real FFTs, and the seeded
//! class-vector generator (see `crate::hrr`).

use super::*;
use crate::error::checked_mul;
use crate::hrr::{class_vectors, Hrr, Inverse, Scratch};

/// FFT plans and scratch buffers for vectors of one dimension d. A call
/// uses the handle's buffers, so a handle serves one thread at a time:
/// every function taking `lshk_hrr *` needs exclusive access (make one
/// handle per thread; lshk_hrr_new is cheap). Calls allocate nothing.
pub struct lshk_hrr {
    _private: [u8; 0],
}

/// lshk_hrr_unbind: the approximate inverse `x†_i = x_{-i mod d}`
/// (exact for projected keys).
pub const LSHK_HRR_INVERSE_APPROX: u32 = 0;
/// lshk_hrr_unbind: the exact inverse `ifft(1 / fft(x))`.
pub const LSHK_HRR_INVERSE_EXACT: u32 = 1;

const _: () = {
    assert!(LSHK_HRR_INVERSE_APPROX == Inverse::Approx as u32);
    assert!(LSHK_HRR_INVERSE_EXACT == Inverse::Exact as u32);
};

pub(crate) struct HrrHandle {
    hrr: Hrr,
    scratch: Scratch,
}

impl HandleKind for HrrHandle {
    const MAGIC: u64 = 0x5f52_5252_4b48_534c; // "LSHKHRR_"
    const NAME: &'static str = "lshk_hrr";
}

unsafe fn hrr_mut<'a>(h: *mut lshk_hrr) -> Result<&'a mut HrrHandle> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk, and not
    // used by another thread meanwhile).
    unsafe { handle_mut::<HrrHandle>(slot_mut(h), "h") }
}

fn new_handle(d: usize, isa: Option<Isa>, out: *mut *mut lshk_hrr) -> Result<()> {
    check_out(out)?;
    let hrr = match isa {
        Some(t) => Hrr::new_isa(d, t)?,
        None => Hrr::new(d)?,
    };
    let scratch = hrr.scratch()?;
    // SAFETY: `out` was checked non-NULL and aligned above.
    unsafe { *out = handle_new(HrrHandle { hrr, scratch }).cast() };
    Ok(())
}

/// Plans the transforms for vectors of `d` floats (1 <= d <= 2^24) and
/// allocates the handle's buffers; calls run on the active ISA tier (the
/// result does not depend on it: every tier returns the same bits). Free it
/// with lshk_hrr_free.
///
/// Errors: NULL_POINTER (`out`), INVALID_ARGUMENT (d 0 or above 2^24, a
/// misaligned `out`), ALLOCATION_FAILED.
#[no_mangle]
pub extern "C" fn lshk_hrr_new(d: usize, out: *mut *mut lshk_hrr) -> lshk_status {
    boundary("lshk_hrr_new", || new_handle(d, None, out))
}

/// As lshk_hrr_new, with every call of the handle on tier `isa` (for
/// tests and benchmarks).
///
/// Errors: as lshk_hrr_new, INVALID_ARGUMENT (`isa` not an LSHK_ISA_*
/// value), UNSUPPORTED_ISA (the CPU lacks the tier).
#[no_mangle]
pub extern "C" fn lshk_hrr_new_isa(
    d: usize,
    isa: lshk_isa,
    out: *mut *mut lshk_hrr,
) -> lshk_status {
    boundary("lshk_hrr_new_isa", || {
        let t = isa_from_c(isa)?;
        new_handle(d, Some(t), out)
    })
}

/// Releases a handle.
///
/// # Safety
/// `h` is NULL or a handle from lshk_hrr_new[_isa] no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn lshk_hrr_free(h: *mut lshk_hrr) -> lshk_status {
    boundary("lshk_hrr_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<HrrHandle>(slot_mut(h), "h") }
    })
}

/// The checks and slices of a two-operand call: `key` of `key_rows` rows
/// (1 or n), `s` and `out` of n rows of d floats, out disjoint from both.
///
/// # Safety
/// The pointers hold what the caller's contract says.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
unsafe fn pair_slices<'a>(
    d: usize,
    key: *const f32,
    key_rows: usize,
    key_name: &str,
    s: *const f32,
    n: usize,
    s_name: &str,
    out: *mut f32,
) -> Result<(&'a [f32], &'a [f32], &'a mut [f32])> {
    if key_rows != 1 && key_rows != n {
        bail!(
            InvalidArgument,
            "`{key_name}_rows` is {key_rows}; it must be 1 (one row for every row) or n = {n}"
        );
    }
    let kl = checked_mul(key_rows, d, "key_rows * d")?;
    let sl = checked_mul(n, d, "n * d")?;
    check_disjoint(
        &[span(out.cast_const(), sl, "out")?],
        &[span(key, kl, key_name)?, span(s, sl, s_name)?],
    )?;
    // SAFETY: caller contract: key holds key_rows * d floats, s and out
    // n * d, out writable and (checked) disjoint from the inputs.
    unsafe {
        Ok((
            slice_in(key, kl, key_name)?,
            slice_in(s, sl, s_name)?,
            slice_out(out, sl, "out")?,
        ))
    }
}

/// Binds row by row: `out_r = x_r ⊛ y_r`, the circular convolution
/// `real(ifft(fft(x_r) * fft(y_r)))`, for r < n; `x` holds `x_rows` rows
/// of d floats (1: the same row for every r; or n), `y` and `out` n rows
/// each (contiguous, d floats apart). n = 0 is a no-op.
///
/// Errors: NULL_POINTER (`h`, a buffer with n > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (x_rows not 1 or n, a misaligned buffer, `out`
/// overlapping an input), SIZE_OVERFLOW (n * d), NON_FINITE (NaN or
/// infinity in `x` or `y`).
///
/// # Safety
/// `x` holds x_rows * d readable floats, `y` n * d, `out` n * d writable
/// ones; no other thread uses `h`.
#[no_mangle]
pub unsafe extern "C" fn lshk_hrr_bind(
    h: *mut lshk_hrr,
    x: *const f32,
    x_rows: usize,
    y: *const f32,
    n: usize,
    out: *mut f32,
) -> lshk_status {
    boundary("lshk_hrr_bind", || {
        // SAFETY: forwarded caller contract.
        let hh = unsafe { hrr_mut(h)? };
        let d = hh.hrr.dim();
        // SAFETY: forwarded caller contract.
        let (x, y, out) = unsafe { pair_slices(d, x, x_rows, "x", y, n, "y", out)? };
        if n == 0 {
            return Ok(());
        }
        hh.hrr.bind(x, y, out, &mut hh.scratch)
    })
}

/// Unbinds row by row: `out_r = key_r† ⊛ s_r` for r < n, with `inverse`
/// LSHK_HRR_INVERSE_APPROX (`key†_i = key_{-i mod d}`: the spectrum
/// `conj(fft(key))`) or LSHK_HRR_INVERSE_EXACT (`ifft(fft(s_r) /
/// fft(key_r))`; where fft(key) has a zero frequency the output is NaN or
/// infinite). `key` holds `key_rows` rows (1 or n), `s` and `out` n rows.
///
/// Errors: as lshk_hrr_bind, and INVALID_ARGUMENT for an `inverse` that is
/// not an LSHK_HRR_INVERSE_* value.
///
/// # Safety
/// `key` holds key_rows * d readable floats, `s` n * d, `out` n * d
/// writable ones; no other thread uses `h`.
#[no_mangle]
pub unsafe extern "C" fn lshk_hrr_unbind(
    h: *mut lshk_hrr,
    inverse: u32,
    key: *const f32,
    key_rows: usize,
    s: *const f32,
    n: usize,
    out: *mut f32,
) -> lshk_status {
    boundary("lshk_hrr_unbind", || {
        // SAFETY: forwarded caller contract.
        let hh = unsafe { hrr_mut(h)? };
        let inv = Inverse::from_u32(inverse).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "inverse is {inverse}; it must be LSHK_HRR_INVERSE_APPROX (0) or _EXACT (1)"
                ),
            )
        })?;
        let d = hh.hrr.dim();
        // SAFETY: forwarded caller contract.
        let (key, s, out) = unsafe { pair_slices(d, key, key_rows, "key", s, n, "s", out)? };
        if n == 0 {
            return Ok(());
        }
        hh.hrr.unbind(inv, key, s, out, &mut hh.scratch)
    })
}

/// Projects n rows of d floats to unit magnitude in the Fourier domain:
/// `out_r = real(ifft(fft(x_r) / (|fft(x_r)| + 1e-5)))`.
///
/// Errors: NULL_POINTER (`h`, a buffer with n > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (a misaligned buffer, `out` overlapping `x`),
/// SIZE_OVERFLOW, NON_FINITE (in `x`).
///
/// # Safety
/// `x` holds n * d readable floats, `out` n * d writable ones; no other
/// thread uses `h`.
#[no_mangle]
pub unsafe extern "C" fn lshk_hrr_project(
    h: *mut lshk_hrr,
    x: *const f32,
    n: usize,
    out: *mut f32,
) -> lshk_status {
    boundary("lshk_hrr_project", || {
        // SAFETY: forwarded caller contract.
        let hh = unsafe { hrr_mut(h)? };
        let len = checked_mul(n, hh.hrr.dim(), "n * d")?;
        check_disjoint(
            &[span(out.cast_const(), len, "out")?],
            &[span(x, len, "x")?],
        )?;
        // SAFETY: caller contract; out checked disjoint from x.
        let (x, out) = unsafe { (slice_in(x, len, "x")?, slice_out(out, len, "out")?) };
        hh.hrr.project(x, out, &mut hh.scratch)
    })
}

/// Writes rows `first .. first + m` of the projected class vectors of
/// `(seed, d)` into `out` (m rows of d floats), on `threads` threads (0 =
/// every core, as many as the work pays for: each thread at least 4,096
/// coordinates, m * d; the result does not depend on it). Each row is a unit
/// vector whose spectrum has magnitude 1 at every frequency, with uniform
/// random phases (the distribution of projected Gaussian vectors). The
/// generator is frozen: the same arguments give the same bits in every
/// version, on every tier and platform (docs/hrr.md defines it). Needs no
/// handle. Costs O(d * (sum of the prime factors of d)) per row: a d with
/// a large prime factor is slow.
///
/// Errors: NULL_POINTER (`out` with m > 0), INVALID_ARGUMENT (d 0 or above
/// 2^24, a misaligned `out`), SIZE_OVERFLOW (m * d, or first + m above
/// 2^64), ALLOCATION_FAILED.
///
/// # Safety
/// `out` holds m * d writable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_hrr_class_vectors(
    seed: u64,
    d: usize,
    first: u64,
    m: usize,
    threads: u32,
    out: *mut f32,
) -> lshk_status {
    boundary("lshk_hrr_class_vectors", || {
        if d == 0 || d > crate::hrr::MAX_DIM {
            bail!(
                InvalidArgument,
                "d is {d}; it must be between 1 and {}",
                crate::hrr::MAX_DIM
            );
        }
        let len = checked_mul(m, d, "m * d")?;
        if first.checked_add(m as u64).is_none() {
            bail!(
                SizeOverflow,
                "rows {first} + {m} overflow the 64-bit row numbers"
            );
        }
        // SAFETY: caller contract: out holds m * d writable floats.
        let out = unsafe { slice_out(out, len, "out")? };
        class_vectors(seed, d, first, out, threads)
    })
}
