//! Graph-search dot kernels, AVX2 tier (avx2 + fma enabled, but no FMA is
//! used: the summation order is fixed across tiers, see `mod.rs`).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps` (not `vfmadd`): the product is rounded before the
//!   add, as in the oracle; each row's 16 lane sums are two `ymm`
//!   (lanes 0..8 and 8..16), four rows at a time for independent chains.
//! * `vmovups` (f32), `vpmovzxwd` + `vpslld 16` (bf16), `vpmovsxbd` +
//!   `vcvtdq2ps` (int8): exact widening to f32. Rows are padded to 16
//!   elements, so there is no tail and no masked load.
//! * The fixed reduction tree: `vaddps` of the two halves (`a8`),
//!   `vextractf128` + `addps` (`a4`), `movhlps` + `addps` (`a2`),
//!   `shufps` + `addss` (`s`).
//! * `prefetcht0` of every line of the rows `PREFETCH_AHEAD` ids ahead.
//!
//! The dot kernels are `super::dot_simd` on [`Avx2`]
//! (`crate::kernels::simd`), shared with the AVX-512 tier; the walk
//! kernel below is this tier's own.

use std::arch::x86_64::*;

use crate::kernels::simd::{prefetch_lines, Avx2, Bf16, F32, I8};

use super::Rows;

super::simd_entries!("avx2,fma", Avx2);

/// The walk kernel: `vpmovzxbw` (codes) and `vpmovsxbw` (query) widen 16
/// bytes to i16, `vpmaddwd` multiplies and adds pairs into i32 (a pair is
/// at most `2 * 255 * 128`, exact), `vpaddd` accumulates; four rows at a
/// time; every record's codes are prefetched on entry (the ids are known).
#[target_feature(enable = "avx2,fma")]
unsafe fn walk_avx2(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    let dim = r.dim;
    let n = ids.len();
    let base = r.base.as_ptr();
    let qp = q.as_ptr();
    // SAFETY (whole body): WalkFn's contract: every record's `dim` codes
    // are inside `base`, q holds dim bytes, out holds n values, dim a
    // multiple of 64.
    unsafe {
        let rec = |j: usize| base.add(*ids.get_unchecked(j) as usize * r.stride);
        for j in 0..n {
            prefetch_lines(rec(j), dim);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            let p: [*const u8; 4] = std::array::from_fn(|k| rec(i + k.min(rr - 1)));
            let mut acc = [_mm256_setzero_si256(); 4];
            let mut b = 0;
            while b < dim {
                let qv = _mm256_cvtepi8_epi16(_mm_loadu_si128(qp.add(b).cast()));
                for k in 0..4 {
                    let wv = _mm256_cvtepu8_epi16(_mm_loadu_si128(p[k].add(b).cast()));
                    acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(wv, qv));
                }
                b += 16;
            }
            for (k, a) in acc.iter().enumerate().take(rr) {
                let s = _mm_add_epi32(
                    _mm256_castsi256_si128(*a),
                    _mm256_extracti128_si256::<1>(*a),
                );
                let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
                *out.get_unchecked_mut(i + k) = _mm_cvtsi128_si32(s);
            }
            i += rr;
        }
    }
}

/// # Safety
/// [`super::WalkFn`]; the CPU has avx2 and fma.
pub unsafe fn walk(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded contract.
    unsafe { walk_avx2(r, q, ids, out) }
}
