//! The gathered matmul of a sublinear output layer and its epilogues.
//!
//! For a batch of `nq` queries with per-query candidate ids in CSR form
//! (`ids`, `offsets` with `nq + 1` entries, exactly the bucket gather's
//! output), [`WeightMatrix::matmul`] computes
//! `out[j] = dot(W[ids[j]], Q[i]) (+ bias[ids[j]])` for every `j` in query
//! `i`'s segment `offsets[i] .. offsets[i + 1]`.
//!
//! # Storage formats and what they cost in accuracy
//! W is f32, bf16 (`u16` bits), IEEE binary16 (`u16` bits) or int8 with one
//! f32 scale per row. Q is **always kept in f32** (it is never quantised,
//! also for int8 W), every element of W is widened to f32 exactly, products
//! are accumulated in f32. With `u = 2^-24` and `S = sum_j |w_j q_j|` over
//! the *stored* values (for int8, `w_j = scale * int8_j`), every tier
//! satisfies `|out - exact| <= gamma(dim + 2) * (S + |bias|)`, where
//! `gamma(n) = n u / (1 - n u)` (`dim` roundings of the accumulation, one
//! for the int8 scale, one for the bias), with no exception: the AVX-512
//! tier widens bf16 W to f32 like the others and does not use `vdpbf16ps`,
//! which would round Q to bf16 (see `kernels/matmul/avx512.rs`).
//!
//! The storage rounding is the caller's, done once by the conversions here:
//! [`f32_to_bf16`] (relative error <= 2^-8 per element: 8 significand bits), [`f32_to_f16`]
//! (relative <= 2^-11 in the normal range, absolute <= 2^-25 below it, and
//! overflow beyond 65504 to infinity), [`quantize_rows_i8`]
//! (`|w - scale * q| <= scale * (1/2 + 2^-17)` per element, so a logit moves
//! by at most `scale * (1/2 + 2^-17) * sum_j |q_j|`). Keeping Q in f32 costs
//! nothing measurable here because the kernel is bound by row fetches, and
//! it keeps all tiers within the same f32 bound; quantising Q to 8 bits
//! (as a `vpmaddubsw`/`vpdpbusd` kernel would need) would add up to
//! `scale * max|q| / 254 * sum_j |int8_j|` per logit.
//!
//! # Errors
//! Every argument is checked before anything is written: shapes, strides
//! (`>= dim`), buffer lengths, the CSR offsets (`nq + 1` of them, starting
//! at 0, non-decreasing, ending at `out.len()`), and every id (`< rows`; the
//! first offending position is named in the message).
//!
//! # Contiguous runs
//! In the per-query schedule, f32 rows whose ids form a run of at least
//! [`RUN_MIN`] consecutive values are scored by the dense layer's tile
//! (`kernels::dense`: four rows per block reduced together, the rows ahead
//! prefetched) rather than one id at a time: a run is a sequential stream,
//! and the tile is the fastest way lshk has to read one. Its error is within
//! the same bound (`gamma(dim) S` before the bias). Other storages and
//! shorter runs use the gathered kernels.
//!
//! # Epilogues
//! [`topk`] (per query the k largest, descending, ties to the smaller id,
//! NaN never selected, padded with `u32::MAX` / `-inf`) and [`softmax`]
//! (max-subtracted, optional log-sum-exp). There is no fused matmul ->
//! top-k path because it cannot measurably help: the top-k pass over the
//! scores costs a tiny fraction of the matmul that produces them, which
//! fetches a DRAM-resident row per score (`benches/gathered_matmul.md`,
//! "Epilogues").
//!
//! # The "small GEMM over the union" ([`Schedule::Union`]): opt-in only
//! When the queries of a batch share candidates, [`Schedule::Union`] sorts
//! the batch's (id, position) pairs, fetches every distinct row once and
//! multiplies it by all the queries that asked for it (the tier's f32 kernel
//! with W and Q swapped), within the same error bound. On W1 with B = 64,
//! k = 4,096 it is not faster than the per-query schedule, not even with
//! all 64 queries drawing from one pool of 4,096 rows
//! (`benches/gathered_matmul.md`, "Shared candidates"): the sort of the
//! 262,144 pairs costs more than the re-fetches it saves, which hit L2/L3
//! when the pool is small. So the automatic rule is simply: per query, always
//! ([`Schedule::Auto`]); the union schedule stays available explicitly.

