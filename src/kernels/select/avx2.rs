//! AVX2 tier of the selection masks (avx2 + fma, the tier's features;
//! no FMA is used): `vmulps` then `vaddps`, `vcmpps` (ordered `>=` / `>`)
//! and `vmovmskps`, eight lists or rows per compare; the tail by
//! `vmaskmovps` loads. `tests/select.rs` checks every supported tier
//! against the scalar oracle's bits.

use crate::kernels::simd::{entries, Avx2};

entries! { "avx2,fma";
    /// `super::opt_masks_simd` on this tier.
    fn opt_masks_256(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64])
        => super::opt_masks_simd::<Avx2>;
    /// `super::gt_masks_simd` on this tier.
    fn gt_masks_256(v: &[f32], th: f32, out: &mut [u64]) => super::gt_masks_simd::<Avx2>;
    /// `super::argmax_simd` on this tier.
    fn argmax_256(v: &[f32]) -> usize => super::argmax_simd::<Avx2>;
}

pub fn opt_masks(e: &[f32], spread: &[f32], extra: f32, th: f32, out: &mut [u64]) {
    // SAFETY: the table holding this function is handed out only for a
    // CPU with avx2 + fma (crate::isa::check_supported); the driver checks
    // the lengths.
    unsafe { opt_masks_256(e, spread, extra, th, out) }
}

pub fn gt_masks(v: &[f32], th: f32, out: &mut [u64]) {
    // SAFETY: as `opt_masks`.
    unsafe { gt_masks_256(v, th, out) }
}

pub fn argmax(v: &[f32]) -> usize {
    // SAFETY: as `opt_masks`.
    unsafe { argmax_256(v) }
}
