//! The hashing forest (issue 14, item 4): structure and determinism of the
//! build (every thread count), the per-sample candidate sets and the capped
//! union against plain oracles written here from the documentation, rebuild,
//! save/load round trips and corrupted files; and a quality check on a
//! clustered layer (printed).

use std::collections::BTreeMap;

use lshk::forest::{union_capped, Forest, ForestParams, ForestResult};
use lshk::rng::SplitMix64;
use lshk::Status;

fn layer(rows: usize, dim: usize, stride: usize, seed: u64) -> Vec<f32> {
    let l = lshk::data::structured_layer(rows, dim, 16, seed);
    let mut w = vec![0f32; rows * stride];
    for r in 0..rows {
        w[r * stride..r * stride + dim].copy_from_slice(&l.w[r * dim..(r + 1) * dim]);
    }
    w
}

fn side(h: &[f32], o: f64, x: &[f32]) -> bool {
    let mut s = 0f64;
    for (&a, &b) in h.iter().zip(x) {
        s += a as f64 * b as f64;
    }
    s > o
}

fn check_structure(f: &Forest, w: &[f32], stride: usize) {
    let (n, dim, b) = (f.rows(), f.dim(), f.params().leaf_size);
    for t in 0..f.params().trees as usize {
        let (perm, nodes) = f.tree(t);
        let mut sorted = perm.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n as u32).collect::<Vec<_>>());
        for (i, &(s, e, l, r)) in nodes.iter().enumerate() {
            if l == u32::MAX {
                assert!(e - s < b, "leaf {i} holds {} >= B", e - s);
                assert!(f.plane(t, i).is_none());
                continue;
            }
            assert!(e - s >= b);
            let (h, o) = f.plane(t, i).unwrap();
            let (ln, rn) = (nodes[l as usize], nodes[r as usize]);
            assert_eq!((ln.0, ln.1, rn.0, rn.1), (s, ln.1, ln.1, e));
            // a non-degenerate split: each class on the side of its child
            if h.iter().any(|&v| v != 0.0) {
                for &id in &perm[s as usize..e as usize] {
                    let row = &w[id as usize * stride..id as usize * stride + dim];
                    let left = perm[ln.0 as usize..ln.1 as usize].contains(&id);
                    assert_eq!(side(h, o, row), left, "tree {t} node {i} class {id}");
                }
            }
        }
    }
}

