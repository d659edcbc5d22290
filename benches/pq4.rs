//! 4-bit PQ fast-scan scoring of contiguous runs (`lshk::pq4`), one thread.
//!
//! Rows of d = 128 encoded with M = 64 sub-quantisers (`dim / 2`: 32 bytes
//! of codes per row) or M = 32 (`dim / 4`: 16 bytes). The codes are random
//! nibbles and the tables come from random floats (the kernels' speed does
//! not depend on the values). Regimes, by the M = 64 footprint: 256 rows
//! (8 KiB: L1), 16,384 rows (512 KiB: L2-resident on Zen 4's 1 MiB L2),
//! 400,000 rows (12.8 MB: L3) and 2,000,000 rows (64 MB: DRAM, twice the
//! 32 MiB L3). Each iteration scores the whole run once. Throughput is in
//! rows/s (ns per row = 1e9 / rate).
//!
//! Groups:
//! * `pq4_acc_m64`: the u32 accumulators, every kernel variant (each tier,
//!   and on CPUs with AVX-512 VBMI and VNNI both AVX-512 flavours: the
//!   `vpshufb` one as `avx512`, the `vpermb` + `vpdpbusd` one as
//!   `avx512vbmi`, which the AVX-512 tier runs there).
//! * `pq4_score_m64`: the f32 scores (`f32(acc) * Delta + O + bias`), every
//!   variant, and beside them the int8 alternative at the same row count:
//!   `qscore_u8i8/<best variant>` (`lshk::qdot`, 128 bytes per row, so 4x
//!   the footprint: its "L3" run of 51 MB is in DRAM).
//! * `pq4_score_m32`: the f32 scores with M = 32, every variant.
//! * `pq4_ivf_runs`: the IVF probe's pattern: 400,000 rows as 2,500 runs
//!   of 160 rows in shuffled order, one `score_run` call per run, each
//!   pushed into one `matmul::TopK` (k = 100); beside it the same with `qdot`.
//! * `pq4_lut`: building a query's tables (`Pq4Lut::set`, M = 64 and 32).
//!
//! With `LSHK_BENCH_CPU_TIME=1` the figures are the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) instead of wall time (see `benches/qdot.rs`).

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{BenchmarkId, Criterion, Throughput};
use lshk::kernels::pq4::{supported_variants, Epilogue, Kernels};
use lshk::matmul::TopK;
use lshk::pq4::{pack_codes, run_bytes, Codebook, Pq4Lut, KSUB};
use lshk::qdot::{self, QQuery, QRows};
use lshk::rng::SplitMix64;
use lshk::Isa;

const DIM: usize = 128;
const REGIMES: [(usize, &str); 4] = [
    (256, "256_rows_L1"),
    (16_384, "16k_rows_L2"),
    (400_000, "400k_rows_L3"),
    (2_000_000, "2M_rows_DRAM"),
];
const MAX_ROWS: usize = 2_000_000;

/// Every kernel variant this CPU runs (the tiers' tables and, on AVX-512
/// CPUs with VBMI and VNNI, the plain AVX-512 flavour too).
fn variants() -> Vec<&'static Kernels> {
    let t: Vec<Isa> = Isa::supported().collect();
    for i in Isa::ALL {
        if !t.contains(&i) {
            println!("skipped: {} tier (CPU lacks it)", i.name());
        }
    }
    supported_variants().into_iter().map(|(_, k)| k).collect()
}

/// `rows` rows of `m` random codes, packed in the kernels' layout.
fn random_rows(rng: &mut SplitMix64, rows: usize, m: usize) -> Vec<u8> {
    let codes: Vec<u8> = (0..rows * m).map(|_| rng.below(16) as u8).collect();
    let mut packed = vec![0u8; run_bytes(m, rows).unwrap()];
    pack_codes(&codes, rows, m, &mut packed).unwrap();
    packed
}

/// Row `r`'s block offset in a packed run (`r` a multiple of 32).
fn at(m: usize, r: usize) -> usize {
    run_bytes(m, r).unwrap()
}

/// The f32 epilogue of `lut`, with `bias`.
fn epi<'a>(lut: &Pq4Lut, bias: &'a [f32]) -> Epilogue<'a> {
    Epilogue {
        delta: lut.delta(),
        offset: lut.offset(),
        bias: Some(bias),
    }
}

