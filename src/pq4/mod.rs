//! 4-bit product quantisation with "fast-scan" scoring of contiguous runs
//! (issue 13 item 3): the compact first scoring pass of an IVF probe, whose
//! best candidates are then re-scored exactly by the caller. This module is
//! the kernel family and its data structures; the IVF index uses it for
//! [`crate::ivf::Codes::Pq4`] (residual codes, one table per query; see
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
use crate::qdot::check_len;

use crate::rng::SplitMix64;

pub use crate::kernels::pq4::{
    block_bytes, nibble_at, BLOCK, FLUSH_STEPS, KSUB, MAX_M, PREFETCH_BYTES,
};

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

// ------------------------------------------------------------ packed rows

/// One cache line of packed codes: the unit of [`Pq4Rows`]' aligned buffer.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

impl Default for Line {
    fn default() -> Self {
        Line([0; 64])
    }
}

fn lines_as_bytes(l: &[Line]) -> &[u8] {
    // SAFETY: Line is repr(C) over [u8; 64] with size 64 and no padding, so
    // a slice of lines is `64 * len` initialised, contiguous bytes.
    unsafe { std::slice::from_raw_parts(l.as_ptr().cast::<u8>(), l.len() * 64) }
}

fn lines_as_bytes_mut(l: &mut [Line]) -> &mut [u8] {
    // SAFETY: as lines_as_bytes; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(l.as_mut_ptr().cast::<u8>(), l.len() * 64) }
}

/// Rows encoded as `M` 4-bit codes each, packed in the fast-scan layout in
/// one 64-byte-aligned buffer (whole blocks of 32 rows; a block starts on a
/// cache line when `m_pad` is a multiple of 4).
#[derive(Clone)]
pub struct Pq4Rows {
    lines: Vec<Line>,
    nrows: usize,
    m: usize,
    m_pad: usize,
}

impl std::fmt::Debug for Pq4Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pq4Rows")
            .field("nrows", &self.nrows)
            .field("m", &self.m)
            .finish_non_exhaustive()
    }
}

