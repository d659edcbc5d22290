//! Backward (training) kernels of a sublinear output layer: the softmax
//! cross-entropy of one candidate segment, the transposed gathered product
//! `dq = sum_j g_j W[ids[j]]`, SGD applied position by position
//! ([`SgdSeqFn`]) and lazy Adam on a batch grouped by row ([`AdamRowsFn`]).
//! The batch-level logic (CSR segments, grouping the rows, the thread
//! split) is in [`crate::train`]; xent and dq see one segment, the updates
//! one thread's share of the batch (one call, walking it with prefetch),
//! and they index without bounds checks after the caller's checks.
//!
//! # Every tier returns the same bits
//! The operations are defined precisely enough that the scalar oracle, the
//! portable tier and the SIMD tiers compute the same f32 operations in the
//! same order, so results are **bit-identical on every tier** (tested):
//! * no fused multiply-add anywhere: a product and a sum are two roundings
//!   (`vmulps` then `vaddps`), because the portable tier has no FMA at the
//!   x86-64 baseline. The kernels are bound by memory, so this costs nothing
//!   measurable;
//! * the transposed product and Adam's per-row gradient sums accumulate
//!   each element in candidate order (`acc = acc + g_j * w_jk`, from
//!   `+0.0`); SGD applies `w - (lr g_j) q` position by position;
//! * sums over a segment (the softmax denominator, the target mass, the
//!   target-weighted logits) use [`LANES`] = 16 interleaved partial sums
//!   (lane `l` adds the elements `j = l (mod 16)` in increasing `j`),
//!   then the fixed tree `l + 8`, `l + 4`, `l + 2`, `l + 1` ([`lane_sum`]),
//!   which is one zmm register, two ymm or two `f32x8`;
//! * `exp` is the one polynomial below ([`exp_neg`]), written with the
//!   same operations on every tier; division and square root are the
//!   correctly rounded IEEE ones (`vdivps`, `vsqrtps`).
//!
//! # The exponential
//! `exp_neg(x)` for `x <= 0` (the softmax only needs `x - max <= 0`):
//! `x < -87` gives `0`; otherwise `n = round(x * log2 e)` (ties to even,
//! by adding and subtracting `1.5 * 2^23`), `r = (x - n C1) - n C2` with
//! `C1 = 355/512` (so `n C1` and the first difference are exact, by
//! Sterbenz's lemma) and `C2 = ln 2 - C1` rounded to f32, then the degree-7
//! Taylor polynomial of `e^r` by Horner (`|r| <= 0.3466 + 2^-20`), times
//! `2^n` built in the exponent bits. The derived bound, with `u = 2^-24`:
//! truncation `|r|^8 / 8! * e^|r| < 0.13 u`, reduction `< 0.4 u` (the
//! rounding of `n C2` and of the last difference, and `C1 + C2 != ln 2`),
//! and Horner's 14 roundings `<= gamma(14) * sum_k |c_k| |r|^k / e^r <=
//! gamma(14) e^{2|r|} < 28.2 u` relative (the coefficients `1/k!` rounded to
//! f32 add `< 0.1 u`), so **`|exp_neg(x) - e^x| <= EXP_REL * e^x + 2^-125`**
//! with [`EXP_REL`] `= 32 u = 2^-19` (the absolute term covers the flush to
//! zero below `-87`, where `e^x < e^-87 = 1.65e-38 < 2^-125`, and the
//! subnormal results of `-87 <= x < -86.7`).
//! `tests/train.rs` compares it with f64 `exp` on every f32 of a dense
//! sweep; the largest relative error measured is printed there.

pub use crate::kernels::matmul::Rows;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// Interleaved partial sums of every segment sum (see the module docs).
pub const LANES: usize = 16;

