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
//! which would round Q to bf16 (see `kernels/matmul/avx512.rs`, issue 12).
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
//! (max-subtracted, optional log-sum-exp). A fused matmul -> top-k path
//! was not added because it cannot measurably help: top-k (k = 10) over
//! 10,000 scores takes ~2.6 us, the matmul producing those scores ~1 ms
//! (~100 ns per DRAM-resident row), so fusing could save < 0.3 %.
//!
//! # The "small GEMM over the union" ([`Schedule::Union`]): opt-in only
//! When the queries of a batch share candidates, [`Schedule::Union`] sorts
//! the batch's (id, position) pairs, fetches every distinct row once and
//! multiplies it by all the queries that asked for it (the tier's f32 kernel
//! with W and Q swapped), within the same error bound. Measured on W1 with
//! B = 64, k = 4,096 (`benches/gathered_matmul.md`) it was never faster than
//! the per-query schedule, not even with all 64 queries drawing from one
//! pool of 4,096 rows (43 vs 38 ns per output): the sort of the 262,144
//! pairs costs more than the re-fetches it saves, which hit L2/L3 when the
//! pool is small. So the automatic rule is simply: per query, always
//! ([`Schedule::Auto`]); the union schedule stays available explicitly.

use std::cell::RefCell;

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::dense as kd;
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
        let (mut g0, mut i) = (0, 0);
        while i < n {
            let mut j = i + 1;
            while j < n && ids[j] == ids[j - 1].wrapping_add(1) {
                j += 1;
            }
            if j - i >= RUN_MIN {
                // SAFETY: (both calls) the caller's contract; the run's rows
                // ids[i] .. ids[i] + (j - i) are < rows, so `w` holds
                // (j - i - 1) * stride + dim floats from the first; q holds
                // one query of dim floats; out[i..j] holds j - i values.
                unsafe {
                    if g0 < i {
                        (ks.f32)(&rows, q, &ids[g0..i], &mut out[g0..i]);
                    }
                    let r0 = ids[i] as usize * self.stride;
                    tile(
                        &w[r0..],
                        self.stride,
                        j - i,
                        self.dim,
                        q,
                        self.dim,
                        1,
                        &mut out[i..j],
                        j - i,
                    );
                }
                g0 = j;
            }
            i = j;
        }
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

// ---------------------------------------------------------------- conversions

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
        let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = max / 127.0;
        let o = &mut out[r * out_stride..r * out_stride + dim];
        for (d, &v) in o.iter_mut().zip(row) {
            *d = if scale == 0.0 {
                0
            } else {
                (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8
            };
        }
        scales[r] = scale;
    }
    Ok(())
}

// ---------------------------------------------------------------- top-k

/// Padding id of [`topk`] when a query has fewer than k candidates.
pub const TOPK_PAD_ID: u32 = u32::MAX;

