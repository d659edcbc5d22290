//! The seeded generator of projected class vectors.
//!
//! **A frozen contract**, like `crate::rng`: the same `(seed, d, row)` gives
//! the same f32 bits in every version, on every tier and platform.
//!
//! Row `i` of the class vectors of `(seed, d)`:
//! 1. Its generator is SplitMix64 (`crate::rng`) seeded with the `(i+1)`-th
//!    output of SplitMix64 seeded with `seed` (so any row can be made
//!    alone, and rows in parallel).
//! 2. Its spectrum `F` (length d, Hermitian) is drawn directly with unit
//!    magnitude, in this order: `F_0 = -1` if the top bit of the next u64
//!    is set, else `+1`; for `k = 1 ..= (d-1)/2`, a point `(u, v)` uniform
//!    in the unit disc by Marsaglia's polar rejection (`u = 2U - 1`,
//!    `v = 2U - 1` with `U` the open-interval uniform of `crate::rng`,
//!    retried unless `0 < s = u² + v² < 1`), and `F_k = (u, v) / sqrt(s)`
//!    (a uniform phase), `F_{d-k} = conj(F_k)`; for even d,
//!    `F_{d/2} = ±1` from the top bit of the next u64.
//! 3. `c = real(ifft(F))`, computed in f64 by the fixed routine below and
//!    rounded to f32 once.
//!
//! This is the distribution of `project(x)` for Gaussian `x` (the phases
//! of a real Gaussian vector's spectrum are uniform, `F_0` and `F_{d/2}`
//! are real with a random sign) without the `1e-5` of the projection:
//! every `|F_k| = 1`, so `|c|_2 = 1` (Parseval), its entries are about
//! `N(0, 1/d)`, and its approximate inverse equals its exact inverse.
//!
//! **The inverse DFT** is a recursive mixed-radix decimation-in-time
//! transform in f64 (radices 4, 2, 3, 5, then the remaining primes in
//! increasing order; a radix-p step is a plain O(p²) DFT, so a prime d
//! costs O(d²)), using only +, -, * and / in a fixed order, never fused.
//! Its twiddles `exp(2 pi i k / d)` come from fdlibm's `__kernel_sin` and
//! `__kernel_cos` polynomials (basic operations only) after an exact
//! reduction to the first octant with integer arithmetic. No platform
//! libm and no FFT library is involved, so the bits are the same
//! everywhere; `tests/hrr.rs` checks a golden checksum. The cost is
//! O(d sum of the prime factors) per row (timings: docs/hrr.md, "The
//! class-vector generator").

use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::rng::SplitMix64;

use super::MAX_DIM;

/// SplitMix64's increment (`crate::rng`).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct C64 {
    re: f64,
    im: f64,
}

impl C64 {
    #[inline(always)]
    fn mul(self, o: C64) -> C64 {
        C64 {
            re: self.re * o.re - self.im * o.im,
            im: self.re * o.im + self.im * o.re,
        }
    }
    #[inline(always)]
    fn add(self, o: C64) -> C64 {
        C64 {
            re: self.re + o.re,
            im: self.im + o.im,
        }
    }
}

/// fdlibm `__kernel_sin(x, 0, 0)`, `|x| <= pi/4` (constants as fdlibm's
/// bit patterns).
fn kernel_sin(x: f64) -> f64 {
    const S1: f64 = f64::from_bits(0xbfc5_5555_5555_5549);
    const S2: f64 = f64::from_bits(0x3f81_1111_1110_f8a6);
    const S3: f64 = f64::from_bits(0xbf2a_01a0_19c1_61d5);
    const S4: f64 = f64::from_bits(0x3ec7_1de3_57b1_fe7d);
    const S5: f64 = f64::from_bits(0xbe5a_e5e6_8a2b_9ceb);
    const S6: f64 = f64::from_bits(0x3de5_d93a_5acf_d57c);
    let z = x * x;
    let v = z * x;
    let r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
    x + v * (S1 + z * r)
}

