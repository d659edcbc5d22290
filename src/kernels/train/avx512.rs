//! Training kernels, AVX-512 tier (avx512f + bw + dq + vl). Executed on AMD
//! Zen 4 (`tests/train.rs`, every kernel bit-identical to the scalar
//! oracle; see docs/avx512.md).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` on zmm, never `vfmadd`: the oracle's
//!   operations lane-wise (every tier returns the same bits, see `super`).
//! * One zmm accumulator is exactly the 16 interleaved partial sums of a
//!   segment sum (`super::LANES`); it is folded with `vextractf32x8` into
//!   the AVX2 tier's fixed reduction tree.
//! * Masked loads and stores (`{k}{z}`) for the `n % 16` segment tails and
//!   the `dim % 16` row tails: masked lanes never fault and are never
//!   written; `vcmpps` into a mask register + a zero-masked move for the
//!   flush to zero of `exp`.
//! * `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`; `vdivps`, `vsqrtps`
//!   (correctly rounded) in Adam.
//! * `vpmovzxwd` + `vpslld 16` to widen bf16 rows (exact).
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.

use std::arch::x86_64::*;

use super::avx2::lane_sum16;
use super::{AdamCoef, Rows, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC};
use crate::kernels::matmul::{PREFETCH_MAX_BYTES, PREFETCH_ROWS};

const ALL: __mmask16 = 0xffff;

#[inline(always)]
fn mask16(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// `super::exp_neg` of sixteen lanes.
#[inline(always)]
unsafe fn exp16(x: __m512) -> __m512 {
    // SAFETY: register-only avx512f operations (enabled by the caller).
    unsafe {
        let xmin = _mm512_set1_ps(EXP_MIN);
        let xc = _mm512_max_ps(x, xmin);
        let t = _mm512_mul_ps(xc, _mm512_set1_ps(LOG2E));
        let magic = _mm512_set1_ps(ROUND_MAGIC);
        let n = _mm512_sub_ps(_mm512_add_ps(t, magic), magic);
        let r = _mm512_sub_ps(
            _mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(LN2_HI))),
            _mm512_mul_ps(n, _mm512_set1_ps(LN2_LO)),
        );
        let mut p = _mm512_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(c));
        }
        let e = _mm512_slli_epi32::<23>(_mm512_add_epi32(
            _mm512_cvttps_epi32(n),
            _mm512_set1_epi32(127),
        ));
        let res = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
        let under = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, xmin);
        _mm512_maskz_mov_ps(!under, res)
    }
}

/// `super::lane_sum` of one zmm (lanes 0..8 and 8..16 to the AVX2 tree).
#[inline(always)]
unsafe fn lane_sum_zmm(a: __m512) -> f32 {
    // SAFETY: register-only operations.
    unsafe {
        lane_sum16(
            _mm512_castps512_ps256(a),
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a))),
        )
    }
}

/// The body (with `$j` the offset and `$k` the lane mask) for each block
/// of 16 of a segment of `n` elements (the tail masked), accumulated into
/// one zmm of partial sums; yields their [`lane_sum_zmm`]. A macro, not a
/// closure: see the AVX2 tier's `lanes!`.
macro_rules! lanes {
    ($n:expr, |$j:ident, $k:ident| $body:expr) => {{
        let n: usize = $n;
        let mut acc = _mm512_setzero_ps();
        let mut jj = 0;
        while jj + 16 <= n {
            let ($j, $k) = (jj, ALL);
            acc = _mm512_add_ps(acc, $body);
            jj += 16;
        }
        if jj < n {
            let ($j, $k) = (jj, mask16(n - jj));
            acc = _mm512_add_ps(acc, $body);
        }
        lane_sum_zmm(acc)
    }};
}

