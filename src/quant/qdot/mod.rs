//! Quantised int8 scoring of contiguous rows, for the first pass of an
//! inverted-file (IVF) probe: every candidate row of a probed list is scored
//! from compact int8 codes, and only the best `R` (a [`crate::matmul::TopK`]) are re-scored
//! exactly from the full-precision rows by the caller.
//!
//! Over ~900 lines on purpose: the quantisation of rows and queries and
//! the row-major codes ([`QRows`]) share one error analysis, written once
//! in these docs and tested against it (the panel layout, [`QPanels`], is
//! in `panels.rs`; the kernels are in `crate::kernels::qdot`).
//!
//! # The quantisation scheme
//! * **Rows** ([`quantize_rows`], [`QRows`]): symmetric per-row int8. For
//!   a row `w` of `dim` floats, `s = max_j |w_j| / 127` (f32; 0 for an
//!   all-zero row, whose codes are all 0) and
//!   `c_j = round_ties_even(w_j / s)` clamped to `-127..=127` (f32
//!   division). Codes are stored row-major, each row padded with zero bytes
//!   to `dim_pad = round_up(dim, 64)` bytes, in a 64-byte-aligned buffer (a
//!   row is a whole number of cache lines). Per row, [`QRows`] also keeps
//!   `s` and `sum_r = sum_j c_j` (i32).
//! * **The query** ([`quantize_query`], [`QQuery`]): 7-bit,
//!   `t = max_j |q_j| / 63` and `k_j = round_ties_even(q_j / t)` in
//!   `-63..=63`, stored as the byte `u_j = k_j + 64` in `1..=127`, padded to
//!   `dim_pad` with 64 (`k = 0`). Seven bits keep `vpmaddubsw` (u8 x i8,
//!   pairs summed in i16) from ever saturating: `2 * 127 * 127 = 32258 <
//!   32767`. The bytes are unsigned because the x86 byte multipliers
//!   (`vpmaddubsw`, `vpdpbusd`) take one unsigned and one signed operand.
//! * **The kernel** ([`qdot_u8i8`]) computes, exactly in i32,
//!   `I = sum_j u_j c_j - 64 * sum_r = sum_j k_j c_j` for each row of a
//!   contiguous run; [`qscore_u8i8`] also applies
//!   `score = f32(I) * (s * t) (+ bias)`, every step rounded in f32 in that
//!   order (never fused), so every tier returns the same bits.
//!
//! # Error bound
//! Let `h = 1/2 + 2^-17`. Every stored row element satisfies
//! `|w_j - s c_j| <= s h`, and every query element `|q_j - t k_j| <= t h`:
//! rounding to the nearest integer is off by at most 1/2 in code units, and
//! the f32 quotient `w_j / s` adds at most `u |w_j / s| <= 127 u / (1 - u)
//! < 2^-17` (`u = 2^-24`; `|w_j / s| <= 127 / (1 - u)` because `s` is
//! `max|w| / 127` rounded; 63 instead of 127 for the query). The clamp never
//! moves a value by more than that same rounding. This needs `s` (and `t`)
//! to be a normal f32, i.e. `max|w| >= 127 * 2^-126` (`max|q| >= 63 *
//! 2^-126`); for rows or queries below that (all values under about
//! `1.5e-36`) the scale is subnormal or 0 and the per-element error is only
//! bounded by `2 max|w|` (`2 max|q|`), which is negligible in absolute
//! terms. Writing
//! `w_j = s c_j + e_j` and `q_j = t k_j + f_j`,
//! `dot(w, q) = s t I + s sum_j c_j f_j + t sum_j k_j e_j + sum_j e_j f_j`, so
//!
//! `|dot(w, q) - s t I| <= s t h (sum_j |c_j| + sum_j |k_j| + h dim)`
//!
//! and, with `s sum_j |c_j| <= ||w||_1 + s h dim` (and the same for q),
//! `<= h (t ||w||_1 + s ||q||_1) + 3 s t h^2 dim`. For example, a row
//! and a query of 128 values of unit size are scored within about
//! `(||w||_1 / 63 + ||q||_1 / 127) / 2`, a few percent of a typical dot
//! product's spread: good for choosing the re-rank candidates, which is
//! why the final scores come from the exact re-rank.
//!
//! The f32 score adds at most `gamma(4) (s t |I| + |bias|)`,
//! `gamma(n) = n u / (1 - n u)` (the conversion of `I`, exact when
//! `|I| < 2^24`, the product of the scales, the product, the bias sum).
//! `tests/qdot.rs` checks both bounds against f64 references.
//!
//! # Tiers
//! Scalar (the oracle), portable (`wide`, i16 widening + `pmaddwd`), AVX2
//! (`vpmaddubsw` + `vpmaddwd`), AVX-512 (`vpdpbusd` with VNNI, else
//! `vpmaddubsw` + `vpmaddwd` on zmm; where it has run: docs/avx512.md).
//! All return identical results (integers exactly, scores bit for
//! bit). See `src/kernels/qdot/` and `benches/qdot.md`.
//!
//! # Errors
//! Every argument is checked before anything is written: `dim_pad` (a
//! non-zero multiple of [`PAD`], at most [`MAX_DIM_PAD`]), buffer lengths,
//! query bytes (`<= 127`; [`QQuery`] guarantees it by construction, so the
//! [`QRows`] methods skip that check), non-finite inputs (`NonFinite`).