/// Below this, [`exp_neg`] returns 0 (`e^-87 = 1.6e-38`, just above the
/// smallest normal f32 2^-126 = 1.2e-38).
pub const EXP_MIN: f32 = -87.0;
/// `log2(e)` rounded to f32.
pub const LOG2E: f32 = std::f32::consts::LOG2_E;
/// The high part of `ln 2`: `355/512`, 9 significant bits.
pub const LN2_HI: f32 = 0.693_359_4;
/// `ln 2 - LN2_HI` rounded to f32.
pub const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5 * 2^23`: `(t + M) - M` rounds `|t| < 2^22` to the nearest integer
/// (ties to even) in the default rounding mode.
pub const ROUND_MAGIC: f32 = 12_582_912.0;
/// `1/k!` for `k = 0..=7`, rounded to f32, highest first (Horner order).
pub const EXP_POLY: [f32; 8] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];
/// The relative error bound of [`exp_neg`]: `32 * 2^-24 = 2^-19` (derived
/// in the module docs), plus an absolute `2^-125`.
pub const EXP_REL: f64 = 1.0 / 524_288.0;

// The constants above are what the module docs say they are.
const _: () = {
    assert!(LN2_HI == 355.0 / 512.0);
    assert!(ROUND_MAGIC == 1.5 * 8_388_608.0);
};

/// `e^x` for `x <= 0` (or `-inf`), as every tier computes it (see the
/// module docs for the definition and its bound). Also the tails of the
/// portable tier.
#[inline(always)]
pub fn exp_neg(x: f32) -> f32 {
    let xc = if x < EXP_MIN { EXP_MIN } else { x };
    let t = xc * LOG2E;
    let n = (t + ROUND_MAGIC) - ROUND_MAGIC;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = p * r + c;
    }
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if x < EXP_MIN {
        0.0
    } else {
        p * scale
    }
}

/// The fixed reduction of [`LANES`] partial sums: `l + 8`, `l + 4`,
/// `l + 2`, `l + 1`.
#[inline(always)]
pub fn lane_sum(mut s: [f32; LANES]) -> f32 {
    let mut h = LANES / 2;
    while h >= 1 {
        for l in 0..h {
            s[l] += s[l + h];
        }
        h /= 2;
    }
    s[0]
}

/// The coefficients of one Adam step of one row (see [`AdamFn`]), f32.
#[derive(Clone, Copy, Debug)]
pub struct AdamCoef {
    pub lr: f32,
    pub beta1: f32,
    /// `1 - beta1`, rounded to f32.
    pub one_minus_beta1: f32,
    pub beta2: f32,
    /// `1 - beta2`, rounded to f32.
    pub one_minus_beta2: f32,
    /// `1 / (1 - beta1^t)` computed in f64 and rounded to f32.
    pub c1: f32,
    /// `1 / (1 - beta2^t)` computed in f64 and rounded to f32.
    pub c2: f32,
    pub eps: f32,
}

/// `(a^t, b^t)` in f64 for `t >= 1` (`t` capped at `2^31 - 1`), by
/// repeated squaring from the lowest bit: `r = r * x` where the bit is set,
/// then `x = x * x`, each product rounded. This is the algorithm of
/// compiler-rt's `__powidf2` (what `f64::powi` called on x86-64; Rust
/// leaves `powi`'s precision unspecified), written out so that the bits
/// are the same on every platform and no call is made per row: the call
/// is a visible share of an Adam step in the L3 regime (benches/train.md).
#[inline(always)]
pub fn pow_int2(a: f64, b: f64, t: u32) -> (f64, f64) {
    let mut e = t.min(i32::MAX as u32);
    let (mut xa, mut xb) = (a, b);
    let (mut ra, mut rb) = (1.0f64, 1.0f64);
    loop {
        if e & 1 != 0 {
            ra *= xa;
            rb *= xb;
        }
        e >>= 1;
        if e == 0 {
            return (ra, rb);
        }
        xa *= xa;
        xb *= xb;
    }
}

impl AdamCoef {
    /// A step count from which on both bias corrections of
    /// [`AdamCoef::at_step`] are exactly `1.0`: the smallest `t` found by
    /// bisection with `beta^t <= 2^-26` for both betas (`u32::MAX` if
    /// none). Past it the computed `beta^t` stays below `2^-25` (a factor 2
    /// above any rounding of the repeated squaring), so `1 / (1 - beta^t)`
    /// rounds to 1.0 in f32; the SIMD kernels skip the computation there
    /// (the same bits).
    pub fn saturation_step(&self) -> u32 {
        const TINY: f64 = 1.0 / 67_108_864.0; // 2^-26
        let ok = |t: u32| {
            let (p1, p2) = pow_int2(self.beta1 as f64, self.beta2 as f64, t);
            p1 <= TINY && p2 <= TINY
        };
        if !ok(u32::MAX) {
            return u32::MAX;
        }
        let (mut lo, mut hi) = (1u32, u32::MAX);
        if ok(lo) {
            return lo;
        }
        // ok(hi), !ok(lo)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    /// The coefficients of a row's `t`-th update (`t >= 1`) with these
    /// hyper-parameters: the bias corrections `1 / (1 - beta^t)` in f64
    /// (`beta^t` by [`pow_int2`]), rounded to f32; `1 - beta` rounded to
    /// f32.
    #[inline]
    pub fn new(lr: f32, beta1: f32, beta2: f32, eps: f32, t: u32) -> AdamCoef {
        let (p1, p2) = pow_int2(beta1 as f64, beta2 as f64, t);
        AdamCoef {
            lr,
            beta1,
            one_minus_beta1: 1.0 - beta1,
            beta2,
            one_minus_beta2: 1.0 - beta2,
            c1: (1.0 / (1.0 - p1)) as f32,
            c2: (1.0 / (1.0 - p2)) as f32,
            eps,
        }
    }

    /// [`AdamCoef::new`] with `lr`, the betas and `eps` of `self`, for
    /// step `t`.
    #[inline]
    pub fn at_step(&self, t: u32) -> AdamCoef {
        AdamCoef::new(self.lr, self.beta1, self.beta2, self.eps, t)
    }
}

/// `xent(x, y)` for one non-empty segment: on entry `x` holds the logits
/// `z`, `y` the target weights (finite, `>= 0`). With `m = max z`,
/// `e_j = exp_neg(z_j - m)`, `S = lane_sum(e)`, `Y = lane_sum(y)`,
/// `A = lane_sum(y_j * (m - z_j))`: if `Y == 0`, `x` is set to 0 and the
/// loss is 0; otherwise `x_j = e_j * (1/S) - y_j * (1/Y)` (the gradient
/// `softmax - target`) and the loss is
/// `f32(ln(f64 S) + f64 A / f64 Y)`.
///
/// # Safety
/// `x.len() == y.len() >= 1`; every `z_j` finite; the CPU supports the tier.
pub type XentFn = unsafe fn(&mut [f32], &[f32]) -> f32;

/// `dq(rows, g, ids, out)`: `out[k] = sum_j g[j] * W[ids[j]][k]` for
/// `k < dim`, each element accumulated in `j` order from `+0.0`, a product
/// and a sum rounded separately (bf16 rows widened exactly).
///
/// # Safety
/// `dim >= 1`; `out.len() >= dim`; `g.len() == ids.len()`; every id is
/// below the number of rows and `w` holds `(rows - 1) * stride + dim`
/// elements; the CPU supports the tier.
pub type DqFn<T> = unsafe fn(&Rows<'_, T>, &[f32], &[u32], &mut [f32]);

/// The positions of an SGD pass in the order they are applied: for `i`
/// increasing, position `j = pos[i]` updates the row `ids[j]` of W,
/// stored at row `ids[j] - row0` of the thread's part, with its logit
/// gradient `grad[j]` and its sample's input row `q[sample[j]]`.
#[derive(Clone, Copy, Debug)]
pub struct SgdSeq<'a> {
    pub pos: &'a [u32],
    pub ids: &'a [u32],
    pub grad: &'a [f32],
    pub sample: &'a [u32],
    pub row0: usize,
}

/// `sgd_seq(w, w_stride, seq, q, lr)`: SGD applied position by position,
/// in the order of [`SgdSeq`]: with `c = lr * grad[j]` (rounded), for
/// `k < q.dim`, `w[r][k] = w[r][k] - c * q[sample[j]][k]` (product and
/// difference rounded separately). A row that occurs at several positions
/// receives their updates one after the other, in position order. `w` is
/// the thread's part of W: rows of `q.dim` floats at stride `w_stride`.
/// The SIMD tiers prefetch the rows [`PREFETCH_ROWS`] positions ahead
/// (`crate::kernels::matmul::PREFETCH_ROWS`).
///
/// # Safety
/// `q.dim >= 1`; every `pos[i]` is below `ids.len()`, `grad.len()` and
/// `sample.len()`; for every such `j`, `ids[j] >= row0` and `w` holds
/// `(ids[j] - row0) * w_stride + q.dim` floats, `sample[j]` is a row of `q`
/// and `q.w` spans it; the CPU supports the tier.
pub type SgdSeqFn = unsafe fn(&mut [f32], usize, &SgdSeq<'_>, &Rows<'_, f32>, f32);

/// `sgd_rows(w, w_stride, groups, q, lr)`: the same operations as
/// [`SgdSeqFn`] (each row's positions applied one after the other, in
/// position order, `c = lr * g[t]` then `w - c * q[s[t]]`), on a batch
/// grouped by row ([`Groups`]): so the same bits as [`SgdSeqFn`] over the
/// same positions, with each row read and written once instead of once per
/// position (the SIMD tiers hold a block of 8 vectors of the row in
/// registers while its positions are applied). Worth it when rows repeat.
///
/// # Safety
/// As [`AdamRowsFn`] for `w`, `w_stride`, `groups` and `q`.
pub type SgdRowsFn = unsafe fn(&mut [f32], usize, &Groups<'_>, &Rows<'_, f32>, f32);

/// Adam's per-row state, split like W: `m` and `v` rows of `dim` floats
/// (stride `dim`, row `r - row0` of the part for row `r`) and the step
/// count `t` of each row.
#[derive(Debug)]
pub struct AdamState<'a> {
    pub m: &'a mut [f32],
    pub v: &'a mut [f32],
    pub t: &'a mut [u32],
}

/// One thread's share of a batch grouped by row (built by
/// [`crate::train`]): group `i` is the row `row[i]` of W, stored at row
/// `row[i] - row0` of the thread's part of W and of Adam's state, and its
/// positions are `start[i]..start[i + 1]` of `g` (the logit gradients) and
/// `s` (their samples: rows of `q`), in increasing batch position. Rows
/// increase with `i`.
#[derive(Clone, Copy, Debug)]
pub struct Groups<'a> {
    pub row: &'a [u32],
    /// `row.len() + 1` offsets into `g` and `s`.
    pub start: &'a [usize],
    pub row0: usize,
    pub g: &'a [f32],
    pub s: &'a [u32],
}

/// The Adam update of one row (`w`, its moments `m`, `v`) with its
/// gathered gradient: for `k < w.len()`, `G_k = sum_t g[t] * q[s[t]][k]`
/// over the row's positions (summed in `t` order from `+0`, product and sum
/// rounded separately, exactly as [`DqFn`]), then, each operation rounded in f32 in this
/// order: `m = b1 * m + (1 - b1) * G`, `v = b2 * v + (1 - b2) * (G * G)`,
/// `mh = m * c1`, `vh = v * c2`, `w = w - (lr * mh) / (sqrt(vh) + eps)`.
///
/// `adam_rows(w, w_stride, state, groups, q, c)` applies it to every group
/// of [`Groups`] (`w` the thread's part of W, rows of `q.dim` floats at
/// stride `w_stride`): the row's step count `t` is incremented (saturating)
/// and `c1`, `c2` are those of [`AdamCoef::at_step`] for it (`c` gives
/// `lr`, the betas and `eps`). One call per thread and batch: the SIMD
/// tiers walk the groups themselves, prefetching the rows of W, `m` and `v`
/// [`PREFETCH_ROWS`] groups ahead, and sum each block of 8 vectors of
/// columns in registers (`G` is never stored).
///
/// # Safety
/// `q.dim >= 1`; `w` holds `(row[i] - row0) * w_stride + q.dim` floats for
/// every group; `start` is non-decreasing, `start.len() == row.len() + 1`
/// and its last entry `<= g.len() == s.len()`; every `s[t]` is below the
/// number of rows of `q` and `q.w` spans them; `state.m`, `state.v` hold
/// `(row[i] - row0 + 1) * q.dim` floats and `state.t` `row[i] - row0 + 1`
/// counts for every group; the CPU supports the tier.
pub type AdamRowsFn =
    unsafe fn(&mut [f32], usize, &mut AdamState<'_>, &Groups<'_>, &Rows<'_, f32>, &AdamCoef);

/// Applies `f(row, positions' g, positions' s)` to every group in order,
/// with the row's slice of the part `w` (the scalar and portable tiers'
/// `*_rows`, which check bounds).
pub(crate) fn for_each_group(
    w: &mut [f32],
    w_stride: usize,
    dim: usize,
    grp: &Groups<'_>,
    mut f: impl FnMut(usize, &mut [f32], &[f32], &[u32]),
) {
    for (i, &r) in grp.row.iter().enumerate() {
        let r = r as usize - grp.row0;
        let (a, b) = (grp.start[i], grp.start[i + 1]);
        f(
            r,
            &mut w[r * w_stride..r * w_stride + dim],
            &grp.g[a..b],
            &grp.s[a..b],
        );
    }
}

#[cfg(target_arch = "x86_64")]
use crate::kernels::matmul::{PREFETCH_MAX_BYTES, PREFETCH_ROWS};
#[cfg(target_arch = "x86_64")]
use crate::kernels::simd::{prefetch_row, F32x, Fmt, Widen};

/// [`exp_neg`] lane-wise: the same operations on vectors (`vmaxps` clamp,
/// the `1.5 * 2^23` rounding, `2^n` in the exponent bits, the flush to
/// zero below [`EXP_MIN`]).
///
/// # Safety
/// The caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn exp_simd<S: F32x>(x: S::V) -> S::V {
    // SAFETY: register-only operations (caller enables the features).
    unsafe {
        let xmin = S::splat(EXP_MIN);
        let xc = S::max(x, xmin);
        let t = S::mul(xc, S::splat(LOG2E));
        let magic = S::splat(ROUND_MAGIC);
        let n = S::sub(S::add(t, magic), magic);
        let r = S::sub(
            S::sub(xc, S::mul(n, S::splat(LN2_HI))),
            S::mul(n, S::splat(LN2_LO)),
        );
        let mut p = S::splat(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = S::add(S::mul(p, r), S::splat(c));
        }
        let res = S::mul(p, S::pow2i(n));
        S::zero_below(x, xmin, res)
    }
}

/// Visits a segment of `n` elements in blocks of [`LANES`], each block as
/// `LANES / S::LANES` vectors: the body runs with `$j` the offset and `$mk`
/// the lane mask (all lanes, then the tail's; a vector with no lane in the
/// tail is skipped); vector `x` of each block is accumulated into partial
/// sum vector `x`, and the macro yields their [`F32x::sum16`]. A macro, not
/// a closure: a closure is compiled without the enclosing function's
/// `target_feature`s, so the intrinsics in it would not be inlined but
/// called, one call per intrinsic (benches/train.md, "Closures around
/// intrinsics").
#[cfg(target_arch = "x86_64")]
macro_rules! lanes {
    ($S:ty, $n:expr, |$j:ident, $mk:ident| $body:expr) => {{
        let n: usize = $n;
        let l = <$S as F32x>::LANES;
        let all = <$S as F32x>::all();
        let mut acc = [<$S as F32x>::zero(); 2];
        let full = n / LANES * LANES;
        let mut jj = 0;
        while jj < full {
            for x in 0..LANES / l {
                let ($j, $mk) = (jj + l * x, all);
                acc[x] = <$S as F32x>::add(acc[x], $body);
            }
            jj += LANES;
        }
        let r = n - full;
        for x in 0..LANES / l {
            if r > l * x {
                let ($j, $mk) = (full + l * x, <$S as F32x>::first((r - l * x).min(l)));
                acc[x] = <$S as F32x>::add(acc[x], $body);
            }
        }
        <$S as F32x>::sum16(acc)
    }};
}

/// The SIMD tiers' [`XentFn`] (its definition, lane-wise; the segment sums
/// through `lanes!`).
///
/// # Safety
/// [`XentFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn xent_simd<S: F32x>(x: &mut [f32], y: &[f32]) -> f32 {
    let n = x.len();
    let l = S::LANES;
    let xp = x.as_mut_ptr();
    let yp = y.as_ptr();
    // SAFETY (whole body): x and y hold n floats (caller); every access at
    // offset j covers lanes j..j+LANES that are inside the segment, or is
    // masked (no masked-off lane is touched).
    unsafe {
        let ninf = S::splat(f32::NEG_INFINITY);
        let mut mv = ninf;
        let mut j = 0;
        while j + l <= n {
            mv = S::max(mv, S::loadu(xp.add(j)));
            j += l;
        }
        if j < n {
            mv = S::max(mv, S::ld_or(S::tail(n - j), xp.add(j), ninf));
        }
        let mut ma = [0.0f32; LANES];
        S::storeu(ma.as_mut_ptr(), mv);
        let m = ma[..l].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let ysum = lanes!(S, n, |j, mk| S::ld(mk, yp.add(j)));
        if ysum == 0.0 {
            x.fill(0.0);
            return 0.0;
        }
        let mm = S::splat(m);
        let a = lanes!(S, n, |j, mk| {
            let xv = S::ld(mk, xp.add(j));
            let yv = S::ld(mk, yp.add(j));
            S::mul(yv, S::sub(mm, xv))
        });
        let s = lanes!(S, n, |j, mk| {
            let xv = S::ld(mk, xp.add(j));
            let e = S::keep(mk, exp_simd::<S>(S::sub(xv, mm)));
            S::st(mk, xp.add(j), e);
            e
        });
        let (inv_s, inv_y) = (1.0 / s, 1.0 / ysum);
        let (isv, iyv) = (S::splat(inv_s), S::splat(inv_y));
        lanes!(S, n, |j, mk| {
            let ev = S::ld(mk, xp.add(j));
            let yv = S::ld(mk, yp.add(j));
            let g = S::sub(S::mul(ev, isv), S::mul(yv, iyv));
            S::st(mk, xp.add(j), g);
            S::zero()
        });
        ((s as f64).ln() + a as f64 / ysum as f64) as f32
    }
}