#[inline(always)]
unsafe fn xent_body(x: &mut [f32], y: &[f32]) -> f32 {
    let n = x.len();
    let xp = x.as_mut_ptr();
    let yp = y.as_ptr();
    // SAFETY (whole body): x and y hold n floats (caller); accesses past
    // n are masked off (never read or written).
    unsafe {
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let mut mv = ninf;
        let mut j = 0;
        while j + 16 <= n {
            mv = _mm512_max_ps(mv, _mm512_loadu_ps(xp.add(j)));
            j += 16;
        }
        if j < n {
            mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(ninf, mask16(n - j), xp.add(j)));
        }
        let mut ma = [0.0f32; 16];
        _mm512_storeu_ps(ma.as_mut_ptr(), mv);
        let m = ma.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let ysum = lanes!(n, |j, k| _mm512_maskz_loadu_ps(k, yp.add(j)));
        if ysum == 0.0 {
            x.fill(0.0);
            return 0.0;
        }
        let mm = _mm512_set1_ps(m);
        let a = lanes!(n, |j, k| {
            let xv = _mm512_maskz_loadu_ps(k, xp.add(j));
            let yv = _mm512_maskz_loadu_ps(k, yp.add(j));
            _mm512_mul_ps(yv, _mm512_sub_ps(mm, xv))
        });
        let s = lanes!(n, |j, k| {
            let xv = _mm512_maskz_loadu_ps(k, xp.add(j));
            let e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(xv, mm)));
            _mm512_mask_storeu_ps(xp.add(j), k, e);
            e
        });
        let (inv_s, inv_y) = (1.0 / s, 1.0 / ysum);
        let (is16, iy16) = (_mm512_set1_ps(inv_s), _mm512_set1_ps(inv_y));
        lanes!(n, |j, k| {
            let ev = _mm512_maskz_loadu_ps(k, xp.add(j));
            let yv = _mm512_maskz_loadu_ps(k, yp.add(j));
            let g = _mm512_sub_ps(_mm512_mul_ps(ev, is16), _mm512_mul_ps(yv, iy16));
            _mm512_mask_storeu_ps(xp.add(j), k, g);
            _mm512_setzero_ps()
        });
        ((s as f64).ln() + a as f64 / ysum as f64) as f32
    }
}

/// A row storage format: 16 elements widened to f32, lanes outside the
/// mask zero and not read.
trait Fmt {
    type T: Copy;
    unsafe fn load16(p: *const Self::T, m: __mmask16) -> __m512;
}

struct F32;
struct Bf16;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load16(p: *const f32, m: __mmask16) -> __m512 {
        // SAFETY: lanes in m are readable (caller); masked lanes not read.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
}

impl Fmt for Bf16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load16(p: *const u16, m: __mmask16) -> __m512 {
        // SAFETY: as for F32 (avx512bw + vl masked 16-bit load).
        unsafe {
            let h = _mm256_maskz_loadu_epi16(m, p.cast());
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        }
    }
}

#[inline(always)]
unsafe fn prefetch_row(p: *const u8, bytes: usize) {
    // SAFETY: prefetch never faults; offsets stay within the row.
    unsafe {
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(p.add(off).cast());
            off += 64;
        }
        _mm_prefetch::<_MM_HINT_T0>(p.add(bytes - 1).cast());
    }
}

/// The transposed product, 4 rows (or 1 at the end) at a time: for each
/// block of 16 columns `out` is loaded once, the rows' products are added in
/// candidate order, and it is stored back (it stays in L1).
#[inline(always)]
unsafe fn dq_rows<F: Fmt>(r: &Rows<'_, F::T>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    let (dim, stride) = (r.dim, r.stride);
    let nblk = dim.div_ceil(16);
    let tmask = if dim % 16 == 0 { ALL } else { mask16(dim % 16) };
    let n = ids.len();
    let w = r.w.as_ptr();
    let op = out.as_mut_ptr();
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): ids < rows and `w` spans the strided matrix, g
    // holds n values, out holds dim floats (checked by crate::train); lanes
    // past dim are only touched masked.
    unsafe {
        let km = |b: usize| if b + 1 == nblk { tmask } else { ALL };
        for b in 0..nblk {
            _mm512_mask_storeu_ps(op.add(16 * b), km(b), _mm512_setzero_ps());
        }
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        for j in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(row(j).cast(), pf_bytes);
        }
        let mut i = 0;
        while i < n {
            let rr = if n - i >= 4 { 4 } else { 1 };
            for j in i + PREFETCH_ROWS..(i + PREFETCH_ROWS + rr).min(n) {
                prefetch_row(row(j).cast(), pf_bytes);
            }
            let p: [*const F::T; 4] = std::array::from_fn(|k| row(i + k.min(rr - 1)));
            // (No closure around intrinsics: see `lanes!`.)
            let gk = |k: usize| *g.get_unchecked(i + k.min(rr - 1));
            let gs = [
                _mm512_set1_ps(gk(0)),
                _mm512_set1_ps(gk(1)),
                _mm512_set1_ps(gk(2)),
                _mm512_set1_ps(gk(3)),
            ];
            for b in 0..nblk {
                let k16 = km(b);
                let mut acc = _mm512_maskz_loadu_ps(k16, op.add(16 * b));
                for k in 0..rr {
                    let wv = F::load16(p[k].add(16 * b), k16);
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(gs[k], wv));
                }
                _mm512_mask_storeu_ps(op.add(16 * b), k16, acc);
            }
            i += rr;
        }
    }
}

/// Columns `k..k+16` (lanes of `mk`) of a row's gathered gradient:
/// `sum_t g[t] * q[s[t]][k..]` in `t` order from +0 (see `super::SgdFn`).
#[inline(always)]
unsafe fn grad16(q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize, mk: __mmask16) -> __m512 {
    let qp = q.w.as_ptr();
    // SAFETY: every s[t] < rows of q and q.w spans them; the lanes of `mk`
    // are columns < dim (caller).
    unsafe {
        let mut acc = _mm512_setzero_ps();
        for t in 0..g.len() {
            let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
            let x = _mm512_mul_ps(
                _mm512_set1_ps(*g.get_unchecked(t)),
                _mm512_maskz_loadu_ps(mk, row),
            );
            acc = _mm512_add_ps(acc, x);
        }
        acc
    }
}

