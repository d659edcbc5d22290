//! The graph family of `lshk::Index`: an index built with
//! `Family::Graph` returns, for every query,
//! the rows the standalone `Graph` search returns on the same data and
//! parameters (same ids), with the index's exact logits of W q + b; the
//! same on every tier and for every build thread count; save/load round
//! trips bit for bit; LSH-only calls are refused (Unsupported) and
//! change nothing; bad parameters are refused.
//!
//! The tests change the process-wide tier cap (`isa::set_max`), so they
//! take one lock.

mod common;

use std::path::PathBuf;
use std::sync::Mutex;

use common::tiers::for_this_test as tiers;
use lshk::graph::{Graph, GraphParams, SearchParams, Storage as GStorage, Walk};
use lshk::index::{Family, IndexParams, QueryParams, Storage, Transform};
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;
use lshk::{Index, Isa, Status};

static TIER: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    TIER.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-index-graph-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

struct Layer {
    w: Vec<f32>,
    b: Vec<f32>,
    q: Vec<f32>,
    rows: usize,
    dim: usize,
    nq: usize,
}

fn layer(rows: usize, dim: usize, nq: usize, seed: u64) -> Layer {
    Layer {
        w: randn(rows * dim, seed),
        b: randn(rows, seed + 1),
        q: randn(nq * dim, seed + 2),
        rows,
        dim,
        nq,
    }
}

fn gparams(threads: u32, storage: GStorage) -> GraphParams {
    GraphParams {
        m: 8,
        ef_construction: 64,
        threads,
        storage,
        seed: 42,
    }
}

fn iparams(g: GraphParams, storage: Storage) -> IndexParams {
    IndexParams {
        family: Family::Graph,
        storage,
        graph: g,
        ..Default::default()
    }
}

/// Exact logit (f64) of row `r` for query `i`, and a bound on the f32
/// error of any summation order of the dot product plus the bias.
fn exact(l: &Layer, i: usize, r: usize) -> (f64, f64) {
    let q = &l.q[i * l.dim..(i + 1) * l.dim];
    let w = &l.w[r * l.dim..(r + 1) * l.dim];
    let dot: f64 = w.iter().zip(q).map(|(&a, &b)| a as f64 * b as f64).sum();
    let s: f64 = w
        .iter()
        .zip(q)
        .map(|(&a, &b)| (a as f64 * b as f64).abs())
        .sum();
    let n = (l.dim + 2) as f64;
    let g = n * f64::powi(2.0, -24) / (1.0 - n * f64::powi(2.0, -24));
    (dot + l.b[r] as f64, g * (s + (l.b[r] as f64).abs()) + 1e-30)
}

fn index_query(idx: &Index, l: &Layer, k: usize, sp: &SearchParams) -> (Vec<u32>, Vec<f32>) {
    let mut ids = vec![0u32; l.nq * k];
    let mut sc = vec![0f32; l.nq * k];
    let qp = QueryParams {
        graph: *sp,
        ..Default::default()
    };
    idx.query_with(&l.q, l.nq, l.dim, k as u32, &qp, &mut ids, &mut sc, None)
        .unwrap();
    (ids, sc)
}

fn graph_query(g: &Graph, t: Isa, l: &Layer, k: usize, sp: &SearchParams) -> (Vec<u32>, Vec<f32>) {
    let mut ids = vec![0u32; l.nq * k];
    let mut sc = vec![0f32; l.nq * k];
    g.search_with(t, &l.q, l.nq, l.dim, k, sp, &mut ids, &mut sc, None)
        .unwrap();
    (ids, sc)
}

fn walks(k: usize) -> Vec<SearchParams> {
    vec![
        SearchParams {
            ef: 40,
            walk: Walk::Exact,
            rerank: 0,
        },
        SearchParams {
            ef: 40,
            walk: Walk::Exact,
            rerank: k,
        },
        SearchParams {
            ef: 40,
            walk: Walk::Int8,
            rerank: 0,
        },
        SearchParams {
            ef: 40,
            walk: Walk::Int8,
            rerank: k,
        },
    ]
}

