//! The x86 tiers' shared plumbing for [`super::AccFn`] and
//! [`super::ScoreFn`]: an ISA file provides only its block kernel
//! ([`Scan`]: the 32 sums of one block of 32 rows); the run with its
//! prefetch, the tail block, the row sinks and the entry points
//! ([`entries!`]) are here, `#[inline(always)]`, and compile inside each
//! tier's `#[target_feature]` entry function with that tier's instructions.

use std::arch::x86_64::*;

use super::{block_bytes, score_of, Epilogue, BLOCK, PREFETCH_BYTES};
use crate::kernels::simd::prefetch_ahead;

/// A SIMD tier's block kernel: all that an ISA file provides.
pub(super) trait Scan {
    /// The 32 sums of the block at `p`, as four ymm of eight rows each
    /// (rows `0..8`, `8..16`, `16..24`, `24..32`). With `LOW` only rows
    /// `0..16` are summed (their codes are the low nibbles) and the last two
    /// ymm are not to be read: a run's last block holding 16 rows or fewer.
    ///
    /// # Safety
    /// The block holds `16 * m_pad` readable bytes and `lut` as many; the
    /// caller enables the tier's features.
    unsafe fn block<const LOW: bool>(p: *const u8, m_pad: usize, lut: *const u8) -> [__m256i; 4];
}

/// Where the 32 sums of a block go.
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

struct AccSink {
    out: *mut u32,
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

struct ScoreSink<const BIAS: bool> {
    out: *mut f32,
    /// Null when `BIAS` is false.
    bias: *const f32,
    delta: f32,
    offset: f32,
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

/// Hands the four ymm of a block to `sink`: all 32 rows when the block is
/// full, else (a tail block) the first `n` through a stack buffer.
#[inline(always)]
unsafe fn put_block<S: Sink>(sink: &mut S, r0: usize, n: usize, t: [__m256i; 4]) {
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

/// The run: one block of 32 rows at a time, `PREFETCH_BYTES` ahead
/// prefetched.
#[inline(always)]
unsafe fn run<K: Scan, S: Sink>(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    sink: &mut S,
) {
    let bb = block_bytes(m_pad);
    let nblocks = nrows.div_ceil(BLOCK);
    let end = nblocks * bb;
    let (cp, lp) = (codes.as_ptr(), lut.as_ptr());
    // SAFETY: the kernel preconditions (codes hold nblocks * bb bytes, lut
    // 16 * m_pad); features enabled by the enclosing function.
    unsafe {
        for b in 0..nblocks {
            prefetch_ahead(cp, b * bb, bb, end, PREFETCH_BYTES);
            let n = (nrows - b * BLOCK).min(BLOCK);
            // A last block of at most 16 rows has them all in its low
            // nibbles: the high ones are not looked up.
            let t = if n <= BLOCK / 2 {
                K::block::<true>(cp.add(b * bb), m_pad, lp)
            } else {
                K::block::<false>(cp.add(b * bb), m_pad, lp)
            };
            put_block(sink, b * BLOCK, n, t);
        }
    }
}

/// [`super::AccFn`] over the block kernel `K`.
///
/// # Safety
/// The preconditions of [`super::AccFn`]; the caller enables `K`'s
/// features.
#[inline(always)]
pub(super) unsafe fn acc<K: Scan>(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    out: &mut [u32],
) {
    let mut sink = AccSink {
        out: out.as_mut_ptr(),
    };
    // SAFETY: forwarded preconditions; out holds nrows values.
    unsafe { run::<K, _>(codes, m_pad, nrows, lut, &mut sink) }
}

/// [`super::ScoreFn`] over the block kernel `K`.
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the caller enables `K`'s
/// features.
#[inline(always)]
pub(super) unsafe fn score<K: Scan>(
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
                run::<K, _>(codes, m_pad, nrows, lut, &mut sink)
            }
            None => {
                let mut sink = ScoreSink::<false> {
                    out,
                    bias: std::ptr::null(),
                    delta: epi.delta,
                    offset: epi.offset,
                };
                run::<K, _>(codes, m_pad, nrows, lut, &mut sink)
            }
        }
    }
}

/// A tier's `acc` and `score` entry points, each written at the call as
/// its attributes (the `#[target_feature]` among them, so that the
/// function and its features stand literally in the ISA file) and
/// `pub unsafe fn NAME = acc(KERNEL);` or `= score(KERNEL);`: the body
/// monomorphises [`acc`] or [`score`] over the block kernel.
macro_rules! entries {
    () => {};
    ($(#[$m:meta])* pub unsafe fn $name:ident = acc($scan:ty); $($rest:tt)*) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The preconditions of [`super::AccFn`]; the CPU supports the
        /// function's target features.
        pub unsafe fn $name(codes: &[u8], m_pad: usize, nrows: usize, lut: &[u8], out: &mut [u32]) {
            // SAFETY: forwarded preconditions; this function enables the
            // kernel's features.
            unsafe { super::drive::acc::<$scan>(codes, m_pad, nrows, lut, out) }
        }
        entries!($($rest)*);
    };
    ($(#[$m:meta])* pub unsafe fn $name:ident = score($scan:ty); $($rest:tt)*) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The preconditions of [`super::ScoreFn`]; the CPU supports the
        /// function's target features.
        pub unsafe fn $name(
            codes: &[u8],
            m_pad: usize,
            nrows: usize,
            lut: &[u8],
            epi: &super::Epilogue<'_>,
            out: &mut [f32],
        ) {
            // SAFETY: as above.
            unsafe { super::drive::score::<$scan>(codes, m_pad, nrows, lut, epi, out) }
        }
        entries!($($rest)*);
    };
}
pub(super) use entries;
