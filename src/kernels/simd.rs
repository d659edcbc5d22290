//! The f32 vector tile of the x86 tiers (per-tier plumbing
//! generated, not copied). Several families (dense, matmul, graph, train)
//! write their row-block drivers, tails and prefetch loops once, generic
//! over [`F32x`] (the vector operations of one instruction set) and
//! [`Widen`] (loading a storage format as f32); the drivers are
//! `#[inline(always)]` and each tier's `#[target_feature]` entry point
//! (made by [`entries!`]) instantiates them with [`Avx2`] or [`Avx512`], so
//! they compile with that tier's instructions. Only what differs between
//! the instruction sets lives below, once per ISA:
//!
//! * [`Avx2`] (`__m256`, 8 lanes): `vmaskmovps` for tails (used only on
//!   tails: its store is slow on AMD cores), narrow formats copied into a
//!   zeroed 8-lane buffer for their tail; `vhaddps` reductions.
//! * [`Avx512`] (`__m512`, 16 lanes): `{k}{z}` masked loads and stores for
//!   tails (masked lanes never fault and are never written); reductions
//!   folded to 256 bits (`vextractf32x8`) into the AVX2 trees.
//!
//! Every operation is one fixed instruction sequence per tier (the
//! instruction, operand order, FMA or not, and reduction tree that the
//! kernels' module docs name), so writing a kernel once over these types
//! does not change its bits on any tier.

use std::arch::x86_64::*;

