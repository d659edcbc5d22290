//! Gather kernels, scalar tier: the oracle. One bit test-and-set per id,
//! `trailing_zeros` loops for extraction.

/// # Safety
/// See [`super::MarkFn`] (this tier checks bounds anyway).
pub unsafe fn mark(bits: &mut [u64], summary: &mut [u64], ids: &[u32]) -> usize {
    let mut new = 0;
    for &id in ids {
        let w = (id >> 6) as usize;
        let m = 1u64 << (id & 63);
        if bits[w] & m == 0 {
            new += 1;
        }
        bits[w] |= m;
        summary[w >> 6] |= 1u64 << (w & 63);
    }
    new
}

/// # Safety
/// See [`super::MarkCountFn`] (this tier checks bounds anyway).
pub unsafe fn mark_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    ids: &[u32],
) -> usize {
    for &id in ids {
        cnt[id as usize] = cnt[id as usize].wrapping_add(1);
    }
    // SAFETY: same contract.
    unsafe { mark(bits, summary, ids) }
}

/// # Safety
/// See [`super::ExtractFn`] (this tier checks bounds anyway).
pub unsafe fn extract(bits: &mut [u64], summary: &mut [u64], out: &mut Vec<u32>) {
    for (s, slot) in summary.iter_mut().enumerate() {
        let mut sw = *slot;
        *slot = 0;
        while sw != 0 {
            let w = s * 64 + sw.trailing_zeros() as usize;
            sw &= sw - 1;
            let mut x = bits[w];
            bits[w] = 0;
            while x != 0 {
                out.push((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
    }
}

/// # Safety
/// See [`super::ExtractCountFn`] (this tier checks bounds anyway).
pub unsafe fn extract_count(
    bits: &mut [u64],
    summary: &mut [u64],
    cnt: &mut [u32],
    min: u32,
    out: &mut Vec<u32>,
    mut counts: Option<&mut Vec<u32>>,
) {
    for (s, slot) in summary.iter_mut().enumerate() {
        let mut sw = *slot;
        *slot = 0;
        while sw != 0 {
            let w = s * 64 + sw.trailing_zeros() as usize;
            sw &= sw - 1;
            let mut x = bits[w];
            bits[w] = 0;
            while x != 0 {
                let id = (w * 64) as u32 + x.trailing_zeros();
                x &= x - 1;
                let c = cnt[id as usize];
                cnt[id as usize] = 0;
                if c >= min {
                    out.push(id);
                    if let Some(cs) = counts.as_deref_mut() {
                        cs.push(c & 0x7fff_ffff);
                    }
                }
            }
        }
    }
}
