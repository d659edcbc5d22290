//! Nearest-centroid top-4, AVX-512 tier (avx512f).
//!
//! Instructions and why:
//! * `vfmadd231ps` with a broadcast point coordinate (`vbroadcastss`): a
//!   register tile of [`ROWS`] points x 32 centroids (two panels) keeps 24
//!   zmm accumulators, so each 512-bit panel load feeds 12 FMAs and each
//!   broadcast 2; no horizontal reduction (each lane is one centroid's
//!   score). The chains start from `h_c` and run over `d` in order, the
//!   oracle's order, so scores are bit-identical to the scalar tier.
//! * `vcmpps` into a mask register (`_mm512_cmp_ps_mask`) against the
//!   point's fourth-best score: after the first panels almost every tile
//!   leaves the top-4 unchanged, and the merge costs two compares and a
//!   mask test per point; only set lanes are inserted, in lane (id) order.
//! * `vmovups`: the panels and points need no alignment.

use std::arch::x86_64::*;

use super::{merge_lanes, PANEL, TOP};

/// Points per register tile.
const ROWS: usize = 12;

/// One tile: points `xr[0..R]` (only the first `live` are merged; the
/// others repeat a valid point) against panels `p` and `p + pf`.
///
/// # Safety
/// Each `xr[r]` points at `xdim` readable floats; `p` at two panels of
/// `pf = (xdim + 1) * 16` floats; `best`/`ids` at `4 live` entries; the
/// enclosing function enables avx512f.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile<const R: usize>(
    xr: &[*const f32; R],
    live: usize,
    xdim: usize,
    p: *const f32,
    pf: usize,
    id: u32,
    best: *mut f32,
    ids: *mut u32,
) {
    // SAFETY: the reads stay within the points and the two panels, the
    // writes within `4 live` entries of `best`/`ids` (caller).
    unsafe {
        let p1 = p.add(pf);
        let mut a0 = [_mm512_loadu_ps(p); R];
        let mut a1 = [_mm512_loadu_ps(p1); R];
        let (c0p, c1p) = (p.add(PANEL), p1.add(PANEL));
        for d in 0..xdim {
            let c0 = _mm512_loadu_ps(c0p.add(d * PANEL));
            let c1 = _mm512_loadu_ps(c1p.add(d * PANEL));
            for r in 0..R {
                let xb = _mm512_set1_ps(*xr[r].add(d));
                a0[r] = _mm512_fmadd_ps(xb, c0, a0[r]);
                a1[r] = _mm512_fmadd_ps(xb, c1, a1[r]);
            }
        }
        for r in 0..live.min(R) {
            let thr = _mm512_set1_ps(*best.add(r * TOP + TOP - 1));
            let m = u32::from(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(a0[r], thr))
                | (u32::from(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(a1[r], thr)) << 16);
            if m != 0 {
                let mut s = [0f32; 2 * PANEL];
                _mm512_storeu_ps(s.as_mut_ptr(), a0[r]);
                _mm512_storeu_ps(s.as_mut_ptr().add(PANEL), a1[r]);
                merge_lanes(m, &s, best.add(r * TOP), ids.add(r * TOP), id);
            }
        }
    }
}

/// See [`super::Top4Fn`].
///
/// # Safety
/// The preconditions of [`super::Top4Fn`]; the CPU supports avx512f/bw/dq/vl.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
pub unsafe fn top4_f32(
    x: &[f32],
    x_stride: usize,
    n: usize,
    xdim: usize,
    panels: &[f32],
    np: usize,
    id0: u32,
    best: &mut [f32],
    ids: &mut [u32],
) {
    let pf = (xdim + 1) * PANEL;
    let (xp, pp, bp, ip) = (
        x.as_ptr(),
        panels.as_ptr(),
        best.as_mut_ptr(),
        ids.as_mut_ptr(),
    );
    let mut i = 0;
    while i < n {
        let live = ROWS.min(n - i);
        // SAFETY: rows i..i+live < n lie in `x` (the others repeat row
        // i + live - 1); panels 2j, 2j+1 < np lie in `panels`; points
        // i..i+live own `best`/`ids` entries 4i..4(i+live) (caller).
        unsafe {
            let xr: [*const f32; ROWS] =
                std::array::from_fn(|r| xp.add((i + r.min(live - 1)) * x_stride));
            let mut j = 0;
            while j + 2 <= np {
                tile::<ROWS>(
                    &xr,
                    live,
                    xdim,
                    pp.add(j * pf),
                    pf,
                    id0 + (j * PANEL) as u32,
                    bp.add(i * TOP),
                    ip.add(i * TOP),
                );
                j += 2;
            }
        }
        i += live;
    }
}
