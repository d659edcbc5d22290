//! The nearest-centroid top-4 kernels (`lshk::centroid`) on every tier this
//! CPU supports, against the scalar oracle and an f64 reference.
//!
//! The scalar, AVX2 and AVX-512 tiers compute each score as the same FMA
//! chain in the same order (start from `h_c`, then `d = 0, 1, ...`), so
//! they must agree with the oracle bit for bit: scores and ids. The
//! portable tier may round products separately (no FMA in the baseline),
//! so it is held to the derived bound instead: every score within
//! `gamma(xdim + 1) * (|h_c| + sum_d |x_d c_d|)` of the exact value of its
//! id (`xdim` multiply-adds onto `h_c`, at most `xdim + 1` roundings per
//! term), plus the f64 reference's own `gamma53(xdim + 1)` times the same
//! sum; the rank-t score within twice that of the oracle's rank-t score
//! (order statistics of values each within the bound); and the oracle's
//! id wherever the oracle's scores are separated by more than four bounds.

mod common;

use lshk::centroid::{Panels, TOPK_PAD_ID};
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

use common::tiers::for_this_test as tiers;

const U: f64 = 1.0 / (1u64 << 24) as f64;

fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu) + (n as f64) * f64::EPSILON
}

/// A tier whose chains are the oracle's, bit for bit.
fn fused(t: Isa) -> bool {
    t != Isa::Portable
}

struct Case {
    x: Vec<f32>,
    off: usize,
    n: usize,
    stride: usize,
    xdim: usize,
    cent: Vec<f32>,
    h: Vec<f32>,
    nlist: usize,
}

impl Case {
    fn random(n: usize, xdim: usize, stride: usize, nlist: usize, seed: u64) -> Case {
        let mut r = SplitMix64::new(seed);
        let mut g = move || (r.next_f64_open() * 2.0 - 1.0) as f32;
        // One leading float: the points start unaligned.
        let off = 1;
        let x: Vec<f32> = (0..off + n * stride).map(|_| g()).collect();
        let cent: Vec<f32> = (0..nlist * xdim).map(|_| g()).collect();
        let h = half(&cent, nlist, xdim);
        Case {
            x,
            off,
            n,
            stride,
            xdim,
            cent,
            h,
            nlist,
        }
    }

    fn xs(&self) -> &[f32] {
        &self.x[self.off..]
    }

    fn point(&self, i: usize) -> &[f32] {
        &self.xs()[i * self.stride..i * self.stride + self.xdim]
    }

    fn run(&self, tier: Isa) -> (Vec<f32>, Vec<u32>) {
        let p = Panels::pack(&self.cent, &self.h, self.nlist, self.xdim).unwrap();
        let (mut best, mut ids) = (vec![0f32; self.n * 4], vec![0u32; self.n * 4]);
        p.top4_isa(tier, self.xs(), self.n, self.stride, &mut best, &mut ids)
            .unwrap();
        (best, ids)
    }

    /// Exact `h_c + <x_i, c>` and the tolerance of a computed score.
    fn exact(&self, i: usize, c: usize) -> (f64, f64) {
        let x = self.point(i);
        let cr = &self.cent[c * self.xdim..(c + 1) * self.xdim];
        let mut s = f64::from(self.h[c]);
        let mut mag = f64::from(self.h[c]).abs();
        for (&a, &b) in x.iter().zip(cr) {
            s += f64::from(a) * f64::from(b);
            mag += (f64::from(a) * f64::from(b)).abs();
        }
        let k = self.xdim + 1;
        (s, (gamma(k) + k as f64 * f64::EPSILON) * mag + 1e-37)
    }
}

fn half(cent: &[f32], nlist: usize, xdim: usize) -> Vec<f32> {
    (0..nlist)
        .map(|c| {
            -(cent[c * xdim..(c + 1) * xdim]
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>()
                / 2.0) as f32
        })
        .collect()
}

