//! Batched IVF search (issue 13 item 4, `src/source/ivf/batch.rs`): a call with
//! several queries shares its passes over the centroids and, with int8
//! codes and fixed selection, over the lists (list by list). The answer of
//! every query must be bit for bit what it gets alone: ids, scores and the
//! per-call counts, on every tier, for every kind of first pass (int8,
//! 4-bit, exact), fixed and adaptive selection, with and without re-ranking,
//! borrowed or owned rows, label-trained lists (a row in several lists),
//! batches that cross the 64-query block, a stride larger than `dim`, and
//! `k` beyond the rows the lists hold.

mod common;

use common::ivf::{layer, randn};
use common::tiers::for_this_test as tiers;
use lshk::data::{queries_near_labels, structured_layer};
use lshk::isa::Isa;
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams, SearchStats};
use lshk::labels::LabelParams;
use lshk::rng::SplitMix64;

/// Searches `nq` queries in one call, then each alone, and asserts the same
/// ids, score bits and summed counts.
#[allow(clippy::too_many_arguments)]
fn check_batch_equals_single(
    ivf: &Ivf,
    tier: Isa,
    q: &[f32],
    nq: usize,
    stride: usize,
    k: usize,
    sp: &SearchParams,
    what: &str,
) {
    let (mut a, mut sa) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let mut st_a = SearchStats::default();
    ivf.search_stats(tier, q, nq, stride, k, sp, &mut a, &mut sa, Some(&mut st_a))
        .unwrap();
    let mut st_b = SearchStats::default();
    for i in 0..nq {
        let (mut b, mut sb) = (vec![0u32; k], vec![0f32; k]);
        let mut st = SearchStats::default();
        ivf.search_stats(
            tier,
            &q[i * stride..],
            1,
            stride,
            k,
            sp,
            &mut b,
            &mut sb,
            Some(&mut st),
        )
        .unwrap();
        assert_eq!(&a[i * k..(i + 1) * k], &b[..], "{what}: ids of query {i}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&sa[i * k..(i + 1) * k]),
            bits(&sb),
            "{what}: score bits of query {i}"
        );
        st_b.scanned += st.scanned;
        st_b.reranked += st.reranked;
        st_b.lists += st.lists;
        st_b.refined += st.refined;
    }
    assert_eq!(st_a, st_b, "{what}: counts");
    // The batch did visit lists (the comparison is not vacuous).
    assert!(st_a.scanned > 0, "{what}: nothing scanned");
}

fn selections() -> Vec<(&'static str, SearchParams)> {
    vec![
        ("fixed 1", SearchParams::fixed(1, 20)),
        ("fixed 7", SearchParams::fixed(7, 40)),
        ("fixed 7 no rerank", SearchParams::fixed(7, 0)),
        ("fixed all", SearchParams::fixed(u32::MAX, 64)),
        (
            "adaptive",
            SearchParams {
                nprobe: u32::MAX,
                rerank: 32,
                reach: 2.0,
                ..Default::default()
            },
        ),
        (
            "adaptive cap 3",
            SearchParams {
                nprobe: 3,
                rerank: 0,
                reach: 3.0,
                ..Default::default()
            },
        ),
        // Wide reach: most of the 40 lists, so a batch's adaptive rounds
        // run past one round of proposals, and a cap that ends mid-round.
        (
            "adaptive reach 6",
            SearchParams {
                nprobe: u32::MAX,
                rerank: 16,
                reach: 6.0,
                ..Default::default()
            },
        ),
        (
            "adaptive reach 6 cap 35",
            SearchParams {
                nprobe: 35,
                rerank: 32,
                reach: 6.0,
                ..Default::default()
            },
        ),
    ]
}

