//! [`QRows`] re-laid as panels for the multi-query kernels
//! ([`crate::kernels::qdot::PanelFn`]).

use super::{
    lines_as_bytes, lines_as_bytes_mut, Line, QQuery, QRows, Variant, PAD, PANEL, PANEL_QUERIES,
};
use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::kernels::qdot as kq;

/// [`QRows`] re-laid as panels of [`PANEL`] rows for the multi-query
/// kernels ([`crate::kernels::qdot::PanelFn`]: one 64-byte load of a panel
/// feeds 16 rows' dot products for up to four queries, with no horizontal
/// sums). The row count is padded to a multiple of 16 with all-zero rows
/// (scale 0, sum 0), whose scores are 0 and which callers ignore. Derived
/// from the rows (never stored in a file); its scores are bit for bit
/// those of [`QRows::score_run_with`] without bias.
#[derive(Clone, Default)]
pub struct QPanels {
    lines: Vec<Line>,
    scales: Vec<f32>,
    sums: Vec<i32>,
    rows: usize,
    dim_pad: usize,
}

impl QPanels {
    /// The panels of `r`.
    pub fn new(r: &QRows) -> Result<QPanels> {
        let mut p = QPanels::default();
        p.set_rows(None, r, 0, r.rows)?;
        Ok(p)
    }

    /// Re-lays rows `first .. first + n` of `r` as these panels (row 0 of
    /// the panels is row `first`), reusing the buffers: a batch's scratch
    /// copy of one IVF list that several of its queries score. With `v`
    /// an AVX-512 variant the vector re-lay moves the bytes (16 x 16
    /// transposes of 32-bit groups), otherwise the scalar one; both write
    /// the same bytes.
    pub fn set_rows(
        &mut self,
        v: Option<Variant>,
        r: &QRows,
        first: usize,
        n: usize,
    ) -> Result<()> {
        let dp = r.dim_pad;
        if first.checked_add(n).is_none_or(|e| e > r.rows) {
            bail!(
                InvalidArgument,
                "rows {first} + {n}: beyond the {} rows",
                r.rows
            );
        }
        let padded = n.div_ceil(PANEL) * PANEL;
        let bytes = checked_mul(padded, dp, "rows * dim_pad")?;
        if self.lines.capacity() < bytes / PAD {
            self.lines = try_vec(bytes / PAD, "panels")?;
        }
        self.lines.resize(bytes / PAD, Line::default());
        let dst = lines_as_bytes_mut(&mut self.lines);
        let src = &r.codes()[first * dp..(first + n) * dp];
        match v.and_then(|v| kq::relay_for(v.tier)) {
            // SAFETY: dim_pad is a valid multiple of PAD (from QRows); src
            // holds n * dp bytes and dst padded * dp >= ceil(n / 16) * 16 *
            // dp (distinct buffers); the tier's CPU support is proven by `v`.
            Some(f) if n > 0 => unsafe { f(src.as_ptr(), dp, n, dst.as_mut_ptr()) },
            _ => kq::relay_scalar(src, dp, n, dst),
        }
        // Exactly `padded` on a first use (a list an IVF index keeps);
        // a reused buffer keeps its capacity.
        self.scales.clear();
        self.scales.reserve_exact(padded);
        self.scales.extend_from_slice(&r.scales[first..first + n]);
        self.scales.resize(padded, 0.0);
        self.sums.clear();
        self.sums.reserve_exact(padded);
        self.sums.extend_from_slice(&r.sums[first..first + n]);
        self.sums.resize(padded, 0);
        self.rows = n;
        self.dim_pad = dp;
        Ok(())
    }

