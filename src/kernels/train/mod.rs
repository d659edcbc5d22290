//! Backward (training) kernels of a sublinear output layer: the softmax
//! cross-entropy of one candidate segment, the transposed gathered product
//! `dq = sum_j g_j W[ids[j]]`, and the element-wise SGD and Adam updates of
//! one row. The batch-level logic (CSR segments, grouping the rows of a
//! batch, threads) is in [`crate::train`]; kernels see one segment or one
//! row and index without bounds checks after the caller's checks.
//!
//! # Every tier returns the same bits
//! The operations are defined precisely enough that the scalar oracle, the
//! portable tier and the SIMD tiers compute the same f32 operations in the
//! same order, so results are **bit-identical on every tier** (tested):
//! * no fused multiply-add anywhere: a product and a sum are two roundings
//!   (`vmulps` then `vaddps`), because the portable tier has no FMA at the
//!   x86-64 baseline. The kernels are bound by memory, so this costs nothing
//!   measurable;
//! * the transposed product and the per-row gradient sums accumulate each
//!   element in candidate order (`acc = acc + g_j * w_jk`, from `+0.0`);
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

/// `sgd(w, q, g, s, lr)`: the update of one row `w` (`w.len() == q.dim`)
/// with the gradient it gathered from the batch: for `k < w.len()`,
/// `G_k = sum_t g[t] * q[s[t]][k]` (`q[i]` the row `i` of `q`; summed in
/// `t` order from `+0`, product and sum rounded separately, exactly as
/// [`DqFn`]) and `w[k] = w[k] - lr * G_k` (two roundings). `G` is never
/// stored: each block of columns is summed in registers and applied.
///
/// # Safety
/// `w.len() == q.dim >= 1`; `g.len() == s.len()`; every `s[t]` is below
/// the number of rows of `q` and `q.w` spans them; the CPU supports the
/// tier.
pub type SgdFn = unsafe fn(&mut [f32], &Rows<'_, f32>, &[f32], &[u32], f32);

/// `adam(w, m, v, q, g, s, c)`: with `G` as in [`SgdFn`], for
/// `k < w.len()`, each operation rounded in f32 in this order:
/// `m = b1 * m + (1 - b1) * G`, `v = b2 * v + (1 - b2) * (G * G)`,
/// `mh = m * c1`, `vh = v * c2`, `w = w - (lr * mh) / (sqrt(vh) + eps)`.
///
/// # Safety
/// As [`SgdFn`], and `m`, `v` hold at least `w.len()` values.
pub type AdamFn =
    unsafe fn(&mut [f32], &mut [f32], &mut [f32], &Rows<'_, f32>, &[f32], &[u32], &AdamCoef);

/// `prefetch(p, bytes)`: see [`crate::kernels::matmul::PrefetchFn`].
pub type PrefetchFn = crate::kernels::matmul::PrefetchFn;

/// The entry points of a tier.
pub struct Kernels {
    pub xent: XentFn,
    pub dq_f32: DqFn<f32>,
    pub dq_bf16: DqFn<u16>,
    pub sgd: SgdFn,
    pub adam: AdamFn,
    pub prefetch: PrefetchFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it).
    Kernels {
        xent: xent,
        dq_f32: dq_f32,
        dq_bf16: dq_bf16,
        sgd: sgd,
        adam: adam,
        prefetch: prefetch,
    }
}
