//! The seeded generator behind every `seed` parameter of lshk.
//!
//! **This is a frozen contract**: the same seed gives bit-identical hash
//! families (hyperplanes, DWTA bin maps, bucket samples) in every version,
//! on every tier and every platform. Changing anything here is a breaking
//! change of the file format and of every golden-value test.
//!
//! * Bits: SplitMix64 (Steele, Lea & Flood 2014). State `s = seed`; each
//!   draw does `s += 0x9E3779B97F4A7C15; z = s;
//!   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) *
//!   0x94D049BB133111EB; return z ^ (z >> 31)` (wrapping arithmetic).
//! * Uniform f64 in the open interval (0, 1): `((z >> 11) + 0.5) * 2^-53`.
//! * Integer in `[0, n)`: Lemire's multiply-shift with rejection
//!   (`m = z * n` as 128 bits; reject while `low64(m) < (2^64 - n) mod n`;
//!   return `high64(m)`).
//! * Standard normal: Marsaglia's polar method in f64 — `u = 2U - 1`,
//!   `v = 2U - 1`, `s = u² + v²`, retry unless `0 < s < 1`, then
//!   `f = sqrt(-2 ln(s) / s)` and the pair `(u f, v f)` is returned in that
//!   order (both halves are used). `ln` is fdlibm's `__ieee754_log`,
//!   reimplemented here with IEEE-754 basic operations only, so the result
//!   does not depend on the platform's libm. f32 values are the f64 values
//!   rounded to nearest.

/// SplitMix64 with the derived draws documented in the module.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
    spare_normal: Option<f64>,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 {
            state: seed,
            spare_normal: None,
        }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in the open interval (0, 1).
    #[inline]
    pub fn next_f64_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Uniform integer in `[0, n)`; `n` must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        let mut low = m as u64;
        if low < n {
            let t = n.wrapping_neg() % n;
            while low < t {
                m = (self.next_u64() as u128) * (n as u128);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// A standard normal deviate (see the module documentation).
    pub fn next_normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        loop {
            let u = 2.0 * self.next_f64_open() - 1.0;
            let v = 2.0 * self.next_f64_open() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let f = (-2.0 * ieee754_log(s) / s).sqrt();
                self.spare_normal = Some(v * f);
                return u * f;
            }
        }
    }

    /// Fisher–Yates shuffle of `v` (i from the end down to 1 swaps with
    /// `below(i + 1)`).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// fdlibm `__ieee754_log` (Sun Microsystems, 1993), basic operations only;
/// constants are given as fdlibm's bit patterns.
pub fn ieee754_log(x: f64) -> f64 {
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    const TWO54: f64 = f64::from_bits(0x4350_0000_0000_0000);
    const LG1: f64 = f64::from_bits(0x3fe5_5555_5555_5593);
    const LG2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04);
    const LG3: f64 = f64::from_bits(0x3fd2_4924_9422_9359);
    const LG4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af);
    const LG5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de);
    const LG6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f);
    const LG7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244);

    let mut x = x;
    let bits = x.to_bits();
    let mut hx = (bits >> 32) as i32;
    let lx = bits as u32;
    let mut k: i32 = 0;
    if hx < 0x0010_0000 {
        if ((hx & 0x7fff_ffff) as u32 | lx) == 0 {
            return f64::NEG_INFINITY;
        }
        if hx < 0 {
            return f64::NAN;
        }
        k -= 54;
        x *= TWO54;
        hx = (x.to_bits() >> 32) as i32;
    }
    if hx >= 0x7ff0_0000 {
        return x + x;
    }
    k += (hx >> 20) - 1023;
    hx &= 0x000f_ffff;
    let i = (hx + 0x95f64) & 0x10_0000;
    let hi = (hx | (i ^ 0x3ff0_0000)) as u32 as u64;
    x = f64::from_bits((hi << 32) | (x.to_bits() & 0xffff_ffff));
    k += i >> 20;
    let f = x - 1.0;
    if (0x000f_ffff & (2 + hx)) < 3 {
        if f == 0.0 {
            if k == 0 {
                return 0.0;
            }
            let dk = k as f64;
            return dk * LN2_HI + dk * LN2_LO;
        }
        let r = f * f * (0.5 - f64::from_bits(0x3fd5_5555_5555_5555) * f);
        if k == 0 {
            return f - r;
        }
        let dk = k as f64;
        return dk * LN2_HI - ((r - dk * LN2_LO) - f);
    }
    let s = f / (2.0 + f);
    let dk = k as f64;
    let z = s * s;
    let mut i = hx - 0x6147a;
    let w = z * z;
    let j = 0x6b851 - hx;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    i |= j;
    let r = t2 + t1;
    if i > 0 {
        let hfsq = 0.5 * f * f;
        if k == 0 {
            f - (hfsq - s * (hfsq + r))
        } else {
            dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f)
        }
    } else if k == 0 {
        f - s * (f - r)
    } else {
        dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn log_matches_libm_closely() {
        let mut r = SplitMix64::new(7);
        for _ in 0..100_000 {
            let x = r.next_f64_open();
            let a = ieee754_log(x);
            let b = x.ln();
            assert!(
                (a - b).abs() <= 2.0 * f64::EPSILON * b.abs().max(1e-300),
                "{x}: {a} vs {b}"
            );
        }
        assert_eq!(ieee754_log(1.0), 0.0);
        assert_eq!(ieee754_log(0.0), f64::NEG_INFINITY);
        assert!(ieee754_log(-1.0).is_nan());
        assert!((ieee754_log(std::f64::consts::E) - 1.0).abs() < 1e-15);
        assert!((ieee754_log(1e-310) - 1e-310f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = SplitMix64::new(3);
        let mut hist = [0u32; 7];
        for _ in 0..70_000 {
            hist[r.below(7) as usize] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
    }

    #[test]
    fn normal_moments() {
        let mut r = SplitMix64::new(11);
        let n = 200_000;
        let (mut s1, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let z = r.next_normal();
            s1 += z;
            s2 += z * z;
        }
        let mean = s1 / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.01, "{var}");
    }
}
