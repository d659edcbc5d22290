//! The PQ4 codebook ([`Codebook`]): training (k-means with 16 centroids
//! per sub-space), encoding (plain and anisotropic) and decoding.

use crate::bail;
use crate::error::{checked_mul, Result};
use crate::rng::SplitMix64;

use super::*;

/// Parameters of [`Codebook::train`].
#[derive(Clone, Copy, Debug)]
pub struct TrainParams {
    /// Lloyd iterations per sub-space (at most; it stops early when no
    /// assignment changes). Default 25.
    pub iters: u32,
    /// The seed of the row sample and of the initial centroids.
    pub seed: u64,
    /// At most this many rows train (a seeded sample without repeats when
    /// there are more; 0 = all rows). Default 4,096 (256 per centroid).
    pub max_train_rows: usize,
    /// Threads the sub-spaces are split between (0 = every core). Each
    /// sub-space's k-means is seeded on its own, so the codebook is the
    /// same for every count. Default 1.
    pub threads: usize,
}

impl Default for TrainParams {
    fn default() -> Self {
        TrainParams {
            iters: 25,
            seed: 0x5eed_f45c,
            max_train_rows: 4096,
            threads: 1,
        }
    }
}

/// `M` sub-spaces of `dsub` coordinates, 16 f32 centroids each:
/// centroid `c` of sub-space `j` is `centroids[(16 j + c) * dsub..][..dsub]`.
#[derive(Clone, Debug)]
pub struct Codebook {
    pub(super) dim: usize,
    pub(super) m: usize,
    pub(super) dsub: usize,
    centroids: Vec<f32>,
    /// The centroids transposed per sub-space: coordinate `k` of centroid
    /// `c` of sub-space `j` at `(j * dsub + k) * 16 + c` (for the tables).
    pub(super) transposed: Vec<f32>,
}

/// The transposed copy of `centroids` (see [`Codebook`]'s fields).
fn transpose(centroids: &[f32], m: usize, ds: usize) -> Vec<f32> {
    let mut t = vec![0f32; centroids.len()];
    for (c, t) in centroids
        .chunks_exact(KSUB * ds)
        .zip(t.chunks_exact_mut(KSUB * ds))
        .take(m)
    {
        transpose_into(c, ds, t);
    }
    t
}

/// One sub-space's 16 centroids `cents` (`16 * ds` floats) transposed into
/// `t`: coordinate `k` of centroid `c` at `16 k + c`.
fn transpose_into(cents: &[f32], ds: usize, t: &mut [f32]) {
    for c in 0..KSUB {
        for k in 0..ds {
            t[k * KSUB + c] = cents[c * ds + k];
        }
    }
}

/// `sum_k (x_k - c_k)^2` in f32, in order (the distance of training and
/// encoding; no FMA, so every machine gets the same bits). The definition
/// [`nearest_t`] is tested against.
#[cfg(test)]
fn dist2(x: &[f32], c: &[f32]) -> f32 {
    x.iter().zip(c).fold(0.0f32, |s, (&a, &b)| {
        let d = a - b;
        s + d * d
    })
}

/// The nearest of 16 centroids to `x`, the lowest index on ties, and its
/// distance `sum_k (x_k - c_k)^2` (f32, in coordinate order, no FMA: the
/// same bits on every machine; NaN is never nearer), from the centroids
/// transposed (`ct[16 k + c]` is coordinate `k` of centroid `c`): the 16
/// distances as one 16-lane loop per coordinate, each the same operations
/// in the same order as the ordered scan's `dist2`, then the first
/// smallest without a branch per centroid.
#[inline]
fn nearest_t(x: &[f32], ct: &[f32], ds: usize) -> (u8, f32) {
    let mut d = [0f32; KSUB];
    for (k, &xk) in x[..ds].iter().enumerate() {
        let col: &[f32; KSUB] = ct[k * KSUB..][..KSUB].try_into().expect("16 lanes");
        for (dc, &cc) in d.iter_mut().zip(col) {
            let t = xk - cc;
            *dc += t * t;
        }
    }
    let mut best = (0u8, f32::INFINITY);
    for (c, &dc) in d.iter().enumerate() {
        let nearer = dc < best.1;
        best.0 = if nearer { c as u8 } else { best.0 };
        best.1 = if nearer { dc } else { best.1 };
    }
    best
}

