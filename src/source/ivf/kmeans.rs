//! k-means for the IVF lists: Lloyd iterations on the SIMD top-4 kernel
//! with f64 re-decisions near ties, Hamerly bounds between iterations, a
//! point's top-4 carried to the next pass so that only the centroids that
//! changed are scored again ([`Moved`]), the lists' spreads, and
//! empty-list splits (see the parent module's "Determinism").

use super::*;

/// `gamma(n) = n u / (1 - n u)`, u = 2^-24.
pub(super) fn gamma(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    nu / (1.0 - nu)
}

/// Training/assignment view: `n` points of `xdim` floats (`[w, b]`).
pub(super) struct Points<'a> {
    pub(super) x: &'a [f32],
    pub(super) n: usize,
    pub(super) xdim: usize,
}

/// What the last assignment of a point proved, for skipping work in the
/// next one (bounds in the manner of Hamerly 2010, "Making k-means even
/// faster", and of candidate lists): distances are Euclidean in `[w, b]`
/// space, where `|x - c|^2 = |x|^2 - 2 (<x, c> - |c|^2 / 2)`.
///
/// * `u` is at least the distance to the assigned centroid and `l` at
///   most the distance to every other one: when `l > u` (by the margin of
///   [`Track::settled`]) the assignment cannot change and nothing is
///   computed.
/// * `cand` are the four best centroids of the last kernel pass (a full
///   scan's top-4, or the best of the centroids it scored: `cap` bounds
///   the rest) and `lout` at most the distance to every centroid not among
///   them: the point is re-decided from the exact scores of those four
///   alone when the best of them is provably ahead of every other
///   centroid ([`CentView::recheck`]).
/// * `top`, `cap` and `pass` let the next pass score only the centroids
///   that changed ([`Moved`]).
///
/// After the centroids move, [`drift_tracks`] moves each bound by the
/// distance its centroids moved (triangle inequality).
#[derive(Clone, Copy, Debug)]
pub(super) struct Track {
    u: f64,
    l: f64,
    lout: f64,
    /// `|x|^2` ([`sq_norm`]; 0 where not yet computed), kept because the
    /// point does not change between passes; `|x|` (the margins') is its
    /// root ([`Track::xn`]).
    xx: f64,
    cand: [u32; TOP],
    /// The kernel's scores of `cand` in that scan.
    top: [f32; TOP],
    /// A (kernel score, id) that every centroid outside `cand` ranks after
    /// by (score descending, id ascending) in that scan: the fourth of a
    /// full scan's top-4.
    cap: (f32, u32),
    /// The pass of that scan ([`CentView::pass`]; `u32::MAX`: none).
    pass: u32,
}

/// No information: the point is scanned in full.
pub(super) const NO_TRACK: Track = Track {
    u: f64::INFINITY,
    l: 0.0,
    lout: 0.0,
    xx: 0.0,
    cand: [TOPK_PAD_ID; TOP],
    top: [f32::NEG_INFINITY; TOP],
    cap: (f32::NEG_INFINITY, TOPK_PAD_ID),
    pass: u32::MAX,
};

impl Track {
    /// Whether the assignment is certain. The margin `1e-6 (|x| + cmax)`
    /// covers the f64 rounding of the bounds and their drift updates
    /// (relative 1e-15) and makes the exact score gap, `(l^2 - u^2) / 2 >
    /// 1e-12 (|x| + cmax)^2`, larger than the error of the f64 re-decision
    /// (`< 1.5e-14 (|x| cmax + cmax^2)`), so a full re-assignment would
    /// pick the same centroid on every path.
    fn settled(&self, cmax: f64) -> bool {
        self.l - self.u > 1e-6 * (self.xn() + cmax)
    }

    /// `|x|`.
    fn xn(&self) -> f64 {
        self.xx.sqrt()
    }
}

/// The centroids of one assignment pass: packed for the kernels, with
/// what the tie re-decision needs.
pub(super) struct CentView<'a> {
    cent: &'a [f32],
    nlist: usize,
    xdim: usize,
    panels: Panels,
    /// `|c|^2` in f64 (the re-decision's own sum, cached).
    n2: Vec<f64>,
    /// Largest centroid norm.
    cmax: f64,
    /// This pass's number (k-means iterations count up from 0).
    pass: u32,
    /// The centroids that changed since the pass before, where some did
    /// not ([`Moved`]).
    moved: Option<Moved>,
    /// By id: at least how far each centroid moved since the pass before
    /// (empty on the first pass), for [`CentView::seed`].
    delta: Vec<f64>,
    /// The largest centroid norm of the pass before (0 on the first).
    cmax_prev: f64,
}

/// The centroids that changed since the last pass (any coordinate's bits),
/// packed on their own. A centroid that did not change keeps every point's
/// kernel score bit for bit (its row and `-|c|^2 / 2` are the same, and a
/// score is one fixed chain per point and centroid on every tier), so a
/// point whose top-4 came from a full scan in the last pass needs only
/// these scored ([`CentView::merge_last`]).
struct Moved {
    /// Panels of the changed centroids, in id order.
    panels: Option<Panels>,
    /// Their ids, ascending.
    ids: Vec<u32>,
    /// By id: whether it changed.
    mask: Vec<bool>,
}

