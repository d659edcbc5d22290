//! Training kernels, portable tier (`wide::f32x8` at the build's baseline
//! target features: two SSE2 registers on x86-64, NEON on aarch64).
//!
//! The same operations as the scalar oracle, eight lanes at a time: two
//! `f32x8` hold the [`LANES`] = 16 partial sums, `*` and `+` are separate
//! roundings (no FMA at the baseline, and none is used), `/` and `sqrt`
//! are the correctly rounded IEEE operations. The `2^n` of the exponential
//! is built lane by lane from the integer `n` (exact); tails use the scalar
//! [`exp_neg`] and [`adam_one`], the same operations. No prefetch.

use wide::f32x8;

use super::scalar::{adam_one, grad_k, sub_scaled};
use super::{
    adam_rows_with, exp_neg, lane_sum, sgd_rows_with, sgd_seq_with, AdamCoef, AdamState, Groups,
    Rows, SgdSeq, EXP_MIN, EXP_POLY, LANES, LN2_HI, LN2_LO, LOG2E, ROUND_MAGIC,
};
use crate::kernels::matmul::bf16_to_f32;

#[inline(always)]
fn ld(s: &[f32]) -> f32x8 {
    f32x8::from(<[f32; 8]>::try_from(&s[..8]).unwrap())
}

#[inline(always)]
fn st(v: f32x8, d: &mut [f32]) {
    d[..8].copy_from_slice(&v.to_array());
}

/// [`exp_neg`] of eight lanes (the same operations).
#[inline(always)]
fn exp8(x: f32x8) -> f32x8 {
    let xa = x.to_array();
    let xc = f32x8::from(xa.map(|v| if v < EXP_MIN { EXP_MIN } else { v }));
    let t = xc * f32x8::splat(LOG2E);
    let n = (t + f32x8::splat(ROUND_MAGIC)) - f32x8::splat(ROUND_MAGIC);
    let r = (xc - n * f32x8::splat(LN2_HI)) - n * f32x8::splat(LN2_LO);
    let mut p = f32x8::splat(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = p * r + f32x8::splat(c);
    }
    let na = n.to_array();
    let scale = f32x8::from(na.map(|v| f32::from_bits(((v as i32 + 127) as u32) << 23)));
    let res = (p * scale).to_array();
    let mut out = [0.0f32; 8];
    for l in 0..8 {
        out[l] = if xa[l] < EXP_MIN { 0.0 } else { res[l] };
    }
    f32x8::from(out)
}

/// [`LANES`] partial sums of `f(block of 8 at j)` over full blocks of 16,
/// the tail lane by lane, reduced by [`lane_sum`].
#[inline(always)]
fn lanes(n: usize, mut f8: impl FnMut(usize) -> f32x8, f1: impl Fn(usize) -> f32) -> f32 {
    let (mut a0, mut a1) = (f32x8::ZERO, f32x8::ZERO);
    let full = n / LANES * LANES;
    let mut j = 0;
    while j < full {
        a0 += f8(j);
        a1 += f8(j + 8);
        j += LANES;
    }
    let mut s = [0.0f32; LANES];
    s[..8].copy_from_slice(&a0.to_array());
    s[8..].copy_from_slice(&a1.to_array());
    for j in full..n {
        s[j % LANES] += f1(j);
    }
    lane_sum(s)
}

/// # Safety
/// See [`super::XentFn`] (bounds-checked here).
pub unsafe fn xent(x: &mut [f32], y: &[f32]) -> f32 {
    let n = x.len();
    let y = &y[..n];
    let full8 = n / 8 * 8;
    let mut mv = f32x8::splat(f32::NEG_INFINITY);
    for c in x[..full8].chunks_exact(8) {
        mv = mv.max(ld(c));
    }
    let m = mv
        .to_array()
        .iter()
        .chain(&x[full8..])
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let ysum = lanes(n, |j| ld(&y[j..]), |j| y[j]);
    if ysum == 0.0 {
        x.fill(0.0);
        return 0.0;
    }
    let mm = f32x8::splat(m);
    let a = {
        let xr: &[f32] = x;
        lanes(
            n,
            |j| ld(&y[j..]) * (mm - ld(&xr[j..])),
            |j| y[j] * (m - xr[j]),
        )
    };
    for c in x[..full8].chunks_exact_mut(8) {
        st(exp8(ld(c) - mm), c);
    }
    for v in &mut x[full8..] {
        *v = exp_neg(*v - m);
    }
    let s = {
        let xr: &[f32] = x;
        lanes(n, |j| ld(&xr[j..]), |j| xr[j])
    };
    let (inv_s, inv_y) = (1.0 / s, 1.0 / ysum);
    let (is8, iy8) = (f32x8::splat(inv_s), f32x8::splat(inv_y));
    for (c, t) in x[..full8].chunks_exact_mut(8).zip(y.chunks_exact(8)) {
        st(ld(c) * is8 - ld(t) * iy8, c);
    }
    for (v, &t) in x[full8..].iter_mut().zip(&y[full8..]) {
        *v = *v * inv_s - t * inv_y;
    }
    ((s as f64).ln() + a as f64 / ysum as f64) as f32
}

