//! Quantised dot products of contiguous int8 rows with a 7-bit query: the
//! first, approximate scoring pass of an inverted-file (IVF) probe, before
//! the best candidates are re-scored exactly (see [`crate::quant::qdot`] for the
//! quantisation scheme and its error bound).
//!
//! The rows of a run are stored back to back, `dim_pad` bytes each
//! (`dim_pad` a multiple of [`PAD`]; the padding bytes are 0), so a run is
//! one sequential stream that the hardware prefetcher follows. The query is
//! stored as `u_j = c_j + 64` in `1..=127` (u8, padded with 64), because the
//! x86 byte multipliers (`vpmaddubsw`, `vpdpbusd`) take one unsigned and one
//! signed operand. Every tier computes, exactly in i32,
//! `raw_r = sum_j u_j * c_rj` and then `d_r = raw_r - 64 * sums[r]`
//! (`= sum_j c_qj * c_rj`, with `sums[r] = sum_j c_rj`), wrapping in two's
//! complement like the SIMD instructions (no wrap happens within the
//! documented limits: see [`MAX_DIM_PAD`]).
//!
//! Two entry points per tier ([`Kernels`]): `dot` writes `d_r` (i32);
//! `score` writes `f32(d_r) * (scales[r] * scale_q) (+ bias[r])`, each
//! operation rounded in f32 in exactly that order (conversion, product of
//! the two scales, product, sum; never fused), so every tier returns the
//! same bits.
//!
//! The SIMD tiers work on four rows at a time (the query chunk loaded once
//! for the four, four independent accumulators) and reduce the four
//! accumulators together at the end; with `dim_pad` of 64, 128, 192 or 256
//! the whole query stays in registers for the run.

use crate::isa::{self, Isa};

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod drive;
pub mod portable;
pub mod scalar;

/// Rows are padded to a multiple of this many bytes (one cache line, one
/// zmm register).
pub const PAD: usize = 64;

/// How far ahead of the block being scored the SIMD tiers prefetch, in
/// bytes (64 rows of d = 128): on Zen 3, shorter distances help an
/// L3-resident run less and longer ones no more (`benches/qdot.md`,
/// "Software prefetch").
pub const PREFETCH_BYTES: usize = 8192;

/// The largest `dim_pad` the kernels accept: `127 * 127 * 2^17 < 2^31`, so
/// `raw_r`, `64 * sums[r]` and `d_r` all fit in i32 without wrapping.
pub const MAX_DIM_PAD: usize = 1 << 17;

/// The f32 epilogue of [`ScoreFn`]: `scales` (one per row of the run),
/// the query scale, and an optional bias (one per row of the run).
#[derive(Clone, Copy)]
pub struct Epilogue<'a> {
    pub scales: &'a [f32],
    pub scale_q: f32,
    pub bias: Option<&'a [f32]>,
}

/// `dot(codes, dim_pad, nrows, q, sums, out)`: for `r < nrows`,
/// `out[r] = sum_j q[j] * codes[r * dim_pad + j] - 64 * sums[r]` over
/// `j < dim_pad`, in wrapping i32 arithmetic.
///
/// Results equal the scalar tier's only when every `q[j] <= 127` (the
/// `vpmaddubsw` tiers saturate otherwise); the safe wrappers check it.
///
/// # Safety
/// `dim_pad` is a non-zero multiple of [`PAD`], at most [`MAX_DIM_PAD`];
/// `codes.len() >= nrows * dim_pad`; `q.len() >= dim_pad`;
/// `sums.len() >= nrows`; `out.len() >= nrows`; the CPU supports the tier
/// (and the extra features) of the function.
pub type DotFn = unsafe fn(&[i8], usize, usize, &[u8], &[i32], &mut [i32]);

