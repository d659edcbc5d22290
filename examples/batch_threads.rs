//! A batch through the one index, on the calling thread and split over
//! threads (`QueryParams::threads`): microseconds per query at B = 1, and
//! at B = 64 and 256 with 1 and with `--threads` (default 2) threads,
//! measured in alternation (1, t, 1, t, ...) in one process, with the ratio
//! of each adjacent pair and their median, and the core share (CPU time /
//! (wall x threads); 1.0 when every thread had a core to itself).
//!
//! Layers: w2v-gutenberg (`../shared/data/w2v-gutenberg`, held-out context
//! embeddings as queries; `skipped: ../shared/data not found` without it)
//! and the synthetic W1 (670,091 x 128, `--rows` to change). Sources: IVF
//! (default knobs) and SimHash (K 12, L 50) by default, `--source ivf` etc.
//!
//! `cargo run --release --example batch_threads [-- --threads 2 --reps 5]`.
//! Figures: benches/threads.md.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use lshk::index::{Family, Index, IndexParams, QueryParams};

fn thread_cpu_seconds() -> f64 {
    // SAFETY: clock_gettime writes one plain struct that we own.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Seconds per query (wall) and the core share of answering `d`'s first
/// `nq` queries in batches of `b` with `threads`, repeated for at least
/// `secs` seconds.
fn per_query(
    idx: &Index,
    d: &common::Data,
    nq: usize,
    b: usize,
    threads: u32,
    secs: f64,
) -> (f64, f64) {
    let qp = QueryParams {
        threads,
        ..Default::default()
    };
    let k = 10usize;
    let (mut ids, mut sc) = (vec![0u32; b * k], vec![0f32; b * k]);
    let (t0, c0) = (Instant::now(), thread_cpu_seconds());
    let mut done = 0usize;
    while t0.elapsed().as_secs_f64() < secs {
        for s in (0..nq - b + 1).step_by(b) {
            idx.query_with(
                &d.q[s * d.dim..],
                b,
                d.dim,
                k as u32,
                &qp,
                &mut ids,
                &mut sc,
                None,
            )
            .unwrap();
            done += b;
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - c0;
    let t = (threads.max(1) as usize).min(b) as f64;
    (wall / done as f64, cpu / (wall * t))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut rows = 670_091usize;
    let mut w2v: Option<PathBuf> = Some("../shared/data/w2v-gutenberg".into());
    let mut threads = 2u32;
    let mut reps = 5usize;
    let mut secs = 0.5f64;
    let mut sources = vec![Family::Ivf, Family::SimHash];
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--rows" => rows = v().parse().expect("rows"),
            "--w2v" => w2v = Some(v().into()),
            "--threads" => threads = v().parse().expect("threads"),
            "--reps" => reps = v().parse().expect("reps"),
            "--secs" => secs = v().parse().expect("secs"),
            "--source" => {
                sources = vec![match v().as_str() {
                    "simhash" => Family::SimHash,
                    "graph" => Family::Graph,
                    "forest" => Family::Forest,
                    _ => Family::Ivf,
                }]
            }
            other => panic!("unknown option {other}"),
        }
    }
    let nq = 512;
    let mut layers = Vec::new();
    match w2v.as_deref().and_then(|dir| common::w2v(dir, nq)) {
        None => println!("skipped: ../shared/data not found"),
        Some(d) => layers.push(d.expect("w2v")),
    }
    if rows > 0 {
        layers.push(common::synthetic(rows, 4096, nq));
    }
    for d in &layers {
        let nq = d.nq.min(nq);
        for &source in &sources {
            let p = IndexParams {
                family: source,
                ..Default::default()
            };
            let idx = Index::build(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, &p, None)
                .expect("build");
            println!("\n{} — {source:?}, top-10, {nq} queries", d.name);
            let (b1, _) = per_query(&idx, d, nq, 1, 1, secs);
            println!("  B = 1: {:.1} us/query", b1 * 1e6);
            for b in [64usize, 256] {
                let b = b.min(nq);
                let (mut r, mut one, mut many) = (Vec::new(), Vec::new(), Vec::new());
                let mut share = (Vec::new(), Vec::new());
                for _ in 0..reps {
                    let (s1, c1) = per_query(&idx, d, nq, b, 1, secs);
                    let (st, ct) = per_query(&idx, d, nq, b, threads, secs);
                    r.push(s1 / st);
                    one.push(s1);
                    many.push(st);
                    share.0.push(c1);
                    share.1.push(ct);
                }
                println!(
                    "  B = {b}: 1 thread {:.1} us/query ({:.2} of B = 1), {threads} threads {:.1} us/query; \
                     speed-up median {:.2} (min {:.2}, max {:.2}); core share {:.2} / {:.2}",
                    median(one.clone()) * 1e6,
                    median(one) / b1,
                    median(many) * 1e6,
                    median(r.clone()),
                    r.iter().cloned().fold(f64::INFINITY, f64::min),
                    r.iter().cloned().fold(0.0, f64::max),
                    median(share.0),
                    median(share.1),
                );
            }
        }
    }
}
