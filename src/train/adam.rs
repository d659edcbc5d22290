//! Lazy Adam: its hyper-parameters, its state and its per-row rule.

use crate::bail;
use crate::error::{checked_mul, Result};
use crate::isa::{self, Isa};
use crate::kernels::train::{self as kt, AdamCoef, Rows};

use super::update::{check_update, update_rows, Batch, Rule};

struct AdamRule {
    f: kt::AdamFn,
    p: AdamParams,
}

/// Adam's per-row state, split with W: rows of m and v (dim each), steps.
struct AdamPart<'a> {
    m: &'a mut [f32],
    v: &'a mut [f32],
    t: &'a mut [u32],
}

impl Rule for AdamRule {
    type Part<'a> = AdamPart<'a>;
    fn split<'a>(p: Self::Part<'a>, n: usize, dim: usize) -> (Self::Part<'a>, Self::Part<'a>) {
        let (m0, m1) = p.m.split_at_mut(n * dim);
        let (v0, v1) = p.v.split_at_mut(n * dim);
        let (t0, t1) = p.t.split_at_mut(n);
        (
            AdamPart {
                m: m0,
                v: v0,
                t: t0,
            },
            AdamPart {
                m: m1,
                v: v1,
                t: t1,
            },
        )
    }
    fn prefetch(&self, p: &AdamPart<'_>, r: usize, dim: usize, pf: kt::PrefetchFn) {
        let bytes = (dim * 4).min(crate::kernels::matmul::PREFETCH_MAX_BYTES);
        pf(p.m.as_ptr().wrapping_add(r * dim).cast(), bytes);
        pf(p.v.as_ptr().wrapping_add(r * dim).cast(), bytes);
    }
    fn apply(
        &self,
        p: &mut AdamPart<'_>,
        r: usize,
        dim: usize,
        w: &mut [f32],
        q: &Rows<'_, f32>,
        g: &[f32],
        s: &[u32],
    ) {
        let t = p.t[r].saturating_add(1);
        p.t[r] = t;
        let c = self.p.coef(t);
        let (m, v) = (
            &mut p.m[r * dim..(r + 1) * dim],
            &mut p.v[r * dim..(r + 1) * dim],
        );
        // SAFETY: w, m and v hold dim = q.dim values, g and s match, every
        // s[t] is a sample < nb and q spans nb strided rows (checked), tier
        // supported (checked).
        unsafe { (self.f)(w, m, v, q, g, s, &c) }
    }
}

/// Adam's hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamParams {
    /// Learning rate (finite).
    pub lr: f32,
    /// First-moment decay, `0 <= beta1 < 1`.
    pub beta1: f32,
    /// Second-moment decay, `0 <= beta2 < 1`.
    pub beta2: f32,
    /// Added to `sqrt(v_hat)`, `> 0`, finite.
    pub eps: f32,
}

impl Default for AdamParams {
    /// `lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8` (Kingma & Ba).
    fn default() -> Self {
        AdamParams {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

impl AdamParams {
    /// Checks the documented ranges.
    pub fn check(&self) -> Result<()> {
        if !self.lr.is_finite() {
            bail!(
                NonFinite,
                "lr is {} (a finite learning rate is needed)",
                self.lr
            );
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                bail!(InvalidArgument, "{name} is {b}: it must be in [0, 1)");
            }
        }
        if !(self.eps > 0.0 && self.eps.is_finite()) {
            bail!(
                InvalidArgument,
                "eps is {}: it must be finite and > 0",
                self.eps
            );
        }
        Ok(())
    }

    /// The coefficients of a row's `t`-th update (`t >= 1`): the bias
    /// corrections `1 / (1 - beta^t)` in f64 (`beta^t` by `f64::powi`,
    /// repeated squaring: a few multiplications where `powf` took most of
    /// a row's time in the L3 regime), rounded to f32.
    pub fn coef(&self, t: u32) -> AdamCoef {
        let e = t.min(i32::MAX as u32) as i32;
        let corr = |b: f32| (1.0 / (1.0 - (b as f64).powi(e))) as f32;
        AdamCoef {
            lr: self.lr,
            beta1: self.beta1,
            one_minus_beta1: 1.0 - self.beta1,
            beta2: self.beta2,
            one_minus_beta2: 1.0 - self.beta2,
            c1: corr(self.beta1),
            c2: corr(self.beta2),
            eps: self.eps,
        }
    }
}

/// Lazy Adam over the rows of W: per element first and second moments
/// (`m`, `v`, 0 at the start) and per row a step count `t_r`. A step
/// touches only the rows that occur in the batch: row `r` gets its summed
/// gradient `G_r` (as in [`rows_update_sgd`](super::rows_update_sgd)), `t_r += 1`, and the update
/// of [`crate::kernels::train::AdamFn`] with the bias corrections of its
/// own count `t_r` (so a row's first update is a full-size Adam step,
/// whenever it happens; TensorFlow's LazyAdam corrects with the global step
/// instead). Rows not in the batch keep their moments (no decay while
/// untouched).
#[derive(Clone, Debug)]
pub struct Adam {
    rows: usize,
    dim: usize,
    params: AdamParams,
    m: Vec<f32>,
    v: Vec<f32>,
    steps: Vec<u32>,
}

impl Adam {
    /// State for `rows` rows of `dim` values (`dim >= 1`): 8 bytes per
    /// element plus 4 per row, zeroed.
    pub fn new(rows: usize, dim: usize, params: AdamParams) -> Result<Adam> {
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        params.check()?;
        let n = checked_mul(rows, dim, "rows * dim")?;
        crate::error::check_fits_memory((n as u128) * 8 + rows as u128 * 4, "the Adam state")?;
        Ok(Adam {
            rows,
            dim,
            params,
            m: crate::error::try_vec(n, "Adam first moments")?,
            v: crate::error::try_vec(n, "Adam second moments")?,
            steps: crate::error::try_vec(rows, "Adam step counts")?,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn params(&self) -> AdamParams {
        self.params
    }
    /// Changes the hyper-parameters for the next steps (e.g. a learning
    /// rate schedule); the moments and counts are kept.
    pub fn set_params(&mut self, p: AdamParams) -> Result<()> {
        p.check()?;
        self.params = p;
        Ok(())
    }
    /// First moments, row-major (`rows * dim`).
    pub fn m(&self) -> &[f32] {
        &self.m
    }
    /// Second moments, row-major (`rows * dim`).
    pub fn v(&self) -> &[f32] {
        &self.v
    }
    /// Step count of each row.
    pub fn steps(&self) -> &[u32] {
        &self.steps
    }

    /// One lazy Adam step on W (`rows` x `dim` as given to [`Adam::new`],
    /// stride `w_stride`) for `batch`; same checks as [`rows_update_sgd`](super::rows_update_sgd).
    /// Same bits for every tier and thread count (0 = every core).
    pub fn step(
        &mut self,
        tier: Isa,
        threads: usize,
        w: &mut [f32],
        w_stride: usize,
        batch: &Batch,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        check_update(w.len(), self.rows, self.dim, w_stride, batch)?;
        let rule = AdamRule {
            f: kt::kernels(tier).adam,
            p: self.params,
        };
        let part = AdamPart {
            m: &mut self.m,
            v: &mut self.v,
            t: &mut self.steps,
        };
        update_rows(
            tier, threads, w, self.rows, self.dim, w_stride, batch, &rule, part,
        )
    }
}
