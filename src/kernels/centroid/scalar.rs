//! Nearest-centroid top-4, scalar oracle: for each point, each centroid in
//! id order, the score as one plain chain `s = h; s = fma(x[d], c[d], s)`,
//! then the top-4 rule. Written for clarity.

use super::{insert, PANEL, TOP};

/// See [`super::Top4Fn`].
///
/// # Safety
/// The preconditions of [`super::Top4Fn`] (this tier indexes with bounds
/// checks anyway).
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
    for i in 0..n {
        let xi = &x[i * x_stride..i * x_stride + xdim];
        let (bi, ii) = (
            &mut best[i * TOP..(i + 1) * TOP],
            &mut ids[i * TOP..(i + 1) * TOP],
        );
        for p in 0..np {
            let panel = &panels[p * pf..(p + 1) * pf];
            for lane in 0..PANEL {
                let mut s = panel[lane];
                for (d, &xv) in xi.iter().enumerate() {
                    s = xv.mul_add(panel[PANEL + d * PANEL + lane], s);
                }
                insert(bi, ii, s, id0 + (p * PANEL + lane) as u32);
            }
        }
    }
}
