//! The training kernels (`lshk::train`, issue 14 item 1): every tier this
//! CPU runs against the scalar oracle (bit for bit: the kernels are defined
//! to compute the same f32 operations in the same order on every tier), the
//! derived bounds against f64, a finite-difference check of the gradient
//! against the loss, bit-identity across thread counts 1/2/3, SGD and lazy
//! Adam against a plain dense reference, and the argument errors.

mod common;

use lshk::kernels::train::{self as kt, exp_neg, EXP_REL};
use lshk::matmul::f32_to_bf16;
use lshk::rng::SplitMix64;
use lshk::train::{
    self, gamma, gather_dq, rows_update_sgd, softmax_xent, softmax_xent_in_place, Adam, AdamParams,
    Batch, DqWeights, XentBound,
};
use lshk::{Isa, Status};

const U: f64 = 1.0 / 16_777_216.0;

fn tiers() -> Vec<Isa> {
    common::tiers::for_this_test()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn unif(r: &mut SplitMix64, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * r.next_f64_open() as f32
}

/// CSR offsets of the given segment lengths.
fn csr(lens: &[usize]) -> Vec<usize> {
    let mut o = vec![0];
    for &l in lens {
        o.push(o.last().unwrap() + l);
    }
    o
}

// ---------------------------------------------------------------- exp

#[test]
fn exp_within_derived_bound() {
    // A dense sweep of [-90, 0]: every 2^-13 step plus the f32 neighbours
    // of the reduction boundaries, and random points.
    let mut xs: Vec<f32> = (0..=(90 << 13)).map(|i| -(i as f32) / 8192.0).collect();
    let mut r = SplitMix64::new(7);
    xs.extend((0..200_000).map(|_| unif(&mut r, -88.0, 0.0)));
    for n in 0..130 {
        let b = -(n as f32 + 0.5) * std::f32::consts::LN_2;
        xs.extend([
            b,
            f32::from_bits(b.to_bits() + 1),
            f32::from_bits(b.to_bits() - 1),
        ]);
    }
    xs.extend([
        0.0,
        -0.0,
        f32::NEG_INFINITY,
        -87.0,
        -86.99999,
        -87.00001,
        f32::MIN,
    ]);
    let mut worst = 0f64;
    for &x in &xs {
        let got = exp_neg(x) as f64;
        let want = (x as f64).exp();
        let err = (got - want).abs();
        assert!(
            err <= EXP_REL * want + 2f64.powi(-125),
            "exp_neg({x:e}) = {got:e}, exp = {want:e}"
        );
        if x >= -86.0 {
            worst = worst.max(err / want);
        }
    }
    assert_eq!(exp_neg(0.0), 1.0);
    assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
    println!(
        "exp_neg: {} points, largest relative error {:.2} u (bound {:.0} u)",
        xs.len(),
        worst / U,
        EXP_REL / U
    );
}

// ---------------------------------------------------------------- xent

/// Exact (f64) loss and gradient of one segment.
fn xent_f64(z: &[f32], y: &[f32]) -> (f64, Vec<f64>, Vec<f64>, Vec<f64>, f64, f64) {
    let ysum: f64 = y.iter().map(|&v| v as f64).sum();
    if z.is_empty() || ysum == 0.0 {
        return (
            0.0,
            vec![0.0; z.len()],
            vec![0.0; z.len()],
            vec![0.0; z.len()],
            0.0,
            1.0,
        );
    }
    let m = z.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
    let s: f64 = z.iter().map(|&v| (v as f64 - m).exp()).sum();
    let p: Vec<f64> = z.iter().map(|&v| (v as f64 - m).exp() / s).collect();
    let t: Vec<f64> = y.iter().map(|&v| v as f64 / ysum).collect();
    let a: f64 = t.iter().zip(z).map(|(&t, &v)| t * (m - v as f64)).sum();
    let g = p.iter().zip(&t).map(|(p, t)| p - t).collect();
    (s.ln() + a, g, p, t, a, s)
}

/// A segment of `n` logits of spread `spread` and targets of `kind`.
fn segment(r: &mut SplitMix64, n: usize, spread: f32, kind: usize) -> (Vec<f32>, Vec<f32>) {
    let z: Vec<f32> = (0..n).map(|_| unif(r, -spread, spread)).collect();
    let mut y = vec![0.0f32; n];
    if n > 0 {
        match kind {
            0 => y[r.below(n as u64) as usize] = 1.0, // one label
            1 => {
                // several labels (uniform over them), maybe repeated draws
                for _ in 0..1 + r.below(4) {
                    y[r.below(n as u64) as usize] = 1.0;
                }
            }
            2 => y.iter_mut().for_each(|v| *v = unif(r, 0.0, 2.0)), // weights
            3 => {}                                                 // no target
            _ => y[n - 1] = 0.25,
        }
    }
    (z, y)
}

#[test]
fn xent_every_tier_bit_identical_to_oracle_and_within_bound() {
    let tiers = tiers();
    let mut r = SplitMix64::new(11);
    let mut sizes: Vec<usize> = (0..=49).collect();
    sizes.extend([63, 64, 65, 100, 255, 1000, 4097]);
    let mut worst_g = 0f64;
    for &n in &sizes {
        for kind in 0..5 {
            for &spread in &[0.0f32, 1.0, 30.0, 200.0] {
                let (z, y) = segment(&mut r, n, spread, kind);
                // three segments around it (one empty), unaligned by one.
                let (z2, y2) = segment(&mut r, 3, 1.0, 0);
                let mut zs = vec![9.0f32];
                zs.extend(&z2);
                zs.extend(&z);
                let mut ys = vec![0.0f32];
                ys.extend(&y2);
                ys.extend(&y);
                let offs = csr(&[3, 0, n]);
                let (zs, ys) = (&zs[1..], &ys[1..]); // unaligned
                let mut ref_loss = vec![0f32; 3];
                let mut ref_grad = vec![0f32; zs.len()];
                softmax_xent(Isa::Scalar, 1, zs, ys, &offs, &mut ref_loss, &mut ref_grad).unwrap();
                for &t in &tiers {
                    let mut loss = [f32::NAN; 4];
                    let mut grad = vec![f32::NAN; zs.len() + 1];
                    let gl = zs.len();
                    softmax_xent(t, 1, zs, ys, &offs, &mut loss[1..], &mut grad[1..=gl]).unwrap();
                    assert_eq!(bits(&loss[1..]), bits(&ref_loss), "{t:?} n {n} kind {kind}");
                    assert_eq!(bits(&grad[1..]), bits(&ref_grad), "{t:?} n {n} kind {kind}");
                    let mut x = zs.to_vec();
                    let mut l2 = vec![0f32; 3];
                    softmax_xent_in_place(t, 1, &mut x, ys, &offs, &mut l2).unwrap();
                    assert_eq!(bits(&x), bits(&ref_grad));
                    assert_eq!(bits(&l2), bits(&ref_loss));
                }
                // The bound against f64, for the segment of length n.
                let (l, g, p, tt, a, s) = xent_f64(&z, &y);
                let b = XentBound::new(n);
                let got_g = &ref_grad[3..];
                for j in 0..n {
                    let tol = b.grad_p * p[j] + b.grad_t * tt[j] + U * g[j].abs() + 2f64.powi(-125);
                    let err = (got_g[j] as f64 - g[j]).abs();
                    assert!(
                        err <= tol,
                        "n {n} kind {kind} spread {spread} j {j}: {} vs {}",
                        got_g[j],
                        g[j]
                    );
                    if p[j] + tt[j] > 1e-30 {
                        worst_g = worst_g.max(err / (p[j] + tt[j]));
                    }
                }
                let tol_l = b.loss_abs + b.loss_a * a + 2.0 * U * s.ln();
                assert!(
                    (ref_loss[2] as f64 - l).abs() <= tol_l,
                    "n {n} kind {kind} spread {spread}: loss {} vs {l}",
                    ref_loss[2]
                );
                assert_eq!(ref_loss[1], 0.0); // the empty segment
            }
        }
    }
    println!(
        "xent: largest gradient error {:.1} u of (p + t)",
        worst_g / U
    );
}

#[test]
fn xent_gradient_matches_finite_differences_of_the_loss() {
    let mut r = SplitMix64::new(5);
    for &n in &[1usize, 2, 7, 16, 33] {
        for kind in [0usize, 1, 2] {
            let (z, y) = segment(&mut r, n, 3.0, kind);
            let offs = csr(&[n]);
            let mut loss = [0f32];
            let mut g = vec![0f32; n];
            softmax_xent(Isa::Scalar, 1, &z, &y, &offs, &mut loss, &mut g).unwrap();
            let h = 1e-2f32;
            for j in 0..n {
                let f = |d: f32| {
                    let mut zz = z.clone();
                    zz[j] += d;
                    let mut l = [0f32];
                    let mut gg = vec![0f32; n];
                    softmax_xent(Isa::Scalar, 1, &zz, &y, &offs, &mut l, &mut gg).unwrap();
                    l[0] as f64
                };
                // Central difference of the f32 loss: truncation h^2 |L'''| / 6
                // <= h^2 / 6, rounding 2 * (bound of one loss ~ 1e-6) / (2h).
                let fd = (f(h) - f(-h)) / (2.0 * h as f64);
                assert!(
                    (fd - g[j] as f64).abs() <= 1e-4 + 2e-6 / h as f64,
                    "n {n} kind {kind} j {j}: fd {fd} grad {}",
                    g[j]
                );
            }
            // The gradient of a loss over a distribution sums to 0.
            let sum: f64 = g.iter().map(|&v| v as f64).sum();
            assert!(sum.abs() <= 4.0 * n as f64 * 1e-6, "sum {sum}");
        }
    }
}

#[test]
fn xent_threads_give_the_same_bits() {
    let mut r = SplitMix64::new(3);
    let lens: Vec<usize> = (0..37).map(|i| (i * 7) % 23).collect();
    let offs = csr(&lens);
    let n = *offs.last().unwrap();
    let z: Vec<f32> = (0..n).map(|_| unif(&mut r, -5.0, 5.0)).collect();
    let y: Vec<f32> = (0..n)
        .map(|_| if r.below(5) == 0 { 1.0 } else { 0.0 })
        .collect();
    let mut base = (vec![0f32; 37], vec![0f32; n]);
    softmax_xent(Isa::Scalar, 1, &z, &y, &offs, &mut base.0, &mut base.1).unwrap();
    for &t in &tiers() {
        for th in [1, 2, 3, 0] {
            let mut l = vec![0f32; 37];
            let mut g = vec![0f32; n];
            softmax_xent(t, th, &z, &y, &offs, &mut l, &mut g).unwrap();
            assert_eq!(bits(&l), bits(&base.0));
            assert_eq!(bits(&g), bits(&base.1));
        }
    }
}

#[test]
fn xent_argument_errors() {
    let z = [1.0f32, 2.0, 3.0];
    let y = [0.0f32, 1.0, 0.0];
    let mut l = [0f32; 2];
    let mut g = [0f32; 3];
    let st = |r: lshk::Result<()>| r.unwrap_err().status;
    let s = Isa::Scalar;
    assert_eq!(
        st(softmax_xent(s, 1, &z, &y, &[0, 1], &mut l, &mut g)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(softmax_xent(s, 1, &z, &y, &[], &mut l, &mut g)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(softmax_xent(s, 1, &z, &y[..2], &[0, 3], &mut l, &mut g)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(softmax_xent(s, 1, &z, &y, &[0, 1, 2, 3], &mut l, &mut g)),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(softmax_xent(
            s,
            1,
            &[1.0, f32::NAN, 0.0],
            &y,
            &[0, 3],
            &mut l,
            &mut g
        )),
        Status::NonFinite
    );
    assert_eq!(
        st(softmax_xent(
            s,
            1,
            &[1.0, f32::INFINITY, 0.0],
            &y,
            &[0, 3],
            &mut l,
            &mut g
        )),
        Status::NonFinite
    );
    assert_eq!(
        st(softmax_xent(
            s,
            1,
            &z,
            &[0.0, -1.0, 0.0],
            &[0, 3],
            &mut l,
            &mut g
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(softmax_xent(
            s,
            1,
            &z,
            &[0.0, f32::NAN, 0.0],
            &[0, 3],
            &mut l,
            &mut g
        )),
        Status::NonFinite
    );
    assert_eq!(l, [0.0; 2]);
    assert_eq!(g, [0.0; 3]);
    // -0.0 targets are allowed (>= 0) and all-zero targets give 0.
    softmax_xent(s, 1, &z, &[-0.0, 0.0, 0.0], &[0, 3], &mut l, &mut g).unwrap();
    assert_eq!((l[0], g), (0.0, [0.0; 3]));
}

// ---------------------------------------------------------------- dq

#[test]
fn dq_every_tier_bit_identical_and_within_bound() {
    let tiers = tiers();
    let mut r = SplitMix64::new(21);
    let rows = 97;
    let mut dims: Vec<usize> = (1..=49).collect();
    dims.extend([64, 127, 128, 129, 300]);
    for &dim in &dims {
        for &stride in &[dim, dim + 3] {
            let wl = (rows - 1) * stride + dim;
            let w: Vec<f32> = (0..wl + 1).map(|_| unif(&mut r, -1.0, 1.0)).collect();
            let wb: Vec<u16> = w.iter().map(|&x| f32_to_bf16(x)).collect();
            let lens = [0usize, 1, 5, 13, 2];
            let offs = csr(&lens);
            let n = *offs.last().unwrap();
            let mut ids: Vec<u32> = (0..n).map(|_| r.below(rows as u64) as u32).collect();
            ids[3] = ids[2]; // a duplicate inside a segment
            let g: Vec<f32> = (0..n).map(|_| unif(&mut r, -1.0, 1.0)).collect();
            let nb = lens.len();
            let dqs = dim + 1;
            for (name, wv) in [
                ("f32", DqWeights::F32(&w[1..])),
                ("bf16", DqWeights::Bf16(&wb[1..])),
            ] {
                let mut base = vec![f32::NAN; (nb - 1) * dqs + dim];
                gather_dq(
                    Isa::Scalar,
                    1,
                    wv,
                    rows,
                    dim,
                    stride,
                    &g,
                    &ids,
                    &offs,
                    &mut base,
                    dqs,
                )
                .unwrap();
                for &t in &tiers {
                    for th in [1, 2, 3] {
                        let mut out = vec![f32::NAN; (nb - 1) * dqs + dim + 1];
                        let ol = out.len() - 1;
                        gather_dq(
                            t,
                            th,
                            wv,
                            rows,
                            dim,
                            stride,
                            &g,
                            &ids,
                            &offs,
                            &mut out[1..=ol],
                            dqs,
                        )
                        .unwrap();
                        assert!(out[0].is_nan());
                        for b in 0..nb {
                            assert_eq!(
                                bits(&out[1 + b * dqs..1 + b * dqs + dim]),
                                bits(&base[b * dqs..b * dqs + dim]),
                                "{name} {t:?} threads {th} dim {dim} stride {stride} sample {b}"
                            );
                        }
                    }
                }
                // Against f64: gamma(n + 1) * sum |g w|.
                for b in 0..nb {
                    for k in 0..dim {
                        let (mut e, mut a) = (0f64, 0f64);
                        for j in offs[b]..offs[b + 1] {
                            let wv = match wv {
                                DqWeights::F32(w) => w[ids[j] as usize * stride + k] as f64,
                                DqWeights::Bf16(w) => {
                                    lshk::matmul::bf16_to_f32(w[ids[j] as usize * stride + k])
                                        as f64
                                }
                            };
                            e += g[j] as f64 * wv;
                            a += (g[j] as f64 * wv).abs();
                        }
                        let len = offs[b + 1] - offs[b];
                        assert!((base[b * dqs + k] as f64 - e).abs() <= gamma(len + 1) * a);
                    }
                }
            }
        }
    }
}

#[test]
fn dq_argument_errors() {
    let w = [0.5f32; 12];
    let g = [1.0f32; 3];
    let ids = [0u32, 2, 1];
    let mut dq = [7.0f32; 8];
    let st = |r: lshk::Result<()>| r.unwrap_err().status;
    let s = Isa::Scalar;
    let f = DqWeights::F32(&w);
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            4,
            4,
            &g,
            &[0, 3, 1],
            &[0, 1, 3],
            &mut dq,
            4
        )),
        Status::IndexOutOfRange
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            0,
            4,
            &g,
            &ids,
            &[0, 1, 3],
            &mut dq,
            4
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            4,
            3,
            &g,
            &ids,
            &[0, 1, 3],
            &mut dq,
            4
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            4,
            4,
            4,
            &g,
            &ids,
            &[0, 1, 3],
            &mut dq,
            4
        )),
        Status::BufferTooSmall
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            4,
            4,
            &g[..2],
            &ids,
            &[0, 1, 3],
            &mut dq,
            4
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            4,
            4,
            &g,
            &ids,
            &[0, 1, 2],
            &mut dq,
            4
        )),
        Status::InvalidArgument
    );
    assert_eq!(
        st(gather_dq(
            s,
            1,
            f,
            3,
            4,
            4,
            &g,
            &ids,
            &[0, 1, 1, 3],
            &mut dq[..11 - 4],
            4
        )),
        Status::BufferTooSmall
    );
    assert_eq!(dq, [7.0; 8]);
}

