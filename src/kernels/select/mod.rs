//! The bit masks of the IVF's adaptive list selection
//! (`crate::source::ivf`): which lists' optimistic estimates
//! `e_l + extra * spread_l` reach the running k-th score, and which scored
//! rows beat it. One call covers every list of the index (or every row of
//! a visited list); the caller then walks the set bits, so the per-list
//! and per-row compares are vector compares and not a branch each.
//!
//! # Every tier returns the same bits
//! The optimistic estimate is one product and one sum, two roundings
//! (`vmulps` then `vaddps`, never an FMA: the batch path compares the
//! same expression, `source::ivf::search::optimistic`, and must decide
//! alike), and the compares are ordered (`>=`, `>`: false for NaN). Element
//! `i` is bit `i % 64` of word `i / 64`; the bits past the last element are
//! 0. Tested against the scalar oracle on every tier (`tests/select.rs`).

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// `out[i / 64]` bit `i % 64` set iff `e[i] + extra * spread[i] >= th`,
/// for every `i < e.len()` (`spread` at least as long; `out` at least
/// `e.len().div_ceil(64)` words, each written).
pub type OptMasks = fn(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64]);

/// `out[i / 64]` bit `i % 64` set iff `v[i] > th`, for every
/// `i < v.len()` (`out` at least `v.len().div_ceil(64)` words).
pub type GtMasks = fn(v: &[f32], th: f32, out: &mut [u64]);

/// `argmax(v)`: the first position `i` with `v[i] >= m`, where `m` is the
/// largest value of `v` that is not NaN (`-inf` if none); 0 when no
/// position qualifies (`v` empty or all NaN). Equal values: the first of
/// them (`-0.0` and `0.0` are equal). The IVF's first list to visit.
pub type Argmax = fn(v: &[f32]) -> usize;

/// The kernel table of a tier.
pub struct Kernels {
    pub opt_masks: OptMasks,
    pub gt_masks: GtMasks,
    pub argmax: Argmax,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it).
    Kernels {
        opt_masks: opt_masks,
        gt_masks: gt_masks,
        argmax: argmax,
    }
}

/// Words of the masks of `n` elements.
pub fn words(n: usize) -> usize {
    n.div_ceil(64)
}

/// The positions of the set bits of masks `masks` (bit `i` of word `w` is
/// position `64 w + i`), ascending.
pub(crate) fn set_bits(masks: &[u64]) -> SetBits<std::iter::Copied<std::slice::Iter<'_, u64>>> {
    set_bits_in(masks.iter().copied())
}

/// [`set_bits`] of mask words given one by one (e.g. combined from two
/// masks).
pub(crate) fn set_bits_in<I: Iterator<Item = u64>>(words: I) -> SetBits<I> {
    SetBits {
        words,
        next_base: 0,
        base: 0,
        m: 0,
    }
}

/// The iterator of [`set_bits_in`]: a plain loop over the words and their
/// bits (no nested iterator state), as the selections' hot loops need.
pub(crate) struct SetBits<I> {
    words: I,
    /// Position of bit 0 of the next word.
    next_base: usize,
    /// Position of bit 0 of the word in `m`.
    base: usize,
    /// The current word's bits not yet returned.
    m: u64,
}

impl<I: Iterator<Item = u64>> Iterator for SetBits<I> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.m == 0 {
            self.m = self.words.next()?;
            self.base = self.next_base;
            self.next_base += 64;
        }
        let b = self.m.trailing_zeros() as usize;
        self.m &= self.m - 1;
        Some(self.base + b)
    }

    /// Two plain nested loops (words, then bits) for the consumers that
    /// fold (`extend`, `min`, `for_each`).
    #[inline(always)]
    fn fold<B, F: FnMut(B, usize) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = init;
        let mut m = self.m;
        while m != 0 {
            acc = f(acc, self.base + m.trailing_zeros() as usize);
            m &= m - 1;
        }
        let mut base = self.next_base;
        for mut m in self.words {
            while m != 0 {
                acc = f(acc, base + m.trailing_zeros() as usize);
                m &= m - 1;
            }
            base += 64;
        }
        acc
    }
}

/// The checks every tier makes (slices too short panic, as indexing
/// would; never a read or write out of bounds).
#[inline(always)]
fn check(n: usize, spread: Option<usize>, out: usize) {
    assert!(out >= words(n), "mask words {out} < {}", words(n));
    if let Some(s) = spread {
        assert!(s >= n, "spread holds {s} < {n}");
    }
}