/// The SIMD tiers' [`DqFn`], 4 rows (or 1 at the end) at a time: for each
/// vector of columns `out` is loaded once, the rows' products are added in
/// candidate order, and it is stored back (it stays in L1); the `dim %
/// LANES` tail masked (or through a buffer); the rows `PREFETCH_ROWS`
/// candidates ahead prefetched, as in the forward gathered matmul.
///
/// # Safety
/// [`DqFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn dq_simd<S: Widen<F>, F: Fmt>(
    r: &Rows<'_, F::T>,
    g: &[f32],
    ids: &[u32],
    out: &mut [f32],
) {
    let l = S::LANES;
    let (dim, stride) = (r.dim, r.stride);
    let (nb, tail) = (dim / l, dim % l);
    let n = ids.len();
    let w = r.w.as_ptr();
    let op = out.as_mut_ptr();
    let pf_bytes = (dim * std::mem::size_of::<F::T>()).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): ids < rows and `w` spans the strided matrix, g
    // holds n values, out holds dim floats (checked by crate::train); the
    // tail lanes past dim are only touched masked or through the local
    // buffer of load_tail.
    unsafe {
        let tm = S::tail(tail);
        let row = |j: usize| w.add(*ids.get_unchecked(j) as usize * stride);
        for k in 0..nb {
            S::storeu(op.add(l * k), S::zero());
        }
        if tail > 0 {
            S::st(tm, op.add(l * nb), S::zero());
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
                S::splat(gk(0)),
                S::splat(gk(1)),
                S::splat(gk(2)),
                S::splat(gk(3)),
            ];
            for b in 0..nb {
                let mut acc = S::loadu(op.add(l * b));
                for k in 0..rr {
                    acc = S::add(acc, S::mul(gs[k], S::load(p[k].add(l * b))));
                }
                S::storeu(op.add(l * b), acc);
            }
            if tail > 0 {
                let mut acc = S::ld(tm, op.add(l * nb));
                for k in 0..rr {
                    let wt = S::load_tail(p[k].add(l * nb), tail, tm);
                    acc = S::add(acc, S::mul(gs[k], wt));
                }
                S::st(tm, op.add(l * nb), acc);
            }
            i += rr;
        }
    }
}

