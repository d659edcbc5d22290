//! Gathered matmul, AVX-512 tier (avx512f + bw + dq + vl). The f32, f16 and
//! int8 kernels were executed on two AVX-512 machines (AMD Zen 4, Intel
//! Sapphire/Emerald Rapids; issue 12) and matched the oracle within the f32
//! bound. The bf16 kernel (`dot_bf16_512`) has NOT been executed on AVX-512
//! hardware yet: both machines have AVX-512 BF16, so they ran the removed
//! `vdpbf16ps` kernel instead; it is the same `dot_rows` with the bf16 load
//! below. Not executable on the development machine (Zen 3). See
//! docs/avx512.md.
//!
//! Instructions and why:
//! * `vfmadd231ps zmm`: 4 rows x 2 accumulators of 16 lanes.
//! * Masked loads (`vmovups`/`vmovdqu16`/`vmovdqu8` with `{k}{z}`) for the
//!   `dim % 16` tail of rows and of the query: masked-off lanes never fault.
//! * `vpmovzxwd` + `vpslld 16` (bf16), `vcvtph2ps zmm` (f16),
//!   `vpmovsxbd` + `vcvtdq2ps` (int8): exact widening to f32, so all four
//!   formats share one generic loop (`dot_rows`) and, by construction, the
//!   f32 accumulation bound of every other tier (see `crate::matmul`).
//! * `vdpbf16ps` (AVX-512 BF16) is deliberately NOT used for bf16, although
//!   Zen 4 and Sapphire Rapids have it. Issue 12: a kernel built on it
//!   rounded q to bf16 and failed the f32 bound on both machines
//!   (`tests/fuzz_args/`, `tests/index.rs`), so it was removed. Why not
//!   repair it:
//!   - the bound: `vdpbf16ps` multiplies bf16 by bf16, so q must be split
//!     into bf16 terms. Two terms (hi + lo) leave a residual of about
//!     `2^-16 |q_j|` per element, i.e. `2^-16 * S` per dot product, which
//!     exceeds the f32 bound `gamma(dim) * S ~ dim * 2^-24 * S` for every
//!     `dim < 256` (dim = 17: 1.5e-5 vs 1.0e-6 relative). Three terms
//!     (hi, mid, lo) would leave ~`2^-24 * S`, at three instructions per
//!     pair of elements;
//!   - `vdpbf16ps` flushes subnormal inputs and results to zero (DAZ/FTZ
//!     behaviour whatever MXCSR says), which the widening path does not;
//!   - the kernel is memory-bound (scattered rows), so the widening costs
//!     no time at these row sizes, and no AVX-512 machine was at hand to
//!     measure whether a 3-term `vdpbf16ps` kernel would be faster at all.
//!
//!   A 3-term split could come back later as an explicit opt-in, with its
//!   own derived bound (subnormals included) and a measurement beside this
//!   path; it must not be the default.
//! * `vpdpbusd` (VNNI) is deliberately NOT used for int8: it multiplies
//!   8-bit by 8-bit, so it would need the query quantised to 8 bits, while
//!   lshk keeps Q in f32 on every tier (see `crate::matmul`); int8 rows are
//!   widened to f32 instead, which is exact. The work is memory-bound, so
//!   the widening costs no time at these row sizes.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` ahead, as in AVX2.

use std::arch::x86_64::*;

use super::{Rows, PREFETCH_MAX_BYTES, PREFETCH_ROWS};

trait Fmt {
    type T: Copy;
    const SCALED: bool = false;
    /// 16 elements at `p` as f32, lanes outside `m` zero and not read.
    unsafe fn load16(p: *const Self::T, m: __mmask16) -> __m512;
}

struct F32;
struct Bf16;
struct F16;
struct I8;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load16(p: *const f32, m: __mmask16) -> __m512 {
        // SAFETY: lanes in m are readable (caller); masked lanes not read.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
}

impl Fmt for Bf16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load16(p: *const u16, m: __mmask16) -> __m512 {
        // SAFETY: as for F32 (avx512bw + vl masked 16-bit load).
        unsafe {
            let h = _mm256_maskz_loadu_epi16(m, p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        }
    }
}

