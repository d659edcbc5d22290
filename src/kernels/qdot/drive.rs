//! The x86 tiers' shared plumbing for [`super::DotFn`] and
//! [`super::ScoreFn`]: an ISA file provides only its vector of query/code
//! bytes ([`Chunk`]: the byte step and the final reductions); the 4-row
//! block, the run with its prefetch and 1-row tail, the choice of a
//! register-resident query, the row sinks and the entry points
//! ([`entries!`]) are here, `#[inline(always)]`, and compile inside each
//! tier's `#[target_feature]` entry function with that tier's instructions.

use std::arch::x86_64::*;

use super::{correct, score_of, Epilogue, PREFETCH_BYTES};
use crate::kernels::simd::{prefetch_ahead, prefetch_lines};

/// A SIMD tier's vector of code bytes: all that an ISA file provides.
pub(super) trait Chunk {
    type V: Copy;
    /// Bytes of `V`.
    const BYTES: usize;
    /// # Safety (every method)
    /// The caller enables the tier's target features; `loadu` reads
    /// `BYTES` bytes at `p`.
    unsafe fn zero() -> Self::V;
    /// The constant operand of `step` (i16 ones where it uses `vpmaddwd`).
    unsafe fn ones() -> Self::V;
    unsafe fn loadu(p: *const u8) -> Self::V;
    /// `acc` plus the `BYTES` products `u x c` (u8 x i8), summed in i32
    /// lanes (exact within the kernels' limits).
    unsafe fn step(acc: Self::V, u: Self::V, c: Self::V, ones: Self::V) -> Self::V;
    /// `[sum(a), sum(b), sum(c), sum(d)]` (wrapping).
    unsafe fn reduce4(a: Self::V, b: Self::V, c: Self::V, d: Self::V) -> __m128i;
    /// The sum of the lanes (wrapping).
    unsafe fn reduce1(a: Self::V) -> i32;
}

/// Where the corrected row values go.
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

