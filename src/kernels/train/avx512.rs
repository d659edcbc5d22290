//! Training kernels, AVX-512 tier (avx512f + bw + dq + vl). `tests/train.rs`
//! checks every kernel bit-identical to the scalar oracle; where it has
//! run: docs/avx512.md.
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` on zmm, never `vfmadd`: the oracle's
//!   operations lane-wise (every tier returns the same bits, see `super`).
//! * One zmm accumulator is exactly the 16 interleaved partial sums of a
//!   segment sum (`super::LANES`); it is folded with `vextractf32x8` into
//!   the AVX2 tier's fixed reduction tree.
//! * Masked loads and stores (`{k}{z}`) for the `n % 16` segment tails and
//!   the `dim % 16` row tails: masked lanes never fault and are never
//!   written; `vcmpps` into a mask register + a zero-masked move for the
//!   flush to zero of `exp`.
//! * `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`; `vdivps`, `vsqrtps`
//!   (correctly rounded) in Adam.
//! * `vpmovzxwd` + `vpslld 16` to widen bf16 rows (exact).
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.
//!
//! The loops are the generic `*_simd` drivers of `super`, shared with the
//! AVX2 tier; this tier is their [`Avx512`] vector type
//! (`crate::kernels::simd`).

use super::{AdamCoef, AdamState, Groups, Rows, SgdSeq};
use crate::kernels::simd::{Avx512, Bf16, F32};

super::simd_entries!("avx512f,avx512bw,avx512dq,avx512vl", Avx512);
