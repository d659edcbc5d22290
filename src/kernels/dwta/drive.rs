//! The x86 tiers' shared plumbing: an ISA file provides only its vectors
//! ([`Lanes`]: the key block fill, the bin-position step, the 16-bin group
//! and the sparse filter test); the row-block choice, the rows-in-lanes
//! bin loop, the bins-in-lanes row loop, the sparse chunk loop, their
//! scratch and the entry points ([`entries!`]) are here,
//! `#[inline(always)]`, and compile inside each tier's
//! `#[target_feature]` functions with that tier's instructions.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{fold_entries, fold_entry, pack_keys, use_row_blocks, BinState, DwtaView, GROUP};

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// Rows of the widest row block of every tier.
const MAX_ROWS: usize = 32;

/// A SIMD tier's vectors: all that an ISA file provides.
pub(super) trait Lanes {
    /// A vector of `LANES` i32.
    type K: Copy;
    /// i32 lanes of `K` (rows per vector, entries per sparse chunk).
    const LANES: usize;
    /// # Safety (every method)
    /// The caller enables the tier's target features; pointers are valid
    /// for what each method reads or writes.
    unsafe fn zero() -> Self::K;
    /// `i32::MIN` in every lane.
    unsafe fn min() -> Self::K;
    /// Position `p` (< 256) in every lane.
    unsafe fn position(p: usize) -> Self::K;
    unsafe fn load(p: *const i32) -> Self::K;
    unsafe fn store(p: *mut u32, v: Self::K);
    /// One bin position: where `val > mx` (strictly), `pos = pv`; then
    /// `mx = max(mx, val)`.
    unsafe fn update(val: Self::K, mx: &mut Self::K, pos: &mut Self::K, pv: Self::K);
    /// `code | (pos << sh)`.
    unsafe fn shl_or(code: Self::K, pos: Self::K, sh: __m128i) -> Self::K;
    /// Writes the order-preserving keys ([`super::ordered_key`]) of `rr`
    /// rows of `x` (`dim` floats each, `stride` apart) into
    /// `block[c * w + r]` for every coordinate `c`; lanes of rows `>= rr`
    /// hold keys whose results are never stored.
    unsafe fn fill_block(
        x: *const f32,
        stride: usize,
        rr: usize,
        dim: usize,
        block: *mut i32,
        w: usize,
    );
    /// Bin hashes of the [`GROUP`] bins whose transposed map (`bs` rows of
    /// `GROUP` coordinates, each `< dim`) starts at `base`, for the row at
    /// `row`, stored to `out[..GROUP]` (bins in lanes).
    unsafe fn group(row: *const f32, base: *const i32, bs: usize, out: *mut u32);
    /// Bit `u` set when entry `u < LANES` of `idx`/`val` may touch a bin:
    /// its coordinate-filter bit is set and its value is not NaN.
    unsafe fn hits(idx: *const u32, val: *const f32, filter: *const i32, shift: __m128i) -> u32;
}

/// A tier's `#[target_feature]` functions ([`entries!`] writes them).
pub(super) trait Entry {
    /// # Safety
    /// As [`rows`].
    unsafe fn rows<const V: usize>(
        h: &DwtaView<'_>,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
    );
    /// # Safety
    /// As [`bins`].
    unsafe fn bins(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]);
}

/// The dense entry point: bins in lanes unless [`use_row_blocks`];
/// otherwise, by measured cost, one row with bins in lanes and several in
/// the smallest row block (`LANES`, `2 * LANES` or up to 32 rows) that
/// holds the rows left.
///
/// # Safety
/// See [`super::DenseFn`]; the CPU supports the tier of `S`.
#[inline(always)]
pub(super) unsafe fn dense<S: Lanes + Entry>(
    h: &DwtaView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
) {
    if !use_row_blocks(h) {
        // SAFETY: the caller guarantees the DenseFn contract: the CPU has
        // the tier's features and the lengths were checked.
        unsafe { S::bins(h, x, n, stride, codes) };
        return;
    }
    let l = h.tables() as usize;
    let w = S::LANES;
    let mut i = 0;
    while i < n {
        let r = n - i;
        let (xs, cs) = (&x[i * stride..], &mut codes[i * l..]);
        // SAFETY: as above; rows i.. of x and codes exist (checked lengths).
        let done = unsafe {
            match r {
                1 => S::bins(h, xs, 1, stride, cs),
                _ if r <= w => S::rows::<1>(h, xs, r, stride, cs),
                _ if 2 * w >= MAX_ROWS || r <= 2 * w => {
                    S::rows::<2>(h, xs, r.min(MAX_ROWS), stride, cs)
                }
                _ => S::rows::<4>(h, xs, r.min(MAX_ROWS), stride, cs),
            }
            r.min(MAX_ROWS)
        };
        i += done;
    }
}

