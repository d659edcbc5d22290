//! Seeded mutation fuzzing of the gather / matmul / index / training /
//! HRR / IUL argument space through the C ABI. Every call goes through the
//! `pub extern "C"` functions of `lshk::ffi` exactly as a C caller makes
//! it: raw pointers, sizes, strides, ids, k, enum values and parameter
//! structs. Each execution starts from a valid call and mutates one to
//! three arguments: NULL or misaligned pointers, sizes and strides off by
//! one, zero or huge (so that products overflow), ids at and beyond the
//! number of rows, bad CSR offsets, bad enum / ISA values, `struct_size`
//! too small or larger than known, freed, foreign and borrowed handles,
//! NaN / infinity / -0 / subnormal data.
//!
//! The test stays inside the documented memory contract of the caller:
//! whenever a mutated size claims more memory than the buffer holds, the
//! buffer is grown (up to 2^22 elements) or, when the claim exceeds what
//! any process could own (`> isize::MAX` bytes, or the product
//! overflows), the call is made with the small buffer and MUST fail: the
//! library cannot have such memory to read. Claims in between are skipped
//! (counted). Every buffer has one element of slack after its claimed
//! length, which must never be written.
//!
//! Oracle, per execution:
//! * no crash, no panic (`LSHK_STATUS_PANIC` is a failure), no hang (a
//!   watchdog aborts after 120 s without progress), every call < 10 s;
//! * mutations that make a call invalid by the documented rules (NULL with
//!   a nonzero length, misaligned pointers, impossible sizes, bad enum
//!   values, struct_size too small, dead or foreign handles, ids >= rows,
//!   bad offsets, NaN projections, buffers one element short) must give a
//!   non-OK status;
//! * non-OK: a message starting with the function's name is set, and no
//!   output byte changed (canaries; gather may write `*needed` on
//!   BUFFER_TOO_SMALL, as documented); objects are unchanged
//!   (update / add_labels);
//! * OK: results equal an independent reference computed here (ids, CSR
//!   offsets, counts exact; matmul within the documented bound
//!   `gamma(dim+2) * (sum|w q| + |bias|)` plus `(dim+2) * 2^-149` for
//!   underflow, NaN/inf classes equal; softmax within
//!   `(2|x-m| + 8) * 2^-24` relative; top-k bit-exact), or, where the
//!   reference is the safe Rust API (multi-probe gather, the index of
//!   every candidate source: build, query, candidate sets, calibration,
//!   rebuild, label-aware tables and lists), equal to it bit for bit; a
//!   full IVF search (every list, every candidate re-ranked) and a graph
//!   pool of every row are also the brute-force top-k up to ties within
//!   the f32 bound; inputs are unchanged and no byte after the documented
//!   output length is written;
//! * a call that only some candidate sources have returns exactly
//!   UNSUPPORTED on the others, writing nothing.
//!
//! `LSHK_FUZZ_ITERS` sets the number of executions (default 50,000,
//! ~15 s in the debug profile on the 2-core CI machine);
//! `LSHK_FUZZ_SEED` the seed (default 0x5eed_a695). Run long with e.g.
//! `LSHK_FUZZ_ITERS=2000000 LSHK_FUZZ_SEED=$RANDOM cargo test --release
//! --test fuzz_args -- --nocapture`. A failure prints the seed and the
//! execution number; `LSHK_FUZZ_TRACE=1` prints every execution.
//!
//! One test binary, one file per section (`infra.rs` holds the shared
//! mutator and verdict machinery); [`TARGETS`] below lists every target
//! with its share of the executions: a new entry point adds its file and
//! one line there, and its name in [`FUZZED`] (every function there must
//! have been called, and have returned OK, in a default-length run).

#![allow(clippy::too_many_arguments)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_char;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;

mod forest;
mod graph;
mod hrr;
mod index;
mod infra;
mod iul;
mod ivf;
mod kernels;
mod sources;
mod tables;
mod train;
mod train_logq;

use forest::*;
use graph::*;
use hrr::*;
use index::*;
use infra::*;
use iul::*;
use ivf::*;
use kernels::*;
use sources::*;
use tables::*;
use train::*;
use train_logq::*;

