//! Nearest-centroid top-4, portable tier (`wide::f32x8` at the build's
//! baseline target features). Register tile of 4 points x 16 centroids
//! (one panel, two f32x8 per point), the point's coordinate splatted and
//! multiplied into the panel column; chains start from `h_c` and run over
//! `d` in order. Without FMA in the baseline `mul_add` rounds twice (the
//! bound in [`super`] covers it), so scores may differ from the oracle's in
//! the last bits.

use wide::f32x8;

use super::{insert, PANEL, TOP};

/// Points per register tile.
const ROWS: usize = 4;

#[inline(always)]
fn v8(s: &[f32]) -> f32x8 {
    f32x8::from(<[f32; 8]>::try_from(&s[..8]).unwrap())
}

/// One tile: points `xr[0..R]` (only the first `live` are merged) against
/// one panel whose first centroid is `id`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn tile<const R: usize>(
    xr: &[&[f32]; R],
    live: usize,
    panel: &[f32],
    id: u32,
    best: &mut [f32],
    ids: &mut [u32],
) {
    let mut lo = [v8(panel); R];
    let mut hi = [v8(&panel[8..]); R];
    for (d, col) in panel[PANEL..].chunks_exact(PANEL).enumerate() {
        let (c0, c1) = (v8(col), v8(&col[8..]));
        for r in 0..R {
            let xb = f32x8::splat(xr[r][d]);
            lo[r] = xb.mul_add(c0, lo[r]);
            hi[r] = xb.mul_add(c1, hi[r]);
        }
    }
    for r in 0..live.min(R) {
        let (b, ii) = (
            &mut best[r * TOP..(r + 1) * TOP],
            &mut ids[r * TOP..(r + 1) * TOP],
        );
        let thr = f32x8::splat(b[TOP - 1]);
        let m = lo[r].simd_gt(thr).to_bitmask() | (hi[r].simd_gt(thr).to_bitmask() << 8);
        if m != 0 {
            let (sl, sh) = (lo[r].to_array(), hi[r].to_array());
            let mut m = m;
            while m != 0 {
                let l = m.trailing_zeros();
                m &= m - 1;
                let s = if l < 8 {
                    sl[l as usize]
                } else {
                    sh[l as usize - 8]
                };
                insert(b, ii, s, id + l);
            }
        }
    }
}

/// See [`super::Top4Fn`].
///
/// # Safety
/// The preconditions of [`super::Top4Fn`] (this tier indexes with bounds
/// checks, so a violation panics instead of misbehaving).
#[allow(clippy::too_many_arguments)]
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
    let mut i = 0;
    while i < n {
        let live = ROWS.min(n - i);
        let xr: [&[f32]; ROWS] = std::array::from_fn(|r| {
            let o = (i + r.min(live - 1)) * x_stride;
            &x[o..o + xdim]
        });
        for j in 0..np {
            tile::<ROWS>(
                &xr,
                live,
                &panels[j * pf..(j + 1) * pf],
                id0 + (j * PANEL) as u32,
                &mut best[i * TOP..(i + live) * TOP],
                &mut ids[i * TOP..(i + live) * TOP],
            );
        }
        i += live;
    }
}
