//! Row-weighted k-means for the IVF index (`Ivf::build_weighted`) on
//! w2v-gutenberg: recall@10 (against the exact top-10) and rows scanned per
//! held-out query, unweighted against weighted, at fixed `nprobe` values,
//! the default adaptive reach, and the parameters `Ivf::calibrate` picks.
//! Recall and rows scanned are deterministic (no timing), so machine load
//! does not matter.
//!
//! `cargo run --release --example ivf_weights_eval [-- --w2v DIR] [--nq N]
//! [--cal-nq N] [--train-q N] [--alpha 1,4,16] [--hits labels,topk]
//! [--nprobe 1,2,4,...] [--rerank R]`
//!
//! Weights come from the first `--train-q` training pairs (centre word =
//! query, context word = label; the held-out pairs are never used):
//! `labels` counts each pair's label, `topk` each row of the exact top-10
//! of each pair's query; `w_r = 1 + alpha * rows * n_r / N`
//! (`lshk::ivf::row_weights_from_hits`).
//!
//! Prints `skipped: ../shared/data not found` when the data are absent.

mod common;

use std::path::PathBuf;

use lshk::ivf::{row_weights_from_hits, Ivf, IvfParams, SearchParams, SearchStats};

fn main() {
    let mut dir: PathBuf = "../shared/data/w2v-gutenberg".into();
    let (mut nq, mut cal_nq, mut train_q) = (2000usize, 500usize, 20_000usize);
    let mut alphas: Vec<f32> = vec![1.0, 4.0, 16.0];
    let mut kinds: Vec<String> = vec!["labels".into(), "topk".into()];
    let mut nprobes: Vec<u32> = vec![1, 2, 4, 8, 16, 32, 64, 128];
    let mut rerank = 32u32;
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--w2v" => dir = v().into(),
            "--nq" => nq = v().parse().expect("nq"),
            "--cal-nq" => cal_nq = v().parse().expect("cal-nq"),
            "--train-q" => train_q = v().parse().expect("train-q"),
            "--alpha" => alphas = v().split(',').map(|s| s.parse().expect("alpha")).collect(),
            "--hits" => kinds = v().split(',').map(String::from).collect(),
            "--nprobe" => nprobes = v().split(',').map(|s| s.parse().expect("nprobe")).collect(),
            "--rerank" => rerank = v().parse().expect("rerank"),
            other => panic!("unknown option {other}"),
        }
    }
    let d = match common::w2v(&dir, nq + cal_nq) {
        None => {
            println!("skipped: ../shared/data not found");
            return;
        }
        Some(d) => d.expect("w2v"),
    };
    let nq = d.nq.saturating_sub(cal_nq).min(nq);
    let cal_nq = d.nq - nq;
    let k = 10;
    let (exact, _, _) = common::exact_topk(&d, nq, k);

    // Training queries: the centre words of the first `train_q` pairs.
    let (emb, _) =
        lshk::data::read_raw_f32(&dir.join("input_embeddings.f32"), d.dim).expect("embeddings");
    let pairs = lshk::data::read_raw_i32(&dir.join("train_pairs.i32")).expect("train pairs");
    let train_q = train_q.min(pairs.len() / 2);
    let tp = &pairs[..2 * train_q];
    let labels: Vec<u32> = tp.chunks_exact(2).map(|p| p[1] as u32).collect();
    let mut tq = Vec::with_capacity(train_q * d.dim);
    for p in tp.chunks_exact(2) {
        let c = p[0] as usize;
        tq.extend_from_slice(&emb[c * d.dim..(c + 1) * d.dim]);
    }
    let topk_hits = {
        let (mut ids, mut sc) = (vec![0u32; train_q * k], vec![0f32; train_q * k]);
        d.layer()
            .topk_threads(0, &tq, train_q, d.dim, k, &mut ids, &mut sc)
            .expect("exact top-k of the training queries");
        ids
    };
    println!(
        "{}; {nq} evaluated, {cal_nq} for calibration; weights from {train_q} training pairs",
        d.name
    );
    println!("| weights | alpha | nprobe / reach | lists/q | scanned/q | recall@10 |");
    println!("|---|---:|---|---:|---:|---:|");
    let p = IvfParams::default();
    let mut runs: Vec<(String, f32)> = vec![("none".into(), 0.0)];
    for kind in &kinds {
        for &al in &alphas {
            runs.push((kind.clone(), al));
        }
    }
    for (kind, alpha) in runs {
        let ivf = match kind.as_str() {
            "none" => Ivf::build(&d.w, None, d.rows, d.dim, d.dim, &p),
            kind => {
                let hits = if kind == "labels" {
                    &labels
                } else {
                    &topk_hits
                };
                let wt = row_weights_from_hits(d.rows, hits, alpha).expect("weights");
                Ivf::build_weighted(&d.w, None, d.rows, d.dim, d.dim, &wt, &p)
            }
        }
        .expect("build");
        let eval = |sp: &SearchParams| {
            let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
            let mut st = SearchStats::default();
            ivf.search_stats(
                lshk::isa::active(),
                &d.q,
                nq,
                d.dim,
                k,
                sp,
                &mut ids,
                &mut sc,
                Some(&mut st),
            )
            .expect("search");
            let r = common::recall(&ids, &exact, k, nq, None);
            (
                st.lists as f64 / nq as f64,
                st.scanned as f64 / nq as f64,
                r.top10,
            )
        };
        let row = |what: String, sp: &SearchParams| {
            let (l, s, r) = eval(sp);
            println!("| {kind} | {alpha} | {what} | {l:.1} | {s:.0} | {r:.4} |");
        };
        for &np in &nprobes {
            row(format!("nprobe {np}"), &SearchParams::fixed(np, rerank));
        }
        row(
            "reach 3 (default)".into(),
            &SearchParams {
                rerank,
                ..SearchParams::default()
            },
        );
        for t in [0.95f32, 0.99] {
            let c = ivf
                .calibrate(&d.q[nq * d.dim..], cal_nq, d.dim, k, t, rerank, 0)
                .expect("calibrate");
            let what = if c.params.reach == 0.0 {
                format!("calibrated {t}: nprobe {}", c.params.nprobe)
            } else {
                format!("calibrated {t}: reach {}", c.params.reach)
            };
            row(what, &c.params);
        }
    }
}
