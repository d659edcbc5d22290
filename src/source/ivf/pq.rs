//! 4-bit PQ codes of the lists ([`super::Codes::Pq4`]): the compact first
//! pass of a probe, FAISS's IVFPQ fast-scan / ScaNN's AH in lshk's kernels
//! ([`crate::quant::pq4`]).
//!
//! * **Residuals.** Row `r` of list `l` is encoded as `w_r - c_l` (the `w`
//!   part of its centroid; the bias stays exact in the index's by-position
//!   bias). For inner products the residual's score splits as
//!   `<q, w_r> = <q, c_l> + <q, w_r - c_l>`: the tables of the second term
//!   do not depend on the list, so a query builds **one** [`Pq4Lut`] and
//!   each list adds its own `<q, c_l>` (the epilogue's shift, see
//!   [`Pq4Rows::score_run_shifted_isa`]). Residuals are shorter than the
//!   rows, so the same 16 centroids per sub-space quantise them finer.
//! * **Codebook.** One [`Codebook`] (16 centroids per sub-space of `dim /
//!   m` coordinates), trained with its seeded k-means on the residuals of
//!   at most [`TRAIN_ROWS`] positions drawn with a seeded partial shuffle;
//!   a pure function of the lists, the seed and `m` (no tier, no threads).
//! * **Layout.** Every list starts on a 32-row block: list `l` holds padded
//!   rows `boff[l] .. boff[l] + len_l` of one [`Pq4Rows`], so a list is one
//!   contiguous, aligned run for the kernels. The padding rows (code 0) are
//!   never scored into the output. `boff` is derived from the list
//!   offsets, never stored.

use crate::bail;
use crate::error::{checked_mul, try_vec, Error, Result, Status};
use crate::isa::Isa;
use crate::quant::pq4::{Anisotropic, Codebook, Pq4Lut, Pq4Rows, TrainParams, BLOCK, MAX_M};
use crate::rng::SplitMix64;

/// Residuals used to train the codebook (a seeded sample of positions).
pub const TRAIN_ROWS: usize = 16_384;

/// Lloyd iterations of the codebook's per-sub-space k-means.
pub const TRAIN_ITERS: u32 = 25;

/// The default number of sub-quantisers for `dim` coordinates: two
/// coordinates per 4-bit code (`dim / 2`, 2 bits per coordinate), or for an
/// odd `dim` the largest divisor of `dim` not above `dim / 2` (1 for
/// `dim = 1`), at most [`MAX_M`].
pub fn default_m(dim: usize) -> usize {
    let cap = (dim / 2).clamp(1, MAX_M);
    (1..=cap)
        .rev()
        .find(|m| dim.is_multiple_of(*m))
        .unwrap_or(1)
}

/// Checks an explicit `m` for `dim` coordinates (0 = [`default_m`]).
pub fn resolve_m(dim: usize, m: u32) -> Result<usize> {
    let m = if m == 0 { default_m(dim) } else { m as usize };
    if m > MAX_M || m > dim || !dim.is_multiple_of(m) {
        bail!(
            InvalidArgument,
            "pq_m is {m}: it must divide dim ({dim}) and be at most {MAX_M}"
        );
    }
    Ok(m)
}

/// Padded row offsets: list `l` starts at padded row `boff[l]`, a multiple
/// of 32.
fn block_offsets(offsets: &[u32]) -> Result<Vec<u32>> {
    let mut boff = Vec::with_capacity(offsets.len());
    let mut at = 0u64;
    boff.push(0);
    for w in offsets.windows(2) {
        at += ((w[1] - w[0]) as u64).div_ceil(BLOCK as u64) * BLOCK as u64;
        if at > u32::MAX as u64 {
            bail!(InvalidArgument, "the padded lists exceed 2^32 rows");
        }
        boff.push(at as u32);
    }
    Ok(boff)
}

/// The lists' 4-bit codes (module documentation).
pub(super) struct ListPq {
    cb: Codebook,
    codes: Pq4Rows,
    boff: Vec<u32>,
    /// Per position, the coding error `|r - r̂|` of the row's residual
    /// (f64 sum, stored f32); empty for a file written before it was kept.
    err: Vec<f32>,
}

/// What [`ListPq::build`] encodes: the rows by position (`row(p)` gives the
/// `w` part of the row at position `p`) and the lists.
pub(super) struct Source<'a> {
    pub row: &'a (dyn Fn(usize) -> &'a [f32] + Sync),
    pub dim: usize,
    /// `nlist * dim` centroids (`w` part).
    pub centroids: &'a [f32],
    pub offsets: &'a [u32],
}

