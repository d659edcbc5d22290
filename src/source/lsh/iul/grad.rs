//! The IUL loss and its analytic gradient (the f64 oracle and the batched
//! f32 version) and the Adam fit over pairs.

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::rng::SplitMix64;
use crate::source::lsh::hash::simhash::SimHash;

use super::{IulLoss, BETA1, BETA2, COLLISION_FLOOR, EPS};

/// f32 dot with 8 independent lanes (deterministic order).
#[inline]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = f32x8::ZERO;
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        let x = f32x8::from(<[f32; 8]>::try_from(x).unwrap());
        let y = f32x8::from(<[f32; 8]>::try_from(y).unwrap());
        acc = x.mul_add(y, acc);
    }
    let mut s = acc.reduce_add();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// `y += a * x` (f32x8).
#[inline]
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    let av = f32x8::splat(a);
    let mut cy = y.chunks_exact_mut(8);
    let mut cx = x.chunks_exact(8);
    for (yy, xx) in (&mut cy).zip(&mut cx) {
        let xv = f32x8::from(<[f32; 8]>::try_from(xx).unwrap());
        let yv = f32x8::from(<[f32; 8]>::try_from(&*yy).unwrap());
        yy.copy_from_slice(&xv.mul_add(av, yv).to_array());
    }
    for (yy, xx) in cy.into_remainder().iter_mut().zip(cx.remainder()) {
        *yy += a * xx;
    }
}

#[inline]
fn softplus(s: f64) -> f64 {
    s.max(0.0) + (-s.abs()).exp().ln_1p()
}

#[inline]
fn sigmoid(s: f64) -> f64 {
    if s >= 0.0 {
        1.0 / (1.0 + (-s).exp())
    } else {
        let e = s.exp();
        e / (1.0 + e)
    }
}

/// Reference loss and gradient in f64 (plain loops): `planes` `K*L x dim`,
/// `xq`, `xw` `n x dim`, `y` n labels (1 or 0). Returns `Σ_l L_l` and its
/// gradient (`K*L x dim`). The dot-product loss ([`IulLoss::Dot`]).
pub fn loss_grad_f64(
    planes: &[f64],
    dim: usize,
    bits: usize,
    tables: usize,
    xq: &[f64],
    xw: &[f64],
    y: &[f64],
) -> (f64, Vec<f64>) {
    loss_grad_f64_with(IulLoss::Dot, planes, dim, bits, tables, xq, xw, y)
}

/// [`loss_grad_f64`] for either loss form (see [`IulLoss`]).
#[allow(clippy::too_many_arguments)]
pub fn loss_grad_f64_with(
    loss_kind: IulLoss,
    planes: &[f64],
    dim: usize,
    bits: usize,
    tables: usize,
    xq: &[f64],
    xw: &[f64],
    y: &[f64],
) -> (f64, Vec<f64>) {
    let n = y.len();
    let mut grad = vec![0f64; planes.len()];
    let mut loss = 0f64;
    let mut gu = vec![0f64; bits];
    for i in 0..n {
        let (q, w) = (&xq[i * dim..(i + 1) * dim], &xw[i * dim..(i + 1) * dim]);
        for l in 0..tables {
            let mut a = vec![0f64; bits];
            let mut b = vec![0f64; bits];
            for k in 0..bits {
                let th = &planes[(l * bits + k) * dim..(l * bits + k + 1) * dim];
                a[k] = th.iter().zip(q).map(|(t, x)| t * x).sum::<f64>().tanh();
                b[k] = th.iter().zip(w).map(|(t, x)| t * x).sum::<f64>().tanh();
            }
            // gu[k] = ∂ℓ/∂(a_k b_k), divided by n below.
            match loss_kind {
                IulLoss::Dot => {
                    let s: f64 = a.iter().zip(&b).map(|(x, z)| x * z).sum();
                    loss += (softplus(s) - y[i] * s) / n as f64;
                    gu.fill(sigmoid(s) - y[i]);
                }
                IulLoss::Collision => {
                    let u: Vec<f64> = a.iter().zip(&b).map(|(x, z)| x * z).collect();
                    loss += collision_terms(&u, y[i], &mut gu) / n as f64;
                }
            }
            for k in 0..bits {
                let g = gu[k] / n as f64;
                let gq = g * b[k] * (1.0 - a[k] * a[k]);
                let gw = g * a[k] * (1.0 - b[k] * b[k]);
                let row = &mut grad[(l * bits + k) * dim..(l * bits + k + 1) * dim];
                for j in 0..dim {
                    row[j] += gq * q[j] + gw * w[j];
                }
            }
        }
    }
    (loss, grad)
}