impl<'a> CentView<'a> {
    /// The view of `cent` for pass `pass`; `prev`: the centroids of pass
    /// `pass - 1`, for [`Moved`].
    pub(super) fn new(
        cent: &'a [f32],
        nlist: usize,
        xdim: usize,
        pass: u32,
        prev: Option<&[f32]>,
    ) -> Result<CentView<'a>> {
        let n2: Vec<f64> = (0..nlist)
            .map(|c| {
                cent[c * xdim..(c + 1) * xdim]
                    .iter()
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum::<f64>()
            })
            .collect();
        let half: Vec<f32> = n2.iter().map(|&v| -(v / 2.0) as f32).collect();
        let cmax = n2.iter().copied().fold(0.0f64, f64::max).sqrt();
        let (delta, cmax_prev) = match prev {
            Some(prev) if prev.len() == cent.len() => {
                let rows = || cent.chunks_exact(xdim).zip(prev.chunks_exact(xdim));
                let delta = rows().map(|(a, b)| move_bound(a, b)).collect::<Vec<f64>>();
                let cmax_prev = rows()
                    .map(|(_, b)| sq_norm(b))
                    .fold(0.0f64, f64::max)
                    .sqrt();
                (delta, cmax_prev)
            }
            _ => (Vec::new(), 0.0),
        };
        let moved = match prev {
            Some(prev) if prev.len() == cent.len() => {
                fn row(v: &[f32], c: usize, xdim: usize) -> &[f32] {
                    &v[c * xdim..(c + 1) * xdim]
                }
                let mask: Vec<bool> = (0..nlist)
                    .map(|c| {
                        !row(cent, c, xdim)
                            .iter()
                            .zip(row(prev, c, xdim))
                            .all(|(a, b)| a.to_bits() == b.to_bits())
                    })
                    .collect();
                let ids: Vec<u32> = (0..nlist as u32).filter(|&c| mask[c as usize]).collect();
                if ids.len() == nlist {
                    // Every centroid changed: a full scan costs the same.
                    None
                } else {
                    let panels = if ids.is_empty() {
                        None
                    } else {
                        let mut rows = Vec::with_capacity(ids.len() * xdim);
                        for &c in &ids {
                            rows.extend_from_slice(row(cent, c as usize, xdim));
                        }
                        let h: Vec<f32> = ids.iter().map(|&c| half[c as usize]).collect();
                        Some(Panels::pack(&rows, &h, ids.len(), xdim)?)
                    };
                    Some(Moved { panels, ids, mask })
                }
            }
            _ => None,
        };
        Ok(CentView {
            cent,
            nlist,
            xdim,
            panels: Panels::pack(cent, &half, nlist, xdim)?,
            n2,
            cmax,
            pass,
            moved,
            delta,
            cmax_prev,
        })
    }

    /// Whether [`CentView::recheck`] would find no candidate nearer than
    /// `t.lout` (and so return `None` after computing four scores): each
    /// candidate's distance in the pass before (from its kernel score)
    /// less how far it moved stays beyond `lout`, with 1 % to spare for
    /// rounding. It spares most points that work on the layers measured
    /// (docs/ivf.md, "Seeded scans and a recheck gate"); either answer
    /// gives the same assignments.
    fn recheck_fails(&self, t: &Track) -> bool {
        if !self.tracked_last_pass(t) {
            return false;
        }
        let near = t
            .cand
            .iter()
            .zip(&t.top)
            .filter(|(&c, _)| c != TOPK_PAD_ID)
            .map(|(&c, &s)| (t.xx - 2.0 * f64::from(s)).max(0.0).sqrt() - self.delta[c as usize])
            .fold(f64::INFINITY, f64::min);
        near > t.lout * 1.01
    }

    /// A score that four centroids provably beat in this pass, from the
    /// point's top-4 of the pass before (kernel scores `t.top` of `t.cand`)
    /// and how far those four moved; `-inf` where the track is not from the
    /// pass before. A kernel top-4 that starts at this score instead of
    /// `-inf` (four `(score, TOPK_PAD_ID)` entries) skips only centroids
    /// that rank after those four, so its real entries are the unseeded
    /// top-4's, in the same order; a full scan's has four real entries
    /// (the four candidates are among them or beaten). It spares the
    /// merges of the first tiles, where an empty top-4 takes every lane.
    ///
    /// Bound: a kernel score is within `b` (as in [`CentView::decide_from`],
    /// with the larger `cmax` of the two passes) of the exact `s = (|x|^2 -
    /// |x - c|^2) / 2`, so the old scores bound `|x - c|` above; adding the
    /// move bounds `|x - c'|`, hence the new score below. A centroid that
    /// did not move keeps its score's value.
    fn seed(&self, t: &Track) -> f32 {
        if !self.tracked_last_pass(t) || t.xx <= 0.0 || t.cand.contains(&TOPK_PAD_ID) {
            return f32::NEG_INFINITY;
        }
        let (xx, xn) = (t.xx, t.xn());
        let cm = self.cmax.max(self.cmax_prev);
        if cm * cm + xn * cm >= f64::from(f32::MAX) / 4.0 {
            return f32::NEG_INFINITY;
        }
        let b = gamma(self.xdim + 1) * (xn * cm + cm * cm / 2.0) * 2.0 + 1e-30;
        // Covers the f64 rounding of these few steps.
        let e = 1e-12 * (xx + xn * cm + cm * cm) + 1e-300;
        let mut lo = f64::INFINITY;
        for (&c, &s) in t.cand.iter().zip(&t.top) {
            let (s, dc) = (f64::from(s), self.delta[c as usize]);
            let l = if dc == 0.0 {
                s
            } else {
                let d = (xx - 2.0 * (s - b) + e).max(0.0).sqrt() * (1.0 + 1e-12) + dc;
                (xx - d * d - e) / 2.0 - b
            };
            lo = lo.min(l);
        }
        // Strictly below, in f32.
        let lo = lo - e;
        let mut s = lo as f32;
        if f64::from(s) >= lo {
            s = s.next_down();
        }
        if s.is_finite() {
            s
        } else {
            f32::NEG_INFINITY
        }
    }

    /// `<x, c> - |c|^2 / 2` in f64, in a fixed order (the re-decision).
    fn exact(&self, x: &[f32], c: usize) -> f64 {
        let r = &self.cent[c * self.xdim..(c + 1) * self.xdim];
        let dot: f64 = x
            .iter()
            .zip(r)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum();
        dot - self.n2[c] / 2.0
    }

    /// [`CentView::exact`] with four running sums (vectorised): within
    /// `gamma53(xdim) (|x| |c| + |c|^2)` of the exact value, far inside
    /// [`CentView::margin`], but not the re-decision's fixed order.
    fn approx(&self, x: &[f32], c: usize) -> f64 {
        let r = &self.cent[c * self.xdim..(c + 1) * self.xdim];
        let mut acc = [0f64; 4];
        let (xc, rc) = (x.chunks_exact(4), r.chunks_exact(4));
        let (xt, rt) = (xc.remainder(), rc.remainder());
        for (a, b) in xc.zip(rc) {
            for k in 0..4 {
                acc[k] += f64::from(a[k]) * f64::from(b[k]);
            }
        }
        let tail: f64 = xt
            .iter()
            .zip(rt)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum();
        (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail - self.n2[c] / 2.0
    }

    /// Whether no f32 score of `x` can overflow (every partial sum of a
    /// score is at most `|c|^2 / 2 + |x| |c|`): the bounds below need
    /// finite scores.
    fn sane(&self, xn: f64) -> bool {
        let cmax = self.cmax;
        cmax * cmax + xn * cmax < f64::from(f32::MAX) / 4.0
    }

    /// The margin that makes an f64 decision certain: far above the
    /// error of [`CentView::exact`] (`< 1.5e-14 (|x| cmax + cmax^2)`) and
    /// of `|x|^2`, far below any gap that matters.
    fn margin(&self, xn: f64) -> f64 {
        1e-10 * (xn + self.cmax) * (xn + self.cmax) + 1e-300
    }

    /// The best centroid of `x` from the kernels' top-4 (`s`, `id`), and
    /// what it proves for the next pass: `argmax_c <x, c> - |c|^2 / 2`,
    /// ties by smaller id. `last`: the point's track from an earlier pass,
    /// whose `|x|^2` it reuses (the same sum).
    fn decide(&self, x: &[f32], last: Option<&Track>, s: &[f32], id: &[u32]) -> (u32, Track) {
        self.decide_from(x, last, s, id, (s[TOP - 1], id[TOP - 1]), true)
            .expect("a full scan always decides")
    }

    /// [`CentView::decide`] from four centroids `id` (kernel scores `s`,
    /// sorted as a top-4) and a `cap` that every other centroid ranks after
    /// ([`Track::cap`]; a full scan's is its fourth). Without `full` (the
    /// four are not a full scan's top-4, [`CentView::merge_last`]): `None`
    /// where the decision would take an exact pass over every centroid (a
    /// full scan costs less).
    fn decide_from(
        &self,
        x: &[f32],
        last: Option<&Track>,
        s: &[f32],
        id: &[u32],
        cap: (f32, u32),
        full: bool,
    ) -> Option<(u32, Track)> {
        // The score every centroid outside `id` is at most.
        let s3 = f64::from(cap.0);
        let (nlist, cmax) = (self.nlist, self.cmax);
        let xx = match last {
            Some(t) if t.xx > 0.0 => t.xx,
            _ => sq_norm(x),
        };
        let xn = xx.sqrt();
        // Each computed score is within `bound` of the exact one.
        let bound = gamma(self.xdim + 1) * (xn * cmax + cmax * cmax / 2.0) * 2.0 + 1e-30;
        let top = f64::from(s[0]);
        let mut best = (f64::NEG_INFINITY, u32::MAX);
        let mut consider = |c: usize| {
            let e = self.exact(x, c);
            if e > best.0 || (e == best.0 && (c as u32) < best.1) {
                best = (e, c as u32);
            }
        };
        if !self.sane(xn) {
            if !full {
                return None;
            }
            (0..nlist).for_each(&mut consider);
            return Some((best.1, NO_TRACK));
        }
        // Distance bounds from scores: `|x - c|^2 = |x|^2 - 2 score`; `e`
        // and the relative factors cover the f64 rounding here.
        let e = 1e-12 * (xx + xn * cmax + cmax * cmax) + 1e-300;
        let lower = |score_hi: f64| {
            let l2 = xx - 2.0 * score_hi - e;
            if l2 > 0.0 {
                l2.sqrt() * (1.0 - 1e-12)
            } else {
                0.0
            }
        };
        // Every centroid outside the top-4 scores at most `s3 + bound`
        // exactly (the fourth is `-inf`, padding, with fewer centroids).
        let mut track = Track {
            lout: lower(s3 + bound),
            xx,
            cand: [0; TOP],
            cap,
            pass: self.pass,
            ..NO_TRACK
        };
        track.cand.copy_from_slice(&id[..TOP]);
        track.top.copy_from_slice(&s[..TOP]);
        let open = s3 < top - 2.0 * bound;
        if !open && !full {
            return None;
        }
        if open && f64::from(s[1]) < top - 2.0 * bound {
            // Clear winner: no other centroid can be exactly better. Its
            // exact score is at least `s0 - bound`, every other's at most
            // `s1 + bound`.
            track.u = (xx - 2.0 * (top - bound) + e).max(0.0).sqrt() * (1.0 + 1e-12);
            track.l = lower(f64::from(s[1]) + bound);
            return Some((id[0], track));
        }
        if open {
            for (t, &c) in id.iter().enumerate() {
                if f64::from(s[t]) >= top - 2.0 * bound && c != TOPK_PAD_ID {
                    consider(c as usize);
                }
            }
        } else {
            (0..nlist).for_each(&mut consider);
        }
        Some((best.1, track))
    }

    /// Whether a point with track `t` takes its top-4 of this pass from
    /// its top-4 of the last one ([`Moved`]).
    fn follows_last(&self, t: &Track) -> bool {
        self.moved.is_some() && self.tracked_last_pass(t)
    }

    /// Whether track `t`'s candidates come from a scan of the pass before
    /// this one, whose centroids this view knows (`delta` and, where some
    /// centroids kept their bits, [`Moved`] are relative to them).
    fn tracked_last_pass(&self, t: &Track) -> bool {
        !self.delta.is_empty() && t.pass != u32::MAX && t.pass.wrapping_add(1) == self.pass
    }

    /// A point's four best centroids of this pass, from its four of the
    /// last pass (`t`) and the kernel's top-4 over the changed centroids
    /// alone (`ms`, `mi`: scores and indices into [`Moved::ids`]): both
    /// lists merged by (score descending, id ascending), the kernels'
    /// order. A centroid in neither list did not change and ranks after
    /// the last pass's cap, so the four are a full scan's top-4 (scores,
    /// ids and order) whenever the new fourth ranks no lower than that cap.
    /// Returns the four, the cap of this pass ([`Track::cap`]) and whether
    /// the four are a full scan's.
    fn merge_last(
        &self,
        t: &Track,
        ms: &[f32],
        mi: &[u32],
    ) -> ([f32; TOP], [u32; TOP], (f32, u32), bool) {
        let mv = self.moved.as_ref().expect("follows_last");
        let old = (0..TOP)
            .filter(|&k| t.cand[k] != TOPK_PAD_ID && !mv.mask[t.cand[k] as usize])
            .map(|k| (t.top[k], t.cand[k]));
        let new = (0..TOP)
            .filter(|&k| mi[k] != TOPK_PAD_ID)
            .map(|k| (ms[k], mv.ids[mi[k] as usize]));
        let mut s4 = [f32::NEG_INFINITY; TOP];
        let mut id4 = [TOPK_PAD_ID; TOP];
        // Whether `x` ranks before `y` (no score here is NaN: the kernel
        // never keeps one).
        let before = |x: &(f32, u32), y: &(f32, u32)| x.0 > y.0 || (x.0 == y.0 && x.1 < y.1);
        let (mut a, mut b) = (old.peekable(), new.peekable());
        for k in 0..TOP {
            let first = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => before(x, y),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let e = if first { a.next() } else { b.next() }.expect("peeked");
            (s4[k], id4[k]) = e;
        }
        // Every centroid in neither list ranks after the old cap (it did
        // not change), and every other changed one after the new fourth:
        // the cap is the first of the two. It is the new fourth (the four
        // are a full scan's) unless the old cap ranks first.
        let (o, n) = (t.cap, (s4[TOP - 1], id4[TOP - 1]));
        let full = o.1 == TOPK_PAD_ID || !before(&o, &n);
        (s4, id4, if full { n } else { o }, full)
    }

    /// Re-decides a point from the exact scores of its candidates alone,
    /// when they prove the answer: the best candidate (f64, ties by
    /// smaller id) beats, by the margin, the highest exact score any other
    /// centroid can have (`(|x|^2 - lout^2) / 2`). Every centroid within
    /// the f64 error of the true best is then a candidate, so the full
    /// re-decision ([`CentView::decide`] after a scan) would pick the same
    /// one. Returns `None` when the point needs a full scan.
    fn recheck(&self, x: &[f32], t: &Track) -> Option<(u32, Track)> {
        if t.lout <= 0.0 {
            return None;
        }
        let (xx, xn) = (t.xx, t.xn());
        if !self.sane(xn) {
            return None;
        }
        let m = self.margin(xn);
        let out = (xx - t.lout * t.lout) / 2.0;
        let mut sc = [f64::NEG_INFINITY; TOP];
        let mut best = (f64::NEG_INFINITY, u32::MAX);
        // First from fast f64 scores (within `m` of the exact ones, and of
        // `exact`'s): enough when one candidate leads every other by more
        // than the margins (its lead is then real, and `exact` would pick
        // it too).
        for (k, &c) in t.cand.iter().enumerate() {
            if c != TOPK_PAD_ID {
                sc[k] = self.approx(x, c as usize);
                if sc[k] > best.0 {
                    best = (sc[k], c);
                }
            }
        }
        let clear = best.0 - 4.0 * m > out
            && t.cand
                .iter()
                .zip(&sc)
                .all(|(&c, &v)| c == best.1 || v < best.0 - 4.0 * m);
        if !clear {
            // The fixed-order scores below are within `m` of these, so
            // their best passes the test below only if this best reaches
            // `out + m`: where it does not (the usual reason for `!clear`:
            // a centroid outside the candidates may be nearer), the point
            // needs a full scan whatever they say.
            if best.0 - m <= out {
                return None;
            }
            // The fixed-order f64 scores of the re-decision, ties by the
            // smaller id.
            best = (f64::NEG_INFINITY, u32::MAX);
            for (k, &c) in t.cand.iter().enumerate() {
                if c != TOPK_PAD_ID {
                    sc[k] = self.exact(x, c as usize);
                    if sc[k] > best.0 || (sc[k] == best.0 && c < best.1) {
                        best = (sc[k], c);
                    }
                }
            }
            if (best.0 - 2.0 * m).partial_cmp(&out) != Some(std::cmp::Ordering::Greater) {
                return None;
            }
        }
        // Bounds: the winner's exact score is within `m` of `best.0`;
        // every other centroid is a candidate within `m` of its f64 score
        // or outside, beyond `lout`.
        let mut l = t.lout;
        for (k, &c) in t.cand.iter().enumerate() {
            if c != TOPK_PAD_ID && c != best.1 {
                let l2 = xx - 2.0 * (sc[k] + m);
                l = l.min(if l2 > 0.0 {
                    l2.sqrt() * (1.0 - 1e-12)
                } else {
                    0.0
                });
            }
        }
        let u = (xx - 2.0 * (best.0 - m)).max(0.0).sqrt() * (1.0 + 1e-12);
        Some((best.1, Track { u, l, ..*t }))
    }
}

