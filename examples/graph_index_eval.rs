//! The FGD graph through `lshk::Index` (the graph family, issue 16 item 1)
//! against the standalone `lshk::graph::Graph` at the same efSearch, on
//! w2v-gutenberg: recall@10 against the exact top-10 and microseconds per
//! query (one thread, B = 1; the two paths alternate, best of `--passes`
//! per path). The index re-scores its candidates (the pool's best
//! `--rerank`, 0 = the whole pool) exactly from its own W; the standalone
//! graph returns its own scores.
//!
//! `cargo run --release --example graph_index_eval [-- --nq N] [--m M]
//! [--efc N] [--ef 20,50,...] [--passes N] [--rerank N] [--walk exact|int8]
//! [--w2v DIR]`
//!
//! Prints `skipped: ../shared/data not found` when the data is absent.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use lshk::graph::{Graph, GraphParams, SearchParams, Walk};
use lshk::index::{Family, IndexParams, QueryParams, Storage};
use lshk::Index;

fn main() {
    let mut nq = 1000usize;
    let mut w2v: PathBuf = "../shared/data/w2v-gutenberg".into();
    let mut p = GraphParams {
        m: 16,
        ef_construction: 100,
        ..GraphParams::default()
    };
    let mut efs: Vec<usize> = vec![20, 50, 100, 200, 400];
    let mut passes = 3usize;
    let mut rerank = 0usize;
    let mut walk = Walk::Exact;
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        let mut v = || a.next().expect("value");
        match x.as_str() {
            "--nq" => nq = v().parse().expect("nq"),
            "--m" => p.m = v().parse().expect("m"),
            "--efc" => p.ef_construction = v().parse().expect("efc"),
            "--passes" => passes = v().parse().expect("passes"),
            "--rerank" => rerank = v().parse().expect("rerank"),
            "--ef" => efs = v().split(',').map(|s| s.parse().expect("ef")).collect(),
            "--walk" => {
                walk = match v().as_str() {
                    "exact" => Walk::Exact,
                    "int8" => Walk::Int8,
                    _ => panic!("walk exact|int8"),
                }
            }
            "--w2v" => w2v = v().into(),
            other => panic!("unknown option {other}"),
        }
    }
    let d = match common::w2v(&w2v, nq) {
        None => {
            println!("skipped: ../shared/data not found");
            return;
        }
        Some(d) => d.expect("w2v"),
    };
    let nq = d.nq;
    let k = 10;
    println!(
        "{}: tier {}, M = {}, efConstruction = {}, walk {walk:?}, rerank {rerank} (0 = pool), {nq} queries",
        d.name,
        lshk::isa::active().name(),
        p.m,
        p.ef_construction
    );
    let (exact, _, _) = common::exact_topk(&d, nq, k);
    let g = Graph::build(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, &p).expect("graph");
    let ip = IndexParams {
        family: Family::Graph,
        storage: Storage::F32,
        graph: p,
        ..Default::default()
    };
    let idx =
        Index::build(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, &ip, None).expect("index");
    assert_eq!(
        idx.graph().unwrap().structure_checksum(),
        g.structure_checksum()
    );
    println!(
        "memory: graph {:.1} MiB, index (graph + f32 W) {:.1} MiB",
        g.memory_bytes() as f64 / 1048576.0,
        idx.memory_bytes() as f64 / 1048576.0
    );
    println!("| efSearch | graph recall@10 | index recall@10 | graph us/q | index us/q | index / graph |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let (mut ids2, mut sc2) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    for &ef in &efs {
        let sp = SearchParams { ef, walk, rerank };
        let qp = QueryParams {
            graph: sp,
            ..Default::default()
        };
        let t = lshk::isa::active();
        let (mut tg, mut ti) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..passes {
            let s = Instant::now();
            for i in 0..nq {
                g.search_with(
                    t,
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
            tg = tg.min(s.elapsed().as_secs_f64() / nq as f64);
            let s = Instant::now();
            for i in 0..nq {
                idx.query_with(
                    d.query(i),
                    1,
                    d.dim,
                    k as u32,
                    &qp,
                    &mut ids2[i * k..(i + 1) * k],
                    &mut sc2[i * k..(i + 1) * k],
                    None,
                )
                .unwrap();
            }
            ti = ti.min(s.elapsed().as_secs_f64() / nq as f64);
        }
        let rg = common::recall(&ids, &exact, k, nq, None);
        let ri = common::recall(&ids2, &exact, k, nq, None);
        println!(
            "| {ef} | {:.3} | {:.3} | {:.1} | {:.1} | {:.2} |",
            rg.top10,
            ri.top10,
            tg * 1e6,
            ti * 1e6,
            ti / tg
        );
    }
}
