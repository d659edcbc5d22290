//! Dense layer tile, AVX2 tier (avx2 + fma).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): a register block of 4 rows x 2 queries gives
//!   eight independent accumulator chains (covering the 4-cycle FMA
//!   latency at two FMAs per cycle) for six 256-bit loads per eight FMAs.
//! * `vmovups`: rows and queries need no alignment.
//! * `prefetcht0` of the rows 16 ahead during the first pass over a tile:
//!   the B = 1 stream is memory bound, and the hardware prefetcher alone
//!   keeps fewer lines in flight (`benches/dense.md`).
//! * `vhaddps` + `vextractf128`: the four rows of a block are reduced
//!   together at the end of a dot product (three `vhaddps` and one add give
//!   four logits); the `dim % 8` tail is added in scalar (a fused
//!   multiply-add per element, `f32::mul_add` compiles to `vfmadd` here).
//!
//! The register block and the loop around it are `super::block` and
//! `super::drive`, shared with the AVX-512 tier; this tier is their
//! [`Avx2`] vector type (`crate::kernels::simd`) and its prefetch distance.

use crate::kernels::simd::Avx2;

impl super::Tier for Avx2 {
    const PREFETCH_ROWS: usize = 16;
}

super::simd_entries!("avx2,fma", Avx2);
