//! The four nearest centroids of each point (k-means assignment), a
//! GEMM-shaped pass on the [`crate::kernels::centroid`] kernels.
//!
//! [`Panels::pack`] transposes the centroids once (per k-means iteration)
//! into panels of 16 centroids with their `h_c = -|c|^2 / 2` (given by the
//! caller, so that it is the same value on every tier);
//! [`Panels::top4_isa`] scores a block of points against every centroid,
//! `s(x, c) = <x, c> + h_c`, and keeps each point's four best, sorted
//! descending (equal scores by smaller id; padded with `-inf` /
//! [`TOPK_PAD_ID`] when there are fewer than four centroids). The best
//! score is the nearest centroid: `|x - c|^2 = |x|^2 - 2 s(x, c)`.
//!
//! # Schedule
//! The centroids are taken in chunks of [`CHUNK_PANELS`] panels (512
//! centroids of 129 floats = 264 KiB, which stays in a Zen 4 L2 of 1 MiB);
//! for each chunk every point of the block meets every panel of the chunk
//! in register tiles (see the kernels), its running top-4 carried across
//! chunks. Single-threaded: the caller splits the points between threads.
//!
//! # Accuracy
//! Every tier computes each score within
//! `gamma(xdim + 1) * (|h_c| + sum_d |x_d c_d|)` of `<x, c> + h_c`,
//! `gamma(n) = n u / (1 - n u)`, `u = 2^-24` (`xdim` fused or unfused
//! multiply-adds onto `h_c`). The scalar, AVX2 and AVX-512 tiers compute
//! the same chain in the same order and agree bit for bit; the portable
//! tier may differ within the bound.

use crate::bail;
use crate::error::{checked_mul, strided_len, Result};
use crate::isa::{self, Isa};
use crate::kernels::centroid::{self as kc, PANEL, TOP};
pub use crate::matmul::TOPK_PAD_ID;

/// Panels scored per pass over a block of points.
pub const CHUNK_PANELS: usize = 32;

/// Centroids packed for [`Panels::top4_isa`].
#[derive(Clone, Debug, Default)]
pub struct Panels {
    data: Vec<f32>,
    nlist: usize,
    xdim: usize,
    np: usize,
}

impl Panels {
    /// Packs `nlist` centroids of `xdim` floats (row `c` at
    /// `cent[c * xdim ..]`) with their `h[c]`.
    pub fn pack(cent: &[f32], h: &[f32], nlist: usize, xdim: usize) -> Result<Panels> {
        let mut p = Panels::default();
        p.repack(cent, h, nlist, xdim)?;
        Ok(p)
    }

    /// [`Panels::pack`] into the existing allocation.
    pub fn repack(&mut self, cent: &[f32], h: &[f32], nlist: usize, xdim: usize) -> Result<()> {
        if xdim == 0 {
            bail!(InvalidArgument, "xdim must be >= 1");
        }
        if nlist >= u32::MAX as usize - 2 * PANEL {
            bail!(InvalidArgument, "nlist is {nlist}; at most 2^32 - 34");
        }
        if cent.len() < checked_mul(nlist, xdim, "nlist * xdim")? || h.len() < nlist {
            bail!(
                InvalidArgument,
                "{nlist} centroids of {xdim} floats need {} floats and {nlist} h values; got {} and {}",
                nlist * xdim,
                cent.len(),
                h.len()
            );
        }
        // Panels in pairs (the AVX-512 tile takes two).
        let np = nlist.div_ceil(2 * PANEL) * 2;
        let pf = (xdim + 1) * PANEL;
        self.data.clear();
        self.data
            .resize(checked_mul(np, pf, "panels * (xdim + 1) * 16")?, 0.0);
        for c in 0..np * PANEL {
            let (p, lane) = (c / PANEL, c % PANEL);
            let panel = &mut self.data[p * pf..(p + 1) * pf];
            if c < nlist {
                panel[lane] = h[c];
                for (d, &v) in cent[c * xdim..(c + 1) * xdim].iter().enumerate() {
                    panel[PANEL + d * PANEL + lane] = v;
                }
            } else {
                // Padding: a score of -inf never enters a top-4.
                panel[lane] = f32::NEG_INFINITY;
            }
        }
        self.nlist = nlist;
        self.xdim = xdim;
        self.np = np;
        Ok(())
    }