/// The nearest of the 16 centroids in `cents` (`16 * ds` floats) to `x`,
/// the lowest index on ties, and its distance (NaN is never nearer): the
/// definition [`nearest_t`] is tested against.
#[cfg(test)]
fn nearest(x: &[f32], cents: &[f32], ds: usize) -> (u8, f32) {
    let mut best = (0u8, f32::INFINITY);
    for (c, cen) in cents.chunks_exact(ds).enumerate() {
        let d = dist2(x, cen);
        if d < best.1 {
            best = (c as u8, d);
        }
    }
    best
}

fn check_shape(dim: usize, m: usize) -> Result<usize> {
    if dim == 0 || m == 0 || m > MAX_M || !dim.is_multiple_of(m) {
        bail!(
            InvalidArgument,
            "dim {dim} and m {m}: m must be 1 ..= {MAX_M} and divide dim (>= 1)"
        );
    }
    Ok(dim / m)
}

impl Codebook {
    /// A codebook from given centroids (`16 * dim` finite floats, layout
    /// as in the type's documentation).
    pub fn from_centroids(dim: usize, m: usize, centroids: &[f32]) -> Result<Codebook> {
        let dsub = check_shape(dim, m)?;
        if centroids.len() != KSUB * dim {
            bail!(
                InvalidArgument,
                "`centroids` holds {} values, 16 * dim = {} needed",
                centroids.len(),
                KSUB * dim
            );
        }
        if let Some(i) = centroids.iter().position(|v| !v.is_finite()) {
            bail!(NonFinite, "centroids[{i}] is {}", centroids[i]);
        }
        Ok(Codebook {
            dim,
            m,
            dsub,
            centroids: centroids.to_vec(),
            transposed: transpose(centroids, m, dsub),
        })
    }

