//! Quantised int8 scoring of contiguous rows (`lshk::qdot`), one thread.
//!
//! Rows of d = 128 (`dim_pad` 128: 128 bytes of codes per row), in four
//! regimes: 64 rows (8 KiB: L1, the compute bound), 2,048 rows (256 KiB of codes: L2-resident on Zen 3's 512 KiB
//! L2), 100,000 rows (12.8 MB: L3) and 1,000,000 rows (128 MB: DRAM). Each
//! iteration scores the whole run once, so the same rows stay in the cache
//! level of their regime. Throughput is in rows/s (ns per row = 1e9 / rate).
//!
//! Groups:
//! * `qdot_u8i8`: the i32 kernel (`sum k_j c_j`), every tier.
//! * `qscore_u8i8`: the f32 scores (`f32(I) * s * t + bias`), every tier,
//!   and beside it the baseline `dense_f32/<tier>`: the same rows in f32
//!   (4x the bytes: 1 MiB, 51 MB, 512 MB) through
//!   `DenseLayer::logits_isa` on the best tier, i.e. exact scoring by
//!   streaming full rows.
//! * `centroid_pass`: an IVF's centroid scores for 1 and 4 queries: the
//!   row-major kernel on every tier (one call per query) against the
//!   panel kernels (`QPanels`, AVX-512: the codes loaded once for up to 4
//!   queries, no horizontal sums); 3,264 rows (W1's 3,274 lists, 418 KB:
//!   L2) and 32,768 rows (4 MB: L3). One element = one (row, query).
//! * `topk`: `matmul::TopK::offer_run` (k = 100) over the scores of the run, the
//!   selection cost per row that the IVF probe adds.
//! * `ivf_runs`: the IVF probe's pattern: the 100,000 rows as 625 runs of
//!   160 rows in shuffled order, one `score_run` call per run, each pushed
//!   into one `matmul::TopK` (k = 100).
//! * `gather`: `QRows::score_rows_at` over 3,000 positions (750 shuffled
//!   groups of 4 consecutive rows of the 100,000: the IVF shape
//!   projections' pattern; their 384 KB stay L2-resident across
//!   iterations), every tier, beside one one-row `score_run` call per
//!   position.
//! * `quantize_rows`: quantising 100,000 rows of 128 floats, one thread.
//! * `select_masks`: the IVF adaptive selection's masks
//!   (`lshk::kernels::select`) on every tier: `opt_masks` over 752 and
//!   3,274 lists (w2v's and W1's), `gt_masks` over 47 and 475 rows (a
//!   w2v list, a W1 list), beside `loop16`: the loop they replaced (16
//!   lists a chunk, one compare and shift each, compiled for baseline
//!   x86-64). One element = one list or row.
//!
//! With `LSHK_BENCH_CPU_TIME=1` the figures are the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) instead of wall time: on a shared, loaded
//! machine that removes the time the thread spent descheduled (but not the
//! cache pollution from the other processes). `benches/qdot.md` gives both.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{BenchmarkId, Criterion, Throughput};
use lshk::dense::DenseLayer;
use lshk::matmul::TopK;
use lshk::qdot::{self, QQuery};
use lshk::rng::SplitMix64;
use lshk::Isa;

const DIM: usize = 128;
const REGIMES: [(usize, &str); 4] = [
    (64, "64_rows_L1"),
    (2_048, "2k_rows_L2"),
    (100_000, "100k_rows_L3"),
    (1_000_000, "1M_rows_DRAM"),
];
const MAX_ROWS: usize = 1_000_000;

