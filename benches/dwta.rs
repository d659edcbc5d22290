//! DWTA benchmarks: the workloads of issue 3, per tier, scalar beside.
//!
//! * dense: d = 128, K = 6, L = 50 (K*L = 300 bins of B = 8), batch of 64
//!   rows (SLIDE's output-layer setting). Throughput in rows.
//! * sparse: 128 stored entries per row out of dim 135,909 (Amazon-670K's
//!   feature dim), K = 6, L = 50, B = 8, batch of 64 rows, densification
//!   included. Throughput in stored entries.
//!
//! `cargo bench --bench dwta`; one process measures every tier, so the
//! ratios are comparable even on a shared, noisy machine.
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::rng::SplitMix64;
use lshk::{Dwta, Isa};

const BATCH: usize = 64;

fn dense(c: &mut Criterion) {
    let dim = 128;
    let h = Dwta::new(dim, 6, 50, 8, 1).unwrap();
    let mut r = SplitMix64::new(2);
    let x: Vec<f32> = (0..BATCH * dim).map(|_| r.next_normal() as f32).collect();
    let mut codes = vec![0u32; BATCH * 50];
    let mut g = c.benchmark_group("dwta_dense_d128_kl300_b8");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    for rows in [1usize, BATCH] {
        g.throughput(Throughput::Elements(rows as u64));
        for t in Isa::supported() {
            // One row at a time cycles through the 64 rows, so no branch
            // predictor can learn a single row.
            let mut next = 0usize;
            g.bench_with_input(BenchmarkId::new(t.name(), rows), &rows, |b, &rows| {
                b.iter(|| {
                    let at = if rows == 1 { next % BATCH } else { 0 };
                    next += 1;
                    h.hash_dense_isa(
                        t,
                        black_box(&x[at * dim..]),
                        rows,
                        dim,
                        black_box(&mut codes),
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

fn sparse(c: &mut Criterion) {
    let dim = 135_909usize;
    let nnz = 128;
    let h = Dwta::new(dim, 6, 50, 8, 1).unwrap();
    let mut r = SplitMix64::new(3);
    let mut indptr = vec![0usize];
    let (mut idx, mut val) = (vec![], vec![]);
    for _ in 0..BATCH {
        let mut row: Vec<u32> = Vec::new();
        while row.len() < nnz {
            let c = r.below(dim as u64) as u32;
            if !row.contains(&c) {
                row.push(c);
            }
        }
        row.sort_unstable();
        for c in row {
            idx.push(c);
            val.push(r.next_normal() as f32);
        }
        indptr.push(idx.len());
    }
    let mut codes = vec![0u32; BATCH * 50];
    let mut g = c.benchmark_group("dwta_sparse_dim135909_nnz128_k6_l50_b8");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    for rows in [1usize, BATCH] {
        g.throughput(Throughput::Elements((rows * nnz) as u64));
        for t in Isa::supported() {
            // One row at a time cycles through the 64 rows (its indptr is
            // rebased to 0).
            let singles: Vec<[usize; 2]> = (0..BATCH).map(|_| [0, nnz]).collect();
            let mut next = 0usize;
            g.bench_with_input(BenchmarkId::new(t.name(), rows), &rows, |b, &rows| {
                b.iter(|| {
                    let (ip, at): (&[usize], usize) = if rows == 1 {
                        (&singles[next % BATCH], (next % BATCH) * nnz)
                    } else {
                        (&indptr[..], 0)
                    };
                    next += 1;
                    h.hash_sparse_isa(
                        t,
                        black_box(ip),
                        black_box(&idx[at..at + rows * nnz]),
                        black_box(&val[at..at + rows * nnz]),
                        black_box(&mut codes),
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, dense, sparse);
criterion_main!(benches);
