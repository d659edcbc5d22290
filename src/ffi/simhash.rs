//! C entry points of the SimHash family (`lshk_simhash_*`).

use super::*;
use crate::source::lsh::hash::simhash::SimHash;

/// A SimHash family: L tables of K sign bits each, from K*L hyperplanes.
/// Immutable once created.
pub struct lshk_simhash {
    _private: [u8; 0],
}

impl HandleKind for SimHash {
    const MAGIC: u64 = 0x4853_4d49_534b_4853; // "SHKSIMSH"
    const NAME: &'static str = "lshk_simhash";
}

unsafe fn simhash_ref<'a>(h: *const lshk_simhash) -> Result<&'a SimHash> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk).
    unsafe { handle_ref::<SimHash>(slot(h), "h") }
}

fn write_handle(out: *mut *mut lshk_simhash, h: SimHash) {
    // SAFETY: `out` was checked non-NULL and aligned by the caller of this
    // helper before any work was done.
    unsafe { *out = handle_new(h).cast() };
}

/// Creates a SimHash family of `tables` (L) tables of `bits_per_table` (K)
/// bits over `dim`-dimensional inputs, from `seed`; free it with
/// lshk_simhash_free.
///
/// `sparsity`: 0 = dense Gaussian planes; 1 = dense ±1 planes; s >= 2 = each
/// plane has exactly ceil(dim / s) nonzero coordinates, chosen uniformly
/// without replacement, each ±1 (SLIDE uses s = 3); sparse planes are
/// evaluated with adds only.
///
/// The generator is fixed for ever (same seed, same planes, bit for bit, on
/// every tier, version and platform): SplitMix64; uniform (0,1) as
/// ((z >> 11) + 0.5) * 2^-53; integers below n by Lemire's multiply-shift
/// with rejection; normals by Marsaglia's polar method in f64 with fdlibm's
/// log (both values of each pair used, in order), rounded to f32. Dense
/// planes are drawn row-major (plane 0 coordinates 0..dim, then plane 1...);
/// a ±1 sign is -1 when the top bit of a 64-bit draw is set. A sparse plane
/// picks its coordinates by a partial Fisher-Yates pass over 0..dim
/// (for i in 0..nnz: swap a[i], a[i + below(dim - i)]), then draws one sign
/// per chosen coordinate in that order.
///
/// Errors: NULL_POINTER (`out`), INVALID_ARGUMENT (dim 0, K not in 1..=32,
/// L 0), SIZE_OVERFLOW (K*L*dim), ALLOCATION_FAILED (also, up front, when
/// the planes and their packed copy, `8 * K*L*dim` bytes, would exceed the
/// machine's physical memory).
#[no_mangle]
pub extern "C" fn lshk_simhash_new(
    dim: u32,
    bits_per_table: u32,
    tables: u32,
    sparsity: u32,
    seed: u64,
    out: *mut *mut lshk_simhash,
) -> lshk_status {
    boundary("lshk_simhash_new", || {
        check_out(out)?;
        let h = SimHash::new(dim as usize, bits_per_table, tables, sparsity, seed)?;
        write_handle(out, h);
        Ok(())
    })
}

/// Creates a SimHash family from caller-given hyperplanes: `planes` holds
/// K*L rows of `dim` floats, row-major (plane l*K + k decides bit k of table
/// l). The planes are copied. They must be finite.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (shape as in lshk_simhash_new),
/// SIZE_OVERFLOW, NON_FINITE (a NaN or infinite plane value),
/// ALLOCATION_FAILED.
///
/// # Safety
/// `planes` must point to K*L*dim readable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_from_planes(
    planes: *const f32,
    dim: u32,
    bits_per_table: u32,
    tables: u32,
    out: *mut *mut lshk_simhash,
) -> lshk_status {
    boundary("lshk_simhash_from_planes", || {
        check_out(out)?;
        if dim == 0 || bits_per_table == 0 || bits_per_table > 32 || tables == 0 {
            // Let SimHash produce the precise message.
            SimHash::from_planes(&[], dim as usize, bits_per_table, tables)?;
        }
        let n = crate::error::checked_mul(
            crate::error::checked_mul(bits_per_table as usize, tables as usize, "K*L")?,
            dim as usize,
            "K*L*dim",
        )?;
        // SAFETY: caller contract: `planes` holds K*L*dim floats.
        let p = unsafe { slice_in(planes, n, "planes")? };
        let h = SimHash::from_planes(p, dim as usize, bits_per_table, tables)?;
        write_handle(out, h);
        Ok(())
    })
}

/// Releases a family.
///
/// # Safety
/// `h` is NULL or a handle from lshk_simhash_new/_from_planes that no other
/// thread is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_free(h: *mut lshk_simhash) -> lshk_status {
    boundary("lshk_simhash_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<SimHash>(slot_mut(h), "h") }
    })
}

/// Shape of a family: writes dim, K and L into the non-NULL pointers among
/// `dim`, `bits_per_table`, `tables`.
///
/// Errors: NULL_POINTER (`h`), INVALID_HANDLE, INVALID_ARGUMENT (misaligned).
///
/// # Safety
/// Non-NULL output pointers must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_shape(
    h: *const lshk_simhash,
    dim: *mut u32,
    bits_per_table: *mut u32,
    tables: *mut u32,
) -> lshk_status {
    boundary("lshk_simhash_shape", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { simhash_ref(h)? };
        // Every output is checked before any is written: a misaligned
        // pointer must never be dereferenced (UB, an abort in debug builds).
        // SAFETY: non-NULL outputs are writable (caller contract).
        unsafe {
            write_u32_outs(&[
                (dim, h.dim() as u32, "dim"),
                (bits_per_table, h.bits(), "bits_per_table"),
                (tables, h.tables(), "tables"),
            ])
        }
    })
}

