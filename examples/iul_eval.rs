//! IUL (learned SimHash planes, HALOS §3.5) on `../shared/data/w2v-gutenberg`.
//!
//! `cargo run --release --example iul_eval [-- DIR [TRAIN_PAIRS [HELDOUT]]]`
//!
//! Training data: the first TRAIN_PAIRS (default 60,000) pairs of
//! `train_pairs.i32`, grouped by centre word into multi-label queries
//! (query = `input_embeddings[centre]`, labels = its context words in
//! those pairs, duplicates kept once). Index: SimHash K=10, L=16 over the
//! raw rows (the prototype setting) and over the MIPS transform,
//! seed 1. Environment overrides for experiments: IUL_K, IUL_L, IUL_ROUNDS,
//! IUL_EPOCHS, IUL_LR, IUL_T1, IUL_T2, IUL_MAX_PAIRS, IUL_RANK=1 (t1/t2
//! are rank cut-offs), IUL_KEEP_BEST=1, IUL_TRANSFORMS (default
//! `none,mips`), IUL_SHORT=1 (round reports and the before/after rows
//! only). IUL: 3 rounds, 3
//! epochs, t1 = -1e30 (every missed label is a positive), t2 = 0, lr 0.01, batch 256, at most 20,000 pairs per side,
//! 10 % of the training queries for the round reports' validation.
//!
//! Evaluation on the first HELDOUT (default 5,000) pairs of
//! `heldout_pairs.i32` (query = centre embedding, one label), before and
//! after training: candidates per query, label recall (label among the
//! candidates), exact top-1 / top-10 recall (the full layer's argmax /
//! top-10 among the returned top-10), query time; then both at a matched
//! candidate budget (`max_candidates` = the smaller mean, rounded), and
//! label-aware buckets (policy INSTEAD) trained on random planes and on the
//! IUL planes at the caps in IUL_CAPS (default 32,48,64,96,128), so "+ both"
//! is compared with label-aware buckets alone at matched candidate counts.
//! Writes nothing; the table is copied into `examples/iul_eval.md`.
//!
//! Options (after the positional arguments; any of them runs the curves
//! mode instead of the tables above):
//! - `--curves`: the HALOS paper's Fig. 5 curves. Trains with
//!   `lshk::iul::train_with` (the trainer of `Index::train_iul`, on the
//!   index's own hashed rows and queries; the run checks that both give the
//!   same planes) and prints per round the positive / negative collision
//!   probability (fraction of (pair, table) sharing a bucket) on the
//!   round's balanced training pairs and on held-out pairs: the first
//!   `--curve-heldout=N` (default 50,000) pairs of `heldout_pairs.i32`
//!   grouped by centre, minus every (centre, context) pair of the training
//!   subset, turned into pairs the same way (candidate sets under the
//!   round's starting planes, t1 / t2, balanced, at most IUL_MAX_PAIRS a
//!   side; never trained on). Also: the round-0 held-out pairs tracked over
//!   all rounds ("fixed"), the held-out positives whose centre is not a
//!   training centre ("unseen"), and the validation candidates / label
//!   recall of the library's report. Score thresholds only.
//! - `--epoch-curves`: the same per epoch.
//! - `--diag`: per epoch, on up to 2,048 pairs per side: fraction of bits
//!   that agree, fraction of (pair, table) where all K agree, mean σ(s)
//!   (`s = tanh(θq)·tanh(θw)`), mean |tanh(θx)| (saturation), and the
//!   norm of the gradient of each side's mean loss.
//! - `--epochs-to-convergence[=TOL]` (default 1e-3): train each round until
//!   the full-data loss falls by less than TOL (relative) in an epoch, at
//!   most `--max-epochs=N` (default 100) epochs (`IulOptions::tolerance`).
//! - `--loss=dot|collision`: `IulLoss::Dot` (the library default) or
//!   `IulLoss::Collision` (the relaxed K-bit collision probability).
//! - `--pk`: after the curves, P@1 / P@5 of the learned planes alone against
//!   the full layer on `W q + 0.75 ln(count + 1)` (as
//!   `examples/halos_pk.rs`), µs per query at B = 1 on one thread.
//!
//! Prints `skipped: ../shared/data not found` when the data are absent.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use common::{Family, Index, IndexParams, Transform};
use lshk::iul::{self, EpochView, IulData, IulLoss, IulOptions, IulParams, IulShape, Thresholds};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};
use lshk::SimHash;

struct Row {
    name: String,
    cands: f64,
    label: f64,
    top1: f64,
    top10: f64,
    us: f64,
}

fn evaluate(name: &str, idx: &Index, d: &common::Data, exact: &[u32], g: &GatherParams) -> Row {
    let (nq, dim, l) = (d.nq, d.dim, idx.num_tables() as usize);
    let labels = d.labels.as_deref().unwrap();
    // Candidates (for label recall).
    let hd = idx.hash_dim();
    let mut tq = vec![0f32; nq * hd];
    for i in 0..nq {
        idx.transform_query(&d.q[i * dim..(i + 1) * dim], &mut tq[i * hd..(i + 1) * hd]);
    }
    let mut codes = vec![0u32; nq * l];
    idx.simhash()
        .unwrap()
        .hash(&tq, nq, hd, &mut codes)
        .unwrap();
    let mut r = GatherResult::default();
    let input = GatherInput {
        codes: &codes,
        q: nq,
        projections: None,
        forced_offsets: None,
        forced_ids: &[],
    };
    idx.tables().gather(g, &input, false, &mut r).unwrap();
    let mut hit = 0usize;
    for (i, y) in labels.iter().enumerate().take(nq) {
        hit += r.ids[r.offsets[i]..r.offsets[i + 1]]
            .binary_search(y)
            .is_ok() as usize;
    }
    let k = 10;
    let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let t = Instant::now();
    let cands = common::query_all(idx, d, 0, nq, k, g, 64, &mut ids, &mut sc);
    let us = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
    let rc = common::recall(&ids, exact, k, nq, Some(labels));
    Row {
        name: name.into(),
        cands,
        label: hit as f64 / nq as f64,
        top1: rc.top1,
        top10: rc.top10,
        us,
    }
}

