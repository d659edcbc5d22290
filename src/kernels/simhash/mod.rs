//! SimHash kernels: sign bits of `x · plane` for K*L planes, fused (the
//! n x K*L projection matrix is never materialised when only codes are
//! asked for), plus the raw projections.
//!
//! Dense families use the packed panels (`[panel][dim][16]`) of
//! [`crate::simhash::SimHash::packed`]; sparse ±1 families use the index
//! lists of [`crate::simhash::SparsePlanes`] and only add and subtract.

use crate::isa::Isa;
use crate::simhash::SimHash;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// `hash(h, x, n, stride, codes)`: codes of n rows into `codes[i*L + l]`.
/// Callers have checked every length; `n >= 1`.
pub type HashFn = fn(&SimHash, &[f32], usize, usize, &mut [u32]);
/// `project(h, x, n, stride, out)`: `out[i*K*L + p] = x_i · plane_p`.
pub type ProjectFn = fn(&SimHash, &[f32], usize, usize, &mut [f32]);

pub struct Kernels {
    pub hash: HashFn,
    pub project: ProjectFn,
}

static SCALAR: Kernels = Kernels {
    hash: scalar::hash,
    project: scalar::project,
};
static PORTABLE: Kernels = Kernels {
    hash: portable::hash,
    project: portable::project,
};
#[cfg(target_arch = "x86_64")]
static AVX2: Kernels = Kernels {
    hash: avx2::hash,
    project: avx2::project,
};
#[cfg(target_arch = "x86_64")]
static AVX512: Kernels = Kernels {
    hash: avx512::hash,
    project: avx512::project,
};

/// The kernel table of a tier. The caller has checked that the CPU supports
/// `tier` (the x86 tiers' functions rely on it).
pub fn kernels(tier: Isa) -> &'static Kernels {
    match tier {
        Isa::Scalar => &SCALAR,
        Isa::Portable => &PORTABLE,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => &AVX2,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => &AVX512,
        #[cfg(not(target_arch = "x86_64"))]
        _ => &PORTABLE,
    }
}

/// Bits `start .. start + k` of a little-endian bit string held in u64
/// words (bit 0 = least significant bit of word 0); `k <= 32`.
#[inline(always)]
pub fn extract_bits(words: &[u64], start: usize, k: u32) -> u32 {
    let (w, off) = (start / 64, start % 64);
    let mut v = words[w] >> off;
    if off + k as usize > 64 {
        v |= words[w + 1] << (64 - off);
    }
    (v & ((1u64 << k) - 1)) as u32
}

/// Writes the L codes of one row from its plane-sign bit string.
#[inline(always)]
pub fn emit_codes(words: &[u64], bits: u32, tables: u32, out: &mut [u32]) {
    for (l, c) in out[..tables as usize].iter_mut().enumerate() {
        *c = extract_bits(words, l * bits as usize, bits);
    }
}

/// Words of the per-row sign-bit string, for `panels` panels of 16 planes.
#[inline]
pub fn words_per_row(panels: usize) -> usize {
    (panels * 16).div_ceil(64)
}
