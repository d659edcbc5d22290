//! The main job: a sublinear output layer against the exact dense layer.
//!
//! `cargo run --release --example demo`
//!
//! Default data (embedded, nothing to download): an output layer of the W1
//! shape, 670,091 x 128, from `lshk::data::structured_layer(670_091, 128,
//! 4096, 20240601)`: 4,096 unit-norm Gaussian centroids; row i picks a
//! centroid c, `w_i = (centroid_c + 0.35/sqrt(128) * z) * (0.75 + 0.5 U)`
//! (z standard normal, U uniform); bias `0.05 * normal`. Queries from
//! `lshk::data::queries_near_labels(.., seed 7)`: a label row y, then
//! `q = w_y/|w_y| + 0.25/sqrt(128) * z`. Everything comes from the frozen
//! `SplitMix64` generator, so every run sees the same numbers (see
//! `src/data.rs` for the exact draw order).
//!
//! By default it builds an `lshk::ivf::Ivf` (k-means lists, round(4 sqrt(rows))
//! of them, stored contiguously as int8 codes; W borrowed for the exact
//! re-ranking; the lists a query visits chosen adaptively (`lshk::ivf::
//! SearchParams`), `--rerank` candidates re-scored in f32). `--family simhash` builds the LSH index `lshk::index::Index`
//! instead (SimHash, K = 16, L = 24, W borrowed, 4 extra multi-probe buckets
//! per table; a progress line during the build). It prints the build time,
//! the index memory, rows scored (candidates) per query, top-1 / top-10
//! recall against the exact dense layer (computed by `lshk::dense`, a SIMD
//! pass over all of W), label recall, and the time per query of lshk and of
//! the exact dense pass, both single-threaded, at B = 1 and B = 64, with
//! their ratio.
//!
//! Options:
//! * `--rows N`: a smaller synthetic layer (quick run);
//! * `--weights W.npy [--bias b.npy] --queries Q.npy`: your layer (f32, C
//!   order; W is rows x dim, Q is n x dim);
//! * `--w2v DIR`: the w2v-gutenberg output layer in DIR (raw f32, see its
//!   README; e.g. `../shared/data/w2v-gutenberg`);
//! * `--k N` (top-k, default 10), `--K N` (bits per table), `--L N`
//!   (tables), `--transform none|bias|mips`, `--probes N` (multi-probe
//!   buckets per table), `--storage f32|bf16|f16|i8` (how the index keeps
//!   W: f32 = the caller's W borrowed in place, the default; the others
//!   store a converted copy, 2 or 1 bytes per weight, which halves or
//!   quarters the DRAM traffic of the gathered rows), `--queries-eval N` (queries for recall, 512),
//!   `--sweep` (recall/candidates/latency/memory of several SimHash
//!   settings);
//! * `--family ivf|simhash`, and for IVF `--nlist N` (0 = round(4 sqrt(rows))),
//!   `--reach F` (adaptive list selection, default 2; 0 = fixed), `--nprobe
//!   N` (alone: exactly N lists; with `--reach`: at most N), `--rerank N`,
//!   `--codes i8|pq4|pq4i8|none` (pq4: 4-bit residual codes, a quarter of
//!   int8's bytes, give it `--rerank 128`; pq4i8: both, the best 256 of the
//!   4-bit pass re-scored from int8 codes, for rows of 256+ coordinates;
//!   none: exact f32 scores of every visited row from a stored copy,
//!   FAISS's IVFFlat).
//!
//! Timings are wall-clock on whatever else the machine is doing: compare
//! the numbers of one run with each other.

mod common;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use common::{Data, Family, Index, IndexParams, Storage, Transform};
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};
use lshk::tables::GatherParams;

/// The sublinear layer under test.
enum Engine {
    Ivf(Box<Ivf>, SearchParams),
    Lsh(Box<Index>, GatherParams),
}

impl Engine {
    /// Top-k of queries `q0 .. q0 + n` in calls of `b` queries; returns the
    /// mean rows scored per query (candidates for SimHash).
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        d: &Data,
        q0: usize,
        n: usize,
        k: usize,
        b: usize,
        ids: &mut [u32],
        sc: &mut [f32],
    ) -> f64 {
        match self {
            Engine::Lsh(idx, g) => common::query_all(idx, d, q0, n, k, g, b, ids, sc),
            Engine::Ivf(ivf, sp) => {
                let mut scanned = 0u64;
                for c in (0..n).step_by(b) {
                    let m = b.min(n - c);
                    let mut st = lshk::ivf::SearchStats::default();
                    ivf.search_stats(
                        lshk::isa::active(),
                        &d.q[(q0 + c) * d.dim..],
                        m,
                        d.dim,
                        k,
                        sp,
                        &mut ids[c * k..],
                        &mut sc[c * k..],
                        Some(&mut st),
                    )
                    .expect("ivf search");
                    scanned += st.scanned;
                }
                scanned as f64 / n as f64
            }
        }
    }
    fn memory_bytes(&self) -> usize {
        match self {
            Engine::Lsh(idx, _) => idx.memory_bytes(),
            Engine::Ivf(ivf, _) => ivf.memory_bytes(),
        }
    }
}