fn main() {
    let (flags, pos): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--"));
    let opts = parse_opts(&flags);
    let mut a = pos.into_iter();
    let dir: PathBuf = a
        .next()
        .unwrap_or_else(|| "../shared/data/w2v-gutenberg".into())
        .into();
    let ntrain: usize = a.next().map_or(60_000, |s| s.parse().expect("TRAIN_PAIRS"));
    let nheld: usize = a.next().map_or(5_000, |s| s.parse().expect("HELDOUT"));
    let data = match common::w2v(&dir, nheld) {
        None => {
            println!("skipped: ../shared/data not found ({})", dir.display());
            return;
        }
        Some(r) => r.expect("w2v data"),
    };
    let t0 = Instant::now();
    let dim = data.dim;
    let (emb, _) = lshk::data::read_raw_f32(&dir.join("input_embeddings.f32"), dim).expect("emb");
    let pairs = lshk::data::read_raw_i32(&dir.join("train_pairs.i32")).expect("train pairs");
    let mut by_centre: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in pairs.chunks_exact(2).take(ntrain) {
        by_centre.entry(p[0] as u32).or_default().push(p[1] as u32);
    }
    let mut tq = Vec::new();
    let mut offs = vec![0usize];
    let mut labels = Vec::new();
    for (c, mut ls) in by_centre {
        ls.sort_unstable();
        ls.dedup();
        tq.extend_from_slice(&emb[c as usize * dim..(c as usize + 1) * dim]);
        labels.extend(ls);
        offs.push(labels.len());
    }
    let ntq = offs.len() - 1;
    println!("{}", data.name);
    println!(
        "training: {ntrain} train pairs -> {ntq} multi-label queries ({} labels)",
        labels.len()
    );
    let exact = if opts.curves {
        Vec::new() // the curves compute their own
    } else {
        common::exact_topk(&data, data.nq, 10).0
    };
    if !opts.curves {
        gradient_timing(&emb, &data.w, dim);
    }
    let all_held = if opts.curves {
        lshk::data::read_raw_i32(&dir.join("heldout_pairs.i32")).expect("held-out pairs")
    } else {
        Vec::new()
    };
    let held_pairs = &all_held[..(2 * opts.curve_heldout).min(all_held.len() / 2 * 2)];

    let env = |k: &str, d: f64| std::env::var(k).ok().map_or(d, |v| v.parse().expect(k));
    let transforms: Vec<Transform> = std::env::var("IUL_TRANSFORMS")
        .unwrap_or_else(|_| "none,mips".into())
        .split(',')
        .map(|t| match t.trim() {
            "none" => Transform::None,
            "mips" => Transform::Mips,
            "bias-aug" => Transform::BiasAug,
            o => panic!("IUL_TRANSFORMS: unknown transform {o}"),
        })
        .collect();
    let short = env("IUL_SHORT", 0.0) != 0.0;
    for transform in transforms {
        println!("\n## transform: {}", common::transform_name(transform));
        let ip = IndexParams {
            family: Family::SimHash,
            bits: env("IUL_K", 10.0) as u32,
            tables: env("IUL_L", 16.0) as u32,
            transform,
            seed: 1,
            ..Default::default()
        };
        if opts.curves {
            let p = iul_params(&env);
            curves(
                &data, &ip, &p, &opts, &emb, &pairs, ntrain, &all_held, held_pairs,
            );
            continue;
        }
        let mut idx = common::build(&data, &ip, None).expect("index");
        let g0 = GatherParams::default();
        let before = evaluate(
            &format!("SimHash K={} L={} (random planes)", ip.bits, ip.tables),
            &idx,
            &data,
            &exact,
            &g0,
        );

        let p = iul_params(&env);
        println!("{p:?}");
        let t = Instant::now();
        let reps = idx
            .train_iul(&tq, ntq, dim, &offs, &labels, &p)
            .expect("train");
        let train_s = t.elapsed().as_secs_f64();
        println!("\nIUL training: {train_s:.1} s; round-by-round report (validation = 10 % of the training queries):\n");
        println!("| round | pairs (+/-) | loss before | loss after | P(collide) + before -> after | P(collide) - before -> after | candidates before -> after | label recall before -> after | kept |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for r in &reps {
            println!(
            "| {} | {} / {} | {:.4} | {:.4} | {:.4} -> {:.4} | {:.4} -> {:.4} | {:.1} -> {:.1} | {:.4} -> {:.4} | {} |",
            r.round,
            r.positives,
            r.negatives,
            r.loss_before,
            r.loss_after,
            r.pos_collision_before,
            r.pos_collision_after,
            r.neg_collision_before,
            r.neg_collision_after,
            r.mean_candidates_before,
            r.mean_candidates_after,
            r.label_recall_before,
            r.label_recall_after,
            if r.kept { "kept" } else { "" }
        );
        }
        let after = evaluate("+ IUL planes", &idx, &data, &exact, &g0);
        let mut rows = vec![before, after];
        if short {
            print_rows(&rows, &data);
            continue;
        }
        // Label-aware buckets (issue 7 part 1) on the same training subset,
        // on random planes and on the IUL planes ("+ both").
        let lp = LabelParams {
            label_cap: 64,
            policy: LabelPolicy::Instead,
        };
        let mut plain_labels = common::build(&data, &ip, None).expect("index");
        plain_labels
            .train_labels(&tq, ntq, dim, &offs, &labels, &lp)
            .expect("train labels");
        rows.push(evaluate(
            "+ label-aware buckets (instead, cap 64), random planes",
            &plain_labels,
            &data,
            &exact,
            &g0,
        ));

        // Matched candidate counts: IUL under a candidate budget, and plain
        // SimHash with fewer bits per table (more candidates) beside it.
        for budget in [100u32, 500, 2000] {
            let gb = GatherParams {
                max_candidates: budget,
                ..Default::default()
            };
            rows.push(evaluate(
                &format!("+ IUL planes, budget {budget}"),
                &idx,
                &data,
                &exact,
                &gb,
            ));
        }
        for k in [8u32, 6, 5, 4] {
            let pk = IndexParams {
                bits: k,
                ..ip.clone()
            };
            let plain = common::build(&data, &pk, None).expect("index");
            rows.push(evaluate(
                &format!("SimHash K={k} L={} (random planes)", ip.tables),
                &plain,
                &data,
                &exact,
                &g0,
            ));
        }
        // Label-aware buckets on random and on IUL planes at several caps,
        // so "+ both" can be compared at matched candidate counts (IUL
        // shrinks the trained buckets: the same cap gives fewer candidates).
        let learned = idx.simhash().expect("SimHash index").planes().to_vec();
        let caps: Vec<u32> = std::env::var("IUL_CAPS")
            .unwrap_or_else(|_| "32,48,64,96,128".into())
            .split(',')
            .map(|c| c.trim().parse().expect("IUL_CAPS"))
            .collect();
        for &cap in &caps {
            let lpc = LabelParams {
                label_cap: cap,
                policy: LabelPolicy::Instead,
            };
            for (name, planes) in [("random", None), ("IUL", Some(learned.clone()))] {
                if cap == 64 && planes.is_none() {
                    continue; // the row above
                }
                let pp = IndexParams {
                    planes,
                    ..ip.clone()
                };
                let mut li = common::build(&data, &pp, None).expect("index");
                li.train_labels(&tq, ntq, dim, &offs, &labels, &lpc)
                    .expect("train labels");
                let label = if name == "IUL" {
                    format!("+ IUL planes + label-aware buckets (both, instead, cap {cap})")
                } else {
                    format!("+ label-aware buckets (instead, cap {cap}), random planes")
                };
                rows.push(evaluate(&label, &li, &data, &exact, &g0));
            }
        }
        print_rows(&rows, &data);
    }
    println!("\ntotal {:.1} s", t0.elapsed().as_secs_f64());
}

