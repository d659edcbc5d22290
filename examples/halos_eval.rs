//! Label-aware buckets (HALOS) on a real output layer:
//! `../shared/data/w2v-gutenberg` (word2vec skip-gram, 35,388 x 128).
//!
//! `cargo run --release --example halos_eval [-- DIR [NQ]]`
//!
//! Training: `train_pairs.i32` (2,000,000 (centre, context) pairs), grouped
//! by centre word into one multi-label query per centre (query = input
//! embedding of the centre, labels = its contexts, repeats kept: they are
//! the counts). Evaluation: the first NQ (default 20,000) pairs of
//! `heldout_pairs.i32`: query = input embedding of the centre, label = the
//! context word.
//!
//! For each setting: mean candidates per query (and % of rows), label
//! recall (the held-out label is among the candidates), exact top-1 and
//! top-10 recall (the exact full-layer argmax / top-10, which lshk then
//! scores exactly, is among the candidates), the label recall of simply
//! taking the exact top-C logits at the same candidate count C (measured
//! on the first 4,000 queries), the query time per query (top-10, batches
//! of 64, one thread), and the training time.
//!
//! Prints `skipped: ../shared/data not found` when the data are absent.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use common::{Index, IndexParams, Transform};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::tables::{GatherParams, GatherResult};

const RANK_Q: usize = 4000;

struct Train {
    q: Vec<f32>,
    n: usize,
    off: Vec<usize>,
    ys: Vec<u32>,
    pairs: usize,
}

fn train_data(dir: &std::path::Path, rows: usize, dim: usize) -> Train {
    let (emb, erows) =
        lshk::data::read_raw_f32(&dir.join("input_embeddings.f32"), dim).expect("embeddings");
    let pairs = lshk::data::read_raw_i32(&dir.join("train_pairs.i32")).expect("train pairs");
    // One query per centre word seen, its labels every context it was
    // paired with.
    let g = common::group_pairs(&pairs, pairs.len() / 2, erows, rows, false);
    Train {
        n: g.len(),
        q: g.queries(&emb, dim),
        pairs: g.labels.len(),
        off: g.offsets,
        ys: g.labels,
    }
}

/// Rank of each query's label among the exact logits (0 = the argmax).
fn label_ranks(d: &common::Data, nq: usize) -> Vec<usize> {
    let labels = d.labels.as_ref().unwrap();
    let chunks: Vec<usize> = (0..nq).collect();
    let per = nq.div_ceil(2);
    let mut out = vec![0usize; nq];
    std::thread::scope(|s| {
        for (part, o) in chunks.chunks(per).zip(out.chunks_mut(per)) {
            s.spawn(move || {
                let mut logits = vec![0f32; d.rows];
                for (j, &i) in part.iter().enumerate() {
                    let q = d.query(i);
                    for (r, l) in logits.iter_mut().enumerate() {
                        let w = &d.w[r * d.dim..(r + 1) * d.dim];
                        *l = w.iter().zip(q).map(|(a, b)| a * b).sum();
                    }
                    let v = logits[labels[i] as usize];
                    o[j] = logits.iter().filter(|&&x| x > v).count();
                }
            });
        }
    });
    out
}

struct Row {
    name: String,
    cands: f64,
    label: f64,
    top1: f64,
    top10: f64,
    exact_c: f64,
    us: f64,
    train_s: f64,
}

#[allow(clippy::too_many_arguments)]
fn evaluate(
    name: String,
    idx: &Index,
    d: &common::Data,
    exact: &[u32],
    ranks: &[usize],
    g: &GatherParams,
    train_s: f64,
) -> Row {
    let nq = d.nq;
    let labels = d.labels.as_ref().unwrap();
    let mut res = GatherResult::default();
    let (mut total, mut lab, mut t1, mut t10) = (0usize, 0usize, 0usize, 0usize);
    for c in (0..nq).step_by(1024) {
        let n = 1024.min(nq - c);
        idx.candidates(&d.q[c * d.dim..], n, d.dim, g, &mut res)
            .expect("candidates");
        for i in 0..n {
            let cs = &res.ids[res.offsets[i]..res.offsets[i + 1]];
            total += cs.len();
            let qi = c + i;
            lab += cs.binary_search(&labels[qi]).is_ok() as usize;
            let e = &exact[qi * 10..qi * 10 + 10];
            t1 += cs.binary_search(&e[0]).is_ok() as usize;
            t10 += e.iter().filter(|x| cs.binary_search(x).is_ok()).count();
        }
    }
    let cands = total as f64 / nq as f64;
    let cc = cands.round() as usize;
    let exact_c = ranks.iter().filter(|&&r| r < cc).count() as f64 / ranks.len() as f64;
    // Query time: top-10, batches of 64, this thread only.
    let (mut ids, mut sc) = (vec![0u32; nq * 10], vec![0f32; nq * 10]);
    common::query_all(idx, d, 0, 256.min(nq), 10, g, 64, &mut ids, &mut sc); // warm-up
    let t = Instant::now();
    common::query_all(idx, d, 0, nq, 10, g, 64, &mut ids, &mut sc);
    let us = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
    Row {
        name,
        cands,
        label: lab as f64 / nq as f64,
        top1: t1 as f64 / nq as f64,
        top10: t10 as f64 / (10 * nq) as f64,
        exact_c,
        us,
        train_s,
    }
}

