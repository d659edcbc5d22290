//! The x86 tiers' shared plumbing: an ISA file provides only its vectors
//! ([`Lanes`]: a 16-plane panel row, the sparse block's signed sums and
//! sign masks); the register-blocked dense tile and its row/panel driver,
//! the sparse block driver (transpose of the rows, plane loop, codes) and
//! the entry points ([`entries!`]) are here, `#[inline(always)]`, and
//! compile inside each tier's `#[target_feature]` functions with that
//! tier's instructions.

use std::cell::RefCell;

use super::{emit_codes, words_per_row};
use super::{Planes, SparseView, PANEL};

/// Rows of the sparse scratch block (the widest block of every tier).
const SPARSE_ROWS: usize = 32;

thread_local! {
    static BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// A SIMD tier's vectors: all that an ISA file provides.
pub(super) trait Lanes {
    /// An f32 vector.
    type V: Copy;
    /// One row of a 16-plane panel (16 floats: one or two `V`).
    type P: Copy;
    /// f32 lanes of `V`.
    const LANES: usize;
    /// # Safety (every method)
    /// The caller enables the tier's target features; pointers are valid
    /// for what each method reads or writes.
    unsafe fn zero_panel() -> Self::P;
    /// The 16 floats at `p` (64-byte aligned).
    unsafe fn load_panel(p: *const f32) -> Self::P;
    unsafe fn splat(v: f32) -> Self::V;
    /// `x * w + acc` per plane, fused.
    unsafe fn fmadd_panel(x: Self::V, w: Self::P, acc: Self::P) -> Self::P;
    /// Bit `i` set when plane `i` of `a` is `> 0` (`_CMP_GT_OQ`: NaN
    /// gives 0).
    unsafe fn panel_signs(a: Self::P) -> u32;
    /// Stores the first `lanes` (1..=16) planes of `a` at `dst`.
    unsafe fn store_panel(a: Self::P, dst: *mut f32, lanes: usize);
    /// `Σ block[plus] - Σ block[minus]` over block rows of `Q * LANES`
    /// floats (each index `< dim`, the block `dim` rows).
    unsafe fn signed_sum<const Q: usize>(
        block: *const f32,
        plus: &[u32],
        minus: &[u32],
    ) -> [Self::V; Q];
    /// Stores `LANES` floats at `dst`.
    unsafe fn storeu(v: Self::V, dst: *mut f32);
    /// Bit `i` set when lane `i` of `v` is `> 0` (NaN gives 0).
    unsafe fn signs(v: Self::V) -> u32;
    /// Records the sign mask of plane `p` of `np` (bit `r` = row `r < rr`)
    /// into the rows' bit strings at `bits` (`words` per row, cleared at
    /// the start of the block); `masks` is scratch kept across the planes
    /// of one block.
    unsafe fn put_plane(
        masks: &mut [u32; 64],
        mask: u32,
        p: usize,
        np: usize,
        rr: usize,
        bits: *mut u64,
        words: usize,
    );
}

/// Pointers shared by the tiles of one call.
#[derive(Clone, Copy)]
struct Ctx {
    dim: usize,
    stride: usize,
    pk: *const f32,
    np: usize,
    words: usize,
}

/// One RR x PP tile: rows `x .. x + RR*stride`, panels `panel0 ..
/// panel0 + PP`. Writes sign bits into `bits[r*words ..]` or projections
/// into `out[r*np ..]`.
#[inline(always)]
unsafe fn tile<S: Lanes, const RR: usize, const PP: usize, const PROJ: bool>(
    c: Ctx,
    x: *const f32,
    panel0: usize,
    bits: *mut u64,
    out: *mut f32,
) {
    // SAFETY (whole body): panels panel0..panel0+PP exist in `pk` (caller),
    // rows 0..RR of x hold `dim` readable values each (checked lengths), and
    // bits/out have RR rows of `words`/`np` entries (caller); the caller
    // enables S's features.
    unsafe {
        let mut acc = [[S::zero_panel(); PP]; RR];
        let panel_len = c.dim * PANEL;
        let base = c.pk.add(panel0 * panel_len);
        for j in 0..c.dim {
            let mut w = [S::zero_panel(); PP];
            for (p, wp) in w.iter_mut().enumerate() {
                *wp = S::load_panel(base.add(p * panel_len + j * PANEL));
            }
            for (r, ar) in acc.iter_mut().enumerate() {
                let xb = S::splat(*x.add(r * c.stride + j));
                for p in 0..PP {
                    ar[p] = S::fmadd_panel(xb, w[p], ar[p]);
                }
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            for (p, a) in ar.iter().enumerate() {
                let panel = panel0 + p;
                if PROJ {
                    let lanes = (c.np - panel * PANEL).min(PANEL);
                    S::store_panel(*a, out.add(r * c.np + panel * PANEL), lanes);
                } else {
                    let m = S::panel_signs(*a);
                    let bit = panel * PANEL;
                    *bits.add(r * c.words + bit / 64) |= (m as u64) << (bit % 64);
                }
            }
        }
    }
}

/// Runs `tile::<rr, PP>` for a runtime row count `rr` in `1..=ROWS`
/// (`ROWS` of 4 or 6; the guards fold at compile time).
#[inline(always)]
unsafe fn tile_rows<S: Lanes, const ROWS: usize, const PP: usize, const PROJ: bool>(
    rr: usize,
    c: Ctx,
    x: *const f32,
    panel0: usize,
    bits: *mut u64,
    out: *mut f32,
) {
    // SAFETY: forwarded; rr <= ROWS rows exist (caller).
    unsafe {
        match rr {
            1 => tile::<S, 1, PP, PROJ>(c, x, panel0, bits, out),
            2 => tile::<S, 2, PP, PROJ>(c, x, panel0, bits, out),
            3 => tile::<S, 3, PP, PROJ>(c, x, panel0, bits, out),
            4 if ROWS > 4 => tile::<S, 4, PP, PROJ>(c, x, panel0, bits, out),
            5 if ROWS > 5 => tile::<S, 5, PP, PROJ>(c, x, panel0, bits, out),
            _ => tile::<S, ROWS, PP, PROJ>(c, x, panel0, bits, out),
        }
    }
}

/// Dense planes: `ROWS` rows at a time; a single row takes `ONE` panels
/// per tile, several rows `WIDE` panels per tile while `WIDE` are left
/// (when `WIDE > 1`), then one.
///
/// # Safety
/// The [`super::HashFn`] contract (`out` with `n * K*L` values when
/// `PROJ`, `codes` with `n * L` otherwise); the caller enables S's
/// features.
#[inline(always)]
pub(super) unsafe fn dense<
    S: Lanes,
    const ROWS: usize,
    const ONE: usize,
    const WIDE: usize,
    const PROJ: bool,
>(
    h: &Planes<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let npanels = h.num_panels();
    let c = Ctx {
        dim: h.dim(),
        stride,
        pk: h.packed().as_ptr(),
        np: h.num_planes(),
        words: words_per_row(npanels),
    };
    let (k, l) = (h.bits(), h.tables() as usize);
    // SAFETY: used within this call only (`tls_cell`).
    let mut bits = unsafe { crate::kernels::tls_cell(&BITS) }.borrow_mut();
    if bits.len() < ROWS * c.words {
        bits.resize(ROWS * c.words, 0);
    }
    let mut i = 0;
    while i < n {
        let rr = (n - i).min(ROWS);
        bits[..rr * c.words].fill(0);
        // SAFETY: row i + rr - 1 < n exists in x (checked); out has n
        // rows of np values when PROJ (checked); bits holds ROWS rows.
        unsafe {
            let xr = x.as_ptr().add(i * stride);
            let bp = bits.as_mut_ptr();
            let op = if PROJ {
                out.as_mut_ptr().add(i * c.np)
            } else {
                std::ptr::null_mut()
            };
            let mut p = 0;
            if rr == 1 {
                while p + ONE <= npanels {
                    tile::<S, 1, ONE, PROJ>(c, xr, p, bp, op);
                    p += ONE;
                }
            }
            if WIDE > 1 {
                while p + WIDE <= npanels {
                    tile_rows::<S, ROWS, WIDE, PROJ>(rr, c, xr, p, bp, op);
                    p += WIDE;
                }
            }
            while p < npanels {
                tile_rows::<S, ROWS, 1, PROJ>(rr, c, xr, p, bp, op);
                p += 1;
            }
        }
        if !PROJ {
            for r in 0..rr {
                emit_codes(&bits[r * c.words..], k, l as u32, &mut codes[(i + r) * l..]);
            }
        }
        i += rr;
    }
}

/// Sparse planes, `Q * LANES` rows at a time: the rows are transposed into
/// a `dim x (Q * LANES)` block (padding rows zero), then each plane's
/// signed sum of block rows gives its projections or sign mask.
///
/// # Safety
/// As [`dense`], with `sp` the sparse view of `h`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sparse_block<S: Lanes, const Q: usize, const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let rows_per_block = S::LANES * Q;
    assert!(rows_per_block <= SPARSE_ROWS);
    let dim = h.dim();
    let np = h.num_planes();
    let words = np.div_ceil(64);
    let (k, l) = (h.bits(), h.tables() as usize);
    // SAFETY: used within this call only (`tls_cell`).
    let mut block = unsafe { crate::kernels::tls_cell(&BLOCK) }.borrow_mut();
    // SAFETY: used within this call only (`tls_cell`).
    let mut bits = unsafe { crate::kernels::tls_cell(&BITS) }.borrow_mut();
    if block.len() < dim * rows_per_block {
        block.resize(dim * rows_per_block, 0.0);
    }
    if bits.len() < rows_per_block * words {
        bits.resize(rows_per_block * words, 0);
    }
    let mut tmp = [0.0f32; SPARSE_ROWS];
    // Sign masks of up to 64 consecutive planes: bit r = row r.
    let mut masks = [0u32; 64];
    let mut i = 0;
    while i < n {
        let rr = (n - i).min(rows_per_block);
        // Transpose rows i..i+rr into block[j*rows_per_block + r];
        // padding rows are zero.
        if rr < rows_per_block {
            block[..dim * rows_per_block].fill(0.0);
        }
        for r in 0..rr {
            let row = &x[(i + r) * stride..(i + r) * stride + dim];
            for (j, v) in row.iter().enumerate() {
                block[j * rows_per_block + r] = *v;
            }
        }
        bits[..rr * words].fill(0);
        let bp = block.as_ptr();
        for p in 0..np {
            let (s, m, e) = (
                sp.start[p] as usize,
                sp.mid[p] as usize,
                sp.start[p + 1] as usize,
            );
            // SAFETY: every index is < dim (Planes::new's contract),
            // so each block row read lies within the block.
            let v = unsafe { S::signed_sum::<Q>(bp, &sp.idx[s..m], &sp.idx[m..e]) };
            if PROJ {
                // SAFETY: tmp holds SPARSE_ROWS >= Q * LANES floats.
                unsafe {
                    for (q, vq) in v.iter().enumerate() {
                        S::storeu(*vq, tmp.as_mut_ptr().add(S::LANES * q));
                    }
                }
                for r in 0..rr {
                    out[(i + r) * np + p] = tmp[r];
                }
            } else {
                let mut mask = 0u32;
                for (q, vq) in v.iter().enumerate() {
                    // SAFETY: register-only; features enabled.
                    mask |= unsafe { S::signs(*vq) } << (S::LANES * q);
                }
                // SAFETY: bits holds rows_per_block rows of `words`.
                unsafe { S::put_plane(&mut masks, mask, p, np, rr, bits.as_mut_ptr(), words) };
            }
        }
        if !PROJ {
            for r in 0..rr {
                emit_codes(&bits[r * words..], k, l as u32, &mut codes[(i + r) * l..]);
            }
        }
        i += rr;
    }
}

/// Sparse planes in blocks of `Q * LANES` rows; fewer than 4 rows go
/// through the shared per-row path.
///
/// # Safety
/// As [`sparse_block`].
#[inline(always)]
pub(super) unsafe fn sparse_whole<S: Lanes, const Q: usize, const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    if n < 4 {
        super::sparse_rows::<PROJ>(h, sp, x, n, stride, codes, out);
        return;
    }
    // SAFETY: forwarded.
    unsafe { sparse_block::<S, Q, PROJ>(h, sp, x, n, stride, codes, out) }
}

