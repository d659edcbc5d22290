//! Gathered matmul kernels: `out[j] = dot(W[ids[j]], q)` for one query and
//! its candidate rows, with W stored as f32, bf16, IEEE f16 or int8 (one f32
//! scale per row), always accumulated in f32 with the query kept in f32.
//!
//! Every tier offers the same four entry points ([`Kernels`]). The caller
//! ([`crate::matmul`]) has checked every length and every id before a kernel
//! runs, so kernels index without bounds checks. The memory system is the
//! limit (rows are scattered): the SIMD tiers work on four rows at a time
//! with independent accumulators and prefetch the rows `PREFETCH_ROWS` ahead
//! (the ids are known in advance).

use crate::isa;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// How many candidate rows ahead of the one being multiplied the SIMD tiers
/// issue software prefetches for (measured on Zen 3 with the W1 benchmark;
/// see `benches/gathered_matmul.md`).
pub const PREFETCH_ROWS: usize = 12;
/// At most this many bytes of a prefetched row are requested (64-byte lines);
/// the hardware stream prefetcher follows the rest of a long row.
pub const PREFETCH_MAX_BYTES: usize = 1024;

/// A row-major weight matrix seen by a kernel: row `r` starts at element
/// `r * stride` of `w` and has `dim` elements; `scales[r]` multiplies row r
/// (int8 only; empty otherwise).
#[derive(Clone, Copy)]
pub struct Rows<'a, T> {
    pub w: &'a [T],
    pub stride: usize,
    pub dim: usize,
    pub scales: &'a [f32],
}

/// `dot(rows, q, ids, out)`: `out[j] = dot(W[ids[j]], q[..dim])`
/// (times `scales[ids[j]]` for int8).
///
/// # Safety
/// `dim >= 1`; `q.len() >= dim`; `out.len() == ids.len()`; every id is
/// below the number of rows, and `w` holds `(rows - 1) * stride + dim`
/// elements (and `scales` `rows` values for int8); the CPU supports the tier
/// the function belongs to.
pub type DotFn<T> = unsafe fn(&Rows<'_, T>, &[f32], &[u32], &mut [f32]);

/// `prefetch(p, bytes)`: hint that `bytes` (>= 1) bytes from `p` are
/// needed soon (never faults, any address; a no-op without a hint).
pub type PrefetchFn = fn(*const u8, usize);

/// The entry points of a tier.
pub struct Kernels {
    pub f32: DotFn<f32>,
    pub bf16: DotFn<u16>,
    pub f16: DotFn<u16>,
    pub i8: DotFn<i8>,
    pub prefetch: PrefetchFn,
}

/// [`PrefetchFn`] of the tiers without a prefetch instruction.
pub fn no_prefetch(_p: *const u8, _bytes: usize) {}

#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::{prefetch_row, F32x, Fmt, Widen};

/// What the gathered dot of a SIMD tier adds to its vector ops: how the
/// rows of a block are reduced.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Tier: F32x {
    /// `true`: blocks of four rows reduced together ([`F32x::hsum4`]),
    /// then the last rows one at a time ([`F32x::hsum`]); `false`: every
    /// block holds four rows (the last one repeats its last row) and each
    /// row is reduced alone ([`F32x::hsum`]).
    const REDUCE4: bool;
}

/// The dot products of `R` rows (`p[k]`, `dim = nb * LANES + tail`
/// elements) with `q`: two accumulator chains per row (even and odd
/// vectors, the tail into the odd chain, loaded masked or through a
/// buffer), their sum returned.
///
/// # Safety
/// Every `p[k]` and `q` hold `dim` readable elements; `tm` is
/// `S::tail(tail)`; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn dot_block<S: Widen<F>, F: Fmt, const R: usize>(
    p: [*const F::T; R],
    q: *const f32,
    nb: usize,
    tail: usize,
    tm: S::M,
) -> [S::V; R] {
    let l = S::LANES;
    // SAFETY: loads of lanes < dim only, or masked (caller).
    unsafe {
        let mut a0 = [S::zero(); R];
        let mut a1 = [S::zero(); R];
        let mut b = 0;
        while b + 2 <= nb {
            let q0 = S::loadu(q.add(l * b));
            let q1 = S::loadu(q.add(l * b + l));
            for k in 0..R {
                a0[k] = S::fmadd(S::load(p[k].add(l * b)), q0, a0[k]);
                a1[k] = S::fmadd(S::load(p[k].add(l * b + l)), q1, a1[k]);
            }
            b += 2;
        }
        if b < nb {
            let q0 = S::loadu(q.add(l * b));
            for k in 0..R {
                a0[k] = S::fmadd(S::load(p[k].add(l * b)), q0, a0[k]);
            }
        }
        if tail > 0 {
            let qt = S::ld(tm, q.add(l * nb));
            for k in 0..R {
                let wt = S::load_tail(p[k].add(l * nb), tail, tm);
                a1[k] = S::fmadd(wt, qt, a1[k]);
            }
        }
        let mut s = a0;
        for k in 0..R {
            s[k] = S::add(a0[k], a1[k]);
        }
        s
    }
}

