//! The FGD graph's int8 walk (`Walk::Int8`; in C `LSHK_GRAPH_WALK_INT8`
//! in `lshk_query_params::graph`): the walk kernel equals its oracle and
//! the exact i64 sum on every variant (integer: exact, whatever the
//! order); searches with the int8 walk are
//! bit-identical on every tier (golden checksum), return scores of the
//! stored rows within the f32 bound, give the exact top-k with
//! `ef >= rows`, survive save/load, and keep the exact walk's recall on a
//! structured layer.

mod common;

use common::tiers::for_this_test as tiers;
use lshk::graph::{Graph, GraphParams, GraphStats, SearchParams, Storage, Walk};
use lshk::kernels::graph::{self as kg, Recs, WALK_PAD};
use lshk::rng::SplitMix64;
use lshk::Status;

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

#[test]
fn walk_kernel_every_variant_equals_oracle_and_exact_sum() {
    let ts = tiers();
    let mut r = SplitMix64::new(7);
    for dim in [64usize, 128, 192, 256, 320, 1024] {
        for extra in [0usize, 64, 192] {
            let stride = dim + extra;
            let rows = 37;
            let mut base: Vec<u8> = (0..rows * stride).map(|_| r.next_u64() as u8).collect();
            // Extremes: all 255 / all 0 rows.
            base[..dim].fill(255);
            base[stride..stride + dim].fill(0);
            for q_kind in 0..3 {
                let q: Vec<i8> = (0..dim)
                    .map(|_| match q_kind {
                        0 => r.next_u64() as i8,
                        1 => -128,
                        _ => 127,
                    })
                    .collect();
                for n in 0..=13usize {
                    let ids: Vec<u32> = (0..n)
                        .map(|_| (r.next_u64() % rows as u64) as u32)
                        .collect();
                    let recs = Recs {
                        base: &base,
                        stride,
                        dim,
                    };
                    let mut want = vec![0i32; n];
                    // SAFETY: ids < rows, base holds rows * stride bytes,
                    // dim a multiple of 64, q holds dim bytes.
                    unsafe { kg::scalar::walk(&recs, &q, &ids, &mut want) };
                    for (j, &id) in ids.iter().enumerate() {
                        let e: i64 = (0..dim)
                            .map(|t| base[id as usize * stride + t] as i64 * q[t] as i64)
                            .sum();
                        assert_eq!(want[j] as i64, e, "oracle vs i64 sum");
                    }
                    for (t, ks) in kg::supported_variants() {
                        if !ts.contains(&t) {
                            continue;
                        }
                        let mut got = vec![-1i32; n];
                        // SAFETY: as above; the variant is supported.
                        unsafe { (ks.walk)(&recs, &q, &ids, &mut got) };
                        assert_eq!(got, want, "{} dim {dim} stride {stride} n {n}", ks.name);
                    }
                }
            }
        }
    }
    assert_eq!(WALK_PAD, 64);
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

fn params(storage: Storage) -> GraphParams {
    GraphParams {
        m: 8,
        ef_construction: 40,
        threads: 1,
        storage,
        seed: 42,
    }
}

fn walk_search(
    g: &Graph,
    l: &Layer,
    k: usize,
    sp: &SearchParams,
    tier: lshk::Isa,
) -> (Vec<u32>, Vec<f32>, GraphStats) {
    let mut ids = vec![0u32; l.nq * k];
    let mut sc = vec![0f32; l.nq * k];
    let mut st = GraphStats::default();
    g.search_with(
        tier,
        &l.q,
        l.nq,
        l.dim,
        k,
        sp,
        &mut ids,
        &mut sc,
        Some(&mut st),
    )
    .unwrap();
    (ids, sc, st)
}

fn int8(ef: usize, rerank: usize) -> SearchParams {
    SearchParams {
        ef,
        walk: Walk::Int8,
        rerank,
    }
}

#[test]
fn int8_walk_bit_identical_across_tiers_golden() {
    let l = layer(3000, 24, 30, 11);
    let mut sums = Vec::new();
    for st in [Storage::F32, Storage::Bf16, Storage::I8] {
        let g = Graph::build(&l.w, Some(&l.b), l.rows, l.dim, l.dim, &params(st)).unwrap();
        let mut reference: Option<(Vec<u32>, Vec<u32>, u64)> = None;
        for &t in &tiers() {
            for rerank in [0usize, 12] {
                let (ids, sc, stats) = walk_search(&g, &l, 10, &int8(40, rerank), t);
                if rerank != 0 {
                    continue;
                }
                let bits: Vec<u32> = sc.iter().map(|v| v.to_bits()).collect();
                match &reference {
                    None => reference = Some((ids, bits, stats.distances)),
                    Some((i0, b0, d0)) => {
                        assert_eq!(&ids, i0, "{st:?} tier {t:?}: ids differ");
                        assert_eq!(&bits, b0, "{st:?} tier {t:?}: scores differ");
                        assert_eq!(
                            stats.distances, *d0,
                            "{st:?} tier {t:?}: rows scored differ"
                        );
                    }
                }
            }
        }
        let (ids, bits, _) = reference.unwrap();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for v in ids.iter().chain(&bits) {
            for b in v.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        sums.push(h);
    }
    assert_eq!(
        sums, GOLDEN_WALK,
        "golden int8-walk checksums changed: {sums:#018x?} (update only with a reason)"
    );
}

const GOLDEN_WALK: [u64; 3] = [
    0xbb26_475e_5061_4053,
    0x7b42_ae90_e13d_e78b,
    0xd60f_574a_33d2_0875,
];

#[test]
fn int8_walk_scores_are_the_stored_rows_and_ef_rows_is_exact() {
    for &(rows, dim) in &[(1usize, 3usize), (2, 5), (50, 7), (300, 20), (500, 70)] {
        let l = layer(rows, dim, 12, rows as u64 * 7 + dim as u64);
        let g = Graph::build(&l.w, Some(&l.b), rows, dim, dim, &params(Storage::F32)).unwrap();
        let k = 10;
        let (ei, es, _) = walk_search(
            &g,
            &l,
            k,
            &SearchParams {
                ef: rows,
                walk: Walk::Exact,
                rerank: 0,
            },
            lshk::Isa::Scalar,
        );
        for &t in &tiers() {
            let (ids, sc, st) = walk_search(&g, &l, k, &int8(rows, 0), t);
            // ef >= rows: the int8 pool holds every row, the re-rank scores
            // them all with the stored rows: the exact walk's answer.
            assert_eq!(ids, ei, "rows {rows} dim {dim} tier {t:?}");
            assert_eq!(
                sc.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                es.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            assert!(st.distances >= (l.nq * rows) as u64);
        }
    }
}

#[test]
fn int8_walk_recall_near_exact_walk_and_survives_save_load() {
    let rows = 5000;
    let dim = 32;
    let lay = lshk::data::structured_layer(rows, dim, 50, 5);
    let (q, _) = lshk::data::queries_near_labels(&lay.w, rows, dim, 100, 6);
    let l = Layer {
        w: lay.w,
        b: lay.bias,
        q,
        rows,
        dim,
        nq: 100,
    };
    let g = Graph::build(&l.w, Some(&l.b), rows, dim, dim, &params(Storage::F32)).unwrap();
    let k = 10;
    let (truth, _, _) = walk_search(
        &g,
        &l,
        k,
        &SearchParams {
            ef: rows,
            walk: Walk::Exact,
            rerank: 0,
        },
        lshk::isa::active(),
    );
    let recall = |ids: &[u32]| -> f64 {
        let mut hit = 0;
        for i in 0..l.nq {
            let t = &truth[i * k..(i + 1) * k];
            hit += ids[i * k..(i + 1) * k]
                .iter()
                .filter(|x| t.contains(x))
                .count();
        }
        hit as f64 / (l.nq * k) as f64
    };
    let ex = SearchParams {
        ef: 64,
        walk: Walk::Exact,
        rerank: 0,
    };
    let (e_ids, _, _) = walk_search(&g, &l, k, &ex, lshk::isa::active());
    let (w_ids, w_sc, _) = walk_search(&g, &l, k, &int8(64, 0), lshk::isa::active());
    let (re, rw) = (recall(&e_ids), recall(&w_ids));
    assert!(rw >= re - 0.03, "int8 walk recall {rw} vs exact walk {re}");
    assert!(rw >= 0.9, "int8 walk recall {rw}");
    // rerank = k re-scores only k rows: still k results, sorted.
    let (r_ids, r_sc, _) = walk_search(&g, &l, k, &int8(64, 1), lshk::isa::active());
    for i in 0..l.nq {
        let s = &r_sc[i * k..(i + 1) * k];
        assert!(
            s.windows(2).all(|p| p[0] >= p[1]),
            "re-ranked scores sorted"
        );
        assert!(r_ids[i * k..(i + 1) * k]
            .iter()
            .all(|&x| (x as usize) < rows));
    }
    let path = std::env::temp_dir().join(format!("lshk-graph-walk-{}.lshk", std::process::id()));
    g.save(&path).unwrap();
    let g2 = Graph::load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let (ids2, sc2, _) = walk_search(&g2, &l, k, &int8(64, 0), lshk::isa::active());
    assert_eq!(ids2, w_ids);
    assert_eq!(
        sc2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        w_sc.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn int8_walk_refuses_ef_zero() {
    let l = layer(20, 4, 1, 3);
    let g = Graph::build(&l.w, None, l.rows, l.dim, l.dim, &params(Storage::F32)).unwrap();
    let (mut ids, mut sc) = (vec![7u32; 3], vec![7f32; 3]);
    let e = g
        .search_with(
            lshk::isa::active(),
            &l.q,
            1,
            l.dim,
            3,
            &int8(0, 0),
            &mut ids,
            &mut sc,
            None,
        )
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert_eq!(ids, vec![7; 3]);
}