// ---------------------------------------------------------------- updates

struct Problem {
    rows: usize,
    dim: usize,
    stride: usize,
    w: Vec<f32>,
    q: Vec<f32>,
    ids: Vec<u32>,
    offs: Vec<usize>,
    g: Vec<f32>,
}

fn problem(r: &mut SplitMix64, rows: usize, dim: usize, nb: usize, k: usize) -> Problem {
    let stride = dim + 2;
    let w: Vec<f32> = (0..rows * stride).map(|_| unif(r, -1.0, 1.0)).collect();
    let q: Vec<f32> = (0..nb * dim).map(|_| unif(r, -1.0, 1.0)).collect();
    let lens: Vec<usize> = (0..nb)
        .map(|b| {
            if b % 5 == 3 {
                0
            } else {
                1 + r.below(k as u64) as usize
            }
        })
        .collect();
    let offs = csr(&lens);
    let n = *offs.last().unwrap();
    // Few rows: ids repeat across samples and within them.
    let ids: Vec<u32> = (0..n).map(|_| r.below(rows as u64) as u32).collect();
    let g: Vec<f32> = (0..n).map(|_| unif(r, -1.0, 1.0)).collect();
    Problem {
        rows,
        dim,
        stride,
        w,
        q,
        ids,
        offs,
        g,
    }
}

