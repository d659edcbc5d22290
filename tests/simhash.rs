//! SimHash: every tier against the scalar oracle, golden values of the
//! seeded generator, and planes round trips.
//!
//! Codes must match the scalar tier bit for bit, except a bit whose
//! projection lies within rounding error of zero. Both tiers sum the same d
//! products in f32 in different orders (and with or without FMA); each
//! result is within `γ_d · Σ|x_j·p_j|` of the exact value, where
//! `γ_d = d·u / (1 - d·u)` and `u = 2^-24` (Higham, Accuracy and Stability,
//! §3.1). So a bit may differ only when the scalar projection satisfies
//! `|s| <= 2·γ_d·Σ|x_j·p_j|`; every such excused bit is counted and printed.

mod common;

use lshk::{Isa, SimHash};

const U: f64 = 1.0 / 16_777_216.0; // 2^-24

fn gamma(d: usize) -> f64 {
    let du = d as f64 * U;
    du / (1.0 - du)
}

/// Σ|x_j·p_j| for row x and plane p (exact in f64 for the error bound).
fn abs_dot(h: &SimHash, x: &[f32], p: usize) -> f64 {
    let d = h.dim();
    let plane = &h.planes()[p * d..(p + 1) * d];
    x.iter()
        .zip(plane)
        .map(|(a, b)| (*a as f64 * *b as f64).abs())
        .sum()
}

// Every tier this CPU supports (capped by `LSHK_MAX_ISA`), printed once per
// test; under CI a supported tier that does not run fails the test.
use common::tiers::for_this_test as tiers_under_test;

struct Rng(lshk::rng::SplitMix64);
impl Rng {
    fn new(s: u64) -> Self {
        Rng(lshk::rng::SplitMix64::new(s))
    }
    fn normal(&mut self) -> f32 {
        self.0.next_normal() as f32
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }
}

/// Rows in a buffer that starts `offset` floats past a 64-byte boundary,
/// with row stride `stride >= dim` (the gap holds garbage that must not be
/// read as data: NaN).
fn make_rows(
    rng: &mut Rng,
    n: usize,
    dim: usize,
    stride: usize,
    offset: usize,
) -> (Vec<f32>, usize) {
    let mut buf = vec![f32::NAN; offset + n * stride + 16];
    for i in 0..n {
        for j in 0..dim {
            buf[offset + i * stride + j] = rng.normal();
        }
    }
    (buf, offset)
}

/// Compares `tier` with the scalar oracle for one configuration; returns
/// the number of excused bits.
fn compare(h: &SimHash, tier: Isa, x: &[f32], n: usize, stride: usize) -> usize {
    let (k, l) = (h.bits() as usize, h.tables() as usize);
    let mut want = vec![0xDEAD_BEEFu32; n * l + 1];
    let mut got = vec![0xDEAD_BEEFu32; n * l + 1];
    h.hash_isa(Isa::Scalar, x, n, stride, &mut want[..n * l])
        .unwrap();
    h.hash_isa(tier, x, n, stride, &mut got[..n * l]).unwrap();
    assert_eq!(got[n * l], 0xDEAD_BEEF, "wrote past n*L");
    let mut proj = vec![0f32; n * k * l];
    h.project_isa(Isa::Scalar, x, n, stride, &mut proj).unwrap();
    let mut proj_t = vec![0f32; n * k * l];
    h.project_isa(tier, x, n, stride, &mut proj_t).unwrap();
    // The fused call gives the same codes and projections, bit for bit.
    let mut fused_c = vec![0xDEAD_BEEFu32; n * l];
    let mut fused_p = vec![0f32; n * k * l];
    h.hash_project_isa(tier, x, n, stride, &mut fused_c, &mut fused_p)
        .unwrap();
    assert_eq!(fused_c, got[..n * l], "hash_project codes, tier {tier:?}");
    assert!(
        fused_p
            .iter()
            .zip(&proj_t)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "hash_project projections, tier {tier:?}"
    );
    let g = 2.0 * gamma(h.dim());
    let mut excused = 0;
    for i in 0..n {
        let row = &x[i * stride..i * stride + h.dim()];
        for t in 0..l {
            let (a, b) = (want[i * l + t], got[i * l + t]);
            if k < 32 {
                assert_eq!(b >> k, 0, "bits above K set: tier {tier:?}");
            }
            for bit in 0..k {
                let p = t * k + bit;
                let s = proj[i * k * l + p] as f64;
                let bound = g * abs_dot(h, row, p);
                // projections: tier within the bound of the oracle
                let st = proj_t[i * k * l + p] as f64;
                assert!(
                    (s - st).abs() <= bound || (s.is_nan() && st.is_nan()) || s == st,
                    "projection {p} row {i}: scalar {s} vs {tier:?} {st}, bound {bound}"
                );
                // sign bit of the scalar code is the sign of its projection
                assert_eq!(
                    (a >> bit) & 1 == 1,
                    s > 0.0,
                    "oracle code/projection mismatch"
                );
                if (a ^ b) >> bit & 1 == 1 {
                    assert!(
                        s.abs() <= bound,
                        "tier {tier:?} row {i} table {t} bit {bit}: projection {s} is not within rounding ({bound}) of zero, dim {} K {k} L {l} sparsity {}",
                        h.dim(),
                        h.sparsity()
                    );
                    excused += 1;
                }
            }
        }
    }
    excused
}

