//! Dense layer tile, AVX-512 tier (avx512f; compiled, not executed on Zen 3).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 512-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `_mm512_reduce_add_ps` (a shuffle-and-add tree): one horizontal reduction per output at the
//!   end of a dot product; the `dim % 16` tail is added in scalar (a fused
//!   multiply-add per element, `f32::mul_add` compiles to `vfmadd` here).

use std::arch::x86_64::*;

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