/// The scalar and portable tiers' [`SgdSeqFn`], with the tier's
/// `step(row, c, q_row)`: `row[k] = row[k] - c * q_row[k]` (checked
/// indexing).
pub(crate) fn sgd_seq_with(
    w: &mut [f32],
    w_stride: usize,
    sq: &SgdSeq<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
    step: impl Fn(&mut [f32], f32, &[f32]),
) {
    let dim = q.dim;
    for &j in sq.pos {
        let j = j as usize;
        let r = sq.ids[j] as usize - sq.row0;
        let s = sq.sample[j] as usize;
        step(
            &mut w[r * w_stride..r * w_stride + dim],
            lr * sq.grad[j],
            &q.w[s * q.stride..s * q.stride + dim],
        );
    }
}

/// The scalar and portable tiers' [`SgdRowsFn`], with the tier's `step`
/// (as [`sgd_seq_with`]).
pub(crate) fn sgd_rows_with(
    w: &mut [f32],
    w_stride: usize,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
    step: impl Fn(&mut [f32], f32, &[f32]),
) {
    let dim = q.dim;
    for_each_group(w, w_stride, dim, grp, |_, row, g, s| {
        for (&gt, &sj) in g.iter().zip(s) {
            let qr = &q.w[sj as usize * q.stride..sj as usize * q.stride + dim];
            step(row, lr * gt, qr);
        }
    });
}