/// The IUL parameters of this example (environment overrides).
fn iul_params(env: &dyn Fn(&str, f64) -> f64) -> IulParams {
    IulParams {
        rounds: env("IUL_ROUNDS", 3.0) as u32,
        epochs: env("IUL_EPOCHS", 3.0) as u32,
        batch: 256,
        max_pairs: env("IUL_MAX_PAIRS", 20_000.0) as u32,
        learning_rate: env("IUL_LR", 0.01) as f32,
        t1: env("IUL_T1", -1e30) as f32,
        t2: env("IUL_T2", 0.0) as f32,
        thresholds: if env("IUL_RANK", 0.0) != 0.0 {
            Thresholds::Rank
        } else {
            Thresholds::Score
        },
        keep_best: env("IUL_KEEP_BEST", 0.0) != 0.0,
        validation_fraction: 0.1,
        seed: 1,
    }
}

fn print_rows(rows: &[Row], data: &common::Data) {
    println!(
        "\nheld-out evaluation: {} queries (first {} pairs of heldout_pairs.i32), {} rows\n",
        data.nq, data.nq, data.rows
    );
    println!("| setting | candidates / query | % of rows | label recall | exact top-1 recall | exact top-10 recall | query µs |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.1} | {:.2} | {:.4} | {:.4} | {:.4} | {:.1} |",
            r.name,
            r.cands,
            100.0 * r.cands / data.rows as f64,
            r.label,
            r.top1,
            r.top10,
            r.us
        );
    }
}

/// One 256-pair batch, K*L = 160 planes: the batched f32 loss + gradient
/// (SimHash::project on the active tier + f32x8 multiply-adds) against the
/// plain f64 loops of the oracle.
fn gradient_timing(emb: &[f32], w: &[f32], dim: usize) {
    let (n, bits, tables) = (256usize, 10u32, 16u32);
    let planes = lshk::SimHash::new(dim, bits, tables, 0, 1)
        .unwrap()
        .planes()
        .to_vec();
    let xq = &emb[..n * dim];
    let xw = &w[..n * dim];
    let y: Vec<f32> = (0..n).map(|i| (i % 2) as f32).collect();
    let mut g = vec![0f32; planes.len()];
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        lshk::iul::loss_grad(&planes, dim, bits, tables, xq, xw, &y, &mut g).unwrap();
    }
    let f32_ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    let d = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (p64, q64, w64, y64) = (d(&planes), d(xq), d(xw), d(&y));
    let t = Instant::now();
    for _ in 0..3 {
        std::hint::black_box(lshk::iul::loss_grad_f64(
            &p64,
            dim,
            bits as usize,
            tables as usize,
            &q64,
            &w64,
            &y64,
        ));
    }
    let f64_ms = t.elapsed().as_secs_f64() * 1e3 / 3.0;
    println!(
        "loss + gradient of a {n}-pair batch (K*L = 160 planes, dim {dim}, isa {:?}): \
         batched f32 {f32_ms:.2} ms, plain f64 loops {f64_ms:.2} ms ({:.1}x)",
        lshk::isa::active(),
        f64_ms / f32_ms
    );
}

