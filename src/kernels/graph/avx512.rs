//! Graph-search dot kernels, AVX-512 tier (avx512f + bw + dq + vl). Runs on
//! the development machine (AMD Zen 4); see docs/avx512.md.
//!
//! Instructions and why:
//! * `vmulps zmm` + `vaddps zmm` (not `vfmadd`): the fixed summation order
//!   of `mod.rs`; one `zmm` holds a row's 16 lane sums, four rows at a time.
//! * `vmovups zmm` (f32), `vpmovzxwd zmm` + `vpslld 16` (bf16),
//!   `vpmovsxbd zmm` + `vcvtdq2ps` (int8): exact widening. Rows are padded
//!   to 16 elements: no tail, no masks.
//! * The reduction tree: `vextractf32x8` (avx512dq) + `vaddps ymm` gives
//!   `a8`, then the AVX2 tier's `reduce` finishes (same additions).
//! * `prefetcht0` of the rows `PREFETCH_AHEAD` ids ahead, as in AVX2.

use std::arch::x86_64::*;

use super::avx2::{prefetch_row, reduce};
// (the walk kernel at the end: `vpdpbusd` with VNNI, else `vpmaddwd`)
use super::{Rows, PREFETCH_AHEAD};

trait Fmt {
    type T: Copy;
    const SCALED: bool = false;
    /// Sixteen elements at `p` as f32.
    unsafe fn load16(p: *const Self::T) -> __m512;
}

struct F32;
struct Bf16;
struct I8;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> __m512 {
        // SAFETY: 16 readable f32 at p (caller).
        unsafe { _mm512_loadu_ps(p) }
    }
}

impl Fmt for Bf16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load16(p: *const u16) -> __m512 {
        // SAFETY: 16 readable u16 (32 bytes) at p (caller).
        unsafe {
            let h = _mm256_loadu_si256(p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        }
    }
}

impl Fmt for I8 {
    type T = i8;
    const SCALED: bool = true;
    #[inline(always)]
    unsafe fn load16(p: *const i8) -> __m512 {
        // SAFETY: 16 readable bytes at p (caller).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
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
            let mut acc = [_mm512_setzero_ps(); 4];
            for b in 0..blocks {
                let qv = _mm512_loadu_ps(qp.add(16 * b));
                for k in 0..4 {
                    let wv = F::load16(p[k].add(16 * b));
                    acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(wv, qv));
                }
            }
            for (k, a) in acc.iter().enumerate().take(rr) {
                let lo = _mm512_castps512_ps256(*a);
                let hi = _mm512_extractf32x8_ps::<1>(*a);
                let mut s = reduce(lo, hi);
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
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_i8_512(r, q, ids, out) }
}

/// The walk kernel, two flavours sharing one loop: with VNNI, `vpdpbusd`
/// multiplies 64 code bytes (u8) by 64 query bytes (i8) and adds each
/// group of four products into an i32 lane (no saturation); without it,
/// `vpmovzxbw` / `vpmovsxbw` + `vpmaddwd` + `vpaddd` on 32 bytes (a pair is
/// at most `2 * 255 * 128`, exact). Four rows at a time, every record's
/// codes prefetched on entry, `vpaddd`-tree lane sums (integer: exact).
#[inline(always)]
unsafe fn walk_rows<const VNNI: bool>(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    let dim = r.dim;
    let n = ids.len();
    let base = r.base.as_ptr();
    let qp = q.as_ptr();
    // SAFETY (whole body): WalkFn's contract: every record's `dim` codes
    // are inside `base`, q holds dim bytes, out holds n values, dim a
    // multiple of 64; the caller enabled the features of the flavour.
    unsafe {
        let rec = |j: usize| base.add(*ids.get_unchecked(j) as usize * r.stride);
        for j in 0..n {
            prefetch_row(rec(j), dim);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(4);
            let p: [*const u8; 4] = std::array::from_fn(|k| rec(i + k.min(rr - 1)));
            let mut acc = [_mm512_setzero_si512(); 4];
            if VNNI {
                let mut b = 0;
                while b < dim {
                    let qv = _mm512_loadu_si512(qp.add(b).cast());
                    for k in 0..4 {
                        let wv = _mm512_loadu_si512(p[k].add(b).cast());
                        acc[k] = _mm512_dpbusd_epi32(acc[k], wv, qv);
                    }
                    b += 64;
                }
            } else {
                let mut b = 0;
                while b < dim {
                    let qv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(qp.add(b).cast()));
                    for k in 0..4 {
                        let wv = _mm512_cvtepu8_epi16(_mm256_loadu_si256(p[k].add(b).cast()));
                        acc[k] = _mm512_add_epi32(acc[k], _mm512_madd_epi16(wv, qv));
                    }
                    b += 32;
                }
            }
            for (k, a) in acc.iter().enumerate().take(rr) {
                *out.get_unchecked_mut(i + k) = _mm512_reduce_add_epi32(*a);
            }
            i += rr;
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn walk_512(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded WalkFn contract.
    unsafe { walk_rows::<false>(r, q, ids, out) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
unsafe fn walk_512_vnni(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded WalkFn contract.
    unsafe { walk_rows::<true>(r, q, ids, out) }
}

/// # Safety
/// [`super::WalkFn`]; the CPU has avx512f/bw/dq/vl.
pub unsafe fn walk(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded contract.
    unsafe { walk_512(r, q, ids, out) }
}

/// # Safety
/// [`super::WalkFn`]; the CPU has avx512f/bw/dq/vl and avx512vnni.
pub unsafe fn walk_vnni(r: &super::Recs<'_>, q: &[i8], ids: &[u32], out: &mut [i32]) {
    // SAFETY: forwarded contract.
    unsafe { walk_512_vnni(r, q, ids, out) }
}
