//! Gather kernels, portable tier: the `wide` crate at the build's baseline
//! features. Marking is a read-modify-write per id (portable SIMD has no
//! scatter). Extraction: words with at most 4 set bits take four
//! branch-free `trailing_zeros` steps; denser words are decoded a byte at a
//! time (the byte's bit positions from a 256-entry table of `u32x8` plus the
//! byte's base row, stored as 8 lanes, the cursor advancing by the byte's
//! popcount). The counting filter compares 8 counters at once (`simd_ge` on
//! `u32x8`, unsigned) and packs the kept lanes with the `COMPRESS8` table.

use wide::u32x8;

use super::COMPRESS8;

/// Bit positions per byte, widened to u32.
static POS32: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        let mut j = 0;
        while j < 8 {
            if b & (1 << j) != 0 {
                t[b][k] = j as u32;
                k += 1;
            }
            j += 1;
        }
        b += 1;
    }
    t
};

/// # Safety
/// See [`super::MarkFn`].
pub unsafe fn mark(bits: &mut [u64], summary: &mut [u64], ids: &[u32]) -> usize {
    let mut new = 0;
    for &id in ids {
        let w = (id >> 6) as usize;
        let m = 1u64 << (id & 63);
        // SAFETY: w < bits.len() and w / 64 < summary.len() (contract).
        unsafe {
            let b = bits.get_unchecked_mut(w);
            new += (*b & m == 0) as usize;
            *b |= m;
            *summary.get_unchecked_mut(w >> 6) |= 1u64 << (w & 63);
        }
    }
    new
}

/// # Safety
/// See [`super::MarkCountFn`].
pub unsafe fn mark_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    ids: &[u32],
) -> usize {
    for &id in ids {
        // SAFETY: id < cnt.len() (contract).
        unsafe {
            let c = cnt.get_unchecked_mut(id as usize);
            *c = c.wrapping_add(1);
        }
    }
    // SAFETY: same contract.
    unsafe { mark(bits, summary, ids) }
}

/// Writes the set bits of `x` (row base `base`) at `dst[0..]`, returns how
/// many. `dst` must hold at least 72 slots.
#[inline(always)]
fn decode_word(x: u64, base: u32, dst: &mut [u32]) -> usize {
    let pc = x.count_ones() as usize;
    // Sparse words: four branch-free steps (slots past pc get junk).
    let mut y = x;
    for d in dst[..4].iter_mut() {
        *d = base.wrapping_add(y.trailing_zeros());
        y &= y.wrapping_sub(1);
    }
    if pc <= 4 {
        return pc;
    }
    let mut at = 0;
    for k in 0..8 {
        let byte = ((x >> (8 * k)) & 0xff) as usize;
        let v = u32x8::new(POS32[byte]) + u32x8::splat(base + 8 * k as u32);
        dst[at..at + 8].copy_from_slice(&v.to_array());
        at += (byte as u32).count_ones() as usize;
    }
    pc
}

/// # Safety
/// See [`super::ExtractFn`] (bounds are checked here).
pub unsafe fn extract(bits: &mut [u64], summary: &mut [u64], out: &mut Vec<u32>) {
    for (s, slot) in summary.iter_mut().enumerate() {
        let mut sw = *slot;
        if sw == 0 {
            continue;
        }
        *slot = 0;
        // At most 4096 ids per summary word, plus the decoder's overhang.
        out.reserve(64 * 64 + 72);
        let len = out.len();
        let spare = out.spare_capacity_mut();
        let mut at = 0;
        let mut tmp = [0u32; 72];
        while sw != 0 {
            let w = s * 64 + sw.trailing_zeros() as usize;
            sw &= sw - 1;
            let x = bits[w];
            bits[w] = 0;
            let base = (w * 64) as u32;
            let pc = x.count_ones() as usize;
            if pc <= 4 {
                // Four branch-free steps straight into the output (slots
                // past pc get junk that the next word overwrites).
                let mut y = x;
                for d in spare[at..at + 4].iter_mut() {
                    d.write(base.wrapping_add(y.trailing_zeros()));
                    y &= y.wrapping_sub(1);
                }
            } else {
                decode_word(x, base, &mut tmp);
                for (d, &v) in spare[at..at + pc].iter_mut().zip(&tmp[..pc]) {
                    d.write(v);
                }
            }
            at += pc;
        }
        // SAFETY: spare[0..at] were initialised above.
        unsafe { out.set_len(len + at) };
    }
}

/// # Safety
/// See [`super::ExtractCountFn`] (bounds are checked here).
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
        cs.resize(cstart + (total - start), 0);
    }
    // Eight counters at a time: unsigned `>= min` with `simd_ge`, kept
    // lanes packed left through the COMPRESS8 table.
    let minv = u32x8::splat(min);
    let (mut r, mut w) = (start, start);
    while r < total {
        let lanes = (total - r).min(8);
        let mut idv = [0u32; 8];
        idv[..lanes].copy_from_slice(&out[r..r + lanes]);
        let mut cv = [0u32; 8];
        for j in 0..lanes {
            cv[j] = cnt[idv[j] as usize];
            cnt[idv[j] as usize] = 0;
        }
        let keep = (u32x8::new(cv).simd_ge(minv).to_bitmask() & ((1u32 << lanes) - 1)) as usize;
        let kept = keep.count_ones() as usize;
        let perm = &COMPRESS8[keep];
        for j in 0..kept {
            out[w + j] = idv[perm[j] as usize];
        }
        if let Some(cs) = counts.as_deref_mut() {
            let at = cstart + (w - start);
            for j in 0..kept {
                cs[at + j] = cv[perm[j] as usize] & 0x7fff_ffff;
            }
        }
        w += kept;
        r += lanes;
    }
    out.truncate(w);
    if let Some(cs) = counts {
        cs.truncate(cstart + (w - start));
    }
}