/// The scalar and portable tiers' [`AdamRowsFn`], with the tier's
/// one-row update `row(w, m, v, q, g, s, coefficients)`.
#[allow(clippy::type_complexity)]
pub(crate) fn adam_rows_with(
    w: &mut [f32],
    w_stride: usize,
    st: &mut AdamState<'_>,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    c: &AdamCoef,
    row: fn(&mut [f32], &mut [f32], &mut [f32], &Rows<'_, f32>, &[f32], &[u32], &AdamCoef),
) {
    let dim = q.dim;
    for_each_group(w, w_stride, dim, grp, |r, wr, g, s| {
        let t = st.t[r].saturating_add(1);
        st.t[r] = t;
        let (m, v) = (
            &mut st.m[r * dim..(r + 1) * dim],
            &mut st.v[r * dim..(r + 1) * dim],
        );
        row(wr, m, v, q, g, s, &c.at_step(t));
    });
}

/// Visits the columns of a row of `dim` floats in blocks of vectors of
/// `l` lanes: [`BLOCK`] vectors while they fit, then 4, 2 and 1 (each at
/// most once), as `$block!(n, k)` with a literal `n` (so that the block's
/// registers are an array of constant size), then the `dim % l` tail as
/// `$tail` with `$k` its first column.
#[cfg(target_arch = "x86_64")]
macro_rules! row_blocks {
    ($dim:expr, $l:expr, $block:ident, |$k:ident| $tail:expr) => {{
        let (dim, l) = ($dim, $l);
        let mut $k = 0;
        while $k + BLOCK * l <= dim {
            $block!(8, $k);
            $k += BLOCK * l;
        }
        let rem = (dim - $k) / l;
        if rem & 4 != 0 {
            $block!(4, $k);
            $k += 4 * l;
        }
        if rem & 2 != 0 {
            $block!(2, $k);
            $k += 2 * l;
        }
        if rem & 1 != 0 {
            $block!(1, $k);
            $k += l;
        }
        if $k < dim {
            $tail
        }
    }};
}

/// Vectors per block of columns in the SIMD row updates: the block's
/// gradient sums stay in registers (8 zmm = 128 columns, 8 ymm = 64) while
/// the row's positions are walked once.
#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 8;

/// The `N` full vectors of columns `k..k + N * LANES` of a row's gathered
/// gradient: `sum_t g[t] * q[s[t]][k..]` in `t` order from +0 (see
/// [`AdamRowsFn`]); each position's `g` and sample read once per block.
///
/// # Safety
/// Every `s[t]` is a row of `q` and `q.w` spans it; `k + N * LANES <=
/// q.dim`; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn grad_block<S: F32x, const N: usize>(
    q: &Rows<'_, f32>,
    g: &[f32],
    s: &[u32],
    k: usize,
) -> [S::V; N] {
    let qp = q.w.as_ptr();
    // SAFETY: see above.
    unsafe {
        let mut acc = [S::zero(); N];
        for t in 0..g.len() {
            let gb = S::splat(*g.get_unchecked(t));
            let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
            for (x, a) in acc.iter_mut().enumerate() {
                *a = S::add(*a, S::mul(gb, S::loadu(row.add(x * S::LANES))));
            }
        }
        acc
    }
}

/// The lanes of `mk` of columns `k..` of a row's gathered gradient (the
/// masked tail of [`grad_block`]).
///
/// # Safety
/// As [`grad_block`], the lanes of `mk` being columns `< q.dim`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn grad_tail<S: F32x>(q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize, mk: S::M) -> S::V {
    let qp = q.w.as_ptr();
    // SAFETY: see above.
    unsafe {
        let mut acc = S::zero();
        for t in 0..g.len() {
            let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
            acc = S::add(acc, S::mul(S::splat(*g.get_unchecked(t)), S::ld(mk, row)));
        }
        acc
    }
}

