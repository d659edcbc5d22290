//! Gathered matmul, AVX2 tier (avx2 + fma; f16 also needs f16c).
//!
//! Instructions and why:
//! * `vfmadd231ps` (FMA): one rounding per product-add, eight independent
//!   accumulator chains (4 rows x 2) to cover the 4-cycle FMA latency.
//! * `vmovups` for f32 rows, `vpmovzxwd` + `vpslld 16` for bf16 (a bf16 is
//!   the top half of an f32), `vcvtph2ps` (F16C) for IEEE half,
//!   `vpmovsxbd` + `vcvtdq2ps` for int8: all exact conversions to f32.
//! * `vmaskmovps` for the `dim % 8` tail of f32 rows and of the query (masked
//!   lanes are never touched, so a row ending at the last byte of a mapping
//!   cannot fault); narrow types copy their tail into a zeroed 8-lane buffer.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead (up to
//!   `PREFETCH_MAX_BYTES` of each): the ids are known in advance, and keeping
//!   many row fetches in flight is what makes a scattered gather fast.
//! * `vhaddps` to reduce four rows' accumulators at once into one `__m128`.

use std::arch::x86_64::*;

use super::{Rows, PREFETCH_MAX_BYTES, PREFETCH_ROWS};

/// A storage format: its element type and how to widen 8 elements to f32.
trait Fmt {
    type T: Copy + Default;
    /// Multiply each row's sum by `scales[id]` (int8).
    const SCALED: bool = false;
    /// Eight elements at `p` as f32.
    unsafe fn load8(p: *const Self::T) -> __m256;
    /// `n` (1..=7) elements at `p` as f32, the other lanes 0.
    #[inline(always)]
    unsafe fn load_tail(p: *const Self::T, n: usize, _mask: __m256i) -> __m256 {
        let mut buf = [Self::T::default(); 8];
        // SAFETY: `p` holds `n` readable elements (the row's tail) and `buf`
        // has room for 8 >= n.
        unsafe {
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
            Self::load8(buf.as_ptr())
        }
    }
}

struct F32;
struct Bf16;
struct F16;
struct I8;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: 8 readable f32 at p (caller).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const f32, _n: usize, mask: __m256i) -> __m256 {
        // SAFETY: the lanes enabled in `mask` are readable (caller); the
        // others are not accessed by vmaskmovps.
        unsafe { _mm256_maskload_ps(p, mask) }
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

impl Fmt for F16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load8(p: *const u16) -> __m256 {
        // SAFETY: 8 readable u16 at p (caller); the enclosing function
        // enables f16c.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
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

/// Prefetches the first `bytes` (>= 1) bytes of the row at `p`.
#[inline(always)]
unsafe fn prefetch_row(p: *const i8, bytes: usize) {
    // SAFETY: prefetch never faults, whatever the address; the pointer
    // arithmetic stays inside the row (bytes <= row length).
    unsafe {
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(p.add(off));
            off += 64;
        }
        _mm_prefetch::<_MM_HINT_T0>(p.add(bytes - 1));
    }
}

/// [`super::PrefetchFn`]: `prefetcht0` of the lines of `bytes` bytes at `p`
/// (SSE, so also used by the AVX-512 tier).
pub fn prefetch(p: *const u8, bytes: usize) {
    // SAFETY: prefetch never faults, whatever the address; wrapping
    // arithmetic keeps even a bogus pointer defined.
    unsafe {
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off).cast());
            off += 64;
        }
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes.max(1) - 1).cast());
    }
}

