//! SimHash, scalar tier: the oracle. Plain loops written for clarity; every
//! other tier is tested against these functions.
//!
//! A projection is `Σ_j x[j] * plane[j]`, summed in f32 in index order with
//! no fused multiply-add (sparse planes: `Σ x[plus] - Σ x[minus]`, in list
//! order). A code bit is 1 exactly when the projection is `> 0`.

use super::Planes;

/// Projection of row `x` (length dim) on plane `p`.
pub fn projection(h: &Planes<'_>, x: &[f32], p: usize) -> f32 {
    let dim = h.dim();
    match h.sparse() {
        Some(sp) => {
            let (s, m, e) = (
                sp.start[p] as usize,
                sp.mid[p] as usize,
                sp.start[p + 1] as usize,
            );
            let mut acc = 0.0f32;
            for &j in &sp.idx[s..m] {
                acc += x[j as usize];
            }
            for &j in &sp.idx[m..e] {
                acc -= x[j as usize];
            }
            acc
        }
        None => {
            let plane = &h.planes()[p * dim..(p + 1) * dim];
            let mut acc = 0.0f32;
            for j in 0..dim {
                acc += x[j] * plane[j];
            }
            acc
        }
    }
}

pub fn hash(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    let (k, l) = (h.bits() as usize, h.tables() as usize);
    for i in 0..n {
        let row = &x[i * stride..i * stride + h.dim()];
        for t in 0..l {
            let mut code = 0u32;
            for b in 0..k {
                if projection(h, row, t * k + b) > 0.0 {
                    code |= 1 << b;
                }
            }
            codes[i * l + t] = code;
        }
    }
}

pub fn project(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, out: &mut [f32]) {
    let np = h.num_planes();
    for i in 0..n {
        let row = &x[i * stride..i * stride + h.dim()];
        for p in 0..np {
            out[i * np + p] = projection(h, row, p);
        }
    }
}
