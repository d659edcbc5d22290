//! HRR binding, unbinding and projection (`lshk::hrr`), one thread.
//!
//! Batches of 64 rows, d = 1024 (the target) and d = 400, 800 (the
//! capacity experiment of `examples/hrr_xml.rs`). Every row has its own x
//! and y, so a bind is three real FFTs (two forward, one inverse) plus
//! lshk's pointwise step. Throughput is in rows/s.
//!
//! Groups (each with its baselines in the same run):
//! * `hrr_bind/<tier>/<d>`: `Hrr::bind` on each tier; beside it
//!   `hrr_bind/fft_only/<d>`: the same three realfft transforms per row
//!   with the same copies and no pointwise step (`Hrr::fft_only`), i.e.
//!   the FFT library's own time: the target is bind <= 2x this.
//! * `hrr_unbind_approx/<tier>/<d>`, `hrr_unbind_exact/<tier>/<d>`: one key
//!   row for the whole batch (the pipeline's case: two transforms per
//!   row).
//! * `hrr_project/<tier>/<d>`.
//! * `hrr_pointwise/<tier>/<d>`: the complex product alone on a spectrum
//!   of d / 2 + 1 values (the part lshk's tiers implement).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use lshk::hrr::{class_vectors, Hrr, Inverse};
use lshk::kernels::hrr as kh;
use lshk::rng::SplitMix64;
use lshk::Isa;

const ROWS: usize = 64;
const DIMS: [usize; 3] = [400, 800, 1024];

fn tiers() -> Vec<Isa> {
    let t: Vec<Isa> = Isa::supported().collect();
    for i in Isa::ALL {
        if !t.contains(&i) {
            println!("skipped: {} tier (CPU lacks it)", i.name());
        }
    }
    t
}

fn bench(c: &mut Criterion) {
    let tiers = tiers();
    let mut rng = SplitMix64::new(3);
    for d in DIMS {
        let x: Vec<f32> = (0..ROWS * d).map(|_| rng.next_normal() as f32).collect();
        let y: Vec<f32> = (0..ROWS * d).map(|_| rng.next_normal() as f32).collect();
        let mut key = vec![0.0f32; d];
        class_vectors(1, d, 0, &mut key, 1).unwrap();
        let mut out = vec![0.0f32; ROWS * d];
        let base = Hrr::new(d).unwrap();
        let mut sc = base.scratch().unwrap();

        let mut g = c.benchmark_group("hrr_bind");
        g.throughput(Throughput::Elements(ROWS as u64));
        g.bench_function(BenchmarkId::new("fft_only", d), |b| {
            b.iter(|| {
                base.fft_only(black_box(&x), black_box(&y), &mut out, &mut sc)
                    .unwrap();
                black_box(&out);
            })
        });
        for &t in &tiers {
            let h = base.with_isa(t).unwrap();
            g.bench_function(BenchmarkId::new(t.name(), d), |b| {
                b.iter(|| {
                    h.bind(black_box(&x), black_box(&y), &mut out, &mut sc)
                        .unwrap();
                    black_box(&out);
                })
            });
        }
        g.finish();

        for (name, inv) in [
            ("hrr_unbind_approx", Inverse::Approx),
            ("hrr_unbind_exact", Inverse::Exact),
        ] {
            let mut g = c.benchmark_group(name);
            g.throughput(Throughput::Elements(ROWS as u64));
            for &t in &tiers {
                let h = base.with_isa(t).unwrap();
                g.bench_function(BenchmarkId::new(t.name(), d), |b| {
                    b.iter(|| {
                        h.unbind(inv, black_box(&key), black_box(&y), &mut out, &mut sc)
                            .unwrap();
                        black_box(&out);
                    })
                });
            }
            g.finish();
        }

        let mut g = c.benchmark_group("hrr_project");
        g.throughput(Throughput::Elements(ROWS as u64));
        for &t in &tiers {
            let h = base.with_isa(t).unwrap();
            g.bench_function(BenchmarkId::new(t.name(), d), |b| {
                b.iter(|| {
                    h.project(black_box(&x), &mut out, &mut sc).unwrap();
                    black_box(&out);
                })
            });
        }
        g.finish();

        let nc = 2 * (d / 2 + 1);
        let (a, bb) = (&x[..nc], &y[..nc]);
        let mut o = vec![0.0f32; nc];
        let mut g = c.benchmark_group("hrr_pointwise");
        g.throughput(Throughput::Elements((d / 2 + 1) as u64));
        for &t in &tiers {
            let k = kh::kernels(t);
            g.bench_function(BenchmarkId::new(t.name(), d), |b| {
                b.iter(|| {
                    // SAFETY: equal even lengths; `tiers` lists only tiers
                    // this CPU supports.
                    unsafe { (k.cmul)(black_box(a), black_box(bb), 1.0 / d as f32, &mut o) };
                    black_box(&o);
                })
            });
        }
        g.finish();
    }
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    bench(&mut c);
    c.final_summary();
}
