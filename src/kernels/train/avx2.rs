//! Training kernels, AVX2 tier (avx2; the tier also guarantees fma, which
//! is deliberately not used: see the module docs of `super` — every tier
//! returns the same bits, and the portable tier has no FMA).
//!
//! Instructions and why:
//! * `vmulps` + `vaddps`/`vsubps` (never `vfmadd`): the operations of the
//!   scalar oracle, lane-wise, so results are bit-identical.
//! * Two ymm accumulators are the 16 interleaved partial sums of a segment
//!   sum (`super::LANES`); `vextractf128`, `vmovhlps`, `vmovshdup` reduce
//!   them in the fixed tree of `super::lane_sum`.
//! * `vmaxps` with `x` clamped to `EXP_MIN`, the `1.5 * 2^23` add/sub
//!   rounding, `vcvttps2dq` + `vpaddd` + `vpslld 23` for `2^n`, and
//!   `vcmpltps` + `vandnps` for the flush to zero: `super::exp_neg`
//!   lane-wise.
//! * `vmaskmovps` loads and stores for the `n % 16` (segments) and
//!   `dim % 8` (rows) tails only: masked lanes are never touched. Full
//!   blocks use `vmovups` (`M8`): a `vmaskmovps` store is slow on AMD
//!   cores (the L3 row updates ran 2.4-2.9x slower on Zen 4 with it on
//!   every block, benches/train.md).
//! * `vdivps` and `vsqrtps` (correctly rounded) in Adam.
//! * `prefetcht0` of the rows `PREFETCH_ROWS` candidates ahead in the
//!   transposed product, as in the forward gathered matmul.

use std::arch::x86_64::*;

use super::{AdamCoef, Rows, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC};
use crate::kernels::matmul::{PREFETCH_MAX_BYTES, PREFETCH_ROWS};

/// Lane mask of the first `n` (0..=8) lanes.
#[inline(always)]
pub(super) unsafe fn mask8(n: usize) -> __m256i {
    // SAFETY: register-only avx2 operations.
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

/// The lanes of one 8-float block: all of them (`full`: plain
/// `vmovups`) or the first few (a tail: `vmaskmovps`, whose store is slow
/// on AMD cores, so full blocks never use it). `full` is a constant at
/// every call site, so the branch folds away.
#[derive(Clone, Copy)]
pub(super) struct M8 {
    m: __m256i,
    full: bool,
}

impl M8 {
    #[inline(always)]
    pub(super) unsafe fn all() -> M8 {
        // SAFETY: register-only.
        M8 {
            m: unsafe { _mm256_set1_epi32(-1) },
            full: true,
        }
    }
    /// The first `n` (0..=8) lanes.
    #[inline(always)]
    pub(super) unsafe fn first(n: usize) -> M8 {
        M8 {
            // SAFETY: register-only.
            m: unsafe { mask8(n) },
            full: n == 8,
        }
    }
    /// Loads the block's lanes at `p` (the others 0, never read).
    #[inline(always)]
    pub(super) unsafe fn ld(self, p: *const f32) -> __m256 {
        // SAFETY: the block's lanes at p are readable (caller).
        unsafe {
            if self.full {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, self.m)
            }
        }
    }
    /// Stores the block's lanes of `v` at `p` (the others untouched).
    #[inline(always)]
    pub(super) unsafe fn st(self, p: *mut f32, v: __m256) {
        // SAFETY: the block's lanes at p are writable (caller).
        unsafe {
            if self.full {
                _mm256_storeu_ps(p, v)
            } else {
                _mm256_maskstore_ps(p, self.m, v)
            }
        }
    }
    /// `v` with the lanes outside the block set to +0.
    #[inline(always)]
    pub(super) unsafe fn keep(self, v: __m256) -> __m256 {
        // SAFETY: register-only.
        unsafe {
            if self.full {
                v
            } else {
                _mm256_and_ps(v, _mm256_castsi256_ps(self.m))
            }
        }
    }
}