/// `|a - b|`, rounded up (the f64 sum is within 1e-14 relative).
fn move_bound(a: &[f32], b: &[f32]) -> f64 {
    let ss: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    ss.sqrt() * (1.0 + 1e-12)
}

/// `|x|^2` in f64, summed in coordinate order (every pass takes this one
/// value for a point: its bounds and margins depend on it).
fn sq_norm(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v) * f64::from(v)).sum()
}

/// Rows per kernel call (the top-4 buffers and a gathered copy of the
/// points that need a full scan).
pub(super) const ASSIGN_BLOCK: usize = 2048;

/// Best centroid of every point, tier-independently (module docs):
/// `argmax_c <x, c> - |c|^2 / 2` (ties by smaller id).
///
/// With `tracks`, a point whose [`Track`] proves its assignment keeps
/// `out[i]` or is re-decided from its candidates alone; every other point
/// is scanned in full and gets a fresh track. The result is the same as
/// scanning every point.
pub(super) fn assign(
    tier: Isa,
    pts: &Points<'_>,
    cv: &CentView<'_>,
    threads: usize,
    out: &mut [u32],
    mut tracks: Option<&mut [Track]>,
) -> Result<()> {
    let (n, xdim) = (pts.n, pts.xdim);
    let threads = threads.max(1);
    // The points to scan: all (`None`), or those the tracks do not settle.
    let active: Option<Vec<u32>> = match tracks.as_deref_mut() {
        None => None,
        Some(_) if n == 0 => Some(Vec::new()),
        Some(tracks) => {
            let per = n.div_ceil(threads);
            let parts = crate::par::map(
                out[..n]
                    .chunks_mut(per)
                    .zip(tracks[..n].chunks_mut(per))
                    .enumerate(),
                |(k, (o, tr))| {
                    let mut scan = Vec::new();
                    for (j, (oi, ti)) in o.iter_mut().zip(tr.iter_mut()).enumerate() {
                        let i = k * per + j;
                        if ti.settled(cv.cmax) {
                            continue;
                        }
                        if cv.recheck_fails(ti) {
                            scan.push(i as u32);
                            continue;
                        }
                        match cv.recheck(&pts.x[i * xdim..(i + 1) * xdim], ti) {
                            Some((c, t)) => (*oi, *ti) = (c, t),
                            None => scan.push(i as u32),
                        }
                    }
                    scan
                },
            );
            Some(parts.concat())
        }
    };
    let na = active.as_ref().map_or(n, |a| a.len());
    let last = tracks.as_deref();
    if na == 0 {
        return Ok(());
    }
    let nblocks = na.div_ceil(ASSIGN_BLOCK);
    let threads = threads.clamp(1, nblocks);
    let per = nblocks.div_ceil(threads) * ASSIGN_BLOCK;
    // Scans points `a0 .. a0 + len` of the active list; returns their
    // assignments and tracks in that order.
    let work = |a0: usize, len: usize| -> Result<Vec<(u32, Track)>> {
        let mut res = Vec::with_capacity(len);
        let blk = ASSIGN_BLOCK.min(len);
        let mut best = vec![0f32; blk * TOP];
        let mut ids = vec![0u32; blk * TOP];
        let mut gathered = if active.is_some() {
            vec![0f32; blk * xdim]
        } else {
            Vec::new()
        };
        // The points of a block whose top-4 comes from the last pass, and
        // their slots.
        let mut lastj: Vec<usize> = Vec::new();
        let mut rest: Vec<usize> = Vec::new();
        let mut slot: Vec<Option<(u32, Track)>> = Vec::with_capacity(blk);
        let mut b0 = 0;
        while b0 < len {
            let nb = ASSIGN_BLOCK.min(len - b0);
            let point = |j: usize| {
                active
                    .as_ref()
                    .map_or(a0 + b0 + j, |a| a[a0 + b0 + j] as usize)
            };
            let x_of = |i: usize| &pts.x[i * xdim..(i + 1) * xdim];
            slot.clear();
            slot.resize(nb, None);
            lastj.clear();
            if let (Some(mv), Some(tr)) = (&cv.moved, last) {
                lastj.extend((0..nb).filter(|&j| cv.follows_last(&tr[point(j)])));
                if !lastj.is_empty() {
                    let nl = lastj.len();
                    match &mv.panels {
                        Some(p) => {
                            for (k, &j) in lastj.iter().enumerate() {
                                gathered[k * xdim..(k + 1) * xdim].copy_from_slice(x_of(point(j)));
                                let r = k * TOP..(k + 1) * TOP;
                                Panels::start(
                                    &mut best[r.clone()],
                                    &mut ids[r],
                                    cv.seed(&tr[point(j)]),
                                );
                            }
                            p.update_isa(
                                tier,
                                &gathered[..nl * xdim],
                                nl,
                                xdim,
                                &mut best,
                                &mut ids,
                            )?;
                        }
                        // Nothing changed: no changed centroid enters.
                        None => Panels::clear(&mut best[..nl * TOP], &mut ids[..nl * TOP]),
                    }
                    for (k, &j) in lastj.iter().enumerate() {
                        let (i, t) = (point(j), &tr[point(j)]);
                        let r = k * TOP..(k + 1) * TOP;
                        let (s4, id4, cap, full) = cv.merge_last(t, &best[r.clone()], &ids[r]);
                        slot[j] = cv.decide_from(x_of(i), Some(t), &s4, &id4, cap, full);
                    }
                }
            }
            // Every other point: a full scan.
            rest.clear();
            rest.extend((0..nb).filter(|&j| slot[j].is_none()));
            if !rest.is_empty() {
                let nr = rest.len();
                let xs: &[f32] = match &active {
                    // Without tracks there is no last pass: every point of
                    // the block is scanned, in place.
                    None => &pts.x[(a0 + b0) * xdim..(a0 + b0 + nb) * xdim],
                    Some(_) => {
                        for (k, &j) in rest.iter().enumerate() {
                            gathered[k * xdim..(k + 1) * xdim].copy_from_slice(x_of(point(j)));
                        }
                        &gathered[..nr * xdim]
                    }
                };
                for (k, &j) in rest.iter().enumerate() {
                    let t = last.map_or(f32::NEG_INFINITY, |tr| cv.seed(&tr[point(j)]));
                    let r = k * TOP..(k + 1) * TOP;
                    Panels::start(&mut best[r.clone()], &mut ids[r], t);
                }
                cv.panels
                    .update_isa(tier, xs, nr, xdim, &mut best, &mut ids)?;
                for (k, &j) in rest.iter().enumerate() {
                    let i = point(j);
                    // A seeded full scan keeps four real entries (the seed's
                    // proof); rescan unseeded if it ever did not.
                    if ids[k * TOP + TOP - 1] == TOPK_PAD_ID
                        && best[k * TOP + TOP - 1] != f32::NEG_INFINITY
                    {
                        debug_assert!(false, "a seeded scan lost an entry");
                        let r = k * TOP..(k + 1) * TOP;
                        cv.panels.top4_isa(
                            tier,
                            &xs[k * xdim..(k + 1) * xdim],
                            1,
                            xdim,
                            &mut best[r.clone()],
                            &mut ids[r],
                        )?;
                    }
                    slot[j] = Some(cv.decide(
                        &xs[k * xdim..(k + 1) * xdim],
                        last.map(|t| &t[i]),
                        &best[k * TOP..(k + 1) * TOP],
                        &ids[k * TOP..(k + 1) * TOP],
                    ));
                }
            }
            res.extend(slot.drain(..).map(|d| d.expect("every point decided")));
            b0 += nb;
        }
        Ok(res)
    };
    let parts: Vec<Vec<(u32, Track)>> = if threads == 1 {
        vec![work(0, na)?]
    } else {
        crate::par::try_map((0..threads).map(|t| (t * per).min(na)), |a0| {
            work(a0, per.min(na - a0))
        })?
    };
    for (k, (c, t)) in parts.into_iter().flatten().enumerate() {
        let i = active.as_ref().map_or(k, |a| a[k] as usize);
        out[i] = c;
        if let Some(ts) = tracks.as_deref_mut() {
            ts[i] = t;
        }
    }
    Ok(())
}

