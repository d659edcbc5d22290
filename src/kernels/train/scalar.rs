//! Training kernels, scalar tier: the oracle. Plain loops doing exactly
//! the operations the module docs define (no `mul_add`: a product and a sum
//! are rounded separately), the segment sums in [`LANES`] partial sums.
//! No intrinsics.

use super::{
    adam_rows_with, exp_neg, lane_sum, sgd_rows_with, sgd_seq_with, AdamCoef, AdamState, Groups,
    Rows, SgdSeq, LANES,
};
use crate::kernels::matmul::bf16_to_f32;

/// [`LANES`] partial sums of `f(j)` for `j < n` (lane `j % 16`, in
/// increasing `j`), reduced by [`lane_sum`].
fn lanes(n: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut s = [0.0f32; LANES];
    for j in 0..n {
        s[j % LANES] += f(j);
    }
    lane_sum(s)
}

/// See [`super::XentFn`].
///
/// # Safety
/// See [`super::XentFn`] (this tier indexes with bounds checks anyway).
pub unsafe fn xent(x: &mut [f32], y: &[f32]) -> f32 {
    let n = x.len();
    let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let ysum = lanes(n, |j| y[j]);
    if ysum == 0.0 {
        x.fill(0.0);
        return 0.0;
    }
    let a = lanes(n, |j| y[j] * (m - x[j]));
    for v in x.iter_mut() {
        *v = exp_neg(*v - m);
    }
    let s = lanes(n, |j| x[j]);
    let (inv_s, inv_y) = (1.0 / s, 1.0 / ysum);
    for (v, &t) in x.iter_mut().zip(y) {
        *v = *v * inv_s - t * inv_y;
    }
    ((s as f64).ln() + a as f64 / ysum as f64) as f32
}

fn dq_with<T: Copy>(r: &Rows<'_, T>, g: &[f32], ids: &[u32], out: &mut [f32], cv: fn(T) -> f32) {
    let out = &mut out[..r.dim];
    out.fill(0.0);
    for (&gj, &id) in g.iter().zip(ids) {
        let row = &r.w[id as usize * r.stride..id as usize * r.stride + r.dim];
        for (o, &w) in out.iter_mut().zip(row) {
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

/// Column `k` of a row's gathered gradient: `sum_t g[t] * q[s[t]][k]`
/// in `t` order from `+0` (Adam's; also the tails of the portable tier).
#[inline(always)]
pub fn grad_k(q: &Rows<'_, f32>, g: &[f32], s: &[u32], k: usize) -> f32 {
    let mut acc = 0.0f32;
    for (&gt, &st) in g.iter().zip(s) {
        acc += gt * q.w[st as usize * q.stride + k];
    }
    acc
}

/// One element of [`super::AdamRowsFn`] with its gradient `g` (also the tails
/// of the portable tier).
#[inline(always)]
pub fn adam_one(w: &mut f32, m: &mut f32, v: &mut f32, g: f32, c: &AdamCoef) {
    *m = c.beta1 * *m + c.one_minus_beta1 * g;
    *v = c.beta2 * *v + c.one_minus_beta2 * (g * g);
    let mh = *m * c.c1;
    let vh = *v * c.c2;
    *w -= (c.lr * mh) / (vh.sqrt() + c.eps);
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
    for k in 0..w.len() {
        adam_one(&mut w[k], &mut m[k], &mut v[k], grad_k(q, g, s, k), c);
    }
}

/// `row[k] = row[k] - c * q[k]` (a product and a difference, rounded
/// separately): SGD's step of one position (also the portable tier's
/// tails).
#[inline(always)]
pub fn sub_scaled(row: &mut [f32], c: f32, q: &[f32]) {
    for (x, &qk) in row.iter_mut().zip(q) {
        *x -= c * qk;
    }
}

/// # Safety
/// See [`super::SgdSeqFn`] (bounds-checked here).
pub unsafe fn sgd_seq(w: &mut [f32], w_stride: usize, sq: &SgdSeq<'_>, q: &Rows<'_, f32>, lr: f32) {
    sgd_seq_with(w, w_stride, sq, q, lr, sub_scaled)
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
    sgd_rows_with(w, w_stride, grp, q, lr, sub_scaled)
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