// ------------------------------------------------------------- --curves

/// Options after the positional arguments.
#[derive(Clone, Debug)]
struct Opts {
    /// Fig. 5 curves (positive / negative collision per round and epoch,
    /// on the round's pairs and on held-out pairs) instead of the
    /// evaluation tables.
    curves: bool,
    /// Print every epoch, not only the rounds.
    epoch_curves: bool,
    /// Loss-side diagnostics per epoch (bit agreement, σ(s), tanh
    /// saturation, gradient norms per side).
    diag: bool,
    /// Train each round to convergence with this relative tolerance
    /// (`IulOptions::tolerance`; 0: the fixed IUL_EPOCHS).
    tolerance: f64,
    /// The most epochs per round with a tolerance.
    max_epochs: u32,
    loss: IulLoss,
    /// Held-out pairs (of `heldout_pairs.i32`) grouped into the held-out
    /// queries of the curves.
    curve_heldout: usize,
    /// After the curves: P@1 / P@5 of the learned planes alone against
    /// the full layer ([`precision_at_k`]).
    pk: bool,
}

fn parse_opts(flags: &[String]) -> Opts {
    let mut o = Opts {
        curves: false,
        epoch_curves: false,
        diag: false,
        tolerance: 0.0,
        max_epochs: 100,
        loss: IulLoss::Dot,
        curve_heldout: 50_000,
        pk: false,
    };
    if flags.is_empty() {
        return o;
    }
    for f in flags {
        let (k, v) = f.split_once('=').unwrap_or((f.as_str(), ""));
        match k {
            "--curves" => o.curves = true,
            "--epoch-curves" => (o.curves, o.epoch_curves) = (true, true),
            "--diag" => o.diag = true,
            "--epochs-to-convergence" => {
                o.tolerance = if v.is_empty() {
                    1e-3
                } else {
                    v.parse().expect(k)
                }
            }
            "--max-epochs" => o.max_epochs = v.parse().expect(k),
            "--loss" => {
                o.loss = match v {
                    "dot" => IulLoss::Dot,
                    "collision" => IulLoss::Collision,
                    _ => panic!("--loss=dot|collision"),
                }
            }
            "--curve-heldout" => o.curve_heldout = v.parse().expect(k),
            "--pk" => o.pk = true,
            _ => panic!("unknown option {f}"),
        }
    }
    // Every option here runs through the curves' trainer (`train_with`).
    o.curves = true;
    o
}

/// The rows as the index hashes them (`Transform::None`: W itself;
/// `Mips`: `(w / U, sqrt(1 − |w / U|²))`, U the largest row norm, as the
/// index computes it), `rows x hash_dim`.
fn hashed_rows(d: &common::Data, t: Transform) -> (Vec<f32>, usize) {
    let dim = d.dim;
    match t {
        Transform::None => (d.w.clone(), dim),
        Transform::Mips => {
            let norm = |v: &[f32]| v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let u = d.w.chunks_exact(dim).map(norm).fold(0f64, f64::max) as f32;
            let inv_u = 1.0 / u as f64;
            let mut out = Vec::with_capacity(d.rows * (dim + 1));
            for w in d.w.chunks_exact(dim) {
                let mut s = 0f64;
                for &x in w {
                    let v = x as f64 * inv_u;
                    out.push(v as f32);
                    s += v * v;
                }
                out.push((1.0 - s).max(0.0).sqrt() as f32);
            }
            (out, dim + 1)
        }
        _ => panic!("--curves supports the transforms none and mips"),
    }
}

/// Multi-label queries in the hashed space (CSR labels).
struct Queries {
    x: Vec<f32>,
    n: usize,
    offs: Vec<usize>,
    labels: Vec<u32>,
    /// The centre word of each query.
    centres: Vec<u32>,
}

/// A pair set in the hashed space, positives first.
#[derive(Clone)]
struct PairSet {
    xq: Vec<f32>,
    xw: Vec<f32>,
    np: usize,
    nn: usize,
    /// Per positive: its query's centre is not a training centre.
    unseen: Vec<bool>,
}

/// Pairs "built the same way" as the trainer's: the queries' candidate
/// sets under `planes` (tables with the index's range_bits, bucket_cap
/// and seed; plain gather), `collect_pairs` with t1 / t2, balanced (own
/// seed) to at most `max_pairs` a side.
#[allow(clippy::too_many_arguments)]
fn pairs_under(
    planes: &[f32],
    shape: &IulShape,
    rows: &[f32],
    n_rows: usize,
    q: &Queries,
    train_centres: &HashSet<u32>,
    p: &IulParams,
) -> PairSet {
    let hd = shape.dim;
    let fam = SimHash::from_planes(planes, hd, shape.bits, shape.tables).unwrap();
    let l = shape.tables as usize;
    let mut codes = vec![0u32; n_rows * l];
    fam.hash(rows, n_rows, hd, &mut codes).unwrap();
    let t = Tables::build(
        &codes,
        n_rows,
        shape.tables,
        shape.range_bits,
        shape.bucket_cap,
        shape.table_seed,
        0,
    )
    .unwrap();
    let mut qc = vec![0u32; q.n * l];
    fam.hash(&q.x, q.n, hd, &mut qc).unwrap();
    let input = GatherInput {
        codes: &qc,
        q: q.n,
        projections: None,
        forced_offsets: None,
        forced_ids: &[],
    };
    let mut cands = GatherResult::default();
    t.gather(&GatherParams::default(), &input, false, &mut cands)
        .unwrap();
    let data = IulData {
        rows,
        n_rows,
        row_stride: hd,
        queries: &q.x,
        n_queries: q.n,
        q_stride: hd,
        label_offsets: &q.offs,
        labels: &q.labels,
    };
    let ids: Vec<u32> = (0..q.n as u32).collect();
    let mut pairs = iul::collect_pairs(&data, hd, &ids, &cands, p.t1, p.t2);
    iul::balance(&mut pairs, p.max_pairs, &mut SplitMix64::new(0x5eed));
    let mut s = PairSet {
        xq: Vec::new(),
        xw: Vec::new(),
        np: pairs.pos.len(),
        nn: pairs.neg.len(),
        unseen: Vec::new(),
    };
    for (i, &(qi, r)) in pairs.pos.iter().chain(&pairs.neg).enumerate() {
        let (qi, r) = (qi as usize, r as usize);
        s.xq.extend_from_slice(&q.x[qi * hd..(qi + 1) * hd]);
        s.xw.extend_from_slice(&rows[r * hd..(r + 1) * hd]);
        if i < s.np {
            s.unseen.push(!train_centres.contains(&q.centres[qi]));
        }
    }
    s
}