    /// Trains `m` sub-space codebooks on `rows` rows of `dim` floats (row
    /// `r` at `data[r * stride..]`), one thread, plain f32:
    ///
    /// 1. The training rows: all of them, or when `rows >
    ///    max_train_rows > 0` a sample of `max_train_rows` distinct rows
    ///    (a partial Fisher-Yates shuffle of `0..rows` with
    ///    `SplitMix64(seed)`, then sorted).
    /// 2. Per sub-space `j`, with `SplitMix64(seed ^ ((j + 1) *
    ///    0x9E3779B97F4A7C15))`: the initial centroids are 16 distinct
    ///    training rows (a partial Fisher-Yates shuffle); then up to
    ///    `iters` Lloyd iterations: assign each row to its nearest
    ///    centroid (f32 squared distance summed in order, lowest index on
    ///    ties), stop if no assignment changed, else set each centroid to
    ///    its rows' mean (summed in f64 in row order, rounded to f32). An
    ///    empty cluster takes the row farthest from its centroid (lowest
    ///    index on ties) among clusters of two or more rows.
    ///
    /// Needs `rows >= 16`, `m` dividing `dim`, finite data.
    pub fn train(
        data: &[f32],
        rows: usize,
        dim: usize,
        stride: usize,
        m: usize,
        params: &TrainParams,
    ) -> Result<Codebook> {
        let ds = check_shape(dim, m)?;
        let need = strided_len(rows, dim, stride, "data")?;
        check_len(data.len(), need, "data")?;
        if rows < KSUB {
            bail!(
                InvalidArgument,
                "{rows} rows; training 16 centroids needs at least 16"
            );
        }
        for r in 0..rows {
            let row = &data[r * stride..r * stride + dim];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                bail!(
                    NonFinite,
                    "data[{r}][{j}] is {} (finite values needed)",
                    row[j]
                );
            }
        }
        // 1. the training rows
        let mut ids: Vec<usize> = (0..rows).collect();
        let n = if params.max_train_rows > 0 && rows > params.max_train_rows {
            let n = params.max_train_rows.max(KSUB);
            let mut rng = SplitMix64::new(params.seed);
            for i in 0..n {
                let k = i + rng.below((rows - i) as u64) as usize;
                ids.swap(i, k);
            }
            ids.truncate(n);
            ids.sort_unstable();
            n
        } else {
            rows
        };
        let mut centroids: Vec<f32> = try_vec(KSUB * dim, "centroids")?;
        let nds = checked_mul(n, ds, "train rows * dsub")?;
        // The sub-spaces from `j0` on into `cents` (`16 * ds` floats each).
        let train = |j0: usize, cents: &mut [f32]| -> Result<()> {
            let mut xs: Vec<f32> = try_vec(nds, "train rows")?;
            let mut assign: Vec<u8> = try_vec(n, "train assignments")?;
            let mut d2: Vec<f32> = try_vec(n, "train distances")?;
            for (k, cents) in cents.chunks_exact_mut(KSUB * ds).enumerate() {
                let j = j0 + k;
                for (i, &r) in ids.iter().enumerate() {
                    xs[i * ds..(i + 1) * ds]
                        .copy_from_slice(&data[r * stride + j * ds..r * stride + (j + 1) * ds]);
                }
                let mut rng = SplitMix64::new(
                    params.seed ^ ((j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                );
                kmeans16(
                    &xs,
                    n,
                    ds,
                    params.iters,
                    &mut rng,
                    cents,
                    &mut assign,
                    &mut d2,
                );
            }
            Ok(())
        };
        let threads = crate::par::threads_for(params.threads, m);
        let per = m.div_ceil(threads);
        for r in crate::par::map(
            centroids.chunks_mut(per * KSUB * ds).enumerate(),
            |(t, cents)| train(t * per, cents),
        ) {
            r?;
        }
        Ok(Codebook {
            dim,
            m,
            dsub: ds,
            transposed: transpose(&centroids, m, ds),
            centroids,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn m(&self) -> usize {
        self.m
    }
    /// Coordinates per sub-space (`dim / m`).
    pub fn dsub(&self) -> usize {
        self.dsub
    }
    /// All centroids (`16 * dim` floats).
    pub fn centroids(&self) -> &[f32] {
        &self.centroids
    }
    /// Centroid `c` of sub-space `j`.
    pub fn centroid(&self, j: usize, c: usize) -> &[f32] {
        &self.centroids[(KSUB * j + c) * self.dsub..][..self.dsub]
    }

    /// The `m` codes of row `x` (`dim` floats): per sub-space the nearest
    /// centroid (f32 squared distance, lowest index on ties). NaN compares
    /// as never nearer, so such a sub-space gets code 0.
    pub fn encode_row(&self, x: &[f32], out: &mut [u8]) {
        let ds = self.dsub;
        for (j, o) in out[..self.m].iter_mut().enumerate() {
            let ct = &self.transposed[j * KSUB * ds..(j + 1) * KSUB * ds];
            *o = nearest_t(&x[j * ds..(j + 1) * ds], ct, ds).0;
        }
    }

    /// The decoded row `x^` of codes `codes[..m]` into `out[..dim]`.
    pub fn decode_row(&self, codes: &[u8], out: &mut [f32]) {
        for (j, &c) in codes[..self.m].iter().enumerate() {
            out[j * self.dsub..(j + 1) * self.dsub].copy_from_slice(self.centroid(j, c as usize));
        }
    }

    /// Encodes `rows` rows (row `r` at `data[r * stride..]`, finite) into
    /// packed [`Pq4Rows`] with [`Self::encode_row`].
    pub fn encode(&self, data: &[f32], rows: usize, stride: usize) -> Result<Pq4Rows> {
        self.encode_with(data, rows, stride, None)
    }

    /// [`Self::encode`], or with `Some(aniso)` the score-aware codes of
    /// [`Self::encode_row_anisotropic`].
    pub fn encode_with(
        &self,
        data: &[f32],
        rows: usize,
        stride: usize,
        aniso: Option<Anisotropic>,
    ) -> Result<Pq4Rows> {
        let need = strided_len(rows, self.dim, stride, "data")?;
        check_len(data.len(), need, "data")?;
        if let Some(a) = aniso {
            a.check()?;
        }
        let mut codes: Vec<u8> = try_vec(checked_mul(rows, self.m, "rows * m")?, "codes")?;
        for r in 0..rows {
            let row = &data[r * stride..r * stride + self.dim];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                bail!(
                    NonFinite,
                    "data[{r}][{j}] is {} (finite values needed)",
                    row[j]
                );
            }
            let out = &mut codes[r * self.m..(r + 1) * self.m];
            match aniso {
                None => self.encode_row(row, out),
                Some(a) => self.encode_row_anisotropic(row, a, out),
            }
        }
        Pq4Rows::from_codes(&codes, rows, self.m)
    }

    /// Score-aware ("anisotropic") codes of row `x` (`dim` finite floats),
    /// after ScaNN (Guo et al., ICML 2020): with the residual `r = x - x^`,
    /// the codes minimise (locally) `||r||^2 + (eta - 1) (r . x)^2 /
    /// ||x||^2`, i.e. the error parallel to `x` weighs `eta` times the
    /// orthogonal one. For maximum inner product search the parallel error
    /// is what moves the scores of the queries that rank `x` high.
    ///
    /// Coordinate descent from the nearest-centroid codes: up to
    /// `a.sweeps` passes over the sub-spaces in order; in each, the code of
    /// sub-space `j` becomes the one of lowest loss given the others (the
    /// lowest index among equal losses; the current code unless another is
    /// strictly lower), in f64 arithmetic in a fixed order, so the codes are
    /// the same on every machine. A pass that changes nothing ends it. The
    /// loss never increases (up to the f64 rounding of its running sums),
    /// so it is at most the plain codes' loss; with
    /// `eta == 1` (or a zero row) the codes are [`Self::encode_row`]'s. The
    /// codebook itself is the plain k-means one (score-aware training of
    /// the centroids is not implemented).
    pub fn encode_row_anisotropic(&self, x: &[f32], a: Anisotropic, out: &mut [u8]) {
        self.encode_row_anisotropic_along(x, x, a, out)
    }

    /// [`Self::encode_row_anisotropic`] with the parallel direction given
    /// separately: the codes of `x` minimise `||r||^2 + (eta - 1) (r .
    /// u)^2 / ||u||^2` with `r = x - x^`. For residual codes (`x = w - c`,
    /// the row minus its list centroid) `u = w` is the row itself: the
    /// score error of a query along the row is `<q, r>` either way.
    pub fn encode_row_anisotropic_along(
        &self,
        x: &[f32],
        u: &[f32],
        a: Anisotropic,
        out: &mut [u8],
    ) {
        self.encode_row(x, out);
        let (m, ds) = (self.m, self.dsub);
        let xx: f64 = u[..self.dim].iter().map(|&v| v as f64 * v as f64).sum();
        if a.eta == 1.0 || xx == 0.0 {
            return;
        }
        let w = (a.eta as f64 - 1.0) / xx;
        // rr = ||r||^2 and rx = r . x of the current codes, kept up to date
        // from per-sub-space parts.
        let part = |j: usize, c: usize| -> (f64, f64) {
            let xs = &x[j * ds..(j + 1) * ds];
            let us = &u[j * ds..(j + 1) * ds];
            xs.iter().zip(us).zip(self.centroid(j, c)).fold(
                (0.0, 0.0),
                |(rr, rx), ((&xv, &uv), &cv)| {
                    let d = xv as f64 - cv as f64;
                    (rr + d * d, rx + d * uv as f64)
                },
            )
        };
        let (mut rr, mut rx) = (0.0f64, 0.0f64);
        for (j, &c) in out[..m].iter().enumerate() {
            let (a2, b) = part(j, c as usize);
            rr += a2;
            rx += b;
        }
        for _ in 0..a.sweeps {
            let mut changed = false;
            for (j, code) in out[..m].iter_mut().enumerate() {
                let cur = *code as usize;
                let (cr, cx) = part(j, cur);
                let (base_rr, base_rx) = (rr - cr, rx - cx);
                let loss = |p: (f64, f64)| {
                    let (r2, x1) = (base_rr + p.0, base_rx + p.1);
                    r2 + w * x1 * x1
                };
                let mut best = (cur, loss((cr, cx)), (cr, cx));
                for c in 0..KSUB {
                    if c == cur {
                        continue;
                    }
                    let p = part(j, c);
                    let l = loss(p);
                    if l < best.1 {
                        best = (c, l, p);
                    }
                }
                if best.0 != cur {
                    *code = best.0 as u8;
                    rr = base_rr + best.2 .0;
                    rx = base_rx + best.2 .1;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// Options of the score-aware encoding ([`Codebook::encode_row_anisotropic`]).
#[derive(Clone, Copy, Debug)]
pub struct Anisotropic {
    /// Weight of the residual parallel to the row over the orthogonal one
    /// (`>= 1`; ScaNN's `h_par / h_orth`, e.g. 4 to 20; 1 = plain codes).
    pub eta: f32,
    /// Coordinate-descent passes over the sub-spaces (at most).
    pub sweeps: u32,
}

impl Default for Anisotropic {
    fn default() -> Self {
        Anisotropic {
            eta: 4.0,
            sweeps: 4,
        }
    }
}

impl Anisotropic {
    fn check(&self) -> Result<()> {
        if !(self.eta.is_finite() && self.eta >= 1.0) {
            bail!(
                InvalidArgument,
                "eta is {}; it must be finite and >= 1",
                self.eta
            );
        }
        Ok(())
    }
}

/// Seeded Lloyd k-means with 16 centroids on `n >= 16` points of `ds`
/// floats (see [`Codebook::train`]).
#[allow(clippy::too_many_arguments)]
fn kmeans16(
    xs: &[f32],
    n: usize,
    ds: usize,
    iters: u32,
    rng: &mut SplitMix64,
    cents: &mut [f32],
    assign: &mut [u8],
    d2: &mut [f32],
) {
    let pt = |i: usize| &xs[i * ds..(i + 1) * ds];
    // initial centroids: 16 distinct points
    let mut pick: Vec<usize> = (0..n).collect();
    for c in 0..KSUB {
        let k = c + rng.below((n - c) as u64) as usize;
        pick.swap(c, k);
        cents[c * ds..(c + 1) * ds].copy_from_slice(pt(pick[c]));
    }
    let mut sums = vec![0f64; KSUB * ds];
    let mut counts = [0usize; KSUB];
    let mut ct = vec![0f32; KSUB * ds];
    for it in 0..iters {
        let mut changed = false;
        transpose_into(cents, ds, &mut ct);
        for i in 0..n {
            let (c, d) = nearest_t(pt(i), &ct, ds);
            if it == 0 || assign[i] != c {
                changed = true;
            }
            assign[i] = c;
            d2[i] = d;
        }
        if !changed {
            break;
        }
        sums.fill(0.0);
        counts.fill(0);
        for (i, &a) in assign[..n].iter().enumerate() {
            let c = a as usize;
            counts[c] += 1;
            for (s, &x) in sums[c * ds..(c + 1) * ds].iter_mut().zip(pt(i)) {
                *s += x as f64;
            }
        }
        for c in 0..KSUB {
            if counts[c] > 0 {
                for (k, s) in sums[c * ds..(c + 1) * ds].iter().enumerate() {
                    cents[c * ds + k] = (s / counts[c] as f64) as f32;
                }
            }
        }
        // empty clusters: the farthest point of a cluster with >= 2 points
        for c in 0..KSUB {
            if counts[c] > 0 {
                continue;
            }
            let mut far: Option<usize> = None;
            for i in 0..n {
                if counts[assign[i] as usize] >= 2 && far.is_none_or(|f| d2[i] > d2[f]) {
                    far = Some(i);
                }
            }
            let Some(i) = far else { break };
            counts[assign[i] as usize] -= 1;
            assign[i] = c as u8;
            counts[c] = 1;
            d2[i] = 0.0;
            cents[c * ds..(c + 1) * ds].copy_from_slice(pt(i));
        }
    }
}

#[cfg(test)]
mod nearest_tests {
    use super::*;

    /// The 16-lane distances and the branch-free choice give the ordered
    /// scan's centroid and distance, bit for bit: random points, exact
    /// ties (repeated centroids), infinities and NaN, 1-5 coordinates.
    #[test]
    fn nearest_t_is_the_ordered_scan() {
        let mut rng = SplitMix64::new(3);
        for ds in 1..=5 {
            for round in 0..400 {
                let mut cents: Vec<f32> = (0..KSUB * ds)
                    .map(|_| (rng.next_normal() * 4.0) as f32)
                    .collect();
                let x: Vec<f32> = (0..ds).map(|_| (rng.next_normal() * 4.0) as f32).collect();
                match round % 5 {
                    // Repeats: equal distances at different indices.
                    1 => {
                        let (a, b) = (rng.below(16) as usize, rng.below(16) as usize);
                        let c: Vec<f32> = cents[a * ds..(a + 1) * ds].to_vec();
                        cents[b * ds..(b + 1) * ds].copy_from_slice(&c);
                        cents[(15 - a) * ds..(16 - a) * ds].copy_from_slice(&c);
                    }
                    2 => cents[rng.below((KSUB * ds) as u64) as usize] = f32::NAN,
                    3 => cents.iter_mut().for_each(|v| *v = f32::NAN),
                    4 => cents[rng.below((KSUB * ds) as u64) as usize] = f32::INFINITY,
                    _ => {}
                }
                let ct = transpose(&cents, 1, ds);
                let (a, b) = (nearest(&x, &cents, ds), nearest_t(&x, &ct, ds));
                assert_eq!(
                    (a.0, a.1.to_bits()),
                    (b.0, b.1.to_bits()),
                    "ds {ds} round {round}"
                );
            }
        }
    }
}
