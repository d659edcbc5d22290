//! Holographic reduced representations (HRR) for extreme multi-label
//! inference: binding by circular convolution, unbinding, projection to
//! unit magnitude in the Fourier domain, and a seeded generator of
//! projected class vectors.
//!
//! A network trained with HRR predicts one `d`-dimensional vector `s`
//! instead of one logit per label. Labels are class vectors `c_i`; a set of
//! labels is encoded as `s = sum_l p ⊛ c_l` with a fixed key `p`. At
//! inference `y = p† ⊛ s` is unbound, normalised (`y / (|y| + 1e-8)`), and
//! the labels are the top-k of `c_i . y`: a maximum inner-product search
//! over the class vectors, which lshk's indexes answer (`examples/hrr_xml.rs`,
//! `docs/hrr.md`).
//!
//! # Operations (rows of `d` floats, batched)
//! * **bind** `x ⊛ y = real(ifft(fft(x) ⊙ fft(y)))`, circular convolution:
//!   `(x ⊛ y)_j = sum_i x_i y_{(j - i) mod d}`.
//! * **unbind** `key† ⊛ s` with the approximate inverse
//!   `x†_i = x_{-i mod d}` (spectrum `conj(fft(x))`, [`Inverse::Approx`]),
//!   or with the exact inverse `ifft(1 / fft(x))` ([`Inverse::Exact`]:
//!   `ifft(fft(s) / fft(key))`; a key with a zero frequency has none, and
//!   the output is then NaN or infinite).
//! * **project** `real(ifft(fft(x) / (|fft(x)| + 1e-5)))` ([`PROJECT_EPS`]):
//!   every frequency of the result has magnitude ~1, so its approximate
//!   inverse is (up to the 1e-5) its exact inverse.
//!
//! The FFTs are `realfft`'s (on `rustfft`; planned once in [`Hrr::new`],
//! unnormalised, `1 / d` folded into the pointwise step). The pointwise
//! steps between them are lshk kernels (`src/kernels/hrr/`) with the usual
//! tiers; every tier returns the scalar oracle's bits (no FMA, see the
//! kernel module), so the result of a call does not depend on the tier.
//! A call allocates nothing: the buffers are a [`Scratch`], one per
//! thread. An [`Hrr`] is immutable and `Sync`.
//!
//! # Error bound
//! Let `u = 2^-24`, `L = 3 ceil(log2(2d))` and `e_F = 5 u L`: we take
//! `|fl(F v) - F v|_2 <= e_F |F v|_2` for each transform, which is the
//! Cooley-Tukey bound (Higham, *Accuracy and Stability of Numerical
//! Algorithms*, Thm. 24.2: `log2(n) eta` with `eta` a few `u` for accurate
//! twiddles) with `L` covering rustfft's mixed-radix, Rader and Bluestein
//! plans (Bluestein runs three transforms of length >= 2d - 1). For
//! `z = x ⊛ y` with spectra `X, Y` the computed `ẑ` satisfies
//!
//! `|ẑ - z|_2 <= ((2 e_F + 4u)(|X|_inf |Y|_2 + |Y|_inf |X|_2) / 2 +
//! (e_F + 4u) |X ⊙ Y|_2) (1 + 2 e_F) / sqrt(d) + u |z|_2`:
//! the two forward errors enter through the other operand's spectrum
//! (`|X ⊙ δY|_2 <= |X|_inf |δY|_2`), the pointwise product and the `1/d`
//! scale add `4u` relative per frequency, the inverse transform `e_F`, and
//! `|F⁻¹ v|_2 = |v|_2 / sqrt(d)` (Parseval). For unbinding, `conj(X)` is
//! the same bound; the exact inverse multiplies it by `max|X| / min|X|`
//! (the conditioning of the division). `tests/hrr.rs` checks this against a
//! direct O(d²) circular convolution in f64.
//!
//! # Class vectors
//! [`class_vectors`] documents the generator; it does not use the FFT
//! library, so its output is bit-identical on every platform.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::bail;
use crate::error::{checked_mul, first_non_finite, try_vec, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::hrr::{self as kh, Kernels};

mod classgen;

pub use classgen::{class_vectors, ClassGen};

/// The `1e-5` of the projection `fft(x) / (|fft(x)| + 1e-5)`.
pub const PROJECT_EPS: f32 = 1e-5;

/// The `1e-8` of the normalisation `y / (|y| + 1e-8)` of an unbound vector.
pub const NORMALIZE_EPS: f32 = 1e-8;

/// The largest `d` accepted (2^24).
pub const MAX_DIM: usize = 1 << 24;

/// Which inverse of the key [`Hrr::unbind`] uses.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inverse {
    /// `x†_i = x_{-i mod d}` (spectrum `conj(fft(x))`): exact for
    /// projected keys, an approximation otherwise.
    Approx = 0,
    /// `ifft(1 / fft(x))`: exact, undefined where `fft(x)` has a zero.
    Exact = 1,
}