#[inline(always)]
unsafe fn sgd_body(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32) {
    let n = w.len();
    let wp = w.as_mut_ptr();
    // SAFETY: w holds n = dim floats (caller); the tail is masked.
    unsafe {
        let l = _mm512_set1_ps(lr);
        let mut k = 0;
        while k < n {
            let m = if n - k >= 16 { ALL } else { mask16(n - k) };
            let gv = grad16(q, g, s, k, m);
            let v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, wp.add(k)), _mm512_mul_ps(l, gv));
            _mm512_mask_storeu_ps(wp.add(k), m, v);
            k += 16;
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn adam_body(
    w: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    q: &Rows<'_, f32>,
    g: &[f32],
    s: &[u32],
    c: &AdamCoef,
) {
    let n = w.len();
    let (wp, mp, vp) = (w.as_mut_ptr(), m.as_mut_ptr(), v.as_mut_ptr());
    // SAFETY: w, m, v hold n = dim floats (caller); the tail is masked.
    unsafe {
        let (b1, ob1) = (_mm512_set1_ps(c.beta1), _mm512_set1_ps(c.one_minus_beta1));
        let (b2, ob2) = (_mm512_set1_ps(c.beta2), _mm512_set1_ps(c.one_minus_beta2));
        let (c1, c2) = (_mm512_set1_ps(c.c1), _mm512_set1_ps(c.c2));
        let (lr, eps) = (_mm512_set1_ps(c.lr), _mm512_set1_ps(c.eps));
        let mut k = 0;
        while k < n {
            let mk = if n - k >= 16 { ALL } else { mask16(n - k) };
            let gv = grad16(q, g, s, k, mk);
            let mv = _mm512_add_ps(
                _mm512_mul_ps(b1, _mm512_maskz_loadu_ps(mk, mp.add(k))),
                _mm512_mul_ps(ob1, gv),
            );
            let vv = _mm512_add_ps(
                _mm512_mul_ps(b2, _mm512_maskz_loadu_ps(mk, vp.add(k))),
                _mm512_mul_ps(ob2, _mm512_mul_ps(gv, gv)),
            );
            let mh = _mm512_mul_ps(mv, c1);
            let vh = _mm512_mul_ps(vv, c2);
            let upd = _mm512_div_ps(
                _mm512_mul_ps(lr, mh),
                _mm512_add_ps(_mm512_sqrt_ps(vh), eps),
            );
            let wv = _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, wp.add(k)), upd);
            _mm512_mask_storeu_ps(mp.add(k), mk, mv);
            _mm512_mask_storeu_ps(vp.add(k), mk, vv);
            _mm512_mask_storeu_ps(wp.add(k), mk, wv);
            k += 16;
        }
    }
}

/// # Safety
/// [`super::XentFn`]; the CPU has avx512f, avx512bw, avx512dq and avx512vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn xent_512(x: &mut [f32], y: &[f32]) -> f32 {
    // SAFETY: forwarded XentFn contract.
    unsafe { xent_body(x, y) }
}

/// # Safety
/// [`super::DqFn`]; the CPU has avx512f, avx512bw, avx512dq and avx512vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn dq_f32_512(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DqFn contract.
    unsafe { dq_rows::<F32>(r, g, ids, out) }
}

/// # Safety
/// [`super::DqFn`]; the CPU has avx512f, avx512bw, avx512dq and avx512vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn dq_bf16_512(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DqFn contract.
    unsafe { dq_rows::<Bf16>(r, g, ids, out) }
}

/// # Safety
/// [`super::SgdFn`]; the CPU has avx512f, avx512bw, avx512dq and avx512vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn sgd_512(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32) {
    // SAFETY: forwarded SgdFn contract.
    unsafe { sgd_body(w, q, g, s, lr) }
}

/// # Safety
/// [`super::AdamFn`]; the CPU has avx512f, avx512bw, avx512dq and avx512vl.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn adam_512(
    w: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    q: &Rows<'_, f32>,
    g: &[f32],
    s: &[u32],
    c: &AdamCoef,
) {
    // SAFETY: forwarded AdamFn contract.
    unsafe { adam_body(w, m, v, q, g, s, c) }
}

// The names of the tier table (`tier_table!` in `../mod.rs`).
pub use self::{
    adam_512 as adam, dq_bf16_512 as dq_bf16, dq_f32_512 as dq_f32, sgd_512 as sgd,
    xent_512 as xent,
};
pub use crate::kernels::matmul::avx2::prefetch;
