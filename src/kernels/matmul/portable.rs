//! Gathered matmul, portable tier (`wide::f32x8` at the build's baseline
//! target features: two SSE2 registers on x86-64, NEON on aarch64).
//!
//! Four rows at a time, one f32x8 accumulator each, sharing each block of 8
//! query values; elements are converted to f32 lane by lane (exact), the
//! `dim % 8` tail is added in scalar. Without FMA in the baseline,
//! `mul_add` is a multiply and an add (two roundings), which the error bound
//! of `crate::matmul` covers. No prefetch: there is no portable hint.

use wide::f32x8;

use super::{bf16_to_f32, f16_to_f32, Rows};

const ROWS: usize = 4;

#[inline(always)]
fn load8<T: Copy>(row: &[T], cv: &impl Fn(T) -> f32) -> f32x8 {
    let mut a = [0.0f32; 8];
    for (d, &s) in a.iter_mut().zip(row) {
        *d = cv(s);
    }
    f32x8::from(a)
}

#[inline(always)]
fn dot_generic<T: Copy>(
    r: &Rows<'_, T>,
    q: &[f32],
    ids: &[u32],
    out: &mut [f32],
    cv: impl Fn(T) -> f32,
) {
    let dim = r.dim;
    let q = &q[..dim];
    let full = dim / 8 * 8;
    let row = |id: u32| &r.w[id as usize * r.stride..id as usize * r.stride + dim];
    let mut i = 0;
    while i + ROWS <= ids.len() {
        let rows: [&[T]; ROWS] = std::array::from_fn(|k| row(ids[i + k]));
        let mut acc = [f32x8::ZERO; ROWS];
        for (b, qc) in q[..full].chunks_exact(8).enumerate() {
            let qv = load8(qc, &|x| x);
            for k in 0..ROWS {
                acc[k] = load8(&rows[k][b * 8..b * 8 + 8], &cv).mul_add(qv, acc[k]);
            }
        }
        for k in 0..ROWS {
            let mut s = acc[k].reduce_add();
            for (&w, &x) in rows[k][full..].iter().zip(&q[full..]) {
                s = cv(w).mul_add(x, s);
            }
            out[i + k] = s;
        }
        i += ROWS;
    }
    while i < ids.len() {
        let rw = row(ids[i]);
        let mut acc = f32x8::ZERO;
        for (wc, qc) in rw[..full].chunks_exact(8).zip(q[..full].chunks_exact(8)) {
            acc = load8(wc, &cv).mul_add(load8(qc, &|x| x), acc);
        }
        let mut s = acc.reduce_add();
        for (&w, &x) in rw[full..].iter().zip(&q[full..]) {
            s = cv(w).mul_add(x, s);
        }
        out[i] = s;
        i += 1;
    }
}

/// # Safety
/// See [`super::DotFn`] (this tier indexes with bounds checks).
pub unsafe fn dot_f32(r: &Rows<'_, f32>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, |w| w)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_bf16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, bf16_to_f32)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_f16(r: &Rows<'_, u16>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, f16_to_f32)
}

/// # Safety
/// See [`super::DotFn`].
pub unsafe fn dot_i8(r: &Rows<'_, i8>, q: &[f32], ids: &[u32], out: &mut [f32]) {
    dot_generic(r, q, ids, out, |w| w as f32);
    for (o, &id) in out.iter_mut().zip(ids) {
        *o *= r.scales[id as usize];
    }
}

/// The tier table's `prefetch` (`tier_table!` in `../mod.rs`): none on
/// this tier.
pub use super::no_prefetch as prefetch;