/// Moves every point's bounds by how far the centroids moved from `old`
/// to `new` (triangle inequality): `u += |c_a' - c_a|`, `l -= max over
/// c != a of |c' - c|`, `lout -= max over c not a candidate`.
pub(super) fn drift_tracks(
    old: &[f32],
    new: &[f32],
    xdim: usize,
    asg: &[u32],
    tracks: &mut [Track],
) {
    let nlist = old.len() / xdim;
    let delta: Vec<f64> = (0..nlist)
        .map(|c| {
            move_bound(
                &old[c * xdim..(c + 1) * xdim],
                &new[c * xdim..(c + 1) * xdim],
            )
        })
        .collect();
    // The five largest moves (id order on ties), largest first: one of
    // them is neither the assigned centroid nor a candidate.
    let mut top: Vec<(f64, u32)> = Vec::with_capacity(TOP + 2);
    for (c, &d) in delta.iter().enumerate() {
        if top.len() < TOP + 1 || d > top[TOP].0 {
            let at = top.iter().position(|e| d > e.0).unwrap_or(top.len());
            top.insert(at, (d, c as u32));
            top.truncate(TOP + 1);
        }
    }
    let max_except = |skip: &dyn Fn(u32) -> bool| -> f64 {
        top.iter().find(|e| !skip(e.1)).map_or(0.0, |e| e.0)
    };
    for (t, &a) in tracks.iter_mut().zip(asg) {
        t.u += delta[a as usize];
        t.l -= max_except(&|c| c == a);
        let cand = t.cand;
        t.lout -= max_except(&|c| cand.contains(&c));
    }
}

