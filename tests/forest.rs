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

#[test]
fn build_is_deterministic_and_well_formed() {
    let (n, dim, stride) = (3000, 24, 27);
    let w = layer(n, dim, stride, 4);
    let p = ForestParams {
        trees: 5,
        leaf_size: 40,
        seed: 9,
        threads: 1,
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