/// Copies the K*L x dim planes (row-major) into `out` (`out_len` >= K*L*dim
/// floats). Sparse families give their ±1/0 values.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, BUFFER_TOO_SMALL.
///
/// # Safety
/// `out` must hold `out_len` writable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_copy_planes(
    h: *const lshk_simhash,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    boundary("lshk_simhash_copy_planes", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { simhash_ref(h)? };
        let need = h.planes().len();
        if out_len < need {
            bail!(
                BufferTooSmall,
                "out_len is {out_len}, the planes need {need} floats"
            );
        }
        // SAFETY: caller contract for `out`.
        let o = unsafe { slice_out(out, need, "out")? };
        o.copy_from_slice(h.planes());
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn hash_impl(
    func: &str,
    tier: Option<lshk_isa>,
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    boundary(func, || {
        let tier = match tier {
            Some(t) => isa_from_c(t)?,
            None => crate::isa::active(),
        };
        // SAFETY: forwarded caller contract.
        let h = unsafe { simhash_ref(h)? };
        let xl = strided_len(n, h.dim(), x_stride, "x")?;
        let need = crate::error::checked_mul(n, h.tables() as usize, "n*L")?;
        if codes_len < need {
            bail!(
                BufferTooSmall,
                "codes_len is {codes_len}, {n} rows need n*L = {need}"
            );
        }
        // SAFETY: caller contract: x spans (n-1)*x_stride + dim floats,
        // codes holds codes_len u32.
        let xs = unsafe { slice_in(x, xl, "x")? };
        check_disjoint(&[span(codes, need, "codes")?], &[span(x, xl, "x")?])?;
        // SAFETY: caller contract (codes_len >= need writable u32), disjoint
        // from x (checked).
        let cs = unsafe { slice_out(codes, need, "codes")? };
        h.hash_isa(tier, xs, n, x_stride, cs)
    })
}

/// Hashes `n` rows of `x` (row i at `x + i * x_stride`, `x_stride >= dim`
/// elements) into `codes[i * L + l]`: bit k of that code (k = 0 the least
/// significant) is 1 exactly when `dot(x_i, plane[l*K + k]) > 0`; a NaN
/// projection gives 0; bits above K are 0. `codes_len` >= n*L. n = 0 is a
/// no-op. Runs on the active tier (lshk_isa_active).
///
/// Tiers sum in different orders, so a bit whose projection lies within
/// float rounding of zero (|error| <= dim * 2^-24 * sum|x_j||plane_j|) may
/// differ between tiers; every other bit is identical.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// `codes` overlapping `x`), SIZE_OVERFLOW, BUFFER_TOO_SMALL (codes_len).
///
/// # Safety
/// `x` must hold (n-1)*x_stride + dim readable floats (or be NULL with
/// n = 0); `codes` must hold `codes_len` writable u32.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_hash(
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hash_impl(
            "lshk_simhash_hash",
            None,
            h,
            x,
            n,
            x_stride,
            codes,
            codes_len,
        )
    }
}

/// lshk_simhash_hash on one chosen tier `isa` (for tests and benchmarks).
///
/// Errors: as lshk_simhash_hash, plus INVALID_ARGUMENT (not an LSHK_ISA_*)
/// and UNSUPPORTED_ISA (this CPU lacks the tier). The tier cap
/// (LSHK_MAX_ISA) does not apply here.
///
/// # Safety
/// As lshk_simhash_hash.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_hash_isa(
    isa: lshk_isa,
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        hash_impl(
            "lshk_simhash_hash_isa",
            Some(isa),
            h,
            x,
            n,
            x_stride,
            codes,
            codes_len,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn project_impl(
    func: &str,
    tier: Option<lshk_isa>,
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    boundary(func, || {
        let tier = match tier {
            Some(t) => isa_from_c(t)?,
            None => crate::isa::active(),
        };
        // SAFETY: forwarded caller contract.
        let h = unsafe { simhash_ref(h)? };
        let xl = strided_len(n, h.dim(), x_stride, "x")?;
        let need = crate::error::checked_mul(n, h.num_planes(), "n*K*L")?;
        if out_len < need {
            bail!(
                BufferTooSmall,
                "out_len is {out_len}, {n} rows need n*K*L = {need}"
            );
        }
        // SAFETY: caller contract for x and out.
        let xs = unsafe { slice_in(x, xl, "x")? };
        check_disjoint(&[span(out, need, "out")?], &[span(x, xl, "x")?])?;
        // SAFETY: caller contract (out_len >= need writable floats), disjoint
        // from x (checked).
        let os = unsafe { slice_out(out, need, "out")? };
        h.project_isa(tier, xs, n, x_stride, os)
    })
}

/// The raw projections: `out[i * K*L + p] = dot(x_i, plane_p)` for the
/// K*L planes (for multi-probing and for learning hyperplanes). `out_len`
/// >= n*K*L. Same rows, errors and thread-safety as lshk_simhash_hash.
///
/// # Safety
/// As lshk_simhash_hash, with `out` holding `out_len` writable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_project(
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        project_impl(
            "lshk_simhash_project",
            None,
            h,
            x,
            n,
            x_stride,
            out,
            out_len,
        )
    }
}

/// lshk_simhash_project on one chosen tier (see lshk_simhash_hash_isa).
///
/// # Safety
/// As lshk_simhash_project.
#[no_mangle]
pub unsafe extern "C" fn lshk_simhash_project_isa(
    isa: lshk_isa,
    h: *const lshk_simhash,
    x: *const f32,
    n: usize,
    x_stride: usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        project_impl(
            "lshk_simhash_project_isa",
            Some(isa),
            h,
            x,
            n,
            x_stride,
            out,
            out_len,
        )
    }
}
