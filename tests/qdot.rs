//! Quantised int8 scoring (`lshk::qdot`): every kernel variant this CPU
//! runs against the scalar oracle (exact: integers equal, scores bit for
//! bit), the quantisation's properties and golden values, the derived
//! error bound against f64, argument errors, and the streaming `matmul::TopK` (the
//! re-rank shortlist) against a full sort.
//!
//! The bounds are derived in `src/quant/qdot/mod.rs`: each stored element is within
//! `h = 1/2 + 2^-17` code units of the float (`|w - s c| <= s h`,
//! `|q - t k| <= t h`), hence `|dot(w, q) - s t I| <= s t h (sum|c| +
//! sum|k| + h dim)`, and the f32 score adds `gamma(4) (s t |I| + |b|)`.

mod common;

use lshk::matmul::TopK;
use lshk::qdot::{
    self, dim_pad_of, qdot_u8i8_with, qscore_u8i8_with, quantize_query, quantize_rows,
    quantize_rows_with, QQuery, QRows, Variant, H, MAX_DIM_PAD,
};
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

const U: f64 = 1.0 / 16_777_216.0; // 2^-24

fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// The variants of every tier this test runs (the shared tier list:
/// printed, and under CI no tier the CPU has may be left out): every
/// variant of each tier, so on an AVX-512 VNNI CPU both the `vpdpbusd`
/// kernels and the plain AVX-512 ones (`vpmaddubsw` + `vpmaddwd`, which
/// the dispatcher picks on AVX-512 CPUs without VNNI) run.
fn variants() -> Vec<Variant> {
    let tiers = common::tiers::for_this_test();
    let v: Vec<Variant> = Variant::all()
        .into_iter()
        .filter(|x| tiers.contains(&x.tier()))
        .collect();
    for t in &tiers {
        assert!(
            v.iter().any(|x| x.tier() == *t),
            "no qdot variant for tier {t:?}"
        );
    }
    println!(
        "variants run: {:?}",
        v.iter().map(|x| x.name()).collect::<Vec<_>>()
    );
    v
}

fn scalar() -> Variant {
    Variant::of(Isa::Scalar).unwrap()
}

fn codes_random(rng: &mut SplitMix64, n: usize) -> Vec<i8> {
    (0..n).map(|_| rng.below(256) as i64 as i8).collect()
}

/// Query bytes in 0..=127 (the kernel's whole valid range).
fn q_random(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(128) as u8).collect()
}

fn sums_of(codes: &[i8], dim_pad: usize, nrows: usize) -> Vec<i32> {
    (0..nrows)
        .map(|r| {
            codes[r * dim_pad..(r + 1) * dim_pad]
                .iter()
                .map(|&c| c as i32)
                .sum()
        })
        .collect()
}

/// `sum_j q_j c_j - 64 sum_j c_j` in i64 (the definition, independent of
/// every tier).
fn reference(codes: &[i8], dim_pad: usize, nrows: usize, q: &[u8]) -> Vec<i64> {
    (0..nrows)
        .map(|r| {
            codes[r * dim_pad..(r + 1) * dim_pad]
                .iter()
                .zip(q)
                .map(|(&c, &u)| (u as i64 - 64) * c as i64)
                .sum()
        })
        .collect()
}

const NROWS: [usize; 14] = [0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 33, 100];

/// Runs dot and score (with and without bias) on every variant for one
/// run (`codes` starting at any offset), checking against the i64
/// reference and the scalar tier bit for bit.
#[allow(clippy::too_many_arguments)]
fn check_all(
    vs: &[Variant],
    codes: &[i8],
    dim_pad: usize,
    nrows: usize,
    q: &[u8],
    sums: &[i32],
    scales: &[f32],
    bias: &[f32],
    scale_q: f32,
    what: &str,
) {
    let want = reference(codes, dim_pad, nrows, q);
    let mut ref_scores = vec![0f32; nrows];
    let mut ref_scores_b = vec![0f32; nrows];
    qscore_u8i8_with(
        scalar(),
        codes,
        dim_pad,
        nrows,
        q,
        scale_q,
        sums,
        scales,
        None,
        &mut ref_scores,
    )
    .unwrap();
    qscore_u8i8_with(
        scalar(),
        codes,
        dim_pad,
        nrows,
        q,
        scale_q,
        sums,
        scales,
        Some(bias),
        &mut ref_scores_b,
    )
    .unwrap();
    for r in 0..nrows {
        let d = want[r] as i32;
        let exp = d as f32 * (scales[r] * scale_q);
        assert_eq!(
            ref_scores[r].to_bits(),
            exp.to_bits(),
            "{what} scalar score"
        );
        assert_eq!(ref_scores_b[r].to_bits(), (exp + bias[r]).to_bits());
    }
    for &v in vs {
        // One extra output slot must stay untouched.
        let mut out = vec![i32::MIN; nrows + 1];
        qdot_u8i8_with(v, codes, dim_pad, nrows, q, sums, &mut out).unwrap();
        for r in 0..nrows {
            assert_eq!(
                out[r] as i64,
                want[r],
                "{what}: {} dot row {r} of {nrows}, dim_pad {dim_pad}",
                v.name()
            );
        }
        assert_eq!(
            out[nrows],
            i32::MIN,
            "{what}: {} wrote past nrows",
            v.name()
        );
        for (b, refs) in [(None, &ref_scores), (Some(bias), &ref_scores_b)] {
            let mut s = vec![f32::NAN; nrows + 1];
            qscore_u8i8_with(
                v, codes, dim_pad, nrows, q, scale_q, sums, scales, b, &mut s,
            )
            .unwrap();
            for r in 0..nrows {
                assert_eq!(
                    s[r].to_bits(),
                    refs[r].to_bits(),
                    "{what}: {} score row {r} (bias {}): {} vs {}",
                    v.name(),
                    b.is_some(),
                    s[r],
                    refs[r]
                );
            }
            assert!(s[nrows].is_nan());
        }
    }
}

