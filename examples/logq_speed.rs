//! What the logQ correction costs beside the gathered logits it corrects
//! (issue 14): `Index::inclusion_probabilities` against
//! `WeightMatrix::matmul` over the same candidates, at lns_train's shape
//! (35,388 x 128 classes, BiasAug, K 10, L 50, a batch of 128 samples with
//! 1,024 candidates each), and the parts of the probability: the f64 dot
//! products and the transcendental tail (acos, powi, ln_1p, expm1).
//!
//! Thread CPU time (CLOCK_THREAD_CPUTIME_ID), one thread, the best of
//! `--reps` (default 7) interleaved rounds, per candidate. Synthetic data:
//! needs no files. `cargo run --release --example logq_speed`.

use lshk::index::{Index, IndexParams, Storage, Transform};
use lshk::matmul::{WeightMatrix, Weights};
use lshk::rng::SplitMix64;
use lshk::train_logq::{simhash_bit_agreement, simhash_inclusion};

fn cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let mut reps = 7usize;
    let a: Vec<String> = std::env::args().skip(1).collect();
    for p in a.chunks(2) {
        if p[0] == "--reps" {
            reps = p[1].parse().expect("--reps N");
        }
    }
    let (rows, dim, nb, s) = (35_388usize, 128usize, 128usize, 1024usize);
    let mut g = SplitMix64::new(1);
    let w: Vec<f32> = (0..rows * dim)
        .map(|_| 0.1 * g.next_normal() as f32)
        .collect();
    let bias: Vec<f32> = (0..rows).map(|_| 0.1 * g.next_normal() as f32).collect();
    let q: Vec<f32> = (0..nb * dim).map(|_| g.next_normal() as f32).collect();
    let p = IndexParams {
        bits: 10,
        tables: 50,
        seed: 3,
        storage: Storage::F32,
        transform: Transform::BiasAug,
        threads: 1,
        ..IndexParams::default()
    };
    let idx = Index::build(&w, Some(&bias), rows, dim, dim, &p, None).expect("index");
    let mut ids = Vec::with_capacity(nb * s);
    let mut offsets = vec![0usize];
    for _ in 0..nb {
        let mut seg: Vec<u32> = (0..s).map(|_| g.below(rows as u64) as u32).collect();
        seg.sort_unstable();
        ids.extend_from_slice(&seg);
        offsets.push(ids.len());
    }
    let tables: Vec<u32> = (0..nb).map(|i| 1 + (i as u32 % 50)).collect();
    let n = ids.len();
    let wm = WeightMatrix::new(Weights::F32(&w), rows, dim, dim).expect("W");
    let mut logits = vec![0f32; n];
    let mut probs = vec![0f64; n];
    let cos: Vec<f64> = (0..n).map(|_| g.next_f64_open() * 2.0 - 1.0).collect();
    let mut best = [f64::INFINITY; 3];
    let mut sink = 0f64;
    for _ in 0..reps {
        let c = cpu();
        wm.matmul(&q, nb, dim, &ids, &offsets, &mut logits)
            .expect("matmul");
        best[0] = best[0].min(cpu() - c);
        let c = cpu();
        idx.inclusion_probabilities(&q, nb, dim, &ids, &offsets, Some(&tables), &mut probs)
            .expect("probabilities");
        best[1] = best[1].min(cpu() - c);
        let c = cpu();
        for (j, &cv) in cos.iter().enumerate() {
            sink += simhash_inclusion(simhash_bit_agreement(cv), 10, 1 + (j as u32 % 50));
        }
        best[2] = best[2].min(cpu() - c);
    }
    let ns = |t: f64| t * 1e9 / n as f64;
    println!(
        "logq_speed: {n} candidates ({nb} x {s}), {rows} x {dim}, K 10, L 50, tier {:?}",
        lshk::isa::active()
    );
    println!(
        "  gathered logits   {:7.2} ns / candidate\n  probabilities     {:7.2} ns / candidate ({:.2}x the logits)\n  of which the tail {:7.2} ns (acos, powi, ln_1p, expm1; measured alone)",
        ns(best[0]),
        ns(best[1]),
        best[1] / best[0],
        ns(best[2])
    );
    // the probabilities' bits (the same on every tier); the logits' sum
    let mut h = 0u64;
    for p in &probs {
        h = (h ^ p.to_bits()).wrapping_mul(0x100_0000_01b3);
    }
    let zs: f64 = logits.iter().map(|&v| v as f64).sum();
    println!("  probabilities' hash {h:016x} (logits' sum {zs:.3}, sink {sink:.3})");
}
