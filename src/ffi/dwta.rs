//! C entry points of the DWTA family (`lshk_dwta_*`).

use super::*;
use crate::source::lsh::hash::dwta::Dwta;

/// A DWTA (densified winner-take-all) bin-max hash family: L tables of K
/// bins, each bin B coordinates of the input (B a power of two in 2..=256,
/// K*log2(B) <= 32, K*L <= 2^20, 1 <= dim <= 2^31 - 1).
///
/// Bin j = l*K + k holds coordinates map[j*B .. j*B + B] (the bin map, K*L*B
/// indices in [0, dim); a map may repeat a coordinate). Its bin hash is the
/// position p in [0, B) of the largest value among its present coordinates;
/// ties go to the smallest p (so -0.0 and +0.0, equal, keep the earlier);
/// NaN never wins. Dense rows: every coordinate is present, and a bin whose
/// values are all NaN hashes to 0. Sparse (CSR) rows: only stored entries are
/// present (a stored 0.0 is present); a bin with no present non-NaN value is
/// empty and is densified: it takes the hash of the first non-empty bin
/// among probe(j, 1), ..., probe(j, 100), where
/// probe(j, a) = ((A*(128*j + a) + C) mod (2^61 - 1)) mod (K*L),
/// A = 0x1E3779B97F4A7C15, C = 0x0B58476D1CE4E5B9 (exact integer arithmetic;
/// a fixed 2-universal hash over all K*L bins), or 0 if all 100 probes are
/// empty. Only a bin's own entries make it a donor. A sparse row with no
/// entries gets all-zero keys.
///
/// The key of table l is sum over k of hash(l*K + k) << (k * log2(B)):
/// exactly K*log2(B) bits; higher bits are 0.
///
/// Memory: at most about 36*K*L*B + 804*K*L bytes (map, transposed and
/// inverse map, coordinate filter, densification probe tables), whatever
/// dim; hashing dense rows also keeps a per-thread scratch block of
/// 128*dim bytes when dim <= min(K*L*B, 2048).
pub struct lshk_dwta {
    _private: [u8; 0],
}

impl HandleKind for Dwta {
    const MAGIC: u64 = 0x4154_5744_4b48_534c; // "LSHKDWTA"
    const NAME: &'static str = "lshk_dwta";
}

unsafe fn dwta_ref<'a>(h: *const lshk_dwta) -> Result<&'a Dwta> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk).
    unsafe { handle_ref::<Dwta>(slot(h), "h") }
}

fn write_handle(out: *mut *mut lshk_dwta, h: Dwta) {
    // SAFETY: `out` was checked non-NULL and aligned (check_out_handle)
    // before any work was done.
    unsafe { *out = handle_new(h).cast() };
}

/// Creates a DWTA family of `tables` (L) tables of `bins_per_table` (K)
/// bins of `bin_size` (B) coordinates over `dim`-dimensional inputs, from
/// `seed`; free it with lshk_dwta_free.
///
/// The bin map is fixed for ever by the seed (same map, bit for bit, in
/// every version and on every platform): ceil(K*L*B / dim) independent
/// uniform permutations of [0, dim), concatenated and cut to K*L*B entries.
/// The generator is SplitMix64 seeded with `seed`; integers below n come
/// from Lemire's multiply-shift with rejection; each permutation is the
/// forward Fisher-Yates pass over a fresh array a = [0, 1, ..., dim-1]:
/// `for i = 0 .. dim-2: swap(a[i], a[i + below(dim - i)])`. Entry i is final
/// after step i, so the last permutation, of which only m entries are kept,
/// stops after its first min(m, dim-1) steps.
///
/// Errors: NULL_POINTER (`out`), INVALID_ARGUMENT (dim not in
/// 1..=2^31-1, bin_size not a power of two in 2..=256, K = 0,
/// K*log2(bin_size) > 32, L = 0, K*L > 2^20, `out` misaligned),
/// ALLOCATION_FAILED.
#[no_mangle]
pub extern "C" fn lshk_dwta_new(
    dim: u32,
    bins_per_table: u32,
    tables: u32,
    bin_size: u32,
    seed: u64,
    out: *mut *mut lshk_dwta,
) -> lshk_status {
    boundary("lshk_dwta_new", || {
        check_out(out)?;
        let h = Dwta::new(dim as usize, bins_per_table, tables, bin_size, seed)?;
        write_handle(out, h);
        Ok(())
    })
}