/// The collision loss of one (pair, table) from the bit agreements
/// `u_k = tanh(θ_k q) tanh(θ_k w)`: with `c_k = max((1 + u_k) / 2,
/// COLLISION_FLOOR)` and `p = Π_k c_k` (the relaxed probability that all K
/// bits agree), returns `−y ln p − (1 − y) ln(1 − p)` and writes
/// `∂ℓ/∂u_k` into `gu` (`−1 / (2 c_k)` for a positive, `p / (2 c_k (1 − p))`
/// for a negative; the floor's kink is ignored). `1 − p` is floored at
/// `1e-12` (p = 1 only when every bit agrees exactly).
pub(super) fn collision_terms(u: &[f64], y: f64, gu: &mut [f64]) -> f64 {
    let c = |v: f64| ((1.0 + v) * 0.5).max(COLLISION_FLOOR);
    let lnp: f64 = u.iter().map(|&v| c(v).ln()).sum();
    let p = lnp.exp();
    if y > 0.5 {
        for (g, &v) in gu.iter_mut().zip(u) {
            *g = -0.5 / c(v);
        }
        -lnp
    } else {
        let q = (1.0 - p).max(1e-12);
        for (g, &v) in gu.iter_mut().zip(u) {
            *g = 0.5 * p / (c(v) * q);
        }
        -q.ln()
    }
}

/// Scratch for the batched f32 loss/gradient.
#[derive(Default)]
struct Batch {
    pq: Vec<f32>,
    pw: Vec<f32>,
    gq: Vec<f32>,
    gw: Vec<f32>,
    u: Vec<f64>,
    gu: Vec<f64>,
}

/// Batched f32 loss and gradient: `Σ_l L_l` (accumulated in f64) and, when
/// `grad` is given, its gradient (overwritten). `xq`, `xw`: `n x dim`
/// contiguous. Projections through `fam` (built from `planes`).
fn loss_grad_f32(
    loss_kind: IulLoss,
    fam: &SimHash,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    grad: Option<&mut [f32]>,
    s: &mut Batch,
) -> Result<f64> {
    let n = y.len();
    let (dim, k, l) = (fam.dim(), fam.bits() as usize, fam.tables() as usize);
    let np = k * l;
    s.pq.resize(n * np, 0.0);
    s.pw.resize(n * np, 0.0);
    fam.project(xq, n, dim, &mut s.pq)?;
    fam.project(xw, n, dim, &mut s.pw)?;
    s.gq.resize(n * np, 0.0);
    s.gw.resize(n * np, 0.0);
    let mut loss = 0f64;
    let inv_n = 1.0 / n as f64;
    #[allow(clippy::needless_range_loop)]
    for i in 0..n {
        let (pq, pw) = (
            &mut s.pq[i * np..(i + 1) * np],
            &mut s.pw[i * np..(i + 1) * np],
        );
        pq.iter_mut().for_each(|v| *v = v.tanh());
        pw.iter_mut().for_each(|v| *v = v.tanh());
        for t in 0..l {
            let (a, b) = (&pq[t * k..(t + 1) * k], &pw[t * k..(t + 1) * k]);
            if loss_kind == IulLoss::Collision {
                s.u.clear();
                s.u.extend(a.iter().zip(b).map(|(x, z)| (*x as f64) * (*z as f64)));
                s.gu.resize(k, 0.0);
                loss += collision_terms(&s.u, y[i] as f64, &mut s.gu) * inv_n;
                for kk in 0..k {
                    let g = (s.gu[kk] * inv_n) as f32;
                    let p = i * np + t * k + kk;
                    s.gq[p] = g * b[kk] * (1.0 - a[kk] * a[kk]);
                    s.gw[p] = g * a[kk] * (1.0 - b[kk] * b[kk]);
                }
                continue;
            }
            let sv: f64 = a
                .iter()
                .zip(b)
                .map(|(x, z)| (*x as f64) * (*z as f64))
                .sum();
            let yi = y[i] as f64;
            loss += (softplus(sv) - yi * sv) * inv_n;
            let g = ((sigmoid(sv) - yi) * inv_n) as f32;
            for kk in 0..k {
                let p = i * np + t * k + kk;
                s.gq[p] = g * b[kk] * (1.0 - a[kk] * a[kk]);
                s.gw[p] = g * a[kk] * (1.0 - b[kk] * b[kk]);
            }
        }
    }
    if let Some(grad) = grad {
        grad.fill(0.0);
        // grad[p, :] += Gq[i, p] * xq[i, :] + Gw[i, p] * xw[i, :], plane-major
        // so one gradient row stays in L1 while the batch streams.
        for p in 0..np {
            let row = &mut grad[p * dim..(p + 1) * dim];
            for i in 0..n {
                axpy(row, s.gq[i * np + p], &xq[i * dim..(i + 1) * dim]);
                axpy(row, s.gw[i * np + p], &xw[i * dim..(i + 1) * dim]);
            }
        }
    }
    Ok(loss)
}

