//! 4-bit PQ fast-scan, portable tier (`wide` at the build's baseline target
//! features: SSE2 on x86-64, NEON on aarch64).
//!
//! Per sub-quantiser pair, the two 16-byte lanes of codes are split into
//! nibbles (`& 0x0f`, `>> 4`) and looked up with `u8x16::shuffle` (`tbl`
//! on NEON, `pshufb` with SSSE3; at the SSE2 baseline `wide` falls back to
//! a scalar loop). The looked-up bytes are widened to u16 (`u16x16::from`,
//! exact) and summed in two u16x16 accumulators (low nibbles: rows
//! `rho(j)`; high nibbles: rows `16 + rho(j)`). Each accumulator lane gets
//! two bytes per pair, so the accumulators are widened into the block's u32
//! sums every `FLUSH_STEPS / 2 = 128` pairs (`128 * 2 * 255 = 65,280`).
//! `m_pad` is even, so a block is whole pairs.

use wide::{u16x16, u8x16};

use super::{block_bytes, for_each_block, rho, score_of, Epilogue, BLOCK, FLUSH_STEPS};

const PAIRS_PER_FLUSH: usize = FLUSH_STEPS / 2;

#[inline(always)]
fn load16(s: &[u8]) -> u8x16 {
    u8x16::new(<[u8; 16]>::try_from(&s[..16]).unwrap())
}

/// The 32 accumulators of one block (`codes` starts at the block).
fn block(codes: &[u8], m_pad: usize, lut: &[u8], out: &mut [u32; BLOCK]) {
    *out = [0; BLOCK];
    let mask = u8x16::splat(0x0f);
    let pairs = m_pad / 2;
    let mut p0 = 0;
    while p0 < pairs {
        let p1 = (p0 + PAIRS_PER_FLUSH).min(pairs);
        let mut lo = u16x16::ZERO;
        let mut hi = u16x16::ZERO;
        for p in p0..p1 {
            for h in 0..2 {
                let c = load16(&codes[32 * p + 16 * h..]);
                let t = load16(&lut[32 * p + 16 * h..]);
                lo += u16x16::from(t.shuffle(c & mask));
                hi += u16x16::from(t.shuffle((c >> 4) & mask));
            }
        }
        let (lo, hi) = (lo.to_array(), hi.to_array());
        for j in 0..16 {
            out[rho(j)] += lo[j] as u32;
            out[16 + rho(j)] += hi[j] as u32;
        }
        p0 = p1;
    }
}

/// See [`super::AccFn`].
///
/// # Safety
/// The preconditions of [`super::AccFn`] (this tier indexes with bounds
/// checks, so a violation panics instead of misbehaving).
pub unsafe fn acc(codes: &[u8], m_pad: usize, nrows: usize, lut: &[u8], out: &mut [u32]) {
    let bb = block_bytes(m_pad);
    for_each_block(
        nrows,
        |b, buf| block(&codes[b * bb..], m_pad, lut, buf),
        |r, v| out[r..r + v.len()].copy_from_slice(v),
    );
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`] (bounds-checked here).
pub unsafe fn score(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    let bb = block_bytes(m_pad);
    for_each_block(
        nrows,
        |b, buf| block(&codes[b * bb..], m_pad, lut, buf),
        |r, v| {
            for (i, &a) in v.iter().enumerate() {
                out[r + i] = score_of(a, epi.delta, epi.offset, epi.bias.map(|b| b[r + i]));
            }
        },
    );
}