use crate::bail;
use crate::error::{
    checked_mul, first_non_finite, max_abs, strided_len, try_vec, Error, Result, Status,
};
use crate::isa::{self, Isa};
use crate::kernels::qdot::{self as kq, Epilogue, Kernels};

pub use crate::kernels::qdot::{
    GATHER_AHEAD, MAX_DIM_PAD, PAD, PANEL, PANEL_QUERIES, PREFETCH_BYTES,
};

mod nib;
mod panels;
pub use nib::NibPanels;
pub use panels::QPanels;

/// `dim` rounded up to a multiple of [`PAD`] (64): the stored row length
/// of [`QRows`] and of a quantised query. 0 stays 0.
pub fn dim_pad_of(dim: usize) -> usize {
    dim.div_ceil(PAD) * PAD
}

/// `1/2 + 2^-17`: the bound, in code units, of the quantisation error of
/// one element (see the module documentation).
pub const H: f64 = 0.5 + 1.0 / 131_072.0;

// ------------------------------------------------------------ kernel entry

/// One kernel variant this CPU can run: a tier, and for the AVX-512 tier
/// the flavour (with `vpdpbusd` on AVX-512 VNNI CPUs, or without). Obtained
/// only from [`Variant::of`], [`Variant::active`] or [`Variant::all`], so
/// holding one proves the CPU supports it.
#[derive(Clone, Copy)]
pub struct Variant {
    tier: Isa,
    k: &'static Kernels,
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Variant({})", self.k.name)
    }
}

impl Variant {
    /// The best variant of `tier` on this CPU (`UnsupportedIsa` if the CPU
    /// lacks the tier).
    pub fn of(tier: Isa) -> Result<Variant> {
        isa::check_supported(tier)?;
        Ok(Variant {
            tier,
            k: kq::kernels(tier),
        })
    }

    /// The variant of the active tier ([`isa::active`]).
    pub fn active() -> Variant {
        let tier = isa::active();
        Variant {
            tier,
            k: kq::kernels(tier),
        }
    }

    /// Every variant this CPU can run, lowest first; on AVX-512 VNNI CPUs
    /// both AVX-512 flavours.
    pub fn all() -> Vec<Variant> {
        kq::supported_variants()
            .into_iter()
            .map(|(tier, k)| Variant { tier, k })
            .collect()
    }

    pub fn tier(&self) -> Isa {
        self.tier
    }

    /// `"scalar"`, `"portable"`, `"avx2"`, `"avx512"` or `"avx512vnni"`.
    pub fn name(&self) -> &'static str {
        self.k.name
    }
}

