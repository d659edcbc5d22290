//! 4-bit PQ fast-scan (`lshk::pq4`): every tier this CPU runs against the
//! scalar oracle, exactly (u32 accumulators equal, scores bit for bit), and
//! against an independent reference computed from the unpacked codes;
//! extremes (all-255 tables, the u16 widening boundaries, the largest M);
//! packing / encoding round trips; the approximate score against f64
//! references within the bound derived in `src/quant/pq4/mod.rs`; a golden checksum
//! of a seeded training; argument errors.

mod common;

use lshk::crc32c::crc32c;
use lshk::pq4::{
    self, m_pad_of, pack_codes, run_bytes, Anisotropic, Codebook, Pq4Lut, Pq4Rows, TrainParams,
    BLOCK, H, KSUB, MAX_M,
};
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

const U: f64 = 1.0 / 16_777_216.0; // 2^-24

fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

fn bytes_random(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(256) as u8).collect()
}

fn codes_random(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(16) as u8).collect()
}

/// `sum_j lut[16 j + codes[r * m + j]]` from unpacked codes (the
/// definition, independent of the layout and of every tier).
fn reference(codes: &[u8], nrows: usize, m: usize, lut: &[u8]) -> Vec<u32> {
    (0..nrows)
        .map(|r| {
            (0..m)
                .map(|j| lut[KSUB * j + codes[r * m + j] as usize] as u32)
                .sum()
        })
        .collect()
}

/// Runs acc and score (with and without bias) on every tier for one packed
/// run, against `want` (if any) and the scalar tier bit for bit.
#[allow(clippy::too_many_arguments)]
fn check_all(
    tiers: &[Isa],
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    want: Option<&[u32]>,
    delta: f32,
    offset: f32,
    bias: &[f32],
    what: &str,
) {
    let mut ref_acc = vec![0u32; nrows];
    pq4::accumulate_isa(Isa::Scalar, codes, m_pad, nrows, lut, &mut ref_acc).unwrap();
    if let Some(w) = want {
        assert_eq!(ref_acc, w, "scalar vs reference: {what}");
    }
    let mut ref_s = vec![0f32; nrows];
    let mut ref_sb = vec![0f32; nrows];
    pq4::score_isa(
        Isa::Scalar,
        codes,
        m_pad,
        nrows,
        lut,
        delta,
        offset,
        None,
        &mut ref_s,
    )
    .unwrap();
    pq4::score_isa(
        Isa::Scalar,
        codes,
        m_pad,
        nrows,
        lut,
        delta,
        offset,
        Some(bias),
        &mut ref_sb,
    )
    .unwrap();
    // One extra slot in every output: the kernel must not write past nrows.
    for &t in tiers {
        let label = format!("{t:?}");
        let mut acc = vec![0xdead_beefu32; nrows + 1];
        pq4::accumulate_isa(t, codes, m_pad, nrows, lut, &mut acc).unwrap();
        same_acc(&acc, &ref_acc, &label, what);
        for (bias, want) in [(None, &ref_s), (Some(bias), &ref_sb)] {
            let mut s = vec![f32::NAN; nrows + 1];
            pq4::score_isa(t, codes, m_pad, nrows, lut, delta, offset, bias, &mut s).unwrap();
            same_scores(&s, want, &label, what);
        }
    }
    // Every kernel variant of those tiers (both AVX-512 flavours where the
    // CPU has VBMI and VNNI), called directly.
    for (t, k) in lshk::kernels::pq4::supported_variants() {
        if !tiers.contains(&t) {
            continue;
        }
        let mut acc = vec![0xdead_beefu32; nrows + 1];
        // SAFETY: the arguments the checked entry points accepted above;
        // the variant runs on this CPU (supported_variants).
        unsafe { (k.acc)(codes, m_pad, nrows, lut, &mut acc) };
        same_acc(&acc, &ref_acc, k.name, what);
        for (bias, want) in [(None, &ref_s), (Some(bias), &ref_sb)] {
            let mut s = vec![f32::NAN; nrows + 1];
            let epi = lshk::kernels::pq4::Epilogue {
                delta,
                offset,
                bias,
            };
            // SAFETY: as above (bias, when given, holds nrows values).
            unsafe { (k.score)(codes, m_pad, nrows, lut, &epi, &mut s) };
            same_scores(&s, want, k.name, what);
        }
    }
}

