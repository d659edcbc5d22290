//! AVX-512 tier of the inclusion probabilities' dot products (avx512f +
//! bw + dq + vl). Executed on AMD Zen 4 (`tests/train_logq.rs`: the scalar
//! oracle's bits).
//!
//! Instructions and why:
//! * `vcvtps2pd` zmm <- ymm: eight f32 of a row widened exactly to f64;
//! * `vmulpd` then `vaddpd` on zmm, never `vfmadd`: the oracle's two
//!   roundings; one zmm accumulator per sum is the eight lanes of `super`;
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

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dot_norms_512(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
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
        // `c + 8 <= dim8 <= dim <= q.len()` (checked by the slice above and
        // the caller's `q.len() >= dim + aug`).
        let (d, n) = unsafe {
            let (mut dv, mut nv) = (_mm512_setzero_pd(), _mm512_setzero_pd());
            let (rp, qp) = (row.as_ptr(), q.as_ptr());
            let mut c = 0;
            while c < dim8 {
                let y = _mm512_cvtps_pd(_mm256_loadu_ps(rp.add(c)));
                dv = _mm512_add_pd(dv, _mm512_mul_pd(_mm512_loadu_pd(qp.add(c)), y));
                nv = _mm512_add_pd(nv, _mm512_mul_pd(y, y));
                c += LANES;
            }
            let (mut d, mut n) = ([0f64; LANES], [0f64; LANES]);
            _mm512_storeu_pd(d.as_mut_ptr(), dv);
            _mm512_storeu_pd(n.as_mut_ptr(), nv);
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
    // CPU with avx512f + bw + dq + vl (crate::isa::check_supported).
    unsafe { dot_norms_512(q, r, ids, dot, nrm) }
}