/// fdlibm `__kernel_cos(x, 0)` (the FreeBSD form), `|x| <= pi/4`
/// (constants as fdlibm's bit patterns).
fn kernel_cos(x: f64) -> f64 {
    const C1: f64 = f64::from_bits(0x3fa5_5555_5555_554c);
    const C2: f64 = f64::from_bits(0xbf56_c16c_16c1_5177);
    const C3: f64 = f64::from_bits(0x3efa_01a0_19cb_1590);
    const C4: f64 = f64::from_bits(0xbe92_7e4f_809c_52ad);
    const C5: f64 = f64::from_bits(0x3e21_ee9e_bdb4_b1c4);
    const C6: f64 = f64::from_bits(0xbda8_fae9_be88_38d4);
    let z = x * x;
    let w = z * z;
    let r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + z * r)
}

/// `(cos, sin)` of `2 pi k / n` for `k < n`: the octant `o = floor(8k/n)`
/// and the remainder `r = 8k - o n` are exact integers; the angle inside
/// the octant is `(pi/4) r / n` (or `(pi/4)(n - r) / n` from the octant's
/// far end for odd octants), computed as `(FRAC_PI_4 * r) / n`.
pub(crate) fn cos_sin_2pi(k: usize, n: usize) -> (f64, f64) {
    let k8 = 8 * k as u128;
    let n128 = n as u128;
    let o = (k8 / n128) as u32;
    let r = (k8 - o as u128 * n128) as f64;
    let nf = n as f64;
    let t = if o.is_multiple_of(2) { r } else { nf - r };
    let a = (std::f64::consts::FRAC_PI_4 * t) / nf;
    let (c, s) = (kernel_cos(a), kernel_sin(a));
    match o {
        0 => (c, s),
        1 => (s, c),
        2 => (-s, c),
        3 => (-c, s),
        4 => (-c, -s),
        5 => (-s, -c),
        6 => (s, -c),
        _ => (c, -s),
    }
}

/// Radices of `d`: 4 while 16 | d... (4s first, then 2, 3, 5, then the
/// other primes in increasing order).
fn factors(mut d: usize) -> Vec<usize> {
    let mut f = Vec::new();
    while d.is_multiple_of(4) {
        f.push(4);
        d /= 4;
    }
    for p in [2usize, 3, 5] {
        while d.is_multiple_of(p) {
            f.push(p);
            d /= p;
        }
    }
    let mut p = 7;
    while p * p <= d {
        while d.is_multiple_of(p) {
            f.push(p);
            d /= p;
        }
        p += 2;
    }
    if d > 1 {
        f.push(d);
    }
    f
}

/// The plan of the generator for one `d`: its radices and twiddles. Made
/// once per call of [`class_vectors`] (or by a caller generating rows
/// itself with [`ClassGen::row`]).
pub struct ClassGen {
    d: usize,
    factors: Vec<usize>,
    tw: Vec<C64>,
    max_radix: usize,
}

/// Per-thread buffers of [`ClassGen::row`].
pub struct ClassBuf {
    spec: Vec<C64>,
    out: Vec<C64>,
    tmp: Vec<C64>,
}