use lshk::ffi::hrr::*;
use lshk::ffi::index::*;
use lshk::ffi::iul::*;
use lshk::ffi::labels::*;
use lshk::ffi::matmul::*;
use lshk::ffi::tables::*;
use lshk::ffi::train::*;
use lshk::ffi::*;
use lshk::hrr::{Hrr, Inverse, Scratch as HrrScratch};
use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::isa::Isa;
use lshk::ivf::{Codes, IvfParams, SearchParams, SearchStats};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};

// ------------------------------------------------------------ driver

fn env_usize(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(default)
}

/// Regression cases of bugs the fuzzer found (run inside the one test so
/// no concurrent test can reuse a freed handle slot meanwhile).
fn regressions() {
    // lshk_tables_gather accepted an output length whose byte size exceeds
    // isize::MAX (it only checked that len * 4 fits in usize), unlike every
    // slice_in/slice_out check: such a buffer cannot exist. Found by
    // fuzz_args (seed 0x5eeda695, exec 1315); fixed in check_out of
    // src/ffi/tables.rs.
    let codes = [1u32, 2, 3, 1];
    let mut t = null_mut();
    // SAFETY: 4 codes = n*L; writable out.
    assert_eq!(
        unsafe { lshk_tables_build(codes.as_ptr(), 4, 1, 4, 0, 1, 1, &mut t) },
        LSHK_STATUS_OK
    );
    for len in [(1usize << 61) + 1, isize::MAX as usize, usize::MAX / 4] {
        let mut ids = [CANARY; 8];
        let mut cnt = [CANARY; 8];
        let mut offs = [usize::MAX; 2];
        let mut needed = usize::MAX;
        // SAFETY: the claimed length is impossible; the call must refuse it
        // before writing anything.
        let st = unsafe {
            lshk_tables_gather(
                t,
                codes.as_ptr(),
                1,
                null(),
                null(),
                0,
                null(),
                null(),
                0,
                ids.as_mut_ptr(),
                len,
                offs.as_mut_ptr(),
                cnt.as_mut_ptr(),
                &mut needed,
            )
        };
        assert_eq!(
            st,
            LSHK_STATUS_SIZE_OVERFLOW,
            "ids_len {len}: {}",
            last_msg()
        );
        assert!(
            ids.iter().chain(&cnt).all(|&x| x == CANARY)
                && offs == [usize::MAX; 2]
                && needed == usize::MAX
        );
    }
    // SAFETY: live handle, freed once.
    unsafe { lshk_tables_free(t) };
}

// ------------------------------------------------------------ the targets

/// The long-lived objects the targets fuzz against (built once): an
/// index of every candidate source, and their saved files.
struct Env {
    idx: Vec<Idx>,
    ivfs: Vec<IvfX>,
    hrrs: Vec<HrrX>,
    hrr_dead: *mut lshk_hrr,
    graphs: Vec<GraphX>,
    forests: Vec<ForestX>,
    files: Vec<Saved>,
}

impl Env {
    /// The live indexes of every source but IVF (for the IVF-only calls).
    fn non_ivf(&self) -> Vec<*mut lshk_index> {
        let mut v: Vec<_> = self.idx.iter().map(|x| x.h).collect();
        v.extend(self.graphs.iter().map(|x| x.h));
        v.extend(self.forests.iter().map(|x| x.h));
        v
    }
}

/// The entry points of the one index (every candidate source) and of the
/// kernels that take an LSHK_STORAGE_* element type: each must be called,
/// and return OK, in a run of the default length (so no rule of this test
/// keeps a function from its valid calls).
const FUZZED: &[&str] = &[
    "lshk_index_build",
    "lshk_index_query",
    "lshk_index_candidates",
    "lshk_index_union",
    "lshk_index_rebuild",
    "lshk_index_set_codes",
    "lshk_index_calibrate",
    "lshk_index_train_labels",
    "lshk_index_describe",
    "lshk_index_memory_bytes",
    "lshk_index_weights",
    "lshk_index_load",
    "lshk_index_simhash",
    "lshk_index_dwta",
    "lshk_index_tables",
    "lshk_index_inclusion_prob",
    "lshk_index_dirty_rows",
    "lshk_gathered_matmul",
    "lshk_gathered_matmul_isa",
    "lshk_convert",
    "lshk_gather_dq",
    "lshk_gather_dq_isa",
    "lshk_tables_memory_bytes",
];