use std::cell::RefCell;

use crate::bail;
use crate::error::{strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::dense as kd;

mod convert;
mod merge;
mod softmax;
mod topk;

pub use convert::{
    convert_bf16_to_f32, convert_f16_to_f32, convert_f32_to_bf16, convert_f32_to_f16,
    quantize_rows_i8,
};
pub use merge::{topk_merge, ShardTopK};
pub use softmax::{softmax, softmax_in_place};
pub(crate) use topk::{
    chunk_floor, rank_key_total, topk_drain, topk_offer_floored, topk_segment, topk_set,
};
pub use topk::{topk, TopK, TOPK_PAD_ID};

use crate::kernels::matmul::{self as km, Rows};

pub use crate::kernels::matmul::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

/// The stored weights of a [`WeightMatrix`].
#[derive(Clone, Copy, Debug)]
pub enum Weights<'a> {
    F32(&'a [f32]),
    /// bf16 bit patterns (the top 16 bits of an f32).
    Bf16(&'a [u16]),
    /// IEEE 754 binary16 bit patterns.
    F16(&'a [u16]),
    /// Row `r` is `scales[r] * w[r]`.
    I8 {
        w: &'a [i8],
        scales: &'a [f32],
    },
}

impl Weights<'_> {
    fn len(&self) -> usize {
        match self {
            Weights::F32(w) => w.len(),
            Weights::Bf16(w) | Weights::F16(w) => w.len(),
            Weights::I8 { w, .. } => w.len(),
        }
    }
    fn name(&self) -> &'static str {
        match self {
            Weights::F32(_) => "f32",
            Weights::Bf16(_) => "bf16",
            Weights::F16(_) => "f16",
            Weights::I8 { .. } => "int8",
        }
    }
}

/// How a batch is processed (both give results within the same bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// The library's choice. Currently always [`Schedule::PerQuery`]: the
    /// union schedule never measured faster on the benchmark machine, not
    /// even with 64 queries sharing one pool of 4,096 rows (see the module
    /// documentation and `benches/gathered_matmul.md`).
    Auto,
    /// Query by query: each query's rows are streamed through the kernel.
    PerQuery,
    /// Each distinct row of the batch fetched once, multiplied by every query
    /// that asked for it (a small GEMM over the union).
    Union,
}

#[derive(Default)]
struct UnionScratch {
    keys: Vec<u64>,
    qof: Vec<u32>,
    starts: Vec<u32>,
    rowf: Vec<f32>,
    qs: Vec<u32>,
    tmp: Vec<f32>,
}

thread_local! {
    static UNION: RefCell<UnionScratch> = RefCell::new(UnionScratch::default());
}

/// Consecutive ids from which [`WeightMatrix::matmul`] scores a run of f32
/// rows with the dense tile instead of the gathered kernel: the tile's
/// 4-row blocks and prefetch pay off from a few blocks on, and a shorter
/// run of a sorted candidate list (rare: a bucket's ids are spread over W)
/// stays on the gathered kernel.
pub const RUN_MIN: usize = 16;

