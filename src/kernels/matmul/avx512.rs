//! Gathered matmul, AVX-512 tier (avx512f + bw + dq + vl). Every format
//! (f32, bf16, f16, int8) runs the same `dot_simd` with its own load from
//! `crate::kernels::simd`, and the tests check it against the oracle within
//! the f32 bound; where each kernel has run: docs/avx512.md.
//!
//! Instructions and why:
//! * `vfmadd231ps zmm`: 4 rows x 2 accumulators of 16 lanes.
//! * Masked loads (`vmovups`/`vmovdqu16`/`vmovdqu8` with `{k}{z}`) for the
//!   `dim % 16` tail of rows and of the query: masked-off lanes never fault.
//! * `vpmovzxwd` + `vpslld 16` (bf16), `vcvtph2ps zmm` (f16),
//!   `vpmovsxbd` + `vcvtdq2ps` (int8): exact widening to f32, so all four
//!   formats share one generic loop (`super::dot_simd`) and, by construction, the
//!   f32 accumulation bound of every other tier (see `crate::matmul`).
//! * `vdpbf16ps` (AVX-512 BF16) is deliberately NOT used for bf16, although
//!   Zen 4 and Sapphire Rapids have it: a kernel that rounds q to bf16
//!   breaks the f32 bound (`tests/fuzz_args/` and `tests/index.rs` catch
//!   it; docs/avx512.md), and splitting q does not make one worth having:
//!   - the bound: `vdpbf16ps` multiplies bf16 by bf16, so q must be split
//!     into bf16 terms. Two terms (hi + lo) leave a residual of about
//!     `2^-16 |q_j|` per element, i.e. `2^-16 * S` per dot product, which
//!     exceeds the f32 bound `gamma(dim) * S ~ dim * 2^-24 * S` for every
//!     `dim < 256` (dim = 17: 1.5e-5 vs 1.0e-6 relative). Three terms
//!     (hi, mid, lo) would leave ~`2^-24 * S`, at three instructions per
//!     pair of elements;
//!   - `vdpbf16ps` flushes subnormal inputs and results to zero (DAZ/FTZ
//!     behaviour whatever MXCSR says), which the widening path does not;
//!   - the kernel is memory-bound (scattered rows), so the widening costs
//!     no time at these row sizes; whether a 3-term `vdpbf16ps` kernel
//!     would be faster at all is unmeasured.
//!
//!   A 3-term split could be added as an explicit opt-in, with its
//!   own derived bound (subnormals included) and a measurement beside this
//!   path; it must not be the default.
//! * `vpdpbusd` (VNNI) is deliberately NOT used for int8: it multiplies
//!   8-bit by 8-bit, so it would need the query quantised to 8 bits, while
//!   lshk keeps Q in f32 on every tier (see `crate::matmul`); int8 rows are
//!   widened to f32 instead, which is exact. The work is memory-bound, so
//!   the widening costs no time at these row sizes.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` ahead, as in AVX2.
//!
//! The loop is `super::dot_simd`, shared with the AVX2 tier; this tier is
//! its [`Avx512`] vector type (`crate::kernels::simd`), each row reduced
//! alone (`_mm512_reduce_add_ps`).

use super::Rows;
use crate::kernels::simd::{entries, Avx512, Bf16, F16, F32, I8};

impl super::Tier for Avx512 {
    const REDUCE4: bool = false;
}

entries! { "avx512f,avx512bw,avx512dq,avx512vl";
    /// [`super::DotFn`] of f32 rows.
    fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx512, F32>;
    /// [`super::DotFn`] of bf16 rows.
    fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx512, Bf16>;
    /// [`super::DotFn`] of IEEE half rows.
    fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx512, F16>;
    /// [`super::DotFn`] of int8 rows.
    fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx512, I8>;
}

/// The tier table's `prefetch` (`tier_table!` in `../mod.rs`): the
/// AVX2 tier's `prefetcht0` loop.
pub use super::avx2::prefetch;
