//! Gathered matmul, conversions, top-k and softmax against f64 / sorting
//! references, on every tier this CPU supports.
//!
//! Tolerances are derived, not tuned. With `u = 2^-24`, every tier computes
//! `dot(w, q)` from the *stored* (exactly widened) W values with at most
//! `dim` roundings per term (FMA chains, or multiply + add in the portable
//! tier without FMA, plus a reduction tree shallower than `dim`), one more
//! for the int8 scale and one for the bias, hence
//! `|out - exact| <= gamma(dim + 2) * (sum_j |w_j q_j| + |bias|)` with
//! `gamma(n) = n u / (1 - n u)`. The f64 reference itself is off by at most
//! `gamma53(dim + 2)` times the same sum, added to the bound. The storage
//! rounding of bf16 / f16 / int8 W is tested separately (conversion tests).

mod common;

use lshk::matmul::{self, Schedule, WeightMatrix, Weights};
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

const U: f64 = 1.0 / (1u64 << 24) as f64;

fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu) + (n as f64) * f64::EPSILON
}

// Every tier this CPU supports (capped by `LSHK_MAX_ISA`), printed once per
// test; under CI a supported tier that does not run fails the test.
use common::tiers::for_this_test as tiers;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dt {
    F32,
    Bf16,
    F16,
    I8,
}
const DTYPES: [Dt; 4] = [Dt::F32, Dt::Bf16, Dt::F16, Dt::I8];

/// Owned weights of one dtype, with the exact f64 value of every stored
/// element (`vals`, already times the row scale for int8).
struct Owned {
    dt: Dt,
    f: Vec<f32>,
    h: Vec<u16>,
    b: Vec<i8>,
    scales: Vec<f32>,
    vals: Vec<f64>,
    /// Element offset of the data start (to make pointers unaligned).
    off: usize,
}

impl Owned {
    /// Random weights (rows x stride, `off` leading pad elements); values
    /// from `gen`.
    fn new(dt: Dt, rows: usize, stride: usize, off: usize, gen: &mut dyn FnMut() -> f32) -> Owned {
        let n = off + rows * stride;
        let src: Vec<f32> = (0..n).map(|_| gen()).collect();
        let mut o = Owned {
            dt,
            f: vec![],
            h: vec![],
            b: vec![],
            scales: vec![],
            vals: vec![0.0; n],
            off,
        };
        match dt {
            Dt::F32 => {
                o.vals = src.iter().map(|&v| v as f64).collect();
                o.f = src;
            }
            Dt::Bf16 => {
                o.h = src.iter().map(|&v| matmul::f32_to_bf16(v)).collect();
                o.vals = o.h.iter().map(|&v| matmul::bf16_to_f32(v) as f64).collect();
            }
            Dt::F16 => {
                o.h = src.iter().map(|&v| matmul::f32_to_f16(v)).collect();
                o.vals = o.h.iter().map(|&v| matmul::f16_to_f32(v) as f64).collect();
            }
            Dt::I8 => {
                o.b = vec![0; n];
                o.scales = vec![0.0; rows];
                let finite: Vec<f32> = src
                    .iter()
                    .map(|v| if v.is_finite() { *v } else { 1.0 })
                    .collect();
                matmul::quantize_rows_i8(
                    &finite[off..],
                    rows,
                    stride,
                    stride,
                    &mut o.b[off..],
                    stride,
                    &mut o.scales,
                )
                .unwrap();
                for r in 0..rows {
                    for j in 0..stride {
                        let i = off + r * stride + j;
                        o.vals[i] = o.b[i] as f64 * o.scales[r] as f64;
                    }
                }
            }
        }
        o
    }
    fn weights(&self) -> Weights<'_> {
        match self.dt {
            Dt::F32 => Weights::F32(&self.f[self.off..]),
            Dt::Bf16 => Weights::Bf16(&self.h[self.off..]),
            Dt::F16 => Weights::F16(&self.h[self.off..]),
            Dt::I8 => Weights::I8 {
                w: &self.b[self.off..],
                scales: &self.scales,
            },
        }
    }
    /// Overwrites one element with a special value (stored form).
    fn set(&mut self, idx: usize, v: f32) {
        let i = self.off + idx;
        match self.dt {
            Dt::F32 => self.f[i] = v,
            Dt::Bf16 => self.h[i] = matmul::f32_to_bf16(v),
            Dt::F16 => self.h[i] = matmul::f32_to_f16(v),
            Dt::I8 => return, // int8 has no special values
        }
        self.vals[i] = v as f64;
    }
}