/// Calls `f(a, b)`, in order, for every maximal run `ids[a..b]` of at
/// least [`RUN_MIN`] consecutive ids (each `ids[j + 1] == ids[j] + 1`,
/// wrapping), as a scan of every id would find them, at one comparison
/// per 8 ids where there is no run: a run of `>= 16` ids holds a position
/// `k`, a multiple of 8, with `k + 8` inside it, so `ids[k + 8] == ids[k]
/// + 8`, and only where that holds is the run through `k` measured.
fn for_each_long_run(ids: &[u32], mut f: impl FnMut(usize, usize)) {
    const { assert!(RUN_MIN >= 16) };
    let n = ids.len();
    // `g0`: the end of the last run found (where a step is not +1).
    let (mut g0, mut k) = (0, 0);
    while k + 8 < n {
        if ids[k + 8] != ids[k].wrapping_add(8) {
            k += 8;
            continue;
        }
        let mut a = k;
        while a > g0 && ids[a - 1].wrapping_add(1) == ids[a] {
            a -= 1;
        }
        let mut b = k + 1;
        while b < n && ids[b] == ids[b - 1].wrapping_add(1) {
            b += 1;
        }
        if b - a >= RUN_MIN {
            f(a, b);
            g0 = b;
        }
        // Maximal runs are disjoint: any other starts at or after b.
        k = b.next_multiple_of(8);
    }
}

/// A borrowed row-major weight matrix: `rows` rows of `dim` elements, row
/// `r` starting at element `r * stride`, with an optional bias per row.
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    weights: Weights<'a>,
    rows: usize,
    dim: usize,
    stride: usize,
    bias: Option<&'a [f32]>,
}

impl<'a> WeightMatrix<'a> {
    /// Checks the shape against the buffers: `dim >= 1`, `stride >= dim`,
    /// the weights hold `(rows - 1) * stride + dim` elements, int8 scales
    /// hold `rows` values.
    pub fn new(weights: Weights<'a>, rows: usize, dim: usize, stride: usize) -> Result<Self> {
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let need = strided_len(rows, dim, stride, "w")?;
        if weights.len() < need {
            bail!(
                BufferTooSmall,
                "{} weights hold {} elements, {rows} rows of stride {stride} need {need}",
                weights.name(),
                weights.len()
            );
        }
        if let Weights::I8 { scales, .. } = weights {
            if scales.len() < rows {
                bail!(
                    BufferTooSmall,
                    "`scales` holds {} values, W has {rows} rows",
                    scales.len()
                );
            }
        }
        Ok(WeightMatrix {
            weights,
            rows,
            dim,
            stride,
            bias: None,
        })
    }

