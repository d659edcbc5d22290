//! AVX-512 tier of the selection masks (avx512f + bw + dq + vl):
//! `vmulps` then `vaddps` (no FMA), `vcmpps` straight into a mask
//! register (ordered `>=` / `>`), sixteen lists or rows per compare; the
//! tail by `{k}` masked loads. `tests/select.rs` checks it against the
//! scalar oracle's bits; where it has run: docs/avx512.md.

use crate::kernels::simd::{entries, Avx512};

entries! { "avx512f,avx512bw,avx512dq,avx512vl";
    /// `super::opt_masks_simd` on this tier.
    fn opt_masks_512(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64])
        => super::opt_masks_simd::<Avx512>;
    /// `super::gt_masks_simd` on this tier.
    fn gt_masks_512(v: &[f32], th: f32, out: &mut [u64]) => super::gt_masks_simd::<Avx512>;
    /// `super::argmax_simd` on this tier.
    fn argmax_512(v: &[f32]) -> usize => super::argmax_simd::<Avx512>;
}

pub fn opt_masks(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64]) {
    // SAFETY: the table holding this function is handed out only for a
    // CPU with avx512f + bw + dq + vl (crate::isa::check_supported); the driver checks
    // the lengths.
    unsafe { opt_masks_512(e, spread, extra, th, out) }
}

pub fn gt_masks(v: &[f32], th: f32, out: &mut [u64]) {
    // SAFETY: as `opt_masks`.
    unsafe { gt_masks_512(v, th, out) }
}

pub fn argmax(v: &[f32]) -> usize {
    // SAFETY: as `opt_masks`.
    unsafe { argmax_512(v) }
}