/// Sparse planes in blocks of `Q * LANES` rows, except that a remainder of
/// at most `LANES` rows uses one-vector blocks (or the shared per-row path
/// below 4 rows), so a single row does not pay for a whole block.
///
/// # Safety
/// As [`sparse_block`].
#[inline(always)]
pub(super) unsafe fn sparse_split<S: Lanes, const Q: usize, const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let (l, np) = (h.tables() as usize, h.num_planes());
    let w = S::LANES * Q;
    let big = if n % w <= S::LANES { n - n % w } else { n };
    // SAFETY: forwarded; the row ranges split the checked input/outputs.
    unsafe {
        if big > 0 {
            sparse_block::<S, Q, PROJ>(h, sp, x, big, stride, codes, out);
        }
        if big < n {
            let (co, oo) = if PROJ {
                (&mut [][..], &mut out[big * np..])
            } else {
                (&mut codes[big * l..], &mut [][..])
            };
            if n - big < 4 {
                super::sparse_rows::<PROJ>(h, sp, &x[big * stride..], n - big, stride, co, oo);
            } else {
                sparse_block::<S, 1, PROJ>(h, sp, &x[big * stride..], n - big, stride, co, oo);
            }
        }
    }
}

/// A tier's `hash` and `project` entry points and its `#[target_feature]`
/// dense and sparse functions, written at the call as their attributes
/// (the `#[target_feature]` among them, so that each function and its
/// features stand literally in the ISA file) and `unsafe fn dense =
/// dense(LANES, ROWS, ONE, WIDE);`, `unsafe fn sparse = DRIVER(LANES, Q);`
/// (`sparse_split` or `sparse_whole`): the bodies monomorphise [`dense`]
/// and the sparse driver over the tier's lanes.
macro_rules! entries {
    (
        $(#[$dm:meta])*
        unsafe fn dense = dense($lanes:ty, $rows:literal, $one:literal, $wide:literal);
        $(#[$sm:meta])*
        unsafe fn sparse = $sparse:ident($slanes:ty, $q:literal);
    ) => {
        /// # Safety
        /// See [`super::HashFn`].
        pub unsafe fn hash(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
            // SAFETY: the caller guarantees the HashFn contract: the CPU has
            // the features (checked by SimHash::hash_isa) and the lengths
            // were checked.
            unsafe {
                match h.sparse() {
                    Some(sp) => sparse::<false>(h, sp, x, n, stride, codes, &mut []),
                    None => dense::<false>(h, x, n, stride, codes, &mut []),
                }
            }
        }

        /// # Safety
        /// See [`super::ProjectFn`].
        pub unsafe fn project(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, out: &mut [f32]) {
            // SAFETY: as in `hash`.
            unsafe {
                match h.sparse() {
                    Some(sp) => sparse::<true>(h, sp, x, n, stride, &mut [], out),
                    None => dense::<true>(h, x, n, stride, &mut [], out),
                }
            }
        }

        $(#[$dm])*
        unsafe fn dense<const PROJ: bool>(
            h: &Planes<'_>,
            x: &[f32],
            n: usize,
            stride: usize,
            codes: &mut [u32],
            out: &mut [f32],
        ) {
            // SAFETY: forwarded contract; this function enables the features.
            unsafe {
                super::drive::dense::<$lanes, $rows, $one, $wide, PROJ>(
                    h, x, n, stride, codes, out,
                )
            }
        }

        $(#[$sm])*
        unsafe fn sparse<const PROJ: bool>(
            h: &Planes<'_>,
            sp: &SparseView<'_>,
            x: &[f32],
            n: usize,
            stride: usize,
            codes: &mut [u32],
            out: &mut [f32],
        ) {
            // SAFETY: forwarded contract; this function enables the features.
            unsafe { super::drive::$sparse::<$slanes, $q, PROJ>(h, sp, x, n, stride, codes, out) }
        }
    };
}
pub(super) use entries;
