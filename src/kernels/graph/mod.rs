//! Graph-search dot kernels (the FGD graph, [`crate::source::graph`]):
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

/// Bytes the codes of a walk record are padded to (one zmm of bytes).
pub const WALK_PAD: usize = 64;

/// The compact walk records of the graph ([`crate::source::graph`]): record `r`
/// starts at byte `r * stride` of `base`; its first `dim` bytes are the
/// row's codes as `u8` (an int8 code plus 128), `dim` a nonzero multiple
/// of [`WALK_PAD`] (the padding is code 0, byte 128).
#[derive(Clone, Copy)]
pub struct Recs<'a> {
    pub base: &'a [u8],
    pub stride: usize,
    pub dim: usize,
}

/// `walk(recs, q, ids, out)`: `out[j] = sum_t u8[ids[j]][t] * q[t]` over
/// `t < dim`, products and sums in wrapping i32 arithmetic (they never
/// wrap while `dim <= 65,536`: `|sum| <= 255 * 128 * dim`). Integer, so
/// every tier is **exactly** equal to the oracle, whatever its order.
/// The record's codes carry `+128`; the caller subtracts `128 * sum(q)`.
///
/// # Safety
/// `dim` is a nonzero multiple of [`WALK_PAD`], `stride >= dim`;
/// `q.len() >= dim`; `out.len() == ids.len()`; every id `r` has
/// `r * stride + dim <= base.len()`; the CPU supports the tier (and VNNI
/// for the `vpdpbusd` flavour).
pub type WalkFn = unsafe fn(&Recs<'_>, &[i8], &[u32], &mut [i32]);

/// The entry points of a tier.
pub struct Kernels {
    /// Variant name (`"avx512vnni"` for the VNNI flavour of the AVX-512
    /// tier's walk kernel, otherwise the tier's name).
    pub name: &'static str,
    pub f32: DotFn<f32>,
    pub bf16: DotFn<u16>,
    pub i8: DotFn<i8>,
    pub walk: WalkFn,
}

#[cfg(target_arch = "x86_64")]
static AVX512_VNNI: Kernels = Kernels {
    name: "avx512vnni",
    f32: avx512::dot_f32,
    bf16: avx512::dot_bf16,
    i8: avx512::dot_i8,
    walk: avx512::walk_vnni,
};

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it): the AVX-512 tier's walk kernel uses `vpdpbusd` when
    /// the CPU has AVX-512 VNNI (looked up here, once per call).
    Kernels [name] { f32: dot_f32, bf16: dot_bf16, i8: dot_i8, walk: walk }
    avx512 => |t| if crate::isa::extras().avx512vnni { &AVX512_VNNI } else { t };
}

/// Every kernel variant this CPU can run, lowest tier first (on AVX-512
/// CPUs with VNNI both AVX-512 flavours, so tests reach each).
pub fn supported_variants() -> Vec<(crate::isa::Isa, &'static Kernels)> {
    #[cfg(target_arch = "x86_64")]
    let plain = crate::isa::extras().avx512vnni.then_some(&AVX512);
    #[cfg(not(target_arch = "x86_64"))]
    let plain = None;
    crate::kernels::variants_of(kernels, plain)
}

#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::{prefetch_lines, Fmt, Widen};

/// The SIMD tiers' [`DotFn`]: four rows at a time (the last block repeats
/// its last row), each row's [`LANES`] lane sums in one vector (AVX-512)
/// or two (AVX2), `vmulps` + `vaddps`, reduced by the fixed tree
/// ([`crate::kernels::simd::F32x::sum16`]); every row's first two lines
/// prefetched on entry, whole rows [`PREFETCH_AHEAD`] ids ahead. Inlined
/// into each tier's `#[target_feature]` entry point.
///
/// # Safety
/// [`DotFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn dot_simd<S: Widen<F>, F: Fmt>(
    r: &Rows<'_, F::T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
) {
    let (l, dim) = (S::LANES, r.dim);
    // Vectors per block of LANES (2 or 1).
    let h = LANES / l;
    let blocks = dim / LANES;
    let n = ids.len();
    let (w, qp) = (r.w.as_ptr(), q.as_ptr());
    let bytes = dim * std::mem::size_of::<F::T>();
    // SAFETY (whole body): ids < rows, `w` holds rows * dim elements, q
    // holds dim floats, out holds n floats, dim a multiple of 16 (DotFn).
    unsafe {
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * dim);
        for j in 0..n.min(4 + PREFETCH_AHEAD) {
            prefetch_lines(row(j).cast(), bytes);
        }
        // The first two lines of every later row now (the whole row
        // follows PREFETCH_AHEAD ids ahead): measured on W1 (100,000 rows)
        // a little faster than whole rows for the first 8 ids only.
        for j in 4 + PREFETCH_AHEAD..n {
            prefetch_lines(row(j).cast(), bytes.min(128));
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            for j in i + 4 + PREFETCH_AHEAD..(i + 8 + PREFETCH_AHEAD).min(n) {
                prefetch_lines(row(j).cast(), bytes);
            }
            let p: [*const F::T; 4] = std::array::from_fn(|k| row(i + k.min(rr - 1)));
            let mut acc = [[S::zero(); 2]; 4];
            for b in 0..blocks {
                let mut qv = [S::zero(); 2];
                for (x, qx) in qv.iter_mut().enumerate().take(h) {
                    *qx = S::loadu(qp.add(LANES * b + l * x));
                }
                for k in 0..4 {
                    for x in 0..h {
                        let wv = S::load(p[k].add(LANES * b + l * x));
                        acc[k][x] = S::add(acc[k][x], S::mul(wv, qv[x]));
                    }
                }
            }
            for (k, a) in acc.iter().enumerate().take(rr) {
                let mut s = S::sum16(*a);
                if F::SCALED {
                    s *= *r.scales.as_ptr().add(*ids.get_unchecked(i + k) as usize);
                }
                *out.get_unchecked_mut(i + k) = s;
            }
            i += rr;
        }
    }
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

/// The entry points of the two SIMD tiers, listed once: `avx2.rs` and
/// `avx512.rs` each instantiate them with their target features and vector
/// type (`crate::kernels::simd::entries!` writes the functions).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_entries {
    ($feat:literal, $T:ty) => {
        $crate::kernels::simd::entries! { $feat;
            /// [`super::DotFn`] of f32 rows.
            fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32])
                => super::dot_simd::<$T, F32>;
            /// [`super::DotFn`] of bf16 rows.
            fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32])
                => super::dot_simd::<$T, Bf16>;
            /// [`super::DotFn`] of int8 rows.
            fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32])
                => super::dot_simd::<$T, I8>;
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_entries;
