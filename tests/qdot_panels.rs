//! The panel layout of int8 rows (`lshk::qdot::QPanels`) and its
//! multi-query kernels (`lshk::kernels::qdot::PanelFn`): every panel
//! kernel this CPU runs (both AVX-512 flavours on VNNI CPUs) against the
//! scalar row-major oracle, exactly (the same integer dot product and the
//! same f32 epilogue, so the scores are equal bit for bit), for 1 to 4
//! queries per call, row counts that are and are not whole panels, dims
//! that fill and that do not fill the 64-byte padding, and the extreme
//! codes; then the argument checks of `QPanels::score`.

mod common;

use common::qdot::scalar_scores as oracle;
use lshk::kernels::qdot::{panel_variants, PANEL_QUERIES};
use lshk::qdot::{quantize_rows, QPanels, QQuery, QRows, Variant};
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn rows_random(rng: &mut SplitMix64, rows: usize, dim: usize) -> QRows {
    let w: Vec<f32> = (0..rows * dim)
        .map(|i| {
            // Some all-zero rows (scale 0) and rows of very different size.
            if (i / dim) % 7 == 3 {
                0.0
            } else {
                (rng.next_normal() * (1 + (i / dim) % 5) as f64) as f32
            }
        })
        .collect();
    quantize_rows(&w, rows, dim, dim).unwrap()
}

fn query_random(rng: &mut SplitMix64, dim: usize, dim_pad: usize) -> QQuery {
    let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
    let mut qq = QQuery::new(dim_pad).unwrap();
    qq.set(&q).unwrap();
    qq
}

/// Every panel kernel, called directly, and `QPanels::score` on every
/// variant, for `qs`, against the oracle.
fn check(r: &QRows, qs: &[QQuery], what: &str) {
    let p = QPanels::new(r).unwrap();
    let (rows, pr) = (r.rows(), p.padded_rows());
    assert_eq!(pr % 16, 0);
    assert!(pr >= rows && pr < rows + 16);
    let want: Vec<Vec<f32>> = qs.iter().map(|q| oracle(r, q)).collect();
    for chunk in qs.chunks(PANEL_QUERIES).zip(want.chunks(PANEL_QUERIES)) {
        let (qc, wc) = chunk;
        let refs: Vec<&QQuery> = qc.iter().collect();
        // Through the safe API, every variant: AVX-512 ones score, the
        // others return false and write nothing.
        for v in Variant::all() {
            let stride = pr + 5;
            let mut out = vec![f32::NAN; qc.len() * stride];
            let ran = p.score(v, 0, pr, &refs, &mut out, stride).unwrap();
            assert_eq!(ran, QPanels::has_kernel(v));
            if !ran {
                assert!(out.iter().all(|x| x.is_nan()), "{what}: {} wrote", v.name());
                continue;
            }
            for (i, w) in wc.iter().enumerate() {
                let got = &out[i * stride..i * stride + pr];
                assert_eq!(
                    bits(&got[..rows]),
                    bits(w),
                    "{what}: {} query {i}",
                    v.name()
                );
                assert!(got[rows..].iter().all(|&x| x == 0.0), "{what}: padding");
                assert!(out[i * stride + pr..(i + 1) * stride]
                    .iter()
                    .all(|x| x.is_nan()));
            }
            // A run in the middle (whole panels: a pair, and one alone).
            for (first, n) in [(32usize, 32usize), (16, 16)] {
                if pr >= first + n {
                    let mut mid = vec![0f32; qc.len() * n];
                    assert!(p.score(v, first, n, &refs, &mut mid, n).unwrap());
                    for (i, w) in wc.iter().enumerate() {
                        let e = rows.min(first + n);
                        assert_eq!(bits(&mid[i * n..i * n + e - first]), bits(&w[first..e]));
                    }
                }
            }
        }
        // Every panel kernel directly (both AVX-512 flavours on VNNI CPUs).
        for (name, f) in panel_variants() {
            let mut outs: Vec<Vec<f32>> = (0..qc.len()).map(|_| vec![f32::NAN; pr]).collect();
            let mut qp = [std::ptr::null::<u8>(); PANEL_QUERIES];
            let mut sq = [0f32; PANEL_QUERIES];
            let mut op = [std::ptr::null_mut::<f32>(); PANEL_QUERIES];
            for (i, q) in qc.iter().enumerate() {
                qp[i] = q.codes().as_ptr();
                sq[i] = q.scale();
                op[i] = outs[i].as_mut_ptr();
            }
            // The panel buffer of `p` is private; rebuild the kernel's
            // inputs from the safe API's contract instead: score through
            // `p` on the AVX-512 tier and compare the direct call with it.
            let mut via = vec![0f32; qc.len() * pr];
            assert!(p
                .score(
                    Variant::of(Isa::Avx512).unwrap(),
                    0,
                    pr,
                    &refs,
                    &mut via,
                    pr
                )
                .unwrap());
            // SAFETY: the panels, sums and scales come from `p` (whole,
            // any number of panels, odd ones included); every query holds dim_pad bytes;
            // outs[i] holds pr floats.
            unsafe {
                let (pp, ps, psc) = p.raw_parts();
                f(pp, p.dim_pad(), pr / 16, ps, psc, &qp, &sq, qc.len(), &op);
            }
            for (i, w) in wc.iter().enumerate() {
                assert_eq!(bits(&outs[i][..rows]), bits(w), "{what}: {name} query {i}");
                assert_eq!(bits(&outs[i]), bits(&via[i * pr..(i + 1) * pr]));
            }
        }
    }
}