impl Problem {
    fn batch(&self) -> Batch<'_> {
        Batch {
            q: &self.q,
            q_stride: self.dim,
            ids: &self.ids,
            offsets: &self.offs,
            grad: &self.g,
        }
    }
    /// The dense gradient, summed the documented way (f32, position order,
    /// product and sum rounded separately), and which rows occur.
    fn dense_grad(&self) -> (Vec<f32>, Vec<bool>) {
        let mut gd = vec![0f32; self.rows * self.dim];
        let mut hit = vec![false; self.rows];
        for b in 0..self.offs.len() - 1 {
            for j in self.offs[b]..self.offs[b + 1] {
                let id = self.ids[j] as usize;
                hit[id] = true;
                for k in 0..self.dim {
                    gd[id * self.dim + k] += self.g[j] * self.q[b * self.dim + k];
                }
            }
        }
        (gd, hit)
    }
}

#[test]
fn sgd_every_tier_and_thread_count_equals_sequential_reference() {
    let tiers = tiers();
    let mut r = SplitMix64::new(31);
    for &(rows, dim, nb, k) in &[
        (5usize, 1usize, 3usize, 4usize),
        (13, 7, 9, 6),
        (40, 16, 17, 12),
        (200, 33, 30, 40),
        (64, 128, 8, 30),
        // Full vectors in fours, single ones and the masked tail, on both
        // vector widths.
        (50, 112, 10, 12),
        (30, 200, 6, 8),
        (20, 255, 5, 9),
        (9, 1000, 3, 5),
        // Enough positions (16,384 a thread) for two and three threads,
        // rows repeated within and across the threads' ranges (grouped by
        // row: 2 n >= rows).
        (2000, 5, 100, 1200),
        (40, 9, 60, 1300),
        // Few repeats (2 n < rows: applied position by position, not
        // grouped), on one thread and on several.
        (100_000, 20, 30, 500),
        (300_000, 6, 100, 1200),
    ] {
        let p = problem(&mut r, rows, dim, nb, k);
        let lr = 0.37f32;
        // The definition: position by position, in order.
        let mut want = p.w.clone();
        for b in 0..nb {
            for j in p.offs[b]..p.offs[b + 1] {
                let id = p.ids[j] as usize;
                let c = lr * p.g[j];
                for kk in 0..dim {
                    want[id * p.stride + kk] -= c * p.q[b * dim + kk];
                }
            }
        }
        for &t in &tiers {
            for th in [1, 2, 3, 0] {
                let mut w = p.w.clone();
                rows_update_sgd(t, th, &mut w, rows, dim, p.stride, &p.batch(), lr).unwrap();
                assert_eq!(
                    bits(&w),
                    bits(&want),
                    "{t:?} threads {th} rows {rows} dim {dim}"
                );
            }
        }
    }
}