/// Creates a DWTA family from a caller-given bin map: `map` holds
/// `map_len` = K*L*bin_size coordinates, bin-major (bin j = l*K + k is
/// map[j*B .. j*B + B]), each < dim; repeats are allowed. The map is copied.
/// Same shape rules as lshk_dwta_new.
///
/// Errors: NULL_POINTER (`out`, or `map` with map_len > 0), INVALID_ARGUMENT
/// (shape as in lshk_dwta_new; map_len != K*L*B; `map` or `out`
/// misaligned), INDEX_OUT_OF_RANGE (an entry >= dim), SIZE_OVERFLOW,
/// ALLOCATION_FAILED.
///
/// # Safety
/// `map` must point to `map_len` readable u32.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_from_map(
    map: *const u32,
    map_len: usize,
    dim: u32,
    bins_per_table: u32,
    tables: u32,
    bin_size: u32,
    out: *mut *mut lshk_dwta,
) -> lshk_status {
    boundary("lshk_dwta_from_map", || {
        check_out(out)?;
        crate::source::lsh::hash::dwta::check_params(
            dim as usize,
            bins_per_table,
            tables,
            bin_size,
        )?;
        // SAFETY: caller contract: `map` holds map_len u32.
        let m = unsafe { slice_in(map, map_len, "map")? };
        let h = Dwta::from_map(m, dim as usize, bins_per_table, tables, bin_size)?;
        write_handle(out, h);
        Ok(())
    })
}

/// Releases a family.
///
/// # Safety
/// `h` is NULL or a handle from lshk_dwta_new/_from_map that no other thread
/// is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_free(h: *mut lshk_dwta) -> lshk_status {
    boundary("lshk_dwta_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Dwta>(slot_mut(h), "h") }
    })
}

/// Shape of a family: writes dim, K, L and B into the non-NULL pointers
/// among `dim`, `bins_per_table`, `tables`, `bin_size`.
///
/// Errors: NULL_POINTER (`h`), INVALID_HANDLE, INVALID_ARGUMENT (misaligned).
///
/// # Safety
/// Non-NULL output pointers must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_shape(
    h: *const lshk_dwta,
    dim: *mut u32,
    bins_per_table: *mut u32,
    tables: *mut u32,
    bin_size: *mut u32,
) -> lshk_status {
    boundary("lshk_dwta_shape", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { dwta_ref(h)? };
        // SAFETY: non-NULL outputs are writable (caller contract).
        unsafe {
            write_u32_outs(&[
                (dim, h.dim() as u32, "dim"),
                (bins_per_table, h.bins_per_table(), "bins_per_table"),
                (tables, h.tables(), "tables"),
                (bin_size, h.bin_size(), "bin_size"),
            ])
        }
    })
}

