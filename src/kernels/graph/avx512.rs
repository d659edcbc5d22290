//! Graph-search dot kernels, AVX-512 tier (avx512f + bw + dq + vl). Where
//! they have run: docs/avx512.md.
//!
//! Instructions and why:
//! * `vmulps zmm` + `vaddps zmm` (not `vfmadd`): the fixed summation order
//!   of `mod.rs`; one `zmm` holds a row's 16 lane sums, four rows at a time.
//! * `vmovups zmm` (f32), `vpmovzxwd zmm` + `vpslld 16` (bf16),
//!   `vpmovsxbd zmm` + `vcvtdq2ps` (int8): exact widening. Rows are padded
//!   to 16 elements: no tail, no masks.
//! * The reduction tree: `vextractf32x8` (avx512dq) + `vaddps ymm` gives
//!   `a8`, then the AVX2 tier's tree finishes (same additions).
//! * `prefetcht0` of the rows `PREFETCH_AHEAD` ids ahead, as in AVX2.
//!
//! The dot kernels are `super::dot_simd` on [`Avx512`]
//! (`crate::kernels::simd`), shared with the AVX2 tier; the walk kernel
//! below is this tier's own.

use std::arch::x86_64::*;

use crate::kernels::simd::{prefetch_lines, Avx512, Bf16, F32, I8};

use super::Rows;

super::simd_entries!("avx512f,avx512bw,avx512dq,avx512vl", Avx512);

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
            prefetch_lines(rec(j), dim);
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
