//! Kernel families, one folder each, one file per instruction set
//! (`scalar.rs` is the oracle; `portable.rs`, `avx2.rs`, `avx512.rs` are
//! tested against it). Each family's `mod.rs` holds the per-tier function
//! table that the dispatcher indexes once per call.

pub mod centroid;
pub mod dense;
pub mod dwta;
pub mod gather;
pub mod graph;
pub mod hrr;
pub mod matmul;
pub mod pq4;
pub mod qdot;
pub mod simhash;
pub mod train;