#[test]
fn kernels_random_codes_every_variant() {
    let vs = variants();
    let mut rng = SplitMix64::new(1);
    for dim_pad in [64usize, 128, 192, 256, 320, 384, 512, 1024] {
        for &nrows in &NROWS {
            let codes = codes_random(&mut rng, nrows * dim_pad);
            let q = q_random(&mut rng, dim_pad);
            let sums = sums_of(&codes, dim_pad, nrows);
            let scales: Vec<f32> = (0..nrows)
                .map(|_| rng.next_f64_open() as f32 * 0.01)
                .collect();
            let bias: Vec<f32> = (0..nrows).map(|_| rng.next_normal() as f32).collect();
            check_all(
                &vs, &codes, dim_pad, nrows, &q, &sums, &scales, &bias, 0.03, "random",
            );
        }
    }
}

#[test]
fn kernels_unaligned_start() {
    let vs = variants();
    let mut rng = SplitMix64::new(2);
    for dim_pad in [64usize, 128, 320] {
        for off in [1usize, 3, 17, 31, 63] {
            let nrows = 13;
            let buf = codes_random(&mut rng, off + nrows * dim_pad + 5);
            let codes = &buf[off..off + nrows * dim_pad];
            let qbuf = q_random(&mut rng, dim_pad + off);
            let q = &qbuf[off..];
            let sums = sums_of(codes, dim_pad, nrows);
            let scales = vec![0.5f32; nrows];
            let bias = vec![0.25f32; nrows];
            check_all(
                &vs,
                codes,
                dim_pad,
                nrows,
                q,
                &sums,
                &scales,
                &bias,
                1.0,
                "unaligned",
            );
        }
    }
}

/// Codes at the extremes with every query byte 127: every `vpmaddubsw`
/// pair is at its largest (2 * 127 * 127 = 32258) or smallest
/// (2 * 127 * -128) value, which must not saturate.
#[test]
fn kernels_extremes_do_not_saturate() {
    let vs = variants();
    for dim_pad in [64usize, 128, 256, 1024, 4096] {
        let q = vec![127u8; dim_pad];
        for fill in [127i8, -127, -128] {
            for nrows in [1usize, 4, 5] {
                let codes = vec![fill; nrows * dim_pad];
                let sums = sums_of(&codes, dim_pad, nrows);
                let scales = vec![1.0f32; nrows];
                let bias = vec![0.0f32; nrows];
                check_all(
                    &vs, &codes, dim_pad, nrows, &q, &sums, &scales, &bias, 1.0, "extreme",
                );
                let want = 63i64 * fill as i64 * dim_pad as i64;
                let mut out = vec![0i32; nrows];
                for &v in &vs {
                    qdot_u8i8_with(v, &codes, dim_pad, nrows, &q, &sums, &mut out).unwrap();
                    assert!(out.iter().all(|&o| o as i64 == want), "{}", v.name());
                }
            }
        }
        // Alternating signs and the smallest query byte too.
        let codes: Vec<i8> = (0..4 * dim_pad)
            .map(|j| if j % 2 == 0 { 127 } else { -128 })
            .collect();
        let sums = sums_of(&codes, dim_pad, 4);
        for qb in [0u8, 1, 64, 127] {
            let q = vec![qb; dim_pad];
            check_all(
                &vs,
                &codes,
                dim_pad,
                4,
                &q,
                &sums,
                &[1.0; 4],
                &[0.0; 4],
                1.0,
                "alternating",
            );
        }
    }
    // The largest dim_pad: the i32 sums are near their limit but exact.
    let dim_pad = MAX_DIM_PAD;
    let codes = vec![127i8; 4 * dim_pad];
    let q = vec![127u8; dim_pad];
    let sums = sums_of(&codes, dim_pad, 4);
    check_all(
        &vs,
        &codes,
        dim_pad,
        4,
        &q,
        &sums,
        &[1.0; 4],
        &[0.0; 4],
        1.0,
        "max dim_pad",
    );
}

