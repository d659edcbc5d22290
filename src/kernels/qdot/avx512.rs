//! Quantised dot products, AVX-512 tier (avx512f + bw + dq + vl, and
//! `vpdpbusd` when the CPU has AVX-512 VNNI): the same structure as the
//! AVX2 tier with 64-byte chunks, plus the panel kernels
//! ([`super::PanelFn`], at the end of the file). The tests run both
//! flavours wherever the CPU has AVX-512; where they have run:
//! docs/avx512.md.
//!
//! Instructions and why:
//! * `vpdpbusd` (VNNI flavour, `dot_vnni` / `score_vnni`): 64 u8 x i8
//!   products, summed in groups of four and added to 16 i32 lanes in one
//!   instruction, in i32 without saturation (`vpdpbusds` is the
//!   saturating one, not used), so it is exact for any bytes.
//! * Without VNNI: `vpmaddubsw zmm` (u8 x i8 -> i16 pairs; with query bytes
//!   `u <= 127` and codes `-128 <= c <= 127` a pair lies in
//!   `-32512..=32258`, so the saturation never triggers) then `vpmaddwd`
//!   with ones -> i32, `vpaddd`.
//! * Four rows at a time, four accumulators sharing each query chunk; with
//!   `dim_pad` of 64, 128, 192 or 256 (`N` = 1..4 zmm) the query stays in
//!   registers for the run. The four zmm accumulators are folded to ymm
//!   (`vextracti64x4` + `vpaddd`) and reduced together as in the AVX2 tier
//!   (unpack-and-add); the row sinks (`vpslld 6` + `vpsubd` for the
//!   `64 * sums[r]` correction; `vcvtdq2ps`, `vmulps`, `vaddps` for the
//!   scores, in the scalar tier's order) and the in-run `prefetcht0`
//!   `PREFETCH_BYTES` ahead are the shared ones of `drive.rs`, which also
//!   holds the block, the run and the entry points: this file holds the
//!   byte step and the reductions (`drive::Chunk`) and the panel kernels.

use std::arch::x86_64::*;

use super::drive::{entries, hsum1, hsum4, Chunk};

/// `acc + (64 products of u and c, in groups)`: `vpdpbusd` with VNNI,
/// else `vpmaddubsw` + `vpmaddwd(ones)` + `vpaddd`.
#[inline(always)]
unsafe fn step<const VNNI: bool>(acc: __m512i, u: __m512i, c: __m512i, ones: __m512i) -> __m512i {
    // SAFETY: register-only operations; the enclosing function enables
    // avx512f/bw (and avx512vnni when VNNI).
    unsafe {
        if VNNI {
            _mm512_dpbusd_epi32(acc, u, c)
        } else {
            _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, c), ones))
        }
    }
}

/// The 16 lanes of `a` folded to 8 (wrapping).
#[inline(always)]
unsafe fn fold(a: __m512i) -> __m256i {
    // SAFETY: register-only avx512f operations.
    unsafe { _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a)) }
}

/// This tier's 64-byte chunk for [`super::drive`] (`vpdpbusd` when
/// `VNNI`).
struct Avx512<const VNNI: bool>;

