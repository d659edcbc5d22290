//! 4-bit PQ fast-scan, scalar oracle: for each row, each sub-quantiser's
//! code is read through [`super::nibble_at`] (the layout's definition) and
//! its table entry added in u32; then the f32 epilogue of
//! [`super::score_of`]. Plain and slow on purpose.

use super::{nibble_at, score_of, Epilogue, KSUB};

/// `sum_m lut[16 m + code(r, m)]`.
fn acc_row(codes: &[u8], m_pad: usize, r: usize, lut: &[u8]) -> u32 {
    (0..m_pad)
        .map(|m| lut[KSUB * m + nibble_at(codes, m_pad, r, m) as usize] as u32)
        .sum()
}

/// See [`super::AccFn`].
///
/// # Safety
/// The preconditions of [`super::AccFn`] (this tier indexes with bounds
/// checks anyway).
pub unsafe fn acc(codes: &[u8], m_pad: usize, nrows: usize, lut: &[u8], out: &mut [u32]) {
    for (r, o) in out[..nrows].iter_mut().enumerate() {
        *o = acc_row(codes, m_pad, r, lut);
    }
}

/// See [`super::ScoreFn`].
///
/// # Safety
/// The preconditions of [`super::ScoreFn`] (bounds-checked here anyway).
pub unsafe fn score(
    codes: &[u8],
    m_pad: usize,
    nrows: usize,
    lut: &[u8],
    epi: &Epilogue<'_>,
    out: &mut [f32],
) {
    for (r, o) in out[..nrows].iter_mut().enumerate() {
        let a = acc_row(codes, m_pad, r, lut);
        *o = score_of(a, epi.delta, epi.offset, epi.bias.map(|b| b[r]));
    }
}
