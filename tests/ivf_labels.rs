//! Label-aware IVF lists (`Ivf::train_labels`, issue 13 "composes with
//! label-aware buckets"): the labels of a training query stand in the list
//! it visits first; a row in several lists is counted once, so an
//! exhaustive search is still the exact top-k; the lists are the same on
//! every tier and survive save / load; bad inputs change nothing.

mod common;

use common::ivf::{check_exact_topk, fingerprint, layer, randn, tmp, Layer};
use common::tiers::for_this_test as tiers;
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams, SearchStats};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::matmul::TOPK_PAD_ID;
use lshk::rng::SplitMix64;
use lshk::Status;

/// `n` training queries, each with 1-5 labels drawn from all rows (repeats
/// allowed), as CSR.
fn training(l: &Layer, n: usize, seed: u64) -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    let q = randn(n * l.dim, seed);
    let mut r = SplitMix64::new(seed + 1);
    let mut off = vec![0usize];
    let mut lab = Vec::new();
    for _ in 0..n {
        for _ in 0..1 + r.below(5) {
            lab.push(r.below(l.rows as u64) as u32);
        }
        off.push(lab.len());
    }
    (q, off, lab)
}

fn search(
    ivf: &Ivf,
    tier: lshk::isa::Isa,
    q: &[f32],
    nq: usize,
    dim: usize,
    k: usize,
    sp: &SearchParams,
) -> (Vec<u32>, Vec<f32>, SearchStats) {
    let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let mut st = SearchStats::default();
    ivf.search_stats(tier, q, nq, dim, k, sp, &mut ids, &mut sc, Some(&mut st))
        .unwrap();
    (ids, sc, st)
}

/// Every list a training query visits first holds its labels (a fixed
/// one-list search with k and rerank covering the whole list returns
/// them), each id once per answer; with every list visited the answer is
/// the exact top-k, re-ranked or not, on every tier and with or without an
/// owned copy.
#[test]
fn labels_stand_in_the_first_list_and_exhaustive_search_stays_exact() {
    let (rows, dim) = (900, 24);
    let l = layer(rows, dim, 10, 41);
    let (tq, off, lab) = training(&l, 60, 43);
    let ntrain = off.len() - 1;
    for codes in [Codes::I8, Codes::None] {
        for borrow in [false, true] {
            if borrow && codes == Codes::None {
                continue;
            }
            for policy in [LabelPolicy::Beside, LabelPolicy::Instead] {
                let p = IvfParams {
                    nlist: 16,
                    codes,
                    ..Default::default()
                };
                let lp = LabelParams {
                    label_cap: 0,
                    policy,
                };
                let mut prints = Vec::new();
                for tier in tiers() {
                    let mut ivf =
                        // SAFETY: the layer outlives the index (borrowed or not).
                        unsafe { Ivf::build_isa(tier, &l.w, Some(&l.b), rows, dim, dim, &p, borrow) }.unwrap();
                    let plain = ivf.positions();
                    assert_eq!(plain, rows);
                    ivf.train_labels_isa(tier, &tq, ntrain, dim, &off, &lab, &lp)
                        .unwrap();
                    let what = format!("{codes:?} borrow {borrow} {policy:?} {}", tier.name());
                    let st = ivf.label_state().unwrap();
                    assert_eq!((st.queries, st.pairs), (ntrain as u64, lab.len() as u64));
                    if policy == LabelPolicy::Beside {
                        assert!(ivf.positions() > rows, "{what}");
                    }
                    prints.push(fingerprint(&ivf));
                    // The first list of each training query holds its labels.
                    let k = ivf.positions();
                    let one = SearchParams::fixed(1, k as u32);
                    let (ids, _, _) = search(&ivf, tier, &tq, ntrain, dim, k, &one);
                    for i in 0..ntrain {
                        let got = &ids[i * k..(i + 1) * k];
                        let real: Vec<u32> =
                            got.iter().copied().filter(|&x| x != TOPK_PAD_ID).collect();
                        let mut u = real.clone();
                        u.sort_unstable();
                        u.dedup();
                        assert_eq!(u.len(), real.len(), "{what}: query {i} repeats an id");
                        for y in &lab[off[i]..off[i + 1]] {
                            assert!(real.contains(y), "{what}: query {i} lacks label {y}");
                        }
                    }
                    if policy == LabelPolicy::Instead {
                        continue; // rows without a label may have left every list
                    }
                    // Every list: the exact top-k, ids once.
                    for rerank in [ivf.positions() as u32, 0] {
                        let all = SearchParams::fixed(16, rerank);
                        let kk = 10;
                        let (ids, sc, st) = search(&ivf, tier, &l.q, l.nq, dim, kk, &all);
                        assert_eq!(st.scanned, (ivf.positions() * l.nq) as u64, "{what}");
                        if rerank > 0 || codes == Codes::None {
                            check_exact_topk(&l, kk, &ids, &sc, &what);
                        }
                        for i in 0..l.nq {
                            let mut u = ids[i * kk..(i + 1) * kk].to_vec();
                            u.sort_unstable();
                            u.dedup();
                            assert_eq!(u.len(), kk, "{what} rerank {rerank}: query {i}");
                            assert!(!u.contains(&TOPK_PAD_ID));
                        }
                    }
                }
                assert!(
                    prints.windows(2).all(|w| w[0] == w[1]),
                    "{codes:?} {policy:?}: lists differ between tiers"
                );
            }
        }
    }
}