/// What a SIMD grouped row update does with each row of the walk
/// ([`rows_simd`], shared): Adam sums the row's gradient block by block and
/// applies its step ([`row_update`]); SGD applies the row's positions one
/// after the other ([`SgdRowV`]).
#[cfg(target_arch = "x86_64")]
trait RowRule<S: F32x> {
    /// Updates the row at `wp` (state at `moff`) with its positions `g`,
    /// `s`.
    ///
    /// # Safety
    /// The row (and its state) holds `q.dim` floats; every `s[t]` is a row
    /// of `q`; the caller enables `S`'s features.
    unsafe fn update_row(&self, wp: *mut f32, moff: usize, q: &Rows<'_, f32>, g: &[f32], s: &[u32]);
    /// Prefetches the state rows of the part's row `r` (`bytes` each).
    fn prefetch(&self, r: usize, bytes: usize);
    /// Called before the part's row `r` is updated (Adam: its step count
    /// and coefficients).
    ///
    /// # Safety
    /// `r` is a row of the part; the caller enables `S`'s features.
    unsafe fn begin(&mut self, r: usize);
}

/// Adam's step with the current row's coefficients `c` =
/// `[b1, 1 - b1, b2, 1 - b2, c1, c2, lr, eps]` (set by `begin` from `base`
/// and the row's step count in `t`) on the moments at `m`, `v`.
#[cfg(target_arch = "x86_64")]
struct AdamV<'a, V> {
    c: [V; 8],
    base: &'a AdamCoef,
    /// [`AdamCoef::saturation_step`] of `base`, and the coefficients of
    /// every step from it on (both corrections 1).
    sat: u32,
    sat_coef: AdamCoef,
    m: *mut f32,
    v: *mut f32,
    t: *mut u32,
    dim: usize,
}

#[cfg(target_arch = "x86_64")]
impl<V: Copy> AdamV<'_, V> {
    /// Adam's step on the lanes of `mk` at column `k` of the row (at `wp`
    /// in W's part, at `moff` in the state's), with its gradient `gv`.
    ///
    /// # Safety
    /// The lanes are inside the row; the caller enables `S`'s features.
    #[inline(always)]
    unsafe fn apply<S: F32x<V = V>>(
        &self,
        wp: *mut f32,
        moff: usize,
        k: usize,
        gv: S::V,
        mk: S::M,
    ) {
        let [b1, ob1, b2, ob2, c1, c2, lr, eps] = self.c;
        // SAFETY: the lanes of mk at wp + k and at moff + k of m and v are
        // the row's (caller); masked lanes are not touched.
        unsafe {
            let (wp, mp, vp) = (wp.add(k), self.m.add(moff + k), self.v.add(moff + k));
            let mv = S::add(S::mul(b1, S::ld(mk, mp)), S::mul(ob1, gv));
            let vv = S::add(S::mul(b2, S::ld(mk, vp)), S::mul(ob2, S::mul(gv, gv)));
            let mh = S::mul(mv, c1);
            let vh = S::mul(vv, c2);
            let upd = S::div(S::mul(lr, mh), S::add(S::sqrt(vh), eps));
            let wv = S::sub(S::ld(mk, wp), upd);
            S::st(mk, mp, mv);
            S::st(mk, vp, vv);
            S::st(mk, wp, wv);
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl<S: F32x> RowRule<S> for AdamV<'_, S::V> {
    #[inline(always)]
    unsafe fn update_row(
        &self,
        wp: *mut f32,
        moff: usize,
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    ) {
        // SAFETY: the caller's contract.
        unsafe { row_update::<S>(self, wp, moff, q, g, s) }
    }
    #[inline(always)]
    fn prefetch(&self, r: usize, bytes: usize) {
        prefetch_row(self.m.wrapping_add(r * self.dim).cast(), bytes);
        prefetch_row(self.v.wrapping_add(r * self.dim).cast(), bytes);
    }
    #[inline(always)]
    unsafe fn begin(&mut self, r: usize) {
        // SAFETY: `t` holds a count for every row of the part (caller).
        unsafe {
            let t = (*self.t.add(r)).saturating_add(1);
            *self.t.add(r) = t;
            let k = if t >= self.sat {
                self.sat_coef
            } else {
                self.base.at_step(t)
            };
            self.c = [
                S::splat(k.beta1),
                S::splat(k.one_minus_beta1),
                S::splat(k.beta2),
                S::splat(k.one_minus_beta2),
                S::splat(k.c1),
                S::splat(k.c2),
                S::splat(k.lr),
                S::splat(k.eps),
            ];
        }
    }
}

/// One row of Adam's SIMD update: blocks of [`BLOCK`] vectors of columns
/// (the gradient of a block summed in registers, then the step applied),
/// the remaining full vectors in blocks of 4, 2, 1, the tail masked.
///
/// # Safety
/// The row at `wp` (and the state at `moff`) holds `q.dim` floats; as
/// [`grad_block`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn row_update<S: F32x>(
    rule: &AdamV<'_, S::V>,
    wp: *mut f32,
    moff: usize,
    q: &Rows<'_, f32>,
    g: &[f32],
    s: &[u32],
) {
    let (dim, l) = (q.dim, S::LANES);
    // (No closure around intrinsics: see `lanes!`.)
    macro_rules! block {
        ($n:literal, $k:expr) => {{
            let acc = grad_block::<S, $n>(q, g, s, $k);
            for (x, a) in acc.into_iter().enumerate() {
                rule.apply::<S>(wp, moff, $k + x * l, a, S::all());
            }
        }};
    }
    // SAFETY: every block is inside the row (k + n * l <= dim), the tail
    // masked (caller's contract for the rest).
    unsafe {
        row_blocks!(dim, l, block, |k| {
            let mk = S::tail(dim - k);
            rule.apply::<S>(wp, moff, k, grad_tail::<S>(q, g, s, k, mk), mk);
        })
    }
}

