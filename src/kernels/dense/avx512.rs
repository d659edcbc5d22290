//! Dense layer tile, AVX-512 tier (avx512f/dq).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 512-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 32 ahead during the first pass over a tile
//!   (the B = 1 stream is memory bound): on Zen 4 the best of the
//!   distances tried, well ahead of no prefetch (`benches/dense.md`,
//!   "AVX-512 on Zen 4").
//! * The four rows of a block are reduced together: each 512-bit
//!   accumulator is folded to 256 bits (`vextractf32x8` + `vaddps`), then
//!   three `vhaddps` and one add give the four logits. A separate
//!   `_mm512_reduce_add_ps` per output costs about as many instructions as
//!   the FMAs at d = 128, and would leave this tier slower than AVX2 at
//!   B = 1 on Zen 4 (same section). The `dim % 16` tail is added in scalar
//!   (a fused multiply-add per element, `f32::mul_add` compiles to `vfmadd`
//!   here).
//!
//! The register block and the loop around it are `super::block` and
//! `super::drive`, shared with the AVX2 tier; this tier is their
//! [`Avx512`] vector type (`crate::kernels::simd`) and its prefetch distance.

use crate::kernels::simd::Avx512;

impl super::Tier for Avx512 {
    const PREFETCH_ROWS: usize = 32;
}

super::simd_entries!("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma", Avx512);