/// Adam state for one round.
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
    lr: f64,
}

impl Adam {
    fn new(len: usize, lr: f32) -> Result<Self> {
        Ok(Adam {
            m: try_vec(len, "Adam m")?,
            v: try_vec(len, "Adam v")?,
            t: 0,
            lr: lr as f64,
        })
    }
    fn step(&mut self, theta: &mut [f32], g: &[f32]) {
        self.t += 1;
        let c1 = 1.0 - BETA1.powi(self.t);
        let c2 = 1.0 - BETA2.powi(self.t);
        for ((th, &gi), (m, v)) in theta
            .iter_mut()
            .zip(g)
            .zip(self.m.iter_mut().zip(self.v.iter_mut()))
        {
            let gi = gi as f64;
            let mm = BETA1 * *m as f64 + (1.0 - BETA1) * gi;
            let vv = BETA2 * *v as f64 + (1.0 - BETA2) * gi * gi;
            *m = mm as f32;
            *v = vv as f32;
            let upd = self.lr * (mm / c1) / ((vv / c2).sqrt() + EPS);
            *th = (*th as f64 - upd) as f32;
        }
    }
}

/// Minibatch Adam on the pairs `(xq[i], xw[i], y[i])` (`n x dim`
/// contiguous): `epochs` epochs, pair order shuffled by `rng` each epoch.
/// Returns the full-data loss (per table, per pair) before training and
/// after each epoch (`epochs + 1` values). `planes` is updated in place.
/// The dot-product loss; [`adam_fit_with`] for the other options.
#[allow(clippy::too_many_arguments)]
pub fn adam_fit(
    planes: &mut [f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    lr: f32,
    epochs: u32,
    batch: usize,
    rng: &mut SplitMix64,
) -> Result<Vec<f64>> {
    let fit = AdamFit {
        loss: IulLoss::Dot,
        tolerance: 0.0,
        lr,
        max_epochs: epochs,
        batch,
    };
    adam_fit_with(
        planes,
        dim,
        bits,
        tables,
        xq,
        xw,
        y,
        &fit,
        rng,
        &mut |_, _, _| {},
    )
}

/// Refuses a convergence tolerance that is negative or not finite
/// (`InvalidArgument`).
pub(super) fn check_tolerance(tolerance: f64) -> Result<()> {
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        bail!(
            InvalidArgument,
            "tolerance is {tolerance}; it must be finite and >= 0"
        );
    }
    Ok(())
}

/// How [`adam_fit_with`] trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamFit {
    /// Loss form.
    pub loss: IulLoss,
    /// 0: exactly `max_epochs` epochs. > 0: stop after the first epoch
    /// whose full-data loss fell by less than `tolerance` times the loss
    /// before it (a rise stops too), or after `max_epochs`.
    pub tolerance: f64,
    /// Adam learning rate.
    pub lr: f32,
    /// Epochs (the most epochs with a tolerance).
    pub max_epochs: u32,
    /// Pairs per Adam step (>= 1).
    pub batch: usize,
}

