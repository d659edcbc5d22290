//! # lshk
//!
//! Hand-vectorized AVX2/AVX-512 kernels for sublinear wide output layers:
//! hash the query (SimHash, DWTA), gather candidate rows from LSH tables, and
//! compute logits only for those rows. Every kernel has a scalar oracle and
//! portable, AVX2 and AVX-512 tiers chosen once at run time (see [`isa`]).
//!
//! The C ABI lives in [`ffi`] and is described by `include/lshk.h`.

#![deny(unsafe_op_in_unsafe_fn)]

/// cbindgen:ignore
pub(crate) mod buf;
/// cbindgen:ignore
pub mod centroid;
pub mod crc32c;
/// cbindgen:ignore
pub mod data;
/// cbindgen:ignore
pub mod dense;
/// cbindgen:ignore
pub mod error;
/// cbindgen:ignore
pub mod forest;
/// cbindgen:ignore
pub mod format;
/// cbindgen:ignore
pub mod graph;
/// cbindgen:ignore
pub mod hash;
/// cbindgen:ignore
pub mod hrr;
/// cbindgen:ignore
pub mod index;
/// cbindgen:ignore
pub mod isa;
/// cbindgen:ignore
pub mod iul;
/// cbindgen:ignore
pub mod ivf;
/// The per-ISA kernels under the safe API. Public only so that the per-tier
/// tests and benches can call each tier against its scalar oracle; not part
/// of the API (no stability promise), hence hidden from the docs.
///
/// cbindgen:ignore
#[doc(hidden)]
pub mod kernels;
/// cbindgen:ignore
pub mod labels;
/// cbindgen:ignore
pub mod matmul;
mod par;
/// cbindgen:ignore
pub mod pq4;
/// cbindgen:ignore
pub mod qdot;
/// cbindgen:ignore
pub mod rng;
/// cbindgen:ignore
pub mod tables;
/// cbindgen:ignore
pub mod train;
/// cbindgen:ignore
pub mod train_logq;

pub mod ffi;

/// The two hash families' historical paths (`lshk::simhash`, `lshk::dwta`):
/// they live in `hash/` with their seam registration.
pub use hash::{dwta, simhash};

pub use dwta::Dwta;
pub use error::{Error, Result, Status};
pub use index::Index;
pub use isa::Isa;
pub use simhash::SimHash;