fn check_dim_pad(dim_pad: usize) -> Result<()> {
    if dim_pad == 0 || !dim_pad.is_multiple_of(PAD) || dim_pad > MAX_DIM_PAD {
        bail!(
            InvalidArgument,
            "dim_pad is {dim_pad}; it must be a non-zero multiple of {PAD}, at most {MAX_DIM_PAD}"
        );
    }
    Ok(())
}

/// `BufferTooSmall` unless `have >= need` (also used by `crate::quant::pq4`).
pub(crate) fn check_len(have: usize, need: usize, what: &str) -> Result<()> {
    if have < need {
        bail!(
            BufferTooSmall,
            "`{what}` holds {have} values, {need} needed"
        );
    }
    Ok(())
}

/// Checks a run: dim_pad, codes, sums, out (query bytes separately).
fn check_run(
    codes: usize,
    dim_pad: usize,
    nrows: usize,
    q: usize,
    sums: usize,
    out: usize,
) -> Result<()> {
    check_dim_pad(dim_pad)?;
    check_len(
        codes,
        checked_mul(nrows, dim_pad, "nrows * dim_pad")?,
        "codes",
    )?;
    check_len(q, dim_pad, "q")?;
    check_len(sums, nrows, "sums")?;
    check_len(out, nrows, "out")
}

/// The query bytes are all `<= 127` (the no-saturation condition).
fn check_q_bytes(q: &[u8]) -> Result<()> {
    if q.iter().fold(0u8, |a, &b| a | b) & 0x80 != 0 {
        let j = q.iter().position(|&b| b > 127).unwrap_or(0);
        bail!(
            InvalidArgument,
            "query byte {j} is {}; quantised query bytes are at most 127",
            q[j]
        );
    }
    Ok(())
}

/// For each of `nrows` rows stored back to back from `codes[0]`
/// (`dim_pad` bytes each),
/// `out[r] = sum_j q[j] * codes[r * dim_pad + j] - 64 * sums[r]`
/// over `j < dim_pad`, exactly in i32; with the query
/// bytes of [`quantize_query`] and `sums` of [`QRows::sums`] that is
/// `sum_j k_j c_rj`. On the active tier.
///
/// Checks: `dim_pad` a non-zero multiple of 64, at most [`MAX_DIM_PAD`];
/// `codes` holds `nrows * dim_pad` bytes, `q` `dim_pad` bytes each
/// `<= 127`, `sums` and `out` `nrows` values (only the first `nrows` of
/// `out` are written). Codes may be any i8 (-128 included).
pub fn qdot_u8i8(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) -> Result<()> {
    qdot_u8i8_with(Variant::active(), codes, dim_pad, nrows, q, sums, out)
}

/// [`qdot_u8i8`] on one chosen tier (`UnsupportedIsa` if the CPU lacks it).
pub fn qdot_u8i8_isa(
    tier: Isa,
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) -> Result<()> {
    qdot_u8i8_with(Variant::of(tier)?, codes, dim_pad, nrows, q, sums, out)
}

/// [`qdot_u8i8`] on one chosen [`Variant`].
pub fn qdot_u8i8_with(
    v: Variant,
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    out: &mut [i32],
) -> Result<()> {
    check_run(codes.len(), dim_pad, nrows, q.len(), sums.len(), out.len())?;
    check_q_bytes(&q[..dim_pad])?;
    // SAFETY: every length and dim_pad checked above; the variant exists
    // only for a supported tier (Variant's constructors).
    unsafe { (v.k.dot)(codes, dim_pad, nrows, q, sums, out) };
    Ok(())
}

/// Like [`qdot_u8i8`], then `out[r] = f32(d_r) * (scales[r] * scale_q)
/// (+ bias[r])`, each step rounded in f32 in that order (the approximate
/// score of the module documentation; identical bits on every tier).
/// `scales` (and `bias`) hold at least `nrows` values, indexed from the
/// first row of the run. On the active tier.
#[allow(clippy::too_many_arguments)]
pub fn qscore_u8i8(
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    scale_q: f32,
    sums: &[i32],
    scales: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    qscore_u8i8_with(
        Variant::active(),
        codes,
        dim_pad,
        nrows,
        q,
        scale_q,
        sums,
        scales,
        bias,
        out,
    )
}

