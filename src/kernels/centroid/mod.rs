//! Nearest-centroid kernels for k-means (`crate::centroid`): the four best
//! centroids of each point by `s(x, c) = <x, c> + h_c` (`h_c = -|c|^2 / 2`,
//! so the best score is the nearest centroid), a running top-4 per point.
//!
//! This is a GEMM-shaped pass: every point meets every centroid. The
//! centroids are packed once per k-means iteration into **panels** of
//! [`PANEL`] = 16 centroids, transposed: a panel is `(xdim + 1) * 16`
//! floats, first the 16 `h_c`, then for each coordinate `d` the 16
//! centroids' `c[d]`, so one 512-bit load (or two 256-bit loads) gives one
//! coordinate of 16 centroids. The SIMD tiers keep a register tile of
//! points x centroids (AVX-512: 8 points x 32 centroids in 16 zmm
//! accumulators; AVX2 and portable: 6 points x 16 centroids in 12 ymm),
//! broadcasting a point's coordinate and multiplying it into the panel
//! column, so each loaded float feeds 8 (or 6) fused multiply-adds and no
//! horizontal reduction is needed.
//!
//! # Order of operations (identical scores across tiers)
//! Every tier computes each score as the same chain: start from `h_c`,
//! then `s = fma(x[d], c[d], s)` for `d = 0, 1, ..., xdim - 1` (one
//! rounding per step). The scalar oracle (`f32::mul_add`), the AVX2 tier
//! and the AVX-512 tier (`vfmadd`) therefore return bit-identical scores
//! and ids. The portable tier rounds the product separately where the
//! baseline has no FMA (`wide`'s `mul_add`); its scores are within
//! `gamma(xdim + 1) * (|h_c| + sum_d |x_d c_d|)` of the exact value, like
//! every other tier's.
//!
//! # Top-4 rule
//! `best`/`ids` hold, per point, four `(score, id)` sorted by score
//! descending. A score enters only if it is strictly greater than the
//! fourth, and is placed after every equal score already held. Centroids
//! are visited in ascending id order, so equal scores are ordered by
//! smaller id, as in [`crate::dense`]'s top-k. NaN never enters; start
//! from `-inf` / [`crate::matmul::TOPK_PAD_ID`] (padding centroids of the
//! last panel have `h = -inf` and never enter either).

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// Centroids per panel.
pub const PANEL: usize = 16;
/// Best centroids kept per point.
pub const TOP: usize = 4;

/// `top4(x, x_stride, n, xdim, panels, np, id0, best, ids)`: updates the
/// running top-4 of points `0..n` (`x[i * x_stride ..][..xdim]`) with the
/// centroids of panels `0..np` of `panels`, whose ids are
/// `id0 + 16 p + lane`.
///
/// # Safety
/// `xdim >= 1`; `x` holds `(n - 1) * x_stride + xdim` floats when `n > 0`;
/// `panels` holds `np * (xdim + 1) * 16` floats; `np` is even (the SIMD
/// tiers take panels in pairs); `best` and `ids` hold `4 n` entries, each
/// point's four sorted as the top-4 rule says; the CPU supports the tier
/// the function belongs to.
pub type Top4Fn =
    unsafe fn(&[f32], usize, usize, usize, &[f32], usize, u32, &mut [f32], &mut [u32]);

/// The entry points of a tier.
pub struct Kernels {
    pub top4: Top4Fn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked CPU support).
    Kernels { top4: top4_f32 }
}

#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::F32x;

/// One register tile of the SIMD tiers: points `xr[0..R]` (only the first
/// `live` are merged; the others repeat a valid point) against `2 LANES`
/// centroids, two vectors per point: vector 0 at column pointer `p +
/// PANEL`, vector 1 `off1` floats further (AVX2: the second half of the
/// same panel; AVX-512: the next panel). Each accumulator starts from
/// `h_c` and takes one `vfmadd` of a broadcast point coordinate per `d`, in
/// order (the oracle's chain); then a compare against each point's fourth
/// best and, only for set lanes, [`merge_lanes`].
///
/// # Safety
/// Each `xr[r]` points at `xdim` readable floats; `p` and `p + off1` at the
/// panel data of the tile's `2 LANES` centroids; `best`/`ids` at `4 live`
/// entries; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile<S: F32x, const R: usize>(
    xr: &[*const f32; R],
    live: usize,
    xdim: usize,
    p: *const f32,
    off1: usize,
    id: u32,
    best: *mut f32,
    ids: *mut u32,
) {
    let l = S::LANES;
    // SAFETY: the reads stay within the points and the panels, the writes
    // within `4 live` entries of `best`/`ids` (caller).
    unsafe {
        let p1 = p.add(off1);
        let mut a0 = [S::loadu(p); R];
        let mut a1 = [S::loadu(p1); R];
        let (c0p, c1p) = (p.add(PANEL), p1.add(PANEL));
        for d in 0..xdim {
            let c0 = S::loadu(c0p.add(d * PANEL));
            let c1 = S::loadu(c1p.add(d * PANEL));
            for r in 0..R {
                let xb = S::splat(*xr[r].add(d));
                a0[r] = S::fmadd(xb, c0, a0[r]);
                a1[r] = S::fmadd(xb, c1, a1[r]);
            }
        }
        for r in 0..live.min(R) {
            let thr = S::splat(*best.add(r * TOP + TOP - 1));
            let m = S::gt_bits(a0[r], thr) | (S::gt_bits(a1[r], thr) << l);
            if m != 0 {
                let mut s = [0f32; 2 * PANEL];
                S::storeu(s.as_mut_ptr(), a0[r]);
                S::storeu(s.as_mut_ptr().add(l), a1[r]);
                merge_lanes(m, &s, best.add(r * TOP), ids.add(r * TOP), id);
            }
        }
    }
}

