//! The IUL loss and its analytic gradient (the f64 oracle and the batched
//! f32 version) and the Adam fit over pairs.

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::rng::SplitMix64;
use crate::source::lsh::hash::simhash::SimHash;

use super::{BETA1, BETA2, EPS};

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
/// gradient (`K*L x dim`).
pub fn loss_grad_f64(
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
            let s: f64 = a.iter().zip(&b).map(|(x, z)| x * z).sum();
            loss += (softplus(s) - y[i] * s) / n as f64;
            let g = (sigmoid(s) - y[i]) / n as f64;
            for k in 0..bits {
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

/// Scratch for the batched f32 loss/gradient.
#[derive(Default)]
struct Batch {
    pq: Vec<f32>,
    pw: Vec<f32>,
    gq: Vec<f32>,
    gw: Vec<f32>,
}

/// Batched f32 loss and gradient: `Σ_l L_l` (accumulated in f64) and, when
/// `grad` is given, its gradient (overwritten). `xq`, `xw`: `n x dim`
/// contiguous. Projections through `fam` (built from `planes`).
fn loss_grad_f32(
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
    let n = y.len();
    let lf = tables as f64;
    let mut s = Batch::default();
    let mut losses = Vec::with_capacity(epochs as usize + 1);
    let full = |planes: &[f32], s: &mut Batch| -> Result<f64> {
        let fam = SimHash::from_planes(planes, dim, bits, tables)?;
        let mut tot = 0f64;
        let mut i = 0;
        while i < n {
            let b = (n - i).min(4096);
            tot += loss_grad_f32(
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
    if n == 0 {
        return Ok(losses);
    }
    let mut adam = Adam::new(planes.len(), lr)?;
    let mut grad = try_vec::<f32>(planes.len(), "IUL gradient")?;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let (mut bq, mut bw, mut by) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..epochs {
        rng.shuffle(&mut order);
        for chunk in order.chunks(batch) {
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
            loss_grad_f32(&fam, &bq, &bw, &by, Some(&mut grad), &mut s)?;
            adam.step(planes, &grad);
        }
        losses.push(full(planes, &mut s)?);
    }
    Ok(losses)
}

/// The batched f32 loss `Σ_l L_l` and its gradient (into `grad`,
/// `K*L x dim`), for tests and callers: `xq`, `xw` `n x dim` contiguous,
/// `y` n labels (1 or 0).
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
        &fam,
        &xq[..n * dim],
        &xw[..n * dim],
        y,
        Some(grad),
        &mut Batch::default(),
    )
}