/// `score(codes, dim_pad, nrows, q, sums, epi, out)`: with `d_r` as in
/// [`DotFn`], `out[r] = f32(d_r) * (epi.scales[r] * epi.scale_q)`, plus
/// `epi.bias[r]` when there is a bias (see [`score_of`]).
///
/// # Safety
/// The preconditions of [`DotFn`]; `epi.scales` (and `epi.bias`, if any)
/// hold at least `nrows` values.
pub type ScoreFn = unsafe fn(&[i8], usize, usize, &[u8], &[i32], &Epilogue<'_>, &mut [f32]);

/// `gather(codes, dim_pad, pos, q, sums, epi, out)`: the rows at positions
/// `pos` (any order, repeats allowed; row `p` at byte `p * dim_pad` of
/// `codes`): `out[i]` is, bit for bit, what [`ScoreFn`] gives the one-row
/// run `pos[i]` (`sums`, `epi.scales` and `epi.bias` indexed by row). The
/// SIMD tiers score four positions at a time, as a run's block of four
/// rows, and prefetch the codes of the rows [`GATHER_AHEAD`] positions
/// ahead, so that a gather costs about what a run of as many rows does
/// instead of a call per row.
///
/// # Safety
/// `dim_pad` as for [`DotFn`]; every `pos[i] < rows`, where `codes` holds
/// `rows * dim_pad` bytes and `sums`, `epi.scales` (and `epi.bias`, if
/// any) `rows` values; `q` holds `dim_pad` bytes (`<= 127` for the
/// results of [`DotFn`]); `out.len() >= pos.len()`; the CPU supports the
/// tier (and the extra features) of the function.
pub type GatherFn = unsafe fn(&[i8], usize, &[u32], &[u8], &[i32], &Epilogue<'_>, &mut [f32]);

/// How many positions ahead a [`GatherFn`] prefetches a row's codes
/// (scattered rows: each is a few L3 or DRAM lines, so several are kept
/// in flight).
pub const GATHER_AHEAD: usize = 6;

/// Rows per panel of the transposed layout ([`PanelFn`]).
pub const PANEL: usize = 16;

/// At most this many queries per [`PanelFn`] call.
pub const PANEL_QUERIES: usize = 4;

/// `panel(panels, dim_pad, npanels, sums, scales, q, scale_q, nq, out)`:
/// int8 rows stored as **panels** of [`PANEL`] rows, scored for `nq`
/// (`1..=`[`PANEL_QUERIES`]) queries at once. Panel `p` holds rows
/// `16 p .. 16 p + 16` as `dim_pad / 4` groups of 64 bytes, group `g`
/// holding bytes `4 g .. 4 g + 4` of each of the 16 rows in turn (byte
/// `64 g + 4 r + b` of the panel is byte `4 g + b` of row `16 p + r`): one
/// 64-byte load then feeds `vpdpbusd` for 16 rows at once against a
/// broadcast of four query bytes, and each 32-bit lane ends holding one
/// row's dot product, so no horizontal sums are needed, and the load is
/// shared by every query of the call.
///
/// For query `i < nq` and row `r < 16 npanels`:
/// `out[i][r] = score_of(d, scales[r], scale_q[i], None)` with
/// `d = sum_j q[i][j] * c_rj - 64 * sums[r]` (the same integer as
/// [`DotFn`], the same f32 epilogue as [`ScoreFn`] without bias), so a
/// panel score is bit for bit the row-major score of the same row.
///
/// # Safety
/// `dim_pad` is a non-zero multiple of [`PAD`], at most [`MAX_DIM_PAD`];
/// `npanels >= 1`; `panels` holds `npanels * 16 * dim_pad` readable
/// bytes, `sums` and `scales` `16 * npanels` values; for `i < nq`
/// (`1 <= nq <= 4`), `q[i]` holds `dim_pad` readable bytes `<= 127` and
/// `out[i]` `16 * npanels` writable floats, not overlapping the inputs;
/// the CPU supports the tier (and the extra features) of the function.
pub type PanelFn = unsafe fn(
    *const i8,
    usize,
    usize,
    *const i32,
    *const f32,
    &[*const u8; PANEL_QUERIES],
    &[f32; PANEL_QUERIES],
    usize,
    &[*mut f32; PANEL_QUERIES],
);

/// The panel kernel of `tier` on this CPU, if it has one: the AVX-512 tier
/// (with `vpdpbusd` on VNNI CPUs). Other tiers score the row-major codes
/// ([`Kernels`]), which are their fastest form; the scalar row-major
/// kernel is the oracle of the panel kernels (`tests/qdot.rs`).
pub fn panel_kernel(tier: Isa) -> Option<PanelFn> {
    panel_for(tier, kernels(tier))
}

/// `relay(src, dim_pad, nrows, dst)`: the `nrows` row-major rows at `src`
/// (`dim_pad` bytes each) re-laid as the panels of [`PanelFn`] at `dst`,
/// `ceil(nrows / 16)` panels, the rows past `nrows` in the last one zero:
/// byte `64 g + 4 r + b` of panel `p` is byte `4 g + b` of row `16 p + r`.
/// Pure data movement: [`relay_scalar`] is its oracle, bit for bit.
///
/// # Safety
/// `dim_pad` is a non-zero multiple of [`PAD`]; `src` holds `nrows *
/// dim_pad` readable bytes and `dst` `ceil(nrows / 16) * 16 * dim_pad`
/// writable ones, not overlapping; the CPU supports the function's tier.
pub type RelayFn = unsafe fn(*const i8, usize, usize, *mut i8);

/// [`RelayFn`] in plain Rust (the oracle, and the re-lay of the panels that
/// are built once).
pub fn relay_scalar(src: &[i8], dim_pad: usize, nrows: usize, dst: &mut [i8]) {
    let padded = nrows.div_ceil(PANEL) * PANEL;
    for row in 0..padded {
        let (p, i) = (row / PANEL, row % PANEL);
        let base = p * PANEL * dim_pad;
        for g in 0..dim_pad / 4 {
            let o = base + 64 * g + 4 * i;
            if row < nrows {
                dst[o..o + 4].copy_from_slice(&src[row * dim_pad + 4 * g..][..4]);
            } else {
                dst[o..o + 4].fill(0);
            }
        }
    }
}

/// The vector re-lay of `tier`, where it has panel kernels (AVX-512).
pub fn relay_for(tier: Isa) -> Option<RelayFn> {
    match tier {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Some(avx512::relay),
        _ => None,
    }
}

/// The panel kernel of the row-major variant `k` of `tier` (its flavour:
/// `vpdpbusd` for [`Kernels`] `"avx512vnni"`, `vpmaddubsw` for the plain
/// AVX-512 ones), if the tier has panel kernels. The caller holds `k` for
/// `tier` from this module's tables (a `qdot::Variant`), so the CPU runs it.
pub fn panel_for(tier: Isa, k: &Kernels) -> Option<PanelFn> {
    #[cfg(target_arch = "x86_64")]
    return avx512_flavour(tier, k, avx512::panel, avx512::panel_vnni);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tier, k);
        None
    }
}

