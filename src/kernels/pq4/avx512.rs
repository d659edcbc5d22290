//! 4-bit PQ fast-scan, AVX-512 tier (avx512f + bw + dq + vl).
//!
//! The AVX2 tier's scheme on zmm: one 64-byte load (`vmovdqu8`) covers
//! two sub-quantiser pairs of a block (128-bit lane `k` holds sub-quantiser
//! `4q + k`'s codes for the 32 rows), and one 64-byte load of the LUT the
//! four matching 16-entry tables.
//!
//! Instructions and why:
//! * `vpshufb zmm` (AVX512BW): a 16-entry byte table per 128-bit lane, 64
//!   look-ups per instruction. That is exactly one sub-quantiser's table
//!   per lane, so `vpermb` (VBMI, 64-entry tables across the register)
//!   would add nothing but an index offset per lane; it is not used.
//! * `vpandq` / `vpsrlw 4` for the nibbles; the u16 sums of FAISS's trick
//!   (`vpaddw` of the looked-up bytes and of `vpsrlw 8` of them, then
//!   `a0 - (a1 << 8)`), exact because a u16 lane receives at most one
//!   byte per step and is widened every `FLUSH_STEPS` = 256 steps (a step
//!   is two pairs here, so once per block for `m_pad <= 1024`).
//! * When `m_pad` is not a multiple of 4, the last step is one pair: a
//!   32-byte load zero-extended to zmm (`vmovdqu` ymm) for the codes and
//!   for the tables, so lanes 2 and 3 look up 0 in an all-zero table and
//!   add nothing.
//! * Widening: `vpmovzxwd` (ymm -> zmm) of lanes 0-1 and of lanes 2-3,
//!   `vpaddd`, then the two 256-bit halves added (`vextracti64x4`): eight
//!   consecutive rows' u32 sums per ymm. Those go through the shared
//!   sinks of `drive.rs` (u32 stores, or `vcvtdq2ps`/`vmulps`/`vaddps`/
//!   `vaddps` in the scalar tier's order), after its in-run `prefetcht0`;
//!   this file holds only the block kernels (`drive::Scan`).
//!
//! # The VBMI + VNNI flavour ([`Vbmi`], `acc_vbmi` / `score_vbmi`)
//!
//! On CPUs with AVX-512 VBMI and VNNI the same layout is scored with fewer
//! operations. Six of the eleven vector operations of a step above sum
//! bytes in u16 lanes (four `vpaddw` and two shifts), because a 32-bit
//! lane of the layout holds four *rows* of one sub-quantiser. This
//! flavour first turns each step's 64 bytes so that a 32-bit lane holds
//! one row's four sub-quantisers, then sums each lane's four looked-up
//! bytes into u32 with one `vpdpbusd` against all-ones bytes:
//! * `vpermb` with a fixed index (`TRANSPOSE`): output byte `4 i + k` is
//!   byte `rho^-1(i)` of 128-bit lane `k`, so its low nibble is row `i`'s
//!   code for sub-quantiser `4 q + k` and its high nibble row `16 + i`'s;
//! * `vpternlogd` (`(a & 0x0f) | 16 k`) for the low nibbles and `vpsrlw 4`
//!   then the same for the high ones: indices into the step's four tables,
//!   which are the 64 LUT bytes as they lie (`vpermb` takes a 64-entry
//!   table across the register, so `16 k + code` is table `k`'s entry);
//! * `vpermb` of the LUT by each index (rows `0..16`, rows `16..32`);
//! * `vpdpbusd` of those bytes (unsigned) with `1` (signed): each u32 lane
//!   adds its row's four entries, at most `4 * 255` a step, so the sums
//!   stay exact (`MAX_M * 255 < 2^24`) without widening. Two accumulators
//!   per half, alternating steps, so consecutive `vpdpbusd` do not wait on
//!   each other's latency.
//!
//! Eight vector operations a step instead of eleven; the sums are the same
//! integers, so both flavours return the same bits.

use std::arch::x86_64::*;

use super::drive::{entries, Scan};
use super::FLUSH_STEPS;

