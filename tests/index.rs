//! The index against a brute-force composition of its parts (hash -> oracle
//! candidate set -> exact logits of the candidates -> top-k), for every
//! family, storage and transform; recall on a structured layer; threads;
//! save/load round trips; corrupted and inconsistent files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lshk::data::structured_layer;
use lshk::format::{self, Container, SectionOut};
use lshk::index::{Family, Index, IndexParams, QueryStats, Storage, Transform};
use lshk::matmul::{bf16_to_f32, f16_to_f32, Weights};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherParams, Tables};
use lshk::Status;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-index-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

const STORAGES: [Storage; 5] = [
    Storage::BorrowedF32,
    Storage::F32,
    Storage::Bf16,
    Storage::F16,
    Storage::I8,
];
const TRANSFORMS: [Transform; 3] = [Transform::None, Transform::BiasAug, Transform::Mips];

fn params(family: Family, storage: Storage, transform: Transform) -> IndexParams {
    IndexParams {
        family,
        bits: if family == Family::SimHash { 6 } else { 3 },
        tables: 8,
        bin_size: 4,
        seed: 7,
        storage,
        transform,
        threads: 2,
        ..Default::default()
    }
}

/// A layer with W stored at a row stride larger than dim.
struct Layer {
    rows: usize,
    dim: usize,
    stride: usize,
    w: Vec<f32>,
    bias: Vec<f32>,
}

fn layer(rows: usize, dim: usize, seed: u64) -> Layer {
    let stride = dim + 3;
    let mut w = randn(rows * stride, seed);
    // Vary row norms (MIPS matters then).
    for r in 0..rows {
        let s = 0.5 + (r % 7) as f32 * 0.25;
        w[r * stride..r * stride + dim]
            .iter_mut()
            .for_each(|v| *v *= s);
    }
    let bias = randn(rows, seed + 1).iter().map(|v| v * 0.3).collect();
    Layer {
        rows,
        dim,
        stride,
        w,
        bias,
    }
}

fn build(l: &Layer, p: &IndexParams, with_bias: bool) -> Index {
    let b = with_bias.then_some(&l.bias[..]);
    // SAFETY: the layer outlives every index of these tests.
    unsafe { Index::build_borrowed(&l.w, b, l.rows, l.dim, l.stride, p, None).unwrap() }
}

/// The transformed row / query, written independently of the library.
fn t_row(t: Transform, w: &[f32], b: f32, u: f64) -> Vec<f32> {
    match t {
        Transform::None => w.to_vec(),
        Transform::BiasAug => w.iter().copied().chain([b]).collect(),
        Transform::Mips => {
            let v: Vec<f64> = w.iter().map(|&x| x as f64 / u).collect();
            let s: f64 = v.iter().map(|x| x * x).sum();
            v.iter()
                .map(|&x| x as f32)
                .chain([((1.0 - s).max(0.0)).sqrt() as f32])
                .collect()
        }
    }
}
fn t_query(t: Transform, q: &[f32]) -> Vec<f32> {
    match t {
        Transform::None => q.to_vec(),
        Transform::BiasAug => q.iter().copied().chain([1.0]).collect(),
        Transform::Mips => {
            let n = q.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let inv = if n > 0.0 { 1.0 / n } else { 0.0 };
            q.iter()
                .map(|&x| (x as f64 * inv) as f32)
                .chain([0.0])
                .collect()
        }
    }
}

fn hash(idx: &Index, x: &[f32], n: usize, stride: usize) -> Vec<u32> {
    let mut c = vec![0u32; n * idx.num_tables() as usize];
    match idx.family() {
        Family::SimHash => idx.simhash().unwrap().hash(x, n, stride, &mut c).unwrap(),
        Family::Dwta => idx
            .dwta()
            .unwrap()
            .hash_dense(x, n, stride, &mut c)
            .unwrap(),
        Family::Graph | Family::Ivf | Family::Forest => {
            unreachable!(
                "the graph and IVF families have no hash (tests/index_graph.rs, index_ivf.rs)"
            )
        }
    }
    c
}

/// Stored row `r` widened to f64 (what the logits are computed from).
fn stored_row(idx: &Index, r: usize) -> Vec<f64> {
    let (d, s) = (idx.dim(), idx.weight_stride());
    match idx.weights() {
        Weights::F32(w) => w[r * s..r * s + d].iter().map(|&v| v as f64).collect(),
        Weights::Bf16(w) => w[r * s..r * s + d]
            .iter()
            .map(|&v| bf16_to_f32(v) as f64)
            .collect(),
        Weights::F16(w) => w[r * s..r * s + d]
            .iter()
            .map(|&v| f16_to_f32(v) as f64)
            .collect(),
        Weights::I8 { w, scales } => w[r * s..r * s + d]
            .iter()
            .map(|&v| (scales[r] * v as f32) as f64)
            .collect(),
    }
}