impl Fmt for F16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load16(p: *const u16, m: __mmask16) -> __m512 {
        // SAFETY: as for F32.
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast())) }
    }
}

impl Fmt for I8 {
    type T = i8;
    const SCALED: bool = true;
    #[inline(always)]
    unsafe fn load16(p: *const i8, m: __mmask16) -> __m512 {
        // SAFETY: as for F32 (avx512bw + vl masked byte load).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p))) }
    }
}

#[inline(always)]
unsafe fn prefetch_row(p: *const i8, bytes: usize) {
    // SAFETY: prefetch never faults; offsets stay within the row.
    unsafe {
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(p.add(off));
            off += 64;
        }
        _mm_prefetch::<_MM_HINT_T0>(p.add(bytes - 1));
    }
}

#[inline(always)]
unsafe fn dot_rows<F: Fmt>(r: &Rows<'_, F::T>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    const ALL: __mmask16 = 0xffff;
    let (dim, stride) = (r.dim, r.stride);
    let (nb, tail) = (dim / 16, dim % 16);
    let tmask: __mmask16 = ((1u32 << tail) - 1) as __mmask16;
    let n = ids.len();
    let w = r.w.as_ptr();
    let qp = q.as_ptr();
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): ids < rows, `w` spans (rows-1)*stride + dim
    // elements, q holds dim floats, out holds n floats (checked by
    // crate::matmul); lanes past dim are only touched masked.
    unsafe {
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        for j in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(row(j).cast(), pf_bytes);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            for j in i + PREFETCH_ROWS..(i + PREFETCH_ROWS + rr).min(n) {
                prefetch_row(row(j).cast(), pf_bytes);
            }
            let p: [*const F::T; 4] = std::array::from_fn(|k| row(i + k.min(rr - 1)));
            let mut a0 = [_mm512_setzero_ps(); 4];
            let mut a1 = [_mm512_setzero_ps(); 4];
            let mut b = 0;
            while b + 2 <= nb {
                let q0 = _mm512_loadu_ps(qp.add(16 * b));
                let q1 = _mm512_loadu_ps(qp.add(16 * b + 16));
                for k in 0..4 {
                    a0[k] = _mm512_fmadd_ps(F::load16(p[k].add(16 * b), ALL), q0, a0[k]);
                    a1[k] = _mm512_fmadd_ps(F::load16(p[k].add(16 * b + 16), ALL), q1, a1[k]);
                }
                b += 2;
            }
            if b < nb {
                let q0 = _mm512_loadu_ps(qp.add(16 * b));
                for k in 0..4 {
                    a0[k] = _mm512_fmadd_ps(F::load16(p[k].add(16 * b), ALL), q0, a0[k]);
                }
            }
            if tail > 0 {
                let qt = _mm512_maskz_loadu_ps(tmask, qp.add(16 * nb));
                for k in 0..4 {
                    a1[k] = _mm512_fmadd_ps(F::load16(p[k].add(16 * nb), tmask), qt, a1[k]);
                }
            }
            for k in 0..rr {
                let mut s = _mm512_reduce_add_ps(_mm512_add_ps(a0[k], a1[k]));
                if F::SCALED {
                    s *= *r.scales.as_ptr().add(*ids.get_unchecked(i + k) as usize);
                }
                *out.get_unchecked_mut(i + k) = s;
            }
            i += rr;
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dot_f32_512(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<F32>(r, q, ids, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dot_bf16_512(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<Bf16>(r, q, ids, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dot_f16_512(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<F16>(r, q, ids, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn dot_i8_512(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<I8>(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx512f/bw/dq/vl.
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_f32_512(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx512f/bw/dq/vl.
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_bf16_512(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx512f/bw/dq/vl.
pub unsafe fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_f16_512(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx512f/bw/dq/vl.
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_i8_512(r, q, ids, out) }
}

/// The tier table's `prefetch` (`tier_table!` in `../mod.rs`): the
/// AVX2 tier's `prefetcht0` loop.
pub use super::avx2::prefetch;
