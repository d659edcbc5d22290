//! Gather kernels, AVX2 tier.
//!
//! Marking: AVX2 has no scatter, so each id is one read-modify-write of its
//! bitmap word (plain `shr`/`shl` by `cl`: BMI2's `shrx`/`shlx` are not
//! among this tier's target features, which are avx2, popcnt and bmi1) plus
//! one of its summary word. A variant computing 8 word indices and 64-bit
//! masks at once (`vpsrld`, `vpmovzxdq` + `vpsllvq`) and then doing the
//! scalar ORs is slower on a W1-sized bitmap (`benches/gather.md`, "What
//! the measurements decided"), so the plain loop is used. Counting adds 1
//! per id with scalar increments.
//!
//! Extraction walks the summary's set bits. Words with at most 4 set bits
//! (the common case at ~1.5 % density) take four branch-free
//! `tzcnt`/`blsr` steps (a loop over the set bits mispredicts its exit on
//! random popcounts); denser words are decoded a byte at a time: the
//! byte's bit positions from an 8-byte table (`vpmovzxbd`) plus the byte's
//! base row (`vpaddd`), stored as 8 lanes (`vmovdqu`), the cursor advancing by
//! `popcnt`. The counting filter then runs over the decoded ids with scalar
//! counter loads and a branch-free compaction (`vpgatherdd` + `vpermd`
//! compaction is slower than the scalar tier on Zen 3, whose gathers are
//! microcoded: `benches/gather.md`).

use std::arch::x86_64::*;

use super::POS8;

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
        new += unsafe { super::mark_one(bp, sp, w, m) };
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
    // Sparse words first (see decode_sparse4).
    // SAFETY: dst has room for 4 (caller); popcnt and bmi1 enabled.
    let pc = unsafe { super::decode_sparse4(x, base, dst) };
    if pc <= 4 {
        return pc;
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
    let cstart = counts.as_ref().map_or(0, |c| c.len());
    if let Some(cs) = counts.as_deref_mut() {
        cs.reserve(total - start);
    }
    let op = out.as_mut_ptr();
    let cp = cnt.as_mut_ptr();
    let mut w = start;
    // Branch-free compaction with scalar loads: `vpgatherdd` measured
    // slower here (Zen 3 gathers are microcoded), and the keep/drop
    // decision is written as a cursor increment, not a branch.
    match counts.as_deref_mut() {
        Some(cs) => {
            let csp = cs.as_mut_ptr();
            for r in start..total {
                // SAFETY: r < total (decoded ids), id < cnt.len()
                // (contract), w <= r, and counts has room for total - start
                // more values.
                unsafe {
                    let id = *op.add(r);
                    let c = *cp.add(id as usize);
                    *cp.add(id as usize) = 0;
                    *op.add(w) = id;
                    *csp.add(cstart + (w - start)) = c & 0x7fff_ffff;
                    w += (c >= min) as usize;
                }
            }
        }
        None => {
            for r in start..total {
                // SAFETY: as above.
                unsafe {
                    let id = *op.add(r);
                    let c = *cp.add(id as usize);
                    *cp.add(id as usize) = 0;
                    *op.add(w) = id;
                    w += (c >= min) as usize;
                }
            }
        }
    }
    // SAFETY: start..w were written above (w <= total).
    unsafe { out.set_len(w) };
    if let Some(cs) = counts {
        // SAFETY: written above, within the reserved capacity.
        unsafe { cs.set_len(cstart + (w - start)) };
    }
}
