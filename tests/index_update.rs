//! The mutable index (issue 14, item 2): `update_rows` + `rehash_*` against
//! a fresh build over the updated W, bit for bit (tables and query results),
//! for every tier, family, transform, bucket_cap and several thread counts;
//! loaded (mapped) indexes; quantised storages; the rehash schedule; bad
//! input (nothing changes on error); queries from threads between updates.

mod common;

use std::sync::Mutex;

use lshk::index::{
    Family, Index, IndexParams, RehashClock, RehashSchedule, Storage, Transform, LNS_REHASH_LAMBDA,
    LNS_REHASH_PERIOD,
};
use lshk::matmul::Weights;
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;
use lshk::{Isa, Status};

/// Tests that change the process-wide tier cap run one at a time.
static TIER_LOCK: Mutex<()> = Mutex::new(());

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

fn params(family: Family, storage: Storage, transform: Transform, cap: u32) -> IndexParams {
    IndexParams {
        family,
        bits: if family == Family::SimHash { 6 } else { 3 },
        tables: 8,
        bin_size: 4,
        seed: 7,
        storage,
        transform,
        bucket_cap: cap,
        threads: 2,
        ..Default::default()
    }
}

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
    // SAFETY: every layer outlives its indexes in these tests, and a
    // borrowed W only changes while no call uses the index.
    unsafe { Index::build_borrowed(&l.w, b, l.rows, l.dim, l.stride, p, None).unwrap() }
}

/// `count` distinct random rows, the new values of those rows (dim + 3
/// stride) scaled by up to 2x (norms change: MIPS's U moves), new biases.
fn changes(l: &Layer, count: usize, seed: u64) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let mut r = SplitMix64::new(seed);
    let mut all: Vec<u32> = (0..l.rows as u32).collect();
    r.shuffle(&mut all);
    let mut ids = all[..count].to_vec();
    // one repeated id: the last values win
    if count > 1 {
        ids.push(ids[0]);
    }
    let mut vals = randn(ids.len() * l.stride, seed + 5);
    for (j, v) in vals.chunks_mut(l.stride).enumerate() {
        let s = 0.25 + (j % 8) as f32 * 0.25;
        v.iter_mut().for_each(|x| *x *= s);
    }
    let bias = randn(ids.len(), seed + 6);
    (ids, vals, bias)
}

/// `l` with the changes applied (a repeated id takes its last values).
fn applied(l: &Layer, ids: &[u32], vals: &[f32], bias: &[f32]) -> Layer {
    let mut w = l.w.clone();
    let mut b = l.bias.clone();
    for (j, &id) in ids.iter().enumerate() {
        let r = id as usize;
        w[r * l.stride..r * l.stride + l.dim]
            .copy_from_slice(&vals[j * l.stride..j * l.stride + l.dim]);
        b[r] = bias[j];
    }
    Layer {
        rows: l.rows,
        dim: l.dim,
        stride: l.stride,
        w,
        bias: b,
    }
}