/// The documented candidate rule, written plainly.
fn oracle_query(f: &Forest, w: &[f32], stride: usize, x: &[f32], q: usize) -> Vec<u32> {
    let dim = f.dim();
    let pool = oracle_pool(f, x, q);
    let mut scored: Vec<(f64, u32)> = pool
        .into_iter()
        .map(|id| {
            let r = &w[id as usize * stride..id as usize * stride + dim];
            let dot: f64 = r.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let nn: f64 = r.iter().map(|&a| a as f64 * a as f64).sum();
            (if nn > 0.0 { dot / nn.sqrt() } else { 0.0 }, id)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut ids: Vec<u32> = scored.iter().take(q).map(|p| p.1).collect();
    ids.sort_unstable();
    ids
}

/// The pooled classes of the trees' walks for `x` (before the cosine cut).
fn oracle_pool(f: &Forest, x: &[f32], q: usize) -> std::collections::BTreeSet<u32> {
    let mut pool = std::collections::BTreeSet::new();
    for t in 0..f.params().trees as usize {
        let (perm, nodes) = f.tree(t);
        let (mut node, mut parent) = (0usize, 0usize);
        let range = loop {
            let (s, e, l, r) = nodes[node];
            if ((e - s) as usize) < q {
                let p = nodes[parent];
                break (p.0, p.1);
            }
            if l == u32::MAX {
                break (s, e);
            }
            let (h, o) = f.plane(t, node).unwrap();
            parent = node;
            node = if side(h, o, x) {
                l as usize
            } else {
                r as usize
            };
        };
        pool.extend(perm[range.0 as usize..range.1 as usize].iter().copied());
    }
    pool
}

#[test]
fn build_is_deterministic_and_well_formed() {
    let (n, dim, stride) = (3000, 24, 27);
    let w = layer(n, dim, stride, 4);
    let p = ForestParams {
        trees: 5,
        leaf_size: 40,
        seed: 9,
        threads: 1,
        normalize_rows: false,
    };
    let f1 = Forest::build(&w, n, dim, stride, &p).unwrap();
    check_structure(&f1, &w, stride);
    for threads in [2u32, 3, 0] {
        let f = Forest::build(&w, n, dim, stride, &ForestParams { threads, ..p }).unwrap();
        assert!(f.tree(0) == f1.tree(0) && f.tree(4) == f1.tree(4));
        for t in 0..5 {
            for i in 0..f.nodes(t) {
                assert_eq!(f.plane(t, i), f1.plane(t, i));
            }
        }
    }
    let other = Forest::build(&w, n, dim, stride, &ForestParams { seed: 10, ..p }).unwrap();
    assert!(other.tree(0) != f1.tree(0));
    // golden: the first tree's first split draws (seed 9, tree 0)
    let mut r = SplitMix64::new(9 ^ 0x9E37_79B9_7F4A_7C15);
    let i = r.below(n as u64) as usize;
    let mut j = r.below(n as u64 - 1) as usize;
    j += (j >= i) as usize;
    let (h, o) = f1.plane(0, 0).unwrap();
    let (a, b) = (
        &w[i * stride..i * stride + dim],
        &w[j * stride..j * stride + dim],
    );
    let mut oo = 0f64;
    for k in 0..dim {
        assert_eq!(h[k], (a[k] as f64 - b[k] as f64) as f32);
        oo += (a[k] as f64 * a[k] as f64 - b[k] as f64 * b[k] as f64) / 2.0;
    }
    assert_eq!(o.to_bits(), oo.to_bits());
    // duplicates: every draw one-sided -> halving; still leaves < B
    let dup = vec![0.5f32; 200 * 4];
    let fd = Forest::build(
        &dup,
        200,
        4,
        4,
        &ForestParams {
            trees: 2,
            leaf_size: 8,
            seed: 1,
            threads: 1,
            normalize_rows: false,
        },
    )
    .unwrap();
    check_structure(&fd, &dup, 4);
}

#[test]
fn query_and_union_equal_the_oracles() {
    let (n, dim, stride) = (2500, 16, 16);
    let w = layer(n, dim, stride, 7);
    let f = Forest::build(
        &w,
        n,
        dim,
        stride,
        &ForestParams {
            trees: 6,
            leaf_size: 30,
            seed: 3,
            threads: 2,
            normalize_rows: false,
        },
    )
    .unwrap();
    let nx = 20;
    let mut r = SplitMix64::new(2);
    let xs = 19;
    let x: Vec<f32> = (0..nx * xs).map(|_| r.next_normal() as f32).collect();
    // training moves W: query with a perturbed W
    let w2: Vec<f32> = w
        .iter()
        .map(|v| v + 0.01 * r.next_normal() as f32)
        .collect();
    for q in [1u32, 5, 29, 30, 64, 400, 5000] {
        let mut out = ForestResult::default();
        f.query(&w2, stride, &x, nx, xs, q, &mut out).unwrap();
        assert_eq!(out.offsets.len(), nx + 1);
        for i in 0..nx {
            let want = oracle_query(&f, &w2, stride, &x[i * xs..i * xs + dim], q as usize);
            assert_eq!(
                &out.ids[out.offsets[i]..out.offsets[i + 1]],
                &want[..],
                "q {q} sample {i}"
            );
        }
        for cap in [0usize, 1, 10, 100, 100_000] {
            for seed in [0u64, 5] {
                let (mut ids, mut counts) = (Vec::new(), Vec::new());
                f.union(&out, cap, seed, &mut ids, &mut counts).unwrap();
                // oracle: counts, keys ln(u)/c, the cap largest (ties: smaller id)
                let mut cnt: BTreeMap<u32, u32> = BTreeMap::new();
                for &id in &out.ids {
                    *cnt.entry(id).or_insert(0) += 1;
                }
                let mut all: Vec<(f64, u32)> = cnt
                    .iter()
                    .map(|(&j, &c)| {
                        let u = SplitMix64::new(
                            seed ^ (j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                        )
                        .next_f64_open();
                        (u.ln() / c as f64, j)
                    })
                    .collect();
                if cap > 0 && all.len() > cap {
                    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    all.truncate(cap);
                }
                let mut want: Vec<u32> = all.iter().map(|p| p.1).collect();
                want.sort_unstable();
                assert_eq!(ids, want, "q {q} cap {cap} seed {seed}");
                let wc: Vec<u32> = want.iter().map(|j| cnt[j]).collect();
                assert_eq!(counts, wc);
            }
        }
    }
    // the capped union follows the counts: frequent classes are kept more
    let ids: Vec<u32> = (0..1000u32)
        .flat_map(|j| std::iter::repeat_n(j, if j < 500 { 9 } else { 1 }))
        .collect();
    let mut kept_hi = 0;
    for seed in 0..50u64 {
        let (mut o, mut c) = (Vec::new(), Vec::new());
        union_capped(1000, &ids, 100, seed, &mut o, &mut c).unwrap();
        assert_eq!(o.len(), 100);
        kept_hi += o.iter().filter(|&&j| j < 500).count();
    }
    assert!(kept_hi > 50 * 80, "frequent classes kept {kept_hi} of 5000");
}

#[test]
fn errors_rebuild_save_load() {
    let (n, dim) = (600, 8);
    let w = layer(n, dim, dim, 1);
    let p = ForestParams {
        trees: 3,
        leaf_size: 16,
        seed: 2,
        threads: 1,
        normalize_rows: false,
    };
    let st = |r: lshk::Result<Forest>| r.unwrap_err().status;
    assert_eq!(
        st(Forest::build(&w, 1, dim, dim, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(Forest::build(&w, n, 0, dim, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(Forest::build(&w, n, dim, dim - 1, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(Forest::build(&w, n + 1, dim, dim, &p)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(Forest::build(
            &w,
            n,
            dim,
            dim,
            &ForestParams { trees: 0, ..p }
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(Forest::build(
            &w,
            n,
            dim,
            dim,
            &ForestParams { leaf_size: 1, ..p }
        )),
        Status::InvalidArgument
    );
    let mut wn = w.clone();
    wn[5] = f32::NAN;
    assert_eq!(st(Forest::build(&wn, n, dim, dim, &p)), Status::NonFinite);
    let mut f = Forest::build(&w, n, dim, dim, &p).unwrap();
    let x: Vec<f32> = w[..3 * dim].to_vec();
    let mut out = ForestResult::default();
    assert_eq!(
        f.query(&w, dim, &x, 3, dim, 0, &mut out)
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    assert_eq!(
        f.query(&w, dim, &x, 4, dim, 5, &mut out)
            .unwrap_err()
            .status,
        Status::BufferTooSmall
    );
    let mut xn = x.clone();
    xn[1] = f32::INFINITY;
    assert_eq!(
        f.query(&w, dim, &xn, 3, dim, 5, &mut out)
            .unwrap_err()
            .status,
        Status::NonFinite
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    assert_eq!(
        union_capped(10, &[3, 10], 0, 0, &mut a, &mut b)
            .unwrap_err()
            .status,
        Status::IndexOutOfRange
    );
    // a class queried with its own row finds itself (its leaf is pooled)
    f.query(&w, dim, &x, 3, dim, 8, &mut out).unwrap();
    for i in 0..3u32 {
        assert!(out.ids[out.offsets[i as usize]..out.offsets[i as usize + 1]].contains(&i));
    }
    // rebuild: equal to a build on the new W; a failed rebuild changes nothing
    let w2: Vec<f32> = w.iter().map(|v| v * 1.5 - 0.1).collect();
    let before = f.clone();
    assert_eq!(
        f.rebuild(&wn, dim, None).unwrap_err().status,
        Status::NonFinite
    );
    assert!(f == before);
    f.rebuild(&w2, dim, None).unwrap();
    assert!(f == Forest::build(&w2, n, dim, dim, &p).unwrap());
    f.rebuild(&w2, dim, Some(77)).unwrap();
    assert!(f == Forest::build(&w2, n, dim, dim, &ForestParams { seed: 77, ..p }).unwrap());
    // save / load
    let dir = std::env::temp_dir().join(format!("lshk-forest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.lshk");
    f.save(&path).unwrap();
    let g = Forest::load(&path).unwrap();
    assert_eq!(g.params().seed, 77);
    assert!(g.tree(2) == f.tree(2));
    let (mut o1, mut o2) = (ForestResult::default(), ForestResult::default());
    f.query(&w2, dim, &x, 3, dim, 20, &mut o1).unwrap();
    g.query(&w2, dim, &x, 3, dim, 20, &mut o2).unwrap();
    assert_eq!(o1, o2);
    // corrupted: a flipped byte fails the checksum; an index file is refused
    let mut bytes = std::fs::read(&path).unwrap();
    let k = bytes.len() - 9;
    bytes[k] ^= 0x40;
    let bad = dir.join("bad.lshk");
    std::fs::write(&bad, &bytes).unwrap();
    assert_eq!(
        Forest::load(&bad).unwrap_err().status,
        Status::BadFileFormat
    );
    std::fs::write(&bad, b"not a forest").unwrap();
    assert_eq!(
        Forest::load(&bad).unwrap_err().status,
        Status::BadFileFormat
    );
    assert_eq!(
        Forest::load(&dir.join("missing")).unwrap_err().status,
        Status::IoError
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn forest_finds_the_closest_classes_on_a_clustered_layer() {
    let (n, dim) = (20_000, 32);
    let w = layer(n, dim, dim, 11);
    let f = Forest::build(
        &w,
        n,
        dim,
        dim,
        &ForestParams {
            trees: 8,
            leaf_size: 64,
            seed: 1,
            threads: 0,
            normalize_rows: false,
        },
    )
    .unwrap();
    let nx = 100;
    let mut r = SplitMix64::new(5);
    // samples near class rows
    let x: Vec<f32> = (0..nx)
        .flat_map(|i| {
            let y = (i * 197) % n;
            w[y * dim..(y + 1) * dim]
                .iter()
                .map(|&v| v + 0.05 * r.next_normal() as f32)
                .collect::<Vec<_>>()
        })
        .collect();
    let q = 100usize;
    let mut out = ForestResult::default();
    f.query(&w, dim, &x, nx, dim, q as u32, &mut out).unwrap();
    // recall of the exact top-q by cosine
    let mut hit = 0usize;
    for i in 0..nx {
        let xi = &x[i * dim..(i + 1) * dim];
        let mut all: Vec<(f64, u32)> = (0..n as u32)
            .map(|id| {
                let rw = &w[id as usize * dim..(id as usize + 1) * dim];
                let dot: f64 = rw.iter().zip(xi).map(|(&a, &b)| a as f64 * b as f64).sum();
                let nn: f64 = rw.iter().map(|&a| a as f64 * a as f64).sum();
                (dot / nn.sqrt(), id)
            })
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let got = &out.ids[out.offsets[i]..out.offsets[i + 1]];
        hit += all[..q]
            .iter()
            .filter(|p| got.binary_search(&p.1).is_ok())
            .count();
    }
    let recall = hit as f64 / (nx * q) as f64;
    println!("forest: recall of the exact top-{q} by cosine {recall:.3} (n {n}, L 8, B 64)");
    assert!(recall > 0.3, "recall {recall}");
}

/// Unit rows (`normalize_rows`): the documented planes (bisector of the
/// two drawn unit rows, offset exactly 0), a well-formed forest, the same
/// for every thread count and every tier the CPU has (nothing in the build
/// is vectorised), and the option kept by rebuild and by save / load.
#[test]
fn unit_row_build_is_deterministic_and_well_formed() {
    let (n, dim, stride) = (2000, 20, 23);
    let mut w = layer(n, dim, stride, 12);
    // spread the norms and add a zero row
    for r in 0..n {
        let s = 1.0 + (r % 7) as f32 * 3.0;
        w[r * stride..r * stride + dim]
            .iter_mut()
            .for_each(|v| *v *= s);
    }
    w[5 * stride..5 * stride + dim].fill(0.0);
    let p = ForestParams {
        trees: 4,
        leaf_size: 24,
        seed: 21,
        threads: 1,
        normalize_rows: true,
    };
    let f1 = Forest::build(&w, n, dim, stride, &p).unwrap();
    assert!(f1.params().normalize_rows);
    check_structure(&f1, &w, stride);
    for t in 0..4 {
        for i in 0..f1.nodes(t) {
            if let Some((_, o)) = f1.plane(t, i) {
                assert_eq!(o.to_bits(), 0f64.to_bits(), "tree {t} node {i}");
            }
        }
    }
    // golden: the first split of tree 0
    let mut r = SplitMix64::new(21 ^ 0x9E37_79B9_7F4A_7C15);
    let i = r.below(n as u64) as usize;
    let mut j = r.below(n as u64 - 1) as usize;
    j += (j >= i) as usize;
    let inv = |k: usize| {
        let nn: f64 = w[k * stride..k * stride + dim]
            .iter()
            .map(|&v| v as f64 * v as f64)
            .sum();
        if nn > 0.0 {
            1.0 / nn.sqrt()
        } else {
            0.0
        }
    };
    let (h, _) = f1.plane(0, 0).unwrap();
    for k in 0..dim {
        let want = (w[i * stride + k] as f64 * inv(i) - w[j * stride + k] as f64 * inv(j)) as f32;
        assert_eq!(h[k].to_bits(), want.to_bits());
    }
    // a raw-row forest with the same seed differs
    let raw = ForestParams {
        normalize_rows: false,
        ..p
    };
    assert!(Forest::build(&w, n, dim, stride, &raw).unwrap() != f1);
    // every thread count and tier: the same forest
    let cap = lshk::isa::active();
    for isa in lshk::isa::Isa::supported() {
        lshk::isa::set_max(isa);
        for threads in [1u32, 2, 3, 0] {
            let f = Forest::build(&w, n, dim, stride, &ForestParams { threads, ..p }).unwrap();
            for t in 0..4 {
                assert!(
                    f.tree(t) == f1.tree(t),
                    "{isa:?} threads {threads} tree {t}"
                );
                for i in 0..f.nodes(t) {
                    assert_eq!(f.plane(t, i), f1.plane(t, i));
                }
            }
        }
    }
    lshk::isa::set_max(cap);
    // the queries follow the same rule (oracle)
    let mut g = SplitMix64::new(3);
    let nx = 12;
    let x: Vec<f32> = (0..nx * dim).map(|_| g.next_normal() as f32).collect();
    for q in [1u32, 10, 40, 300] {
        let mut out = ForestResult::default();
        f1.query(&w, stride, &x, nx, dim, q, &mut out).unwrap();
        for s in 0..nx {
            let want = oracle_query(&f1, &w, stride, &x[s * dim..(s + 1) * dim], q as usize);
            assert_eq!(&out.ids[out.offsets[s]..out.offsets[s + 1]], &want[..]);
        }
    }
    // rebuild keeps the option; save / load keeps it (FPARAMS version 2)
    let mut f2 = f1.clone();
    f2.rebuild(&w, stride, Some(5)).unwrap();
    assert!(f2.params().normalize_rows);
    assert!(f2 == Forest::build(&w, n, dim, stride, &ForestParams { seed: 5, ..p }).unwrap());
    let dir = std::env::temp_dir().join(format!("lshk-forest-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("u.lshk");
    f1.save(&path).unwrap();
    let l = Forest::load(&path).unwrap();
    assert!(l.params().normalize_rows);
    for t in 0..4 {
        assert!(l.tree(t) == f1.tree(t));
        for i in 0..l.nodes(t) {
            assert_eq!(l.plane(t, i), f1.plane(t, i));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Session 9's failure, reduced: when a few rows' norms grow 30x (as
/// training does to frequent classes), perpendicular bisectors of the raw
/// rows split lopsidedly (a big row against a normal one puts nearly every
/// class on one side), so the walk's "first node with fewer than Q
/// classes" is often a sliver whose parent is huge, and a sample's pool
/// explodes. The unit-row trees do not see norms: their pools stay small.
#[test]
fn unit_row_trees_stay_balanced_where_raw_row_trees_do_not() {
    let (n, dim) = (8000, 32);
    let mut w = layer(n, dim, dim, 31);
    let mut g = SplitMix64::new(8);
    // 3 % of the rows (the frequent classes) grow 30x
    let big: Vec<usize> = (0..n).filter(|_| g.below(100) < 3).collect();
    for &r in &big {
        w[r * dim..(r + 1) * dim]
            .iter_mut()
            .for_each(|v| *v *= 30.0);
    }
    let q = 64usize;
    let nx = 200;
    // samples near class rows, half of them of the frequent classes (whose
    // embeddings grow with them)
    let x: Vec<f32> = (0..nx)
        .flat_map(|i| {
            let y = if i % 2 == 0 {
                big[(i * 7) % big.len()]
            } else {
                (i * 389) % n
            };
            let row = w[y * dim..(y + 1) * dim].to_vec();
            let nn = row.iter().map(|&v| v * v).sum::<f32>().sqrt();
            row.iter()
                .map(|&v| v + 0.05 * nn / (dim as f32).sqrt() * g.next_normal() as f32)
                .collect::<Vec<_>>()
        })
        .collect();
    let stats = |unit: bool| {
        let f = Forest::build(
            &w,
            n,
            dim,
            dim,
            &ForestParams {
                trees: 4,
                leaf_size: 32,
                seed: 2,
                threads: 0,
                normalize_rows: unit,
            },
        )
        .unwrap();
        // mean pool per sample (frequent-class samples, the others), and
        // the share of slivers (a child with < 2 % of the classes) among
        // the splits of nodes holding at least 4 B classes
        let pools: Vec<usize> = (0..nx)
            .map(|i| oracle_pool(&f, &x[i * dim..(i + 1) * dim], q).len())
            .collect();
        let mean =
            |r: usize| pools.iter().skip(r).step_by(2).sum::<usize>() as f64 / (nx / 2) as f64;
        let (mut sliver, mut cnt) = (0usize, 0usize);
        for t in 0..4 {
            let (_, nodes) = f.tree(t);
            for &(s, e, l, r) in &nodes {
                if l != u32::MAX && e - s >= 128 {
                    let (a, b) = (nodes[l as usize], nodes[r as usize]);
                    let (a, b) = ((a.1 - a.0) as f64, (b.1 - b.0) as f64);
                    sliver += (a.min(b) < 0.02 * (a + b)) as usize;
                    cnt += 1;
                }
            }
        }
        (mean(0), mean(1), sliver as f64 / cnt as f64)
    };
    let (raw_big, raw_rest, raw_sl) = stats(false);
    let (unit_big, unit_rest, unit_sl) = stats(true);
    println!(
        "mean pool per sample (frequent / other classes): raw rows {raw_big:.0} / \
         {raw_rest:.0}, unit rows {unit_big:.0} / {unit_rest:.0}; slivers among the \
         splits: raw {raw_sl:.3}, unit {unit_sl:.3}"
    );
    assert!(unit_big * 4.0 < raw_big, "{unit_big} vs {raw_big}");
    assert!(unit_big < 8.0 * q as f64 && unit_rest < 8.0 * q as f64);
    assert!(unit_rest <= raw_rest * 1.25, "{unit_rest} vs {raw_rest}");
    assert!(unit_sl * 3.0 < raw_sl, "{unit_sl} vs {raw_sl}");
}
/// W of the committed version-1 file `tests/golden/forest_v1.lshk`.
fn golden_w() -> Vec<f32> {
    (0..40 * 3)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect()
}

/// Rewrites a forest file with its sections as read, `FPARAMS` replaced.
fn with_fparams(from: &std::path::Path, to: &std::path::Path, rec: &[u64]) {
    use lshk::format::{self, Container, SectionOut};
    let c = Container::open(from, lshk::forest::KIND_FOREST).unwrap();
    let names = ["FCOUNTS", "FNODES", "FPERM", "FPLANEOF", "FPLANES", "FOFFS"];
    let mut secs = vec![SectionOut::new("FPARAMS", vec![format::as_bytes(rec)])];
    for nm in names {
        secs.push(SectionOut::new(nm, vec![c.section(nm).unwrap()]));
    }
    format::write_file(to, lshk::forest::KIND_FOREST, &secs).unwrap();
}

/// Files from before `normalize_rows` (FPARAMS version 1, 7 values) still
/// load, as raw-row forests: a file written by the library before the
/// option (committed) and one written now (raw-row forests keep the
/// version-1 record). Version-2 records are the unit-row forests'; with
/// unknown flag bits, a missing flags value, a non-zero split offset or an
/// unknown version they are refused (BadFileFormat).
#[test]
fn forest_files_old_and_new_versions() {
    let dir = std::env::temp_dir().join(format!("lshk-forest-ver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the committed version-1 file, written through the C ABI by the
    // library at 65d9fce (before the option): 40 x 3, 2 trees, leaf 4, seed 9
    let wo = golden_w();
    let old = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/forest_v1.lshk");
    let fo = Forest::load(&old).unwrap();
    assert!(!fo.params().normalize_rows);
    let p = ForestParams {
        trees: 2,
        leaf_size: 4,
        seed: 9,
        threads: 0,
        normalize_rows: false,
    };
    let want = Forest::build(&wo, 40, 3, 3, &p).unwrap();
    assert!(
        fo == want,
        "the version-1 golden file loads as the same forest"
    );
    // a raw-row forest is written byte for byte as before
    let path = dir.join("v1.lshk");
    want.save(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&old).unwrap());
    // a unit-row forest: version 2 with flags 1
    let pu = ForestParams {
        normalize_rows: true,
        ..p
    };
    let fu = Forest::build(&wo, 40, 3, 3, &pu).unwrap();
    let pathu = dir.join("v2.lshk");
    fu.save(&pathu).unwrap();
    let c = lshk::format::Container::open(&pathu, lshk::forest::KIND_FOREST).unwrap();
    let rec: &[u64] = lshk::format::cast_slice(c.section("FPARAMS").unwrap(), "FPARAMS").unwrap();
    assert_eq!(rec, &[2u64, 40, 3, 2, 4, 9, 2, 1]);
    drop(c);
    let gu = Forest::load(&pathu).unwrap();
    assert!(gu == fu && gu.params().normalize_rows);
    // mutants (well-formed containers, bad records)
    let m = dir.join("m.lshk");
    let refused = |from: &std::path::Path, rec: &[u64]| {
        with_fparams(from, &m, rec);
        let e = Forest::load(&m).unwrap_err();
        assert_eq!(e.status, Status::BadFileFormat, "{rec:?}: {e}");
    };
    refused(&pathu, &[2, 40, 3, 2, 4, 9, 2, 3]); // unknown flag bit
    refused(&pathu, &[2, 40, 3, 2, 4, 9, 2, 1 << 63]);
    refused(&pathu, &[2, 40, 3, 2, 4, 9, 2]); // no flags
    refused(&pathu, &[3, 40, 3, 2, 4, 9, 2, 1]); // unknown version
    refused(&old, &[2, 40, 3, 2, 4, 9, 2, 1]); // raw planes: offsets not 0
                                               // accepted: a version-2 record without the flag is a raw-row forest,
                                               // and a unit-row forest's planes read as version 1 are a valid raw one
    with_fparams(&old, &m, &[2, 40, 3, 2, 4, 9, 2, 0]);
    assert!(Forest::load(&m).unwrap() == want);
    with_fparams(&pathu, &m, &[1, 40, 3, 2, 4, 9, 2]);
    assert!(!Forest::load(&m).unwrap().params().normalize_rows);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// HF-A's adaptive allocation, written plainly from the module
/// documentation: the set of `oracle_query`, ranked by logit (dot + bias),
/// cut to the shortest prefix whose exp-sum reaches `tau` of the whole and
/// holds at least `min_keep`; ascending.
#[allow(clippy::too_many_arguments)]
fn oracle_trim(
    f: &Forest,
    w: &[f32],
    stride: usize,
    bias: Option<&[f32]>,
    x: &[f32],
    q: usize,
    tau: f32,
    min_keep: usize,
) -> Vec<u32> {
    let dim = f.dim();
    let set = oracle_query(f, w, stride, x, q);
    if tau == 0.0 {
        return set;
    }
    let mut z: Vec<(f64, u32)> = set
        .iter()
        .map(|&id| {
            let r = &w[id as usize * stride..id as usize * stride + dim];
            let dot: f64 = r.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum();
            (dot + bias.map_or(0.0, |b| b[id as usize] as f64), id)
        })
        .collect();
    z.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let e: Vec<f64> = z.iter().map(|p| (p.0 - z[0].0).exp()).collect();
    let total: f64 = e.iter().sum();
    let mut keep = z.len();
    let mut acc = 0.0;
    for (i, v) in e.iter().enumerate() {
        acc += v;
        if i + 1 >= min_keep && acc >= tau as f64 * total {
            keep = i + 1;
            break;
        }
    }
    let mut ids: Vec<u32> = z[..keep].iter().map(|p| p.1).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn adaptive_allocation_equals_its_oracle_and_nests() {
    let (n, dim, stride) = (3000, 24, 25);
    // Rows scaled up so that the logits are peaked enough to trim.
    let w: Vec<f32> = layer(n, dim, stride, 11).iter().map(|v| v * 6.0).collect();
    let mut r = SplitMix64::new(5);
    let bias: Vec<f32> = (0..n).map(|_| r.next_normal() as f32).collect();
    let f = Forest::build(
        &w,
        n,
        dim,
        stride,
        &ForestParams {
            trees: 4,
            leaf_size: 16,
            seed: 9,
            threads: 1,
            normalize_rows: true,
        },
    )
    .unwrap();
    let nx = 24;
    let x: Vec<f32> = (0..nx * dim).map(|_| r.next_normal() as f32).collect();
    let q = 200u32;
    let mut full = ForestResult::default();
    f.query(&w, stride, &x, nx, dim, q, &mut full).unwrap();
    let (mut sizes_lo, mut sizes_hi) = (0usize, 0usize);
    for bias in [None, Some(&bias[..])] {
        let mut prev: Option<ForestResult> = None;
        for tau in [0.0f32, 0.5, 0.9, 0.99, 1.0] {
            for min_keep in [1u32, 10] {
                let mut out = ForestResult::default();
                f.query_confident(&w, stride, bias, &x, nx, dim, q, tau, min_keep, &mut out)
                    .unwrap();
                for i in 0..nx {
                    let got = &out.ids[out.offsets[i]..out.offsets[i + 1]];
                    let xi = &x[i * dim..(i + 1) * dim];
                    let want =
                        oracle_trim(&f, &w, stride, bias, xi, q as usize, tau, min_keep as usize);
                    assert_eq!(got, &want[..], "tau {tau} min_keep {min_keep} sample {i}");
                    assert!(got.len() >= (min_keep as usize).min(q as usize));
                    // every trimmed set is a subset of the whole set
                    let whole = &full.ids[full.offsets[i]..full.offsets[i + 1]];
                    assert!(got.iter().all(|id| whole.binary_search(id).is_ok()));
                    if tau == 0.0 {
                        assert_eq!(got, whole);
                    }
                }
                if min_keep == 1 {
                    // a larger tau never keeps fewer classes (nested prefixes)
                    if let Some(p) = &prev {
                        for i in 0..nx {
                            let (a, b) = (
                                &p.ids[p.offsets[i]..p.offsets[i + 1]],
                                &out.ids[out.offsets[i]..out.offsets[i + 1]],
                            );
                            assert!(a.iter().all(|id| b.binary_search(id).is_ok()));
                        }
                    }
                    if tau == 0.5 {
                        sizes_lo += out.ids.len();
                    }
                    if tau == 0.99 {
                        sizes_hi += out.ids.len();
                    }
                    if tau > 0.0 {
                        prev = Some(out);
                    }
                }
            }
        }
    }
    // The layer is peaked enough that the trim does something.
    assert!(
        sizes_lo < sizes_hi && sizes_hi < 2 * full.ids.len(),
        "{sizes_lo} {sizes_hi}"
    );
    // Out-of-domain thresholds are refused.
    let mut out = ForestResult::default();
    for bad in [-0.1f32, 1.01, f32::NAN, f32::INFINITY] {
        let e = f
            .query_confident(&w, stride, None, &x, nx, dim, q, bad, 1, &mut out)
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
    }
    let e = f
        .query_confident(
            &w,
            stride,
            Some(&bias[..n - 1]),
            &x,
            nx,
            dim,
            q,
            0.5,
            1,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
}