/// Every dim from 1 to 3 * 64 + 1 and a large one, through the real
/// quantisers and the `QRows` runs, on every variant.
#[test]
fn quantised_runs_every_dim_every_variant() {
    let vs = variants();
    let mut rng = SplitMix64::new(3);
    let dims: Vec<usize> = (1..=3 * 64 + 1).chain([1000]).collect();
    for &dim in &dims {
        let rows = 37;
        let w: Vec<f32> = (0..rows * dim).map(|_| rng.next_normal() as f32).collect();
        let qr = quantize_rows(&w, rows, dim, dim).unwrap();
        let mut qq = QQuery::new(qr.dim_pad()).unwrap();
        let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
        qq.set(&q).unwrap();
        let bias: Vec<f32> = (0..rows).map(|_| rng.next_normal() as f32).collect();
        for (first, n) in [(0usize, rows), (0, 0), (3, 1), (5, 9), (1, 36), (36, 1)] {
            let codes = &qr.codes()[first * qr.dim_pad()..(first + n) * qr.dim_pad()];
            check_all(
                &vs,
                codes,
                qr.dim_pad(),
                n,
                qq.codes(),
                &qr.sums()[first..first + n],
                &qr.scales()[first..first + n],
                &bias[..n],
                qq.scale(),
                &format!("dim {dim} run {first}+{n}"),
            );
            let mut want_i = vec![0i32; n];
            let mut want_s = vec![0f32; n];
            qr.dot_run_with(scalar(), first, n, &qq, &mut want_i)
                .unwrap();
            qr.score_run_with(scalar(), first, n, &qq, Some(&bias[..n]), &mut want_s)
                .unwrap();
            let refd = reference(codes, qr.dim_pad(), n, qq.codes());
            assert!(want_i.iter().zip(&refd).all(|(a, b)| *a as i64 == *b));
            for &v in &vs {
                let mut o = vec![0i32; n];
                let mut s = vec![0f32; n];
                qr.dot_run_with(v, first, n, &qq, &mut o).unwrap();
                qr.score_run_with(v, first, n, &qq, Some(&bias[..n]), &mut s)
                    .unwrap();
                assert_eq!(o, want_i, "{} dim {dim}", v.name());
                assert!(
                    s.iter()
                        .zip(&want_s)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{} dim {dim}",
                    v.name()
                );
            }
        }
        // The active-tier entries agree with the explicit ones.
        let mut a = vec![0f32; rows];
        let mut b = vec![0f32; rows];
        qr.score_run(0, rows, &qq, None, &mut a).unwrap();
        qr.score_run_with(scalar(), 0, rows, &qq, None, &mut b)
            .unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

// ------------------------------------------------------------ quantisation

#[test]
fn quantize_rows_properties() {
    let mut rng = SplitMix64::new(4);
    for dim in [1usize, 2, 63, 64, 65, 127, 128, 129, 200, 1000] {
        let rows = 9;
        let stride = dim + 3;
        let mut w: Vec<f32> = (0..rows * stride)
            .map(|_| (rng.next_normal() * 10f64.powi(rng.below(7) as i32 - 3)) as f32)
            .collect();
        // Row 2 all zero, row 4 a single non-zero, row 5 tiny values, row 6
        // with -0.0s.
        w[2 * stride..2 * stride + dim].fill(0.0);
        w[4 * stride..4 * stride + dim].fill(0.0);
        w[4 * stride + dim / 2] = -3.5;
        for v in &mut w[5 * stride..5 * stride + dim] {
            *v *= 1e-38;
        }
        w[6 * stride..6 * stride + dim].fill(-0.0);
        // Row 7 so small that its scale is subnormal.
        for v in &mut w[7 * stride..7 * stride + dim] {
            *v = (rng.next_normal() * 1e-41) as f32;
        }
        let qr = quantize_rows(&w, rows, dim, stride).unwrap();
        let dp = dim_pad_of(dim);
        assert_eq!(qr.dim_pad(), dp);
        assert_eq!(dp % 64, 0);
        assert!(dp >= dim && dp < dim + 64);
        assert_eq!((qr.rows(), qr.dim()), (rows, dim));
        assert_eq!(qr.codes().len(), rows * dp);
        assert_eq!(qr.codes().as_ptr() as usize % 64, 0, "codes not 64-aligned");
        assert_eq!(qr.memory_bytes(), rows * dp + rows * 8);
        for r in 0..rows {
            let row = &w[r * stride..r * stride + dim];
            let c = qr.row_codes(r);
            let s = qr.scales()[r];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(s, max / 127.0);
            assert!(c[dim..].iter().all(|&x| x == 0), "padding");
            assert!(c.iter().all(|&x| x != -128));
            assert_eq!(qr.sums()[r], c.iter().map(|&x| x as i32).sum::<i32>());
            if max == 0.0 {
                assert_eq!(s, 0.0);
                assert!(c.iter().all(|&x| x == 0));
                continue;
            }
            // With a subnormal scale only `2 max|w|` holds (documented).
            if s < f32::MIN_POSITIVE {
                for j in 0..dim {
                    let e = (row[j] as f64 - s as f64 * c[j] as f64).abs();
                    assert!(e <= 2.0 * max as f64, "row {r} col {j}: err {e}");
                }
                continue;
            }
            // The largest element maps to +-127.
            assert!(c[..dim].iter().any(|&x| x.abs() == 127), "row {r}");
            for j in 0..dim {
                let e = (row[j] as f64 - s as f64 * c[j] as f64).abs();
                assert!(
                    e <= s as f64 * H,
                    "dim {dim} row {r} col {j}: err {e}, scale {s}"
                );
                // Round to nearest: no other code is closer.
                let alt = (row[j] as f64 / s as f64).round().clamp(-127.0, 127.0);
                assert!((alt - c[j] as f64).abs() <= 1.0);
            }
        }
        // Row order, repeats and threads give the same bytes.
        let order: Vec<u32> = vec![8, 0, 2, 2, 5, 1];
        for threads in [0usize, 1, 2, 3, 7] {
            let qo = quantize_rows_with(&w, rows, dim, stride, Some(&order), threads).unwrap();
            assert_eq!(qo.rows(), order.len());
            for (i, &o) in order.iter().enumerate() {
                assert_eq!(qo.row_codes(i), qr.row_codes(o as usize));
                assert_eq!(qo.scales()[i].to_bits(), qr.scales()[o as usize].to_bits());
                assert_eq!(qo.sums()[i], qr.sums()[o as usize]);
            }
            let qt = quantize_rows_with(&w, rows, dim, stride, None, threads).unwrap();
            assert_eq!(qt.codes(), qr.codes());
            assert_eq!(qt.sums(), qr.sums());
        }
        // from_parts round trip.
        let back = QRows::from_parts(rows, dim, qr.codes(), qr.scales()).unwrap();
        assert_eq!(back.codes(), qr.codes());
        assert_eq!(back.sums(), qr.sums());
        assert_eq!(back.scales(), qr.scales());
        assert_eq!(back.codes().as_ptr() as usize % 64, 0);
    }
    // No rows at all.
    let e = quantize_rows(&[], 0, 5, 5).unwrap();
    assert_eq!((e.rows(), e.codes().len()), (0, 0));
}

#[test]
fn quantize_query_properties() {
    let mut rng = SplitMix64::new(5);
    for dim in [1usize, 7, 64, 65, 128, 129, 1000] {
        let dp = dim_pad_of(dim);
        let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
        let mut u = vec![0u8; dp + 3];
        let t = quantize_query(&q, dp, &mut u).unwrap();
        assert_eq!(u[dp..], [0, 0, 0], "wrote past dim_pad");
        let max = q.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert_eq!(t, max / 63.0);
        assert!(u[..dp].iter().all(|&b| (1..=127).contains(&b)));
        assert!(u[dim..dp].iter().all(|&b| b == 64), "padding");
        assert!(u[..dim].iter().any(|&b| b == 1 || b == 127));
        for j in 0..dim {
            let k = u[j] as f64 - 64.0;
            assert!((q[j] as f64 - t as f64 * k).abs() <= t as f64 * H);
        }
        // QQuery holds the same bytes, and a larger query dim_pad works.
        let mut qq = QQuery::new(dp).unwrap();
        qq.set(&q).unwrap();
        assert_eq!(qq.codes(), &u[..dp]);
        assert_eq!(qq.scale(), t);
        let mut big = vec![0u8; dp + 64];
        quantize_query(&q, dp + 64, &mut big).unwrap();
        assert_eq!(&big[..dp], &u[..dp]);
        assert!(big[dp..].iter().all(|&b| b == 64));
    }
    // Zero and empty queries.
    let mut u = vec![0u8; 64];
    assert_eq!(quantize_query(&[0.0, -0.0, 0.0], 64, &mut u).unwrap(), 0.0);
    assert!(u.iter().all(|&b| b == 64));
    u.fill(0);
    assert_eq!(quantize_query(&[], 64, &mut u).unwrap(), 0.0);
    assert!(u.iter().all(|&b| b == 64));
}

/// The query's bytes are, value by value, `round_ties_even(v / t)` clamped
/// to +-63 plus 64 with `t = max |v| / 63` (a true division): the
/// vectorised quantiser against that definition, on random queries, on
/// values at exact ties, with subnormal and huge scales, at every length
/// around the 16-value chunks; and a non-finite value anywhere is refused
/// with nothing written.
#[test]
fn quantize_query_matches_its_definition() {
    let reference = |q: &[f32], dp: usize| -> (f32, Vec<u8>) {
        let max = q.iter().fold(0f32, |m, v| m.max(v.abs()));
        let t = max / 63.0;
        let mut u = vec![64u8; dp];
        if t != 0.0 {
            for (d, &v) in u.iter_mut().zip(q) {
                *d = ((v / t).round_ties_even().clamp(-63.0, 63.0) as i32 + 64) as u8;
            }
        }
        (t, u)
    };
    let mut rng = SplitMix64::new(17);
    for dim in (1usize..=70).chain([127, 128, 129, 384, 1000]) {
        let dp = dim_pad_of(dim);
        for case in 0..6 {
            let q: Vec<f32> = (0..dim)
                .map(|j| {
                    let x = rng.next_normal() as f32;
                    match case {
                        // Exact halves of the scale 1: every value a tie.
                        1 => ((x * 20.0).round() + 0.5).clamp(-62.5, 62.5),
                        2 => x * 1e-41,
                        3 => x * 1e37,
                        4 if j == 0 => 63.0,
                        4 => (x * 30.0).round() / 2.0,
                        5 => -0.0,
                        _ => x,
                    }
                })
                .collect();
            let mut u = vec![0u8; dp];
            let t = quantize_query(&q, dp, &mut u).unwrap();
            let (rt, ru) = reference(&q, dp);
            assert_eq!(t.to_bits(), rt.to_bits(), "dim {dim} case {case}");
            assert_eq!(u, ru, "dim {dim} case {case}");
        }
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
            let at = dim / 2;
            q[at] = bad;
            let mut u = vec![7u8; dp];
            let e = quantize_query(&q, dp, &mut u).unwrap_err();
            assert_eq!(e.status, Status::NonFinite);
            assert!(e.message.contains(&format!("q[{at}]")), "{}", e.message);
            assert!(u.iter().all(|&b| b == 7), "written on error");
        }
    }
}

/// A tiny input worked out by hand (scales of exactly 1 and 2, ties to
/// even).
#[test]
fn golden_values() {
    #[rustfmt::skip]
    let w = [
        127.0f32, -63.5, 2.5, -0.4, 0.6, // scale 1: 127, -64, 2, 0, 1
        0.0, 0.0, 0.0, 0.0, 0.0, // zero row
        -254.0, 1.0, 3.0, 0.0, 7.0, // scale 2: -127, 0, 2, 0, 4
    ];
    let qr = quantize_rows(&w, 3, 5, 5).unwrap();
    assert_eq!(qr.dim_pad(), 64);
    assert_eq!(qr.scales(), &[1.0, 0.0, 2.0]);
    assert_eq!(&qr.row_codes(0)[..6], &[127, -64, 2, 0, 1, 0]);
    assert_eq!(&qr.row_codes(1)[..6], &[0; 6]);
    assert_eq!(&qr.row_codes(2)[..6], &[-127, 0, 2, 0, 4, 0]);
    assert_eq!(qr.sums(), &[66, 0, -121]);
    let q = [63.0f32, -31.5, 0.5, 10.0, -63.0]; // scale 1: 63, -32, 0, 10, -63
    let mut qq = QQuery::new(64).unwrap();
    qq.set(&q).unwrap();
    assert_eq!(qq.scale(), 1.0);
    assert_eq!(&qq.codes()[..6], &[127, 32, 64, 74, 1, 64]);
    // 127*63 + (-64)(-32) + 0 + 0 + 1*(-63) = 9986; -127*63 + 4*(-63) = -8253.
    for v in variants() {
        let mut d = [0i32; 3];
        qr.dot_run_with(v, 0, 3, &qq, &mut d).unwrap();
        assert_eq!(d, [9986, 0, -8253], "{}", v.name());
        let mut s = [0f32; 3];
        qr.score_run_with(v, 0, 3, &qq, Some(&[0.5, 1.0, -0.5]), &mut s)
            .unwrap();
        assert_eq!(s, [9986.5, 1.0, -16506.5], "{}", v.name());
    }
}

/// The derived bound of `src/quant/qdot/mod.rs`, against f64 dot products, for
/// several value distributions (including outliers, which make the scale
/// coarse).
#[test]
fn error_bound_holds() {
    let mut rng = SplitMix64::new(6);
    let mut worst = 0f64;
    for dim in [1usize, 3, 64, 100, 128, 384, 1000] {
        for dist in 0..4 {
            let rows = 50;
            let gen = |rng: &mut SplitMix64| -> f32 {
                let x = rng.next_normal();
                (match dist {
                    0 => x,
                    1 => x * 1e-20,
                    2 => x.powi(3) * 100.0, // heavy tails
                    _ => (rng.below(3) as f64 - 1.0) * 0.75,
                }) as f32
            };
            let w: Vec<f32> = (0..rows * dim).map(|_| gen(&mut rng)).collect();
            let bias: Vec<f32> = (0..rows).map(|_| gen(&mut rng)).collect();
            let qr = quantize_rows(&w, rows, dim, dim).unwrap();
            let q: Vec<f32> = (0..dim).map(|_| gen(&mut rng)).collect();
            let mut qq = QQuery::new(qr.dim_pad()).unwrap();
            qq.set(&q).unwrap();
            let (mut di, mut sc) = (vec![0i32; rows], vec![0f32; rows]);
            qr.dot_run(0, rows, &qq, &mut di).unwrap();
            qr.score_run(0, rows, &qq, Some(&bias), &mut sc).unwrap();
            let t = qq.scale() as f64;
            let ks: Vec<f64> = qq.codes()[..dim].iter().map(|&b| b as f64 - 64.0).collect();
            let sum_k: f64 = ks.iter().map(|k| k.abs()).sum();
            for r in 0..rows {
                let row = &w[r * dim..(r + 1) * dim];
                let exact: f64 = row.iter().zip(&q).map(|(a, b)| *a as f64 * *b as f64).sum();
                let abs_wq: f64 = row
                    .iter()
                    .zip(&q)
                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                    .sum();
                let f64_err = dim as f64 * f64::EPSILON * abs_wq;
                let s = qr.scales()[r] as f64;
                let sum_c: f64 = qr.row_codes(r)[..dim]
                    .iter()
                    .map(|&c| (c as f64).abs())
                    .sum();
                let approx = s * t * di[r] as f64;
                let bound = s * t * H * (sum_c + sum_k + H * dim as f64) + f64_err;
                let err = (exact - approx).abs();
                assert!(
                    err <= bound,
                    "dim {dim} dist {dist} row {r}: |{exact} - {approx}| = {err} > {bound}"
                );
                if bound > 0.0 {
                    worst = worst.max(err / bound);
                }
                // The f32 score against s t I + b.
                let want = approx + bias[r] as f64;
                let fb = gamma(4) * (approx.abs() + (bias[r] as f64).abs());
                assert!(
                    (sc[r] as f64 - want).abs() <= fb,
                    "dim {dim} dist {dist} row {r}: score {} vs {want}",
                    sc[r]
                );
            }
        }
    }
    println!("largest error / bound: {worst:.3}");
    assert!(
        worst > 0.01,
        "the bound is never approached: test too weak?"
    );
}

#[test]
fn non_finite_inputs_rejected() {
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut w = vec![1.0f32; 3 * 8];
        w[2 * 8 + 5] = bad;
        let e = quantize_rows(&w, 3, 8, 8).unwrap_err();
        assert_eq!(e.status, Status::NonFinite, "{e}");
        assert!(e.message.contains("w[2][5]"), "{e}");
        // Outside the rows' dim (stride padding): not looked at.
        let mut w2 = vec![1.0f32; 3 * 8];
        w2[7] = bad;
        quantize_rows(&w2, 3, 7, 8).unwrap();
        // Only the ordered rows are checked.
        quantize_rows_with(&w, 3, 8, 8, Some(&[0, 1]), 1).unwrap();
        let e = quantize_rows_with(&w, 3, 8, 8, Some(&[0, 2]), 1).unwrap_err();
        assert_eq!(e.status, Status::NonFinite);
        let mut u = vec![7u8; 64];
        let e = quantize_query(&[1.0, bad], 64, &mut u).unwrap_err();
        assert_eq!(e.status, Status::NonFinite);
        assert!(u.iter().all(|&b| b == 7), "written on error");
        let mut qq = QQuery::new(64).unwrap();
        qq.set(&[2.0, -1.0]).unwrap();
        let before = (qq.codes().to_vec(), qq.scale());
        assert_eq!(qq.set(&[bad]).unwrap_err().status, Status::NonFinite);
        assert_eq!((qq.codes().to_vec(), qq.scale()), before);
        let e = QRows::from_parts(1, 3, &[0; 64], &[bad]).unwrap_err();
        assert_eq!(e.status, Status::NonFinite);
    }
}