/// Standard deviations of its own projection that a list's farthest row is
/// taken to reach in [`spread_of`]. Measured (docs/ivf.md, "Lists with
/// far rows"): 1.5 removes the recall ceiling of heavy-tailed layers and
/// keeps the recall-time curve of w2v-gutenberg and W1; 2 and 2.5 do too,
/// with a coarser `reach` scale.
const FAR_ROW_Z: f64 = 1.5;

/// The rows of built lists, for [`spread_of`] and [`list_shapes`]: W
/// (`dim` floats at `stride`) and the bias, the `xdim`-float centroids
/// (`[w, b]`), and list `l` at positions `offsets[l] .. offsets[l + 1]` of
/// the row ids `ids`.
pub(super) struct ListRows<'a> {
    pub(super) w: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
    pub(super) dim: usize,
    pub(super) stride: usize,
    pub(super) cent: &'a [f32],
    pub(super) xdim: usize,
    pub(super) offsets: &'a [u32],
    pub(super) ids: &'a [u32],
}

impl ListRows<'_> {
    /// Lists.
    fn nlist(&self) -> usize {
        self.offsets.len() - 1
    }

    /// List `l`'s rows, and the sum and the largest of their squared
    /// residuals `|x - c|^2` in `[w, b]` space (f64, in row order); with
    /// `keep = (x, m)`, the `w` residuals of its first `m` rows pushed onto
    /// `x`.
    fn residuals(&self, l: usize, mut keep: Option<(&mut Vec<f32>, usize)>) -> (usize, f64, f64) {
        let (dim, stride) = (self.dim, self.stride);
        let c = &self.cent[l * self.xdim..(l + 1) * self.xdim];
        let ids = &self.ids[self.offsets[l] as usize..self.offsets[l + 1] as usize];
        let (mut ss, mut far) = (0.0f64, 0.0f64);
        for (i, &r) in ids.iter().enumerate() {
            let r = r as usize;
            let row = &self.w[r * stride..r * stride + dim];
            let mut d2 = 0.0f64;
            for (&x, &m) in row.iter().zip(c) {
                d2 += f64::from(x - m).powi(2);
            }
            if let Some((x, m)) = keep.as_mut() {
                if i < *m {
                    x.extend(row.iter().zip(c).map(|(&v, &m)| v - m));
                }
            }
            if let Some(bb) = self.bias {
                d2 += f64::from(bb[r] - c[dim]).powi(2);
            }
            ss += d2;
            far = far.max(d2);
        }
        (ids.len(), ss, far)
    }
}