/// Checks one index against the brute-force composition; returns the
/// candidate counts.
fn check_against_oracle(idx: &Index, l: &Layer, with_bias: bool, q: &[f32], nq: usize, k: usize) {
    let (dim, lt) = (l.dim, idx.num_tables() as usize);
    let t = idx.transform();
    // 1. The tables equal tables built from independently transformed rows.
    let u = if t == Transform::Mips {
        (0..l.rows)
            .map(|r| {
                l.w[r * l.stride..r * l.stride + dim]
                    .iter()
                    .map(|&x| x as f64 * x as f64)
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(0.0, f64::max) as f32 as f64
    } else {
        1.0
    };
    assert_eq!(idx.mips_u() as f64, u);
    let hd = idx.hash_dim();
    let mut tw = Vec::with_capacity(l.rows * hd);
    for r in 0..l.rows {
        let b = if with_bias { l.bias[r] } else { 0.0 };
        tw.extend(t_row(t, &l.w[r * l.stride..r * l.stride + dim], b, u));
    }
    let codes = hash(idx, &tw, l.rows, hd);
    let ref_tables = Tables::build(&codes, l.rows, lt as u32, idx.range_bits(), 0, 7, 1).unwrap();
    for tt in 0..lt {
        assert_eq!(idx.tables().csr(tt), ref_tables.csr(tt), "table {tt}");
    }
    // 2. Queries.
    let mut ids = vec![0u32; nq * k];
    let mut sc = vec![0f32; nq * k];
    let mut st = QueryStats::default();
    idx.query(
        q,
        nq,
        dim,
        k as u32,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        Some(&mut st),
    )
    .unwrap();
    assert_eq!(st.queries, nq as u64);
    let mut total = 0u64;
    for i in 0..nq {
        let qi = &q[i * dim..(i + 1) * dim];
        let tq = t_query(t, qi);
        let qc = hash(idx, &tq, 1, hd);
        let mut cands = BTreeSet::new();
        for (tt, &c) in qc.iter().enumerate() {
            cands.extend(
                idx.tables()
                    .bucket(tt, fold_code(c, idx.range_bits()))
                    .iter()
                    .copied(),
            );
        }
        total += cands.len() as u64;
        // Exact logits of the candidates, and each one's error bound.
        let gamma = |n: usize| {
            let u = f64::powi(2.0, -24);
            n as f64 * u / (1.0 - n as f64 * u)
        };
        let mut exact: Vec<(f64, u32, f64)> = cands
            .iter()
            .map(|&id| {
                let w = stored_row(idx, id as usize);
                let b = if with_bias {
                    l.bias[id as usize] as f64
                } else {
                    0.0
                };
                let dot: f64 = w.iter().zip(qi).map(|(a, &b)| a * b as f64).sum();
                let s: f64 = w.iter().zip(qi).map(|(a, &b)| (a * b as f64).abs()).sum();
                (dot + b, id, gamma(dim + 2) * (s + b.abs()) + 1e-30)
            })
            .collect();
        exact.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        let got_ids = &ids[i * k..(i + 1) * k];
        let got_sc = &sc[i * k..(i + 1) * k];
        let real = exact.len().min(k);
        for j in 0..k {
            if j >= real {
                assert_eq!(got_ids[j], u32::MAX, "query {i} pad {j}");
                assert_eq!(got_sc[j], f32::NEG_INFINITY);
                continue;
            }
            let id = got_ids[j];
            let e = exact
                .iter()
                .find(|e| e.1 == id)
                .unwrap_or_else(|| panic!("query {i}: id {id} at {j} is not a candidate"));
            assert!(
                (got_sc[j] as f64 - e.0).abs() <= e.2,
                "query {i} id {id}: score {} vs exact {} (bound {})",
                got_sc[j],
                e.0,
                e.2
            );
            // Rank: the j-th returned score equals the j-th exact best
            // within both rounding bounds.
            let best = exact[j];
            assert!(
                (e.0 - best.0).abs() <= e.2 + best.2 + 2.0 * f64::from(f32::EPSILON) * best.0.abs(),
                "query {i} rank {j}: got id {id} ({}), exact {} ({})",
                e.0,
                best.1,
                best.0
            );
            if j > 0 {
                assert!(got_sc[j] <= got_sc[j - 1]);
            }
        }
        // With k >= every candidate, the ids are exactly the candidate set.
        if k >= l.rows {
            let got: BTreeSet<u32> = got_ids.iter().copied().filter(|&v| v != u32::MAX).collect();
            assert_eq!(got, cands, "query {i}");
        }
    }
    assert_eq!(st.candidates_total, total);
}

#[test]
fn matches_brute_force_composition() {
    let l = layer(600, 19, 11);
    let nq = 70; // more than one query block
    let q = randn(nq * l.dim, 99);
    for family in [Family::SimHash, Family::Dwta] {
        for storage in STORAGES {
            for transform in TRANSFORMS {
                for with_bias in [false, true] {
                    let idx = build(&l, &params(family, storage, transform), with_bias);
                    check_against_oracle(&idx, &l, with_bias, &q, nq, 10);
                }
            }
        }
        // k >= rows: the output is the whole candidate set.
        let idx = build(&l, &params(family, Storage::F32, Transform::None), true);
        check_against_oracle(&idx, &l, true, &q[..5 * l.dim], 5, l.rows + 1);
    }
}

#[test]
fn caller_given_planes_and_map() {
    let l = layer(300, 8, 5);
    let q = randn(10 * l.dim, 6);
    // Planes over dim' = dim + 1 (BiasAug).
    let mut p = params(Family::SimHash, Storage::F32, Transform::BiasAug);
    p.planes = Some(randn(6 * 8 * 9, 1));
    let idx = build(&l, &p, true);
    assert_eq!(
        idx.simhash().unwrap().planes(),
        &p.planes.clone().unwrap()[..]
    );
    check_against_oracle(&idx, &l, true, &q, 10, 5);
    let mut p = params(Family::Dwta, Storage::F32, Transform::None);
    p.dwta_map = Some((0..3 * 8 * 4).map(|i| (i * 5 % 8) as u32).collect());
    let idx = build(&l, &p, false);
    check_against_oracle(&idx, &l, false, &q, 10, 5);
    // Wrong lengths and mismatched families.
    p.dwta_map = Some(vec![0; 5]);
    let e = Index::build(&l.w, None, l.rows, l.dim, l.stride, &p, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    let mut p = params(Family::SimHash, Storage::F32, Transform::None);
    p.planes = Some(vec![0.0; 7]);
    let e = Index::build(&l.w, None, l.rows, l.dim, l.stride, &p, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
    p.planes = None;
    p.dwta_map = Some(vec![0; 96]);
    let e = Index::build(&l.w, None, l.rows, l.dim, l.stride, &p, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
}

#[test]
fn build_validation() {
    let l = layer(50, 4, 1);
    let p = IndexParams {
        bits: 4,
        tables: 3,
        ..Default::default()
    };
    let b = |w: &[f32], bias: Option<&[f32]>, rows, dim, stride, p: &IndexParams| {
        Index::build(w, bias, rows, dim, stride, p, None)
            .err()
            .unwrap()
    };
    assert_eq!(b(&l.w, None, 0, 4, 7, &p).status, Status::InvalidArgument);
    assert_eq!(b(&l.w, None, 50, 0, 7, &p).status, Status::InvalidArgument);
    assert_eq!(b(&l.w, None, 50, 4, 3, &p).status, Status::InvalidArgument);
    assert_eq!(
        b(&l.w[..100], None, 50, 4, 7, &p).status,
        Status::BufferTooSmall
    );
    assert_eq!(
        b(&l.w, Some(&l.bias[..10]), 50, 4, 7, &p).status,
        Status::BufferTooSmall
    );
    let mut w = l.w.clone();
    w[7 * 7 + 2] = f32::NAN;
    let e = b(&w, None, 50, 4, 7, &p);
    assert_eq!(e.status, Status::NonFinite);
    assert!(e.message.contains("row 7"), "{}", e.message);
    let mut bias = l.bias.clone();
    bias[9] = f32::INFINITY;
    let e = b(&l.w, Some(&bias), 50, 4, 7, &p);
    assert_eq!(e.status, Status::NonFinite);
    assert!(e.message.contains("row 9"), "{}", e.message);
    let bp = IndexParams {
        storage: Storage::BorrowedF32,
        ..p.clone()
    };
    assert_eq!(b(&l.w, None, 50, 4, 7, &bp).status, Status::InvalidArgument);
    let mut big = l.w.clone();
    big[0] = 70000.0;
    let fp = IndexParams {
        storage: Storage::F16,
        ..p.clone()
    };
    assert_eq!(b(&big, None, 50, 4, 7, &fp).status, Status::InvalidArgument);
    let kp = IndexParams {
        bits: 0,
        ..p.clone()
    };
    assert_eq!(b(&l.w, None, 50, 4, 7, &kp).status, Status::InvalidArgument);
    let rp = IndexParams {
        range_bits: 25,
        ..p.clone()
    };
    assert_eq!(b(&l.w, None, 50, 4, 7, &rp).status, Status::InvalidArgument);
}

#[test]
fn query_validation_and_edge_cases() {
    let l = layer(200, 6, 3);
    let idx = build(
        &l,
        &params(Family::SimHash, Storage::F32, Transform::None),
        true,
    );
    let q = randn(4 * 6, 1);
    let g = GatherParams::default();
    let mut ids = vec![7u32; 40];
    let mut sc = vec![7f32; 40];
    // k = 0 and nq = 0 write nothing.
    let mut st = QueryStats::default();
    idx.query(&q, 4, 6, 0, &g, &mut ids, &mut sc, Some(&mut st))
        .unwrap();
    assert!(ids.iter().all(|&v| v == 7));
    assert_eq!(st.queries, 4);
    idx.query(&[], 0, 6, 10, &g, &mut [], &mut [], Some(&mut st))
        .unwrap();
    assert_eq!(st, QueryStats::default());
    // Short outputs, bad stride, short q, NaN q.
    let e = idx
        .query(&q, 4, 6, 10, &g, &mut ids[..39], &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::BufferTooSmall);
    let e = idx
        .query(&q, 4, 6, 10, &g, &mut ids, &mut sc[..39], None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::BufferTooSmall);
    let e = idx
        .query(&q, 4, 5, 10, &g, &mut ids, &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = idx
        .query(&q[..23], 4, 6, 10, &g, &mut ids, &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::BufferTooSmall);
    let mut qn = q.clone();
    qn[13] = f32::NAN;
    let e = idx
        .query(&qn, 4, 6, 10, &g, &mut ids, &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::NonFinite);
    assert!(ids.iter().all(|&v| v == 7) && sc.iter().all(|&v| v == 7.0));
    // Probes: K must match; DWTA refuses probes.
    let gp = GatherParams {
        probes: 2,
        bits_per_table: 5,
        ..g
    };
    let e = idx
        .query(&q, 4, 6, 10, &gp, &mut ids, &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
    let gp = GatherParams {
        probes: 2,
        bits_per_table: 0,
        ..g
    };
    let mut st2 = QueryStats::default();
    idx.query(&q, 4, 6, 10, &gp, &mut ids, &mut sc, Some(&mut st2))
        .unwrap();
    idx.query(&q, 4, 6, 10, &g, &mut ids, &mut sc, Some(&mut st))
        .unwrap();
    assert!(st2.candidates_total >= st.candidates_total);
    let dw = build(
        &l,
        &params(Family::Dwta, Storage::F32, Transform::None),
        true,
    );
    let e = dw
        .query(&q, 4, 6, 10, &gp, &mut ids, &mut sc, None)
        .err()
        .unwrap();
    assert_eq!(e.status, Status::InvalidArgument);
}

#[test]
fn recall_on_structured_layer() {
    let (rows, dim) = (20_000, 64);
    let lay = structured_layer(rows, dim, 200, 3);
    let (q, _labels) = lshk::data::queries_near_labels(&lay.w, rows, dim, 100, 4);
    let p = IndexParams {
        bits: 8,
        tables: 40,
        transform: Transform::BiasAug,
        ..Default::default()
    };
    let idx = Index::build(&lay.w, Some(&lay.bias), rows, dim, dim, &p, None).unwrap();
    let k = 10;
    let mut ids = vec![0u32; 100 * k];
    let mut sc = vec![0f32; 100 * k];
    let mut st = QueryStats::default();
    idx.query(
        &q,
        100,
        dim,
        k as u32,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        Some(&mut st),
    )
    .unwrap();
    let mut hit = 0;
    for i in 0..100 {
        let qi = &q[i * dim..(i + 1) * dim];
        let mut all: Vec<(f32, u32)> = (0..rows)
            .map(|r| {
                let d: f32 = lay.w[r * dim..(r + 1) * dim]
                    .iter()
                    .zip(qi)
                    .map(|(a, b)| a * b)
                    .sum();
                (d + lay.bias[r], r as u32)
            })
            .collect();
        all.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        let top: BTreeSet<u32> = all[..k].iter().map(|v| v.1).collect();
        hit += ids[i * k..(i + 1) * k]
            .iter()
            .filter(|id| top.contains(id))
            .count();
    }
    let recall = hit as f64 / (100 * k) as f64;
    println!(
        "top-10 recall {recall:.3} with K=8 L=40 BiasAug, {:.0} candidates per query of {rows}",
        st.candidates_total as f64 / 100.0
    );
    // Measured 0.958 (3,152 candidates per query); the floor leaves room
    // for platform rounding of near-zero projections.
    assert!(recall >= 0.9, "recall {recall}");
}

#[test]
fn threads_equal_single_thread() {
    let l = layer(3000, 16, 21);
    let idx = build(
        &l,
        &params(Family::SimHash, Storage::Bf16, Transform::Mips),
        true,
    );
    let nq = 200;
    let q = randn(nq * 16, 8);
    let k = 5;
    let g = GatherParams::default();
    let mut want_ids = vec![0u32; nq * k];
    let mut want_sc = vec![0f32; nq * k];
    for i in 0..nq {
        idx.query(
            &q[i * 16..(i + 1) * 16],
            1,
            16,
            k as u32,
            &g,
            &mut want_ids[i * k..(i + 1) * k],
            &mut want_sc[i * k..(i + 1) * k],
            None,
        )
        .unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..4 {
            let (idx, q, want_ids, want_sc) = (&idx, &q, &want_ids, &want_sc);
            s.spawn(move || {
                let mut ids = vec![0u32; nq * k];
                let mut sc = vec![0f32; nq * k];
                // Mixed batch sizes per thread.
                let bs = [1, 7, 64, 200][t];
                let mut i = 0;
                while i < nq {
                    let b = bs.min(nq - i);
                    idx.query(
                        &q[i * 16..(i + b) * 16],
                        b,
                        16,
                        k as u32,
                        &g,
                        &mut ids[i * k..(i + b) * k],
                        &mut sc[i * k..(i + b) * k],
                        None,
                    )
                    .unwrap();
                    i += b;
                }
                assert_eq!(&ids, want_ids);
                assert_eq!(
                    sc.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want_sc.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            });
        }
    });
}

#[test]
fn progress_is_reported() {
    let l = layer(70_000, 2, 1);
    for threads in [1, 2] {
        let seen = std::sync::Mutex::new(Vec::new());
        let cb = |d: u64, t: u64| seen.lock().unwrap().push((d, t));
        let p = IndexParams {
            bits: 4,
            tables: 2,
            threads,
            ..Default::default()
        };
        Index::build(&l.w, None, l.rows, l.dim, l.stride, &p, Some(&cb)).unwrap();
        let v = seen.into_inner().unwrap();
        if threads == 1 {
            // One report per 16,384-row unit before the last, then the end.
            assert_eq!(
                v,
                vec![
                    (16_384, 70_000),
                    (32_768, 70_000),
                    (49_152, 70_000),
                    (65_536, 70_000),
                    (70_000, 70_000)
                ]
            );
        }
        // With threads the reports depend on timing; the order and the
        // final call do not.
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0), "{v:?}");
        assert_eq!(*v.last().unwrap(), (70_000, 70_000));
        assert!(v[..v.len() - 1].iter().all(|&(d, t)| d < t && t == 70_000));
    }
}

fn query_all(idx: &Index, q: &[f32], nq: usize, k: usize) -> (Vec<u32>, Vec<u32>) {
    let mut ids = vec![0u32; nq * k];
    let mut sc = vec![0f32; nq * k];
    idx.query(
        q,
        nq,
        idx.dim(),
        k as u32,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        None,
    )
    .unwrap();
    (ids, sc.iter().map(|v| v.to_bits()).collect())
}

#[test]
fn save_load_round_trip() {
    let l = layer(500, 12, 4);
    let q = randn(30 * 12, 5);
    for family in [Family::SimHash, Family::Dwta] {
        for storage in STORAGES {
            for transform in TRANSFORMS {
                let mut p = params(family, storage, transform);
                p.bucket_cap = if storage == Storage::I8 { 20 } else { 0 };
                if family == Family::SimHash && transform == Transform::Mips {
                    p.sparsity = 3;
                }
                let idx = build(&l, &p, storage != Storage::F16);
                let want = query_all(&idx, &q, 30, 7);
                let path = tmp(&format!("rt-{family:?}-{storage:?}-{transform:?}.lshk"));
                idx.save(&path).unwrap();
                let back = if storage == Storage::BorrowedF32 {
                    let e = Index::load(&path).err().unwrap();
                    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
                    assert!(e.message.contains("borrowed"), "{}", e.message);
                    // SAFETY: l outlives the index.
                    unsafe { Index::load_borrowed(&path, &l.w).unwrap() }
                } else {
                    // SAFETY: as above.
                    let e = unsafe { Index::load_borrowed(&path, &l.w) }.err().unwrap();
                    assert_eq!(e.status, Status::InvalidArgument, "{}", e.message);
                    Index::load(&path).unwrap()
                };
                assert!(!idx.tables().is_viewed());
                // Loading maps the tables in place: nothing copied.
                assert!(back.tables().is_viewed(), "{family:?} {storage:?}");
                drop(idx);
                // The mapping outlives the path.
                std::fs::remove_file(&path).unwrap();
                assert_eq!(
                    query_all(&back, &q, 30, 7),
                    want,
                    "{family:?} {storage:?} {transform:?}"
                );
                assert_eq!(back.range_bits(), p_range(&back));
            }
        }
    }
}

fn p_range(i: &Index) -> u32 {
    i.tables().range_bits()
}

/// Rewrites a valid file with `edit` applied to its sections (the format
/// layer recomputes every CRC), so the index's semantic checks are reached.
fn rewrite(src: &Path, dst: &Path, edit: impl Fn(&str, &mut Vec<u8>)) {
    let c = Container::open(src, format::KIND_INDEX).unwrap();
    let mut secs: Vec<(String, Vec<u8>)> = c
        .tags()
        .into_iter()
        .map(|t| {
            let b = c.section(&t).unwrap().to_vec();
            (t, b)
        })
        .collect();
    for (t, b) in secs.iter_mut() {
        edit(t, b);
    }
    let outs: Vec<SectionOut> = secs
        .iter()
        .map(|(t, b)| SectionOut::new(t, vec![&b[..]]))
        .collect();
    format::write_file(dst, format::KIND_INDEX, &outs).unwrap();
}

fn load_err(path: &Path) -> lshk::Error {
    Index::load(path).err().expect("load must fail")
}

#[test]
fn corrupted_and_inconsistent_files() {
    let l = layer(300, 10, 9);
    let idx = build(
        &l,
        &params(Family::SimHash, Storage::F32, Transform::None),
        true,
    );
    let good = tmp("good.lshk");
    idx.save(&good).unwrap();
    let bad = tmp("bad.lshk");
    let expect = |edit: &dyn Fn(&str, &mut Vec<u8>), needle: &str| {
        rewrite(&good, &bad, |t, b| edit(t, b));
        let e = load_err(&bad);
        assert_eq!(e.status, Status::BadFileFormat, "{}", e.message);
        assert!(
            e.message.contains(needle),
            "`{}` lacks `{needle}`",
            e.message
        );
    };
    let set32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    // Params: newer version, unknown enums, a byte flip in K, rows.
    expect(
        &|t, b| {
            if t == "PARAMS" {
                set32(b, 0, 2)
            }
        },
        "newer",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                set32(b, 4, 9)
            }
        },
        "unknown family",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                set32(b, 40, 5)
            }
        },
        "unknown storage",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                set32(b, 44, 3)
            }
        },
        "unknown transform",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                b[8] ^= 0x01
            }
        },
        "PLANES",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                b[48] ^= 0x01
            }
        },
        "",
    );
    expect(
        &|t, b| {
            if t == "PARAMS" {
                b.truncate(40)
            }
        },
        "PARAMS",
    );
    // Tables: an id >= rows, decreasing offsets, id count mismatch.
    expect(
        &|t, b| {
            if t == "TIDS" {
                set32(b, 8, 300)
            }
        },
        "rows",
    );
    expect(
        &|t, b| {
            if t == "TOFFS" {
                let at = 4 * 5;
                let v = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                set32(b, at, v + 1000);
            }
        },
        "decrease",
    );
    expect(
        &|t, b| {
            if t == "TIDS" {
                b.truncate(b.len() - 4)
            }
        },
        "TIDLEN",
    );
    // An id in two buckets of one table (or out of order).
    expect(
        &|t, b| {
            if t == "TIDS" {
                let last = b[b.len() / 2 - 4..b.len() / 2].to_vec();
                b[0..4].copy_from_slice(&last);
            }
        },
        "table",
    );
    // Weights and bias.
    expect(
        &|t, b| {
            if t == "WEIGHTS" {
                b.truncate(b.len() - 4)
            }
        },
        "WEIGHTS",
    );
    expect(
        &|t, b| {
            if t == "WEIGHTS" {
                b[0..4].copy_from_slice(&f32::NAN.to_le_bytes())
            }
        },
        "WEIGHTS row 0",
    );
    expect(
        &|t, b| {
            if t == "BIAS" {
                b.truncate(b.len() - 4)
            }
        },
        "BIAS",
    );
    // A flipped byte without fixing the CRC: the format layer's check.
    let mut raw = std::fs::read(&good).unwrap();
    let n = raw.len();
    raw[n - 3] ^= 0x10;
    std::fs::write(&bad, &raw).unwrap();
    assert_eq!(load_err(&bad).status, Status::BadFileFormat);
    std::fs::write(&bad, &raw[..n / 2]).unwrap();
    assert_eq!(load_err(&bad).status, Status::BadFileFormat);
    // A missing file is an I/O error.
    assert_eq!(load_err(&tmp("missing.lshk")).status, Status::IoError);
    // Borrowed file: the weights must be given, with the right size.
    let bidx = build(
        &l,
        &params(Family::Dwta, Storage::BorrowedF32, Transform::None),
        false,
    );
    bidx.save(&good).unwrap();
    // SAFETY: l outlives the (never built) index.
    let e = unsafe { Index::load_borrowed(&good, &l.w[..100]) }
        .err()
        .unwrap();
    assert_eq!(e.status, Status::BufferTooSmall);
    expect(
        &|t, b| {
            if t == "PARAMS" {
                b[84] |= 2
            }
        },
        "weights-stored",
    );
    std::fs::remove_file(&good).ok();
    std::fs::remove_file(&bad).ok();
}