/// [`qscore_u8i8`] on one chosen tier (`UnsupportedIsa` if the CPU lacks it).
#[allow(clippy::too_many_arguments)]
pub fn qscore_u8i8_isa(
    tier: Isa,
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    scale_q: f32,
    sums: &[i32],
    scales: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    qscore_u8i8_with(
        Variant::of(tier)?,
        codes,
        dim_pad,
        nrows,
        q,
        scale_q,
        sums,
        scales,
        bias,
        out,
    )
}

/// [`qscore_u8i8`] on one chosen [`Variant`].
#[allow(clippy::too_many_arguments)]
pub fn qscore_u8i8_with(
    v: Variant,
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    scale_q: f32,
    sums: &[i32],
    scales: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    check_run(codes.len(), dim_pad, nrows, q.len(), sums.len(), out.len())?;
    check_len(scales.len(), nrows, "scales")?;
    if let Some(b) = bias {
        check_len(b.len(), nrows, "bias")?;
    }
    check_q_bytes(&q[..dim_pad])?;
    let epi = Epilogue {
        scales,
        scale_q,
        bias,
    };
    // SAFETY: every length and dim_pad checked above; the variant exists
    // only for a supported tier.
    unsafe { (v.k.score)(codes, dim_pad, nrows, q, sums, &epi, out) };
    Ok(())
}

// ------------------------------------------------------------ quantisation

/// One cache line of codes: the unit of [`QRows`]' aligned buffer.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([i8; PAD]);

impl Default for Line {
    fn default() -> Self {
        Line([0; PAD])
    }
}

fn lines_as_bytes(l: &[Line]) -> &[i8] {
    // SAFETY: Line is repr(C) over [i8; 64] with size 64 and no padding, so
    // a slice of lines is `64 * len` initialised, contiguous bytes.
    unsafe { std::slice::from_raw_parts(l.as_ptr().cast::<i8>(), l.len() * PAD) }
}

fn lines_as_bytes_mut(l: &mut [Line]) -> &mut [i8] {
    // SAFETY: as lines_as_bytes; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(l.as_mut_ptr().cast::<i8>(), l.len() * PAD) }
}

/// `round_ties_even(x)` for `|x| <= 2^22`: adding and subtracting
/// `1.5 * 2^23` leaves no fraction bits, so the sum rounds to nearest even
/// (the default rounding mode) and the difference is exact. Unlike
/// `f32::round_ties_even` (a libm call per element without SSE4.1, the
/// x86-64 baseline) it vectorises; quantised values are within +-128 here.
#[inline(always)]
fn rne_small(x: f32) -> f32 {
    (x + RNE_MAGIC) - RNE_MAGIC
}

/// [`rne_small`]'s constant, 1.5 * 2^23: below 2^22 in magnitude, `x +
/// RNE_MAGIC` is `RNE_MAGIC` plus `x` rounded to an integer, exactly.
const RNE_MAGIC: f32 = 12_582_912.0;

/// Quantises one row into `dst` (zeroed, at least `row.len()` bytes):
/// returns `(scale, sum of codes)`, `scale = max |x| / 127`, codes
/// `round_ties_even(x / scale)` in `-127..=127` (all 0, and `dst` left as
/// it is, for a zero row). The row is finite (checked by the caller). The
/// one int8 row quantiser: the IVF's codes and `matmul::quantize_rows_i8`
/// (the index's int8 storage, `lshk_quantize_rows_i8`) both use it.
pub(crate) fn quantize_row(row: &[f32], dst: &mut [i8]) -> (f32, i32) {
    let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = max / 127.0;
    if scale == 0.0 {
        return (0.0, 0);
    }
    let mut sum = 0i32;
    for (d, &v) in dst.iter_mut().zip(row) {
        let c = rne_small(v / scale).clamp(-127.0, 127.0) as i8;
        *d = c;
        sum += c as i32;
    }
    (scale, sum)
}

