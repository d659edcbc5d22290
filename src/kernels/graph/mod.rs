//! Graph-search dot kernels (the FGD graph, [`crate::graph`]):
//! `out[j] = dot(W[ids[j]], q)` over a short list of node ids (one node's
//! unvisited neighbours), with rows stored as f32, bf16 or int8 (one f32
//! scale per row), in a **tier-independent summation order** so that every
//! tier returns bit-identical scores and therefore walks the same graph.
//!
//! # The exact operation (every tier computes exactly this)
//! Rows are padded to a multiple of [`LANES`] = 16 elements (the padding is
//! zero, in the rows and in the query), so there is no tail. For each id:
//! sixteen f32 lane sums start at +0; for each block `c` of 16 elements,
//! `acc[l] = acc[l] + w[16c + l] * q[16c + l]`, a multiply and an add, each
//! rounded to f32 (no FMA: the portable tier at baseline x86-64 has none,
//! and an FMA would round differently); the element is widened to f32 first
//! (exact for bf16 and int8). The lanes are then reduced in a fixed tree:
//! `a8[l] = acc[l] + acc[l + 8]`, `a4[l] = a8[l] + a8[l + 4]`,
//! `a2[l] = a4[l] + a4[l + 2]`, `s = a2[0] + a2[1]`; int8 rows multiply `s`
//! by their scale. With `u = 2^-24`, `n = dim / 16 + 5` and
//! `S = sum_j |w_j q_j|` over the stored values, `|s - exact| <= gamma(n) S`
//! (`gamma(n) = n u / (1 - n u)`; one more rounding for the int8 scale).
//!
//! The SIMD tiers work on four rows at a time (independent accumulators,
//! the order of each row's own sum is unchanged) and prefetch the rows
//! [`PREFETCH_AHEAD`] ids ahead (the first two lines of every later row on
//! entry); the ids are known in advance.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// Lanes of the fixed summation order; rows and queries are padded to a
/// multiple of it.
pub const LANES: usize = 16;
/// How many ids ahead of the current block of four the SIMD tiers
/// prefetch rows (the first ones are prefetched on entry).
pub const PREFETCH_AHEAD: usize = 4;

/// Rows as a kernel sees them: row `r` is `w[r * dim .. (r + 1) * dim]`
/// (`dim` a multiple of [`LANES`], the padding zero); `scales[r]`
/// multiplies row `r` (int8 only; empty otherwise).
#[derive(Clone, Copy)]
pub struct Rows<'a, T> {
    pub w: &'a [T],
    pub dim: usize,
    pub scales: &'a [f32],
}

/// `dot(rows, q, ids, out)`: `out[j] = dot(W[ids[j]], q[..dim])` in the
/// order of the module documentation (times `scales[ids[j]]` for int8).
///
/// # Safety
/// `dim` is a nonzero multiple of [`LANES`]; `q.len() >= dim`;
/// `out.len() == ids.len()`; every id is below the number of rows, `w`
/// holds `rows * dim` elements (and `scales` `rows` values for int8); the
/// CPU supports the tier the function belongs to.
pub type DotFn<T> = unsafe fn(&Rows<'_, T>, &[f32], &[u32], &mut [f32]);

/// The entry points of a tier.
pub struct Kernels {
    pub f32: DotFn<f32>,
    pub bf16: DotFn<u16>,
    pub i8: DotFn<i8>,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it).
    Kernels { f32: dot_f32, bf16: dot_bf16, i8: dot_i8 }
}

/// Hints that `bytes` bytes at `p` are needed soon (`prefetcht0` of each
/// 64-byte line on x86-64; nothing elsewhere). Never faults.
#[inline(always)]
pub fn prefetch(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch never faults, whatever the address (SSE,
            // baseline on x86-64); wrapping arithmetic keeps the pointer
            // computation defined.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off).cast()) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// The fixed reduction tree of the 16 lane sums (shared by the oracle and
/// the portable tier; the x86 tiers do the same additions in registers).
#[inline(always)]
pub fn reduce16(acc: &[f32; 16]) -> f32 {
    let mut a8 = [0.0f32; 8];
    for l in 0..8 {
        a8[l] = acc[l] + acc[l + 8];
    }
    let mut a4 = [0.0f32; 4];
    for l in 0..4 {
        a4[l] = a8[l] + a8[l + 4];
    }
    let a2 = [a4[0] + a4[2], a4[1] + a4[3]];
    a2[0] + a2[1]
}
