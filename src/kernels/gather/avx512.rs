//! Gather kernels, AVX-512 tier (F/BW/DQ/VL). Compiled everywhere, run
//! only where the CPU has AVX-512; the tests that reach it and the machines
//! that have executed it: docs/avx512.md.
//!
//! Counting uses `vpgatherdd` + `vpaddd` + `vpscatterdd` over 16 ids at a
//! time. A `vpconflictd` pass is not needed: the ids handed to one call are
//! one bucket's ids, which are distinct, so no two lanes hit the same
//! counter. Bitmap marking (16 word indices and 64-bit masks computed with
//! `vpsrld` / `vpsllvq`) ORs into the bitmap with scalar stores, because
//! distinct ids can share a 64-bit word (on AVX2 the scalar loop is
//! faster; this tier keeps the vector index math, unmeasured). Extraction
//! decodes words with more than 4 set bits 16 bits at a time with
//! `vpcompressd` (`kmov` of the 16 mask bits, iota + base row), sparser
//! words with four branch-free `tzcnt` steps. The counting
//! filter does a masked `vpgatherdd`, `vpcmpud` (>= min, unsigned) into a
//! mask, `vpcompressd` stores of the kept ids and counts, and a masked
//! `vpscatterdd` of zeros to reset the counters.

use std::arch::x86_64::*;

/// # Safety
/// See [`super::MarkFn`]; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn mark(bits: &mut [u64], summary: &mut [u64], ids: &[u32]) -> usize {
    let bp = bits.as_mut_ptr();
    let sp = summary.as_mut_ptr();
    let mut new = 0usize;
    let chunks = ids.len() / 16;
    let one = _mm512_set1_epi64(1);
    let m63 = _mm512_set1_epi32(63);
    let mut wv = [0u32; 16];
    let mut mv = [0u64; 16];
    for c in 0..chunks {
        // SAFETY: c*16 + 16 <= ids.len(); the stack arrays hold 16 lanes.
        unsafe {
            let v = _mm512_loadu_si512(ids.as_ptr().add(c * 16).cast());
            let w = _mm512_srli_epi32::<6>(v);
            let b = _mm512_and_si512(v, m63);
            let lo = _mm512_sllv_epi64(one, _mm512_cvtepu32_epi64(_mm512_castsi512_si256(b)));
            let hi = _mm512_sllv_epi64(
                one,
                _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(b)),
            );
            _mm512_storeu_si512(wv.as_mut_ptr().cast(), w);
            _mm512_storeu_si512(mv.as_mut_ptr().cast(), lo);
            _mm512_storeu_si512(mv.as_mut_ptr().add(8).cast(), hi);
        }
        for j in 0..16 {
            let w = wv[j] as usize;
            let m = mv[j];
            // SAFETY: w < bits.len(), w / 64 < summary.len() (contract).
            new += unsafe { super::mark_one(bp, sp, w, m) };
        }
    }
    for &id in &ids[chunks * 16..] {
        let w = (id >> 6) as usize;
        let m = 1u64 << (id & 63);
        // SAFETY: as above.
        new += unsafe { super::mark_one(bp, sp, w, m) };
    }
    new
}

/// # Safety
/// See [`super::MarkCountFn`]; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn mark_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    ids: &[u32],
) -> usize {
    let cp = cnt.as_mut_ptr();
    let onev = _mm512_set1_epi32(1);
    let mut i = 0;
    while i < ids.len() {
        let lanes = (ids.len() - i).min(16);
        let m: __mmask16 = if lanes == 16 {
            0xffff
        } else {
            (1u16 << lanes) - 1
        };
        // SAFETY: the masked load reads only ids[i..i + lanes]; the ids are
        // distinct and < cnt.len() (contract), so the gather/scatter touch
        // valid, pairwise different counters.
        unsafe {
            let v = _mm512_maskz_loadu_epi32(m, ids.as_ptr().add(i).cast());
            let c = _mm512_mask_i32gather_epi32::<4>(
                _mm512_setzero_si512(),
                m,
                v,
                cp.cast::<i32>().cast_const().cast(),
            );
            let c1 = _mm512_add_epi32(c, onev);
            _mm512_mask_i32scatter_epi32::<4>(cp.cast(), m, v, c1);
        }
        i += lanes;
    }
    // SAFETY: same contract, same CPU.
    unsafe { mark(bits, summary, ids) }
}

