//! The exact dense output layer: `logits = W q + b` for every row, and the
//! exact top-k per query. It is the baseline the sublinear path is timed
//! against (the "exact dense SIMD pass over W" of the demo) and the ground
//! truth for recall.
//!
//! # Schedule
//! Queries are taken in batches of up to [`QUERY_BATCH`]; for each batch W
//! is streamed once, in tiles of rows: [`ROW_TILE_B1`] rows when the batch
//! holds one query (a GEMV, bound by the memory bandwidth: each row is used
//! once), [`ROW_TILE`] rows otherwise (a tile stays in L1 while every query
//! of the batch is multiplied with it, so each row is fetched from memory
//! once per batch and reused from cache). After each tile the bias is added
//! and every query's running top-k is updated with the tile's logits (a
//! compare against the current k-th score per logit; an insertion only when
//! it is beaten). Single-threaded unless [`DenseLayer::topk_threads`] is
//! used (queries split between threads).
//!
//! # Accuracy
//! Every tier computes each logit within `gamma(dim + 1) * (S + |b|)` of the
//! exact value, `S = sum_j |w_j q_j|`, `gamma(n) = n u / (1 - n u)`,
//! `u = 2^-24` (`dim` roundings in the dot product in any order, one for
//! the bias); two tiers therefore differ by at most twice that.
//!
//! # Top-k ordering
//! As [`crate::matmul::topk`]: per query the k largest logits, descending,
//! equal logits by smaller id, NaN never selected, padded with
//! [`TOPK_PAD_ID`] / `-inf` when the layer has fewer than k non-NaN logits.

use std::cell::RefCell;

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, strided_len, Result};
use crate::isa::{self, Isa};
use crate::kernels::dense as kd;
pub use crate::matmul::TOPK_PAD_ID;

/// Queries multiplied per pass over W.
pub const QUERY_BATCH: usize = 64;
/// Rows per tile when a pass holds several queries (32 rows of 128 floats
/// = 16 KiB: half of Zen 3's L1d).
pub const ROW_TILE: usize = 32;
/// Rows per tile for a single query (only the size of the logit buffer).
pub const ROW_TILE_B1: usize = 1024;

/// A borrowed dense layer: `rows` rows of `dim` floats at stride `stride`,
/// optional bias.
#[derive(Clone, Copy, Debug)]
pub struct DenseLayer<'a> {
    w: &'a [f32],
    rows: usize,
    dim: usize,
    stride: usize,
    bias: Option<&'a [f32]>,
}