/// [`spread_of`] of every list.
#[cfg(test)]
pub(super) fn list_spread(lr: &ListRows) -> Vec<f32> {
    (0..lr.nlist())
        .map(|l| {
            let (n, ss, far) = lr.residuals(l, None);
            spread_of(n, ss, far, lr.xdim)
        })
        .collect()
}

/// A list's spread, from its [`ListRows::residuals`]:
/// `max(sqrt(2 ln n) * s, FAR_ROW_Z * f)`, with `s^2 = mean |x - c|^2 /
/// xdim` and `f = max |x - c| / sqrt(xdim)`. The first term is the
/// expected maximum of `n` Gaussian values of standard deviation `s`, i.e.
/// how far the best of the list's rows reaches beyond its centroid along a
/// random unit direction when the rows spread alike. The second is the
/// list's farthest row alone, `FAR_ROW_Z` standard deviations of its own
/// projection (`|x - c| / sqrt(xdim)`): a row far out of its list (a hub
/// row of a heavy-tailed layer, whose norm is many times the others')
/// moves the mean little, so the first term alone would let the adaptive
/// stop skip the list that holds it at any `reach` (recall stays below 1
/// while nearly every list is scanned); lists without such a row keep the
/// first term (docs/ivf.md, "Lists with far rows"). Lists are ranked by
/// `<[q, 1], c> + |q| spread`, an estimate of the best score in the list:
/// ranking by `<[q, 1], c>` alone penalises a list that merged several
/// clusters (its centroid, a mean of several directions, is short), which
/// k-means produces wherever the data have more clusters than `nlist` (W1
/// at 200,000 rows and 1,789 lists: recall@10 at nprobe 1 is 0.48 with the
/// plain inner product and 0.97 with the spread term).
fn spread_of(n: usize, ss: f64, far: f64, xdim: usize) -> f32 {
    if n == 0 {
        return 0.0;
    }
    let (n, xd) = (n as f64, xdim as f64);
    let bulk = (ss / n / xd).sqrt() * (2.0 * n.ln()).max(0.0).sqrt();
    bulk.max(FAR_ROW_Z * (far / xd).sqrt()) as f32
}

/// Directions of a list's rows that [`list_shapes`] keeps: the
/// query-dependent spread of a list is `sqrt(sum_j <q, g_j>^2 + kappa
/// |q|^2)` over these. Four capture a third of the residual variance of
/// w2v-gutenberg's lists (an isotropic list would hold 4 / 128 of it);
/// docs/ivf.md, "Lists with a shape".
pub const LIST_DIRS: usize = 4;
/// Subspace iterations of [`list_shapes`] (from a fixed start; the
/// spreads only rank lists, so the directions need not converge fully).
const SHAPE_ITERS: usize = 6;
/// At most this many rows of a list (its first positions) feed the
/// subspace iteration; the total variance and the farthest row use all.
const SHAPE_MAX_ROWS: usize = 512;

/// The lists' shapes (module docs of `ivf`, "Lists with a shape"): per list
/// `LIST_DIRS` scaled directions `g_j = sqrt(2 ln n (lambda_j - rho)) u_j`
/// (`dim` floats each; `u_j` the top eigenvectors of the covariance of the
/// rows' `w` residuals, `lambda_j` their variances, `rho` the mean
/// variance of the other `xdim - LIST_DIRS` coordinates), then per list
/// `kappa = 2 ln n rho` and the far-row term of [`spread_of`]. A query's
/// spread of list `l` is `max(sqrt(sum_j <q, g_j>^2 + kappa |q|^2) / |q|,
/// far)`: [`spread_of`]'s value where the rows spread alike in every
/// direction (then `lambda_j = rho = s^2`), larger along the directions in
/// which the list's rows spread most. Plain f32 loops with fixed
/// accumulator order and a fixed start: the same bits on every tier and
/// thread count. Also returns each list's [`spread_of`] (from the same
/// residual sums).
pub(super) fn list_shapes(lr: &ListRows, threads: usize) -> Shapes {
    let (nlist, dim, xdim) = (lr.nlist(), lr.dim, lr.xdim);
    let jobs = threads.clamp(1, nlist.max(1));
    let per = nlist.div_ceil(jobs);
    let parts = crate::par::map(0..jobs, |j| {
        let (l0, l1) = ((j * per).min(nlist), ((j + 1) * per).min(nlist));
        let mut dirs = vec![0f32; (l1 - l0) * LIST_DIRS * dim];
        let mut kappa = vec![0f32; l1 - l0];
        let mut far = vec![0f32; l1 - l0];
        let mut spread = vec![0f32; l1 - l0];
        let mut x = Vec::new();
        for l in l0..l1 {
            x.clear();
            let (n, ss, f2) = lr.residuals(l, Some((&mut x, SHAPE_MAX_ROWS)));
            spread[l - l0] = spread_of(n, ss, f2, xdim);
            let xd = xdim as f64;
            far[l - l0] = (FAR_ROW_Z * (f2 / xd).sqrt()) as f32;
            if n < 2 {
                continue;
            }
            let g = &mut dirs[(l - l0) * LIST_DIRS * dim..(l - l0 + 1) * LIST_DIRS * dim];
            let lam = top_directions(&x, dim, g);
            let used: f64 = lam.iter().sum();
            let rest = if xdim > LIST_DIRS {
                ((ss / n as f64 - used).max(0.0)) / (xd - LIST_DIRS as f64)
            } else {
                0.0
            };
            // fdlibm's log: the same bits on every platform.
            let ln2 = (2.0 * crate::rng::ieee754_log(n as f64)).max(0.0);
            for (j, &lj) in lam.iter().enumerate() {
                let f = (ln2 * (lj - rest).max(0.0)).sqrt() as f32;
                for v in &mut g[j * dim..(j + 1) * dim] {
                    *v *= f;
                }
            }
            kappa[l - l0] = (ln2 * rest) as f32;
        }
        Shapes {
            dirs,
            kappa,
            far,
            spread,
        }
    });
    let mut all = Shapes::default();
    for p in parts {
        all.dirs.extend(p.dirs);
        all.kappa.extend(p.kappa);
        all.far.extend(p.far);
        all.spread.extend(p.spread);
    }
    all
}

/// [`list_shapes`]'s result, per list (`dirs`: `LIST_DIRS * dim` floats a
/// list).
#[derive(Default)]
pub(super) struct Shapes {
    pub(super) dirs: Vec<f32>,
    pub(super) kappa: Vec<f32>,
    pub(super) far: Vec<f32>,
    /// [`spread_of`].
    pub(super) spread: Vec<f32>,
}

