//! Nearest-centroid top-4, AVX2 tier (avx2 + fma).
//!
//! Instructions and why:
//! * `vfmadd231ps` with a broadcast point coordinate (`vbroadcastss`): a
//!   register tile of 6 points x 16 centroids (one panel, two ymm per
//!   point) keeps 12 accumulators plus two panel loads and one broadcast
//!   in the 16 ymm registers, so each 256-bit panel load feeds 6 FMAs. The
//!   chains start from `h_c` and run over `d` in order, the oracle's order,
//!   so scores are bit-identical to the scalar tier.
//! * `vcmpps` + `vmovmskps` against the point's fourth-best score: almost
//!   every tile leaves the top-4 unchanged after the first panels; only set
//!   lanes are inserted, in lane (id) order.
//! * `vmovups`: the panels and points need no alignment.
//!
//! The tile and the loops are `super::tile` and `super::top4_simd`, shared
//! with the AVX-512 tier; this tier is their [`Avx2`] vector type
//! (`crate::kernels::simd`) and its tile height.

use crate::kernels::simd::Avx2;

/// Points per register tile.
const ROWS: usize = 6;

super::simd_entries!("avx2,fma", Avx2);
