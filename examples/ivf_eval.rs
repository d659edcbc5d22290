//! The IVF index (`lshk::ivf`) on the embedded W1 layer and, when present,
//! on w2v-gutenberg: recall@10 against the exact layer and microseconds per
//! query (one thread, B = 1 and B = 64) over a sweep of `nprobe` and
//! `rerank`, with the build time and memory.
//!
//! `cargo run --release --example ivf_eval [-- --rows N] [--w2v DIR] [--nq N]
//! [--nlist N] [--iters N] [--train N] [--codes i8|pq4|pq4i8|none] [--pq-m M] [--only w1|w2v]
//! [--nprobe 1,2,4,...] [--rerank 16,32,...] [--refine 256,...] [--reach 0,1.5,2,...]
//! [--npy DIR] [--calibrate 0.95,0.99] [--cal-nq N] [--reps N] [--batch 1|64]`
//!
//! Times are the best of `--reps` (default 3) passes, B = 1 and B = 64
//! interleaved; the CPU columns are the thread's CPU time per query (steadier
//! than wall time when other jobs share the cores). `--batch 1` or `64`
//! times only that batch size (the other's columns read `inf`), e.g. to
//! profile one of them.
//!
//! `--calibrate T,...` also runs [`Ivf::calibrate`] for each recall target
//! on `--cal-nq` (default 500) further queries of the same workload, which
//! the evaluation does not use, and reports the chosen parameters, their
//! recall on the calibration sample, and their recall and time on the
//! evaluation queries (`--nprobe 0` skips the sweep).
//!
//! `--npy DIR` runs a user layer instead (`DIR/W.npy`, `DIR/Q.npy` and,
//! if present, `DIR/b.npy`; e.g. the MiniLM layer that
//! `benches/peers/minilm_export.py` writes).
//!
//! `--reach` 0 (the default sweep) visits exactly `nprobe` lists; a positive
//! reach selects lists adaptively with `nprobe` as the cap (use
//! `--nprobe 4294967295` for none; `lshk::ivf::SearchParams`).
//!
//! Prints `skipped: ../shared/data not found` for w2v when it is absent.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};

fn main() {
    let mut rows = 670_091usize;
    let mut w2v: Option<PathBuf> = Some("../shared/data/w2v-gutenberg".into());
    let mut nq = 1000usize;
    let mut p = IvfParams::default();
    let mut only = None::<String>;
    let mut npy = None::<PathBuf>;
    let mut nprobes: Vec<u32> = vec![1, 2, 4, 8, 16, 32, 64];
    let mut reranks: Vec<u32> = vec![16, 32, 64, 128, 256];
    let mut refines: Vec<u32> = vec![lshk::ivf::DEFAULT_REFINE];
    let mut reaches: Vec<f32> = vec![0.0];
    let mut targets: Vec<f32> = Vec::new();
    let mut cal_nq = 500usize;
    let mut reps = 3usize;
    let mut batch = None::<usize>;
    let list = |s: String| -> Vec<u32> { s.split(',').map(|x| x.parse().expect("list")).collect() };
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--rows" => rows = v().parse().expect("rows"),
            "--w2v" => w2v = Some(v().into()),
            "--nq" => nq = v().parse().expect("nq"),
            "--nlist" => p.nlist = v().parse().expect("nlist"),
            "--iters" => p.iters = v().parse().expect("iters"),
            "--train" => p.train_rows = v().parse().expect("train"),
            "--only" => only = Some(v()),
            "--npy" => npy = Some(v().into()),
            "--nprobe" => nprobes = list(v()),
            "--rerank" => reranks = list(v()),
            "--refine" => refines = list(v()),
            "--reach" => reaches = v().split(',').map(|x| x.parse().expect("reach")).collect(),
            "--codes" => {
                p.codes = match v().as_str() {
                    "none" => Codes::None,
                    "pq4" => Codes::Pq4,
                    "pq4i8" => Codes::Pq4I8,
                    _ => Codes::I8,
                }
            }
            "--pq-m" => p.pq_m = v().parse().expect("pq-m"),
            "--pq-eta" => p.pq_eta = v().parse().expect("pq-eta"),
            "--calibrate" => targets = v().split(',').map(|x| x.parse().expect("target")).collect(),
            "--cal-nq" => cal_nq = v().parse().expect("cal-nq"),
            "--reps" => reps = v().parse().expect("reps"),
            "--batch" => batch = Some(v().parse().expect("batch 1 or 64")),
            other => panic!("unknown option {other}"),
        }
    }
    let cal = if targets.is_empty() { 0 } else { cal_nq };
    let nprobes: Vec<u32> = nprobes.into_iter().filter(|&p| p > 0).collect();
    let run = |d: &common::Data| {
        // The calibration sample is the queries after the evaluated ones.
        let n_eval = d.nq.saturating_sub(cal).min(nq);
        run(
            d, n_eval, &p, &nprobes, &reranks, &refines, &reaches, &targets, reps, batch,
        )
    };
    if let Some(dir) = npy {
        let d = common::npy_dir(&dir).expect("npy layer");
        let d = common::Data {
            nq: d.nq.min(nq + cal),
            ..d
        };
        run(&d);
        return;
    }
    if only.as_deref() != Some("w2v") {
        let d = common::synthetic(rows, 4096, nq + cal);
        run(&d);
    }
    if only.as_deref() != Some("w1") {
        match w2v.as_deref().and_then(|dir| common::w2v(dir, nq + cal)) {
            None => println!("skipped: ../shared/data not found"),
            Some(d) => run(&d.expect("w2v")),
        }
    }
}

