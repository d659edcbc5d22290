//! Graph-search dot kernels, AVX2 tier (avx2 + fma enabled, but no FMA is
//! used: the summation order is fixed across tiers, see `mod.rs`).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps` (not `vfmadd`): the product is rounded before the
//!   add, as in the oracle; each row's 16 lane sums are two `ymm`
//!   (lanes 0..8 and 8..16), four rows at a time for independent chains.
//! * `vmovups` (f32), `vpmovzxwd` + `vpslld 16` (bf16), `vpmovsxbd` +
//!   `vcvtdq2ps` (int8): exact widening to f32. Rows are padded to 16
//!   elements, so there is no tail and no masked load.
//! * The fixed reduction tree: `vaddps` of the two halves (`a8`),
//!   `vextractf128` + `addps` (`a4`), `movhlps` + `addps` (`a2`),
//!   `shufps` + `addss` (`s`).
//! * `prefetcht0` of every line of the rows `PREFETCH_AHEAD` ids ahead.

use std::arch::x86_64::*;

use super::{Rows, PREFETCH_AHEAD};

trait Fmt {
    type T: Copy;
    const SCALED: bool = false;
    /// Eight elements at `p` as f32.
    unsafe fn load8(p: *const Self::T) -> __m256;
}

struct F32;
struct Bf16;
struct I8;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: 8 readable f32 at p (caller).
        unsafe { _mm256_loadu_ps(p) }
    }
}

impl Fmt for Bf16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load8(p: *const u16) -> __m256 {
        // SAFETY: 8 readable u16 (16 bytes) at p (caller).
        unsafe {
            let h = _mm_loadu_si128(p.cast());
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
        }
    }
}

impl Fmt for I8 {
    type T = i8;
    const SCALED: bool = true;
    #[inline(always)]
    unsafe fn load8(p: *const i8) -> __m256 {
        // SAFETY: 8 readable bytes at p (caller).
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))) }
    }
}

/// `prefetcht0` of every 64-byte line of `bytes` (>= 1) bytes at `p`.
#[inline(always)]
pub(super) unsafe fn prefetch_row(p: *const u8, bytes: usize) {
    // SAFETY: prefetch never faults, whatever the address; wrapping
    // arithmetic keeps the pointer computation defined.
    unsafe {
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off).cast());
            off += 64;
        }
    }
}

/// The fixed reduction tree of `mod.rs` on lanes 0..8 (`lo`) and 8..16
/// (`hi`).
#[inline(always)]
pub(super) unsafe fn reduce(lo: __m256, hi: __m256) -> f32 {
    // SAFETY: register-only intrinsics; the caller enables avx.
    unsafe {
        let a8 = _mm256_add_ps(lo, hi);
        let a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps::<1>(a8));
        let a2 = _mm_add_ps(a4, _mm_movehl_ps(a4, a4));
        let s = _mm_add_ss(a2, _mm_shuffle_ps::<0b01>(a2, a2));
        _mm_cvtss_f32(s)
    }
}

#[inline(always)]
unsafe fn dot_rows<F: Fmt>(r: &Rows<'_, F::T>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    let dim = r.dim;
    let blocks = dim / 16;
    let n = ids.len();
    let w = r.w.as_ptr();
    let qp = q.as_ptr();
    let bytes = dim * std::mem::size_of::<F::T>();
    // SAFETY (whole body): ids < rows, `w` holds rows * dim elements, q
    // holds dim floats, out holds n floats, dim a multiple of 16 (DotFn).
    unsafe {
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * dim);
        for j in 0..n.min(4 + PREFETCH_AHEAD) {
            prefetch_row(row(j).cast(), bytes);
        }
        // The first two lines of every later row now (the whole row
        // follows PREFETCH_AHEAD ids ahead): measured on W1 (100,000 rows)
        // a little faster than whole rows for the first 8 ids only.
        for j in 4 + PREFETCH_AHEAD..n {
            prefetch_row(row(j).cast(), bytes.min(128));
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            for j in i + 4 + PREFETCH_AHEAD..(i + 8 + PREFETCH_AHEAD).min(n) {
                prefetch_row(row(j).cast(), bytes);
            }
            let p: [*const F::T; 4] = std::array::from_fn(|k| row(i + k.min(rr - 1)));
            let mut lo = [_mm256_setzero_ps(); 4];
            let mut hi = [_mm256_setzero_ps(); 4];
            for b in 0..blocks {
                let q0 = _mm256_loadu_ps(qp.add(16 * b));
                let q1 = _mm256_loadu_ps(qp.add(16 * b + 8));
                for k in 0..4 {
                    let w0 = F::load8(p[k].add(16 * b));
                    let w1 = F::load8(p[k].add(16 * b + 8));
                    lo[k] = _mm256_add_ps(lo[k], _mm256_mul_ps(w0, q0));
                    hi[k] = _mm256_add_ps(hi[k], _mm256_mul_ps(w1, q1));
                }
            }
            for k in 0..rr {
                let mut s = reduce(lo[k], hi[k]);
                if F::SCALED {
                    s *= *r.scales.as_ptr().add(*ids.get_unchecked(i + k) as usize);
                }
                *out.get_unchecked_mut(i + k) = s;
            }
            i += rr;
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dot_f32_avx2(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<F32>(r, q, ids, out) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dot_bf16_avx2(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<Bf16>(r, q, ids, out) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dot_i8_avx2(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<I8>(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_f32_avx2(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_bf16_avx2(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_i8_avx2(r, q, ids, out) }
}

/// The walk kernel: `vpmovzxbw` (codes) and `vpmovsxbw` (query) widen 16
/// bytes to i16, `vpmaddwd` multiplies and adds pairs into i32 (a pair is
/// at most `2 * 255 * 128`, exact), `vpaddd` accumulates; four rows at a
/// time; every record's codes are prefetched on entry (the ids are known).
#[target_feature(enable = "avx2,fma")]
unsafe fn walk_avx2(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    let dim = r.dim;
    let n = ids.len();
    let base = r.base.as_ptr();
    let qp = q.as_ptr();
    // SAFETY (whole body): WalkFn's contract: every record's `dim` codes
    // are inside `base`, q holds dim bytes, out holds n values, dim a
    // multiple of 64.
    unsafe {
        let rec = |j: usize| base.add(*ids.get_unchecked(j) as usize * r.stride);
        for j in 0..n {
            prefetch_row(rec(j), dim);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            let p: [*const u8; 4] = std::array::from_fn(|k| rec(i + k.min(rr - 1)));
            let mut acc = [_mm256_setzero_si256(); 4];
            let mut b = 0;
            while b < dim {
                let qv = _mm256_cvtepi8_epi16(_mm_loadu_si128(qp.add(b).cast()));
                for k in 0..4 {
                    let wv = _mm256_cvtepu8_epi16(_mm_loadu_si128(p[k].add(b).cast()));
                    acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(wv, qv));
                }
                b += 16;
            }
            for (k, a) in acc.iter().enumerate().take(rr) {
                let s = _mm_add_epi32(
                    _mm256_castsi256_si128(*a),
                    _mm256_extracti128_si256::<1>(*a),
                );
                let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<1>(s));
                *out.get_unchecked_mut(i + k) = _mm_cvtsi128_si32(s);
            }
            i += rr;
        }
    }
}

/// # Safety
/// [`super::WalkFn`]; the CPU has avx2 and fma.
pub unsafe fn walk(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded contract.
    unsafe { walk_avx2(r, q, ids, out) }
}
