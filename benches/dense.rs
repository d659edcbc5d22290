//! The exact dense layer (`lshk::dense`): logits of every row + exact top-10,
//! per tier, against OpenBLAS sgemv / sgemm followed by the same top-k
//! (`lshk::matmul::topk`) — the peer a user would pick.
//!
//! Sizes: W = 65,536 x 128 (32 MiB, about the L3 size) and the W1 shape
//! 670,091 x 128 (327 MiB: DRAM), B = 1 and B = 64 queries per call.
//! Throughput is in logits (rows x queries) per second. The scalar tier
//! runs everywhere except W1 at B = 64 (seconds per iteration).
//!
//! Group `kmeans_assign`: the IVF build's assignment step, the four best
//! of the W1 build's 3,274 centroids (129 floats: `[w, b]`) for a block of
//! 2,048 points, per tier: `lshk::centroid` (the GEMM-shaped kernel the
//! build uses) beside `dense_topk4`, the dense top-k with `k = 4` that the
//! build used before, on the same tier. Throughput in point x centroid
//! scores per second. The scalar tier runs on 64 points only (`f32::mul_add`
//! is a libm call without FMA in the baseline).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::dense::DenseLayer;
use lshk::rng::SplitMix64;
use lshk::Isa;

#[path = "common/openblas.rs"]
mod openblas;

const DIM: usize = 128;
const K: usize = 10;

fn bench(c: &mut Criterion) {
    let blas = openblas::OpenBlas::load();
    if blas.is_none() {
        println!("OpenBLAS peer skipped: libopenblas not found");
    }
    let mut g = c.benchmark_group("dense_topk");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    let mut r = SplitMix64::new(3);
    let max_rows = 670_091;
    let w: Vec<f32> = (0..max_rows * DIM)
        .map(|_| r.next_normal() as f32 * 0.09)
        .collect();
    let bias: Vec<f32> = (0..max_rows)
        .map(|_| r.next_normal() as f32 * 0.05)
        .collect();
    let q: Vec<f32> = (0..64 * DIM).map(|_| r.next_normal() as f32).collect();
    let mut logits = vec![0f32; 64 * max_rows];
    for rows in [65_536usize, max_rows] {
        let layer = DenseLayer::new(&w, rows, DIM, DIM, Some(&bias)).unwrap();
        for b in [1usize, 64] {
            let label = format!("{rows}x{DIM}/B{b}");
            g.throughput(Throughput::Elements((rows * b) as u64));
            let (mut ids, mut sc) = (vec![0u32; b * K], vec![0f32; b * K]);
            for tier in Isa::ALL {
                if lshk::isa::check_supported(tier).is_err() {
                    println!("skipped: {} tier (CPU lacks it)", tier.name());
                    continue;
                }
                if tier == Isa::Scalar && rows == max_rows && b == 64 {
                    continue;
                }
                g.bench_with_input(BenchmarkId::new(tier.name(), &label), &b, |bch, &b| {
                    bch.iter(|| {
                        layer
                            .topk_isa(tier, black_box(&q), b, DIM, K, &mut ids, &mut sc)
                            .unwrap();
                        black_box(&ids);
                    })
                });
            }
            if let Some(blas) = &blas {
                let name = if b == 1 {
                    "openblas_sgemv+topk"
                } else {
                    "openblas_sgemm+topk"
                };
                let offsets: Vec<usize> = (0..=b).map(|i| i * rows).collect();
                g.bench_with_input(BenchmarkId::new(name, &label), &b, |bch, &b| {
                    bch.iter(|| {
                        let out = &mut logits[..b * rows];
                        if b == 1 {
                            blas.sgemv(rows, DIM, &w, black_box(&q), out);
                        } else {
                            blas.sgemm_nt(b, rows, DIM, black_box(&q), &w, out);
                        }
                        for o in out.chunks_exact_mut(rows) {
                            o.iter_mut().zip(&bias).for_each(|(v, b)| *v += b);
                        }
                        lshk::matmul::topk(out, None, &offsets, K, &mut ids, &mut sc).unwrap();
                        black_box(&ids);
                    })
                });
            }
        }
    }
    g.finish();
}

fn bench_assign(c: &mut Criterion) {
    let mut g = c.benchmark_group("kmeans_assign");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    let (nlist, xdim) = (3274usize, DIM + 1);
    let mut r = SplitMix64::new(5);
    let cent: Vec<f32> = (0..nlist * xdim)
        .map(|_| r.next_normal() as f32 * 0.09)
        .collect();
    let x: Vec<f32> = (0..2048 * xdim)
        .map(|_| r.next_normal() as f32 * 0.09)
        .collect();
    let half: Vec<f32> = (0..nlist)
        .map(|i| {
            let v = &cent[i * xdim..(i + 1) * xdim];
            -(v.iter().map(|&a| f64::from(a) * f64::from(a)).sum::<f64>() / 2.0) as f32
        })
        .collect();
    let panels = lshk::centroid::Panels::pack(&cent, &half, nlist, xdim).unwrap();
    let layer = DenseLayer::new(&cent, nlist, xdim, xdim, Some(&half)).unwrap();
    for n in [64usize, 2048] {
        let label = format!("{n}x{nlist}x{xdim}");
        g.throughput(Throughput::Elements((n * nlist) as u64));
        let (mut ids, mut sc) = (vec![0u32; n * 4], vec![0f32; n * 4]);
        for tier in Isa::ALL {
            if lshk::isa::check_supported(tier).is_err() {
                println!("skipped: {} tier (CPU lacks it)", tier.name());
                continue;
            }
            if tier == Isa::Scalar && n > 64 {
                continue;
            }
            g.bench_with_input(BenchmarkId::new(tier.name(), &label), &n, |bch, &n| {
                bch.iter(|| {
                    panels
                        .top4_isa(tier, black_box(&x), n, xdim, &mut sc, &mut ids)
                        .unwrap();
                    black_box(&ids);
                })
            });
            let name = format!("dense_topk4_{}", tier.name());
            g.bench_with_input(BenchmarkId::new(name, &label), &n, |bch, &n| {
                bch.iter(|| {
                    layer
                        .topk_isa(tier, black_box(&x), n, xdim, 4, &mut ids, &mut sc)
                        .unwrap();
                    black_box(&ids);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench, bench_assign);
criterion_main!(benches);
