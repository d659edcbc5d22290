//! Shared by the IVF tests: a small random layer with a bias, its exact
//! logits with the f32 dot-product bound, the exact-top-k check, and a
//! checksum of an index's lists.

use std::path::PathBuf;

use lshk::ivf::Ivf;
use lshk::matmul::TOPK_PAD_ID;
use lshk::rng::SplitMix64;

pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-ivf-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

pub fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

/// A small layer: `rows` x `dim` normal rows with a bias, `nq` queries.
pub struct Layer {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    pub q: Vec<f32>,
    pub rows: usize,
    pub dim: usize,
    pub nq: usize,
}

pub fn layer(rows: usize, dim: usize, nq: usize, seed: u64) -> Layer {
    Layer {
        w: randn(rows * dim, seed),
        b: randn(rows, seed + 1),
        q: randn(nq * dim, seed + 2),
        rows,
        dim,
        nq,
    }
}

/// Exact logit of row `r` for query `i` in f64, and the f32 dot-product
/// bound `gamma(dim + 1) (sum |w q| + |b|)`.
pub fn exact(l: &Layer, i: usize, r: usize) -> (f64, f64) {
    let q = &l.q[i * l.dim..(i + 1) * l.dim];
    let w = &l.w[r * l.dim..(r + 1) * l.dim];
    let dot: f64 = w
        .iter()
        .zip(q)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum();
    let s: f64 = w
        .iter()
        .zip(q)
        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
        .sum();
    let n = (l.dim + 1) as f64;
    let u = f64::from(f32::EPSILON) / 2.0;
    let g = n * u / (1.0 - n * u);
    (
        dot + f64::from(l.b[r]),
        2.0 * g * (s + f64::from(l.b[r]).abs()) + 1e-30,
    )
}

/// Every returned id's score is its exact logit within the bound, and the
/// t-th returned score equals the t-th exact best within the bound (so the
/// returned set is the exact top-k up to ties within rounding).
pub fn check_exact_topk(l: &Layer, k: usize, ids: &[u32], sc: &[f32], what: &str) {
    let mut all: Vec<(f64, usize)> = Vec::new();
    for i in 0..l.nq {
        all.clear();
        all.extend((0..l.rows).map(|r| (exact(l, i, r).0, r)));
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        for t in 0..k {
            let id = ids[i * k + t];
            assert_ne!(id, TOPK_PAD_ID, "{what}: query {i} slot {t} padded");
            let (e, bound) = exact(l, i, id as usize);
            let s = f64::from(sc[i * k + t]);
            assert!(
                (s - e).abs() <= bound,
                "{what}: query {i} id {id}: score {s} vs exact {e} (bound {bound:e})"
            );
            let (best_t, bt) = (all[t].0, exact(l, i, all[t].1).1);
            assert!(
                (s - best_t).abs() <= bound + bt,
                "{what}: query {i} slot {t}: score {s} vs the exact {t}-th best {best_t}"
            );
        }
    }
}

/// The golden form of the checksum: the build's f32 centroids (from
/// [`Ivf::build_with_centroids`]), list offsets and list ids.
pub fn fingerprint_f32(ivf: &Ivf, centroids: &[f32]) -> u32 {
    let mut c = 0;
    for v in centroids {
        c = lshk::crc32c::crc32c(c, &v.to_bits().to_le_bytes());
    }
    for v in ivf.list_offsets().iter().chain(ivf.list_ids()) {
        c = lshk::crc32c::crc32c(c, &v.to_le_bytes());
    }
    c
}

/// A checksum of the centroids (the int8 codes and scales the index keeps),
/// list offsets and list ids.
pub fn fingerprint(ivf: &Ivf) -> u32 {
    let cq = ivf.centroid_codes();
    let mut c = lshk::crc32c::crc32c(0, lshk::format::as_bytes(cq.codes()));
    for v in cq.scales() {
        c = lshk::crc32c::crc32c(c, &v.to_bits().to_le_bytes());
    }
    for v in ivf.list_offsets().iter().chain(ivf.list_ids()) {
        c = lshk::crc32c::crc32c(c, &v.to_le_bytes());
    }
    c
}

/// recall@k of `ids` against the exact top-k `ex` (`nq * k` each): the
/// share of exact ids each query's answer holds, over all queries.
pub fn recall_at_k(ex: &[u32], ids: &[u32], k: usize) -> f64 {
    let nq = ex.len() / k;
    let hit: usize = ex
        .chunks_exact(k)
        .zip(ids.chunks_exact(k))
        .map(|(e, got)| got.iter().filter(|x| e.contains(x)).count())
        .sum();
    hit as f64 / (nq * k) as f64
}