/// `got` (one slot longer than `want`) holds `want`, and its last slot
/// was not written.
fn same_acc(got: &[u32], want: &[u32], label: &str, what: &str) {
    let n = want.len();
    assert_eq!(&got[..n], want, "{label} acc: {what}");
    assert_eq!(got[n], 0xdead_beef, "{label} wrote past the run: {what}");
}

/// `got` (one slot longer than `want`) holds `want`'s bits, and its last
/// slot is still NaN.
fn same_scores(got: &[f32], want: &[f32], label: &str, what: &str) {
    let n = want.len();
    for r in 0..n {
        assert_eq!(
            got[r].to_bits(),
            want[r].to_bits(),
            "{label} score row {r}: {what}"
        );
    }
    assert!(got[n].is_nan(), "{label} score wrote past the run: {what}");
}

const MS: [usize; 22] = [
    1, 2, 3, 4, 5, 6, 7, 8, 10, 16, 30, 32, 34, 62, 64, 66, 96, 128, 130, 254, 256, 258,
];
const NROWS: [usize; 13] = [0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100];

#[test]
fn every_tier_matches_the_oracle_exactly() {
    let tiers = common::tiers::for_this_test();
    let mut rng = SplitMix64::new(0x9e4);
    for &m in &MS {
        let m_pad = m_pad_of(m);
        for &nrows in &NROWS {
            // packed from unpacked codes: checks the layout too
            let codes = codes_random(&mut rng, nrows * m);
            let mut packed = vec![0u8; run_bytes(m_pad, nrows).unwrap()];
            pack_codes(&codes, nrows, m, &mut packed).unwrap();
            let mut lut = bytes_random(&mut rng, KSUB * m_pad);
            lut[KSUB * m..].fill(0); // the padding sub-quantiser's table
            let want = reference(&codes, nrows, m, &lut);
            let bias: Vec<f32> = (0..nrows).map(|_| rng.next_normal() as f32).collect();
            let delta = (rng.next_f64_open() * 0.01) as f32;
            let offset = (rng.next_normal() * 3.0) as f32;
            check_all(
                &tiers,
                &packed,
                m_pad,
                nrows,
                &lut,
                Some(&want),
                delta,
                offset,
                &bias,
                &format!("packed m {m} nrows {nrows}"),
            );
            // raw bytes: every byte value in codes and tables, at an
            // unaligned address
            let raw = bytes_random(&mut rng, run_bytes(m_pad, nrows).unwrap() + 1);
            let lut = bytes_random(&mut rng, KSUB * m_pad + 3);
            check_all(
                &tiers,
                &raw[1..],
                m_pad,
                nrows,
                &lut[3..],
                None,
                delta,
                offset,
                &bias,
                &format!("raw m_pad {m_pad} nrows {nrows}"),
            );
        }
    }
}

#[test]
fn every_row_count_up_to_three_blocks_and_one() {
    let tiers = common::tiers::for_this_test();
    let mut rng = SplitMix64::new(0x3b1);
    for &m in &[1usize, 4, 6, 64] {
        let m_pad = m_pad_of(m);
        for nrows in 0..=3 * BLOCK + 1 {
            let codes = codes_random(&mut rng, nrows * m);
            let mut packed = vec![0u8; run_bytes(m_pad, nrows).unwrap()];
            pack_codes(&codes, nrows, m, &mut packed).unwrap();
            let mut lut = bytes_random(&mut rng, KSUB * m_pad);
            lut[KSUB * m..].fill(0);
            let want = reference(&codes, nrows, m, &lut);
            let bias: Vec<f32> = (0..nrows).map(|_| rng.next_normal() as f32).collect();
            check_all(
                &tiers,
                &packed,
                m_pad,
                nrows,
                &lut,
                Some(&want),
                0.03,
                -1.0,
                &bias,
                &format!("m {m} nrows {nrows}"),
            );
        }
    }
}