struct Opts {
    rows: usize,
    clusters: usize,
    weights: Option<PathBuf>,
    bias: Option<PathBuf>,
    queries: Option<PathBuf>,
    w2v: Option<PathBuf>,
    k: usize,
    bits: u32,
    tables: u32,
    transform: Transform,
    probes: u32,
    storage: Storage,
    eval: usize,
    sweep: bool,
    /// `ivf` (the default) or `simhash`.
    family: String,
    nlist: u32,
    nprobe: u32,
    rerank: u32,
    reach: f32,
    codes: Codes,
}

fn usage(msg: &str) -> ! {
    eprintln!("error: {msg}");
    eprintln!(
        "usage: demo [--rows N] [--weights W.npy [--bias b.npy] --queries Q.npy] [--w2v DIR]\n\
         \x20           [--k N] [--K N] [--L N] [--transform none|bias|mips] [--probes N] [--storage f32|bf16|f16|i8]\n\
         \x20           [--queries-eval N] [--sweep]\n\
         \x20           [--family ivf|simhash] [--nlist N] [--reach F] [--nprobe N] [--rerank N] [--codes i8|pq4|pq4i8|none]"
    );
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts {
        rows: 670_091,
        clusters: 4096,
        weights: None,
        bias: None,
        queries: None,
        w2v: None,
        k: 10,
        bits: 16,
        tables: 24,
        transform: Transform::None,
        probes: 4,
        storage: Storage::F32,
        eval: 512,
        sweep: false,
        family: "ivf".into(),
        nlist: 0,
        // The library's defaults: adaptive lists (reach 2, no cap), 32
        // candidates re-ranked.
        nprobe: SearchParams::default().nprobe,
        rerank: SearchParams::default().rerank,
        reach: SearchParams::default().reach,
        codes: Codes::I8,
    };
    let mut a = std::env::args().skip(1);
    // `--nprobe N` alone means exactly N lists (reach 0).
    let mut reach_given = false;
    while let Some(f) = a.next() {
        let mut val = || {
            a.next()
                .unwrap_or_else(|| usage(&format!("{f} needs a value")))
        };
        let num = |s: String| -> usize {
            s.parse()
                .unwrap_or_else(|_| usage(&format!("bad number {s}")))
        };
        match f.as_str() {
            "--rows" => o.rows = num(val()),
            "--clusters" => o.clusters = num(val()),
            "--weights" => o.weights = Some(val().into()),
            "--bias" => o.bias = Some(val().into()),
            "--queries" => o.queries = Some(val().into()),
            "--w2v" => o.w2v = Some(val().into()),
            "--k" => o.k = num(val()),
            "--K" => o.bits = num(val()) as u32,
            "--L" => o.tables = num(val()) as u32,
            "--probes" => o.probes = num(val()) as u32,
            "--queries-eval" => o.eval = num(val()),
            "--transform" => {
                o.transform = match val().as_str() {
                    "none" => Transform::None,
                    "bias" => Transform::BiasAug,
                    "mips" => Transform::Mips,
                    s => usage(&format!("unknown transform {s}")),
                }
            }
            "--storage" => {
                o.storage = match val().as_str() {
                    "f32" => Storage::F32,
                    "bf16" => Storage::Bf16,
                    "f16" => Storage::F16,
                    "i8" => Storage::I8,
                    s => usage(&format!("unknown storage {s}")),
                }
            }
            "--sweep" => o.sweep = true,
            "--family" => {
                o.family = val();
                if o.family != "ivf" && o.family != "simhash" {
                    usage(&format!("unknown family {}", o.family));
                }
            }
            "--nlist" => o.nlist = num(val()) as u32,
            "--nprobe" => {
                o.nprobe = num(val()) as u32;
                if !reach_given {
                    o.reach = 0.0;
                }
            }
            "--reach" => {
                o.reach = val()
                    .parse()
                    .unwrap_or_else(|_| usage("--reach needs a number"));
                reach_given = true;
            }
            "--rerank" => o.rerank = num(val()) as u32,
            "--codes" => {
                o.codes = match val().as_str() {
                    "i8" => Codes::I8,
                    "none" => Codes::None,
                    "pq4" => Codes::Pq4,
                    "pq4i8" => Codes::Pq4I8,
                    s => usage(&format!("unknown codes {s}")),
                }
            }
            "-h" | "--help" => usage("help"),
            s => usage(&format!("unknown option {s}")),
        }
    }
    if o.k == 0 || o.rows == 0 || o.eval == 0 {
        usage("--k, --rows and --queries-eval must be >= 1");
    }
    o
}

