//! Row weights for the k-means of [`Ivf::build_weighted`] (the
//! partition "optionally weighted by training queries, as HALOS uses
//! them"), and a helper deriving them from training hits.

use super::*;

/// Checks row weights: `rows` of them, finite, `>= 0`, not all zero.
pub(super) fn check_row_weights(wt: &[f32], rows: usize) -> Result<()> {
    if wt.len() != rows {
        bail!(
            InvalidArgument,
            "{} row weights for {rows} rows (one per row needed)",
            wt.len()
        );
    }
    if let Some(r) = wt.iter().position(|v| !v.is_finite()) {
        bail!(
            NonFinite,
            "row weight {r} is {} (finite values needed)",
            wt[r]
        );
    }
    if let Some(r) = wt.iter().position(|&v| v < 0.0) {
        bail!(
            InvalidArgument,
            "row weight {r} is {}; it must be >= 0",
            wt[r]
        );
    }
    if wt.iter().all(|&v| v == 0.0) {
        bail!(
            InvalidArgument,
            "every row weight is 0; at least one must be positive"
        );
    }
    Ok(())
}

/// Row weights from training hits: `w_r = 1 + alpha * rows * n_r / N`,
/// where `n_r` counts how often row `r` occurs in `hits` and `N =
/// hits.len()` (so the added term averages `alpha` over the rows; no hits
/// gives all ones). `hits` are row ids (each `< rows`) that training
/// queries should find: their labels (the training pairs), or
/// their exact top-k rows. Computed in f64, rounded to f32 once.
pub fn row_weights_from_hits(rows: usize, hits: &[u32], alpha: f32) -> Result<Vec<f32>> {
    if !(alpha.is_finite() && alpha >= 0.0) {
        bail!(
            InvalidArgument,
            "alpha is {alpha}; it must be finite and >= 0"
        );
    }
    let mut n = vec![0u64; rows];
    for (i, &h) in hits.iter().enumerate() {
        if h as usize >= rows {
            bail!(
                InvalidArgument,
                "hit {i} is row {h}, not below rows = {rows}"
            );
        }
        n[h as usize] += 1;
    }
    if hits.is_empty() {
        return Ok(vec![1.0; rows]);
    }
    let f = f64::from(alpha) * rows as f64 / hits.len() as f64;
    Ok(n.iter().map(|&c| (1.0 + f * c as f64) as f32).collect())
}
