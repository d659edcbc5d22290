//! A batch through the one index, on the calling thread and split over
//! threads (`QueryParams::threads`): microseconds per query at B = 1, and
//! at B = 64 and 256 (`--batches`) with 1 and with `--threads` (default 2;
//! a list such as 2,4,8,16 measures each) threads, measured in alternation
//! (1, t, 1, t, ...) in one process, with the ratio of each adjacent pair
//! and their median, the core share (CPU time / (wall x threads); 1.0 when
//! every thread had a core to itself) and the CPU time per query.
//!
//! `--callers`: also t independent callers, each a thread of its own
//! answering batches of B on one thread (`threads` 0) on the shared index:
//! the throughput the machine gives t threads that share nothing but the
//! index, the bound for a split of one batch.
//!
//! Layers: w2v-gutenberg (`../shared/data/w2v-gutenberg`, held-out context
//! embeddings as queries; `skipped: ../shared/data not found` without it,
//! `--w2v ''` to leave it out)
//! and the synthetic W1 (670,091 x 128, `--rows` to change; 0 = none), and
//! a layer given as `--npy DIR` (`W.npy`, `Q.npy`, optional `b.npy`, as
//! `ivf_eval --npy` takes it). Sources: IVF
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

/// Queries answered by looping over `d`'s first `nq` queries in batches of
/// `b` with `threads` for at least `secs` seconds.
fn count_queries(
    idx: &Index,
    d: &common::Data,
    nq: usize,
    b: usize,
    threads: u32,
    secs: f64,
) -> usize {
    let qp = QueryParams {
        threads,
        ..Default::default()
    };
    let k = 10usize;
    let (mut ids, mut sc) = (vec![0u32; b * k], vec![0f32; b * k]);
    let t0 = Instant::now();
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
    done
}

/// Seconds per query (wall) and the core share of answering `d`'s first
/// `nq` queries in batches of `b` with `threads`, repeated for at least
/// `secs` seconds, by `callers` threads of their own at once (1: the
/// calling thread); the time is the wall time over all their queries.
fn per_query(
    idx: &Index,
    d: &common::Data,
    nq: usize,
    b: usize,
    threads: u32,
    callers: usize,
    secs: f64,
) -> (f64, f64) {
    let (t0, c0) = (Instant::now(), thread_cpu_seconds());
    let done: usize = if callers <= 1 {
        count_queries(idx, d, nq, b, threads, secs)
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..callers)
                .map(|_| s.spawn(|| count_queries(idx, d, nq, b, threads, secs)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        })
    };
    let wall = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - c0;
    let t = callers.max(1) * (threads.max(1) as usize).min(b);
    (wall / done as f64, cpu / (wall * t as f64))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut rows = 670_091usize;
    let mut w2v: Option<PathBuf> = Some("../shared/data/w2v-gutenberg".into());
    let mut threads = vec![2u32];
    let mut batches = vec![64usize, 256];
    let mut reps = 5usize;
    let mut secs = 0.5f64;
    let mut nq = 512usize;
    let mut callers = false;
    let mut npy: Option<PathBuf> = None;
    let mut sources = vec![Family::Ivf, Family::SimHash];
    let list = |v: String| -> Vec<usize> {
        v.split(',')
            .map(|x| x.parse().expect("a comma-separated list of numbers"))
            .collect()
    };
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        if x == "--callers" {
            callers = true;
            continue;
        }
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--rows" => rows = v().parse().expect("rows"),
            "--w2v" => w2v = Some(v()).filter(|d| !d.is_empty()).map(Into::into),
            "--npy" => npy = Some(v().into()),
            "--threads" => threads = list(v()).into_iter().map(|t| t as u32).collect(),
            "--batches" => batches = list(v()),
            "--nq" => nq = v().parse().expect("nq"),
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
    let mut layers = Vec::new();
    if let Some(dir) = w2v.as_deref() {
        match common::w2v(dir, nq) {
            None => println!("skipped: ../shared/data not found"),
            Some(d) => layers.push(d.expect("w2v")),
        }
    }
    if rows > 0 {
        layers.push(common::synthetic(rows, 4096, nq));
    }
    if let Some(dir) = &npy {
        layers.push(common::npy_dir(dir).expect("--npy DIR: W.npy, Q.npy [b.npy]"));
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
            let (b1, _) = per_query(&idx, d, nq, 1, 1, 1, secs);
            println!("  B = 1: {:.1} us/query", b1 * 1e6);
            for &b in &batches {
                let b = b.min(nq);
                for &t in &threads {
                    let (mut r, mut one, mut many) = (Vec::new(), Vec::new(), Vec::new());
                    let mut share = (Vec::new(), Vec::new());
                    let mut indep = (Vec::new(), Vec::new());
                    for _ in 0..reps {
                        let (s1, c1) = per_query(&idx, d, nq, b, 1, 1, secs);
                        let (st, ct) = per_query(&idx, d, nq, b, t, 1, secs);
                        r.push(s1 / st);
                        one.push(s1);
                        many.push(st);
                        share.0.push(c1);
                        share.1.push(ct);
                        if callers {
                            let (si, ci) = per_query(&idx, d, nq, b, 0, t as usize, secs);
                            indep.0.push(s1 / si);
                            indep.1.push(ci);
                        }
                    }
                    let tt = (t.max(1) as usize).min(b) as f64;
                    println!(
                        "  B = {b}: 1 thread {:.1} us/query ({:.2} of B = 1), {t} threads {:.1} us/query; \
                         speed-up median {:.2} (min {:.2}, max {:.2}); core share {:.2} / {:.2}; \
                         CPU us/query {:.1} / {:.1}",
                        median(one.clone()) * 1e6,
                        median(one.clone()) / b1,
                        median(many.clone()) * 1e6,
                        median(r.clone()),
                        r.iter().cloned().fold(f64::INFINITY, f64::min),
                        r.iter().cloned().fold(0.0, f64::max),
                        median(share.0.clone()),
                        median(share.1.clone()),
                        median(one) * median(share.0) * 1e6,
                        median(many) * median(share.1) * tt * 1e6,
                    );
                    if callers {
                        println!(
                            "    {t} independent callers (each one thread, B = {b}): speed-up median {:.2} \
                             (min {:.2}, max {:.2}); core share {:.2}",
                            median(indep.0.clone()),
                            indep.0.iter().cloned().fold(f64::INFINITY, f64::min),
                            indep.0.iter().cloned().fold(0.0, f64::max),
                            median(indep.1),
                        );
                    }
                }
            }
        }
    }
}
