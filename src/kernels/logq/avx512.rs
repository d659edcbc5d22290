//! AVX-512 tier of the inclusion probabilities' dot products (avx512f +
//! bw + dq + vl). `tests/train_logq.rs` checks it against the scalar
//! oracle's bits; where it has run: docs/avx512.md.
//!
//! Instructions and why:
//! * `vcvtps2pd` zmm <- ymm: eight f32 of a row widened exactly to f64;
//! * `vmulpd` then `vaddpd` on zmm, never `vfmadd`: the oracle's two
//!   roundings; one zmm accumulator per sum is the eight lanes of `super`;
//! * `prefetcht0` of the row `PREFETCH` candidates ahead: the candidates
//!   are random rows of W, mostly outside the caches.
//!
//! The loop over the candidates (prefetch, tail, lane sums) is
//! `super::dot_norms_simd`, shared with the AVX2 tier; this file
//! holds the step over eight coordinates.

use std::arch::x86_64::*;

use super::{AugRows, LANES};
use crate::kernels::simd::{entries, Avx512};

impl super::Tile for Avx512 {
    type Acc = __m512d;
    #[inline(always)]
    unsafe fn zero() -> __m512d {
        // SAFETY: register-only (avx512f enabled by the caller).
        unsafe { _mm512_setzero_pd() }
    }
    #[inline(always)]
    unsafe fn step(d: &mut __m512d, n: &mut __m512d, rp: *const f32, qp: *const f64) {
        // SAFETY: 8 f32 at rp and 8 f64 at qp are readable (caller).
        unsafe {
            let y = _mm512_cvtps_pd(_mm256_loadu_ps(rp));
            *d = _mm512_add_pd(*d, _mm512_mul_pd(_mm512_loadu_pd(qp), y));
            *n = _mm512_add_pd(*n, _mm512_mul_pd(y, y));
        }
    }
    #[inline(always)]
    unsafe fn lanes(a: __m512d) -> [f64; LANES] {
        let mut l = [0f64; LANES];
        // SAFETY: one store of the eight lanes into `l`.
        unsafe { _mm512_storeu_pd(l.as_mut_ptr(), a) };
        l
    }
}

entries! { "avx512f,avx512bw,avx512dq,avx512vl";
    /// `super::dot_norms_simd` on this tier.
    fn dot_norms_512(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64])
        => super::dot_norms_simd::<Avx512>;
}

pub fn dot_norms(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    assert!(q.len() >= r.dim + r.aug as usize && dot.len() >= ids.len() && nrm.len() >= ids.len());
    // SAFETY: the table holding this function is handed out only for a
    // CPU with avx512f + bw + dq + vl (crate::isa::check_supported).
    unsafe { dot_norms_512(q, r, ids, dot, nrm) }
}