/// Fraction of (pair, table) whose folded codes agree, over the pairs
/// `lo..hi` of `xq` / `xw` (`hd` wide), optionally only where `keep(i)`.
#[allow(clippy::too_many_arguments)]
fn collision_of(
    fam: &SimHash,
    range_bits: u32,
    xq: &[f32],
    xw: &[f32],
    hd: usize,
    lo: usize,
    hi: usize,
    keep: &dyn Fn(usize) -> bool,
) -> f64 {
    let l = fam.tables() as usize;
    let n = hi - lo;
    if n == 0 {
        return f64::NAN;
    }
    let (mut a, mut b) = (vec![0u32; n * l], vec![0u32; n * l]);
    fam.hash(&xq[lo * hd..hi * hd], n, hd, &mut a).unwrap();
    fam.hash(&xw[lo * hd..hi * hd], n, hd, &mut b).unwrap();
    let (mut same, mut tot) = (0usize, 0usize);
    for i in 0..n {
        if !keep(lo + i) {
            continue;
        }
        for t in 0..l {
            tot += 1;
            same += (fold_code(a[i * l + t], range_bits) == fold_code(b[i * l + t], range_bits))
                as usize;
        }
    }
    same as f64 / tot.max(1) as f64
}

/// (positive, negative, positive with an unseen centre) collision of a
/// held-out pair set.
fn held_collisions(fam: &SimHash, rb: u32, s: &PairSet, hd: usize) -> (f64, f64, f64) {
    let all = |_: usize| true;
    (
        collision_of(fam, rb, &s.xq, &s.xw, hd, 0, s.np, &all),
        collision_of(fam, rb, &s.xq, &s.xw, hd, s.np, s.np + s.nn, &all),
        collision_of(fam, rb, &s.xq, &s.xw, hd, 0, s.np, &|i| s.unseen[i]),
    )
}

/// Loss-side diagnostics on up to 2,048 pairs of one side (every
/// `n / 2048`-th): mean fraction of bits that agree per (pair, table),
/// fraction of (pair, table) where all K agree, mean σ(s) with
/// `s = tanh(θq) · tanh(θw)` (the dot loss's "collision" belief), mean
/// |tanh(θx)| over both sides (saturation), and the Frobenius norm of the
/// gradient of the side's mean loss.
#[derive(Clone, Copy, Default)]
struct Diag {
    bits_agree: f64,
    all_agree: f64,
    sigma: f64,
    sat: f64,
    grad: f64,
}

#[allow(clippy::too_many_arguments)]
fn diag_side(
    loss: IulLoss,
    planes: &[f32],
    shape: &IulShape,
    xq: &[f32],
    xw: &[f32],
    lo: usize,
    hi: usize,
    y: f32,
) -> Diag {
    let hd = shape.dim;
    let (k, l) = (shape.bits as usize, shape.tables as usize);
    let step = ((hi - lo) / 2048).max(1);
    let idx: Vec<usize> = (lo..hi).step_by(step).take(2048).collect();
    let n = idx.len();
    if n == 0 {
        return Diag::default();
    }
    let (mut sq, mut sw) = (Vec::with_capacity(n * hd), Vec::with_capacity(n * hd));
    for &i in &idx {
        sq.extend_from_slice(&xq[i * hd..(i + 1) * hd]);
        sw.extend_from_slice(&xw[i * hd..(i + 1) * hd]);
    }
    let fam = SimHash::from_planes(planes, hd, shape.bits, shape.tables).unwrap();
    let (mut pq, mut pw) = (vec![0f32; n * k * l], vec![0f32; n * k * l]);
    fam.project(&sq, n, hd, &mut pq).unwrap();
    fam.project(&sw, n, hd, &mut pw).unwrap();
    let mut d = Diag::default();
    for i in 0..n {
        for t in 0..l {
            let o = i * k * l + t * k;
            let (a, b) = (&pq[o..o + k], &pw[o..o + k]);
            let agree = a
                .iter()
                .zip(b)
                .filter(|(x, z)| (**x > 0.0) == (**z > 0.0))
                .count();
            d.bits_agree += agree as f64 / k as f64;
            d.all_agree += (agree == k) as u32 as f64;
            let s: f64 = a
                .iter()
                .zip(b)
                .map(|(x, z)| x.tanh() as f64 * z.tanh() as f64)
                .sum();
            d.sigma += 1.0 / (1.0 + (-s).exp());
            d.sat += a
                .iter()
                .chain(b)
                .map(|x| x.tanh().abs() as f64)
                .sum::<f64>()
                / (2 * k) as f64;
        }
    }
    let m = (n * l) as f64;
    d.bits_agree /= m;
    d.all_agree /= m;
    d.sigma /= m;
    d.sat /= m;
    let mut g = vec![0f32; planes.len()];
    let ys = vec![y; n];
    iul::loss_grad_with(
        loss,
        planes,
        hd,
        shape.bits,
        shape.tables,
        &sq,
        &sw,
        &ys,
        &mut g,
    )
    .unwrap();
    d.grad = g.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt();
    d
}