impl Pq4Rows {
    /// Packs unpacked codes (`codes[r * m + j]` in `0..=15`, see
    /// [`pack_codes`]).
    pub fn from_codes(codes: &[u8], nrows: usize, m: usize) -> Result<Pq4Rows> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        let m_pad = m_pad_of(m);
        let bytes = run_bytes(m_pad, nrows)?;
        let mut lines: Vec<Line> = try_vec(bytes.div_ceil(64), "codes")?;
        pack_codes(codes, nrows, m, lines_as_bytes_mut(&mut lines))?;
        Ok(Pq4Rows {
            lines,
            nrows,
            m,
            m_pad,
        })
    }

    /// Takes already packed codes (as [`Self::packed`] returns them, e.g.
    /// read back from a file): `packed` must hold exactly
    /// [`run_bytes`]`(m_pad_of(m), nrows)` bytes. Every byte value is a
    /// valid pair of codes, so nothing else is checked.
    pub fn from_packed(packed: &[u8], nrows: usize, m: usize) -> Result<Pq4Rows> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        let m_pad = m_pad_of(m);
        let bytes = run_bytes(m_pad, nrows)?;
        if packed.len() != bytes {
            bail!(
                InvalidArgument,
                "{} packed bytes; {nrows} rows of {m} codes take {bytes}",
                packed.len()
            );
        }
        let mut lines: Vec<Line> = try_vec(bytes.div_ceil(64), "codes")?;
        lines_as_bytes_mut(&mut lines)[..bytes].copy_from_slice(packed);
        Ok(Pq4Rows {
            lines,
            nrows,
            m,
            m_pad,
        })
    }

    pub fn rows(&self) -> usize {
        self.nrows
    }
    /// Sub-quantisers per row.
    pub fn m(&self) -> usize {
        self.m
    }
    /// `m` rounded up to even: what the kernels run.
    pub fn m_pad(&self) -> usize {
        self.m_pad
    }
    /// The packed codes: `ceil(rows / 32)` blocks of `16 * m_pad` bytes
    /// (the buffer may hold up to 63 bytes more, zero).
    pub fn packed(&self) -> &[u8] {
        lines_as_bytes(&self.lines)
    }
    /// The code of row `r` for sub-quantiser `j < m` (panics out of range).
    pub fn code(&self, r: usize, j: usize) -> u8 {
        assert!(r < self.nrows && j < self.m, "code({r}, {j}) out of range");
        nibble_at(self.packed(), self.m_pad, r, j)
    }
    /// Row `r`'s `m` codes into `out[..m]`.
    pub fn row_codes(&self, r: usize, out: &mut [u8]) {
        for (j, o) in out[..self.m].iter_mut().enumerate() {
            *o = self.code(r, j);
        }
    }
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.lines.len() * 64
    }

    fn check_run(&self, first: usize, n: usize, lut: &Pq4Lut, out: usize) -> Result<()> {
        match first.checked_add(n) {
            Some(end) if end <= self.nrows => {}
            _ => bail!(
                IndexOutOfRange,
                "rows {first} .. {first} + {n} are not within the {} rows",
                self.nrows
            ),
        }
        if !first.is_multiple_of(BLOCK) {
            bail!(
                InvalidArgument,
                "a run starts on a block boundary (a multiple of {BLOCK}); first is {first}"
            );
        }
        if lut.m() != self.m {
            bail!(
                InvalidArgument,
                "the table has {} sub-quantisers, the rows {}",
                lut.m(),
                self.m
            );
        }
        check_len(out, n, "out")
    }

    /// The accumulators of rows `first..first + n` (`first` a multiple of
    /// 32): `out[i] = sum_m L[m][code(first + i, m)]`. On the active tier.
    pub fn acc_run(&self, first: usize, n: usize, lut: &Pq4Lut, out: &mut [u32]) -> Result<()> {
        self.acc_run_isa(isa::active(), first, n, lut, out)
    }

    /// [`Self::acc_run`] on one chosen tier.
    pub fn acc_run_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        out: &mut [u32],
    ) -> Result<()> {
        let k = kernels_of(tier)?;
        self.check_run(first, n, lut, out.len())?;
        let codes = &self.packed()[(first / BLOCK) * block_bytes(self.m_pad)..];
        // SAFETY: the run lies within the rows and starts on a block
        // (checked), so codes holds its whole blocks; the table has
        // 16 * m_pad bytes (Pq4Lut's invariant, same m); out holds n; the
        // tier is supported.
        unsafe { (k.acc)(codes, self.m_pad, n, lut.bytes(), out) };
        Ok(())
    }

    /// The approximate scores of rows `first..first + n` (`first` a
    /// multiple of 32): `out[i] = f32(acc) * Delta + O (+ bias[i])`;
    /// `bias`, if any, holds at least `n` values (index 0 is row `first`).
    /// On the active tier.
    pub fn score_run(
        &self,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.score_run_isa(isa::active(), first, n, lut, bias, out)
    }

    /// [`Self::score_run`] on one chosen tier.
    pub fn score_run_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.score_run_shifted_isa(tier, first, n, lut, 0.0, bias, out)
    }

    /// [`Self::score_run_isa`] with `shift` added to the table's offset
    /// sum: `out[i] = f32(acc) * Delta + f32(O + shift) (+ bias[i])`, e.g.
    /// the inner product of the query with the centroid the run's rows are
    /// residuals of. `shift = 0` gives [`Self::score_run_isa`]'s bits.
    #[allow(clippy::too_many_arguments)]
    pub fn score_run_shifted_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        shift: f32,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        let k = kernels_of(tier)?;
        self.check_run(first, n, lut, out.len())?;
        if let Some(b) = bias {
            check_len(b.len(), n, "bias")?;
        }
        let epi = Epilogue {
            delta: lut.delta(),
            offset: lut.offset() + shift,
            bias,
        };
        let codes = &self.packed()[(first / BLOCK) * block_bytes(self.m_pad)..];
        // SAFETY: as acc_run_isa; bias holds n values (checked).
        unsafe { (k.score)(codes, self.m_pad, n, lut.bytes(), &epi, out) };
        Ok(())
    }
}

