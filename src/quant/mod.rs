//! Quantised codes of rows: symmetric per-row int8 ([`qdot`]: the one int8
//! row quantiser, which `matmul`'s conversion and the IVF codes share) and
//! 4-bit product quantisation ([`pq4`]), each scored by its kernel family
//! and re-ranked exactly by the index's scorer.

pub mod pq4;
pub mod qdot;