/// `super::exp_neg` of eight lanes.
#[inline(always)]
pub(super) unsafe fn exp8(x: __m256) -> __m256 {
    // SAFETY: register-only avx/avx2 operations (enabled by the caller).
    unsafe {
        let xmin = _mm256_set1_ps(EXP_MIN);
        let xc = _mm256_max_ps(x, xmin);
        let t = _mm256_mul_ps(xc, _mm256_set1_ps(LOG2E));
        let magic = _mm256_set1_ps(ROUND_MAGIC);
        let n = _mm256_sub_ps(_mm256_add_ps(t, magic), magic);
        let r = _mm256_sub_ps(
            _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(LN2_HI))),
            _mm256_mul_ps(n, _mm256_set1_ps(LN2_LO)),
        );
        let mut p = _mm256_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
        }
        let e = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvttps_epi32(n),
            _mm256_set1_epi32(127),
        ));
        let res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, xmin), res)
    }
}

/// The fixed reduction of `super::lane_sum` for the 16 lanes `a` (0..8)
/// and `b` (8..16).
#[inline(always)]
pub(super) unsafe fn lane_sum16(a: __m256, b: __m256) -> f32 {
    // SAFETY: register-only operations.
    unsafe {
        let s8 = _mm256_add_ps(a, b); // l + 8
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8)); // l + 4
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); // l + 2
        let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2)); // l + 1
        _mm_cvtss_f32(s1)
    }
}

/// Visits a segment of `n` elements in halves of 8: the body runs with
/// `$j` the offset and `$mk` the lane mask, for lanes 0..8 then 8..16 of
/// each block of 16, then the tail with its masks (a half with no lane is
/// skipped); its values are accumulated into the 16 partial sums, and the
/// macro yields their [`lane_sum16`]. A macro, not a closure: a closure is
/// compiled without the enclosing function's `target_feature`s, so the
/// intrinsics in it would not be inlined (measured: 10x slower).
macro_rules! lanes {
    ($n:expr, |$j:ident, $mk:ident| $body:expr) => {{
        let n: usize = $n;
        let all = M8::all();
        let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let full = n / 16 * 16;
        let mut jj = 0;
        while jj < full {
            {
                let ($j, $mk) = (jj, all);
                a0 = _mm256_add_ps(a0, $body);
            }
            {
                let ($j, $mk) = (jj + 8, all);
                a1 = _mm256_add_ps(a1, $body);
            }
            jj += 16;
        }
        let r = n - full;
        if r > 0 {
            let ($j, $mk) = (full, M8::first(r.min(8)));
            a0 = _mm256_add_ps(a0, $body);
        }
        if r > 8 {
            let ($j, $mk) = (full + 8, M8::first(r - 8));
            a1 = _mm256_add_ps(a1, $body);
        }
        lane_sum16(a0, a1)
    }};
}

#[inline(always)]
unsafe fn xent_body(x: &mut [f32], y: &[f32]) -> f32 {
    let n = x.len();
    let xp = x.as_mut_ptr();
    let yp = y.as_ptr();
    // SAFETY (whole body): x and y hold n floats (caller); every access at
    // offset j covers lanes j..j+8 that are inside the segment, or is
    // masked (vmaskmovps touches no masked-off lane).
    unsafe {
        let ninf = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut mv = ninf;
        let mut j = 0;
        while j + 8 <= n {
            mv = _mm256_max_ps(mv, _mm256_loadu_ps(xp.add(j)));
            j += 8;
        }
        if j < n {
            let mk = mask8(n - j);
            let v = _mm256_maskload_ps(xp.add(j), mk);
            mv = _mm256_max_ps(mv, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(mk)));
        }
        let mut ma = [0.0f32; 8];
        _mm256_storeu_ps(ma.as_mut_ptr(), mv);
        let m = ma.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let ysum = lanes!(n, |j, mk| mk.ld(yp.add(j)));
        if ysum == 0.0 {
            x.fill(0.0);
            return 0.0;
        }
        let mm = _mm256_set1_ps(m);
        let a = lanes!(n, |j, mk| {
            let xv = mk.ld(xp.add(j));
            let yv = mk.ld(yp.add(j));
            _mm256_mul_ps(yv, _mm256_sub_ps(mm, xv))
        });
        let s = lanes!(n, |j, mk| {
            let xv = mk.ld(xp.add(j));
            let e = mk.keep(exp8(_mm256_sub_ps(xv, mm)));
            mk.st(xp.add(j), e);
            e
        });
        let (inv_s, inv_y) = (1.0 / s, 1.0 / ysum);
        let (is8, iy8) = (_mm256_set1_ps(inv_s), _mm256_set1_ps(inv_y));
        lanes!(n, |j, mk| {
            let ev = mk.ld(xp.add(j));
            let yv = mk.ld(yp.add(j));
            let g = _mm256_sub_ps(_mm256_mul_ps(ev, is8), _mm256_mul_ps(yv, iy8));
            mk.st(xp.add(j), g);
            _mm256_setzero_ps()
        });
        ((s as f64).ln() + a as f64 / ysum as f64) as f32
    }
}