#[test]
fn default_range_bits_rule() {
    use lshk::index::default_range_bits;
    assert_eq!(default_range_bits(Family::SimHash, 12, 8, 670_091), 12);
    assert_eq!(default_range_bits(Family::SimHash, 16, 8, 1000), 11);
    assert_eq!(default_range_bits(Family::SimHash, 24, 8, 10_000_000), 20);
    assert_eq!(default_range_bits(Family::Dwta, 6, 8, 670_091), 18);
    assert_eq!(default_range_bits(Family::SimHash, 4, 8, 1), 2);
}

/// Not a timed test: a W1-shaped measurement for the notes, run by hand with
/// `cargo test --release --test index w1_figures -- --ignored --nocapture`.
#[test]
#[ignore]
fn w1_figures() {
    use std::time::Instant;
    let (rows, dim) = (670_091, 128);
    let lay = structured_layer(rows, dim, 4000, 1);
    let nq = 256;
    let (q, labels) = lshk::data::queries_near_labels(&lay.w, rows, dim, nq, 2);
    let shapes: Vec<(u32, u32)> = match std::env::var("LSHK_W1_SHAPES") {
        Ok(v) if v == "12" => vec![(12, 50)],
        _ => vec![(12, 50), (14, 50), (16, 50)],
    };
    for (bits, tables) in shapes {
        let p = IndexParams {
            bits,
            tables,
            ..Default::default()
        };
        let t = Instant::now();
        let idx = Index::build(&lay.w, Some(&lay.bias), rows, dim, dim, &p, None).unwrap();
        let build = t.elapsed().as_secs_f64();
        let k = 10;
        let mut ids = vec![0u32; nq * k];
        let mut sc = vec![0f32; nq * k];
        let mut st = QueryStats::default();
        let g = GatherParams::default();
        idx.query(&q, nq, dim, k as u32, &g, &mut ids, &mut sc, Some(&mut st))
            .unwrap();
        let t = Instant::now();
        for i in 0..nq {
            idx.query(
                &q[i * dim..],
                1,
                dim,
                k as u32,
                &g,
                &mut ids[i * k..],
                &mut sc[i * k..],
                None,
            )
            .unwrap();
        }
        let b1 = t.elapsed().as_secs_f64() / nq as f64;
        let t = Instant::now();
        for c in 0..nq / 64 {
            idx.query(
                &q[c * 64 * dim..],
                64,
                dim,
                k as u32,
                &g,
                &mut ids[c * 64 * k..],
                &mut sc[c * 64 * k..],
                None,
            )
            .unwrap();
        }
        let b64 = t.elapsed().as_secs_f64() / nq as f64;
        // Exact top-10 of the first 64 queries.
        let mut hit = 0;
        let mut lab = 0;
        for i in 0..64 {
            let qi = &q[i * dim..(i + 1) * dim];
            let mut all: Vec<(f32, u32)> = (0..rows)
                .map(|r| {
                    let d: f32 = lay.w[r * dim..(r + 1) * dim]
                        .iter()
                        .zip(qi)
                        .map(|(a, b)| a * b)
                        .sum();
                    (d + lay.bias[r], r as u32)
                })
                .collect();
            all.select_nth_unstable_by(k, |a, b| b.0.partial_cmp(&a.0).unwrap());
            let top: BTreeSet<u32> = all[..k].iter().map(|v| v.1).collect();
            hit += ids[i * k..(i + 1) * k]
                .iter()
                .filter(|id| top.contains(id))
                .count();
            lab += ids[i * k..(i + 1) * k].contains(&labels[i]) as usize;
        }
        println!(
            "W1 K={bits} L={tables}: build {build:.2} s, memory {:.0} MB, {:.0} candidates/query, \
             {:.3} ms/query at B=1, {:.3} ms/query at B=64, top-10 recall {:.3}, label in top-10 {:.3}",
            idx.memory_bytes() as f64 / 1e6,
            st.candidates_total as f64 / nq as f64,
            b1 * 1e3,
            b64 * 1e3,
            hit as f64 / (64 * k) as f64,
            lab as f64 / 64.0
        );
        // Stage breakdown at B = 1 with the public kernels (same work).
        {
            let sh = idx.simhash().unwrap();
            let l = tables as usize;
            let mut codes = vec![0u32; l];
            let mut gr = lshk::tables::GatherResult::default();
            let mut scores = Vec::new();
            let (mut th, mut tg, mut tm, mut tk) = (0f64, 0f64, 0f64, 0f64);
            let wm = idx.weight_matrix();
            for i in 0..nq {
                let qi = &q[i * dim..(i + 1) * dim];
                let t = Instant::now();
                sh.hash(qi, 1, dim, &mut codes).unwrap();
                th += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let input = lshk::tables::GatherInput {
                    codes: &codes,
                    q: 1,
                    ..Default::default()
                };
                idx.tables().gather(&g, &input, false, &mut gr).unwrap();
                tg += t.elapsed().as_secs_f64();
                let t = Instant::now();
                scores.resize(gr.ids.len(), 0.0);
                wm.matmul(qi, 1, dim, &gr.ids, &gr.offsets, &mut scores)
                    .unwrap();
                tm += t.elapsed().as_secs_f64();
                let t = Instant::now();
                lshk::matmul::topk(
                    &scores,
                    Some(&gr.ids),
                    &gr.offsets,
                    k,
                    &mut ids[..k],
                    &mut sc[..k],
                )
                .unwrap();
                tk += t.elapsed().as_secs_f64();
            }
            let us = |v: f64| v / nq as f64 * 1e6;
            println!(
                "  B=1 stages: hash {:.1} us, gather {:.1} us, matmul {:.1} us, top-k {:.1} us",
                us(th),
                us(tg),
                us(tm),
                us(tk)
            );
        }
        let path = tmp("w1.lshk");
        let t = Instant::now();
        idx.save(&path).unwrap();
        let save = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let back = Index::load(&path).unwrap();
        let load = t.elapsed().as_secs_f64();
        println!("  save {save:.2} s, load {load:.2} s (weights mapped)");
        drop(back);
        std::fs::remove_file(&path).ok();
    }
}

