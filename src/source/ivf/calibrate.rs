//! Choosing the search parameters for a recall target from sample queries
//! ([`Ivf::calibrate`], `lshk_ivf_calibrate`).
//!
//! The one knob of a search is how many lists it visits: a fixed `nprobe`
//! or the adaptive `reach`. How much of either a recall target needs
//! depends on the layer and on where its queries fall (w2v-gutenberg needs
//! `reach` 3 for 0.99, the MiniLM vocabulary with contextual queries 1.7),
//! so one default cannot be right everywhere. Calibration measures it
//! instead, on queries the caller supplies (held-out queries of the real
//! workload, a few hundred):
//!
//! 1. the exact top-`k` of every sample query (every list, every candidate
//!    re-scored exactly);
//! 2. the smallest fixed `nprobe` whose recall@k on the sample meets the
//!    target (doubling, then bisection; every point is measured);
//! 3. the smallest adaptive `reach` on a 1/16 grid that does the same
//!    (bisection on `[0, 16]`);
//! 4. of the two, the one that scans fewer rows per query on the sample
//!    (equal: fixed). Rows scanned, not time, so the choice is the same on
//!    every machine, tier and thread count.
//!
//! "Meets the target" is statistical: the 95 % lower confidence bound of
//! the sample's mean recall, `mean - 1.645 sd / sqrt(nq)` over the
//! per-query recalls, must reach it. The cheapest point whose plain mean
//! passes sits at the edge, and on new queries it landed just under the
//! target in half the cases measured (docs/ivf.md); the bound buys a margin
//! that shrinks with more sample queries. Recall need not be monotone in
//! `nprobe` or `reach`: only measured points are returned, so the chosen
//! point did meet the target on the sample. If neither knob meets it (int8
//! scoring with a small `rerank` can miss a few true neighbours even with
//! every list visited, and a target of 1 needs every sample query perfect),
//! the best measured point is returned with `met = false`.
//!
//! Recall@k is the fraction of the exact top-`k` ids found (ids, as the
//! peer benchmarks count it); when the layer has fewer than `k` rows, of
//! those rows.

use super::*;

/// What [`Ivf::calibrate`] measured (every figure on the sample queries).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// The parameters to search with: the cheaper of the two below that
    /// meets the target (the caller's `rerank`; [`DEFAULT_REFINE`] for
    /// [`Codes::Pq4I8`]).
    pub params: SearchParams,
    /// Their recall@k on the sample (the mean of the per-query recalls).
    pub recall: f32,
    /// Its 95 % lower confidence bound, `recall - 1.645 sd / sqrt(nq)`
    /// (`sd` the per-query recalls' standard deviation): what must reach
    /// the target.
    pub recall_lower: f32,
    /// Their mean rows scanned per query on the sample.
    pub scanned: f64,
    /// Whether `recall_lower >= target`.
    pub met: bool,
    /// The smallest fixed `nprobe` that met the target (or the best
    /// measured), its recall and mean rows scanned.
    pub fixed: (u32, f32, f64),
    /// The smallest adaptive `reach` (1/16 steps, at most 16) that met the
    /// target (or the best measured), its recall and mean rows scanned.
    pub adaptive: (f32, f32, f64),
}

/// The adaptive bisection's range and resolution.
const REACH_MAX: f32 = 16.0;
const REACH_STEP: f32 = 1.0 / 16.0;

impl Ivf {
    /// The search parameters that reach `target` recall@`k` on the `nq`
    /// sample queries `q` (rows at `q_stride`) with `rerank` exact
    /// re-scores (module docs). `threads` runs the sample's searches in
    /// parallel (0 = all cores); the result does not depend on it.
    ///
    /// Errors: `InvalidArgument` (`nq`, `k` 0, `target` not in `(0, 1]`,
    /// `q_stride < dim`), `BufferTooSmall` (`q` shorter than the queries),
    /// `NonFinite` (a query value), `SizeOverflow`.
    #[allow(clippy::too_many_arguments)]
    pub fn calibrate(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        target: f32,
        rerank: u32,
        threads: usize,
    ) -> Result<Calibration> {
        self.calibrate_isa(isa::active(), q, nq, q_stride, k, target, rerank, threads)
    }

