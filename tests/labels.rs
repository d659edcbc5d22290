//! Label-aware buckets: counting and capping against a HashMap oracle,
//! determinism, the two policies, a hand-checked example, save/load of a
//! trained index, and input validation.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;
use std::path::PathBuf;

use lshk::data::structured_layer;
use lshk::index::{Index, IndexParams};
use lshk::labels::{count_labels, BucketLabels, LabelParams, LabelPolicy};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherParams, GatherResult};
use lshk::Status;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-labels-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Random CSR labels: 0..=max_per labels per query in 0..rows (duplicates
/// possible), with a non-zero first offset when `base > 0`.
fn csr(n: usize, rows: u32, max_per: u64, base: usize, seed: u64) -> (Vec<usize>, Vec<u32>) {
    let mut r = SplitMix64::new(seed);
    let mut off = vec![base];
    let mut ys = vec![7u32; base]; // unused prefix
    for _ in 0..n {
        let m = r.below(max_per + 1);
        for _ in 0..m {
            // Skewed: small ids are frequent, so caps and ties matter.
            let y = (r.below(rows as u64) * r.below(rows as u64) / rows as u64) as u32;
            ys.push(y);
        }
        off.push(ys.len());
    }
    (off, ys)
}

/// The oracle: a HashMap of counts per (table, bucket, label), then per
/// bucket sort by (count desc, id asc), keep `cap`, ids ascending.
fn oracle(
    codes: &[u32],
    n: usize,
    l: usize,
    rb: u32,
    off: &[usize],
    ys: &[u32],
    cap: u32,
) -> Vec<Vec<Vec<(u32, u32)>>> {
    let mut m: HashMap<(usize, u32, u32), u32> = HashMap::new();
    for i in 0..n {
        for t in 0..l {
            let b = fold_code(codes[i * l + t], rb);
            for &y in &ys[off[i]..off[i + 1]] {
                *m.entry((t, b, y)).or_default() += 1;
            }
        }
    }
    let nb = 1usize << rb;
    let mut out = vec![vec![Vec::new(); nb]; l];
    for (&(t, b, y), &c) in &m {
        out[t][b as usize].push((y, c));
    }
    for t in out.iter_mut() {
        for b in t.iter_mut() {
            b.sort_by(|a, c| c.1.cmp(&a.1).then(a.0.cmp(&c.0)));
            if cap > 0 {
                b.truncate(cap as usize);
            }
            b.sort();
        }
    }
    out
}

fn as_pairs(bl: &BucketLabels, b: usize) -> Vec<(u32, u32)> {
    let (y, c) = bl.bucket(b);
    y.iter().copied().zip(c.iter().copied()).collect()
}

#[test]
fn counting_and_capping_match_hashmap_oracle() {
    let mut r = SplitMix64::new(11);
    for &(n, l, rb, code_bits) in &[
        (0usize, 2usize, 3u32, 3u32),
        (1, 1, 1, 1),
        (37, 3, 4, 4),
        (500, 4, 4, 7), // codes wider than range_bits: folded
        (3000, 5, 6, 6),
    ] {
        let codes: Vec<u32> = (0..n * l)
            .map(|_| r.below(1u64 << code_bits) as u32)
            .collect();
        for base in [0usize, 5] {
            let (off, ys) = csr(n, 40, 6, base, n as u64 + base as u64);
            for cap in [0u32, 1, 2, 3, 5, 64] {
                let want = oracle(&codes, n, l, rb, &off, &ys, cap);
                for threads in [1u32, 2, 3, 0] {
                    let got = count_labels(&codes, n, l, rb, &off, &ys, cap, threads).unwrap();
                    assert_eq!(got.len(), l);
                    for t in 0..l {
                        assert_eq!(got[t].offsets.len(), (1 << rb) + 1);
                        for b in 0..1usize << rb {
                            assert_eq!(
                                as_pairs(&got[t], b),
                                want[t][b],
                                "n {n} L {l} rb {rb} cap {cap} threads {threads} table {t} bucket {b}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn ties_go_to_the_smaller_id() {
    // One query, one table: labels 9, 3, 5 once each, 4 twice.
    let codes = [2u32];
    let off = [0usize, 5];
    let ys = [9u32, 4, 3, 5, 4];
    let got = count_labels(&codes, 1, 1, 2, &off, &ys, 2, 1).unwrap();
    assert_eq!(as_pairs(&got[0], 2), vec![(3, 1), (4, 2)]);
    for b in [0usize, 1, 3] {
        assert!(as_pairs(&got[0], b).is_empty());
    }
}

struct Setup {
    rows: usize,
    dim: usize,
    w: Vec<f32>,
    q: Vec<f32>,
    nq: usize,
    off: Vec<usize>,
    ys: Vec<u32>,
}

fn setup(rows: usize, dim: usize, nq: usize) -> Setup {
    let lay = structured_layer(rows, dim, 50, 5);
    let (q, labels) = lshk::data::queries_near_labels(&lay.w, rows, dim, nq, 6);
    // Each query: its label plus two neighbours.
    let mut off = vec![0];
    let mut ys = Vec::new();
    for &y in &labels {
        ys.push(y);
        ys.push((y + 1) % rows as u32);
        ys.push((y + 17) % rows as u32);
        off.push(ys.len());
    }
    Setup {
        rows,
        dim,
        w: lay.w,
        q,
        nq,
        off,
        ys,
    }
}

fn build(s: &Setup, p: &IndexParams) -> Index {
    Index::build(&s.w, None, s.rows, s.dim, s.dim, p, None).unwrap()
}

fn small_params() -> IndexParams {
    IndexParams {
        bits: 6,
        tables: 8,
        ..IndexParams::default()
    }
}

fn tables_of(idx: &Index) -> Vec<(Vec<u32>, Vec<u32>)> {
    let t = idx.tables();
    (0..t.tables())
        .map(|i| (t.csr(i).0.to_vec(), t.csr(i).1.to_vec()))
        .collect()
}

#[test]
fn deterministic_and_policies() {
    let s = setup(3000, 24, 4000);
    let p = small_params();
    let plain = build(&s, &p);
    let l = plain.num_tables() as usize;
    // The expected labels per bucket, from the index's own query codes.
    let mut codes = vec![0u32; s.nq * l];
    plain.query_codes(&s.q, s.nq, s.dim, &mut codes).unwrap();
    for cap in [1u32, 8, 64, 0] {
        let lab = count_labels(&codes, s.nq, l, plain.range_bits(), &s.off, &s.ys, cap, 1).unwrap();
        let mut beside = build(&s, &p);
        let lp = LabelParams {
            label_cap: cap,
            policy: LabelPolicy::Beside,
        };
        beside
            .train_labels(&s.q, s.nq, s.dim, &s.off, &s.ys, &lp)
            .unwrap();
        // Determinism: a second training from scratch gives the same tables.
        let mut again = build(&s, &p);
        again
            .train_labels(&s.q, s.nq, s.dim, &s.off, &s.ys, &lp)
            .unwrap();
        assert_eq!(tables_of(&beside), tables_of(&again));
        let mut instead = build(&s, &p);
        instead
            .train_labels(
                &s.q,
                s.nq,
                s.dim,
                &s.off,
                &s.ys,
                &LabelParams {
                    label_cap: cap,
                    policy: LabelPolicy::Instead,
                },
            )
            .unwrap();
        assert_eq!(
            instead.label_state().unwrap().params.policy,
            LabelPolicy::Instead
        );
        let mut added = 0usize;
        for t in 0..l {
            for b in 0..plain.tables().num_buckets() as u32 {
                let pb = plain.tables().bucket(t, b);
                let (ly, _) = lab[t].bucket(b as usize);
                let bb = beside.tables().bucket(t, b);
                // BESIDE = plain ∪ labels, ascending, distinct.
                let mut want: Vec<u32> = pb.iter().chain(ly).copied().collect();
                want.sort_unstable();
                want.dedup();
                assert_eq!(bb, &want[..], "beside table {t} bucket {b}");
                assert!(pb.iter().all(|x| bb.binary_search(x).is_ok()));
                // INSTEAD = the labels only.
                assert_eq!(
                    instead.tables().bucket(t, b),
                    ly,
                    "instead table {t} bucket {b}"
                );
                if cap > 0 {
                    assert!(ly.len() <= cap as usize);
                }
                added += want.len() - pb.len();
            }
        }
        assert!(added > 0, "training added nothing (cap {cap})");
        let st = beside.label_state().unwrap();
        assert_eq!(st.params, lp);
        assert_eq!(st.queries, s.nq as u64);
        assert_eq!(st.pairs, s.ys.len() as u64);
        // The trained index gathers more of the training labels.
        let g = GatherParams::default();
        let (mut c0, mut c1) = (GatherResult::default(), GatherResult::default());
        plain.candidates(&s.q, 500, s.dim, &g, &mut c0).unwrap();
        beside.candidates(&s.q, 500, s.dim, &g, &mut c1).unwrap();
        let hits = |c: &GatherResult| {
            (0..500)
                .filter(|&i| {
                    c.ids[c.offsets[i]..c.offsets[i + 1]]
                        .binary_search(&s.ys[s.off[i]])
                        .is_ok()
                })
                .count()
        };
        assert!(hits(&c1) >= hits(&c0));
        if cap == 0 {
            assert_eq!(
                hits(&c1),
                500,
                "every training label is a candidate of its query"
            );
        }
    }
}

#[test]
fn candidates_equal_what_query_scores() {
    let s = setup(2000, 16, 300);
    let mut idx = build(&s, &small_params());
    idx.train_labels(&s.q, s.nq, s.dim, &s.off, &s.ys, &LabelParams::default())
        .unwrap();
    for probes in [0u32, 3] {
        let g = GatherParams {
            probes,
            ..GatherParams::default()
        };
        let mut c = GatherResult::default();
        idx.candidates(&s.q, s.nq, s.dim, &g, &mut c).unwrap();
        let k = 2000usize;
        let (mut ids, mut sc) = (vec![0u32; s.nq * k], vec![0f32; s.nq * k]);
        let mut st = lshk::index::QueryStats::default();
        idx.query(
            &s.q,
            s.nq,
            s.dim,
            k as u32,
            &g,
            &mut ids,
            &mut sc,
            Some(&mut st),
        )
        .unwrap();
        assert_eq!(st.candidates_total as usize, c.ids.len());
        for i in 0..s.nq {
            let mut got: Vec<u32> = ids[i * k..(i + 1) * k]
                .iter()
                .copied()
                .filter(|&x| x != u32::MAX)
                .collect();
            got.sort_unstable();
            assert_eq!(&got[..], &c.ids[c.offsets[i]..c.offsets[i + 1]]);
        }
    }
}

/// dim 2, K = 1, L = 1, plane (1, 0): a vector's bucket is 1 when its first
/// coordinate is > 0, else 0. Rows 0..3 point right, 4..7 left.
fn hand_index() -> (Index, Vec<f32>) {
    let w: Vec<f32> = (0..8)
        .flat_map(|r| {
            let s = if r < 4 { 1.0 } else { -1.0 };
            [s * (1.0 + r as f32 * 0.1), 0.1 * r as f32]
        })
        .collect();
    let p = IndexParams {
        bits: 1,
        tables: 1,
        range_bits: 1,
        planes: Some(vec![1.0, 0.0]),
        ..IndexParams::default()
    };
    (Index::build(&w, None, 8, 2, 2, &p, None).unwrap(), w)
}

fn cands(idx: &Index, q: &[f32]) -> Vec<u32> {
    let mut c = GatherResult::default();
    idx.candidates(q, 1, 2, &GatherParams::default(), &mut c)
        .unwrap();
    c.ids
}

fn query_ids(idx: &Index, q: &[f32]) -> Vec<u32> {
    let (mut ids, mut sc) = (vec![0u32; 8], vec![0f32; 8]);
    idx.query(
        q,
        1,
        2,
        8,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        None,
    )
    .unwrap();
    let mut v: Vec<u32> = ids.into_iter().filter(|&x| x != u32::MAX).collect();
    v.sort_unstable();
    v
}

#[test]
fn hand_checked_example() {
    let right = [2.0f32, 0.5];
    let left = [-2.0f32, 0.5];
    // Training: three right-pointing queries labelled 5, 5 and 6 (5 wins a
    // cap of 1), two left-pointing ones labelled 1 and 2 (tie: 1 wins).
    let q = [1.0f32, 0.0, 3.0, 1.0, 0.5, -1.0, -1.0, 0.0, -2.0, 3.0];
    let off = [0usize, 1, 2, 3, 4, 5];
    let ys = [5u32, 5, 6, 2, 1];
    let lp = |policy| LabelParams {
        label_cap: 1,
        policy,
    };
    let (mut idx, _) = hand_index();
    assert_eq!(cands(&idx, &right), vec![0, 1, 2, 3]);
    assert_eq!(cands(&idx, &left), vec![4, 5, 6, 7]);
    idx.train_labels(&q, 5, 2, &off, &ys, &lp(LabelPolicy::Beside))
        .unwrap();
    assert_eq!(cands(&idx, &right), vec![0, 1, 2, 3, 5]);
    assert_eq!(cands(&idx, &left), vec![1, 4, 5, 6, 7]);
    assert_eq!(query_ids(&idx, &right), vec![0, 1, 2, 3, 5]);
    assert_eq!(query_ids(&idx, &left), vec![1, 4, 5, 6, 7]);

    let (mut idx, _) = hand_index();
    idx.train_labels(&q, 5, 2, &off, &ys, &lp(LabelPolicy::Instead))
        .unwrap();
    assert_eq!(cands(&idx, &right), vec![5]);
    assert_eq!(cands(&idx, &left), vec![1]);
    assert_eq!(query_ids(&idx, &right), vec![5]);

    // label_cap 0 keeps every label.
    let (mut idx, _) = hand_index();
    idx.train_labels(
        &q,
        5,
        2,
        &off,
        &ys,
        &LabelParams {
            label_cap: 0,
            policy: LabelPolicy::Instead,
        },
    )
    .unwrap();
    assert_eq!(cands(&idx, &right), vec![5, 6]);
    assert_eq!(cands(&idx, &left), vec![1, 2]);
}

#[test]
fn save_load_round_trip() {
    let s = setup(2500, 20, 2000);
    let p = small_params();
    for policy in [LabelPolicy::Beside, LabelPolicy::Instead] {
        let mut idx = build(&s, &p);
        let lp = LabelParams {
            label_cap: 16,
            policy,
        };
        idx.train_labels(&s.q, s.nq, s.dim, &s.off, &s.ys, &lp)
            .unwrap();
        let path = tmp(&format!("trained-{policy:?}.lshk"));
        idx.save(&path).unwrap();
        let back = Index::load(&path).unwrap();
        assert!(
            back.tables().is_viewed(),
            "trained tables are mapped, not copied"
        );
        assert_eq!(back.label_state(), idx.label_state());
        assert_eq!(tables_of(&back), tables_of(&idx));
        let k = 10usize;
        for probes in [0u32, 2] {
            let g = GatherParams {
                probes,
                ..GatherParams::default()
            };
            let run = |x: &Index| {
                let (mut ids, mut sc) = (vec![0u32; s.nq * k], vec![0f32; s.nq * k]);
                x.query(&s.q, s.nq, s.dim, k as u32, &g, &mut ids, &mut sc, None)
                    .unwrap();
                (ids, sc.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(run(&idx), run(&back));
        }
        // A loaded trained index cannot be trained again.
        let mut back = back;
        let e = back
            .train_labels(&s.q, s.nq, s.dim, &s.off, &s.ys, &lp)
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        std::fs::remove_file(&path).ok();
    }
    // An untrained index saves no LABELS section and loads untrained.
    let idx = build(&s, &p);
    let path = tmp("plain.lshk");
    idx.save(&path).unwrap();
    let c = lshk::format::Container::open(&path, lshk::format::KIND_INDEX).unwrap();
    assert!(c.optional("LABELS").is_none());
    let back = Index::load(&path).unwrap();
    assert!(back.label_state().is_none());
    std::fs::remove_file(&path).ok();
}

#[test]
fn bad_inputs_leave_the_index_unchanged() {
    let s = setup(1000, 8, 50);
    let mut idx = build(&s, &small_params());
    let before = tables_of(&idx);
    let lp = LabelParams::default();
    let mut check =
        |q: &[f32], n: usize, stride: usize, off: &[usize], ys: &[u32], st: Status, msg: &str| {
            let e = idx.train_labels(q, n, stride, off, ys, &lp).unwrap_err();
            assert_eq!(e.status, st, "{}", e.message);
            assert!(e.message.contains(msg), "{:?} lacks {msg:?}", e.message);
            assert_eq!(tables_of(&idx), before);
            assert!(idx.label_state().is_none());
        };
    let (q, off, ys) = (&s.q[..], &s.off[..], &s.ys[..]);
    // A label >= rows, at position 7.
    let mut bad = ys.to_vec();
    bad[7] = 1000;
    check(
        q,
        s.nq,
        s.dim,
        off,
        &bad,
        Status::IndexOutOfRange,
        "labels[7] = 1000",
    );
    // Offsets decrease.
    let mut o = off.to_vec();
    o[3] = o[4] + 1;
    check(
        q,
        s.nq,
        s.dim,
        &o,
        ys,
        Status::InvalidArgument,
        "decreases at",
    );
    // Too few offsets / labels.
    check(
        q,
        s.nq,
        s.dim,
        &off[..s.nq],
        ys,
        Status::BufferTooSmall,
        "label_offsets",
    );
    check(
        q,
        s.nq,
        s.dim,
        off,
        &ys[..ys.len() - 1],
        Status::BufferTooSmall,
        "labels holds",
    );
    // NaN / infinity in a query.
    let mut qn = q.to_vec();
    qn[3 * s.dim + 2] = f32::NAN;
    check(
        &qn,
        s.nq,
        s.dim,
        off,
        ys,
        Status::NonFinite,
        "query 3 coordinate 2",
    );
    qn[3 * s.dim + 2] = f32::INFINITY;
    check(&qn, s.nq, s.dim, off, ys, Status::NonFinite, "query 3");
    // Stride < dim, too few floats.
    check(
        q,
        s.nq,
        s.dim - 1,
        off,
        ys,
        Status::InvalidArgument,
        "stride",
    );
    check(
        &q[..q.len() - 1],
        s.nq,
        s.dim,
        off,
        ys,
        Status::BufferTooSmall,
        "queries",
    );
    // n = 0 is valid (BESIDE: the buckets stay as they are).
    idx.train_labels(&[], 0, s.dim, &[0], &[], &lp).unwrap();
    assert_eq!(tables_of(&idx), before);
    assert_eq!(idx.label_state().unwrap().pairs, 0);
}

#[test]
fn labels_record_parse() {
    use lshk::labels::LabelState;
    let s = LabelState {
        params: LabelParams {
            label_cap: 64,
            policy: LabelPolicy::Instead,
        },
        queries: 3,
        pairs: 9,
    };
    let r = s.record();
    assert_eq!(r.len(), lshk::labels::LABELS_RECORD_LEN);
    assert_eq!(LabelState::parse(&r), Ok(s));
    let bad = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = r.clone();
        edit(&mut b);
        LabelState::parse(&b).unwrap_err()
    };
    assert!(bad(&|b| b[0] = 2).contains("version 2"));
    assert!(bad(&|b| b[8] = 2).contains("policy 2"));
    assert!(bad(&|b| b[12] = 1).contains("reserved"));
    assert!(bad(&|b| b.truncate(20)).contains("20 bytes"));
    assert!(bad(&|b| b.truncate(2)).contains("2 bytes"));
}

/// `lshk_tables_add_labels` / `tables_with_labels` on standalone tables,
/// against a HashMap/BTreeSet oracle: per bucket, the `cap` most frequent
/// labels (ties to the smaller id), beside or instead of the rows.
#[test]
fn standalone_tables_with_labels_match_the_oracle() {
    use lshk::labels::{LabelParams, LabelPolicy};
    use lshk::tables::tables_with_labels;
    use lshk::tables::Tables;
    use std::collections::{BTreeSet, HashMap};
    let (rows, l, rb) = (300usize, 3usize, 4u32);
    let mut r = lshk::rng::SplitMix64::new(5);
    let row_codes: Vec<u32> = (0..rows * l).map(|_| r.below(16) as u32).collect();
    let plain = Tables::build(&row_codes, rows, l as u32, rb, 0, 1, 1).unwrap();
    let n = 200;
    let q_codes: Vec<u32> = (0..n * l).map(|_| r.below(16) as u32).collect();
    let mut offs = vec![0usize];
    let mut labels = Vec::new();
    for _ in 0..n {
        let mut ys: Vec<u32> = (0..r.below(5)).map(|_| r.below(40) as u32).collect();
        ys.sort_unstable();
        ys.dedup();
        labels.extend(ys);
        offs.push(labels.len());
    }
    for policy in [LabelPolicy::Beside, LabelPolicy::Instead] {
        for cap in [0u32, 1, 3] {
            let p = LabelParams {
                label_cap: cap,
                policy,
            };
            let t = tables_with_labels(&plain, &q_codes, n, &offs, &labels, &p, 2).unwrap();
            for tb in 0..l {
                for b in 0..16u32 {
                    let mut cnt: HashMap<u32, u32> = HashMap::new();
                    for i in 0..n {
                        if q_codes[i * l + tb] == b {
                            for &y in &labels[offs[i]..offs[i + 1]] {
                                *cnt.entry(y).or_default() += 1;
                            }
                        }
                    }
                    let mut v: Vec<(u32, u32)> = cnt.into_iter().collect();
                    v.sort_by(|a, c| c.1.cmp(&a.1).then(a.0.cmp(&c.0)));
                    if cap > 0 {
                        v.truncate(cap as usize);
                    }
                    let mut want: BTreeSet<u32> = v.into_iter().map(|x| x.0).collect();
                    if matches!(policy, LabelPolicy::Beside) {
                        want.extend(plain.bucket(tb, b).iter().copied());
                    }
                    let want: Vec<u32> = want.into_iter().collect();
                    assert_eq!(
                        t.bucket(tb, b),
                        &want[..],
                        "policy {policy:?} cap {cap} table {tb} bucket {b}"
                    );
                }
            }
            assert!(t.is_frozen());
            let again = tables_with_labels(&t, &q_codes, n, &offs, &labels, &p, 1).unwrap_err();
            assert_eq!(again.status, lshk::Status::InvalidArgument);
        }
    }
    // A label >= rows and short codes are refused.
    let mut bad = labels.clone();
    bad[0] = rows as u32;
    let p = LabelParams::default();
    assert_eq!(
        tables_with_labels(&plain, &q_codes, n, &offs, &bad, &p, 1)
            .unwrap_err()
            .status,
        lshk::Status::IndexOutOfRange
    );
    assert_eq!(
        tables_with_labels(&plain, &q_codes[1..], n, &offs, &labels, &p, 1)
            .unwrap_err()
            .status,
        lshk::Status::BufferTooSmall
    );
}