// ------------------------------------------------------------ query tables

/// A query's quantised tables (`16 * m_pad` bytes, the global scale
/// `Delta` and the offset sum `O`; see the module documentation). Reuse one
/// per thread: [`Pq4Lut::set`] does not allocate.
#[derive(Clone, Debug)]
pub struct Pq4Lut {
    m: usize,
    bytes: Vec<u8>,
    delta: f32,
    offset: f32,
    /// `16 * m` f64 tables (scratch of `set`).
    tables: Vec<f64>,
    /// `m` per-sub-space minima (scratch of the quantisation).
    lows: Vec<f64>,
}

impl Pq4Lut {
    /// All-zero tables for `m` sub-quantisers (`1..=MAX_M`).
    pub fn new(m: usize) -> Result<Pq4Lut> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        Ok(Pq4Lut {
            m,
            bytes: try_vec(KSUB * m_pad_of(m), "lut")?,
            delta: 0.0,
            offset: 0.0,
            tables: try_vec(KSUB * m, "tables")?,
            lows: try_vec(m, "lows")?,
        })
    }

    /// Tables from given bytes (`16 * m`: entry `c` of sub-quantiser `j`
    /// at `16 j + c`), scale and offset, e.g. for tests or stored tables.
    /// `delta` and `offset` must be finite (`NonFinite`).
    pub fn from_parts(m: usize, bytes: &[u8], delta: f32, offset: f32) -> Result<Pq4Lut> {
        let mut l = Pq4Lut::new(m)?;
        if bytes.len() != KSUB * m {
            bail!(
                InvalidArgument,
                "`bytes` holds {} values, 16 * m = {} needed",
                bytes.len(),
                KSUB * m
            );
        }
        if !delta.is_finite() || !offset.is_finite() {
            bail!(
                NonFinite,
                "delta {delta} and offset {offset} must be finite"
            );
        }
        l.bytes[..KSUB * m].copy_from_slice(bytes);
        l.delta = delta;
        l.offset = offset;
        Ok(l)
    }

    /// Quantises float tables (`tables[16 j + c] = T[j][c]`, `16 * m`
    /// finite values) into this query (see the module documentation). On
    /// an error the query is unchanged.
    pub fn set_tables(&mut self, tables: &[f64]) -> Result<()> {
        let m = self.m;
        if tables.len() != KSUB * m {
            bail!(
                InvalidArgument,
                "`tables` holds {} values, 16 * m = {} needed",
                tables.len(),
                KSUB * m
            );
        }
        if let Some(i) = tables.iter().position(|v| !v.is_finite()) {
            bail!(
                NonFinite,
                "tables[{i}] is {} (finite values needed)",
                tables[i]
            );
        }
        let mut lows = std::mem::take(&mut self.lows);
        let r = self.quantize(tables, &mut lows);
        self.lows = lows;
        r
    }

    /// The quantisation of [`Self::set_tables`] on finite `tables`
    /// (`16 * m`); `lows` is scratch of at least `m` values. No allocation.
    fn quantize(&mut self, tables: &[f64], lows: &mut [f64]) -> Result<()> {
        let mut range = 0.0f64;
        let mut osum = 0.0f64;
        for (t, lo_out) in tables.chunks_exact(KSUB).zip(lows.iter_mut()) {
            let (mut lo, mut hi) = (t[0], t[0]);
            for &v in &t[1..] {
                lo = if v < lo { v } else { lo };
                hi = if v > hi { v } else { hi };
            }
            range = range.max(hi - lo);
            osum += lo;
            *lo_out = lo;
        }
        let offset = osum as f32;
        if !offset.is_finite() || !((range / 255.0) as f32).is_finite() {
            bail!(
                NonFinite,
                "the tables' range {range:e} or offset sum {osum:e} overflows f32"
            );
        }
        let mut delta = (range / 255.0) as f32;
        if delta < f32::MIN_POSITIVE {
            delta = 0.0;
        }
        // (v - lo) * (1 / delta) is in 0 ..= 255 (1 + 2^-24) (1 + 2^-52)^2
        // (Delta is range / 255 rounded to f32; two f64 roundings): the
        // truncation of x + 1/2 rounds it to 0 ..= 255, off by at most
        // 1/2 + 2^-44 code units.
        let inv = if delta == 0.0 {
            0.0
        } else {
            1.0 / delta as f64
        };
        for ((t, b), &lo) in tables
            .chunks_exact(KSUB)
            .zip(self.bytes.chunks_exact_mut(KSUB))
            .zip(lows.iter())
        {
            for (&v, o) in t.iter().zip(b.iter_mut()) {
                *o = (((v - lo) * inv + 0.5) as u32).min(255) as u8;
            }
        }
        self.delta = delta;
        self.offset = offset;
        Ok(())
    }

    /// The tables of query `q` (`dim` finite floats) against `cb`:
    /// `T[j][c] = <q_j, C_j[c]>` in f64, then [`Self::set_tables`].
    pub fn set(&mut self, cb: &Codebook, q: &[f32]) -> Result<()> {
        if cb.m != self.m {
            bail!(
                InvalidArgument,
                "the codebook has {} sub-quantisers, the table {}",
                cb.m,
                self.m
            );
        }
        if q.len() != cb.dim {
            bail!(
                InvalidArgument,
                "the query has {} values, the codebook dim {}",
                q.len(),
                cb.dim
            );
        }
        if let Some(j) = q.iter().position(|v| !v.is_finite()) {
            bail!(NonFinite, "q[{j}] is {} (finite values needed)", q[j]);
        }
        let ds = cb.dsub;
        let mut tables = std::mem::take(&mut self.tables);
        // T[j][c] = sum_k q_k C_j[c]_k, summed over k in order from 0.0
        // (the transposed centroids make the 16 sums of a sub-space one
        // vectorisable loop per k; the order per entry is unchanged).
        for (j, t) in tables.chunks_exact_mut(KSUB).enumerate() {
            t.fill(0.0);
            for k in 0..ds {
                let qk = q[j * ds + k] as f64;
                let ct = &cb.transposed[(j * ds + k) * KSUB..][..KSUB];
                for (o, &cv) in t.iter_mut().zip(ct) {
                    *o += qk * cv as f64;
                }
            }
        }
        // Finite: f32 products and sums of dsub terms cannot overflow f64.
        let mut lows = std::mem::take(&mut self.lows);
        let r = self.quantize(&tables, &mut lows);
        self.tables = tables;
        self.lows = lows;
        r
    }

    pub fn m(&self) -> usize {
        self.m
    }
    /// `16 * m_pad` bytes (the padding sub-quantiser's table is zero).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The global scale `Delta`.
    pub fn delta(&self) -> f32 {
        self.delta
    }
    /// `O = f32(sum_m o_m)`.
    pub fn offset(&self) -> f32 {
        self.offset
    }
    /// `M Delta h`: the bound on `|Delta acc + sum_m o_m - <q, x^>|` from
    /// the byte rounding (module documentation).
    pub fn bound(&self) -> f64 {
        self.m as f64 * self.delta as f64 * H
    }
}

