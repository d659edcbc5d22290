//! Portable tier of the inclusion probabilities' dot products (`wide`):
//! two `f64x4` accumulators are the eight lanes of `super` (lanes 0-3 and
//! 4-7); product then sum, no FMA, so the scalar oracle's bits.

use wide::f64x4;

use super::{AugRows, LANES};

#[inline(always)]
fn widen(s: &[f32]) -> f64x4 {
    f64x4::from([s[0] as f64, s[1] as f64, s[2] as f64, s[3] as f64])
}

#[inline(always)]
fn load(s: &[f64]) -> f64x4 {
    f64x4::from([s[0], s[1], s[2], s[3]])
}

pub fn dot_norms(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    let dim = r.dim;
    let dim8 = dim - dim % LANES;
    for (j, &id) in ids.iter().enumerate() {
        let id = id as usize;
        let row = &r.w[id * r.stride..id * r.stride + dim];
        let (mut d0, mut d1, mut n0, mut n1) = (f64x4::ZERO, f64x4::ZERO, f64x4::ZERO, f64x4::ZERO);
        for c in (0..dim8).step_by(LANES) {
            let (y0, y1) = (widen(&row[c..c + 4]), widen(&row[c + 4..c + 8]));
            d0 += load(&q[c..c + 4]) * y0;
            d1 += load(&q[c + 4..c + 8]) * y1;
            n0 += y0 * y0;
            n1 += y1 * y1;
        }
        let (a, b, e, f) = (d0.to_array(), d1.to_array(), n0.to_array(), n1.to_array());
        let mut d = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
        let mut n = [e[0], e[1], e[2], e[3], f[0], f[1], f[2], f[3]];
        super::tail_lanes(q, row, r.aug.then(|| r.extra(id)), &mut d, &mut n);
        let (ds, ns) = super::lane_sums(&d, &n);
        dot[j] = ds;
        nrm[j] = ns;
    }
}
