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
//! * `vphaddd` x 3 + `vextracti128` + `vpaddd`: the four accumulators are
//!   reduced together into the four row sums of an xmm; `vpslld 6` +
//!   `vpsubd` subtract `64 * sums[r]`; the score epilogue is `vcvtdq2ps`,
//!   `vmulps` (scales x scale_q), `vmulps`, `vaddps` (bias): the same f32
//!   operations in the same order as the scalar tier, so the bits match.
//! * No software prefetch: a run is one contiguous stream, which the
//!   hardware prefetcher follows.

use std::arch::x86_64::*;

use super::{correct, score_of, Epilogue};

/// Where the corrected row values go (shared with the AVX-512 tier).
pub(super) trait Sink {
    /// Rows `r..r + 4` get the four lanes of `d`.
    ///
    /// # Safety
    /// Rows `r..r + 4` are within the run; avx2 is enabled.
    unsafe fn put4(&mut self, r: usize, d: __m128i);
    /// Row `r` gets `d`.
    ///
    /// # Safety
    /// Row `r` is within the run.
    unsafe fn put1(&mut self, r: usize, d: i32);
}

pub(super) struct DotSink {
    pub(super) out: *mut i32,
}

impl Sink for DotSink {
    #[inline(always)]
    unsafe fn put4(&mut self, r: usize, d: __m128i) {
        // SAFETY: out holds the run's rows (caller of the kernel).
        unsafe { _mm_storeu_si128(self.out.add(r).cast(), d) }
    }
    #[inline(always)]
    unsafe fn put1(&mut self, r: usize, d: i32) {
        // SAFETY: as put4.
        unsafe { *self.out.add(r) = d }
    }
}

pub(super) struct ScoreSink<const BIAS: bool> {
    pub(super) out: *mut f32,
    pub(super) scales: *const f32,
    /// Null when `BIAS` is false.
    pub(super) bias: *const f32,
    pub(super) scale_q: f32,
}

impl<const BIAS: bool> Sink for ScoreSink<BIAS> {
    #[inline(always)]
    unsafe fn put4(&mut self, r: usize, d: __m128i) {
        // SAFETY: out, scales (and bias when BIAS) hold the run's rows.
        unsafe {
            let s = _mm_mul_ps(_mm_loadu_ps(self.scales.add(r)), _mm_set1_ps(self.scale_q));
            let mut v = _mm_mul_ps(_mm_cvtepi32_ps(d), s);
            if BIAS {
                v = _mm_add_ps(v, _mm_loadu_ps(self.bias.add(r)));
            }
            _mm_storeu_ps(self.out.add(r), v);
        }
    }
    #[inline(always)]
    unsafe fn put1(&mut self, r: usize, d: i32) {
        // SAFETY: as put4.
        unsafe {
            let b = if BIAS { Some(*self.bias.add(r)) } else { None };
            *self.out.add(r) = score_of(d, *self.scales.add(r), self.scale_q, b);
        }
    }
}

/// `acc + madd(maddubs(u, c), 1)`: 32 products added to 8 i32 lanes.
#[inline(always)]
unsafe fn madd(acc: __m256i, u: __m256i, c: __m256i, ones: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, c), ones)) }
}

/// `[sum(a), sum(b), sum(c), sum(d)]` (wrapping).
#[inline(always)]
pub(super) unsafe fn hsum4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m128i {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe {
        let abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
        _mm_add_epi32(
            _mm256_castsi256_si128(abcd),
            _mm256_extracti128_si256::<1>(abcd),
        )
    }
}

/// The sum of the 8 lanes (wrapping).
#[inline(always)]
pub(super) unsafe fn hsum1(a: __m256i) -> i32 {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe {
        let s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
        let s = _mm_hadd_epi32(s, s);
        let s = _mm_hadd_epi32(s, s);
        _mm_cvtsi128_si32(s)
    }
}

