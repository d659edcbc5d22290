//! LSH tables and the gather against a plain BTreeSet/HashMap oracle, on
//! every tier this CPU supports.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lshk::rng::SplitMix64;
use lshk::tables::{
    bucket_stream_seed, fold_code, GatherInput, GatherParams, GatherResult, Tables,
};
use lshk::{Isa, SimHash, Status};

// Every tier this CPU supports (capped by `LSHK_MAX_ISA`), printed once per
// test; under CI a supported tier that does not run fails the test.
use common::tiers::for_this_test as tiers;

/// The oracle's tables: per table, bucket -> ascending ids (after cap).
struct Oracle {
    l: usize,
    range_bits: u32,
    buckets: Vec<BTreeMap<u32, Vec<u32>>>,
}

impl Oracle {
    fn new(codes: &[u32], n: usize, l: usize, range_bits: u32, cap: u32, seed: u64) -> Self {
        let mut buckets = vec![BTreeMap::<u32, Vec<u32>>::new(); l];
        for i in 0..n {
            for t in 0..l {
                let b = fold_code(codes[i * l + t], range_bits);
                buckets[t].entry(b).or_default().push(i as u32);
            }
        }
        if cap > 0 {
            let cap = cap as usize;
            for (t, tb) in buckets.iter_mut().enumerate() {
                for (&b, members) in tb.iter_mut() {
                    if members.len() > cap {
                        // Algorithm R, written out independently.
                        let s = seed ^ (((t as u64) << 32) | b as u64);
                        assert_eq!(s, bucket_stream_seed(seed, t as u32, b));
                        let mut rng = SplitMix64::new(s);
                        let mut res: Vec<u32> = members[..cap].to_vec();
                        for (i, &m) in members.iter().enumerate().skip(cap) {
                            let j = rng.below(i as u64 + 1) as usize;
                            if j < cap {
                                res[j] = m;
                            }
                        }
                        res.sort();
                        *members = res;
                    }
                }
            }
        }
        Oracle {
            l,
            range_bits,
            buckets,
        }
    }

    fn bucket(&self, t: usize, b: u32) -> &[u32] {
        self.buckets[t].get(&b).map(|v| &v[..]).unwrap_or(&[])
    }

    /// Probe flip masks by brute force: all non-empty rank sets sorted by
    /// (score, mask).
    fn probes(proj: &[f32], p: u32) -> Vec<u32> {
        let k = proj.len();
        let mut order: Vec<(f32, u32)> = proj
            .iter()
            .enumerate()
            .map(|(i, v)| (v.abs(), i as u32))
            .collect();
        order.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        let mut sets: Vec<(f64, u32)> = (1u32..(1u32 << k))
            .map(|m| {
                let mut s = 0.0f64;
                for (r, o) in order.iter().enumerate() {
                    if m >> r & 1 == 1 {
                        s += o.0 as f64;
                    }
                }
                (s, m)
            })
            .collect();
        sets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        sets.iter()
            .take(p as usize)
            .map(|&(_, m)| {
                let mut f = 0;
                for (r, o) in order.iter().enumerate() {
                    if m >> r & 1 == 1 {
                        f |= 1 << o.1;
                    }
                }
                f
            })
            .collect()
    }

    fn gather(
        &self,
        p: &GatherParams,
        codes: &[u32],
        q: usize,
        proj: Option<&[f32]>,
        forced: Option<(&[usize], &[u32])>,
    ) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
        let l = self.l;
        let mut all_ids = vec![];
        let mut all_counts = vec![];
        for qi in 0..q {
            let fset: BTreeSet<u32> = match forced {
                Some((fo, fi)) => fi[fo[qi]..fo[qi + 1]].iter().copied().collect(),
                None => BTreeSet::new(),
            };
            let mut seen: BTreeSet<u32> = fset.clone();
            let mut count: HashMap<u32, u32> = HashMap::new();
            let budget = p.max_candidates as usize;
            'outer: for t in 0..l {
                let c = codes[qi * l + t];
                let mut bs = vec![fold_code(c, self.range_bits)];
                if p.probes > 0 {
                    let k = p.bits_per_table as usize;
                    let pr = &proj.unwrap()[(qi * l + t) * k..(qi * l + t + 1) * k];
                    for m in Self::probes(pr, p.probes) {
                        let b = fold_code(c ^ m, self.range_bits);
                        if !bs.contains(&b) {
                            bs.push(b);
                        }
                    }
                }
                for b in bs {
                    for &id in self.bucket(t, b) {
                        if budget > 0 && seen.len() >= budget {
                            break 'outer;
                        }
                        seen.insert(id);
                        *count.entry(id).or_default() += 1;
                    }
                }
            }
            let min = p.min_count.max(1);
            let mut ids = vec![];
            let mut cs = vec![];
            for &id in &seen {
                let c = count.get(&id).copied().unwrap_or(0);
                if c >= min || fset.contains(&id) {
                    ids.push(id);
                    cs.push(c);
                }
            }
            all_ids.push(ids);
            all_counts.push(cs);
        }
        (all_ids, all_counts)
    }
}

