//! Upper bounds of [`QRows`] scores from 4-bit copies of the codes
//! ([`NibPanels`]; kernel: [`crate::kernels::qdot::NibFn`]).
//!
//! # The bound
//! Row `r` of a [`QRows`] has int8 codes `c_j` (padding 0) and scale `s`;
//! its score for a query of scale `t` and 7-bit values `k_j = u_j - 64` is
//! `t s sum_j k_j c_j` (then rounded in f32). The 4-bit copy spans the
//! row's code range `lo = min c_j`, `hi = max c_j` in 15 steps:
//! `n_j = round(15 (c_j - lo) / (hi - lo))` in `0..=15` (all 0 when `hi =
//! lo`), standing for `c4_j = lo + n_j (hi - lo) / 15`. Then
//!
//! `t s sum_j k_j c_j = t (a sum_j k_j n_j + b K) + t s sum_j k_j (c_j - c4_j)`
//!
//! with `a = s (hi - lo) / 15`, `b = s lo`, `K = sum_j k_j`, and by
//! Cauchy-Schwarz the last term is at most `t |k| e` in magnitude, `|k|`
//! the query's Euclidean norm and `e = s |c - c4|`. The bound adds `t |k|
//! E`, `E = e + s sqrt(dim_pad) 2^-10`: the extra term covers the f32
//! rounding of the int8 score and of the bound's own arithmetic (each
//! term of either is at most `255 t |k| s sqrt(dim_pad)`, and about twenty
//! roundings of relative size `2^-24` are involved; `2^-10` leaves a
//! margin of 3x). `E` is rounded up to f32, `|k|` too.
//!
//! So [`NibPanels::bounds`] never falls below [`QRows::score_run_with`]
//! without bias, for any query whose scale times every row scale is at
//! least [`NIB_MIN_SCALE_PRODUCT`] (it computes no bound for the others):
//! `tests/qdot_nib.rs` checks it on random, adversarial and real-shaped
//! rows. A row far from the query is
//! then set aside from 64 bytes per 128 dimensions instead of 128, and
//! only the rows whose bound reaches a threshold are scored from their
//! int8 codes (the IVF's adaptive selection, docs/ivf.md).

use super::{lines_as_bytes, lines_as_bytes_mut, Line, QQuery, QRows, Variant, PAD, PANEL};
use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::kernels::qdot as kq;

/// The 4-bit panels of a [`QRows`] and the constants of their bound
/// (module docs), with a per-row term `f_r + x g_r` added to each bound
/// (`x` given per call: the IVF's list bias and spread). Derived from the
/// rows, never stored in a file; the row count is padded to a multiple of
/// 16 with zero rows (bound 0).
#[derive(Clone, Default)]
pub struct NibPanels {
    lines: Vec<Line>,
    nsums: Vec<i32>,
    /// Per panel, the five arrays of 16 of [`kq::NibFn`]: `a`, `b`, `e`,
    /// `f`, `g`.
    consts: Vec<f32>,
    rows: usize,
    dim_pad: usize,
    /// The smallest non-zero row scale (`+inf` without one).
    min_scale: f32,
}

/// The bound is computed only where every product of a row scale and the
/// query scale is at least this (`2^-100`): then every intermediate value
/// of the score and of the bound is a normal f32 (or exactly 0), so each
/// rounding is relative, as the margin assumes. Below it (rows or queries
/// with values under about `1e-30`) the caller scores the rows instead.
pub const NIB_MIN_SCALE_PRODUCT: f32 = f32::from_bits(27 << 23); // 2^-100

/// `x` rounded up to an f32 (`x` finite and non-negative).
fn f32_up(x: f64) -> f32 {
    let f = x as f32;
    if (f as f64) < x {
        f.next_up()
    } else {
        f
    }
}

/// One row's 4-bit codes of `c` (its `dim_pad` int8 codes) into `nib`
/// (`dim_pad` values), and `(lo, hi, |c - c4|)` (module docs).
fn nibble_row(c: &[i8], nib: &mut [u8]) -> (i32, i32, f64) {
    let lo = c.iter().fold(i32::MAX, |m, &x| m.min(x as i32));
    let hi = c.iter().fold(i32::MIN, |m, &x| m.max(x as i32));
    let w = hi - lo;
    let mut err = 0.0f64;
    for (n, &x) in nib.iter_mut().zip(c) {
        // round(15 (x - lo) / w), ties up, in integers.
        let v = if w == 0 {
            0
        } else {
            (30 * (x as i32 - lo) + w) / (2 * w)
        };
        *n = v as u8;
        let c4 = lo as f64 + v as f64 * w as f64 / 15.0;
        err += (x as f64 - c4) * (x as f64 - c4);
    }
    (lo, hi, err.sqrt())
}