#[test]
fn every_tier_matches_the_oracle() {
    let tiers = tiers_under_test();
    let mut rng = Rng::new(2024);
    let mut dims: Vec<usize> = (1..=49).collect(); // up to 3 AVX-512 widths + 1
    dims.extend([63, 64, 65, 128, 4096]);
    let mut configs = 0usize;
    let mut excused = 0usize;
    let mut bits_checked = 0usize;
    for &dim in &dims {
        for &(k, l) in &[(1u32, 3u32), (7, 5), (8, 64), (31, 2), (32, 3)] {
            if dim == 4096 && l == 64 {
                continue; // keep the run short; 4096 is covered with other K
            }
            for sparsity in [0u32, 1, 3, 2 * dim as u32 + 1] {
                let h = SimHash::new(dim, k, l, sparsity, 7 + dim as u64).unwrap();
                for &n in &[0usize, 1, 2, 5, 6, 7, 13, 33] {
                    if dim == 4096 && n > 7 {
                        continue;
                    }
                    let stride = if n % 2 == 0 {
                        dim
                    } else {
                        dim + 1 + rng.below(5) as usize
                    };
                    let offset = 1 + rng.below(15) as usize; // not 64-byte aligned
                    let (buf, off) = make_rows(&mut rng, n, dim, stride, offset);
                    let x = &buf[off..];
                    for &t in &tiers {
                        excused += compare(&h, t, x, n, stride);
                        bits_checked += n * (k * l) as usize;
                        configs += 1;
                    }
                }
            }
        }
    }
    println!(
        "simhash: {configs} tier x configuration runs, {bits_checked} code bits compared, {excused} excused as within rounding of zero"
    );
}

#[test]
fn large_batches_cross_every_blocking_boundary() {
    let tiers = tiers_under_test();
    let mut rng = Rng::new(5);
    for &(dim, k, l, s) in &[
        (128usize, 8u32, 64u32, 0u32),
        (128, 8, 64, 3),
        (4096, 8, 32, 0),
        (100, 12, 50, 3),
    ] {
        let h = SimHash::new(dim, k, l, s, 99).unwrap();
        for &n in &[31usize, 32, 64, 65, 97, 1024] {
            let (buf, off) = make_rows(&mut rng, n, dim, dim, 3);
            let mut excused = 0;
            for &t in &tiers {
                excused += compare(&h, t, &buf[off..], n, dim);
            }
            if excused > 0 {
                println!("dim {dim} K {k} L {l} s {s} n {n}: {excused} bits excused");
            }
        }
    }
}

