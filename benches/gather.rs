//! Gather benchmark on W1: 670,091 rows of d = 128 Gaussian values, SimHash
//! codes (K bits, L tables) made with lshk's SimHash, tables with
//! range_bits = K. Queries are fresh Gaussian vectors hashed with the same
//! family. Throughput is in bucket entries visited (so criterion's
//! elements/s inverts to ns per entry); the union size is printed.
//!
//! Environment: `LSHK_GATHER_K` (default 12), `LSHK_GATHER_L` (default 50,
//! which gives a ~9.9K union here; see benches/gather.md). Besides
//! criterion's wall-clock figures, a table of thread-CPU-time figures per
//! tier is printed first (more robust on a shared, oversubscribed machine).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::rng::SplitMix64;
use lshk::tables::{GatherInput, GatherParams, GatherResult, Tables};
use lshk::{Isa, SimHash};

const N: usize = 670_091;
const DIM: usize = 128;
const QUERIES: usize = 64;

struct W1 {
    k: u32,
    l: u32,
    codes: Vec<u32>,
    tables: Tables,
    qcodes: Vec<u32>,
    proj: Vec<f32>,
}

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn w1() -> W1 {
    let k = env_u32("LSHK_GATHER_K", 12);
    let l = env_u32("LSHK_GATHER_L", 50);
    let t0 = Instant::now();
    let h = SimHash::new(DIM, k, l, 0, 1).unwrap();
    let mut codes = vec![0u32; N * l as usize];
    // Rows are generated and hashed in chunks, on two threads (the row
    // matrix itself, 343 MB, is never held).
    let chunk = 8192;
    let nthreads = 2;
    let per = N.div_ceil(nthreads);
    std::thread::scope(|s| {
        for (ti, out) in codes.chunks_mut(per * l as usize).enumerate() {
            let h = &h;
            s.spawn(move || {
                let mut r = SplitMix64::new(1000 + ti as u64);
                let rows = out.len() / l as usize;
                let mut x = vec![0f32; chunk * DIM];
                let mut i = 0;
                while i < rows {
                    let m = (rows - i).min(chunk);
                    for v in x[..m * DIM].iter_mut() {
                        *v = r.next_normal() as f32;
                    }
                    h.hash(
                        &x[..m * DIM],
                        m,
                        DIM,
                        &mut out[i * l as usize..(i + m) * l as usize],
                    )
                    .unwrap();
                    i += m;
                }
            });
        }
    });
    let mut r = SplitMix64::new(7);
    let qx: Vec<f32> = (0..QUERIES * DIM).map(|_| r.next_normal() as f32).collect();
    let mut qcodes = vec![0u32; QUERIES * l as usize];
    let mut proj = vec![0f32; QUERIES * (k * l) as usize];
    h.hash(&qx, QUERIES, DIM, &mut qcodes).unwrap();
    h.project(&qx, QUERIES, DIM, &mut proj).unwrap();
    let tables = Tables::build(&codes, N, l, k, 0, 3, 0).unwrap();
    eprintln!(
        "W1: {N} rows, d={DIM}, K={k}, L={l}: codes + tables in {:.1} s, tables {:.0} MB",
        t0.elapsed().as_secs_f64(),
        tables.memory_bytes() as f64 / 1e6
    );
    W1 {
        k,
        l,
        codes,
        tables,
        qcodes,
        proj,
    }
}

