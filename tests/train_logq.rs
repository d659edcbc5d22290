//! LSH inclusion probabilities for a logQ correction (issue 14):
//! `lshk::train_logq` / `Index::inclusion_probabilities` against
//! * the closed form on small cases;
//! * an oracle written from the rules (transform, decode, angle, formula),
//!   for every transform and storage, within a bound derived from f64
//!   rounding;
//! * Monte-Carlo: the frequency with which a row shares a bucket with the
//!   query over 4,000 independently seeded indexes;
//! * its errors (nothing written).

use lshk::data::structured_layer;
use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::labels::LabelParams;
use lshk::matmul::Weights;
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;
use lshk::train_logq::{simhash_bit_agreement, simhash_inclusion};
use lshk::Status;

#[test]
fn closed_form_small_cases() {
    assert_eq!(simhash_bit_agreement(1.0), 1.0);
    assert_eq!(simhash_bit_agreement(-1.0), 0.0);
    assert_eq!(simhash_bit_agreement(0.0), 0.5);
    assert_eq!(simhash_bit_agreement(2.0), 1.0);
    assert!((simhash_bit_agreement(0.5) - (1.0 - 1.0 / 3.0)).abs() < 1e-15);
    assert!((simhash_bit_agreement(-(0.5f64.sqrt())) - 0.25).abs() < 1e-15);
    assert!(simhash_bit_agreement(f64::NAN).is_nan());
    // p^K for one table, 1 - (1 - p)^L for one bit.
    assert_eq!(simhash_inclusion(0.5, 1, 1), 0.5);
    assert!((simhash_inclusion(0.5, 3, 1) - 0.125).abs() < 1e-16);
    assert!((simhash_inclusion(0.5, 1, 3) - 0.875).abs() < 1e-16);
    assert_eq!(simhash_inclusion(1.0, 10, 50), 1.0);
    assert_eq!(simhash_inclusion(0.0, 10, 50), 0.0);
    assert_eq!(simhash_inclusion(0.7, 10, 0), 0.0);
    assert!(simhash_inclusion(f64::NAN, 10, 5).is_nan());
    // Against the plain expression where it has no cancellation.
    for &(p, k, l) in &[
        (0.9, 10u32, 50u32),
        (0.6, 4, 7),
        (0.99, 16, 400),
        (0.3, 2, 3),
    ] {
        let plain = 1.0 - (1.0 - f64::powi(p, k as i32)).powi(l as i32);
        let got = simhash_inclusion(p, k, l);
        assert!(
            (got - plain).abs() <= 1e-14,
            "{p} {k} {l}: {got} vs {plain}"
        );
    }
    // Small p^K: l p^K to first order, no cancellation to 0.
    let got = simhash_inclusion(0.01, 10, 50);
    assert!((got / (50.0 * 1e-20) - 1.0).abs() < 1e-12, "{got}");
}

/// The oracle: the stored row decoded, transformed as the module docs of
/// `lshk::index` say, the cosine from plainly summed f64 products, then
/// `1 - (1 - p^K)^l` (plain powers; inputs chosen so that it does not
/// cancel).
fn oracle(idx: &Index, q: &[f32], r: usize, l: u32) -> f64 {
    let (dim, st) = (idx.dim(), idx.weight_stride());
    let row: Vec<f32> = match idx.weights() {
        Weights::F32(s) => s[r * st..r * st + dim].to_vec(),
        Weights::Bf16(s) => s[r * st..r * st + dim]
            .iter()
            .map(|&b| f32::from_bits((b as u32) << 16))
            .collect(),
        Weights::F16(_) => unreachable!("not used here"),
        Weights::I8 { w, scales } => w[r * st..r * st + dim]
            .iter()
            .map(|&x| x as f32 * scales[r])
            .collect(),
    };
    let b = idx.bias().map_or(0.0, |b| b[r]);
    let (tq, tw): (Vec<f64>, Vec<f64>) = match idx.transform() {
        Transform::None => (
            q.iter().map(|&x| x as f64).collect(),
            row.iter().map(|&x| x as f64).collect(),
        ),
        Transform::BiasAug => (
            q.iter().map(|&x| x as f64).chain([1.0]).collect(),
            row.iter().map(|&x| x as f64).chain([b as f64]).collect(),
        ),
        Transform::Mips => {
            // Rows [w/U, sqrt(max(0, 1 - |w/U|^2))] with each w/U rounded
            // to f32 (the sum of squares of the unrounded values), queries
            // [q/|q|, 0] rounded to f32.
            let inv_u = 1.0 / idx.mips_u() as f64;
            let mut s = 0f64;
            let mut tw: Vec<f64> = row
                .iter()
                .map(|&x| {
                    let v = x as f64 * inv_u;
                    s += v * v;
                    v as f32 as f64
                })
                .collect();
            tw.push((1.0 - s).max(0.0).sqrt() as f32 as f64);
            let n = q.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let inv = if n > 0.0 { 1.0 / n } else { 0.0 };
            let mut tq: Vec<f64> = q.iter().map(|&x| (x as f64 * inv) as f32 as f64).collect();
            tq.push(0.0);
            (tq, tw)
        }
    };
    let dot: f64 = tq.iter().zip(&tw).map(|(a, b)| a * b).sum();
    let nq: f64 = tq.iter().map(|a| a * a).sum();
    let nw: f64 = tw.iter().map(|a| a * a).sum();
    let cos = if nq * nw > 0.0 {
        dot / (nq * nw).sqrt()
    } else {
        0.0
    };
    let p = 1.0 - cos.clamp(-1.0, 1.0).acos() / std::f64::consts::PI;
    if l == 0 {
        return 0.0;
    }
    1.0 - (1.0 - p.powi(idx.bits() as i32)).powi(l as i32)
}

