//! SimHash, AVX-512 tier (avx512f/bw/dq/vl + fma).
//!
//! Dense planes: a register-blocked micro-kernel like an sgemm tile: 6 rows
//! x 4 panels (6 x 64 planes = 24 zmm accumulators); per input coordinate it
//! loads one 16-plane row of each panel and broadcasts each row's value
//! (`vbroadcastss` folded into `vfmadd231ps`). The sign of each accumulator
//! is taken with `vcmpps` into a mask register (`_CMP_GT_OQ`: NaN gives 0),
//! so only 16 bits per panel leave the registers — the projections are never
//! stored unless `project` asks for them. One row alone uses 1 x 8 panels so
//! eight independent FMA chains cover the FMA latency.
//!
//! Sparse ±1 planes: 32 rows at a time are transposed into a `dim x 32`
//! scratch block (L1-resident for dim <= 256); each plane then adds the
//! block rows of its positive coordinates and subtracts those of its negative
//! ones (two zmm per index, four partial sums per half to hide the add
//! latency). A plane's 32 sign bits (one per row) are scattered into the
//! rows' bit strings.
//!
//! This file holds the vectors (`drive::Lanes`); the tile, the
//! row/panel and sparse block drivers and the entry points are
//! `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, Lanes};
use super::{Planes, SparseView};

/// Floats in a sparse block row (two zmm).
const SPARSE_ROWS: usize = 32;

/// This tier's vectors for [`super::drive`]: a panel row is one zmm.
struct Avx512;

impl Lanes for Avx512 {
    type V = __m512;
    type P = __m512;
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero_panel() -> __m512 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load_panel(p: *const f32) -> __m512 {
        // SAFETY: 16 floats at p, 64-byte aligned (caller); avx512f enabled.
        unsafe { _mm512_load_ps(p) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> __m512 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn fmadd_panel(x: __m512, w: __m512, acc: __m512) -> __m512 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_fmadd_ps(x, w, acc) }
    }
    #[inline(always)]
    unsafe fn panel_signs(a: __m512) -> u32 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, _mm512_setzero_ps()) as u32 }
    }
    #[inline(always)]
    unsafe fn store_panel(a: __m512, dst: *mut f32, lanes: usize) {
        let m: __mmask16 = if lanes == 16 {
            0xFFFF
        } else {
            (1u16 << lanes) - 1
        };
        // SAFETY: `lanes` writable floats at dst (caller); the masked store
        // touches no other; avx512f enabled.
        unsafe { _mm512_mask_storeu_ps(dst, m, a) }
    }
    /// Two zmm per block row (`Q == 2`).
    #[inline(always)]
    unsafe fn signed_sum<const Q: usize>(
        block: *const f32,
        plus: &[u32],
        minus: &[u32],
    ) -> [__m512; Q] {
        debug_assert_eq!(Q, 2);
        // SAFETY: the caller's block bounds (rows of 32 floats); features
        // enabled.
        unsafe {
            let (lo_p, hi_p) = signed_sum(block, plus);
            let (lo_m, hi_m) = signed_sum(block, minus);
            let (lo, hi) = (_mm512_sub_ps(lo_p, lo_m), _mm512_sub_ps(hi_p, hi_m));
            std::array::from_fn(|q| if q == 0 { lo } else { hi })
        }
    }
    #[inline(always)]
    unsafe fn storeu(v: __m512, dst: *mut f32) {
        // SAFETY: 16 writable floats at dst (caller); avx512f enabled.
        unsafe { _mm512_storeu_ps(dst, v) }
    }
    #[inline(always)]
    unsafe fn signs(v: __m512) -> u32 {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, _mm512_setzero_ps()) as u32 }
    }
    /// A plane's sign bits (one per row) are scattered into the rows' bit
    /// strings at once.
    #[inline(always)]
    unsafe fn put_plane(
        _masks: &mut [u32; 64],
        mask: u32,
        p: usize,
        _np: usize,
        rr: usize,
        bits: *mut u64,
        words: usize,
    ) {
        let (w, sh) = (p / 64, p % 64);
        for r in 0..rr {
            // SAFETY: bits holds rr rows of `words` > w (caller).
            unsafe { *bits.add(r * words + w) |= (((mask >> r) & 1) as u64) << sh };
        }
    }
}

entries! {
    /// Dense planes: 6 rows x 4 panels per tile, 1 x 8 for a single row.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    unsafe fn dense = dense(Avx512, 6, 8, 4);
    /// Sparse planes: blocks of 32 rows (two zmm per index).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    unsafe fn sparse = sparse_whole(Avx512, 2);
}

/// Sum of block rows `idx` (each 32 floats: two zmm), four partial sums per
/// half.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[inline]
unsafe fn signed_sum(block: *const f32, idx: &[u32]) -> (__m512, __m512) {
    let mut lo = [_mm512_setzero_ps(); 4];
    let mut hi = [_mm512_setzero_ps(); 4];
    let chunks = idx.chunks_exact(4);
    let rest = chunks.remainder();
    // SAFETY: each index j < dim, so block[j*32 .. j*32+32] is in bounds
    // (caller's invariant).
    unsafe {
        for c in chunks {
            for u in 0..4 {
                let r = block.add(c[u] as usize * SPARSE_ROWS);
                lo[u] = _mm512_add_ps(lo[u], _mm512_loadu_ps(r));
                hi[u] = _mm512_add_ps(hi[u], _mm512_loadu_ps(r.add(16)));
            }
        }
        for (u, &j) in rest.iter().enumerate() {
            let r = block.add(j as usize * SPARSE_ROWS);
            lo[u] = _mm512_add_ps(lo[u], _mm512_loadu_ps(r));
            hi[u] = _mm512_add_ps(hi[u], _mm512_loadu_ps(r.add(16)));
        }
    }
    (
        _mm512_add_ps(_mm512_add_ps(lo[0], lo[1]), _mm512_add_ps(lo[2], lo[3])),
        _mm512_add_ps(_mm512_add_ps(hi[0], hi[1]), _mm512_add_ps(hi[2], hi[3])),
    )
}