impl ClassGen {
    /// The plan for dimension `d` (`1..=MAX_DIM`).
    pub fn new(d: usize) -> Result<ClassGen> {
        if d == 0 || d > MAX_DIM {
            bail!(
                InvalidArgument,
                "d is {d}; it must be between 1 and {MAX_DIM}"
            );
        }
        let mut tw = try_vec::<C64>(d, "class-vector twiddles")?;
        for (k, t) in tw.iter_mut().enumerate() {
            let (c, s) = cos_sin_2pi(k, d);
            *t = C64 { re: c, im: s };
        }
        let factors = factors(d);
        let max_radix = factors.iter().copied().max().unwrap_or(1);
        Ok(ClassGen {
            d,
            factors,
            tw,
            max_radix,
        })
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    /// Buffers for [`ClassGen::row`].
    pub fn buffers(&self) -> Result<ClassBuf> {
        Ok(ClassBuf {
            spec: try_vec(self.d, "class-vector buffers")?,
            out: try_vec(self.d, "class-vector buffers")?,
            tmp: try_vec(self.max_radix, "class-vector buffers")?,
        })
    }

    /// Row `i` of the class vectors of `seed` into `out` (`d` floats).
    pub fn row(&self, seed: u64, i: u64, out: &mut [f32], buf: &mut ClassBuf) {
        let d = self.d;
        let row_seed = SplitMix64::new(seed.wrapping_add(i.wrapping_mul(GAMMA))).next_u64();
        let mut rng = SplitMix64::new(row_seed);
        let spec = &mut buf.spec;
        let sign = |z: u64| if z >> 63 == 1 { -1.0 } else { 1.0 };
        spec[0] = C64 {
            re: sign(rng.next_u64()),
            im: 0.0,
        };
        for k in 1..=(d - 1) / 2 {
            let (u, v, s) = loop {
                let u = 2.0 * rng.next_f64_open() - 1.0;
                let v = 2.0 * rng.next_f64_open() - 1.0;
                let s = u * u + v * v;
                if s > 0.0 && s < 1.0 {
                    break (u, v, s);
                }
            };
            let r = s.sqrt();
            spec[k] = C64 {
                re: u / r,
                im: v / r,
            };
            spec[d - k] = C64 {
                re: u / r,
                im: -(v / r),
            };
        }
        if d.is_multiple_of(2) {
            spec[d / 2] = C64 {
                re: sign(rng.next_u64()),
                im: 0.0,
            };
        }
        self.idft(&buf.spec, 0, 1, d, 0, &mut buf.out, &mut buf.tmp);
        let nf = d as f64;
        for (o, v) in out[..d].iter_mut().zip(&buf.out) {
            *o = (v.re / nf) as f32;
        }
    }

    /// `out[j] = sum_k x[off + k stride] exp(2 pi i j k / n)` for `j < n`
    /// (`n = d / prod(factors[..fi])`), decimation in time.
    #[allow(clippy::too_many_arguments)]
    fn idft(
        &self,
        x: &[C64],
        off: usize,
        stride: usize,
        n: usize,
        fi: usize,
        out: &mut [C64],
        tmp: &mut [C64],
    ) {
        if n == 1 {
            out[0] = x[off];
            return;
        }
        let p = self.factors[fi];
        let m = n / p;
        for r in 0..p {
            self.idft(
                x,
                off + r * stride,
                stride * p,
                m,
                fi + 1,
                &mut out[r * m..(r + 1) * m],
                tmp,
            );
        }
        let d = self.d;
        let step_n = d / n; // twiddle exp(2 pi i / n) = tw[step_n]
        let step_p = d / p; // exp(2 pi i / p) = tw[step_p]
        for k in 0..m {
            for r in 0..p {
                tmp[r] = out[r * m + k].mul(self.tw[(r * k * step_n) % d]);
            }
            for q in 0..p {
                let mut acc = tmp[0];
                for (r, t) in tmp.iter().enumerate().take(p).skip(1) {
                    acc = acc.add(t.mul(self.tw[(r * q % p) * step_p]));
                }
                out[k + q * m] = acc;
            }
        }
    }
}

/// With `threads` 0, [`class_vectors`] gives each thread at least this
/// many coordinates (rows x d): it starts its threads per call, and below
/// that a second thread costs more than it takes over (benches/hrr.md).
const MIN_COORDS_PER_THREAD: usize = 4096;

/// The threads [`class_vectors`] starts for `m` rows of `d` (`threads` as
/// asked): 0 takes every core the work pays for
/// ([`MIN_COORDS_PER_THREAD`]); never more than one per row, at least one.
fn class_threads(threads: u32, m: usize, d: usize) -> usize {
    crate::par::threads_auto(
        threads as usize,
        m,
        m.saturating_mul(d),
        MIN_COORDS_PER_THREAD,
    )
}

/// Fills `out` with rows `first, first + 1, ...` (`out.len() / d` of them)
/// of the projected class vectors of `(seed, d)` (see the module
/// documentation), on `threads` threads (0 = every core, as many as the
/// work pays for: each at least [`MIN_COORDS_PER_THREAD`] coordinates; the
/// result does not depend on it). Errors: `InvalidArgument` (d outside `1..=MAX_DIM`,
/// `out` not whole rows), `SizeOverflow` (row numbers past 2^64),
/// `AllocationFailed`; nothing is written on error.
pub fn class_vectors(seed: u64, d: usize, first: u64, out: &mut [f32], threads: u32) -> Result<()> {
    let gen = ClassGen::new(d)?;
    if !out.len().is_multiple_of(d) {
        bail!(
            InvalidArgument,
            "`out` holds {} floats, not a whole number of rows of d = {d}",
            out.len()
        );
    }
    let m = out.len() / d;
    if first.checked_add(m as u64).is_none() {
        bail!(
            SizeOverflow,
            "rows {first} + {m} overflow the 64-bit row numbers"
        );
    }
    checked_mul(m, d, "m * d")?;
    let threads = class_threads(threads, m, d);
    let per = m.div_ceil(threads).max(1);
    let mut bufs = Vec::with_capacity(threads);
    for _ in 0..threads {
        bufs.push(gen.buffers()?);
    }
    let gen = &gen;
    crate::par::map(
        out.chunks_mut(per * d).enumerate().zip(bufs),
        |((t, chunk), mut buf)| {
            let base = first + (t * per) as u64;
            for (j, row) in chunk.chunks_exact_mut(d).enumerate() {
                gen.row(seed, base + j as u64, row, &mut buf);
            }
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_zero_starts_only_what_the_work_pays_for() {
        let cores = crate::par::cores();
        // Small calls stay on the calling thread.
        assert_eq!(class_threads(0, 2, 64), 1);
        assert_eq!(class_threads(0, 64, 64), 1);
        assert_eq!(class_threads(0, 4, 1024), 1);
        // Large ones take every core, up to one per MIN_COORDS_PER_THREAD.
        assert_eq!(class_threads(0, 8, 1024), cores.min(2));
        assert_eq!(class_threads(0, 1 << 20, 1024), cores);
        // An explicit count is kept, at most one thread per row.
        assert_eq!(class_threads(3, 2, 64), 2);
        assert_eq!(class_threads(3, 100, 64), 3);
        assert_eq!(class_threads(1, 0, 64), 1);
    }

    #[test]
    fn trig_matches_libm() {
        for n in [1usize, 2, 3, 5, 7, 8, 12, 400, 401, 800, 1024, 1_000_003] {
            for k in (0..n).step_by((n / 97).max(1)) {
                let (c, s) = cos_sin_2pi(k, n);
                let a = 2.0 * std::f64::consts::PI * k as f64 / n as f64;
                assert!(
                    (c - a.cos()).abs() < 4e-16 * (1.0 + k as f64 / n as f64 * 8.0),
                    "cos {k}/{n}"
                );
                assert!(
                    (s - a.sin()).abs() < 4e-16 * (1.0 + k as f64 / n as f64 * 8.0),
                    "sin {k}/{n}"
                );
            }
        }
    }

    #[test]
    fn idft_matches_direct_sum() {
        for d in [1usize, 2, 3, 4, 6, 7, 12, 16, 30, 49, 64, 97, 400, 401] {
            let g = ClassGen::new(d).unwrap();
            let mut b = g.buffers().unwrap();
            let mut r = SplitMix64::new(d as u64);
            let x: Vec<C64> = (0..d)
                .map(|_| C64 {
                    re: r.next_normal(),
                    im: r.next_normal(),
                })
                .collect();
            g.idft(&x, 0, 1, d, 0, &mut b.out, &mut b.tmp);
            for j in 0..d {
                let mut acc = (0.0f64, 0.0f64);
                for (k, v) in x.iter().enumerate() {
                    let a = 2.0 * std::f64::consts::PI * ((j * k) % d) as f64 / d as f64;
                    acc.0 += v.re * a.cos() - v.im * a.sin();
                    acc.1 += v.re * a.sin() + v.im * a.cos();
                }
                let e = ((b.out[j].re - acc.0).powi(2) + (b.out[j].im - acc.1).powi(2)).sqrt();
                assert!(e < 1e-12 * d as f64, "d {d} j {j}: {e}");
            }
        }
    }
}
