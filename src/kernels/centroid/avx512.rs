//! Nearest-centroid top-4, AVX-512 tier (avx512f).
//!
//! Instructions and why:
//! * `vfmadd231ps` with a broadcast point coordinate (`vbroadcastss`): a
//!   register tile of [`ROWS`] points x 32 centroids (two panels) keeps 24
//!   zmm accumulators, so each 512-bit panel load feeds 12 FMAs and each
//!   broadcast 2; no horizontal reduction (each lane is one centroid's
//!   score). The chains start from `h_c` and run over `d` in order, the
//!   oracle's order, so scores are bit-identical to the scalar tier.
//! * `vcmpps` into a mask register (`_mm512_cmp_ps_mask`) against the
//!   point's fourth-best score: after the first panels almost every tile
//!   leaves the top-4 unchanged, and the merge costs two compares and a
//!   mask test per point; only set lanes are inserted, in lane (id) order.
//! * `vmovups`: the panels and points need no alignment.
//!
//! The tile and the loops are `super::tile` and `super::top4_simd`, shared
//! with the AVX2 tier; this tier is their [`Avx512`] vector type
//! (`crate::kernels::simd`) and its tile height.

use crate::kernels::simd::Avx512;

/// Points per register tile.
const ROWS: usize = 12;

super::simd_entries!("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma", Avx512);
