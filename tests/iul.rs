//! IUL (learned SimHash planes): gradient against finite differences,
//! the batched f32 gradient against the f64 oracle, pair collection
//! against a set-based oracle, balancing, determinism, the loss going
//! down, the index-level training (save/load of the trained planes), and
//! bad inputs; the same checks for the collision loss, `train_with`'s
//! options (defaults = `train`, the per-epoch hook, the convergence
//! tolerance).

use std::collections::HashSet;

use lshk::index::{Family, IndexParams, Transform};
use lshk::iul::{self, IulData, IulParams, IulReport, IulShape, Pairs};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};
use lshk::{Index, SimHash, Status};

fn normals(n: usize, scale: f64, r: &mut SplitMix64) -> Vec<f64> {
    (0..n).map(|_| r.next_normal() * scale).collect()
}

/// The f64 analytic gradient against central finite differences.
///
/// Tolerance: the central difference of step h has truncation error
/// `h²/6 · |f'''|` and rounding error about `2 ε |f| / h` (ε = 2^-53).
/// Along one coordinate θ_j, `f` is a mean of `softplus(s) − y s` with
/// `s = Σ_k tanh(θ_k·q) tanh(θ_k·w)`; every derivative of tanh, σ and
/// softplus used is at most 2 in magnitude and each differentiation of
/// `s` brings a factor of at most `2 x_max` (x_max: the largest |q_j|,
/// |w_j|), summed over at most 2 tanh factors, so
/// `|f'''| <= 8 · (4 x_max)^3` is a (loose) bound.
#[test]
fn gradient_matches_finite_differences_f64() {
    let mut r = SplitMix64::new(7);
    let (dim, bits, tables, n) = (5usize, 3usize, 2usize, 7usize);
    let planes = normals(bits * tables * dim, 0.7, &mut r);
    let xq = normals(n * dim, 1.0, &mut r);
    let xw = normals(n * dim, 1.0, &mut r);
    let y: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
    let (f0, g) = iul::loss_grad_f64(&planes, dim, bits, tables, &xq, &xw, &y);
    let xmax = xq.iter().chain(&xw).fold(0f64, |m, v| m.max(v.abs()));
    let h = 1e-5;
    let tol = h * h / 6.0 * 8.0 * (4.0 * xmax).powi(3) + 4.0 * f64::EPSILON * f0.abs() / h;
    let mut worst = 0f64;
    for j in 0..planes.len() {
        let mut p = planes.clone();
        p[j] = planes[j] + h;
        let fp = iul::loss_grad_f64(&p, dim, bits, tables, &xq, &xw, &y).0;
        p[j] = planes[j] - h;
        let fm = iul::loss_grad_f64(&p, dim, bits, tables, &xq, &xw, &y).0;
        let fd = (fp - fm) / (2.0 * h);
        let e = (fd - g[j]).abs();
        worst = worst.max(e);
        assert!(
            e <= tol,
            "coordinate {j}: analytic {} vs FD {fd} (tol {tol})",
            g[j]
        );
    }
    // The gradient is not trivially zero.
    assert!(g.iter().any(|v| v.abs() > 1e3 * tol));
    println!("max |FD - analytic| = {worst:.3e}, tol {tol:.3e}");
}

/// The batched f32 loss and gradient (SimHash::project on the active
/// tier, f32x8 multiply-adds) against the f64 oracle on the same f32
/// inputs. Tolerance from f32 rounding (u = 2^-24): a projection over dim
/// terms is off by at most `dim u Σ|θ||x|`, tanh and the K-term dot add a
/// few u each, and gradient entry (p, j) sums 2n products `G x`, so
/// `|Δgrad_pj| <= (dim + K + 2n + 16) u Σ_i (|xq_ij| + |xw_ij|) · c / n`,
/// with `c = 1 + max_k Σ_j |θ_kj| x_max` covering the error carried from
/// the projections into G (|G| <= 1/n before that).
#[test]
fn batched_f32_gradient_matches_f64_oracle() {
    let mut r = SplitMix64::new(11);
    for &(dim, bits, tables, n) in &[(1usize, 1u32, 1u32, 1usize), (9, 3, 2, 5), (33, 4, 5, 40)] {
        let k = bits as usize * tables as usize;
        let planes: Vec<f32> = (0..k * dim)
            .map(|_| (r.next_normal() * 0.3) as f32)
            .collect();
        let xq: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let xw: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let y: Vec<f32> = (0..n).map(|i| ((i * 7) % 3 == 0) as u32 as f32).collect();
        let mut g = vec![0f32; k * dim];
        let l = iul::loss_grad(&planes, dim, bits, tables, &xq, &xw, &y, &mut g).unwrap();
        let d = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let (l64, g64) = iul::loss_grad_f64(
            &d(&planes),
            dim,
            bits as usize,
            tables as usize,
            &d(&xq),
            &d(&xw),
            &d(&y),
        );
        let u = f32::EPSILON as f64 / 2.0;
        let xmax = xq.iter().chain(&xw).fold(0f32, |m, v| m.max(v.abs())) as f64;
        let th1 = planes
            .chunks(dim)
            .map(|p| p.iter().map(|v| v.abs() as f64).sum::<f64>())
            .fold(0f64, f64::max);
        let c = 1.0 + th1 * xmax;
        let loss_tol = (dim + bits as usize + 16) as f64 * u * c * k as f64;
        assert!((l - l64).abs() <= loss_tol, "loss {l} vs {l64}");
        for p in 0..k {
            for j in 0..dim {
                let s: f64 = (0..n)
                    .map(|i| (xq[i * dim + j].abs() + xw[i * dim + j].abs()) as f64)
                    .sum();
                let tol = (dim + bits as usize + 2 * n + 16) as f64 * u * s * c / n as f64;
                let (a, b) = (g[p * dim + j] as f64, g64[p * dim + j]);
                assert!(
                    (a - b).abs() <= tol,
                    "shape {dim}/{bits}/{tables}/{n} grad[{p},{j}] {a} vs {b} tol {tol}"
                );
            }
        }
    }
}

