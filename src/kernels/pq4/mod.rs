//! 4-bit product-quantisation "fast-scan" scoring of contiguous runs: the
//! integer kernels behind [`crate::quant::pq4`] (see there for the quantisation of
//! the look-up tables and the error bound).
//!
//! # Layout (shared by every tier)
//! A row has `m_pad` 4-bit codes (`m_pad` even: the caller's `M` sub-
//! quantisers rounded up to a pair, the extra one with code 0 and an
//! all-zero table). Rows are grouped in blocks of [`BLOCK`] = 32; a run of
//! `nrows` rows is `ceil(nrows / 32)` blocks of [`block_bytes`]`(m_pad) =
//! 16 * m_pad` bytes, back to back. Inside a block, sub-quantiser pair `p`
//! (sub-quantisers `2p`, `2p + 1`) occupies the 32 bytes at `32 p`; byte
//! `16 h + j` (`h` in `0..2`, `j` in `0..16`) holds, for sub-quantiser
//! `2p + h`, the code of row `rho(j)` in its low nibble and of row
//! `16 + rho(j)` in its high nibble, with `rho(2i) = i`, `rho(2i+1) = 8 + i`
//! (rows counted within the block). [`nibble_at`] is the definition.
//!
//! This is the layout of FAISS's `pq4_fast_scan` / ScaNN's LUT16, chosen so
//! that one 32-byte load (AVX2) holds two sub-quantisers' codes for the 32
//! rows of a block, one 64-byte load (AVX-512) four, and `vpshufb` with the
//! two (four) 16-byte tables of those sub-quantisers in the matching
//! 128-bit lanes looks all of them up at once. `rho` makes the even and odd
//! bytes of a 16-bit lane hold rows `i` and `8 + i`, so the SIMD tiers can
//! sum the bytes in u16 lanes without unpacking and still store the rows in
//! order.
//!
//! A run's last block holding 16 rows or fewer has all of them in its
//! low nibbles (`rho(j) < 16`), so the SIMD tiers look up only those there
//! (`drive::Scan::block::<LOW>`).
//!
//! # The look-up table
//! `lut` holds `16 * m_pad` bytes: entry `c` of sub-quantiser `m` at
//! `16 m + c` (so pair `p` is the 32 bytes at `32 p`, and the four tables
//! of an AVX-512 step the 64 bytes at `64 q`). Any byte value is allowed.
//!
//! # What every tier computes
//! `acc[r] = sum_{m < m_pad} lut[16 m + code(r, m)]` exactly (u32; at most
//! `MAX_M * 255 < 2^24`, so it is also exact in f32), and for the score
//! entry `out[r] = f32(acc[r]) * delta + offset (+ bias[r])`, each
//! operation rounded in f32 in that order (never fused), so every tier
//! returns the same bits.
//!
//! # No u16 overflow
//! The SIMD tiers sum looked-up bytes in u16 lanes (all but the AVX-512
//! tier's VBMI + VNNI flavour, which sums into u32 lanes with `vpdpbusd`).
//! A u16 lane receives at most one byte (<= 255) per step, and the lanes
//! are widened into u32 accumulators at least every [`FLUSH_STEPS`] = 256
//! steps:
//! `256 * 255 = 65,280 <= 65,535`. (A step is one sub-quantiser pair on
//! AVX2, two pairs on AVX-512, half a pair on the portable tier, which adds
//! two bytes per lane per pair and so flushes every 128 pairs.) For `m_pad`
//! up to 512 (AVX2) or 1,024 (AVX-512) there is one widening per block.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod drive;
pub mod portable;
pub mod scalar;

/// Rows per block.
pub const BLOCK: usize = 32;

/// Codes (entries) per sub-quantiser table: 4 bits.
pub const KSUB: usize = 16;

/// The largest `m_pad` the kernels accept: `MAX_M * 255 = 4,177,920 <
/// 2^24`, so every accumulator is exact in u32 and in f32.
pub const MAX_M: usize = 1 << 14;

/// Steps a u16 lane may receive before it is widened: `256 * 255 <=
/// 65,535`.
pub const FLUSH_STEPS: usize = 256;

/// How far ahead of the block being scored the SIMD tiers prefetch, in
/// bytes (the same distance as `qdot`'s [`crate::quant::qdot::PREFETCH_BYTES`]).
pub const PREFETCH_BYTES: usize = 8192;

/// Bytes of one block of 32 rows.
#[inline(always)]
pub const fn block_bytes(m_pad: usize) -> usize {
    16 * m_pad
}

/// Position in the block of the byte holding row `t`'s code (`t < 32`)
/// for sub-quantiser `m`, and whether it is the high nibble.
#[inline(always)]
pub const fn byte_of(m: usize, t: usize) -> (usize, bool) {
    let s = t & 15;
    let j = if s < 8 { 2 * s } else { 2 * (s - 8) + 1 };
    (32 * (m / 2) + 16 * (m % 2) + j, t >= 16)
}

