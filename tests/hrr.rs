//! HRR: the frequency-domain kernels on every tier against the scalar
//! oracle (bit for bit), bind/unbind/project against direct f64
//! references within the bound derived in `src/hrr.rs`, the unbinding
//! identities, and the class-vector generator's golden checksum.

mod common;

use lshk::hrr::{self, class_vectors, ClassGen, Hrr, Inverse, Scratch};
use lshk::kernels::hrr as kh;
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

const U: f64 = 1.0 / 16_777_216.0; // 2^-24

/// Same bits, or both NaN (NaN payloads may propagate from either operand).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn gauss(r: &mut SplitMix64, n: usize, sd: f64) -> Vec<f32> {
    (0..n).map(|_| (r.next_normal() * sd) as f32).collect()
}

/// Interleaved complex values with special values mixed in.
fn special_spectrum(r: &mut SplitMix64, n: usize) -> Vec<f32> {
    const SPECIAL: [f32; 9] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -3e-39,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    (0..2 * n)
        .map(|_| {
            if r.below(6) == 0 {
                SPECIAL[r.below(SPECIAL.len() as u64) as usize]
            } else {
                (r.next_normal() * 10f64.powi(r.below(9) as i32 - 4)) as f32
            }
        })
        .collect()
}

#[test]
fn pointwise_kernels_every_tier_match_the_oracle_bitwise() {
    let tiers = common::tiers::for_this_test();
    let mut r = SplitMix64::new(17);
    let sc = kh::kernels(Isa::Scalar);
    // complex counts: 0..=3 widths of the AVX-512 tier + 1, multiples, large
    let mut sizes: Vec<usize> = (0..=25).collect();
    sizes.extend([32, 64, 65, 513, 4097]);
    for &n in &sizes {
        for special in [false, true] {
            // one float of offset: unaligned pointers on every tier
            let mk = |r: &mut SplitMix64| {
                let mut v = vec![0.0f32];
                if special {
                    v.extend(special_spectrum(r, n));
                } else {
                    v.extend(gauss(r, 2 * n, 1.0));
                }
                v
            };
            let (a, b) = (mk(&mut r), mk(&mut r));
            let (a, b) = (&a[1..], &b[1..]);
            let s = 1.0 / 1000.0f32;
            let mut want = vec![vec![0.0f32; 2 * n]; 4];
            // SAFETY: equal even lengths; the scalar tier runs everywhere.
            unsafe {
                (sc.cmul)(a, b, s, &mut want[0]);
                (sc.cmulc)(a, b, s, &mut want[1]);
                (sc.cdiv)(a, b, s, &mut want[2]);
                (sc.project)(a, 1e-5, s, &mut want[3]);
            }
            for &t in &tiers {
                let k = kh::kernels(t);
                let mut got = vec![vec![0.0f32; 2 * n + 1]; 4];
                // SAFETY: equal even lengths; `tiers` lists only tiers
                // this CPU supports.
                unsafe {
                    (k.cmul)(a, b, s, &mut got[0][1..]);
                    (k.cmulc)(a, b, s, &mut got[1][1..]);
                    (k.cdiv)(a, b, s, &mut got[2][1..]);
                    (k.project)(a, 1e-5, s, &mut got[3][1..]);
                }
                for (op, (g, w)) in got.iter().zip(&want).enumerate() {
                    for j in 0..2 * n {
                        assert!(
                            same(g[j + 1], w[j]),
                            "{} op {op} n {n} special {special} [{j}]: {} vs {} (a {} {}, b {} {})",
                            k.name,
                            g[j + 1],
                            w[j],
                            a[j & !1],
                            a[j | 1],
                            b[j & !1],
                            b[j | 1]
                        );
                    }
                }
            }
        }
    }
}

