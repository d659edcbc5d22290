//! Query time of every retrieval structure, B = 1 and B = 64, top-10, one
//! thread: the per-source table that moving the structures behind one
//! pipeline must keep within noise (run it before and after such a change
//! on the same machine; figures in benches/sources.md).
//!
//! Layer: the demo's generator (`structured_layer(rows, 128, 4096,
//! 20240601)`) at 200,000 rows (W 98 MiB: DRAM) with its bias; queries
//! near labels (seed 7), a pool of 256 cycled at B = 1. Beside every
//! source, in the same run: the exact dense layer (`lshk::dense`, one SIMD
//! pass over W), the baseline a user would otherwise run.
//!
//! Sources and settings (each structure's defaults unless said):
//! `ivf/i8` (`Ivf`, int8 codes, W borrowed, adaptive reach 3, rerank 32),
//! `ivf/pq4_i8`, `ivf/none` (IVFFlat: exact f32 scan, nprobe 8),
//! `index/simhash` (K = 16, L = 24, W borrowed, 4 probes: the demo's),
//! `index/ivf` (the IVF family of the one index: `ivf/i8`'s lists, W
//! borrowed), `index/graph` (the graph family), `graph` (ef 64), `forest` (candidate
//! lists of 256, default forest; no top-k: its figure is the candidate
//! query alone), `index/forest` (the forest family of the one index: the
//! same sets scored and cut to the top 10); `+codes` beside the LSH, graph
//! and forest sources: the same index with row codes
//! (`Index::set_codes(I8, 32)`: int8 scores of every candidate, the best
//! 32 exact), whose top-10 overlap with the plain index's is printed first.
//!
//! `LSHK_SOURCES_ROWS` changes the row count.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use lshk::data::{queries_near_labels, structured_layer};
use lshk::dense::DenseLayer;
use lshk::forest::{Forest, ForestParams, ForestResult};
use lshk::graph::{Graph, GraphParams};
use lshk::index::{Family, Index, IndexParams, QueryParams, Storage};
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};
use lshk::tables::GatherParams;

const DIM: usize = 128;
const K: usize = 10;
const POOL: usize = 256;
const BATCH: usize = 64;

/// A query function: (queries, count, ids out, scores out).
type Run<'a> = Box<dyn Fn(&[f32], usize, &mut [u32], &mut [f32]) + 'a>;