/// Every panel kernel this CPU can run, with its name (tests).
pub fn panel_variants() -> Vec<(&'static str, PanelFn)> {
    #[cfg(target_arch = "x86_64")]
    return avx512_flavours(avx512::panel, avx512::panel_vnni);
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

/// Of the two AVX-512 flavours of a kernel family that exists on that tier
/// only (panels, 4-bit panels), the one of the row-major variant `k`:
/// `vnni` (`vpdpbusd`) for [`Kernels`] `"avx512vnni"`, `plain`
/// (`vpmaddubsw`) for the plain ones; none on other tiers. The caller
/// holds `k` for `tier` from this module's tables (a `qdot::Variant`), so
/// the CPU runs it.
#[cfg(target_arch = "x86_64")]
fn avx512_flavour<F>(tier: Isa, k: &Kernels, plain: F, vnni: F) -> Option<F> {
    (tier == Isa::Avx512).then(|| {
        if std::ptr::eq(k, &AVX512_VNNI) {
            vnni
        } else {
            plain
        }
    })
}

/// Both flavours of such a family that this CPU can run, named (tests).
#[cfg(target_arch = "x86_64")]
fn avx512_flavours<F>(plain: F, vnni: F) -> Vec<(&'static str, F)> {
    let mut v = Vec::new();
    if Isa::supported().any(|t| t == Isa::Avx512) {
        v.push(("avx512", plain));
        if isa::extras().avx512vnni {
            v.push(("avx512vnni", vnni));
        }
    }
    v
}

/// `nib(panels, dim_pad, npanels, nsums, consts, q, qc, out)`: rows of
/// **4-bit codes** `n_rj` in `0..=15`, stored as panels of [`PANEL`] rows
/// of `dim_pad / 2` bytes: byte `64 g + 4 r + b` of panel `p` (`g <
/// dim_pad / 8`) holds row `16 p + r`'s code of dimension `4 g + b` in its
/// low nibble and that of dimension `dim_pad / 2 + 4 g + b` in its high
/// nibble. One 64-byte load gives two `vpdpbusd` operands (the nibbles
/// masked, and shifted then masked) for 16 rows against broadcasts of
/// four query bytes: half the bytes of the int8 panels per row.
///
/// For row `r < 16 npanels`, with `u` the query's bytes (`<= 127`, the
/// signed operand), `m = sum_j u_j n_rj - 64 nsums[r]` (wrapping i32,
/// `= sum_j (u_j - 64) n_rj` when `nsums[r] = sum_j n_rj`) and the row's
/// five constants `a, b, e, f, g` (layout below):
/// `out[r] = ((f32(m) * (a * qc[0]) + b * qc[1]) + e * qc[2]) +
/// (f + qc[3] * g)`, each operation rounded in f32 in that order (never
/// fused), so every implementation returns the same bits. The IVF uses it
/// for an upper bound of each list's estimate
/// (`crate::quant::qdot::NibPanels`: the first three terms bound the
/// centroid's int8 score, the last adds the list's bias and spread terms
/// as its estimate does).
///
/// # Safety
/// `dim_pad` is a non-zero multiple of [`PAD`], at most [`MAX_DIM_PAD`];
/// `npanels >= 1`; `panels` holds `npanels * 16 * dim_pad / 2` readable
/// bytes, `nsums` `16 * npanels` values and `consts` `16 * npanels`
/// blocks (panel `p`'s five arrays of 16 floats, `a`, `b`, `e`, `f`, `g`,
/// at float `80 p`), `q` `dim_pad` bytes `<= 127`, `out` `16 * npanels`
/// writable floats not overlapping the inputs; the CPU supports the tier
/// (and the extra features) of the function.
pub type NibFn =
    unsafe fn(*const u8, usize, usize, *const i32, *const f32, *const u8, &[f32; 4], *mut f32);

/// The number of f32 constants per row of [`NibFn`] (`a`, `b`, `e`, `f`,
/// `g`), stored per panel as five arrays of 16.
pub const NIB_CONSTS: usize = 5;

/// The 4-bit panel kernel of the row-major variant `k` of `tier`, if the
/// tier has one (AVX-512: `vpdpbusd` for [`Kernels`] `"avx512vnni"`,
/// `vpmaddubsw` for the plain ones). Other tiers have none: their IVF
/// scores its centroids' int8 codes, and [`scalar::nib`] is the oracle of
/// these (`tests/qdot_nib.rs`).
pub fn nib_for(tier: Isa, k: &Kernels) -> Option<NibFn> {
    #[cfg(target_arch = "x86_64")]
    return avx512_flavour(tier, k, avx512::nib, avx512::nib_vnni);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (tier, k);
        None
    }
}