/// Rows in lanes: `V * LANES` rows at a time in a `dim x (V * LANES)`
/// block of keys; per bin position one scalar map load and `V` contiguous
/// vector loads. Keys are packed in registers and stored per table.
///
/// # Safety
/// See [`super::DenseFn`], with `n <= V * LANES <= 32`; the caller enables
/// S's features.
#[inline(always)]
pub(super) unsafe fn rows<S: Lanes, const V: usize>(
    h: &DwtaView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
) {
    let w = V * S::LANES;
    assert!(w <= MAX_ROWS);
    let (dim, bs) = (h.dim(), h.bin_size() as usize);
    let (k, l, lb) = (
        h.bins_per_table() as usize,
        h.tables() as usize,
        h.log2_bin_size(),
    );
    let map = h.map();
    // SAFETY: used within this call only (`tls_cell`).
    let mut block = unsafe { crate::kernels::tls_cell(&BLOCK) }.borrow_mut();
    if block.len() < dim * w {
        block.resize(dim * w, i32::MIN);
    }
    let bp = block.as_mut_ptr();
    let mut tmp = [0u32; MAX_ROWS];
    let mut i0 = 0;
    while i0 < n {
        let rr = (n - i0).min(w);
        // SAFETY: rows i0..i0+rr exist (checked lengths); block holds
        // dim*w keys; every map entry is < dim; codes holds n*L values;
        // tmp holds w <= 32 values.
        unsafe {
            S::fill_block(x.as_ptr().add(i0 * stride), stride, rr, dim, bp, w);
            for t in 0..l {
                let mut code = [S::zero(); V];
                for kk in 0..k {
                    let bin = map.as_ptr().add((t * k + kk) * bs);
                    let mut mx = [S::min(); V];
                    let mut pos = [S::zero(); V];
                    for p in 0..bs {
                        let c = *bin.add(p) as usize;
                        let pv = S::position(p);
                        for v in 0..V {
                            let val = S::load(bp.add(c * w + v * S::LANES));
                            S::update(val, &mut mx[v], &mut pos[v], pv);
                        }
                    }
                    let sh = _mm_cvtsi32_si128((kk as u32 * lb) as i32);
                    for v in 0..V {
                        code[v] = S::shl_or(code[v], pos[v], sh);
                    }
                }
                for (v, cv) in code.iter().enumerate() {
                    S::store(tmp.as_mut_ptr().add(v * S::LANES), *cv);
                }
                for (r, &cv) in tmp.iter().enumerate().take(rr) {
                    *codes.get_unchecked_mut((i0 + r) * l + t) = cv;
                }
            }
        }
        i0 += rr;
    }
}

/// Bins in lanes: per row, each group of [`GROUP`] bins through
/// [`Lanes::group`], then the keys packed.
///
/// # Safety
/// See [`super::DenseFn`]; the caller enables S's features.
#[inline(always)]
pub(super) unsafe fn bins<S: Lanes>(
    h: &DwtaView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
) {
    let (bs, groups, l) = (h.bin_size() as usize, h.num_groups(), h.tables() as usize);
    let mt = h.map_t().as_ptr();
    // SAFETY: used within this call only (`tls_cell`).
    let mut hash = unsafe { crate::kernels::tls_cell(&HASH) }.borrow_mut();
    hash.resize(groups * GROUP, 0);
    for i in 0..n {
        // SAFETY: row i < n starts at i*stride and holds dim floats
        // (checked); map_t holds groups*bs*16 coordinates < dim; hash
        // holds groups*16 u32.
        unsafe {
            let row = x.as_ptr().add(i * stride);
            for g in 0..groups {
                S::group(
                    row,
                    mt.add(g * bs * GROUP),
                    bs,
                    hash.as_mut_ptr().add(g * GROUP),
                );
            }
        }
        pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
    }
}