/// Rows quantised to int8 (see the module documentation): `rows` rows of
/// `dim_pad` bytes in one 64-byte-aligned buffer, with a scale and a code
/// sum per row.
#[derive(Clone)]
pub struct QRows {
    lines: Vec<Line>,
    scales: Vec<f32>,
    sums: Vec<i32>,
    rows: usize,
    dim: usize,
    dim_pad: usize,
}

impl std::fmt::Debug for QRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QRows")
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .field("dim_pad", &self.dim_pad)
            .finish_non_exhaustive()
    }
}

/// Quantises `rows` rows of `dim` floats (row `r` at `w[r * stride..]`)
/// into a [`QRows`], on one thread. `dim >= 1`, `stride >= dim`, `w` holds
/// `(rows - 1) * stride + dim` floats; NaN or infinity is `NonFinite`.
pub fn quantize_rows(w: &[f32], rows: usize, dim: usize, stride: usize) -> Result<QRows> {
    quantize_rows_with(w, rows, dim, stride, None, 1)
}

/// [`quantize_rows`] with a row order and threads: with `order`, row `i` of
/// the result is row `order[i]` of `w` (ids `< rows`, repeats allowed; the
/// result has `order.len()` rows), which stores an IVF's lists contiguously
/// without copying the floats first; without it, rows `0..rows` in order.
/// `threads` splits the rows between threads (0 = all cores); the result
/// does not depend on it.
pub fn quantize_rows_with(
    w: &[f32],
    rows: usize,
    dim: usize,
    stride: usize,
    order: Option<&[u32]>,
    threads: usize,
) -> Result<QRows> {
    if dim == 0 {
        bail!(InvalidArgument, "dim must be >= 1");
    }
    let dim_pad = dim_pad_of(dim);
    check_dim_pad(dim_pad)?;
    let need = strided_len(rows, dim, stride, "w")?;
    check_len(w.len(), need, "w")?;
    let row = |r: usize| &w[r * stride..r * stride + dim];
    if let Some(o) = order {
        if let Some(i) = o.iter().position(|&id| id as usize >= rows) {
            bail!(IndexOutOfRange, "order[{i}] is {}, w has {rows} rows", o[i]);
        }
    }
    // Non-finite check over the rows that will be quantised.
    let check = |r: usize| -> Result<()> {
        if let Some(j) = row(r).iter().position(|v| !v.is_finite()) {
            bail!(
                NonFinite,
                "w[{r}][{j}] is {} (finite values needed)",
                row(r)[j]
            );
        }
        Ok(())
    };
    match order {
        Some(o) => o.iter().try_for_each(|&r| check(r as usize))?,
        None => (0..rows).try_for_each(check)?,
    }
    let n = order.map_or(rows, |o| o.len());
    let per_row = dim_pad / PAD;
    let mut lines: Vec<Line> = try_vec(checked_mul(n, per_row, "rows * dim_pad / 64")?, "codes")?;
    let mut scales: Vec<f32> = try_vec(n, "scales")?;
    let mut sums: Vec<i32> = try_vec(n, "sums")?;
    let src = |i: usize| order.map_or(i, |o| o[i] as usize);
    let work = |first: usize, l: &mut [Line], sc: &mut [f32], su: &mut [i32]| {
        let bytes = lines_as_bytes_mut(l);
        for (k, ((dst, s), m)) in bytes
            .chunks_exact_mut(dim_pad)
            .zip(sc.iter_mut())
            .zip(su.iter_mut())
            .enumerate()
        {
            (*s, *m) = quantize_row(row(src(first + k)), dst);
        }
    };
    let threads = crate::par::threads(threads);
    let per = n.div_ceil(threads.max(1)).max(1);
    if threads <= 1 || n <= per {
        work(0, &mut lines, &mut scales, &mut sums);
    } else {
        crate::par::map(
            lines
                .chunks_mut(per * per_row)
                .zip(scales.chunks_mut(per))
                .zip(sums.chunks_mut(per))
                .enumerate(),
            |(i, ((l, sc), su))| work(i * per, l, sc, su),
        );
    }
    Ok(QRows {
        lines,
        scales,
        sums,
        rows: n,
        dim,
        dim_pad,
    })
}