/// Copies the bin map (K*L*B coordinates, bin-major) into `out`
/// (`out_len` >= K*L*B). lshk_dwta_from_map of the copy gives the same
/// family.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, BUFFER_TOO_SMALL, INVALID_ARGUMENT
/// (`out` misaligned).
///
/// # Safety
/// `out` must hold `out_len` writable u32.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_copy_map(
    h: *const lshk_dwta,
    out: *mut u32,
    out_len: usize,
) -> lshk_status {
    boundary("lshk_dwta_copy_map", || {
        // SAFETY: forwarded caller contract.
        let h = unsafe { dwta_ref(h)? };
        let need = h.map().len();
        if out_len < need {
            bail!(
                BufferTooSmall,
                "out_len is {out_len}, the map needs K*L*B = {need} entries"
            );
        }
        // SAFETY: caller contract for `out`.
        let o = unsafe { slice_out(out, need, "out")? };
        o.copy_from_slice(h.map());
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn dense_impl(
    func: &str,
    tier: Option<lshk_isa>,
    h: *const lshk_dwta,
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
        let h = unsafe { dwta_ref(h)? };
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
        h.hash_dense_isa(tier, xs, n, x_stride, cs)
    })
}

/// Hashes `n` dense rows of `x` (row i at `x + i * x_stride`,
/// `x_stride >= dim` elements) into `codes[i * L + l]` (`codes_len` >= n*L):
/// the key of table l (see lshk_dwta for the bin hash and the key layout).
/// Any float is allowed (NaN never wins a bin; an all-NaN bin hashes to 0).
/// n = 0 is a no-op. Runs on the active tier (lshk_isa_active); every tier
/// gives identical keys.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (x_stride < dim,
/// misaligned pointers, `codes` overlapping `x`), SIZE_OVERFLOW,
/// BUFFER_TOO_SMALL (codes_len).
///
/// # Safety
/// `x` must hold (n-1)*x_stride + dim readable floats (or be NULL with
/// n = 0); `codes` must hold `codes_len` writable u32.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_hash_dense(
    h: *const lshk_dwta,
    x: *const f32,
    n: usize,
    x_stride: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        dense_impl(
            "lshk_dwta_hash_dense",
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

/// lshk_dwta_hash_dense on one chosen tier `isa` (for tests and
/// benchmarks). The tier cap (LSHK_MAX_ISA) does not apply here.
///
/// Errors: as lshk_dwta_hash_dense, plus INVALID_ARGUMENT (bad `isa`) and
/// UNSUPPORTED_ISA.
///
/// # Safety
/// As lshk_dwta_hash_dense.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_hash_dense_isa(
    isa: lshk_isa,
    h: *const lshk_dwta,
    x: *const f32,
    n: usize,
    x_stride: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        dense_impl(
            "lshk_dwta_hash_dense_isa",
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
unsafe fn sparse_impl(
    func: &str,
    tier: Option<lshk_isa>,
    h: *const lshk_dwta,
    indptr: *const usize,
    indices: *const u32,
    values: *const f32,
    n: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    boundary(func, || {
        let tier = match tier {
            Some(t) => isa_from_c(t)?,
            None => crate::isa::active(),
        };
        // SAFETY: forwarded caller contract.
        let h = unsafe { dwta_ref(h)? };
        if n == 0 {
            // Nothing to read or write; a tier the CPU lacks is still an
            // error, as on every other call.
            crate::isa::check_supported(tier)?;
            return Ok(());
        }
        let np1 = n
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "n + 1 overflows"))?;
        // SAFETY: caller contract: indptr holds n + 1 size_t.
        let ip = unsafe { slice_in(indptr, np1, "indptr")? };
        // indptr is checked in full before its last entry sizes the slices.
        if ip[0] != 0 {
            bail!(InvalidArgument, "indptr[0] is {}, it must be 0", ip[0]);
        }
        if let Some(i) = (0..n).find(|&i| ip[i + 1] < ip[i]) {
            bail!(
                InvalidArgument,
                "indptr decreases at row {i}: indptr[{i}] = {} > indptr[{}] = {}",
                ip[i],
                i + 1,
                ip[i + 1]
            );
        }
        let nnz = ip[n];
        // SAFETY: caller contract: indices and values hold indptr[n] entries.
        let idx = unsafe { slice_in(indices, nnz, "indices")? };
        let val = unsafe { slice_in(values, nnz, "values")? };
        let need = crate::error::checked_mul(n, h.tables() as usize, "n*L")?;
        if codes_len < need {
            bail!(
                BufferTooSmall,
                "codes_len is {codes_len}, {n} rows need n*L = {need}"
            );
        }
        check_disjoint(
            &[span(codes, need, "codes")?],
            &[
                span_of(ip, "indptr"),
                span_of(idx, "indices"),
                span_of(val, "values"),
            ],
        )?;
        // SAFETY: caller contract: codes holds codes_len u32.
        let cs = unsafe { slice_out(codes, need, "codes")? };
        h.hash_sparse_isa(tier, ip, idx, val, cs)
    })
}

/// Hashes `n` sparse rows in CSR form into `codes[i * L + l]`
/// (`codes_len` >= n*L). Row i's entries are `indices[k]`, `values[k]` for
/// k in `indptr[i] .. indptr[i+1]`; `indptr` holds n + 1 entries, starts at
/// 0 and never decreases; `indices` and `values` hold `indptr[n]` entries. In
/// each row the indices must strictly increase (sorted, no duplicates) and
/// be < dim. Values may be any float (a stored 0.0 is present; NaN never
/// wins). Empty bins are densified as described at lshk_dwta. n = 0 is a
/// no-op (indptr, indices, values and codes may then be NULL). Runs on the
/// active tier; every tier gives identical keys.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (`indptr[0] != 0`,
/// indptr decreasing, indices unsorted or duplicated within a row,
/// misaligned pointers, `codes` overlapping an input), INDEX_OUT_OF_RANGE
/// (an index >= dim), SIZE_OVERFLOW, BUFFER_TOO_SMALL (codes_len).
///
/// # Safety
/// `indptr` must hold n + 1 readable size_t; `indices` and `values`
/// `indptr[n]` readable elements; `codes` `codes_len` writable u32.
#[no_mangle]
pub unsafe extern "C" fn lshk_dwta_hash_sparse(
    h: *const lshk_dwta,
    indptr: *const usize,
    indices: *const u32,
    values: *const f32,
    n: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        sparse_impl(
            "lshk_dwta_hash_sparse",
            None,
            h,
            indptr,
            indices,
            values,
            n,
            codes,
            codes_len,
        )
    }
}

/// lshk_dwta_hash_sparse on one chosen tier `isa` (for tests and
/// benchmarks). The tier cap (LSHK_MAX_ISA) does not apply here.
///
/// Errors: as lshk_dwta_hash_sparse, plus INVALID_ARGUMENT (bad `isa`) and
/// UNSUPPORTED_ISA.
///
/// # Safety
/// As lshk_dwta_hash_sparse.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_dwta_hash_sparse_isa(
    isa: lshk_isa,
    h: *const lshk_dwta,
    indptr: *const usize,
    indices: *const u32,
    values: *const f32,
    n: usize,
    codes: *mut u32,
    codes_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        sparse_impl(
            "lshk_dwta_hash_sparse_isa",
            Some(isa),
            h,
            indptr,
            indices,
            values,
            n,
            codes,
            codes_len,
        )
    }
}