struct Case {
    rows: usize,
    dim: usize,
    stride: usize,
    nq: usize,
    q_stride: usize,
    ids: Vec<u32>,
    offsets: Vec<usize>,
    bias: bool,
}

/// Runs `case` on every tier and dtype against the f64 reference.
fn check_case(c: &Case, w_gen: &mut dyn FnMut() -> f32, q: &[f32], specials: &[(usize, f32)]) {
    let mut rng = SplitMix64::new(99);
    let bias: Vec<f32> = (0..c.rows).map(|_| rng.next_normal() as f32).collect();
    for dt in DTYPES {
        let mut ow = Owned::new(dt, c.rows, c.stride, 1, w_gen);
        for &(i, v) in specials {
            ow.set(i, v);
        }
        let mut m = WeightMatrix::new(ow.weights(), c.rows, c.dim, c.stride).unwrap();
        if c.bias {
            m = m.with_bias(&bias).unwrap();
        }
        // Reference.
        let n = c.ids.len();
        let mut want = vec![0f64; n];
        let mut mag = vec![0f64; n];
        for i in 0..c.nq {
            for j in c.offsets[i]..c.offsets[i + 1] {
                let id = c.ids[j] as usize;
                let (mut s, mut a) = (0f64, 0f64);
                for t in 0..c.dim {
                    let w = ow.vals[ow.off + id * c.stride + t];
                    let x = q[i * c.q_stride + t] as f64;
                    s += w * x;
                    a += (w * x).abs();
                }
                if c.bias {
                    s += bias[id] as f64;
                    a += (bias[id] as f64).abs();
                }
                want[j] = s;
                mag[j] = a;
            }
        }
        for tier in tiers() {
            // Every tier, AVX-512 included, widens W to f32 exactly and keeps
            // q in f32: one bound for all (issue 12 removed the vdpbf16ps
            // path, which rounded q to bf16).
            let tol = gamma(c.dim + 2);
            for sched in [Schedule::PerQuery, Schedule::Union, Schedule::Auto] {
                let mut out = vec![f32::from_bits(0x7fc0_dead); n];
                m.matmul_schedule(
                    tier, sched, q, c.nq, c.q_stride, &c.ids, &c.offsets, &mut out,
                )
                .unwrap();
                for j in 0..n {
                    let (g, w) = (out[j] as f64, want[j]);
                    let ok = if w.is_nan() {
                        g.is_nan()
                    } else if w.is_infinite() {
                        g == w
                    } else {
                        (g - w).abs() <= tol * mag[j]
                    };
                    assert!(
                        ok,
                        "{dt:?} {tier:?} {sched:?} dim {} stride {} out[{j}] (id {}) = {g}, \
                         want {w} (tolerance {})",
                        c.dim,
                        c.stride,
                        c.ids[j],
                        tol * mag[j]
                    );
                }
            }
        }
    }
}

fn random_case(rng: &mut SplitMix64, rows: usize, dim: usize, stride: usize, nq: usize) -> Case {
    let mut ids = vec![];
    let mut offsets = vec![0usize];
    for i in 0..nq {
        // Segment lengths 0..=2*rows, query 1 always empty.
        let len = if i == 1 {
            0
        } else {
            rng.below(2 * rows as u64 + 1) as usize
        };
        for _ in 0..len {
            ids.push(rng.below(rows as u64) as u32); // duplicates happen
        }
        offsets.push(ids.len());
    }
    Case {
        rows,
        dim,
        stride,
        nq,
        q_stride: dim + 3,
        ids,
        offsets,
        bias: rng.below(2) == 1,
    }
}

