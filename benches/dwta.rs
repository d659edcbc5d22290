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

/// A same-machine baseline with the loop structure of SLIDE's scalar
/// `DensifiedWtaHash::getHashEasy` (re-implemented here from its published
/// algorithm, not SLIDE's code): coordinate-major, for each permutation p
/// and coordinate i, tables give the bin and the position of i in p, and a
/// branchy compare-and-update keeps each bin's running max (float values
/// start at INT_MIN as SLIDE does; no NaN/tie rules). Built from the same bin
/// map as lshk, so on NaN-free, tie-free rows it gives the same keys
/// (checked below). Dense rows only: with every coordinate present no bin is
/// empty, so there is nothing to densify.
struct SlideStyle {
    dim: usize,
    nbins: usize,
    permute: usize,
    k: usize,
    l: usize,
    log2b: u32,
    bin_of: Vec<i32>,
    pos_of: Vec<i32>,
}

impl SlideStyle {
    fn new(h: &Dwta) -> Self {
        let (dim, b) = (h.dim(), h.bin_size() as usize);
        let nbins = h.num_bins();
        let permute = (nbins * b).div_ceil(dim);
        let mut bin_of = vec![nbins as i32; permute * dim];
        let mut pos_of = vec![0i32; permute * dim];
        for (s, &c) in h.map().iter().enumerate() {
            let p = s / dim;
            bin_of[p * dim + c as usize] = (s / b) as i32;
            pos_of[p * dim + c as usize] = (s % b) as i32;
        }
        SlideStyle {
            dim,
            nbins,
            permute,
            k: h.bins_per_table() as usize,
            l: h.tables() as usize,
            log2b: h.log2_bin_size(),
            bin_of,
            pos_of,
        }
    }

    fn hash(&self, x: &[f32], n: usize, codes: &mut [u32], hashes: &mut [i32], values: &mut [f32]) {
        for i in 0..n {
            let row = &x[i * self.dim..(i + 1) * self.dim];
            hashes.fill(i32::MIN);
            values.fill(i32::MIN as f32);
            for p in 0..self.permute {
                let (bins, pos) = (
                    &self.bin_of[p * self.dim..(p + 1) * self.dim],
                    &self.pos_of[p * self.dim..(p + 1) * self.dim],
                );
                for (c, &v) in row.iter().enumerate() {
                    let b = bins[c] as usize;
                    if b < self.nbins && values[b] < v {
                        values[b] = v;
                        hashes[b] = pos[c];
                    }
                }
            }
            for t in 0..self.l {
                let mut code = 0u32;
                for kk in 0..self.k {
                    code |= (hashes[t * self.k + kk] as u32) << (kk as u32 * self.log2b);
                }
                codes[i * self.l + t] = code;
            }
        }
    }
}

fn dense(c: &mut Criterion) {
    let dim = 128;
    let h = Dwta::new(dim, 6, 50, 8, 1).unwrap();
    let mut r = SplitMix64::new(2);
    let x: Vec<f32> = (0..BATCH * dim).map(|_| r.next_normal() as f32).collect();
    let mut codes = vec![0u32; BATCH * 50];
    let slide = SlideStyle::new(&h);
    let (mut hashes, mut values) = (vec![0i32; 300], vec![0f32; 300]);
    {
        let mut want = vec![0u32; BATCH * 50];
        h.hash_dense(&x, BATCH, dim, &mut want).unwrap();
        slide.hash(&x, BATCH, &mut codes, &mut hashes, &mut values);
        assert_eq!(codes, want, "the SLIDE-style baseline disagrees with lshk");
    }
    let mut g = c.benchmark_group("dwta_dense_d128_kl300_b8");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    for rows in [1usize, BATCH] {
        g.throughput(Throughput::Elements(rows as u64));
        let mut next = 0usize;
        g.bench_with_input(
            BenchmarkId::new("slide-style-scalar", rows),
            &rows,
            |b, &rows| {
                b.iter(|| {
                    let at = if rows == 1 { next % BATCH } else { 0 };
                    next += 1;
                    slide.hash(
                        black_box(&x[at * dim..]),
                        rows,
                        black_box(&mut codes),
                        &mut hashes,
                        &mut values,
                    )
                })
            },
        );
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