#[test]
fn adam_every_tier_and_thread_count_equals_dense_reference() {
    let tiers = tiers();
    let mut r = SplitMix64::new(41);
    for &(rows, dim, nb, k) in &[
        (5usize, 3usize, 4usize, 3usize),
        (30, 17, 12, 9),
        (64, 128, 8, 30),
        (30, 112, 8, 10),
        (20, 255, 5, 9),
    ] {
        let params = AdamParams {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        };
        // Three steps with different batches, so the rows' step counts
        // differ (lazy bias correction).
        let probs: Vec<Problem> = (0..3).map(|_| problem(&mut r, rows, dim, nb, k)).collect();
        let stride = probs[0].stride;
        let w0 = probs[0].w.clone();
        // Dense reference: plain loops over every row, touching those hit.
        let mut want = w0.clone();
        let (mut m, mut v, mut t) = (
            vec![0f32; rows * dim],
            vec![0f32; rows * dim],
            vec![0u32; rows],
        );
        for p in &probs {
            let (gd, hit) = p.dense_grad();
            for row in 0..rows {
                if !hit[row] {
                    continue;
                }
                t[row] += 1;
                let c1 = (1.0 / (1.0 - (0.9f32 as f64).powi(t[row] as i32))) as f32;
                let c2 = (1.0 / (1.0 - (0.999f32 as f64).powi(t[row] as i32))) as f32;
                for kk in 0..dim {
                    let g = gd[row * dim + kk];
                    let e = row * dim + kk;
                    m[e] = 0.9 * m[e] + (1.0 - 0.9f32) * g;
                    v[e] = 0.999 * v[e] + (1.0 - 0.999f32) * (g * g);
                    let mh = m[e] * c1;
                    let vh = v[e] * c2;
                    want[row * stride + kk] -= (0.01 * mh) / (vh.sqrt() + 1e-8);
                }
            }
        }
        for &tier in &tiers {
            for th in [1, 2, 3] {
                let mut w = w0.clone();
                let mut a = Adam::new(rows, dim, params).unwrap();
                for p in &probs {
                    a.step(tier, th, &mut w, stride, &p.batch()).unwrap();
                }
                assert_eq!(
                    bits(&w),
                    bits(&want),
                    "{tier:?} threads {th} rows {rows} dim {dim}"
                );
                assert_eq!(bits(a.m()), bits(&m));
                assert_eq!(bits(a.v()), bits(&v));
                assert_eq!(a.steps(), &t[..]);
            }
        }
    }
}