#[test]
fn loss_decreases_over_epochs() {
    // Positives: q and a slightly perturbed copy; negatives: q and an
    // unrelated vector that random planes often put in the same bucket.
    let mut r = SplitMix64::new(3);
    let (dim, bits, tables, n) = (16usize, 6u32, 4u32, 600usize);
    let mut xq = Vec::new();
    let mut xw = Vec::new();
    let mut y = Vec::new();
    for i in 0..n {
        let q: Vec<f32> = (0..dim).map(|_| r.next_normal() as f32).collect();
        if i % 2 == 0 {
            xw.extend(q.iter().map(|v| v + 0.8 * r.next_normal() as f32));
            y.push(1.0);
        } else {
            xw.extend(q.iter().map(|v| 0.3 * v + r.next_normal() as f32));
            y.push(0.0);
        }
        xq.extend(q);
    }
    let mut planes: Vec<f32> = SimHash::new(dim, bits, tables, 0, 5)
        .unwrap()
        .planes()
        .to_vec();
    let mut rng = SplitMix64::new(9);
    let losses = iul::adam_fit(
        &mut planes,
        dim,
        bits,
        tables,
        &xq,
        &xw,
        &y,
        0.02,
        6,
        64,
        &mut rng,
    )
    .unwrap();
    println!("losses per epoch: {losses:?}");
    assert_eq!(losses.len(), 7);
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[6] < 0.8 * losses[0], "{losses:?}");
    assert!(losses[1] < losses[0]);
}

struct Toy {
    rows: Vec<f32>,
    n_rows: usize,
    queries: Vec<f32>,
    n_q: usize,
    offs: Vec<usize>,
    labels: Vec<u32>,
    dim: usize,
}

fn toy(seed: u64, n_rows: usize, n_q: usize, dim: usize) -> Toy {
    let mut r = SplitMix64::new(seed);
    let rows: Vec<f32> = (0..n_rows * dim).map(|_| r.next_normal() as f32).collect();
    let mut queries = Vec::new();
    let mut offs = vec![0usize];
    let mut labels = Vec::new();
    for _ in 0..n_q {
        let nl = r.below(4) as usize; // 0..=3 labels, possibly none
        let mut q = vec![0f32; dim];
        for _ in 0..nl {
            let y = r.below(n_rows as u64) as u32;
            labels.push(y);
            for (a, b) in q.iter_mut().zip(&rows[y as usize * dim..]) {
                *a += b;
            }
        }
        for a in q.iter_mut() {
            *a += r.next_normal() as f32;
        }
        queries.extend(q);
        offs.push(labels.len());
    }
    Toy {
        rows,
        n_rows,
        queries,
        n_q,
        offs,
        labels,
        dim,
    }
}

impl Toy {
    fn data(&self) -> IulData<'_> {
        IulData {
            rows: &self.rows,
            n_rows: self.n_rows,
            row_stride: self.dim,
            queries: &self.queries,
            n_queries: self.n_q,
            q_stride: self.dim,
            label_offsets: &self.offs,
            labels: &self.labels,
        }
    }
}

/// The candidates of the toy's training queries `keep` selects (ids in
/// order), with the rows' and those queries' codes: a SimHash family of `bits` x `l` planes (`seed`), tables of
/// `2^rb` buckets over the toy's rows, one gather of those queries.
fn toy_candidates(
    t: &Toy,
    bits: u32,
    l: u32,
    rb: u32,
    seed: u64,
    keep: impl Fn(u32) -> bool,
) -> (Vec<u32>, GatherResult, Vec<u32>, Vec<u32>) {
    let fam = SimHash::new(t.dim, bits, l, 0, seed).unwrap();
    let mut rc = vec![0u32; t.n_rows * l as usize];
    fam.hash(&t.rows, t.n_rows, t.dim, &mut rc).unwrap();
    let tabs = Tables::build(&rc, t.n_rows, l, rb, 0, 1, 1).unwrap();
    let ids: Vec<u32> = (0..t.n_q as u32).filter(|&i| keep(i)).collect();
    let mut qb = Vec::new();
    for &i in &ids {
        qb.extend_from_slice(&t.queries[i as usize * t.dim..(i as usize + 1) * t.dim]);
    }
    let mut qc = vec![0u32; ids.len() * l as usize];
    fam.hash(&qb, ids.len(), t.dim, &mut qc).unwrap();
    let mut g = GatherResult::default();
    let input = GatherInput {
        codes: &qc,
        q: ids.len(),
        projections: None,
        forced_offsets: None,
        forced_ids: &[],
    };
    tabs.gather(&GatherParams::default(), &input, false, &mut g)
        .unwrap();
    (ids, g, rc, qc)
}