impl Inverse {
    pub fn from_u32(v: u32) -> Option<Inverse> {
        match v {
            0 => Some(Inverse::Approx),
            1 => Some(Inverse::Exact),
            _ => None,
        }
    }
}

/// FFT plans of one dimension `d` (created once), the `1/d` scale and an
/// optional pinned tier. Immutable and `Sync`: share one across threads,
/// each with its own [`Scratch`].
#[derive(Clone)]
pub struct Hrr {
    d: usize,
    fwd: Arc<dyn RealToComplex<f32>>,
    inv: Arc<dyn ComplexToReal<f32>>,
    scale: f32,
    tier: Option<Isa>,
    fft_scratch: usize,
}

impl std::fmt::Debug for Hrr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hrr(d = {}, tier = {:?})", self.d, self.tier)
    }
}

/// Per-thread buffers of an [`Hrr`]: one real row, three spectra and the
/// FFT library's scratch. Made by [`Hrr::scratch`]; a scratch of another
/// dimension is refused.
pub struct Scratch {
    d: usize,
    row: Vec<f32>,
    a: Vec<Complex<f32>>,
    b: Vec<Complex<f32>>,
    c: Vec<Complex<f32>>,
    fft: Vec<Complex<f32>>,
}

/// The `2 * len` floats of a spectrum (`Complex<f32>` is `#[repr(C)]`
/// `{re, im}`).
fn floats(v: &[Complex<f32>]) -> &[f32] {
    // SAFETY: Complex<f32> is #[repr(C)] with two f32 fields and no
    // padding, so `len` values are `2 len` consecutive, initialised f32.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<f32>(), v.len() * 2) }
}

fn floats_mut(v: &mut [Complex<f32>]) -> &mut [f32] {
    // SAFETY: as `floats`; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<f32>(), v.len() * 2) }
}

fn fft_error(e: realfft::FftError) -> Error {
    Error::new(
        Status::Panic,
        format!("internal FFT error (a bug in lshk): {e}"),
    )
}

impl Hrr {
    /// Plans the transforms of dimension `d` (`1..=MAX_DIM`) for the
    /// active tier at each call.
    pub fn new(d: usize) -> Result<Hrr> {
        if d == 0 || d > MAX_DIM {
            bail!(
                InvalidArgument,
                "d is {d}; it must be between 1 and {MAX_DIM}"
            );
        }
        let mut planner = RealFftPlanner::<f32>::new();
        let fwd = planner.plan_fft_forward(d);
        let inv = planner.plan_fft_inverse(d);
        let fft_scratch = fwd.get_scratch_len().max(inv.get_scratch_len());
        Ok(Hrr {
            d,
            fwd,
            inv,
            scale: 1.0 / d as f32,
            tier: None,
            fft_scratch,
        })
    }

    /// As [`Hrr::new`], with every call on `tier` (`UnsupportedIsa` if the
    /// CPU lacks it): how tests and benchmarks reach each tier.
    pub fn new_isa(d: usize, tier: Isa) -> Result<Hrr> {
        isa::check_supported(tier)?;
        let mut h = Hrr::new(d)?;
        h.tier = Some(tier);
        Ok(h)
    }

    /// A copy of this object pinned to `tier` (plans shared).
    pub fn with_isa(&self, tier: Isa) -> Result<Hrr> {
        isa::check_supported(tier)?;
        let mut h = self.clone();
        h.tier = Some(tier);
        Ok(h)
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    /// The tier the next call runs on.
    pub fn tier(&self) -> Isa {
        self.tier.unwrap_or_else(isa::active)
    }

    /// The number of complex frequencies, `d / 2 + 1`.
    pub fn spectrum_len(&self) -> usize {
        self.d / 2 + 1
    }

    /// The buffers a call needs (one per thread).
    pub fn scratch(&self) -> Result<Scratch> {
        let nc = self.spectrum_len();
        Ok(Scratch {
            d: self.d,
            row: try_vec(self.d, "hrr scratch")?,
            a: try_vec(nc, "hrr scratch")?,
            b: try_vec(nc, "hrr scratch")?,
            c: try_vec(nc, "hrr scratch")?,
            fft: try_vec(self.fft_scratch, "hrr scratch")?,
        })
    }

    fn kernels(&self) -> &'static Kernels {
        kh::kernels(self.tier())
    }