/// The u32 sums over the four 128-bit lanes of `a`'s u16 values: element
/// `i < 8` of the result is `sum_k a[8 k + i]`, still spread over two
/// 256-bit halves (folded by [`fold`]).
#[inline(always)]
unsafe fn widen4(a: __m512i) -> __m512i {
    // SAFETY: register-only avx512f/bw operations; enabled by the caller.
    unsafe {
        _mm512_add_epi32(
            _mm512_cvtepu16_epi32(_mm512_castsi512_si256(a)),
            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64::<1>(a)),
        )
    }
}

/// The two 256-bit halves of `a` added (u32 lanes).
#[inline(always)]
unsafe fn fold(a: __m512i) -> __m256i {
    // SAFETY: register-only avx512f operations.
    unsafe { _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64::<1>(a)) }
}

/// Step `k`'s 64 code bytes and 64 table bytes (four sub-quantisers), or,
/// with `half` (the last step when `m_pad` is not a multiple of 4), its 32
/// bytes of each zero-extended: lanes 2 and 3 then read code 0 in an
/// all-zero table and add nothing.
///
/// # Safety
/// A full step reads 64 bytes at `64 k < 16 * m_pad - 63`, the half step 32
/// at `16 * m_pad - 32`: the block and the table hold `16 * m_pad` bytes
/// (caller); avx512f enabled.
#[inline(always)]
unsafe fn step_bytes(p: *const u8, lut: *const u8, k: usize, half: bool) -> (__m512i, __m512i) {
    // SAFETY: as above.
    unsafe {
        if !half {
            (
                _mm512_loadu_si512(p.add(64 * k).cast()),
                _mm512_loadu_si512(lut.add(64 * k).cast()),
            )
        } else {
            (
                _mm512_zextsi256_si512(_mm256_loadu_si256(p.add(64 * k).cast())),
                _mm512_zextsi256_si512(_mm256_loadu_si256(lut.add(64 * k).cast())),
            )
        }
    }
}

/// This tier's block kernel for [`super::drive`].
struct Avx512;

impl Scan for Avx512 {
    #[inline(always)]
    unsafe fn block<const LOW: bool>(p: *const u8, m_pad: usize, lut: *const u8) -> [__m256i; 4] {
        // SAFETY: the block holds 16 * m_pad readable bytes and lut as many
        // (caller): full steps read 64 bytes at 64 q < 16 * m_pad - 63, the
        // half step 32 bytes at 16 * m_pad - 32. Features enabled by the
        // enclosing function.
        unsafe {
            let mask = _mm512_set1_epi8(0x0f);
            let steps = m_pad.div_ceil(4);
            let full = m_pad / 4;
            let mut tot = [_mm512_setzero_si512(); 4];
            let mut s0 = 0;
            while s0 < steps {
                let s1 = (s0 + FLUSH_STEPS).min(steps);
                let mut a0 = _mm512_setzero_si512();
                let mut a1 = _mm512_setzero_si512();
                let mut a2 = _mm512_setzero_si512();
                let mut a3 = _mm512_setzero_si512();
                for k in s0..s1 {
                    let (c, t) = step_bytes(p, lut, k, k == full);
                    let lo = _mm512_and_si512(c, mask);
                    let r0 = _mm512_shuffle_epi8(t, lo);
                    a0 = _mm512_add_epi16(a0, r0);
                    a1 = _mm512_add_epi16(a1, _mm512_srli_epi16::<8>(r0));
                    if !LOW {
                        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(c), mask);
                        let r1 = _mm512_shuffle_epi8(t, hi);
                        a2 = _mm512_add_epi16(a2, r1);
                        a3 = _mm512_add_epi16(a3, _mm512_srli_epi16::<8>(r1));
                    }
                }
                a0 = _mm512_sub_epi16(a0, _mm512_slli_epi16::<8>(a1));
                a2 = _mm512_sub_epi16(a2, _mm512_slli_epi16::<8>(a3));
                tot[0] = _mm512_add_epi32(tot[0], widen4(a0));
                tot[1] = _mm512_add_epi32(tot[1], widen4(a1));
                tot[2] = _mm512_add_epi32(tot[2], widen4(a2));
                tot[3] = _mm512_add_epi32(tot[3], widen4(a3));
                s0 = s1;
            }
            [fold(tot[0]), fold(tot[1]), fold(tot[2]), fold(tot[3])]
        }
    }
}

