//! Scalar oracle of the selection masks: element by element, the
//! documented expression (`super`).

pub fn opt_masks(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64]) {
    super::check(e.len(), Some(spread.len()), out.len());
    out[..super::words(e.len())].fill(0);
    for (i, (&x, &s)) in e.iter().zip(spread).enumerate() {
        out[i / 64] |= u64::from(x + extra * s >= th) << (i % 64);
    }
}

pub fn gt_masks(v: &[f32], th: f32, out: &mut [u64]) {
    super::check(v.len(), None, out.len());
    out[..super::words(v.len())].fill(0);
    for (i, &x) in v.iter().enumerate() {
        out[i / 64] |= u64::from(x > th) << (i % 64);
    }
}

pub fn argmax(v: &[f32]) -> usize {
    let best = v
        .iter()
        .fold(f32::NEG_INFINITY, |a, &x| if x > a { x } else { a });
    v.iter().position(|&x| x >= best).unwrap_or(0)
}