/// Checks one tier's result against the oracle's (module docs).
fn check(case: &Case, tier: Isa, got: &(Vec<f32>, Vec<u32>), want: &(Vec<f32>, Vec<u32>)) {
    let what = format!(
        "{} n {} xdim {} stride {} nlist {}",
        tier.name(),
        case.n,
        case.xdim,
        case.stride,
        case.nlist
    );
    if fused(tier) {
        assert_eq!(got.1, want.1, "ids, {what}");
        let gb: Vec<u32> = got.0.iter().map(|v| v.to_bits()).collect();
        let wb: Vec<u32> = want.0.iter().map(|v| v.to_bits()).collect();
        assert_eq!(gb, wb, "scores, {what}");
    }
    for i in 0..case.n {
        let (gs, gi) = (&got.0[i * 4..i * 4 + 4], &got.1[i * 4..i * 4 + 4]);
        let (ws, wi) = (&want.0[i * 4..i * 4 + 4], &want.1[i * 4..i * 4 + 4]);
        let real = case.nlist.min(4);
        let bound = |t: usize| case.exact(i, wi[t] as usize).1;
        for t in 0..4 {
            if t >= real {
                assert_eq!(gi[t], TOPK_PAD_ID, "padding id, {what} point {i}");
                assert_eq!(gs[t], f32::NEG_INFINITY, "padding score, {what}");
                continue;
            }
            let c = gi[t] as usize;
            assert!(c < case.nlist, "id {c}, {what}");
            assert!(!gi[..t].contains(&gi[t]), "duplicate id, {what}");
            let (e, b) = case.exact(i, c);
            assert!(
                (f64::from(gs[t]) - e).abs() <= b,
                "score {} of id {c} vs exact {e} (bound {b}), {what} point {i}",
                gs[t]
            );
            assert!(
                (f64::from(gs[t]) - f64::from(ws[t])).abs() <= 2.0 * bound(t).max(b),
                "rank {t}: {} vs oracle {}, {what} point {i}",
                gs[t],
                ws[t]
            );
            assert!(t == 0 || gs[t] <= gs[t - 1], "descending, {what}");
            // Separated from its neighbours by more than four bounds: the
            // same id (the next, unreturned, score is at most ws[3]).
            let lo = if t + 1 < real {
                f64::from(ws[t + 1])
            } else {
                f64::NEG_INFINITY
            };
            let hi = if t > 0 {
                f64::from(ws[t - 1])
            } else {
                f64::INFINITY
            };
            let (w, m) = (f64::from(ws[t]), 4.0 * bound(t).max(b));
            if hi - w > m && w - lo > m && (t + 1 < real || real < 4) {
                assert_eq!(gi[t], wi[t], "rank {t} id, {what} point {i}");
            }
        }
    }
}

#[test]
fn every_tier_matches_the_oracle() {
    let ts = tiers();
    let mut seed = 1;
    for nlist in [1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 48, 65, 100] {
        for xdim in [1, 2, 3, 7, 8, 9, 16, 17, 33, 129] {
            for (n, stride) in [
                (0, xdim),
                (1, xdim),
                (5, xdim + 3),
                (13, xdim),
                (26, xdim + 1),
            ] {
                seed += 1;
                let case = Case::random(n, xdim, stride, nlist, seed);
                let want = case.run(Isa::Scalar);
                for &t in &ts {
                    check(&case, t, &case.run(t), &want);
                }
            }
        }
    }
}

/// More centroids than one chunk of panels (the top-4 carried across
/// chunks), more points than a tile, on a realistic width.
#[test]
fn large_sizes_match_the_oracle() {
    let ts = tiers();
    for (n, xdim, nlist) in [(61, 129, 1100), (200, 64, 530)] {
        let case = Case::random(n, xdim, xdim, nlist, 99 + n as u64);
        let want = case.run(Isa::Scalar);
        for &t in &ts {
            check(&case, t, &case.run(t), &want);
        }
    }
}

/// A start above `-inf` (`Panels::start`) below each point's fourth score
/// gives the same top-4, ids and score bits, on every tier; a floor at
/// the fourth itself drops the fourth (only scores above the floor enter).
#[test]
fn a_floor_below_the_fourth_keeps_the_top4() {
    let ts = tiers();
    let case = Case::random(40, 33, 33, 150, 7);
    let p = Panels::pack(&case.cent, &case.h, case.nlist, case.xdim).unwrap();
    for &t in &ts {
        let (want_s, want_i) = case.run(t);
        for i in 0..case.n {
            let fourth = want_s[i * 4 + 3];
            let (mut b, mut id) = ([0f32; 4], [0u32; 4]);
            Panels::start(&mut b, &mut id, fourth.next_down());
            p.update_isa(t, case.point(i), 1, case.xdim, &mut b, &mut id)
                .unwrap();
            assert_eq!(id[..], want_i[i * 4..i * 4 + 4], "{t:?} point {i}");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&b), bits(&want_s[i * 4..i * 4 + 4]));
            Panels::start(&mut b, &mut id, fourth);
            p.update_isa(t, case.point(i), 1, case.xdim, &mut b, &mut id)
                .unwrap();
            assert_eq!(id[3], TOPK_PAD_ID, "{t:?} point {i}");
            assert_eq!(id[..3], want_i[i * 4..i * 4 + 3]);
        }
    }
}