/// Every 4-bit panel kernel this CPU can run, with its name (tests).
pub fn nib_variants() -> Vec<(&'static str, NibFn)> {
    #[cfg(target_arch = "x86_64")]
    return avx512_flavours(avx512::nib, avx512::nib_vnni);
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

/// The entry points of one kernel variant.
pub struct Kernels {
    /// Variant name (`"avx512vnni"` for the VNNI flavour of the AVX-512
    /// tier, otherwise the tier's name).
    pub name: &'static str,
    pub dot: DotFn,
    pub score: ScoreFn,
    pub gather: GatherFn,
}

/// `raw - 64 * sum` in wrapping i32 arithmetic (what `vpslld 6` +
/// `vpsubd` compute).
#[inline(always)]
pub fn correct(raw: i32, sum: i32) -> i32 {
    raw.wrapping_sub(sum.wrapping_mul(64))
}

/// The f32 score of one row: `f32(d) * (scale * scale_q) (+ bias)`, each
/// step rounded to nearest even in f32 (never fused). Every tier's tails use
/// this, and the vector epilogues perform the same operations lane-wise.
#[inline(always)]
pub fn score_of(d: i32, scale: f32, scale_q: f32, bias: Option<f32>) -> f32 {
    let v = d as f32 * (scale * scale_q);
    match bias {
        Some(b) => v + b,
        None => v,
    }
}

/// The scalar and portable tiers' [`GatherFn`]: each position as its
/// one-row run, `raw(p)` giving row `p`'s `sum_j u_j c_pj` (wrapping).
#[inline(always)]
fn gather_each(
    pos: &[u32],
    sums: &[i32],
    epi: &Epilogue<'_>,
    out: &mut [f32],
    mut raw: impl FnMut(usize) -> i32,
) {
    for (o, &p) in out.iter_mut().zip(pos) {
        let p = p as usize;
        let b = epi.bias.map(|b| b[p]);
        *o = score_of(correct(raw(p), sums[p]), epi.scales[p], epi.scale_q, b);
    }
}

#[cfg(target_arch = "x86_64")]
static AVX512_VNNI: Kernels = Kernels {
    name: "avx512vnni",
    dot: avx512::dot_vnni,
    score: avx512::score_vnni,
    gather: avx512::gather_vnni,
};

crate::kernels::tier_table! {
    /// The kernels of `tier` on this CPU: the AVX-512 tier uses `vpdpbusd`
    /// when the CPU has AVX-512 VNNI. The caller has checked that the CPU
    /// supports `tier`; the extra feature is looked up here, once per call.
    Kernels [name] { dot: dot, score: score, gather: gather }
    avx512 => |t| if isa::extras().avx512vnni { &AVX512_VNNI } else { t };
}

/// Every kernel variant this CPU can run, lowest tier first: the tiers of
/// [`Isa::supported`], and on AVX-512 CPUs with VNNI both AVX-512 flavours
/// (so tests reach the plain `vpmaddubsw` one there too).
pub fn supported_variants() -> Vec<(Isa, &'static Kernels)> {
    #[cfg(target_arch = "x86_64")]
    let plain = isa::extras().avx512vnni.then_some(&AVX512);
    #[cfg(not(target_arch = "x86_64"))]
    let plain = None;
    crate::kernels::variants_of(kernels, plain)
}