#[test]
fn pair_collection_matches_set_oracle() {
    let t = toy(21, 60, 30, 8);
    let (bits, l, rb) = (3u32, 2u32, 3u32);
    let (ids, g, rc, qc) = toy_candidates(&t, bits, l, rb, 4, |i| i % 3 != 1);
    let (t1, t2) = (0.5f32, -0.25f32);
    let got = iul::collect_pairs(&t.data(), t.dim, &ids, &g, t1, t2);

    // Oracle: S by sets of bucket collisions, dots in f64.
    let mut want = Pairs::default();
    let dot = |q: usize, r: usize| -> f64 {
        (0..t.dim)
            .map(|j| t.queries[q * t.dim + j] as f64 * t.rows[r * t.dim + j] as f64)
            .sum()
    };
    let mut ambiguous = 0;
    for (qi_pos, &qi) in ids.iter().enumerate() {
        let qi = qi as usize;
        let s: HashSet<u32> = (0..t.n_rows as u32)
            .filter(|&rr| {
                (0..l as usize).any(|tt| {
                    fold_code(rc[rr as usize * l as usize + tt], rb)
                        == fold_code(qc[qi_pos * l as usize + tt], rb)
                })
            })
            .collect();
        let labs: HashSet<u32> = t.labels[t.offs[qi]..t.offs[qi + 1]]
            .iter()
            .copied()
            .collect();
        for &y in &t.labels[t.offs[qi]..t.offs[qi + 1]] {
            let d = dot(qi, y as usize);
            ambiguous += ((d - t1 as f64).abs() < 1e-4) as u32;
            if !s.contains(&y) && d > t1 as f64 {
                want.pos.push((qi as u32, y));
            }
        }
        let mut sv: Vec<u32> = s.iter().copied().collect();
        sv.sort_unstable();
        for j in sv {
            let d = dot(qi, j as usize);
            ambiguous += ((d - t2 as f64).abs() < 1e-4) as u32;
            if !labs.contains(&j) && d < t2 as f64 {
                want.neg.push((qi as u32, j));
            }
        }
    }
    assert_eq!(
        ambiguous, 0,
        "a dot within 1e-4 of a threshold: pick another seed"
    );
    assert!(
        !want.pos.is_empty() && !want.neg.is_empty(),
        "the example exercises both sides"
    );
    assert_eq!(got, want);

    // Balancing: both sides cut to the smaller, subsets in order,
    // deterministic for a seed.
    let mut b1 = got.clone();
    iul::balance(&mut b1, 0, &mut SplitMix64::new(5));
    let m = got.pos.len().min(got.neg.len());
    assert_eq!((b1.pos.len(), b1.neg.len()), (m, m));
    let is_subseq = |sub: &[(u32, u32)], full: &[(u32, u32)]| {
        let mut it = full.iter();
        sub.iter().all(|x| it.any(|y| y == x))
    };
    assert!(is_subseq(&b1.pos, &got.pos) && is_subseq(&b1.neg, &got.neg));
    let mut b2 = got.clone();
    iul::balance(&mut b2, 0, &mut SplitMix64::new(5));
    assert_eq!(b1, b2);
    let mut b3 = got.clone();
    iul::balance(&mut b3, 2, &mut SplitMix64::new(5));
    assert_eq!((b3.pos.len(), b3.neg.len()), (2.min(m), 2.min(m)));
}

fn shape(dim: usize) -> IulShape {
    IulShape {
        dim,
        bits: 4,
        tables: 6,
        range_bits: 4,
        bucket_cap: 0,
        table_seed: 3,
    }
}

/// The starting planes of the training tests: a dense Gaussian SimHash
/// family of `sh`'s shape, seed 8.
fn seed_planes(sh: &IulShape) -> Vec<f32> {
    SimHash::new(sh.dim, sh.bits, sh.tables, 0, 8)
        .unwrap()
        .planes()
        .to_vec()
}

#[test]
fn train_is_deterministic_and_reports() {
    let t = toy(31, 200, 300, 12);
    let sh = shape(t.dim);
    let planes = seed_planes(&sh);
    let p = IulParams {
        rounds: 2,
        epochs: 3,
        batch: 32,
        t1: 0.0,
        t2: 0.0,
        validation_fraction: 0.2,
        ..Default::default()
    };
    let (a, ra) = iul::train(&planes, &sh, &t.data(), &p).unwrap();
    let (b, rb) = iul::train(&planes, &sh, &t.data(), &p).unwrap();
    assert_eq!(a, b);
    let bits = |r: &[iul::IulReport]| format!("{r:?}");
    assert_eq!(bits(&ra), bits(&rb));
    assert_eq!(ra.len(), 2);
    assert_ne!(a, planes, "training moved the planes");
    for r in &ra {
        println!("{r:?}");
        assert!(r.positives > 0 && r.positives == r.negatives);
        assert!(r.loss_after < r.loss_before, "{r:?}");
        assert!(r.mean_candidates_after.is_finite() && r.label_recall_after.is_finite());
    }
    // Consecutive rounds chain their validation metrics.
    assert_eq!(
        ra[1].label_recall_before.to_bits(),
        ra[0].label_recall_after.to_bits()
    );
    let (c, _) = iul::train(&planes, &sh, &t.data(), &IulParams { seed: 2, ..p }).unwrap();
    assert_ne!(a, c, "another seed, another result");
    // rounds = 0: planes unchanged, no reports.
    let (d, rd) = iul::train(&planes, &sh, &t.data(), &IulParams { rounds: 0, ..p }).unwrap();
    assert_eq!(d, planes);
    assert!(rd.is_empty());
}

#[test]
fn train_bad_inputs() {
    let t = toy(41, 50, 40, 6);
    let sh = shape(t.dim);
    let planes = seed_planes(&sh);
    let p = IulParams::default();
    let st = |pl: &[f32], s: &IulShape, d: &IulData<'_>, p: &IulParams| {
        iul::train(pl, s, d, p).unwrap_err().status
    };
    let d = t.data();
    assert_eq!(st(&planes[1..], &sh, &d, &p), Status::InvalidArgument);
    let mut nan = planes.clone();
    nan[3] = f32::NAN;
    assert_eq!(st(&nan, &sh, &d, &p), Status::NonFinite);
    for bad in [
        IulParams {
            learning_rate: 0.0,
            ..p
        },
        IulParams {
            learning_rate: f32::NAN,
            ..p
        },
        IulParams { batch: 0, ..p },
        IulParams {
            validation_fraction: 1.0,
            ..p
        },
        IulParams {
            validation_fraction: -0.1,
            ..p
        },
    ] {
        assert_eq!(
            st(&planes, &sh, &d, &bad),
            Status::InvalidArgument,
            "{bad:?}"
        );
    }
    assert_eq!(
        st(
            &planes,
            &sh,
            &d,
            &IulParams {
                t1: f32::INFINITY,
                ..p
            }
        ),
        Status::NonFinite
    );
    assert_eq!(
        st(
            &planes,
            &IulShape {
                range_bits: 0,
                ..sh
            },
            &d,
            &p
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            &planes,
            &IulShape {
                range_bits: 25,
                ..sh
            },
            &d,
            &p
        ),
        Status::InvalidArgument
    );
    let mut labels = t.labels.clone();
    labels[0] = t.n_rows as u32;
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                labels: &labels,
                ..d
            },
            &p
        ),
        Status::InvalidArgument
    );
    let mut offs = t.offs.clone();
    offs[0] = 1;
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                label_offsets: &offs,
                ..d
            },
            &p
        ),
        Status::InvalidArgument
    );
    let mut offs = t.offs.clone();
    offs[5] = offs[6] + 1;
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                label_offsets: &offs,
                ..d
            },
            &p
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                label_offsets: &t.offs[..t.n_q],
                ..d
            },
            &p
        ),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                labels: &t.labels[..t.labels.len() - 1],
                ..d
            },
            &p
        ),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                queries: &t.queries[1..],
                ..d
            },
            &p
        ),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(
            &planes,
            &sh,
            &IulData {
                q_stride: t.dim - 1,
                ..d
            },
            &p
        ),
        Status::InvalidArgument
    );
    assert_eq!(
        st(&planes, &sh, &IulData { n_queries: 0, ..d }, &p),
        Status::InvalidArgument
    );
    let mut q = t.queries.clone();
    q[7] = f32::NAN;
    assert_eq!(
        st(&planes, &sh, &IulData { queries: &q, ..d }, &p),
        Status::NonFinite
    );
}