    pub fn nlist(&self) -> usize {
        self.nlist
    }

    pub fn xdim(&self) -> usize {
        self.xdim
    }

    /// Sets every point's top-4 to `-inf` / [`TOPK_PAD_ID`] (the start
    /// of [`Panels::top4_isa`]).
    pub fn clear(best: &mut [f32], ids: &mut [u32]) {
        Self::start(best, ids, f32::NEG_INFINITY);
    }

    /// Sets every point's top-4 to four `(floor, TOPK_PAD_ID)` entries, a
    /// start for [`Panels::update_isa`] that takes only centroids scoring
    /// above `floor` (`-inf`: [`Panels::clear`]). Where at least four
    /// centroids are known to score above `floor`, the result is the
    /// top-4 of a start from `-inf`, with fewer entries merged on the way.
    pub fn start(best: &mut [f32], ids: &mut [u32], floor: f32) {
        best.fill(floor);
        ids.fill(TOPK_PAD_ID);
    }

    /// The four best centroids of each of the `n` points `x[i * x_stride
    /// ..][..xdim]`: `best[4 i ..][..4]` and `ids[4 i ..][..4]` (module
    /// docs), on one chosen tier.
    pub fn top4_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        x_stride: usize,
        best: &mut [f32],
        ids: &mut [u32],
    ) -> Result<()> {
        let m = checked_mul(n, TOP, "n * 4")?;
        if best.len() < m || ids.len() < m {
            bail!(
                InvalidArgument,
                "{n} points need {m} scores and ids; got {} and {}",
                best.len(),
                ids.len()
            );
        }
        Self::clear(&mut best[..m], &mut ids[..m]);
        self.update_isa(tier, x, n, x_stride, best, ids)
    }

    /// [`Panels::top4_isa`] that merges into the top-4 already in
    /// `best`/`ids` (each point's four sorted as the module docs say)
    /// instead of starting afresh.
    pub fn update_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        x_stride: usize,
        best: &mut [f32],
        ids: &mut [u32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        let xdim = self.xdim;
        if xdim == 0 {
            bail!(InvalidArgument, "no centroids packed");
        }
        if x_stride < xdim {
            bail!(InvalidArgument, "x_stride {x_stride} < xdim {xdim}");
        }
        let need = strided_len(n, xdim, x_stride, "x")?;
        if x.len() < need {
            bail!(
                InvalidArgument,
                "x holds {} floats; {n} points need {need}",
                x.len()
            );
        }
        let m = checked_mul(n, TOP, "n * 4")?;
        if best.len() < m || ids.len() < m {
            bail!(
                InvalidArgument,
                "{n} points need {m} scores and ids; got {} and {}",
                best.len(),
                ids.len()
            );
        }
        if n == 0 {
            return Ok(());
        }
        let top4 = kc::kernels(tier).top4;
        let pf = (xdim + 1) * PANEL;
        let mut p0 = 0;
        while p0 < self.np {
            let np = CHUNK_PANELS.min(self.np - p0);
            // SAFETY: xdim >= 1; x holds `need` floats (checked above);
            // panels p0..p0+np < self.np lie in `data` (np * pf floats
            // each, packed by `repack`) and np is even (CHUNK_PANELS and
            // self.np are); best/ids hold 4 n entries (checked), sorted by
            // `clear` or by the caller; the tier is supported.
            unsafe {
                top4(
                    x,
                    x_stride,
                    n,
                    xdim,
                    &self.data[p0 * pf..(p0 + np) * pf],
                    np,
                    (p0 * PANEL) as u32,
                    &mut best[..m],
                    &mut ids[..m],
                )
            };
            p0 += np;
        }
        Ok(())
    }
}