fn random_lut(rng: &mut SplitMix64, m: usize) -> Pq4Lut {
    let t: Vec<f64> = (0..KSUB * m).map(|_| rng.next_normal()).collect();
    let mut l = Pq4Lut::new(m).unwrap();
    l.set_tables(&t).unwrap();
    l
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let mut rng = SplitMix64::new(13);
    let variants = variants();
    let rows64 = random_rows(&mut rng, MAX_ROWS, 64);
    let rows32 = random_rows(&mut rng, MAX_ROWS, 32);
    let lut64 = random_lut(&mut rng, 64);
    let lut32 = random_lut(&mut rng, 32);
    let bias: Vec<f32> = (0..MAX_ROWS)
        .map(|_| rng.next_normal() as f32 * 0.05)
        .collect();
    let mut out_u = vec![0u32; MAX_ROWS];
    let mut out_f = vec![0f32; MAX_ROWS];

    let mut g = c.benchmark_group("pq4_acc_m64");
    g.sample_size(10);
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        for &k in &variants {
            g.bench_function(BenchmarkId::new(k.name, label), |b| {
                b.iter(|| {
                    // SAFETY: the packed run holds `rows` rows of M = 64,
                    // the table 16 * 64 bytes, `out_u` `rows` slots; the
                    // variant runs on this CPU.
                    unsafe { (k.acc)(&rows64, 64, rows, black_box(lut64.bytes()), &mut out_u) };
                    black_box(&out_u);
                })
            });
        }
    }
    g.finish();

    // The int8 alternative: random codes in -127..=127, d = 128.
    let qcodes: Vec<i8> = (0..MAX_ROWS * DIM)
        .map(|_| (rng.below(255) as i32 - 127) as i8)
        .collect();
    let scales: Vec<f32> = (0..MAX_ROWS).map(|_| 0.01).collect();
    let qr = QRows::from_parts(MAX_ROWS, DIM, &qcodes, &scales).unwrap();
    drop(qcodes);
    let q: Vec<f32> = (0..DIM).map(|_| rng.next_normal() as f32).collect();
    let mut qq = QQuery::new(qr.dim_pad()).unwrap();
    qq.set(&q).unwrap();
    let qv = qdot::Variant::active();

    let mut g = c.benchmark_group("pq4_score_m64");
    g.sample_size(10);
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        for &k in &variants {
            let e = epi(&lut64, &bias);
            g.bench_function(BenchmarkId::new(k.name, label), |b| {
                b.iter(|| {
                    // SAFETY: as above; `bias` holds MAX_ROWS values.
                    unsafe {
                        (k.score)(&rows64, 64, rows, black_box(lut64.bytes()), &e, &mut out_f)
                    };
                    black_box(&out_f);
                })
            });
        }
        g.bench_function(
            BenchmarkId::new(format!("qscore_u8i8/{}", qv.name()), label),
            |b| {
                b.iter(|| {
                    qr.score_run_with(qv, 0, rows, black_box(&qq), Some(&bias), &mut out_f)
                        .unwrap();
                    black_box(&out_f);
                })
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("pq4_score_m32");
    g.sample_size(10);
    for (rows, label) in REGIMES {
        g.throughput(Throughput::Elements(rows as u64));
        for &k in &variants {
            let e = epi(&lut32, &bias);
            g.bench_function(BenchmarkId::new(k.name, label), |b| {
                b.iter(|| {
                    // SAFETY: as above, M = 32.
                    unsafe {
                        (k.score)(&rows32, 32, rows, black_box(lut32.bytes()), &e, &mut out_f)
                    };
                    black_box(&out_f);
                })
            });
        }
    }
    g.finish();

    // The IVF probe's access pattern: many short runs (lists of 160 rows,
    // 5 blocks) in a shuffled order, each scored with its own call and
    // pushed into one TopK (k = 100).
    let mut g = c.benchmark_group("pq4_ivf_runs");
    g.sample_size(10);
    let run = 160;
    let rows = 400_000 / run * run;
    let mut starts: Vec<usize> = (0..rows / run).map(|i| i * run).collect();
    rng.shuffle(&mut starts);
    let mut top = TopK::new();
    g.throughput(Throughput::Elements(rows as u64));
    for &k in &variants {
        g.bench_function(
            BenchmarkId::new(k.name, "runs160_of_400k_rows+topk100"),
            |b| {
                b.iter(|| {
                    top.clear();
                    for &s in &starts {
                        let o = &mut out_f[..run];
                        let e = epi(&lut64, &bias[s..]);
                        let c = &rows64[at(64, s)..];
                        // SAFETY: as above, the run of 160 rows at `s` (a
                        // multiple of 32).
                        unsafe { (k.score)(c, 64, run, black_box(lut64.bytes()), &e, o) };
                        top.offer_run(o, s as u32, 100);
                    }
                    black_box(top.best(100).len());
                })
            },
        );
    }
    g.bench_function(
        BenchmarkId::new(
            format!("qscore_u8i8/{}", qv.name()),
            "runs160_of_400k_rows+topk100",
        ),
        |b| {
            b.iter(|| {
                top.clear();
                for &s in &starts {
                    let o = &mut out_f[..run];
                    qr.score_run_with(qv, s, run, black_box(&qq), Some(&bias[s..s + run]), o)
                        .unwrap();
                    top.offer_run(o, s as u32, 100);
                }
                black_box(top.best(100).len());
            })
        },
    );
    g.finish();

    // Per-query table construction (f64 inner products with the 16
    // centroids of each sub-space, then the byte quantisation).
    let mut g = c.benchmark_group("pq4_lut");
    g.sample_size(10);
    let train: Vec<f32> = (0..4096 * DIM).map(|_| rng.next_normal() as f32).collect();
    for m in [64usize, 32] {
        let cb = Codebook::from_centroids(DIM, m, &train[..KSUB * DIM]).unwrap();
        let mut lut = Pq4Lut::new(m).unwrap();
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("set", format!("m{m}")), |b| {
            b.iter(|| {
                lut.set(&cb, black_box(&q)).unwrap();
                black_box(lut.delta());
            })
        });
    }
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