/// The SIMD tiers' [`Top4Fn`]: points in tiles of `R`, each against every
/// panel, `2 LANES / PANEL` panels per [`tile`] (AVX2: one panel, 6 points
/// x 16 centroids in 12 ymm; AVX-512: two panels, 12 points x 32
/// centroids). Inlined into each tier's `#[target_feature]` entry point.
///
/// # Safety
/// [`Top4Fn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn top4_simd<S: F32x, const R: usize>(
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
    // Panels per tile, and the offset of a tile's second vector.
    let (step, off1) = if S::LANES == PANEL {
        (2, pf)
    } else {
        (1, S::LANES)
    };
    let (xp, pp, bp, ip) = (
        x.as_ptr(),
        panels.as_ptr(),
        best.as_mut_ptr(),
        ids.as_mut_ptr(),
    );
    let mut i = 0;
    while i < n {
        let live = R.min(n - i);
        // SAFETY: rows i..i+live < n lie in `x` (the others repeat row
        // i + live - 1); panels j..j+step <= np lie in `panels`; points
        // i..i+live own `best`/`ids` entries 4i..4(i+live) (caller).
        unsafe {
            let xr: [*const f32; R] =
                std::array::from_fn(|r| xp.add((i + r.min(live - 1)) * x_stride));
            let mut j = 0;
            while j + step <= np {
                tile::<S, R>(
                    &xr,
                    live,
                    xdim,
                    pp.add(j * pf),
                    off1,
                    id0 + (j * PANEL) as u32,
                    bp.add(i * TOP),
                    ip.add(i * TOP),
                );
                j += step;
            }
        }
        i += live;
    }
}

/// Inserts the lanes set in `m` (lane `l` = centroid `id + l`, score
/// `s[l]`) into one point's top-4 at `best` / `ids`, in lane (id) order:
/// the SIMD tiers' merge after their mask compare.
///
/// # Safety
/// `best` and `ids` point at the point's four entries; every set lane is
/// `< s.len()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn merge_lanes(mut m: u32, s: &[f32], best: *mut f32, ids: *mut u32, id: u32) {
    // SAFETY: four entries each at best / ids (caller).
    let (b, ii) = unsafe {
        (
            std::slice::from_raw_parts_mut(best, TOP),
            std::slice::from_raw_parts_mut(ids, TOP),
        )
    };
    while m != 0 {
        let l = m.trailing_zeros();
        m &= m - 1;
        insert(b, ii, s[l as usize], id + l);
    }
}

/// Inserts `(s, id)` into one point's sorted top-4 (`best`, `ids`: four
/// entries each) by the top-4 rule: only if `s` is strictly greater than
/// the fourth, after every equal score.
#[inline(always)]
pub fn insert(best: &mut [f32], ids: &mut [u32], s: f32, id: u32) {
    // Also rejects NaN (unordered).
    if s.partial_cmp(&best[TOP - 1]) != Some(std::cmp::Ordering::Greater) {
        return;
    }
    let mut t = TOP - 1;
    while t > 0 && s > best[t - 1] {
        best[t] = best[t - 1];
        ids[t] = ids[t - 1];
        t -= 1;
    }
    best[t] = s;
    ids[t] = id;
}

/// The entry points of the two SIMD tiers, listed once: `avx2.rs` and
/// `avx512.rs` each instantiate them with their target features and vector
/// type (`crate::kernels::simd::entries!` writes the functions).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_entries {
    ($feat:literal, $T:ty) => {
        $crate::kernels::simd::entries! { $feat;
            /// See [`super::Top4Fn`].
            fn top4_f32(
                x: &[f32],
                x_stride: usize,
                n: usize,
                xdim: usize,
                panels: &[f32],
                np: usize,
                id0: u32,
                best: &mut [f32],
                ids: &mut [u32],
            ) => super::top4_simd::<$T, ROWS>;
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_entries;