impl NibPanels {
    /// The 4-bit panels of `r` (every row), with the per-row terms `f`
    /// and `g` (`r.rows()` values each, finite).
    pub fn new(r: &QRows, f: &[f32], g: &[f32]) -> Result<NibPanels> {
        if f.len() != r.rows() || g.len() != r.rows() {
            bail!(
                InvalidArgument,
                "{} and {} row terms for {} rows",
                f.len(),
                g.len(),
                r.rows()
            );
        }
        let dp = r.dim_pad();
        let rows = r.rows();
        let padded = rows.div_ceil(PANEL) * PANEL;
        let bytes = checked_mul(padded, dp / 2, "rows * dim_pad / 2")?;
        // Zeroed: the padding rows stay all zero.
        let mut lines: Vec<Line> = try_vec(bytes.div_ceil(PAD), "4-bit panels")?;
        let mut nsums: Vec<i32> = try_vec(padded, "4-bit sums")?;
        let nc = kq::NIB_CONSTS;
        let mut consts: Vec<f32> = try_vec(padded * nc, "4-bit constants")?;
        let dst = lines_as_bytes_mut(&mut lines);
        let mut nib = vec![0u8; dp];
        let margin = (dp as f64).sqrt() / 1024.0;
        for row in 0..rows {
            let (lo, hi, err) = nibble_row(r.row_codes(row), &mut nib);
            let s = r.scales()[row] as f64;
            nsums[row] = nib.iter().map(|&n| n as i32).sum();
            let (p, i) = (row / PANEL, row % PANEL);
            let c = &mut consts[p * PANEL * nc..(p + 1) * PANEL * nc];
            c[i] = (s * (hi - lo) as f64 / 15.0) as f32;
            c[PANEL + i] = (s * lo as f64) as f32;
            c[2 * PANEL + i] = f32_up(s * (err + margin));
            c[3 * PANEL + i] = f[row];
            c[4 * PANEL + i] = g[row];
            let base = p * PANEL * dp / 2;
            for g in 0..dp / 8 {
                for k in 0..4 {
                    let (lo4, hi4) = (nib[4 * g + k], nib[dp / 2 + 4 * g + k]);
                    dst[base + 64 * g + 4 * i + k] = (lo4 | (hi4 << 4)) as i8;
                }
            }
        }
        Ok(NibPanels {
            lines,
            nsums,
            consts,
            rows,
            dim_pad: dp,
            min_scale: r
                .scales()
                .iter()
                .filter(|&&s| s > 0.0)
                .fold(f32::INFINITY, |m, &s| m.min(s)),
        })
    }

    /// Rows (without the padding).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Rows including the zero padding: a multiple of 16, the length
    /// [`NibPanels::bounds`] writes.
    pub fn padded_rows(&self) -> usize {
        self.nsums.len()
    }
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.lines.len() * PAD + self.nsums.len() * 4 + self.consts.len() * 4
    }

    /// Whether [`NibPanels::bounds`] can run with variant `v` (a 4-bit
    /// panel kernel exists for its tier: AVX-512).
    pub fn has_kernel(v: Variant) -> bool {
        kq::nib_for(v.tier, v.k).is_some()
    }

    /// The kernel's inputs (`tests/qdot_nib.rs` checks the kernels on
    /// them against the scalar oracle): panel bytes, sums, constants.
    #[doc(hidden)]
    pub fn raw_parts(&self) -> (*const u8, *const i32, *const f32) {
        (
            lines_as_bytes(&self.lines).as_ptr().cast(),
            self.nsums.as_ptr(),
            self.consts.as_ptr(),
        )
    }

    /// The query constants of the kernel's epilogue for `q` and the row
    /// terms' factor `x`: `[t, t K, t |k|, x]` (module docs; `|k|` rounded
    /// up).
    pub fn query_constants(q: &QQuery, x: f32) -> [f32; 4] {
        let (mut sum, mut sq) = (0i64, 0i64);
        for &u in q.codes() {
            let k = u as i64 - 64;
            sum += k;
            sq += k * k;
        }
        let t = q.scale();
        [t, t * sum as f32, t * f32_up((sq as f64).sqrt()), x]
    }

    /// For every row `r` (and the padding), into `out[..padded_rows()]`:
    /// a bound `U_r` at least the row's [`QRows::score_run_with`] score
    /// without bias for `q` (module docs), plus the row term: `U_r + (f_r
    /// + x g_r)` in f32 (so at least the score plus that term computed
    /// the same way, f32 addition being monotone). Returns `Ok(false)` and
    /// writes nothing when `v` has no 4-bit kernel, or when the query's
    /// scale is 0 or its product with a row scale falls below
    /// [`NIB_MIN_SCALE_PRODUCT`] (score the rows then).
    pub fn bounds(&self, v: Variant, q: &QQuery, x: f32, out: &mut [f32]) -> Result<bool> {
        let Some(f) = kq::nib_for(v.tier, v.k) else {
            return Ok(false);
        };
        let t = q.scale();
        if !(t > 0.0 && t * self.min_scale >= NIB_MIN_SCALE_PRODUCT) {
            return Ok(false);
        }
        if q.dim_pad() != self.dim_pad {
            bail!(
                InvalidArgument,
                "query of dim_pad {}, 4-bit panels of {}",
                q.dim_pad(),
                self.dim_pad
            );
        }
        let n = self.padded_rows();
        super::check_len(out.len(), n, "out")?;
        if n == 0 {
            return Ok(true);
        }
        let qc = Self::query_constants(q, x);
        let (p, ns, c) = self.raw_parts();
        // SAFETY: the NibFn preconditions: dim_pad valid (from QRows), n /
        // 16 panels of dim_pad / 2 bytes per row, n sums and 5 n constants
        // laid per panel; the query holds dim_pad bytes <= 127 (QQuery); out holds
        // n (checked) and is the caller's own buffer; the tier's CPU
        // support is proven by `v`.
        unsafe {
            f(
                p,
                self.dim_pad,
                n / PANEL,
                ns,
                c,
                q.codes().as_ptr(),
                &qc,
                out.as_mut_ptr(),
            )
        };
        Ok(true)
    }
}
