//! AVX2 tier of the inclusion probabilities' dot products (avx2 + fma
//! tier; no FMA is used).
//!
//! Instructions and why:
//! * `vcvtps2pd` ymm <- xmm: four f32 of a row widened exactly to f64;
//! * `vmulpd` then `vaddpd`, never `vfmadd`: the oracle's two roundings;
//!   two ymm accumulators per sum are the eight lanes of `super`;
//! * `prefetcht0` of the row `PREFETCH` candidates ahead: the candidates
//!   are random rows of W, mostly outside the caches.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::{AugRows, LANES};

/// Candidates ahead whose rows are prefetched.
const PREFETCH: usize = 4;

#[inline(always)]
unsafe fn prefetch_row(p: *const f32, floats: usize) {
    // SAFETY: prefetch never faults.
    unsafe {
        let b = p.cast::<i8>();
        let mut off = 0;
        while off < floats * 4 {
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(off));
            off += 64;
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dot_norms_256(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    let dim = r.dim;
    let dim8 = dim - dim % LANES;
    let w = r.w.as_ptr();
    for (j, &id) in ids.iter().enumerate() {
        if let Some(&nx) = ids.get(j + PREFETCH) {
            // SAFETY: prefetch only; the address is computed with
            // wrapping arithmetic and never dereferenced.
            unsafe { prefetch_row(w.wrapping_add(nx as usize * r.stride), dim) };
        }
        let id = id as usize;
        let row = &r.w[id * r.stride..id * r.stride + dim];
        // SAFETY: every load reads `row[c..c + 8]` and `q[c..c + 8]` with
        // `c + 8 <= dim8 <= dim <= q.len()` (checked by the slices above
        // and the caller's `q.len() >= dim + aug`).
        let (d, n) = unsafe {
            let (mut d0, mut d1) = (_mm256_setzero_pd(), _mm256_setzero_pd());
            let (mut n0, mut n1) = (_mm256_setzero_pd(), _mm256_setzero_pd());
            let (rp, qp) = (row.as_ptr(), q.as_ptr());
            let mut c = 0;
            while c < dim8 {
                let y0 = _mm256_cvtps_pd(_mm_loadu_ps(rp.add(c)));
                let y1 = _mm256_cvtps_pd(_mm_loadu_ps(rp.add(c + 4)));
                d0 = _mm256_add_pd(d0, _mm256_mul_pd(_mm256_loadu_pd(qp.add(c)), y0));
                d1 = _mm256_add_pd(d1, _mm256_mul_pd(_mm256_loadu_pd(qp.add(c + 4)), y1));
                n0 = _mm256_add_pd(n0, _mm256_mul_pd(y0, y0));
                n1 = _mm256_add_pd(n1, _mm256_mul_pd(y1, y1));
                c += LANES;
            }
            let (mut d, mut n) = ([0f64; LANES], [0f64; LANES]);
            _mm256_storeu_pd(d.as_mut_ptr(), d0);
            _mm256_storeu_pd(d.as_mut_ptr().add(4), d1);
            _mm256_storeu_pd(n.as_mut_ptr(), n0);
            _mm256_storeu_pd(n.as_mut_ptr().add(4), n1);
            (d, n)
        };
        let (mut d, mut n) = (d, n);
        super::tail_lanes(q, row, r.aug.then(|| r.extra(id)), &mut d, &mut n);
        let (ds, ns) = super::lane_sums(&d, &n);
        dot[j] = ds;
        nrm[j] = ns;
    }
}

pub fn dot_norms(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    assert!(q.len() >= r.dim + r.aug as usize && dot.len() >= ids.len() && nrm.len() >= ids.len());
    // SAFETY: the table holding this function is handed out only for a
    // CPU with avx2 + fma (crate::isa::check_supported).
    unsafe { dot_norms_256(q, r, ids, dot, nrm) }
}