/// `label_cap` keeps each list's most frequent labels; with `Instead` a
/// list that received labels holds exactly them.
#[test]
fn label_cap_keeps_the_most_frequent_labels() {
    let (rows, dim) = (400, 8);
    let l = layer(rows, dim, 1, 51);
    let mut ivf = Ivf::build(
        &l.w,
        Some(&l.b),
        rows,
        dim,
        dim,
        &IvfParams {
            nlist: 4,
            ..Default::default()
        },
    )
    .unwrap();
    // One query, labels 7 x3, 5 x2, 9 x2, 300 x1: cap 2 keeps 7 and the
    // smaller of the tied 5 / 9.
    let q = l.q.clone();
    let lab = [7u32, 5, 300, 7, 9, 5, 7, 9];
    ivf.train_labels(
        &q,
        1,
        dim,
        &[0, lab.len()],
        &lab,
        &LabelParams {
            label_cap: 2,
            policy: LabelPolicy::Instead,
        },
    )
    .unwrap();
    let k = 10;
    let (ids, _, _) = search(
        &ivf,
        lshk::isa::active(),
        &q,
        1,
        dim,
        k,
        &SearchParams::fixed(1, 64),
    );
    let mut got: Vec<u32> = ids.into_iter().filter(|&x| x != TOPK_PAD_ID).collect();
    got.sort_unstable();
    assert_eq!(got, vec![5, 7]);
    assert_eq!(ivf.positions(), rows - ivf_list_len_before(&l) + 2);
}

/// Rows of the list that query 0 of `l` visits first in an untrained
/// 4-list index (as built above).
fn ivf_list_len_before(l: &Layer) -> usize {
    let ivf = Ivf::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &IvfParams {
            nlist: 4,
            ..Default::default()
        },
    )
    .unwrap();
    let k = l.rows;
    let (ids, _, _) = search(
        &ivf,
        lshk::isa::active(),
        &l.q,
        1,
        l.dim,
        k,
        &SearchParams::fixed(1, 0),
    );
    ids.iter().filter(|&&x| x != TOPK_PAD_ID).count()
}

#[test]
fn label_lists_survive_save_and_load() {
    let (rows, dim) = (1200, 16);
    let l = layer(rows, dim, 12, 61);
    let (tq, off, lab) = training(&l, 80, 63);
    let lp = LabelParams {
        label_cap: 8,
        policy: LabelPolicy::Beside,
    };
    let sp = SearchParams::default();
    let k = 6;
    let tier = lshk::isa::active();
    for (codes, borrow) in [(Codes::I8, false), (Codes::I8, true), (Codes::None, false)] {
        let p = IvfParams {
            codes,
            ..Default::default()
        };
        // SAFETY: the layer outlives the index (borrowed or not).
        let mut a =
            unsafe { Ivf::build_isa(tier, &l.w, None, rows, dim, dim, &p, borrow) }.unwrap();
        a.train_labels(&tq, off.len() - 1, dim, &off, &lab, &lp)
            .unwrap();
        let path = tmp(&format!("labels-{codes:?}-{borrow}.lshk"));
        a.save(&path).unwrap();
        let b = if borrow {
            // SAFETY: l.w outlives b.
            unsafe { Ivf::load_borrowed(&path, &l.w, dim) }.unwrap()
        } else {
            Ivf::load(&path).unwrap()
        };
        assert_eq!(b.label_state(), a.label_state());
        assert_eq!(b.positions(), a.positions());
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(b.memory_bytes(), a.memory_bytes());
        let ra = search(&a, tier, &l.q, l.nq, dim, k, &sp);
        let rb = search(&b, tier, &l.q, l.nq, dim, k, &sp);
        assert_eq!(ra.0, rb.0);
        assert_eq!(
            ra.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            rb.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        // A second training is refused, and the index is unchanged.
        let mut b = b;
        let e = b
            .train_labels(&tq, off.len() - 1, dim, &off, &lab, &lp)
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn bad_label_inputs_change_nothing() {
    let (rows, dim) = (300, 8);
    let l = layer(rows, dim, 1, 71);
    let (tq, off, lab) = training(&l, 5, 73);
    let n = off.len() - 1;
    let lp = LabelParams::default();
    let mut ivf = Ivf::build(&l.w, Some(&l.b), rows, dim, dim, &IvfParams::default()).unwrap();
    let before = fingerprint(&ivf);
    let mut bad_lab = lab.clone();
    bad_lab[0] = rows as u32;
    let mut nan_q = tq.clone();
    nan_q[3] = f32::NAN;
    let mut bad_off = off.clone();
    bad_off.swap(1, 2);
    // Each refused, the index unchanged.
    for (want, r) in [
        (
            Status::IndexOutOfRange,
            ivf.train_labels(&tq, n, dim, &off, &bad_lab, &lp),
        ),
        (
            Status::NonFinite,
            ivf.train_labels(&nan_q, n, dim, &off, &lab, &lp),
        ),
        (
            Status::BufferTooSmall,
            ivf.train_labels(&tq[..tq.len() - 1], n, dim, &off, &lab, &lp),
        ),
        (
            Status::BufferTooSmall,
            ivf.train_labels(&tq, n, dim, &off[..n], &lab, &lp),
        ),
        (
            Status::InvalidArgument,
            ivf.train_labels(&tq, n, dim, &bad_off, &lab, &lp),
        ),
    ] {
        assert_eq!(r.unwrap_err().status, want);
        assert_eq!(fingerprint(&ivf), before);
        assert!(ivf.label_state().is_none());
    }
    // PQ4 lists (alone or with int8 codes) cannot take labels.
    for codes in [Codes::Pq4, Codes::Pq4I8] {
        let mut pq = Ivf::build(
            &l.w,
            Some(&l.b),
            rows,
            dim,
            dim,
            &IvfParams {
                codes,
                ..Default::default()
            },
        )
        .unwrap();
        let e = pq.train_labels(&tq, n, dim, &off, &lab, &lp).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert!(pq.label_state().is_none());
    }
}