#[test]
fn matmul_random_shapes_all_tiers() {
    let mut rng = SplitMix64::new(7);
    let mut dims: Vec<usize> = (1..=3 * 16 + 1).collect();
    dims.extend([64, 127, 128, 129, 4096]);
    for &dim in &dims {
        let rows = if dim >= 1024 { 9 } else { 23 };
        for stride in [dim, dim + 5] {
            let c = random_case(&mut rng, rows, dim, stride, 4);
            let q: Vec<f32> = (0..c.nq * c.q_stride + 1)
                .map(|_| rng.next_normal() as f32)
                .collect();
            let mut g = SplitMix64::new(dim as u64);
            // q[1..] makes the query pointer unaligned to 32 bytes.
            check_case(&c, &mut || g.next_normal() as f32, &q[1..], &[]);
        }
    }
}

#[test]
fn matmul_one_query_all_rows_and_edge_segments() {
    let mut rng = SplitMix64::new(8);
    for &dim in &[1usize, 8, 13, 128] {
        let rows = 37;
        let c = Case {
            rows,
            dim,
            stride: dim,
            nq: 1,
            q_stride: dim,
            ids: (0..rows as u32).collect(),
            offsets: vec![0, rows],
            bias: true,
        };
        let q: Vec<f32> = (0..dim).map(|_| rng.next_normal() as f32).collect();
        let mut g = SplitMix64::new(3);
        check_case(&c, &mut || g.next_normal() as f32, &q, &[]);
        // All segments empty, and nq = 0.
        let m_src: Vec<f32> = vec![1.0; rows * dim];
        let m = WeightMatrix::new(Weights::F32(&m_src), rows, dim, dim).unwrap();
        for tier in tiers() {
            let mut out: [f32; 0] = [];
            m.matmul_isa(tier, &q, 1, dim, &[], &[0, 0], &mut out)
                .unwrap();
            m.matmul_isa(tier, &[], 0, dim, &[], &[0], &mut out)
                .unwrap();
        }
    }
}

/// Runs of consecutive ids (the f32 path scores runs of at least
/// `matmul::RUN_MIN` with the dense tile): runs just below, at and above
/// the threshold, at the start and the end of a segment, back to back, a
/// run broken by a repeat, descending ids; every tier and dtype, with and
/// without a stride, NaN / infinity inside a run.
#[test]
fn matmul_contiguous_runs_within_the_bound() {
    let m = matmul::RUN_MIN as u32;
    let mut ids: Vec<u32> = (0..m - 1).collect(); // one short of a run
    ids.extend(40..40 + m); // exactly a run
    ids.extend(100..100 + 3 * m + 5); // a long run
    ids.push(100 + 3 * m + 4); // a repeat right after it
    ids.extend((60..60 + m + 2).rev()); // descending: no run
    ids.extend(200..200 + m + 1); // a run ending the first segment
    let first = ids.len();
    ids.extend(7..7 + 2 * m); // a second query: one run
    let rows = 260;
    let mut rng = SplitMix64::new(12);
    for &dim in &[1usize, 15, 16, 33, 128] {
        for stride in [dim, dim + 3] {
            let c = Case {
                rows,
                dim,
                stride,
                nq: 2,
                q_stride: dim + 1,
                ids: ids.clone(),
                offsets: vec![0, first, ids.len()],
                bias: true,
            };
            let q: Vec<f32> = (0..2 * (dim + 1))
                .map(|_| rng.next_normal() as f32)
                .collect();
            let mut g = SplitMix64::new(dim as u64 + 1);
            // Specials in rows 45 (inside the exact run) and 110 (long run).
            let specials = [
                (45 * stride, f32::NAN),
                (110 * stride + dim - 1, f32::INFINITY),
            ];
            check_case(&c, &mut || g.next_normal() as f32, &q, &specials);
        }
    }
}