// ------------------------------------------------------------ codebook

/// Parameters of [`Codebook::train`].
#[derive(Clone, Copy, Debug)]
pub struct TrainParams {
    /// Lloyd iterations per sub-space (at most; it stops early when no
    /// assignment changes). Default 25.
    pub iters: u32,
    /// The seed of the row sample and of the initial centroids.
    pub seed: u64,
    /// At most this many rows train (a seeded sample without repeats when
    /// there are more; 0 = all rows). Default 4,096 (256 per centroid).
    pub max_train_rows: usize,
}

impl Default for TrainParams {
    fn default() -> Self {
        TrainParams {
            iters: 25,
            seed: 0x5eed_f45c,
            max_train_rows: 4096,
        }
    }
}

/// `M` sub-spaces of `dsub` coordinates, 16 f32 centroids each:
/// centroid `c` of sub-space `j` is `centroids[(16 j + c) * dsub..][..dsub]`.
#[derive(Clone, Debug)]
pub struct Codebook {
    dim: usize,
    m: usize,
    dsub: usize,
    centroids: Vec<f32>,
    /// The centroids transposed per sub-space: coordinate `k` of centroid
    /// `c` of sub-space `j` at `(j * dsub + k) * 16 + c` (for the tables).
    transposed: Vec<f32>,
}