#[test]
fn sgd_matches_f64_within_bound() {
    // One step against exact arithmetic, the row's c occurrences applied
    // one after the other: each step (lr g) q is within gamma(2) of exact,
    // each of the c differences rounds once, relative to an intermediate
    // row no larger than |w| + 2 lr sum|g q|: |w' - (w - lr G)| <=
    // gamma(2) lr sum|g q| + gamma(c) (|w| + 2 lr sum|g q|).
    let mut r = SplitMix64::new(51);
    let p = problem(&mut r, 20, 24, 15, 10);
    let lr = 0.5f32;
    let mut w = p.w.clone();
    rows_update_sgd(
        Isa::Scalar,
        1,
        &mut w,
        p.rows,
        p.dim,
        p.stride,
        &p.batch(),
        lr,
    )
    .unwrap();
    for row in 0..p.rows {
        for k in 0..p.dim {
            let (mut e, mut a, mut c) = (0f64, 0f64, 0usize);
            for b in 0..p.offs.len() - 1 {
                for j in p.offs[b]..p.offs[b + 1] {
                    if p.ids[j] as usize == row {
                        let v = p.g[j] as f64 * p.q[b * p.dim + k] as f64;
                        e += v;
                        a += v.abs();
                        c += 1;
                    }
                }
            }
            let want = p.w[row * p.stride + k] as f64 - lr as f64 * e;
            let got = w[row * p.stride + k] as f64;
            let w0 = (p.w[row * p.stride + k] as f64).abs();
            let la = lr as f64 * a;
            let tol = gamma(2) * la + gamma(c) * (w0 + 2.0 * la);
            assert!((got - want).abs() <= tol, "row {row} k {k}");
        }
    }
}