#[test]
fn argument_errors() {
    let codes = vec![0i8; 4 * 64];
    let q = vec![64u8; 128];
    let sums = vec![0i32; 4];
    let mut out = vec![0i32; 4];
    let mut outf = vec![0f32; 4];
    let st = |r: lshk::Result<()>| r.unwrap_err().status;
    for dp in [0usize, 32, 65, MAX_DIM_PAD + 64] {
        assert_eq!(
            st(qdot::qdot_u8i8(&codes, dp, 1, &q, &sums, &mut out)),
            Status::InvalidArgument
        );
    }
    assert_eq!(
        st(qdot::qdot_u8i8(&codes, 64, 5, &q, &sums, &mut out)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qdot::qdot_u8i8(&codes, 64, 4, &q, &sums[..3], &mut out)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qdot::qdot_u8i8(&codes, 64, 4, &q, &sums, &mut out[..3])),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qdot::qdot_u8i8(&codes, 128, 2, &q[..64], &sums, &mut out)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qdot::qdot_u8i8(
            &codes,
            usize::MAX / 64 * 64,
            2,
            &q,
            &sums,
            &mut out
        )),
        Status::InvalidArgument
    );
    let mut badq = q.clone();
    badq[10] = 128;
    let e = qdot::qdot_u8i8(&codes, 64, 4, &badq, &sums, &mut out).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("byte 10"), "{e}");
    // A bad byte beyond dim_pad is not read.
    badq[10] = 64;
    badq[100] = 200;
    qdot::qdot_u8i8(&codes, 64, 4, &badq, &sums, &mut out).unwrap();
    let scales = vec![1.0f32; 4];
    assert_eq!(
        st(qdot::qscore_u8i8(
            &codes,
            64,
            4,
            &q,
            1.0,
            &sums,
            &scales[..3],
            None,
            &mut outf
        )),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qdot::qscore_u8i8(
            &codes,
            64,
            4,
            &q,
            1.0,
            &sums,
            &scales,
            Some(&scales[..2]),
            &mut outf
        )),
        Status::BufferTooSmall
    );
    for t in Isa::ALL {
        let r = qdot::qdot_u8i8_isa(t, &codes, 64, 4, &q, &sums, &mut out);
        if lshk::isa::check_supported(t).is_ok() {
            r.unwrap();
        } else {
            assert_eq!(st(r), Status::UnsupportedIsa);
            assert!(Variant::of(t).is_err());
        }
    }
    // Quantisers and QRows runs.
    let w = vec![1.0f32; 10];
    assert_eq!(
        quantize_rows(&w, 2, 0, 5).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        quantize_rows(&w, 2, 6, 5).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        quantize_rows(&w, 3, 5, 5).unwrap_err().status,
        Status::BufferTooSmall
    );
    assert_eq!(
        quantize_rows_with(&w, 2, 5, 5, Some(&[0, 2]), 1)
            .unwrap_err()
            .status,
        Status::IndexOutOfRange
    );
    let mut u = vec![0u8; 64];
    assert_eq!(
        quantize_query(&[1.0; 65], 64, &mut u).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        quantize_query(&[1.0; 3], 64, &mut u[..63])
            .unwrap_err()
            .status,
        Status::BufferTooSmall
    );
    assert_eq!(
        QQuery::new(100).unwrap_err().status,
        Status::InvalidArgument
    );
    let qr = quantize_rows(&w, 2, 5, 5).unwrap();
    let qq = QQuery::new(64).unwrap();
    let mut o = vec![0i32; 3];
    assert_eq!(st(qr.dot_run(1, 2, &qq, &mut o)), Status::IndexOutOfRange);
    assert_eq!(
        st(qr.dot_run(usize::MAX, 2, &qq, &mut o)),
        Status::IndexOutOfRange
    );
    assert_eq!(
        st(qr.dot_run(0, 2, &qq, &mut o[..1])),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(qr.dot_run(0, 2, &QQuery::new(128).unwrap(), &mut o)),
        Status::InvalidArgument
    );
    let mut of = vec![0f32; 2];
    assert_eq!(
        st(qr.score_run(0, 2, &qq, Some(&[1.0]), &mut of)),
        Status::BufferTooSmall
    );
    // from_parts rejects bad parts.
    let mut c = qr.codes().to_vec();
    assert_eq!(
        QRows::from_parts(2, 5, &c[..64], qr.scales())
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    c[3] = -128;
    assert_eq!(
        QRows::from_parts(2, 5, &c, qr.scales()).unwrap_err().status,
        Status::InvalidArgument
    );
    c[3] = 0;
    c[64 + 5] = 1; // padding of row 1
    assert_eq!(
        QRows::from_parts(2, 5, &c, qr.scales()).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        QRows::from_parts(2, 5, qr.codes(), &[1.0, -1.0])
            .unwrap_err()
            .status,
        Status::NonFinite
    );
}

