//! Dense layer tile, AVX2 tier (avx2 + fma).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 256-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 16 ahead during the first pass over a tile
//!   (measured ~20 % faster at B = 1 on Zen 3; the stream is memory bound).
//! * `vhaddps` + `vextractf128`: the four rows of a block are reduced
//!   together at the end of a dot product (three `vhaddps` and one add give
//!   four logits); the `dim % 8` tail is added in scalar (a fused
//!   multiply-add per element, `f32::mul_add` compiles to `vfmadd` here).

use std::arch::x86_64::*;

/// Rows ahead of the current 4-row block that the first pass prefetches.
const PREFETCH_ROWS: usize = 16;

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only AVX operations; the caller enables avx.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_hadd_ps(s, s);
        let s = _mm_hadd_ps(s, s);
        _mm_cvtss_f32(s)
    }
}

/// Prefetches the four rows of `stride` floats (`dim` used) that start at
/// `base` (also used by the AVX-512 tier). The address may lie beyond the
/// matrix: a prefetch never faults, and `wrapping_add` never creates UB.
///
/// # Safety
/// None beyond SSE, which every x86-64 CPU has: the instruction is a hint
/// and never faults (it is `unsafe` only because of its target feature).
#[inline(always)]
pub(super) unsafe fn prefetch_block(base: *const f32, stride: usize, dim: usize) {
    let (base, row_bytes) = (base.cast::<i8>(), dim * 4);
    let mut off = 0;
    while off < 4 * row_bytes {
        // `off / row_bytes` is the row within the block, skipping stride
        // padding.
        let p = base.wrapping_add(off + (off / row_bytes) * (stride - dim) * 4);
        // SAFETY: a prefetch hint on an x86-64 CPU (SSE); it never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        off += 64;
    }
}

/// `[sum(a), sum(b), sum(c), sum(d)]` (also the AVX-512 tier's last step).
#[inline(always)]
pub(super) unsafe fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256) -> __m128 {
    // SAFETY: register-only AVX operations; the caller enables avx.
    unsafe {
        let abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
        _mm_add_ps(
            _mm256_castps256_ps128(abcd),
            _mm256_extractf128_ps::<1>(abcd),
        )
    }
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
    let full = dim / 8 * 8;
    // SAFETY: rows `0..R` of `w` and queries `0..Q` of `q` hold `dim`
    // readable floats each, outputs `(k, r)` are writable (caller); the
    // enclosing function enables avx2 and fma.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); Q]; R];
        let mut d = 0;
        while d < full {
            let qv: [__m256; Q] = std::array::from_fn(|k| _mm256_loadu_ps(q.add(k * q_stride + d)));
            for r in 0..R {
                let wv = _mm256_loadu_ps(w.add(r * stride + d));
                for k in 0..Q {
                    acc[r][k] = _mm256_fmadd_ps(wv, qv[k], acc[r][k]);
                }
            }
            d += 8;
        }
        if R == 4 {
            // Four rows of one query reduced together: 3 vhaddps + 1 add.
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
/// The preconditions of [`super::TileFn`]; the CPU supports avx2 and fma.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
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
                    prefetch_block(wp.wrapping_add((r + PREFETCH_ROWS) * stride), stride, dim)
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