struct DotSink {
    out: *mut i32,
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

struct ScoreSink<const BIAS: bool> {
    out: *mut f32,
    scales: *const f32,
    /// Null when `BIAS` is false.
    bias: *const f32,
    scale_q: f32,
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

/// `[sum(a), sum(b), sum(c), sum(d)]` (wrapping): a 4x4 transpose-and-add
/// per 128-bit lane with `vpunpck{l,h}{dq,qdq}` (faster per row than three
/// `vphaddd` on Zen 3: `benches/qdot.md`), then the two lanes added.
#[inline(always)]
pub(super) unsafe fn hsum4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m128i {
    // SAFETY: register-only AVX2 operations; the caller enables avx2.
    unsafe {
        // [a0+a2, b0+b2, a1+a3, b1+b3] per lane, then the same for c, d.
        let ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
        let cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
        // [a0+a1+a2+a3, b.., c.., d..] per lane.
        let abcd = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
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

/// Accumulators of `R` (1 or 4) rows from `p`. With `N > 0`,
/// `dim_pad == C::BYTES * N` and the query is `qv`; with `N == 0` it is
/// read from `q` per chunk.
#[inline(always)]
unsafe fn block<C: Chunk, const N: usize, const R: usize>(
    p: *const i8,
    dim_pad: usize,
    q: *const u8,
    qv: &[C::V; N],
    ones: C::V,
) -> [C::V; R] {
    // SAFETY: forwarded (rows 0..R from p are row r at p + r * dim_pad).
    unsafe {
        let rows: [*const i8; R] = std::array::from_fn(|r| p.wrapping_add(r * dim_pad));
        block_at::<C, N, R>(&rows, dim_pad, q, qv, ones)
    }
}

/// Accumulators of the `R` rows at `rows` (each `dim_pad` bytes), as
/// [`block`].
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn block_at<C: Chunk, const N: usize, const R: usize>(
    rows: &[*const i8; R],
    dim_pad: usize,
    q: *const u8,
    qv: &[C::V; N],
    ones: C::V,
) -> [C::V; R] {
    let w = C::BYTES;
    // SAFETY: each row holds dim_pad readable bytes, q holds dim_pad
    // (caller); the enclosing function enables the features.
    unsafe {
        let mut acc = [C::zero(); R];
        if N > 0 {
            for k in 0..N {
                for r in 0..R {
                    let c = C::loadu(rows[r].add(w * k).cast());
                    acc[r] = C::step(acc[r], qv[k], c, ones);
                }
            }
        } else {
            let mut j = 0;
            while j < dim_pad {
                let u = C::loadu(q.add(j));
                for r in 0..R {
                    let c = C::loadu(rows[r].add(j).cast());
                    acc[r] = C::step(acc[r], u, c, ones);
                }
                j += w;
            }
        }
        acc
    }
}

/// The run: blocks of four rows (prefetching [`PREFETCH_BYTES`] ahead),
/// then single rows.
#[inline(always)]
unsafe fn run<C: Chunk, const N: usize, S: Sink>(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    sink: &mut S,
) {
    let (cp, qp, sp) = (codes.as_ptr(), q.as_ptr(), sums.as_ptr());
    // SAFETY: the kernel preconditions (codes hold nrows * dim_pad bytes, q
    // dim_pad, sums nrows; dim_pad == C::BYTES * N when N > 0); features
    // enabled by the enclosing function.
    unsafe {
        let ones = C::ones();
        let qv: [C::V; N] = std::array::from_fn(|k| C::loadu(qp.add(C::BYTES * k)));
        let mut r = 0;
        while r + 4 <= nrows {
            prefetch_ahead(
                cp.cast(),
                r * dim_pad,
                4 * dim_pad,
                nrows * dim_pad,
                PREFETCH_BYTES,
            );
            let [a, b, c, d] = block::<C, N, 4>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            let raw = C::reduce4(a, b, c, d);
            let s = _mm_loadu_si128(sp.add(r).cast());
            sink.put4(r, _mm_sub_epi32(raw, _mm_slli_epi32::<6>(s)));
            r += 4;
        }
        while r < nrows {
            let [a] = block::<C, N, 1>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            sink.put1(r, correct(C::reduce1(a), *sp.add(r)));
            r += 1;
        }
    }
}

/// Expands to `$go!(N)` with the register-resident query's chunk count
/// for `dim_pad` of 64, 128, 192 or 256 (`N = dim_pad / C::BYTES`: 2, 4,
/// 6, 8 ymm or 1..4 zmm), else `$go!(0)` (the query read per chunk). The
/// branches on `ymm` fold at compile time (`C::BYTES` is 32 or 64). The
/// run and the gather both choose `N` this way.
macro_rules! with_query_chunks {
    ($C:ty, $dim_pad:expr, $go:ident) => {{
        let ymm = <$C as Chunk>::BYTES == 32;
        match $dim_pad {
            64 if ymm => $go!(2),
            128 if ymm => $go!(4),
            192 if ymm => $go!(6),
            256 if ymm => $go!(8),
            64 => $go!(1),
            128 => $go!(2),
            192 => $go!(3),
            256 => $go!(4),
            _ => $go!(0),
        }
    }};
}

/// Chooses the register-resident query for `dim_pad` (`with_query_chunks!`).
#[inline(always)]
unsafe fn dispatch<C: Chunk, S: Sink>(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    sink: &mut S,
) {
    macro_rules! go {
        ($n:expr) => {
            run::<C, $n, S>(codes, dim_pad, nrows, q, sums, sink)
        };
    }
    // SAFETY: forwarded kernel preconditions; N matches dim_pad.
    unsafe { with_query_chunks!(C, dim_pad, go) }
}

/// The gather ([`super::GatherFn`]): four positions at a time as a block
/// of four rows (their sums, scales and biases loaded lane by lane), then
/// single positions; the rows `GATHER_AHEAD` positions ahead prefetched.
#[inline(always)]
unsafe fn gather_run<C: Chunk, const N: usize, const BIAS: bool>(
    codes: &[i8],
    dim_pad: usize,
    pos: &[u32],
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let (cp, qp) = (codes.as_ptr(), q.as_ptr());
    let (sp, scp, op) = (sums.as_ptr(), epi.scales.as_ptr(), out.as_mut_ptr());
    let bp = epi.bias.map_or(std::ptr::null(), |b| b.as_ptr());
    let m = pos.len();
    // SAFETY: every position is a row of codes, sums, scales (and bias)
    // and out holds m values (the kernel preconditions); dim_pad ==
    // C::BYTES * N when N > 0; features enabled by the enclosing function.
    // The prefetch is a hint and never faults.
    unsafe {
        let ones = C::ones();
        let qv: [C::V; N] = std::array::from_fn(|k| C::loadu(qp.add(C::BYTES * k)));
        let sq = _mm_set1_ps(epi.scale_q);
        let ahead = |i: usize| {
            if let Some(&a) = pos.get(i + super::GATHER_AHEAD) {
                prefetch_lines(cp.wrapping_add(a as usize * dim_pad).cast(), dim_pad);
            }
        };
        let mut i = 0;
        while i + 4 <= m {
            for t in 0..4 {
                ahead(i + t);
            }
            let p: [usize; 4] = std::array::from_fn(|t| *pos.get_unchecked(i + t) as usize);
            let rows = p.map(|r| cp.add(r * dim_pad));
            let [a, b, c, d] = block_at::<C, N, 4>(&rows, dim_pad, qp, &qv, ones);
            let raw = C::reduce4(a, b, c, d);
            let at = |x: *const i32| {
                _mm_setr_epi32(*x.add(p[0]), *x.add(p[1]), *x.add(p[2]), *x.add(p[3]))
            };
            let atf =
                |x: *const f32| _mm_setr_ps(*x.add(p[0]), *x.add(p[1]), *x.add(p[2]), *x.add(p[3]));
            let dv = _mm_sub_epi32(raw, _mm_slli_epi32::<6>(at(sp)));
            let mut v = _mm_mul_ps(_mm_cvtepi32_ps(dv), _mm_mul_ps(atf(scp), sq));
            if BIAS {
                v = _mm_add_ps(v, atf(bp));
            }
            _mm_storeu_ps(op.add(i), v);
            i += 4;
        }
        while i < m {
            ahead(i);
            let p = *pos.get_unchecked(i) as usize;
            let [a] = block_at::<C, N, 1>(&[cp.add(p * dim_pad)], dim_pad, qp, &qv, ones);
            let b = if BIAS { Some(*bp.add(p)) } else { None };
            *op.add(i) = score_of(
                correct(C::reduce1(a), *sp.add(p)),
                *scp.add(p),
                epi.scale_q,
                b,
            );
            i += 1;
        }
    }
}

/// [`super::GatherFn`] over the chunk `C`: the register-resident query
/// chosen as for a run (`with_query_chunks!`).
///
/// # Safety
/// The preconditions of [`super::GatherFn`]; the caller enables `C`'s
/// features.
#[inline(always)]
pub(super) unsafe fn gather<C: Chunk>(
    codes: &[i8],
    dim_pad: usize,
    pos: &[u32],
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    macro_rules! go {
        ($n:expr) => {
            if epi.bias.is_some() {
                gather_run::<C, $n, true>(codes, dim_pad, pos, q, sums, epi, out)
            } else {
                gather_run::<C, $n, false>(codes, dim_pad, pos, q, sums, epi, out)
            }
        };
    }
    // SAFETY: forwarded kernel preconditions; N matches dim_pad
    // (`with_query_chunks!`).
    unsafe { with_query_chunks!(C, dim_pad, go) }
}

/// [`super::DotFn`] over the chunk `C`.
///
/// # Safety
/// The preconditions of [`super::DotFn`]; the caller enables `C`'s
/// features.
#[inline(always)]
pub(super) unsafe fn dot<C: Chunk>(
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
    unsafe { dispatch::<C, _>(codes, dim_pad, nrows, q, sums, &mut sink) }
}

/// [`super::ScoreFn`] over the chunk `C`.
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the caller enables `C`'s
/// features.
#[inline(always)]
pub(super) unsafe fn score<C: Chunk>(
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
                dispatch::<C, _>(codes, dim_pad, nrows, q, sums, &mut sink)
            }
            None => {
                let mut sink = ScoreSink::<false> {
                    out,
                    scales,
                    bias: std::ptr::null(),
                    scale_q,
                };
                dispatch::<C, _>(codes, dim_pad, nrows, q, sums, &mut sink)
            }
        }
    }
}

/// A tier's `dot`, `score` and `gather` entry points, each written at the
/// call as its attributes (the `#[target_feature]` among them, so that the
/// function and its features stand literally in the ISA file) and
/// `pub unsafe fn NAME = dot(CHUNK);`, `= score(CHUNK);` or
/// `= gather(CHUNK);`: the body monomorphises [`dot`], [`score`] or
/// [`gather`] over the chunk.
macro_rules! entries {
    () => {};
    ($(#[$m:meta])* pub unsafe fn $name:ident = dot($chunk:ty); $($rest:tt)*) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The preconditions of [`super::DotFn`]; the CPU supports the
        /// function's target features.
        pub unsafe fn $name(
            codes: &[i8],
            dim_pad: usize,
            nrows: usize,
            q: &[u8],
            sums: &[i32],
            out: &mut [i32],
        ) {
            // SAFETY: forwarded preconditions; this function enables the
            // chunk's features.
            unsafe { super::drive::dot::<$chunk>(codes, dim_pad, nrows, q, sums, out) }
        }
        entries!($($rest)*);
    };
    ($(#[$m:meta])* pub unsafe fn $name:ident = score($chunk:ty); $($rest:tt)*) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The preconditions of [`super::ScoreFn`]; the CPU supports the
        /// function's target features.
        pub unsafe fn $name(
            codes: &[i8],
            dim_pad: usize,
            nrows: usize,
            q: &[u8],
            sums: &[i32],
            epi: &super::Epilogue<'_>,
            out: &mut [f32],
        ) {
            // SAFETY: as above.
            unsafe { super::drive::score::<$chunk>(codes, dim_pad, nrows, q, sums, epi, out) }
        }
        entries!($($rest)*);
    };
    ($(#[$m:meta])* pub unsafe fn $name:ident = gather($chunk:ty); $($rest:tt)*) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The preconditions of [`super::GatherFn`]; the CPU supports the
        /// function's target features.
        pub unsafe fn $name(
            codes: &[i8],
            dim_pad: usize,
            pos: &[u32],
            q: &[u8],
            sums: &[i32],
            epi: &super::Epilogue<'_>,
            out: &mut [f32],
        ) {
            // SAFETY: as above.
            unsafe { super::drive::gather::<$chunk>(codes, dim_pad, pos, q, sums, epi, out) }
        }
        entries!($($rest)*);
    };
}
pub(super) use entries;