#[test]
fn panels_equal_the_scalar_oracle() {
    println!(
        "panel kernels run: {:?}",
        panel_variants().iter().map(|v| v.0).collect::<Vec<_>>()
    );
    let mut rng = SplitMix64::new(11);
    for &dim in &[1usize, 3, 64, 100, 128, 200, 384, 700] {
        for &rows in &[1usize, 15, 16, 31, 32, 33, 64, 100, 257] {
            let r = rows_random(&mut rng, rows, dim);
            for nq in 1..=2 * PANEL_QUERIES + 1 {
                let qs: Vec<QQuery> = (0..nq)
                    .map(|_| query_random(&mut rng, dim, r.dim_pad()))
                    .collect();
                check(&r, &qs, &format!("dim {dim} rows {rows} nq {nq}"));
            }
        }
    }
}

#[test]
fn panels_extreme_codes() {
    // Every code +-127 and every query byte 127 (k = 63): the largest
    // products, up to the largest dim_pad, where the i32 sums are near
    // their limit but exact.
    for &dim in &[64usize, 1000, 1 << 17] {
        let dp = dim.div_ceil(64) * 64;
        for fill in [127i8, -127] {
            let rows = 40;
            let mut codes = vec![0i8; rows * dp];
            for r in 0..rows {
                codes[r * dp..r * dp + dim].fill(if r % 2 == 0 { fill } else { -fill });
            }
            let scales: Vec<f32> = (0..rows).map(|r| 0.5 + r as f32).collect();
            let qr = QRows::from_parts(rows, dim, &codes, &scales).unwrap();
            let mut q = QQuery::new(dp).unwrap();
            q.set(&vec![1.0f32; dim]).unwrap();
            assert!(q.codes()[..dim].iter().all(|&u| u == 127));
            check(&qr, &[q], &format!("extreme dim {dim} fill {fill}"));
        }
    }
}