#[test]
fn update_argument_errors_write_nothing() {
    let mut r = SplitMix64::new(61);
    let p = problem(&mut r, 6, 4, 3, 3);
    let s = Isa::Scalar;
    let st = |res: lshk::Result<()>| res.unwrap_err().status;
    let mut w = p.w.clone();
    let mut bad = p.batch();
    let mut ids = p.ids.clone();
    ids[0] = 6;
    bad.ids = &ids;
    assert_eq!(
        st(rows_update_sgd(s, 1, &mut w, 6, 4, p.stride, &bad, 0.1)),
        Status::IndexOutOfRange
    );
    let mut g = p.g.clone();
    g[1] = f32::NAN;
    let mut bad = p.batch();
    bad.grad = &g;
    assert_eq!(
        st(rows_update_sgd(s, 1, &mut w, 6, 4, p.stride, &bad, 0.1)),
        Status::NonFinite
    );
    assert_eq!(
        st(rows_update_sgd(
            s,
            1,
            &mut w,
            6,
            4,
            p.stride,
            &p.batch(),
            f32::INFINITY
        )),
        Status::NonFinite
    );
    assert_eq!(
        st(rows_update_sgd(s, 1, &mut w, 6, 4, 3, &p.batch(), 0.1)),
        Status::InvalidArgument
    );
    assert_eq!(
        st(rows_update_sgd(
            s,
            1,
            &mut w,
            7,
            4,
            p.stride,
            &p.batch(),
            0.1
        )),
        Status::BufferTooSmall
    );
    let mut q = p.q.clone();
    q[2] = f32::NEG_INFINITY;
    let mut bad = p.batch();
    bad.q = &q;
    assert_eq!(
        st(rows_update_sgd(s, 1, &mut w, 6, 4, p.stride, &bad, 0.1)),
        Status::NonFinite
    );
    let mut a = Adam::new(6, 4, AdamParams::default()).unwrap();
    let mut bad = p.batch();
    bad.grad = &g;
    assert_eq!(st(a.step(s, 1, &mut w, p.stride, &bad)), Status::NonFinite);
    assert_eq!(bits(&w), bits(&p.w));
    assert!(a.m().iter().chain(a.v()).all(|&x| x == 0.0) && a.steps().iter().all(|&t| t == 0));
    for bad in [
        AdamParams {
            beta1: 1.0,
            ..Default::default()
        },
        AdamParams {
            beta2: -0.1,
            ..Default::default()
        },
        AdamParams {
            eps: 0.0,
            ..Default::default()
        },
        AdamParams {
            lr: f32::NAN,
            ..Default::default()
        },
    ] {
        assert!(Adam::new(2, 2, bad).is_err());
    }
    assert_eq!(
        Adam::new(2, 0, AdamParams::default()).unwrap_err().status,
        Status::InvalidArgument
    );
    // An empty batch touches nothing.
    let empty = Batch {
        q: &[],
        q_stride: 4,
        ids: &[],
        offsets: &[0],
        grad: &[],
    };
    rows_update_sgd(s, 2, &mut w, 6, 4, p.stride, &empty, 0.1).unwrap();
    assert_eq!(bits(&w), bits(&p.w));
}