/// One epoch's curve point.
struct Point {
    round: u32,
    epoch: u32,
    loss: f64,
    train: (f64, f64),
    held: (f64, f64, f64),
    fixed: (f64, f64, f64),
    held_pairs: (usize, usize),
    diag: Option<(Diag, Diag)>,
}

/// Groups (centre, context) pairs by centre into multi-label queries in
/// the hashed space (labels deduplicated; a pair in `drop` is left out;
/// a centre left with no label is skipped).
fn group_queries(
    pairs: &[i32],
    emb: &[f32],
    dim: usize,
    idx: &Index,
    drop: &HashSet<(u32, u32)>,
) -> Queries {
    let mut by: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in pairs.chunks_exact(2) {
        let (c, x) = (p[0] as u32, p[1] as u32);
        if !drop.contains(&(c, x)) {
            by.entry(c).or_default().push(x);
        }
    }
    let hd = idx.hash_dim();
    let mut q = Queries {
        x: Vec::new(),
        n: 0,
        offs: vec![0],
        labels: Vec::new(),
        centres: Vec::new(),
    };
    let mut buf = vec![0f32; hd];
    for (c, mut ls) in by {
        ls.sort_unstable();
        ls.dedup();
        idx.transform_query(&emb[c as usize * dim..(c as usize + 1) * dim], &mut buf);
        q.x.extend_from_slice(&buf);
        q.labels.extend(ls);
        q.offs.push(q.labels.len());
        q.centres.push(c);
        q.n += 1;
    }
    q
}

