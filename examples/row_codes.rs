//! Row codes for the scorer (`Index::set_codes`, C `lshk_index_set_codes`)
//! on a SimHash index: the same candidates scored exactly, or first from
//! int8 codes of the rows with the best `rerank` exact. Prints, per
//! setting, candidates and exact re-scores per query, recall@10 against
//! the exact layer, and microseconds per query (one thread, B = 1 and
//! B = 64), on the embedded W1 layer and, when present, w2v-gutenberg.
//!
//! `cargo run --release --example row_codes [-- --rows N] [--nq N]
//! [--bits K] [--tables L] [--probes P] [--rerank 16,32,...] [--reps N]
//! [--only w1|w2v] [--npy DIR]`
//!
//! Times are the best of `--reps` (default 3) passes, B = 1 and B = 64
//! interleaved, in thread CPU time per query. Prints `skipped:
//! ../shared/data not found` for w2v when it is absent.

mod common;

use std::path::PathBuf;

use lshk::index::{Family, Index, IndexParams, QueryParams, QueryStats, Storage};
use lshk::ivf::Codes;
use lshk::tables::GatherParams;

const K: usize = 10;

fn main() {
    let (mut rows, mut nq, mut reps) = (670_091usize, 1000usize, 3usize);
    let (mut bits, mut tables, mut probes) = (16u32, 24u32, 4u32);
    let mut reranks = vec![16u32, 32, 64];
    let mut only: Option<String> = None;
    let mut npy: Option<PathBuf> = None;
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || a.next().expect("a value after the flag");
        match k.as_str() {
            "--rows" => rows = v().parse().unwrap(),
            "--nq" => nq = v().parse().unwrap(),
            "--reps" => reps = v().parse().unwrap(),
            "--bits" => bits = v().parse().unwrap(),
            "--tables" => tables = v().parse().unwrap(),
            "--probes" => probes = v().parse().unwrap(),
            "--rerank" => reranks = v().split(',').map(|x| x.parse().unwrap()).collect(),
            "--only" => only = Some(v()),
            "--npy" => npy = Some(v().into()),
            _ => panic!("unknown flag {k}"),
        }
    }
    let p = IndexParams {
        family: Family::SimHash,
        bits,
        tables,
        storage: Storage::BorrowedF32,
        ..Default::default()
    };
    let qp = QueryParams::from(GatherParams {
        probes,
        ..Default::default()
    });
    let run = |d: &common::Data| run(d, nq.min(d.nq), &p, &qp, &reranks, reps);
    if let Some(dir) = npy {
        run(&common::npy_dir(&dir).expect("npy layer"));
        return;
    }
    if only.as_deref() != Some("w2v") {
        run(&common::synthetic(rows, 4096, nq));
    }
    if only.as_deref() != Some("w1") {
        match common::w2v(std::path::Path::new("../shared/data/w2v-gutenberg"), nq) {
            None => println!("skipped: ../shared/data not found"),
            Some(d) => run(&d.expect("w2v")),
        }
    }
}

fn run(
    d: &common::Data,
    nq: usize,
    p: &IndexParams,
    qp: &QueryParams,
    reranks: &[u32],
    reps: usize,
) {
    println!(
        "{} ({} x {}), {nq} queries, SimHash K {} L {} probes {}, W borrowed, tier {:?}",
        d.name,
        d.rows,
        d.dim,
        p.bits,
        p.tables,
        qp.gather.probes,
        lshk::isa::active()
    );
    let (exact, _, _) = common::exact_topk(d, nq, K);
    // SAFETY: `d.w` outlives the index (dropped at the end of this function).
    let mut ix =
        unsafe { Index::build_borrowed(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, p, None) }
            .expect("build");
    println!("| scorer | candidates / q | exact / q | recall@10 | us/q B = 1 | us/q B = 64 |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut settings = vec![None];
    settings.extend(reranks.iter().map(|&r| Some(r)));
    for s in settings {
        match s {
            None => ix.set_codes(Codes::None, 0).unwrap(),
            Some(r) => ix.set_codes(Codes::I8, r).unwrap(),
        }
        let (mut ids, mut sc) = (vec![0u32; nq * K], vec![0f32; nq * K]);
        let mut st = QueryStats::default();
        ix.query_with(
            &d.q,
            nq,
            d.dim,
            K as u32,
            qp,
            &mut ids,
            &mut sc,
            Some(&mut st),
        )
        .unwrap();
        let rec = common::recall(&ids, &exact, K, nq, None);
        let (mut b1, mut b64) = (f64::MAX, f64::MAX);
        for _ in 0..reps {
            let t = cpu();
            for i in 0..nq {
                ix.query_with(
                    d.query(i),
                    1,
                    d.dim,
                    K as u32,
                    qp,
                    &mut ids[..K],
                    &mut sc[..K],
                    None,
                )
                .unwrap();
            }
            b1 = b1.min((cpu() - t) / nq as f64);
            let t = cpu();
            for i0 in (0..nq).step_by(64) {
                let n = 64.min(nq - i0);
                let (oi, os) = (&mut ids[i0 * K..], &mut sc[i0 * K..]);
                ix.query_with(&d.q[i0 * d.dim..], n, d.dim, K as u32, qp, oi, os, None)
                    .unwrap();
            }
            b64 = b64.min((cpu() - t) / nq as f64);
        }
        let name = match s {
            None => "exact".to_string(),
            Some(r) => format!("int8 codes, rerank {r}"),
        };
        let exact_per_q = if s.is_some() {
            st.reranked
        } else {
            st.candidates_total
        };
        println!(
            "| {name} | {:.0} | {:.0} | {:.4} | {:.1} | {:.1} |",
            st.candidates_total as f64 / nq as f64,
            exact_per_q as f64 / nq as f64,
            rec.top10,
            b1 * 1e6,
            b64 * 1e6
        );
    }
    println!();
}

/// CPU seconds of the calling thread so far.
fn cpu() -> f64 {
    // SAFETY: clock_gettime writes one plain struct that we own.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