/// Output byte `4 i + k` of [`Vbmi`]'s transposing `vpermb`: byte
/// `rho^-1(i)` of 128-bit lane `k` (`rho^-1(i) = 2 i` for `i < 8`,
/// `2 (i - 8) + 1` above; see `super::rho`).
const TRANSPOSE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 16 {
        let j = if i < 8 { 2 * i } else { 2 * (i - 8) + 1 };
        let mut k = 0;
        while k < 4 {
            t[4 * i + k] = (16 * k + j) as u8;
            k += 1;
        }
        i += 1;
    }
    t
};

/// `16 k` in byte `4 i + k`: which of a step's four tables a lane's byte
/// looks up.
const TABLE_OF: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        t[b] = (16 * (b % 4)) as u8;
        b += 1;
    }
    t
};

/// The VBMI + VNNI block kernel (module doc).
struct Vbmi;

/// One step of [`Vbmi`]: the 64 code bytes `c` and tables `t` of four
/// sub-quantisers, added to the u32 sums of rows `0..16` (`lo`) and,
/// unless `LOW`, `16..32` (`hi`).
#[inline(always)]
unsafe fn vbmi_step<const LOW: bool>(
    c: __m512i,
    t: __m512i,
    tr: __m512i,
    of: __m512i,
    lo: &mut __m512i,
    hi: &mut __m512i,
) {
    // SAFETY: register-only avx512f/bw/vbmi/vnni operations; enabled by
    // the caller.
    unsafe {
        let mask = _mm512_set1_epi8(0x0f);
        let ones = _mm512_set1_epi8(1);
        let c = _mm512_permutexvar_epi8(tr, c);
        // 0xEA: (a & b) | c.
        let il = _mm512_ternarylogic_epi32::<0xEA>(c, mask, of);
        *lo = _mm512_dpbusd_epi32(*lo, _mm512_permutexvar_epi8(il, t), ones);
        if !LOW {
            let ih = _mm512_ternarylogic_epi32::<0xEA>(_mm512_srli_epi16::<4>(c), mask, of);
            *hi = _mm512_dpbusd_epi32(*hi, _mm512_permutexvar_epi8(ih, t), ones);
        }
    }
}

impl Scan for Vbmi {
    #[inline(always)]
    unsafe fn block<const LOW: bool>(p: *const u8, m_pad: usize, lut: *const u8) -> [__m256i; 4] {
        // SAFETY: as Avx512::block (the same loads); the constants are
        // 64-byte arrays. Features enabled by the enclosing function.
        unsafe {
            let tr = _mm512_loadu_si512(TRANSPOSE.as_ptr().cast());
            let of = _mm512_loadu_si512(TABLE_OF.as_ptr().cast());
            let (steps, full) = (m_pad.div_ceil(4), m_pad / 4);
            let mut lo = [_mm512_setzero_si512(); 2];
            let mut hi = [_mm512_setzero_si512(); 2];
            let mut k = 0;
            while k + 2 <= full {
                let (c, t) = step_bytes(p, lut, k, false);
                vbmi_step::<LOW>(c, t, tr, of, &mut lo[0], &mut hi[0]);
                let (c, t) = step_bytes(p, lut, k + 1, false);
                vbmi_step::<LOW>(c, t, tr, of, &mut lo[1], &mut hi[1]);
                k += 2;
            }
            // At most a full step and the half one are left.
            while k < steps {
                let (c, t) = step_bytes(p, lut, k, k == full);
                vbmi_step::<LOW>(c, t, tr, of, &mut lo[0], &mut hi[0]);
                k += 1;
            }
            let lo = _mm512_add_epi32(lo[0], lo[1]);
            let hi = _mm512_add_epi32(hi[0], hi[1]);
            [
                _mm512_castsi512_si256(lo),
                _mm512_extracti64x4_epi64::<1>(lo),
                _mm512_castsi512_si256(hi),
                _mm512_extracti64x4_epi64::<1>(hi),
            ]
        }
    }
}

entries! {
    /// See [`super::AccFn`].
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
    pub unsafe fn acc = acc(Avx512);
    /// See [`super::ScoreFn`].
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
    pub unsafe fn score = score(Avx512);
    /// See [`super::AccFn`]; the VBMI + VNNI flavour.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vnni,avx2")]
    pub unsafe fn acc_vbmi = acc(Vbmi);
    /// See [`super::ScoreFn`]; the VBMI + VNNI flavour.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vnni,avx2")]
    pub unsafe fn score_vbmi = score(Vbmi);
}
