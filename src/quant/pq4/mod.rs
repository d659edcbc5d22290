//! 4-bit product quantisation with "fast-scan" scoring of contiguous runs:
//! the compact first scoring pass of an IVF probe, whose
//! best candidates are then re-scored exactly by the caller. This module is
//! the kernel family and its data structures; the IVF index uses it for
//! [`crate::source::ivf::Codes::Pq4`] (residual codes, one table per query; see
//! `src/ivf/pq.rs`), and the C API reaches it through that index.
//!
//! # The scheme
//! * **Codebook** ([`Codebook`]): the `dim` coordinates are split into `M`
//!   sub-spaces of `dsub = dim / M` consecutive coordinates (`M` divides
//!   `dim`; `M = dim / 2` and `M = dim / 4` are the usual choices: 4 and 2
//!   bits per coordinate). Each sub-space has [`KSUB`] = 16 centroids, so a
//!   row is `M` 4-bit codes. [`Codebook::train`] runs a seeded k-means per
//!   sub-space in plain f32 (see there); the result depends only on the
//!   data, the parameters and the seed, never on the tier or the machine.
//!   Rows are encoded to their nearest centroids, or optionally with
//!   score-aware (anisotropic, ScaNN-style) codes that weigh the residual
//!   parallel to the row `eta` times the orthogonal one
//!   ([`Codebook::encode_with`], [`Anisotropic`]); the centroids stay the
//!   k-means ones.
//! * **Codes** ([`Pq4Rows`]): packed in the fast-scan layout of
//!   `src/kernels/pq4/mod.rs` (FAISS `pq4_fast_scan` / ScaNN LUT16): blocks
//!   of 32 rows, one 32-byte chunk per pair of sub-quantisers, so one AVX2
//!   load (two pairs per AVX-512 load) feeds `vpshufb` for 32 rows. `M` is
//!   rounded up to an even `m_pad` (the extra sub-quantiser has code 0 and
//!   an all-zero table), and the rows to whole blocks (padding rows have
//!   code 0 and are never written out).
//! * **Query tables** ([`Pq4Lut`]): for each sub-space `m` and centroid `c`
//!   the inner product `T[m][c] = <q_m, C_m[c]>` (computed in f64). They are
//!   quantised to bytes with **one global scale and a per-sub-space
//!   offset**: `o_m = min_c T[m][c]`, `Delta = f32(max_m (max_c T[m][c] -
//!   o_m) / 255)` and `L[m][c] = floor((T[m][c] - o_m) / Delta + 1/2)` in
//!   `0..=255` (f64 arithmetic; no clamping ever happens, because
//!   `(T - o_m) / Delta <= 255 (1 + 2^-24)`). One global scale keeps the
//!   sum of bytes proportional to the sum of tables; the offsets use each
//!   sub-space's full byte range no matter where its values lie.
//! * **The kernel** sums `acc = sum_m L[m][code_m]` exactly (u16 lanes,
//!   widened to u32 at least every 256 steps: `256 * 255 <= 65,535`; see
//!   `src/kernels/pq4/mod.rs`) and scores
//!   `score = f32(acc) * Delta + O (+ bias)`, `O = f32(sum_m o_m)`, each
//!   operation rounded in f32 in that order (never fused). Every tier
//!   returns the same accumulators and the same score bits.
//!
//! # Error bound
//! Against the PQ inner product `<q, x^>` (`x^` the decoded row):
//! rounding a table entry is off by at most `Delta h`, `h = 1/2 + 2^-40`
//! (the f64 product with `1 / Delta` and the f32 rounding of `Delta` add
//! less than `2^-44` code units), so
//!
//! `|Delta acc + sum_m o_m - <q, x^>| <= M Delta h + e64`
//!
//! with `e64` the f64 rounding of the tables (`<= gamma64(dsub)
//! sum_j |q_j x^_j|`, below `1e-13` relative). The f32 score adds at most
//! `gamma(3) (Delta acc + |sum_m o_m| + |bias|) + u |sum_m o_m|`
//! (`u = 2^-24`, `gamma(n) = n u / (1 - n u)`; `f32(acc)` is exact because
//! `acc <= MAX_M * 255 < 2^24`). [`Pq4Lut::bound`] returns `M Delta h`.
//! Against the exact inner product `<q, x>` add the quantisation error of
//! the row, `|<q, x - x^>| <= ||q|| ||x - x^||`. `tests/pq4.rs` checks both
//! against f64 references. The error is `M / 2` table steps at worst and
//! about `sqrt(M / 12)` steps typically, which is why the final scores
//! come from the exact re-rank.
//!
//! If `Delta` would be below the smallest normal f32 (all table ranges
//! under `255 * 2^-126`), it is set to 0 and every byte to 0; the error is
//! then at most `sum_m range_m < M * 255 * 2^-126`.
//!
//! # Tiers
//! Scalar (the oracle), portable (`wide`, `u8x16::shuffle`), AVX2
//! (`vpshufb` ymm), AVX-512 (`vpshufb` zmm, AVX512BW). See
//! `src/kernels/pq4/` and `benches/pq4.md`.

use crate::bail;
use crate::error::{checked_mul, strided_len, try_vec, Result};
use crate::isa::{self, Isa};
use crate::kernels::pq4::{self as kp, Epilogue, Kernels};
use crate::quant::qdot::check_len;

pub use crate::kernels::pq4::{
    block_bytes, nibble_at, BLOCK, FLUSH_STEPS, KSUB, MAX_M, PREFETCH_BYTES,
};

mod codebook;
mod lut;
mod rows;