/// One fuzz target: its share of the executions (out of the sum of the
/// shares), and the call, which returns the name its time is reported
/// under.
type Target = (u64, fn(&mut Ctx, &mut Env) -> &'static str);

/// Every target, in the order of the random draw (keep the order: the
/// draw maps a number in `0..sum of shares` to the target whose range
/// holds it, so a seed replays the same executions).
const TARGETS: &[Target] = &[
    (6, |c, _| {
        fuzz_matmul(c);
        "matmul"
    }),
    (4, |c, e| {
        fuzz_gather(c, &e.idx);
        "gather"
    }),
    (2, |c, _| {
        fuzz_topk(c);
        "topk"
    }),
    (2, |c, _| {
        fuzz_softmax(c);
        "softmax"
    }),
    (2, |c, e| {
        fuzz_query(c, &e.idx);
        "query"
    }),
    (1, |c, _| {
        fuzz_build(c);
        "build"
    }),
    (2, |c, e| {
        fuzz_update(c, &e.idx);
        "update"
    }),
    (1, |c, e| {
        fuzz_add_labels(c, &e.idx);
        "labels"
    }),
    (1, |c, e| {
        fuzz_ivf_query(c, &e.ivfs);
        "ivf query"
    }),
    (1, |c, _| {
        fuzz_ivf_build(c);
        "ivf build"
    }),
    // IUL trains (ms a call): a quarter of its share, else top-k.
    (1, |c, _| {
        if c.r.one_in(4) {
            fuzz_iul(c);
            "iul"
        } else {
            fuzz_topk(c);
            "topk"
        }
    }),
    (1, |c, e| {
        fuzz_hrr(c, &mut e.hrrs, e.hrr_dead);
        "hrr"
    }),
    (1, |c, _| {
        fuzz_xent(c);
        "xent"
    }),
    (1, |c, _| {
        fuzz_backward(c);
        "dq / sgd"
    }),
    (1, |c, _| {
        fuzz_ivf_labels(c);
        "ivf labels"
    }),
    (1, |c, _| {
        fuzz_index_update(c);
        "index update / rehash"
    }),
    (1, |c, _| {
        fuzz_gather_budget(c);
        "gather budget"
    }),
    (1, |c, _| {
        fuzz_forest(c);
        "forest"
    }),
    (1, |c, e| {
        let others = e.non_ivf();
        fuzz_ivf_calibrate(c, &e.ivfs, &others);
        "ivf calibrate"
    }),
    (1, |c, e| {
        if c.r.one_in(4) {
            fuzz_graph_build(c);
        } else {
            fuzz_graph_query(c, &e.graphs);
        }
        "graph"
    }),
    (1, |c, e| {
        fuzz_graph_walk(c, &e.graphs);
        "graph walk"
    }),
    (1, |c, e| {
        if c.r.one_in(4) {
            fuzz_source_build(c);
        } else {
            fuzz_source_query(c, e);
        }
        "index sources"
    }),
    (1, |c, e| {
        fuzz_inclusion_prob(c, &e.idx);
        "inclusion prob"
    }),
    (1, |c, _| {
        fuzz_convert(c);
        "convert"
    }),
    (1, |c, e| {
        if c.r.one_in(2) {
            fuzz_unsupported(c, e);
        } else {
            fuzz_describe(c, e);
        }
        "unsupported / describe"
    }),
    (1, |c, e| {
        let files = std::mem::take(&mut e.files);
        fuzz_load(c, e, &files);
        e.files = files;
        "load"
    }),
    (1, |c, _| {
        fuzz_topk_merge(c);
        "topk merge"
    }),
];

/// Draws one target by its share and runs it.
fn run_one(c: &mut Ctx, e: &mut Env) -> &'static str {
    let total: u64 = TARGETS.iter().map(|t| t.0).sum();
    let mut x = c.r.u(total as usize) as u64;
    for &(share, f) in TARGETS {
        if x < share {
            return f(c, e);
        }
        x -= share;
    }
    unreachable!("x < total")
}

