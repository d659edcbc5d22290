//! Backward (training) kernels beside the forward gathered matmul on the
//! same rows, in the same run (criterion, one thread unless named).
//!
//! Two regimes, f32 W of 128 columns, candidates drawn uniformly (sorted
//! per sample, like a bucket gather):
//! * `l3`: 16,384 rows (W 8 MiB; with Adam's m and v 24 MiB, inside the
//!   32 MiB L3), B = 8 samples x k = 512 candidates;
//! * `dram`: the W1 shape, 670,091 rows (W 343 MB, Adam's state 686 MB),
//!   B = 64 x k = 1024; 8 id sets are cycled so that each cycle touches
//!   > 128 MB of distinct rows (4x the L3): every row fetch is a DRAM access.
//!
//! Groups, `BenchmarkId(tier, regime)`, throughput in candidate positions
//! (rows gathered; ns per row = 1e9 / rate):
//! * `forward`: `WeightMatrix::matmul_isa` (the forward gathered matmul,
//!   the baseline of issue 14's "backward <= 1.25x the forward per row");
//! * `dq`: `train::gather_dq` (f32 rows);
//! * `sgd`, `adam`: `train::rows_update_sgd`, `Adam::step` (grouping by
//!   row, the per-row gradient sums and the update; `sgd_2t`/`adam_2t` with
//!   2 threads);
//! * `xent`: `train::softmax_xent` over the batch's logits;
//! * `sort_only`: `sort_unstable` of the `row << 32 | position` keys alone
//!   (what the grouping did before its counting sort; for comparison);
//! * `touch`: the memory floor of the two kinds of pass, AVX2, with the
//!   kernels' prefetch distance: `read` loads every row once (what the
//!   forward must fetch), `rw` loads and stores it back (what any in-place
//!   row update must move; `w + z` with `z` a zero the compiler cannot
//!   see); on the batch's distinct rows in ascending order (`read`, `rw`:
//!   what the grouped Adam walks) or on every position in batch order
//!   (`read_batch`, `rw_batch`: what the forward and SGD walk). The ratio
//!   `rw` / `read` is the smallest update / forward ratio a kernel that
//!   reads and writes W in place can reach, whatever it computes. `rw3`
//!   does `rw` on three arrays of W's shape at once (W and Adam's `m` and
//!   `v`): the least any Adam with per-element f32 moments must move.
//!
//! `LSHK_BENCH_TRAIN=l3` or `=dram` runs one regime only.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::matmul::{WeightMatrix, Weights};
use lshk::rng::SplitMix64;
use lshk::train::{self, Adam, AdamParams, Batch, DqWeights};
use lshk::Isa;

const DIM: usize = 128;

struct Regime {
    name: &'static str,
    rows: usize,
    b: usize,
    k: usize,
    sets: usize,
}

const REGIMES: [Regime; 2] = [
    Regime {
        name: "l3",
        rows: 16_384,
        b: 8,
        k: 512,
        sets: 1,
    },
    Regime {
        name: "dram",
        rows: 670_091,
        b: 64,
        k: 1024,
        sets: 8,
    },
];

fn uniform(rng: &mut SplitMix64) -> f32 {
    (rng.next_f64_open() * 2.0 - 1.0) as f32
}

fn tiers() -> Vec<Isa> {
    let t: Vec<Isa> = Isa::supported().collect();
    for i in Isa::ALL {
        if !t.contains(&i) {
            println!("skipped: {} tier (CPU lacks it)", i.name());
        }
    }
    t
}

struct Data {
    w: Vec<f32>,
    q: Vec<f32>,
    ids: Vec<Vec<u32>>,
    offsets: Vec<usize>,
    logits: Vec<f32>,
    targets: Vec<f32>,
    grad: Vec<f32>,
}

fn data(r: &Regime) -> Data {
    let mut rng = SplitMix64::new(r.rows as u64);
    let w: Vec<f32> = (0..r.rows * DIM)
        .map(|_| 0.05 * uniform(&mut rng))
        .collect();
    let q: Vec<f32> = (0..r.b * DIM).map(|_| uniform(&mut rng)).collect();
    let n = r.b * r.k;
    let ids = (0..r.sets)
        .map(|_| {
            let mut v = Vec::with_capacity(n);
            for _ in 0..r.b {
                let mut s: Vec<u32> = (0..r.k).map(|_| rng.below(r.rows as u64) as u32).collect();
                s.sort_unstable();
                v.extend(s);
            }
            v
        })
        .collect();
    let offsets: Vec<usize> = (0..=r.b).map(|i| i * r.k).collect();
    let logits: Vec<f32> = (0..n).map(|_| 4.0 * uniform(&mut rng)).collect();
    let targets: Vec<f32> = (0..n)
        .map(|j| if j % r.k == 0 { 1.0 } else { 0.0 })
        .collect();
    let mut grad = vec![0f32; n];
    let mut loss = vec![0f32; r.b];
    train::softmax_xent(
        Isa::Scalar,
        1,
        &logits,
        &targets,
        &offsets,
        &mut loss,
        &mut grad,
    )
    .unwrap();
    Data {
        w,
        q,
        ids,
        offsets,
        logits,
        targets,
        grad,
    }
}