/// CPU seconds of the calling thread so far.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: clock_gettime writes one plain struct that we own.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// User + system CPU seconds of this process so far (the build's CPU time
/// is a steadier measure than wall time on a shared machine).
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
    nq: usize,
    p: &IvfParams,
    nprobes: &[u32],
    reranks: &[u32],
    refines: &[u32],
    reaches: &[f32],
    targets: &[f32],
    reps: usize,
    batch: Option<usize>,
) {
    let (time1, time64) = (batch != Some(64), batch != Some(1));
    let k = 10;
    println!("{}", d.name);
    let (exact, _, _) = common::exact_topk(d, nq, k);
    let (t, cpu0) = (Instant::now(), cpu_seconds());
    // SAFETY: d.w outlives the index (dropped at the end of this function).
    let ivf = unsafe { Ivf::build_borrowed(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, p) }
        .or_else(|_| Ivf::build(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, p))
        .expect("build");
    let (build_s, build_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    // The lists' checksum (centroid bits, offsets, ids; as tests/ivf.rs'
    // fingerprint): the same on every tier, thread count and version that
    // keeps the build's result.
    let cq = ivf.centroid_codes();
    let mut crc = lshk::crc32c::crc32c(0, lshk::format::as_bytes(cq.codes()));
    for v in cq.scales() {
        crc = lshk::crc32c::crc32c(crc, &v.to_bits().to_le_bytes());
    }
    for v in ivf.list_offsets().iter().chain(ivf.list_ids()) {
        crc = lshk::crc32c::crc32c(crc, &v.to_le_bytes());
    }
    println!(
        "build {:.2} s (CPU {:.2} s), nlist {}, train rows {}, memory {:.1} MiB (W {:.1} MiB), \
         lists crc32c {crc:08x}",
        build_s,
        build_cpu,
        ivf.nlist(),
        ivf.params().train_rows,
        ivf.memory_bytes() as f64 / 1048576.0,
        (d.rows * d.dim * 4) as f64 / 1048576.0
    );
    println!(
        "| reach | nprobe | rerank | refine | lists/q | scanned/q | recall@10 | us/q B=1 | us/q B=64 | CPU us/q B=1 | CPU us/q B=64 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // `refine` applies to PQ4_I8 only: one pass for other codes.
    let refines = if p.codes == Codes::Pq4I8 {
        refines
    } else {
        &refines[..1]
    };
    // Recall on the evaluated queries, stats, and us per query at B = 1 / 64.
    let measure = |sp: &SearchParams| {
        let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        let mut st = lshk::ivf::SearchStats::default();
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
        let batched = ids.clone();
        // B = 1 and B = 64 passes interleaved (so that a busy spell of a
        // shared machine hits both), the best of `reps` each; wall time, and
        // this thread's CPU time (steadier when other jobs share the cores).
        let (mut b1, mut b64) = (
            (f64::INFINITY, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
        );
        for _ in 0..reps {
            if time1 {
                let (t, c) = (Instant::now(), thread_cpu_seconds());
                for i in 0..nq {
                    ivf.search(
                        d.query(i),
                        1,
                        d.dim,
                        k,
                        sp,
                        &mut ids[i * k..],
                        &mut sc[i * k..],
                    )
                    .unwrap();
                }
                assert!(ids == batched, "B = 1 and batched results differ");
                b1.0 = b1.0.min(t.elapsed().as_secs_f64() / nq as f64);
                b1.1 = b1.1.min((thread_cpu_seconds() - c) / nq as f64);
            }
            if time64 {
                let (t, c) = (Instant::now(), thread_cpu_seconds());
                for c in (0..nq).step_by(64) {
                    let n = 64.min(nq - c);
                    ivf.search(
                        &d.q[c * d.dim..],
                        n,
                        d.dim,
                        k,
                        sp,
                        &mut ids[c * k..],
                        &mut sc[c * k..],
                    )
                    .unwrap();
                }
                b64.0 = b64.0.min(t.elapsed().as_secs_f64() / nq as f64);
                b64.1 = b64.1.min((thread_cpu_seconds() - c) / nq as f64);
            }
        }
        (r, st, b1, b64)
    };
    for &reach in reaches {
        for &nprobe in nprobes {
            for (&rerank, &refine) in reranks
                .iter()
                .flat_map(|r| refines.iter().map(move |f| (r, f)))
            {
                let sp = SearchParams {
                    nprobe,
                    rerank,
                    reach,
                    refine,
                };
                let (r, st, b1, b64) = measure(&sp);
                let cap = if nprobe == u32::MAX {
                    "-".to_string()
                } else {
                    nprobe.to_string()
                };
                let rf = if p.codes == Codes::Pq4I8 {
                    refine.to_string()
                } else {
                    "-".to_string()
                };
                println!(
                    "| {reach} | {cap} | {rerank} | {rf} | {:.1} | {} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    st.lists as f64 / nq as f64,
                    st.scanned / nq as u64,
                    r.top10,
                    b1.0 * 1e6,
                    b64.0 * 1e6,
                    b1.1 * 1e6,
                    b64.1 * 1e6
                );
            }
        }
    }
    println!(
        "memory after the sweep {:.1} MiB (with the lists its batches keep as panels)",
        ivf.memory_bytes() as f64 / 1048576.0
    );
    if targets.is_empty() {
        return;
    }
    let cal_nq = d.nq - nq;
    println!(
        "calibration on {cal_nq} further queries (Ivf::calibrate, rerank 32), evaluated on the {nq} above:"
    );
    println!("| target | chosen | recall (sample) | scanned/q (sample) | fixed: nprobe, recall | adaptive: reach, recall | calibrate s | recall@10 | us/q B=1 | us/q B=64 | CPU us/q B=1 | CPU us/q B=64 |");
    println!("|---:|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for &t in targets {
        let t0 = Instant::now();
        let c = ivf
            .calibrate(&d.q[nq * d.dim..], cal_nq, d.dim, k, t, 32, 0)
            .expect("calibrate");
        let cal_s = t0.elapsed().as_secs_f64();
        let chosen = if c.params.reach == 0.0 {
            format!("nprobe {}", c.params.nprobe)
        } else {
            format!("reach {}", c.params.reach)
        };
        let (r, _, b1, b64) = measure(&c.params);
        println!(
            "| {t} | {chosen} | {:.3} | {:.0} | {}, {:.3} | {}, {:.3} | {cal_s:.1} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} |",
            c.recall,
            c.scanned,
            c.fixed.0,
            c.fixed.1,
            c.adaptive.0,
            c.adaptive.1,
            r.top10,
            b1.0 * 1e6,
            b64.0 * 1e6,
            b1.1 * 1e6,
            b64.1 * 1e6
        );
    }
}
