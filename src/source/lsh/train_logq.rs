//! Sampling probabilities of LSH negative sampling, for a logQ correction
//! ("report it per candidate for SimHash, so a caller can opt
//! into a logQ correction").
//!
//! A SimHash bit of a Gaussian plane `h` is `h . x > 0`. Two vectors at
//! angle `θ` get the same bit with probability `p = 1 - θ / π` (Charikar),
//! a whole K-bit code with `p^K` (the K planes are independent), and the
//! same bucket in at least one of `L` independent tables with
//!
//! ```text
//! P(i in S(q)) = 1 - (1 - p^K)^L,   p = 1 - acos(cos(q', w_i')) / π
//! ```
//!
//! where `q'` and `w_i'` are the vectors the index hashes (after its
//! [`Transform`](crate::index::Transform): `[q, 1]` and `[w_i, b_i]` with
//! BiasAug). [`Index::inclusion_probabilities`] evaluates this for given
//! (query, candidate) pairs; a trainer that samples a candidate set `S`
//! from the union of the query's buckets can then subtract `log P_i` from
//! the logits of the sampled negatives (the logQ / Horvitz-Thompson
//! correction of sampled softmax): `sum_{i in S} exp(z_i) / P_i` is an
//! unbiased estimate of `sum_i exp(z_i)` over the classes that could be
//! sampled.
//!
//! # What the formula assumes (and when it is only an approximation)
//! * **Gaussian planes** (`sparsity` 0, planes from the seed): exact over
//!   the random draw of the planes. With dense ±1 or sparse planes
//!   (`sparsity >= 1`) or caller-given planes it is the Gaussian value, an
//!   approximation.
//! * **One bucket per code**: with `range_bits < K` codes are folded
//!   ([`crate::source::lsh::tables::fold_code`]), so more codes share a bucket and the
//!   true probability is higher; with `bucket_cap > 0` a bucket keeps only
//!   some of its rows, so it is lower. Multi-probing is not modelled.
//! * **The tables visited**: `tables` (per query) is the number of tables
//!   whose buckets joined the set. A whole-bucket budget (the LNS seed's
//!   rule, [`crate::source::lsh::tables::BudgetRule::WholeBuckets`]) stops after some
//!   `l <= L` tables; passing that `l` gives `1 - (1 - p^K)^l`, the
//!   probability given that `l` tables were taken (the stop itself depends
//!   on the buckets, which the formula ignores). `None` uses L for every
//!   query. A count of 0 gives probability 0.
//! * **The rows as stored**: each row is read from the index's stored
//!   weights (decoded from bf16 / f16 / int8) and bias. For rows changed by
//!   [`Index::update_rows`] and not yet rehashed, the buckets still hold
//!   the row's old codes, so the value describes the new row, not the
//!   buckets; after a rehash (or with an index rebuilt from W) it is the
//!   value for the buckets the query sees. An index whose W is an owned
//!   copy refreshed only at rehashes (as `examples/lns_train.rs` keeps it)
//!   stores exactly the rows its buckets were hashed from.
//! * **Zero vectors**: a zero query or row projects to 0 on every plane,
//!   whose bit is 0; a row's bit is 0 with probability 1/2, so `p = 1/2`,
//!   which is what the formula gives for `cos = 0` (used for them).
//! * **Non-finite rows**: an index's stored W is finite (checked at build,
//!   load and update); a borrowed W the caller broke (a NaN written into
//!   it) gives NaN for that row's candidates.
//!
//! # Arithmetic
//! Per (query, candidate): the dot product `q' . w'` and `|w'|^2` in f64,
//! each summed over eight interleaved lanes (coordinate `j` into lane
//! `j mod 8`, lanes added in order at the end), `|q'|^2` likewise once per
//! query; `cos = dot / sqrt(|q'|^2 |w'|^2)` clamped to [-1, 1]; `p = 1 -
//! acos(cos) / π`; `P = -expm1(l * ln_1p(-p^K))` (no cancellation for
//! small `p^K`), and `P = 1` when `p^K = 1`. The result is the same bits
//! on every machine and for every call: plain f64 code whose order of
//! operations is fixed (the dot products of f32 rows run on the active
//! SIMD tier, whose kernels keep that order lane by lane and return the
//! same bits, see [`crate::kernels::logq`]), and within a few units of 1e-12
//! of the same formula evaluated with exactly summed products (tested).
//! `tests/train_logq.rs` also checks the probabilities against the
//! frequency with which a row lands in a query's buckets over 4,000
//! independently seeded indexes.

/// The probability `p = 1 - acos(cos) / π` that one SimHash bit (a
/// Gaussian plane) agrees for two vectors with cosine `cos` (clamped to
/// [-1, 1]; NaN stays NaN).
pub fn simhash_bit_agreement(cos: f64) -> f64 {
    1.0 - cos.clamp(-1.0, 1.0).acos() / std::f64::consts::PI
}

/// `1 - (1 - p^k)^l`: the probability that two vectors whose bits agree
/// with probability `p` share a K-bit bucket in at least one of `l`
/// independent tables (0 for `l = 0`; `p` clamped to [0, 1]; NaN stays
/// NaN).
pub fn simhash_inclusion(p: f64, k: u32, l: u32) -> f64 {
    if l == 0 {
        return 0.0;
    }
    let pk = p.clamp(0.0, 1.0).powi(k as i32);
    if pk >= 1.0 {
        return 1.0;
    }
    -(l as f64 * (-pk).ln_1p()).exp_m1()
}

pub(crate) const LANES: usize = crate::kernels::logq::LANES;

/// The inclusion probability from `q' . w'` and `|q'|^2 |w'|^2`.
#[inline]
pub(crate) fn probability(dot: f64, qn_wn: f64, k: u32, l: u32) -> f64 {
    let den = qn_wn.sqrt();
    // den is 0 only for a zero query or row (module docs); NaN (a broken
    // borrowed W) propagates.
    let cos = if den > 0.0 || den.is_nan() {
        dot / den
    } else {
        0.0
    };
    simhash_inclusion(simhash_bit_agreement(cos), k, l)
}

/// `(a . b, |b|^2)` in f64 over `LANES` interleaved lanes (module docs).
#[inline]
pub(crate) fn dot_norm(a: &[f64], b: &[f32]) -> (f64, f64) {
    let mut d = [0f64; LANES];
    let mut n = [0f64; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for k in 0..LANES {
            let yv = y[k] as f64;
            d[k] += x[k] * yv;
            n[k] += yv * yv;
        }
    }
    for (k, (x, &y)) in ar.iter().zip(br).enumerate() {
        let yv = y as f64;
        d[k] += x * yv;
        n[k] += yv * yv;
    }
    let (mut ds, mut ns) = (0f64, 0f64);
    for k in 0..LANES {
        ds += d[k];
        ns += n[k];
    }
    (ds, ns)
}