fn bench(c: &mut Criterion) {
    let tiers = tiers();
    let only = std::env::var("LSHK_BENCH_TRAIN").ok();
    for r in REGIMES
        .iter()
        .filter(|r| only.as_deref().is_none_or(|o| o == r.name))
    {
        let mut d = data(r);
        let n = r.b * r.k;
        // Each id set's distinct rows, ascending (what the grouped updates
        // walk; `touch`'s `read`, `rw` and `rw3` walk them too).
        let sets: Vec<Vec<u32>> = d
            .ids
            .iter()
            .map(|v| {
                let mut s = v.clone();
                s.sort_unstable();
                s.dedup();
                s
            })
            .collect();
        let distinct = sets.iter().map(Vec::len).sum::<usize>() / r.sets;
        println!(
            "regime {}: {} rows x {DIM} f32, B = {} x k = {}, {n} positions, {distinct} distinct rows per batch, {} id sets",
            r.name, r.rows, r.b, r.k, r.sets
        );
        let cfg = |g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>| {
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_millis(2000))
                .throughput(Throughput::Elements(n as u64));
        };
        let mut out = vec![0f32; n];
        let mut dq = vec![0f32; r.b * DIM];
        {
            let mut g = c.benchmark_group("forward");
            cfg(&mut g);
            let m = WeightMatrix::new(Weights::F32(&d.w), r.rows, DIM, DIM).unwrap();
            for &t in &tiers {
                let mut s = 0;
                g.bench_with_input(BenchmarkId::new(t.name(), r.name), &(), |bch, _| {
                    bch.iter(|| {
                        s = (s + 1) % r.sets;
                        m.matmul_isa(
                            t,
                            black_box(&d.q),
                            r.b,
                            DIM,
                            &d.ids[s],
                            &d.offsets,
                            &mut out,
                        )
                        .unwrap();
                        black_box(&out);
                    })
                });
            }
            g.finish();
        }
        {
            let mut g = c.benchmark_group("dq");
            cfg(&mut g);
            for &t in &tiers {
                let mut s = 0;
                g.bench_with_input(BenchmarkId::new(t.name(), r.name), &(), |bch, _| {
                    bch.iter(|| {
                        s = (s + 1) % r.sets;
                        train::gather_dq(
                            t,
                            1,
                            DqWeights::F32(&d.w),
                            r.rows,
                            DIM,
                            DIM,
                            black_box(&d.grad),
                            &d.ids[s],
                            &d.offsets,
                            &mut dq,
                            DIM,
                        )
                        .unwrap();
                        black_box(&dq);
                    })
                });
            }
            g.finish();
        }
        {
            let mut g = c.benchmark_group("sgd");
            cfg(&mut g);
            for (label, threads) in [("", 1usize), ("_2t", 2)] {
                for &t in &tiers {
                    if threads > 1 && t != *tiers.last().unwrap() {
                        continue;
                    }
                    let mut s = 0;
                    let id = BenchmarkId::new(format!("{}{label}", t.name()), r.name);
                    g.bench_with_input(id, &(), |bch, _| {
                        bch.iter(|| {
                            s = (s + 1) % r.sets;
                            let b = Batch {
                                q: black_box(&d.q),
                                q_stride: DIM,
                                ids: &d.ids[s],
                                offsets: &d.offsets,
                                grad: &d.grad,
                            };
                            train::rows_update_sgd(
                                t, threads, &mut d.w, r.rows, DIM, DIM, &b, 1e-6,
                            )
                            .unwrap();
                            black_box(&d.w);
                        })
                    });
                }
            }
            g.finish();
        }
        {
            let mut g = c.benchmark_group("adam");
            cfg(&mut g);
            let p = AdamParams {
                lr: 1e-6,
                ..AdamParams::default()
            };
            let mut adam = Adam::new(r.rows, DIM, p).unwrap();
            for (label, threads) in [("", 1usize), ("_2t", 2)] {
                for &t in &tiers {
                    if threads > 1 && t != *tiers.last().unwrap() {
                        continue;
                    }
                    let mut s = 0;
                    let id = BenchmarkId::new(format!("{}{label}", t.name()), r.name);
                    g.bench_with_input(id, &(), |bch, _| {
                        bch.iter(|| {
                            s = (s + 1) % r.sets;
                            let b = Batch {
                                q: black_box(&d.q),
                                q_stride: DIM,
                                ids: &d.ids[s],
                                offsets: &d.offsets,
                                grad: &d.grad,
                            };
                            adam.step(t, threads, &mut d.w, DIM, &b).unwrap();
                            black_box(&d.w);
                        })
                    });
                }
            }
            g.finish();
        }
        {
            let mut g = c.benchmark_group("xent");
            cfg(&mut g);
            let mut loss = vec![0f32; r.b];
            for &t in &tiers {
                g.bench_with_input(BenchmarkId::new(t.name(), r.name), &(), |bch, _| {
                    bch.iter(|| {
                        train::softmax_xent(
                            t,
                            1,
                            black_box(&d.logits),
                            &d.targets,
                            &d.offsets,
                            &mut loss,
                            &mut out,
                        )
                        .unwrap();
                        black_box(&out);
                    })
                });
            }
            g.finish();
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut g = c.benchmark_group("touch");
            cfg(&mut g);
            // Adam's moments: two more arrays of W's shape.
            let mut m = vec![0f32; d.w.len()];
            let mut v = vec![0f32; d.w.len()];
            for (name, write, batch_order, arrays) in [
                ("read", false, false, 1),
                ("rw", true, false, 1),
                ("read_batch", false, true, 1),
                ("rw_batch", true, true, 1),
                ("rw3", true, false, 3),
            ] {
                let mut s = 0;
                g.bench_with_input(BenchmarkId::new(name, r.name), &(), |bch, _| {
                    bch.iter(|| {
                        s = (s + 1) % r.sets;
                        let rows = if batch_order { &d.ids[s] } else { &sets[s] };
                        let mut all = [&mut d.w[..], &mut m[..], &mut v[..]];
                        let z = black_box(0.0);
                        // SAFETY: AVX2 detected; the rows are < r.rows.
                        let x = unsafe { touch(&mut all[..arrays], rows, DIM, write, z) };
                        black_box(x);
                    })
                });
            }
            g.finish();
        }
        {
            let mut g = c.benchmark_group("sort_only");
            cfg(&mut g);
            let mut keys = vec![0u64; n];
            let mut s = 0;
            g.bench_with_input(BenchmarkId::new("sort_unstable", r.name), &(), |bch, _| {
                bch.iter(|| {
                    s = (s + 1) % r.sets;
                    for (j, (k, &id)) in keys.iter_mut().zip(&d.ids[s]).enumerate() {
                        *k = ((id as u64) << 32) | j as u64;
                    }
                    keys.sort_unstable();
                    black_box(&keys);
                })
            });
            g.finish();
        }
    }
}