#[test]
fn extremes_all_255_tables_widening_boundaries_and_max_m() {
    let tiers = common::tiers::for_this_test();
    let mut rng = SplitMix64::new(0x255);
    // 256 pairs (AVX2) and 256 quads (AVX-512) per widening, 128 pairs on
    // the portable tier: m_pad on each side of every boundary, and MAX_M.
    let m_pads = [
        254,
        256,
        258,
        510,
        512,
        514,
        1020,
        1022,
        1024,
        1026,
        1028,
        2048,
        2050,
        MAX_M - 2,
        MAX_M,
    ];
    for &m_pad in &m_pads {
        for &nrows in &[1usize, 32, 33] {
            let n = run_bytes(m_pad, nrows).unwrap();
            let lut = vec![255u8; KSUB * m_pad];
            let bias = vec![0.5f32; nrows];
            // every code 15, every code 0, random codes: always 255 per
            // sub-quantiser
            for codes in [vec![0xffu8; n], vec![0u8; n], bytes_random(&mut rng, n)] {
                let want = vec![255 * m_pad as u32; nrows];
                check_all(
                    &tiers,
                    &codes,
                    m_pad,
                    nrows,
                    &lut,
                    Some(&want),
                    1.0,
                    0.0,
                    &bias,
                    &format!("all-255 m_pad {m_pad} nrows {nrows}"),
                );
            }
            // random tables and codes at the same sizes
            let codes = bytes_random(&mut rng, n);
            let lut = bytes_random(&mut rng, KSUB * m_pad);
            check_all(
                &tiers,
                &codes,
                m_pad,
                nrows,
                &lut,
                None,
                0.001,
                -2.0,
                &bias,
                &format!("random m_pad {m_pad} nrows {nrows}"),
            );
        }
    }
    // the largest accumulator is exact in f32: score == acc with delta 1
    let m_pad = MAX_M;
    let codes = vec![0x5au8; run_bytes(m_pad, 32).unwrap()];
    let lut = vec![255u8; KSUB * m_pad];
    for &t in &tiers {
        let mut s = vec![0f32; 32];
        pq4::score_isa(t, &codes, m_pad, 32, &lut, 1.0, 0.0, None, &mut s).unwrap();
        assert!(s.iter().all(|&v| v == (255 * MAX_M) as f32), "{t:?}");
    }
}

#[test]
fn runs_inside_larger_rows_and_tail_blocks() {
    let tiers = common::tiers::for_this_test();
    let mut rng = SplitMix64::new(0x7a11);
    for &m in &[3usize, 16, 32, 64] {
        let nrows = 32 * 5 + 11;
        let codes = codes_random(&mut rng, nrows * m);
        let rows = Pq4Rows::from_codes(&codes, nrows, m).unwrap();
        let lut_bytes = bytes_random(&mut rng, KSUB * m);
        let lut = Pq4Lut::from_parts(m, &lut_bytes, 0.25, 1.5).unwrap();
        let all = reference(&codes, nrows, m, &lut_bytes);
        let bias: Vec<f32> = (0..nrows).map(|_| rng.next_normal() as f32).collect();
        for first in (0..nrows).step_by(BLOCK) {
            for n in [0, 1, 31, 32, 33, nrows - first] {
                if first + n > nrows {
                    continue;
                }
                for &t in &tiers {
                    let mut out = vec![0u32; n];
                    rows.acc_run_isa(t, first, n, &lut, &mut out).unwrap();
                    assert_eq!(out, all[first..first + n], "{t:?} m {m} run {first}+{n}");
                    let mut s = vec![0f32; n];
                    rows.score_run_isa(t, first, n, &lut, Some(&bias[first..]), &mut s)
                        .unwrap();
                    for i in 0..n {
                        let want = all[first + i] as f32 * 0.25 + 1.5 + bias[first + i];
                        assert_eq!(s[i].to_bits(), want.to_bits(), "{t:?} m {m} row {i}");
                    }
                }
            }
        }
    }
}