#[inline(always)]
fn dq_with<T: Copy>(r: &Rows<'_, T>, g: &[f32], ids: &[u32], out: &mut [f32], cv: fn(T) -> f32) {
    let dim = r.dim;
    let out = &mut out[..dim];
    out.fill(0.0);
    let full = dim / 8 * 8;
    for (&gj, &id) in g.iter().zip(ids) {
        let row = &r.w[id as usize * r.stride..id as usize * r.stride + dim];
        let gv = f32x8::splat(gj);
        for (o, w) in out[..full].chunks_exact_mut(8).zip(row.chunks_exact(8)) {
            let wv = f32x8::from(<[T; 8]>::try_from(w).unwrap().map(cv));
            st(ld(o) + gv * wv, o);
        }
        for (o, &w) in out[full..].iter_mut().zip(&row[full..]) {
            *o += gj * cv(w);
        }
    }
}

/// # Safety
/// See [`super::DqFn`] (bounds-checked here).
pub unsafe fn dq_f32(r: &Rows<'_, f32>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    dq_with(r, g, ids, out, |w| w)
}

/// # Safety
/// See [`super::DqFn`].
pub unsafe fn dq_bf16(r: &Rows<'_, u16>, g: &[f32], ids: &[u32], out: &mut [f32]) {
    dq_with(r, g, ids, out, bf16_to_f32)
}

/// Columns `k..k+8` of a row's gathered gradient (see [`super::AdamRowsFn`]).
#[inline(always)]
fn grad8(q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize) -> f32x8 {
    let mut acc = f32x8::ZERO;
    for (&gt, &st) in g.iter().zip(s) {
        acc += f32x8::splat(gt) * ld(&q.w[st as usize * q.stride + k..]);
    }
    acc
}

/// One row of [`super::AdamRowsFn`] with its coefficients (bounds-checked).
fn adam(
    w: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
    q: &Rows<'_, f32>,
    g: &[f32],
    s: &[u32],
    c: &AdamCoef,
) {
    let n = w.len();
    let full = n / 8 * 8;
    let (b1, ob1) = (f32x8::splat(c.beta1), f32x8::splat(c.one_minus_beta1));
    let (b2, ob2) = (f32x8::splat(c.beta2), f32x8::splat(c.one_minus_beta2));
    let (c1, c2) = (f32x8::splat(c.c1), f32x8::splat(c.c2));
    let (lr, eps) = (f32x8::splat(c.lr), f32x8::splat(c.eps));
    let mut k = 0;
    while k < full {
        let gv = grad8(q, g, s, k);
        let mv = b1 * ld(&m[k..]) + ob1 * gv;
        let vv = b2 * ld(&v[k..]) + ob2 * (gv * gv);
        let mh = mv * c1;
        let vh = vv * c2;
        let wv = ld(&w[k..]) - (lr * mh) / (vh.sqrt() + eps);
        st(mv, &mut m[k..]);
        st(vv, &mut v[k..]);
        st(wv, &mut w[k..]);
        k += 8;
    }
    for k in full..n {
        adam_one(&mut w[k], &mut m[k], &mut v[k], grad_k(q, g, s, k), c);
    }
}

/// SGD's step of one position, eight lanes at a time: `row - c * q`
/// (the scalar [`sub_scaled`] on the tail).
fn step8(row: &mut [f32], c: f32, q: &[f32]) {
    let full = row.len() / 8 * 8;
    let c8 = f32x8::splat(c);
    for k in (0..full).step_by(8) {
        st(ld(&row[k..]) - c8 * ld(&q[k..]), &mut row[k..]);
    }
    sub_scaled(&mut row[full..], c, &q[full..]);
}

/// # Safety
/// See [`super::SgdSeqFn`] (bounds-checked here).
pub unsafe fn sgd_seq(w: &mut [f32], w_stride: usize, sq: &SgdSeq<'_>, q: &Rows<'_, f32>, lr: f32) {
    sgd_seq_with(w, w_stride, sq, q, lr, step8)
}

/// # Safety
/// See [`super::SgdRowsFn`] (bounds-checked here).
pub unsafe fn sgd_rows(
    w: &mut [f32],
    w_stride: usize,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    lr: f32,
) {
    sgd_rows_with(w, w_stride, grp, q, lr, step8)
}

/// # Safety
/// See [`super::AdamRowsFn`] (bounds-checked here).
pub unsafe fn adam_rows(
    w: &mut [f32],
    w_stride: usize,
    st: &mut AdamState<'_>,
    grp: &Groups<'_>,
    q: &Rows<'_, f32>,
    c: &AdamCoef,
) {
    adam_rows_with(w, w_stride, st, grp, q, c, adam)
}