fn build(rows: usize, dim: usize, k: u32, l: u32, st: Storage, t: Transform, seed: u64) -> Index {
    let layer = structured_layer(rows, dim, 5, seed);
    let p = IndexParams {
        bits: k,
        tables: l,
        seed,
        storage: st,
        transform: t,
        threads: 1,
        ..IndexParams::default()
    };
    Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &p, None).unwrap()
}

#[test]
fn matches_the_oracle_for_every_transform_and_storage() {
    let mut rng = SplitMix64::new(5);
    for (ci, &(st, t)) in [
        (Storage::F32, Transform::None),
        (Storage::F32, Transform::BiasAug),
        (Storage::F32, Transform::Mips),
        (Storage::Bf16, Transform::BiasAug),
        (Storage::I8, Transform::None),
    ]
    .iter()
    .enumerate()
    {
        for &dim in &[1usize, 7, 8, 9, 33] {
            let (rows, k, l) = (60, 6, 9);
            let idx = build(rows, dim, k, l, st, t, 3 + ci as u64);
            let nq = 5;
            let qs = dim + 3;
            let mut q = vec![f32::NAN; nq * qs];
            for i in 0..nq {
                for d in 0..dim {
                    // Query 0 near row 0 (small angles), query 1 zero.
                    q[i * qs + d] = match i {
                        0 => match idx.weights() {
                            Weights::F32(w) => w[d] + 0.01 * rng.next_normal() as f32,
                            _ => rng.next_normal() as f32,
                        },
                        1 => 0.0,
                        _ => rng.next_normal() as f32,
                    };
                }
            }
            let mut offsets = vec![0usize];
            let mut ids = Vec::new();
            for i in 0..nq {
                let n = if i == 3 {
                    0
                } else {
                    1 + rng.below(rows as u64) as usize
                };
                for _ in 0..n {
                    ids.push(rng.below(rows as u64) as u32);
                }
                ids.push(0);
                offsets.push(ids.len());
            }
            let tables: Vec<u32> = (0..nq).map(|i| [l, 1, 0, 4, l][i]).collect();
            let mut out = vec![f64::NAN; ids.len()];
            for tab in [None, Some(&tables[..])] {
                idx.inclusion_probabilities(&q, nq, qs, &ids, &offsets, tab, &mut out)
                    .unwrap();
                // Bound: each dot / norm is within hd * 2^-53 relative of
                // the exact sums (the oracle likewise), so cos within
                // eps = 4 hd 2^-52; p = 1 - acos(cos)/pi moves by at most
                // sqrt(2 eps)/pi; P = 1-(1-p^K)^l by K l times that.
                let hd = idx.hash_dim() as f64;
                let eps = 4.0 * hd * f64::EPSILON;
                let dp = (2.0 * eps).sqrt() / std::f64::consts::PI;
                for i in 0..nq {
                    let li = tab.map_or(l, |t| t[i]);
                    for j in offsets[i]..offsets[i + 1] {
                        let want = oracle(&idx, &q[i * qs..i * qs + dim], ids[j] as usize, li);
                        let tol = (k * li) as f64 * dp + 1e-14;
                        assert!(
                            (out[j] - want).abs() <= tol,
                            "{st:?} {t:?} dim {dim} query {i} id {}: {} vs {want} (tol {tol})",
                            ids[j],
                            out[j]
                        );
                        if i == 1 && t != Transform::BiasAug {
                            // Zero query: p = 1/2.
                            assert_eq!(out[j], simhash_inclusion(0.5, k, li));
                        }
                    }
                }
            }
            // Deterministic.
            let mut again = vec![0f64; ids.len()];
            idx.inclusion_probabilities(&q, nq, qs, &ids, &offsets, None, &mut again)
                .unwrap();
            let mut first = vec![0f64; ids.len()];
            idx.inclusion_probabilities(&q, nq, qs, &ids, &offsets, None, &mut first)
                .unwrap();
            assert_eq!(
                first.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                again.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
        }
    }
}

/// Over many indexes that differ only in their seed (so in their Gaussian
/// planes), the fraction in which a row shares a bucket with the query in
/// at least one of the first `l` tables must match `1 - (1 - p^K)^l`.
#[test]
fn matches_monte_carlo_over_seeded_indexes() {
    let (dim, rows, k, l) = (16usize, 12usize, 3u32, 4u32);
    // Rows at spread angles to the query e_0 (cos from 1 down to -1).
    let mut w = vec![0f32; rows * dim];
    let mut r = SplitMix64::new(9);
    for i in 0..rows {
        let c = 1.0 - 2.0 * i as f64 / (rows - 1) as f64;
        let s = (1.0 - c * c).max(0.0).sqrt();
        // A random unit direction orthogonal to e_0 for the sine part.
        let mut u: Vec<f64> = (0..dim).map(|_| r.next_normal()).collect();
        u[0] = 0.0;
        let n = u.iter().map(|x| x * x).sum::<f64>().sqrt();
        w[i * dim] = (c * 1.7) as f32;
        for d in 1..dim {
            w[i * dim + d] = (s * 1.7 * u[d] / n) as f32;
        }
    }
    let mut q = vec![0f32; dim];
    q[0] = 0.8;
    let trials = 4000u64;
    let (mut hit_all, mut hit_one) = (vec![0u64; rows], vec![0u64; rows]);
    let mut want: Option<(Vec<f64>, Vec<f64>)> = None;
    let ids: Vec<u32> = (0..rows as u32).collect();
    let offs = [0, rows];
    let mut g = lshk::tables::GatherResult::default();
    for seed in 1..=trials {
        let p = IndexParams {
            bits: k,
            tables: l,
            seed,
            storage: Storage::F32,
            threads: 1,
            ..IndexParams::default()
        };
        let idx = Index::build(&w, None, rows, dim, dim, &p, None).unwrap();
        assert!(idx.range_bits() >= k, "no folding in this test");
        if want.is_none() {
            let (mut a, mut b) = (vec![0f64; rows], vec![0f64; rows]);
            idx.inclusion_probabilities(&q, 1, dim, &ids, &offs, None, &mut a)
                .unwrap();
            idx.inclusion_probabilities(&q, 1, dim, &ids, &offs, Some(&[1]), &mut b)
                .unwrap();
            want = Some((a, b));
        }
        // All L tables: the index's own gather.
        idx.candidates(&q, 1, dim, &GatherParams::default(), &mut g)
            .unwrap();
        for &id in &g.ids {
            hit_all[id as usize] += 1;
        }
        // The first table only: compare codes.
        let sh = idx.simhash().unwrap();
        let mut qc = vec![0u32; l as usize];
        let mut rc = vec![0u32; rows * l as usize];
        sh.hash(&q, 1, dim, &mut qc).unwrap();
        sh.hash(&w, rows, dim, &mut rc).unwrap();
        for i in 0..rows {
            hit_one[i] += (rc[i * l as usize] == qc[0]) as u64;
        }
    }
    let (a, b) = want.unwrap();
    for i in 0..rows {
        for (hits, p) in [(hit_all[i], a[i]), (hit_one[i], b[i])] {
            let f = hits as f64 / trials as f64;
            let sd = (p * (1.0 - p) / trials as f64).sqrt();
            assert!(
                (f - p).abs() <= 4.5 * sd + 1e-9,
                "row {i}: frequency {f} vs probability {p} (sd {sd})"
            );
        }
    }
    // The endpoints: the row along the query always collides, the
    // opposite one never.
    assert_eq!(a[0], 1.0);
    assert_eq!(hit_all[0], trials);
    assert_eq!(a[rows - 1], 0.0);
    assert_eq!(hit_all[rows - 1], 0);
}

#[test]
fn errors_write_nothing() {
    let idx = build(40, 8, 4, 3, Storage::F32, Transform::BiasAug, 1);
    let q = vec![0.5f32; 2 * 8];
    let ids = [1u32, 2, 3, 39];
    let offs = [0usize, 2, 4];
    let call = |q: &[f32], qs: usize, ids: &[u32], offs: &[usize], t: Option<&[u32]>, n: usize| {
        let mut out = vec![-7.0f64; n];
        let e = idx
            .inclusion_probabilities(q, offs.len().saturating_sub(1), qs, ids, offs, t, &mut out)
            .unwrap_err();
        assert!(out.iter().all(|&x| x == -7.0), "written on error");
        e.status
    };
    assert_eq!(
        call(&q, 8, &ids, &[0, 2, 3], None, 4),
        Status::InvalidArgument
    );
    assert_eq!(
        call(&q, 8, &ids, &[1, 2, 4], None, 4),
        Status::InvalidArgument
    );
    assert_eq!(
        call(&q, 8, &ids, &[0, 3, 2, 4], None, 4),
        Status::InvalidArgument
    );
    assert_eq!(
        call(&q, 8, &[1, 2, 3, 40], &offs, None, 4),
        Status::IndexOutOfRange
    );
    assert_eq!(call(&q, 7, &ids, &offs, None, 4), Status::InvalidArgument);
    assert_eq!(
        call(&q[..15], 8, &ids, &offs, None, 4),
        Status::BufferTooSmall
    );
    assert_eq!(call(&q, 8, &ids, &offs, None, 3), Status::BufferTooSmall);
    assert_eq!(
        call(&q, 8, &ids, &offs, Some(&[1]), 4),
        Status::BufferTooSmall
    );
    assert_eq!(
        call(&q, 8, &ids, &offs, Some(&[1, 4]), 4),
        Status::InvalidArgument
    );
    let mut qn = q.clone();
    qn[9] = f32::INFINITY;
    assert_eq!(call(&qn, 8, &ids, &offs, None, 4), Status::NonFinite);
    // DWTA and label-aware indexes.
    let layer = structured_layer(40, 8, 5, 2);
    let p = IndexParams {
        family: Family::Dwta,
        bits: 2,
        tables: 3,
        bin_size: 4,
        threads: 1,
        ..IndexParams::default()
    };
    let dw = Index::build(&layer.w, None, 40, 8, 8, &p, None).unwrap();
    let mut out = vec![-7.0; 4];
    let e = dw
        .inclusion_probabilities(&q, 2, 8, &ids, &offs, None, &mut out)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let mut lab = build(40, 8, 4, 3, Storage::F32, Transform::None, 1);
    lab.train_labels(&q, 2, 8, &[0, 1, 2], &[5, 6], &LabelParams::default())
        .unwrap();
    let e = lab
        .inclusion_probabilities(&q, 2, 8, &ids, &offs, None, &mut out)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(out.iter().all(|&x| x == -7.0));
    // Empty batch and empty segments are fine.
    idx.inclusion_probabilities(&[], 0, 8, &[], &[0], None, &mut [])
        .unwrap();
}

/// The dot products as the module documentation defines them, on the
/// concatenated row `[w, extra]`: coordinate `j` into lane `j mod 8`, the
/// lanes added in order.
fn lanes_reference(q: &[f64], row: &[f32], extra: Option<f32>) -> (f64, f64) {
    let mut v: Vec<f32> = row.to_vec();
    v.extend(extra);
    let (mut d, mut n) = ([0f64; 8], [0f64; 8]);
    for (j, (&x, &y)) in q.iter().zip(&v).enumerate() {
        d[j % 8] += x * y as f64;
        n[j % 8] += y as f64 * y as f64;
    }
    let (mut ds, mut ns) = (0f64, 0f64);
    for k in 0..8 {
        ds += d[k];
        ns += n[k];
    }
    (ds, ns)
}

/// `kernels::logq`: every tier the CPU has returns the documented sums'
/// bits (the scalar oracle equals the reference on the concatenated row),
/// for every dim up to three vector widths + 1 and larger ones, with and
/// without the BiasAug coordinate (bias given or not), strides larger
/// than the row, and special values (-0, denormals, huge, NaN, inf).
#[test]
fn dot_norm_kernels_return_the_oracle_bits_on_every_tier() {
    use lshk::kernels::logq::{kernels, AugRows};
    let mut g = SplitMix64::new(77);
    let special = [
        -0.0f32,
        1e-40,
        -3e-39,
        1e30,
        -2.5e-20,
        f32::NAN,
        f32::INFINITY,
    ];
    let dims: Vec<usize> = (1..=25)
        .chain([31, 32, 33, 64, 127, 128, 129, 200])
        .collect();
    for &dim in &dims {
        for aug in [false, true] {
            let (rows, stride) = (13usize, dim + 5);
            let mut w: Vec<f32> = (0..rows * stride).map(|_| g.next_normal() as f32).collect();
            // rows 10..13 hold special values
            for r in 10..rows {
                for k in 0..dim {
                    if g.below(3) == 0 {
                        w[r * stride + k] = special[g.below(special.len() as u64) as usize];
                    }
                }
            }
            let bias: Vec<f32> = (0..rows).map(|r| r as f32 * 0.25 - 1.0).collect();
            let q: Vec<f64> = (0..dim + aug as usize).map(|_| g.next_normal()).collect();
            let ids: Vec<u32> = (0..40)
                .map(|i| if i < 13 { i } else { g.below(13) as u32 })
                .collect();
            for b in [None, Some(&bias[..])] {
                let r = AugRows {
                    w: &w,
                    stride,
                    dim,
                    aug,
                    bias: b,
                };
                let (mut d0, mut n0) = (vec![0f64; ids.len()], vec![0f64; ids.len()]);
                (kernels(lshk::isa::Isa::Scalar).dot_norms)(&q, &r, &ids, &mut d0, &mut n0);
                for (j, &id) in ids.iter().enumerate() {
                    let id = id as usize;
                    let extra = aug.then(|| b.map_or(0.0, |b| b[id]));
                    let (wd, wn) = lanes_reference(&q, &w[id * stride..id * stride + dim], extra);
                    let same =
                        |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                    assert!(
                        same(d0[j], wd) && same(n0[j], wn),
                        "scalar dim {dim} aug {aug} row {id}"
                    );
                }
                for isa in lshk::isa::Isa::supported() {
                    let (mut d1, mut n1) = (vec![0f64; ids.len()], vec![0f64; ids.len()]);
                    (kernels(isa).dot_norms)(&q, &r, &ids, &mut d1, &mut n1);
                    for j in 0..ids.len() {
                        let same = |a: f64, b: f64| {
                            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                        };
                        assert!(
                            same(d1[j], d0[j]) && same(n1[j], n0[j]),
                            "{isa:?} dim {dim} aug {aug} bias {} row {}: {} {} vs {} {}",
                            b.is_some(),
                            ids[j],
                            d1[j],
                            n1[j],
                            d0[j],
                            n0[j]
                        );
                    }
                }
            }
        }
    }
}

/// The probabilities are the same bits whichever tier runs the dot
/// products (f32 rows read in place: transform None and BiasAug; the other
/// storages and MIPS keep the plain path).
#[test]
fn probabilities_are_the_same_bits_on_every_tier() {
    let cap = lshk::isa::active();
    for (st, t) in [
        (Storage::F32, Transform::None),
        (Storage::F32, Transform::BiasAug),
        (Storage::F32, Transform::Mips),
        (Storage::Bf16, Transform::BiasAug),
    ] {
        for dim in [5usize, 16, 37] {
            let idx = build(300, dim, 7, 11, st, t, 9);
            let mut g = SplitMix64::new(dim as u64);
            let nq = 6;
            let q: Vec<f32> = (0..nq * dim).map(|_| g.next_normal() as f32).collect();
            let mut ids = Vec::new();
            let mut offsets = vec![0usize];
            for i in 0..nq {
                // one segment longer than the kernel's block of 128
                for _ in 0..[3usize, 0, 200, 17, 129, 1][i] {
                    ids.push(g.below(300) as u32);
                }
                offsets.push(ids.len());
            }
            let mut want: Option<Vec<u64>> = None;
            for isa in lshk::isa::Isa::supported() {
                lshk::isa::set_max(isa);
                let mut out = vec![0f64; ids.len()];
                idx.inclusion_probabilities(&q, nq, dim, &ids, &offsets, None, &mut out)
                    .unwrap();
                let bits: Vec<u64> = out.iter().map(|v| v.to_bits()).collect();
                match &want {
                    None => want = Some(bits),
                    Some(w) => assert!(w == &bits, "{st:?} {t:?} dim {dim}: {isa:?} differs"),
                }
            }
        }
    }
    lshk::isa::set_max(cap);
}
