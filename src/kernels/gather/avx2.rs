//! Gather kernels, AVX2 tier.
//!
//! Marking: AVX2 has no scatter, so each id is one read-modify-write of its
//! bitmap word (`shrx`/`shlx` from BMI2 are what the compiler emits) plus
//! one of its summary word. A variant computing 8 word indices and 64-bit
//! masks at once (`vpsrld`, `vpmovzxdq` + `vpsllvq`) and then doing the
//! scalar ORs measured slower (1.75 vs 1.50 ns per id, W1-sized bitmap), so
//! the plain loop is used. Counting adds 1 per id with scalar increments.
//!
//! Extraction walks the summary's set bits. Words with at most 4 set bits
//! (the common case at ~1.5 % density) use a `tzcnt`/`blsr` loop whose trip
//! count is branch-predicted, so the output cursor does not wait for the
//! bitmap load; denser words are decoded a byte at a time: the byte's bit
//! positions from an 8-byte table (`vpmovzxbd`) plus the byte's base row
//! (`vpaddd`), stored as 8 lanes (`vmovdqu`), the cursor advancing by
//! `popcnt`. The counting filter then runs over the decoded ids 8 at a
//! time: `vpgatherdd` of the counters, unsigned `>= min` as `vpmaxud` +
//! `vpcmpeqd`, `vmovmskps`, and `vpermd` with a 256-entry table to pack the
//! kept ids and counts to the left.

use std::arch::x86_64::*;

use super::{COMPRESS8, POS8};

/// # Safety
/// See [`super::MarkFn`]; the CPU has AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn mark(bits: &mut [u64], summary: &mut [u64], ids: &[u32]) -> usize {
    let bp = bits.as_mut_ptr();
    let sp = summary.as_mut_ptr();
    let mut new = 0usize;
    for &id in ids {
        let w = (id >> 6) as usize;
        let m = 1u64 << (id & 63);
        // SAFETY: w < bits.len(), w / 64 < summary.len() (contract).
        unsafe {
            let old = *bp.add(w);
            new += (old & m == 0) as usize;
            *bp.add(w) = old | m;
            *sp.add(w >> 6) |= 1u64 << (w & 63);
        }
    }
    new
}

/// # Safety
/// See [`super::MarkCountFn`]; the CPU has AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn mark_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    ids: &[u32],
) -> usize {
    let cp = cnt.as_mut_ptr();
    for &id in ids {
        // SAFETY: id < cnt.len() (contract).
        unsafe {
            let c = cp.add(id as usize);
            *c = (*c).wrapping_add(1);
        }
    }
    // SAFETY: same contract, same CPU.
    unsafe { mark(bits, summary, ids) }
}

/// Writes the set bits of `x` (row base `base`) at `dst`; returns how many.
///
/// # Safety
/// `dst` has room for 64 + 8 u32; the CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2,popcnt,bmi1")]
unsafe fn decode_word(x: u64, base: u32, dst: *mut u32) -> usize {
    let pc = x.count_ones() as usize;
    // Sparse words (the common case): a tzcnt/blsr loop. Its trip count is
    // predicted, so the output cursor does not wait for the bitmap load (a
    // branch-free variant that advances the cursor by popcnt(x) measured
    // slower: the cursor then depends on every load).
    if pc <= 4 {
        let mut y = x;
        let mut k = 0;
        while y != 0 {
            // SAFETY: k < pc <= 4, within the caller's room.
            unsafe { *dst.add(k) = base + y.trailing_zeros() };
            y &= y - 1;
            k += 1;
        }
        return k;
    }
    let mut at = 0usize;
    for k in 0..8 {
        let byte = ((x >> (8 * k)) & 0xff) as usize;
        // SAFETY: POS8 rows are 8 bytes; at + 8 <= pc + 8 <= 72.
        unsafe {
            let pos = _mm_loadl_epi64(POS8.as_ptr().add(byte).cast());
            let v = _mm256_add_epi32(
                _mm256_cvtepu8_epi32(pos),
                _mm256_set1_epi32((base + 8 * k as u32) as i32),
            );
            _mm256_storeu_si256(dst.add(at).cast(), v);
        }
        at += (byte as u32).count_ones() as usize;
    }
    pc
}