/// Sums of four vectors' lanes, as the four lanes of one `__m128`.
#[inline(always)]
unsafe fn hsum4(v: [__m256; 4]) -> __m128 {
    // SAFETY: register-only intrinsics; the caller enables avx.
    unsafe {
        let t0 = _mm256_hadd_ps(v[0], v[1]);
        let t1 = _mm256_hadd_ps(v[2], v[3]);
        let t2 = _mm256_hadd_ps(t0, t1);
        _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps::<1>(t2))
    }
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only intrinsics.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// The shared body; inlined into one `#[target_feature]` function per format.
#[inline(always)]
unsafe fn dot_rows<F: Fmt>(r: &Rows<'_, F::T>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    let (dim, stride) = (r.dim, r.stride);
    let (nb, tail) = (dim / 8, dim % 8);
    let n = ids.len();
    let w = r.w.as_ptr();
    let qp = q.as_ptr();
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): every id < rows and `w` spans
    // (rows - 1) * stride + dim elements, so `w + id * stride + j` is
    // readable for j < dim; q holds dim floats; out holds n floats (all
    // checked by crate::matmul before dispatch). Loads past `dim` are only
    // done lane-masked (vmaskmovps) or from the local tail buffer.
    unsafe {
        let tmask = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(tail as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        for j in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(row(j).cast(), pf_bytes);
        }
        let mut i = 0;
        while i + 4 <= n {
            for j in i + PREFETCH_ROWS..(i + PREFETCH_ROWS + 4).min(n) {
                prefetch_row(row(j).cast(), pf_bytes);
            }
            let p = [row(i), row(i + 1), row(i + 2), row(i + 3)];
            let mut a0 = [_mm256_setzero_ps(); 4];
            let mut a1 = [_mm256_setzero_ps(); 4];
            let mut b = 0;
            while b + 2 <= nb {
                let q0 = _mm256_loadu_ps(qp.add(8 * b));
                let q1 = _mm256_loadu_ps(qp.add(8 * b + 8));
                for k in 0..4 {
                    a0[k] = _mm256_fmadd_ps(F::load8(p[k].add(8 * b)), q0, a0[k]);
                    a1[k] = _mm256_fmadd_ps(F::load8(p[k].add(8 * b + 8)), q1, a1[k]);
                }
                b += 2;
            }
            if b < nb {
                let q0 = _mm256_loadu_ps(qp.add(8 * b));
                for k in 0..4 {
                    a0[k] = _mm256_fmadd_ps(F::load8(p[k].add(8 * b)), q0, a0[k]);
                }
            }
            if tail > 0 {
                let qt = _mm256_maskload_ps(qp.add(8 * nb), tmask);
                for k in 0..4 {
                    let wt = F::load_tail(p[k].add(8 * nb), tail, tmask);
                    a1[k] = _mm256_fmadd_ps(wt, qt, a1[k]);
                }
            }
            let mut s = hsum4([
                _mm256_add_ps(a0[0], a1[0]),
                _mm256_add_ps(a0[1], a1[1]),
                _mm256_add_ps(a0[2], a1[2]),
                _mm256_add_ps(a0[3], a1[3]),
            ]);
            if F::SCALED {
                let sc = r.scales.as_ptr();
                let id = |k: usize| *ids.get_unchecked(i + k) as usize;
                s = _mm_mul_ps(
                    s,
                    _mm_setr_ps(
                        *sc.add(id(0)),
                        *sc.add(id(1)),
                        *sc.add(id(2)),
                        *sc.add(id(3)),
                    ),
                );
            }
            _mm_storeu_ps(out.as_mut_ptr().add(i), s);
            i += 4;
        }
        while i < n {
            let p = row(i);
            let mut a0 = _mm256_setzero_ps();
            let mut a1 = _mm256_setzero_ps();
            let mut b = 0;
            while b + 2 <= nb {
                a0 = _mm256_fmadd_ps(F::load8(p.add(8 * b)), _mm256_loadu_ps(qp.add(8 * b)), a0);
                a1 = _mm256_fmadd_ps(
                    F::load8(p.add(8 * b + 8)),
                    _mm256_loadu_ps(qp.add(8 * b + 8)),
                    a1,
                );
                b += 2;
            }
            if b < nb {
                a0 = _mm256_fmadd_ps(F::load8(p.add(8 * b)), _mm256_loadu_ps(qp.add(8 * b)), a0);
            }
            if tail > 0 {
                let qt = _mm256_maskload_ps(qp.add(8 * nb), tmask);
                a1 = _mm256_fmadd_ps(F::load_tail(p.add(8 * nb), tail, tmask), qt, a1);
            }
            let mut s = hsum(_mm256_add_ps(a0, a1));
            if F::SCALED {
                s *= *r.scales.as_ptr().add(*ids.get_unchecked(i) as usize);
            }
            *out.get_unchecked_mut(i) = s;
            i += 1;
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

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<F16>(r, q, ids, out) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dot_i8_avx2(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DotFn contract.
    unsafe { dot_rows::<I8>(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract (tier checked by the dispatcher).
    unsafe { dot_f32_avx2(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_bf16_avx2(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2, fma and f16c (the dispatcher uses the
/// portable kernel when f16c is missing).
pub unsafe fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_f16_avx2(r, q, ids, out) }
}

/// # Safety
/// [`super::DotFn`]; the CPU has avx2 and fma.
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe { dot_i8_avx2(r, q, ids, out) }
}