    fn check_scratch(&self, s: &Scratch) -> Result<()> {
        if s.d != self.d {
            bail!(
                InvalidArgument,
                "the scratch was made for d = {}, this Hrr has d = {}",
                s.d,
                self.d
            );
        }
        Ok(())
    }

    /// Rows of `what` (`len` a multiple of d), `InvalidArgument` otherwise.
    fn rows_of(&self, len: usize, what: &str) -> Result<usize> {
        if !len.is_multiple_of(self.d) {
            bail!(
                InvalidArgument,
                "`{what}` holds {len} floats, not a whole number of rows of d = {}",
                self.d
            );
        }
        Ok(len / self.d)
    }

    /// Checks a batched two-operand call: `key` holds 1 or `n` rows, `s`
    /// and `out` `n` rows each; everything finite.
    fn check_pair(
        &self,
        key: &[f32],
        key_name: &str,
        s: &[f32],
        s_name: &str,
        out: &[f32],
    ) -> Result<usize> {
        let n = self.rows_of(s.len(), s_name)?;
        let kr = self.rows_of(key.len(), key_name)?;
        if kr != 1 && kr != n {
            bail!(
                InvalidArgument,
                "`{key_name}` holds {kr} rows; it must hold 1 (used for every row) or {n}, as `{s_name}`"
            );
        }
        if out.len() != s.len() {
            bail!(
                BufferTooSmall,
                "`out` holds {} floats, {n} rows of d = {} need {}",
                out.len(),
                self.d,
                s.len()
            );
        }
        check_finite(key, self.d, key_name)?;
        check_finite(s, self.d, s_name)?;
        Ok(kr)
    }

    /// Forward transform of one row into `spec` (the row is copied into
    /// the scratch row first: the library uses its input as scratch).
    fn forward(
        &self,
        x: &[f32],
        row: &mut [f32],
        spec: &mut [Complex<f32>],
        fft: &mut [Complex<f32>],
    ) -> Result<()> {
        row.copy_from_slice(x);
        self.fwd
            .process_with_scratch(row, spec, fft)
            .map_err(fft_error)
    }

    /// Inverse transform of `spec` into `out` (the imaginary parts of the
    /// frequencies 0 and d/2, which are 0 mathematically, are set to 0).
    fn inverse(
        &self,
        spec: &mut [Complex<f32>],
        out: &mut [f32],
        fft: &mut [Complex<f32>],
    ) -> Result<()> {
        spec[0].im = 0.0;
        if self.d.is_multiple_of(2) {
            let last = spec.len() - 1;
            spec[last].im = 0.0;
        }
        self.inv
            .process_with_scratch(spec, out, fft)
            .map_err(fft_error)
    }