/// The transposed copy of `centroids` (see [`Codebook`]'s fields).
fn transpose(centroids: &[f32], m: usize, ds: usize) -> Vec<f32> {
    let mut t = vec![0f32; centroids.len()];
    for j in 0..m {
        for c in 0..KSUB {
            for k in 0..ds {
                t[(j * ds + k) * KSUB + c] = centroids[(j * KSUB + c) * ds + k];
            }
        }
    }
    t
}

/// `sum_k (x_k - c_k)^2` in f32, in order (the distance of training and
/// encoding; no FMA, so every machine gets the same bits).
#[inline]
fn dist2(x: &[f32], c: &[f32]) -> f32 {
    x.iter().zip(c).fold(0.0f32, |s, (&a, &b)| {
        let d = a - b;
        s + d * d
    })
}

/// The nearest of the 16 centroids in `cents` (`16 * ds` floats) to `x`,
/// the lowest index on ties, and its distance.
#[inline]
fn nearest(x: &[f32], cents: &[f32], ds: usize) -> (u8, f32) {
    let mut best = (0u8, f32::INFINITY);
    for (c, cen) in cents.chunks_exact(ds).enumerate() {
        let d = dist2(x, cen);
        if d < best.1 {
            best = (c as u8, d);
        }
    }
    best
}

fn check_shape(dim: usize, m: usize) -> Result<usize> {
    if dim == 0 || m == 0 || m > MAX_M || !dim.is_multiple_of(m) {
        bail!(
            InvalidArgument,
            "dim {dim} and m {m}: m must be 1 ..= {MAX_M} and divide dim (>= 1)"
        );
    }
    Ok(dim / m)
}

impl Codebook {
    /// A codebook from given centroids (`16 * dim` finite floats, layout
    /// as in the type's documentation).
    pub fn from_centroids(dim: usize, m: usize, centroids: &[f32]) -> Result<Codebook> {
        let dsub = check_shape(dim, m)?;
        if centroids.len() != KSUB * dim {
            bail!(
                InvalidArgument,
                "`centroids` holds {} values, 16 * dim = {} needed",
                centroids.len(),
                KSUB * dim
            );
        }
        if let Some(i) = centroids.iter().position(|v| !v.is_finite()) {
            bail!(NonFinite, "centroids[{i}] is {}", centroids[i]);
        }
        Ok(Codebook {
            dim,
            m,
            dsub,
            centroids: centroids.to_vec(),
            transposed: transpose(centroids, m, dsub),
        })
    }