#[test]
fn batches_equal_single_queries_for_every_code_and_selection() {
    let (rows, dim, nq, stride) = (2500, 40, 150, 45);
    let l = layer(rows, dim, 1, 11);
    let q = randn(nq * stride, 12);
    for codes in [Codes::I8, Codes::Pq4, Codes::Pq4I8, Codes::None] {
        for borrow in [false, true] {
            if borrow && codes == Codes::None {
                continue;
            }
            let p = IvfParams {
                nlist: 40,
                codes,
                ..Default::default()
            };
            for tier in tiers() {
                let ivf =
                    // SAFETY: the layer outlives the index (borrowed or not).
                    unsafe { Ivf::build_isa(tier, &l.w, Some(&l.b), rows, dim, dim, &p, borrow) }.unwrap();
                for (name, sp) in selections() {
                    for k in [1, 10] {
                        let what =
                            format!("{codes:?} borrow {borrow} {name} k {k} {}", tier.name());
                        check_batch_equals_single(&ivf, tier, &q, nq, stride, k, &sp, &what);
                    }
                }
            }
        }
    }
}

/// The clustered layer's shape ([`clustered`]).
const CLUSTERED: (usize, usize) = (6000, 128);

/// A clustered layer of [`CLUSTERED`] shape (32 clusters, no bias) and
/// `nq` queries near its rows: W and the queries.
fn clustered(nq: usize) -> (Vec<f32>, Vec<f32>) {
    let (rows, dim) = CLUSTERED;
    let lay = structured_layer(rows, dim, 32, 5);
    let (q, _) = queries_near_labels(&lay.w, rows, dim, nq, 6);
    (lay.w, q)
}

/// A clustered layer with queries near its rows (many queries share
/// lists, so the list-by-list pass really shares), no bias, dim = 128 (the
/// register-resident kernel), and batch sizes around the 64-query block.
#[test]
fn clustered_queries_share_lists_and_answers_stay_the_same() {
    let (w, q) = clustered(130);
    let (rows, dim) = CLUSTERED;
    let ivf = Ivf::build(&w, None, rows, dim, dim, &IvfParams::default()).unwrap();
    for tier in tiers() {
        for nb in [2, 63, 64, 65, 130] {
            for (name, sp) in selections() {
                let what = format!("nb {nb} {name} {}", tier.name());
                check_batch_equals_single(&ivf, tier, &q, nb, dim, 10, &sp, &what);
            }
        }
    }
}

/// A list that a batch shares is kept as panels for the next batches: the
/// index's memory grows by at most the lists' codes again (padded to 16
/// rows, with their scales and sums) and only where the tier has panel
/// kernels, and a batch that reads kept panels answers as the one that
/// re-laid them, as single queries, and (int8 scores, no re-rank: exact
/// integer arithmetic) as the scalar tier.
#[test]
fn lists_kept_as_panels_answer_the_same() {
    let nq = 64;
    let (w, q) = clustered(nq);
    let (rows, dim) = CLUSTERED;
    let k = 10;
    for tier in tiers() {
        let ivf = Ivf::build(&w, None, rows, dim, dim, &IvfParams::default()).unwrap();
        let nlist = ivf.nlist();
        let m0 = ivf.memory_bytes();
        let sp = SearchParams::fixed(8, 0);
        let run = |ivf: &Ivf, tier| {
            let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
            ivf.search_stats(tier, &q, nq, dim, k, &sp, &mut ids, &mut sc, None)
                .unwrap();
            (ids, sc.iter().map(|s| s.to_bits()).collect::<Vec<_>>())
        };
        let first = run(&ivf, tier);
        let m1 = ivf.memory_bytes();
        let second = run(&ivf, tier);
        assert_eq!(first, second, "{}", tier.name());
        assert_eq!(ivf.memory_bytes(), m1, "{}: kept once", tier.name());
        let panels = lshk::kernels::qdot::panel_kernel(tier).is_some();
        let bound = (rows + 16 * nlist) * (dim.div_ceil(64) * 64 + 8) + 256 * nlist;
        assert!(
            if panels { m1 > m0 } else { m1 == m0 },
            "{}: {m0} -> {m1}",
            tier.name()
        );
        assert!(m1 - m0 <= bound, "{}: {m0} -> {m1}", tier.name());
        let fresh = Ivf::build(&w, None, rows, dim, dim, &IvfParams::default()).unwrap();
        assert_eq!(first, run(&fresh, Isa::Scalar), "{} = scalar", tier.name());
        check_batch_equals_single(&ivf, tier, &q, nq, dim, k, &sp, tier.name());
    }
}