impl<const VNNI: bool> Chunk for Avx512<VNNI> {
    type V = __m512i;
    const BYTES: usize = 64;
    #[inline(always)]
    unsafe fn zero() -> __m512i {
        // SAFETY: register-only; the caller enables avx512f.
        unsafe { _mm512_setzero_si512() }
    }
    #[inline(always)]
    unsafe fn ones() -> __m512i {
        // SAFETY: register-only; the caller enables avx512f/bw.
        unsafe { _mm512_set1_epi16(1) }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const u8) -> __m512i {
        // SAFETY: 64 readable bytes at p (caller); avx512f enabled.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn step(acc: __m512i, u: __m512i, c: __m512i, ones: __m512i) -> __m512i {
        // SAFETY: register-only; the caller enables the features.
        unsafe { step::<VNNI>(acc, u, c, ones) }
    }
    /// The four accumulators folded to ymm, then the AVX2 reduction.
    #[inline(always)]
    unsafe fn reduce4(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m128i {
        // SAFETY: register-only; the caller enables avx512f and avx2.
        unsafe { hsum4(fold(a), fold(b), fold(c), fold(d)) }
    }
    #[inline(always)]
    unsafe fn reduce1(a: __m512i) -> i32 {
        // SAFETY: register-only; the caller enables avx512f and avx2.
        unsafe { hsum1(fold(a)) }
    }
}

entries! {
    /// See [`super::DotFn`] (`vpmaddubsw` + `vpmaddwd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
    pub unsafe fn dot = dot(Avx512<false>);
    /// See [`super::ScoreFn`] (`vpmaddubsw` + `vpmaddwd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
    pub unsafe fn score = score(Avx512<false>);
    /// See [`super::DotFn`] (`vpdpbusd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
    pub unsafe fn dot_vnni = dot(Avx512<true>);
    /// See [`super::ScoreFn`] (`vpdpbusd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
    pub unsafe fn score_vnni = score(Avx512<true>);
    /// See [`super::GatherFn`] (`vpmaddubsw` + `vpmaddwd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
    pub unsafe fn gather = gather(Avx512<false>);
    /// See [`super::GatherFn`] (`vpdpbusd`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
    pub unsafe fn gather_vnni = gather(Avx512<true>);
}

// ------------------------------------------------------------ panels

/// The four query bytes `4 g .. 4 g + 4` of `q`, in every 32-bit lane.
#[inline(always)]
unsafe fn bcast4(q: *const u8, g: usize) -> __m512i {
    // SAFETY: q holds dim_pad >= 4 g + 4 bytes (caller); unaligned read.
    unsafe { _mm512_set1_epi32(std::ptr::read_unaligned(q.add(4 * g).cast::<i32>())) }
}

/// `NP` panels (16 or 32 rows) for `QB` queries: `KS` interleaved partial
/// sums per (panel, query) over the groups (so that at least eight
/// independent `vpdpbusd` chains hide its latency where the panels and
/// queries allow), added at the end (exact: wrapping i32 addition is
/// associative), then the correction and the epilogue of
/// [`super::score_of`], 16 rows per store.
#[inline(always)]
#[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
unsafe fn panel_block<const VNNI: bool, const NP: usize, const QB: usize, const KS: usize>(
    p: *const i8,
    dim_pad: usize,
    sums: *const i32,
    scales: *const f32,
    q: &[*const u8; super::PANEL_QUERIES],
    sq: &[f32; super::PANEL_QUERIES],
    out: &[*mut f32; super::PANEL_QUERIES],
    row0: usize,
) {
    // SAFETY: the NP panels at p hold NP * 16 * dim_pad bytes, sums and
    // scales 16 NP values from row0, q[..QB] dim_pad bytes, out[..QB]
    // 16 NP floats from row0 (caller); features enabled by the enclosing
    // function.
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let groups = dim_pad / 4;
        let mut acc = [[[_mm512_setzero_si512(); QB]; NP]; KS];
        let mut g = 0;
        while g < groups {
            for ks in 0..KS {
                let mut c = [_mm512_setzero_si512(); NP];
                for (h, ch) in c.iter_mut().enumerate() {
                    *ch = _mm512_loadu_si512(p.add(h * 16 * dim_pad + 64 * (g + ks)).cast());
                }
                for t in 0..QB {
                    let u = bcast4(q[t], g + ks);
                    for h in 0..NP {
                        acc[ks][h][t] = step::<VNNI>(acc[ks][h][t], u, c[h], ones);
                    }
                }
            }
            g += KS;
        }
        for h in 0..NP {
            let r = row0 + 16 * h;
            let corr = _mm512_slli_epi32::<6>(_mm512_loadu_si512(sums.add(r).cast()));
            let sc = _mm512_loadu_ps(scales.add(r));
            for t in 0..QB {
                let mut d = acc[0][h][t];
                for ks in 1..KS {
                    d = _mm512_add_epi32(d, acc[ks][h][t]);
                }
                let d = _mm512_sub_epi32(d, corr);
                // f32(d) * (scale * scale_q), each step rounded (never fused).
                let m = _mm512_mul_ps(sc, _mm512_set1_ps(sq[t]));
                let v = _mm512_mul_ps(_mm512_cvtepi32_ps(d), m);
                _mm512_storeu_ps(out[t].add(r), v);
            }
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn panel_impl<const VNNI: bool>(
    panels: *const i8,
    dim_pad: usize,
    npanels: usize,
    sums: *const i32,
    scales: *const f32,
    q: &[*const u8; super::PANEL_QUERIES],
    sq: &[f32; super::PANEL_QUERIES],
    nq: usize,
    out: &[*mut f32; super::PANEL_QUERIES],
) {
    // SAFETY: the PanelFn preconditions (dim_pad a multiple of 64, so the
    // group count is a multiple of 16 and of every KS used); features
    // enabled by the enclosing function.
    unsafe {
        let mut p = 0;
        // Pairs of panels, then a last single panel when npanels is odd
        // (an IVF list of 33-48 rows computes 48 rows, not 64).
        while p + 2 <= npanels {
            let (pp, r0) = (panels.add(p * 16 * dim_pad), 16 * p);
            match nq {
                1 => panel_block::<VNNI, 2, 1, 4>(pp, dim_pad, sums, scales, q, sq, out, r0),
                2 => panel_block::<VNNI, 2, 2, 2>(pp, dim_pad, sums, scales, q, sq, out, r0),
                3 => panel_block::<VNNI, 2, 3, 2>(pp, dim_pad, sums, scales, q, sq, out, r0),
                _ => panel_block::<VNNI, 2, 4, 1>(pp, dim_pad, sums, scales, q, sq, out, r0),
            }
            p += 2;
        }
        if p < npanels {
            let (pp, r0) = (panels.add(p * 16 * dim_pad), 16 * p);
            match nq {
                1 => panel_block::<VNNI, 1, 1, 8>(pp, dim_pad, sums, scales, q, sq, out, r0),
                2 => panel_block::<VNNI, 1, 2, 4>(pp, dim_pad, sums, scales, q, sq, out, r0),
                3 => panel_block::<VNNI, 1, 3, 2>(pp, dim_pad, sums, scales, q, sq, out, r0),
                _ => panel_block::<VNNI, 1, 4, 2>(pp, dim_pad, sums, scales, q, sq, out, r0),
            }
        }
    }
}

/// See [`super::PanelFn`] (`vpmaddubsw` + `vpmaddwd`).
///
/// # Safety
/// The preconditions of [`super::PanelFn`]; the CPU supports avx512f/bw/dq/vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel(
    panels: *const i8,
    dim_pad: usize,
    npanels: usize,
    sums: *const i32,
    scales: *const f32,
    q: &[*const u8; super::PANEL_QUERIES],
    sq: &[f32; super::PANEL_QUERIES],
    nq: usize,
    out: &[*mut f32; super::PANEL_QUERIES],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { panel_impl::<false>(panels, dim_pad, npanels, sums, scales, q, sq, nq, out) }
}

/// See [`super::PanelFn`] (`vpdpbusd`).
///
/// # Safety
/// The preconditions of [`super::PanelFn`]; the CPU supports
/// avx512f/bw/dq/vl and avx512vnni.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_vnni(
    panels: *const i8,
    dim_pad: usize,
    npanels: usize,
    sums: *const i32,
    scales: *const f32,
    q: &[*const u8; super::PANEL_QUERIES],
    sq: &[f32; super::PANEL_QUERIES],
    nq: usize,
    out: &[*mut f32; super::PANEL_QUERIES],
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { panel_impl::<true>(panels, dim_pad, npanels, sums, scales, q, sq, nq, out) }
}

// ------------------------------------------------------------ 4-bit panels

// The high-nibble sums of `nib_panel` with VNNI never wrap.
const _: () = assert!(16 * 15 * 127 * (super::MAX_DIM_PAD / 2) < i32::MAX as usize);

/// One 4-bit panel ([`super::NibFn`]): per 64-byte group the low nibbles
/// (`vpandd`) and the high ones are the unsigned operands of two steps
/// against the broadcast query bytes of their dimensions (signed operand:
/// `u <= 127`), into four accumulators (low and high, even and odd
/// groups), added at the end (exact: wrapping i32 addition is
/// associative); then the correction and the affine epilogue in the
/// scalar oracle's order. The high nibbles are masked in place with VNNI
/// and shifted down per group without it (see the body). One panel at a
/// time: sharing the broadcasts between two or four panels was no faster
/// from L2 and up to 1.4x slower from L3 (benches/qdot.md, "The centroid
/// pass in 4 bits").
#[inline(always)]
unsafe fn nib_panel<const VNNI: bool>(
    p: *const u8,
    dim_pad: usize,
    q: *const u8,
    nsums: *const i32,
    c: *const f32,
    qc: &[f32; 4],
    out: *mut f32,
) {
    // SAFETY: the panel at p holds 8 dim_pad bytes, q dim_pad bytes,
    // nsums and out 16 values, c five arrays of 16 (caller); features
    // enabled by the caller.
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let mask = _mm512_set1_epi8(0x0f);
        let groups = dim_pad / 8;
        // High nibbles: with VNNI they stay in place (`x & 0xf0`, 16 times
        // the code; the sum over a row's dim_pad / 2 high dimensions is at
        // most 16 * 15 * 127 * dim_pad / 2 < 2^31 in magnitude, checked at
        // compile time for MAX_DIM_PAD, so it never wraps), and the sum, a
        // multiple of 16, is shifted down once per panel: exact, and one
        // shift a group fewer on the shift ports.
        // `vpmaddubsw` would saturate at 2 * 240 * 127, so without VNNI
        // they are shifted down per group.
        let hi_of = |x: __m512i| {
            if VNNI {
                _mm512_andnot_si512(mask, x)
            } else {
                _mm512_and_si512(_mm512_srli_epi16::<4>(x), mask)
            }
        };
        // Two accumulators per nibble half (even and odd groups): the
        // `vpdpbusd` chains of a panel are half as long. `groups` is even
        // (`dim_pad` is a multiple of 64).
        let mut acc = [_mm512_setzero_si512(); 4];
        for g in (0..groups).step_by(2) {
            for j in 0..2 {
                let x = _mm512_loadu_si512(p.add(64 * (g + j)).cast());
                let lo = _mm512_and_si512(x, mask);
                acc[2 * j] = step::<VNNI>(acc[2 * j], lo, bcast4(q, g + j), ones);
                acc[2 * j + 1] =
                    step::<VNNI>(acc[2 * j + 1], hi_of(x), bcast4(q, groups + g + j), ones);
            }
        }
        let hi = _mm512_add_epi32(acc[1], acc[3]);
        let hi = if VNNI { _mm512_srai_epi32::<4>(hi) } else { hi };
        let raw = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[2]), hi);
        let m = _mm512_sub_epi32(
            raw,
            _mm512_slli_epi32::<6>(_mm512_loadu_si512(nsums.cast())),
        );
        // ((f32(m) * (a * qc0) + b * qc1) + e * qc2) + (f + qc3 * g), each
        // step rounded.
        let k = |i: usize| _mm512_loadu_ps(c.add(16 * i));
        let sa = _mm512_mul_ps(k(0), _mm512_set1_ps(qc[0]));
        let sb = _mm512_mul_ps(k(1), _mm512_set1_ps(qc[1]));
        let se = _mm512_mul_ps(k(2), _mm512_set1_ps(qc[2]));
        let v = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(m), sa), sb);
        let v = _mm512_add_ps(v, se);
        let t = _mm512_add_ps(k(3), _mm512_mul_ps(_mm512_set1_ps(qc[3]), k(4)));
        _mm512_storeu_ps(out, _mm512_add_ps(v, t));
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn nib_impl<const VNNI: bool>(
    panels: *const u8,
    dim_pad: usize,
    npanels: usize,
    nsums: *const i32,
    consts: *const f32,
    q: *const u8,
    qc: &[f32; 4],
    out: *mut f32,
) {
    // SAFETY: the NibFn preconditions: panel i, its 16 sums and outputs
    // and its 80 constants are in bounds for i < npanels; features enabled
    // by the caller.
    unsafe {
        for i in 0..npanels {
            let r = 16 * i;
            nib_panel::<VNNI>(
                panels.add(i * 8 * dim_pad),
                dim_pad,
                q,
                nsums.add(r),
                consts.add(super::NIB_CONSTS * r),
                qc,
                out.add(r),
            );
        }
    }
}

