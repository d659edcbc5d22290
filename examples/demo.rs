//! The main job until the LSH index exists: a SimHash demo.
//!
//! `cargo run --release --example demo`
//!
//! Builds SimHash families with d = 128, K = 8, L = 64 (512 hyperplanes),
//! dense Gaussian and sparse ±1 (s = 3, as in SLIDE), hashes a batch of
//! random rows on every tier this CPU has, and prints per tier: rows/s and
//! codes/s (one code = K bits of one table) for a batch of 1024 rows, the
//! latency of a single query, and whether the codes match the scalar tier
//! (a bit may differ only when its projection lies within rounding of zero;
//! such bits are counted as excused). Tiers the CPU lacks are reported as
//! skipped. Set `LSHK_MAX_ISA` to see what the dispatcher picks by default.
//!
//! Timings are wall-clock best-of-several on a shared machine: compare the
//! tiers of one run with each other, not with another machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lshk::rng::SplitMix64;
use lshk::{Isa, SimHash};

const DIM: usize = 128;
const K: u32 = 8;
const L: u32 = 64;
const BATCH: usize = 1024;

/// Best time per call of `f`, over repeats for about `budget`.
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> Duration {
    f(); // warm up (thread-local scratch, caches)
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut calls = 0u32;
    while start.elapsed() < budget || calls < 3 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        calls += 1;
    }
    best
}

/// Number of bits where `codes` differ from `oracle`, split into bits whose
/// projection is within rounding of zero (excused) and the others (wrong).
/// Bound: two independently rounded sums of `dim` products differ by at most
/// 2 * dim * 2^-24 * sum_j |x_j * p_j|.
fn compare(h: &SimHash, x: &[f32], n: usize, codes: &[u32], oracle: &[u32]) -> (usize, usize) {
    let (dim, k, l) = (h.dim(), h.bits() as usize, h.tables() as usize);
    let planes = h.planes();
    let (mut excused, mut wrong) = (0, 0);
    for i in 0..n {
        for t in 0..l {
            let diff = codes[i * l + t] ^ oracle[i * l + t];
            if diff == 0 {
                continue;
            }
            for b in 0..32 {
                if diff >> b & 1 == 0 {
                    continue;
                }
                if b >= k {
                    wrong += 1;
                    continue;
                }
                let p = &planes[(t * k + b) * dim..(t * k + b + 1) * dim];
                let row = &x[i * dim..(i + 1) * dim];
                let dot: f64 = row.iter().zip(p).map(|(a, b)| *a as f64 * *b as f64).sum();
                let scale: f64 = row.iter().zip(p).map(|(a, b)| (*a * *b).abs() as f64).sum();
                if dot.abs() <= 2.0 * dim as f64 * f64::from(f32::EPSILON) / 2.0 * scale {
                    excused += 1;
                } else {
                    wrong += 1;
                }
            }
        }
    }
    (excused, wrong)
}

fn main() {
    println!(
        "lshk {} SimHash demo: dim {DIM}, K {K}, L {L} ({} planes), batch {BATCH}",
        env!("CARGO_PKG_VERSION"),
        K * L
    );
    println!(
        "CPU tier: {}, active tier (after LSHK_MAX_ISA): {}",
        lshk::isa::detected().name(),
        lshk::isa::active().name()
    );
    if cfg!(debug_assertions) {
        println!("note: debug build; use `cargo run --release --example demo` for real numbers");
    }

    let mut rng = SplitMix64::new(2024);
    let x: Vec<f32> = (0..BATCH * DIM).map(|_| rng.next_normal() as f32).collect();
    let budget = Duration::from_millis(400);
    let mut all_match = true;

    for (label, sparsity) in [("dense Gaussian", 0u32), ("sparse ±1, s = 3", 3)] {
        let h = SimHash::new(DIM, K, L, sparsity, 42).expect("valid shape");
        println!("\n{label} planes:");
        println!(
            "  {:<9} {:>12} {:>14} {:>13} {:>9}  codes vs scalar",
            "tier", "rows/s", "codes/s", "µs/query B=1", "speedup"
        );
        let mut oracle = vec![0u32; BATCH * L as usize];
        h.hash_isa(Isa::Scalar, &x, BATCH, DIM, &mut oracle)
            .expect("scalar tier always runs");
        let mut scalar_rows_per_s = 0.0;
        for tier in Isa::ALL {
            if lshk::isa::check_supported(tier).is_err() {
                let why = match tier {
                    Isa::Avx512 => "CPU lacks avx512f/bw/dq/vl",
                    Isa::Avx2 => "CPU lacks avx2/fma",
                    _ => "not available",
                };
                println!("  {:<9} skipped: {why}", tier.name());
                continue;
            }
            let mut codes = vec![0u32; BATCH * L as usize];
            let batch_time = time_per_call(budget, || {
                h.hash_isa(tier, black_box(&x), BATCH, DIM, black_box(&mut codes))
                    .unwrap()
            });
            let mut one = vec![0u32; L as usize];
            let single = time_per_call(budget / 2, || {
                h.hash_isa(tier, black_box(&x[..DIM]), 1, DIM, black_box(&mut one))
                    .unwrap()
            });
            let rows_per_s = BATCH as f64 / batch_time.as_secs_f64();
            if tier == Isa::Scalar {
                scalar_rows_per_s = rows_per_s;
            }
            let (excused, wrong) = compare(&h, &x, BATCH, &codes, &oracle);
            all_match &= wrong == 0;
            let verdict = if wrong == 0 {
                format!("match ({excused} near-zero bits excused)")
            } else {
                format!("MISMATCH: {wrong} bits wrong, {excused} near-zero bits excused")
            };
            println!(
                "  {:<9} {:>12.3e} {:>14.3e} {:>13.3} {:>8.1}x  {verdict}",
                tier.name(),
                rows_per_s,
                rows_per_s * L as f64,
                single.as_secs_f64() * 1e6,
                rows_per_s / scalar_rows_per_s,
            );
        }
    }
    if !all_match {
        eprintln!("\nsome tier disagrees with the scalar oracle beyond rounding: this is a bug");
        std::process::exit(1);
    }
}
