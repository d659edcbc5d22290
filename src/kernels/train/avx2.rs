//! Training kernels, AVX2 tier (avx2; the tier also guarantees fma, which
//! is deliberately not used: see the module docs of `super` — every tier
//! returns the same bits, and the portable tier has no FMA).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` (never `vfmadd`): the operations of the
//!   scalar oracle, lane-wise, so results are bit-identical.
//! * Two ymm accumulators are the 16 interleaved partial sums of a segment
//!   sum (`super::LANES`); `vextractf128`, `vmovhlps`, `vmovshdup` reduce
//!   them in the fixed tree of `super::lane_sum`.
//! * `vmaxps` with `x` clamped to `EXP_MIN`, the `1.5 * 2^23` add/sub
//!   rounding, `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`, and
//!   `vcmpltps` + `vandnps` for the flush to zero: `super::exp_neg`
//!   lane-wise.
//! * `vmaskmovps` loads and stores for the `n % 16` (segments) and
//!   `dim % 8` (rows) tails only: masked lanes are never touched. Full
//!   blocks use `vmovups` (`M8`): a `vmaskmovps` store is slow on AMD
//!   cores (on every block it makes the L3 row updates much slower on
//!   Zen 4: benches/train.md, "`vmaskmovps` stores").
//! * `vdivps` and `vsqrtps` (correctly rounded) in Adam.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.
//!
//! The loops are the generic `*_simd` drivers of `super`, shared with the
//! AVX-512 tier; this tier is their [`Avx2`] vector type
//! (`crate::kernels::simd`).

use super::{AdamCoef, AdamState, Groups, Rows, SgdSeq};
use crate::kernels::simd::{Avx2, Bf16, F32};

super::simd_entries!("avx2", Avx2);