#[test]
fn pack_unpack_and_encode_decode_round_trip() {
    let mut rng = SplitMix64::new(0xc0de);
    for &m in &[1usize, 2, 3, 8, 33, 64] {
        for &nrows in &[0usize, 1, 31, 32, 33, 70] {
            let codes = codes_random(&mut rng, nrows * m);
            let rows = Pq4Rows::from_codes(&codes, nrows, m).unwrap();
            assert_eq!(rows.rows(), nrows);
            assert_eq!(rows.m_pad(), m_pad_of(m));
            let mut back = vec![0u8; m];
            for r in 0..nrows {
                rows.row_codes(r, &mut back);
                assert_eq!(back, codes[r * m..(r + 1) * m], "m {m} row {r}");
            }
            // padding codes (rows and the extra sub-quantiser) are 0
            let m_pad = rows.m_pad();
            for r in 0..nrows.div_ceil(BLOCK) * BLOCK {
                for j in 0..m_pad {
                    if r >= nrows || j >= m {
                        assert_eq!(pq4::nibble_at(rows.packed(), m_pad, r, j), 0);
                    }
                }
            }
        }
    }
    // encode / decode with a trained codebook
    let (dim, n) = (24, 300);
    let data: Vec<f32> = (0..n * dim).map(|_| rng.next_normal() as f32).collect();
    for &m in &[3usize, 6, 12, 24] {
        let cb = Codebook::train(&data, n, dim, dim, m, &TrainParams::default()).unwrap();
        let rows = cb.encode(&data, n, dim).unwrap();
        let (mut c, mut x, mut c2) = (vec![0u8; m], vec![0f32; dim], vec![0u8; m]);
        for r in 0..n {
            rows.row_codes(r, &mut c);
            cb.encode_row(&data[r * dim..(r + 1) * dim], &mut c2);
            assert_eq!(c, c2);
            // each code is the nearest centroid of its sub-space
            let ds = cb.dsub();
            for j in 0..m {
                let xs = &data[r * dim + j * ds..r * dim + (j + 1) * ds];
                let d = |k: usize| -> f64 {
                    xs.iter()
                        .zip(cb.centroid(j, k))
                        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                        .sum()
                };
                let best = (0..KSUB).map(d).fold(f64::INFINITY, f64::min);
                assert!(
                    d(c[j] as usize) <= best * (1.0 + 1e-5) + 1e-12,
                    "row {r} sub {j}"
                );
            }
            // decoding then encoding again gives the same codes
            cb.decode_row(&c, &mut x);
            cb.encode_row(&x, &mut c2);
            assert_eq!(c, c2, "decode/encode row {r}");
        }
    }
}

/// `(||r||^2, r . x)` of row `x` and its decoded codes, in f64.
fn residual(cb: &Codebook, x: &[f32], codes: &[u8]) -> (f64, f64) {
    let mut xh = vec![0f32; x.len()];
    cb.decode_row(codes, &mut xh);
    x.iter().zip(&xh).fold((0.0, 0.0), |(rr, rx), (&a, &b)| {
        let d = a as f64 - b as f64;
        (rr + d * d, rx + d * a as f64)
    })
}