/// Walks the groups of one thread's part: prefetches W's row (and the
/// rule's state rows) [`PREFETCH_ROWS`] groups ahead, then updates the
/// row.
///
/// # Safety
/// [`AdamRowsFn`]'s contract for `w`, `w_stride`, `grp`, `q` (and the
/// rule's for its state); the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rows_simd<S: F32x, R: RowRule<S>>(
    w: &mut [f32],
    w_stride: usize,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    rule: &mut R,
) {
    let dim = q.dim;
    let n = grp.row.len();
    let wp = w.as_mut_ptr();
    let pf_bytes = (dim * 4).min(PREFETCH_MAX_BYTES);
    // SAFETY (whole body): every group's row is inside the part and its
    // positions inside g and s (the contract); prefetches never fault.
    unsafe {
        let rel = |i: usize| *grp.row.get_unchecked(i) as usize - grp.row0;
        for i in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(wp.wrapping_add(rel(i) * w_stride).cast(), pf_bytes);
            rule.prefetch(rel(i), pf_bytes);
        }
        for i in 0..n {
            if i + PREFETCH_ROWS < n {
                let r = rel(i + PREFETCH_ROWS);
                prefetch_row(wp.wrapping_add(r * w_stride).cast(), pf_bytes);
                rule.prefetch(r, pf_bytes);
            }
            let r = rel(i);
            rule.begin(r);
            let (a, b) = (*grp.start.get_unchecked(i), *grp.start.get_unchecked(i + 1));
            rule.update_row(
                wp.add(r * w_stride),
                r * dim,
                q,
                grp.g.get_unchecked(a..b),
                grp.s.get_unchecked(a..b),
            );
        }
    }
}

/// SGD on a grouped row: the row's positions applied one after the other
/// ([`SgdSeqFn`]'s operations), the row held in registers block by block
/// (8, then 4, 2, 1 vectors, then the masked tail) so that it is read and
/// written once however many positions it has.
#[cfg(target_arch = "x86_64")]
struct SgdRowV {
    lr: f32,
}

#[cfg(target_arch = "x86_64")]
impl<S: F32x> RowRule<S> for SgdRowV {
    #[inline(always)]
    unsafe fn update_row(
        &self,
        wp: *mut f32,
        _moff: usize,
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    ) {
        let (dim, l) = (q.dim, S::LANES);
        let qp = q.w.as_ptr();
        // (No closure around intrinsics: see `lanes!`.)
        macro_rules! block {
            ($n:literal, $k:expr) => {{
                let k = $k;
                let mut acc = [S::zero(); $n];
                for (x, a) in acc.iter_mut().enumerate() {
                    *a = S::loadu(wp.add(k + x * l));
                }
                for t in 0..g.len() {
                    let c = S::splat(self.lr * *g.get_unchecked(t));
                    let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
                    for (x, a) in acc.iter_mut().enumerate() {
                        *a = S::sub(*a, S::mul(c, S::loadu(row.add(x * l))));
                    }
                }
                for (x, a) in acc.into_iter().enumerate() {
                    S::storeu(wp.add(k + x * l), a);
                }
            }};
        }
        // SAFETY: every block is inside the row (k + n * l <= dim), the
        // tail masked; every s[t] is a row of q (caller).
        unsafe {
            row_blocks!(dim, l, block, |k| {
                let mk = S::tail(dim - k);
                let mut a = S::ld(mk, wp.add(k));
                for t in 0..g.len() {
                    let c = S::splat(self.lr * *g.get_unchecked(t));
                    let row = qp.add(*s.get_unchecked(t) as usize * q.stride + k);
                    a = S::sub(a, S::mul(c, S::ld(mk, row)));
                }
                S::st(mk, wp.add(k), a);
            })
        }
    }
    #[inline(always)]
    fn prefetch(&self, _r: usize, _bytes: usize) {}
    #[inline(always)]
    unsafe fn begin(&mut self, _r: usize) {}
}

/// The SIMD tiers' [`SgdRowsFn`].
///
/// # Safety
/// [`SgdRowsFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn sgd_rows_simd<S: F32x>(
    w: &mut [f32],
    w_stride: usize,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
) {
    if grp.row.is_empty() {
        return;
    }
    // SAFETY: rows_simd's contract (caller).
    unsafe { rows_simd::<S, SgdRowV>(w, w_stride, grp, q, &mut SgdRowV { lr }) }
}

/// The SIMD tiers' [`SgdSeqFn`]: per position, `c = lr * grad[j]`
/// broadcast, then the row rewritten as `w - c * q` (full vectors, then the
/// tail masked); the row [`PREFETCH_ROWS`] positions ahead prefetched, as
/// in the forward gathered matmul. The first `min(dim / LANES, 8)` vectors
/// of the current sample's `q` stay in registers while its positions are
/// walked (reloaded when the sample changes); the rest is read per
/// position. Same operations either way, so the same bits: holding `q` only
/// removes loads, but the loads of `q` after the stores to W stall the
/// loop, and without them the L3 update runs at the memory floor
/// (benches/train.md, "q held in registers in batch-order SGD").
///
/// # Safety
/// [`SgdSeqFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn sgd_seq_simd<S: F32x>(
    w: &mut [f32],
    w_stride: usize,
    sq: &SgdSeq<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        match (q.dim / S::LANES).min(BLOCK) {
            0 => sgd_seq_n::<S, 0>(w, w_stride, sq, q, lr),
            1 => sgd_seq_n::<S, 1>(w, w_stride, sq, q, lr),
            2 => sgd_seq_n::<S, 2>(w, w_stride, sq, q, lr),
            3 => sgd_seq_n::<S, 3>(w, w_stride, sq, q, lr),
            4 => sgd_seq_n::<S, 4>(w, w_stride, sq, q, lr),
            5 => sgd_seq_n::<S, 5>(w, w_stride, sq, q, lr),
            6 => sgd_seq_n::<S, 6>(w, w_stride, sq, q, lr),
            7 => sgd_seq_n::<S, 7>(w, w_stride, sq, q, lr),
            _ => sgd_seq_n::<S, 8>(w, w_stride, sq, q, lr),
        }
    }
}

