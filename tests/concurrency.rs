//! Concurrency through the C ABI (`lshk::ffi::...` called from Rust the way
//! a C server calls it): many threads querying ONE shared index of each
//! candidate source (SimHash, DWTA, IVF, graph, forest) give results
//! bit-identical (ids, score bits, the query's stats) to a
//! single-threaded run of the same queries; and objects updated between
//! rounds under the documented exclusivity (lshk_tables_update,
//! lshk_tables_add_labels, lshk_index_train_labels: no other call on the
//! object while it runs) answer round 2 exactly like a single-threaded run
//! on the updated object.
//!
//! Threads: 2 x std::thread::available_parallelism() (4 on a 2-core
//! machine), each running `LSHK_CONC_QUERIES` (default 10,000) B = 1
//! queries, each thread in its own order so threads work on different
//! queries at the same moment. Speed is never asserted here (see
//! benches/threads.rs).
#![allow(clippy::too_many_arguments)]

use std::ptr;
use std::sync::Barrier;

use lshk::data::{queries_near_labels, structured_layer};
use lshk::ffi::index::*;
use lshk::ffi::labels::*;
use lshk::ffi::tables::*;
use lshk::ffi::*;
use lshk::rng::SplitMix64;

/// A handle shared by the query threads (the C ABI promises that `const`
/// calls are thread-safe; the raw pointer is only a number to Rust).
struct Shared<T>(*mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
impl<T> Shared<T> {
    /// The pointer (a method, so closures capture the whole Send wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}
// SAFETY: lshk handles are documented thread-safe for their const calls;
// the tests never call a mutating function while other threads run.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

fn threads() -> usize {
    2 * std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn queries_per_thread() -> usize {
    std::env::var("LSHK_CONC_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn ok(s: lshk_status, what: &str) {
    if s != LSHK_STATUS_OK {
        let mut buf = [0 as libc::c_char; 512];
        // SAFETY: buf is writable for its length.
        unsafe { lshk_last_error_message(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: the message is NUL-terminated within buf.
        let m = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        panic!("{what}: status {s}: {}", m.to_string_lossy());
    }
}

const ROWS: usize = 4096;
const DIM: usize = 64;
const K_TOP: u32 = 10;

struct Layer {
    w: Vec<f32>,
    bias: Vec<f32>,
    /// Query pool, QDIM-strided (QSTRIDE > DIM exercises strides).
    q: Vec<f32>,
    labels: Vec<u32>,
    nq: usize,
}

const QSTRIDE: usize = DIM + 3;

fn layer(nq: usize) -> Layer {
    let l = structured_layer(ROWS, DIM, 64, 11);
    let (q, labels) = queries_near_labels(&l.w, ROWS, DIM, nq, 12);
    let mut qs = vec![0f32; nq * QSTRIDE];
    for i in 0..nq {
        qs[i * QSTRIDE..i * QSTRIDE + DIM].copy_from_slice(&q[i * DIM..(i + 1) * DIM]);
        // Padding that must never be read as data.
        qs[i * QSTRIDE + DIM..(i + 1) * QSTRIDE].fill(f32::NAN);
    }
    Layer {
        w: l.w,
        bias: l.bias,
        q: qs,
        labels,
        nq,
    }
}

fn build(l: &Layer, source: u32, bits: u32, tables: u32) -> Shared<lshk_index> {
    build_rows(
        l,
        ROWS,
        source,
        bits,
        tables,
        LSHK_STORAGE_F32,
        LSHK_TRANSFORM_NONE,
    )
}

/// An index over the first `rows` rows of the layer.
fn build_rows(
    l: &Layer,
    rows: usize,
    source: u32,
    bits: u32,
    tables: u32,
    storage: u32,
    transform: u32,
) -> Shared<lshk_index> {
    let mut p = lshk_index_params_default();
    p.storage = storage;
    p.transform = transform;
    p.source = source;
    p.lsh.bits_per_table = bits;
    p.lsh.tables = tables;
    p.lsh.seed = 5;
    build_params(l, rows, &p)
}

/// An index over the first `rows` rows of the layer (with its bias), as
/// `p` asks.
fn build_params(l: &Layer, rows: usize, p: &lshk_index_params) -> Shared<lshk_index> {
    let mut out = ptr::null_mut();
    // SAFETY: w holds ROWS*DIM floats, bias ROWS (rows <= ROWS); p, out
    // valid; a borrowed W lives in `l` until the index is freed.
    ok(
        unsafe { lshk_index_build(l.w.as_ptr(), l.bias.as_ptr(), rows, DIM, DIM, p, &mut out) },
        "lshk_index_build",
    );
    Shared(out)
}

/// Results of queries `first .. first + nq` of the pool, one row of
/// K_TOP ids / score bits and one set of counts per query.
#[derive(Clone, PartialEq, Debug)]
struct Answers {
    ids: Vec<u32>,
    score_bits: Vec<u32>,
    /// The query's lshk_query_stats: candidates, and the IVF source's
    /// lists, scanned and reranked rows (0 for the others).
    cands: Vec<[u64; 4]>,
}

impl Answers {
    fn new(nq: usize) -> Answers {
        Answers {
            ids: vec![0; nq * K_TOP as usize],
            score_bits: vec![0; nq * K_TOP as usize],
            cands: vec![[0; 4]; nq],
        }
    }
}

fn stats0() -> lshk_query_stats {
    lshk_query_stats {
        struct_size: std::mem::size_of::<lshk_query_stats>() as u32,
        ..Default::default()
    }
}

/// One lshk_index_query call for queries `first .. first + b`; writes
/// their rows of `a`. With b = 1 the counts are per query.
fn query_batch(
    idx: Shared<lshk_index>,
    l: &Layer,
    g: &lshk_query_params,
    first: usize,
    b: usize,
    a: &mut Answers,
) {
    let k = K_TOP as usize;
    let mut ids = vec![0u32; b * k];
    let mut sc = vec![0f32; b * k];
    let mut st = stats0();
    // SAFETY: q holds (b-1)*QSTRIDE + DIM floats from `first`, outputs b*k.
    ok(
        unsafe {
            lshk_index_query(
                idx.0,
                l.q[first * QSTRIDE..].as_ptr(),
                b,
                QSTRIDE,
                K_TOP,
                g,
                ids.as_mut_ptr(),
                sc.as_mut_ptr(),
                &mut st,
            )
        },
        "lshk_index_query",
    );
    a.ids[first * k..(first + b) * k].copy_from_slice(&ids);
    for (d, s) in a.score_bits[first * k..(first + b) * k].iter_mut().zip(&sc) {
        *d = s.to_bits();
    }
    assert_eq!(st.queries, b as u64, "stats.queries");
    if b == 1 {
        a.cands[first] = [st.candidates_total, st.lists, st.scanned, st.reranked];
    }
}

/// Query order of thread `t` of `nt`: a rotation of 0..n (odd threads
/// backwards), so threads touch different queries at the same time.
fn order(t: usize, nt: usize, n: usize) -> Vec<usize> {
    let start = t * n / nt.max(1);
    let mut v: Vec<usize> = (0..n).map(|i| (start + i) % n).collect();
    if t % 2 == 1 {
        v.reverse();
    }
    v
}

/// Single-threaded reference of every query of the pool (B = 1).
fn reference(idx: Shared<lshk_index>, l: &Layer, g: &lshk_query_params) -> Answers {
    let mut a = Answers::new(l.nq);
    for i in 0..l.nq {
        query_batch(idx, l, g, i, 1, &mut a);
    }
    a
}

/// `nt` threads, each running all `l.nq` queries (B = 1) in its own order;
/// every thread's answers must equal `want` bit for bit.
fn check_threads_b1(
    idx: Shared<lshk_index>,
    l: &Layer,
    g: &lshk_query_params,
    nt: usize,
    want: &Answers,
    what: &str,
) {
    let start = Barrier::new(nt);
    let got: Vec<Answers> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nt)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait(); // all threads query at once
                    let mut a = Answers::new(l.nq);
                    for i in order(t, nt, l.nq) {
                        query_batch(idx, l, g, i, 1, &mut a);
                    }
                    a
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, a) in got.iter().enumerate() {
        compare(a, want, &format!("{what}, thread {t}"));
    }
}

fn compare(a: &Answers, want: &Answers, what: &str) {
    let k = K_TOP as usize;
    for i in 0..want.cands.len() {
        let r = i * k..(i + 1) * k;
        assert_eq!(
            a.ids[r.clone()],
            want.ids[r.clone()],
            "{what}: query {i} ids"
        );
        assert_eq!(
            a.score_bits[r.clone()],
            want.score_bits[r],
            "{what}: query {i} score bits"
        );
        assert_eq!(a.cands[i], want.cands[i], "{what}: query {i} candidates");
    }
}

fn free(idx: Shared<lshk_index>) {
    // SAFETY: a live handle, no other thread uses it any more.
    ok(unsafe { lshk_index_free(idx.0) }, "lshk_index_free");
}

/// The build parameters of an index of `source` with `storage` (a graph
/// and a forest smaller than the defaults', to keep the builds short).
fn source_params(source: u32, storage: u32) -> lshk_index_params {
    let mut p = lshk_index_params_default();
    p.source = source;
    p.storage = storage;
    p.forest.trees = 6;
    p.graph.m = 12;
    p.graph.ef_construction = 64;
    p
}

/// B = 1 queries from 2 x cores threads on one shared index of each
/// source (SimHash, DWTA, IVF, graph, forest; storages, transforms and
/// query knobs varied): every thread's ids, score bits and per-query
/// stats equal a single-threaded run.
#[test]
fn b1_queries_identical_to_single_thread() {
    let nt = threads();
    let nq = queries_per_thread();
    let l = layer(nq);
    let t0 = std::time::Instant::now();
    let lsh = |source, bits, tables, storage, transform| {
        let mut p = source_params(source, storage);
        p.transform = transform;
        p.lsh.bits_per_table = bits;
        p.lsh.tables = tables;
        p.lsh.seed = 5;
        p
    };
    let ivf = |codes, storage| {
        let mut p = source_params(LSHK_SOURCE_IVF, storage);
        p.ivf.codes = codes;
        p
    };
    let ivf_q = |nprobe, rerank| {
        let mut q = lshk_query_params_default();
        q.ivf.nprobe = nprobe;
        q.ivf.rerank = rerank;
        q
    };
    let mut graph = source_params(LSHK_SOURCE_GRAPH, LSHK_STORAGE_F32);
    graph.graph.storage = LSHK_STORAGE_I8;
    let mut int8_walk = lshk_query_params_default();
    int8_walk.graph.walk = LSHK_GRAPH_WALK_INT8;
    int8_walk.graph.ef = 64;
    int8_walk.graph.rerank = 32;
    let mut forest_q = lshk_query_params_default();
    forest_q.forest.set_size = 128;
    let g = lshk_query_params_default();
    let cases = [
        (
            "SimHash K=10 L=16",
            lsh(
                LSHK_SOURCE_SIMHASH,
                10,
                16,
                LSHK_STORAGE_F32,
                LSHK_TRANSFORM_NONE,
            ),
            g,
        ),
        (
            "DWTA K=4 B=8 L=16",
            lsh(
                LSHK_SOURCE_DWTA,
                4,
                16,
                LSHK_STORAGE_F32,
                LSHK_TRANSFORM_NONE,
            ),
            g,
        ),
        (
            "SimHash K=8 L=12, int8 weights, MIPS transform",
            lsh(
                LSHK_SOURCE_SIMHASH,
                8,
                12,
                LSHK_STORAGE_I8,
                LSHK_TRANSFORM_MIPS,
            ),
            g,
        ),
        (
            "IVF int8 codes, W borrowed, nprobe 8, rerank 64",
            ivf(LSHK_IVF_CODES_I8, LSHK_STORAGE_BORROWED_F32),
            ivf_q(8, 64),
        ),
        (
            "IVF no codes, W copied, nprobe 4, rerank 0",
            ivf(LSHK_IVF_CODES_NONE, LSHK_STORAGE_F32),
            ivf_q(4, 0),
        ),
        (
            "IVF 4-bit + int8 codes, bf16 W, adaptive",
            ivf(LSHK_IVF_CODES_PQ4_I8, LSHK_STORAGE_BF16),
            g,
        ),
        (
            "graph, f32 rows, exact walk",
            source_params(LSHK_SOURCE_GRAPH, LSHK_STORAGE_F32),
            g,
        ),
        ("graph, int8 rows, int8 walk", graph, int8_walk),
        (
            "forest, W borrowed, set_size 128",
            source_params(LSHK_SOURCE_FOREST, LSHK_STORAGE_BORROWED_F32),
            forest_q,
        ),
    ];
    for (name, p, g) in cases {
        let idx = build_params(&l, ROWS, &p);
        let want = reference(idx, &l, &g);
        // The reference is a real answer, not padding: most labels found.
        let hit = (0..nq)
            .filter(|&i| {
                want.ids[i * K_TOP as usize..(i + 1) * K_TOP as usize].contains(&l.labels[i])
            })
            .count();
        assert!(
            hit * 5 > nq,
            "{name}: only {hit}/{nq} labels in the top {K_TOP}"
        );
        let full = (0..nq)
            .filter(|&i| want.ids[(i + 1) * K_TOP as usize - 1] != u32::MAX)
            .count();
        assert!(
            full * 10 > nq * 9,
            "{name}: only {full}/{nq} queries with {K_TOP} candidates"
        );
        // The source's counts are part of what is compared: lists and
        // rows scanned for the IVF, rows scanned (the walk) for the graph,
        // none for the others.
        let scanned = want.cands.iter().all(|c| c[1] > 0 && c[2] > 0);
        let walked = want
            .cands
            .iter()
            .all(|c| c[1] == 0 && c[2] > 0 && c[3] == 0);
        let none = want.cands.iter().all(|c| c[1..] == [0; 3]);
        if p.source == LSHK_SOURCE_IVF {
            assert!(
                scanned,
                "{name}: an IVF query without lists or scanned rows"
            );
        } else if p.source == LSHK_SOURCE_GRAPH {
            assert!(
                walked,
                "{name}: a graph query without walked rows, or IVF counts"
            );
        } else {
            assert!(none, "{name}: IVF or graph counts on another source");
        }
        check_threads_b1(idx, &l, &g, nt, &want, name);
        free(idx);
        println!(
            "concurrency: {nt} threads x {nq} queries, identical to single-thread ({name}, \
             ROWS {ROWS} x DIM {DIM}, top-{K_TOP}, labels in top-{K_TOP}: {hit}/{nq})"
        );
    }
    println!("  ({:.1} s)", t0.elapsed().as_secs_f64());
}

/// Batched queries (B in 1..=17, varying per call and per thread) and
/// multi-probe SimHash from several threads.
#[test]
fn batched_and_multiprobe_queries_identical() {
    let nt = threads();
    let nq = queries_per_thread();
    let l = layer(nq);
    let idx = build(&l, LSHK_SOURCE_SIMHASH, 10, 16);
    let mut gp = lshk_query_params_default();
    gp.lsh.probes = 3;
    gp.lsh.bits_per_table = 10;
    let g0 = lshk_query_params_default();
    for (gname, g) in [("default gather", g0), ("3 probes", gp)] {
        let want = reference(idx, &l, &g);
        let got: Vec<Answers> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..nt)
                .map(|t| {
                    let (l, g) = (&l, &g);
                    s.spawn(move || {
                        let mut a = Answers::new(nq);
                        let mut r = SplitMix64::new(100 + t as u64);
                        // Cover 0..nq in batches of random size, the
                        // batches visited in this thread's own order.
                        let mut batches = Vec::new();
                        let mut i = 0;
                        while i < nq {
                            let b = (1 + r.below(17) as usize).min(nq - i);
                            batches.push((i, b));
                            i += b;
                        }
                        let o = order(t, nt, batches.len());
                        for j in o {
                            let (first, b) = batches[j];
                            query_batch(idx, l, g, first, b, &mut a);
                        }
                        a
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (t, mut a) in got.into_iter().enumerate() {
            // Batched calls report batch totals, not per-query counts.
            a.cands = want.cands.clone();
            compare(&a, &want, &format!("batched, {gname}, thread {t}"));
        }
        println!(
            "concurrency: {nt} threads x {nq} queries in batches of 1..=17 ({gname}), \
             identical to single-thread"
        );
    }
    free(idx);
}

/// Index rounds around lshk_index_train_labels (exclusive): round 1 on the
/// plain index, the training alone, round 2 on the label-aware index; the
/// same worker threads (and their thread-local scratch) live through both
/// rounds. Round 2 also gathers through the borrowed tables handle.
#[test]
fn index_rounds_around_train_labels() {
    let nt = threads();
    let nq = queries_per_thread();
    let l = layer(nq);
    let idx = build(&l, LSHK_SOURCE_SIMHASH, 10, 16);
    let g = lshk_query_params_default();
    // Training data: other queries near labels, one label each.
    let ntrain = 8000;
    let (tq, ty) = queries_near_labels(&l.w, ROWS, DIM, ntrain, 99);
    let toff: Vec<usize> = (0..=ntrain).collect();

    let barrier = Barrier::new(nt + 1);
    let rounds = 2;
    let results: Vec<Vec<Answers>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nt)
            .map(|t| {
                let (l, g, barrier) = (&l, &g, &barrier);
                s.spawn(move || {
                    let mut per_round = Vec::new();
                    for _ in 0..rounds {
                        barrier.wait(); // round starts
                        let mut a = Answers::new(l.nq);
                        for i in order(t, nt, l.nq) {
                            query_batch(idx, l, g, i, 1, &mut a);
                        }
                        per_round.push(a);
                        barrier.wait(); // round done
                    }
                    per_round
                })
            })
            .collect();
        for r in 0..rounds {
            barrier.wait();
            barrier.wait();
            if r == 0 {
                // Exclusive: every worker waits at the next barrier.
                let p = lshk_label_params_default();
                // SAFETY: tq holds ntrain*DIM floats, toff ntrain+1, ty
                // toff[ntrain] ids; no other thread uses idx now.
                ok(
                    unsafe {
                        lshk_index_train_labels(
                            idx.0,
                            tq.as_ptr(),
                            ntrain,
                            DIM,
                            toff.as_ptr(),
                            ty.as_ptr(),
                            &p,
                        )
                    },
                    "lshk_index_train_labels",
                );
            }
        }
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // After round 2 the index is the trained one: its single-threaded
    // answers are round 2's reference; round 1's is an untrained twin.
    let trained_ref = reference(idx, &l, &g);
    let plain = build(&l, LSHK_SOURCE_SIMHASH, 10, 16);
    let plain_ref = reference(plain, &l, &g);
    free(plain);
    assert_ne!(
        trained_ref.cands, plain_ref.cands,
        "training changed no candidate set: the test would prove nothing"
    );
    for (t, rs) in results.iter().enumerate() {
        compare(&rs[0], &plain_ref, &format!("round 1 (plain), thread {t}"));
        compare(
            &rs[1],
            &trained_ref,
            &format!("round 2 (trained), thread {t}"),
        );
    }
    println!(
        "concurrency: index rounds around lshk_index_train_labels: {nt} threads x {nq} queries \
         x 2 rounds, each round identical to single-thread on the index as it then was"
    );
    free(idx);
}

/// One gather (q = 1) on tables `t`: (ids, counts) of query `i`.
fn gather_one(
    t: *const lshk_tables,
    codes: &[u32],
    g: &lshk_gather_params,
    want_counts: bool,
    buf: &mut Vec<u32>,
    cbuf: &mut Vec<u32>,
) -> (Vec<u32>, Vec<u32>) {
    let mut off = [0usize; 2];
    let mut needed = 0usize;
    // SAFETY: codes holds L u32; buf/cbuf hold buf.len() u32; off 2 entries.
    ok(
        unsafe {
            lshk_tables_gather(
                t,
                codes.as_ptr(),
                1,
                g,
                ptr::null(),
                0,
                ptr::null(),
                ptr::null(),
                0,
                buf.as_mut_ptr(),
                buf.len(),
                off.as_mut_ptr(),
                if want_counts {
                    cbuf.as_mut_ptr()
                } else {
                    ptr::null_mut()
                },
                &mut needed,
            )
        },
        "lshk_tables_gather",
    );
    let ids = buf[..needed].to_vec();
    let counts = if want_counts {
        cbuf[..needed].to_vec()
    } else {
        Vec::new()
    };
    (ids, counts)
}

type GatherAnswers = Vec<(Vec<u32>, Vec<u32>)>;

/// Every query of `qcodes` gathered on `t`, with the variant of thread
/// `variant` (even: defaults, odd: min_count 2 with counts).
fn gather_all(
    t: *const lshk_tables,
    qcodes: &[u32],
    l: usize,
    n: usize,
    variant: usize,
    idxs: &[usize],
) -> GatherAnswers {
    let mut g = lshk_gather_params_default();
    if variant % 2 == 1 {
        g.min_count = 2;
    }
    let mut buf = vec![0u32; n];
    let mut cbuf = vec![0u32; n];
    let mut out = vec![(Vec::new(), Vec::new()); qcodes.len() / l];
    for &i in idxs {
        out[i] = gather_one(
            t,
            &qcodes[i * l..(i + 1) * l],
            &g,
            variant % 2 == 1,
            &mut buf,
            &mut cbuf,
        );
    }
    out
}

fn build_tables(codes: &[u32], n: usize, l: u32, rb: u32, cap: u32) -> Shared<lshk_tables> {
    let mut out = ptr::null_mut();
    // SAFETY: codes holds n*l u32, out is writable.
    ok(
        unsafe { lshk_tables_build(codes.as_ptr(), n, l, rb, cap, 7, 0, &mut out) },
        "lshk_tables_build",
    );
    Shared(out)
}

/// Standalone tables: 3 rounds of multi-threaded gathers; between rounds
/// an exclusive lshk_tables_update (round 1 -> 2) and lshk_tables_add_labels
/// (round 2 -> 3). Each round equals a single-threaded run on the object as
/// it then was, and (update) on tables freshly built from the updated codes.
#[test]
fn tables_rounds_around_update_and_add_labels() {
    let nt = threads();
    let (n, l, rb, cap) = (20_000usize, 8usize, 11u32, 24u32);
    let nq = queries_per_thread();
    let mut r = SplitMix64::new(2024);
    // Clustered codes so buckets are uneven and bucket_cap samples.
    let mut codes: Vec<u32> = (0..n * l).map(|_| r.below(1 << 12) as u32).collect();
    let qcodes: Vec<u32> = (0..nq * l).map(|_| r.below(1 << 12) as u32).collect();
    // Round 1 -> 2 update: 2,000 rows (some twice) get new codes.
    let upd_ids: Vec<u32> = (0..2000).map(|_| r.below(n as u64) as u32).collect();
    let upd_codes: Vec<u32> = (0..2000 * l).map(|_| r.below(1 << 12) as u32).collect();
    // Round 2 -> 3 labels: 5,000 training queries with 0..=3 labels.
    let ntrain = 5000;
    let tcodes: Vec<u32> = (0..ntrain * l).map(|_| r.below(1 << 12) as u32).collect();
    let mut toff = vec![0usize];
    let mut ty = Vec::new();
    for _ in 0..ntrain {
        for _ in 0..r.below(4) {
            ty.push(r.below(n as u64) as u32);
        }
        toff.push(ty.len());
    }

    let tab = build_tables(&codes, n, l as u32, rb, cap);
    let all: Vec<usize> = (0..nq).collect();
    let rounds = 3;
    let barrier = Barrier::new(nt + 1);
    let results: Vec<Vec<GatherAnswers>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nt)
            .map(|t| {
                let (qcodes, barrier) = (&qcodes, &barrier);
                s.spawn(move || {
                    let mut per = Vec::new();
                    for _ in 0..rounds {
                        barrier.wait();
                        let o = order(t, nt, nq);
                        per.push(gather_all(tab.get(), qcodes, l, n, t, &o));
                        barrier.wait();
                    }
                    per
                })
            })
            .collect();
        let mut refs: Vec<[GatherAnswers; 2]> = Vec::new();
        for round in 0..rounds {
            barrier.wait();
            barrier.wait();
            // Exclusive from here to the next round's start.
            refs.push([
                gather_all(tab.0, &qcodes, l, n, 0, &all),
                gather_all(tab.0, &qcodes, l, n, 1, &all),
            ]);
            if round == 0 {
                // SAFETY: upd_ids holds 2000 ids, upd_codes 2000*l codes;
                // no other thread uses tab now.
                ok(
                    unsafe {
                        lshk_tables_update(tab.0, upd_ids.as_ptr(), upd_codes.as_ptr(), 2000)
                    },
                    "lshk_tables_update",
                );
                for (j, &id) in upd_ids.iter().enumerate() {
                    let id = id as usize;
                    codes[id * l..(id + 1) * l].copy_from_slice(&upd_codes[j * l..(j + 1) * l]);
                }
                // The documented equivalence: equal to a fresh build.
                let fresh = build_tables(&codes, n, l as u32, rb, cap);
                for v in 0..2 {
                    assert_eq!(
                        gather_all(fresh.0, &qcodes, l, n, v, &all),
                        gather_all(tab.0, &qcodes, l, n, v, &all),
                        "updated tables differ from tables built from the updated codes"
                    );
                }
                // SAFETY: fresh is live and used by this thread only.
                ok(unsafe { lshk_tables_free(fresh.0) }, "lshk_tables_free");
            } else if round == 1 {
                let p = lshk_label_params_default();
                // SAFETY: tcodes holds ntrain*l, toff ntrain+1, ty
                // toff[ntrain]; no other thread uses tab now.
                ok(
                    unsafe {
                        lshk_tables_add_labels(
                            tab.0,
                            tcodes.as_ptr(),
                            ntrain,
                            toff.as_ptr(),
                            ty.as_ptr(),
                            &p,
                        )
                    },
                    "lshk_tables_add_labels",
                );
            }
        }
        let results: Vec<Vec<GatherAnswers>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        for round in 0..rounds {
            if round > 0 {
                assert_ne!(
                    refs[round][0],
                    refs[round - 1][0],
                    "round {round}: the change between rounds changed no gather result"
                );
            }
            for (t, rs) in results.iter().enumerate() {
                assert!(
                    rs[round] == refs[round][t % 2],
                    "round {}, thread {t}: differs from the single-threaded run",
                    round + 1
                );
            }
        }
        results
    });
    drop(results);
    // SAFETY: live, no other user.
    ok(unsafe { lshk_tables_free(tab.0) }, "lshk_tables_free");
    println!(
        "concurrency: tables rounds around lshk_tables_update and lshk_tables_add_labels: \
         {nt} threads x {nq} gathers x 3 rounds, each identical to single-thread"
    );
}

/// Each thread alternates between two indexes of different sizes and
/// families (its thread-local scratch, sized by the last index it served,
/// is reused for the other one).
#[test]
fn threads_alternating_between_indexes() {
    let nt = threads();
    let nq = queries_per_thread().min(5000);
    let l = layer(nq);
    let g = lshk_query_params_default();
    let big = build(&l, LSHK_SOURCE_SIMHASH, 10, 16);
    let small = build_rows(
        &l,
        1000,
        LSHK_SOURCE_DWTA,
        3,
        8,
        LSHK_STORAGE_BF16,
        LSHK_TRANSFORM_BIAS_AUG,
    );
    let want = [reference(big, &l, &g), reference(small, &l, &g)];
    let got: Vec<[Answers; 2]> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nt)
            .map(|t| {
                let (l, g) = (&l, &g);
                s.spawn(move || {
                    let mut a = [Answers::new(nq), Answers::new(nq)];
                    for (j, i) in order(t, nt, nq).into_iter().enumerate() {
                        for w in [j % 2, 1 - j % 2] {
                            let idx = if w == 0 { big } else { small };
                            query_batch(idx, l, g, i, 1, &mut a[w]);
                        }
                    }
                    a
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, a) in got.iter().enumerate() {
        compare(
            &a[0],
            &want[0],
            &format!("4096-row SimHash index, thread {t}"),
        );
        compare(&a[1], &want[1], &format!("1000-row DWTA index, thread {t}"));
    }
    free(big);
    free(small);
    println!(
        "concurrency: {nt} threads x {nq} queries x 2 indexes (4096-row SimHash, 1000-row DWTA \
         bf16 bias-aug) alternating per query, identical to single-thread"
    );
}
