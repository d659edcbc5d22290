//! Exact dense output layer kernels: `out[i][r] = dot(W[r], Q[i])` for a
//! tile of rows and a batch of queries (the baseline every sublinear
//! result is compared with, and the ground truth for recall).
//!
//! A tier provides one entry point, [`TileFn`]. The caller
//! ([`crate::dense`]) checks every length first and chooses the tiling:
//! W is streamed once per batch in tiles of rows small enough to stay in L1
//! while every query of the batch is multiplied with them, so at B = 64
//! each row is fetched from memory once and reused 64 times from cache; at
//! B = 1 the kernel is a GEMV bound by the memory bandwidth.
//!
//! The SIMD tiers use a register block of 4 rows x 2 queries (eight
//! accumulator chains, six loads per eight FMAs), sums reduced
//! horizontally at the end; `dim % lanes` is added in scalar.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// `tile(w, stride, nrows, dim, q, q_stride, nq, out, out_stride)`:
/// `out[i * out_stride + r] = dot(w[r * stride ..][..dim], q[i * q_stride ..][..dim])`
/// for `r < nrows`, `i < nq`.
///
/// # Safety
/// `dim >= 1`; `w` holds `(nrows - 1) * stride + dim` elements when
/// `nrows > 0`; `q` holds `(nq - 1) * q_stride + dim` when `nq > 0`;
/// `out` holds `(nq - 1) * out_stride + nrows` when both are > 0; the CPU
/// supports the tier the function belongs to.
pub type TileFn = unsafe fn(&[f32], usize, usize, usize, &[f32], usize, usize, &mut [f32], usize);

#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::F32x;

/// What the dense tile adds to a SIMD tier's vector ops
/// ([`crate::kernels::simd`]): the 4-row x 2-query register block
/// ([`block`]) and the row x query loop ([`drive`]) around it are shared.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Tier: F32x {
    /// Rows ahead of the current 4-row block that the first pass over a
    /// tile prefetches.
    const PREFETCH_ROWS: usize;
}

/// Prefetches the four rows of `stride` floats (`dim` used) that start at
/// `base`. The address may lie beyond the matrix: a prefetch never faults,
/// and `wrapping_add` never creates UB.
///
/// # Safety
/// None beyond SSE, which every x86-64 CPU has: the instruction is a hint
/// and never faults (it is `unsafe` only because of its target feature).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch_block(base: *const f32, stride: usize, dim: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
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

/// `out[k * out_stride + r] = dot(w[r * stride ..][..dim], q[k * q_stride
/// ..][..dim])` for `r < R`, `k < Q`: `R x Q` accumulator chains over
/// `dim / LANES` vectors, four rows of one query reduced together, the
/// `dim % LANES` tail added in scalar (`f32::mul_add`, a `vfmadd` here).
///
/// # Safety
/// Rows `0..R` of `w` and queries `0..Q` of `q` hold `dim` readable floats
/// each, the outputs are writable, and the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn block<S: Tier, const R: usize, const Q: usize>(
    w: *const f32,
    stride: usize,
    dim: usize,
    q: *const f32,
    q_stride: usize,
    out: *mut f32,
    out_stride: usize,
) {
    let full = dim / S::LANES * S::LANES;
    // SAFETY: the reads stay within rows 0..R and queries 0..Q (dim floats
    // each), the writes at the R x Q outputs (caller).
    unsafe {
        let mut acc = [[S::zero(); Q]; R];
        let mut d = 0;
        while d < full {
            let qv: [S::V; Q] = std::array::from_fn(|k| S::loadu(q.add(k * q_stride + d)));
            for r in 0..R {
                let wv = S::loadu(w.add(r * stride + d));
                for k in 0..Q {
                    acc[r][k] = S::fmadd(wv, qv[k], acc[r][k]);
                }
            }
            d += S::LANES;
        }
        if R == 4 {
            // Four rows of one query reduced together.
            for k in 0..Q {
                let mut s = S::hsum4(acc[0][k], acc[1][k], acc[2][k], acc[3][k]);
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
                let mut s = S::hsum_hadd(acc[r][k]);
                for j in full..dim {
                    s = (*w.add(r * stride + j)).mul_add(*q.add(k * q_stride + j), s);
                }
                *out.add(k * out_stride + r) = s;
            }
        }
    }
}

/// The SIMD tiers' [`TileFn`] around [`block`]: queries in pairs,
/// rows in blocks of four (singles at the ends), the rows
/// `S::PREFETCH_ROWS` ahead prefetched on the first pass. Inlined into
/// each tier's `#[target_feature]` entry point, so it compiles with that
/// tier's instructions.
///
/// # Safety
/// The preconditions of [`TileFn`]; the caller enables the features `S`
/// needs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn drive<S: Tier>(
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
                // First pass over these rows: ask for the rows
                // PREFETCH_ROWS ahead.
                // SAFETY: a prefetch hint (see prefetch_block).
                unsafe {
                    prefetch_block(
                        wp.wrapping_add((r + S::PREFETCH_ROWS) * stride),
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
                    (true, true) => block::<S, 4, 2>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (true, false) => block::<S, 4, 1>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (false, true) => block::<S, 1, 2>(wr, stride, dim, qi, q_stride, o, out_stride),
                    (false, false) => {
                        block::<S, 1, 1>(wr, stride, dim, qi, q_stride, o, out_stride)
                    }
                }
            }
            r += if four { 4 } else { 1 };
        }
        i += if two { 2 } else { 1 };
    }
}

/// The entry points of a tier.
pub struct Kernels {
    pub tile: TileFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked CPU support).
    Kernels { tile: tile_f32 }
}

/// The entry points of the two SIMD tiers, listed once: `avx2.rs` and
/// `avx512.rs` each instantiate them with their target features and vector
/// type (`crate::kernels::simd::entries!` writes the functions).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_entries {
    ($feat:literal, $T:ty) => {
        $crate::kernels::simd::entries! { $feat;
            /// [`super::TileFn`].
            fn tile_f32(
                w: &[f32],
                stride: usize,
                nrows: usize,
                dim: usize,
                q: &[f32],
                q_stride: usize,
                nq: usize,
                out: &mut [f32],
                out_stride: usize,
            ) => super::drive::<$T>;
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_entries;
