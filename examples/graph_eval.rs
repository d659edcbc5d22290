//! The FGD graph (`lshk::graph`) on w2v-gutenberg and on the demo's W1
//! layer: FGD's efSearch table (P@1 against the exact argmax, recall@10
//! against the exact top-10, rows scored per query, microseconds per query
//! on one thread with B = 1), with the build time (wall and CPU) and memory.
//!
//! `cargo run --release --example graph_eval [-- --rows N] [--nq N] [--m M]
//! [--efc N] [--ef 10,20,50,...] [--storage f32,bf16,i8] [--threads N]
//! [--only w1|w2v] [--w2v DIR] [--passes N] [--walk exact,int8]
//! [--rerank N]`
//!
//! `--walk int8`: the int8 walk with the exact re-rank of the best
//! `--rerank` (0 = the whole pool) of the pool.
//!
//! `--rows` shrinks W1 (670,091 rows by default; the build of the full
//! layer takes minutes on two cores). Prints `skipped: ../shared/data not
//! found` for w2v when it is absent.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use lshk::graph::{Graph, GraphParams, GraphStats, SearchParams, Storage, Walk};

fn main() {
    let mut rows = 670_091usize;
    let mut nq = 1000usize;
    let mut w2v: PathBuf = "../shared/data/w2v-gutenberg".into();
    let mut p = GraphParams {
        m: 16,
        ef_construction: 100,
        ..GraphParams::default()
    };
    let mut efs: Vec<usize> = vec![10, 20, 50, 100, 200, 400];
    let mut storages = vec![Storage::F32];
    let mut only = None::<String>;
    let mut passes = 3usize;
    let mut cache = None::<PathBuf>;
    let mut walks = vec![Walk::Exact];
    let mut rerank = 0usize;
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--rows" => rows = v().parse().expect("rows"),
            "--nq" => nq = v().parse().expect("nq"),
            "--m" => p.m = v().parse().expect("m"),
            "--efc" => p.ef_construction = v().parse().expect("efc"),
            "--threads" => p.threads = v().parse().expect("threads"),
            "--passes" => passes = v().parse().expect("passes"),
            "--ef" => efs = v().split(',').map(|s| s.parse().expect("ef")).collect(),
            "--storage" => {
                storages = v()
                    .split(',')
                    .map(|s| match s {
                        "f32" => Storage::F32,
                        "bf16" => Storage::Bf16,
                        "i8" => Storage::I8,
                        _ => panic!("storage f32|bf16|i8"),
                    })
                    .collect()
            }
            "--only" => only = Some(v()),
            "--rerank" => rerank = v().parse().expect("rerank"),
            "--walk" => {
                walks = v()
                    .split(',')
                    .map(|s| match s {
                        "exact" => Walk::Exact,
                        "int8" => Walk::Int8,
                        _ => panic!("walk exact|int8"),
                    })
                    .collect()
            }
            "--w2v" => w2v = v().into(),
            "--cache" => cache = Some(v().into()),
            other => panic!("unknown option {other}"),
        }
    }
    println!(
        "tier {}, {} cores; M = {}, efConstruction = {}, build threads {} (0 = all)",
        lshk::isa::active().name(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        p.m,
        p.ef_construction,
        p.threads
    );
    if only.as_deref() != Some("w1") {
        match common::w2v(&w2v, nq) {
            None => println!("skipped: ../shared/data not found"),
            Some(d) => run(
                &d.expect("w2v"),
                &p,
                &efs,
                &storages,
                passes,
                cache.as_deref(),
                &walks,
                rerank,
            ),
        }
    }
    if only.as_deref() != Some("w2v") {
        let d = common::synthetic(rows, 4096.min(rows), nq);
        run(
            &d,
            &p,
            &efs,
            &storages,
            passes,
            cache.as_deref(),
            &walks,
            rerank,
        );
    }
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one plain struct that we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[allow(clippy::too_many_arguments)]
fn run(
    d: &common::Data,
    p: &GraphParams,
    efs: &[usize],
    storages: &[Storage],
    passes: usize,
    cache: Option<&std::path::Path>,
    walks: &[Walk],
    rerank: usize,
) {
    let k = 10;
    let nq = d.nq;
    println!("\n{}", d.name);
    let (exact, _, _) = common::exact_topk(d, nq, k);
    let cached = cache.map(|c| {
        c.join(format!(
            "graph-{}-{}-m{}-efc{}.lshk",
            d.rows, d.dim, p.m, p.ef_construction
        ))
    });
    if let Some(g) = cached.as_deref().and_then(|f| Graph::load(f).ok()) {
        println!("graph loaded from the cache (no build time)");
        for &w in walks {
            search_table(d, &g, Storage::F32, efs, passes, &exact, w, rerank);
        }
        return;
    }
    let (t, cpu0) = (Instant::now(), cpu_seconds());
    let g = Graph::build(
        &d.w,
        d.bias.as_deref(),
        d.rows,
        d.dim,
        d.dim,
        &GraphParams {
            storage: Storage::F32,
            ..*p
        },
    )
    .expect("build");
    let (build_s, build_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    println!(
        "build {build_s:.2} s (CPU {build_cpu:.2} s), max level {}, structure checksum {:016x}",
        g.max_level(),
        g.structure_checksum()
    );
    if let Some(f) = cached.as_deref() {
        g.save(f).expect("save the cached graph");
    }
    for &st in storages {
        // Other storages: the same graph (the build is on f32 rows and
        // deterministic), only the stored rows differ.
        let g2;
        let g = if st == Storage::F32 {
            &g
        } else {
            g2 = Graph::build(
                &d.w,
                d.bias.as_deref(),
                d.rows,
                d.dim,
                d.dim,
                &GraphParams { storage: st, ..*p },
            )
            .expect("build");
            &g2
        };
        for &w in walks {
            search_table(d, g, st, efs, passes, &exact, w, rerank);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn search_table(
    d: &common::Data,
    g: &Graph,
    st: Storage,
    efs: &[usize],
    passes: usize,
    exact: &[u32],
    walk: Walk,
    rerank: usize,
) {
    let (k, nq) = (10, d.nq);
    {
        println!(
            "\nstorage {st:?}, walk {walk:?} (rerank {rerank}, 0 = pool), memory {:.1} MiB (W {:.1} MiB)",
            g.memory_bytes() as f64 / 1048576.0,
            (d.rows * d.dim * 4) as f64 / 1048576.0
        );
        println!("| efSearch | P@1 | recall@10 | rows scored/q | us/q B=1 |");
        println!("|---:|---:|---:|---:|---:|");
        let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        for &ef in efs {
            let mut st = GraphStats::default();
            let sp = SearchParams { ef, walk, rerank };
            g.search_with(
                lshk::isa::active(),
                &d.q,
                nq,
                d.dim,
                k,
                &sp,
                &mut ids,
                &mut sc,
                Some(&mut st),
            )
            .expect("search");
            let r = common::recall(&ids, exact, k, nq, None);
            let p1 = (0..nq).filter(|&i| ids[i * k] == exact[i * k]).count() as f64 / nq as f64;
            let mut b1 = f64::INFINITY;
            for _ in 0..passes {
                let t = Instant::now();
                for i in 0..nq {
                    g.search_with(
                        lshk::isa::active(),
                        d.query(i),
                        1,
                        d.dim,
                        k,
                        &sp,
                        &mut ids[i * k..],
                        &mut sc[i * k..],
                        None,
                    )
                    .unwrap();
                }
                b1 = b1.min(t.elapsed().as_secs_f64() / nq as f64);
            }
            println!(
                "| {ef} | {p1:.3} | {:.3} | {:.0} | {:.1} |",
                r.top10,
                st.distances as f64 / nq as f64,
                b1 * 1e6
            );
        }
    }
}