#[test]
fn special_values_give_identical_codes_on_every_tier() {
    // NaN, ±inf and -0 inputs: non-finite projections are far from the
    // rounding band, so codes must be identical (NaN projections give 0).
    let tiers = tiers_under_test();
    for sparsity in [0u32, 1, 3] {
        let dim = 40;
        let h = SimHash::new(dim, 8, 9, sparsity, 1).unwrap();
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            f32::MIN_POSITIVE / 4.0,
        ];
        let n = specials.len() * 2 + 2;
        let mut x = vec![0f32; n * dim];
        let mut rng = Rng::new(8);
        for (i, row) in x.chunks_mut(dim).enumerate() {
            for v in row.iter_mut() {
                *v = rng.normal();
            }
            if i < specials.len() * 2 {
                let sv = specials[i % specials.len()];
                // one coordinate (i even) or every coordinate (i odd)
                if i % 2 == 0 {
                    row[i % dim] = sv;
                } else {
                    row.iter_mut().for_each(|v| *v = sv);
                }
            }
        }
        // The last two rows are all zeros -> all projections 0 -> code 0.
        x[(n - 2) * dim..].iter_mut().for_each(|v| *v = 0.0);
        let mut want = vec![0u32; n * 9];
        h.hash_isa(Isa::Scalar, &x, n, dim, &mut want).unwrap();
        assert!(want[(n - 2) * 9..].iter().all(|&c| c == 0));
        // A row of NaN: every projection NaN -> every bit 0.
        let nan_row = specials.iter().position(|v| v.is_nan()).unwrap() * 2 + 1;
        assert!(want[nan_row * 9..(nan_row + 1) * 9].iter().all(|&c| c == 0));
        for &t in &tiers {
            let mut got = vec![0u32; n * 9];
            h.hash_isa(t, &x, n, dim, &mut got).unwrap();
            // Rows of subnormals/zeros can sit in the rounding band; compare
            // only rows whose projections are non-finite or exactly zero.
            for i in 0..n {
                let row = &x[i * dim..(i + 1) * dim];
                let nonfinite = row.iter().any(|v| !v.is_finite());
                let zero = row.iter().all(|v| *v == 0.0);
                if nonfinite || zero {
                    assert_eq!(
                        &got[i * 9..(i + 1) * 9],
                        &want[i * 9..(i + 1) * 9],
                        "tier {t:?} sparsity {sparsity} row {i}"
                    );
                }
            }
        }
    }
}