    /// Rows (without the padding).
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim_pad(&self) -> usize {
        self.dim_pad
    }
    /// Rows including the zero padding: a multiple of 16, the length of
    /// [`QPanels::score`]'s output per query.
    pub fn padded_rows(&self) -> usize {
        self.scales.len()
    }
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.lines.len() * PAD + self.scales.len() * 4 + self.sums.len() * 4
    }

    /// The panel bytes, sums and scales (the inputs of a
    /// [`crate::kernels::qdot::PanelFn`]; `tests/qdot_panels.rs` calls the
    /// kernels with them directly).
    #[doc(hidden)]
    pub fn raw_parts(&self) -> (*const i8, *const i32, *const f32) {
        (
            lines_as_bytes(&self.lines).as_ptr(),
            self.sums.as_ptr(),
            self.scales.as_ptr(),
        )
    }

    /// Whether [`QPanels::score`] can run with variant `v` (a panel kernel
    /// exists for its tier: AVX-512).
    pub fn has_kernel(v: Variant) -> bool {
        kq::panel_for(v.tier, v.k).is_some()
    }

    /// Scores rows `first .. first + n` (`first` and `n` multiples of 16,
    /// within [`QPanels::padded_rows`]) for every query of `qs` (at most
    /// [`PANEL_QUERIES`]), query `i` into `out[i * stride ..][..n]`.
    /// Returns `Ok(false)` and writes nothing when `v` has no panel kernel.
    pub fn score(
        &self,
        v: Variant,
        first: usize,
        n: usize,
        qs: &[&QQuery],
        out: &mut [f32],
        stride: usize,
    ) -> Result<bool> {
        // The flavour of `v` (a plain AVX-512 variant on a VNNI CPU runs
        // the plain panel kernel).
        let Some(f) = kq::panel_for(v.tier, v.k) else {
            return Ok(false);
        };
        let nq = qs.len();
        if nq == 0 || nq > PANEL_QUERIES {
            bail!(
                InvalidArgument,
                "{nq} queries; 1 to {PANEL_QUERIES} allowed"
            );
        }
        if !first.is_multiple_of(PANEL)
            || !n.is_multiple_of(PANEL)
            || first.checked_add(n).is_none_or(|e| e > self.padded_rows())
        {
            bail!(
                InvalidArgument,
                "rows {first} + {n}: whole panels within {} needed",
                self.padded_rows()
            );
        }
        if let Some(q) = qs.iter().find(|q| q.dim_pad() != self.dim_pad) {
            bail!(
                InvalidArgument,
                "query of dim_pad {}, panels of {}",
                q.dim_pad(),
                self.dim_pad
            );
        }
        if n > 0 && (stride < n || out.len() < (nq - 1) * stride + n) {
            bail!(
                BufferTooSmall,
                "`out` holds {}, {nq} queries at stride {stride} of {n} need more",
                out.len()
            );
        }
        if n == 0 {
            return Ok(true);
        }
        let mut qp = [std::ptr::null::<u8>(); PANEL_QUERIES];
        let mut sq = [0.0f32; PANEL_QUERIES];
        let mut op = [std::ptr::null_mut::<f32>(); PANEL_QUERIES];
        let base = out.as_mut_ptr();
        for (i, q) in qs.iter().enumerate() {
            qp[i] = q.codes().as_ptr();
            sq[i] = q.scale();
            // SAFETY: i * stride + n <= out.len() (checked above).
            op[i] = unsafe { base.add(i * stride) };
        }
        // SAFETY: the PanelFn preconditions: dim_pad valid (from QRows),
        // `n / 16` panels from panel `first / 16`, with their sums
        // and scales from row `first`; every query holds dim_pad bytes
        // <= 127 (QQuery); out[i] .. + n is within `out` (checked) and
        // distinct per query (stride >= n); the tier's CPU support is
        // proven by `v`.
        unsafe {
            f(
                lines_as_bytes(&self.lines)
                    .as_ptr()
                    .add(first * self.dim_pad),
                self.dim_pad,
                n / PANEL,
                self.sums.as_ptr().add(first),
                self.scales.as_ptr().add(first),
                &qp,
                &sq,
                nq,
                &op,
            )
        };
        Ok(true)
    }
}
