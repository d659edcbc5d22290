//! Nearest-centroid top-4, AVX2 tier (avx2 + fma).
//!
//! Instructions and why:
//! * `vfmadd231ps` with a broadcast point coordinate (`vbroadcastss`): a
//!   register tile of 6 points x 16 centroids (one panel, two ymm per
//!   point) keeps 12 accumulators plus two panel loads and one broadcast
//!   in the 16 ymm registers, so each 256-bit panel load feeds 6 FMAs. The
//!   chains start from `h_c` and run over `d` in order, the oracle's order,
//!   so scores are bit-identical to the scalar tier.
//! * `vcmpps` + `vmovmskps` against the point's fourth-best score: almost
//!   every tile leaves the top-4 unchanged after the first panels; only set
//!   lanes are inserted, in lane (id) order.
//! * `vmovups`: the panels and points need no alignment.

use std::arch::x86_64::*;

use super::{merge_lanes, PANEL, TOP};

/// Points per register tile.
const ROWS: usize = 6;

/// One tile: points `xr[0..R]` (only the first `live` are merged; the
/// others repeat a valid point) against the panel at `p`.
///
/// # Safety
/// Each `xr[r]` points at `xdim` readable floats; `p` at one panel of
/// `(xdim + 1) * 16` floats; `best`/`ids` at `4 live` entries; the
/// enclosing function enables avx2 and fma.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn tile<const R: usize>(
    xr: &[*const f32; R],
    live: usize,
    xdim: usize,
    p: *const f32,
    id: u32,
    best: *mut f32,
    ids: *mut u32,
) {
    // SAFETY: the reads stay within the points and the panel, the writes
    // within `4 live` entries of `best`/`ids` (caller).
    unsafe {
        let mut lo = [_mm256_loadu_ps(p); R];
        let mut hi = [_mm256_loadu_ps(p.add(8)); R];
        let cp = p.add(PANEL);
        for d in 0..xdim {
            let c0 = _mm256_loadu_ps(cp.add(d * PANEL));
            let c1 = _mm256_loadu_ps(cp.add(d * PANEL + 8));
            for r in 0..R {
                let xb = _mm256_broadcast_ss(&*xr[r].add(d));
                lo[r] = _mm256_fmadd_ps(xb, c0, lo[r]);
                hi[r] = _mm256_fmadd_ps(xb, c1, hi[r]);
            }
        }
        for r in 0..live.min(R) {
            let thr = _mm256_set1_ps(*best.add(r * TOP + TOP - 1));
            let m = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(lo[r], thr)) as u32
                | ((_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(hi[r], thr)) as u32) << 8);
            if m != 0 {
                let mut s = [0f32; PANEL];
                _mm256_storeu_ps(s.as_mut_ptr(), lo[r]);
                _mm256_storeu_ps(s.as_mut_ptr().add(8), hi[r]);
                merge_lanes(m, &s, best.add(r * TOP), ids.add(r * TOP), id);
            }
        }
    }
}

/// See [`super::Top4Fn`].
///
/// # Safety
/// The preconditions of [`super::Top4Fn`]; the CPU supports avx2 and fma.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
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
        // i + live - 1); panels j < np lie in `panels`; points i..i+live
        // own `best`/`ids` entries 4i..4(i+live) (caller).
        unsafe {
            let xr: [*const f32; ROWS] =
                std::array::from_fn(|r| xp.add((i + r.min(live - 1)) * x_stride));
            for j in 0..np {
                tile::<ROWS>(
                    &xr,
                    live,
                    xdim,
                    pp.add(j * pf),
                    id0 + (j * PANEL) as u32,
                    bp.add(i * TOP),
                    ip.add(i * TOP),
                );
            }
        }
        i += live;
    }
}