#[test]
fn anisotropic_encoding_lowers_the_parallel_error() {
    let mut rng = SplitMix64::new(0xa150);
    let (dim, n, m) = (32, 400, 16);
    let data: Vec<f32> = (0..n * dim).map(|_| rng.next_normal() as f32).collect();
    let cb = Codebook::train(&data, n, dim, dim, m, &TrainParams::default()).unwrap();
    let (mut plain, mut aniso) = (vec![0u8; m], vec![0u8; m]);
    let a = Anisotropic {
        eta: 8.0,
        sweeps: 4,
    };
    let (mut par_plain, mut par_aniso, mut changed) = (0.0f64, 0.0f64, 0);
    for r in 0..n {
        let x = &data[r * dim..(r + 1) * dim];
        cb.encode_row(x, &mut plain);
        // eta = 1: the plain codes
        cb.encode_row_anisotropic(
            x,
            Anisotropic {
                eta: 1.0,
                sweeps: 4,
            },
            &mut aniso,
        );
        assert_eq!(aniso, plain);
        cb.encode_row_anisotropic(x, a, &mut aniso);
        let xx: f64 = x.iter().map(|&v| (v as f64).powi(2)).sum();
        let loss = |(rr, rx): (f64, f64)| rr + (a.eta as f64 - 1.0) * rx * rx / xx;
        let (lp, la) = (residual(&cb, x, &plain), residual(&cb, x, &aniso));
        assert!(
            loss(la) <= loss(lp) * (1.0 + 1e-12),
            "row {r}: anisotropic loss {} > plain {}",
            loss(la),
            loss(lp)
        );
        par_plain += lp.1 * lp.1 / xx;
        par_aniso += la.1 * la.1 / xx;
        changed += (aniso != plain) as usize;
    }
    println!(
        "rows re-coded: {changed}/{n}; mean parallel error^2: plain {:.4}, anisotropic {:.4}",
        par_plain / n as f64,
        par_aniso / n as f64
    );
    assert!(changed > 0);
    assert!(par_aniso < 0.5 * par_plain, "{par_aniso} vs {par_plain}");
    // encode_with matches the per-row codes; eta < 1 is rejected
    let rows = cb.encode_with(&data, n, dim, Some(a)).unwrap();
    for r in 0..n {
        cb.encode_row_anisotropic(&data[r * dim..(r + 1) * dim], a, &mut aniso);
        rows.row_codes(r, &mut plain);
        assert_eq!(plain, aniso);
    }
    let bad = Anisotropic {
        eta: 0.5,
        sweeps: 1,
    };
    assert_eq!(
        cb.encode_with(&data, n, dim, Some(bad)).unwrap_err().status,
        Status::InvalidArgument
    );
}

/// `sum_j |a_j b_j|` and `sum_j a_j b_j` in f64.
fn dot64(a: &[f32], b: &[f32]) -> (f64, f64) {
    a.iter().zip(b).fold((0.0, 0.0), |(s, t), (&x, &y)| {
        let p = x as f64 * y as f64;
        (s + p.abs(), t + p)
    })
}