fn index_fixture(family: Family, transform: Transform) -> (Index, Toy) {
    let t = toy(51, 400, 500, 16);
    let p = IndexParams {
        family,
        bits: 5,
        tables: 8,
        transform,
        seed: 3,
        ..Default::default()
    };
    let idx = Index::build(&t.rows, None, t.n_rows, t.dim, t.dim, &p, None).unwrap();
    (idx, t)
}

#[test]
fn index_train_iul_swaps_planes_and_round_trips() {
    for tr in [Transform::None, Transform::Mips] {
        let (mut idx, t) = index_fixture(Family::SimHash, tr);
        let before = idx.simhash().unwrap().planes().to_vec();
        let p = IulParams {
            rounds: 2,
            epochs: 2,
            batch: 64,
            ..Default::default()
        };
        let reps = idx
            .train_iul(&t.queries, t.n_q, t.dim, &t.offs, &t.labels, &p)
            .unwrap();
        assert_eq!(reps.len(), 2);
        for r in &reps {
            println!("{tr:?} {r:?}");
        }
        let after = idx.simhash().unwrap().planes().to_vec();
        assert_ne!(before, after);
        // The same training through the plain function gives the same planes.
        let mut again = index_fixture(Family::SimHash, tr).0;
        again
            .train_iul(&t.queries, t.n_q, t.dim, &t.offs, &t.labels, &p)
            .unwrap();
        assert_eq!(again.simhash().unwrap().planes(), &after[..]);
        // The tables are those of the new planes: every row sits in its bucket.
        if tr == Transform::None {
            let mut codes = vec![0u32; t.n_rows * 8];
            idx.simhash()
                .unwrap()
                .hash(&t.rows, t.n_rows, t.dim, &mut codes)
                .unwrap();
            for r in 0..t.n_rows {
                for tt in 0..8 {
                    let b = fold_code(codes[r * 8 + tt], idx.range_bits());
                    assert!(idx.tables().bucket(tt, b).contains(&(r as u32)));
                }
            }
        }
        // Save / load keeps the trained planes and the query results.
        let dir = std::env::temp_dir().join(format!("lshk_iul_{}_{tr:?}.lshk", std::process::id()));
        idx.save(&dir).unwrap();
        let back = Index::load(&dir).unwrap();
        std::fs::remove_file(&dir).ok();
        assert_eq!(back.simhash().unwrap().planes(), &after[..]);
        let k = 5;
        let (mut i1, mut s1) = (vec![0u32; 20 * k], vec![0f32; 20 * k]);
        let (mut i2, mut s2) = (vec![0u32; 20 * k], vec![0f32; 20 * k]);
        let g = GatherParams::default();
        idx.query(&t.queries, 20, t.dim, k as u32, &g, &mut i1, &mut s1, None)
            .unwrap();
        back.query(&t.queries, 20, t.dim, k as u32, &g, &mut i2, &mut s2, None)
            .unwrap();
        assert_eq!(i1, i2);
    }
}

#[test]
fn index_train_iul_bad_inputs_leave_index_unchanged() {
    let (mut dw, t) = index_fixture(Family::Dwta, Transform::None);
    let p = IulParams::default();
    let e = dw
        .train_iul(&t.queries, t.n_q, t.dim, &t.offs, &t.labels, &p)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);

    let (mut idx, t) = index_fixture(Family::SimHash, Transform::None);
    let before = idx.simhash().unwrap().planes().to_vec();
    let mut q = t.queries.clone();
    q[5] = f32::INFINITY;
    let st =
        |idx: &mut Index, q: &[f32], n: usize, s: usize, o: &[usize], l: &[u32], p: &IulParams| {
            idx.train_iul(q, n, s, o, l, p).unwrap_err().status
        };
    assert_eq!(
        st(&mut idx, &q, t.n_q, t.dim, &t.offs, &t.labels, &p),
        Status::NonFinite
    );
    assert_eq!(
        st(
            &mut idx,
            &t.queries,
            t.n_q + 1,
            t.dim,
            &t.offs,
            &t.labels,
            &p
        ),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(
            &mut idx,
            &t.queries,
            t.n_q,
            t.dim - 1,
            &t.offs,
            &t.labels,
            &p
        ),
        Status::InvalidArgument
    );
    let mut l = t.labels.clone();
    *l.last_mut().unwrap() = 400;
    assert_eq!(
        st(&mut idx, &t.queries, t.n_q, t.dim, &t.offs, &l, &p),
        Status::InvalidArgument
    );
    assert_eq!(
        st(
            &mut idx,
            &t.queries,
            t.n_q,
            t.dim,
            &t.offs,
            &t.labels,
            &IulParams { batch: 0, ..p }
        ),
        Status::InvalidArgument
    );
    assert_eq!(idx.simhash().unwrap().planes(), &before[..]);
    // rounds = 0 changes nothing.
    let r = idx
        .train_iul(
            &t.queries,
            t.n_q,
            t.dim,
            &t.offs,
            &t.labels,
            &IulParams { rounds: 0, ..p },
        )
        .unwrap();
    assert!(r.is_empty());
    assert_eq!(idx.simhash().unwrap().planes(), &before[..]);
}