fn main() {
    let mut a = std::env::args().skip(1);
    let dir: PathBuf = a
        .next()
        .unwrap_or_else(|| "../shared/data/w2v-gutenberg".into())
        .into();
    let nq: usize = a.next().map_or(20_000, |s| s.parse().expect("NQ"));
    let d = match common::w2v(&dir, nq) {
        None => {
            println!("skipped: ../shared/data not found ({})", dir.display());
            return;
        }
        Some(r) => r.expect("w2v data"),
    };
    let t = Instant::now();
    let tr = train_data(&dir, d.rows, d.dim);
    println!(
        "{}; training: {} pairs grouped into {} multi-label queries (read in {:.1} s)",
        d.name,
        tr.pairs,
        tr.n,
        t.elapsed().as_secs_f64()
    );
    let (exact, _, secs) = common::exact_topk(&d, d.nq, 10);
    let t = Instant::now();
    let ranks = label_ranks(&d, RANK_Q.min(d.nq));
    println!(
        "exact top-10 in {secs:.2} s; label ranks of the first {} queries in {:.1} s; \
         exact top-1 = label for {:.2} %",
        ranks.len(),
        t.elapsed().as_secs_f64(),
        100.0 * ranks.iter().filter(|&&r| r == 0).count() as f64 / ranks.len() as f64
    );
    {
        // Counting alone (K=10 L=16 codes of the training queries), 1 thread
        // vs every core, best of 3.
        let idx = common::build(
            &d,
            &IndexParams {
                bits: 10,
                tables: 16,
                ..IndexParams::default()
            },
            None,
        )
        .expect("build");
        let l = 16usize;
        let mut codes = vec![0u32; tr.n * l];
        let t = Instant::now();
        idx.query_codes(&tr.q, tr.n, d.dim, &mut codes)
            .expect("codes");
        let hash_s = t.elapsed().as_secs_f64();
        let mut best = [f64::MAX; 2];
        for _ in 0..3 {
            for (j, threads) in [1u32, 0].into_iter().enumerate() {
                let t = Instant::now();
                let c = lshk::labels::count_labels(
                    &codes,
                    tr.n,
                    l,
                    idx.range_bits(),
                    &tr.off,
                    &tr.ys,
                    64,
                    threads,
                )
                .expect("count");
                best[j] = best[j].min(t.elapsed().as_secs_f64());
                std::hint::black_box(c);
            }
        }
        println!(
            "K=10 L=16: hashing the {} training queries {:.3} s; counting + capping {} pairs x 16 \
             tables: {:.3} s on 1 thread, {:.3} s on all cores ({:.0} M keys/s on 1 thread)",
            tr.n,
            hash_s,
            tr.pairs,
            best[0],
            best[1],
            (tr.pairs * l) as f64 / best[0] / 1e6
        );
    }
    println!();
    println!(
        "| setting | candidates / query | % of rows | label recall | exact top-C label recall | \
         top-1 recall | top-10 recall | query µs | train s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    // (K, L, transform, probes, Some((cap, policy)))
    type S = (u32, u32, Transform, u32, Option<(u32, LabelPolicy)>);
    let (n, m) = (Transform::None, Transform::Mips);
    let (b, i) = (LabelPolicy::Beside, LabelPolicy::Instead);
    let settings: Vec<S> = vec![
        (10, 16, n, 0, None),
        (8, 16, n, 0, None),
        (6, 16, n, 0, None),
        (10, 64, n, 0, None),
        (10, 16, m, 0, None),
        (8, 16, m, 0, None),
        (10, 16, n, 4, None),
        (10, 16, n, 16, None),
        (10, 16, m, 16, None),
        (10, 16, n, 0, Some((64, b))),
        (10, 16, n, 0, Some((16, b))),
        (10, 16, n, 0, Some((32, b))),
        (10, 16, n, 0, Some((128, b))),
        (10, 16, n, 0, Some((64, i))),
        (10, 16, n, 0, Some((128, i))),
        (10, 16, n, 0, Some((256, i))),
        (10, 16, n, 0, Some((96, i))),
        (10, 32, n, 0, Some((48, i))),
        (10, 32, n, 0, Some((48, b))),
        (12, 32, n, 0, Some((64, i))),
        (10, 8, n, 0, Some((64, i))),
        (10, 32, n, 0, Some((64, i))),
        (12, 16, n, 0, Some((64, i))),
        (10, 16, m, 0, Some((64, b))),
        (10, 16, m, 0, Some((64, i))),
        (10, 16, n, 2, Some((64, i))),
    ];
    for (bits, tables, transform, probes, lab) in settings {
        let p = IndexParams {
            bits,
            tables,
            transform,
            ..IndexParams::default()
        };
        let mut idx = common::build(&d, &p, None).expect("build");
        let mut train_s = 0.0;
        if let Some((cap, policy)) = lab {
            let t = Instant::now();
            idx.train_labels(
                &tr.q,
                tr.n,
                d.dim,
                &tr.off,
                &tr.ys,
                &LabelParams {
                    label_cap: cap,
                    policy,
                },
            )
            .expect("train");
            train_s = t.elapsed().as_secs_f64();
        }
        let g = GatherParams {
            probes,
            ..GatherParams::default()
        };
        let mut name = format!("SimHash K={bits} L={tables}");
        if transform == Transform::Mips {
            name += " + MIPS";
        }
        if probes > 0 {
            name += &format!(" + {probes} probes");
        }
        if let Some((cap, policy)) = lab {
            name += &format!(
                " + labels {} cap {cap}",
                if policy == LabelPolicy::Beside {
                    "beside"
                } else {
                    "instead"
                }
            );
        }
        let r = evaluate(name, &idx, &d, &exact, &ranks, &g, train_s);
        println!(
            "| {} | {:.0} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {} |",
            r.name,
            r.cands,
            100.0 * r.cands / d.rows as f64,
            r.label,
            r.exact_c,
            r.top1,
            r.top10,
            r.us,
            if lab.is_some() {
                format!("{:.2}", r.train_s)
            } else {
                "-".into()
            }
        );
    }
}
