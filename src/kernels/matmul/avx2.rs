//! Gathered matmul, AVX2 tier (avx2 + fma; f16 also needs f16c).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): one rounding per product-add, eight independent
//!   accumulator chains (4 rows x 2) to cover the 4-cycle FMA latency.
//! * `vmovups` for f32 rows, `vpmovzxwd` + `vpslld 16` for bf16 (a bf16 is
//!   the top half of an f32), `vcvtph2ps` (F16C) for IEEE half,
//!   `vpmovsxbd` + `vcvtdq2ps` for int8: all exact conversions to f32.
//! * `vmaskmovps` for the `dim % 8` tail of f32 rows and of the query (masked
//!   lanes are never touched, so a row ending at the last byte of a mapping
//!   cannot fault); narrow types copy their tail into a zeroed 8-lane buffer.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead (up to
//!   `PREFETCH_MAX_BYTES` of each): the ids are known in advance, and keeping
//!   many row fetches in flight is what makes a scattered gather fast.
//! * `vhaddps` to reduce four rows' accumulators at once into one `__m128`.
//!
//! The loop is `super::dot_simd`, shared with the AVX-512 tier; this tier
//! is its [`Avx2`] vector type (`crate::kernels::simd`) with four-row
//! reductions.

use super::Rows;
use crate::kernels::simd::{entries, prefetch_row, Avx2, Bf16, F16, F32, I8};

impl super::Tier for Avx2 {
    const REDUCE4: bool = true;
}

/// [`super::PrefetchFn`]: `prefetcht0` of the lines of `bytes` bytes at `p`
/// and of its last byte (SSE, so also used by the AVX-512 tier).
pub fn prefetch(p: *const u8, bytes: usize) {
    prefetch_row(p, bytes.max(1));
}

entries! { "avx2,fma";
    /// [`super::DotFn`] of f32 rows.
    fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx2, F32>;
    /// [`super::DotFn`] of bf16 rows.
    fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx2, Bf16>;
    /// [`super::DotFn`] of int8 rows.
    fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx2, I8>;
}

entries! { "avx2,fma,f16c";
    /// [`super::DotFn`] of IEEE half rows (the dispatcher uses the
    /// portable kernel when f16c is missing).
    fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32])
        => super::dot_simd::<Avx2, F16>;
}
