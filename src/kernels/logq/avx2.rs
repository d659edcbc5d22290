//! AVX2 tier of the inclusion probabilities' dot products (avx2 + fma
//! tier; no FMA is used).
//!
//! Instructions and why:
//! * `vcvtps2pd` ymm <- xmm: four f32 of a row widened exactly to f64;
//! * `vmulpd` then `vaddpd`, never `vfmadd`: the oracle's two roundings;
//!   two ymm accumulators per sum are the eight lanes of `super`;
//! * `prefetcht0` of the row `PREFETCH` candidates ahead: the candidates
//!   are random rows of W, mostly outside the caches.
//!
//! The loop over the candidates (prefetch, tail, lane sums) is
//! `super::dot_norms_simd`, shared with the AVX-512 tier; this file
//! holds the step over eight coordinates.

use std::arch::x86_64::*;

use super::{AugRows, LANES};
use crate::kernels::simd::{entries, Avx2};

impl super::Tile for Avx2 {
    /// Lanes 0..4 and 4..8.
    type Acc = [__m256d; 2];
    #[inline(always)]
    unsafe fn zero() -> [__m256d; 2] {
        // SAFETY: register-only (avx enabled by the caller).
        unsafe { [_mm256_setzero_pd(); 2] }
    }
    #[inline(always)]
    unsafe fn step(d: &mut [__m256d; 2], n: &mut [__m256d; 2], rp: *const f32, qp: *const f64) {
        // SAFETY: 8 f32 at rp and 8 f64 at qp are readable (caller).
        unsafe {
            let y0 = _mm256_cvtps_pd(_mm_loadu_ps(rp));
            let y1 = _mm256_cvtps_pd(_mm_loadu_ps(rp.add(4)));
            d[0] = _mm256_add_pd(d[0], _mm256_mul_pd(_mm256_loadu_pd(qp), y0));
            d[1] = _mm256_add_pd(d[1], _mm256_mul_pd(_mm256_loadu_pd(qp.add(4)), y1));
            n[0] = _mm256_add_pd(n[0], _mm256_mul_pd(y0, y0));
            n[1] = _mm256_add_pd(n[1], _mm256_mul_pd(y1, y1));
        }
    }
    #[inline(always)]
    unsafe fn lanes(a: [__m256d; 2]) -> [f64; LANES] {
        let mut l = [0f64; LANES];
        // SAFETY: two stores of four into the eight of `l`.
        unsafe {
            _mm256_storeu_pd(l.as_mut_ptr(), a[0]);
            _mm256_storeu_pd(l.as_mut_ptr().add(4), a[1]);
        }
        l
    }
}

entries! { "avx2,fma";
    /// `super::dot_norms_simd` on this tier.
    fn dot_norms_256(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64])
        => super::dot_norms_simd::<Avx2>;
}

pub fn dot_norms(q: &[f64], r: &AugRows<'_>, ids: &[u32], dot: &mut [f64], nrm: &mut [f64]) {
    assert!(q.len() >= r.dim + r.aug as usize && dot.len() >= ids.len() && nrm.len() >= ids.len());
    // SAFETY: the table holding this function is handed out only for a
    // CPU with avx2 + fma (crate::isa::check_supported).
    unsafe { dot_norms_256(q, r, ids, dot, nrm) }
}