/// The index's result for `sp` against the standalone graph's: the same
/// ids per query (as sets when the re-rank takes only k: then both rank
/// the same k rows; in order otherwise, except where two logits are within
/// rounding), every score the exact logit of its row within the f32 bound,
/// descending.
fn check_same(
    l: &Layer,
    k: usize,
    sp: &SearchParams,
    got: &(Vec<u32>, Vec<f32>),
    want: &(Vec<u32>, Vec<f32>),
) {
    for i in 0..l.nq {
        let (gi, gs) = (&got.0[i * k..(i + 1) * k], &got.1[i * k..(i + 1) * k]);
        let wi = &want.0[i * k..(i + 1) * k];
        let mut a = gi.to_vec();
        let mut b = wi.to_vec();
        a.sort_unstable();
        b.sort_unstable();
        if sp.rerank == k || sp.walk == Walk::Int8 {
            assert_eq!(
                a, b,
                "query {i} {sp:?}: the index's ids differ from the graph's"
            );
        }
        for j in 0..k {
            let (e, bound) = exact(l, i, gi[j] as usize);
            assert!(
                (gs[j] as f64 - e).abs() <= bound,
                "query {i} rank {j}: score {} is not the exact logit {e} (bound {bound})",
                gs[j]
            );
            if j > 0 {
                assert!(
                    gs[j - 1] > gs[j] || (gs[j - 1] == gs[j] && gi[j - 1] < gi[j]),
                    "query {i}: not descending at rank {j}"
                );
            }
            if gi[j] != wi[j] {
                // Only a near-tie (within rounding of both kernels) may
                // order two rows differently.
                let (e2, b2) = exact(l, i, wi[j] as usize);
                assert!(
                    (e - e2).abs() <= 2.0 * (bound + b2),
                    "query {i} rank {j}: id {} vs the graph's {} (logits {e} / {e2})",
                    gi[j],
                    wi[j]
                );
            }
        }
    }
}

#[test]
fn graph_family_equals_standalone_graph_on_every_tier_and_thread_count() {
    let _g = lock();
    // More rows than the graph's sequential insertions (2,048): batched
    // insertion is exercised.
    let l = layer(2600, 20, 30, 7);
    let k = 10;
    let ts = tiers();
    let top = *ts.last().unwrap();
    let mut first: Option<Vec<(Vec<u32>, Vec<u32>)>> = None;
    for &t in &ts {
        lshk::isa::set_max(t);
        for threads in [1u32, 2, 3] {
            if t != top && threads != 1 {
                continue; // thread counts on the top tier only (time)
            }
            let gp = gparams(threads, GStorage::F32);
            let idx = Index::build(
                &l.w,
                Some(&l.b),
                l.rows,
                l.dim,
                l.dim,
                &iparams(gp, Storage::F32),
                None,
            )
            .unwrap();
            assert_eq!(idx.family(), Family::Graph);
            assert!(idx.graph().is_some() && idx.lsh_tables().is_none());
            let g = Graph::build_isa(t, &l.w, Some(&l.b), l.rows, l.dim, l.dim, &gp).unwrap();
            assert_eq!(
                idx.graph().unwrap().structure_checksum(),
                g.structure_checksum(),
                "tier {t:?} threads {threads}: the index's graph differs"
            );
            let mut all = Vec::new();
            for sp in walks(k) {
                let got = index_query(&idx, &l, k, &sp);
                let want = graph_query(&g, t, &l, k, &sp);
                check_same(&l, k, &sp, &got, &want);
                all.push((
                    got.0,
                    got.1.iter().map(|v| v.to_bits()).collect::<Vec<u32>>(),
                ));
            }
            match &first {
                None => first = Some(all),
                Some(f) => {
                    for (w, (a, b)) in f.iter().zip(&all).enumerate() {
                        assert_eq!(
                            a.0, b.0,
                            "tier {t:?} threads {threads} walk {w}: ids differ"
                        );
                        // Scores: the exact kernel of each tier (its last bits
                        // may differ between tiers; within a tier they do not).
                        if t == ts[0] {
                            assert_eq!(a.1, b.1, "threads {threads} walk {w}: scores differ");
                        }
                    }
                }
            }
        }
    }
    lshk::isa::set_max(Isa::Avx512);
}

