//! The storage conversions (f32 <-> bf16 / f16) and the per-row int8
//! quantisation.

use crate::bail;
use crate::error::{strided_len, Result};

use super::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

fn check_same_len(a: usize, b: usize) -> Result<()> {
    if a != b {
        bail!(
            InvalidArgument,
            "source has {a} elements, destination {b}; they must be equal"
        );
    }
    Ok(())
}

/// `dst[i] = f32_to_bf16(src[i])` (round to nearest even; NaN stays NaN).
pub fn convert_f32_to_bf16(src: &[f32], dst: &mut [u16]) -> Result<()> {
    check_same_len(src.len(), dst.len())?;
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &s)| *d = f32_to_bf16(s));
    Ok(())
}

/// `dst[i] = f32_to_f16(src[i])` (round to nearest even, overflow to inf).
pub fn convert_f32_to_f16(src: &[f32], dst: &mut [u16]) -> Result<()> {
    check_same_len(src.len(), dst.len())?;
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &s)| *d = f32_to_f16(s));
    Ok(())
}

/// `dst[i] = bf16_to_f32(src[i])` (exact).
pub fn convert_bf16_to_f32(src: &[u16], dst: &mut [f32]) -> Result<()> {
    check_same_len(src.len(), dst.len())?;
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &s)| *d = bf16_to_f32(s));
    Ok(())
}

/// `dst[i] = f16_to_f32(src[i])` (exact).
pub fn convert_f16_to_f32(src: &[u16], dst: &mut [f32]) -> Result<()> {
    check_same_len(src.len(), dst.len())?;
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &s)| *d = f16_to_f32(s));
    Ok(())
}

/// Symmetric per-row int8 quantisation: for each row,
/// `scale = max_j |w_j| / 127` (0 for an all-zero row) and
/// `q_j = round_ties_even(w_j / scale)` clamped to `-127..=127`, so
/// `|w_j - scale * q_j| <= scale * (1/2 + 2^-17)`. Row `r` of `w` starts at
/// `r * w_stride`, row `r` of `out` at `r * out_stride`; `scales` gets `rows`
/// values. NaN or infinite weights are `NonFinite` (nothing written).
#[allow(clippy::too_many_arguments)]
pub fn quantize_rows_i8(
    w: &[f32],
    rows: usize,
    dim: usize,
    w_stride: usize,
    out: &mut [i8],
    out_stride: usize,
    scales: &mut [f32],
) -> Result<()> {
    let wl = strided_len(rows, dim, w_stride, "w")?;
    let ol = strided_len(rows, dim, out_stride, "out")?;
    if w.len() < wl {
        bail!(BufferTooSmall, "`w` holds {} floats, {wl} needed", w.len());
    }
    if out.len() < ol {
        bail!(
            BufferTooSmall,
            "`out` holds {} bytes, {ol} needed",
            out.len()
        );
    }
    if scales.len() < rows {
        bail!(
            BufferTooSmall,
            "`scales` holds {} floats, {rows} needed",
            scales.len()
        );
    }
    crate::error::check_finite_rows(w, rows, dim, w_stride, "w")?;
    for r in 0..rows {
        let row = &w[r * w_stride..r * w_stride + dim];
        let o = &mut out[r * out_stride..r * out_stride + dim];
        o.fill(0);
        (scales[r], _) = crate::quant::qdot::quantize_row(row, o);
    }
    Ok(())
}