/// `<a, b>` with eight partial sums in a fixed order (vectorisable, and
/// the same bits everywhere).
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        acc[i] += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// The top [`LIST_DIRS`] eigenvectors of `X^T X / m` (`x`: `m` rows of
/// `dim`) by subspace iteration from a fixed sign pattern, orthonormal,
/// into `g` (`LIST_DIRS * dim`; a direction the rows do not span stays
/// zero); returns their variances `|X u_j|^2 / m`, largest first.
fn top_directions(x: &[f32], dim: usize, g: &mut [f32]) -> [f64; LIST_DIRS] {
    let m = x.len() / dim;
    let mut y = vec![0f32; LIST_DIRS * dim];
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for v in g.iter_mut() {
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        *v = if h >> 63 == 0 { 1.0 } else { -1.0 };
    }
    let mut lam = [0f64; LIST_DIRS];
    for it in 0..=SHAPE_ITERS {
        // The last pass only measures the variances along g.
        let last = it == SHAPE_ITERS;
        y.fill(0.0);
        lam = [0.0; LIST_DIRS];
        for row in x.chunks_exact(dim) {
            for j in 0..LIST_DIRS {
                let t = dot8(row, &g[j * dim..(j + 1) * dim]);
                lam[j] += f64::from(t) * f64::from(t);
                if !last {
                    for (yv, &xv) in y[j * dim..(j + 1) * dim].iter_mut().zip(row) {
                        *yv += t * xv;
                    }
                }
            }
        }
        if last {
            break;
        }
        // Gram-Schmidt (modified) of y into g.
        for j in 0..LIST_DIRS {
            let (done, rest) = y.split_at_mut(j * dim);
            let yj = &mut rest[..dim];
            for i in 0..j {
                let gi = &done[i * dim..(i + 1) * dim];
                let p = dot8(yj, gi);
                for (a, &b) in yj.iter_mut().zip(gi) {
                    *a -= p * b;
                }
            }
            let nn = dot8(yj, yj).sqrt();
            let gj = &mut g[j * dim..(j + 1) * dim];
            if nn > 1e-30 && nn.is_finite() {
                for (o, &a) in gj.iter_mut().zip(yj.iter()) {
                    *o = a / nn;
                }
                for (a, &b) in yj.iter_mut().zip(gj.iter()) {
                    *a = b;
                }
            } else {
                gj.fill(0.0);
                yj.fill(0.0);
            }
        }
    }
    for v in &mut lam {
        *v /= m as f64;
    }
    // Largest first (stable: ties keep their order).
    let mut idx: [usize; LIST_DIRS] = std::array::from_fn(|i| i);
    idx.sort_by(|&a, &b| lam[b].total_cmp(&lam[a]));
    let old = g.to_vec();
    let mut out = [0f64; LIST_DIRS];
    for (k, &i) in idx.iter().enumerate() {
        g[k * dim..(k + 1) * dim].copy_from_slice(&old[i * dim..(i + 1) * dim]);
        out[k] = lam[i];
    }
    out
}

/// What [`kmeans`] returns.
pub(super) struct KMeans {
    /// The `nlist * xdim` centroids.
    pub(super) cent: Vec<f32>,
    /// The last assignment of the points.
    pub(super) asg: Vec<u32>,
    /// Their tracks, bounds moved to `cent` (for the final assignment,
    /// pass `iters`).
    pub(super) tracks: Vec<Track>,
    /// The centroids of that assignment (pass `iters - 1`).
    pub(super) last: Vec<f32>,
}

/// Lloyd's k-means ([`KMeans`]).
///
/// The points whose Hamerly bounds prove that their centroid cannot
/// change are not scored again ([`assign`]): the result is the same as a
/// full assignment every iteration.
///
/// With `weights` (one per point, finite, >= 0), a centroid is the
/// weighted mean of its points: `sum_i w_i x_i / sum_i w_i`, summed in f64
/// in point order like the plain mean (so weights all 1 give the plain
/// means bit for bit: `1.0 * x` is `x` and the weight sum is the count).
/// A list whose points all weigh 0 keeps its centroid. The empty-list
/// split still counts points, not weights.
#[allow(clippy::too_many_arguments)]
pub(super) fn kmeans(
    tier: Isa,
    pts: &Points<'_>,
    weights: Option<&[f32]>,
    nlist: usize,
    iters: u32,
    threads: usize,
    rng: &mut SplitMix64,
) -> Result<KMeans> {
    let xdim = pts.xdim;
    // The sample is already a seeded random permutation: its first `nlist`
    // points are the initial centroids.
    let mut cent = pts.x[..nlist * xdim].to_vec();
    let mut prev = cent.clone();
    let mut asg = vec![0u32; pts.n];
    let mut bounds = vec![NO_TRACK; pts.n];
    let mut counts = vec![0usize; nlist];
    // The coordinate ranges of the threads that sum the lists.
    let nc = threads.clamp(1, xdim.div_ceil(8));
    let cols: Vec<(usize, usize)> = (0..nc)
        .map(|t| (t * xdim / nc, (t + 1) * xdim / nc))
        .collect();
    let mut wsum = vec![0f64; if weights.is_some() { nlist } else { 0 }];
    for it in 0..iters {
        let cv = CentView::new(&cent, nlist, xdim, it, (it > 0).then_some(&prev[..]))?;
        assign(tier, pts, &cv, threads, &mut asg, Some(&mut bounds))?;
        drop(cv);
        prev.copy_from_slice(&cent);
        counts.iter_mut().for_each(|v| *v = 0);
        wsum.iter_mut().for_each(|v| *v = 0.0);
        for (i, &c) in asg.iter().enumerate() {
            counts[c as usize] += 1;
            if let Some(wt) = weights {
                wsum[c as usize] += f64::from(wt[i]);
            }
        }
        // Each thread sums its own coordinates `j0..j1` of every list, in
        // point order: the same f64 sums, bit for bit, on any thread count.
        let parts = crate::par::map(&cols, |&(j0, j1)| {
            let w = j1 - j0;
            let mut s = vec![0f64; nlist * w];
            for (i, &c) in asg.iter().enumerate() {
                let a = &mut s[c as usize * w..(c as usize + 1) * w];
                let x = &pts.x[i * xdim + j0..i * xdim + j1];
                match weights {
                    None => {
                        for (a, &v) in a.iter_mut().zip(x) {
                            *a += f64::from(v);
                        }
                    }
                    Some(wt) => {
                        let wi = f64::from(wt[i]);
                        for (a, &v) in a.iter_mut().zip(x) {
                            *a += wi * f64::from(v);
                        }
                    }
                }
            }
            s
        });
        for c in 0..nlist {
            let total = if weights.is_some() {
                wsum[c]
            } else {
                counts[c] as f64
            };
            if counts[c] > 0 && total > 0.0 {
                let inv = 1.0 / total;
                for (&(j0, j1), s) in cols.iter().zip(&parts) {
                    let w = j1 - j0;
                    for (v, &a) in cent[c * xdim + j0..c * xdim + j1]
                        .iter_mut()
                        .zip(&s[c * w..(c + 1) * w])
                    {
                        *v = (a * inv) as f32;
                    }
                }
            }
        }
        split_empty(&mut cent, &mut counts, xdim, pts.n, rng);
        drift_tracks(&prev, &cent, xdim, &asg, &mut bounds);
    }
    Ok(KMeans {
        cent,
        asg,
        tracks: bounds,
        last: prev,
    })
}