/// Rank cut-offs ([`iul::Thresholds::Rank`]): the pairs collected with
/// [`iul::rank_thresholds`] are those of a rank oracle (every row's dot in
/// f64, sorted), for cut-offs 0, inside and beyond the row count.
#[test]
fn rank_thresholds_match_rank_oracle() {
    let t = toy(23, 70, 40, 8);
    let (bits, l, rb) = (2u32, 2u32, 2u32);
    let (ids, g, _, _) = toy_candidates(&t, bits, l, rb, 5, |i| i % 4 != 2);
    let dot = |q: usize, r: usize| -> f64 {
        (0..t.dim)
            .map(|j| t.queries[q * t.dim + j] as f64 * t.rows[r * t.dim + j] as f64)
            .sum()
    };
    let n = t.n_rows as u32;
    for (t1, t2) in [(0, 0), (5, 10), (10, 3), (1, n), (n, 1), (n + 5, n + 5)] {
        let thr = iul::rank_thresholds(&t.data(), t.dim, &ids, t1, t2);
        let got = iul::collect_pairs_with(&t.data(), t.dim, &ids, &g, |i| thr[i]);
        let mut want = Pairs::default();
        for (i, &qi) in ids.iter().enumerate() {
            let qi = qi as usize;
            // rank[r]: rows with a larger dot.
            let dots: Vec<f64> = (0..t.n_rows).map(|r| dot(qi, r)).collect();
            let mut order: Vec<usize> = (0..t.n_rows).collect();
            order.sort_by(|&a, &b| dots[b].total_cmp(&dots[a]));
            // The f32 dots may reorder near-ties: none at a cut-off.
            for c in [t1 as usize, t2 as usize] {
                if c > 0 && c < t.n_rows {
                    assert!(
                        dots[order[c - 1]] - dots[order[c]] > 1e-4,
                        "two dots within 1e-4 at cut-off {c}: pick another seed"
                    );
                }
            }
            let mut rank = vec![0usize; t.n_rows];
            for (k, &r) in order.iter().enumerate() {
                rank[r] = k;
            }
            let s = &g.ids[g.offsets[i]..g.offsets[i + 1]];
            let labs = &t.labels[t.offs[qi]..t.offs[qi + 1]];
            for &y in labs {
                if !s.contains(&y) && rank[y as usize] < t1 as usize {
                    want.pos.push((qi as u32, y));
                }
            }
            for &j in s {
                if !labs.contains(&j) && rank[j as usize] >= t2 as usize {
                    want.neg.push((qi as u32, j));
                }
            }
        }
        assert_eq!(got, want, "t1 {t1} t2 {t2}");
        if (t1, t2) == (10, 3) {
            assert!(!want.pos.is_empty() && !want.neg.is_empty());
        }
    }
}

/// keep_best returns the planes of the round with the best validation
/// label recall: the same planes as a run stopped after that round (or the
/// starting planes), with the same reports apart from the `kept` flag.
#[test]
fn keep_best_returns_the_best_round() {
    let t = toy(33, 200, 300, 12);
    let sh = shape(t.dim);
    let planes = seed_planes(&sh);
    for (thresholds, t1, t2, lr) in [
        (iul::Thresholds::Score, 0.0, 0.0, 0.05),
        (iul::Thresholds::Score, 0.0, 0.0, 0.5),
        (iul::Thresholds::Rank, 20.0, 0.0, 0.05),
    ] {
        let p = IulParams {
            rounds: 4,
            epochs: 2,
            batch: 32,
            t1,
            t2,
            thresholds,
            learning_rate: lr,
            validation_fraction: 0.2,
            ..Default::default()
        };
        let (last, rl) = iul::train(&planes, &sh, &t.data(), &p).unwrap();
        let (best, rb) = iul::train(
            &planes,
            &sh,
            &t.data(),
            &IulParams {
                keep_best: true,
                ..p
            },
        )
        .unwrap();
        assert!(rl.iter().all(|r| !r.kept));
        assert_eq!(rl.len(), rb.len());
        for (a, b) in rl.iter().zip(&rb) {
            assert_eq!(IulReport { kept: false, ..*b }, *a);
        }
        let kept: Vec<usize> = (0..rb.len()).filter(|&r| rb[r].kept).collect();
        assert!(kept.len() <= 1, "{rb:?}");
        let start = rb[0].label_recall_before;
        match kept.first() {
            None => {
                assert!(rb.iter().all(|r| r.label_recall_after <= start));
                assert_eq!(best, planes);
            }
            Some(&k) => {
                let top = rb[k].label_recall_after;
                assert!(top > start);
                // The first round reaching the best recall.
                assert!(rb[..k].iter().all(|r| r.label_recall_after < top));
                assert!(rb[k..].iter().all(|r| r.label_recall_after <= top));
                let (upto, _) = iul::train(
                    &planes,
                    &sh,
                    &t.data(),
                    &IulParams {
                        rounds: k as u32 + 1,
                        ..p
                    },
                )
                .unwrap();
                assert_eq!(best, upto);
                if k + 1 == rb.len() {
                    assert_eq!(best, last);
                }
            }
        }
        println!(
            "{thresholds:?} lr {lr}: recall {start:.3} -> {:?}, kept {kept:?}",
            rb.iter().map(|r| r.label_recall_after).collect::<Vec<_>>()
        );
    }
}

#[test]
fn rank_thresholds_bad_inputs() {
    let t = toy(41, 50, 40, 6);
    let sh = shape(t.dim);
    let planes = seed_planes(&sh);
    let p = IulParams {
        thresholds: iul::Thresholds::Rank,
        ..Default::default()
    };
    for (t1, t2) in [
        (1.5, 0.0),
        (0.0, -1.0),
        (iul::MAX_RANK * 2.0, 0.0),
        (-0.0, 0.5),
    ] {
        let e = iul::train(&planes, &sh, &t.data(), &IulParams { t1, t2, ..p }).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "t1 {t1} t2 {t2}");
    }
    // Whole numbers are accepted, 0 and beyond the row count included.
    for (t1, t2) in [(0.0, 0.0), (3.0, 100.0), (iul::MAX_RANK, 1.0)] {
        iul::train(
            &planes,
            &sh,
            &t.data(),
            &IulParams {
                t1,
                t2,
                rounds: 1,
                epochs: 1,
                ..p
            },
        )
        .unwrap();
    }
}