/// `a` ranks before `b`: larger score, or equal score and smaller id.
#[inline(always)]
fn better(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

thread_local! {
    static HEAP: RefCell<Vec<(f32, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Min-heap by rank (root = the worst kept entry): restore after the root
/// was replaced.
#[inline]
fn sift_down(h: &mut [(f32, u32)], mut i: usize) {
    let n = h.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            break;
        }
        let r = l + 1;
        let c = if r < n && better(h[l], h[r]) { r } else { l };
        if better(h[i], h[c]) {
            h.swap(i, c);
            i = c;
        } else {
            break;
        }
    }
}

#[inline]
fn sift_up(h: &mut [(f32, u32)], mut i: usize) {
    while i > 0 {
        let p = (i - 1) / 2;
        if better(h[p], h[i]) {
            h.swap(p, i);
            i = p;
        } else {
            break;
        }
    }
}

pub(crate) fn topk_segment(
    scores: &[f32],
    ids: Option<&[u32]>,
    k: usize,
    heap: &mut Vec<(f32, u32)>,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) {
    heap.clear();
    let id_of = |j: usize| match ids {
        Some(ids) => ids[j],
        None => j as u32,
    };
    let n = scores.len();
    let mut j = 0;
    // Fill: the first k non-NaN candidates.
    while j < n && heap.len() < k {
        let s = scores[j];
        if !s.is_nan() {
            heap.push((s, id_of(j)));
            let last = heap.len() - 1;
            sift_up(heap, last);
        }
        j += 1;
    }
    if heap.len() == k && k > 0 {
        let consider = |j: usize, heap: &mut Vec<(f32, u32)>| {
            let c = (scores[j], id_of(j));
            if better(c, heap[0]) {
                heap[0] = c;
                sift_down(heap, 0);
            }
        };
        // Scan 8 at a time: only lanes >= the current k-th score (NaN
        // compares false) can enter, ties are settled by id in `consider`.
        let mut thr = f32x8::splat(heap[0].0);
        while j + 8 <= n {
            let v = f32x8::from(<[f32; 8]>::try_from(&scores[j..j + 8]).unwrap());
            let mut m = v.simd_ge(thr).to_bitmask();
            if m != 0 {
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    consider(j + l, heap);
                    m &= m - 1;
                }
                thr = f32x8::splat(heap[0].0);
            }
            j += 8;
        }
        while j < n {
            if scores[j] >= heap[0].0 {
                consider(j, heap);
            }
            j += 1;
        }
    }
    heap.sort_unstable_by(|a, b| {
        if better(*a, *b) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    for (t, (oi, os)) in out_ids.iter_mut().zip(out_scores.iter_mut()).enumerate() {
        match heap.get(t) {
            Some(&(s, id)) => {
                *oi = id;
                *os = s;
            }
            None => {
                *oi = TOPK_PAD_ID;
                *os = f32::NEG_INFINITY;
            }
        }
    }
}

/// Per query `i` (segment `offsets[i] .. offsets[i + 1]` of `scores` and
/// `ids`), the `k` best candidates into `out_ids[i*k ..]` / `out_scores[i*k ..]`:
/// largest score first, equal scores by smaller id, NaN never selected,
/// padded with id [`TOPK_PAD_ID`] and score `-inf` when fewer than `k`
/// non-NaN candidates exist. `ids = None` ranks by position in the segment.
/// Duplicate ids are distinct candidates.
pub fn topk(
    scores: &[f32],
    ids: Option<&[u32]>,
    offsets: &[usize],
    k: usize,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) -> Result<()> {
    let nq = offsets.len().saturating_sub(1);
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nq + 1 >= 1 entries");
    }
    check_offsets(offsets, nq, scores.len(), "scores")?;
    if let Some(ids) = ids {
        if ids.len() != scores.len() {
            bail!(
                InvalidArgument,
                "`ids` has {} entries, `scores` {}",
                ids.len(),
                scores.len()
            );
        }
    }
    let need = checked_mul(nq, k, "nq * k")?;
    if out_ids.len() < need || out_scores.len() < need {
        bail!(
            BufferTooSmall,
            "outputs hold {} ids and {} scores, nq * k = {need} needed",
            out_ids.len(),
            out_scores.len()
        );
    }
    if k > u32::MAX as usize {
        bail!(InvalidArgument, "k = {k} is too large");
    }
    HEAP.with(|h| {
        let mut h = h.borrow_mut();
        for i in 0..nq {
            let (s, e) = (offsets[i], offsets[i + 1]);
            topk_segment(
                &scores[s..e],
                ids.map(|v| &v[s..e]),
                k,
                &mut h,
                &mut out_ids[i * k..(i + 1) * k],
                &mut out_scores[i * k..(i + 1) * k],
            );
        }
    });
    Ok(())
}

// ---------------------------------------------------------------- softmax

/// Softmax of one segment, in place; returns the log-sum-exp.
fn softmax_segment(x: &mut [f32]) -> f32 {
    if x.is_empty() {
        return f32::NEG_INFINITY;
    }
    if x.iter().any(|v| v.is_nan()) {
        x.fill(f32::NAN);
        return f32::NAN;
    }
    let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    if m == f32::INFINITY {
        let c = x.iter().filter(|&&v| v == m).count() as f32;
        x.iter_mut()
            .for_each(|v| *v = if *v == m { 1.0 / c } else { 0.0 });
        return f32::INFINITY;
    }
    if m == f32::NEG_INFINITY {
        x.fill(f32::NAN);
        return f32::NEG_INFINITY;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - m).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
    m + (sum.ln() as f32)
}

/// Per query segment of `scores` (CSR `offsets`), the softmax
/// `out[j] = exp(x_j - m) / sum_t exp(x_t - m)` with `m` the segment's
/// maximum (so nothing overflows), summed in f64. `lse[i]` (if given, `nq`
/// entries) receives `m + ln(sum)`, the log-sum-exp. Special cases: a NaN
/// score makes its whole segment NaN (lse NaN); a `+inf` score shares the
/// mass equally with the other `+inf` scores, the rest get 0 (lse `+inf`);
/// an all `-inf` segment gives NaN (lse `-inf`); an empty segment writes
/// nothing (lse `-inf`). Each probability is within
/// `(2|x_j - m| + 8) * 2^-24` relative of the exact value.
pub fn softmax(
    scores: &[f32],
    offsets: &[usize],
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    check_softmax(scores.len(), offsets, out.len(), lse.as_deref())?;
    out.copy_from_slice(scores);
    softmax_run(out, offsets, lse);
    Ok(())
}

/// [`softmax`] in place: `x` holds the scores and receives the probabilities.
pub fn softmax_in_place(x: &mut [f32], offsets: &[usize], lse: Option<&mut [f32]>) -> Result<()> {
    check_softmax(x.len(), offsets, x.len(), lse.as_deref())?;
    softmax_run(x, offsets, lse);
    Ok(())
}

fn check_softmax(n: usize, offsets: &[usize], out_len: usize, lse: Option<&[f32]>) -> Result<()> {
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nq + 1 >= 1 entries");
    }
    let nq = offsets.len() - 1;
    check_offsets(offsets, nq, n, "scores")?;
    if out_len != n {
        bail!(
            InvalidArgument,
            "`out` has {out_len} entries, `scores` {n}; they must be equal"
        );
    }
    if let Some(l) = lse {
        if l.len() < nq {
            bail!(BufferTooSmall, "`lse` holds {} floats, nq = {nq}", l.len());
        }
    }
    Ok(())
}

fn softmax_run(x: &mut [f32], offsets: &[usize], mut lse: Option<&mut [f32]>) {
    for i in 0..offsets.len() - 1 {
        let l = softmax_segment(&mut x[offsets[i]..offsets[i + 1]]);
        if let Some(ls) = lse.as_deref_mut() {
            ls[i] = l;
        }
    }
}
