//! Training kernels, AVX-512 tier (avx512f + bw + dq + vl). Executed on AMD
//! Zen 4 (`tests/train.rs`, every kernel bit-identical to the scalar
//! oracle; see docs/avx512.md).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` on zmm, never `vfmadd`: the oracle's
//!   operations lane-wise (every tier returns the same bits, see `super`).
//! * One zmm accumulator is exactly the 16 interleaved partial sums of a
//!   segment sum (`super::LANES`); it is folded with `vextractf32x8` into
//!   the AVX2 tier's fixed reduction tree.
//! * Masked loads and stores (`{k}{z}`) for the `n % 16` segment tails and
//!   the `dim % 16` row tails: masked lanes never fault and are never
//!   written; `vcmpps` into a mask register + a zero-masked move for the
//!   flush to zero of `exp`.
//! * `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`; `vdivps`, `vsqrtps`
//!   (correctly rounded) in Adam.
//! * `vpmovzxwd` + `vpslld 16` to widen bf16 rows (exact).
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.
//!
//! The loops are the generic `*_simd` drivers of `super`, shared with the
//! AVX2 tier; this tier is their [`Avx512`] vector type
//! (`crate::kernels::simd`).

use super::{AdamCoef, Rows};
use crate::kernels::simd::{entries, Avx512, Bf16, F32};

entries! { "avx512f,avx512bw,avx512dq,avx512vl";
    /// [`super::XentFn`].
    fn xent(x: &mut [f32], y: &[f32]) -> f32 => super::xent_simd::<Avx512>;
    /// [`super::DqFn`] of f32 rows.
    fn dq_f32(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32])
        => super::dq_simd::<Avx512, F32>;
    /// [`super::DqFn`] of bf16 rows.
    fn dq_bf16(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32])
        => super::dq_simd::<Avx512, Bf16>;
    /// [`super::SgdFn`].
    fn sgd(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32)
        => super::sgd_simd::<Avx512>;
    /// [`super::AdamFn`].
    fn adam(
        w: &mut [f32],
        m: &mut [f32],
        v: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
        c: &AdamCoef,
    ) => super::adam_simd::<Avx512>;
}

// The tier table's `prefetch` (`tier_table!` in `../mod.rs`).
pub use crate::kernels::matmul::avx2::prefetch;