/// FAISS's rule for empty clusters: copy a cluster chosen with probability
/// `(size - 1) / (n - nlist)` and move the two copies apart symmetrically.
pub(super) fn split_empty(
    cent: &mut [f32],
    counts: &mut [usize],
    xdim: usize,
    n: usize,
    rng: &mut SplitMix64,
) {
    const EPS: f32 = 1.0 / 1024.0;
    let nlist = counts.len();
    for ci in 0..nlist {
        if counts[ci] != 0 {
            continue;
        }
        let mut cj = 0;
        loop {
            let p = rng.next_f64_open() * (n - nlist).max(1) as f64;
            let mut acc = 0.0;
            let mut found = None;
            for (j, &c) in counts.iter().enumerate() {
                acc += c.saturating_sub(1) as f64;
                if acc > p {
                    found = Some(j);
                    break;
                }
            }
            if let Some(j) = found {
                cj = j;
                break;
            }
            if counts.iter().all(|&c| c <= 1) {
                break;
            }
        }
        if counts[cj] <= 1 {
            continue;
        }
        for j in 0..xdim {
            let v = cent[cj * xdim + j];
            let (a, b) = if j % 2 == 0 {
                (v * (1.0 + EPS), v * (1.0 - EPS))
            } else {
                (v * (1.0 - EPS), v * (1.0 + EPS))
            };
            cent[ci * xdim + j] = a;
            cent[cj * xdim + j] = b;
        }
        counts[ci] = counts[cj] / 2;
        counts[cj] -= counts[ci];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// `n` normal points and `nlist` normal centroids of `xdim` floats
    /// (seeded), point 0 on centroid 0 and point 1 halfway between
    /// centroids 0 and 1 (ties); and the generator, for more.
    fn points_with_ties(
        seed: u64,
        n: usize,
        xdim: usize,
        nlist: usize,
    ) -> (Vec<f32>, Vec<f32>, impl FnMut(usize) -> Vec<f32>) {
        let mut rng = SplitMix64::new(seed);
        let mut normal =
            move |k: usize| -> Vec<f32> { (0..k).map(|_| rng.next_normal() as f32).collect() };
        let mut x = normal(n * xdim);
        let cent = normal(nlist * xdim);
        x[..xdim].copy_from_slice(&cent[..xdim]);
        for j in 0..xdim {
            x[xdim + j] = (cent[j] + cent[xdim + j]) / 2.0;
        }
        (x, cent, normal)
    }

    /// A seed from the pass before is below the fourth best score of a
    /// full scan, and a scan started from it finds the same four (ids,
    /// score bits, order) on every tier; small moves give most points one.
    #[test]
    fn seeded_scans_keep_the_top4() {
        let (n, xdim, nlist) = (400, 16, 40);
        let (x, cent, mut normal) = points_with_ties(3, n, xdim, nlist);
        // Copies of a centroid: equal scores across ids.
        let mut c0 = cent.clone();
        c0.copy_within(2 * xdim..3 * xdim, 3 * xdim);
        let step = normal(nlist * xdim);
        let pts = Points { x: &x, n, xdim };
        for tier in crate::isa::Isa::supported() {
            let cv0 = CentView::new(&c0, nlist, xdim, 0, None).unwrap();
            let mut tracks = vec![NO_TRACK; n];
            let mut asg = vec![0u32; n];
            assign(tier, &pts, &cv0, 1, &mut asg, Some(&mut tracks)).unwrap();
            // Small moves, one centroid unchanged, one moved far.
            let mut c1: Vec<f32> = c0.iter().zip(&step).map(|(a, s)| a + 0.02 * s).collect();
            c1[..xdim].copy_from_slice(&c0[..xdim]);
            for v in &mut c1[5 * xdim..6 * xdim] {
                *v += 3.0;
            }
            drift_tracks(&c0, &c1, xdim, &asg, &mut tracks);
            let cv = CentView::new(&c1, nlist, xdim, 1, Some(&c0)).unwrap();
            let mut seeded = 0;
            for i in 0..n {
                let xi = &x[i * xdim..(i + 1) * xdim];
                let (mut b, mut id) = ([0f32; TOP], [0u32; TOP]);
                cv.panels
                    .top4_isa(tier, xi, 1, xdim, &mut b, &mut id)
                    .unwrap();
                let t = cv.seed(&tracks[i]);
                if t == f32::NEG_INFINITY {
                    continue;
                }
                seeded += 1;
                assert!(
                    t < b[TOP - 1],
                    "{} point {i}: {t} vs {}",
                    tier.name(),
                    b[TOP - 1]
                );
                let (mut sb, mut sid) = ([t; TOP], [TOPK_PAD_ID; TOP]);
                cv.panels
                    .update_isa(tier, xi, 1, xdim, &mut sb, &mut sid)
                    .unwrap();
                assert_eq!(sid, id, "{} point {i}", tier.name());
                assert_eq!(sb.map(f32::to_bits), b.map(f32::to_bits));
            }
            assert!(seeded > n / 2, "{} seeded {seeded} of {n}", tier.name());
            // Not from the pass before: no seed.
            let cv2 = CentView::new(&c1, nlist, xdim, 2, Some(&c1)).unwrap();
            assert_eq!(cv2.seed(&tracks[7]), f32::NEG_INFINITY);
        }
    }

    /// Assignments through tracks and the changed centroids alone equal a
    /// full scan's, pass after pass, on every tier: with centroids moved
    /// far from the points that had them in their top-4 (a centroid the
    /// last pass ranked fifth or lower then wins), moved by one ulp, moved
    /// onto another (exact ties), and left alone.
    #[test]
    fn passes_from_the_last_top4_equal_full_scans() {
        let (n, xdim, nlist) = (600, 12, 24);
        let (x, cent, _) = points_with_ties(11, n, xdim, nlist);
        let pts = Points { x: &x, n, xdim };
        for tier in crate::isa::Isa::supported() {
            let mut tracks = vec![NO_TRACK; n];
            let mut asg = vec![0u32; n];
            let mut prev: Option<Vec<f32>> = None;
            let mut c = cent.clone();
            for pass in 0..6u32 {
                let cv = CentView::new(&c, nlist, xdim, pass, prev.as_deref()).unwrap();
                assert_eq!(cv.moved.is_some(), pass > 0, "pass {pass}");
                assign(tier, &pts, &cv, 2, &mut asg, Some(&mut tracks)).unwrap();
                let mut want = vec![0u32; n];
                assign(tier, &pts, &cv, 1, &mut want, None).unwrap();
                assert_eq!(asg, want, "{} pass {pass}", tier.name());
                // The next centroids: some far away, one by an ulp, one
                // onto another, the rest as they are.
                let mut next = c.clone();
                let k = pass as usize;
                for j in 0..xdim {
                    next[(k % 6) * xdim + j] += 40.0;
                    next[(6 + k) * xdim + j] = f32::from_bits(c[(6 + k) * xdim + j].to_bits() + 1);
                    next[(14 + k) * xdim + j] = c[(20 + k % 4) * xdim + j];
                }
                drift_tracks(&c, &next, xdim, &asg, &mut tracks);
                prev = Some(std::mem::replace(&mut c, next));
            }
        }
    }
}