    /// The shared body of bind and unbind: for each row r,
    /// `out_r = ifft(op(fft(key_r or key_0), fft(s_r)) / d)`.
    fn pairwise(
        &self,
        op: kh::BinaryFn,
        key: &[f32],
        s: &[f32],
        out: &mut [f32],
        sc: &mut Scratch,
        key_rows: usize,
    ) -> Result<()> {
        let d = self.d;
        let Scratch {
            row, a, b, c, fft, ..
        } = sc;
        if key_rows == 1 {
            self.forward(key, row, a, fft)?;
        }
        for (r, (srow, orow)) in s.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
            if key_rows != 1 {
                self.forward(&key[r * d..(r + 1) * d], row, a, fft)?;
            }
            self.forward(srow, row, b, fft)?;
            // SAFETY: a, b and c each hold spectrum_len() complex values
            // (made by `scratch` for this d, checked), so the three float
            // views have the same even length; the tier was checked when
            // this Hrr was made (or is the active one).
            unsafe { op(floats(a), floats(b), self.scale, floats_mut(c)) };
            self.inverse(c, orow, fft)?;
        }
        Ok(())
    }

    /// Binds row by row: `out_r = x_r ⊛ y_r` (circular convolution), where
    /// `x` holds one row (bound to every row of `y`) or as many as `y`.
    /// `out` holds as many floats as `y`. Errors: `InvalidArgument`
    /// (lengths not whole rows, mismatched row counts, a scratch of another
    /// d), `BufferTooSmall` (`out`), `NonFinite` (NaN or infinity in an
    /// input); nothing is written on error.
    pub fn bind(&self, x: &[f32], y: &[f32], out: &mut [f32], sc: &mut Scratch) -> Result<()> {
        self.check_scratch(sc)?;
        let kr = self.check_pair(x, "x", y, "y", out)?;
        self.pairwise(self.kernels().cmul, x, y, out, sc, kr)
    }

    /// Unbinds row by row: `out_r = key_r† ⊛ s_r` with the chosen inverse
    /// (`key` one row or as many as `s`). Errors as [`Hrr::bind`]. With
    /// [`Inverse::Exact`], a frequency where `fft(key)` is 0 makes the
    /// output NaN or infinite (not checked).
    pub fn unbind(
        &self,
        inverse: Inverse,
        key: &[f32],
        s: &[f32],
        out: &mut [f32],
        sc: &mut Scratch,
    ) -> Result<()> {
        self.check_scratch(sc)?;
        let kr = self.check_pair(key, "key", s, "s", out)?;
        let k = self.kernels();
        let op = match inverse {
            Inverse::Approx => k.cmulc,
            Inverse::Exact => k.cdiv,
        };
        self.pairwise(op, key, s, out, sc, kr)
    }

    /// Projects each row: `out_r = real(ifft(fft(x_r) / (|fft(x_r)| +
    /// 1e-5)))`. Errors as [`Hrr::bind`].
    pub fn project(&self, x: &[f32], out: &mut [f32], sc: &mut Scratch) -> Result<()> {
        self.check_scratch(sc)?;
        self.rows_of(x.len(), "x")?;
        if out.len() != x.len() {
            bail!(
                BufferTooSmall,
                "`out` holds {} floats, `x` {}",
                out.len(),
                x.len()
            );
        }
        check_finite(x, self.d, "x")?;
        let project = self.kernels().project;
        let Scratch { row, a, c, fft, .. } = sc;
        for (xrow, orow) in x.chunks_exact(self.d).zip(out.chunks_exact_mut(self.d)) {
            self.forward(xrow, row, a, fft)?;
            // SAFETY: a and c hold spectrum_len() values each (see
            // `pairwise`); the tier is supported.
            unsafe { project(floats(a), PROJECT_EPS, self.scale, floats_mut(c)) };
            self.inverse(c, orow, fft)?;
        }
        Ok(())
    }

    /// The FFT library alone, for benchmarks: two forward transforms and
    /// one inverse per row of `y`, no pointwise step (the inverse
    /// transforms the spectrum of `y`, so `out` is `y` up to rounding,
    /// scaled by d). The baseline the bind target is measured against.
    pub fn fft_only(&self, x: &[f32], y: &[f32], out: &mut [f32], sc: &mut Scratch) -> Result<()> {
        self.check_scratch(sc)?;
        self.check_pair(x, "x", y, "y", out)?;
        let d = self.d;
        let Scratch { row, a, b, fft, .. } = sc;
        for (r, (yrow, orow)) in y.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
            let xr = if x.len() == d { 0 } else { r };
            row.copy_from_slice(&x[xr * d..(xr + 1) * d]);
            self.fwd
                .process_with_scratch(row, a, fft)
                .map_err(fft_error)?;
            row.copy_from_slice(yrow);
            self.fwd
                .process_with_scratch(row, b, fft)
                .map_err(fft_error)?;
            self.inverse(b, orow, fft)?;
        }
        Ok(())
    }
}

/// `NonFinite` naming the first NaN or infinity of `x` (rows of `d`).
fn check_finite(x: &[f32], d: usize, what: &str) -> Result<()> {
    if let Some((r, j)) = first_non_finite(x, x.len() / d, d, d) {
        bail!(
            NonFinite,
            "{what}[{r}][{j}] is {} (finite values needed)",
            x[r * d + j]
        );
    }
    Ok(())
}

/// `y / (|y|_2 + 1e-8)` in place ([`NORMALIZE_EPS`]); the norm is summed
/// in f64, so the result does not depend on the tier.
pub fn normalize(y: &mut [f32]) {
    let n = y.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt();
    let inv = (1.0 / (n + NORMALIZE_EPS as f64)) as f32;
    for v in y {
        *v *= inv;
    }
}

/// `m * d` as a checked size (for callers sizing class-vector buffers).
pub fn class_len(m: usize, d: usize) -> Result<usize> {
    checked_mul(m, d, "m * d")
}