/// A row storage format: 8 elements widened to f32 (exactly).
trait Fmt {
    type T: Copy + Default;
    unsafe fn load8(p: *const Self::T) -> __m256;
    /// `n` (1..=7) elements at `p`, the other lanes 0.
    #[inline(always)]
    unsafe fn load_tail(p: *const Self::T, n: usize, _mask: __m256i) -> __m256 {
        let mut buf = [Self::T::default(); 8];
        // SAFETY: `p` holds n readable elements; buf has room for 8 >= n.
        unsafe {
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
            Self::load8(buf.as_ptr())
        }
    }
}

struct F32;
struct Bf16;

impl Fmt for F32 {
    type T = f32;
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: 8 readable floats at p (caller).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_tail(p: *const f32, _n: usize, mask: __m256i) -> __m256 {
        // SAFETY: the lanes in `mask` are readable; the others untouched.
        unsafe { _mm256_maskload_ps(p, mask) }
    }
}

impl Fmt for Bf16 {
    type T = u16;
    #[inline(always)]
    unsafe fn load8(p: *const u16) -> __m256 {
        // SAFETY: 8 readable u16 at p (caller).
        unsafe {
            let h = _mm_loadu_si128(p.cast());
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
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

/// The transposed product, `R` (1 or 4) rows at a time: for each block of
/// 8 columns, `out` is loaded once, the rows' products are added in
/// candidate order, and it is stored back (it stays in L1).
#[inline(always)]
unsafe fn dq_rows<F: Fmt>(r: &Rows<'_, F::T>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    let (dim, stride) = (r.dim, r.stride);
    let (nb, tail) = (dim / 8, dim % 8);
    let n = ids.len();
    let w = r.w.as_ptr();
    let op = out.as_mut_ptr();
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): ids < rows and `w` spans the strided matrix, g
    // holds n values, out holds dim floats (checked by crate::train); the
    // tail lanes past dim are only touched masked or through the local
    // buffer of load_tail.
    unsafe {
        let tmask = mask8(tail);
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        for k in 0..nb {
            _mm256_storeu_ps(op.add(8 * k), _mm256_setzero_ps());
        }
        if tail > 0 {
            _mm256_maskstore_ps(op.add(8 * nb), tmask, _mm256_setzero_ps());
        }
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
                _mm256_set1_ps(gk(0)),
                _mm256_set1_ps(gk(1)),
                _mm256_set1_ps(gk(2)),
                _mm256_set1_ps(gk(3)),
            ];
            for b in 0..nb {
                let mut acc = _mm256_loadu_ps(op.add(8 * b));
                for k in 0..rr {
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(gs[k], F::load8(p[k].add(8 * b))));
                }
                _mm256_storeu_ps(op.add(8 * b), acc);
            }
            if tail > 0 {
                let mut acc = _mm256_maskload_ps(op.add(8 * nb), tmask);
                for k in 0..rr {
                    let wt = F::load_tail(p[k].add(8 * nb), tail, tmask);
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(gs[k], wt));
                }
                _mm256_maskstore_ps(op.add(8 * nb), tmask, acc);
            }
            i += rr;
        }
    }
}

/// Columns `k..k+8` (lanes of `mk`) of a row's gathered gradient:
/// `sum_t g[t] * q[s[t]][k..]` in `t` order from +0 (see `super::SgdFn`).
#[inline(always)]
unsafe fn grad8(q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize, mk: M8) -> __m256 {
    let qp = q.w.as_ptr();
    // SAFETY: every s[t] < rows of q and q.w spans them; the lanes of `mk`
    // are columns < dim (caller).
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for t in 0..g.len() {
            let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
            let x = _mm256_mul_ps(_mm256_set1_ps(*g.get_unchecked(t)), mk.ld(row));
            acc = _mm256_add_ps(acc, x);
        }
        acc
    }
}

