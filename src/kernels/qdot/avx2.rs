//! Quantised dot products, AVX2 tier (avx2; 256-bit integer lanes).
//!
//! Instructions and why:
//! * `vpmaddubsw` (u8 x i8 -> i16, adjacent products summed in pairs): the
//!   query byte is `u <= 127` and the code `|c| <= 127` (at worst -128), so
//!   a pair sum is at most `2 * 127 * 127 = 32258` and at least
//!   `2 * 127 * (-128) = -32512`, inside i16: the instruction's
//!   saturation can never trigger, and the result is exact. (A query byte
//!   above 127 could saturate; the safe wrappers reject such queries.)
//! * `vpmaddwd` with a vector of ones: the i16 pairs summed again into i32
//!   (exact), then `vpaddd` into one accumulator per row.
//! * Four rows at a time, four independent accumulators sharing each
//!   query load; for `dim_pad` of 64, 128, 192 or 256 (a const generic
//!   `N` of 2, 4, 6, 8 ymm) the query is loaded into registers once per
//!   run, otherwise each 32-byte query chunk is reloaded per block (L1).
//! * `vpunpck{l,h}dq` / `vpunpck{l,h}qdq` + `vpaddd` (a 4x4 transpose per
//!   lane) + `vextracti128`: the four accumulators are reduced together
//!   into the four row sums of an xmm; `vpslld 6` +
//!   `vpsubd` subtract `64 * sums[r]`; the score epilogue is `vcvtdq2ps`,
//!   `vmulps` (scales x scale_q), `vmulps`, `vaddps` (bias): the same f32
//!   operations in the same order as the scalar tier, so the bits match.
//! * `prefetcht0` of the block `PREFETCH_BYTES` (8 KiB, 64 rows of 128)
//!   ahead, inside the run only: with the hardware prefetcher alone an
//!   L3-resident run is much slower on Zen 3 (`benches/qdot.md`, "Software
//!   prefetch"); L2-resident runs and DRAM-bandwidth-bound ones are
//!   unchanged within the noise.
//!
//! This file holds the byte step and the reductions (`drive::Chunk`);
//! the block, run, sinks and entry points are `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, hsum1, hsum4, Chunk};

/// This tier's 32-byte chunk for [`super::drive`].
struct Avx2;

impl Chunk for Avx2 {
    type V = __m256i;
    const BYTES: usize = 32;
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn ones() -> __m256i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { _mm256_set1_epi16(1) }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const u8) -> __m256i {
        // SAFETY: 32 readable bytes at p (caller); avx2 enabled.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    /// `acc + madd(maddubs(u, c), 1)`: 32 products added to 8 i32 lanes.
    #[inline(always)]
    unsafe fn step(acc: __m256i, u: __m256i, c: __m256i, ones: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operations; the caller enables avx2.
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, c), ones)) }
    }
    #[inline(always)]
    unsafe fn reduce4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m128i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { hsum4(a, b, c, d) }
    }
    #[inline(always)]
    unsafe fn reduce1(a: __m256i) -> i32 {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { hsum1(a) }
    }
}

entries! {
    /// See [`super::DotFn`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot = dot(Avx2);
    /// See [`super::ScoreFn`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn score = score(Avx2);
    /// See [`super::GatherFn`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn gather = gather(Avx2);
}
