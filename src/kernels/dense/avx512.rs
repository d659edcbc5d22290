//! Dense layer tile, AVX-512 tier (avx512f/dq).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 512-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 32 ahead during the first pass over a tile
//!   (the B = 1 stream is memory bound). Measured on Zen 4, B = 1: no
//!   prefetch 18.6-18.9 M logits/s from DRAM, 16 rows ahead 29.3-30.5,
//!   32 ahead 31.0-32.9, 64 ahead 30.8-31.2.
//! * The four rows of a block are reduced together: each 512-bit
//!   accumulator is folded to 256 bits (`vextractf32x8` + `vaddps`), then
//!   three `vhaddps` and one add give the four logits. A separate
//!   `_mm512_reduce_add_ps` per output (the first version) cost about as
//!   many instructions as the FMAs at d = 128 and left this tier slower
//!   than AVX2 at B = 1 on Zen 4. The `dim % 16` tail is added in scalar
//!   (a fused multiply-add per element, `f32::mul_add` compiles to `vfmadd`
//!   here).

use std::arch::x86_64::*;

/// Rows ahead of the current 4-row block that the first pass prefetches.
const PREFETCH_ROWS: usize = 32;

/// `v[0..8] + v[8..16]`.
#[inline(always)]
unsafe fn fold256(v: __m512) -> __m256 {
    // SAFETY: register-only AVX-512 operations; the caller enables
    // avx512f and avx512dq.
    unsafe { _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps::<1>(v)) }
}

/// `[sum(a), sum(b), sum(c), sum(d)]`: each folded to 256 bits, then the
/// AVX2 tier's four-way reduction.
#[inline(always)]
unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512) -> __m128 {
    // SAFETY: register-only AVX/AVX-512 operations; the caller enables
    // avx512f/dq and avx2 (a superset of what the AVX2 helper needs).
    unsafe { super::avx2::hsum4(fold256(a), fold256(b), fold256(c), fold256(d)) }
}

#[inline(always)]
unsafe fn hsum(v: __m512) -> f32 {
    // SAFETY: register-only AVX-512 operation; the caller enables avx512f.
    unsafe { _mm512_reduce_add_ps(v) }
}

#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn block<const R: usize, const Q: usize>(
    w: *const f32,
    stride: usize,
    dim: usize,
    q: *const f32,
    q_stride: usize,
    out: *mut f32,
    out_stride: usize,
) {
    let full = dim / 16 * 16;
    // SAFETY: rows `0..R` of `w` and queries `0..Q` of `q` hold `dim`
    // readable floats each, outputs `(k, r)` are writable (caller); the
    // enclosing function enables avx512f.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); Q]; R];
        let mut d = 0;
        while d < full {
            let qv: [__m512; Q] = std::array::from_fn(|k| _mm512_loadu_ps(q.add(k * q_stride + d)));
            for r in 0..R {
                let wv = _mm512_loadu_ps(w.add(r * stride + d));
                for k in 0..Q {
                    acc[r][k] = _mm512_fmadd_ps(wv, qv[k], acc[r][k]);
                }
            }
            d += 16;
        }
        if R == 4 {
            // Four rows of one query reduced together.
            for k in 0..Q {
                let v = hsum4(acc[0][k], acc[1][k], acc[2][k], acc[3][k]);
                let mut s = [0f32; 4];
                _mm_storeu_ps(s.as_mut_ptr(), v);
                for (r, sr) in s.iter_mut().enumerate() {
                    for j in full..dim {
                        *sr = (*w.add(r * stride + j)).mul_add(*q.add(k * q_stride + j), *sr);
                    }
                    *out.add(k * out_stride + r) = *sr;
                }
            }
            return;
        }
        for r in 0..R {
            for k in 0..Q {
                let mut s = hsum(acc[r][k]);
                for j in full..dim {
                    s = (*w.add(r * stride + j)).mul_add(*q.add(k * q_stride + j), s);
                }
                *out.add(k * out_stride + r) = s;
            }
        }
    }
}

/// See [`super::TileFn`].
///
/// # Safety
/// The preconditions of [`super::TileFn`]; the CPU supports avx512f/bw/dq/vl.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
pub unsafe fn tile_f32(
    w: &[f32],
    stride: usize,
    nrows: usize,
    dim: usize,
    q: &[f32],
    q_stride: usize,
    nq: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let (wp, qp, op) = (w.as_ptr(), q.as_ptr(), out.as_mut_ptr());
    let mut i = 0;
    while i < nq {
        let two = i + 2 <= nq;
        let mut r = 0;
        while r < nrows {
            let four = r + 4 <= nrows;
            if i == 0 && four {
                // First pass over these rows: ask for the rows PREFETCH_ROWS
                // ahead.
                // SAFETY: a prefetch hint (see prefetch_block).
                unsafe {
                    super::avx2::prefetch_block(
                        wp.wrapping_add((r + PREFETCH_ROWS) * stride),
                        stride,
                        dim,
                    )
                };
            }
            // SAFETY: rows r..r+4 (or r) < nrows and queries i..i+2 (or i)
            // < nq lie within the buffers the caller guarantees.
            unsafe {
                let (wr, qi, o) = (
                    wp.add(r * stride),
                    qp.add(i * q_stride),
                    op.add(i * out_stride + r),
                );
                match (four, two) {
                    (true, true) => block::<4, 2>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (true, false) => block::<4, 1>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (false, true) => block::<1, 2>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (false, false) => block::<1, 1>(wr, stride, dim, qi, q_stride, o, out_stride),
                }
            }
            r += if four { 4 } else { 1 };
        }
        i += if two { 2 } else { 1 };
    }
}