#[test]
fn matmul_shared_candidates_union_schedule() {
    // 6 queries drawing from a pool of 40 rows out of 300 (heavy sharing),
    // run with every schedule (Union explicitly); plus some unshared ids.
    let mut rng = SplitMix64::new(9);
    for &dim in &[1usize, 7, 8, 33, 128] {
        let rows = 300;
        let pool: Vec<u32> = (0..40).map(|_| rng.below(rows as u64) as u32).collect();
        let mut ids = vec![];
        let mut offsets = vec![0usize];
        for i in 0..6 {
            let len = if i == 2 {
                0
            } else {
                60 + rng.below(80) as usize
            };
            for _ in 0..len {
                ids.push(if rng.below(10) == 0 {
                    rng.below(rows as u64) as u32
                } else {
                    pool[rng.below(40) as usize]
                });
            }
            offsets.push(ids.len());
        }
        let c = Case {
            rows,
            dim,
            stride: dim + 2,
            nq: 6,
            q_stride: dim + 1,
            ids,
            offsets,
            bias: true,
        };
        let q: Vec<f32> = (0..6 * c.q_stride)
            .map(|_| rng.next_normal() as f32)
            .collect();
        let mut g = SplitMix64::new(dim as u64 + 100);
        check_case(&c, &mut || g.next_normal() as f32, &q, &[]);
    }
}

#[test]
fn matmul_nan_inf_propagate() {
    // Row 0 holds a NaN, row 1 +inf (q > 0 there), row 2 +inf against q = 0
    // (inf * 0 = NaN), row 3 -inf and +inf (NaN), row 4 finite.
    let dim = 21;
    let rows = 6;
    let mut q: Vec<f32> = (0..dim).map(|j| 0.25 + j as f32 / 16.0).collect();
    q[5] = 0.0;
    let specials = [
        (3, f32::NAN),
        (dim + 2, f32::INFINITY),
        (2 * dim + 5, f32::INFINITY),
        (3 * dim, f32::NEG_INFINITY),
        (3 * dim + 20, f32::INFINITY),
    ];
    let ids: Vec<u32> = vec![0, 1, 2, 3, 4, 5, 1, 0, 4];
    let c = Case {
        rows,
        dim,
        stride: dim,
        nq: 1,
        q_stride: dim,
        offsets: vec![0, ids.len()],
        ids,
        bias: false,
    };
    let mut g = SplitMix64::new(4);
    check_case(&c, &mut || (g.next_f64_open() - 0.5) as f32, &q, &specials);
    // NaN and inf in Q.
    let mut q2 = q.clone();
    q2[7] = f32::NAN;
    check_case(&c, &mut || (g.next_f64_open() - 0.5) as f32, &q2, &[]);
    let mut q3 = q.clone();
    q3[9] = f32::INFINITY;
    check_case(&c, &mut || 0.5 + g.next_f64_open() as f32, &q3, &[]);
}