/// Makes the public `#[target_feature]` entry points of one tier, each
/// forwarding its arguments to a generic driver monomorphised for the tier
/// (`$f`, e.g. `super::dot::<Avx2, F32>`). Its `# Safety`: the contract of
/// the family's function type, and the CPU has the features.
macro_rules! entries {
    ($feat:literal; $(
        $(#[$m:meta])*
        fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? => $f:expr;
    )*) => {$(
        $(#[$m])*
        ///
        /// # Safety
        /// The contract of the family's function type (see `super`); the
        #[doc = concat!("CPU has ", $feat, ".")]
        #[target_feature(enable = $feat)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name($($a: $t),*) $(-> $r)? {
            // SAFETY: the caller's contract is forwarded unchanged, and this
            // function enables the features the driver's tier needs.
            unsafe { $f($($a),*) }
        }
    )*};
}
pub(crate) use entries;

/// The vector operations of one instruction set. `V` holds `LANES` f32;
/// `M` selects the first lanes of a block (all of them, or a tail).
///
/// # Safety (every method)
/// The caller enables the tier's target features; a load or store reads
/// or writes the lanes it names at `p` (only the lanes of `m` for the
/// masked ones, the others are never touched).
pub(crate) trait F32x {
    type V: Copy;
    type M: Copy;
    const LANES: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    unsafe fn loadu(p: *const f32) -> Self::V;
    unsafe fn storeu(p: *mut f32, v: Self::V);
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn div(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sqrt(a: Self::V) -> Self::V;
    /// `a * b + c`, fused.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Every lane (plain loads and stores).
    unsafe fn all() -> Self::M;
    /// The first `n` (0..=LANES) lanes.
    unsafe fn first(n: usize) -> Self::M;
    /// The first `n` (0..LANES) lanes: a tail, never the whole block.
    unsafe fn tail(n: usize) -> Self::M;
    /// The lanes of `m` at `p`, the others +0.
    unsafe fn ld(m: Self::M, p: *const f32) -> Self::V;
    /// The lanes of `m` at `p`, the others `fill`.
    unsafe fn ld_or(m: Self::M, p: *const f32, fill: Self::V) -> Self::V;
    /// Stores the lanes of `m` of `v` at `p`.
    unsafe fn st(m: Self::M, p: *mut f32, v: Self::V);
    /// `v` with the lanes outside `m` set to +0.
    unsafe fn keep(m: Self::M, v: Self::V) -> Self::V;
    /// Bit `l` set where `a[l] > b[l]` (ordered, quiet).
    unsafe fn gt_bits(a: Self::V, b: Self::V) -> u32;
    /// Bit `l` set where `a[l] >= b[l]` (ordered, quiet).
    unsafe fn ge_bits(a: Self::V, b: Self::V) -> u32;
    /// `res` with +0 in the lanes where `x < lim` (ordered, quiet).
    unsafe fn zero_below(x: Self::V, lim: Self::V, res: Self::V) -> Self::V;
    /// `2^n` for lanes holding integers `n` in the normal range: the
    /// truncated `n` plus 127, shifted into the exponent bits.
    unsafe fn pow2i(n: Self::V) -> Self::V;
    /// The sum of the lanes as the gathered matmul reduces a row (AVX2:
    /// the halves added, then `l + 2`, `l + 1`; AVX-512:
    /// `_mm512_reduce_add_ps`).
    unsafe fn hsum(v: Self::V) -> f32;
    /// The sum of the lanes as the dense tile reduces a lone row (AVX2:
    /// the halves added, then two `vhaddps`).
    unsafe fn hsum_hadd(v: Self::V) -> f32;
    /// `[sum(a), sum(b), sum(c), sum(d)]` by `vhaddps` (AVX-512: each
    /// folded to 256 bits first).
    unsafe fn hsum4(a: Self::V, b: Self::V, c: Self::V, d: Self::V) -> [f32; 4];
    /// The fixed tree `l + 8`, `l + 4`, `l + 2`, `l + 1` of 16 partial
    /// sums: lanes 0..8 in `v[0]` and 8..16 in `v[1]` (AVX2), or all 16 in
    /// `v[0]` (AVX-512, `v[1]` unused).
    unsafe fn sum16(v: [Self::V; 2]) -> f32;
}

/// A row storage format.
pub(crate) trait Fmt {
    type T: Copy + Default;
    /// Each row's sum is multiplied by the row's scale (int8).
    const SCALED: bool = false;
}

/// f32 rows.
pub(crate) struct F32;
/// bf16 rows (the top half of an f32).
pub(crate) struct Bf16;
/// IEEE binary16 rows.
pub(crate) struct F16;
/// int8 rows with one f32 scale each.
pub(crate) struct I8;

impl Fmt for F32 {
    type T = f32;
}
impl Fmt for Bf16 {
    type T = u16;
}
impl Fmt for F16 {
    type T = u16;
}
impl Fmt for I8 {
    type T = i8;
    const SCALED: bool = true;
}

/// Loading format `F` as f32 lanes (every widening is exact).
///
/// # Safety (every method)
/// As [`F32x`]: `load` reads `LANES` elements at `p`, `load_tail` only the
/// first `n` (the lanes of `m`, `1 <= n < LANES`) and sets the others to 0.
pub(crate) trait Widen<F: Fmt>: F32x {
    unsafe fn load(p: *const F::T) -> Self::V;
    unsafe fn load_tail(p: *const F::T, n: usize, m: Self::M) -> Self::V;
}

/// `prefetcht0` of every 64-byte line of `bytes` bytes at `p`, and of its
/// last byte (`bytes >= 1`). Safe for any pointer: a prefetch never
/// faults (SSE, baseline on x86-64), and the wrapping arithmetic keeps any
/// pointer computation defined.
#[inline(always)]
pub(crate) fn prefetch_row(p: *const u8, bytes: usize) {
    prefetch_lines(p, bytes);
    // SAFETY: a prefetch hint (see above).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes - 1).cast()) };
}

/// Prefetches (`prefetcht0`) the `len` bytes that lie `ahead` bytes after
/// byte `at` of a run of `end` bytes at `p`, if they are still inside it
/// (a run never prefetches beyond itself: with short IVF lists the bytes
/// after a run are usually not the next list probed). The int8 and 4-bit
/// scans' look-ahead; safe as [`prefetch_row`].
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8, at: usize, len: usize, end: usize, ahead: usize) {
    let from = at + ahead;
    if from + len <= end {
        prefetch_lines(p.wrapping_add(from), len);
    }
}

/// `prefetcht0` of every 64-byte line of `bytes` bytes at `p` (safe as
/// [`prefetch_row`]).
#[inline(always)]
pub(crate) fn prefetch_lines(p: *const u8, bytes: usize) {
    let mut off = 0;
    while off < bytes {
        // SAFETY: a prefetch hint (see prefetch_row).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off).cast()) };
        off += 64;
    }
}

// ---------------------------------------------------------------- AVX2 --

/// The AVX2 tier (avx2 + fma; f16 rows also need f16c).
#[derive(Clone, Copy)]
pub(crate) struct Avx2;

/// The lanes of one 8-float block: all of them (`full`: plain `vmovups`)
/// or the first few (a tail: `vmaskmovps`, whose store is slow on AMD
/// cores, so full blocks never use it: on every block it makes training's
/// L3 row updates much slower on Zen 4, benches/train.md, "`vmaskmovps`
/// stores").
/// `full` is a constant wherever the mask is made by `all` or `tail`, so
/// the branch folds away.
#[derive(Clone, Copy)]
pub(crate) struct M8 {
    m: __m256i,
    full: bool,
}

/// Lane mask of the first `n` (0..=8) lanes.
#[inline(always)]
unsafe fn mask8(n: usize) -> __m256i {
    // SAFETY: register-only avx2 operations.
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

/// `v[0..4] + v[4..8]`, then `l + 2` and `l + 1` (lane 0 of the result).
#[inline(always)]
unsafe fn reduce8(v: __m256) -> f32 {
    // SAFETY: register-only avx operations.
    unsafe {
        let s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
        _mm_cvtss_f32(s1)
    }
}

/// `[sum(a), sum(b), sum(c), sum(d)]`: three `vhaddps` and one add.
#[inline(always)]
unsafe fn hsum4_256(a: __m256, b: __m256, c: __m256, d: __m256) -> [f32; 4] {
    // SAFETY: register-only avx operations, then a store into a local.
    unsafe {
        let abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
        let s = _mm_add_ps(
            _mm256_castps256_ps128(abcd),
            _mm256_extractf128_ps::<1>(abcd),
        );
        let mut out = [0f32; 4];
        _mm_storeu_ps(out.as_mut_ptr(), s);
        out
    }
}

impl F32x for Avx2 {
    type V = __m256;
    type M = M8;
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: register-only (trait contract: avx enabled).
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> __m256 {
        // SAFETY: eight readable floats at p (trait contract).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn storeu(p: *mut f32, v: __m256) {
        // SAFETY: eight writable floats at p (trait contract).
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sqrt(a: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_sqrt_ps(a) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: register-only (trait contract: fma enabled).
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn all() -> M8 {
        M8 {
            // SAFETY: register-only.
            m: unsafe { _mm256_set1_epi32(-1) },
            full: true,
        }
    }
    #[inline(always)]
    unsafe fn first(n: usize) -> M8 {
        M8 {
            // SAFETY: register-only.
            m: unsafe { mask8(n) },
            full: n == 8,
        }
    }
    #[inline(always)]
    unsafe fn tail(n: usize) -> M8 {
        M8 {
            // SAFETY: register-only.
            m: unsafe { mask8(n) },
            full: false,
        }
    }
    #[inline(always)]
    unsafe fn ld(m: M8, p: *const f32) -> __m256 {
        // SAFETY: the lanes of m at p are readable (trait contract);
        // vmaskmovps touches no other lane.
        unsafe {
            if m.full {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, m.m)
            }
        }
    }
    #[inline(always)]
    unsafe fn ld_or(m: M8, p: *const f32, fill: __m256) -> __m256 {
        // SAFETY: as ld, then a register-only blend.
        unsafe { _mm256_blendv_ps(fill, Self::ld(m, p), _mm256_castsi256_ps(m.m)) }
    }
    #[inline(always)]
    unsafe fn st(m: M8, p: *mut f32, v: __m256) {
        // SAFETY: the lanes of m at p are writable (trait contract);
        // vmaskmovps touches no other lane.
        unsafe {
            if m.full {
                _mm256_storeu_ps(p, v)
            } else {
                _mm256_maskstore_ps(p, m.m, v)
            }
        }
    }
    #[inline(always)]
    unsafe fn keep(m: M8, v: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe {
            if m.full {
                v
            } else {
                _mm256_and_ps(v, _mm256_castsi256_ps(m.m))
            }
        }
    }
    #[inline(always)]
    unsafe fn gt_bits(a: __m256, b: __m256) -> u32 {
        // SAFETY: register-only (`vcmpps` + `vmovmskps`).
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(a, b)) as u32 }
    }
    #[inline(always)]
    unsafe fn ge_bits(a: __m256, b: __m256) -> u32 {
        // SAFETY: register-only (`vcmpps` + `vmovmskps`).
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(a, b)) as u32 }
    }
    #[inline(always)]
    unsafe fn zero_below(x: __m256, lim: __m256, res: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe { _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, lim), res) }
    }
    #[inline(always)]
    unsafe fn pow2i(n: __m256) -> __m256 {
        // SAFETY: register-only avx2 operations.
        unsafe {
            let e = _mm256_slli_epi32::<23>(_mm256_add_epi32(
                _mm256_cvttps_epi32(n),
                _mm256_set1_epi32(127),
            ));
            _mm256_castsi256_ps(e)
        }
    }
    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        // SAFETY: register-only.
        unsafe { reduce8(v) }
    }
    #[inline(always)]
    unsafe fn hsum_hadd(v: __m256) -> f32 {
        // SAFETY: register-only avx operations.
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_hadd_ps(s, s);
            let s = _mm_hadd_ps(s, s);
            _mm_cvtss_f32(s)
        }
    }
    #[inline(always)]
    unsafe fn hsum4(a: __m256, b: __m256, c: __m256, d: __m256) -> [f32; 4] {
        // SAFETY: register-only.
        unsafe { hsum4_256(a, b, c, d) }
    }
    #[inline(always)]
    unsafe fn sum16(v: [__m256; 2]) -> f32 {
        // SAFETY: register-only (l + 8, then the 8-lane tree).
        unsafe { reduce8(_mm256_add_ps(v[0], v[1])) }
    }
}