/// `touch` (see the module docs): the sum of every row of `rows` in every
/// array of `ws` (`write` false; four accumulators, so the adds do not
/// chain) or every such row rewritten as `w + z` (`write` true),
/// prefetching the row `PREFETCH_ROWS` ahead as the kernels do.
///
/// # Safety
/// AVX2; `dim` a multiple of 8 (rows inside the arrays: asserted).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn touch(ws: &mut [&mut [f32]], rows: &[u32], dim: usize, write: bool, z: f32) -> f32 {
    use lshk::kernels::matmul::PREFETCH_ROWS;
    use std::arch::x86_64::*;
    assert!(dim.is_multiple_of(8));
    for w in ws.iter() {
        assert!(rows.iter().all(|&r| (r as usize + 1) * dim <= w.len()));
    }
    // SAFETY: every row is inside every array (asserted); prefetches never
    // fault.
    unsafe {
        let zv = _mm256_set1_ps(z);
        let mut acc = [_mm256_setzero_ps(); 4];
        for (i, &r) in rows.iter().enumerate() {
            for w in ws.iter_mut() {
                let wp = w.as_mut_ptr();
                if let Some(&rn) = rows.get(i + PREFETCH_ROWS) {
                    let pn = wp.wrapping_add(rn as usize * dim).cast::<i8>();
                    for off in (0..dim * 4).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(pn.wrapping_add(off));
                    }
                }
                let p = wp.add(r as usize * dim);
                if write {
                    for k in (0..dim).step_by(8) {
                        _mm256_storeu_ps(p.add(k), _mm256_add_ps(_mm256_loadu_ps(p.add(k)), zv));
                    }
                } else {
                    for k in (0..dim).step_by(8) {
                        let a = &mut acc[k / 8 % 4];
                        *a = _mm256_add_ps(*a, _mm256_loadu_ps(p.add(k)));
                    }
                }
            }
        }
        let mut a = [0f32; 8];
        let s01 = _mm256_add_ps(acc[0], acc[1]);
        let s23 = _mm256_add_ps(acc[2], acc[3]);
        _mm256_storeu_ps(a.as_mut_ptr(), _mm256_add_ps(s01, s23));
        a.iter().sum()
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