#[test]
fn matmul_errors_write_nothing() {
    let (rows, dim) = (10usize, 8usize);
    let w = vec![1.0f32; rows * dim];
    let q = vec![1.0f32; 2 * dim];
    let m = WeightMatrix::new(Weights::F32(&w), rows, dim, dim).unwrap();
    let canary = f32::from_bits(0x7fa5_a5a5);
    let run = |ids: &[u32], offs: &[usize], out_len: usize| {
        let mut out = vec![canary; out_len];
        let r = m.matmul_isa(Isa::Scalar, &q, 2, dim, ids, offs, &mut out);
        assert!(out.iter().all(|v| v.to_bits() == canary.to_bits()));
        r.unwrap_err()
    };
    let e = run(&[1, 2, 3, 10, 4], &[0, 2, 5], 5);
    assert_eq!(e.status, Status::IndexOutOfRange);
    assert!(
        e.message.contains("ids[3]") && e.message.contains("query 1"),
        "{}",
        e.message
    );
    assert_eq!(
        run(&[1, 2, 3], &[0, 2, 1], 3).status,
        Status::InvalidArgument
    ); // decreasing
    assert_eq!(
        run(&[1, 2, 3], &[1, 2, 3], 3).status,
        Status::InvalidArgument
    ); // not from 0
    assert_eq!(
        run(&[1, 2, 3], &[0, 2, 2], 3).status,
        Status::InvalidArgument
    ); // end != len
    assert_eq!(run(&[1, 2, 3], &[0, 3], 3).status, Status::InvalidArgument); // nq + 1
    assert_eq!(
        WeightMatrix::new(Weights::F32(&w), rows, dim, dim - 1)
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    assert_eq!(
        WeightMatrix::new(Weights::F32(&w), rows, 0, 0)
            .unwrap_err()
            .status,
        Status::InvalidArgument
    );
    assert_eq!(
        WeightMatrix::new(Weights::F32(&w), rows + 1, dim, dim)
            .unwrap_err()
            .status,
        Status::BufferTooSmall
    );
    let mut out = vec![0.0; 1];
    let e = m.matmul_isa(Isa::Scalar, &q, 2, dim + 1, &[0], &[0, 1, 1], &mut out);
    assert_eq!(e.unwrap_err().status, Status::BufferTooSmall); // q too short
    if !Isa::supported().any(|t| t == Isa::Avx512) {
        let e = m.matmul_isa(Isa::Avx512, &q, 2, dim, &[0], &[0, 1, 1], &mut out);
        assert_eq!(e.unwrap_err().status, Status::UnsupportedIsa);
    }
}

// ------------------------------------------------------------ conversions

#[test]
fn f16_all_values_round_trip() {
    for h in 0..=u16::MAX {
        let f = matmul::f16_to_f32(h);
        let back = matmul::f32_to_f16(f);
        if f.is_nan() {
            assert_eq!(back, h | 0x0200, "NaN {h:#06x} is quieted, payload kept");
        } else {
            assert_eq!(back, h, "{h:#06x} -> {f} -> {back:#06x}");
        }
    }
    // Known values.
    assert_eq!(matmul::f16_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(matmul::f16_to_f32(0x7bff), 65504.0);
    assert_eq!(matmul::f16_to_f32(0x3c00), 1.0);
    assert_eq!(matmul::f32_to_f16(65519.996), 0x7bff);
    assert_eq!(matmul::f32_to_f16(65520.0), 0x7c00); // tie at the top -> inf
    assert_eq!(matmul::f32_to_f16(1e9), 0x7c00);
    assert_eq!(matmul::f32_to_f16(-1e9), 0xfc00);
    assert_eq!(matmul::f32_to_f16(2f32.powi(-25)), 0x0000); // tie -> even 0
    assert_eq!(matmul::f32_to_f16(2f32.powi(-25) * 1.0000001), 0x0001);
    assert_eq!(matmul::f32_to_f16(3.0 * 2f32.powi(-25)), 0x0002); // 1.5 -> 2
    assert_eq!(matmul::f32_to_f16(-0.0), 0x8000);
    // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even (1).
    assert_eq!(matmul::f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
    assert_eq!(matmul::f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
}

/// Nearest representable among two neighbours in f64, ties to the even one.
fn nearest(x: f64, lo: (u16, f64), hi: (u16, f64)) -> u16 {
    let (dl, dh) = ((x - lo.1).abs(), (hi.1 - x).abs());
    if dl < dh || (dl == dh && lo.0.is_multiple_of(2)) {
        lo.0
    } else {
        hi.0
    }
}

#[test]
fn f32_to_f16_matches_rne_reference() {
    // Reference: bracket x between consecutive halves (for positive x the
    // half bit patterns are ordered like the values) and pick the nearest.
    let mut rng = SplitMix64::new(11);
    let check = |bits: u32| {
        let x = f32::from_bits(bits);
        let got = matmul::f32_to_f16(x);
        if x.is_nan() {
            assert!(matmul::f16_to_f32(got).is_nan());
            return;
        }
        let ax = x.abs() as f64;
        let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
        let want = if ax >= 65520.0 {
            0x7c00
        } else {
            // Largest half <= ax.
            let mut lo = 0u16;
            let (mut a, mut b) = (0u16, 0x7bffu16);
            while a <= b {
                let m = a + (b - a) / 2;
                if matmul::f16_to_f32(m) as f64 <= ax {
                    lo = m;
                    a = m + 1;
                } else {
                    b = m - 1;
                }
            }
            let lov = matmul::f16_to_f32(lo) as f64;
            if lov == ax {
                lo
            } else {
                nearest(ax, (lo, lov), (lo + 1, matmul::f16_to_f32(lo + 1) as f64))
            }
        } | sign;
        assert_eq!(got, want, "x = {x:e} ({bits:#010x})");
    };
    for _ in 0..200_000 {
        check(rng.next_u64() as u32);
    }
    // Dense around every half-exponent boundary, ties included.
    for e in 100u32..=143 {
        for m in (0..(1u32 << 23))
            .step_by(4093)
            .chain([0x1000, 0x3000, 0x7f_f000, 0x7f_ffff])
        {
            check((e << 23) | m);
            check((1 << 31) | (e << 23) | m);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("f16c") {
        // And bit for bit against the hardware (vcvtps2ph, RNE).
        use std::arch::x86_64::*;
        for _ in 0..200_000 {
            let bits = rng.next_u64() as u32;
            // SAFETY: f16c detected.
            let hw = unsafe { hw_f16(f32::from_bits(bits)) };
            assert_eq!(matmul::f32_to_f16(f32::from_bits(bits)), hw, "{bits:#010x}");
        }
        #[target_feature(enable = "f16c")]
        unsafe fn hw_f16(x: f32) -> u16 {
            let v = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set1_ps(x));
            _mm_extract_epi16::<0>(v) as u16
        }
    }
}

#[test]
fn bf16_rne_ties_nan_overflow() {
    for h in 0..=u16::MAX {
        let f = matmul::bf16_to_f32(h);
        let back = matmul::f32_to_bf16(f);
        if f.is_nan() {
            assert!(matmul::bf16_to_f32(back).is_nan());
            assert_eq!(back, h | 0x40);
        } else {
            assert_eq!(back, h);
        }
    }
    assert_eq!(matmul::f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // tie -> even
    assert_eq!(matmul::f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82); // tie -> even
    assert_eq!(matmul::f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
    assert_eq!(matmul::f32_to_bf16(f32::MAX), 0x7f80); // overflow -> inf
    assert_eq!(
        matmul::f32_to_bf16(f32::from_bits(0x7f80_0001)) & 0x7f80,
        0x7f80
    );
    assert!(matmul::bf16_to_f32(matmul::f32_to_bf16(f32::from_bits(0x7f80_0001))).is_nan());
    assert!(matmul::bf16_to_f32(matmul::f32_to_bf16(f32::from_bits(0xff80_0001))).is_nan());
    let mut rng = SplitMix64::new(12);
    for _ in 0..500_000 {
        let bits = rng.next_u64() as u32;
        let x = f32::from_bits(bits);
        if !x.is_finite() {
            continue;
        }
        let lo = (bits >> 16) as u16;
        let got = matmul::f32_to_bf16(x);
        let want = if (bits & 0xffff) == 0 {
            lo
        } else {
            // Same-sign neighbours: magnitude order = bit order.
            let lov = matmul::bf16_to_f32(lo) as f64;
            // IEEE overflow: the step past the largest finite value is the
            // (unbounded-exponent) 2^128, which stands for infinity.
            let hiv = if (lo + 1) & 0x7fff == 0x7f80 {
                2f64.powi(128).copysign(x as f64)
            } else {
                matmul::bf16_to_f32(lo + 1) as f64
            };
            nearest(x as f64, (lo, lov), (lo + 1, hiv))
        };
        assert_eq!(got, want, "{bits:#010x}");
    }
}

#[test]
fn quantize_i8_bound_and_errors() {
    let mut rng = SplitMix64::new(13);
    let (rows, dim, stride) = (17, 45, 50);
    let mut w: Vec<f32> = (0..rows * stride)
        .map(|_| rng.next_normal() as f32)
        .collect();
    w[3 * stride..3 * stride + dim].fill(0.0); // a zero row
    let mut out = vec![0i8; rows * stride];
    let mut sc = vec![0f32; rows];
    matmul::quantize_rows_i8(&w, rows, dim, stride, &mut out, stride, &mut sc).unwrap();
    for r in 0..rows {
        let max = w[r * stride..r * stride + dim]
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        assert_eq!(sc[r], max / 127.0);
        for j in 0..dim {
            let (x, qv) = (w[r * stride + j] as f64, out[r * stride + j]);
            assert!((-127..=127).contains(&qv));
            let err = (x - sc[r] as f64 * qv as f64).abs();
            assert!(
                err <= sc[r] as f64 * (0.5 + 2f64.powi(-17)),
                "row {r} col {j}"
            );
        }
    }
    assert!(out[3 * stride..3 * stride + dim].iter().all(|&v| v == 0));
    w[5] = f32::NAN;
    let mut out2 = vec![7i8; rows * stride];
    let e = matmul::quantize_rows_i8(&w, rows, dim, stride, &mut out2, stride, &mut sc);
    assert_eq!(e.unwrap_err().status, Status::NonFinite);
    assert!(out2.iter().all(|&v| v == 7));
}

// ------------------------------------------------------------ top-k

fn topk_reference(scores: &[f32], ids: &[u32], k: usize) -> (Vec<u32>, Vec<f32>) {
    let mut v: Vec<(f32, u32)> = scores
        .iter()
        .zip(ids)
        .filter(|(s, _)| !s.is_nan())
        .map(|(&s, &i)| (s, i))
        .collect();
    v.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
    v.truncate(k);
    let mut oi: Vec<u32> = v.iter().map(|x| x.1).collect();
    let mut os: Vec<f32> = v.iter().map(|x| x.0).collect();
    oi.resize(k, u32::MAX);
    os.resize(k, f32::NEG_INFINITY);
    (oi, os)
}

#[test]
fn topk_against_sorting() {
    let mut rng = SplitMix64::new(21);
    for trial in 0..300 {
        let nq = 1 + rng.below(4) as usize;
        let mut offsets = vec![0usize];
        let mut scores = vec![];
        let mut ids = vec![];
        for _ in 0..nq {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(20) as usize,
                _ => rng.below(3000) as usize,
            };
            for _ in 0..len {
                // Few distinct values: many ties; some NaN and infinities.
                let s = match rng.below(40) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    _ if trial % 2 == 0 => rng.below(16) as f32,
                    _ => rng.next_normal() as f32,
                };
                scores.push(s);
                ids.push(rng.below(5000) as u32);
            }
            offsets.push(scores.len());
        }
        let k = match rng.below(5) {
            0 => 0,
            1 => 1,
            2 => 10,
            3 => rng.below(40) as usize,
            _ => 5000,
        };
        let mut oi = vec![0u32; nq * k];
        let mut os = vec![0f32; nq * k];
        matmul::topk(&scores, Some(&ids), &offsets, k, &mut oi, &mut os).unwrap();
        let mut oi2 = vec![0u32; nq * k];
        let mut os2 = vec![0f32; nq * k];
        matmul::topk(&scores, None, &offsets, k, &mut oi2, &mut os2).unwrap();
        for i in 0..nq {
            let (s, e) = (offsets[i], offsets[i + 1]);
            let (wi, ws) = topk_reference(&scores[s..e], &ids[s..e], k);
            assert_eq!(&oi[i * k..(i + 1) * k], &wi[..], "trial {trial} query {i}");
            assert_eq!(
                os[i * k..(i + 1) * k]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                ws.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            let local: Vec<u32> = (0..(e - s) as u32).collect();
            let (wi, _) = topk_reference(&scores[s..e], &local, k);
            assert_eq!(&oi2[i * k..(i + 1) * k], &wi[..]);
        }
    }
}

#[test]
fn topk_errors() {
    let s = [1.0f32, 2.0, 3.0];
    let mut oi = [0u32; 2];
    let mut os = [0f32; 2];
    let e = matmul::topk(&s, None, &[0, 3], 3, &mut oi, &mut os).unwrap_err();
    assert_eq!(e.status, Status::BufferTooSmall);
    assert_eq!(oi, [0, 0]);
    let e = matmul::topk(&s, None, &[0, 2], 1, &mut oi, &mut os).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let e = matmul::topk(&s, Some(&[1, 2]), &[0, 3], 1, &mut oi, &mut os).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}

// ------------------------------------------------------------ softmax

#[test]
fn softmax_against_f64() {
    let mut rng = SplitMix64::new(31);
    for trial in 0..100 {
        let nq = 1 + rng.below(4) as usize;
        let mut offsets = vec![0usize];
        let mut x = vec![];
        for _ in 0..nq {
            let len = rng.below(if trial % 3 == 0 { 5 } else { 2000 }) as usize;
            let scale = [0.1, 3.0, 30.0, 300.0][rng.below(4) as usize];
            for _ in 0..len {
                x.push((rng.next_normal() * scale) as f32 + 1000.0);
            }
            offsets.push(x.len());
        }
        let mut out = vec![0f32; x.len()];
        let mut lse = vec![0f32; nq];
        matmul::softmax(&x, &offsets, &mut out, Some(&mut lse)).unwrap();
        let mut inplace = x.clone();
        matmul::softmax_in_place(&mut inplace, &offsets, None).unwrap();
        assert_eq!(inplace, out);
        for i in 0..nq {
            let seg = &x[offsets[i]..offsets[i + 1]];
            if seg.is_empty() {
                assert_eq!(lse[i], f32::NEG_INFINITY);
                continue;
            }
            let m = seg.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
            let sum: f64 = seg.iter().map(|&v| (v as f64 - m).exp()).sum();
            let spread = seg.iter().map(|&v| m - v as f64).fold(0.0, f64::max);
            for (j, &v) in seg.iter().enumerate() {
                let want = (v as f64 - m).exp() / sum;
                let got = out[offsets[i] + j] as f64;
                // |x - m| rounding (u|x - m|) in the exponent of this term and
                // (at most u*spread) in the largest ones of the sum, plus a few
                // roundings (exp, division, scaling, f32 store).
                // Subnormal results: exp (within 1 ulp) and the scaling each lose up to
                // an absolute 2^-149 / 2^-150.
                let tol = want * (U * (m - v as f64 + spread) + 8.0 * U) + 2f64.powi(-148);
                assert!((got - want).abs() <= tol, "trial {trial} {got} vs {want}");
            }
            let want_lse = m + sum.ln();
            let tol_lse = (want_lse.abs() + 1.0) * 4.0 * U + spread * U;
            assert!((lse[i] as f64 - want_lse).abs() <= tol_lse);
        }
    }
    // Special cases.
    let mut lse = [0f32; 4];
    let x = [
        1.0,
        f32::NAN,
        f32::INFINITY,
        2.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
    ];
    let mut out = [0f32; 7];
    matmul::softmax(&x, &[0, 2, 5, 5, 7], &mut out, Some(&mut lse)).unwrap();
    assert!(out[0].is_nan() && out[1].is_nan() && lse[0].is_nan());
    assert_eq!(&out[2..5], &[0.5, 0.0, 0.5]);
    assert_eq!(lse[1], f32::INFINITY);
    assert_eq!(lse[2], f32::NEG_INFINITY);
    assert!(out[5].is_nan() && out[6].is_nan() && lse[3] == f32::NEG_INFINITY);
    // Big values do not overflow.
    let mut out = [0f32; 2];
    matmul::softmax(&[1e30, 1e30], &[0, 2], &mut out, None).unwrap();
    assert_eq!(out, [0.5, 0.5]);
}
