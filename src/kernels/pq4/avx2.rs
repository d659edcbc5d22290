//! 4-bit PQ fast-scan, AVX2 tier (avx2; 256-bit integer lanes).
//!
//! Instructions and why:
//! * One 32-byte load (`vmovdqu`) per block and sub-quantiser pair: lane 0
//!   holds sub-quantiser `2p`'s codes for the 32 rows, lane 1 those of
//!   `2p + 1`; the pair's two 16-entry tables are one 32-byte load of the
//!   LUT (kept in L1: `16 * m_pad` bytes), in the same lanes.
//! * `vpand` with `0x0f` (low nibbles: rows `rho(j)`), `vpsrlw 4` +
//!   `vpand` (high nibbles: rows `16 + rho(j)`), then `vpshufb`: a 16-entry
//!   byte table look-up per 128-bit lane, 32 look-ups per instruction.
//! * Summing bytes in u16 without unpacking (FAISS's trick): `a0 += r` as
//!   u16 lanes accumulates `even + 256 * odd` (mod 2^16), `a1 += r >> 8`
//!   (`vpsrlw 8`) the odd bytes exactly; after the steps,
//!   `a0 - (a1 << 8)` (`vpsllw 8`, `vpsubw`) is the sum of the even bytes
//!   mod 2^16, and both sums are exact because each lane receives at most
//!   `FLUSH_STEPS` = 256 bytes of <= 255 between widenings (`65,280`).
//!   With `rho`, u16 lane `i` of a 128-bit lane then holds row `i` (even
//!   bytes) or `8 + i` (odd bytes).
//! * Widening (once per block for `m_pad <= 512`, else every 256 pairs):
//!   `vpmovzxwd` of each 128-bit lane (the two sub-quantisers of the pair)
//!   and `vpaddd`: eight consecutive rows' u32 sums per ymm, stored in row
//!   order (`vmovdqu`) or through the score epilogue (`vcvtdq2ps`,
//!   `vmulps`, `vaddps`, `vaddps`: the scalar tier's operations in its
//!   order, so the bits match).
//! * `prefetcht0` `PREFETCH_BYTES` ahead within the run, as in `qdot`.
//! * A tail block (fewer than 32 rows left) is computed in full into a
//!   stack buffer and only the run's rows are written.
//!
//! This file holds the block kernel (`drive::Scan`); the run,
//! sinks and entry points are `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, Scan};
use super::FLUSH_STEPS;

/// The u32 sums of the two 128-bit lanes' u16 values: lane 0 element `i`
/// plus lane 1 element `i`, for `i < 8`.
#[inline(always)]
unsafe fn widen_pair(a: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe {
        _mm256_add_epi32(
            _mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)),
            _mm256_cvtepu16_epi32(_mm256_extracti128_si256::<1>(a)),
        )
    }
}

/// This tier's block kernel for [`super::drive`].
struct Avx2;

impl Scan for Avx2 {
    #[inline(always)]
    unsafe fn block<const LOW: bool>(p: *const u8, m_pad: usize, lut: *const u8) -> [__m256i; 4] {
        // SAFETY: the block holds 16 * m_pad readable bytes and lut as many
        // (caller); avx2 enabled by the enclosing function.
        unsafe {
            let mask = _mm256_set1_epi8(0x0f);
            let pairs = m_pad / 2;
            let mut tot = [_mm256_setzero_si256(); 4];
            let mut p0 = 0;
            while p0 < pairs {
                let p1 = (p0 + FLUSH_STEPS).min(pairs);
                let mut a0 = _mm256_setzero_si256();
                let mut a1 = _mm256_setzero_si256();
                let mut a2 = _mm256_setzero_si256();
                let mut a3 = _mm256_setzero_si256();
                for k in p0..p1 {
                    let c = _mm256_loadu_si256(p.add(32 * k).cast());
                    let t = _mm256_loadu_si256(lut.add(32 * k).cast());
                    let lo = _mm256_and_si256(c, mask);
                    let r0 = _mm256_shuffle_epi8(t, lo);
                    a0 = _mm256_add_epi16(a0, r0);
                    a1 = _mm256_add_epi16(a1, _mm256_srli_epi16::<8>(r0));
                    if !LOW {
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(c), mask);
                        let r1 = _mm256_shuffle_epi8(t, hi);
                        a2 = _mm256_add_epi16(a2, r1);
                        a3 = _mm256_add_epi16(a3, _mm256_srli_epi16::<8>(r1));
                    }
                }
                a0 = _mm256_sub_epi16(a0, _mm256_slli_epi16::<8>(a1));
                a2 = _mm256_sub_epi16(a2, _mm256_slli_epi16::<8>(a3));
                tot[0] = _mm256_add_epi32(tot[0], widen_pair(a0));
                tot[1] = _mm256_add_epi32(tot[1], widen_pair(a1));
                tot[2] = _mm256_add_epi32(tot[2], widen_pair(a2));
                tot[3] = _mm256_add_epi32(tot[3], widen_pair(a3));
                p0 = p1;
            }
            tot
        }
    }
}

entries! {
    /// See [`super::AccFn`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn acc = acc(Avx2);
    /// See [`super::ScoreFn`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn score = score(Avx2);
}