// ------------------------------------------------------------ top-R

/// The reference: every non-NaN pair sorted by (score desc, id asc), first r.
fn top_by_sort(items: &[(f32, u32)], r: usize) -> Vec<(f32, u32)> {
    let mut v: Vec<(f32, u32)> = items.iter().copied().filter(|x| !x.0.is_nan()).collect();
    v.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
    v.truncate(r);
    v
}

fn same(a: &[(f32, u32)], b: &[(f32, u32)]) -> bool {
    // -0.0 and +0.0 rank equal; compare scores by value.
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1 == y.1)
}

#[test]
#[allow(clippy::needless_range_loop)]
fn topk_stream_matches_full_sort() {
    let mut rng = SplitMix64::new(7);
    let mut t = TopK::new();
    for case in 0..400 {
        let n = rng.below(3000) as usize;
        let r = match case % 5 {
            0 => 0,
            1 => 1,
            2 => rng.below(20) as usize + 1,
            3 => rng.below(500) as usize + 1,
            _ => n + rng.below(5) as usize,
        };
        // Few distinct scores (many ties), NaNs, infinities and +-0.
        let distinct = 1 + rng.below(if case % 2 == 0 { 8 } else { 100_000 });
        let scores: Vec<f32> = (0..n)
            .map(|_| match rng.below(50) {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                _ => rng.below(distinct) as f32 - distinct as f32 / 2.0,
            })
            .collect();
        // Ids: runs of consecutive ids, in a shuffled run order.
        let first = rng.below(1000) as u32;
        let mut items = Vec::new();
        t.clear();
        let mut pos = 0;
        let mut runs = Vec::new();
        while pos < n {
            let len = (1 + rng.below(40) as usize).min(n - pos);
            runs.push((pos, len));
            pos += len;
        }
        rng.shuffle(&mut runs);
        let mut thresholds_ok = true;
        for &(p, len) in &runs {
            if rng.below(2) == 0 {
                t.offer_run(&scores[p..p + len], first + p as u32, r);
            } else {
                for i in p..p + len {
                    t.offer(scores[i], first + i as u32, r);
                }
            }
            for i in p..p + len {
                items.push((scores[i], first + i as u32));
            }
            // The threshold never exceeds the true R-th best so far.
            let so_far = top_by_sort(&items, r);
            if r > 0 && so_far.len() == r && t.threshold() > so_far[r - 1].0 {
                thresholds_ok = false;
            }
        }
        assert!(thresholds_ok, "case {case}: threshold above the R-th best");
        let want = top_by_sort(&items, r);
        let got: Vec<(f32, u32)> = t.best(r).collect();
        assert!(
            same(&got, &want),
            "case {case} n {n} r {r}: {got:?} vs {want:?}"
        );
        // best is repeatable and offering afterwards still works.
        assert!(same(&t.best(r).collect::<Vec<_>>(), &want));
        t.offer(f32::MAX, 0, r);
        items.push((f32::MAX, 0));
        assert!(same(
            &t.best(r).collect::<Vec<_>>(),
            &top_by_sort(&items, r)
        ));
    }
}