/// # Safety
/// `dst` has room for 64 + 16 u32; the CPU has AVX-512.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,popcnt,bmi1")]
unsafe fn decode_word(x: u64, base: u32, dst: *mut u32) -> usize {
    // Sparse words first (see decode_sparse4).
    // SAFETY: dst has room for 4 (caller); popcnt and bmi1 enabled.
    let pc = unsafe { super::decode_sparse4(x, base, dst) };
    if pc <= 4 {
        return pc;
    }
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let mut at = 0usize;
    for k in 0..4 {
        let m = ((x >> (16 * k)) & 0xffff) as u16;
        let v = _mm512_add_epi32(iota, _mm512_set1_epi32((base + 16 * k as u32) as i32));
        // SAFETY: the compress store writes popcnt(m) lanes at dst + at,
        // at + popcnt(m) <= pc <= 64.
        unsafe { _mm512_mask_compressstoreu_epi32(dst.add(at).cast(), m, v) };
        at += m.count_ones() as usize;
    }
    pc
}

/// # Safety
/// See [`super::ExtractFn`]; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,popcnt,bmi1")]
pub unsafe fn extract(bits: &mut [u64], summary: &mut [u64], out: &mut Vec<u32>) {
    let bp = bits.as_mut_ptr();
    for (s, slot) in summary.iter_mut().enumerate() {
        let mut sw = *slot;
        *slot = 0;
        while sw != 0 {
            let w = s * 64 + sw.trailing_zeros() as usize;
            sw &= sw - 1;
            out.reserve(80);
            let len = out.len();
            // SAFETY: w < bits.len() (contract); room for 80 more in `out`.
            unsafe {
                let x = *bp.add(w);
                *bp.add(w) = 0;
                let k = decode_word(x, (w * 64) as u32, out.as_mut_ptr().add(len));
                out.set_len(len + k);
            }
        }
    }
}

/// # Safety
/// See [`super::ExtractCountFn`]; the CPU has AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,popcnt,bmi1")]
pub unsafe fn extract_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    min: u32,
    out: &mut Vec<u32>,
    mut counts: Option<&mut Vec<u32>>,
) {
    let start = out.len();
    // SAFETY: forwarded contract.
    unsafe { extract(bits, summary, out) };
    let total = out.len();
    let cstart = counts.as_ref().map_or(0, |c| c.len());
    if let Some(cs) = counts.as_deref_mut() {
        cs.reserve(total - start);
    }
    let op = out.as_mut_ptr();
    let cp = cnt.as_mut_ptr();
    let minv = _mm512_set1_epi32(min as i32);
    let low31 = _mm512_set1_epi32(0x7fff_ffff);
    let (mut r, mut w) = (start, start);
    while r < total {
        let lanes = (total - r).min(16);
        let m: __mmask16 = if lanes == 16 {
            0xffff
        } else {
            (1u16 << lanes) - 1
        };
        // SAFETY: masked loads/gathers/scatters touch only the `lanes` valid
        // ids (< cnt.len() by contract); compressed stores write at most
        // `lanes` values at w <= r, after this chunk was loaded.
        unsafe {
            let idv = _mm512_maskz_loadu_epi32(m, op.add(r).cast_const().cast());
            let c = _mm512_mask_i32gather_epi32::<4>(
                _mm512_setzero_si512(),
                m,
                idv,
                cp.cast::<i32>().cast_const().cast(),
            );
            _mm512_mask_i32scatter_epi32::<4>(cp.cast(), m, idv, _mm512_setzero_si512());
            let keep = _mm512_mask_cmpge_epu32_mask(m, c, minv);
            _mm512_mask_compressstoreu_epi32(op.add(w).cast(), keep, idv);
            if let Some(cs) = counts.as_deref_mut() {
                _mm512_mask_compressstoreu_epi32(
                    cs.as_mut_ptr().add(cstart + (w - start)).cast(),
                    keep,
                    _mm512_and_si512(c, low31),
                );
            }
            w += keep.count_ones() as usize;
        }
        r += lanes;
    }
    // SAFETY: start..w written above (w <= total).
    unsafe { out.set_len(w) };
    if let Some(cs) = counts {
        // SAFETY: written above, within the reserved capacity.
        unsafe { cs.set_len(cstart + (w - start)) };
    }
}