    /// Trains `m` sub-space codebooks on `rows` rows of `dim` floats (row
    /// `r` at `data[r * stride..]`), one thread, plain f32:
    ///
    /// 1. The training rows: all of them, or when `rows >
    ///    max_train_rows > 0` a sample of `max_train_rows` distinct rows
    ///    (a partial Fisher-Yates shuffle of `0..rows` with
    ///    `SplitMix64(seed)`, then sorted).
    /// 2. Per sub-space `j`, with `SplitMix64(seed ^ ((j + 1) *
    ///    0x9E3779B97F4A7C15))`: the initial centroids are 16 distinct
    ///    training rows (a partial Fisher-Yates shuffle); then up to
    ///    `iters` Lloyd iterations: assign each row to its nearest
    ///    centroid (f32 squared distance summed in order, lowest index on
    ///    ties), stop if no assignment changed, else set each centroid to
    ///    its rows' mean (summed in f64 in row order, rounded to f32). An
    ///    empty cluster takes the row farthest from its centroid (lowest
    ///    index on ties) among clusters of two or more rows.
    ///
    /// Needs `rows >= 16`, `m` dividing `dim`, finite data.
    pub fn train(
        data: &[f32],
        rows: usize,
        dim: usize,
        stride: usize,
        m: usize,
        params: &TrainParams,
    ) -> Result<Codebook> {
        let ds = check_shape(dim, m)?;
        let need = strided_len(rows, dim, stride, "data")?;
        check_len(data.len(), need, "data")?;
        if rows < KSUB {
            bail!(
                InvalidArgument,
                "{rows} rows; training 16 centroids needs at least 16"
            );
        }
        for r in 0..rows {
            let row = &data[r * stride..r * stride + dim];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                bail!(
                    NonFinite,
                    "data[{r}][{j}] is {} (finite values needed)",
                    row[j]
                );
            }
        }
        // 1. the training rows
        let mut ids: Vec<usize> = (0..rows).collect();
        let n = if params.max_train_rows > 0 && rows > params.max_train_rows {
            let n = params.max_train_rows.max(KSUB);
            let mut rng = SplitMix64::new(params.seed);
            for i in 0..n {
                let k = i + rng.below((rows - i) as u64) as usize;
                ids.swap(i, k);
            }
            ids.truncate(n);
            ids.sort_unstable();
            n
        } else {
            rows
        };
        let mut centroids: Vec<f32> = try_vec(KSUB * dim, "centroids")?;
        let mut xs: Vec<f32> = try_vec(checked_mul(n, ds, "train rows * dsub")?, "train rows")?;
        let mut assign = vec![0u8; n];
        let mut d2 = vec![0f32; n];
        for j in 0..m {
            for (i, &r) in ids.iter().enumerate() {
                xs[i * ds..(i + 1) * ds]
                    .copy_from_slice(&data[r * stride + j * ds..r * stride + (j + 1) * ds]);
            }
            let cents = &mut centroids[j * KSUB * ds..(j + 1) * KSUB * ds];
            let mut rng =
                SplitMix64::new(params.seed ^ ((j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
            kmeans16(
                &xs,
                n,
                ds,
                params.iters,
                &mut rng,
                cents,
                &mut assign,
                &mut d2,
            );
        }
        Ok(Codebook {
            dim,
            m,
            dsub: ds,
            transposed: transpose(&centroids, m, ds),
            centroids,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn m(&self) -> usize {
        self.m
    }
    /// Coordinates per sub-space (`dim / m`).
    pub fn dsub(&self) -> usize {
        self.dsub
    }
    /// All centroids (`16 * dim` floats).
    pub fn centroids(&self) -> &[f32] {
        &self.centroids
    }
    /// Centroid `c` of sub-space `j`.
    pub fn centroid(&self, j: usize, c: usize) -> &[f32] {
        &self.centroids[(KSUB * j + c) * self.dsub..][..self.dsub]
    }

    /// The `m` codes of row `x` (`dim` floats): per sub-space the nearest
    /// centroid (f32 squared distance, lowest index on ties). NaN compares
    /// as never nearer, so such a sub-space gets code 0.
    pub fn encode_row(&self, x: &[f32], out: &mut [u8]) {
        let ds = self.dsub;
        for (j, o) in out[..self.m].iter_mut().enumerate() {
            let cents = &self.centroids[j * KSUB * ds..(j + 1) * KSUB * ds];
            *o = nearest(&x[j * ds..(j + 1) * ds], cents, ds).0;
        }
    }

    /// The decoded row `x^` of codes `codes[..m]` into `out[..dim]`.
    pub fn decode_row(&self, codes: &[u8], out: &mut [f32]) {
        for (j, &c) in codes[..self.m].iter().enumerate() {
            out[j * self.dsub..(j + 1) * self.dsub].copy_from_slice(self.centroid(j, c as usize));
        }
    }

    /// Encodes `rows` rows (row `r` at `data[r * stride..]`, finite) into
    /// packed [`Pq4Rows`] with [`Self::encode_row`].
    pub fn encode(&self, data: &[f32], rows: usize, stride: usize) -> Result<Pq4Rows> {
        self.encode_with(data, rows, stride, None)
    }

    /// [`Self::encode`], or with `Some(aniso)` the score-aware codes of
    /// [`Self::encode_row_anisotropic`].
    pub fn encode_with(
        &self,
        data: &[f32],
        rows: usize,
        stride: usize,
        aniso: Option<Anisotropic>,
    ) -> Result<Pq4Rows> {
        let need = strided_len(rows, self.dim, stride, "data")?;
        check_len(data.len(), need, "data")?;
        if let Some(a) = aniso {
            a.check()?;
        }
        let mut codes: Vec<u8> = try_vec(checked_mul(rows, self.m, "rows * m")?, "codes")?;
        for r in 0..rows {
            let row = &data[r * stride..r * stride + self.dim];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                bail!(
                    NonFinite,
                    "data[{r}][{j}] is {} (finite values needed)",
                    row[j]
                );
            }
            let out = &mut codes[r * self.m..(r + 1) * self.m];
            match aniso {
                None => self.encode_row(row, out),
                Some(a) => self.encode_row_anisotropic(row, a, out),
            }
        }
        Pq4Rows::from_codes(&codes, rows, self.m)
    }

    /// Score-aware ("anisotropic") codes of row `x` (`dim` finite floats),
    /// after ScaNN (Guo et al., ICML 2020): with the residual `r = x - x^`,
    /// the codes minimise (locally) `||r||^2 + (eta - 1) (r . x)^2 /
    /// ||x||^2`, i.e. the error parallel to `x` weighs `eta` times the
    /// orthogonal one. For maximum inner product search the parallel error
    /// is what moves the scores of the queries that rank `x` high.
    ///
    /// Coordinate descent from the nearest-centroid codes: up to
    /// `a.sweeps` passes over the sub-spaces in order; in each, the code of
    /// sub-space `j` becomes the one of lowest loss given the others (the
    /// lowest index among equal losses; the current code unless another is
    /// strictly lower), in f64 arithmetic in a fixed order, so the codes are
    /// the same on every machine. A pass that changes nothing ends it. The
    /// loss never increases (up to the f64 rounding of its running sums),
    /// so it is at most the plain codes' loss; with
    /// `eta == 1` (or a zero row) the codes are [`Self::encode_row`]'s. The
    /// codebook itself is the plain k-means one (score-aware training of
    /// the centroids is not implemented).
    pub fn encode_row_anisotropic(&self, x: &[f32], a: Anisotropic, out: &mut [u8]) {
        self.encode_row_anisotropic_along(x, x, a, out)
    }

    /// [`Self::encode_row_anisotropic`] with the parallel direction given
    /// separately: the codes of `x` minimise `||r||^2 + (eta - 1) (r .
    /// u)^2 / ||u||^2` with `r = x - x^`. For residual codes (`x = w - c`,
    /// the row minus its list centroid) `u = w` is the row itself: the
    /// score error of a query along the row is `<q, r>` either way.
    pub fn encode_row_anisotropic_along(
        &self,
        x: &[f32],
        u: &[f32],
        a: Anisotropic,
        out: &mut [u8],
    ) {
        self.encode_row(x, out);
        let (m, ds) = (self.m, self.dsub);
        let xx: f64 = u[..self.dim].iter().map(|&v| v as f64 * v as f64).sum();
        if a.eta == 1.0 || xx == 0.0 {
            return;
        }
        let w = (a.eta as f64 - 1.0) / xx;
        // rr = ||r||^2 and rx = r . x of the current codes, kept up to date
        // from per-sub-space parts.
        let part = |j: usize, c: usize| -> (f64, f64) {
            let xs = &x[j * ds..(j + 1) * ds];
            let us = &u[j * ds..(j + 1) * ds];
            xs.iter().zip(us).zip(self.centroid(j, c)).fold(
                (0.0, 0.0),
                |(rr, rx), ((&xv, &uv), &cv)| {
                    let d = xv as f64 - cv as f64;
                    (rr + d * d, rx + d * uv as f64)
                },
            )
        };
        let (mut rr, mut rx) = (0.0f64, 0.0f64);
        for (j, &c) in out[..m].iter().enumerate() {
            let (a2, b) = part(j, c as usize);
            rr += a2;
            rx += b;
        }
        for _ in 0..a.sweeps {
            let mut changed = false;
            for (j, code) in out[..m].iter_mut().enumerate() {
                let cur = *code as usize;
                let (cr, cx) = part(j, cur);
                let (base_rr, base_rx) = (rr - cr, rx - cx);
                let loss = |p: (f64, f64)| {
                    let (r2, x1) = (base_rr + p.0, base_rx + p.1);
                    r2 + w * x1 * x1
                };
                let mut best = (cur, loss((cr, cx)), (cr, cx));
                for c in 0..KSUB {
                    if c == cur {
                        continue;
                    }
                    let p = part(j, c);
                    let l = loss(p);
                    if l < best.1 {
                        best = (c, l, p);
                    }
                }
                if best.0 != cur {
                    *code = best.0 as u8;
                    rr = base_rr + best.2 .0;
                    rx = base_rx + best.2 .1;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// Options of the score-aware encoding ([`Codebook::encode_row_anisotropic`]).
#[derive(Clone, Copy, Debug)]
pub struct Anisotropic {
    /// Weight of the residual parallel to the row over the orthogonal one
    /// (`>= 1`; ScaNN's `h_par / h_orth`, e.g. 4 to 20; 1 = plain codes).
    pub eta: f32,
    /// Coordinate-descent passes over the sub-spaces (at most).
    pub sweeps: u32,
}

impl Default for Anisotropic {
    fn default() -> Self {
        Anisotropic {
            eta: 4.0,
            sweeps: 4,
        }
    }
}

impl Anisotropic {
    fn check(&self) -> Result<()> {
        if !(self.eta.is_finite() && self.eta >= 1.0) {
            bail!(
                InvalidArgument,
                "eta is {}; it must be finite and >= 1",
                self.eta
            );
        }
        Ok(())
    }
}

/// Seeded Lloyd k-means with 16 centroids on `n >= 16` points of `ds`
/// floats (see [`Codebook::train`]).
#[allow(clippy::too_many_arguments)]
fn kmeans16(
    xs: &[f32],
    n: usize,
    ds: usize,
    iters: u32,
    rng: &mut SplitMix64,
    cents: &mut [f32],
    assign: &mut [u8],
    d2: &mut [f32],
) {
    let pt = |i: usize| &xs[i * ds..(i + 1) * ds];
    // initial centroids: 16 distinct points
    let mut pick: Vec<usize> = (0..n).collect();
    for c in 0..KSUB {
        let k = c + rng.below((n - c) as u64) as usize;
        pick.swap(c, k);
        cents[c * ds..(c + 1) * ds].copy_from_slice(pt(pick[c]));
    }
    let mut sums = vec![0f64; KSUB * ds];
    let mut counts = [0usize; KSUB];
    for it in 0..iters {
        let mut changed = false;
        for i in 0..n {
            let (c, d) = nearest(pt(i), cents, ds);
            if it == 0 || assign[i] != c {
                changed = true;
            }
            assign[i] = c;
            d2[i] = d;
        }
        if !changed {
            break;
        }
        sums.fill(0.0);
        counts.fill(0);
        for (i, &a) in assign[..n].iter().enumerate() {
            let c = a as usize;
            counts[c] += 1;
            for (s, &x) in sums[c * ds..(c + 1) * ds].iter_mut().zip(pt(i)) {
                *s += x as f64;
            }
        }
        for c in 0..KSUB {
            if counts[c] > 0 {
                for (k, s) in sums[c * ds..(c + 1) * ds].iter().enumerate() {
                    cents[c * ds + k] = (s / counts[c] as f64) as f32;
                }
            }
        }
        // empty clusters: the farthest point of a cluster with >= 2 points
        for c in 0..KSUB {
            if counts[c] > 0 {
                continue;
            }
            let mut far: Option<usize> = None;
            for i in 0..n {
                if counts[assign[i] as usize] >= 2 && far.is_none_or(|f| d2[i] > d2[f]) {
                    far = Some(i);
                }
            }
            let Some(i) = far else { break };
            counts[assign[i] as usize] -= 1;
            assign[i] = c as u8;
            counts[c] = 1;
            d2[i] = 0.0;
            cents[c * ds..(c + 1) * ds].copy_from_slice(pt(i));
        }
    }
}
