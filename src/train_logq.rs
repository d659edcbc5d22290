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
//!   ([`crate::tables::fold_code`]), so more codes share a bucket and the
//!   true probability is higher; with `bucket_cap > 0` a bucket keeps only
//!   some of its rows, so it is lower. Multi-probing is not modelled.
//! * **The tables visited**: `tables` (per query) is the number of tables
//!   whose buckets joined the set. A whole-bucket budget (the LNS seed's
//!   rule, [`crate::tables::BudgetRule::WholeBuckets`]) stops after some
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

use crate::bail;
use crate::error::Result;
use crate::hash::Family;
use crate::index::{Index, Transform};
use crate::matmul::{self, Weights};

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

const LANES: usize = crate::kernels::logq::LANES;

/// The inclusion probability from `q' . w'` and `|q'|^2 |w'|^2`.
#[inline]
fn probability(dot: f64, qn_wn: f64, k: u32, l: u32) -> f64 {
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
fn dot_norm(a: &[f64], b: &[f32]) -> (f64, f64) {
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

impl Index {
    /// Per-candidate inclusion probabilities of LSH sampling (module
    /// documentation): for each query `i < nq` (row `i` of `q` at
    /// `i * q_stride`, `dim` floats) and each candidate
    /// `ids[offsets[i]..offsets[i + 1]]` (CSR, `nq + 1` offsets),
    /// `out[j] = 1 - (1 - p^K)^l` with `p = 1 - θ/π` for the angle θ
    /// between the transformed query and the transformed stored row, and
    /// `l = tables[i]` (`tables`: `nq` counts `<= L`; `None`: L).
    ///
    /// Errors (nothing written): `Unsupported` (an index without LSH
    /// tables), `InvalidArgument` (a DWTA index, an index
    /// with label-aware buckets, bad offsets, `q_stride < dim`, a table
    /// count `> L`), `BufferTooSmall` (`q`, `tables` or `out` too short),
    /// `IndexOutOfRange` (an id `>= rows`), `NonFinite` (a query value),
    /// `SizeOverflow`. Thread-safe; allocates four one-row scratch vectors
    /// per call. The dot products of rows stored as f32 (transform None or
    /// BiasAug) run on the active tier's kernel ([`crate::kernels::logq`]),
    /// which returns the same bits as the plain code on every tier.
    #[allow(clippy::too_many_arguments)]
    pub fn inclusion_probabilities(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        tables: Option<&[u32]>,
        out: &mut [f64],
    ) -> Result<()> {
        self.lsh("inclusion_prob")?;
        if self.family() != Family::SimHash {
            bail!(
                InvalidArgument,
                "inclusion probabilities need a SimHash index; this index is DWTA"
            );
        }
        if self.labels.is_some() {
            bail!(
                InvalidArgument,
                "the index has label-aware buckets (lshk_index_train_labels): a row may \
                 sit in buckets its code does not give, so the SimHash formula does not apply"
            );
        }
        matmul::check_offsets(offsets, nq, ids.len(), "ids")?;
        self.check_queries(q, nq, q_stride, "q")?;
        let rows = self.rows();
        if let Some(j) = ids.iter().position(|&r| r as usize >= rows) {
            let i = offsets.partition_point(|&o| o <= j) - 1;
            bail!(
                IndexOutOfRange,
                "ids[{j}] (query {i}) is {}, the index has {rows} rows",
                ids[j]
            );
        }
        let l_max = self.num_tables();
        if let Some(t) = tables {
            if t.len() < nq {
                bail!(
                    BufferTooSmall,
                    "`tables` holds {} counts, nq = {nq} needed",
                    t.len()
                );
            }
            if let Some(i) = t[..nq].iter().position(|&v| v > l_max) {
                bail!(
                    InvalidArgument,
                    "tables[{i}] is {}, the index has L = {l_max} tables",
                    t[i]
                );
            }
        }
        if out.len() < ids.len() {
            bail!(
                BufferTooSmall,
                "`out` holds {} values, offsets[nq] = {} needed",
                out.len(),
                ids.len()
            );
        }
        let (dim, hd, k) = (self.dim(), self.hash_dim(), self.bits());
        let transform = self.transform();
        let inv_u = 1.0 / self.mips_u() as f64;
        let bias = self.bias();
        let st = self.weight_stride();
        let w = self.weights();
        let mut tq = vec![0f32; hd];
        let mut tq64 = vec![0f64; hd];
        let mut row = vec![0f32; dim];
        let mut tw = vec![0f32; hd];
        // The rows read in place (f32 storage, no transform or BiasAug): the
        // dot products of a block of candidates by the tier's kernel, which
        // returns the scalar lanes' bits (crate::kernels::logq).
        let kern = crate::kernels::logq::kernels(crate::isa::active());
        let in_place = match (&w, transform) {
            (Weights::F32(s), Transform::None | Transform::BiasAug) => {
                Some(crate::kernels::logq::AugRows {
                    w: s,
                    stride: st,
                    dim,
                    aug: transform == Transform::BiasAug,
                    bias,
                })
            }
            _ => None,
        };
        const BLOCK: usize = 128;
        let (mut dots, mut nrms) = ([0f64; BLOCK], [0f64; BLOCK]);
        for i in 0..nq {
            self.transform_query(&q[i * q_stride..i * q_stride + dim], &mut tq);
            for (d, &s) in tq64.iter_mut().zip(&tq) {
                *d = s as f64;
            }
            let (_, qn) = dot_norm(&tq64, &tq);
            let l = tables.map_or(l_max, |t| t[i]);
            if let Some(rows) = &in_place {
                let mut j0 = offsets[i];
                while j0 < offsets[i + 1] {
                    let j1 = (j0 + BLOCK).min(offsets[i + 1]);
                    (kern.dot_norms)(&tq64, rows, &ids[j0..j1], &mut dots, &mut nrms);
                    for j in j0..j1 {
                        out[j] = probability(dots[j - j0], qn * nrms[j - j0], k, l);
                    }
                    j0 = j1;
                }
                continue;
            }
            for j in offsets[i]..offsets[i + 1] {
                let r = ids[j] as usize;
                let wr: &[f32] = match &w {
                    Weights::F32(s) => &s[r * st..r * st + dim],
                    Weights::Bf16(s) => {
                        matmul::convert_bf16_to_f32(&s[r * st..r * st + dim], &mut row)?;
                        &row
                    }
                    Weights::F16(s) => {
                        matmul::convert_f16_to_f32(&s[r * st..r * st + dim], &mut row)?;
                        &row
                    }
                    Weights::I8 { w, scales } => {
                        for (o, &x) in row.iter_mut().zip(&w[r * st..r * st + dim]) {
                            *o = x as f32 * scales[r];
                        }
                        &row
                    }
                };
                let b = bias.map_or(0.0, |b| b[r]);
                crate::index::transform_row(transform, wr, b, inv_u, &mut tw);
                let (dot, wn) = dot_norm(&tq64, &tw);
                out[j] = probability(dot, qn * wn, k, l);
            }
        }
        Ok(())
    }
}