/// The per-element reference functions are what the docs say.
#[test]
fn per_element_functions_are_the_complex_operations() {
    let (ar, ai, br, bi) = (1.5f32, -2.0f32, 0.25f32, 3.0f32);
    assert_eq!(
        kh::cmul1(ar, ai, br, bi, 1.0),
        (ar * br - ai * bi, ar * bi + ai * br)
    );
    assert_eq!(
        kh::cmulc1(ar, ai, br, bi, 1.0),
        (ar * br + ai * bi, ar * bi - ai * br)
    );
    let (q0, q1) = kh::cdiv1(ar, ai, br, bi, 1.0);
    let den = (ar * ar + ai * ai) as f64;
    assert!((q0 as f64 - (ar as f64 * br as f64 + ai as f64 * bi as f64) / den).abs() < 1e-6);
    assert!((q1 as f64 - (ar as f64 * bi as f64 - ai as f64 * br as f64) / den).abs() < 1e-6);
    let (p0, p1) = kh::proj1(3.0, 4.0, 0.0, 1.0);
    assert_eq!((p0, p1), (0.6, 0.8));
}

// ------------------------------------------------------------- f64 references

/// `(x ⊛ y)_j = sum_i x_i y_{(j - i) mod d}` in f64.
fn conv_f64(x: &[f32], y: &[f32]) -> Vec<f64> {
    let d = x.len();
    (0..d)
        .map(|j| {
            (0..d)
                .map(|i| x[i] as f64 * y[(j + d - i) % d] as f64)
                .sum()
        })
        .collect()
}

/// The DFT of a real vector in f64 (all d frequencies), O(d²).
fn dft_f64(x: &[f32]) -> Vec<(f64, f64)> {
    let d = x.len();
    (0..d)
        .map(|k| {
            let mut acc = (0.0, 0.0);
            for (j, &v) in x.iter().enumerate() {
                let a = -2.0 * std::f64::consts::PI * ((j * k) % d) as f64 / d as f64;
                acc.0 += v as f64 * a.cos();
                acc.1 += v as f64 * a.sin();
            }
            acc
        })
        .collect()
}

fn norm2(v: &[(f64, f64)]) -> f64 {
    v.iter().map(|c| c.0 * c.0 + c.1 * c.1).sum::<f64>().sqrt()
}

fn norm_inf(v: &[(f64, f64)]) -> f64 {
    v.iter()
        .map(|c| (c.0 * c.0 + c.1 * c.1).sqrt())
        .fold(0.0, f64::max)
}