fn tables_of(idx: &Index) -> Vec<(Vec<u32>, Vec<u32>)> {
    let t = idx.tables();
    (0..t.tables())
        .map(|i| {
            let (o, d) = t.csr(i);
            (o.to_vec(), d.to_vec())
        })
        .collect()
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

fn assert_same(a: &Index, b: &Index, q: &[f32], nq: usize, what: &str) {
    assert!(tables_of(a) == tables_of(b), "{what}: tables differ");
    assert_eq!(a.mips_u().to_bits(), b.mips_u().to_bits(), "{what}: MIPS U");
    assert_eq!(a.bias(), b.bias(), "{what}: bias");
    assert!(
        query_all(a, q, nq, 10) == query_all(b, q, nq, 10),
        "{what}: query results differ"
    );
}

#[test]
fn update_rehash_equals_fresh_build_every_tier() {
    let _g = TIER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let tiers = common::tiers::for_this_test();
    let l0 = layer(700, 19, 3);
    let nq = 17;
    let q = randn(nq * l0.dim, 99);
    for &tier in &tiers {
        lshk::isa::set_max(tier);
        for family in [Family::SimHash, Family::Dwta] {
            for transform in [Transform::None, Transform::BiasAug, Transform::Mips] {
                for cap in [0u32, 5] {
                    for (threads, count) in [(1u32, 7usize), (2, 70), (3, 700)] {
                        for storage in [Storage::F32, Storage::BorrowedF32] {
                            let what = format!(
                                "{tier:?} {family:?} {transform:?} cap {cap} threads {threads} \
                                 {count} rows {storage:?}"
                            );
                            let mut p = params(family, storage, transform, cap);
                            p.threads = threads;
                            let (ids, vals, nb) = changes(&l0, count, count as u64);
                            let l1 = applied(&l0, &ids, &vals, &nb);
                            let mut lw = Layer {
                                w: l0.w.clone(),
                                bias: l0.bias.clone(),
                                ..l0
                            };
                            let mut idx = build(&lw, &p, true);
                            if storage == Storage::BorrowedF32 {
                                lw.w.copy_from_slice(&l1.w);
                                idx.update_rows(&ids, None, Some(&nb)).unwrap();
                            } else {
                                idx.update_rows(&ids, Some((&vals, l0.stride)), Some(&nb))
                                    .unwrap();
                            }
                            assert_eq!(idx.dirty_rows(), count, "{what}");
                            let n = idx.rehash_dirty().unwrap();
                            assert!(n >= count, "{what}");
                            assert_eq!(idx.dirty_rows(), 0, "{what}");
                            let fresh = build(&l1, &p, true);
                            assert_same(&idx, &fresh, &q, nq, &what);
                            // a second round on the now-unfrozen tables
                            let (ids2, vals2, nb2) = changes(&l1, 5, 1000 + count as u64);
                            let l2 = applied(&l1, &ids2, &vals2, &nb2);
                            if storage == Storage::BorrowedF32 {
                                lw.w.copy_from_slice(&l2.w);
                                idx.update_rows(&ids2, None, Some(&nb2)).unwrap();
                                idx.rehash_rows(&ids2).unwrap();
                            } else {
                                idx.update_rows(&ids2, Some((&vals2, l0.stride)), Some(&nb2))
                                    .unwrap();
                                idx.rehash_rows(&ids2).unwrap();
                            }
                            assert_eq!(idx.dirty_rows(), 0, "{what}");
                            assert_same(&idx, &build(&l2, &p, true), &q, nq, &format!("{what} r2"));
                            drop(idx);
                        }
                    }
                }
            }
        }
    }
    lshk::isa::set_max(Isa::Avx512);
}

#[test]
fn loaded_index_updates_and_rehashes() {
    let _g = TIER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let l0 = layer(500, 16, 5);
    let q = randn(9 * l0.dim, 1);
    let dir = std::env::temp_dir().join(format!("lshk-index-update-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for cap in [0u32, 4] {
        let p = params(Family::SimHash, Storage::F32, Transform::BiasAug, cap);
        let path = dir.join(format!("u{cap}.lshk"));
        build(&l0, &p, true).save(&path).unwrap();
        let mut idx = Index::load(&path).unwrap();
        assert!(idx.tables().is_viewed());
        let (ids, vals, nb) = changes(&l0, 40, 8);
        idx.update_rows(&ids, Some((&vals, l0.stride)), Some(&nb))
            .unwrap();
        let n = idx.rehash_dirty().unwrap();
        // capped frozen tables need every row's bucket: one full rehash
        assert_eq!(n, if cap == 0 { 40 } else { 500 });
        let l1 = applied(&l0, &ids, &vals, &nb);
        assert_same(
            &idx,
            &build(&l1, &p, true),
            &q,
            9,
            &format!("loaded cap {cap}"),
        );
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn quantised_storages_store_like_a_build_and_hash_the_stored_rows() {
    let _g = TIER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let l0 = layer(400, 21, 6);
    for storage in [Storage::Bf16, Storage::F16, Storage::I8] {
        let p = params(Family::SimHash, storage, Transform::None, 0);
        let mut idx = build(&l0, &p, false);
        let (ids, vals, _) = changes(&l0, 30, 2);
        idx.update_rows(&ids, Some((&vals, l0.stride)), None)
            .unwrap();
        idx.rehash_dirty().unwrap();
        let l1 = applied(&l0, &ids, &vals, &vec![0.0; ids.len()]);
        let fresh = build(&l1, &p, false);
        // stored weights (and int8 scales) equal the fresh build's
        match (idx.weights(), fresh.weights()) {
            (Weights::Bf16(a), Weights::Bf16(b)) | (Weights::F16(a), Weights::F16(b)) => {
                assert_eq!(a, b, "{storage:?}")
            }
            (Weights::I8 { w: a, scales: sa }, Weights::I8 { w: b, scales: sb }) => {
                assert_eq!(a, b);
                assert_eq!(
                    sa.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    sb.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
            _ => panic!("storage kind"),
        }
        // every updated row sits in the bucket of its decoded stored row
        let h = idx.simhash().unwrap();
        let mut row = vec![0f32; l0.dim];
        let (rb, stride) = (idx.tables().range_bits(), idx.weight_stride());
        for &id in &ids {
            let r = id as usize;
            match idx.weights() {
                Weights::Bf16(s) => {
                    lshk::matmul::convert_bf16_to_f32(&s[r * stride..r * stride + l0.dim], &mut row)
                        .unwrap()
                }
                Weights::F16(s) => {
                    lshk::matmul::convert_f16_to_f32(&s[r * stride..r * stride + l0.dim], &mut row)
                        .unwrap()
                }
                Weights::I8 { w, scales } => {
                    for (o, &x) in row.iter_mut().zip(&w[r * stride..r * stride + l0.dim]) {
                        *o = x as f32 * scales[r];
                    }
                }
                _ => unreachable!(),
            }
            let mut codes = vec![0u32; 8];
            h.hash(&row, 1, l0.dim, &mut codes).unwrap();
            for (t, &c) in codes.iter().enumerate() {
                let b = lshk::tables::fold_code(c, rb);
                assert!(
                    idx.tables().bucket(t, b).contains(&id),
                    "{storage:?}: row {id} not in its bucket of table {t}"
                );
            }
        }
    }
}

#[test]
fn bad_input_changes_nothing() {
    let _g = TIER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let l0 = layer(100, 8, 9);
    let p = params(Family::SimHash, Storage::F32, Transform::None, 0);
    let mut idx = build(&l0, &p, true);
    let q = randn(5 * l0.dim, 3);
    let before = (tables_of(&idx), query_all(&idx, &q, 5, 10));
    let row = vec![0.5f32; 8];
    let err = |r: lshk::Result<()>| r.unwrap_err().status;
    assert_eq!(
        err(idx.update_rows(&[100], Some((&row, 8)), None)),
        Status::IndexOutOfRange
    );
    assert_eq!(
        err(idx.update_rows(&[1, 2], Some((&row, 8)), None)),
        Status::BufferTooSmall
    );
    assert_eq!(
        err(idx.update_rows(&[1], Some((&row, 7)), None)),
        Status::InvalidArgument
    );
    let mut nan = row.clone();
    nan[3] = f32::NAN;
    assert_eq!(
        err(idx.update_rows(&[1], Some((&nan, 8)), None)),
        Status::NonFinite
    );
    assert_eq!(
        err(idx.update_rows(&[1], None, Some(&[f32::INFINITY]))),
        Status::NonFinite
    );
    assert_eq!(
        err(idx.update_rows(&[1, 2], None, Some(&[0.0]))),
        Status::BufferTooSmall
    );
    assert_eq!(
        idx.rehash_rows(&[7, 100]).unwrap_err().status,
        Status::IndexOutOfRange
    );
    assert_eq!(idx.dirty_rows(), 0);
    assert!((tables_of(&idx), query_all(&idx, &q, 5, 10)) == before);
    // no bias
    let mut nb = build(&l0, &p, false);
    assert_eq!(
        err(nb.update_rows(&[1], None, Some(&[0.0]))),
        Status::InvalidArgument
    );
    // borrowed: rows cannot be given; a NaN the caller wrote is refused at rehash
    let mut lw = Layer {
        w: l0.w.clone(),
        bias: l0.bias.clone(),
        ..l0
    };
    let pb = params(Family::SimHash, Storage::BorrowedF32, Transform::None, 0);
    let mut bi = build(&lw, &pb, false);
    assert_eq!(
        err(bi.update_rows(&[1], Some((&row, 8)), None)),
        Status::InvalidArgument
    );
    let snap = tables_of(&bi);
    lw.w[3 * lw.stride + 2] = f32::NAN;
    bi.update_rows(&[3], None, None).unwrap();
    assert_eq!(bi.rehash_dirty().unwrap_err().status, Status::NonFinite);
    assert!(tables_of(&bi) == snap);
    assert_eq!(bi.dirty_rows(), 1);
    lw.w[3 * lw.stride + 2] = 0.0;
    assert_eq!(bi.rehash_dirty().unwrap(), 1);
    // f16 range
    let mut h = build(
        &l0,
        &params(Family::SimHash, Storage::F16, Transform::None, 0),
        false,
    );
    let big = vec![1e6f32; 8];
    assert_eq!(
        err(h.update_rows(&[0], Some((&big, 8)), None)),
        Status::InvalidArgument
    );
    // label-aware buckets cannot be updated
    let mut lab = build(&l0, &p, false);
    let tq = randn(20 * 8, 4);
    let offs: Vec<usize> = (0..=20).collect();
    let labels: Vec<u32> = (0..20).collect();
    lab.train_labels(&tq, 20, 8, &offs, &labels, &Default::default())
        .unwrap();
    assert_eq!(
        err(lab.update_rows(&[1], Some((&row, 8)), None)),
        Status::InvalidArgument
    );
    assert_eq!(
        lab.rehash_rows(&[1]).unwrap_err().status,
        Status::InvalidArgument
    );
}

#[test]
fn schedule_values() {
    let s = RehashSchedule::lns();
    assert_eq!(s.initial_period, LNS_REHASH_PERIOD);
    assert_eq!(s.lambda, LNS_REHASH_LAMBDA);
    assert_eq!(s.period_at(0), 50);
    // floor(50 e^(1e-4 t))
    for t in [0u64, 100, 197, 198, 1000, 5000, 10_000, 100_000] {
        let want = (50.0 * (1e-4 * t as f64).exp()).floor() as u64;
        assert_eq!(s.period_at(t), want, "t {t}");
    }
    // the values docs/training.md quotes
    for (t, p) in [
        (1000u64, 55u64),
        (2000, 61),
        (5000, 82),
        (10_000, 135),
        (15_625, 238),
        (30_000, 1004),
    ] {
        assert_eq!(s.period_at(t), p, "t {t}");
    }
    assert_eq!(s.period_at(197), 50);
    assert_eq!(s.period_at(199), 51);
    let mut c = RehashClock::new(s).unwrap();
    let mut due = Vec::new();
    for t in 0..1000u64 {
        if c.due(t) {
            due.push(t);
        }
    }
    assert_eq!(&due[..5], &[50, 100, 150, 200, 251]);
    // golden: the first 16 rehash iterations
    let mut t = 0u64;
    let mut v = Vec::new();
    for _ in 0..16 {
        t = s.next_after(t);
        v.push(t);
    }
    assert_eq!(
        v,
        [50, 100, 150, 200, 251, 302, 353, 404, 456, 508, 560, 612, 665, 718, 771, 825]
    );
    let e = RehashSchedule::every(7);
    assert_eq!(
        (e.next_after(0), e.next_after(7), e.period_at(1 << 40)),
        (7, 14, 7)
    );
    // huge t saturates
    assert_eq!(s.period_at(u64::MAX), 1 << 62);
    assert_eq!(s.next_after(u64::MAX - 3), u64::MAX);
    for bad in [
        RehashSchedule {
            initial_period: 0.5,
            lambda: 0.0,
        },
        RehashSchedule {
            initial_period: f64::NAN,
            lambda: 0.0,
        },
        RehashSchedule {
            initial_period: 50.0,
            lambda: -1e-4,
        },
        RehashSchedule {
            initial_period: 50.0,
            lambda: f64::INFINITY,
        },
    ] {
        assert_eq!(
            RehashClock::new(bad).unwrap_err().status,
            Status::InvalidArgument
        );
    }
}

#[test]
fn queries_from_threads_between_updates_agree() {
    let _g = TIER_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let l0 = layer(3000, 24, 12);
    let p = params(Family::SimHash, Storage::F32, Transform::BiasAug, 0);
    let mut idx = build(&l0, &p, true);
    let nq = 40;
    let q = randn(nq * l0.dim, 5);
    let mut cur = Layer {
        w: l0.w.clone(),
        bias: l0.bias.clone(),
        ..l0
    };
    for round in 0..4u64 {
        let single: Vec<_> = (0..nq)
            .map(|i| query_all(&idx, &q[i * cur.dim..(i + 1) * cur.dim], 1, 10))
            .collect();
        let shared = &idx;
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let (q, single) = (&q, &single);
                    s.spawn(move || {
                        for _ in 0..5 {
                            for i in 0..nq {
                                let r = query_all(shared, &q[i * 24..(i + 1) * 24], 1, 10);
                                assert!(r == single[i], "round {round} query {i}");
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        let (ids, vals, nb) = changes(&cur, 300, 50 + round);
        idx.update_rows(&ids, Some((&vals, cur.stride)), Some(&nb))
            .unwrap();
        idx.rehash_dirty().unwrap();
        cur = applied(&cur, &ids, &vals, &nb);
        let fresh = build(&cur, &p, true);
        assert_same(&idx, &fresh, &q, nq, &format!("round {round}"));
    }
}
