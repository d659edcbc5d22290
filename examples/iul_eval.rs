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
//! Prints `skipped: ../shared/data not found` when the data are absent.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use common::{Family, Index, IndexParams, Transform};
use lshk::iul::{IulParams, Thresholds};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::tables::{GatherInput, GatherParams, GatherResult};

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
    let mut a = std::env::args().skip(1);
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
    let (exact, _, _) = common::exact_topk(&data, data.nq, 10);
    gradient_timing(&emb, &data.w, dim);

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
        let mut idx = common::build(&data, &ip, None).expect("index");
        let g0 = GatherParams::default();
        let before = evaluate(
            &format!("SimHash K={} L={} (random planes)", ip.bits, ip.tables),
            &idx,
            &data,
            &exact,
            &g0,
        );

        let p = IulParams {
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
        };
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