/// The Fig. 5 curves for one transform: trains with `train_with` (the
/// same trainer as `Index::train_iul`, on the same hashed rows and
/// queries), records per epoch the collision on the round's pairs and on
/// held-out pairs, and prints the tables.
#[allow(clippy::too_many_arguments)]
fn curves(
    data: &common::Data,
    ip: &IndexParams,
    p: &IulParams,
    o: &Opts,
    emb: &[f32],
    all_train: &[i32],
    ntrain: usize,
    all_held: &[i32],
    held_pairs: &[i32],
) {
    let train_pairs = &all_train[..(2 * ntrain).min(all_train.len() / 2 * 2)];
    assert_eq!(
        p.thresholds,
        Thresholds::Score,
        "--curves builds held-out pairs with score thresholds only"
    );
    let dim = data.dim;
    let mut idx = common::build(data, ip, None).expect("index");
    let (rows, hd) = hashed_rows(data, ip.transform);
    assert_eq!(hd, idx.hash_dim());
    let tr = group_queries(train_pairs, emb, dim, &idx, &HashSet::new());
    let seen: HashSet<(u32, u32)> = train_pairs
        .chunks_exact(2)
        .map(|p| (p[0] as u32, p[1] as u32))
        .collect();
    let train_centres: HashSet<u32> = tr.centres.iter().copied().collect();
    let ho = group_queries(held_pairs, emb, dim, &idx, &seen);
    let unseen_q = ho
        .centres
        .iter()
        .filter(|c| !train_centres.contains(c))
        .count();
    println!(
        "curves: {} training queries; held-out: {} pairs of heldout_pairs.i32 -> {} queries, {} labels \
         (pairs also in the training subset removed; {unseen_q} queries with a centre that is not a training centre)",
        tr.n,
        held_pairs.len() / 2,
        ho.n,
        ho.labels.len()
    );
    let shape = IulShape {
        dim: hd,
        bits: idx.bits(),
        tables: idx.num_tables(),
        range_bits: idx.range_bits(),
        bucket_cap: idx.tables().bucket_cap(),
        table_seed: idx.tables().seed(),
    };
    let start = idx.simhash().unwrap().planes().to_vec();
    let d = IulData {
        rows: &rows,
        n_rows: data.rows,
        row_stride: hd,
        queries: &tr.x,
        n_queries: tr.n,
        q_stride: hd,
        label_offsets: &tr.offs,
        labels: &tr.labels,
    };
    // The hashed rows and queries here are the index's own: one round of
    // one epoch through both entry points gives the same planes.
    {
        let p1 = IulParams {
            rounds: 1,
            epochs: 1,
            ..*p
        };
        let (a, _) = iul::train(&start, &shape, &d, &p1).unwrap();
        idx.train_iul(
            &tr_queries_raw(&tr, emb, dim),
            tr.n,
            dim,
            &tr.offs,
            &tr.labels,
            &p1,
        )
        .unwrap();
        let same = a == idx.simhash().unwrap().planes();
        println!("check: train_with on these rows == Index::train_iul (1 round, 1 epoch): {same}");
    }
    let rb = shape.range_bits;
    let mut fixed: Option<PairSet> = None;
    let mut held: Option<PairSet> = None;
    let mut points: Vec<Point> = Vec::new();
    let t = Instant::now();
    let mut hook = |v: &EpochView<'_>| {
        if v.epoch == 0 {
            let s = pairs_under(v.planes, &shape, &rows, data.rows, &ho, &train_centres, p);
            if fixed.is_none() {
                fixed = Some(s.clone());
            }
            held = Some(s);
        }
        let fam = SimHash::from_planes(v.planes, hd, shape.bits, shape.tables).unwrap();
        let all = |_: usize| true;
        let n = v.positives + v.negatives;
        let train = (
            collision_of(&fam, rb, v.xq, v.xw, hd, 0, v.positives, &all),
            collision_of(&fam, rb, v.xq, v.xw, hd, v.positives, n, &all),
        );
        let h = held.as_ref().unwrap();
        let diag = o.diag.then(|| {
            (
                diag_side(o.loss, v.planes, &shape, v.xq, v.xw, 0, v.positives, 1.0),
                diag_side(o.loss, v.planes, &shape, v.xq, v.xw, v.positives, n, 0.0),
            )
        });
        points.push(Point {
            round: v.round,
            epoch: v.epoch,
            loss: v.loss,
            train,
            held: held_collisions(&fam, rb, h, hd),
            fixed: held_collisions(&fam, rb, fixed.as_ref().unwrap(), hd),
            held_pairs: (h.np, h.nn),
            diag,
        });
    };
    let pp = IulParams {
        epochs: if o.tolerance > 0.0 {
            o.max_epochs
        } else {
            p.epochs
        },
        ..*p
    };
    let mut opts = IulOptions {
        loss: o.loss,
        tolerance: o.tolerance,
        on_epoch: Some(&mut hook),
    };
    let (learned, reps) = iul::train_with(&start, &shape, &d, &pp, &mut opts).expect("train");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{pp:?}\nloss {:?}, tolerance {} (max {} epochs): {secs:.1} s with the curves",
        o.loss, o.tolerance, pp.epochs
    );
    println!("\nPer round (P+ / P-: collision probability of positive / negative pairs, fraction of (pair, table) sharing a bucket; \
              'round pairs' = the round's balanced training pairs; 'held-out' = pairs built the same way from the held-out queries \
              with the round's starting planes; 'fixed' = the held-out pairs of round 0, tracked; 'unseen' = held-out positives \
              whose centre is not a training centre):\n");
    println!("| round | epochs | pairs +/- | loss before -> after | round pairs P+ before -> after | P- before -> after | held-out pairs +/- | held-out P+ before -> after | P- before -> after | unseen P+ after | fixed P+ / P- after | val. candidates after | val. label recall after |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &reps {
        let pts: Vec<&Point> = points.iter().filter(|x| x.round == r.round).collect();
        let (Some(a), Some(b)) = (pts.first(), pts.last()) else {
            println!(
                "| {} | 0 | 0 / 0 | - | - | - | - | - | - | - | - | {:.1} | {:.4} |",
                r.round, r.mean_candidates_after, r.label_recall_after
            );
            continue;
        };
        assert_eq!(b.train.0.to_bits(), r.pos_collision_after.to_bits());
        println!(
            "| {} | {} | {} / {} | {:.4} -> {:.4} | {:.4} -> {:.4} | {:.4} -> {:.4} | {} / {} | {:.4} -> {:.4} | {:.4} -> {:.4} | {:.4} | {:.4} / {:.4} | {:.1} | {:.4} |",
            r.round,
            b.epoch,
            r.positives,
            r.negatives,
            a.loss,
            b.loss,
            a.train.0,
            b.train.0,
            a.train.1,
            b.train.1,
            b.held_pairs.0,
            b.held_pairs.1,
            a.held.0,
            b.held.0,
            a.held.1,
            b.held.1,
            b.held.2,
            b.fixed.0,
            b.fixed.1,
            r.mean_candidates_after,
            r.label_recall_after
        );
    }
    if o.epoch_curves || o.diag {
        println!("\nPer epoch:\n");
        let dh = if o.diag {
            " + bits agree | + all K agree | + σ(s) | mean abs tanh | grad norm + | - bits agree | - all K agree | - σ(s) | grad norm - |"
        } else {
            ""
        };
        println!("| round | epoch | loss | round pairs P+ | P- | held-out P+ | P- | unseen P+ | fixed P+ | fixed P- |{dh}");
        let cols = 10 + if o.diag { 9 } else { 0 };
        println!("|{}", "---:|".repeat(cols));
        for x in &points {
            let mut line = format!(
                "| {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} |",
                x.round,
                x.epoch,
                x.loss,
                x.train.0,
                x.train.1,
                x.held.0,
                x.held.1,
                x.held.2,
                x.fixed.0,
                x.fixed.1
            );
            if let Some((dp, dn)) = x.diag {
                line += &format!(
                    " {:.3} | {:.4} | {:.3} | {:.3} | {:.2e} | {:.3} | {:.4} | {:.3} | {:.2e} |",
                    dp.bits_agree,
                    dp.all_agree,
                    dp.sigma,
                    dp.sat,
                    dp.grad,
                    dn.bits_agree,
                    dn.all_agree,
                    dn.sigma,
                    dn.grad
                );
            }
            println!("{line}");
        }
    }
    // Held-out evaluation of the learned planes (5,000 single-label pairs).
    let (exact, _, _) = common::exact_topk(data, data.nq, 10);
    let g0 = GatherParams::default();
    let before = evaluate(
        "random planes",
        &common::build(data, ip, None).unwrap(),
        data,
        &exact,
        &g0,
    );
    let li = common::build(
        data,
        &IndexParams {
            planes: Some(learned.clone()),
            ..ip.clone()
        },
        None,
    )
    .unwrap();
    let after = evaluate("IUL planes (these curves)", &li, data, &exact, &g0);
    print_rows(&[before, after], data);
    if o.pk {
        precision_at_k(data, ip, &learned, emb, all_train, all_held);
    }
}