/// `n` (1..8) elements at `p` widened by `load`, through a zeroed local
/// buffer (the narrow formats' tail: no masked load for them in AVX2).
#[inline(always)]
unsafe fn buf_tail<T: Copy + Default>(
    p: *const T,
    n: usize,
    load: unsafe fn(*const T) -> __m256,
) -> __m256 {
    let mut buf = [T::default(); 8];
    // SAFETY: `p` holds n readable elements (caller) and buf has room for
    // 8 >= n; `load` reads the 8 elements of buf.
    unsafe {
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        load(buf.as_ptr())
    }
}

impl Widen<F32> for Avx2 {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: 8 readable f32 at p (trait contract).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const f32, _n: usize, m: M8) -> __m256 {
        // SAFETY: the lanes of m are readable; vmaskmovps reads no other.
        unsafe { _mm256_maskload_ps(p, m.m) }
    }
}

#[inline(always)]
unsafe fn bf16x8(p: *const u16) -> __m256 {
    // SAFETY: 8 readable u16 (16 bytes) at p (caller); `vpmovzxwd` +
    // `vpslld 16`: a bf16 is the top half of an f32.
    unsafe {
        let h = _mm_loadu_si128(p.cast());
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
    }
}

impl Widen<Bf16> for Avx2 {
    #[inline(always)]
    unsafe fn load(p: *const u16) -> __m256 {
        // SAFETY: trait contract.
        unsafe { bf16x8(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const u16, n: usize, _m: M8) -> __m256 {
        // SAFETY: n readable elements at p (trait contract).
        unsafe { buf_tail(p, n, bf16x8) }
    }
}

/// Eight IEEE halves at `p` (`vcvtph2ps`, F16C: the caller enables f16c).
#[inline(always)]
unsafe fn f16x8(p: *const u16) -> __m256 {
    // SAFETY: 8 readable u16 at p (caller); f16c enabled by the caller.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
}

impl Widen<F16> for Avx2 {
    #[inline(always)]
    unsafe fn load(p: *const u16) -> __m256 {
        // SAFETY: trait contract (and f16c enabled by the entry point).
        unsafe { f16x8(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const u16, n: usize, _m: M8) -> __m256 {
        // SAFETY: n readable elements at p (trait contract).
        unsafe { buf_tail(p, n, f16x8) }
    }
}

#[inline(always)]
unsafe fn i8x8(p: *const i8) -> __m256 {
    // SAFETY: 8 readable bytes at p (caller); `vpmovsxbd` + `vcvtdq2ps`.
    unsafe { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))) }
}

impl Widen<I8> for Avx2 {
    #[inline(always)]
    unsafe fn load(p: *const i8) -> __m256 {
        // SAFETY: trait contract.
        unsafe { i8x8(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const i8, n: usize, _m: M8) -> __m256 {
        // SAFETY: n readable elements at p (trait contract).
        unsafe { buf_tail(p, n, i8x8) }
    }
}

// ------------------------------------------------------------- AVX-512 --

/// The AVX-512 tier (avx512f + bw + dq + vl, with avx2 and fma).
#[derive(Clone, Copy)]
pub(crate) struct Avx512;

/// `v[0..8] + v[8..16]` (`vextractf32x8`, avx512dq).
#[inline(always)]
unsafe fn fold256(v: __m512) -> __m256 {
    // SAFETY: register-only avx512f/dq operations.
    unsafe { _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps::<1>(v)) }
}

impl F32x for Avx512 {
    type V = __m512;
    type M = __mmask16;
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: register-only (trait contract: avx512f enabled).
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> __m512 {
        // SAFETY: sixteen readable floats at p (trait contract).
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn storeu(p: *mut f32, v: __m512) {
        // SAFETY: sixteen writable floats at p (trait contract).
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sqrt(a: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_sqrt_ps(a) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn all() -> __mmask16 {
        0xffff
    }
    #[inline(always)]
    unsafe fn first(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }
    #[inline(always)]
    unsafe fn tail(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }
    #[inline(always)]
    unsafe fn ld(m: __mmask16, p: *const f32) -> __m512 {
        // SAFETY: the lanes of m at p are readable (trait contract); the
        // others are not accessed.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline(always)]
    unsafe fn ld_or(m: __mmask16, p: *const f32, fill: __m512) -> __m512 {
        // SAFETY: as ld.
        unsafe { _mm512_mask_loadu_ps(fill, m, p) }
    }
    #[inline(always)]
    unsafe fn st(m: __mmask16, p: *mut f32, v: __m512) {
        // SAFETY: the lanes of m at p are writable (trait contract); the
        // others are not accessed.
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }
    #[inline(always)]
    unsafe fn keep(m: __mmask16, v: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_maskz_mov_ps(m, v) }
    }
    #[inline(always)]
    unsafe fn gt_bits(a: __m512, b: __m512) -> u32 {
        // SAFETY: register-only (`vcmpps` into a mask register).
        unsafe { u32::from(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b)) }
    }
    #[inline(always)]
    unsafe fn ge_bits(a: __m512, b: __m512) -> u32 {
        // SAFETY: register-only (`vcmpps` into a mask register).
        unsafe { u32::from(_mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, b)) }
    }
    #[inline(always)]
    unsafe fn zero_below(x: __m512, lim: __m512, res: __m512) -> __m512 {
        // SAFETY: register-only.
        unsafe { _mm512_maskz_mov_ps(!_mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, lim), res) }
    }
    #[inline(always)]
    unsafe fn pow2i(n: __m512) -> __m512 {
        // SAFETY: register-only avx512f operations.
        unsafe {
            let e = _mm512_slli_epi32::<23>(_mm512_add_epi32(
                _mm512_cvttps_epi32(n),
                _mm512_set1_epi32(127),
            ));
            _mm512_castsi512_ps(e)
        }
    }
    #[inline(always)]
    unsafe fn hsum(v: __m512) -> f32 {
        // SAFETY: register-only.
        unsafe { _mm512_reduce_add_ps(v) }
    }
    #[inline(always)]
    unsafe fn hsum_hadd(v: __m512) -> f32 {
        // SAFETY: register-only (the dense tile's lone rows use
        // `_mm512_reduce_add_ps` too).
        unsafe { _mm512_reduce_add_ps(v) }
    }
    #[inline(always)]
    unsafe fn hsum4(a: __m512, b: __m512, c: __m512, d: __m512) -> [f32; 4] {
        // SAFETY: register-only: each folded to 256 bits, then the AVX2
        // four-way reduction.
        unsafe { hsum4_256(fold256(a), fold256(b), fold256(c), fold256(d)) }
    }
    #[inline(always)]
    unsafe fn sum16(v: [__m512; 2]) -> f32 {
        // SAFETY: register-only: lanes 0..8 plus 8..16, then the AVX2
        // tree.
        unsafe { reduce8(fold256(v[0])) }
    }
}

impl Widen<F32> for Avx512 {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: 16 readable f32 at p (trait contract).
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const f32, _n: usize, m: __mmask16) -> __m512 {
        // SAFETY: the lanes of m are readable; the others are not read.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
}

/// 16 bf16 (`h`) to f32: `vpmovzxwd` + `vpslld 16`.
#[inline(always)]
unsafe fn bf16x16(h: __m256i) -> __m512 {
    // SAFETY: register-only avx512f operations.
    unsafe { _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h))) }
}

impl Widen<Bf16> for Avx512 {
    #[inline(always)]
    unsafe fn load(p: *const u16) -> __m512 {
        // SAFETY: 16 readable u16 (32 bytes) at p (trait contract).
        unsafe { bf16x16(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const u16, _n: usize, m: __mmask16) -> __m512 {
        // SAFETY: the lanes of m are readable (avx512bw + vl masked
        // 16-bit load; the others are not read).
        unsafe { bf16x16(_mm256_maskz_loadu_epi16(m, p.cast())) }
    }
}

impl Widen<F16> for Avx512 {
    #[inline(always)]
    unsafe fn load(p: *const u16) -> __m512 {
        // SAFETY: 16 readable u16 at p (trait contract).
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const u16, _n: usize, m: __mmask16) -> __m512 {
        // SAFETY: as for Bf16.
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast())) }
    }
}

impl Widen<I8> for Avx512 {
    #[inline(always)]
    unsafe fn load(p: *const i8) -> __m512 {
        // SAFETY: 16 readable bytes at p (trait contract).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const i8, _n: usize, m: __mmask16) -> __m512 {
        // SAFETY: the lanes of m are readable (avx512bw + vl masked byte
        // load; the others are not read).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p))) }
    }
}