fn split(r: &GatherResult, q: usize) -> Vec<Vec<u32>> {
    assert_eq!(r.offsets.len(), q + 1);
    (0..q)
        .map(|i| r.ids[r.offsets[i]..r.offsets[i + 1]].to_vec())
        .collect()
}
fn split_counts(r: &GatherResult, q: usize) -> Vec<Vec<u32>> {
    (0..q)
        .map(|i| r.counts[r.offsets[i]..r.offsets[i + 1]].to_vec())
        .collect()
}

fn random_codes(r: &mut SplitMix64, len: usize, bits: u32) -> Vec<u32> {
    (0..len)
        .map(|_| (r.next_u64() as u32) & (((1u64 << bits) - 1) as u32))
        .collect()
}

fn check_tables_equal(a: &Tables, o: &Oracle) {
    for t in 0..o.l {
        for b in 0..a.num_buckets() as u32 {
            assert_eq!(a.bucket(t, b), o.bucket(t, b), "table {t} bucket {b}");
        }
    }
}

#[test]
fn build_matches_oracle_and_is_thread_invariant() {
    let mut r = SplitMix64::new(1);
    for &(n, l, rb, kbits, cap) in &[
        (0usize, 3usize, 4u32, 6u32, 0u32),
        (1, 1, 1, 1, 0),
        (100, 4, 4, 4, 0),
        (1000, 5, 6, 10, 0),
        (1000, 5, 6, 10, 7),
        (3000, 7, 8, 32, 2),
        (3000, 3, 3, 3, 1),
    ] {
        let codes = random_codes(&mut r, n * l, kbits);
        let seed = r.next_u64();
        let o = Oracle::new(&codes, n, l, rb, cap, seed);
        let base = Tables::build(&codes, n, l as u32, rb, cap, seed, 1).unwrap();
        check_tables_equal(&base, &o);
        for th in [0u32, 2, 3, 8] {
            let t = Tables::build(&codes, n, l as u32, rb, cap, seed, th).unwrap();
            check_tables_equal(&t, &o);
        }
        let st = base.stats();
        assert_eq!(st.len(), l);
        for (t, s) in st.iter().enumerate() {
            let ne = o.buckets[t].values().filter(|v| !v.is_empty()).count() as u64;
            assert_eq!(s.nonempty_buckets, ne);
            let big = o.buckets[t].values().map(|v| v.len()).max().unwrap_or(0) as u32;
            assert_eq!(s.largest_bucket, big);
            let stored: usize = o.buckets[t].values().map(|v| v.len()).sum();
            assert_eq!(s.stored_ids, stored as u64);
            if cap == 0 {
                assert_eq!(s.stored_ids, n as u64);
            }
        }
        assert!(base.memory_bytes() >= n * l * 4);
    }
}

#[test]
fn build_rejects_bad_arguments() {
    let codes = vec![0u32; 12];
    let e = |r: lshk::Result<Tables>| r.unwrap_err().status;
    assert_eq!(
        e(Tables::build(&codes, 4, 3, 0, 0, 0, 1)),
        Status::InvalidArgument
    );
    assert_eq!(
        e(Tables::build(&codes, 4, 3, 25, 0, 0, 1)),
        Status::InvalidArgument
    );
    assert_eq!(
        e(Tables::build(&codes, 4, 0, 4, 0, 0, 1)),
        Status::InvalidArgument
    );
    assert_eq!(
        e(Tables::build(&codes, 5, 3, 4, 0, 0, 1)),
        Status::InvalidArgument
    );
    assert!(Tables::build(&codes, 4, 3, 24, 0, 0, 1).is_ok());
}

