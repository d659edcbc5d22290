//! Recall on a real output layer: `../shared/data/w2v-gutenberg` (a trained
//! word2vec skip-gram output layer, 35,388 x 128, no bias; see its README).
//!
//! `cargo run --release --example w2v_recall [-- DIR [NQ]]`
//!
//! Queries: the input embeddings of the centre words of the first NQ
//! (default 2,000) held-out pairs; labels: their context words. Ground
//! truth: the exact top-10 of the full layer (`lshk::dense`). For each
//! setting it prints the mean candidates per query and, against the exact
//! layer, top-1 recall (exact argmax among the candidates), top-10 recall
//! (fraction of the exact top-10 returned), and the label among the
//! returned top-10 (beside the exact layer's own top-10 hit rate, its
//! ceiling). Settings: raw SimHash, SimHash on the MIPS transform, both
//! with multi-probing, and DWTA (bin size 8), at several (K, L). A random
//! subset of c rows would recall c / rows of anything.
//!
//! Prints `skipped: ../shared/data not found` when the data are absent.

mod common;

use std::path::PathBuf;

use common::{Family, IndexParams, Transform};
use lshk::tables::GatherParams;

fn main() {
    let mut a = std::env::args().skip(1);
    let dir: PathBuf = a
        .next()
        .unwrap_or_else(|| "../shared/data/w2v-gutenberg".into())
        .into();
    let nq: usize = a.next().map_or(2000, |s| s.parse().expect("NQ"));
    let data = match common::w2v(&dir, nq) {
        None => {
            println!("skipped: ../shared/data not found ({})", dir.display());
            return;
        }
        Some(r) => r.expect("w2v data"),
    };
    let nq = data.nq;
    let k = 10;
    println!("{}", data.name);
    let (exact, _, secs) = common::exact_topk(&data, nq, k);
    let r0 = common::recall(&exact, &exact, k, nq, data.labels.as_deref());
    println!(
        "exact top-10 by the dense layer in {secs:.2} s; the label is the exact top-1 for {:.1} % \
         and among the exact top-10 for {:.1} % of queries",
        100.0 * label_top1(&exact, k, data.labels.as_deref().unwrap()),
        100.0 * r0.exact_label10
    );
    println!();
    println!("| family | transform | K | L | probes | candidates / query | % of rows | top-1 recall | top-10 recall | label in top-10 |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let sim = |bits, tables, tr, probes| (Family::SimHash, bits, tables, tr, probes);
    let dw = |bits, tables| (Family::Dwta, bits, tables, Transform::None, 0);
    let settings = [
        sim(6, 16, Transform::None, 0),
        sim(6, 64, Transform::None, 0),
        sim(8, 32, Transform::None, 0),
        sim(8, 128, Transform::None, 0),
        sim(10, 64, Transform::None, 0),
        sim(10, 256, Transform::None, 0),
        sim(6, 16, Transform::Mips, 0),
        sim(6, 64, Transform::Mips, 0),
        sim(8, 32, Transform::Mips, 0),
        sim(8, 128, Transform::Mips, 0),
        sim(10, 256, Transform::Mips, 0),
        sim(8, 32, Transform::None, 8),
        sim(8, 64, Transform::None, 16),
        sim(10, 64, Transform::None, 32),
        sim(10, 128, Transform::None, 32),
        sim(8, 64, Transform::Mips, 16),
        sim(10, 128, Transform::Mips, 32),
        dw(2, 16),
        dw(2, 64),
        dw(2, 128),
        dw(3, 64),
        dw(3, 256),
    ];
    for (family, bits, tables, transform, probes) in settings {
        let p = IndexParams {
            family,
            bits,
            tables,
            bin_size: 8,
            transform,
            ..IndexParams::default()
        };
        let idx = common::build(&data, &p, None).expect("build");
        let g = GatherParams {
            probes,
            ..GatherParams::default()
        };
        let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        let cands = common::query_all(&idx, &data, 0, nq, k, &g, 64, &mut ids, &mut sc);
        let r = common::recall(&ids, &exact, k, nq, data.labels.as_deref());
        println!(
            "| {} | {} | {bits} | {tables} | {probes} | {cands:.0} | {:.1} | {:.3} | {:.3} | {:.3} |",
            if family == Family::SimHash { "SimHash" } else { "DWTA (B=8)" },
            common::transform_name(transform),
            100.0 * cands / data.rows as f64,
            r.top1,
            r.top10,
            r.label10
        );
    }
}

fn label_top1(exact: &[u32], k: usize, labels: &[u32]) -> f64 {
    let hits = labels
        .iter()
        .enumerate()
        .filter(|(i, &l)| exact[i * k] == l)
        .count();
    hits as f64 / labels.len().max(1) as f64
}