/// Folds a sparse row's entries into the bins: `LANES` entries at a time
/// are tested against the coordinate filter ([`Lanes::hits`]); only the
/// hits are folded, one after the other ([`fold_entry`]); the tail one by
/// one.
///
/// # Safety
/// Every index is `< dim` (validated CSR); the caller enables S's
/// features.
#[inline(always)]
pub(super) unsafe fn fold<S: Lanes>(h: &DwtaView<'_>, idx: &[u32], val: &[f32], st: &mut BinState) {
    let filter = h.filter().as_ptr().cast::<i32>();
    // SAFETY: register-only SSE2, part of every x86-64 target.
    let shift = unsafe { _mm_cvtsi32_si128(h.filter_shift() as i32) };
    let w = S::LANES;
    let chunks = idx.len() / w;
    for c in 0..chunks {
        // SAFETY: c*w + w <= len for idx and val; a filter bit is below
        // 2^(32 - shift) = 32 * filter.len(), so its word is in bounds.
        let mut m = unsafe {
            S::hits(
                idx.as_ptr().add(c * w),
                val.as_ptr().add(c * w),
                filter,
                shift,
            )
        };
        while m != 0 {
            let u = c * w + m.trailing_zeros() as usize;
            m &= m - 1;
            fold_entry(h, idx[u], val[u], st);
        }
    }
    fold_entries(h, &idx[chunks * w..], &val[chunks * w..], st);
}

/// A tier's `dense` and `sparse` entry points and its `#[target_feature]`
/// functions (row blocks, bins in lanes, sparse fold), written at the call
/// as their attributes (the `#[target_feature]` among them, so that each
/// function and its features stand literally in the ISA file) and
/// `unsafe fn rows = rows(LANES);`, `unsafe fn bins = bins(LANES);`,
/// `unsafe fn fold = fold(LANES);`: the bodies monomorphise the drivers
/// above over the tier's lanes.
macro_rules! entries {
    (
        $(#[$rm:meta])*
        unsafe fn rows = rows($lanes:ident);
        $(#[$bm:meta])*
        unsafe fn bins = bins($blanes:ident);
        $(#[$fm:meta])*
        unsafe fn fold = fold($flanes:ident);
    ) => {
        $(#[$rm])*
        unsafe fn rows<const V: usize>(
            h: &DwtaView<'_>,
            x: &[f32],
            n: usize,
            stride: usize,
            codes: &mut [u32],
        ) {
            // SAFETY: forwarded contract; this function enables the features.
            unsafe { super::drive::rows::<$lanes, V>(h, x, n, stride, codes) }
        }

        $(#[$bm])*
        unsafe fn bins(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
            // SAFETY: forwarded contract; this function enables the features.
            unsafe { super::drive::bins::<$blanes>(h, x, n, stride, codes) }
        }

        $(#[$fm])*
        unsafe fn fold(h: &DwtaView<'_>, idx: &[u32], val: &[f32], st: &mut super::BinState) {
            // SAFETY: forwarded contract; this function enables the features.
            unsafe { super::drive::fold::<$flanes>(h, idx, val, st) }
        }

        impl super::drive::Entry for $lanes {
            #[inline(always)]
            unsafe fn rows<const V: usize>(
                h: &DwtaView<'_>,
                x: &[f32],
                n: usize,
                stride: usize,
                codes: &mut [u32],
            ) {
                // SAFETY: forwarded contract.
                unsafe { rows::<V>(h, x, n, stride, codes) }
            }
            #[inline(always)]
            unsafe fn bins(
                h: &DwtaView<'_>,
                x: &[f32],
                n: usize,
                stride: usize,
                codes: &mut [u32],
            ) {
                // SAFETY: forwarded contract.
                unsafe { bins(h, x, n, stride, codes) }
            }
        }

        /// # Safety
        /// See [`super::DenseFn`].
        pub unsafe fn dense(
            h: &DwtaView<'_>,
            x: &[f32],
            n: usize,
            stride: usize,
            codes: &mut [u32],
        ) {
            // SAFETY: forwarded contract (the CPU has the tier's features,
            // checked by Dwta::hash_dense_isa).
            unsafe { super::drive::dense::<$lanes>(h, x, n, stride, codes) }
        }

        /// # Safety
        /// See [`super::SparseFn`].
        pub unsafe fn sparse(
            h: &DwtaView<'_>,
            indptr: &[usize],
            indices: &[u32],
            values: &[f32],
            codes: &mut [u32],
        ) {
            super::sparse_rows(h, indptr, indices, values, codes, |h, idx, val, st| {
                // SAFETY: as in `dense`; every index is < dim (validated CSR).
                unsafe { fold(h, idx, val, st) }
            });
        }
    };
}
pub(super) use entries;