/// Runs one parameter combination on every tier and compares with the oracle.
#[allow(clippy::too_many_arguments)]
fn check_combo(
    tabs: &Tables,
    o: &Oracle,
    tiers: &[Isa],
    p: &GatherParams,
    codes: &[u32],
    q: usize,
    proj: Option<&[f32]>,
    forced: Option<(&[usize], &[u32])>,
) {
    let (want_ids, want_counts) = o.gather(p, codes, q, proj, forced);
    let input = GatherInput {
        codes,
        q,
        projections: proj,
        forced_offsets: forced.map(|f| f.0),
        forced_ids: forced.map(|f| f.1).unwrap_or(&[]),
    };
    for &tier in tiers {
        for want_c in [false, true] {
            let mut out = GatherResult::default();
            tabs.gather_isa(tier, p, &input, want_c, &mut out).unwrap();
            assert_eq!(split(&out, q), want_ids, "{tier:?} {p:?} counts={want_c}");
            if want_c {
                assert_eq!(split_counts(&out, q), want_counts, "{tier:?} {p:?}");
            } else {
                assert!(out.counts.is_empty());
            }
        }
    }
}

#[test]
fn gather_every_option_combination() {
    let tiers = tiers();
    let mut r = SplitMix64::new(2);
    for &(n, l, rb, kbits, cap) in &[
        (600usize, 5usize, 5u32, 5u32, 0u32),
        (600, 5, 4, 8, 3),
        (2000, 4, 6, 6, 0),
        (130, 3, 2, 4, 0),
    ] {
        let codes = random_codes(&mut r, n * l, kbits);
        let seed = r.next_u64();
        let tabs = Tables::build(&codes, n, l as u32, rb, cap, seed, 2).unwrap();
        let o = Oracle::new(&codes, n, l, rb, cap, seed);
        let q = 4;
        let kb = kbits as usize;
        let proj: Vec<f32> = (0..q * l * kb).map(|_| r.next_normal() as f32).collect();
        // Query codes: the sign bits of the projections (as SimHash would).
        let qcodes: Vec<u32> = (0..q * l)
            .map(|ql| {
                let mut c = 0u32;
                for b in 0..kb {
                    if proj[ql * kb + b] > 0.0 {
                        c |= 1 << b;
                    }
                }
                c
            })
            .collect();
        // Forced ids: query 0 none, 1 duplicates, 2 ids that are also
        // candidates, 3 a mix.
        let mut fi: Vec<u32> = vec![];
        let mut fo = vec![0usize];
        fo.push(fi.len());
        fi.extend([7u32 % n as u32, 7 % n as u32, 3, 3, 3]);
        fo.push(fi.len());
        let cand0 = o.bucket(0, fold_code(qcodes[2 * l], rb)).to_vec();
        fi.extend(cand0.iter().take(3));
        fi.push((n - 1) as u32);
        fo.push(fi.len());
        fi.extend([(n - 1) as u32, 0, 1, 0]);
        fo.push(fi.len());
        for min_count in [
            0u32,
            1,
            2,
            3,
            l as u32,
            l as u32 + 1,
            l as u32 + 7,
            u32::MAX,
        ] {
            for max_c in [0u32, 1, 3, 10, 60, 1000, u32::MAX] {
                for probes in [0u32, 1, 4] {
                    for with_forced in [false, true] {
                        let p = GatherParams {
                            min_count,
                            max_candidates: max_c,
                            probes,
                            bits_per_table: kbits,
                        };
                        let forced = with_forced.then_some((&fo[..], &fi[..]));
                        let pr = (probes > 0).then_some(&proj[..]);
                        check_combo(&tabs, &o, &tiers, &p, &qcodes, q, pr, forced);
                    }
                }
            }
        }
    }
}

