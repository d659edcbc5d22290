//! DWTA, AVX2 tier (avx2).
//!
//! Dense, two schemes (both exact; chosen per call by
//! [`super::use_row_blocks`] and the number of rows):
//!
//! * Rows in lanes (the default for several rows when `dim <= K*L*B` and
//!   `dim <= 2048`): 8, 16 or 32 rows are converted to order-preserving
//!   integer keys (`vpsrad`/`vpxor`/`vpsubd`, NaN -> `i32::MIN` with
//!   `vpcmpgtd` + `vpblendvb`) and transposed (`vunpcklps`/`vshufps`/
//!   `vperm2f128` 8x8 tiles) into a `dim x rows` block. Each bin position is
//!   then one scalar map load and 1-4 contiguous `vmovdqu` of 8 rows,
//!   `vpcmpgtd` (strictly greater: ties keep the earlier position; NaN =
//!   `i32::MIN` never beats the initial `i32::MIN`), `vpmaxsd` for the
//!   running max and `vpblendvb` for its position. Keys are packed in
//!   registers (`vpslld` + `vpor`). No gathers: at 64 rows per call this
//!   beats bins in lanes per row, with `vgatherdps` or with the scalar-load
//!   gather below (`benches/dwta.md`, "Dense schemes measured").
//! * Bins in lanes (one row, or huge `dim`): a group of 16 bins is two ymm of
//!   8 bins, processed as two independent chains. For each position p, the
//!   transposed map gives the p-th coordinates of the 16 bins contiguously;
//!   the row's values there are loaded one by one into two ymm. That is a
//!   gather, but not `vgatherdps`: Zen 3's ymm and xmm gathers are slower
//!   than 8 scalar loads + inserts, alone and in this kernel
//!   (`benches/dwta.md`, "Dense schemes measured"). A lane wins when
//!   `vcmpps` with `_CMP_NLE_UQ` (not `v <= max`: true when v is larger or
//!   the running max is still NaN = "no winner yet") AND
//!   `_CMP_ORD_Q(v, v)` (v is not NaN): NaN never wins, equal values
//!   (including -0/+0) keep the earlier position, a NaN-only prefix is
//!   skipped. Two `vblendvps` carry the running max and its position.
//!   (Gathering precomputed integer keys instead gains nothing: the loads
//!   bound this loop.)
//!
//! Sparse: 8 entries at a time, `vpmulld` + `vpsrld` hash the indices to
//! coordinate-filter bits, `vpgatherdd` fetches the filter words, `vpsrlvd`
//! moves each entry's bit to bit 0, and `vmovmskps` of (bit << 31) AND
//! `_CMP_ORD_Q(value)` gives the lanes that may touch a bin with a non-NaN
//! value. Only those few lanes (~4% at Amazon-670K's shape) are looked up in
//! the inverse map and folded into the bins, one after the other
//! ([`super::fold_entry`]): AVX2 has no
//! scatter and no `vpconflictd`, and sequential read-modify-write is exact
//! whatever bins repeat. Then the shared densification.
//!
//! This file holds the vectors, the key transpose and the 16-bin group
//! (`drive::Lanes`); the row-block choice, the bin and row loops,
//! the sparse chunk loop and the entry points are `drive.rs`'s.

use std::arch::x86_64::*;

use super::drive::{entries, Lanes};
use super::{DwtaView, FILTER_MUL, GROUP};

/// `POSITIONS.0[p]` = p in every lane (loaded instead of broadcast).
#[repr(C, align(32))]
struct Positions([[i32; 8]; 256]);
static POSITIONS: Positions = {
    let mut t = [[0i32; 8]; 256];
    let mut p = 0;
    while p < 256 {
        t[p] = [p as i32; 8];
        p += 1;
    }
    Positions(t)
};

/// This tier's vectors for [`super::drive`]: eight rows or entries per
/// ymm.
struct Avx2;

