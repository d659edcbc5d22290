//! The 4-bit panels of int8 rows (`lshk::qdot::NibPanels`) and their
//! kernels (`lshk::kernels::qdot::NibFn`): every 4-bit kernel this CPU
//! runs (both AVX-512 flavours on VNNI CPUs) against the scalar oracle,
//! bit for bit, and the bound itself: for every row and query, the 4-bit
//! bound is at least the row's int8 score (`QRows::score_run_with`
//! without bias, scalar tier), on random rows, rows of one value, rows
//! with extreme codes, all-zero rows and queries equal to the rows.

mod common;

use common::qdot::scalar_scores as int8_scores;
use lshk::kernels::qdot::{nib_variants, scalar};
use lshk::qdot::{quantize_rows, NibPanels, QQuery, QRows, Variant};
use lshk::rng::SplitMix64;

/// Rows of several kinds (module docs), `dim` floats each.
fn rows_mixed(rng: &mut SplitMix64, rows: usize, dim: usize) -> (Vec<f32>, QRows) {
    let w: Vec<f32> = (0..rows * dim)
        .map(|i| {
            let (r, j) = (i / dim, i % dim);
            match r % 9 {
                3 => 0.0,
                4 => 0.75,
                5 => {
                    if j == r % dim {
                        40.0
                    } else {
                        -0.01
                    }
                }
                6 => (rng.next_normal() as f32).abs() + 3.0,
                _ => (rng.next_normal() * (1 + r % 5) as f64) as f32,
            }
        })
        .collect();
    let q = quantize_rows(&w, rows, dim, dim).unwrap();
    (w, q)
}

fn query(q: &[f32], dim_pad: usize) -> QQuery {
    let mut qq = QQuery::new(dim_pad).unwrap();
    qq.set(q).unwrap();
    qq
}

/// The oracle's bounds and every kernel's, equal bit for bit; returns
/// the oracle's.
fn kernels_agree(p: &NibPanels, dim_pad: usize, q: &QQuery, x: f32, what: &str) -> Vec<f32> {
    let n = p.padded_rows();
    let (b, ns, c) = p.raw_parts();
    let qc = NibPanels::query_constants(q, x);
    let mut want = vec![0f32; n];
    // SAFETY: the panels' own buffers, `n` rows of them; the query holds
    // dim_pad bytes <= 127 (QQuery); `want` holds n floats.
    unsafe {
        scalar::nib(
            b,
            dim_pad,
            n / 16,
            ns,
            c,
            q.codes().as_ptr(),
            &qc,
            want.as_mut_ptr(),
        )
    };
    for (name, f) in nib_variants() {
        let mut got = vec![f32::NAN; n];
        // SAFETY: as above; the variant runs on this CPU (nib_variants).
        unsafe {
            f(
                b,
                dim_pad,
                n / 16,
                ns,
                c,
                q.codes().as_ptr(),
                &qc,
                got.as_mut_ptr(),
            )
        };
        let eq = want
            .iter()
            .zip(&got)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(eq, "{what}: {name} differs from the scalar oracle");
    }
    for v in Variant::all() {
        let mut got = vec![f32::NAN; n];
        if p.bounds(v, q, x, &mut got).unwrap() {
            let eq = want
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(eq, "{what}: NibPanels::bounds on {} differs", v.name());
        } else {
            assert!(
                got.iter().all(|x| x.is_nan()),
                "{what}: wrote without a kernel"
            );
        }
    }
    want
}

/// Row terms: zero, or of mixed signs and sizes.
fn terms(rng: &mut SplitMix64, rows: usize, zero: bool) -> (Vec<f32>, Vec<f32>) {
    if zero {
        return (vec![0.0; rows], vec![0.0; rows]);
    }
    let f = (0..rows).map(|_| rng.next_normal() as f32 * 3.0).collect();
    let g = (0..rows)
        .map(|_| (rng.next_normal() as f32).abs())
        .collect();
    (f, g)
}