#[test]
fn gather_edge_cases() {
    let tiers = tiers();
    let mut r = SplitMix64::new(3);
    // Empty tables (n = 0), q = 0 and q > 0.
    let tabs = Tables::build(&[], 0, 3, 4, 0, 1, 1).unwrap();
    let o = Oracle::new(&[], 0, 3, 4, 0, 1);
    let codes = random_codes(&mut r, 6, 4);
    for q in [0usize, 2] {
        check_combo(
            &tabs,
            &o,
            &tiers,
            &GatherParams::default(),
            &codes[..q * 3],
            q,
            None,
            None,
        );
    }
    // Every n up to a few vector widths of bits and words, one table, all
    // rows in one of two buckets: dense bitmap words.
    for n in 0..300usize {
        let codes: Vec<u32> = (0..n).map(|i| (i % 3 == 0) as u32).collect();
        let tabs = Tables::build(&codes, n, 1, 1, 0, 0, 1).unwrap();
        let o = Oracle::new(&codes, n, 1, 1, 0, 0);
        let q = [0u32, 1];
        for min_count in [1, 2] {
            let p = GatherParams {
                min_count,
                ..Default::default()
            };
            check_combo(&tabs, &o, &tiers, &p, &q, 2, None, None);
        }
    }
    // q = 0 with forced offsets [0].
    let codes = random_codes(&mut r, 50 * 2, 3);
    let tabs = Tables::build(&codes, 50, 2, 3, 0, 0, 1).unwrap();
    let o = Oracle::new(&codes, 50, 2, 3, 0, 0);
    check_combo(
        &tabs,
        &o,
        &tiers,
        &GatherParams::default(),
        &[],
        0,
        None,
        Some((&[0], &[])),
    );
}

#[test]
fn gather_large_dense_and_sparse() {
    // SimHash codes of Gaussian rows: realistic buckets, both dense words
    // (few range bits) and sparse ones (many).
    let tiers = tiers();
    let (n, dim, k, l) = (50_000usize, 32usize, 10u32, 8u32);
    let h = SimHash::new(dim, k, l, 0, 5).unwrap();
    let mut r = SplitMix64::new(4);
    let x: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
    let mut codes = vec![0u32; n * l as usize];
    h.hash(&x, n, dim, &mut codes).unwrap();
    let q = 5;
    let mut qcodes = vec![0u32; q * l as usize];
    let mut proj = vec![0f32; q * (k * l) as usize];
    h.hash_isa(Isa::Scalar, &x[..q * dim], q, dim, &mut qcodes)
        .unwrap();
    h.project_isa(Isa::Scalar, &x[..q * dim], q, dim, &mut proj)
        .unwrap();
    for rb in [4u32, 10, 16] {
        let tabs = Tables::build(&codes, n, l, rb, 0, 9, 0).unwrap();
        let o = Oracle::new(&codes, n, l as usize, rb, 0, 9);
        for (min_count, probes, max_c) in [(1, 0, 0), (2, 0, 0), (1, 3, 0), (2, 2, 5000), (4, 0, 0)]
        {
            let p = GatherParams {
                min_count,
                max_candidates: max_c,
                probes,
                bits_per_table: k,
            };
            check_combo(&tabs, &o, &tiers, &p, &qcodes, q, Some(&proj), None);
        }
    }
}

#[test]
fn update_then_gather_equals_rebuild() {
    let tiers = tiers();
    let mut r = SplitMix64::new(5);
    for &(n, l, rb, kbits, cap) in &[
        (500usize, 4usize, 4u32, 6u32, 0u32),
        (500, 4, 4, 6, 5),
        (2000, 6, 7, 12, 0),
        // 1,024 buckets: few change, so Tables::update splices them (with
        // many changed buckets it rebuilds the table by counting sort)
        (3000, 3, 10, 12, 0),
        (3000, 3, 10, 12, 4),
    ] {
        let mut codes = random_codes(&mut r, n * l, kbits);
        let seed = r.next_u64();
        for th in [1u32, 2, 0] {
            let mut tabs = Tables::build(&codes, n, l as u32, rb, cap, seed, th).unwrap();
            for round in 0..4 {
                // Some rows move, some ids repeat (last wins), some keep
                // their codes.
                let cnt = [1usize, 10, 50, 0][round];
                let mut ids: Vec<u32> = (0..cnt).map(|_| r.below(n as u64) as u32).collect();
                if cnt > 2 {
                    ids[1] = ids[0];
                }
                let mut newc = random_codes(&mut r, cnt * l, kbits);
                if cnt > 3 {
                    // row ids[3] keeps its codes
                    let id = ids[3] as usize;
                    newc[3 * l..4 * l].copy_from_slice(&codes[id * l..(id + 1) * l]);
                }
                tabs.update(&ids, &newc).unwrap();
                for (j, &id) in ids.iter().enumerate() {
                    let id = id as usize;
                    codes[id * l..(id + 1) * l].copy_from_slice(&newc[j * l..(j + 1) * l]);
                }
                let fresh = Tables::build(&codes, n, l as u32, rb, cap, seed, 1).unwrap();
                let o = Oracle::new(&codes, n, l, rb, cap, seed);
                check_tables_equal(&tabs, &o);
                check_tables_equal(&fresh, &o);
                let q = 3;
                let qc = random_codes(&mut r, q * l, kbits);
                for p in [
                    GatherParams::default(),
                    GatherParams {
                        min_count: 2,
                        max_candidates: 40,
                        ..Default::default()
                    },
                ] {
                    check_combo(&tabs, &o, &tiers, &p, &qc, q, None, None);
                }
                assert_eq!(tabs.stats(), fresh.stats());
            }
            // Errors leave the tables untouched.
            let before: Vec<Vec<u32>> = (0..rb).map(|b| tabs.bucket(0, b).to_vec()).collect();
            assert_eq!(
                tabs.update(&[n as u32], &vec![0; l]).unwrap_err().status,
                Status::IndexOutOfRange
            );
            assert_eq!(
                tabs.update(&[0], &vec![0; l + 1]).unwrap_err().status,
                Status::InvalidArgument
            );
            let after: Vec<Vec<u32>> = (0..rb).map(|b| tabs.bucket(0, b).to_vec()).collect();
            assert_eq!(before, after);
        }
    }
}

