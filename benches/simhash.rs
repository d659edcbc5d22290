//! SimHash throughput per tier, with the scalar tier and the peer a user
//! would write instead (OpenBLAS sgemm + sign packing, one thread) measured
//! in the same process, and the single-core sgemm peak for reference.
//!
//! Workloads (issue 2): d = 128, K = 8, L = 64 (512 planes), batch B in
//! {1, 64, 1024}, dense Gaussian and sparse ±1 (s = 3) planes; d = 4096
//! with 256 planes (K = 8, L = 32). Planes are L2-resident (256 KiB for
//! d = 128; 4 MiB for d = 4096, which is L3 here).
//!
//! Run: `cargo bench --bench simhash` (set LSHK_BENCH_QUICK=1 for a short run).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::{Isa, SimHash};

#[path = "common/openblas.rs"]
mod openblas;

fn rows(n: usize, d: usize, seed: u64) -> Vec<f32> {
    let mut r = lshk::rng::SplitMix64::new(seed);
    (0..n * d).map(|_| r.next_normal() as f32).collect()
}

/// "sgemm + sign": projections with OpenBLAS, then the K-bit codes packed
/// from the signs (what a user would write around BLAS).
#[allow(clippy::too_many_arguments)]
fn sgemm_sign(
    blas: &openblas::OpenBlas,
    planes: &[f32],
    x: &[f32],
    b: usize,
    d: usize,
    k: usize,
    l: usize,
    y: &mut [f32],
    codes: &mut [u32],
) {
    let np = k * l;
    blas.sgemm_nt(b, np, d, x, planes, y);
    for i in 0..b {
        for t in 0..l {
            let mut c = 0u32;
            for bit in 0..k {
                c |= ((y[i * np + t * k + bit] > 0.0) as u32) << bit;
            }
            codes[i * l + t] = c;
        }
    }
}

fn bench(c: &mut Criterion) {
    let quick = std::env::var_os("LSHK_BENCH_QUICK").is_some();
    let blas = openblas::OpenBlas::load();
    match &blas {
        Some(b) => println!(
            "OpenBLAS (OPENBLAS_CORETYPE={}): single-core sgemm peak {:.1} GFLOP/s (1024^3, best of 5)",
            b.coretype,
            b.peak_gflops()
        ),
        None => println!("skipped: OpenBLAS peer (libopenblas.so.0 not found; apt-get install libopenblas0)"),
    }
    for t in Isa::ALL {
        if lshk::isa::check_supported(t).is_err() {
            println!("skipped: {} tier (CPU lacks it)", t.name());
        }
    }
    let workloads: &[(usize, u32, u32, u32, &[usize])] = &[
        (128, 8, 64, 0, &[1, 64, 1024]),
        (128, 8, 64, 3, &[1, 64, 1024]),
        (4096, 8, 32, 0, &[1, 64]),
    ];
    for &(d, k, l, s, batches) in workloads {
        let h = SimHash::new(d, k, l, s, 1).unwrap();
        let np = (k * l) as usize;
        let name = format!(
            "simhash_d{d}_planes{np}_{}",
            if s == 0 {
                "dense".to_string()
            } else {
                format!("sparse_s{s}")
            }
        );
        let mut g = c.benchmark_group(&name);
        g.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(if quick { 500 } else { 1500 }))
            .sample_size(if quick { 10 } else { 20 });
        for &b in batches {
            let x = rows(b, d, 7);
            let mut codes = vec![0u32; b * l as usize];
            g.throughput(Throughput::Elements(b as u64));
            for t in Isa::supported() {
                if t == Isa::Scalar && d == 4096 && b > 1 {
                    continue; // seconds per sample: the B = 1 figure is the baseline
                }
                g.bench_with_input(BenchmarkId::new(t.name(), b), &b, |bch, &b| {
                    bch.iter(|| {
                        h.hash_isa(t, black_box(&x), b, d, black_box(&mut codes))
                            .unwrap()
                    })
                });
            }
            if let Some(blas) = &blas {
                if s == 0 {
                    let mut y = vec![0f32; b * np];
                    g.bench_with_input(
                        BenchmarkId::new("openblas_sgemm_sign", b),
                        &b,
                        |bch, &b| {
                            bch.iter(|| {
                                sgemm_sign(
                                    blas,
                                    h.planes(),
                                    black_box(&x),
                                    b,
                                    d,
                                    k as usize,
                                    l as usize,
                                    &mut y,
                                    black_box(&mut codes),
                                )
                            })
                        },
                    );
                }
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