#[test]
fn topk_stream_edges() {
    let best = |t: &mut TopK, k| t.best(k).collect::<Vec<_>>();
    let mut t = TopK::new();
    assert!(best(&mut t, 3).is_empty());
    assert_eq!(t.threshold(), f32::NEG_INFINITY);
    t.offer_run(&[f32::NAN; 20], 0, 3);
    assert!(best(&mut t, 3).is_empty());
    t.offer_run(&[1.0, 1.0, 1.0, 1.0, 1.0], 10, 3);
    assert_eq!(best(&mut t, 3), [(1.0, 10), (1.0, 11), (1.0, 12)]);
    // The ids reach u32::MAX exactly.
    t.clear();
    t.offer_run(&[5.0, 6.0, 7.0], u32::MAX - 2, 2);
    assert_eq!(best(&mut t, 2), [(7.0, u32::MAX), (6.0, u32::MAX - 1)]);
    // -0.0 ties with 0.0 (by id) and keeps its own bits.
    t.clear();
    t.offer_run(&[0.0, -0.0, 0.0], 4, 2);
    let b = best(&mut t, 2);
    assert_eq!((b[0].1, b[1].1), (4, 5));
    assert_eq!(b[1].0.to_bits(), (-0.0f32).to_bits());
    let mut z = TopK::new();
    z.offer(f32::INFINITY, 0, 0);
    z.offer_run(&[1.0; 9], 0, 0);
    assert!(best(&mut z, 0).is_empty());
}