fn main() {
    let o = parse();
    println!(
        "lshk {} demo (tier {})",
        env!("CARGO_PKG_VERSION"),
        lshk::isa::active().name()
    );
    if cfg!(debug_assertions) {
        println!("note: debug build; use `cargo run --release --example demo` for real numbers");
    }
    let t = Instant::now();
    let data: Data = if let Some(dir) = &o.w2v {
        match common::w2v(dir, o.eval.max(64)) {
            None => {
                println!(
                    "skipped: ../shared/data not found ({} has no output_layer.f32)",
                    dir.display()
                );
                return;
            }
            Some(r) => r.unwrap_or_else(|e| usage(&e.to_string())),
        }
    } else if let Some(wp) = &o.weights {
        let qp = o
            .queries
            .as_ref()
            .unwrap_or_else(|| usage("--weights needs --queries"));
        common::npy(wp, o.bias.as_deref(), qp).unwrap_or_else(|e| usage(&e.to_string()))
    } else {
        common::synthetic(o.rows, o.clusters.min(o.rows), o.eval.max(64))
    };
    println!(
        "data: {} ({:.1} s to load/generate)",
        data.name,
        t.elapsed().as_secs_f64()
    );
    let nq = data.nq.min(o.eval);
    let k = o.k;

    // Ground truth: the exact dense layer (all cores, batches of 64).
    let (exact, _, secs) = common::exact_topk(&data, nq, k);
    println!("exact top-{k} of {nq} queries by the dense layer: {secs:.2} s (all cores)");

    if o.sweep {
        sweep(&data, &exact, nq, k);
        return;
    }

    // The index.
    let t = Instant::now();
    let engine = if o.family == "ivf" {
        let p = IvfParams {
            nlist: o.nlist,
            codes: o.codes,
            ..IvfParams::default()
        };
        let sp = SearchParams {
            nprobe: o.nprobe,
            rerank: o.rerank,
            reach: o.reach,
            ..SearchParams::default()
        };
        // SAFETY: `data.w` outlives the index (both live to the end of main).
        let ivf = match o.codes {
            Codes::I8 | Codes::Pq4 | Codes::Pq4I8 => unsafe {
                Ivf::build_borrowed(
                    &data.w,
                    data.bias.as_deref(),
                    data.rows,
                    data.dim,
                    data.dim,
                    &p,
                )
            },
            Codes::None => Ivf::build(
                &data.w,
                data.bias.as_deref(),
                data.rows,
                data.dim,
                data.dim,
                &p,
            ),
        }
        .unwrap_or_else(|e| usage(&e.to_string()));
        let lists = if sp.reach > 0.0 {
            format!(
                "adaptive lists (reach {}{})",
                sp.reach,
                if sp.nprobe == u32::MAX {
                    String::new()
                } else {
                    format!(", at most {}", sp.nprobe)
                }
            )
        } else {
            format!("nprobe {}", sp.nprobe)
        };
        println!(
            "index: IVF, {} k-means lists (trained on {} rows), {} scoring, {lists}, rerank {} (lshk::ivf::Ivf)",
            ivf.nlist(),
            ivf.params().train_rows,
            match o.codes {
                Codes::I8 => "int8",
                Codes::Pq4 => "4-bit PQ",
                Codes::Pq4I8 => "4-bit PQ then int8",
                Codes::None => "exact f32",
            },
            sp.rerank
        );
        Engine::Ivf(Box::new(ivf), sp)
    } else {
        let params = IndexParams {
            family: Family::SimHash,
            bits: o.bits,
            tables: o.tables,
            transform: o.transform,
            storage: o.storage,
            ..IndexParams::default()
        };
        let g = GatherParams {
            probes: o.probes,
            ..GatherParams::default()
        };
        let rb = lshk::index::default_range_bits(Family::SimHash, o.bits, 8, data.rows);
        println!(
            "index: {}, probes {}, W {} (lshk::index::Index)",
            common::describe(&params, rb),
            o.probes,
            match o.storage {
                Storage::Bf16 => "stored as bf16",
                Storage::F16 => "stored as f16",
                Storage::I8 => "stored as int8 + row scales",
                _ => "f32, borrowed in place",
            }
        );
        let progress = common::progress_line("build");
        let idx = common::build(&data, &params, Some(&progress))
            .unwrap_or_else(|e| usage(&e.to_string()));
        Engine::Lsh(Box::new(idx), g)
    };
    let build = t.elapsed().as_secs_f64();
    let mut ids = vec![0u32; nq * k];
    let mut sc = vec![0f32; nq * k];
    let cands = engine.query(&data, 0, nq, k, 64, &mut ids, &mut sc);
    let r = common::recall(&ids, &exact, k, nq, data.labels.as_deref());
    println!(
        "build: {build:.2} s; index memory {:.1} MiB (W itself: {:.1} MiB, {})",
        engine.memory_bytes() as f64 / (1 << 20) as f64,
        (data.rows * data.dim * 4) as f64 / (1 << 20) as f64,
        match &engine {
            Engine::Ivf(ivf, _) if !ivf.borrows_weights() => "copied into the index",
            _ => "borrowed",
        }
    );
    println!(
        "rows scored per query: {cands:.0} ({:.2} % of {} rows)",
        100.0 * cands / data.rows as f64,
        data.rows
    );
    println!(
        "recall vs the exact layer ({nq} queries): top-1 {:.3}, top-10 {:.3}",
        r.top1, r.top10
    );
    if data.labels.is_some() {
        println!(
            "label in top-10: lshk {:.3}, exact layer {:.3}",
            r.label10, r.exact_label10
        );
    }

    // Timings, one thread each.
    let layer = data.layer();
    let mut t_ids = vec![0u32; 64 * k];
    let mut t_sc = vec![0f32; 64 * k];
    println!("\ntime per query (one thread)     lshk      exact dense   dense/lshk");
    for b in [1usize, 64] {
        if b > data.nq {
            println!(
                "  B = {b:<3}                   skipped: only {} queries",
                data.nq
            );
            continue;
        }
        let reps_l = if b == 1 { nq.min(256) } else { nq / 64 }.max(1);
        // Warm-up: thread-local scratch, caches.
        engine.query(&data, 0, b, k, b, &mut t_ids, &mut t_sc);
        let t = Instant::now();
        for i in 0..reps_l {
            let q0 = (i * b) % (data.nq - b + 1);
            engine.query(&data, q0, b, k, b, &mut t_ids, &mut t_sc);
            black_box(&t_ids);
        }
        let lshk = t.elapsed().as_secs_f64() / (reps_l * b) as f64;
        let reps_d = if b == 1 { 8 } else { 2 };
        let t = Instant::now();
        for i in 0..reps_d {
            let q0 = (i * b) % (data.nq - b + 1);
            layer
                .topk(
                    &data.q[q0 * data.dim..],
                    b,
                    data.dim,
                    k,
                    &mut t_ids,
                    &mut t_sc,
                )
                .unwrap();
            black_box(&t_ids);
        }
        let dense = t.elapsed().as_secs_f64() / (reps_d * b) as f64;
        println!(
            "  B = {b:<3}                   {:>8.3} ms  {:>10.3} ms   {:>8.1}x",
            lshk * 1e3,
            dense * 1e3,
            dense / lshk
        );
    }
}

