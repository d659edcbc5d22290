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

use std::arch::x86_64::*;

use super::{block_bytes, score_of, Epilogue, BLOCK, FLUSH_STEPS, PREFETCH_BYTES};

/// Where the 32 sums of a block go (shared with the AVX-512 tier).
pub(super) trait Sink {
    /// Rows `r..r + 8` get the eight u32 lanes of `a`.
    ///
    /// # Safety
    /// Rows `r..r + 8` are within the run; avx2 is enabled.
    unsafe fn put8(&mut self, r: usize, a: __m256i);
    /// Row `r` gets `a`.
    ///
    /// # Safety
    /// Row `r` is within the run.
    unsafe fn put1(&mut self, r: usize, a: u32);
}

pub(super) struct AccSink {
    pub(super) out: *mut u32,
}

impl Sink for AccSink {
    #[inline(always)]
    unsafe fn put8(&mut self, r: usize, a: __m256i) {
        // SAFETY: out holds the run's rows (caller of the kernel).
        unsafe { _mm256_storeu_si256(self.out.add(r).cast(), a) }
    }
    #[inline(always)]
    unsafe fn put1(&mut self, r: usize, a: u32) {
        // SAFETY: as put8.
        unsafe { *self.out.add(r) = a }
    }
}

pub(super) struct ScoreSink<const BIAS: bool> {
    pub(super) out: *mut f32,
    /// Null when `BIAS` is false.
    pub(super) bias: *const f32,
    pub(super) delta: f32,
    pub(super) offset: f32,
}

impl<const BIAS: bool> Sink for ScoreSink<BIAS> {
    #[inline(always)]
    unsafe fn put8(&mut self, r: usize, a: __m256i) {
        // SAFETY: out (and bias when BIAS) hold the run's rows; a < 2^24
        // (MAX_M * 255), so the signed conversion is the unsigned value.
        unsafe {
            let mut v = _mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_set1_ps(self.delta));
            v = _mm256_add_ps(v, _mm256_set1_ps(self.offset));
            if BIAS {
                v = _mm256_add_ps(v, _mm256_loadu_ps(self.bias.add(r)));
            }
            _mm256_storeu_ps(self.out.add(r), v);
        }
    }
    #[inline(always)]
    unsafe fn put1(&mut self, r: usize, a: u32) {
        // SAFETY: as put8.
        unsafe {
            let b = if BIAS { Some(*self.bias.add(r)) } else { None };
            *self.out.add(r) = score_of(a, self.delta, self.offset, b);
        }
    }
}

/// Prefetches (`prefetcht0`) the `len` bytes that lie [`PREFETCH_BYTES`]
/// after byte `at` of the run, if they are still inside the run's `end`
/// bytes.
#[inline(always)]
pub(super) unsafe fn prefetch_ahead(codes: *const u8, at: usize, len: usize, end: usize) {
    let from = at + PREFETCH_BYTES;
    if from + len <= end {
        let mut off = 0;
        while off < len {
            // SAFETY: a hint within the run's bytes (checked above); sse
            // is part of every x86-64 target.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(codes.add(from + off).cast()) };
            off += 64;
        }
    }
}

/// The u32 sums of the two 128-bit lanes' u16 values: lane 0 element `i`
/// plus lane 1 element `i`, for `i < 8`.
#[inline(always)]
pub(super) unsafe fn widen_pair(a: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe {
        _mm256_add_epi32(
            _mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)),
            _mm256_cvtepu16_epi32(_mm256_extracti128_si256::<1>(a)),
        )
    }
}

/// The 32 sums of the block at `p`, as four ymm of eight rows each (rows
/// `0..8`, `8..16`, `16..24`, `24..32`).
#[inline(always)]
unsafe fn block(p: *const u8, m_pad: usize, lut: *const u8) -> [__m256i; 4] {
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
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(c), mask);
                let r0 = _mm256_shuffle_epi8(t, lo);
                let r1 = _mm256_shuffle_epi8(t, hi);
                a0 = _mm256_add_epi16(a0, r0);
                a1 = _mm256_add_epi16(a1, _mm256_srli_epi16::<8>(r0));
                a2 = _mm256_add_epi16(a2, r1);
                a3 = _mm256_add_epi16(a3, _mm256_srli_epi16::<8>(r1));
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

/// Hands the four ymm of a block to `sink`: all 32 rows when the block is
/// full, else (a tail block) the first `n` through a stack buffer.
#[inline(always)]
pub(super) unsafe fn put_block<S: Sink>(sink: &mut S, r0: usize, n: usize, t: [__m256i; 4]) {
    // SAFETY: rows r0..r0 + n are within the run (caller); avx2 enabled.
    unsafe {
        if n == BLOCK {
            for (k, &v) in t.iter().enumerate() {
                sink.put8(r0 + 8 * k, v);
            }
        } else {
            let mut buf = [0u32; BLOCK];
            for (k, &v) in t.iter().enumerate() {
                _mm256_storeu_si256(buf.as_mut_ptr().add(8 * k).cast(), v);
            }
            for (i, &a) in buf[..n].iter().enumerate() {
                sink.put1(r0 + i, a);
            }
        }
    }
}

#[inline(always)]
unsafe fn run<S: Sink>(codes: &[u8], m_pad: usize, nrows: usize, lut: &[u8], sink: &mut S) {
    let bb = block_bytes(m_pad);
    let nblocks = nrows.div_ceil(BLOCK);
    let end = nblocks * bb;
    let (cp, lp) = (codes.as_ptr(), lut.as_ptr());
    // SAFETY: the kernel preconditions (codes hold nblocks * bb bytes, lut
    // 16 * m_pad); avx2 enabled by the enclosing function.
    unsafe {
        for b in 0..nblocks {
            prefetch_ahead(cp, b * bb, bb, end);
            let t = block(cp.add(b * bb), m_pad, lp);
            put_block(sink, b * BLOCK, (nrows - b * BLOCK).min(BLOCK), t);
        }
    }
}

/// See [`super::AccFn`].
///
/// # Safety
/// The preconditions of [`super::AccFn`]; the CPU supports avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn acc(codes: &[u8], m_pad: usize, nrows: usize, lut: &[u8], out: &mut [u32]) {
    let mut sink = AccSink {
        out: out.as_mut_ptr(),
    };
    // SAFETY: forwarded preconditions; out holds nrows values.
    unsafe { run(codes, m_pad, nrows, lut, &mut sink) }
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the CPU supports avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn score(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let out = out.as_mut_ptr();
    // SAFETY: forwarded preconditions; out (and bias) hold nrows values.
    unsafe {
        match epi.bias {
            Some(b) => {
                let mut sink = ScoreSink::<true> {
                    out,
                    bias: b.as_ptr(),
                    delta: epi.delta,
                    offset: epi.offset,
                };
                run(codes, m_pad, nrows, lut, &mut sink)
            }
            None => {
                let mut sink = ScoreSink::<false> {
                    out,
                    bias: std::ptr::null(),
                    delta: epi.delta,
                    offset: epi.offset,
                };
                run(codes, m_pad, nrows, lut, &mut sink)
            }
        }
    }
}