/// Smallest relaxed bit agreement `c_k = (1 + a_k b_k) / 2` and smallest
/// `1 − p` (`p = Π_k c_k`) over every (pair, table): the collision loss's
/// derivatives grow as `1 / c` and `1 / (1 − p)`, so the tolerances below
/// scale with them.
fn collision_margins(
    planes: &[f64],
    dim: usize,
    bits: usize,
    tables: usize,
    xq: &[f64],
    xw: &[f64],
) -> (f64, f64) {
    let (mut cmin, mut qmin) = (1f64, 1f64);
    for i in 0..xq.len() / dim {
        let (q, w) = (&xq[i * dim..(i + 1) * dim], &xw[i * dim..(i + 1) * dim]);
        for l in 0..tables {
            let mut p = 1f64;
            for k in 0..bits {
                let th = &planes[(l * bits + k) * dim..(l * bits + k + 1) * dim];
                let a = th.iter().zip(q).map(|(t, x)| t * x).sum::<f64>().tanh();
                let b = th.iter().zip(w).map(|(t, x)| t * x).sum::<f64>().tanh();
                let c = (1.0 + a * b) / 2.0;
                cmin = cmin.min(c);
                p *= c;
            }
            qmin = qmin.min(1.0 - p);
        }
    }
    (cmin, qmin)
}

/// The collision loss's f64 gradient against central finite differences.
/// Tolerance as for the dot loss, with the third derivative of
/// `ln c` (at most `2 / c³` per unit of `u`) and of `ln(1 − p)` (at most
/// `2 / (1 − p)³` times K³ unit factors) in place of softplus's bound 2:
/// `|f'''| <= 8 (4 x_max)³ · 2 K³ / m³` with `m = min(c_min, (1 − p)_min)`.
#[test]
fn collision_gradient_matches_finite_differences_f64() {
    let mut r = SplitMix64::new(17);
    let (dim, bits, tables, n) = (5usize, 3usize, 2usize, 8usize);
    let planes = normals(bits * tables * dim, 0.3, &mut r);
    let xq = normals(n * dim, 1.0, &mut r);
    let xw = normals(n * dim, 1.0, &mut r);
    let y: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
    let kind = iul::IulLoss::Collision;
    let (f0, g) = iul::loss_grad_f64_with(kind, &planes, dim, bits, tables, &xq, &xw, &y);
    let (cmin, qmin) = collision_margins(&planes, dim, bits, tables, &xq, &xw);
    assert!(cmin > 1e-3 && qmin > 1e-3, "fixture too close to the floor");
    let m = cmin.min(qmin);
    let xmax = xq.iter().chain(&xw).fold(0f64, |a, v| a.max(v.abs()));
    let h = 1e-6;
    let k3 = (bits * bits * bits) as f64;
    let tol = h * h / 6.0 * 8.0 * (4.0 * xmax).powi(3) * 2.0 * k3 / m.powi(3)
        + 4.0 * f64::EPSILON * f0.abs() / h;
    for j in 0..planes.len() {
        let mut p = planes.clone();
        p[j] = planes[j] + h;
        let fp = iul::loss_grad_f64_with(kind, &p, dim, bits, tables, &xq, &xw, &y).0;
        p[j] = planes[j] - h;
        let fm = iul::loss_grad_f64_with(kind, &p, dim, bits, tables, &xq, &xw, &y).0;
        let fd = (fp - fm) / (2.0 * h);
        assert!(
            (fd - g[j]).abs() <= tol,
            "coordinate {j}: analytic {} vs FD {fd} (tol {tol})",
            g[j]
        );
    }
    let gmax = g.iter().fold(0f64, |m, v| m.max(v.abs()));
    println!("max |g| {gmax:.3e}, tol {tol:.3e}, c_min {cmin:.3}, (1-p)_min {qmin:.3}");
    assert!(gmax > 10.0 * tol);
    // The dot loss is unchanged by the new entry point.
    let dot = iul::loss_grad_f64_with(iul::IulLoss::Dot, &planes, dim, bits, tables, &xq, &xw, &y);
    assert_eq!(
        dot,
        iul::loss_grad_f64(&planes, dim, bits, tables, &xq, &xw, &y)
    );
}

/// The batched f32 collision loss and gradient against the f64 oracle.
/// Tolerance: the dot loss's bound (see
/// `batched_f32_gradient_matches_f64_oracle`) times the sensitivity of
/// `∂ℓ/∂u` to an error in `u`, at most `1 / (c_min² (1 − p)_min²)`
/// relative to the dot loss's (whose `σ' <= 1/4`), and K for the sum of
/// K logs in the loss.
#[test]
fn batched_f32_collision_gradient_matches_f64_oracle() {
    let mut r = SplitMix64::new(23);
    for &(dim, bits, tables, n) in &[(1usize, 1u32, 1u32, 2usize), (9, 3, 2, 6), (33, 4, 5, 40)] {
        let k = bits as usize * tables as usize;
        let planes: Vec<f32> = (0..k * dim)
            .map(|_| (r.next_normal() * 0.2) as f32)
            .collect();
        let xq: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let xw: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let y: Vec<f32> = (0..n).map(|i| (i % 2) as f32).collect();
        let kind = iul::IulLoss::Collision;
        let mut g = vec![0f32; k * dim];
        let l =
            iul::loss_grad_with(kind, &planes, dim, bits, tables, &xq, &xw, &y, &mut g).unwrap();
        let d = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let (p64, q64, w64) = (d(&planes), d(&xq), d(&xw));
        let (l64, g64) = iul::loss_grad_f64_with(
            kind,
            &p64,
            dim,
            bits as usize,
            tables as usize,
            &q64,
            &w64,
            &d(&y),
        );
        let (cmin, qmin) = collision_margins(&p64, dim, bits as usize, tables as usize, &q64, &w64);
        let amp = 1.0 / (cmin * cmin * qmin * qmin);
        let u = f32::EPSILON as f64 / 2.0;
        let xmax = xq.iter().chain(&xw).fold(0f32, |m, v| m.max(v.abs())) as f64;
        let th1 = planes
            .chunks(dim)
            .map(|p| p.iter().map(|v| v.abs() as f64).sum::<f64>())
            .fold(0f64, f64::max);
        let c = 1.0 + th1 * xmax;
        let loss_tol = (dim + bits as usize + 16) as f64 * u * c * k as f64 * amp;
        assert!((l - l64).abs() <= loss_tol, "loss {l} vs {l64}");
        for p in 0..k {
            for j in 0..dim {
                let s: f64 = (0..n)
                    .map(|i| (xq[i * dim + j].abs() + xw[i * dim + j].abs()) as f64)
                    .sum();
                let tol = (dim + bits as usize + 2 * n + 16) as f64 * u * s * c * amp / n as f64;
                let (a, b) = (g[p * dim + j] as f64, g64[p * dim + j]);
                assert!(
                    (a - b).abs() <= tol,
                    "shape {dim}/{bits}/{tables}/{n} grad[{p},{j}] {a} vs {b} tol {tol}"
                );
            }
        }
    }
}