impl Lanes for Avx2 {
    type K = __m256i;
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn min() -> __m256i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { _mm256_set1_epi32(i32::MIN) }
    }
    /// Loaded from [`POSITIONS`] instead of broadcast.
    #[inline(always)]
    unsafe fn position(p: usize) -> __m256i {
        // SAFETY: p < 256 rows of the aligned table; avx2 enabled.
        unsafe { _mm256_load_si256(POSITIONS.0.as_ptr().add(p).cast()) }
    }
    #[inline(always)]
    unsafe fn load(p: *const i32) -> __m256i {
        // SAFETY: 8 readable i32 at p (caller); avx2 enabled.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u32, v: __m256i) {
        // SAFETY: 8 writable u32 at p (caller); avx2 enabled.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }
    /// `vpcmpgtd`, `vpmaxsd`, `vpblendvb`.
    #[inline(always)]
    unsafe fn update(val: __m256i, mx: &mut __m256i, pos: &mut __m256i, pv: __m256i) {
        // SAFETY: register-only; the caller enables avx2.
        unsafe {
            let gt = _mm256_cmpgt_epi32(val, *mx);
            *mx = _mm256_max_epi32(*mx, val);
            *pos = _mm256_blendv_epi8(*pos, pv, gt);
        }
    }
    #[inline(always)]
    unsafe fn shl_or(code: __m256i, pos: __m256i, sh: __m128i) -> __m256i {
        // SAFETY: register-only; the caller enables avx2.
        unsafe { _mm256_or_si256(code, _mm256_sll_epi32(pos, sh)) }
    }
    /// Groups of eight rows through [`transpose_keys`].
    #[inline(always)]
    unsafe fn fill_block(
        x: *const f32,
        stride: usize,
        rr: usize,
        dim: usize,
        block: *mut i32,
        w: usize,
    ) {
        for v in 0..w / 8 {
            let rv = rr.saturating_sub(v * 8).min(8);
            // SAFETY: rows 0..rr of x hold dim floats, block dim*w keys
            // (caller); avx2 enabled.
            unsafe { transpose_keys(x.add(v * 8 * stride), stride, rv, dim, block, w, v * 8) };
        }
    }
    #[inline(always)]
    unsafe fn group(row: *const f32, base: *const i32, bs: usize, out: *mut u32) {
        // SAFETY: forwarded (caller); avx2 enabled.
        unsafe { group_avx2(row, base, bs, out) }
    }
    /// `vpmulld` + `vpsrld`, `vpgatherdd`, `vpsrlvd`, then `vmovmskps` of
    /// (bit << 31) AND `_CMP_ORD_Q(value)`.
    #[inline(always)]
    unsafe fn hits(idx: *const u32, val: *const f32, filter: *const i32, shift: __m128i) -> u32 {
        // SAFETY: 8 entries at idx and val, filter words in bounds
        // (caller); avx2 enabled.
        unsafe {
            let iv = _mm256_loadu_si256(idx.cast());
            let hb = _mm256_srl_epi32(
                _mm256_mullo_epi32(iv, _mm256_set1_epi32(FILTER_MUL as i32)),
                shift,
            );
            let w = _mm256_i32gather_epi32::<4>(filter, _mm256_srli_epi32::<5>(hb));
            let bit = _mm256_srlv_epi32(w, _mm256_and_si256(hb, _mm256_set1_epi32(31)));
            let hit = _mm256_castsi256_ps(_mm256_slli_epi32::<31>(bit));
            let v = _mm256_loadu_ps(val);
            let ord = _mm256_cmp_ps::<_CMP_ORD_Q>(v, v);
            _mm256_movemask_ps(_mm256_and_ps(hit, ord)) as u32
        }
    }
}

entries! {
    /// Rows in lanes, `V` ymm (8 * V rows) per bin position.
    #[target_feature(enable = "avx2")]
    unsafe fn rows = rows(Avx2);
    /// Bins in lanes (one row, or huge `dim`).
    #[target_feature(enable = "avx2")]
    unsafe fn bins = bins(Avx2);
    /// The sparse filter, eight entries at a time.
    #[target_feature(enable = "avx2")]
    unsafe fn fold = fold(Avx2);
}