/// The segment sums are the documented 16-lane sums on every tier.
#[test]
fn lane_sum_is_the_documented_tree() {
    let mut s = [0f32; kt::LANES];
    for (l, v) in s.iter_mut().enumerate() {
        *v = (1u32 << l) as f32;
    }
    assert_eq!(kt::lane_sum(s), 65535.0);
    let _ = train::gamma(1);
}

/// Regression: a thread split where the last threads get no sample (the
/// trailing segments are empty) and dq's last row is shorter than its
/// stride; this panicked in the C bad-input matrix before the fix.
#[test]
fn dq_threads_with_empty_trailing_segments() {
    let (rows, dim, stride) = (4usize, 6usize, 8usize);
    let w: Vec<f32> = (0..rows * dim).map(|i| i as f32 * 0.25).collect();
    for lens in [[6usize, 0, 0], [0, 0, 6], [1, 0, 0]] {
        let offs = csr(&lens);
        let n = offs[3];
        let ids: Vec<u32> = (0..n).map(|j| (j % rows) as u32).collect();
        let g: Vec<f32> = (0..n).map(|j| j as f32 - 1.5).collect();
        let mut base = vec![0f32; 2 * stride + dim];
        gather_dq(
            Isa::Scalar,
            1,
            DqWeights::F32(&w),
            rows,
            dim,
            dim,
            &g,
            &ids,
            &offs,
            &mut base,
            stride,
        )
        .unwrap();
        for th in [2, 3, 8] {
            let mut out = vec![0f32; 2 * stride + dim];
            gather_dq(
                Isa::Scalar,
                th,
                DqWeights::F32(&w),
                rows,
                dim,
                dim,
                &g,
                &ids,
                &offs,
                &mut out,
                stride,
            )
            .unwrap();
            assert_eq!(bits(&out), bits(&base), "{lens:?} threads {th}");
        }
    }
}

/// The grouping's two sorts (Adam groups the batch by row; SGD does not):
/// the direct counting sort over the rows (rows 2,000 and 60,000: `rows <=
/// 4 n + 65,536` for the 126 positions here) and the radix sort over the
/// positions with 2 and 3 passes (70,000 and 3,000,000 rows: ids below
/// 2^22; 5,000,000: above): one Adam step equals the dense reference bit
/// for bit either way, with ids repeated within and across samples.
#[test]
fn adam_grouping_passes_equal_dense_reference() {
    let mut r = SplitMix64::new(71);
    let params = AdamParams {
        lr: 0.25,
        ..AdamParams::default()
    };
    let c = params.coef(1);
    for &(rows, dim) in &[
        (2000usize, 3usize),
        (60_000, 2),
        (70_000, 2),
        (3_000_000, 1),
        (5_000_000, 1),
    ] {
        let nb = 7;
        let q: Vec<f32> = (0..nb * dim).map(|_| unif(&mut r, -1.0, 1.0)).collect();
        let lens: Vec<usize> = (0..nb).map(|b| 3 + b * 5).collect();
        let offs = csr(&lens);
        let n = offs[nb];
        // A small pool of ids spread over the whole range, so they repeat.
        let pool: Vec<u32> = (0..40).map(|_| r.below(rows as u64) as u32).collect();
        let ids: Vec<u32> = (0..n).map(|_| pool[r.below(40) as usize]).collect();
        let g: Vec<f32> = (0..n).map(|_| unif(&mut r, -1.0, 1.0)).collect();
        let w0: Vec<f32> = (0..rows * dim).map(|i| (i % 97) as f32 * 0.01).collect();
        let mut want = w0.clone();
        let mut gd = std::collections::BTreeMap::<usize, Vec<f32>>::new();
        for b in 0..nb {
            for j in offs[b]..offs[b + 1] {
                let e = gd.entry(ids[j] as usize).or_insert_with(|| vec![0.0; dim]);
                for k in 0..dim {
                    e[k] += g[j] * q[b * dim + k];
                }
            }
        }
        // The first step of every row hit (m = v = 0, t = 1).
        for (row, gr) in &gd {
            for k in 0..dim {
                let gk = gr[k];
                let m = c.beta1 * 0.0 + c.one_minus_beta1 * gk;
                let v = c.beta2 * 0.0 + c.one_minus_beta2 * (gk * gk);
                let (mh, vh) = (m * c.c1, v * c.c2);
                want[row * dim + k] -= (c.lr * mh) / (vh.sqrt() + c.eps);
            }
        }
        let batch = Batch {
            q: &q,
            q_stride: dim,
            ids: &ids,
            offsets: &offs,
            grad: &g,
        };
        for th in [1, 3] {
            let mut w = w0.clone();
            let mut a = Adam::new(rows, dim, params).unwrap();
            a.step(
                Isa::Avx2.min(lshk::isa::detected()),
                th,
                &mut w,
                dim,
                &batch,
            )
            .unwrap();
            assert!(bits(&w) == bits(&want), "rows {rows} threads {th}");
        }
    }
}