/// Row (within the block) whose code lies in byte `j` (`< 16`) of a
/// 16-byte lane: `rho(j)`; the high nibble holds row `16 + rho(j)`.
#[inline(always)]
pub const fn rho(j: usize) -> usize {
    if j.is_multiple_of(2) {
        j / 2
    } else {
        8 + j / 2
    }
}

/// The code of row `r` (counted from the run's first row) for
/// sub-quantiser `m`: the definition of the layout.
#[inline(always)]
pub fn nibble_at(codes: &[u8], m_pad: usize, r: usize, m: usize) -> u8 {
    let (j, high) = byte_of(m, r % BLOCK);
    let b = codes[(r / BLOCK) * block_bytes(m_pad) + j];
    if high {
        b >> 4
    } else {
        b & 15
    }
}

/// The f32 epilogue of [`ScoreFn`]: `f32(acc) * delta + offset (+ bias)`.
#[derive(Clone, Copy)]
pub struct Epilogue<'a> {
    pub delta: f32,
    pub offset: f32,
    pub bias: Option<&'a [f32]>,
}

/// The f32 score of one accumulator, each step rounded to nearest even in
/// f32 (never fused). The vector epilogues perform the same operations
/// lane-wise.
#[inline(always)]
pub fn score_of(acc: u32, delta: f32, offset: f32, bias: Option<f32>) -> f32 {
    let v = acc as f32 * delta + offset;
    match bias {
        Some(b) => v + b,
        None => v,
    }
}

/// `acc(codes, m_pad, nrows, lut, out)`: `out[r] = sum_m lut[16 m +
/// code(r, m)]` for `r < nrows` (only those are written).
///
/// # Safety
/// `m_pad` is even, `2 <= m_pad <= MAX_M`; `codes.len() >=
/// ceil(nrows / 32) * 16 * m_pad`; `lut.len() >= 16 * m_pad`;
/// `out.len() >= nrows`; the CPU supports the tier of the function.
pub type AccFn = unsafe fn(&[u8], usize, usize, &[u8], &mut [u32]);

/// `score(codes, m_pad, nrows, lut, epi, out)`: `out[r] =
/// score_of(acc[r], epi.delta, epi.offset, epi.bias[r])`.
///
/// # Safety
/// The preconditions of [`AccFn`]; `epi.bias`, if any, holds at least
/// `nrows` values.
pub type ScoreFn = unsafe fn(&[u8], usize, usize, &[u8], &Epilogue<'_>, &mut [f32]);

/// The entry points of one kernel variant.
pub struct Kernels {
    /// Variant name (`"avx512vbmi"` for the VBMI + VNNI flavour of the
    /// AVX-512 tier, otherwise the tier's name).
    pub name: &'static str,
    pub acc: AccFn,
    pub score: ScoreFn,
}

#[cfg(target_arch = "x86_64")]
static AVX512_VBMI: Kernels = Kernels {
    name: "avx512vbmi",
    acc: avx512::acc_vbmi,
    score: avx512::score_vbmi,
};

/// Whether this CPU runs the AVX-512 tier's VBMI + VNNI flavour.
#[cfg(target_arch = "x86_64")]
fn has_vbmi() -> bool {
    let e = crate::isa::extras();
    e.avx512vbmi && e.avx512vnni
}

crate::kernels::tier_table! {
    /// The kernels of `tier` (the caller has checked that the CPU supports
    /// it): the AVX-512 tier sums with `vpermb` and `vpdpbusd` when the CPU
    /// has AVX-512 VBMI and VNNI (looked up here, once per call).
    Kernels [name] { acc: acc, score: score }
    avx512 => |t| if has_vbmi() { &AVX512_VBMI } else { t };
}

/// Every kernel variant this CPU can run, lowest tier first (on AVX-512
/// CPUs with VBMI and VNNI both AVX-512 flavours, so tests reach each).
pub fn supported_variants() -> Vec<(crate::isa::Isa, &'static Kernels)> {
    #[cfg(target_arch = "x86_64")]
    let plain = has_vbmi().then_some(&AVX512);
    #[cfg(not(target_arch = "x86_64"))]
    let plain = None;
    crate::kernels::variants_of(kernels, plain)
}

/// Runs `block(b, &mut [u32; 32])` for each block of the run and hands the
/// accumulators of its rows (`min(32, nrows - 32 b)` of them) to `put`:
/// the shared driver of every tier, so tail blocks are handled once (the
/// block is computed in full into a stack buffer, and only the run's rows
/// are passed on; nothing is allocated).
#[inline(always)]
pub(crate) fn for_each_block(
    nrows: usize,
    mut block: impl FnMut(usize, &mut [u32; BLOCK]),
    mut put: impl FnMut(usize, &[u32]),
) {
    let mut buf = [0u32; BLOCK];
    let nblocks = nrows.div_ceil(BLOCK);
    for b in 0..nblocks {
        block(b, &mut buf);
        let n = (nrows - b * BLOCK).min(BLOCK);
        put(b * BLOCK, &buf[..n]);
    }
}