#[test]
fn approximate_scores_are_within_the_documented_bound() {
    let tiers = common::tiers::for_this_test();
    let mut rng = SplitMix64::new(0xb0d);
    let (dim, n) = (64, 500);
    // rows with some structure: a few directions plus noise, and a bias
    let basis: Vec<f32> = (0..8 * dim).map(|_| rng.next_normal() as f32).collect();
    let mut data = vec![0f32; n * dim];
    for r in 0..n {
        let coef: Vec<f32> = (0..8).map(|_| rng.next_normal() as f32).collect();
        for k in 0..dim {
            let mut v = 0.3 * rng.next_normal() as f32;
            for (b, &c) in coef.iter().enumerate() {
                v += c * basis[b * dim + k] * 0.3;
            }
            data[r * dim + k] = v;
        }
    }
    let bias: Vec<f32> = (0..n).map(|_| rng.next_normal() as f32).collect();
    for &m in &[dim / 2, dim / 4, dim / 8] {
        let cb = Codebook::train(&data, n, dim, dim, m, &TrainParams::default()).unwrap();
        let rows = cb.encode(&data, n, dim).unwrap();
        let mut lut = Pq4Lut::new(m).unwrap();
        let mut worst = 0.0f64;
        for qi in 0..20 {
            let scale = [1.0, 1e-3, 1e3, 0.0][qi % 4];
            let q: Vec<f32> = (0..dim)
                .map(|_| (rng.next_normal() * scale) as f32)
                .collect();
            lut.set(&cb, &q).unwrap();
            let (delta, offset) = (lut.delta() as f64, lut.offset() as f64);
            // sum_m |o_m| from the f64 tables (for the rounding of O)
            let osum_abs: f64 = (0..m)
                .map(|j| {
                    let qs = &q[j * cb.dsub()..(j + 1) * cb.dsub()];
                    (0..KSUB)
                        .map(|c| dot64(qs, cb.centroid(j, c)).1)
                        .fold(f64::INFINITY, f64::min)
                        .abs()
                })
                .sum();
            let qn = q.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
            let mut acc = vec![0u32; n];
            rows.acc_run_isa(Isa::Scalar, 0, n, &lut, &mut acc).unwrap();
            let (mut c, mut xh) = (vec![0u8; m], vec![0f32; dim]);
            for &t in &tiers {
                let mut s = vec![0f32; n];
                rows.score_run_isa(t, 0, n, &lut, Some(&bias), &mut s)
                    .unwrap();
                for r in 0..n {
                    rows.row_codes(r, &mut c);
                    cb.decode_row(&c, &mut xh);
                    let x = &data[r * dim..(r + 1) * dim];
                    let (abs_h, ip_h) = dot64(&q, &xh);
                    let b = bias[r] as f64;
                    let f32_err =
                        gamma(3) * (delta * acc[r] as f64 + offset.abs() + b.abs()) + U * osum_abs;
                    let e64 = 1e-12 * (abs_h + osum_abs);
                    let bound = lut.bound() + f32_err + e64;
                    assert!(lut.bound() <= m as f64 * delta * H * (1.0 + 1e-12));
                    let err = (s[r] as f64 - (ip_h + b)).abs();
                    assert!(
                        err <= bound,
                        "{t:?} m {m} q {qi} row {r}: |{} - {}| = {err:e} > {bound:e}",
                        s[r],
                        ip_h + b
                    );
                    worst = worst.max(if bound > 0.0 { err / bound } else { 0.0 });
                    // against the exact inner product: + ||q|| ||x - x^||
                    let resid = x
                        .iter()
                        .zip(&xh)
                        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    let (_, ip) = dot64(&q, x);
                    let err = (s[r] as f64 - (ip + b)).abs();
                    let bound2 = bound + qn * resid * (1.0 + 1e-9) + 1e-12 * dot64(&q, x).0;
                    assert!(
                        err <= bound2,
                        "{t:?} m {m} q {qi} row {r}: exact {err:e} > {bound2:e}"
                    );
                }
            }
        }
        println!("m {m}: worst error / bound (PQ inner product) = {worst:.3}");
    }
}