/// [`adam_fit`] with a loss form, a convergence tolerance and a hook:
/// `on_epoch(epoch, planes, loss)` runs before training (epoch 0) and
/// after each epoch, with the planes and their full-data loss. Returns
/// the losses (one per call of the hook). Errors: `InvalidArgument` for
/// `batch` 0 or a tolerance that is negative or not finite.
#[allow(clippy::too_many_arguments)]
pub fn adam_fit_with(
    planes: &mut [f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    fit: &AdamFit,
    rng: &mut SplitMix64,
    on_epoch: &mut dyn FnMut(u32, &[f32], f64),
) -> Result<Vec<f64>> {
    if fit.batch == 0 {
        bail!(InvalidArgument, "batch must be >= 1");
    }
    check_tolerance(fit.tolerance)?;
    let n = y.len();
    let lf = tables as f64;
    let loss_kind = fit.loss;
    let mut s = Batch::default();
    let mut losses = Vec::with_capacity(fit.max_epochs as usize + 1);
    let full = |planes: &[f32], s: &mut Batch| -> Result<f64> {
        let fam = SimHash::from_planes(planes, dim, bits, tables)?;
        let mut tot = 0f64;
        let mut i = 0;
        while i < n {
            let b = (n - i).min(4096);
            tot += loss_grad_f32(
                loss_kind,
                &fam,
                &xq[i * dim..(i + b) * dim],
                &xw[i * dim..(i + b) * dim],
                &y[i..i + b],
                None,
                s,
            )? * b as f64;
            i += b;
        }
        Ok(if n == 0 { 0.0 } else { tot / n as f64 / lf })
    };
    losses.push(full(planes, &mut s)?);
    on_epoch(0, planes, losses[0]);
    if n == 0 {
        return Ok(losses);
    }
    let mut adam = Adam::new(planes.len(), fit.lr)?;
    let mut grad = try_vec::<f32>(planes.len(), "IUL gradient")?;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let (mut bq, mut bw, mut by) = (Vec::new(), Vec::new(), Vec::new());
    for epoch in 1..=fit.max_epochs {
        rng.shuffle(&mut order);
        for chunk in order.chunks(fit.batch) {
            bq.clear();
            bw.clear();
            by.clear();
            for &i in chunk {
                let i = i as usize;
                bq.extend_from_slice(&xq[i * dim..(i + 1) * dim]);
                bw.extend_from_slice(&xw[i * dim..(i + 1) * dim]);
                by.push(y[i]);
            }
            let fam = SimHash::from_planes(planes, dim, bits, tables)?;
            loss_grad_f32(loss_kind, &fam, &bq, &bw, &by, Some(&mut grad), &mut s)?;
            adam.step(planes, &grad);
        }
        let l = full(planes, &mut s)?;
        losses.push(l);
        on_epoch(epoch, planes, l);
        let prev = losses[losses.len() - 2];
        if fit.tolerance > 0.0 && prev - l < fit.tolerance * prev {
            break;
        }
    }
    Ok(losses)
}

/// The batched f32 loss `Σ_l L_l` and its gradient (into `grad`,
/// `K*L x dim`), for tests and callers: `xq`, `xw` `n x dim` contiguous,
/// `y` n labels (1 or 0). The dot-product loss.
#[allow(clippy::too_many_arguments)]
pub fn loss_grad(
    planes: &[f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    grad: &mut [f32],
) -> Result<f64> {
    loss_grad_with(IulLoss::Dot, planes, dim, bits, tables, xq, xw, y, grad)
}

/// [`loss_grad`] for either loss form (see [`IulLoss`]).
#[allow(clippy::too_many_arguments)]
pub fn loss_grad_with(
    loss_kind: IulLoss,
    planes: &[f32],
    dim: usize,
    bits: u32,
    tables: u32,
    xq: &[f32],
    xw: &[f32],
    y: &[f32],
    grad: &mut [f32],
) -> Result<f64> {
    let fam = SimHash::from_planes(planes, dim, bits, tables)?;
    let n = y.len();
    if xq.len() < checked_mul(n, dim, "n * dim")? || xw.len() < n * dim {
        bail!(BufferTooSmall, "xq / xw hold fewer than n * dim values");
    }
    if grad.len() != planes.len() {
        bail!(BufferTooSmall, "grad must hold K*L*dim values");
    }
    if n == 0 {
        grad.fill(0.0);
        return Ok(0.0);
    }
    loss_grad_f32(
        loss_kind,
        &fam,
        &xq[..n * dim],
        &xw[..n * dim],
        y,
        Some(grad),
        &mut Batch::default(),
    )
}