impl QRows {
    /// Rebuilds quantised rows from stored parts (e.g. an index file):
    /// `codes` holds `rows * dim_pad_of(dim)` bytes (padded rows, padding
    /// 0, codes in `-127..=127`), `scales` `rows` finite values `>= 0`. The
    /// sums are recomputed. Violations are `InvalidArgument` / `NonFinite`.
    pub fn from_parts(rows: usize, dim: usize, codes: &[i8], scales: &[f32]) -> Result<QRows> {
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let dim_pad = dim_pad_of(dim);
        check_dim_pad(dim_pad)?;
        let need = checked_mul(rows, dim_pad, "rows * dim_pad")?;
        if codes.len() != need {
            bail!(
                InvalidArgument,
                "`codes` holds {} bytes, {rows} rows of {dim_pad} need {need}",
                codes.len()
            );
        }
        if scales.len() != rows {
            bail!(
                InvalidArgument,
                "`scales` holds {} values, {rows} needed",
                scales.len()
            );
        }
        if let Some(r) = scales.iter().position(|s| !(s.is_finite() && *s >= 0.0)) {
            return Err(Error::new(
                Status::NonFinite,
                format!("scales[{r}] is {} (finite, >= 0 needed)", scales[r]),
            ));
        }
        let mut sums = try_vec(rows, "sums")?;
        for (r, (row, s)) in codes.chunks_exact(dim_pad).zip(&mut sums).enumerate() {
            if let Some(j) = row[..dim].iter().position(|&c| c == -128) {
                bail!(
                    InvalidArgument,
                    "codes[{r}][{j}] is -128 (range -127..=127)"
                );
            }
            if let Some(j) = row[dim..].iter().position(|&c| c != 0) {
                bail!(
                    InvalidArgument,
                    "codes[{r}][{}] is padding but not 0",
                    dim + j
                );
            }
            *s = row.iter().map(|&c| c as i32).sum();
        }
        let mut lines: Vec<Line> = try_vec(need / PAD, "codes")?;
        lines_as_bytes_mut(&mut lines).copy_from_slice(codes);
        Ok(QRows {
            lines,
            scales: scales.to_vec(),
            sums,
            rows,
            dim,
            dim_pad,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Bytes per stored row (`dim` rounded up to a multiple of 64).
    pub fn dim_pad(&self) -> usize {
        self.dim_pad
    }
    /// All codes, row-major, `rows * dim_pad` bytes, 64-byte aligned.
    pub fn codes(&self) -> &[i8] {
        lines_as_bytes(&self.lines)
    }
    /// The `dim_pad` codes of row `r` (panics if `r >= rows`).
    pub fn row_codes(&self, r: usize) -> &[i8] {
        &self.codes()[r * self.dim_pad..(r + 1) * self.dim_pad]
    }
    /// Per-row scales `s` (a row is `s * codes`).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }
    /// Per-row code sums (what the kernels subtract, times 64).
    pub fn sums(&self) -> &[i32] {
        &self.sums
    }
    /// Heap bytes held (codes, scales, sums).
    pub fn memory_bytes(&self) -> usize {
        self.lines.len() * PAD + self.scales.len() * 4 + self.sums.len() * 4
    }

    fn check_run(&self, first: usize, n: usize, q: &QQuery, out: usize) -> Result<()> {
        match first.checked_add(n) {
            Some(end) if end <= self.rows => {}
            _ => bail!(
                IndexOutOfRange,
                "rows {first} .. {first} + {n} are not within the {} rows",
                self.rows
            ),
        }
        if q.dim_pad() != self.dim_pad {
            bail!(
                InvalidArgument,
                "query dim_pad is {}, rows have {}",
                q.dim_pad(),
                self.dim_pad
            );
        }
        check_len(out, n, "out")
    }

    /// `out[i] = sum_j k_j c_{first+i, j}` for the run of rows
    /// `first..first + n` (see [`qdot_u8i8`]), on the active tier.
    pub fn dot_run(&self, first: usize, n: usize, q: &QQuery, out: &mut [i32]) -> Result<()> {
        self.dot_run_with(Variant::active(), first, n, q, out)
    }

    /// [`Self::dot_run`] on one chosen [`Variant`].
    pub fn dot_run_with(
        &self,
        v: Variant,
        first: usize,
        n: usize,
        q: &QQuery,
        out: &mut [i32],
    ) -> Result<()> {
        self.check_run(first, n, q, out.len())?;
        let codes = &self.codes()[first * self.dim_pad..];
        // SAFETY: the run lies within the rows (checked), so codes holds
        // n * dim_pad bytes and sums n values from `first`; q holds dim_pad
        // bytes <= 127 (QQuery's invariant) and matches; out holds n; the
        // variant is supported.
        unsafe { (v.k.dot)(codes, self.dim_pad, n, q.codes(), &self.sums[first..], out) };
        Ok(())
    }

    /// The approximate scores of the rows at positions `pos` (any order,
    /// repeats allowed) into `out[..pos.len()]`: `out[i]` is, bit for bit,
    /// what [`Self::score_run_with`] gives the one-row run `pos[i]`, with
    /// `bias[pos[i]]` added when `bias` is given (indexed by row: at least
    /// `rows` values). One kernel call ([`crate::kernels::qdot::GatherFn`]:
    /// four positions at a time, the codes of the row [`GATHER_AHEAD`]
    /// entries ahead prefetched); the re-scoring stage of
    /// `ivf::Codes::Pq4I8` and the lists' shape projections.
    pub fn score_rows_at(
        &self,
        v: Variant,
        pos: &[u32],
        q: &QQuery,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        let m = pos.len();
        self.check_run(0, 0, q, 0)?;
        check_len(out.len(), m, "out")?;
        if let Some(b) = bias {
            check_len(b.len(), self.rows, "bias")?;
        }
        if let Some(i) = pos.iter().position(|&p| p as usize >= self.rows) {
            bail!(
                IndexOutOfRange,
                "pos[{i}] is {}, not within the {} rows",
                pos[i],
                self.rows
            );
        }
        let epi = Epilogue {
            scales: &self.scales,
            scale_q: q.scale(),
            bias,
        };
        // SAFETY: every position < rows (checked), so codes holds its
        // dim_pad bytes and sums, scales (and bias: at least rows values,
        // checked) a value at it; q holds dim_pad bytes <= 127 (QQuery's
        // invariant) and matches (checked); out holds m values (checked);
        // the variant is supported.
        unsafe {
            (v.k.gather)(
                self.codes(),
                self.dim_pad,
                pos,
                q.codes(),
                &self.sums,
                &epi,
                &mut out[..m],
            )
        };
        Ok(())
    }

    /// The approximate scores of the run `first..first + n`:
    /// `out[i] = f32(I) * (s * t) (+ bias[i])` (see [`qscore_u8i8`]);
    /// `bias`, if any, holds at least `n` values for the run's rows (index
    /// 0 is row `first`). On the active tier.
    pub fn score_run(
        &self,
        first: usize,
        n: usize,
        q: &QQuery,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.score_run_with(Variant::active(), first, n, q, bias, out)
    }

    /// [`Self::score_run`] on one chosen [`Variant`].
    pub fn score_run_with(
        &self,
        v: Variant,
        first: usize,
        n: usize,
        q: &QQuery,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.check_run(first, n, q, out.len())?;
        if let Some(b) = bias {
            check_len(b.len(), n, "bias")?;
        }
        let epi = Epilogue {
            scales: &self.scales[first..],
            scale_q: q.scale(),
            bias,
        };
        let codes = &self.codes()[first * self.dim_pad..];
        // SAFETY: as dot_run_with; scales has n values from `first`, bias
        // n values (checked).
        unsafe {
            (v.k.score)(
                codes,
                self.dim_pad,
                n,
                q.codes(),
                &self.sums[first..],
                &epi,
                out,
            )
        };
        Ok(())
    }
}

/// Quantises the query `q` (`q.len() <= dim_pad` floats, finite) into
/// `out[..dim_pad]` as the 7-bit bytes `u_j = k_j + 64` of the module
/// documentation (padding 64), and returns its scale `t`. An all-zero query
/// has scale 0 and every byte 64. Errors: `dim_pad` as for the kernels,
/// `q` longer than `dim_pad` (`InvalidArgument`), `out` shorter
/// (`BufferTooSmall`), NaN/infinity (`NonFinite`); nothing is written then.
pub fn quantize_query(q: &[f32], dim_pad: usize, out: &mut [u8]) -> Result<f32> {
    check_dim_pad(dim_pad)?;
    if q.len() > dim_pad {
        bail!(
            InvalidArgument,
            "the query has {} values, more than dim_pad = {dim_pad}",
            q.len()
        );
    }
    check_len(out.len(), dim_pad, "out")?;
    if let Some((_, j)) = first_non_finite(q, 1, q.len(), q.len()) {
        bail!(NonFinite, "q[{j}] is {} (finite values needed)", q[j]);
    }
    let scale = max_abs(q) / 63.0;
    let out = &mut out[..dim_pad];
    if scale == 0.0 {
        out.fill(64);
        return Ok(0.0);
    }
    // A true division per value (not a multiply by 1 / scale, which rounds
    // differently): the codes are the documented ones on every machine.
    // `rne_small`'s sum `v / scale + M` is the rounded code plus M exactly
    // (|v / scale| stays far below 2^22), so it is clamped where it is and
    // its bits less M's are the code: only float adds, min/max and integer
    // adds on fixed chunks, which compile to vector instructions on the
    // x86-64 baseline (a float-to-int conversion there does not).
    const M: f32 = RNE_MAGIC;
    let code = |v: f32| {
        let t = (v / scale + M).clamp(M - 63.0, M + 63.0);
        (t.to_bits().wrapping_sub(M.to_bits()) as i32 + 64) as u8
    };
    let (head, pad) = out.split_at_mut(q.len());
    let mut dc = head.chunks_exact_mut(16);
    let mut qc = q.chunks_exact(16);
    for (d, v) in (&mut dc).zip(&mut qc) {
        for (d, &v) in d.iter_mut().zip(v) {
            *d = code(v);
        }
    }
    for (d, &v) in dc.into_remainder().iter_mut().zip(qc.remainder()) {
        *d = code(v);
    }
    pad.fill(64);
    Ok(scale)
}

/// A quantised query (bytes and scale) for [`QRows`] runs: its bytes are
/// always valid (`1..=127`), so the runs skip the per-call byte check.
/// Reuse one per thread: [`QQuery::set`] does not allocate.
#[derive(Clone, Debug)]
pub struct QQuery {
    u: Vec<u8>,
    scale: f32,
}

impl QQuery {
    /// A zero query for rows of `dim_pad` bytes (every byte 64, scale 0).
    pub fn new(dim_pad: usize) -> Result<QQuery> {
        check_dim_pad(dim_pad)?;
        let mut u: Vec<u8> = try_vec(dim_pad, "query")?;
        u.fill(64);
        Ok(QQuery { u, scale: 0.0 })
    }

    /// Quantises `q` (at most `dim_pad` finite floats) in place; on an
    /// error the query is unchanged.
    pub fn set(&mut self, q: &[f32]) -> Result<()> {
        let dim_pad = self.u.len();
        self.scale = quantize_query(q, dim_pad, &mut self.u)?;
        Ok(())
    }

    /// The `dim_pad` bytes `u_j = k_j + 64`.
    pub fn codes(&self) -> &[u8] {
        &self.u
    }
    /// The scale `t` (0 for a zero query).
    pub fn scale(&self) -> f32 {
        self.scale
    }
    pub fn dim_pad(&self) -> usize {
        self.u.len()
    }
}