#[derive(Default)]
struct Scratch {
    logits: Vec<f32>,
    /// Per query, its current best: ascending by quality (worst first).
    best: Vec<Vec<(f32, u32)>>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `a` ranks before `b`: larger score, or equal score and smaller id.
#[inline]
fn better(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// Inserts `c` into `best` (worst first, at most `k` entries).
#[inline]
fn insert(best: &mut Vec<(f32, u32)>, k: usize, c: (f32, u32)) {
    if best.len() == k {
        if !better(c, best[0]) {
            return;
        }
        best.remove(0);
    }
    let pos = best.partition_point(|&e| better(c, e));
    best.insert(pos, c);
}

impl<'a> DenseLayer<'a> {
    /// Checks the shape: `dim >= 1`, `stride >= dim`, `w` holds
    /// `(rows - 1) * stride + dim` floats, `bias` (if any) `rows` values,
    /// `rows < 2^32 - 1` (ids are u32, `u32::MAX` is the padding id).
    pub fn new(
        w: &'a [f32],
        rows: usize,
        dim: usize,
        stride: usize,
        bias: Option<&'a [f32]>,
    ) -> Result<Self> {
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        if rows >= u32::MAX as usize {
            bail!(InvalidArgument, "rows is {rows}; at most 2^32 - 2");
        }
        crate::error::check_layer_buffers(w, bias, rows, dim, stride)?;
        Ok(DenseLayer {
            w,
            rows,
            dim,
            stride,
            bias,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }

    fn check_q(&self, q: &[f32], nq: usize, q_stride: usize) -> Result<()> {
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        if q.len() < ql {
            bail!(
                BufferTooSmall,
                "`q` holds {} floats, {nq} queries of stride {q_stride} need {ql}",
                q.len()
            );
        }
        Ok(())
    }

    /// Every logit: `out[i * rows + r] = dot(W[r], Q[i]) + b[r]`, on one tier.
    pub fn logits_isa(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        out: &mut [f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_q(q, nq, q_stride)?;
        let need = checked_mul(nq, self.rows, "nq * rows")?;
        if out.len() < need {
            bail!(
                BufferTooSmall,
                "`out` holds {} floats, nq * rows = {need}",
                out.len()
            );
        }
        if need == 0 {
            return Ok(());
        }
        let tile = kd::kernels(tier).tile;
        // SAFETY: shapes checked above: W holds `rows` rows at `stride`, q
        // `nq` queries at `q_stride`, out `nq` rows of `rows`; dim >= 1;
        // the tier is supported.
        unsafe {
            tile(
                self.w,
                self.stride,
                self.rows,
                self.dim,
                q,
                q_stride,
                nq,
                out,
                self.rows,
            )
        };
        if let Some(b) = self.bias {
            for o in out[..need].chunks_exact_mut(self.rows) {
                o.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            }
        }
        Ok(())
    }

    /// The exact top-k of every query on the active tier (see the module
    /// documentation), into `out_ids` / `out_scores` (`nq * k` each).
    pub fn topk(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        self.topk_isa(isa::active(), q, nq, q_stride, k, out_ids, out_scores)
    }

    /// [`Self::topk`] with the queries split between `threads` threads
    /// (0 = all cores), in whole batches of [`QUERY_BATCH`].
    #[allow(clippy::too_many_arguments)]
    pub fn topk_threads(
        &self,
        threads: usize,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        let tier = isa::active();
        self.check_topk(q, nq, q_stride, k, out_ids, out_scores)?;
        let threads = crate::par::threads(threads);
        let batches = nq.div_ceil(QUERY_BATCH);
        let per = batches.div_ceil(threads.clamp(1, batches.max(1))).max(1) * QUERY_BATCH;
        if nq <= per || k == 0 {
            return self.topk_isa(tier, q, nq, q_stride, k, out_ids, out_scores);
        }
        crate::par::try_map(
            (0..nq)
                .step_by(per)
                .zip(out_ids[..nq * k].chunks_mut(per * k))
                .zip(out_scores[..nq * k].chunks_mut(per * k)),
            |((c, oi), os)| {
                let n = per.min(nq - c);
                self.topk_isa(tier, &q[c * q_stride..], n, q_stride, k, oi, os)
            },
        )?;
        Ok(())
    }

    fn check_topk(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        out_ids: &[u32],
        out_scores: &[f32],
    ) -> Result<()> {
        self.check_q(q, nq, q_stride)?;
        let need = checked_mul(nq, k, "nq * k")?;
        if out_ids.len() < need || out_scores.len() < need {
            bail!(
                BufferTooSmall,
                "outputs hold {} ids and {} scores, nq * k = {need} needed",
                out_ids.len(),
                out_scores.len()
            );
        }
        Ok(())
    }

    /// [`Self::topk`] on one chosen tier (`UnsupportedIsa` if the CPU lacks it).
    #[allow(clippy::too_many_arguments)]
    pub fn topk_isa(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_topk(q, nq, q_stride, k, out_ids, out_scores)?;
        if nq == 0 || k == 0 {
            return Ok(());
        }
        let tile = kd::kernels(tier).tile;
        let (rows, dim, stride) = (self.rows, self.dim, self.stride);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let Scratch { logits, best } = &mut *s;
            let mut q0 = 0;
            while q0 < nq {
                let nb = QUERY_BATCH.min(nq - q0);
                let rt = if nb == 1 { ROW_TILE_B1 } else { ROW_TILE };
                if logits.len() < nb * rt {
                    logits.resize(nb * rt, 0.0);
                }
                if best.len() < nb {
                    best.resize_with(nb, Vec::new);
                }
                for b in best[..nb].iter_mut() {
                    b.clear();
                    b.reserve(k + 1);
                }
                let qb = &q[q0 * q_stride..];
                let mut r0 = 0;
                while r0 < rows {
                    let nr = rt.min(rows - r0);
                    // SAFETY: rows r0..r0+nr exist in W (checked in `new`),
                    // queries q0..q0+nb in q (checked above); `logits` holds
                    // nb * rt >= (nb - 1) * rt + nr floats; dim >= 1; the
                    // tier is supported.
                    unsafe {
                        tile(
                            &self.w[r0 * stride..],
                            stride,
                            nr,
                            dim,
                            qb,
                            q_stride,
                            nb,
                            logits,
                            rt,
                        )
                    };
                    for (i, bq) in best[..nb].iter_mut().enumerate() {
                        let lg = &mut logits[i * rt..i * rt + nr];
                        if let Some(b) = self.bias {
                            lg.iter_mut()
                                .zip(&b[r0..r0 + nr])
                                .for_each(|(v, b)| *v += b);
                        }
                        let mut j = 0;
                        // Fill up to k with non-NaN logits.
                        while bq.len() < k && j < nr {
                            if !lg[j].is_nan() {
                                insert(bq, k, (lg[j], (r0 + j) as u32));
                            }
                            j += 1;
                        }
                        // Rows come in ascending id order, so an equal
                        // score never displaces: only `> k-th` enters.
                        let mut thr = bq.first().map_or(f32::NEG_INFINITY, |e| e.0);
                        // Eight at a time: only lanes above the k-th score
                        // (NaN compares false) are looked at one by one.
                        while j + 8 <= nr {
                            let v = f32x8::from(<[f32; 8]>::try_from(&lg[j..j + 8]).unwrap());
                            let mut m = v.simd_gt(f32x8::splat(thr)).to_bitmask();
                            while m != 0 {
                                let l = j + m.trailing_zeros() as usize;
                                m &= m - 1;
                                if lg[l] > thr {
                                    insert(bq, k, (lg[l], (r0 + l) as u32));
                                    thr = bq[0].0;
                                }
                            }
                            j += 8;
                        }
                        while j < nr {
                            if lg[j] > thr {
                                insert(bq, k, (lg[j], (r0 + j) as u32));
                                thr = bq[0].0;
                            }
                            j += 1;
                        }
                    }
                    r0 += nr;
                }
                for (i, bq) in best[..nb].iter().enumerate() {
                    let base = (q0 + i) * k;
                    for t in 0..k {
                        let (s, id) = if t < bq.len() {
                            bq[bq.len() - 1 - t]
                        } else {
                            (f32::NEG_INFINITY, TOPK_PAD_ID)
                        };
                        out_ids[base + t] = id;
                        out_scores[base + t] = s;
                    }
                }
                q0 += nb;
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn tiers() -> Vec<Isa> {
        for t in Isa::ALL {
            if isa::check_supported(t).is_err() {
                println!("skipped: {} tier (CPU lacks it)", t.name());
            }
        }
        Isa::supported().collect()
    }

    /// Logits of every tier against the scalar oracle within
    /// `2 * gamma(dim + 1) * (S + |b|)`, over dims 1..=49 (every size up to
    /// three AVX-512 widths + 1), strides > dim, unaligned starts, row and
    /// query counts that leave every register-block remainder.
    #[test]
    fn logits_match_scalar_within_bound() {
        let mut r = SplitMix64::new(11);
        let u = f64::from(f32::EPSILON) / 2.0;
        for dim in (1..=49).chain([128, 300]) {
            for (rows, nq, pad) in [(1, 1, 0), (7, 3, 1), (13, 5, 3), (64, 2, 0)] {
                let stride = dim + pad;
                let off = 1; // unaligned start
                let w: Vec<f32> = (0..off + rows * stride)
                    .map(|_| r.next_normal() as f32)
                    .collect();
                let q: Vec<f32> = (0..off + nq * stride)
                    .map(|_| r.next_normal() as f32)
                    .collect();
                let b: Vec<f32> = (0..rows).map(|_| r.next_normal() as f32).collect();
                let layer = DenseLayer::new(&w[off..], rows, dim, stride, Some(&b)).unwrap();
                let mut want = vec![0f32; nq * rows];
                layer
                    .logits_isa(Isa::Scalar, &q[off..], nq, stride, &mut want)
                    .unwrap();
                let n = (dim + 1) as f64;
                let gamma = n * u / (1.0 - n * u);
                for tier in tiers() {
                    let mut got = vec![0f32; nq * rows];
                    layer
                        .logits_isa(tier, &q[off..], nq, stride, &mut got)
                        .unwrap();
                    for i in 0..nq {
                        for j in 0..rows {
                            let s: f64 = (0..dim)
                                .map(|d| {
                                    (w[off + j * stride + d] * q[off + i * stride + d]).abs() as f64
                                })
                                .sum::<f64>()
                                + b[j].abs() as f64;
                            let tol = 2.0 * gamma * s;
                            let (g, e) = (got[i * rows + j] as f64, want[i * rows + j] as f64);
                            assert!(
                                (g - e).abs() <= tol,
                                "{} dim {dim} rows {rows} q {i} row {j}: {g} vs {e} (tol {tol})",
                                tier.name()
                            );
                        }
                    }
                }
            }
        }
    }

    /// Reference top-k: sort all (score, id) pairs.
    fn reference(logits: &[f32], rows: usize, nq: usize, k: usize) -> (Vec<u32>, Vec<f32>) {
        let mut ids = vec![TOPK_PAD_ID; nq * k];
        let mut sc = vec![f32::NEG_INFINITY; nq * k];
        for i in 0..nq {
            let mut v: Vec<(f32, u32)> = (0..rows)
                .map(|j| (logits[i * rows + j], j as u32))
                .filter(|c| !c.0.is_nan())
                .collect();
            // partial_cmp (not total_cmp): -0 and +0 are equal scores.
            v.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
            for (t, c) in v.iter().take(k).enumerate() {
                ids[i * k + t] = c.1;
                sc[i * k + t] = c.0;
            }
        }
        (ids, sc)
    }

    /// With small integers every logit is exact in every tier (all partial
    /// sums are integers < 2^24), so the top-k must match exactly, ties
    /// (many, by construction) included; NaN, infinities and -0 in the bias
    /// exercise the ordering rules; k from 0 to beyond `rows`.
    #[test]
    fn topk_exact_on_integer_data() {
        let mut r = SplitMix64::new(5);
        for &(rows, dim, nq) in &[
            (1usize, 1usize, 1usize),
            (5, 3, 2),
            (100, 17, 3),
            (2100, 40, 1),
            (1500, 24, 70),
        ] {
            let w: Vec<f32> = (0..rows * dim).map(|_| r.below(5) as f32 - 2.0).collect();
            let q: Vec<f32> = (0..nq * dim).map(|_| r.below(3) as f32 - 1.0).collect();
            let mut b: Vec<f32> = (0..rows).map(|_| r.below(3) as f32).collect();
            for (j, v) in b.iter_mut().enumerate() {
                match j % 37 {
                    3 => *v = f32::NAN,
                    5 => *v = f32::INFINITY,
                    7 => *v = f32::NEG_INFINITY,
                    9 => *v = -0.0,
                    _ => {}
                }
            }
            let layer = DenseLayer::new(&w, rows, dim, dim, Some(&b)).unwrap();
            let mut lg = vec![0f32; nq * rows];
            layer.logits_isa(Isa::Scalar, &q, nq, dim, &mut lg).unwrap();
            for k in [0usize, 1, 10, rows, rows + 3] {
                let (wi, ws) = reference(&lg, rows, nq, k);
                for tier in tiers() {
                    let mut gi = vec![7u32; nq * k];
                    let mut gs = vec![7f32; nq * k];
                    layer
                        .topk_isa(tier, &q, nq, dim, k, &mut gi, &mut gs)
                        .unwrap();
                    assert_eq!(gi, wi, "{} rows {rows} k {k}", tier.name());
                    for (a, b) in gs.iter().zip(&ws) {
                        assert!(
                            a == b || (a.is_nan() && b.is_nan()),
                            "{} {a} vs {b}",
                            tier.name()
                        );
                    }
                    let mut ti = vec![7u32; nq * k];
                    let mut ts = vec![7f32; nq * k];
                    layer
                        .topk_threads(2, &q, nq, dim, k, &mut ti, &mut ts)
                        .unwrap();
                    assert_eq!(ti, wi);
                }
            }
        }
    }

    /// Same ids as `matmul::topk` over all rows as candidates.
    #[test]
    fn agrees_with_matmul_topk() {
        let mut r = SplitMix64::new(9);
        let (rows, dim, nq, k) = (3000, 32, 4, 10);
        let w: Vec<f32> = (0..rows * dim).map(|_| r.next_normal() as f32).collect();
        let q: Vec<f32> = (0..nq * dim).map(|_| r.next_normal() as f32).collect();
        let layer = DenseLayer::new(&w, rows, dim, dim, None).unwrap();
        let mut lg = vec![0f32; nq * rows];
        layer.logits_isa(Isa::Scalar, &q, nq, dim, &mut lg).unwrap();
        let ids: Vec<u32> = (0..nq).flat_map(|_| 0..rows as u32).collect();
        let offsets: Vec<usize> = (0..=nq).map(|i| i * rows).collect();
        let (mut wi, mut ws) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        crate::matmul::topk(&lg, Some(&ids), &offsets, k, &mut wi, &mut ws).unwrap();
        let (mut gi, mut gs) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        layer
            .topk_isa(Isa::Scalar, &q, nq, dim, k, &mut gi, &mut gs)
            .unwrap();
        assert_eq!(gi, wi);
        assert_eq!(gs, ws);
    }

    #[test]
    fn errors() {
        let w = vec![0f32; 10];
        assert!(DenseLayer::new(&w, 2, 0, 5, None).is_err());
        assert!(DenseLayer::new(&w, 3, 4, 4, None).is_err());
        assert!(DenseLayer::new(&w, 2, 5, 4, None).is_err());
        assert!(DenseLayer::new(&w, 2, 5, 5, Some(&[0.0])).is_err());
        let l = DenseLayer::new(&w, 2, 5, 5, None).unwrap();
        let (mut i, mut s) = (vec![0u32; 3], vec![0f32; 3]);
        assert!(l.topk(&[0.0; 5], 1, 5, 4, &mut i, &mut s).is_err());
        assert!(l.topk(&[0.0; 4], 1, 5, 3, &mut i, &mut s).is_err());
        l.topk(&[0.0; 5], 1, 5, 3, &mut i, &mut s).unwrap();
        assert_eq!(i, [0, 1, TOPK_PAD_ID]);
        // No rows: everything is padding; no queries: nothing is written.
        let empty = DenseLayer::new(&[], 0, 4, 4, None).unwrap();
        for tier in tiers() {
            let (mut i, mut s) = (vec![0u32; 4], vec![0f32; 4]);
            empty
                .topk_isa(tier, &[1.0; 8], 2, 4, 2, &mut i, &mut s)
                .unwrap();
            assert_eq!(i, [TOPK_PAD_ID; 4]);
            assert!(s.iter().all(|v| *v == f32::NEG_INFINITY));
            empty
                .topk_isa(tier, &[], 0, 4, 2, &mut i[..0], &mut s[..0])
                .unwrap();
            let mut lg = vec![0f32; 0];
            empty.logits_isa(tier, &[1.0; 4], 1, 4, &mut lg).unwrap();
        }
    }
}
