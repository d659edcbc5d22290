//! The f64 dot products of the LSH inclusion probabilities
//! ([`crate::train_logq`]): for one query `q'` (f64, `hd` values) and each
//! candidate row `w'` (f32, read in place from W with the BiasAug extra
//! coordinate when asked), `(q' . w', |w'|^2)`.
//!
//! # Every tier returns the same bits
//! The sums are defined lane by lane: coordinate `j` of the (possibly
//! augmented) row goes to lane `j mod 8` ([`LANES`]), each lane adds its
//! products in increasing `j` from `+0.0`, a product and a sum are two
//! roundings (`vmulpd` then `vaddpd`, never an FMA), and the lanes are
//! added in order `0..8` at the end. f32 -> f64 is exact. One zmm (or two
//! ymm, or two `f64x4`) of accumulators is exactly these eight lanes, so
//! every tier returns the scalar oracle's bits (tested in
//! `tests/train_logq.rs` on every tier the CPU has), and the probabilities
//! stay the same bits on every machine.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// Interleaved partial sums of every dot product (module docs).
pub const LANES: usize = 8;

/// Candidate rows as the kernels read them: row `id` is `w[id * stride ..
/// id * stride + dim]`, followed, when `aug`, by one extra coordinate
/// `bias[id]` (`0.0` when `bias` is `None`): the BiasAug transform's
/// `[w, b]`. The caller has checked every id `< rows` and the lengths.
#[derive(Clone, Copy)]
pub struct AugRows<'a> {
    pub w: &'a [f32],
    pub stride: usize,
    pub dim: usize,
    pub aug: bool,
    pub bias: Option<&'a [f32]>,
}

impl AugRows<'_> {
    /// The extra coordinate of row `id` (only read when `aug`).
    #[inline(always)]
    pub fn extra(&self, id: usize) -> f32 {
        self.bias.map_or(0.0, |b| b[id])
    }
}

/// `dot[j], nrm[j] = (q . w'_{ids[j]}, |w'_{ids[j]}|^2)` for every
/// candidate (`q` holds `dim + aug` values; `dot`, `nrm` at least
/// `ids.len()`).
pub type DotNorms = fn(&[f64], &AugRows<'_>, &[u32], &mut [f64], &mut [f64]);

/// The kernel table of a tier.
pub struct Kernels {
    pub dot_norms: DotNorms,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier (the caller has checked that the CPU
    /// supports it).
    Kernels {
        dot_norms: dot_norms,
    }
}

/// Adds the tail coordinates `dim8..dim` of `row` and the extra one into
/// the lanes (coordinate `j` into lane `j mod 8`), shared by every tier
/// after its full chunks of eight.
#[inline(always)]
pub(crate) fn tail_lanes(
    q: &[f64],
    row: &[f32],
    extra: Option<f32>,
    d: &mut [f64; LANES],
    n: &mut [f64; LANES],
) {
    let dim = row.len();
    let dim8 = dim - dim % LANES;
    for j in dim8..dim {
        let y = row[j] as f64;
        d[j % LANES] += q[j] * y;
        n[j % LANES] += y * y;
    }
    if let Some(e) = extra {
        let y = e as f64;
        d[dim % LANES] += q[dim] * y;
        n[dim % LANES] += y * y;
    }
}

/// The lanes added in order `0..8` from `+0.0`.
#[inline(always)]
pub(crate) fn lane_sums(d: &[f64; LANES], n: &[f64; LANES]) -> (f64, f64) {
    let (mut ds, mut ns) = (0f64, 0f64);
    for k in 0..LANES {
        ds += d[k];
        ns += n[k];
    }
    (ds, ns)
}