fn l2(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

/// `e_F` of `src/hrr.rs`: `5 u L`, `L = 3 ceil(log2(2d))`.
fn e_f(d: usize) -> f64 {
    let l = 3.0 * ((2 * d) as f64).log2().ceil();
    5.0 * U * l
}

/// The bound of `src/hrr.rs` on `|ẑ - z|_2` for `z = x ⊛ y` (or the
/// approximate unbinding, whose spectra have the same magnitudes).
fn bind_bound(x: &[f32], y: &[f32], z: &[f64]) -> f64 {
    let d = x.len();
    let (xs, ys) = (dft_f64(x), dft_f64(y));
    let zs: Vec<(f64, f64)> = xs
        .iter()
        .zip(&ys)
        .map(|(a, b)| (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0))
        .collect();
    let ef = e_f(d);
    let fwd =
        (2.0 * ef + 4.0 * U) * (norm_inf(&xs) * norm2(&ys) + norm_inf(&ys) * norm2(&xs)) / 2.0;
    let inv = (ef + 4.0 * U) * norm2(&zs);
    (fwd + inv) * (1.0 + 2.0 * ef) / (d as f64).sqrt() + U * l2(z.iter().copied())
}

const DIMS: [usize; 18] = [
    1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 257, 401, 1024,
];

#[test]
fn bind_every_tier_matches_direct_convolution_and_the_oracle() {
    let tiers = common::tiers::for_this_test();
    let mut r = SplitMix64::new(5);
    let mut worst = 0.0f64;
    for d in DIMS {
        let n = 3;
        let x = gauss(&mut r, n * d, 1.0);
        let y = gauss(&mut r, n * d, 0.5);
        let oracle = Hrr::new_isa(d, Isa::Scalar).unwrap();
        let mut sc = oracle.scratch().unwrap();
        let mut want = vec![0.0f32; n * d];
        oracle.bind(&x, &y, &mut want, &mut sc).unwrap();
        for row in 0..n {
            let (xr, yr) = (&x[row * d..(row + 1) * d], &y[row * d..(row + 1) * d]);
            let z = conv_f64(xr, yr);
            let err = l2(z.iter().zip(&want[row * d..]).map(|(a, &b)| a - b as f64));
            let bound = bind_bound(xr, yr, &z);
            assert!(
                err <= bound,
                "d {d} row {row}: |err| {err:e} > bound {bound:e}"
            );
            worst = worst.max(err / bound);
        }
        for &t in &tiers {
            let h = oracle.with_isa(t).unwrap();
            let mut got = vec![0.0f32; n * d];
            h.bind(&x, &y, &mut got, &mut sc).unwrap();
            assert!(
                got.iter().zip(&want).all(|(a, b)| same(*a, *b)),
                "tier {t:?} d {d}: bind differs from the scalar tier"
            );
            // one key row broadcast to every row
            let mut got1 = vec![0.0f32; n * d];
            h.bind(&x[..d], &y, &mut got1, &mut sc).unwrap();
            let mut want1 = vec![0.0f32; d];
            for row in 0..n {
                oracle
                    .bind(&x[..d], &y[row * d..(row + 1) * d], &mut want1, &mut sc)
                    .unwrap();
                assert!(
                    got1[row * d..(row + 1) * d]
                        .iter()
                        .zip(&want1)
                        .all(|(a, b)| same(*a, *b)),
                    "tier {t:?} d {d} row {row}: broadcast bind differs"
                );
            }
        }
    }
    // how tight the bound is (printed with --nocapture)
    println!("bind vs f64 convolution: largest |error| / bound = {worst:.2e}");
}

#[test]
fn unbind_identities_every_tier() {
    let tiers = common::tiers::for_this_test();
    let mut r = SplitMix64::new(9);
    for d in DIMS {
        let n = 2;
        // projected keys: generated, and made by `project`
        let mut keys = vec![0.0f32; d];
        class_vectors(3, d, 0, &mut keys, 1).unwrap();
        let raw = gauss(&mut r, d, 1.0 / (d as f64).sqrt());
        let y = gauss(&mut r, n * d, 1.0 / (d as f64).sqrt());
        for &t in &tiers {
            let h = Hrr::new_isa(d, t).unwrap();
            let mut sc = h.scratch().unwrap();
            let mut projected = vec![0.0f32; d];
            h.project(&raw, &mut projected, &mut sc).unwrap();
            for (name, key) in [("class vector", &keys), ("project(gaussian)", &projected)] {
                let mut s = vec![0.0f32; n * d];
                h.bind(key, &y, &mut s, &mut sc).unwrap();
                for inv in [Inverse::Approx, Inverse::Exact] {
                    let mut back = vec![0.0f32; n * d];
                    h.unbind(inv, key, &s, &mut back, &mut sc).unwrap();
                    for row in 0..n {
                        let yr = &y[row * d..(row + 1) * d];
                        let br = &back[row * d..(row + 1) * d];
                        let sr = &s[row * d..(row + 1) * d];
                        let err = l2(yr.iter().zip(br).map(|(a, b)| *a as f64 - *b as f64));
                        // bind, then unbind: the bound twice, the second
                        // scaled by the key's spectrum conditioning
                        // (|K| in [1 - 1e-5 / min|K_raw| - O(u), 1]); the
                        // projection's own 1e-5 bias on `projected`.
                        let ks = dft_f64(key);
                        let kmax = norm_inf(&ks);
                        let kmin = ks
                            .iter()
                            .map(|c| (c.0 * c.0 + c.1 * c.1).sqrt())
                            .fold(f64::MAX, f64::min);
                        let kappa = kmax / kmin;
                        let b1 = bind_bound(key, yr, &conv_f64(key, yr));
                        let b2 = bind_bound(key, sr, &conv_f64(key, sr)) * kappa / (kmin * kmin);
                        // |K| != 1 exactly: y is recovered up to (|K|^2 - 1) for the
                        // approximate inverse
                        let mag = if inv == Inverse::Approx {
                            (kmax * kmax - 1.0).abs().max((kmin * kmin - 1.0).abs())
                                * l2(yr.iter().map(|&v| v as f64))
                        } else {
                            0.0
                        };
                        let bound = (b1 * kappa / kmin + b2 + mag) * 1.01;
                        assert!(
                            err <= bound,
                            "{t:?} d {d} {name} {inv:?} row {row}: |y - unbind(bind(y))| {err:e} > {bound:e}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn approximate_inverse_of_a_gaussian_key_is_only_approximate() {
    // x ~ N(0, 1/d): x† ⊛ x ⊛ y = y + noise of relative size ~1 / sqrt(d)
    // per bound item... the exact inverse recovers y; the approximate one
    // has cosine about 1 / sqrt(2) with y (|X_k|^2 is exponential(1)).
    let d = 1024;
    let mut r = SplitMix64::new(77);
    let x = gauss(&mut r, d, 1.0 / (d as f64).sqrt());
    let y = gauss(&mut r, d, 1.0 / (d as f64).sqrt());
    let h = Hrr::new(d).unwrap();
    let mut sc = h.scratch().unwrap();
    let mut s = vec![0.0f32; d];
    h.bind(&x, &y, &mut s, &mut sc).unwrap();
    let cos = |a: &[f32], b: &[f32]| {
        let dot: f64 = a.iter().zip(b).map(|(p, q)| *p as f64 * *q as f64).sum();
        dot / (l2(a.iter().map(|&v| v as f64)) * l2(b.iter().map(|&v| v as f64)))
    };
    let mut approx = vec![0.0f32; d];
    let mut exact = vec![0.0f32; d];
    h.unbind(Inverse::Approx, &x, &s, &mut approx, &mut sc)
        .unwrap();
    h.unbind(Inverse::Exact, &x, &s, &mut exact, &mut sc)
        .unwrap();
    let (ca, ce) = (cos(&approx, &y), cos(&exact, &y));
    assert!(ce > 0.999, "exact inverse: cosine {ce}");
    assert!((0.5..0.9).contains(&ca), "approximate inverse: cosine {ca}");
}

#[test]
fn projection_has_unit_spectrum() {
    let tiers = common::tiers::for_this_test();
    let mut r = SplitMix64::new(21);
    for d in DIMS {
        let x = gauss(&mut r, d, 1.0);
        let xs = dft_f64(&x);
        for &t in &tiers {
            let h = Hrr::new_isa(d, t).unwrap();
            let mut sc = h.scratch().unwrap();
            let mut p = vec![0.0f32; d];
            h.project(&x, &mut p, &mut sc).unwrap();
            let ps = dft_f64(&p);
            for (k, (a, b)) in xs.iter().zip(&ps).enumerate() {
                let m = (a.0 * a.0 + a.1 * a.1).sqrt();
                let want = m / (m + 1e-5);
                let got = (b.0 * b.0 + b.1 * b.1).sqrt();
                // the forward transform's error relative to |X_k| moves the
                // magnitude by at most e_F |X|_2 / |X_k| before projection;
                // the inverse adds e_F sqrt(d) (|P|_2 = sqrt(d)) spread over
                // the frequencies.
                let tol = e_f(d) * (norm2(&xs) / m.max(1e-30) + (d as f64).sqrt()) + 8.0 * U;
                assert!(
                    (got - want).abs() <= tol,
                    "{t:?} d {d} k {k}: |P_k| {got} vs {want} (tol {tol:e})"
                );
            }
        }
    }
}

#[test]
fn arguments_are_checked_and_nothing_is_written() {
    let h = Hrr::new(8).unwrap();
    let mut sc = h.scratch().unwrap();
    let x = vec![1.0f32; 16];
    let mut out = vec![7.0f32; 16];
    let code = |e: lshk::Error| e.status;
    assert_eq!(
        code(h.bind(&x[..7], &x, &mut out, &mut sc).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        code(h.bind(&x, &x[..8], &mut out[..8], &mut sc).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        code(h.bind(&x, &x, &mut out[..8], &mut sc).unwrap_err()),
        Status::BufferTooSmall
    );
    let mut bad = x.clone();
    bad[11] = f32::NAN;
    assert_eq!(
        code(h.bind(&x, &bad, &mut out, &mut sc).unwrap_err()),
        Status::NonFinite
    );
    assert_eq!(
        code(
            h.unbind(Inverse::Exact, &bad, &x, &mut out, &mut sc)
                .unwrap_err()
        ),
        Status::NonFinite
    );
    assert_eq!(
        code(h.project(&bad, &mut out, &mut sc).unwrap_err()),
        Status::NonFinite
    );
    let other = Hrr::new(4).unwrap();
    let mut sc4: Scratch = other.scratch().unwrap();
    assert_eq!(
        code(h.bind(&x, &x, &mut out, &mut sc4).unwrap_err()),
        Status::InvalidArgument
    );
    assert!(out.iter().all(|&v| v == 7.0));
    assert_eq!(Hrr::new(0).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(
        Hrr::new(hrr::MAX_DIM + 1).unwrap_err().status,
        Status::InvalidArgument
    );
    // zero rows is fine
    h.bind(&x[..8], &[], &mut [], &mut sc).unwrap();
    let mut o = vec![0.0f32; 3];
    assert_eq!(
        class_vectors(1, 4, 0, &mut o, 1).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        class_vectors(1, 1, u64::MAX, &mut o, 1).unwrap_err().status,
        Status::SizeOverflow
    );
    assert_eq!(
        class_vectors(1, 0, 0, &mut [], 1).unwrap_err().status,
        Status::InvalidArgument
    );
}

// ------------------------------------------------------------- the generator

/// The frozen generator: crc32c of the f32 bits of rows 0..16 of seed 42
/// for several d. A change here breaks every stored class-vector set.
#[test]
fn class_vectors_golden_checksum() {
    let mut all = Vec::new();
    for d in [1usize, 2, 3, 8, 17, 400, 401, 800, 1024] {
        let mut v = vec![0.0f32; 16 * d];
        class_vectors(42, d, 0, &mut v, 2).unwrap();
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        all.push((d, lshk::crc32c::crc32c(0, &bytes)));
    }
    let got: Vec<String> = all.iter().map(|(d, c)| format!("{d}:{c:08x}")).collect();
    println!("class-vector checksums: {}", got.join(" "));
    assert_eq!(got.join(" "), GOLDEN);
}

const GOLDEN: &str = "1:6bf9e8bc 2:3a7cbb92 3:02d07bca 8:9d0ba584 17:100e5532 400:d2eee6ea 401:e7f6ee6c 800:eaf4f2f1 1024:87619d32";

#[test]
fn class_vectors_are_projected_unit_vectors() {
    for d in [1usize, 2, 3, 6, 17, 64, 400, 401] {
        let m = 8;
        let mut v = vec![0.0f32; m * d];
        class_vectors(7, d, 0, &mut v, 1).unwrap();
        for row in v.chunks_exact(d) {
            let n = l2(row.iter().map(|&x| x as f64));
            // |c|_2 = 1 exactly before the f32 rounding (u relative each)
            assert!(
                (n - 1.0).abs() < 2.0 * U + 1e-12 * d as f64,
                "d {d}: |c| {n}"
            );
            for (k, c) in dft_f64(row).iter().enumerate() {
                let mag = (c.0 * c.0 + c.1 * c.1).sqrt();
                // each entry moved by at most u |c_j| by the rounding:
                // |delta F_k| <= u |c|_1 <= u sqrt(d)
                assert!(
                    (mag - 1.0).abs() <= U * (d as f64).sqrt() + 1e-9,
                    "d {d} k {k}: |F_k| {mag}"
                );
            }
        }
    }
}

#[test]
fn class_vectors_do_not_depend_on_threads_or_the_first_row() {
    let d = 100;
    let mut all = vec![0.0f32; 37 * d];
    class_vectors(11, d, 0, &mut all, 1).unwrap();
    for threads in [0, 2, 3, 40] {
        let mut v = vec![0.0f32; 37 * d];
        class_vectors(11, d, 0, &mut v, threads).unwrap();
        assert!(v.iter().zip(&all).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    let mut part = vec![0.0f32; 5 * d];
    class_vectors(11, d, 30, &mut part, 2).unwrap();
    assert!(part
        .iter()
        .zip(&all[30 * d..])
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // one row at a time through the plan
    let g = ClassGen::new(d).unwrap();
    let mut b = g.buffers().unwrap();
    let mut row = vec![0.0f32; d];
    g.row(11, 36, &mut row, &mut b);
    assert!(row
        .iter()
        .zip(&all[36 * d..])
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // different seeds, different rows: nearly orthogonal
    let dot: f64 = all[..d]
        .iter()
        .zip(&all[d..2 * d])
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    assert!(dot.abs() < 0.5, "{dot}");
}
