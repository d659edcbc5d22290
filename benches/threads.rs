//! Query throughput of ONE shared index from 1 and 2 threads (B = 1
//! queries, top-10, through the C entry point lshk_index_query as a
//! server calls it), in three regimes of the index's footprint:
//!
//! | regime | rows x dim | K, L | footprint |
//! |---|---|---|---|
//! | L2   | 1,024 x 64     | 8, 16  | ~0.4 MiB (W 256 KiB) < L2 512 KiB per core |
//! | L3   | 16,384 x 128   | 12, 32 | ~11 MiB < L3 32 MiB (shared) |
//! | DRAM | 262,144 x 128  | 12, 32 | ~150 MiB (W 128 MiB) |
//!
//! Each thread queries its own pool of 128 queries near label rows (in a
//! loop). Criterion's figure: one iteration = one query on EACH thread
//! (threads released together by a barrier, wall time to the last one's
//! end), so `Throughput::Elements(threads)` makes elements/s the
//! aggregate queries/s.
//!
//! Because criterion measures 1 and 2 threads minutes apart on a machine
//! shared with other jobs, the bench first prints an ALTERNATING
//! measurement per regime: 1 thread, 2 threads, 1, 2, ... (`LSHK_THREADS_REPS`
//! pairs, default 5, 0.4 s each), with the ratio of each adjacent pair and
//! their median: the figure to quote when the machine is quiet
//! (`LSHK_THREADS_SECS` per half, default 0.4; the pairs in which every
//! thread had a core, core share >= 0.9, are summarised separately; each
//! line shows the "core share": CPU time / (wall x threads), 1.0 when
//! every thread had a core to itself). On a busy machine the CPU-time
//! ratio 2 x (CPU per query, 1 thread) / (CPU per query, 2 threads) is
//! printed beside it: the scaling with a free core per thread, which
//! contention between the threads (shared L3 and DRAM, false sharing,
//! locks) would lower. `LSHK_THREADS_ONLY_ALT=1` skips
//! criterion; `LSHK_THREADS_REGIMES=L2,L3` picks regimes.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use lshk::data::{queries_near_labels, structured_layer};
use lshk::ffi::index::*;
use lshk::ffi::LSHK_STATUS_OK;

const POOL: usize = 128;
const TOPK: u32 = 10;

struct Regime {
    name: &'static str,
    rows: usize,
    dim: usize,
    k: u32,
    l: u32,
}

const REGIMES: [Regime; 3] = [
    Regime {
        name: "L2",
        rows: 1024,
        dim: 64,
        k: 8,
        l: 16,
    },
    Regime {
        name: "L3",
        rows: 16_384,
        dim: 128,
        k: 12,
        l: 32,
    },
    Regime {
        name: "DRAM",
        rows: 262_144,
        dim: 128,
        k: 12,
        l: 32,
    },
];

struct Setup {
    idx: usize, // *mut lshk_index, as a number so threads may share it
    dim: usize,
    /// One pool of POOL queries per thread (2 threads at most).
    pools: Vec<Vec<f32>>,
    bytes: usize,
    cands: f64,
}

fn setup(r: &Regime) -> Setup {
    let layer = structured_layer(r.rows, r.dim, 256, 1);
    let mut p = lshk_index_params_default();
    p.lsh.bits_per_table = r.k;
    p.lsh.tables = r.l;
    let mut idx = std::ptr::null_mut();
    // SAFETY: w holds rows*dim floats, bias rows; p and idx valid.
    let s = unsafe {
        lshk_index_build(
            layer.w.as_ptr(),
            layer.bias.as_ptr(),
            r.rows,
            r.dim,
            r.dim,
            &p,
            &mut idx,
        )
    };
    assert_eq!(s, LSHK_STATUS_OK);
    let pools: Vec<Vec<f32>> = (0..2)
        .map(|t| queries_near_labels(&layer.w, r.rows, r.dim, POOL, 100 + t).0)
        .collect();
    let mut bytes = 0usize;
    // SAFETY: a live handle, bytes writable.
    unsafe { lshk_index_memory_bytes(idx, &mut bytes) };
    // Mean candidates per query over pool 0.
    let mut st = lshk_query_stats {
        struct_size: std::mem::size_of::<lshk_query_stats>() as u32,
        ..Default::default()
    };
    let mut ids = vec![0u32; POOL * TOPK as usize];
    // SAFETY: pool holds POOL*dim floats, ids POOL*TOPK.
    let s = unsafe {
        lshk_index_query(
            idx,
            pools[0].as_ptr(),
            POOL,
            r.dim,
            TOPK,
            std::ptr::null(),
            ids.as_mut_ptr(),
            std::ptr::null_mut(),
            &mut st,
        )
    };
    assert_eq!(s, LSHK_STATUS_OK);
    Setup {
        idx: idx as usize,
        dim: r.dim,
        pools,
        bytes,
        cands: st.candidates_total as f64 / POOL as f64,
    }
}

