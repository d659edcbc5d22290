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

/// The entry points of a tier.
pub struct Kernels {
    pub tile: TileFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked CPU support).
    Kernels { tile: tile_f32 }
}