/// # Safety
/// See [`super::ExtractFn`]; the CPU has AVX2.
#[target_feature(enable = "avx2,popcnt,bmi1")]
pub unsafe fn extract(bits: &mut [u64], summary: &mut [u64], out: &mut Vec<u32>) {
    let bp = bits.as_mut_ptr();
    for (s, slot) in summary.iter_mut().enumerate() {
        let mut sw = *slot;
        if sw == 0 {
            continue;
        }
        *slot = 0;
        // One summary word names at most 64 words = 4096 ids; reserve for
        // them (plus the decoders' overhang) once, then write through a
        // local cursor.
        out.reserve(64 * 64 + 72);
        let len = out.len();
        // SAFETY: room for 4096 + 72 more ids was reserved above.
        let mut dst = unsafe { out.as_mut_ptr().add(len) };
        let start = dst;
        while sw != 0 {
            let w = s * 64 + sw.trailing_zeros() as usize;
            sw &= sw - 1;
            // SAFETY: w < bits.len() (contract); dst stays within the
            // reserved room (at most 64 ids per word, 72 written).
            unsafe {
                let x = *bp.add(w);
                *bp.add(w) = 0;
                dst = dst.add(decode_word(x, (w * 64) as u32, dst));
            }
        }
        // SAFETY: the ids between start and dst were written above.
        unsafe { out.set_len(len + dst.offset_from(start) as usize) };
    }
}

/// # Safety
/// See [`super::ExtractCountFn`]; the CPU has AVX2.
#[target_feature(enable = "avx2,popcnt,bmi1")]
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
    out.reserve(8);
    let cstart = counts.as_ref().map_or(0, |c| c.len());
    if let Some(cs) = counts.as_deref_mut() {
        cs.reserve(total - start + 8);
    }
    let op = out.as_mut_ptr();
    let cp = cnt.as_mut_ptr();
    let minv = _mm256_set1_epi32(min as i32);
    let low31 = _mm256_set1_epi32(0x7fff_ffff);
    let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let (mut r, mut w) = (start, start);
    while r < total {
        let lanes = (total - r).min(8);
        // SAFETY: r + 8 <= total + 8 <= capacity (reserved); lanes beyond
        // `lanes` are masked out of the gather and of `keep`; every decoded
        // id < cnt.len() (contract); writes go to w <= r, after the loads of
        // this chunk, and the compressed stores stay within capacity.
        unsafe {
            let idv = _mm256_loadu_si256(op.add(r).cast());
            let valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), iota);
            let c = _mm256_mask_i32gather_epi32::<4>(
                _mm256_setzero_si256(),
                cp.cast::<i32>(),
                idv,
                valid,
            );
            let mut ids = [0u32; 8];
            _mm256_storeu_si256(ids.as_mut_ptr().cast(), idv);
            for &id in &ids[..lanes] {
                *cp.add(id as usize) = 0;
            }
            let ge = _mm256_cmpeq_epi32(_mm256_max_epu32(c, minv), c);
            let keep = (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(ge, valid))) & 0xff)
                as usize;
            let perm = _mm256_loadu_si256(COMPRESS8.as_ptr().add(keep).cast());
            _mm256_storeu_si256(op.add(w).cast(), _mm256_permutevar8x32_epi32(idv, perm));
            if let Some(cs) = counts.as_deref_mut() {
                let cv = _mm256_and_si256(_mm256_permutevar8x32_epi32(c, perm), low31);
                _mm256_storeu_si256(cs.as_mut_ptr().add(cstart + (w - start)).cast(), cv);
            }
            w += keep.count_ones() as usize;
        }
        r += lanes;
    }
    // SAFETY: elements start..w were written above (w <= total).
    unsafe { out.set_len(w) };
    if let Some(cs) = counts {
        // SAFETY: cstart..cstart + (w - start) written above, within capacity.
        unsafe { cs.set_len(cstart + (w - start)) };
    }
}