#[test]
fn panels_argument_checks() {
    let mut rng = SplitMix64::new(3);
    let r = rows_random(&mut rng, 70, 128);
    let p = QPanels::new(&r).unwrap();
    assert_eq!(p.rows(), 70);
    assert_eq!(p.padded_rows(), 80);
    assert!(p.memory_bytes() >= 80 * 128);
    let q = query_random(&mut rng, 128, 128);
    let Some(v) = Variant::all().into_iter().find(|v| QPanels::has_kernel(*v)) else {
        println!("no panel kernel on this CPU: argument checks of the AVX-512 path skipped");
        return;
    };
    let mut out = vec![7f32; 4 * 96];
    let st = |e: lshk::Error| e.status;
    // Not whole panels, beyond the rows, no or too many queries,
    // another dim_pad, too small an output: refused, nothing written.
    assert_eq!(
        st(p.score(v, 8, 16, &[&q], &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        st(p.score(v, 0, 40, &[&q], &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        st(p.score(v, 64, 32, &[&q], &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        st(p.score(v, 0, 80, &[], &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    let five = [&q, &q, &q, &q, &q];
    assert_eq!(
        st(p.score(v, 0, 32, &five, &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    let q2 = query_random(&mut rng, 128, 192);
    assert_eq!(
        st(p.score(v, 0, 32, &[&q2], &mut out, 96).unwrap_err()),
        Status::InvalidArgument
    );
    assert_eq!(
        st(p.score(v, 0, 80, &[&q, &q], &mut out[..175], 96)
            .unwrap_err()),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(p.score(v, 0, 80, &[&q, &q], &mut out, 79).unwrap_err()),
        Status::BufferTooSmall
    );
    assert!(out.iter().all(|&x| x == 7.0));
    // n = 0 is a valid empty call.
    assert!(p.score(v, 80, 0, &[&q], &mut out, 0).unwrap());
    assert!(out.iter().all(|&x| x == 7.0));
}

/// `QPanels::score` runs the flavour of the variant it is given: the
/// `vpdpbusd` panel kernel for the "avx512vnni" row-major variant, the
/// `vpmaddubsw` one for the plain AVX-512 variant (also on a VNNI CPU),
/// none below AVX-512.
#[test]
fn the_panel_kernel_follows_the_variant() {
    let named: std::collections::HashMap<&str, usize> = panel_variants()
        .into_iter()
        .map(|(n, f)| (n, f as usize))
        .collect();
    for (tier, k) in lshk::kernels::qdot::supported_variants() {
        let got = lshk::kernels::qdot::panel_for(tier, k).map(|f| f as usize);
        if tier == Isa::Avx512 {
            assert_eq!(got, named.get(k.name).copied(), "{}", k.name);
        } else {
            assert_eq!(got, None, "{}", k.name);
        }
    }
}

/// The vector re-lay (`relay_for`: AVX-512 where the CPU has it) writes the
/// scalar re-lay's bytes, and `QPanels::set_rows` on a range of rows,
/// reused from larger to smaller ranges and back (no stale bytes in the
/// padding), scores bit for bit as the row-major oracle of those rows, on
/// every variant.
#[test]
fn relay_and_set_rows_equal_the_oracle() {
    use lshk::kernels::qdot::{relay_for, relay_scalar};
    let mut rng = SplitMix64::new(29);
    for &dp in &[64usize, 128, 192, 384] {
        for &n in &[1usize, 15, 16, 17, 31, 32, 33, 47, 100] {
            let src: Vec<i8> = (0..n * dp)
                .map(|_| (rng.next_u64() >> 56) as u8 as i8)
                .collect();
            let len = n.div_ceil(16) * 16 * dp;
            let mut want = vec![0x55i8; len];
            relay_scalar(&src, dp, n, &mut want);
            for t in Isa::supported() {
                let Some(f) = relay_for(t) else { continue };
                let mut got = vec![0x55i8; len + 64];
                // SAFETY: src holds n * dp bytes, got ceil(n / 16) * 16 * dp
                // (and 64 more, which must stay untouched); the tier is
                // supported.
                unsafe { f(src.as_ptr(), dp, n, got.as_mut_ptr()) };
                assert_eq!(got[..len], want[..], "{} dp {dp} n {n}", t.name());
                assert!(got[len..].iter().all(|&b| b == 0x55));
            }
        }
    }
    let dim = 200;
    let r = rows_random(&mut rng, 150, dim);
    let qs: Vec<QQuery> = (0..3)
        .map(|_| query_random(&mut rng, dim, r.dim_pad()))
        .collect();
    let refs: Vec<&QQuery> = qs.iter().collect();
    let want: Vec<Vec<f32>> = qs.iter().map(|q| oracle(&r, q)).collect();
    for v in Variant::all() {
        let mut p = QPanels::default();
        for &(first, n) in &[
            (0usize, 150usize),
            (7, 40),
            (100, 1),
            (3, 97),
            (149, 1),
            (20, 0),
        ] {
            p.set_rows(Some(v), &r, first, n).unwrap();
            assert_eq!(p.rows(), n);
            let pr = p.padded_rows();
            assert_eq!(pr, n.div_ceil(16) * 16);
            if !QPanels::has_kernel(v) {
                continue;
            }
            let mut out = vec![f32::NAN; 3 * pr];
            assert!(p.score(v, 0, pr, &refs, &mut out, pr).unwrap());
            for (i, w) in want.iter().enumerate() {
                let got = &out[i * pr..(i + 1) * pr];
                assert_eq!(
                    bits(&got[..n]),
                    bits(&w[first..first + n]),
                    "{} {first}+{n}",
                    v.name()
                );
                assert!(got[n..].iter().all(|&x| x == 0.0), "{} padding", v.name());
            }
        }
        assert_eq!(
            p.set_rows(Some(v), &r, 100, 51).unwrap_err().status,
            Status::InvalidArgument
        );
    }
}
