//! The f64 dot products of the LSH inclusion probabilities
//! ([`crate::source::lsh::train_logq`]): for one query `q'` (f64, `hd` values) and each
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

/// What a SIMD tier provides: eight f64 lanes of a sum and the step over
/// eight coordinates; the loop over the candidates ([`dot_norms_simd`]) is
/// shared.
///
/// # Safety (every method)
/// The caller enables the tier's target features; `step` reads 8 f32 at
/// `rp` and 8 f64 at `qp`.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Tile {
    /// The [`LANES`] partial sums of one dot product.
    type Acc: Copy;
    unsafe fn zero() -> Self::Acc;
    /// `d[l] += q[l] * y[l]`, `n[l] += y[l] * y[l]` for the eight row
    /// values `y` at `rp` (widened exactly) and query values at `qp`.
    unsafe fn step(d: &mut Self::Acc, n: &mut Self::Acc, rp: *const f32, qp: *const f64);
    /// The lanes in order.
    unsafe fn lanes(a: Self::Acc) -> [f64; LANES];
}

/// Candidates ahead whose rows the SIMD tiers prefetch.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 4;

/// The SIMD tiers' [`DotNorms`]: per candidate, the full chunks of eight
/// by `S::step` (`vcvtps2pd`, `vmulpd` then `vaddpd`), then the shared
/// tail and lane sums; the row `PREFETCH` candidates ahead prefetched (the
/// candidates are random rows of W, mostly outside the caches).
///
/// # Safety
/// `q.len() >= dim + aug` (the slices check the rows); the caller enables
/// `S`'s features.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn dot_norms_simd<S: Tile>(
    q: &[f64],
    r: &AugRows<'_>,
    ids: &[u32],
    dot: &mut [f64],
    nrm: &mut [f64],
) {
    let dim = r.dim;
    let dim8 = dim - dim % LANES;
    let w = r.w.as_ptr();
    for (j, &id) in ids.iter().enumerate() {
        if let Some(&nx) = ids.get(j + PREFETCH) {
            // A prefetch only: the address is computed with wrapping
            // arithmetic and never dereferenced.
            crate::kernels::simd::prefetch_lines(
                w.wrapping_add(nx as usize * r.stride).cast(),
                dim * 4,
            );
        }
        let id = id as usize;
        let row = &r.w[id * r.stride..id * r.stride + dim];
        // SAFETY: every step reads `row[c..c + 8]` and `q[c..c + 8]` with
        // `c + 8 <= dim8 <= dim <= q.len()` (checked by the slice above
        // and the caller's `q.len() >= dim + aug`).
        let (mut d, mut n) = unsafe {
            let (mut dv, mut nv) = (S::zero(), S::zero());
            let (rp, qp) = (row.as_ptr(), q.as_ptr());
            let mut c = 0;
            while c < dim8 {
                S::step(&mut dv, &mut nv, rp.add(c), qp.add(c));
                c += LANES;
            }
            (S::lanes(dv), S::lanes(nv))
        };
        tail_lanes(q, row, r.aug.then(|| r.extra(id)), &mut d, &mut n);
        let (ds, ns) = lane_sums(&d, &n);
        dot[j] = ds;
        nrm[j] = ns;
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
