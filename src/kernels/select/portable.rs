//! Portable tier of the selection masks (`wide::f32x8`): eight compares
//! into a bit mask (`to_bitmask`), product then sum (no FMA), so the
//! oracle's bits; the last partial block element by element. The argmax:
//! eight running maxima by compare and blend, then the first position.

use wide::f32x8;

#[inline(always)]
fn load(s: &[f32]) -> f32x8 {
    f32x8::from([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
}

pub fn opt_masks(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64]) {
    let n = e.len();
    super::check(n, Some(spread.len()), out.len());
    out[..super::words(n)].fill(0);
    let full = n - n % 8;
    let (x, t) = (f32x8::splat(extra), f32x8::splat(th));
    for i in (0..full).step_by(8) {
        let o = load(&e[i..i + 8]) + x * load(&spread[i..i + 8]);
        let bits = u64::from(o.simd_ge(t).to_bitmask());
        out[i / 64] |= bits << (i % 64);
    }
    for j in full..n {
        out[j / 64] |= u64::from(e[j] + extra * spread[j] >= th) << (j % 64);
    }
}

pub fn gt_masks(v: &[f32], th: f32, out: &mut [u64]) {
    let n = v.len();
    super::check(n, None, out.len());
    out[..super::words(n)].fill(0);
    let full = n - n % 8;
    let t = f32x8::splat(th);
    for i in (0..full).step_by(8) {
        let bits = u64::from(load(&v[i..i + 8]).simd_gt(t).to_bitmask());
        out[i / 64] |= bits << (i % 64);
    }
    for j in full..n {
        out[j / 64] |= u64::from(v[j] > th) << (j % 64);
    }
}

pub fn argmax(v: &[f32]) -> usize {
    // Eight running maxima (compare `>` and select: a NaN element fails
    // the compare and leaves the running value, as `vmaxps` with it second
    // does), then the first element that reaches the largest.
    let mut m = f32x8::splat(f32::NEG_INFINITY);
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        let x = load(c);
        m = x.simd_gt(m).select(x, m);
    }
    let best = m
        .to_array()
        .iter()
        .chain(chunks.remainder())
        .fold(f32::NEG_INFINITY, |a, &x| if x > a { x } else { a });
    v.iter().position(|&x| x >= best).unwrap_or(0)
}