    /// Adds `bias[id]` to every output (`bias.len() >= rows`).
    pub fn with_bias(mut self, bias: &'a [f32]) -> Result<Self> {
        if bias.len() < self.rows {
            bail!(
                BufferTooSmall,
                "`bias` holds {} values, W has {} rows",
                bias.len(),
                self.rows
            );
        }
        self.bias = Some(bias);
        Ok(self)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The gathered matmul on the active tier (see the module docs).
    /// `q` holds `nq` rows of `dim` floats at stride `q_stride`; `ids` and
    /// `out` have `offsets[nq]` entries.
    pub fn matmul(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        self.matmul_isa(isa::active(), q, nq, q_stride, ids, offsets, out)
    }

    /// [`Self::matmul`] on one chosen tier (`UnsupportedIsa` if the CPU
    /// lacks it), with the automatic [`Schedule`].
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_isa(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        self.matmul_schedule(tier, Schedule::Auto, q, nq, q_stride, ids, offsets, out)
    }

    /// [`Self::matmul_isa`] with an explicit [`Schedule`] (tests, benchmarks).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_schedule(
        &self,
        tier: Isa,
        schedule: Schedule,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        if q.len() < ql {
            bail!(
                BufferTooSmall,
                "`q` holds {} floats, {nq} queries of stride {q_stride} need {ql}",
                q.len()
            );
        }
        check_offsets(offsets, nq, out.len(), "out")?;
        if ids.len() != out.len() {
            bail!(
                InvalidArgument,
                "`ids` has {} entries but `out` has {}",
                ids.len(),
                out.len()
            );
        }
        check_ids(ids, self.rows, offsets)?;
        // Everything is checked: now compute.
        let ks = km::kernels(tier);
        let union = ids.len() < u32::MAX as usize
            && match schedule {
                Schedule::PerQuery | Schedule::Auto => false,
                Schedule::Union => true,
            };
        if union {
            self.run_union(ks, q, q_stride, ids, offsets, out)?;
        } else {
            self.run_per_query(
                ks,
                kd::kernels(tier).tile,
                q,
                nq,
                q_stride,
                ids,
                offsets,
                out,
            );
        }
        if let Some(b) = self.bias {
            for (o, &id) in out.iter_mut().zip(ids) {
                *o += b[id as usize];
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_per_query(
        &self,
        ks: &km::Kernels,
        tile: kd::TileFn,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) {
        for i in 0..nq {
            let (s, e) = (offsets[i], offsets[i + 1]);
            if s == e {
                continue;
            }
            let qi = &q[i * q_stride..i * q_stride + self.dim];
            let (seg_ids, seg_out) = (&ids[s..e], &mut out[s..e]);
            // SAFETY: dim >= 1, q row has dim floats, ids < rows and the
            // weights span the strided matrix (checked by the caller and in
            // new()), out segment matches the ids, tier supported (checked).
            unsafe {
                match self.weights {
                    Weights::F32(w) => self.f32_runs(ks, tile, w, qi, seg_ids, seg_out),
                    Weights::Bf16(w) => (ks.bf16)(&self.rows_of(w, &[]), qi, seg_ids, seg_out),
                    Weights::F16(w) => (ks.f16)(&self.rows_of(w, &[]), qi, seg_ids, seg_out),
                    Weights::I8 { w, scales } => {
                        (ks.i8)(&self.rows_of(w, scales), qi, seg_ids, seg_out)
                    }
                }
            }
        }
    }

    /// One query's f32 products, with every run of at least [`RUN_MIN`]
    /// consecutive ids handed to the dense tile (a sequential stream: its
    /// 4-row blocks reduce four logits together and it prefetches the rows
    /// ahead), the other ids to the gathered kernel. Both stay within the
    /// module's bound (the tile's is `gamma(dim) S`).
    ///
    /// # Safety
    /// As the gathered kernels: `q` holds `dim` floats, every id is `< rows`
    /// of `w` (which spans the strided matrix), `out` matches `ids`, and the
    /// CPU supports the tier of `ks` and `tile`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn f32_runs(
        &self,
        ks: &km::Kernels,
        tile: kd::TileFn,
        w: &'a [f32],
        q: &[f32],
        ids: &[u32],
        out: &mut [f32],
    ) {
        let rows = self.rows_of(w, &[]);
        let n = ids.len();
        let mut g0 = 0;
        for_each_long_run(ids, |a, b| {
            // SAFETY: (both calls) the caller's contract; the run's rows
            // ids[a] .. ids[a] + (b - a) are < rows, so `w` holds
            // (b - a - 1) * stride + dim floats from the first; q holds
            // one query of dim floats; out[a..b] holds b - a values.
            unsafe {
                if g0 < a {
                    (ks.f32)(&rows, q, &ids[g0..a], &mut out[g0..a]);
                }
                let r0 = ids[a] as usize * self.stride;
                tile(
                    &w[r0..],
                    self.stride,
                    b - a,
                    self.dim,
                    q,
                    self.dim,
                    1,
                    &mut out[a..b],
                    b - a,
                );
            }
            g0 = b;
        });
        if g0 < n {
            // SAFETY: as above.
            unsafe { (ks.f32)(&rows, q, &ids[g0..n], &mut out[g0..n]) };
        }
    }

    /// The union schedule: the (id, position) pairs of the whole batch are
    /// sorted by id, each distinct row is fetched once (prefetched
    /// `PREFETCH_ROWS` distinct rows ahead), widened to f32 and multiplied by
    /// every query that asked for it (the tier's f32 kernel with the roles of
    /// W and Q swapped: Q's rows are L1/L2-resident), then scattered back.
    fn run_union(
        &self,
        ks: &km::Kernels,
        q: &[f32],
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        out: &mut [f32],
    ) -> Result<()> {
        let n = ids.len();
        let dim = self.dim;
        UNION.with(|u| {
            let u = &mut *u.borrow_mut();
            u.keys.clear();
            u.keys
                .try_reserve(n)
                .map_err(|_| Error::new(Status::AllocationFailed, "union schedule: scratch"))?;
            u.qof.clear();
            u.qof
                .try_reserve(n)
                .map_err(|_| Error::new(Status::AllocationFailed, "union schedule: scratch"))?;
            u.keys.extend(
                ids.iter()
                    .enumerate()
                    .map(|(j, &id)| ((id as u64) << 32) | j as u64),
            );
            u.keys.sort_unstable();
            for i in 0..offsets.len() - 1 {
                u.qof
                    .extend(std::iter::repeat_n(i as u32, offsets[i + 1] - offsets[i]));
            }
            u.starts.clear();
            for (t, &k) in u.keys.iter().enumerate() {
                if t == 0 || (k >> 32) != (u.keys[t - 1] >> 32) {
                    u.starts.push(t as u32);
                }
            }
            u.starts.push(n as u32);
            u.rowf.clear();
            u.rowf.resize(dim, 0.0);
            let (elem, base): (usize, *const u8) = match self.weights {
                Weights::F32(w) => (4, w.as_ptr().cast()),
                Weights::Bf16(w) | Weights::F16(w) => (2, w.as_ptr().cast()),
                Weights::I8 { w, .. } => (1, w.as_ptr().cast()),
            };
            let pf_bytes = (dim * elem).min(km::PREFETCH_MAX_BYTES);
            let row_ptr = |id: usize| base.wrapping_add(id * self.stride * elem);
            let groups = u.starts.len() - 1;
            let id_of =
                |g: usize, keys: &[u64], starts: &[u32]| (keys[starts[g] as usize] >> 32) as usize;
            for g in 0..groups.min(km::PREFETCH_ROWS) {
                (ks.prefetch)(row_ptr(id_of(g, &u.keys, &u.starts)), pf_bytes);
            }
            let qrows = Rows {
                w: q,
                stride: q_stride,
                dim,
                scales: &[],
            };
            for g in 0..groups {
                if g + km::PREFETCH_ROWS < groups {
                    let id = id_of(g + km::PREFETCH_ROWS, &u.keys, &u.starts);
                    (ks.prefetch)(row_ptr(id), pf_bytes);
                }
                let (s, e) = (u.starts[g] as usize, u.starts[g + 1] as usize);
                let id = id_of(g, &u.keys, &u.starts);
                let row = id * self.stride..id * self.stride + dim;
                let mut scale = 1.0f32;
                let rowf: &[f32] = match self.weights {
                    Weights::F32(w) => &w[row],
                    Weights::Bf16(w) => {
                        u.rowf
                            .iter_mut()
                            .zip(&w[row])
                            .for_each(|(d, &v)| *d = bf16_to_f32(v));
                        &u.rowf
                    }
                    Weights::F16(w) => {
                        u.rowf
                            .iter_mut()
                            .zip(&w[row])
                            .for_each(|(d, &v)| *d = f16_to_f32(v));
                        &u.rowf
                    }
                    Weights::I8 { w, scales } => {
                        scale = scales[id];
                        u.rowf
                            .iter_mut()
                            .zip(&w[row])
                            .for_each(|(d, &v)| *d = v as f32);
                        &u.rowf
                    }
                };
                u.qs.clear();
                u.qs.extend(
                    u.keys[s..e]
                        .iter()
                        .map(|&k| u.qof[(k & 0xffff_ffff) as usize]),
                );
                u.tmp.clear();
                u.tmp.resize(e - s, 0.0);
                // SAFETY: dim >= 1; `rowf` has dim floats; every entry of
                // qs is a query index < nq and `q` spans the strided nq x dim
                // matrix (checked by the caller); tmp matches qs; tier
                // supported (checked).
                unsafe { (ks.f32)(&qrows, rowf, &u.qs, &mut u.tmp) };
                for (&k, &v) in u.keys[s..e].iter().zip(&u.tmp) {
                    let pos = (k & 0xffff_ffff) as usize;
                    out[pos] = if matches!(self.weights, Weights::I8 { .. }) {
                        v * scale
                    } else {
                        v
                    };
                }
            }
            Ok(())
        })
    }

    fn rows_of<T>(&self, w: &'a [T], scales: &'a [f32]) -> Rows<'a, T> {
        Rows {
            w,
            stride: self.stride,
            dim: self.dim,
            scales,
        }
    }
}

/// Checks CSR offsets: `nq + 1` entries, `offsets[0] == 0`, non-decreasing,
/// `offsets[nq] == total`.
pub fn check_offsets(offsets: &[usize], nq: usize, total: usize, what: &str) -> Result<()> {
    let n1 = nq
        .checked_add(1)
        .ok_or_else(|| Error::new(Status::SizeOverflow, "nq + 1 overflows"))?;
    if offsets.len() != n1 {
        bail!(
            InvalidArgument,
            "`offsets` has {} entries, nq + 1 = {n1} are needed",
            offsets.len()
        );
    }
    if offsets[0] != 0 {
        bail!(
            InvalidArgument,
            "offsets[0] is {}, it must be 0",
            offsets[0]
        );
    }
    if let Some(i) = offsets.windows(2).position(|p| p[1] < p[0]) {
        bail!(
            InvalidArgument,
            "offsets decrease at position {}: {} then {}",
            i + 1,
            offsets[i],
            offsets[i + 1]
        );
    }
    if offsets[nq] != total {
        bail!(
            InvalidArgument,
            "offsets[nq] is {} but `{what}` has {total} entries (they must be equal)",
            offsets[nq]
        );
    }
    Ok(())
}

/// `IndexOutOfRange` naming the first id `>= rows` (position and query).
fn check_ids(ids: &[u32], rows: usize, offsets: &[usize]) -> Result<()> {
    // Fast path: one pass for the maximum.
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    if ids.is_empty() || max < rows {
        return Ok(());
    }
    let pos = ids.iter().position(|&id| id as usize >= rows).unwrap_or(0);
    let query = offsets.partition_point(|&o| o <= pos).saturating_sub(1);
    Err(Error::new(
        Status::IndexOutOfRange,
        format!(
            "index out of range: ids[{pos}] = {} (query {query}) but W has {rows} rows",
            ids[pos]
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// The maximal runs of at least RUN_MIN consecutive ids, by a scan of
    /// every id (what `for_each_long_run` must find).
    fn runs_by_scan(ids: &[u32]) -> Vec<(usize, usize)> {
        let (mut v, mut i) = (Vec::new(), 0);
        while i < ids.len() {
            let mut j = i + 1;
            while j < ids.len() && ids[j] == ids[j - 1].wrapping_add(1) {
                j += 1;
            }
            if j - i >= RUN_MIN {
                v.push((i, j));
            }
            i = j;
        }
        v
    }

    /// Runs of every length around RUN_MIN at every offset mod 8, next to
    /// each other, at the ends, wrapping at u32::MAX, among random ids.
    #[test]
    fn long_runs_are_the_maximal_ones() {
        let mut rng = SplitMix64::new(5);
        for trial in 0..3000 {
            let mut ids: Vec<u32> = Vec::new();
            let n = rng.below(120) as usize;
            while ids.len() < n {
                match rng.below(4) {
                    0 => {
                        let len = [1, 7, 8, 9, 15, 16, 17, 24, 31, 40][rng.below(10) as usize];
                        let start = if trial % 7 == 0 {
                            u32::MAX - rng.below(20) as u32
                        } else {
                            ids.last()
                                .map_or(0, |&l| l.wrapping_add(rng.below(3) as u32))
                        };
                        ids.extend((0..len).map(|j| start.wrapping_add(j)));
                    }
                    _ => ids.push(rng.below(64) as u32),
                }
            }
            let mut got = Vec::new();
            for_each_long_run(&ids, |a, b| got.push((a, b)));
            assert_eq!(got, runs_by_scan(&ids), "trial {trial}: {ids:?}");
        }
    }
}