#[test]
fn the_bound_holds_and_every_kernel_equals_the_oracle() {
    let mut rng = SplitMix64::new(7);
    for (case, (rows, dim)) in [(16, 64), (37, 50), (100, 128), (33, 200), (20, 384)]
        .into_iter()
        .enumerate()
    {
        let (w, r) = rows_mixed(&mut rng, rows, dim);
        let (f, g) = terms(&mut rng, rows, case % 2 == 0);
        let p = NibPanels::new(&r, &f, &g).unwrap();
        assert_eq!(p.rows(), rows);
        assert_eq!(p.padded_rows(), rows.div_ceil(16) * 16);
        let dp = r.dim_pad();
        let mut queries: Vec<Vec<f32>> = (0..20)
            .map(|_| (0..dim).map(|_| rng.next_normal() as f32).collect())
            .collect();
        // The rows themselves and their negatives: the worst case of the
        // int8 score against the 4-bit one is a query along the row.
        for i in 0..rows.min(12) {
            let row = w[i * dim..(i + 1) * dim].to_vec();
            queries.push(row.iter().map(|x| -x).collect());
            queries.push(row);
        }
        queries.push(vec![0.0; dim]);
        for (qi, qv) in queries.iter().enumerate() {
            let q = query(qv, dp);
            let x = (qi % 3) as f32 * 0.7;
            let what = format!("rows {rows} dim {dim} query {qi}");
            let ub = kernels_agree(&p, dp, &q, x, &what);
            let ex = int8_scores(&r, &q);
            for i in 0..rows {
                // The IVF's estimate: the int8 score plus the row term, in
                // this order.
                let est = ex[i] + (f[i] + x * g[i]);
                assert!(ub[i] >= est, "{what}: row {i}: bound {} below {est}", ub[i]);
            }
            assert!(ub[rows..].iter().all(|&u| u == 0.0), "{what}: padding");
        }
    }
}

#[test]
fn the_bound_is_tight_enough_to_set_rows_aside() {
    // Random rows in 128 dimensions: the bound's slack (t |k| E) is about
    // a tenth of |q| |w|, so a row whose score is far below the best is set
    // aside by it, which is its use (the IVF's centroid pass).
    let mut rng = SplitMix64::new(11);
    let (rows, dim) = (512, 128);
    let w: Vec<f32> = (0..rows * dim).map(|_| rng.next_normal() as f32).collect();
    let r = quantize_rows(&w, rows, dim, dim).unwrap();
    let (f, g) = terms(&mut rng, rows, true);
    let p = NibPanels::new(&r, &f, &g).unwrap();
    let q = query(&w[..dim], r.dim_pad());
    let ub = kernels_agree(&p, r.dim_pad(), &q, 0.0, "tight");
    let ex = int8_scores(&r, &q);
    // Row 0 is the query: its score is far above every other's, and their
    // bounds stay below it.
    let below = ub[1..rows].iter().filter(|&&u| u < ex[0]).count();
    assert_eq!(
        below,
        rows - 1,
        "bounds of other rows reach the query's own score"
    );
}

#[test]
fn bad_row_terms_are_refused() {
    let mut rng = SplitMix64::new(3);
    let (_, r) = rows_mixed(&mut rng, 20, 64);
    assert!(NibPanels::new(&r, &[0.0; 19], &[0.0; 20]).is_err());
    let p = NibPanels::new(&r, &[0.0; 20], &[0.0; 20]).unwrap();
    let q = query(&[1.0; 64], 64);
    let mut short = vec![0f32; p.padded_rows() - 1];
    if let Some(v) = Variant::all()
        .into_iter()
        .find(|&v| NibPanels::has_kernel(v))
    {
        assert!(p.bounds(v, &q, 0.0, &mut short).is_err());
        let other = query(&[1.0; 64], 128);
        let mut out = vec![0f32; p.padded_rows()];
        assert!(p.bounds(v, &other, 0.0, &mut out).is_err());
    }
}

#[test]
fn zero_and_tiny_queries_and_rows_get_no_bound() {
    // Where a row scale times the query scale is under 2^-100 the f32
    // products may leave the normal range: no bound is computed (the IVF
    // then scores its centroids from int8), and nothing is written.
    let mut rng = SplitMix64::new(9);
    let (_, r) = rows_mixed(&mut rng, 40, 64);
    let tiny_rows: Vec<f32> = (0..40 * 64)
        .map(|_| rng.next_normal() as f32 * 1e-33)
        .collect();
    let rt = quantize_rows(&tiny_rows, 40, 64, 64).unwrap();
    let zeros = vec![0f32; 40];
    let normal: Vec<f32> = (0..64).map(|_| rng.next_normal() as f32).collect();
    let tiny: Vec<f32> = normal.iter().map(|x| x * 1e-33).collect();
    for v in Variant::all()
        .into_iter()
        .filter(|&v| NibPanels::has_kernel(v))
    {
        for (rows, qv, want) in [
            (&r, &normal, true),
            (&r, &vec![0.0; 64], false),
            (&r, &tiny, false),
            (&rt, &normal, false),
        ] {
            let p = NibPanels::new(rows, &zeros, &zeros).unwrap();
            let mut out = vec![f32::NAN; p.padded_rows()];
            let got = p.bounds(v, &query(qv, 64), 0.0, &mut out).unwrap();
            assert_eq!(got, want, "{v:?}");
            assert_eq!(out.iter().all(|x| x.is_nan()), !want, "{v:?}: written");
        }
    }
}