/// Duplicate centroids score equally: the smaller id comes first, on
/// every tier; merging the same centroids again changes nothing (an equal
/// score never displaces).
#[test]
fn ties_go_to_the_smaller_id_and_equal_scores_never_displace() {
    let (n, xdim) = (9, 20);
    let mut case = Case::random(n, xdim, xdim, 40, 5);
    // Centroids 3, 17, 21 and 38 are copies of centroid 30.
    for c in [3, 17, 21, 38] {
        let src = case.cent[30 * xdim..31 * xdim].to_vec();
        case.cent[c * xdim..(c + 1) * xdim].copy_from_slice(&src);
    }
    // Make them the nearest: points close to centroid 30.
    for i in 0..n {
        for d in 0..xdim {
            case.x[case.off + i * xdim + d] = case.cent[30 * xdim + d] * 1.5;
        }
    }
    case.h = half(&case.cent, case.nlist, xdim);
    let p = Panels::pack(&case.cent, &case.h, case.nlist, xdim).unwrap();
    for t in tiers() {
        let (best, ids) = case.run(t);
        for i in 0..n {
            assert_eq!(&ids[i * 4..i * 4 + 4], &[3, 17, 21, 30], "{}", t.name());
            if fused(t) {
                assert!(best[i * 4..i * 4 + 4].iter().all(|&s| s == best[i * 4]));
            }
        }
        let (mut b2, mut i2) = (best.clone(), ids.clone());
        p.update_isa(t, case.xs(), n, xdim, &mut b2, &mut i2)
            .unwrap();
        assert_eq!(i2, ids, "{}", t.name());
        assert_eq!(b2, best, "{}", t.name());
    }
}

/// NaN never enters (a NaN point keeps the padding); -0, denormals and
/// infinities give the oracle's scores on the fused tiers.
#[test]
fn special_values() {
    let (xdim, nlist) = (19, 37);
    let mut case = Case::random(6, xdim, xdim, nlist, 8);
    let o = case.off;
    case.x[o + 3] = f32::NAN; // point 0
    case.x[o + xdim..o + 2 * xdim].fill(-0.0); // point 1: scores = h
    case.x[o + 2 * xdim + 4] = 1e-41; // point 2: a denormal
    case.x[o + 3 * xdim + 1] = f32::INFINITY; // point 3
    case.cent[5 * xdim + 2] = -1e-40;
    case.cent[7 * xdim..8 * xdim].fill(-0.0);
    case.h = half(&case.cent, nlist, xdim);
    let want = case.run(Isa::Scalar);
    assert!(want.1[..4].iter().all(|&i| i == TOPK_PAD_ID), "NaN point");
    assert!(want.0[..4].iter().all(|&s| s == f32::NEG_INFINITY));
    for t in tiers() {
        let got = case.run(t);
        assert!(got.1[..4].iter().all(|&i| i == TOPK_PAD_ID), "{}", t.name());
        if fused(t) {
            assert_eq!(got.1, want.1, "{}", t.name());
            let gb: Vec<u32> = got.0.iter().map(|v| v.to_bits()).collect();
            let wb: Vec<u32> = want.0.iter().map(|v| v.to_bits()).collect();
            assert_eq!(gb, wb, "{}", t.name());
        }
    }
    // Point 1 is all zeros: its scores are the four largest h, exactly.
    let mut hs: Vec<(f32, u32)> = case.h.iter().copied().zip(0..).collect();
    hs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (t, &(h, id)) in hs.iter().take(4).enumerate() {
        assert_eq!(want.1[4 + t], id);
        assert_eq!(want.0[4 + t], h);
    }
}

#[test]
fn bad_arguments_are_refused() {
    let cent = vec![0f32; 10 * 4];
    let h = vec![0f32; 10];
    let code = |r: lshk::Result<()>| r.unwrap_err().status;
    assert_eq!(
        Panels::pack(&cent, &h, 10, 0).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        Panels::pack(&cent[..39], &h, 10, 4).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        Panels::pack(&cent, &h[..9], 10, 4).unwrap_err().status,
        Status::InvalidArgument
    );
    let p = Panels::pack(&cent, &h, 10, 4).unwrap();
    let x = vec![0f32; 3 * 4];
    let (mut b, mut i) = (vec![0f32; 12], vec![0u32; 12]);
    // Stride below xdim, x too short, top-4 buffers too short.
    assert_eq!(
        code(p.top4_isa(Isa::Scalar, &x, 3, 3, &mut b, &mut i)),
        Status::InvalidArgument
    );
    assert_eq!(
        code(p.top4_isa(Isa::Scalar, &x, 3, 5, &mut b, &mut i)),
        Status::InvalidArgument
    );
    assert_eq!(
        code(p.top4_isa(Isa::Scalar, &x, 3, 4, &mut b[..11], &mut i)),
        Status::InvalidArgument
    );
    assert_eq!(
        code(p.top4_isa(Isa::Scalar, &x, 3, 4, &mut b, &mut i[..11])),
        Status::InvalidArgument
    );
    assert!(p.top4_isa(Isa::Scalar, &x, 3, 4, &mut b, &mut i).is_ok());
    assert!(p.top4_isa(Isa::Scalar, &[], 0, 4, &mut [], &mut []).is_ok());
    // A tier the CPU lacks is an error, never a crash.
    if let Some(t) = Isa::ALL
        .into_iter()
        .find(|t| !Isa::supported().any(|s| s == *t))
    {
        assert_eq!(
            code(p.top4_isa(t, &x, 3, 4, &mut b, &mut i)),
            Status::UnsupportedIsa
        );
    }
}