fn tiers() -> Vec<Isa> {
    let t: Vec<Isa> = Isa::supported().collect();
    for i in Isa::ALL {
        if !t.contains(&i) {
            println!("skipped: {} tier (CPU lacks it)", i.name());
        }
    }
    t
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let mut rng = SplitMix64::new(11);
    let w: Vec<f32> = (0..MAX_ROWS * DIM)
        .map(|_| rng.next_normal() as f32 * 0.09)
        .collect();
    let bias: Vec<f32> = (0..MAX_ROWS)
        .map(|_| rng.next_normal() as f32 * 0.05)
        .collect();
    let q: Vec<f32> = (0..DIM).map(|_| rng.next_normal() as f32).collect();
    let qr = qdot::quantize_rows_with(&w, MAX_ROWS, DIM, DIM, None, 0).unwrap();
    let mut qq = QQuery::new(qr.dim_pad()).unwrap();
    qq.set(&q).unwrap();
    let tiers = tiers();
    let best = *tiers.last().unwrap();
    let mut out_i = vec![0i32; MAX_ROWS];
    let mut out_f = vec![0f32; MAX_ROWS];

    let mut g = c.benchmark_group("qdot_u8i8");
    g.sample_size(10);
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        for &tier in &tiers {
            let v = qdot::Variant::of(tier).unwrap();
            g.bench_function(BenchmarkId::new(v.name(), label), |b| {
                b.iter(|| {
                    qr.dot_run_with(v, 0, rows, black_box(&qq), &mut out_i)
                        .unwrap();
                    black_box(&out_i);
                })
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("qscore_u8i8");
    g.sample_size(10);
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        for &tier in &tiers {
            let v = qdot::Variant::of(tier).unwrap();
            g.bench_function(BenchmarkId::new(v.name(), label), |b| {
                b.iter(|| {
                    qr.score_run_with(v, 0, rows, black_box(&qq), Some(&bias), &mut out_f)
                        .unwrap();
                    black_box(&out_f);
                })
            });
        }
        let layer = DenseLayer::new(&w, rows, DIM, DIM, Some(&bias)).unwrap();
        g.bench_function(
            BenchmarkId::new(format!("dense_f32/{}", best.name()), label),
            |b| {
                b.iter(|| {
                    layer
                        .logits_isa(best, black_box(&q), 1, DIM, &mut out_f)
                        .unwrap();
                    black_box(&out_f);
                })
            },
        );
    }
    g.finish();

    // The IVF centroid pass: every centroid scored for 1 and 4 queries,
    // row-major on every tier (one call per query) against the panels
    // (AVX-512: one call for up to 4 queries), and the 4-bit bounds of one
    // query (AVX-512). Element = one (row, query).
    let mut g = c.benchmark_group("centroid_pass");
    g.sample_size(10);
    let qs4: Vec<QQuery> = (0..4)
        .map(|i| {
            let mut x = QQuery::new(qr.dim_pad()).unwrap();
            let qi: Vec<f32> = q.iter().map(|v| v * (1.0 + i as f32 * 0.1)).collect();
            x.set(&qi).unwrap();
            x
        })
        .collect();
    for (rows, label) in [(3_264usize, "3264_rows_L2"), (32_768, "32k_rows_L3")] {
        let cw = &w[..rows * DIM];
        let cr = qdot::quantize_rows_with(cw, rows, DIM, DIM, None, 0).unwrap();
        let cp = qdot::QPanels::new(&cr).unwrap();
        let cn = qdot::NibPanels::new(&cr, &vec![0.5; rows], &vec![0.25; rows]).unwrap();
        for nq in [1usize, 4] {
            g.throughput(Throughput::Elements((rows * nq) as u64));
            for &tier in &tiers {
                let v = qdot::Variant::of(tier).unwrap();
                g.bench_function(
                    BenchmarkId::new(format!("rowmajor_q{nq}/{}", v.name()), label),
                    |b| {
                        b.iter(|| {
                            for x in &qs4[..nq] {
                                cr.score_run_with(
                                    v,
                                    0,
                                    rows,
                                    black_box(x),
                                    None,
                                    &mut out_f[..rows],
                                )
                                .unwrap();
                                black_box(&out_f);
                            }
                        })
                    },
                );
                if nq == 1 && qdot::NibPanels::has_kernel(v) {
                    // The 4-bit bounds of every row (one query).
                    let pr = cn.padded_rows();
                    g.bench_function(
                        BenchmarkId::new(format!("nib_bounds_q1/{}", v.name()), label),
                        |b| {
                            b.iter(|| {
                                cn.bounds(v, black_box(&qs4[0]), 1.0, &mut out_f[..pr])
                                    .unwrap();
                                black_box(&out_f);
                            })
                        },
                    );
                }
                if qdot::QPanels::has_kernel(v) {
                    let refs: Vec<&QQuery> = qs4[..nq].iter().collect();
                    let pr = cp.padded_rows();
                    g.bench_function(
                        BenchmarkId::new(format!("panels_q{nq}/{}", v.name()), label),
                        |b| {
                            b.iter(|| {
                                cp.score(v, 0, pr, black_box(&refs), &mut out_f[..nq * pr], pr)
                                    .unwrap();
                                black_box(&out_f);
                            })
                        },
                    );
                }
            }
        }
    }
    g.finish();

    let mut g = c.benchmark_group("topk");
    g.sample_size(10);
    qr.score_run(0, MAX_ROWS, &qq, Some(&bias), &mut out_f)
        .unwrap();
    let mut top = TopK::new();
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        g.bench_function(BenchmarkId::new("offer_run_k100", label), |b| {
            b.iter(|| {
                top.clear();
                top.offer_run(black_box(&out_f[..rows]), 0, 100);
                black_box(top.best(100).len());
            })
        });
    }
    g.finish();

    // Gathered rows (`QRows::score_rows_at`: the shape projections' 4-row
    // groups, the two-stage codes' refine): 3,000 positions, 4 consecutive
    // rows at each of 750 shuffled groups of the 100,000 (384 KB, which
    // stay in L2 from one iteration to the next), one gather
    // call, against one one-row `score_run` call per position (what
    // `score_rows_at` did before the gather kernels). Element = one row.
    let mut g = c.benchmark_group("gather");
    g.sample_size(10);
    let mut groups: Vec<u32> = (0..100_000u32 / 4).collect();
    rng.shuffle(&mut groups);
    let pos: Vec<u32> = groups[..750]
        .iter()
        .flat_map(|&gr| (0..4).map(move |j| 4 * gr + j))
        .collect();
    g.throughput(Throughput::Elements(pos.len() as u64));
    for &tier in &tiers {
        let v = qdot::Variant::of(tier).unwrap();
        g.bench_function(BenchmarkId::new(v.name(), "gather_3000_of_100k"), |b| {
            b.iter(|| {
                qr.score_rows_at(v, black_box(&pos), &qq, None, &mut out_f[..pos.len()])
                    .unwrap();
                black_box(&out_f);
            })
        });
        g.bench_function(BenchmarkId::new(v.name(), "runs1_3000_of_100k"), |b| {
            b.iter(|| {
                for (i, &p) in pos.iter().enumerate() {
                    let p = p as usize;
                    qr.score_run_with(v, p, 1, black_box(&qq), None, &mut out_f[i..i + 1])
                        .unwrap();
                }
                black_box(&out_f);
            })
        });
    }
    g.finish();

    // The IVF probe's access pattern: many short runs (lists of 160 rows)
    // in a shuffled order, each scored with its own call and pushed into
    // one TopK (k = 100): per-call overhead and short-run efficiency.
    let mut g = c.benchmark_group("ivf_runs");
    g.sample_size(10);
    let run = 160;
    let rows = 100_000 / run * run;
    let mut starts: Vec<usize> = (0..rows / run).map(|i| i * run).collect();
    rng.shuffle(&mut starts);
    g.throughput(Throughput::Elements(rows as u64));
    for &tier in &tiers {
        let v = qdot::Variant::of(tier).unwrap();
        g.bench_function(
            BenchmarkId::new(v.name(), "runs160_of_100k_rows+topk100"),
            |b| {
                b.iter(|| {
                    top.clear();
                    for &s in &starts {
                        let o = &mut out_f[..run];
                        qr.score_run_with(v, s, run, black_box(&qq), Some(&bias[s..s + run]), o)
                            .unwrap();
                        top.offer_run(o, s as u32, 100);
                    }
                    black_box(top.best(100).len());
                })
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("select_masks");
    let es: Vec<f32> = (0..3_274).map(|_| rng.next_normal() as f32).collect();
    let sp: Vec<f32> = (0..3_274)
        .map(|_| rng.next_normal().abs() as f32 * 0.1)
        .collect();
    let mut masks = vec![0u64; 3_274usize.div_ceil(64)];
    for n in [752usize, 3_274] {
        g.throughput(Throughput::Elements(n as u64));
        for &tier in &tiers {
            let k = lshk::kernels::select::kernels(tier);
            g.bench_function(BenchmarkId::new(format!("opt_{}", tier.name()), n), |b| {
                b.iter(|| {
                    (k.opt_masks)(black_box(&es[..n]), &sp[..n], 1.5, 1.0, &mut masks);
                    black_box(&masks);
                })
            });
        }
        g.bench_function(BenchmarkId::new("opt_loop16", n), |b| {
            b.iter(|| {
                let (e, s) = (black_box(&es[..n]), &sp[..n]);
                let mut count = 0u32;
                for (cc, ss) in e.chunks(16).zip(s.chunks(16)) {
                    let mut mask = 0u32;
                    for (j, (&x, &y)) in cc.iter().zip(ss).enumerate() {
                        mask |= u32::from(x + 1.5 * y >= 1.0) << j;
                    }
                    count += mask.count_ones();
                }
                black_box(count)
            })
        });
    }
    for n in [47usize, 475] {
        g.throughput(Throughput::Elements(n as u64));
        for &tier in &tiers {
            let k = lshk::kernels::select::kernels(tier);
            g.bench_function(BenchmarkId::new(format!("gt_{}", tier.name()), n), |b| {
                b.iter(|| {
                    (k.gt_masks)(black_box(&es[..n]), 1.0, &mut masks);
                    black_box(&masks);
                })
            });
        }
        g.bench_function(BenchmarkId::new("gt_loop16", n), |b| {
            b.iter(|| {
                let mut any = 0u32;
                for c in black_box(&es[..n]).chunks(16) {
                    any += u32::from(c.iter().fold(false, |a, &x| a | (x > 1.0)));
                }
                black_box(any)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("quantize_rows");
    g.sample_size(10);
    let rows = 100_000;
    g.throughput(Throughput::Elements(rows as u64));
    g.bench_function(BenchmarkId::new("1_thread", "100k_rows"), |b| {
        b.iter(|| {
            black_box(
                qdot::quantize_rows_with(black_box(&w), rows, DIM, DIM, None, 1)
                    .unwrap()
                    .rows(),
            )
        })
    });
    g.finish();
}

/// The calling thread's CPU time, in nanoseconds.
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a
    // constant every Linux kernel supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        thread_cpu_ns() - i
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Nanoseconds, like wall time.
        WALL.formatter()
    }
}

fn main() {
    if std::env::var_os("LSHK_BENCH_CPU_TIME").is_some_and(|v| v == "1") {
        println!("measuring thread CPU time (LSHK_BENCH_CPU_TIME=1)");
        let mut c = Criterion::default()
            .with_measurement(ThreadCpu)
            .configure_from_args();
        bench(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default().configure_from_args();
        bench(&mut c);
        c.final_summary();
    }
}