#[test]
fn fuzz_c_abi_arguments() {
    regressions();
    let iters = env_usize("LSHK_FUZZ_ITERS", 50_000) as usize;
    let seed = env_usize("LSHK_FUZZ_SEED", 0x5eed_a695);
    // Watchdog: no progress for 120 s is a hang.
    let wd = std::thread::spawn(|| {
        let mut last = (PROGRESS.load(Ordering::Relaxed), Instant::now());
        while !DONE.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let p = PROGRESS.load(Ordering::Relaxed);
            if p != last.0 {
                last = (p, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(120) {
                eprintln!(
                    "fuzz_args: HANG (no progress for 120 s) in {}",
                    CURRENT.lock().unwrap()
                );
                std::process::abort();
            }
        }
    });
    let (hrrs, hrr_dead) = build_hrrs();
    let mut env = Env {
        idx: build_indexes(),
        ivfs: build_ivfs(),
        hrrs,
        hrr_dead,
        graphs: build_graphs(),
        forests: build_forests(),
        files: Vec::new(),
    };
    let dir = std::env::temp_dir().join(format!("lshk-fuzz-args-{}", std::process::id()));
    env.files = save_indexes(&env, &dir);
    let mut c = Ctx {
        r: R(SplitMix64::new(seed)),
        seed,
        execs: 0,
        skipped: 0,
        ok: 0,
        failures: Vec::new(),
        exec_no: 0,
        desc: String::new(),
        per_fn: BTreeMap::new(),
        per_target: BTreeMap::new(),
    };
    let t0 = Instant::now();
    while c.execs < iters {
        c.exec_no += 1;
        c.desc.clear();
        let t1 = Instant::now();
        let name = run_one(&mut c, &mut env);
        *c.per_target.entry(name).or_default() += t1.elapsed();
        if c.failures.len() >= 20 {
            break;
        }
    }
    DONE.store(true, Ordering::Relaxed);
    wd.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for (f, (n, ok, dt)) in &c.per_fn {
        println!(
            "  {f}: {n} calls, {ok} OK, {:.2} s in the calls",
            dt.as_secs_f64()
        );
    }
    for (t, dt) in &c.per_target {
        println!("  {t}: {:.2} s in total", dt.as_secs_f64());
    }
    println!(
        "fuzz_args: {} executions ({} OK, {} rejected), {} skipped mutants, {} failures, seed {:#x}, {:.1} s",
        c.execs,
        c.ok,
        c.execs - c.ok,
        c.skipped,
        c.failures.len(),
        seed,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        c.failures.is_empty(),
        "{} failures:\n{}",
        c.failures.len(),
        c.failures.join("\n")
    );
    // Every case of the graph's query options ran; checked at the default
    // length and above.
    let ex: Vec<u64> = GRAPH_WALK_CASES
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    println!("  graph walk cases (mutation 0-11, none): {ex:?}");
    if iters >= 50_000 {
        assert!(
            ex.iter().all(|&n| n > 0),
            "a case of the graph's query options never ran: {ex:?}"
        );
        let missing: Vec<&str> = FUZZED
            .iter()
            .copied()
            .filter(|f| c.per_fn.get(f).is_none_or(|&(n, ok, _)| n == 0 || ok == 0))
            .collect();
        assert!(
            missing.is_empty(),
            "never called, or never OK, in {iters} executions: {missing:?}"
        );
    }
    // Which tiers the `_isa` calls ran (an OK call on that tier); under CI a
    // supported tier none of them ran fails (at the default 50,000
    // executions every tier is picked hundreds of times).
    let ran_bits = TIERS_RAN.load(Ordering::Relaxed);
    let ran: Vec<Isa> = Isa::ALL
        .into_iter()
        .filter(|&t| ran_bits & (1 << t as u32) != 0)
        .collect();
    common::tiers::report(
        "fuzz_c_abi_arguments (the _isa calls that returned OK)",
        &ran,
    );
}