/// [`sgd_seq_simd`] with the first `N` vectors of `q`'s row in registers
/// (`N * LANES <= q.dim`).
///
/// # Safety
/// [`SgdSeqFn`]; `N * S::LANES <= q.dim`; the caller enables `S`'s
/// features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sgd_seq_n<S: F32x, const N: usize>(
    w: &mut [f32],
    w_stride: usize,
    sq: &SgdSeq<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
) {
    let (dim, l) = (q.dim, S::LANES);
    let n = sq.pos.len();
    let (wp, qp) = (w.as_mut_ptr(), q.w.as_ptr());
    let pf_bytes = (dim * 4).min(PREFETCH_MAX_BYTES);
    let (tail, full) = (dim % l, dim - dim % l);
    // SAFETY (whole body): every position's row is inside the part, its
    // sample a row of q, its index inside ids, grad, sample (the
    // contract); N * l <= full; the tail is masked; prefetches never
    // fault.
    unsafe {
        if n == 0 {
            return;
        }
        let at = |i: usize| *sq.pos.get_unchecked(i) as usize;
        let rel = |j: usize| *sq.ids.get_unchecked(j) as usize - sq.row0;
        for i in 0..n.min(PREFETCH_ROWS) {
            prefetch_row(wp.wrapping_add(rel(at(i)) * w_stride).cast(), pf_bytes);
        }
        // The sample whose first N vectors of q are held, and its row (no
        // closure around intrinsics: see `lanes!`).
        let mut held_sample = *sq.sample.get_unchecked(at(0));
        let mut qr = qp.add(held_sample as usize * q.stride);
        let mut held = load_vectors::<S, N>(qr);
        for i in 0..n {
            if i + PREFETCH_ROWS < n {
                let r = rel(at(i + PREFETCH_ROWS));
                prefetch_row(wp.wrapping_add(r * w_stride).cast(), pf_bytes);
            }
            let j = at(i);
            let sample = *sq.sample.get_unchecked(j);
            if sample != held_sample {
                held_sample = sample;
                qr = qp.add(sample as usize * q.stride);
                held = load_vectors::<S, N>(qr);
            }
            let c = S::splat(lr * *sq.grad.get_unchecked(j));
            let wr = wp.add(rel(j) * w_stride);
            for (x, v) in held.iter().enumerate() {
                let o = x * l;
                S::storeu(wr.add(o), S::sub(S::loadu(wr.add(o)), S::mul(c, *v)));
            }
            let mut k = N * l;
            while k + 4 * l <= full {
                for x in 0..4 {
                    let o = k + x * l;
                    let v = S::sub(S::loadu(wr.add(o)), S::mul(c, S::loadu(qr.add(o))));
                    S::storeu(wr.add(o), v);
                }
                k += 4 * l;
            }
            while k < full {
                let v = S::sub(S::loadu(wr.add(k)), S::mul(c, S::loadu(qr.add(k))));
                S::storeu(wr.add(k), v);
                k += l;
            }
            if tail > 0 {
                let tm = S::tail(tail);
                let v = S::sub(S::ld(tm, wr.add(k)), S::mul(c, S::ld(tm, qr.add(k))));
                S::st(tm, wr.add(k), v);
            }
        }
    }
}

/// The `N` vectors at `p` (unaligned loads).
///
/// # Safety
/// `p` spans `N * S::LANES` floats; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_vectors<S: F32x, const N: usize>(p: *const f32) -> [S::V; N] {
    // SAFETY: see above.
    unsafe {
        let mut v = [S::zero(); N];
        for (x, v) in v.iter_mut().enumerate() {
            *v = S::loadu(p.add(x * S::LANES));
        }
        v
    }
}

/// The SIMD tiers' [`AdamRowsFn`].
///
/// # Safety
/// [`AdamRowsFn`]; the caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn adam_rows_simd<S: F32x>(
    w: &mut [f32],
    w_stride: usize,
    st: &mut AdamState<'_>,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    c: &AdamCoef,
) {
    if grp.row.is_empty() {
        return;
    }
    let sat = c.saturation_step();
    // SAFETY: the state holds every group's row (the contract); the
    // splat is register-only.
    unsafe {
        let mut rule = AdamV {
            c: [S::zero(); 8],
            base: c,
            sat,
            sat_coef: c.at_step(sat),
            m: st.m.as_mut_ptr(),
            v: st.v.as_mut_ptr(),
            t: st.t.as_mut_ptr(),
            dim: q.dim,
        };
        rows_simd::<S, AdamV<'_, S::V>>(w, w_stride, grp, q, &mut rule);
    }
}

/// The entry points of a tier.
pub struct Kernels {
    pub xent: XentFn,
    pub dq_f32: DqFn<f32>,
    pub dq_bf16: DqFn<u16>,
    pub sgd_seq: SgdSeqFn,
    pub sgd_rows: SgdRowsFn,
    pub adam_rows: AdamRowsFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it).
    Kernels {
        xent: xent,
        dq_f32: dq_f32,
        dq_bf16: dq_bf16,
        sgd_seq: sgd_seq,
        sgd_rows: sgd_rows,
        adam_rows: adam_rows,
    }
}

/// The entry points of the two SIMD tiers, listed once: `avx2.rs` and
/// `avx512.rs` each instantiate them with their target features and vector
/// type (`crate::kernels::simd::entries!` writes the functions).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_entries {
    ($feat:literal, $T:ty) => {
        $crate::kernels::simd::entries! { $feat;
            /// [`super::XentFn`].
            fn xent(x: &mut [f32], y: &[f32]) -> f32 => super::xent_simd::<$T>;
            /// [`super::DqFn`] of f32 rows.
            fn dq_f32(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32])
                => super::dq_simd::<$T, F32>;
            /// [`super::DqFn`] of bf16 rows.
            fn dq_bf16(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32])
                => super::dq_simd::<$T, Bf16>;
            /// [`super::SgdSeqFn`].
            fn sgd_seq(w: &mut [f32], w_stride: usize, sq: &SgdSeq<'_>, q: &Rows<'_, f32>, lr: f32)
                => super::sgd_seq_simd::<$T>;
            /// [`super::SgdRowsFn`].
            fn sgd_rows(w: &mut [f32], w_stride: usize, grp: &Groups<'_>, q: &Rows<'_, f32>, lr: f32)
                => super::sgd_rows_simd::<$T>;
            /// [`super::AdamRowsFn`].
            fn adam_rows(
                w: &mut [f32],
                w_stride: usize,
                st: &mut AdamState<'_>,
                grp: &Groups<'_>,
                q: &Rows<'_, f32>,
                c: &AdamCoef,
            ) => super::adam_rows_simd::<$T>;
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_entries;