/// Bin hashes of the 16 bins of group `base` (`B` rows of 16 coordinates)
/// for one row, stored to `out[0..16]` (bins in lanes).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn group_avx2(row: *const f32, base: *const i32, bs: usize, out: *mut u32) {
    // SAFETY (whole body): base holds bs*16 coordinates, each < dim, and
    // `row` holds dim readable floats (caller); out holds 16 u32.
    unsafe {
        let mut m0 = _mm256_set1_ps(f32::NAN);
        let mut m1 = m0;
        let mut p0 = _mm256_setzero_ps();
        let mut p1 = p0;
        for p in 0..bs {
            let pv = _mm256_castsi256_ps(_mm256_set1_epi32(p as i32));
            // The p-th coordinates of the 16 bins, loaded one by one and
            // inserted (`vmovss`/`vinsertps`/`vinsertf128`): on Zen 3 this
            // beats `vgatherdps` (see the module doc).
            let b = base.add(p * GROUP);
            let ld = |u: usize| *row.add(*b.add(u) as usize);
            let v0 = _mm256_setr_ps(ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7));
            let v1 = _mm256_setr_ps(ld(8), ld(9), ld(10), ld(11), ld(12), ld(13), ld(14), ld(15));
            let w0 = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_NLE_UQ>(v0, m0),
                _mm256_cmp_ps::<_CMP_ORD_Q>(v0, v0),
            );
            let w1 = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_NLE_UQ>(v1, m1),
                _mm256_cmp_ps::<_CMP_ORD_Q>(v1, v1),
            );
            m0 = _mm256_blendv_ps(m0, v0, w0);
            m1 = _mm256_blendv_ps(m1, v1, w1);
            p0 = _mm256_blendv_ps(p0, pv, w0);
            p1 = _mm256_blendv_ps(p1, pv, w1);
        }
        _mm256_storeu_ps(out.cast(), p0);
        _mm256_storeu_ps(out.add(8).cast(), p1);
    }
}

/// Order-preserving integer keys of 8 floats ([`super::ordered_key`]):
/// sign-magnitude to two's complement (`-0` and `+0` both 0), NaN to
/// `i32::MIN`.
#[target_feature(enable = "avx2")]
#[inline]
fn keys8(v: __m256) -> __m256i {
    let bits = _mm256_castps_si256(v);
    let abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFF_FFFF));
    let sign = _mm256_srai_epi32::<31>(bits);
    let k = _mm256_sub_epi32(_mm256_xor_si256(abs, sign), sign);
    let nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F80_0000));
    _mm256_blendv_epi8(k, _mm256_set1_epi32(i32::MIN), nan)
}

/// Transposes the keys of `rr` (1..=8) rows into lanes `off .. off + 8` of
/// `block[c*W + lane]` for every coordinate c; lanes of rows `>= rr` get
/// `i32::MIN`.
#[target_feature(enable = "avx2")]
#[allow(non_snake_case)]
unsafe fn transpose_keys(
    x: *const f32,
    stride: usize,
    rr: usize,
    dim: usize,
    block: *mut i32,
    W: usize,
    off: usize,
) {
    let fill = _mm256_set1_epi32(i32::MIN);
    let full = dim / 8 * 8;
    // SAFETY (whole body): rows 0..rr of x hold dim readable floats each;
    // block holds dim*W i32 and off + 8 <= W (caller).
    unsafe {
        let mut c0 = 0;
        while c0 < full {
            let mut r = [fill; 8];
            for (u, rv) in r.iter_mut().enumerate().take(rr) {
                *rv = keys8(_mm256_loadu_ps(x.add(u * stride + c0)));
            }
            let r: [__m256; 8] = r.map(|v| _mm256_castsi256_ps(v));
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let o = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (u, ov) in o.iter().enumerate() {
                _mm256_storeu_ps(block.add((c0 + u) * W + off).cast(), *ov);
            }
            c0 += 8;
        }
        for c in full..dim {
            for r in 0..8 {
                *block.add(c * W + off + r) = if r < rr {
                    super::ordered_key(*x.add(r * stride + c))
                } else {
                    i32::MIN
                };
            }
        }
    }
}