pub use codebook::{Anisotropic, Codebook, TrainParams};
pub use lut::Pq4Lut;
pub use rows::Pq4Rows;

/// `1/2 + 2^-40`: the bound, in table steps (`Delta`), of the rounding of
/// one table entry (see the module documentation).
pub const H: f64 = 0.5 + 1.0 / 1_099_511_627_776.0;

/// `m` rounded up to an even number (the sub-quantisers the kernels run).
pub const fn m_pad_of(m: usize) -> usize {
    m.div_ceil(2) * 2
}

/// Bytes of a run of `nrows` rows with `m_pad` codes each: whole blocks.
pub fn run_bytes(m_pad: usize, nrows: usize) -> Result<usize> {
    checked_mul(
        nrows.div_ceil(BLOCK),
        block_bytes(m_pad),
        "blocks * block bytes",
    )
}

// ------------------------------------------------------------ kernel entry

fn kernels_of(tier: Isa) -> Result<&'static Kernels> {
    isa::check_supported(tier)?;
    Ok(kp::kernels(tier))
}

fn check_m_pad(m_pad: usize) -> Result<()> {
    if m_pad < 2 || !m_pad.is_multiple_of(2) || m_pad > MAX_M {
        bail!(
            InvalidArgument,
            "m_pad is {m_pad}; it must be even, 2 ..= {MAX_M}"
        );
    }
    Ok(())
}

fn check_run(codes: usize, m_pad: usize, nrows: usize, lut: usize, out: usize) -> Result<()> {
    check_m_pad(m_pad)?;
    check_len(codes, run_bytes(m_pad, nrows)?, "codes")?;
    check_len(lut, KSUB * m_pad, "lut")?;
    check_len(out, nrows, "out")
}

/// For each of the `nrows` rows of a packed run (`codes` holds
/// `ceil(nrows / 32)` blocks of [`block_bytes`]`(m_pad)` bytes, the layout
/// of `src/kernels/pq4/mod.rs`), `out[r] = sum_{m < m_pad} lut[16 m +
/// code(r, m)]`, exactly. Any byte values are allowed in `codes` and `lut`.
/// On the active tier.
///
/// Checks (before anything is written): `m_pad` even, `2..=MAX_M`;
/// `codes`, `lut` (`16 * m_pad`) and `out` (`nrows`; only those written)
/// long enough.
pub fn accumulate(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    out: &mut [u32],
) -> Result<()> {
    accumulate_isa(isa::active(), codes, m_pad, nrows, lut, out)
}

/// [`accumulate`] on one chosen tier (`UnsupportedIsa` if the CPU lacks it).
pub fn accumulate_isa(
    tier: Isa,
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    out: &mut [u32],
) -> Result<()> {
    let k = kernels_of(tier)?;
    check_run(codes.len(), m_pad, nrows, lut.len(), out.len())?;
    // SAFETY: every length and m_pad checked above; the tier is supported.
    unsafe { (k.acc)(codes, m_pad, nrows, lut, out) };
    Ok(())
}

/// Like [`accumulate`], then `out[r] = f32(acc[r]) * delta + offset
/// (+ bias[r])`, each step rounded in f32 in that order (identical bits
/// on every tier). On the active tier.
#[allow(clippy::too_many_arguments)]
pub fn score(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    delta: f32,
    offset: f32,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    score_isa(
        isa::active(),
        codes,
        m_pad,
        nrows,
        lut,
        delta,
        offset,
        bias,
        out,
    )
}

/// [`score`] on one chosen tier (`UnsupportedIsa` if the CPU lacks it).
#[allow(clippy::too_many_arguments)]
pub fn score_isa(
    tier: Isa,
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    delta: f32,
    offset: f32,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let k = kernels_of(tier)?;
    check_run(codes.len(), m_pad, nrows, lut.len(), out.len())?;
    if let Some(b) = bias {
        check_len(b.len(), nrows, "bias")?;
    }
    let epi = Epilogue {
        delta,
        offset,
        bias,
    };
    // SAFETY: every length and m_pad checked above (bias too); the tier is
    // supported.
    unsafe { (k.score)(codes, m_pad, nrows, lut, &epi, out) };
    Ok(())
}

// ------------------------------------------------------------ packing

/// Packs `nrows` rows of `m` codes (`codes[r * m + j]`, each `0..=15`)
/// into the fast-scan layout: `out` gets [`run_bytes`]`(m_pad_of(m),
/// nrows)` bytes (padding codes 0). Errors: `m` not in `1..=MAX_M`, a code
/// above 15 (`InvalidArgument`), short buffers (`BufferTooSmall`).
pub fn pack_codes(codes: &[u8], nrows: usize, m: usize, out: &mut [u8]) -> Result<()> {
    if m == 0 || m > MAX_M {
        bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
    }
    let m_pad = m_pad_of(m);
    check_len(codes.len(), checked_mul(nrows, m, "nrows * m")?, "codes")?;
    let need = run_bytes(m_pad, nrows)?;
    check_len(out.len(), need, "out")?;
    if let Some(i) = codes[..nrows * m].iter().position(|&c| c > 15) {
        bail!(
            InvalidArgument,
            "codes[{i}] is {}; 4-bit codes are 0..=15",
            codes[i]
        );
    }
    let out = &mut out[..need];
    out.fill(0);
    let bb = block_bytes(m_pad);
    for r in 0..nrows {
        let blk = &mut out[(r / BLOCK) * bb..][..bb];
        for j in 0..m {
            let (at, high) = kp::byte_of(j, r % BLOCK);
            let c = codes[r * m + j];
            blk[at] |= if high { c << 4 } else { c };
        }
    }
    Ok(())
}