fn main() {
    let rows: usize = std::env::var("LSHK_SOURCES_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let g = structured_layer(rows, DIM, 4096, 20240601);
    let (w, b) = (&g.w[..], Some(&g.bias[..]));
    let (q, _) = queries_near_labels(w, rows, DIM, POOL, 7);
    eprintln!(
        "sources: {rows} x {DIM} (W {:.0} MiB), tier {:?}",
        (rows * DIM * 4) as f64 / (1 << 20) as f64,
        lshk::isa::active()
    );

    let ivf = |codes| {
        let p = IvfParams {
            codes,
            ..Default::default()
        };
        // SAFETY: `g.w` outlives every index of this function.
        unsafe {
            if codes == Codes::None {
                Ivf::build(w, b, rows, DIM, DIM, &p)
            } else {
                Ivf::build_borrowed(w, b, rows, DIM, DIM, &p)
            }
        }
        .unwrap()
    };
    let (ivf_i8, ivf_pq, ivf_flat) = (ivf(Codes::I8), ivf(Codes::Pq4I8), ivf(Codes::None));
    // The one index over the borrowed W, per family.
    let index = |p: IndexParams| {
        let p = IndexParams {
            storage: Storage::BorrowedF32,
            ..p
        };
        // SAFETY: `g.w` outlives every index of this function.
        unsafe { Index::build_borrowed(w, b, rows, DIM, DIM, &p, None) }.unwrap()
    };
    let family = |family| {
        index(IndexParams {
            family,
            ..Default::default()
        })
    };
    let simhash = index(IndexParams {
        family: Family::SimHash,
        bits: 16,
        tables: 24,
        ..Default::default()
    });
    let (gfam, ifam, ffam) = (
        family(Family::Graph),
        family(Family::Ivf),
        family(Family::Forest),
    );
    // The same indexes with row codes.
    let coded = |mut ix: Index| {
        ix.set_codes(Codes::I8, 32).unwrap();
        ix
    };
    let simhash_c = coded(index(IndexParams {
        family: Family::SimHash,
        bits: 16,
        tables: 24,
        ..Default::default()
    }));
    let (gfam_c, ffam_c) = (coded(family(Family::Graph)), coded(family(Family::Forest)));
    let graph = Graph::build(w, b, rows, DIM, DIM, &GraphParams::default()).unwrap();
    let forest = Forest::build(w, rows, DIM, DIM, &ForestParams::default()).unwrap();
    let dense = DenseLayer::new(w, rows, DIM, DIM, b).unwrap();

    let sp = SearchParams::default();
    let probes = QueryParams::from(GatherParams {
        probes: 4,
        ..Default::default()
    });
    let qd = QueryParams::default();
    for (name, plain, codes, qp) in [
        ("simhash", &simhash, &simhash_c, &probes),
        ("graph", &gfam, &gfam_c, &qd),
        ("forest", &ffam, &ffam_c, &qd),
    ] {
        let mut a = (vec![0u32; POOL * K], vec![0f32; POOL * K]);
        let mut c = a.clone();
        plain
            .query_with(&q, POOL, DIM, K as u32, qp, &mut a.0, &mut a.1, None)
            .unwrap();
        codes
            .query_with(&q, POOL, DIM, K as u32, qp, &mut c.0, &mut c.1, None)
            .unwrap();
        let same: usize = (0..POOL)
            .map(|i| {
                let r = &a.0[i * K..(i + 1) * K];
                c.0[i * K..(i + 1) * K]
                    .iter()
                    .filter(|x| r.contains(x))
                    .count()
            })
            .sum();
        eprintln!(
            "index/{name}+codes: top-10 overlap with index/{name} {:.4} over {POOL} queries",
            same as f64 / (POOL * K) as f64
        );
    }
    let runs: Vec<(&str, Run)> = vec![
        (
            "dense (exact)",
            Box::new(|q, n, i, s| dense.topk(q, n, DIM, K, i, s).unwrap()),
        ),
        (
            "ivf/i8",
            Box::new(|q, n, i, s| ivf_i8.search(q, n, DIM, K, &sp, i, s).unwrap()),
        ),
        (
            "ivf/pq4_i8",
            Box::new(|q, n, i, s| ivf_pq.search(q, n, DIM, K, &sp, i, s).unwrap()),
        ),
        (
            "ivf/none",
            Box::new(|q, n, i, s| {
                ivf_flat
                    .search(q, n, DIM, K, &SearchParams::fixed(8, 0), i, s)
                    .unwrap()
            }),
        ),
        (
            "index/simhash",
            Box::new(|q, n, i, s| {
                simhash
                    .query_with(q, n, DIM, K as u32, &probes, i, s, None)
                    .unwrap()
            }),
        ),
        (
            "index/simhash+codes",
            Box::new(|q, n, i, s| {
                simhash_c
                    .query_with(q, n, DIM, K as u32, &probes, i, s, None)
                    .unwrap()
            }),
        ),
        (
            "index/ivf",
            Box::new(|q, n, i, s| {
                ifam.query_with(q, n, DIM, K as u32, &QueryParams::default(), i, s, None)
                    .unwrap()
            }),
        ),
        (
            "index/graph",
            Box::new(|q, n, i, s| {
                gfam.query_with(q, n, DIM, K as u32, &QueryParams::default(), i, s, None)
                    .unwrap()
            }),
        ),
        (
            "index/graph+codes",
            Box::new(|q, n, i, s| {
                gfam_c
                    .query_with(q, n, DIM, K as u32, &QueryParams::default(), i, s, None)
                    .unwrap()
            }),
        ),
        (
            "graph",
            Box::new(|q, n, i, s| graph.search(q, n, DIM, K, 64, i, s).unwrap()),
        ),
        (
            "index/forest",
            Box::new(|q, n, i, s| {
                ffam.query_with(q, n, DIM, K as u32, &QueryParams::default(), i, s, None)
                    .unwrap()
            }),
        ),
        (
            "index/forest+codes",
            Box::new(|q, n, i, s| {
                ffam_c
                    .query_with(q, n, DIM, K as u32, &QueryParams::default(), i, s, None)
                    .unwrap()
            }),
        ),
        (
            "forest",
            Box::new(|q, n, _, _| {
                let mut out = ForestResult::default();
                forest.query(w, DIM, q, n, DIM, 256, &mut out).unwrap();
                black_box(&out);
            }),
        ),
    ];

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    let mut grp = c.benchmark_group("sources");
    let (mut ids, mut sc) = (vec![0u32; BATCH * K], vec![0f32; BATCH * K]);
    for (name, run) in &runs {
        grp.throughput(Throughput::Elements(1));
        let mut at = 0;
        grp.bench_function(BenchmarkId::new(*name, "B=1"), |bch| {
            bch.iter(|| {
                run(black_box(&q[at * DIM..]), 1, &mut ids, &mut sc);
                at = (at + 1) % POOL;
            })
        });
        grp.throughput(Throughput::Elements(BATCH as u64));
        let mut at = 0;
        grp.bench_function(BenchmarkId::new(*name, "B=64"), |bch| {
            bch.iter(|| {
                run(black_box(&q[at * DIM..]), BATCH, &mut ids, &mut sc);
                at = (at + BATCH) % POOL;
            })
        });
    }
    grp.finish();
    c.final_summary();
}
