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
pub mod format;
/// cbindgen:ignore
pub mod hrr;
/// cbindgen:ignore
pub mod index;
/// cbindgen:ignore
pub mod isa;
/// The per-ISA kernels under the safe API. Public only so that the per-tier
/// tests and benches can call each tier against its scalar oracle; not part
/// of the API (no stability promise), hence hidden from the docs.
///
/// cbindgen:ignore
#[doc(hidden)]
pub mod kernels;
/// cbindgen:ignore
pub mod matmul;
/// cbindgen:ignore
mod par;
/// cbindgen:ignore
pub mod quant;
/// cbindgen:ignore
pub mod rng;
/// cbindgen:ignore
pub mod source;
/// cbindgen:ignore
pub mod train;

pub mod ffi;

/// The modules' public paths: the candidate sources live in `source/`
/// (`lshk::ivf` is `lshk::source::ivf`, the LSH parts under
/// `source::lsh`), the codes in `quant/`; the two hash families keep
/// their paths `lshk::simhash` and `lshk::dwta`.
pub use quant::{pq4, qdot};
pub use source::lsh::{hash, iul, tables, train_logq};
pub use source::{forest, graph, ivf, labels};

pub use hash::{dwta, simhash};

pub use dwta::Dwta;
pub use error::{Error, Result, Status};
pub use index::Index;
pub use isa::Isa;
pub use simhash::SimHash;