/// Bucket entries visited by query `qi` (main buckets only, no budget).
fn entries(w: &W1, qi: usize) -> usize {
    let l = w.l as usize;
    (0..l)
        .map(|t| {
            w.tables
                .bucket(t, lshk::tables::fold_code(w.qcodes[qi * l + t], w.k))
                .len()
        })
        .sum()
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Thread-CPU-time per query and per bucket entry, B = 1 and B = 64, every
/// tier and mode (best of 5 passes over the 64 queries). Entries visited are
/// counted exactly as the sum of the table-hit counts of a min_count = 1 run
/// with the same probes.
fn cpu_table(w: &W1, tiers: &[Isa], modes: &[(&str, GatherParams, bool)]) {
    let l = w.l as usize;
    let kl = (w.k * w.l) as usize;
    let all = GatherInput {
        codes: &w.qcodes,
        q: QUERIES,
        projections: Some(&w.proj),
        ..Default::default()
    };
    eprintln!("thread CPU time (best of 5 passes over {QUERIES} queries):");
    eprintln!(
        "| mode | tier | entries/query | output ids/query | B=1 us/query | B=1 ns/entry | B=64 us/query | B=64 ns/entry |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|");
    for &(mode, p, want_counts) in modes {
        let mut out = GatherResult::default();
        let p1 = GatherParams { min_count: 1, ..p };
        w.tables.gather(&p1, &all, true, &mut out).unwrap();
        let entries: u64 = out.counts.iter().map(|&c| c as u64).sum();
        w.tables.gather(&p, &all, false, &mut out).unwrap();
        let outputs = out.ids.len();
        for &tier in tiers {
            let (mut b1, mut b64) = (u64::MAX, u64::MAX);
            for _ in 0..5 {
                let t0 = thread_cpu_ns();
                for qi in 0..QUERIES {
                    let input = GatherInput {
                        codes: &w.qcodes[qi * l..(qi + 1) * l],
                        q: 1,
                        projections: Some(&w.proj[qi * kl..(qi + 1) * kl]),
                        ..Default::default()
                    };
                    w.tables
                        .gather_isa(tier, &p, black_box(&input), want_counts, &mut out)
                        .unwrap();
                    black_box(out.ids.len());
                }
                b1 = b1.min(thread_cpu_ns() - t0);
                let t0 = thread_cpu_ns();
                w.tables
                    .gather_isa(tier, &p, black_box(&all), want_counts, &mut out)
                    .unwrap();
                black_box(out.ids.len());
                b64 = b64.min(thread_cpu_ns() - t0);
            }
            eprintln!(
                "| {mode} | {} | {:.0} | {:.0} | {:.1} | {:.2} | {:.1} | {:.2} |",
                tier.name(),
                entries as f64 / QUERIES as f64,
                outputs as f64 / QUERIES as f64,
                b1 as f64 / 1e3 / QUERIES as f64,
                b1 as f64 / entries as f64,
                b64 as f64 / 1e3 / QUERIES as f64,
                b64 as f64 / entries as f64
            );
        }
    }
}

/// The mark and extract kernels alone on W1-sized scratch: 64 different
/// sets of 9,900 random ids (sorted in runs of 198, like 50 buckets), bitmap
/// of n bits, cycled so that the branch predictor cannot learn one pattern.
fn kernel_table(tiers: &[Isa]) {
    use lshk::kernels::gather::kernels;
    let mut r = SplitMix64::new(9);
    let sets: Vec<Vec<u32>> = (0..64)
        .map(|_| {
            let mut ids: Vec<u32> = (0..9_900).map(|_| r.below(N as u64) as u32).collect();
            for c in ids.chunks_mut(198) {
                c.sort_unstable();
            }
            ids
        })
        .collect();
    let total: usize = sets.iter().map(|s| s.len()).sum();
    let words = N.div_ceil(64) + 8;
    let mut bits = vec![0u64; words];
    let mut summary = vec![0u64; words.div_ceil(64) + 1];
    let sw = N.div_ceil(64).div_ceil(64);
    let mut out = Vec::with_capacity(20_000);
    eprintln!("kernels alone, thread CPU time (best of 5 passes over 64 id sets):");
    eprintln!("| tier | mark ns/id | extract ns/id |");
    eprintln!("|---|---|---|");
    for &tier in tiers {
        let k = kernels(tier);
        let (mut tm, mut te) = (u64::MAX, u64::MAX);
        for _ in 0..5 {
            let (mut m, mut e) = (0, 0);
            for ids in &sets {
                let t0 = thread_cpu_ns();
                for c in ids.chunks(198) {
                    // SAFETY: ids < N, scratch sized for N rows.
                    black_box(unsafe { (k.mark)(&mut bits, &mut summary, black_box(c)) });
                }
                let t1 = thread_cpu_ns();
                out.clear();
                // SAFETY: as above.
                unsafe { (k.extract)(&mut bits, &mut summary[..sw], &mut out) };
                let t2 = thread_cpu_ns();
                black_box(out.len());
                m += t1 - t0;
                e += t2 - t1;
            }
            tm = tm.min(m);
            te = te.min(e);
        }
        eprintln!(
            "| {} | {:.2} | {:.2} |",
            tier.name(),
            tm as f64 / total as f64,
            te as f64 / total as f64
        );
    }
}

fn bench_gather(c: &mut Criterion) {
    let w = w1();
    let l = w.l as usize;
    let tiers: Vec<Isa> = Isa::supported().collect();
    for t in Isa::ALL {
        if !tiers.contains(&t) {
            eprintln!("skipped: {} tier (CPU lacks it)", t.name());
        }
    }
    let total_entries: usize = (0..QUERIES).map(|q| entries(&w, q)).sum();
    let mut out = GatherResult::default();
    let all = GatherInput {
        codes: &w.qcodes,
        q: QUERIES,
        ..Default::default()
    };
    w.tables
        .gather(&GatherParams::default(), &all, false, &mut out)
        .unwrap();
    eprintln!(
        "W1 queries: mean {:.0} entries visited, mean union {:.0} candidates",
        total_entries as f64 / QUERIES as f64,
        out.ids.len() as f64 / QUERIES as f64
    );
    let mut with_probes = GatherResult::default();
    let pp = GatherParams {
        probes: 1,
        bits_per_table: w.k,
        ..Default::default()
    };
    w.tables
        .gather(
            &pp,
            &GatherInput {
                projections: Some(&w.proj),
                ..all
            },
            false,
            &mut with_probes,
        )
        .unwrap();
    eprintln!(
        "with 1 probe per table: mean union {:.0}",
        with_probes.ids.len() as f64 / QUERIES as f64
    );

    let modes: [(&str, GatherParams, bool); 3] = [
        ("union", GatherParams::default(), false),
        (
            "min2+counts",
            GatherParams {
                min_count: 2,
                ..Default::default()
            },
            true,
        ),
        ("probes1", pp, false),
    ];
    kernel_table(&tiers);
    cpu_table(&w, &tiers, &modes);
    for (mode, p, want_counts) in modes {
        // Entries visited by this mode (sum of hit counts with min_count 1).
        let mut tmp = GatherResult::default();
        let allp = GatherInput {
            projections: Some(&w.proj),
            ..all
        };
        w.tables
            .gather(&GatherParams { min_count: 1, ..p }, &allp, true, &mut tmp)
            .unwrap();
        let total_entries: usize = tmp.counts.iter().map(|&c| c as usize).sum();
        // B = 1: one query per call, cycling through the 64 queries.
        let mut g = c.benchmark_group(format!("gather_w1_b1_{mode}"));
        g.measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(500))
            .sample_size(20);
        g.throughput(Throughput::Elements((total_entries / QUERIES) as u64));
        for &tier in &tiers {
            let mut out = GatherResult::default();
            let mut qi = 0usize;
            g.bench_function(BenchmarkId::new(tier.name(), 1), |b| {
                b.iter(|| {
                    let kl = (w.k * w.l) as usize;
                    let input = GatherInput {
                        codes: &w.qcodes[qi * l..(qi + 1) * l],
                        q: 1,
                        projections: Some(&w.proj[qi * kl..(qi + 1) * kl]),
                        ..Default::default()
                    };
                    w.tables
                        .gather_isa(tier, &p, black_box(&input), want_counts, &mut out)
                        .unwrap();
                    qi = (qi + 1) % QUERIES;
                    black_box(out.ids.len())
                })
            });
        }
        g.finish();
        // B = 64: one call for 64 queries.
        let mut g = c.benchmark_group(format!("gather_w1_b64_{mode}"));
        g.measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(500))
            .sample_size(10);
        g.throughput(Throughput::Elements(total_entries as u64));
        for &tier in &tiers {
            let mut out = GatherResult::default();
            g.bench_function(BenchmarkId::new(tier.name(), QUERIES), |b| {
                b.iter(|| {
                    let all = GatherInput {
                        projections: Some(&w.proj),
                        ..all
                    };
                    w.tables
                        .gather_isa(tier, &p, black_box(&all), want_counts, &mut out)
                        .unwrap();
                    black_box(out.ids.len())
                })
            });
        }
        g.finish();
    }

    // Table build from the codes, one thread and all threads.
    let mut g = c.benchmark_group("tables_build_w1");
    g.measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(10);
    g.throughput(Throughput::Elements((N * l) as u64));
    for threads in [1u32, 0] {
        g.bench_function(BenchmarkId::new("threads", threads), |b| {
            b.iter(|| {
                let t = Tables::build(black_box(&w.codes), N, w.l, w.k, 0, 3, threads).unwrap();
                black_box(t.memory_bytes())
            })
        });
    }
    g.finish();

    // Update of 10 and 1,000 rows on one thread (affected buckets spliced
    // into each changed table); the next update undoes it so every sample does the
    // same work.
    let mut g = c.benchmark_group("tables_update_w1");
    g.measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(10);
    let mut t1 = Tables::build(&w.codes, N, w.l, w.k, 0, 3, 1).unwrap();
    let mut r = SplitMix64::new(11);
    for count in [10usize, 1000] {
        let ids: Vec<u32> = (0..count).map(|_| r.below(N as u64) as u32).collect();
        let old: Vec<u32> = ids
            .iter()
            .flat_map(|&i| {
                w.codes[i as usize * l..(i as usize + 1) * l]
                    .iter()
                    .copied()
            })
            .collect();
        let new: Vec<u32> = (0..count * l)
            .map(|_| r.next_u64() as u32 & ((1 << w.k) - 1))
            .collect();
        g.throughput(Throughput::Elements(ids.len() as u64));
        let mut flip = false;
        g.bench_function(BenchmarkId::new("rows", ids.len()), |b| {
            b.iter(|| {
                flip = !flip;
                t1.update(black_box(&ids), if flip { &new } else { &old })
                    .unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_gather);
criterion_main!(benches);