/// Fraction of pairs `i` in `range` whose codes agree in a table.
fn pair_collisions(fam: &SimHash, xq: &[f32], xw: &[f32], dim: usize, pos: bool) -> f64 {
    let n = xq.len() / dim;
    let l = fam.tables() as usize;
    let (mut a, mut b) = (vec![0u32; n * l], vec![0u32; n * l]);
    fam.hash(xq, n, dim, &mut a).unwrap();
    fam.hash(xw, n, dim, &mut b).unwrap();
    let (mut same, mut tot) = (0usize, 0usize);
    for i in (0..n).filter(|i| (i % 2 == 0) == pos) {
        for t in 0..l {
            tot += 1;
            same += (a[i * l + t] == b[i * l + t]) as usize;
        }
    }
    same as f64 / tot as f64
}

/// Adam on the collision loss: the loss falls, positives collide more
/// and negatives less than before (the toy pairs of
/// `loss_decreases_over_epochs`).
#[test]
fn collision_loss_raises_positive_collisions() {
    let mut r = SplitMix64::new(3);
    let (dim, bits, tables, n) = (16usize, 6u32, 4u32, 600usize);
    let (mut xq, mut xw, mut y) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let q: Vec<f32> = (0..dim).map(|_| r.next_normal() as f32).collect();
        if i % 2 == 0 {
            xw.extend(q.iter().map(|v| v + 0.8 * r.next_normal() as f32));
            y.push(1.0);
        } else {
            xw.extend(q.iter().map(|v| 0.3 * v + r.next_normal() as f32));
            y.push(0.0);
        }
        xq.extend(q);
    }
    let start: Vec<f32> = SimHash::new(dim, bits, tables, 0, 5)
        .unwrap()
        .planes()
        .to_vec();
    let fam0 = SimHash::from_planes(&start, dim, bits, tables).unwrap();
    let (pos0, neg0) = (
        pair_collisions(&fam0, &xq, &xw, dim, true),
        pair_collisions(&fam0, &xq, &xw, dim, false),
    );
    let mut planes = start.clone();
    let fit = iul::AdamFit {
        loss: iul::IulLoss::Collision,
        tolerance: 0.0,
        lr: 0.02,
        max_epochs: 10,
        batch: 64,
    };
    let mut seen = Vec::new();
    let losses = iul::adam_fit_with(
        &mut planes,
        dim,
        bits,
        tables,
        &xq,
        &xw,
        &y,
        &fit,
        &mut SplitMix64::new(9),
        &mut |e, _, l| seen.push((e, l)),
    )
    .unwrap();
    assert_eq!(losses.len(), 11);
    assert_eq!(seen.len(), 11);
    assert!(seen
        .iter()
        .enumerate()
        .all(|(i, &(e, l))| e as usize == i && l == losses[i]));
    assert!(losses[10] < 0.8 * losses[0], "{losses:?}");
    let fam = SimHash::from_planes(&planes, dim, bits, tables).unwrap();
    let (pos1, neg1) = (
        pair_collisions(&fam, &xq, &xw, dim, true),
        pair_collisions(&fam, &xq, &xw, dim, false),
    );
    println!("positives {pos0:.3} -> {pos1:.3}, negatives {neg0:.3} -> {neg1:.3}");
    assert!(pos1 > pos0 && neg1 <= neg0);
}

/// `train_with` with default options is `train`, bit for bit, also with a
/// hook attached; the hook sees epochs 0..=E of every round with the
/// round's pairs; a tolerance stops a round once the loss stops falling
/// (never later than `epochs`); a bad tolerance is rejected.
#[test]
fn train_with_options_hook_and_tolerance() {
    let t = toy(31, 200, 300, 12);
    let sh = shape(t.dim);
    let planes = seed_planes(&sh);
    let p = IulParams {
        rounds: 2,
        epochs: 3,
        batch: 32,
        validation_fraction: 0.2,
        ..Default::default()
    };
    let (a, ra) = iul::train(&planes, &sh, &t.data(), &p).unwrap();
    let (b, rb) = iul::train_with(&planes, &sh, &t.data(), &p, &mut Default::default()).unwrap();
    assert_eq!(a, b);
    assert_eq!(format!("{ra:?}"), format!("{rb:?}"));
    let mut seen: Vec<(u32, u32, f64, usize, usize)> = Vec::new();
    let mut hook = |v: &iul::EpochView<'_>| {
        assert_eq!(v.xq.len(), (v.positives + v.negatives) * t.dim);
        assert_eq!(v.xw.len(), v.xq.len());
        seen.push((v.round, v.epoch, v.loss, v.positives, v.negatives));
    };
    let mut o = iul::IulOptions {
        on_epoch: Some(&mut hook),
        ..Default::default()
    };
    let (c, rc) = iul::train_with(&planes, &sh, &t.data(), &p, &mut o).unwrap();
    assert_eq!(a, c);
    assert_eq!(format!("{ra:?}"), format!("{rc:?}"));
    let trained: Vec<&IulReport> = ra.iter().filter(|r| r.positives > 0).collect();
    assert_eq!(seen.len(), trained.len() * 4);
    for (i, r) in trained.iter().enumerate() {
        let s = &seen[i * 4..(i + 1) * 4];
        for (e, x) in s.iter().enumerate() {
            assert_eq!((x.0, x.1), (r.round, e as u32));
            assert_eq!((x.3 as u64, x.4 as u64), (r.positives, r.negatives));
        }
        assert_eq!(s[0].2, r.loss_before);
        assert_eq!(s[3].2, r.loss_after);
    }
    // Tolerance: epochs is the most; the stop rule holds where it stopped.
    let pl = IulParams { epochs: 200, ..p };
    let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut hook = |v: &iul::EpochView<'_>| per_round[v.round as usize].push(v.loss);
    let tol = 0.05;
    let mut o = iul::IulOptions {
        tolerance: tol,
        on_epoch: Some(&mut hook),
        ..Default::default()
    };
    iul::train_with(&planes, &sh, &t.data(), &pl, &mut o).unwrap();
    for ls in per_round.iter().filter(|l| !l.is_empty()) {
        let e = ls.len() - 1;
        assert!((1..=200).contains(&e), "{ls:?}");
        for w in ls[..e].windows(2) {
            assert!(w[0] - w[1] >= tol * w[0], "stopped late: {ls:?}");
        }
        if e < 200 {
            assert!(ls[e - 1] - ls[e] < tol * ls[e - 1], "stopped early: {ls:?}");
        }
    }
    for bad in [-0.1, f64::NAN, f64::INFINITY] {
        let mut o = iul::IulOptions {
            tolerance: bad,
            ..Default::default()
        };
        let e = iul::train_with(&planes, &sh, &t.data(), &p, &mut o).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
    }
}