#[test]
fn gather_rejects_bad_inputs() {
    let mut r = SplitMix64::new(6);
    let codes = random_codes(&mut r, 100 * 2, 4);
    let tabs = Tables::build(&codes, 100, 2, 4, 0, 0, 1).unwrap();
    let mut out = GatherResult::default();
    let qc = [1u32, 2];
    let st = |p: GatherParams, inp: GatherInput| {
        let mut out = GatherResult::default();
        tabs.gather_isa(Isa::Scalar, &p, &inp, false, &mut out)
            .unwrap_err()
            .status
    };
    let base = GatherInput {
        codes: &qc,
        q: 1,
        ..Default::default()
    };
    // codes length
    assert_eq!(
        st(GatherParams::default(), GatherInput { q: 2, ..base }),
        Status::InvalidArgument
    );
    // probes without K / projections, too many probes, NaN projections
    let pp = GatherParams {
        probes: 1,
        bits_per_table: 4,
        ..Default::default()
    };
    assert_eq!(st(pp, base), Status::InvalidArgument);
    assert_eq!(
        st(
            GatherParams {
                bits_per_table: 0,
                ..pp
            },
            base
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            GatherParams { probes: 16, ..pp },
            GatherInput {
                projections: Some(&[0.0; 8]),
                ..base
            }
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            GatherParams {
                probes: 5000,
                bits_per_table: 16,
                ..pp
            },
            GatherInput {
                projections: Some(&[0.0; 32]),
                ..base
            }
        ),
        Status::InvalidArgument
    );
    let mut pr = [0.5f32; 8];
    assert_eq!(
        st(
            pp,
            GatherInput {
                projections: Some(&pr[..7]),
                ..base
            }
        ),
        Status::BufferTooSmall
    );
    pr[5] = f32::NAN;
    assert_eq!(
        st(
            pp,
            GatherInput {
                projections: Some(&pr),
                ..base
            }
        ),
        Status::NonFinite
    );
    // forced ids
    let fo_bad = [0usize, 3];
    assert_eq!(
        st(
            GatherParams::default(),
            GatherInput {
                forced_offsets: Some(&fo_bad),
                forced_ids: &[1, 2],
                ..base
            }
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            GatherParams::default(),
            GatherInput {
                forced_offsets: Some(&[0, 1]),
                forced_ids: &[100],
                ..base
            }
        ),
        Status::IndexOutOfRange
    );
    assert_eq!(
        st(
            GatherParams::default(),
            GatherInput {
                forced_offsets: Some(&[1, 1]),
                forced_ids: &[1],
                ..base
            }
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            GatherParams::default(),
            GatherInput {
                forced_offsets: None,
                forced_ids: &[1],
                ..base
            }
        ),
        Status::InvalidArgument
    );
    // After errors, a valid call still works (scratch intact).
    tabs.gather(&GatherParams::default(), &base, false, &mut out)
        .unwrap();
    let o = Oracle::new(&codes, 100, 2, 4, 0, 0);
    assert_eq!(
        split(&out, 1),
        o.gather(&GatherParams::default(), &qc, 1, None, None).0
    );
}