    /// [`Ivf::calibrate`] on one tier (tests: the same on every tier).
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub fn calibrate_isa(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        target: f32,
        rerank: u32,
        threads: usize,
    ) -> Result<Calibration> {
        isa::check_supported(tier)?;
        if nq == 0 {
            bail!(InvalidArgument, "nq must be >= 1 (sample queries)");
        }
        if k == 0 {
            bail!(InvalidArgument, "k must be >= 1");
        }
        if !(target > 0.0 && target <= 1.0) {
            bail!(InvalidArgument, "target is {target}; it must be in (0, 1]");
        }
        if q_stride < self.dim {
            bail!(
                InvalidArgument,
                "q_stride is {q_stride}, less than dim {}",
                self.dim
            );
        }
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        crate::quant::qdot::check_len(q.len(), ql, "q")?;
        crate::error::check_finite_rows(q, nq, self.dim, q_stride, "q")?;
        self.check_query_range(q, nq, q_stride)?;
        // Beyond the rows a larger k only pads: search for what can be found.
        let k = k.min(self.rows);
        checked_mul(nq, k, "nq * k")?;
        let threads = crate::par::threads(threads).min(nq);
        // Query blocks, the same for any thread count (determinism is by
        // construction anyway: each query's search is independent).
        let blocks: Vec<(usize, usize)> =
            (0..nq).step_by(64).map(|a| (a, (a + 64).min(nq))).collect();
        // Runs `sp` on every sample query: (ids, rows scanned) per block.
        let run = |sp: SearchParams| -> Result<(Vec<u32>, u64)> {
            let per = crate::par::map_indexed(
                blocks.len(),
                threads,
                || (),
                |_, b| -> Result<(Vec<u32>, u64)> {
                    let (a, e) = blocks[b];
                    let n = e - a;
                    let mut ids = vec![0u32; n * k];
                    let mut sc = vec![0f32; n * k];
                    let mut st = SearchStats::default();
                    self.search_stats(
                        tier,
                        &q[a * q_stride..],
                        n,
                        q_stride,
                        k,
                        &sp,
                        &mut ids,
                        &mut sc,
                        Some(&mut st),
                    )?;
                    Ok((ids, st.scanned))
                },
            );
            let mut ids = Vec::with_capacity(nq * k);
            let mut scanned = 0;
            for r in per {
                let (i, s) = r?;
                ids.extend_from_slice(&i);
                scanned += s;
            }
            Ok((ids, scanned))
        };
        // The exact top-k: every list, every candidate re-scored.
        let npos = self.ids.len();
        let (exact, _) = run(SearchParams::fixed(
            self.nlist as u32,
            npos.min(u32::MAX as usize) as u32,
        ))?;
        let mut truth: Vec<Vec<u32>> = exact.chunks_exact(k).map(<[u32]>::to_vec).collect();
        truth.iter_mut().for_each(|t| t.sort_unstable());
        // (recall, its lower confidence bound, mean scanned) of `sp`.
        let measure = |sp: SearchParams| -> Result<(f32, f32, f64)> {
            let (ids, scanned) = run(sp)?;
            let (mut sum, mut sum2) = (0f64, 0f64);
            for (got, t) in ids.chunks_exact(k).zip(&truth) {
                let hit = got.iter().filter(|id| t.binary_search(id).is_ok()).count();
                let r = hit as f64 / k as f64;
                sum += r;
                sum2 += r * r;
            }
            let (mean, lower) = mean_and_lower(sum, sum2, nq);
            Ok((mean as f32, lower as f32, scanned as f64 / nq as f64))
        };
        let meets = |lower: f32| lower >= target;
        // A measured point: (knob, recall, lower bound, mean scanned).
        type Point<K> = (K, f32, f32, f64);

        // Fixed nprobe: double until met (or every list), then bisect.
        let nl = self.nlist as u32;
        let fixed_at = |p: u32| -> Result<Point<u32>> {
            let (r, l, s) = measure(SearchParams::fixed(p, rerank))?;
            Ok((p, r, l, s))
        };
        let mut best_fixed: Option<Point<u32>> = None;
        let mut lo = 0u32; // largest nprobe known to miss
        let mut p = 1u32;
        let mut hi = loop {
            let pt = fixed_at(p)?;
            if best_fixed.is_none_or(|b| pt.1 > b.1) {
                best_fixed = Some(pt);
            }
            if meets(pt.2) {
                break Some(pt);
            }
            lo = p;
            if p == nl {
                break None;
            }
            p = p.saturating_mul(2).min(nl);
        };
        if let Some(mut h) = hi {
            while h.0 - lo > 1 {
                let mid = lo + (h.0 - lo) / 2;
                let pt = fixed_at(mid)?;
                if meets(pt.2) {
                    h = pt;
                } else {
                    lo = mid;
                }
            }
            hi = Some(h);
        }
        let fixed = hi.or(best_fixed).expect("nprobe 1 was measured");

        // Adaptive reach: bisection on the 1/16 grid of [0, 16] (reach 0 is
        // fixed selection, so the grid starts at one step).
        let reach_at = |i: u32| -> Result<Point<u32>> {
            let (r, l, s) = measure(SearchParams {
                nprobe: u32::MAX,
                rerank,
                reach: i as f32 * REACH_STEP,
                refine: DEFAULT_REFINE,
            })?;
            Ok((i, r, l, s))
        };
        let steps = (REACH_MAX / REACH_STEP) as u32;
        let top = reach_at(steps)?;
        let adaptive = if meets(top.2) {
            let (mut lo, mut hi) = (0u32, top);
            while hi.0 - lo > 1 {
                let mid = lo + (hi.0 - lo) / 2;
                let pt = reach_at(mid)?;
                if meets(pt.2) {
                    hi = pt;
                } else {
                    lo = mid;
                }
            }
            hi
        } else {
            top
        };
        let adaptive = (
            adaptive.0 as f32 * REACH_STEP,
            adaptive.1,
            adaptive.2,
            adaptive.3,
        );

        let (fm, am) = (meets(fixed.2), meets(adaptive.2));
        let use_fixed = match (fm, am) {
            (true, true) => fixed.3 <= adaptive.3,
            (true, false) => true,
            (false, true) => false,
            (false, false) => fixed.1 >= adaptive.1,
        };
        let (params, recall, lower, scanned) = if use_fixed {
            (
                SearchParams::fixed(fixed.0, rerank),
                fixed.1,
                fixed.2,
                fixed.3,
            )
        } else {
            (
                SearchParams {
                    nprobe: u32::MAX,
                    rerank,
                    reach: adaptive.0,
                    refine: DEFAULT_REFINE,
                },
                adaptive.1,
                adaptive.2,
                adaptive.3,
            )
        };
        Ok(Calibration {
            params,
            recall,
            recall_lower: lower,
            scanned,
            met: meets(lower),
            fixed: (fixed.0, fixed.1, fixed.3),
            adaptive: (adaptive.0, adaptive.1, adaptive.3),
        })
    }
}

/// The one-sided z of a 95 % lower confidence bound.
const LOWER_Z: f64 = 1.645;

/// The mean of `nq` per-query recalls (their sum and sum of squares) and
/// its 95 % lower confidence bound, `mean - LOWER_Z * sd / sqrt(nq)` with
/// the sample standard deviation (0 for one query), clamped to `[0, mean]`.
fn mean_and_lower(sum: f64, sum2: f64, nq: usize) -> (f64, f64) {
    let n = nq as f64;
    let mean = sum / n;
    let var = if nq > 1 {
        ((sum2 - sum * mean) / (n - 1.0)).max(0.0)
    } else {
        0.0
    };
    (mean, (mean - LOWER_Z * (var / n).sqrt()).clamp(0.0, mean))
}
