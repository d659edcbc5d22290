//! Quantised dot products, AVX-512 tier (avx512f + bw + dq + vl, and
//! `vpdpbusd` when the CPU has AVX-512 VNNI). NOT EXECUTED on the
//! development machine (Zen 3, no AVX-512): compiled and reviewed, the same
//! structure as the AVX2 tier with 64-byte chunks; the tests run it (both
//! flavours on VNNI CPUs) wherever the CPU has AVX-512.
//!
//! Instructions and why:
//! * `vpdpbusd` (VNNI flavour, `dot_vnni` / `score_vnni`): 64 u8 x i8
//!   products, summed in groups of four and added to 16 i32 lanes in one
//!   instruction, in i32 without saturation (`vpdpbusds` is the
//!   saturating one, not used), so it is exact for any bytes.
//! * Without VNNI: `vpmaddubsw zmm` (u8 x i8 -> i16 pairs; with query bytes
//!   `u <= 127` and codes `-128 <= c <= 127` a pair lies in
//!   `-32512..=32258`, so the saturation never triggers) then `vpmaddwd`
//!   with ones -> i32, `vpaddd`.
//! * Four rows at a time, four accumulators sharing each query chunk; with
//!   `dim_pad` of 64, 128, 192 or 256 (`N` = 1..4 zmm) the query stays in
//!   registers for the run. The four zmm accumulators are folded to ymm
//!   (`vextracti64x4` + `vpaddd`) and reduced together as in the AVX2 tier
//!   (`vphaddd`), whose row sinks (`vpslld 6` + `vpsubd` for the
//!   `64 * sums[r]` correction; `vcvtdq2ps`, `vmulps`, `vaddps` for the
//!   scores, in the scalar tier's order) are reused.

use std::arch::x86_64::*;

use super::avx2::{hsum1, hsum4, DotSink, ScoreSink, Sink};
use super::{correct, Epilogue};

/// `acc + (64 products of u and c, in groups)`: `vpdpbusd` with VNNI,
/// else `vpmaddubsw` + `vpmaddwd(ones)` + `vpaddd`.
#[inline(always)]
unsafe fn step<const VNNI: bool>(acc: __m512i, u: __m512i, c: __m512i, ones: __m512i) -> __m512i {
    // SAFETY: register-only operations; the enclosing function enables
    // avx512f/bw (and avx512vnni when VNNI).
    unsafe {
        if VNNI {
            _mm512_dpbusd_epi32(acc, u, c)
        } else {
            _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, c), ones))
        }
    }
}

/// The 16 lanes of `a` folded to 8 (wrapping).
#[inline(always)]
unsafe fn fold(a: __m512i) -> __m256i {
    // SAFETY: register-only avx512f operations.
    unsafe { _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a)) }
}

/// Accumulators of `R` (1 or 4) rows from `p`. With `N > 0`,
/// `dim_pad == 64 * N` and the query is `qv`; with `N == 0` it is read
/// from `q` per chunk.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn block<const VNNI: bool, const N: usize, const R: usize>(
    p: *const i8,
    dim_pad: usize,
    q: *const u8,
    qv: &[__m512i; N],
    ones: __m512i,
) -> [__m512i; R] {
    // SAFETY: rows 0..R from p hold dim_pad readable bytes, q holds dim_pad
    // (caller); the enclosing function enables the features.
    unsafe {
        let mut acc = [_mm512_setzero_si512(); R];
        if N > 0 {
            for k in 0..N {
                for r in 0..R {
                    let c = _mm512_loadu_si512(p.add(r * 64 * N + 64 * k).cast());
                    acc[r] = step::<VNNI>(acc[r], qv[k], c, ones);
                }
            }
        } else {
            let mut j = 0;
            while j < dim_pad {
                let u = _mm512_loadu_si512(q.add(j).cast());
                for r in 0..R {
                    let c = _mm512_loadu_si512(p.add(r * dim_pad + j).cast());
                    acc[r] = step::<VNNI>(acc[r], u, c, ones);
                }
                j += 64;
            }
        }
        acc
    }
}