/// The SIMD tiers' [`DotFn`]: four rows at a time ([`dot_block`]), the
/// rows `PREFETCH_ROWS` ids ahead prefetched (up to `PREFETCH_MAX_BYTES`
/// each). Inlined into each tier's `#[target_feature]` entry point.
///
/// # Safety
/// [`DotFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn dot_simd<S: Tier + Widen<F>, F: Fmt>(
    r: &Rows<'_, F::T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
) {
    let (dim, stride) = (r.dim, r.stride);
    let (nb, tail) = (dim / S::LANES, dim % S::LANES);
    let n = ids.len();
    let (w, qp, op) = (r.w.as_ptr(), q.as_ptr(), out.as_mut_ptr());
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): every id < rows and `w` spans
    // (rows - 1) * stride + dim elements, so `w + id * stride + j` is
    // readable for j < dim; q holds dim floats; out holds n floats (all
    // checked by crate::matmul before dispatch). Loads past `dim` are only
    // done lane-masked or from dot_block's tail buffer.
    unsafe {
        let tm = S::tail(tail);
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        let scale = |j: usize| *r.scales.as_ptr().add(*ids.get_unchecked(j) as usize);
        for j in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(row(j).cast(), pf_bytes);
        }
        let mut i = 0;
        if S::REDUCE4 {
            while i + 4 <= n {
                for j in i + PREFETCH_ROWS..(i + PREFETCH_ROWS + 4).min(n) {
                    prefetch_row(row(j).cast(), pf_bytes);
                }
                let p = [row(i), row(i + 1), row(i + 2), row(i + 3)];
                let a = dot_block::<S, F, 4>(p, qp, nb, tail, tm);
                let mut s = S::hsum4(a[0], a[1], a[2], a[3]);
                if F::SCALED {
                    for (k, sk) in s.iter_mut().enumerate() {
                        *sk *= scale(i + k);
                    }
                }
                std::ptr::copy_nonoverlapping(s.as_ptr(), op.add(i), 4);
                i += 4;
            }
            while i < n {
                let a = dot_block::<S, F, 1>([row(i)], qp, nb, tail, tm);
                let mut s = S::hsum(a[0]);
                if F::SCALED {
                    s *= scale(i);
                }
                *op.add(i) = s;
                i += 1;
            }
        } else {
            while i < n {
                let rr = (n - i).min(4);
                for j in i + PREFETCH_ROWS..(i + PREFETCH_ROWS + rr).min(n) {
                    prefetch_row(row(j).cast(), pf_bytes);
                }
                let p: [*const F::T; 4] = std::array::from_fn(|k| row(i + k.min(rr - 1)));
                let a = dot_block::<S, F, 4>(p, qp, nb, tail, tm);
                for (k, ak) in a.iter().enumerate().take(rr) {
                    let mut s = S::hsum(*ak);
                    if F::SCALED {
                        s *= scale(i + k);
                    }
                    *op.add(i + k) = s;
                }
                i += rr;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
static AVX2_NO_F16C: Kernels = Kernels {
    f32: avx2::dot_f32,
    bf16: avx2::dot_bf16,
    f16: portable::dot_f16,
    i8: avx2::dot_i8,
    prefetch: avx2::prefetch,
};

crate::kernels::tier_table! {
    /// The kernel table of a tier. The caller has checked that the CPU supports
    /// `tier`; extra features (F16C) are looked up here, once per
    /// call, never inside a loop.
    Kernels {
        f32: dot_f32,
        bf16: dot_bf16,
        f16: dot_f16,
        i8: dot_i8,
        prefetch: prefetch,
    }
    avx2 => |t| if isa::extras().f16c { t } else { &AVX2_NO_F16C };
}

// ---- element conversions (exact, shared by every tier's tails) ----

/// bf16 bits to f32 (exact).
#[inline(always)]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// IEEE binary16 bits to f32 (exact, subnormals, infinities and NaN
/// payloads included).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: man * 2^-24, exact in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000); // 2^-24
            sign | v.to_bits()
        }
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// f32 to bf16 bits, round to nearest, ties to even. A NaN stays a NaN (its
/// sign and upper payload kept, made quiet); overflow rounds to infinity.
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x0040) as u16;
    }
    let r = b + 0x7fff + ((b >> 16) & 1);
    (r >> 16) as u16
}

/// f32 to IEEE binary16 bits, round to nearest, ties to even: values beyond
/// the largest half (65504) round to infinity exactly as IEEE 754 says
/// (65520 and above), small values to subnormals or signed zero, NaN stays
/// NaN (quiet, upper payload kept).
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return if man == 0 {
            sign | 0x7c00
        } else {
            sign | 0x7e00 | (man >> 13) as u16
        };
    }
    let e = exp - 112; // biased half exponent
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Half subnormal: value = m24 * 2^(exp - 150) = h * 2^-24.
        let m24 = man | 0x80_0000;
        let shift = (126 - exp) as u32; // >= 14
        if shift > 25 {
            return sign; // below half the smallest subnormal
        }
        let h = m24 >> shift;
        let rem = m24 & ((1u32 << shift) - 1);
        let half = 1u32 << (shift - 1);
        let up = rem > half || (rem == half && (h & 1) == 1);
        return sign | (h + up as u32) as u16; // may carry into the min normal
    }
    let h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let up = rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1);
    sign | (h + up as u32) as u16 // a carry may reach infinity: correct
}
