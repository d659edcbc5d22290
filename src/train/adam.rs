//! Lazy Adam: its hyper-parameters, its state and its per-row rule.

use crate::bail;
use crate::error::{checked_mul, Result};
use crate::isa::{self, Isa};
use crate::kernels::train::{self as kt, AdamCoef, AdamState, Rows};

use super::update::{check_update, update_rows, Batch, Rule};

struct AdamRule {
    f: kt::AdamRowsFn,
    base: AdamCoef,
}

impl Rule for AdamRule {
    type Part<'a> = AdamState<'a>;
    fn split<'a>(p: Self::Part<'a>, n: usize, dim: usize) -> (Self::Part<'a>, Self::Part<'a>) {
        let (m0, m1) = p.m.split_at_mut(n * dim);
        let (v0, v1) = p.v.split_at_mut(n * dim);
        let (t0, t1) = p.t.split_at_mut(n);
        (
            AdamState {
                m: m0,
                v: v0,
                t: t0,
            },
            AdamState {
                m: m1,
                v: v1,
                t: t1,
            },
        )
    }
    fn apply_rows(
        &self,
        p: &mut AdamState<'_>,
        w: &mut [f32],
        w_stride: usize,
        grp: &kt::Groups<'_>,
        q: &Rows<'_, f32>,
    ) {
        // SAFETY: every group's row is in the part of W and of the state
        // (update_rows splits both at the same group boundaries; m and v
        // hold dim = q.dim values a row, t one count), the positions are
        // inside g and s, every s[t] is a sample < nb and q spans nb
        // strided rows (checked), tier supported (checked).
        unsafe { (self.f)(w, w_stride, p, grp, q, &self.base) }
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
    /// corrections `1 / (1 - beta^t)` in f64 (`beta^t` by repeated
    /// squaring, [`crate::kernels::train::pow_int2`]: a few multiplications
    /// instead of a `powf` call per row, costly in the L3 regime), rounded to
    /// f32 ([`AdamCoef::new`]; the kernels call [`AdamCoef::at_step`] per row).
    pub fn coef(&self, t: u32) -> AdamCoef {
        AdamCoef::new(self.lr, self.beta1, self.beta2, self.eps, t)
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
            f: kt::kernels(tier).adam_rows,
            base: self.params.coef(1),
        };
        let part = AdamState {
            m: &mut self.m,
            v: &mut self.v,
            t: &mut self.steps,
        };
        update_rows(
            threads, 1, w, self.rows, self.dim, w_stride, batch, &rule, part,
        )
    }
}