/// `adam_fit_with` rejects a zero batch and a bad tolerance before
/// touching the planes.
#[test]
fn adam_fit_with_bad_inputs() {
    let (dim, bits, tables) = (4usize, 2u32, 1u32);
    let start = SimHash::new(dim, bits, tables, 0, 3)
        .unwrap()
        .planes()
        .to_vec();
    let (xq, xw, y) = (
        vec![0.5f32; 2 * dim],
        vec![-0.5f32; 2 * dim],
        vec![1f32, 0.0],
    );
    let ok = iul::AdamFit {
        loss: iul::IulLoss::Dot,
        tolerance: 0.0,
        lr: 0.01,
        max_epochs: 2,
        batch: 1,
    };
    for fit in [
        iul::AdamFit { batch: 0, ..ok },
        iul::AdamFit {
            tolerance: -1.0,
            ..ok
        },
        iul::AdamFit {
            tolerance: f64::NAN,
            ..ok
        },
    ] {
        let mut planes = start.clone();
        let e = iul::adam_fit_with(
            &mut planes,
            dim,
            bits,
            tables,
            &xq,
            &xw,
            &y,
            &fit,
            &mut SplitMix64::new(1),
            &mut |_, _, _| {},
        )
        .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert_eq!(planes, start);
    }
}

/// The C flags LSHK_IUL_TO_CONVERGENCE and LSHK_IUL_COLLISION_LOSS select
/// `train_with`'s options (tolerance 1e-3, the collision loss): the planes
/// of lshk_simhash_train_iul equal Rust's bit for bit, and differ from the
/// default training's.
#[test]
fn c_flags_select_convergence_and_the_collision_loss() {
    use lshk::ffi::iul::{
        lshk_iul_params_default, lshk_simhash_train_iul, LSHK_IUL_COLLISION_LOSS,
        LSHK_IUL_TO_CONVERGENCE,
    };
    let t = toy(41, 200, 300, 12);
    let sh = IulShape {
        bucket_cap: 0,
        table_seed: 0,
        ..shape(t.dim)
    };
    let planes = seed_planes(&sh);
    let c_train = |flags: u32| -> Vec<f32> {
        let mut cp = lshk_iul_params_default();
        (cp.rounds, cp.epochs, cp.batch, cp.flags) = (2, 300, 32, flags);
        let mut out = vec![0f32; planes.len()];
        // SAFETY: every array holds what its length says; no reports.
        let st = unsafe {
            lshk_simhash_train_iul(
                planes.as_ptr(),
                planes.len(),
                t.dim,
                sh.bits,
                sh.tables,
                sh.range_bits,
                t.rows.as_ptr(),
                t.n_rows,
                t.dim,
                t.queries.as_ptr(),
                t.n_q,
                t.dim,
                t.offs.as_ptr(),
                t.labels.as_ptr(),
                &cp,
                out.as_mut_ptr(),
                out.len(),
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(st, 0, "flags {flags}");
        out
    };
    let p = {
        let cp = lshk_iul_params_default();
        IulParams {
            rounds: 2,
            epochs: 300,
            batch: 32,
            t1: cp.t1,
            t2: cp.t2,
            learning_rate: cp.learning_rate,
            validation_fraction: cp.validation_fraction,
            max_pairs: cp.max_pairs,
            seed: cp.seed,
            ..Default::default()
        }
    };
    let rust = |loss: iul::IulLoss, tolerance: f64| {
        let mut o = iul::IulOptions {
            loss,
            tolerance,
            on_epoch: None,
        };
        iul::train_with(&planes, &sh, &t.data(), &p, &mut o)
            .unwrap()
            .0
    };
    let plain = c_train(0);
    assert_ne!(plain, planes, "the default training moved the planes");
    assert_eq!(plain, rust(iul::IulLoss::Dot, 0.0));
    let conv = c_train(LSHK_IUL_TO_CONVERGENCE);
    assert_eq!(conv, rust(iul::IulLoss::Dot, 1e-3));
    let coll = c_train(LSHK_IUL_COLLISION_LOSS);
    assert_eq!(coll, rust(iul::IulLoss::Collision, 0.0));
    let both = c_train(LSHK_IUL_TO_CONVERGENCE | LSHK_IUL_COLLISION_LOSS);
    assert_eq!(both, rust(iul::IulLoss::Collision, 1e-3));
    assert_ne!(plain, conv, "300 epochs run past the 1e-3 tolerance");
    assert_ne!(plain, coll);
}
