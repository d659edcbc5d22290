//! Scalar oracle of the inclusion probabilities' dot products: the
//! (augmented) row coordinate by coordinate, coordinate `j` into lane
//! `j mod 8`, lanes added in order (see `super`).

use super::{AugRows, LANES};

pub fn dot_norms(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    let hd = r.dim + r.aug as usize;
    for (j, &id) in ids.iter().enumerate() {
        let id = id as usize;
        let (mut d, mut n) = ([0f64; LANES], [0f64; LANES]);
        for (k, &x) in q[..hd].iter().enumerate() {
            let y = if k < r.dim {
                r.w[id * r.stride + k] as f64
            } else {
                r.extra(id) as f64
            };
            d[k % LANES] += x * y;
            n[k % LANES] += y * y;
        }
        let (ds, ns) = super::lane_sums(&d, &n);
        dot[j] = ds;
        nrm[j] = ns;
    }
}
