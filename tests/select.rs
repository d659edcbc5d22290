//! The IVF selection masks (`lshk::kernels::select`): every tier the CPU
//! has returns the scalar oracle's words, bit for bit, on lengths around
//! every block and word boundary, with ties at the threshold, signed
//! zeros, infinities and NaN; the oracle itself is checked against the
//! documented expression.

use lshk::isa::Isa;
use lshk::kernels::select::{kernels, words};
use lshk::rng::SplitMix64;

fn values(rng: &mut SplitMix64, n: usize, th: f32) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.below(16) {
            0 => th,
            1 => -0.0,
            2 => 0.0,
            3 => f32::INFINITY,
            4 => f32::NEG_INFINITY,
            5 => f32::NAN,
            6 => f32::from_bits(1),
            _ => (rng.next_normal() * 3.0) as f32,
        })
        .collect()
}

const LENS: [usize; 17] = [
    0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 752, 3274,
];

#[test]
fn every_tier_returns_the_oracles_masks() {
    let mut rng = SplitMix64::new(11);
    for &n in &LENS {
        for &th in &[
            0.0f32,
            -0.0,
            0.5,
            -1.25,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
        ] {
            for &extra in &[0.0f32, 1.5, -0.75, 3.0e38] {
                let e = values(&mut rng, n, th);
                let sp = values(&mut rng, n + 3, 0.25);
                let mut want = vec![0u64; words(n) + 1];
                want[words(n)] = 0xdead;
                let mut want_gt = want.clone();
                (kernels(Isa::Scalar).opt_masks)(&e, &sp, extra, th, &mut want);
                (kernels(Isa::Scalar).gt_masks)(&e, th, &mut want_gt);
                // The documented expression, element by element; the word
                // past the masks is not touched.
                for i in 0..n {
                    let bit = want[i / 64] >> (i % 64) & 1 == 1;
                    assert_eq!(bit, e[i] + extra * sp[i] >= th, "opt n {n} i {i}");
                    let bit = want_gt[i / 64] >> (i % 64) & 1 == 1;
                    assert_eq!(bit, e[i] > th, "gt n {n} i {i}");
                }
                if n % 64 != 0 {
                    assert_eq!(want[n / 64] >> (n % 64), 0, "bits past n");
                }
                assert_eq!(want[words(n)], 0xdead);
                for isa in Isa::supported() {
                    let mut got = vec![!0u64; words(n) + 1];
                    got[words(n)] = 0xdead;
                    let mut got_gt = got.clone();
                    (kernels(isa).opt_masks)(&e, &sp, extra, th, &mut got);
                    (kernels(isa).gt_masks)(&e, th, &mut got_gt);
                    assert_eq!(got, want, "{isa:?} opt n {n} th {th} extra {extra}");
                    assert_eq!(got_gt, want_gt, "{isa:?} gt n {n} th {th}");
                }
            }
        }
    }
}

#[test]
fn short_slices_panic_on_every_tier() {
    for isa in Isa::supported() {
        let k = kernels(isa);
        let e = vec![1.0f32; 65];
        let r = std::panic::catch_unwind(|| (k.opt_masks)(&e, &e[..64], 1.0, 0.0, &mut [0u64; 2]));
        assert!(r.is_err(), "{isa:?} short spread");
        let r = std::panic::catch_unwind(|| (k.gt_masks)(&e, 0.0, &mut [0u64; 1]));
        assert!(r.is_err(), "{isa:?} short out");
    }
}

/// The argmax: every tier gives the scalar oracle's position, which is the
/// first element reaching the largest non-NaN value (0 when none), with
/// the maximum placed anywhere (every block and tail position), ties,
/// signed zeros, infinities and NaN.
#[test]
fn every_tier_returns_the_oracles_argmax() {
    let mut rng = SplitMix64::new(23);
    for &n in &LENS {
        for trial in 0..40 {
            let mut v = values(&mut rng, n, 0.5);
            if n > 0 && trial % 4 == 1 {
                // One clear maximum at a chosen position.
                let at = trial / 4 % n;
                v[at] = 1e30;
            }
            if trial == 2 {
                v.fill(f32::NAN);
            }
            if trial == 3 {
                v.fill(f32::NEG_INFINITY);
            }
            if trial == 5 {
                v.iter_mut()
                    .for_each(|x| *x = if rng.below(2) == 0 { 0.0 } else { -0.0 });
            }
            let want = (kernels(Isa::Scalar).argmax)(&v);
            let best = v
                .iter()
                .filter(|x| !x.is_nan())
                .fold(f32::NEG_INFINITY, |a, &x| a.max(x));
            let first = v.iter().position(|&x| x >= best).unwrap_or(0);
            assert_eq!(want, first, "oracle n {n} trial {trial}");
            for isa in Isa::supported() {
                assert_eq!(
                    (kernels(isa).argmax)(&v),
                    want,
                    "{isa:?} n {n} trial {trial}"
                );
            }
        }
    }
}