/// `n` B = 1 queries from pool `pool`, starting at query `start`.
fn run(s: &Setup, pool: usize, start: usize, n: u64) {
    let idx = s.idx as *const lshk_index;
    let q = &s.pools[pool];
    let mut ids = [0u32; TOPK as usize];
    let mut sc = [0f32; TOPK as usize];
    let mut j = start % POOL;
    for _ in 0..n {
        // SAFETY: query j holds dim floats; outputs hold TOPK.
        let st = unsafe {
            lshk_index_query(
                idx,
                q[j * s.dim..].as_ptr(),
                1,
                s.dim,
                TOPK,
                std::ptr::null(),
                ids.as_mut_ptr(),
                sc.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        debug_assert_eq!(st, LSHK_STATUS_OK);
        black_box((&ids, &sc));
        j = (j + 1) % POOL;
    }
}

/// CPU time consumed by the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `threads` threads each running `n` queries, released together: (wall
/// time, CPU time summed over the threads).
fn timed_cpu(s: &Setup, threads: usize, n: u64) -> (Duration, Duration) {
    let go = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (go, done) = (&go, &done);
                sc.spawn(move || {
                    run(s, t, 0, 4); // warm the thread's scratch
                    go.wait();
                    let c0 = thread_cpu();
                    run(s, t, 4, n);
                    let cpu = thread_cpu() - c0;
                    done.wait();
                    cpu
                })
            })
            .collect();
        go.wait();
        let t0 = Instant::now();
        done.wait();
        let wall = t0.elapsed();
        let cpu = hs.into_iter().map(|h| h.join().unwrap()).sum();
        (wall, cpu)
    })
}

fn timed(s: &Setup, threads: usize, n: u64) -> Duration {
    timed_cpu(s, threads, n).0
}

struct Rate {
    /// Aggregate queries per second of wall time.
    qps: f64,
    /// CPU microseconds per query (summed over threads).
    cpu_us: f64,
    /// CPU time / (wall time x threads): 1.0 = every thread had a core.
    share: f64,
}

/// Throughput of `threads` threads over about `secs` seconds.
fn rate(s: &Setup, threads: usize, secs: f64) -> Rate {
    // Size the run from a short probe.
    let probe = timed(s, threads, 64).as_secs_f64().max(1e-6);
    let n = ((secs / probe) * 64.0).clamp(64.0, 5e6) as u64;
    let (w, c) = timed_cpu(s, threads, n);
    let q = n as f64 * threads as f64;
    Rate {
        qps: q / w.as_secs_f64(),
        cpu_us: c.as_secs_f64() * 1e6 / q,
        share: c.as_secs_f64() / (w.as_secs_f64() * threads as f64),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn alternating(r: &Regime, s: &Setup) {
    let reps: usize = std::env::var("LSHK_THREADS_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "threads/{}: {} x {}, K={} L={}, {:.1} MiB, {:.0} candidates/query, load avg {}",
        r.name,
        r.rows,
        r.dim,
        r.k,
        r.l,
        s.bytes as f64 / (1 << 20) as f64,
        s.cands,
        loadavg()
    );
    let secs: f64 = std::env::var("LSHK_THREADS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.4);
    let (mut ratios, mut cpu_ratios, mut valid) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..reps {
        let one = rate(s, 1, secs);
        let two = rate(s, 2, secs);
        ratios.push(two.qps / one.qps);
        if one.share >= 0.9 && two.share >= 0.9 {
            valid.push(two.qps / one.qps);
        }
        // What 2 threads would give with a free core each: twice the
        // one-thread rate, scaled by how much CPU a query costs when two
        // run at once (contention: shared L3/DRAM, false sharing, locks).
        cpu_ratios.push(2.0 * one.cpu_us / two.cpu_us);
        println!(
            "  pair {i}: 1 thread {:>8.0} q/s ({:.2} us CPU/q, core share {:.2}), \
             2 threads {:>8.0} q/s ({:.2} us CPU/q, core share {:.2}): wall ratio {:.2}, \
             CPU-time ratio {:.2}",
            one.qps,
            one.cpu_us,
            one.share,
            two.qps,
            two.cpu_us,
            two.share,
            two.qps / one.qps,
            2.0 * one.cpu_us / two.cpu_us
        );
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (m, lo, hi) = med(&mut ratios);
    let (cm, clo, chi) = med(&mut cpu_ratios);
    println!(
        "  median wall ratio 2 threads / 1 thread: {m:.2} (min {lo:.2}, max {hi:.2}); \
         median CPU-time ratio {cm:.2} (min {clo:.2}, max {chi:.2}); load avg {}",
        loadavg()
    );
    if valid.is_empty() {
        println!("  no pair had a core per thread (core share >= 0.9 in both halves)");
    } else {
        let n = valid.len();
        let (vm, vlo, vhi) = med(&mut valid);
        println!(
            "  pairs with a core per thread (core share >= 0.9 in both halves): {n} of {reps}, \
             wall ratio median {vm:.2} (min {vlo:.2}, max {vhi:.2})"
        );
    }
}

fn main() {
    let pick = std::env::var("LSHK_THREADS_REGIMES").ok();
    let only_alt = std::env::var_os("LSHK_THREADS_ONLY_ALT").is_some();
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(10)
        .configure_from_args();
    for r in &REGIMES {
        if let Some(p) = &pick {
            if !p.split(',').any(|x| x == r.name) {
                continue;
            }
        }
        let s = setup(r);
        alternating(r, &s);
        if !only_alt {
            let mut g = c.benchmark_group(format!("threads_b1/{}", r.name));
            for threads in [1usize, 2] {
                g.throughput(Throughput::Elements(threads as u64));
                g.bench_function(BenchmarkId::new(lshk::isa::active().name(), threads), |b| {
                    b.iter_custom(|iters| timed(&s, threads, iters))
                });
            }
            g.finish();
        }
        // SAFETY: a live handle, no thread uses it any more.
        unsafe { lshk_index_free(s.idx as *mut lshk_index) };
    }
    c.final_summary();
}