#[test]
fn ef_at_least_rows_is_the_exact_top_k_and_padding() {
    let _g = lock();
    let l = layer(60, 9, 8, 3);
    let idx = Index::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &iparams(gparams(1, GStorage::Bf16), Storage::F32),
        None,
    )
    .unwrap();
    let k = 70; // more than rows: padded
    let sp = SearchParams {
        ef: 100,
        walk: Walk::Exact,
        rerank: 0,
    };
    let (ids, sc) = index_query(&idx, &l, k, &sp);
    for i in 0..l.nq {
        let mut want: Vec<(f64, u32)> =
            (0..l.rows).map(|r| (exact(&l, i, r).0, r as u32)).collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for j in 0..l.rows {
            assert_eq!(ids[i * k + j], want[j].1, "query {i} rank {j}");
        }
        for j in l.rows..k {
            assert_eq!(ids[i * k + j], u32::MAX);
            assert_eq!(sc[i * k + j], f32::NEG_INFINITY);
        }
    }
    // Stats: the whole pool (every row) is re-scored.
    let mut st = lshk::index::QueryStats::default();
    let mut ids1 = vec![0u32; 5];
    let mut sc1 = vec![0f32; 5];
    let qp = QueryParams {
        graph: sp,
        ..Default::default()
    };
    idx.query_with(&l.q, 1, l.dim, 5, &qp, &mut ids1, &mut sc1, Some(&mut st))
        .unwrap();
    assert_eq!((st.queries, st.candidates_total), (1, 60));
    // `scanned` is the walk's rows scored: the standalone graph's
    // distances for the same query.
    let g = lshk::graph::Graph::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &gparams(1, GStorage::Bf16),
    )
    .unwrap();
    let mut gs = lshk::graph::GraphStats::default();
    let (mut gi, mut gsc) = (vec![0u32; 5], vec![0f32; 5]);
    g.search_stats(
        lshk::isa::active(),
        &l.q,
        1,
        l.dim,
        5,
        100,
        &mut gi,
        &mut gsc,
        Some(&mut gs),
    )
    .unwrap();
    assert!(gs.distances > 0);
    assert_eq!(st.scanned, gs.distances);
    // The plain query (default search parameters, gather parameters
    // ignored) agrees with query_with's defaults.
    let mut ids2 = vec![0u32; 5];
    let mut sc2 = vec![0f32; 5];
    idx.query(
        &l.q,
        1,
        l.dim,
        5,
        &GatherParams::default(),
        &mut ids2,
        &mut sc2,
        None,
    )
    .unwrap();
    let (ids3, _) = index_query(
        &idx,
        &Layer {
            nq: 1,
            ..layer(60, 9, 8, 3)
        },
        5,
        &SearchParams::default(),
    );
    assert_eq!(ids2, ids3);
}

#[test]
fn save_load_round_trip_is_bit_identical() {
    let _g = lock();
    let l = layer(700, 13, 12, 11);
    let k = 7;
    for (gs, st) in [
        (GStorage::F32, Storage::F32),
        (GStorage::Bf16, Storage::Bf16),
        (GStorage::I8, Storage::I8),
        (GStorage::F32, Storage::F16),
    ] {
        for with_bias in [true, false] {
            let b = with_bias.then_some(&l.b[..]);
            let idx = Index::build(
                &l.w,
                b,
                l.rows,
                l.dim,
                l.dim,
                &iparams(gparams(2, gs), st),
                None,
            )
            .unwrap();
            let path = tmp(&format!("g-{gs:?}-{st:?}-{with_bias}.lshk"));
            idx.save(&path).unwrap();
            let back = Index::load(&path).unwrap();
            assert_eq!(back.family(), Family::Graph);
            assert_eq!(back.storage(), st);
            assert_eq!(back.bias().is_some(), with_bias);
            assert_eq!(
                back.graph().unwrap().structure_checksum(),
                idx.graph().unwrap().structure_checksum()
            );
            assert!(
                back.memory_bytes() > 0 && idx.memory_bytes() > idx.graph().unwrap().memory_bytes()
            );
            for sp in walks(k) {
                let a = index_query(&idx, &l, k, &sp);
                let c = index_query(&back, &l, k, &sp);
                assert_eq!(a.0, c.0, "{gs:?} {st:?}: ids differ after load");
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&a.1),
                    bits(&c.1),
                    "{gs:?} {st:?}: scores differ after load"
                );
            }
            // Saving the loaded index gives the same file content.
            let p2 = tmp(&format!("g2-{gs:?}-{st:?}-{with_bias}.lshk"));
            back.save(&p2).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&p2).unwrap());
            std::fs::remove_file(&path).ok();
            std::fs::remove_file(&p2).ok();
        }
    }
}

