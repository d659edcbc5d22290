//! Training kernels, AVX2 tier (avx2; the tier also guarantees fma, which
//! is deliberately not used: see the module docs of `super` — every tier
//! returns the same bits, and the portable tier has no FMA).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` (never `vfmadd`): the operations of the
//!   scalar oracle, lane-wise, so results are bit-identical.
//! * Two ymm accumulators are the 16 interleaved partial sums of a segment
//!   sum (`super::LANES`); `vextractf128`, `vmovhlps`, `vmovshdup` reduce
//!   them in the fixed tree of `super::lane_sum`.
//! * `vmaxps` with `x` clamped to `EXP_MIN`, the `1.5 * 2^23` add/sub
//!   rounding, `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`, and
//!   `vcmpltps` + `vandnps` for the flush to zero: `super::exp_neg`
//!   lane-wise.
//! * `vmaskmovps` loads and stores for the `n % 16` (segments) and
//!   `dim % 8` (rows) tails only: masked lanes are never touched. Full
//!   blocks use `vmovups` (`M8`): a `vmaskmovps` store is slow on AMD
//!   cores (the L3 row updates ran 2.4-2.9x slower on Zen 4 with it on
//!   every block, benches/train.md).
//! * `vdivps` and `vsqrtps` (correctly rounded) in Adam.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.
//!
//! The loops are the generic `*_simd` drivers of `super`, shared with the
//! AVX-512 tier; this tier is their [`Avx2`] vector type
//! (`crate::kernels::simd`).

use super::{AdamCoef, Rows};
use crate::kernels::simd::{entries, Avx2, Bf16, F32};

entries! { "avx2";
    /// [`super::XentFn`].
    fn xent(x: &mut [f32], y: &[f32]) -> f32 => super::xent_simd::<Avx2>;
    /// [`super::DqFn`] of f32 rows.
    fn dq_f32(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32])
        => super::dq_simd::<Avx2, F32>;
    /// [`super::DqFn`] of bf16 rows.
    fn dq_bf16(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32])
        => super::dq_simd::<Avx2, Bf16>;
    /// [`super::SgdFn`].
    fn sgd(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32)
        => super::sgd_simd::<Avx2>;
    /// [`super::AdamFn`].
    fn adam(
        w: &mut [f32],
        m: &mut [f32],
        v: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
        c: &AdamCoef,
    ) => super::adam_simd::<Avx2>;
}

// The tier table's `prefetch` (`tier_table!` in `../mod.rs`).
pub use crate::kernels::matmul::avx2::prefetch;