/// See [`super::NibFn`] (`vpmaddubsw` + `vpmaddwd`).
///
/// # Safety
/// The preconditions of [`super::NibFn`]; the CPU supports avx512f/bw/dq/vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn nib(
    panels: *const u8,
    dim_pad: usize,
    npanels: usize,
    nsums: *const i32,
    consts: *const f32,
    q: *const u8,
    qc: &[f32; 4],
    out: *mut f32,
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { nib_impl::<false>(panels, dim_pad, npanels, nsums, consts, q, qc, out) }
}

/// See [`super::NibFn`] (`vpdpbusd`).
///
/// # Safety
/// The preconditions of [`super::NibFn`]; the CPU supports
/// avx512f/bw/dq/vl and avx512vnni.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn nib_vnni(
    panels: *const u8,
    dim_pad: usize,
    npanels: usize,
    nsums: *const i32,
    consts: *const f32,
    q: *const u8,
    qc: &[f32; 4],
    out: *mut f32,
) {
    // SAFETY: forwarded preconditions and features.
    unsafe { nib_impl::<true>(panels, dim_pad, npanels, nsums, consts, q, qc, out) }
}

// ------------------------------------------------------------ re-lay

/// The 16 x 16 transpose of 32-bit elements: `r[i]` lane `j` goes to
/// `r[j]` lane `i` (unpack 32 and 64 within 128-bit lanes, then two
/// `vshufi32x4` stages across them: 64 shuffles for 16 registers).
#[inline(always)]
unsafe fn transpose16(r: &mut [__m512i; 16]) {
    // SAFETY: register-only avx512f operations.
    unsafe {
        let mut t = [_mm512_setzero_si512(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for i in 0..4 {
            let b = 4 * i;
            r[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
            r[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
            r[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
            r[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
        }
        for h in 0..2 {
            let b = 8 * h;
            for j in 0..4 {
                t[b + j] = _mm512_shuffle_i32x4::<0x88>(r[b + j], r[b + j + 4]);
                t[b + j + 4] = _mm512_shuffle_i32x4::<0xdd>(r[b + j], r[b + j + 4]);
            }
        }
        for j in 0..8 {
            r[j] = _mm512_shuffle_i32x4::<0x88>(t[j], t[j + 8]);
            r[j + 8] = _mm512_shuffle_i32x4::<0xdd>(t[j], t[j + 8]);
        }
    }
}

/// See [`super::RelayFn`]: 16 rows x 64 bytes at a time, loaded (rows past
/// `nrows` as zeros), transposed as 16 x 16 32-bit elements, and stored as
/// 16 groups of the panel.
///
/// # Safety
/// The preconditions of [`super::RelayFn`]; the CPU supports avx512f.
#[target_feature(enable = "avx512f")]
pub unsafe fn relay(src: *const i8, dim_pad: usize, nrows: usize, dst: *mut i8) {
    // SAFETY: rows < nrows are read within src (nrows * dim_pad bytes);
    // the panels written are within dst (ceil(nrows / 16) * 16 * dim_pad
    // bytes); dim_pad is a multiple of 64 (RelayFn).
    unsafe {
        let npanels = nrows.div_ceil(16);
        // The re-lay of a batch's lists reads their codes from L3 or DRAM
        // once, bound by memory: its loads walk 16 rows a chunk at a time,
        // a stride the hardware prefetcher follows late, so the panel
        // `AHEAD` panels on (16 contiguous rows) is prefetched while this
        // one is transposed, and the first ones before the loop. Only rows
        // of this run: a batch's next list is elsewhere.
        const AHEAD: usize = 4;
        crate::kernels::simd::prefetch_lines(src.cast(), (16 * AHEAD).min(nrows) * dim_pad);
        for p in 0..npanels {
            let rows = (nrows - 16 * p).min(16);
            let base = dst.add(p * 16 * dim_pad);
            let next = (16 * (p + AHEAD)).min(nrows);
            let ahead = (16 * (p + AHEAD + 1)).min(nrows);
            crate::kernels::simd::prefetch_lines(
                src.wrapping_add(next * dim_pad).cast(),
                (ahead - next) * dim_pad,
            );
            for c in 0..dim_pad / 64 {
                let mut r = [_mm512_setzero_si512(); 16];
                for (i, x) in r.iter_mut().enumerate().take(rows) {
                    *x = _mm512_loadu_si512(src.add((16 * p + i) * dim_pad + 64 * c).cast());
                }
                transpose16(&mut r);
                for (g, x) in r.iter().enumerate() {
                    _mm512_storeu_si512(base.add(64 * (16 * c + g)).cast(), *x);
                }
            }
        }
    }
}