/// One block of [`sgd_body`] (columns `k..`, `wp` at column `k`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sgd8(wp: *mut f32, q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize, mk: M8, l: __m256) {
    // SAFETY: the block's lanes at wp are inside the row (caller).
    unsafe {
        let gv = grad8(q, g, s, k, mk);
        let v = _mm256_sub_ps(mk.ld(wp), _mm256_mul_ps(l, gv));
        mk.st(wp, v);
    }
}

#[inline(always)]
unsafe fn sgd_body(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32) {
    let n = w.len();
    let wp = w.as_mut_ptr();
    // SAFETY: w holds n = dim floats (caller); the tail is masked.
    unsafe {
        let l = _mm256_set1_ps(lr);
        let mut k = 0;
        while k + 8 <= n {
            sgd8(wp.add(k), q, g, s, k, M8::all(), l);
            k += 8;
        }
        if k < n {
            sgd8(wp.add(k), q, g, s, k, M8::first(n - k), l);
        }
    }
}

/// One block of 8 lanes (masked) of [`adam_body`], with its gradient `gv`.
#[inline(always)]
unsafe fn adam8(wp: *mut f32, mp: *mut f32, vp: *mut f32, gv: __m256, mk: M8, k: [__m256; 8]) {
    let [b1, ob1, b2, ob2, c1, c2, lr, eps] = k;
    // SAFETY: the lanes of `mk` at each pointer are inside its row
    // (caller); masked lanes are not touched.
    unsafe {
        let mv = _mm256_add_ps(_mm256_mul_ps(b1, mk.ld(mp)), _mm256_mul_ps(ob1, gv));
        let vv = _mm256_add_ps(
            _mm256_mul_ps(b2, mk.ld(vp)),
            _mm256_mul_ps(ob2, _mm256_mul_ps(gv, gv)),
        );
        let mh = _mm256_mul_ps(mv, c1);
        let vh = _mm256_mul_ps(vv, c2);
        let upd = _mm256_div_ps(
            _mm256_mul_ps(lr, mh),
            _mm256_add_ps(_mm256_sqrt_ps(vh), eps),
        );
        let wv = _mm256_sub_ps(mk.ld(wp), upd);
        mk.st(mp, mv);
        mk.st(vp, vv);
        mk.st(wp, wv);
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
        let k = [
            _mm256_set1_ps(c.beta1),
            _mm256_set1_ps(c.one_minus_beta1),
            _mm256_set1_ps(c.beta2),
            _mm256_set1_ps(c.one_minus_beta2),
            _mm256_set1_ps(c.c1),
            _mm256_set1_ps(c.c2),
            _mm256_set1_ps(c.lr),
            _mm256_set1_ps(c.eps),
        ];
        let mut i = 0;
        while i + 8 <= n {
            let gv = grad8(q, g, s, i, M8::all());
            adam8(wp.add(i), mp.add(i), vp.add(i), gv, M8::all(), k);
            i += 8;
        }
        if i < n {
            let mk = M8::first(n - i);
            let gv = grad8(q, g, s, i, mk);
            adam8(wp.add(i), mp.add(i), vp.add(i), gv, mk, k);
        }
    }
}

/// # Safety
/// [`super::XentFn`]; the CPU has avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn xent_avx2(x: &mut [f32], y: &[f32]) -> f32 {
    // SAFETY: forwarded XentFn contract.
    unsafe { xent_body(x, y) }
}

/// # Safety
/// [`super::DqFn`]; the CPU has avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn dq_f32_avx2(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DqFn contract.
    unsafe { dq_rows::<F32>(r, g, ids, out) }
}

/// # Safety
/// [`super::DqFn`]; the CPU has avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn dq_bf16_avx2(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    // SAFETY: forwarded DqFn contract.
    unsafe { dq_rows::<Bf16>(r, g, ids, out) }
}

/// # Safety
/// [`super::SgdFn`]; the CPU has avx2.
#[target_feature(enable = "avx2")]
pub unsafe fn sgd_avx2(w: &mut [f32], q: &Rows<'_, f32>, g: &[f32], s: &[u32], lr: f32) {
    // SAFETY: forwarded SgdFn contract.
    unsafe { sgd_body(w, q, g, s, lr) }
}

/// # Safety
/// [`super::AdamFn`]; the CPU has avx2.
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn adam_avx2(
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
    adam_avx2 as adam, dq_bf16_avx2 as dq_bf16, dq_f32_avx2 as dq_f32, sgd_avx2 as sgd,
    xent_avx2 as xent,
};
pub use crate::kernels::matmul::avx2::prefetch;