/// Raw sums of `R` (1 or 4) rows from `p`. With `N > 0`, `dim_pad == 32 * N`
/// and the query is `qv`; with `N == 0` it is read from `q` per chunk.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn block<const N: usize, const R: usize>(
    p: *const i8,
    dim_pad: usize,
    q: *const u8,
    qv: &[__m256i; N],
    ones: __m256i,
) -> [__m256i; R] {
    // SAFETY: rows 0..R from p hold dim_pad readable bytes, q holds dim_pad
    // (caller); avx2 is enabled by the enclosing function.
    unsafe {
        let mut acc = [_mm256_setzero_si256(); R];
        if N > 0 {
            for k in 0..N {
                for r in 0..R {
                    let c = _mm256_loadu_si256(p.add(r * 32 * N + 32 * k).cast());
                    acc[r] = madd(acc[r], qv[k], c, ones);
                }
            }
        } else {
            let mut j = 0;
            while j < dim_pad {
                let u = _mm256_loadu_si256(q.add(j).cast());
                for r in 0..R {
                    let c = _mm256_loadu_si256(p.add(r * dim_pad + j).cast());
                    acc[r] = madd(acc[r], u, c, ones);
                }
                j += 32;
            }
        }
        acc
    }
}

#[inline(always)]
unsafe fn run<const N: usize, S: Sink>(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    sink: &mut S,
) {
    let (cp, qp, sp) = (codes.as_ptr(), q.as_ptr(), sums.as_ptr());
    // SAFETY: the kernel preconditions (codes hold nrows * dim_pad bytes, q
    // dim_pad, sums nrows; dim_pad == 32 * N when N > 0); avx2 enabled.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let qv: [__m256i; N] = std::array::from_fn(|k| _mm256_loadu_si256(qp.add(32 * k).cast()));
        let mut r = 0;
        while r + 4 <= nrows {
            let [a, b, c, d] = block::<N, 4>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            let raw = hsum4(a, b, c, d);
            let s = _mm_loadu_si128(sp.add(r).cast());
            sink.put4(r, _mm_sub_epi32(raw, _mm_slli_epi32::<6>(s)));
            r += 4;
        }
        while r < nrows {
            let [a] = block::<N, 1>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            sink.put1(r, correct(hsum1(a), *sp.add(r)));
            r += 1;
        }
    }
}

/// Chooses the register-resident query for the common `dim_pad`s.
#[inline(always)]
unsafe fn dispatch<S: Sink>(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    sink: &mut S,
) {
    // SAFETY: forwarded kernel preconditions; N matches dim_pad.
    unsafe {
        match dim_pad {
            64 => run::<2, S>(codes, dim_pad, nrows, q, sums, sink),
            128 => run::<4, S>(codes, dim_pad, nrows, q, sums, sink),
            192 => run::<6, S>(codes, dim_pad, nrows, q, sums, sink),
            256 => run::<8, S>(codes, dim_pad, nrows, q, sums, sink),
            _ => run::<0, S>(codes, dim_pad, nrows, q, sums, sink),
        }
    }
}

/// See [`super::DotFn`].
///
/// # Safety
/// The preconditions of [`super::DotFn`]; the CPU supports avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn dot(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) {
    let mut sink = DotSink {
        out: out.as_mut_ptr(),
    };
    // SAFETY: forwarded preconditions; out holds nrows values.
    unsafe { dispatch(codes, dim_pad, nrows, q, sums, &mut sink) }
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the CPU supports avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn score(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let (out, scales, scale_q) = (out.as_mut_ptr(), epi.scales.as_ptr(), epi.scale_q);
    // SAFETY: forwarded preconditions; out, scales and bias hold nrows values.
    unsafe {
        match epi.bias {
            Some(b) => {
                let mut sink = ScoreSink::<true> {
                    out,
                    scales,
                    bias: b.as_ptr(),
                    scale_q,
                };
                dispatch(codes, dim_pad, nrows, q, sums, &mut sink)
            }
            None => {
                let mut sink = ScoreSink::<false> {
                    out,
                    scales,
                    bias: std::ptr::null(),
                    scale_q,
                };
                dispatch(codes, dim_pad, nrows, q, sums, &mut sink)
            }
        }
    }
}