#[test]
fn lsh_only_calls_are_refused_and_change_nothing() {
    let _g = lock();
    let l = layer(300, 8, 4, 5);
    let mut idx = Index::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &iparams(gparams(1, GStorage::F32), Storage::F32),
        None,
    )
    .unwrap();
    let sp = SearchParams::default();
    let before = index_query(&idx, &l, 5, &sp);
    // A call the graph source lacks: Unsupported, with a message naming it.
    let inv = |r: lshk::Result<()>, what: &str| {
        let e = r
            .err()
            .unwrap_or_else(|| panic!("{what} accepted on a graph index"));
        assert_eq!(e.status, Status::Unsupported, "{what}: {}", e.message);
        assert!(e.message.contains("graph"), "{what}: {}", e.message);
    };
    let mut out = lshk::tables::GatherResult::default();
    inv(
        idx.candidates(&l.q, 1, l.dim, &GatherParams::default(), &mut out),
        "candidates",
    );
    assert!(out.ids.is_empty() && out.offsets.is_empty());
    inv(
        idx.candidates_budget(
            &l.q,
            1,
            l.dim,
            &GatherParams::default(),
            lshk::tables::BudgetRule::MidBucket,
            None,
            &mut out,
        ),
        "candidates_budget",
    );
    let mut codes = vec![7u32; 4];
    inv(idx.query_codes(&l.q, 1, l.dim, &mut codes), "query_codes");
    assert_eq!(codes, vec![7u32; 4]);
    inv(
        idx.train_labels(&l.q, 1, l.dim, &[0, 1], &[3], &Default::default()),
        "train_labels",
    );
    // train_iul names the graph family, not DWTA (the other family it
    // refuses).
    inv(
        idx.train_iul(&l.q, 1, l.dim, &[0, 1], &[3], &Default::default())
            .map(drop),
        "train_iul",
    );
    let e = idx
        .train_iul(&l.q, 1, l.dim, &[0, 1], &[3], &Default::default())
        .unwrap_err();
    assert!(
        e.message.contains("this index is the graph family") && !e.message.contains("is DWTA"),
        "{}",
        e.message
    );
    inv(
        idx.update_rows(&[1], Some((&l.w[..l.dim], l.dim)), None),
        "update_rows",
    );
    inv(idx.rehash_rows(&[1]).map(drop), "rehash_rows");
    inv(idx.rehash_dirty().map(drop), "rehash_dirty");
    assert!(idx.simhash().is_none() && idx.dwta().is_none() && idx.lsh_family().is_none());
    assert_eq!((idx.bits(), idx.num_tables(), idx.dirty_rows()), (0, 0, 0));
    assert!(idx.label_state().is_none());
    assert_eq!(index_query(&idx, &l, 5, &sp), before);
}

#[test]
fn bad_parameters_are_refused() {
    let _g = lock();
    let l = layer(50, 6, 2, 9);
    let build = |p: &IndexParams| Index::build(&l.w, Some(&l.b), l.rows, l.dim, l.dim, p, None);
    let base = iparams(gparams(1, GStorage::F32), Storage::F32);
    for (p, what) in [
        (
            IndexParams {
                transform: Transform::BiasAug,
                ..base.clone()
            },
            "transform",
        ),
        (
            IndexParams {
                planes: Some(vec![0.0; 12 * 50 * 6]),
                ..base.clone()
            },
            "planes",
        ),
        (
            IndexParams {
                graph: GraphParams { m: 1, ..base.graph },
                ..base.clone()
            },
            "m",
        ),
        (
            IndexParams {
                graph: GraphParams {
                    ef_construction: 0,
                    ..base.graph
                },
                ..base.clone()
            },
            "ef_construction",
        ),
    ] {
        let e = build(&p).err().unwrap_or_else(|| panic!("{what} accepted"));
        assert_eq!(e.status, Status::InvalidArgument, "{what}: {}", e.message);
    }
    let idx = build(&base).unwrap();
    let mut ids = vec![0u32; 2];
    let mut sc = vec![0f32; 2];
    let qp = QueryParams {
        graph: SearchParams {
            ef: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = idx
        .query_with(&l.q, 1, l.dim, 2, &qp, &mut ids, &mut sc, None)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert_eq!(ids, vec![0, 0]);
    let mut bad = l.q.clone();
    bad[1] = f32::NAN;
    let e = idx
        .query_with(
            &bad,
            1,
            l.dim,
            2,
            &QueryParams::default(),
            &mut ids,
            &mut sc,
            None,
        )
        .unwrap_err();
    assert_eq!(e.status, Status::NonFinite);
}

#[test]
fn queries_from_many_threads_agree() {
    let _g = lock();
    let l = layer(900, 16, 24, 13);
    let idx = Index::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &iparams(gparams(0, GStorage::F32), Storage::F32),
        None,
    )
    .unwrap();
    let sp = SearchParams {
        ef: 30,
        walk: Walk::Int8,
        rerank: 0,
    };
    let want = index_query(&idx, &l, 10, &sp);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    assert_eq!(index_query(&idx, &l, 10, &sp), want);
                }
            });
        }
    });
}