#[test]
fn lut_quantisation_properties() {
    let mut rng = SplitMix64::new(0x117);
    for &m in &[1usize, 5, 64] {
        let tables: Vec<f64> = (0..KSUB * m).map(|_| rng.next_normal() * 10.0).collect();
        let mut lut = Pq4Lut::new(m).unwrap();
        lut.set_tables(&tables).unwrap();
        let delta = lut.delta() as f64;
        let mut osum = 0.0;
        let mut max_byte = 0u8;
        for j in 0..m {
            let t = &tables[KSUB * j..KSUB * (j + 1)];
            let lo = t.iter().cloned().fold(f64::INFINITY, f64::min);
            osum += lo;
            for (c, &tc) in t.iter().enumerate() {
                let b = lut.bytes()[KSUB * j + c];
                max_byte = max_byte.max(b);
                // each entry within Delta h of its table value
                assert!(
                    (tc - lo - delta * b as f64).abs() <= delta * H,
                    "m {m} {j} {c}"
                );
                // exactly the rounding of the module documentation
                let want = (((tc - lo) * (1.0 / delta) + 0.5) as u32).min(255);
                assert_eq!(b as u32, want, "m {m} {j} {c}");
                // the minimum of each sub-space is byte 0
                if tc == lo {
                    assert_eq!(b, 0);
                }
            }
        }
        assert_eq!(max_byte, 255, "the widest sub-space uses the full range");
        assert_eq!(lut.offset(), osum as f32);
        assert!(
            lut.bytes()[KSUB * m..].iter().all(|&b| b == 0),
            "padding table"
        );
    }
    // `set` (tables from a codebook) equals `set_tables` on the f64 inner
    // products summed in order
    let (dim, m) = (48, 12);
    let data: Vec<f32> = (0..64 * dim).map(|_| rng.next_normal() as f32).collect();
    let cb = Codebook::train(&data, 64, dim, dim, m, &TrainParams::default()).unwrap();
    let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
    let ds = cb.dsub();
    let tables: Vec<f64> = (0..m)
        .flat_map(|j| {
            let qs = &q[j * ds..(j + 1) * ds];
            (0..KSUB)
                .map(|c| {
                    qs.iter()
                        .zip(cb.centroid(j, c))
                        .fold(0.0f64, |s, (&a, &b)| s + a as f64 * b as f64)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let (mut a, mut b) = (Pq4Lut::new(m).unwrap(), Pq4Lut::new(m).unwrap());
    a.set(&cb, &q).unwrap();
    b.set_tables(&tables).unwrap();
    assert_eq!(a.bytes(), b.bytes());
    assert_eq!(a.delta().to_bits(), b.delta().to_bits());
    assert_eq!(a.offset().to_bits(), b.offset().to_bits());
    // constant tables: Delta 0, bytes 0, the offset carries the value
    let mut lut = Pq4Lut::new(3).unwrap();
    lut.set_tables(&[2.0; 48]).unwrap();
    assert_eq!(lut.delta(), 0.0);
    assert!(lut.bytes().iter().all(|&b| b == 0));
    assert_eq!(lut.offset(), 6.0);
    // errors leave the table unchanged
    let before = lut.bytes().to_vec();
    let mut bad = vec![1.0; 48];
    bad[7] = f64::NAN;
    assert_eq!(lut.set_tables(&bad).unwrap_err().status, Status::NonFinite);
    assert_eq!(
        lut.set_tables(&[1.0; 47]).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(lut.bytes(), &before[..]);
    assert_eq!(lut.offset(), 6.0);
}

/// The seeded data of the golden test: `n` rows of `dim` normals, scaled
/// per coordinate so that sub-spaces differ.
fn golden_data(n: usize, dim: usize) -> Vec<f32> {
    let mut rng = SplitMix64::new(0x601d);
    (0..n * dim)
        .map(|i| (rng.next_normal() * (1.0 + (i % dim) as f64 / 8.0)) as f32)
        .collect()
}

fn training_checksum(cb: &Codebook, rows: &Pq4Rows) -> u32 {
    let bits: Vec<u8> = cb
        .centroids()
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .collect();
    crc32c(crc32c(0, &bits), rows.packed())
}

#[test]
fn seeded_training_is_deterministic_golden_checksum() {
    let (n, dim, m) = (2000, 32, 16);
    let data = golden_data(n, dim);
    let p = TrainParams {
        iters: 20,
        seed: 42,
        max_train_rows: 1000,
        threads: 1,
    };
    let cb = Codebook::train(&data, n, dim, dim, m, &p).unwrap();
    let rows = cb.encode(&data, n, dim).unwrap();
    let sum = training_checksum(&cb, &rows);
    // the same call again, on 2, 3 and every core too, and a different seed
    for threads in [1, 2, 3, 0] {
        let cb2 = Codebook::train(&data, n, dim, dim, m, &TrainParams { threads, ..p }).unwrap();
        assert_eq!(
            training_checksum(&cb2, &cb2.encode(&data, n, dim).unwrap()),
            sum,
            "{threads} threads"
        );
    }
    let cb3 = Codebook::train(&data, n, dim, dim, m, &TrainParams { seed: 43, ..p }).unwrap();
    assert_ne!(cb3.centroids(), cb.centroids());
    println!("golden checksum: {sum:#010x}");
    println!("first centroid: {:?}", cb.centroid(0, 0));
    // Frozen: training is plain f32 / f64 arithmetic in a fixed order with
    // the SplitMix64 draws of src/rng.rs, so every machine and tier gets
    // these bits. A change here is a change of the trained codebooks.
    assert_eq!(sum, GOLDEN, "golden training checksum changed");
}

const GOLDEN: u32 = 0x9000_8812;

#[test]
fn argument_errors() {
    let lut = vec![0u8; KSUB * 4];
    let codes = vec![0u8; run_bytes(4, 33).unwrap()];
    let mut out = vec![0u32; 33];
    let st = |r: lshk::Result<()>| r.unwrap_err().status;
    for m_pad in [0, 1, 3, MAX_M + 2] {
        assert_eq!(
            st(pq4::accumulate(&codes, m_pad, 1, &lut, &mut out)),
            Status::InvalidArgument,
            "m_pad {m_pad}"
        );
    }
    assert_eq!(
        st(pq4::accumulate(
            &codes[..codes.len() - 1],
            4,
            33,
            &lut,
            &mut out
        )),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(pq4::accumulate(&codes, 4, 33, &lut[..63], &mut out)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(pq4::accumulate(&codes, 4, 33, &lut, &mut out[..32])),
        Status::BufferTooSmall
    );
    let mut s = vec![0f32; 33];
    assert_eq!(
        st(pq4::score(
            &codes,
            4,
            33,
            &lut,
            1.0,
            0.0,
            Some(&[0.0; 32]),
            &mut s
        )),
        Status::BufferTooSmall
    );
    // packing: a code above 15, m out of range
    let mut packed = vec![0u8; run_bytes(2, 1).unwrap()];
    assert_eq!(
        st(pack_codes(&[1, 16], 1, 2, &mut packed)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(pack_codes(&[], 1, 0, &mut packed)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(pack_codes(&[1, 2], 1, 2, &mut packed[..31])),
        Status::BufferTooSmall
    );
    // runs: out of range, not on a block, wrong table
    let rows = Pq4Rows::from_codes(&[3u8; 40 * 4], 40, 4).unwrap();
    let l4 = Pq4Lut::new(4).unwrap();
    let mut o = vec![0u32; 40];
    assert_eq!(
        st(rows.acc_run(32, 9, &l4, &mut o)),
        Status::IndexOutOfRange
    );
    assert_eq!(st(rows.acc_run(1, 3, &l4, &mut o)), Status::InvalidArgument);
    assert_eq!(
        st(rows.acc_run(0, 3, &Pq4Lut::new(5).unwrap(), &mut o)),
        Status::InvalidArgument
    );
    // codebook shapes and data
    let data = vec![0.5f32; 16 * 8];
    assert_eq!(
        Codebook::train(&data, 16, 8, 8, 3, &TrainParams::default())
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    assert_eq!(
        Codebook::train(&data, 15, 8, 8, 4, &TrainParams::default())
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    let mut nan = data.clone();
    nan[20] = f32::NAN;
    assert_eq!(
        Codebook::train(&nan, 16, 8, 8, 4, &TrainParams::default())
            .unwrap_err()
            .status,
        Status::NonFinite
    );
    // identical rows: training still succeeds (empty clusters stay put)
    let cb = Codebook::train(&data, 16, 8, 8, 4, &TrainParams::default()).unwrap();
    assert!(cb.centroids().iter().all(|v| v.is_finite()));
    // every tier the CPU lacks is an error, never a crash
    for t in Isa::ALL {
        let r = pq4::accumulate_isa(t, &codes, 4, 33, &lut, &mut out);
        if Isa::supported().any(|s| s == t) {
            r.unwrap();
        } else {
            assert_eq!(st(r), Status::UnsupportedIsa);
        }
    }
}