#[test]
fn tables_from_parts_and_freeze() {
    let mut r = SplitMix64::new(3);
    let (n, l) = (500usize, 3u32);
    let codes: Vec<u32> = (0..n * l as usize).map(|_| r.next_u64() as u32).collect();
    for cap in [0u32, 4] {
        let t = Tables::build(&codes, n, l, 6, cap, 9, 1).unwrap();
        let parts = |t: &Tables| -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
            (0..l as usize)
                .map(|i| (t.csr(i).0.to_vec(), t.csr(i).1.to_vec()))
                .unzip()
        };
        let (o, i) = parts(&t);
        let full = Tables::from_parts(
            n,
            6,
            cap,
            9,
            1,
            o.clone(),
            i.clone(),
            t.row_buckets().to_vec(),
        )
        .unwrap();
        let frozen = Tables::from_parts(n, 6, cap, 9, 1, o, i, Vec::new()).unwrap();
        assert!(!full.is_frozen() && frozen.is_frozen());
        for tt in 0..l as usize {
            assert_eq!(full.csr(tt), t.csr(tt));
            assert_eq!(frozen.csr(tt), t.csr(tt));
        }
        let mut f = frozen;
        let e = f.update(&[0], &codes[..l as usize]).err().unwrap();
        assert_eq!(e.status, Status::InvalidArgument);
        let mut t2 = t.clone();
        t2.freeze();
        assert!(t2.memory_bytes() < t.memory_bytes());
        assert!(t2.update(&[0], &codes[..l as usize]).is_err());
    }
}