fn fnv1a(words: impl Iterator<Item = u32>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Golden values: the seeded generator is a frozen contract (see
/// `src/rng.rs`). If one of these changes, every saved index and every
/// user's codes change: that is a breaking change, not a test to update.
#[test]
fn seeded_planes_are_frozen() {
    let h = SimHash::new(4, 2, 2, 0, 42).unwrap();
    let bits: Vec<u32> = h.planes().iter().map(|v| v.to_bits()).collect();
    assert_eq!(
        bits, GOLDEN_DENSE_4X4_SEED42,
        "dense Gaussian planes changed: {bits:#010x?}"
    );

    let h = SimHash::new(5, 3, 1, 1, 7).unwrap();
    let signs: Vec<f32> = h.planes().to_vec();
    assert_eq!(
        signs, GOLDEN_PM1_5X3_SEED7,
        "dense ±1 planes changed: {signs:?}"
    );

    let h = SimHash::new(10, 2, 2, 3, 123).unwrap();
    let sp = h.sparse().unwrap();
    assert_eq!(
        (sp.start.clone(), sp.mid.clone(), sp.idx.clone()),
        golden_sparse_10(),
        "sparse planes changed"
    );

    // Whole families of the benchmark shapes.
    let fams = [
        (128usize, 8u32, 64u32, 0u32, 1u64),
        (128, 8, 64, 1, 1),
        (128, 8, 64, 3, 1),
        (4096, 8, 32, 0, 0xFFFF_FFFF_FFFF_FFFF),
    ];
    let sums: Vec<u64> = fams
        .iter()
        .map(|&(d, k, l, s, seed)| {
            fnv1a(
                SimHash::new(d, k, l, s, seed)
                    .unwrap()
                    .planes()
                    .iter()
                    .map(|v| v.to_bits()),
            )
        })
        .collect();
    assert_eq!(
        sums, GOLDEN_FAMILY_HASHES,
        "family planes changed: {sums:#018x?}"
    );
}

include!("golden/simhash.rs");

#[test]
fn sparse_planes_have_exactly_ceil_dim_over_s_nonzeros() {
    for &(dim, s) in &[(128usize, 3u32), (10, 3), (7, 2), (5, 100), (1, 2)] {
        let h = SimHash::new(dim, 4, 3, s, 9).unwrap();
        let nnz = dim.div_ceil(s as usize);
        for p in 0..h.num_planes() {
            let row = &h.planes()[p * dim..(p + 1) * dim];
            assert_eq!(row.iter().filter(|v| **v != 0.0).count(), nnz);
            assert!(row.iter().all(|v| *v == 0.0 || *v == 1.0 || *v == -1.0));
        }
    }
}

#[test]
fn from_planes_round_trips_and_hashes_identically() {
    let mut rng = Rng::new(3);
    for sparsity in [0u32, 1, 3] {
        let h = SimHash::new(33, 7, 6, sparsity, 5).unwrap();
        let g = SimHash::from_planes(h.planes(), 33, 7, 6).unwrap();
        assert_eq!(g.planes(), h.planes());
        let n = 20;
        let (buf, off) = make_rows(&mut rng, n, 33, 33, 0);
        let x = &buf[off..];
        for t in tiers_under_test() {
            let mut a = vec![0u32; n * 6];
            let mut b = vec![0u32; n * 6];
            g.hash_isa(t, x, n, 33, &mut b).unwrap();
            h.hash_isa(t, x, n, 33, &mut a).unwrap();
            if sparsity < 2 {
                // same planes, same dense kernel: identical
                assert_eq!(a, b, "tier {t:?}");
            } else {
                // sparse family (adds) vs the same planes as dense (FMAs):
                // identical up to the rounding band.
                let excused = compare(&g, t, x, n, 33);
                let _ = excused;
            }
        }
    }
}

#[test]
fn argument_errors() {
    use lshk::Status;
    assert_eq!(
        SimHash::new(0, 8, 2, 0, 1).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        SimHash::new(8, 0, 2, 0, 1).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        SimHash::new(8, 33, 2, 0, 1).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        SimHash::new(8, 8, 0, 0, 1).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        SimHash::new(usize::MAX / 2, 32, u32::MAX, 0, 1)
            .unwrap_err()
            .status,
        Status::SizeOverflow
    );
    let h = SimHash::new(8, 4, 3, 0, 1).unwrap();
    let x = vec![1.0f32; 16];
    let mut c = vec![0u32; 6];
    assert_eq!(
        h.hash(&x, 2, 7, &mut c).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        h.hash(&x, 3, 8, &mut c).unwrap_err().status,
        Status::BufferTooSmall
    );
    assert_eq!(
        h.hash(&x, 2, 8, &mut c[..5]).unwrap_err().status,
        Status::BufferTooSmall
    );
    assert_eq!(
        h.hash(&x, usize::MAX, 8, &mut c).unwrap_err().status,
        Status::SizeOverflow
    );
    let mut p = vec![1.0f32; 4 * 3 * 8];
    p[5] = f32::NAN;
    assert_eq!(
        SimHash::from_planes(&p, 8, 4, 3).unwrap_err().status,
        Status::NonFinite
    );
    assert_eq!(
        SimHash::from_planes(&p[1..], 8, 4, 3).unwrap_err().status,
        Status::InvalidArgument
    );
    if lshk::isa::detected() < Isa::Avx512 {
        assert_eq!(
            h.hash_isa(Isa::Avx512, &x, 2, 8, &mut c)
                .unwrap_err()
                .status,
            Status::UnsupportedIsa
        );
    }
}

/// A cloned family must keep its packed panels 64-byte aligned (the AVX2
/// and AVX-512 tiers load them with aligned loads) and hash identically.
/// Junk allocations between clones vary the clone's address modulo 64.
#[test]
fn clones_stay_aligned_and_hash_identically() {
    let (dim, n) = (37, 5);
    let mut rng = Rng::new(77);
    let x: Vec<f32> = (0..dim * n).map(|_| rng.normal()).collect();
    let mut junk = Vec::new();
    for s in 0..64u64 {
        let h = SimHash::new(dim, 8, 4, 0, s).unwrap();
        junk.push(vec![0u8; 8 + 8 * (s as usize % 7)]);
        let c = h.clone();
        assert_eq!(c.packed().as_ptr() as usize % 64, 0, "seed {s}");
        assert_eq!(c.packed(), h.packed());
        for t in tiers_under_test() {
            let mut a = vec![0u32; n * 4];
            let mut b = vec![0u32; n * 4];
            h.hash_isa(t, &x, n, dim, &mut a).unwrap();
            c.hash_isa(t, &x, n, dim, &mut b).unwrap();
            assert_eq!(a, b, "seed {s}, tier {}", t.name());
        }
    }
}