/// `--sweep`: recall and candidates of several SimHash settings on the same
/// data (how the defaults were chosen).
fn sweep(data: &Data, exact: &[u32], nq: usize, k: usize) {
    println!("  K   L  transform probes  candidates  top-1  top-10  label@10  build s  ms/query B=1  index MiB");
    for &(bits, tables, tr, probes) in &[
        (12u32, 16u32, Transform::None, 0u32),
        (12, 24, Transform::None, 0),
        (12, 50, Transform::None, 0),
        (14, 32, Transform::None, 0),
        (16, 48, Transform::None, 0),
        (16, 64, Transform::None, 0),
        (14, 16, Transform::None, 4),
        (16, 24, Transform::None, 4),
        (16, 32, Transform::None, 2),
        (16, 32, Transform::None, 4),
        (18, 32, Transform::None, 8),
        (12, 24, Transform::Mips, 0),
        (12, 24, Transform::BiasAug, 0),
    ] {
        let p = IndexParams {
            family: Family::SimHash,
            bits,
            tables,
            transform: tr,
            ..IndexParams::default()
        };
        let t = Instant::now();
        let idx = common::build(data, &p, None).expect("build");
        let build = t.elapsed().as_secs_f64();
        let g = GatherParams {
            probes,
            ..GatherParams::default()
        };
        let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        let t = Instant::now();
        let cands = common::query_all(&idx, data, 0, nq, k, &g, 1, &mut ids, &mut sc);
        let ms = t.elapsed().as_secs_f64() * 1e3 / nq as f64;
        let r = common::recall(&ids, exact, k, nq, data.labels.as_deref());
        println!(
            "{bits:>3} {tables:>3}  {:>9} {probes:>6}  {:>10.0}  {:.3}  {:.3}   {:.3}    {build:>5.2}  {ms:>8.3}  {:>9.1}",
            common::transform_name(tr),
            cands,
            r.top1,
            r.top10,
            r.label10,
            idx.memory_bytes() as f64 / (1 << 20) as f64
        );
    }
}
