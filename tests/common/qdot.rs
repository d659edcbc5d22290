//! The scalar oracle of quantised row scores, shared by the panel and
//! 4-bit tests.

use lshk::qdot::{QQuery, QRows, Variant};
use lshk::Isa;

/// Every row's int8 score for `q` (no bias), on the scalar tier: the
/// oracle of the panel kernels and the floor of the 4-bit bounds.
pub fn scalar_scores(r: &QRows, q: &QQuery) -> Vec<f32> {
    let mut out = vec![0f32; r.rows()];
    r.score_run_with(
        Variant::of(Isa::Scalar).unwrap(),
        0,
        r.rows(),
        q,
        None,
        &mut out,
    )
    .unwrap();
    out
}