#[inline(always)]
unsafe fn run<const VNNI: bool, const N: usize, S: Sink>(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    sink: &mut S,
) {
    let (cp, qp, sp) = (codes.as_ptr(), q.as_ptr(), sums.as_ptr());
    // SAFETY: the kernel preconditions (codes hold nrows * dim_pad bytes, q
    // dim_pad, sums nrows; dim_pad == 64 * N when N > 0); features enabled
    // by the enclosing function.
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let qv: [__m512i; N] = std::array::from_fn(|k| _mm512_loadu_si512(qp.add(64 * k).cast()));
        let mut r = 0;
        while r + 4 <= nrows {
            let [a, b, c, d] = block::<VNNI, N, 4>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            let raw = hsum4(fold(a), fold(b), fold(c), fold(d));
            let s = _mm_loadu_si128(sp.add(r).cast());
            sink.put4(r, _mm_sub_epi32(raw, _mm_slli_epi32::<6>(s)));
            r += 4;
        }
        while r < nrows {
            let [a] = block::<VNNI, N, 1>(cp.add(r * dim_pad), dim_pad, qp, &qv, ones);
            sink.put1(r, correct(hsum1(fold(a)), *sp.add(r)));
            r += 1;
        }
    }
}

#[inline(always)]
unsafe fn dispatch<const VNNI: bool, S: Sink>(
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
            64 => run::<VNNI, 1, S>(codes, dim_pad, nrows, q, sums, sink),
            128 => run::<VNNI, 2, S>(codes, dim_pad, nrows, q, sums, sink),
            192 => run::<VNNI, 3, S>(codes, dim_pad, nrows, q, sums, sink),
            256 => run::<VNNI, 4, S>(codes, dim_pad, nrows, q, sums, sink),
            _ => run::<VNNI, 0, S>(codes, dim_pad, nrows, q, sums, sink),
        }
    }
}

#[inline(always)]
unsafe fn dot_impl<const VNNI: bool>(
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
    unsafe { dispatch::<VNNI, _>(codes, dim_pad, nrows, q, sums, &mut sink) }
}

#[inline(always)]
unsafe fn score_impl<const VNNI: bool>(
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
                dispatch::<VNNI, _>(codes, dim_pad, nrows, q, sums, &mut sink)
            }
            None => {
                let mut sink = ScoreSink::<false> {
                    out,
                    scales,
                    bias: std::ptr::null(),
                    scale_q,
                };
                dispatch::<VNNI, _>(codes, dim_pad, nrows, q, sums, &mut sink)
            }
        }
    }
}

/// See [`super::DotFn`] (`vpmaddubsw` + `vpmaddwd`).
///
/// # Safety
/// The preconditions of [`super::DotFn`]; the CPU supports avx512f/bw/dq/vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
pub unsafe fn dot(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { dot_impl::<false>(codes, dim_pad, nrows, q, sums, out) }
}

/// See [`super::ScoreFn`] (`vpmaddubsw` + `vpmaddwd`).
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the CPU supports avx512f/bw/dq/vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
pub unsafe fn score(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { score_impl::<false>(codes, dim_pad, nrows, q, sums, epi, out) }
}

/// See [`super::DotFn`] (`vpdpbusd`).
///
/// # Safety
/// The preconditions of [`super::DotFn`]; the CPU supports
/// avx512f/bw/dq/vl and avx512vnni.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
pub unsafe fn dot_vnni(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { dot_impl::<true>(codes, dim_pad, nrows, q, sums, out) }
}

/// See [`super::ScoreFn`] (`vpdpbusd`).
///
/// # Safety
/// The preconditions of [`super::ScoreFn`]; the CPU supports
/// avx512f/bw/dq/vl and avx512vnni.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
pub unsafe fn score_vnni(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { score_impl::<true>(codes, dim_pad, nrows, q, sums, epi, out) }
}
