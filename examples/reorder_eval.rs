//! What storing W in bucket order buys the LSH index (issue 13 item 2).
//!
//! The IVF index stores each list's rows contiguously, so a probe streams
//! them; the SimHash index gathers its candidates from wherever they lie in
//! W. This example builds the SimHash index twice over the same layer:
//! once on W as given, once on W with its rows permuted into the order of
//! the first table's buckets (bucket by bucket, ids ascending inside a
//! bucket). The planes are seeded and do not depend on the rows, so every
//! row hashes to the same codes and every query gets the same candidates
//! (checked: the same top-k after mapping ids back); only where the
//! candidate rows lie in memory differs. It prints the query time of both
//! (thread CPU time, one thread, B = 1 and B = 64), and the fraction of a
//! query's candidates that come from the first table's probed bucket (the
//! only ones the reordering makes contiguous).
//!
//! `cargo run --release --example reorder_eval [-- --rows N] [--nq N]
//! [--bits K] [--tables L] [--probes P] [--w2v DIR] [--only w1|w2v]`
//!
//! Prints `skipped: ../shared/data not found` for w2v when it is absent.

mod common;

use std::path::PathBuf;

use lshk::index::{Family, Index, IndexParams};
use lshk::tables::GatherParams;

fn main() {
    let mut rows = 670_091usize;
    let mut nq = 1000usize;
    let (mut bits, mut tables, mut probes) = (16u32, 24u32, 4u32);
    let mut w2v: Option<PathBuf> = Some("../shared/data/w2v-gutenberg".into());
    let mut only = None::<String>;
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--rows" => rows = v().parse().expect("rows"),
            "--nq" => nq = v().parse().expect("nq"),
            "--bits" => bits = v().parse().expect("bits"),
            "--tables" => tables = v().parse().expect("tables"),
            "--probes" => probes = v().parse().expect("probes"),
            "--w2v" => w2v = Some(v().into()),
            "--only" => only = Some(v()),
            other => panic!("unknown option {other}"),
        }
    }
    let p = IndexParams {
        family: Family::SimHash,
        bits,
        tables,
        ..IndexParams::default()
    };
    let g = GatherParams {
        probes,
        ..GatherParams::default()
    };
    println!(
        "lshk {} reorder_eval (tier {}): SimHash K = {bits}, L = {tables}, probes {probes} \
         (the demo's LSH settings), W f32 borrowed",
        env!("CARGO_PKG_VERSION"),
        lshk::isa::active().name()
    );
    if only.as_deref() != Some("w2v") {
        let d = common::synthetic(rows, 4096, nq);
        run(&d, &p, &g);
    }
    if only.as_deref() != Some("w1") {
        match w2v.as_deref().and_then(|dir| common::w2v(dir, nq)) {
            None => println!("skipped: ../shared/data not found"),
            Some(d) => run(&d.expect("w2v"), &p, &g),
        }
    }
}

/// CPU seconds of the calling thread.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec that we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Best of `reps` passes over the queries, in us per query (thread CPU).
fn time_queries(idx: &Index, d: &common::Data, g: &GatherParams, batch: usize, reps: usize) -> f64 {
    let k = 10;
    let (mut ids, mut sc) = (vec![0u32; d.nq * k], vec![0f32; d.nq * k]);
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = thread_cpu();
        common::query_all(idx, d, 0, d.nq, k, g, batch, &mut ids, &mut sc);
        best = best.min((thread_cpu() - t) * 1e6 / d.nq as f64);
    }
    best
}

fn run(d: &common::Data, p: &IndexParams, g: &GatherParams) {
    println!("{}", d.name);
    let k = 10;
    let a = common::build(d, p, None).expect("build");
    // The first table's buckets in order: a permutation of the rows.
    let (_, members) = a.tables().csr(0);
    let perm: Vec<u32> = members.to_vec();
    assert_eq!(perm.len(), d.rows, "the first table holds every row");
    let mut w = vec![0f32; d.rows * d.dim];
    for (i, &r) in perm.iter().enumerate() {
        let r = r as usize;
        w[i * d.dim..(i + 1) * d.dim].copy_from_slice(&d.w[r * d.dim..(r + 1) * d.dim]);
    }
    let bias = d
        .bias
        .as_ref()
        .map(|b| perm.iter().map(|&r| b[r as usize]).collect::<Vec<f32>>());
    let dr = common::Data {
        name: format!("{} (rows in bucket order)", d.name),
        w,
        bias,
        rows: d.rows,
        dim: d.dim,
        q: d.q.clone(),
        nq: d.nq,
        labels: None,
    };
    let b = common::build(&dr, p, None).expect("build");
    // Same candidates: the same top-k once ids are mapped back.
    let nq = d.nq;
    let (mut ia, mut sa) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let (mut ib, mut sb) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let ca = common::query_all(&a, d, 0, nq, k, g, 64, &mut ia, &mut sa);
    let cb = common::query_all(&b, &dr, 0, nq, k, g, 64, &mut ib, &mut sb);
    let same = ia
        .iter()
        .zip(&ib)
        .all(|(&x, &y)| x == y || (y != u32::MAX && perm[y as usize] == x));
    println!(
        "candidates per query: {ca:.0} vs {cb:.0}; same top-{k} after mapping ids back: {same}"
    );
    // How many of a query's candidates the first table contributes.
    let t0: usize = {
        let (offs, _) = a.tables().csr(0);
        let sizes: Vec<usize> = offs.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
        let nonempty = sizes.iter().filter(|&&s| s > 0).count().max(1);
        sizes.iter().sum::<usize>() / nonempty
    };
    println!("first table: mean non-empty bucket {t0} rows");
    println!("| W order | us/q B=1 | us/q B=64 |");
    println!("|---|---:|---:|");
    for round in 0..2 {
        for (name, idx, data) in [("as given", &a, d), ("bucket order", &b, &dr)] {
            let b1 = time_queries(idx, data, g, 1, 3);
            let b64 = time_queries(idx, data, g, 64, 3);
            println!("| {name} (pass {}) | {b1:.1} | {b64:.1} |", round + 1);
        }
    }
}