#[test]
#[should_panic(expected = "overflow u32")]
fn topk_stream_id_overflow_panics() {
    let mut t = TopK::new();
    t.offer_run(&[1.0, 2.0], u32::MAX, 2);
}

/// `QRows::score_rows_at` (the re-scoring stage of `ivf::Codes::Pq4I8`):
/// every position, in any order and with repeats, scores bit for bit as
/// the one-row run at that position, on every variant, with and without a
/// bias indexed by row; bad positions, a short bias or a short output are
/// refused before anything is written.
#[test]
fn gathered_rows_score_as_their_runs() {
    let vs = variants();
    let mut rng = SplitMix64::new(41);
    for dim in [1usize, 63, 128, 200, 384, 1000] {
        let rows = 300;
        let w: Vec<f32> = (0..rows * dim).map(|_| rng.next_normal() as f32).collect();
        let qr = quantize_rows(&w, rows, dim, dim).unwrap();
        let mut qq = QQuery::new(qr.dim_pad()).unwrap();
        let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
        qq.set(&q).unwrap();
        let bias: Vec<f32> = (0..rows).map(|_| rng.next_normal() as f32).collect();
        // Scattered, repeated, first and last rows; longer than the
        // prefetch distance and shorter than it.
        let mut pos: Vec<u32> = (0..150)
            .map(|_| (rng.next_u64() % rows as u64) as u32)
            .collect();
        pos.extend([0, rows as u32 - 1, 7, 7]);
        for &v in &vs {
            for b in [None, Some(&bias[..])] {
                for p in [&pos[..], &pos[..3], &pos[..4], &pos[..7], &[][..]] {
                    let mut got = vec![f32::NAN; p.len()];
                    qr.score_rows_at(v, p, &qq, b, &mut got).unwrap();
                    for (i, &r) in p.iter().enumerate() {
                        let r = r as usize;
                        let mut want = [0f32];
                        qr.score_run_with(v, r, 1, &qq, b.map(|b| &b[r..r + 1]), &mut want)
                            .unwrap();
                        assert_eq!(
                            got[i].to_bits(),
                            want[0].to_bits(),
                            "{} dim {dim} pos {r}",
                            v.name()
                        );
                    }
                }
            }
        }
        let v = scalar();
        let mut out = vec![1.5f32; 4];
        let st = |r: lshk::Result<()>| r.err().unwrap().status;
        let bad = [1u32, rows as u32, 2];
        assert_eq!(
            st(qr.score_rows_at(v, &bad, &qq, None, &mut out)),
            Status::IndexOutOfRange
        );
        assert_eq!(
            st(qr.score_rows_at(v, &[1, 2], &qq, Some(&bias[..rows - 1]), &mut out)),
            Status::BufferTooSmall
        );
        assert_eq!(
            st(qr.score_rows_at(v, &pos, &qq, None, &mut out)),
            Status::BufferTooSmall
        );
        let other = QQuery::new(qr.dim_pad() + 64).unwrap();
        assert_eq!(
            st(qr.score_rows_at(v, &[1], &other, None, &mut out)),
            Status::InvalidArgument
        );
        assert!(out.iter().all(|&x| x == 1.5), "nothing written on refusal");
    }
}