/// The training queries in the raw input space (for `Index::train_iul`).
fn tr_queries_raw(q: &Queries, emb: &[f32], dim: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(q.n * dim);
    for &c in &q.centres {
        out.extend_from_slice(&emb[c as usize * dim..(c as usize + 1) * dim]);
    }
    out
}

/// P@1 / P@5 of the IUL planes alone against the full layer, on the
/// predictive SGNS layer `W q + 0.75 ln(count(c) + 1)` (as
/// `examples/halos_pk.rs`: counts = each word's occurrences as a context in
/// all of `train_pairs.i32`; queries = all held-out pairs grouped by
/// centre, labels = the centre's held-out contexts). Top-5 by exact score
/// over each method's candidates; µs per query at B = 1 on one thread,
/// the best of 3 passes over 1,000 queries spread evenly over the list.
fn precision_at_k(
    data: &common::Data,
    ip: &IndexParams,
    learned: &[f32],
    emb: &[f32],
    all_train: &[i32],
    all_held: &[i32],
) {
    const K: usize = 5;
    let dim = data.dim;
    let mut count = vec![1f64; data.rows];
    for p in all_train.chunks_exact(2) {
        count[p[1] as usize] += 1.0;
    }
    let bias: Vec<f32> = count.iter().map(|c| (0.75 * c.ln()) as f32).collect();
    let mut by: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for p in all_held.chunks_exact(2) {
        by.entry(p[0] as u32).or_default().push(p[1] as u32);
    }
    let mut q = Vec::new();
    let mut labels: Vec<Vec<u32>> = Vec::new();
    for (c, mut ls) in by {
        ls.sort_unstable();
        ls.dedup();
        q.extend_from_slice(&emb[c as usize * dim..(c as usize + 1) * dim]);
        labels.push(ls);
    }
    let nq = labels.len();
    let d = common::Data {
        name: "w2v-gutenberg with the 0.75 ln count prior".into(),
        w: data.w.clone(),
        bias: Some(bias),
        rows: data.rows,
        dim,
        q,
        nq,
        labels: None,
    };
    let layer = d.layer();
    let timed = 1000.min(nq);
    let measure = |f: &mut QueryFn<'_>| -> (f64, f64, f64, f64) {
        let (mut ids, mut sc) = (vec![0u32; nq * K], vec![0f32; nq * K]);
        let mut total = 0u64;
        for i in 0..nq {
            total += f(
                d.query(i),
                &mut ids[i * K..(i + 1) * K],
                &mut sc[i * K..(i + 1) * K],
            );
        }
        let (mut p1, mut p5) = (0usize, 0usize);
        for (i, ls) in labels.iter().enumerate() {
            let got = &ids[i * K..(i + 1) * K];
            p1 += ls.binary_search(&got[0]).is_ok() as usize;
            p5 += got.iter().filter(|y| ls.binary_search(y).is_ok()).count();
        }
        let (mut ids1, mut sc1) = ([0u32; K], [0f32; K]);
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            for j in 0..timed {
                std::hint::black_box(f(d.query(j * nq / timed), &mut ids1, &mut sc1));
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e6 / timed as f64);
        }
        (
            total as f64 / nq as f64,
            p1 as f64 / nq as f64,
            p5 as f64 / (K * nq) as f64,
            best,
        )
    };
    let mut full = |x: &[f32], ids: &mut [u32], sc: &mut [f32]| -> u64 {
        layer
            .topk_threads(1, x, 1, dim, K, ids, sc)
            .expect("full layer");
        d.rows as u64
    };
    let rows = vec![
        (
            "full layer (lshk::dense, B = 1, 1 thread)".to_string(),
            measure(&mut full),
        ),
        {
            let idx = common::build(&d, ip, None).expect("index");
            let mut f = index_query(&idx);
            (
                format!("random planes K={} L={}", ip.bits, ip.tables),
                measure(&mut f),
            )
        },
        {
            let pp = IndexParams {
                planes: Some(learned.to_vec()),
                ..ip.clone()
            };
            let idx = common::build(&d, &pp, None).expect("index");
            let mut f = index_query(&idx);
            (
                format!("IUL planes K={} L={}", ip.bits, ip.tables),
                measure(&mut f),
            )
        },
    ];
    println!(
        "\nP@k on {nq} held-out queries (all heldout_pairs.i32 grouped by centre), layer W q + 0.75 ln(count + 1):\n"
    );
    println!("| method | candidates / query | P@1 | P@5 | µs / query (B = 1) | speed-up vs full |");
    println!("|---|---:|---:|---:|---:|---:|");
    let base = rows[0].1 .3;
    for (name, (c, p1, p5, us)) in &rows {
        println!(
            "| {name} | {c:.0} | {p1:.4} | {p5:.4} | {us:.1} | {:.1}x |",
            base / us
        );
    }
}

/// Answers one query (B = 1): writes the top-5 ids and scores, returns
/// the candidate count.
type QueryFn<'a> = dyn FnMut(&[f32], &mut [u32], &mut [f32]) -> u64 + 'a;

/// One query at B = 1 through the index: top-5, candidate count.
fn index_query(idx: &Index) -> impl FnMut(&[f32], &mut [u32], &mut [f32]) -> u64 + '_ {
    move |q, ids, sc| {
        let mut st = lshk::index::QueryStats::default();
        idx.query(
            q,
            1,
            q.len(),
            5,
            &GatherParams::default(),
            ids,
            sc,
            Some(&mut st),
        )
        .expect("query");
        st.candidates_total
    }
}