/// The SIMD tiers' [`OptMasks`]: `S::LANES` lists per compare, the last
/// partial block by masked loads.
///
/// # Safety
/// The caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn opt_masks_simd<S: crate::kernels::simd::F32x>(
    e: &[f32],
    spread: &[f32],
    extra: f32,
    th: f32,
    out: &mut [u64],
) {
    let n = e.len();
    check(n, Some(spread.len()), out.len());
    let lanes = S::LANES;
    let full = n - n % lanes;
    // SAFETY: register-only splats (the caller's features).
    let (x, t) = unsafe { (S::splat(extra), S::splat(th)) };
    out[..words(n)].fill(0);
    let mut i = 0;
    while i < full {
        // SAFETY: `i + lanes <= full <= n <= spread.len()`: both loads are
        // in bounds.
        let bits = unsafe {
            let o = S::add(
                S::loadu(e.as_ptr().add(i)),
                S::mul(x, S::loadu(spread.as_ptr().add(i))),
            );
            S::ge_bits(o, t)
        };
        // LANES divides 64, so a block never straddles two words.
        out[i / 64] |= u64::from(bits) << (i % 64);
        i += lanes;
    }
    if full < n {
        // The tail by masked loads; the lanes past `n` are NaN (read
        // nowhere), whose ordered compare is false.
        // SAFETY: the mask covers `n - full < lanes` lanes from `full`,
        // inside both slices; masked-off lanes are never read.
        let bits = unsafe {
            let (m, nan) = (S::tail(n - full), S::splat(f32::NAN));
            let o = S::add(
                S::ld_or(m, e.as_ptr().add(full), nan),
                S::mul(x, S::ld_or(m, spread.as_ptr().add(full), nan)),
            );
            S::ge_bits(o, t)
        };
        out[full / 64] |= u64::from(bits) << (full % 64);
    }
}

/// The SIMD tiers' [`GtMasks`].
///
/// # Safety
/// The caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn gt_masks_simd<S: crate::kernels::simd::F32x>(
    v: &[f32],
    th: f32,
    out: &mut [u64],
) {
    let n = v.len();
    check(n, None, out.len());
    let lanes = S::LANES;
    let full = n - n % lanes;
    // SAFETY: a register-only splat.
    let t = unsafe { S::splat(th) };
    out[..words(n)].fill(0);
    let mut i = 0;
    while i < full {
        // SAFETY: `i + lanes <= full <= n`: the load is in bounds.
        let bits = unsafe { S::gt_bits(S::loadu(v.as_ptr().add(i)), t) };
        out[i / 64] |= u64::from(bits) << (i % 64);
        i += lanes;
    }
    if full < n {
        // SAFETY: as in `opt_masks_simd`'s tail.
        let bits = unsafe {
            let m = S::tail(n - full);
            S::gt_bits(S::ld_or(m, v.as_ptr().add(full), S::splat(f32::NAN)), t)
        };
        out[full / 64] |= u64::from(bits) << (full % 64);
    }
}

/// The SIMD tiers' [`Argmax`]: the lanes' maxima (`vmaxps` with the
/// running maximum as its second operand, so a NaN element leaves it as
/// it is; the tail filled with `-inf`), their largest, then the first
/// block whose `>=` compare against it has a bit set.
///
/// # Safety
/// The caller enables `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn argmax_simd<S: crate::kernels::simd::F32x>(v: &[f32]) -> usize {
    let n = v.len();
    let lanes = S::LANES;
    let full = n - n % lanes;
    let p = v.as_ptr();
    // SAFETY: every load below reads `lanes` floats at `i + lanes <= full
    // <= n`, or the tail's `n - full` lanes by mask from `full`; the lane
    // store writes at most 16 floats into a 16-float array (LANES <= 16).
    unsafe {
        let ninf = S::splat(f32::NEG_INFINITY);
        let mut m = ninf;
        let mut i = 0;
        while i < full {
            m = S::max(S::loadu(p.add(i)), m);
            i += lanes;
        }
        if full < n {
            m = S::max(S::ld_or(S::tail(n - full), p.add(full), ninf), m);
        }
        let mut lane = [f32::NEG_INFINITY; 16];
        S::storeu(lane.as_mut_ptr(), m);
        let best = lane[..lanes]
            .iter()
            .fold(f32::NEG_INFINITY, |a, &x| if x > a { x } else { a });
        let t = S::splat(best);
        i = 0;
        while i < full {
            let bits = S::ge_bits(S::loadu(p.add(i)), t);
            if bits != 0 {
                return i + bits.trailing_zeros() as usize;
            }
            i += lanes;
        }
        if full < n {
            let bits = S::ge_bits(
                S::ld_or(S::tail(n - full), p.add(full), S::splat(f32::NAN)),
                t,
            );
            if bits != 0 {
                return full + bits.trailing_zeros() as usize;
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`set_bits`] against a test of every bit: empty words, the first and
    /// last bit of a word, full words, and a trailing empty word.
    #[test]
    fn set_bits_walks_every_set_bit_in_order() {
        let masks = [0u64, 1, 1 << 63, u64::MAX, 0x8000_0000_0000_0001, 0];
        let want: Vec<usize> = (0..64 * masks.len())
            .filter(|&i| masks[i / 64] >> (i % 64) & 1 == 1)
            .collect();
        assert_eq!(set_bits(&masks).collect::<Vec<_>>(), want);
        assert_eq!(set_bits(&[]).count(), 0);
        let other = [u64::MAX, 0, 0, 0, 1, 1];
        let both: Vec<usize> = want
            .iter()
            .copied()
            .filter(|&i| other[i / 64] >> (i % 64) & 1 == 0)
            .collect();
        let combined = masks.iter().zip(&other).map(|(&m, &o)| m & !o);
        assert_eq!(set_bits_in(combined).collect::<Vec<_>>(), both);
    }
}