/// Label-trained lists hold a row in several lists: the batch's shared
/// pass scores it once per list and the answer keeps it once, as alone.
/// `k` larger than what few lists hold pads the same way.
#[test]
fn label_trained_lists_and_padding_batch_like_single() {
    let (rows, dim) = (900, 24);
    let l = layer(rows, dim, 1, 41);
    let ntrain = 80;
    let tq = randn(ntrain * dim, 43);
    let mut r = SplitMix64::new(44);
    let mut off = vec![0usize];
    let mut lab = Vec::new();
    for _ in 0..ntrain {
        for _ in 0..1 + r.below(5) {
            lab.push(r.below(rows as u64) as u32);
        }
        off.push(lab.len());
    }
    let nq = 70;
    let q = randn(nq * dim, 45);
    for codes in [Codes::I8, Codes::None] {
        let p = IvfParams {
            nlist: 30,
            codes,
            ..Default::default()
        };
        let mut ivf = Ivf::build(&l.w, Some(&l.b), rows, dim, dim, &p).unwrap();
        ivf.train_labels(&tq, ntrain, dim, &off, &lab, &LabelParams::default())
            .unwrap();
        for tier in tiers() {
            for (name, sp) in selections() {
                for k in [5, 200] {
                    let what = format!("labels {codes:?} {name} k {k} {}", tier.name());
                    check_batch_equals_single(&ivf, tier, &q, nq, dim, k, &sp, &what);
                }
            }
        }
    }
}

/// From [`lshk::ivf::PANEL_MIN_LISTS`] lists the index also keeps its
/// centroid codes as panels, and the AVX-512 tier scores the centroids with
/// the multi-query panel kernel in batches (four queries per load; a query
/// alone scores the row-major codes).
/// Centroid and list scores are exact integer arithmetic on every tier, so
/// every tier must choose the scalar tier's lists and candidates: the same
/// counts, and without re-ranking (int8 scores returned as they are) the
/// same ids and score bits; batches must equal single queries.
#[test]
fn panel_centroids_match_every_tier() {
    let nlist = lshk::ivf::PANEL_MIN_LISTS + 77;
    let (rows, dim, nq, k) = (8 * nlist, 40, 70, 10);
    let l = layer(rows, dim, nq, 41);
    let p = IvfParams {
        nlist: nlist as u32,
        iters: 1,
        ..Default::default()
    };
    let ivf = Ivf::build(&l.w, Some(&l.b), rows, dim, dim, &p).unwrap();
    assert_eq!(ivf.nlist(), nlist);
    // Two copies of the centroid codes (row-major and panels) are counted.
    assert!(ivf.memory_bytes() > 2 * nlist * 64);
    let sps = [
        SearchParams::fixed(3, 20),
        SearchParams::fixed(40, 0),
        SearchParams {
            nprobe: u32::MAX,
            rerank: 32,
            reach: 2.0,
            ..Default::default()
        },
        SearchParams {
            nprobe: u32::MAX,
            rerank: 0,
            reach: 1.5,
            ..Default::default()
        },
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for sp in &sps {
        let (mut want, mut want_s) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        let mut want_st = SearchStats::default();
        for i in 0..nq {
            let mut st = SearchStats::default();
            ivf.search_stats(
                Isa::Scalar,
                &l.q[i * dim..],
                1,
                dim,
                k,
                sp,
                &mut want[i * k..(i + 1) * k],
                &mut want_s[i * k..(i + 1) * k],
                Some(&mut st),
            )
            .unwrap();
            want_st.scanned += st.scanned;
            want_st.reranked += st.reranked;
            want_st.lists += st.lists;
        }
        for t in tiers() {
            let what = format!("{t:?} {sp:?}");
            check_batch_equals_single(&ivf, t, &l.q, nq, dim, k, sp, &what);
            let (mut a, mut sa) = (vec![0u32; nq * k], vec![0f32; nq * k]);
            let mut st = SearchStats::default();
            ivf.search_stats(t, &l.q, nq, dim, k, sp, &mut a, &mut sa, Some(&mut st))
                .unwrap();
            assert_eq!(st, want_st, "{what}: counts against the scalar tier");
            if sp.rerank == 0 {
                assert_eq!(a, want, "{what}: ids against the scalar tier");
                assert_eq!(bits(&sa), bits(&want_s), "{what}: scores against scalar");
            }
        }
    }
}
