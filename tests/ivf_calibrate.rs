//! `Ivf::calibrate` (search parameters for a recall target from sample
//! queries): the chosen point's recall and rows scanned are what a search
//! with it gives, it meets the target, the point one step cheaper does not
//! by its 95 % lower confidence bound (for both knobs), the cheaper knob by rows scanned is chosen, the result
//! is the same on every tier and thread count, an unreachable target
//! returns the best point with `met = false`, and bad inputs are refused.

mod common;

use common::ivf::randn;
use common::tiers::for_this_test as tiers;
use lshk::data::{queries_near_labels, structured_layer};
use lshk::ivf::{Calibration, Codes, Ivf, IvfParams, SearchParams, SearchStats};
use lshk::Status;

const K: usize = 10;

/// Recall@K of `sp` against the exhaustive search (every list, every
/// candidate re-scored, which tests/ivf.rs shows is the exact top-k), its
/// 95 % lower confidence bound over the per-query recalls (mean - 1.645 sd
/// / sqrt(nq)), and mean rows scanned, computed here query by query.
fn recall3(ivf: &Ivf, q: &[f32], nq: usize, sp: &SearchParams) -> (f64, f64, f64) {
    let dim = ivf.dim();
    let all = SearchParams::fixed(ivf.nlist() as u32, ivf.list_ids().len() as u32);
    let want = K.min(ivf.rows());
    let mut per = Vec::new();
    let mut scanned = 0u64;
    for i in 0..nq {
        let qi = &q[i * dim..(i + 1) * dim];
        let (mut a, mut b) = (vec![0u32; K], vec![0f32; K]);
        ivf.search(qi, 1, dim, K, &all, &mut a, &mut b).unwrap();
        let (mut c, mut d) = (vec![0u32; K], vec![0f32; K]);
        let mut st = SearchStats::default();
        ivf.search_stats(
            lshk::isa::active(),
            qi,
            1,
            dim,
            K,
            sp,
            &mut c,
            &mut d,
            Some(&mut st),
        )
        .unwrap();
        let hit = c[..want].iter().filter(|x| a[..want].contains(x)).count();
        per.push(hit as f64 / want as f64);
        scanned += st.scanned;
    }
    let n = nq as f64;
    let mean = per.iter().sum::<f64>() / n;
    let var = if nq > 1 {
        per.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    let lower = (mean - 1.645 * (var / n).sqrt()).clamp(0.0, mean);
    (mean, lower, scanned as f64 / n)
}

/// (recall, mean scanned) as `Ivf::calibrate` reports them.
fn recall(ivf: &Ivf, q: &[f32], nq: usize, sp: &SearchParams) -> (f32, f64) {
    let (m, _, s) = recall3(ivf, q, nq, sp);
    (m as f32, s)
}

/// Whether a point meets `target` by its lower bound (with a hair of
/// tolerance for the different f64 summation order here).
fn meets(ivf: &Ivf, q: &[f32], nq: usize, sp: &SearchParams, target: f32) -> bool {
    recall3(ivf, q, nq, sp).1 >= target as f64 - 1e-9
}

fn adaptive(reach: f32, rerank: u32) -> SearchParams {
    SearchParams {
        nprobe: u32::MAX,
        rerank,
        reach,
        ..Default::default()
    }
}

struct Setup {
    ivf: Ivf,
    q: Vec<f32>,
    nq: usize,
}

/// A clustered layer whose queries lie near rows, so recall grows over
/// many lists (nlist at the default rule).
fn setup(codes: Codes) -> Setup {
    let (rows, dim, nq) = (12_000, 48, 150);
    let lay = structured_layer(rows, dim, 96, 41);
    let (q, _) = queries_near_labels(&lay.w, rows, dim, nq, 42);
    let p = IvfParams {
        codes,
        iters: 4,
        ..Default::default()
    };
    let ivf = Ivf::build(&lay.w, Some(&lay.bias), rows, dim, dim, &p).unwrap();
    Setup { ivf, q, nq }
}

fn close(a: f32, b: f64) -> bool {
    (a as f64 - b).abs() <= 1e-6
}

fn check(s: &Setup, target: f32, rerank: u32, c: &Calibration) {
    let (ivf, q, nq) = (&s.ivf, &s.q[..], s.nq);
    let what = format!("target {target}, rerank {rerank}: {c:?}");
    assert!(c.met, "{what}");
    assert!(
        c.recall_lower >= target && c.recall_lower <= c.recall,
        "{what}"
    );
    assert_eq!(c.params.rerank, rerank);
    // The chosen point's figures are a search's.
    let (m, l, sc) = recall3(ivf, q, nq, &c.params);
    assert!(
        close(c.recall, m) && close(c.recall_lower, l) && c.scanned == sc,
        "{what}"
    );
    // Fixed: meets at nprobe, misses at nprobe - 1.
    let (p, r, sc) = c.fixed;
    let fp = SearchParams::fixed(p, rerank);
    let (m, _, s2) = recall3(ivf, q, nq, &fp);
    assert!(close(r, m) && sc == s2, "{what}");
    assert!(meets(ivf, q, nq, &fp, target), "{what}");
    if p > 1 {
        let below = SearchParams::fixed(p - 1, rerank);
        assert!(
            !meets(ivf, q, nq, &below, target),
            "{what}: nprobe {} meets",
            p - 1
        );
    }
    // Adaptive: meets at reach, misses one 1/16 step below.
    let (a, r, sc) = c.adaptive;
    let (m, _, s2) = recall3(ivf, q, nq, &adaptive(a, rerank));
    assert!(close(r, m) && sc == s2, "{what}");
    assert!(meets(ivf, q, nq, &adaptive(a, rerank), target), "{what}");
    assert_eq!(
        a * 16.0,
        (a * 16.0).round(),
        "{what}: reach on the 1/16 grid"
    );
    if a > 1.0 / 16.0 {
        let below = adaptive(a - 1.0 / 16.0, rerank);
        assert!(
            !meets(ivf, q, nq, &below, target),
            "{what}: reach {} meets",
            a - 0.0625
        );
    }
    // The cheaper of the two by rows scanned (equal: fixed).
    let fixed_chosen = c.params.reach == 0.0;
    assert_eq!(fixed_chosen, c.fixed.2 <= c.adaptive.2, "{what}");
}

#[test]
fn the_chosen_point_meets_the_target_and_one_step_less_does_not() {
    let s = setup(Codes::I8);
    for (target, rerank) in [(0.5, 32), (0.8, 32), (0.9, 16), (0.95, 32), (0.99, 64)] {
        let c = s
            .ivf
            .calibrate(&s.q, s.nq, s.ivf.dim(), K, target, rerank, 2)
            .unwrap();
        println!("{target}: {c:?}");
        check(&s, target, rerank, &c);
    }
    // Exact scoring (no codes) reaches recall 1.
    let e = setup(Codes::None);
    let c = e
        .ivf
        .calibrate(&e.q, e.nq, e.ivf.dim(), K, 1.0, 0, 0)
        .unwrap();
    check(&e, 1.0, 0, &c);
}

#[test]
fn the_same_on_every_tier_and_thread_count() {
    let s = setup(Codes::I8);
    let mut want = None;
    for tier in tiers() {
        for threads in [1, 2, 5] {
            let c = s
                .ivf
                .calibrate_isa(tier, &s.q, s.nq, s.ivf.dim(), K, 0.9, 32, threads)
                .unwrap();
            match &want {
                None => want = Some(c),
                Some(w) => assert_eq!(&c, w, "{} x{threads}", tier.name()),
            }
        }
    }
}

/// With int8 scores returned as they are (rerank 0), near-ties among the
/// top 10 keep the recall below 1 even with every list visited: the best
/// measured point comes back with `met = false`.
#[test]
fn an_unreachable_target_returns_the_best_point() {
    let (rows, dim, nq) = (3000, 64, 40);
    let w = randn(rows * dim, 3);
    let q = randn(nq * dim, 4);
    let ivf = Ivf::build(&w, None, rows, dim, dim, &IvfParams::default()).unwrap();
    let c = ivf.calibrate(&q, nq, dim, K, 1.0, 0, 0).unwrap();
    println!("{c:?}");
    assert!(!c.met);
    assert!(c.recall < 1.0);
    assert_eq!(c.recall, c.fixed.1.max(c.adaptive.1));
    // The fixed search tried every list: its best point is at least that.
    let all = recall(&ivf, &q, nq, &SearchParams::fixed(ivf.nlist() as u32, 0)).0;
    assert!(c.fixed.1 >= all - 1e-6, "{} < {all}", c.fixed.1);
    let (m, _, sc) = recall3(&ivf, &q, nq, &c.params);
    assert!(close(c.recall, m) && c.scanned == sc);
}

#[test]
fn fewer_rows_than_k() {
    let (rows, dim) = (6, 5);
    let w = randn(rows * dim, 8);
    let q = randn(3 * dim, 9);
    let p = IvfParams {
        nlist: 2,
        ..Default::default()
    };
    let ivf = Ivf::build(&w, None, rows, dim, dim, &p).unwrap();
    let c = ivf.calibrate(&q, 3, dim, K, 1.0, 32, 1).unwrap();
    assert!(c.met, "{c:?}");
    assert_eq!(c.recall, 1.0);
}

#[test]
fn bad_inputs_are_refused() {
    let (rows, dim) = (500, 8);
    let w = randn(rows * dim, 1);
    let ivf = Ivf::build(&w, None, rows, dim, dim, &IvfParams::default()).unwrap();
    let q = randn(4 * dim, 2);
    let st = |r: lshk::Result<Calibration>| r.err().map(|e| e.status);
    assert_eq!(
        st(ivf.calibrate(&q, 0, dim, K, 0.9, 32, 1)),
        Some(Status::InvalidArgument)
    );
    assert_eq!(
        st(ivf.calibrate(&q, 4, dim, 0, 0.9, 32, 1)),
        Some(Status::InvalidArgument)
    );
    for t in [0.0, -0.5, 1.0001, f32::NAN, f32::INFINITY] {
        assert_eq!(
            st(ivf.calibrate(&q, 4, dim, K, t, 32, 1)),
            Some(Status::InvalidArgument),
            "target {t}"
        );
    }
    assert_eq!(
        st(ivf.calibrate(&q, 4, dim - 1, K, 0.9, 32, 1)),
        Some(Status::InvalidArgument)
    );
    assert_eq!(
        st(ivf.calibrate(&q, 5, dim, K, 0.9, 32, 1)),
        Some(Status::BufferTooSmall)
    );
    let mut bad = q.clone();
    bad[dim + 3] = f32::NAN;
    assert_eq!(
        st(ivf.calibrate(&bad, 4, dim, K, 0.9, 32, 1)),
        Some(Status::NonFinite)
    );
    assert_eq!(
        st(ivf.calibrate(&q, usize::MAX / 2, dim, K, 0.9, 32, 1)),
        Some(Status::SizeOverflow)
    );
}