/// The bias corrections' `beta^t` (written out, so that no platform's
/// `powi` decides the bits) equals `f64::powi` where that is compiler-rt's
/// `__powidf2` (x86-64), for every `t` up to 2^17 and some large ones.
#[cfg(target_arch = "x86_64")]
#[test]
fn adam_pow_int_matches_powi() {
    use lshk::kernels::train::pow_int2;
    for &(a, b) in &[(0.9f64, 0.999f64), (0.5, 0.99), (0.0, 0.999_9)] {
        let big = [1u32 << 20, 1 << 30, (1 << 31) - 1, u32::MAX];
        for t in (1..=1u32 << 17).chain(big) {
            let e = t.min(i32::MAX as u32) as i32;
            let (pa, pb) = pow_int2(a, b, t);
            assert_eq!(pa.to_bits(), a.powi(e).to_bits(), "{a}^{t}");
            assert_eq!(pb.to_bits(), b.powi(e).to_bits(), "{b}^{t}");
        }
    }
}

/// Past `saturation_step` both corrections are exactly 1 (the SIMD
/// kernels skip their computation there), and just before it they are not
/// both 1 by much: checked on a window around it and at large counts.
#[test]
fn adam_saturation_step_gives_unit_corrections() {
    use lshk::kernels::train::AdamCoef;
    for &(b1, b2) in &[
        (0.9f32, 0.999f32),
        (0.5, 0.99),
        (0.0, 0.0),
        (0.99, 0.999_99),
    ] {
        let c = AdamParams {
            lr: 0.1,
            beta1: b1,
            beta2: b2,
            eps: 1e-8,
        }
        .coef(1);
        let sat = c.saturation_step();
        assert!(sat < u32::MAX, "{b1} {b2}");
        let from = sat.saturating_sub(5000).max(1);
        for t in (from..sat.saturating_add(20_000)).chain([u32::MAX - 1, u32::MAX]) {
            let k: AdamCoef = c.at_step(t);
            if t >= sat {
                assert_eq!((k.c1, k.c2), (1.0, 1.0), "{b1} {b2} t {t} sat {sat}");
            }
        }
    }
}

/// Rows updated past the saturation step (betas 0.5 and 0.9: about 170
/// steps) keep every tier bit-identical to the scalar oracle.
#[test]
fn adam_tiers_agree_past_saturation() {
    let mut r = SplitMix64::new(77);
    let (rows, dim) = (6usize, 37usize);
    let params = AdamParams {
        lr: 0.01,
        beta1: 0.5,
        beta2: 0.9,
        eps: 1e-8,
    };
    let probs: Vec<Problem> = (0..4).map(|_| problem(&mut r, rows, dim, 5, 4)).collect();
    let stride = probs[0].stride;
    let run = |t: Isa| {
        let mut w = probs[0].w.clone();
        let mut a = Adam::new(rows, dim, params).unwrap();
        for step in 0..400 {
            let p = &probs[step % probs.len()];
            a.step(t, 1, &mut w, stride, &p.batch()).unwrap();
        }
        (bits(&w), bits(a.m()), bits(a.v()), a.steps().to_vec())
    };
    let want = run(Isa::Scalar);
    assert!(want.3.iter().any(|&t| t > 200), "{:?}", want.3);
    for t in tiers() {
        assert_eq!(run(t), want, "{t:?}");
    }
}