impl ListPq {
    /// Trains the codebook on the residuals and encodes every row.
    pub fn build(
        src: &Source<'_>,
        m: usize,
        aniso: Option<Anisotropic>,
        threads: usize,
        seed: u64,
    ) -> Result<ListPq> {
        let (dim, offsets) = (src.dim, src.offsets);
        let nlist = offsets.len() - 1;
        let rows = offsets[nlist] as usize;
        if rows < 16 {
            bail!(
                InvalidArgument,
                "codes PQ4 trains 16 centroids per sub-space: it needs at least 16 rows, not {rows}"
            );
        }
        // List of each position (for the residual).
        let mut list_of: Vec<u32> = try_vec(rows, "list of each row")?;
        for l in 0..nlist {
            list_of[offsets[l] as usize..offsets[l + 1] as usize].fill(l as u32);
        }
        let residual = |p: usize, out: &mut [f32]| {
            let c = &src.centroids[list_of[p] as usize * dim..][..dim];
            for ((o, &x), &y) in out.iter_mut().zip((src.row)(p)).zip(c) {
                *o = x - y;
            }
        };
        // Seeded sample of positions, sorted (the codebook's k-means sees
        // them in position order).
        let ntrain = rows.min(TRAIN_ROWS);
        let mut perm: Vec<u32> = (0..rows as u32).collect();
        let mut rng = SplitMix64::new(seed ^ 0x9e37_79b9_7f4a_7c15);
        for i in 0..ntrain {
            let j = i + rng.below((rows - i) as u64) as usize;
            perm.swap(i, j);
        }
        perm.truncate(ntrain);
        perm.sort_unstable();
        let mut xs: Vec<f32> = try_vec(
            checked_mul(ntrain, dim, "PQ training rows")?,
            "PQ training rows",
        )?;
        for (i, &p) in perm.iter().enumerate() {
            residual(p as usize, &mut xs[i * dim..(i + 1) * dim]);
        }
        drop(perm);
        let cb = Codebook::train(
            &xs,
            ntrain,
            dim,
            dim,
            m,
            &TrainParams {
                iters: TRAIN_ITERS,
                seed,
                max_train_rows: 0,
                threads,
            },
        )?;
        drop(xs);

        // Encode every position into its padded slot (padding stays 0).
        let boff = block_offsets(offsets)?;
        let prows = boff[nlist] as usize;
        let mut raw: Vec<u8> = try_vec(checked_mul(prows, m, "padded rows * m")?, "PQ codes")?;
        let pad_of = |p: usize| -> usize {
            let l = list_of[p] as usize;
            boff[l] as usize + (p - offsets[l] as usize)
        };
        let work = |p0: usize, p1: usize| {
            let mut x = vec![0f32; dim];
            let mut xh = vec![0f32; dim];
            let mut codes = Vec::with_capacity((p1 - p0) * m);
            let mut errs = Vec::with_capacity(p1 - p0);
            for p in p0..p1 {
                residual(p, &mut x);
                let at = codes.len();
                codes.resize(at + m, 0);
                match aniso {
                    None => cb.encode_row(&x, &mut codes[at..]),
                    Some(a) => {
                        cb.encode_row_anisotropic_along(&x, (src.row)(p), a, &mut codes[at..])
                    }
                }
                cb.decode_row(&codes[at..], &mut xh);
                let e: f64 = x
                    .iter()
                    .zip(&xh)
                    .map(|(&a, &b)| ((a - b) as f64).powi(2))
                    .sum();
                errs.push(e.sqrt() as f32);
            }
            (codes, errs)
        };
        let threads = threads.clamp(1, rows.div_ceil(4096).max(1));
        let per = rows.div_ceil(threads);
        let parts: Vec<(Vec<u8>, Vec<f32>)> = if threads == 1 {
            vec![work(0, rows)]
        } else {
            crate::par::map(0..threads, |t| work(t * per, ((t + 1) * per).min(rows)))
        };
        let mut err = try_vec::<f32>(rows, "PQ coding errors")?;
        err.clear();
        for (t, (part, e)) in parts.iter().enumerate() {
            err.extend_from_slice(e);
            for (i, c) in part.chunks_exact(m).enumerate() {
                let d = pad_of(t * per + i);
                raw[d * m..(d + 1) * m].copy_from_slice(c);
            }
        }
        drop(parts);
        let codes = Pq4Rows::from_codes(&raw, prows, m)?;
        Ok(ListPq {
            cb,
            codes,
            boff,
            err,
        })
    }

    /// Rebuilds from a file's sections (errors are `BadFileFormat`).
    pub fn from_parts(
        dim: usize,
        m: usize,
        centroids: &[f32],
        packed: &[u8],
        offsets: &[u32],
    ) -> Result<ListPq> {
        let bad = |what: &str, e: Error| {
            Error::new(Status::BadFileFormat, format!("{what}: {}", e.message))
        };
        let cb = Codebook::from_centroids(dim, m, centroids).map_err(|e| bad("PQCENT", e))?;
        let boff = block_offsets(offsets).map_err(|e| bad("LOFFS", e))?;
        let prows = *boff.last().expect("nlist + 1 offsets") as usize;
        let codes = Pq4Rows::from_packed(packed, prows, m).map_err(|e| bad("PQCODES", e))?;
        Ok(ListPq {
            cb,
            codes,
            boff,
            err: Vec::new(),
        })
    }

    pub fn m(&self) -> usize {
        self.cb.m()
    }
    /// The coding errors by position (empty: not known).
    pub fn errors(&self) -> &[f32] {
        &self.err
    }
    /// Sets the coding errors read from a file (`rows` finite values >= 0).
    pub fn set_errors(&mut self, err: Vec<f32>) {
        self.err = err;
    }
    pub fn codebook(&self) -> &Codebook {
        &self.cb
    }
    pub fn packed(&self) -> &[u8] {
        &self.codes.packed()[..crate::quant::pq4::run_bytes(self.codes.m_pad(), self.codes.rows())
            .expect("sized at construction")]
    }
    pub fn memory_bytes(&self) -> usize {
        self.codes.memory_bytes()
            + self.boff.len() * 4
            + self.cb.centroids().len() * 4 * 2
            + self.err.len() * 4
    }

    /// Approximate scores of list `l`'s `out.len()` rows: `f32(acc) Delta +
    /// f32(O + shift) (+ bias)`, `shift` the list's `<q, c_l>` (+ its bias
    /// coordinate).
    pub fn score_list(
        &self,
        tier: Isa,
        l: usize,
        lut: &Pq4Lut,
        shift: f32,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) {
        let n = out.len();
        self.codes
            .score_run_shifted_isa(tier, self.boff[l] as usize, n, lut, shift, bias, out)
            .expect("a list is a block-aligned run of the padded rows");
    }
}
