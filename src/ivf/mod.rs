//! IVF: a data-aware partition index (k-means lists stored contiguously,
//! int8 scoring, exact re-ranking).
//!
//! SimHash and DWTA pick candidates with random hyperplanes and then fetch
//! every candidate row from wherever it lies in W: on a trained layer they
//! need many candidates (tens of percent of the rows on w2v-gutenberg) and
//! each costs a random memory access. [`Ivf`] instead
//!
//! 1. partitions the rows with k-means into `nlist` lists (Lloyd's algorithm
//!    on `x_r = [w_r, b_r]`, assignment by Euclidean distance, trained on a
//!    seeded sample of the rows);
//! 2. stores each list **contiguously**: the rows' int8 codes (per-row
//!    scale, [`crate::qdot`]) and, unless W is borrowed, an f32 copy of the
//!    rows in list order, so scoring a list is a sequential stream the
//!    hardware prefetcher follows;
//! 3. answers a query `q` by scoring the centroids (`<[q, 1], c>`, one small
//!    GEMV on the dense kernels), visiting the `nprobe` best lists, scoring
//!    every row of those lists from its int8 codes (the query quantised to 7
//!    bits once per call), keeping the `rerank` best approximate scores, and
//!    re-scoring those exactly in f32 (`w_r . q + b_r`, the gathered-matmul
//!    kernels) before the final top-k.
//!
//! With [`Codes::None`] there are no codes: every row of the visited lists
//! is scored exactly from the f32 copy (FAISS's IVFFlat). With
//! [`Codes::Pq4`] the first pass reads 4-bit product-quantisation codes of
//! the rows' residuals to their centroid (`dim / 2` codes = `dim / 4` bytes
//! a row by default, against `dim + 12` for int8): one set of byte tables
//! per query, a shuffle-based "fast-scan" kernel over each list's 32-row
//! blocks (`src/ivf/pq.rs`, [`crate::pq4`]), and the same exact re-rank;
//! it needs a larger `rerank` than int8 for the same recall (docs/ivf.md).
//!
//! # Determinism
//! The lists (centroids, membership, order) are a pure function of the
//! inputs, the seed and the parameters: **bit-identical on every tier and
//! for every thread count**. The SIMD assignment ([`crate::centroid`], a
//! GEMM-shaped register-tiled kernel) computes the four best centroids of
//! each row; whenever the best is not ahead of the others by more than
//! twice the kernels' error bound, the decision is re-taken in f64 in a
//! fixed order (plain Rust, identical on every platform), and the centroid
//! means are summed in f64 in row order. Between iterations (and for the
//! training rows in the final assignment) a row is not scanned again when
//! bounds prove the outcome of a scan (Hamerly's bounds, and a re-decision
//! from the row's last four best centroids; see `Track`): the skipped
//! work could only have given the same centroid. A query's lists and
//! candidates are tier-independent too (integer codes, and the same scalar
//! scaling on every tier); only the last bits of the exact re-ranked scores
//! depend on the tier, within the gathered matmul's bound.
//!
//! # Scores
//! Returned scores are exact logits (within the f32 dot-product bound of
//! [`crate::matmul`]) when `rerank > 0` or with [`Codes::None`]; with
//! `rerank = 0` they are the int8 approximations.

use std::cell::RefCell;
use std::path::Path;

use crate::bail;
use crate::centroid::Panels;
use crate::error::{checked_mul, strided_len, Error, Result, Status};
use crate::format::{self, SectionOut};
use crate::isa::{self, Isa};
use crate::kernels::centroid::TOP;
use crate::kernels::dense as kd;
use crate::kernels::matmul::{self as km, Rows};
use crate::labels::LabelState;
use crate::matmul::{topk_segment, TOPK_PAD_ID};
use crate::pq4::Pq4Lut;
use crate::qdot::{self, QQuery, QRows, Variant};
use crate::rng::SplitMix64;

mod calibrate;
mod file;
mod kmeans;
mod labels;
mod pq;
pub use calibrate::Calibration;
use kmeans::{assign, kmeans, list_spread, CentView, Points, NO_TRACK};
pub use pq::{default_m as default_pq_m, TRAIN_ROWS as PQ_TRAIN_ROWS};

/// How list rows are scored before re-ranking.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codes {
    /// Exact f32 scores of every visited row (needs the f32 copy).
    None = 0,
    /// int8 codes with a per-row scale, a 7-bit query, then exact re-ranking.
    I8 = 1,
    /// 4-bit PQ codes of the residuals to the list centroid (`pq_m` codes
    /// a row), one table per query, then exact re-ranking.
    Pq4 = 2,
}

impl Codes {
    pub fn from_u32(v: u32) -> Option<Codes> {
        match v {
            0 => Some(Codes::None),
            1 => Some(Codes::I8),
            2 => Some(Codes::Pq4),
            _ => None,
        }
    }
}

/// Build parameters. `Default` gives the documented defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IvfParams {
    /// Lists; 0 = [`auto_nlist`] (`round(4 sqrt(rows))`).
    pub nlist: u32,
    /// Lloyd iterations (>= 1).
    pub iters: u32,
    /// Rows sampled for training; 0 = `min(rows, 64 * nlist)`.
    pub train_rows: u32,
    pub codes: Codes,
    /// Sub-quantisers of [`Codes::Pq4`] (4 bits each; must divide `dim`);
    /// 0 = [`default_pq_m`] (`dim / 2`). Must be 0 with other codes.
    pub pq_m: u32,
    /// Score-aware [`Codes::Pq4`] codes: the weight of the error parallel
    /// to the row over the orthogonal one (ScaNN's anisotropic loss; `>=
    /// 1`, 1 = nearest-centroid codes).
    pub pq_eta: f32,
    /// Build threads; 0 = every core. The result does not depend on it.
    pub threads: u32,
    pub seed: u64,
}

impl Default for IvfParams {
    fn default() -> Self {
        IvfParams {
            nlist: 0,
            iters: 10,
            train_rows: 0,
            codes: Codes::I8,
            pq_m: 0,
            pq_eta: 1.0,
            threads: 0,
            seed: 0x1f5e_ed00_c0de_0001,
        }
    }
}

/// Query parameters.
///
/// Two ways to choose the lists a query visits:
///
/// * **adaptive** (`reach > 0`, the default): the best list by its estimate
///   `e_l = <[q, 1], c_l> + |q| spread_l` is scanned first; then every list
///   whose optimistic estimate `<[q, 1], c_l> + reach |q| spread_l` is at
///   least the k-th best score found so far is scanned, best estimate first,
///   skipping a list once the k-th score has passed it, up to `nprobe`
///   lists. `spread_l` is the expected reach of the list's best row beyond
///   its centroid, so `reach` says how many such reaches a list may be
///   short of the running k-th score and still be visited: a query whose
///   answer sits in one tight cluster stops after a list or two, a query
///   between clusters (typical of real layers, whose queries are not drawn
///   from the rows) keeps going. Measured (docs/ivf.md, rerank 32):
///   `reach = 3` (the default) gives recall@10 1.000 on the synthetic W1
///   (1.1 lists of 3,274 per query) and 0.995 on w2v-gutenberg (314 of
///   752 lists) alike, with no per-layer tuning; 2.5 gives 0.999 / 0.985,
///   2 gives 0.999 / 0.930.
/// * **fixed** (`reach = 0`): the `nprobe` best lists by `e_l`, as FAISS's
///   IVF does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchParams {
    /// Lists visited per query: exactly this many when `reach = 0`, at
    /// most this many otherwise (clamped to `nlist`; >= 1; `u32::MAX` = no
    /// cap).
    pub nprobe: u32,
    /// Approximate candidates re-scored exactly (0 = none: approximate
    /// scores are returned). At least `k` are re-scored when non-zero.
    pub rerank: u32,
    /// Adaptive list selection's margin (finite, >= 0; 0 = fixed
    /// `nprobe`). See the type's documentation.
    pub reach: f32,
}

/// The default adaptive margin of [`SearchParams::reach`].
pub const DEFAULT_REACH: f32 = 3.0;

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            nprobe: u32::MAX,
            rerank: 32,
            reach: DEFAULT_REACH,
        }
    }
}

impl SearchParams {
    /// Fixed list selection: the `nprobe` best lists (`reach = 0`).
    pub fn fixed(nprobe: u32, rerank: u32) -> Self {
        SearchParams {
            nprobe,
            rerank,
            reach: 0.0,
        }
    }
}

/// Per-query counts from [`Ivf::search_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Rows scored from codes (or exactly, with [`Codes::None`]).
    pub scanned: u64,
    /// Rows re-scored exactly.
    pub reranked: u64,
    /// Lists visited.
    pub lists: u64,
}

/// `round(4 sqrt(rows))`, at least 1 and at most `rows`.
pub fn auto_nlist(rows: usize) -> usize {
    ((4.0 * (rows as f64).sqrt()).round() as usize).clamp(1, rows.max(1))
}

/// The rows used for exact scores.
enum Exact {
    /// f32 rows in list order (`rows * dim`, stride `dim`).
    Owned(Vec<f32>),
    /// The caller's W, by original id (kept alive by the caller).
    Borrowed {
        ptr: *const f32,
        len: usize,
        stride: usize,
    },
}

/// A k-means partition index over an output layer (module docs).
pub struct Ivf {
    rows: usize,
    dim: usize,
    nlist: usize,
    params: IvfParams,
    /// The centroids' bias coordinate (zero without a bias).
    cbias: Vec<f32>,
    /// Per list, the expected reach of its best row beyond the centroid per
    /// unit of |q| (see `list_spread`).
    spread: Vec<f32>,
    /// List `l` holds positions `offsets[l] .. offsets[l + 1]`.
    offsets: Vec<u32>,
    /// Original row id of each position.
    ids: Vec<u32>,
    /// Bias by position (empty without a bias).
    bias_pos: Vec<f32>,
    exact: Exact,
    /// int8 codes by position ([`Codes::I8`]).
    codes: Option<QRows>,
    /// 4-bit residual codes by list ([`Codes::Pq4`]).
    pq: Option<Box<pq::ListPq>>,
    /// int8 codes of the centroids: the lists are chosen from these, and
    /// they are all the index keeps of the centroids' `w` part (the f32
    /// centroids are only needed while building; see `memory_bytes`).
    cq: QRows,
    /// Label training ([`Ivf::train_labels`]): lists then hold training
    /// labels too, so a row may stand in several lists (positions outnumber
    /// rows) and results are deduplicated by id.
    labels: Option<Box<LabelState>>,
}

// SAFETY: immutable after construction; the borrowed pointer is read-only
// memory the caller promised to keep alive and unchanged (build_borrowed).
unsafe impl Send for Ivf {}
// SAFETY: as above, no interior mutability.
unsafe impl Sync for Ivf {}

#[derive(Default)]
struct Scratch {
    cscore: Vec<f32>,
    lists: Vec<u32>,
    lscore: Vec<f32>,
    qq: Option<QQuery>,
    approx: Vec<f32>,
    pos: Vec<u32>,
    cand: Vec<u32>,
    cand_sc: Vec<f32>,
    cand_ids: Vec<u32>,
    exact: Vec<f32>,
    heap: Vec<(f32, u32)>,
    /// Min-heap of the k best approximate scores (adaptive selection).
    theta: Vec<f32>,
    /// Lists still to visit, as [`rank_key`]s (adaptive selection).
    order: Vec<u64>,
    /// The query's PQ tables ([`Codes::Pq4`]).
    lut: Option<Pq4Lut>,
    /// `<[q, 1], c_l>` per list before the spread term ([`Codes::Pq4`]).
    cbase: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Up to this many lists are chosen with a heap (cheap when few lists
/// beat the running threshold), more with a linear-time selection.
const SELECT_BY_HEAP: usize = 32;

fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// Keeps, in order, the first of the entries of `cand` (with their scores
/// in `sc`) that map to each id by `id_of`, skipping [`TOPK_PAD_ID`]
/// entries; returns how many remain at the front. `keys` is scratch.
fn keep_first_per_id(
    keys: &mut Vec<u64>,
    cand: &mut [u32],
    sc: &mut [f32],
    id_of: impl Fn(u32) -> u32,
) -> usize {
    keys.clear();
    keys.extend(
        cand.iter()
            .enumerate()
            .filter(|e| *e.1 != TOPK_PAD_ID)
            .map(|(i, &c)| (u64::from(id_of(c)) << 32) | i as u64),
    );
    keys.sort_unstable();
    // Mark the later copies (same id, later entry) with a pad id.
    for w in 1..keys.len() {
        if keys[w] >> 32 == keys[w - 1] >> 32 {
            cand[keys[w] as u32 as usize] = TOPK_PAD_ID;
        }
    }
    let mut j = 0;
    for i in 0..cand.len() {
        if cand[i] != TOPK_PAD_ID {
            cand[j] = cand[i];
            sc[j] = sc[i];
            j += 1;
        }
    }
    j
}

/// Larger score first, then smaller id (list ranking).
fn by_rank(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// The index of the largest value (the first one on ties; values are
/// finite): 16 running maxima (vectorised), then the first position that
/// holds the maximum.
fn argmax_first(v: &[f32]) -> usize {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = v.chunks_exact(16);
    for c in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = if x > *m { x } else { *m };
        }
    }
    let mut best = f32::NEG_INFINITY;
    for &x in lanes.iter().chain(chunks.remainder()) {
        best = if x > best { x } else { best };
    }
    v.iter().position(|&x| x == best).unwrap_or(0)
}

/// A sort key that orders `(score, id)` as [`by_rank`] does (score
/// descending, then id ascending) for finite scores: the score's bits made
/// monotone and inverted in the high half, the id in the low half.
fn rank_key(score: f32, id: u32) -> u64 {
    let b = score.to_bits();
    // Monotone map of the f32 order onto u32 (negatives flipped whole,
    // positives with the sign bit set), then inverted for descending.
    let m = if b >> 31 == 1 { !b } else { b | 0x8000_0000 };
    (u64::from(!m) << 32) | u64::from(id)
}

/// The k-th best score pushed so far (`-inf` before `k` scores).
fn theta_of(heap: &[f32], k: usize) -> f32 {
    if heap.len() < k {
        f32::NEG_INFINITY
    } else {
        heap[0]
    }
}

/// Keeps the `k` largest scores in a binary min-heap.
fn theta_push(heap: &mut Vec<f32>, k: usize, x: f32) {
    if heap.len() < k {
        heap.push(x);
        let mut i = heap.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if heap[p] <= heap[i] {
                break;
            }
            heap.swap(p, i);
            i = p;
        }
    } else if k > 0 && x > heap[0] {
        heap[0] = x;
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < k && heap[l] < heap[m] {
                m = l;
            }
            if r < k && heap[r] < heap[m] {
                m = r;
            }
            if m == i {
                break;
            }
            heap.swap(m, i);
            i = m;
        }
    }
}

impl Ivf {
    /// Builds an index that owns an f32 copy of the rows in list order
    /// (plus the int8 codes with [`Codes::I8`]). W is not kept.
    pub fn build(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
    ) -> Result<Ivf> {
        Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p, false)
    }

    /// [`Ivf::build`] that keeps a pointer to `w` for the exact scores
    /// instead of copying it (needs [`Codes::I8`]).
    ///
    /// # Safety
    /// `w` must stay alive and unchanged for as long as the index lives.
    pub unsafe fn build_borrowed(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
    ) -> Result<Ivf> {
        Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p, true)
    }

    /// [`Ivf::build`] on one chosen tier (tests: the result is the same on
    /// every tier). `borrow` as [`Ivf::build_borrowed`], whose safety rule
    /// the caller then owns.
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub fn build_isa(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
        borrow: bool,
    ) -> Result<Ivf> {
        Self::build_with_centroids(tier, w, bias, rows, dim, w_stride, p, borrow).map(|(ix, _)| ix)
    }

    /// [`Ivf::build_isa`] that also returns the f32 k-means centroids the
    /// rows were assigned to (`nlist * dim`, the `w` part; the bias part is
    /// [`Ivf::centroid_bias`]). The index keeps only their int8 codes
    /// ([`Ivf::centroid_codes`]), which is what a query ranks lists by;
    /// tests and tools use these to check the assignment.
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub fn build_with_centroids(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
        borrow: bool,
    ) -> Result<(Ivf, Vec<f32>)> {
        isa::check_supported(tier)?;
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if rows >= u32::MAX as usize {
            bail!(InvalidArgument, "rows is {rows}; at most 2^32 - 2");
        }
        crate::error::check_layer_buffers(w, bias, rows, dim, w_stride)?;
        if p.iters == 0 {
            bail!(InvalidArgument, "iters must be >= 1");
        }
        if borrow && p.codes == Codes::None {
            bail!(
                InvalidArgument,
                "codes None scores the index's own f32 copy: it cannot borrow W"
            );
        }
        let pq_m = match p.codes {
            Codes::Pq4 => pq::resolve_m(dim, p.pq_m)?,
            _ if p.pq_m != 0 => bail!(
                InvalidArgument,
                "pq_m is {}; it applies to codes PQ4 only (0 otherwise)",
                p.pq_m
            ),
            _ => 0,
        };
        if !(p.pq_eta.is_finite() && p.pq_eta >= 1.0) {
            bail!(
                InvalidArgument,
                "pq_eta is {}; it must be finite and >= 1",
                p.pq_eta
            );
        }
        if p.codes == Codes::Pq4 && rows < 16 {
            bail!(
                InvalidArgument,
                "codes PQ4 trains 16 centroids per sub-space: it needs at least 16 rows, not {rows}"
            );
        }
        let nlist = if p.nlist == 0 {
            auto_nlist(rows)
        } else {
            p.nlist as usize
        };
        if nlist > rows {
            bail!(
                InvalidArgument,
                "nlist is {nlist}, more than the {rows} rows"
            );
        }
        let ntrain = if p.train_rows == 0 {
            rows.min(64usize.saturating_mul(nlist))
        } else {
            (p.train_rows as usize).min(rows)
        };
        if ntrain < nlist {
            bail!(
                InvalidArgument,
                "train_rows is {ntrain}, fewer than the {nlist} lists"
            );
        }
        crate::error::check_finite_rows(w, rows, dim, w_stride, "w")?;
        if let Some(r) = bias.and_then(|b| b[..rows].iter().position(|v| !v.is_finite())) {
            bail!(
                NonFinite,
                "bias[{r}] is {} (finite values needed)",
                bias.unwrap()[r]
            );
        }
        let copy_bytes = if borrow {
            0
        } else {
            rows as u128 * dim as u128 * 4
        };
        let code_bytes = match p.codes {
            Codes::I8 => rows as u128 * (dim.div_ceil(64) * 64 + 12) as u128,
            // Padded to 32-row blocks per list, plus the unpacked copy of
            // the build and the training residuals.
            Codes::Pq4 => {
                (rows as u128 + 32 * nlist as u128) * pq_m as u128
                    + (pq::TRAIN_ROWS.min(rows) * dim * 4) as u128
            }
            Codes::None => 0,
        };
        crate::error::check_fits_memory(
            copy_bytes + code_bytes + rows as u128 * 12 + ntrain as u128 * (dim as u128 + 1) * 4,
            "the IVF index",
        )?;
        let threads = crate::par::threads(p.threads as usize);
        let has_bias = bias.is_some();
        let xdim = dim + usize::from(has_bias);
        let put = |dst: &mut [f32], r: usize| {
            dst[..dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            if let Some(b) = bias {
                dst[dim] = b[r];
            }
        };

        // Seeded sample: a partial Fisher-Yates shuffle of the row ids.
        let mut rng = SplitMix64::new(p.seed);
        let mut perm: Vec<u32> = (0..rows as u32).collect();
        for i in 0..ntrain {
            let j = i + rng.below((rows - i) as u64) as usize;
            perm.swap(i, j);
        }
        let mut xs = vec![0f32; checked_mul(ntrain, xdim, "train_rows * dim")?];
        for (i, &r) in perm[..ntrain].iter().enumerate() {
            put(&mut xs[i * xdim..(i + 1) * xdim], r as usize);
        }
        let (cent, train_asg, train_bounds) = kmeans(
            tier,
            &Points {
                x: &xs,
                n: ntrain,
                xdim,
            },
            nlist,
            p.iters,
            threads,
            &mut rng,
        )?;
        drop(xs);

        // Assign every row, in blocks (bounded memory for the [w, b] copy).
        // A training row starts from its last training assignment and
        // bounds, so it is scored again only if it may have moved.
        let mut sample_of = vec![u32::MAX; rows];
        for (i, &r) in perm[..ntrain].iter().enumerate() {
            sample_of[r as usize] = i as u32;
        }
        drop(perm);
        let cv = CentView::new(&cent, nlist, xdim)?;
        let mut asg = vec![0u32; rows];
        const ABLOCK: usize = 1 << 16;
        let mut xb = vec![0f32; ABLOCK.min(rows) * xdim];
        let mut bb = vec![NO_TRACK; ABLOCK.min(rows)];
        let mut r0 = 0;
        while r0 < rows {
            let n = ABLOCK.min(rows - r0);
            for i in 0..n {
                put(&mut xb[i * xdim..(i + 1) * xdim], r0 + i);
                let t = sample_of[r0 + i];
                (asg[r0 + i], bb[i]) = if t == u32::MAX {
                    (0, NO_TRACK)
                } else {
                    (train_asg[t as usize], train_bounds[t as usize])
                };
            }
            let pts = Points {
                x: &xb[..n * xdim],
                n,
                xdim,
            };
            assign(
                tier,
                &pts,
                &cv,
                threads,
                &mut asg[r0..r0 + n],
                Some(&mut bb[..n]),
            )?;
            r0 += n;
        }
        drop((xb, bb, sample_of, train_asg, train_bounds));

        // Counting sort: lists in order, rows by id inside a list.
        let mut offsets = vec![0u32; nlist + 1];
        for &a in &asg {
            offsets[a as usize + 1] += 1;
        }
        for l in 0..nlist {
            offsets[l + 1] += offsets[l];
        }
        let mut cur = offsets.clone();
        let mut ids = vec![0u32; rows];
        for (r, &a) in asg.iter().enumerate() {
            ids[cur[a as usize] as usize] = r as u32;
            cur[a as usize] += 1;
        }
        let bias_pos: Vec<f32> = match bias {
            Some(b) => ids.iter().map(|&r| b[r as usize]).collect(),
            None => Vec::new(),
        };
        let spread = list_spread(w, bias, dim, w_stride, &cent, xdim, &offsets, &ids);
        let mut centroids = vec![0f32; nlist * dim];
        let mut cbias = vec![0f32; nlist];
        for c in 0..nlist {
            centroids[c * dim..(c + 1) * dim].copy_from_slice(&cent[c * xdim..c * xdim + dim]);
            if has_bias {
                cbias[c] = cent[c * xdim + dim];
            }
        }
        let exact = if borrow {
            Exact::Borrowed {
                ptr: w.as_ptr(),
                len: strided_len(rows, dim, w_stride, "w")?,
                stride: w_stride,
            }
        } else {
            let mut v = vec![0f32; rows * dim];
            for (pos, &r) in ids.iter().enumerate() {
                let r = r as usize;
                v[pos * dim..(pos + 1) * dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            }
            Exact::Owned(v)
        };
        let codes = match p.codes {
            Codes::I8 => Some(qdot::quantize_rows_with(
                w,
                rows,
                dim,
                w_stride,
                Some(&ids),
                threads,
            )?),
            Codes::None | Codes::Pq4 => None,
        };
        let pq = if p.codes == Codes::Pq4 {
            let row = |pos: usize| -> &[f32] {
                let r = ids[pos] as usize;
                &w[r * w_stride..r * w_stride + dim]
            };
            Some(Box::new(pq::ListPq::build(
                &pq::Source {
                    row: &row,
                    dim,
                    centroids: &centroids,
                    offsets: &offsets,
                },
                pq_m,
                (p.pq_eta != 1.0).then_some(crate::pq4::Anisotropic {
                    eta: p.pq_eta,
                    sweeps: 4,
                }),
                threads,
                p.seed,
            )?))
        } else {
            None
        };
        let cq = qdot::quantize_rows(&centroids, nlist, dim, dim)?;
        let ix = Ivf {
            cq,
            pq,
            rows,
            dim,
            nlist,
            params: IvfParams {
                nlist: nlist as u32,
                train_rows: ntrain as u32,
                pq_m: pq_m as u32,
                ..*p
            },
            cbias,
            spread,
            offsets,
            ids,
            bias_pos,
            exact,
            codes,
            labels: None,
        };
        Ok((ix, centroids))
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn nlist(&self) -> usize {
        self.nlist
    }
    /// The resolved build parameters (`nlist`, `train_rows` filled in).
    pub fn params(&self) -> &IvfParams {
        &self.params
    }
    /// The int8 codes of the centroids' `w` part (one row per list; a
    /// centroid is `scale * codes`): the lists are ranked from these. The
    /// f32 centroids are not kept ([`Ivf::build_with_centroids`] returns
    /// them at build time).
    pub fn centroid_codes(&self) -> &QRows {
        &self.cq
    }
    /// List `l` is `list_ids()[list_offsets()[l] .. list_offsets()[l + 1]]`.
    /// The centroids' bias coordinate, one per list (zeros without a bias).
    pub fn centroid_bias(&self) -> &[f32] {
        &self.cbias
    }
    /// Per list, the reach term of its estimate (`list_spread` in the
    /// module): lists are ranked by `<q, c> + cb + |q| * spread`.
    pub fn spread(&self) -> &[f32] {
        &self.spread
    }
    pub fn list_offsets(&self) -> &[u32] {
        &self.offsets
    }
    pub fn list_ids(&self) -> &[u32] {
        &self.ids
    }
    /// Whether the exact scores read the caller's W.
    /// The [`Codes::Pq4`] codebook's centroids (`16 * dim`, sub-space by
    /// sub-space) and the packed codes (every list padded to whole 32-row
    /// blocks, in list order); `None` with other codes.
    pub fn pq_parts(&self) -> Option<(&[f32], &[u8])> {
        self.pq
            .as_ref()
            .map(|p| (p.codebook().centroids(), p.packed()))
    }
    pub fn borrows_weights(&self) -> bool {
        matches!(self.exact, Exact::Borrowed { .. })
    }

    /// Bytes the index owns (a borrowed W not counted).
    pub fn memory_bytes(&self) -> usize {
        let v = |n: usize, b: usize| n * b;
        v(
            self.cbias.len() + self.spread.len() + self.bias_pos.len(),
            4,
        ) + v(self.offsets.len() + self.ids.len(), 4)
            + match &self.exact {
                Exact::Owned(x) => x.len() * 4,
                Exact::Borrowed { .. } => 0,
            }
            + self.codes.as_ref().map_or(0, |c| c.memory_bytes())
            + self.pq.as_ref().map_or(0, |c| c.memory_bytes())
            + self.cq.memory_bytes()
            + std::mem::size_of::<Ivf>()
    }

    fn exact_rows(&self) -> (Rows<'_, f32>, bool) {
        match &self.exact {
            Exact::Owned(v) => (
                Rows {
                    w: v,
                    stride: self.dim,
                    dim: self.dim,
                    scales: &[],
                },
                false,
            ),
            Exact::Borrowed { ptr, len, stride } => (
                Rows {
                    // SAFETY: the caller of build_borrowed promised that W
                    // (`len` floats from `ptr`) outlives the index unchanged.
                    w: unsafe { std::slice::from_raw_parts(*ptr, *len) },
                    stride: *stride,
                    dim: self.dim,
                    scales: &[],
                },
                true,
            ),
        }
    }

    /// The top-`k` of `W q + b` for `nq` queries (`q` rows at `q_stride`),
    /// into `out_ids` / `out_scores` (`nq * k` each): largest first, equal
    /// scores by smaller id, padded with [`TOPK_PAD_ID`] / `-inf` when the
    /// visited lists hold fewer than `k` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        self.search_stats(
            isa::active(),
            q,
            nq,
            q_stride,
            k,
            sp,
            out_ids,
            out_scores,
            None,
        )
    }

    /// [`Ivf::search`] on one tier, with optional per-call counts (summed
    /// over the queries).
    #[allow(clippy::too_many_arguments)]
    pub fn search_stats(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut SearchStats>,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        if sp.nprobe == 0 {
            bail!(InvalidArgument, "nprobe must be >= 1");
        }
        if !(sp.reach.is_finite() && sp.reach >= 0.0) {
            bail!(
                InvalidArgument,
                "reach is {}; it must be finite and >= 0 (0 = fixed nprobe)",
                sp.reach
            );
        }
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        if q.len() < ql {
            bail!(
                BufferTooSmall,
                "`q` holds {} floats, {nq} queries of stride {q_stride} need {ql}",
                q.len()
            );
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
        crate::error::check_finite_rows(q, nq, self.dim, q_stride, "q")?;
        let mut st = SearchStats::default();
        if k > 0 {
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                for i in 0..nq {
                    self.search_one(
                        tier,
                        &q[i * q_stride..i * q_stride + self.dim],
                        k,
                        sp,
                        &mut s,
                        &mut out_ids[i * k..(i + 1) * k],
                        &mut out_scores[i * k..(i + 1) * k],
                        &mut st,
                    );
                }
            });
        }
        if let Some(o) = stats {
            *o = st;
        }
        Ok(())
    }

    /// Quantises `q` into `s.qq` and writes every list's estimate
    /// `e_l = <[q, 1], c_l> + |q| spread_l` into `s.cscore[..nlist]` (with
    /// [`Codes::Pq4`] also the query's tables and `s.cbase`). Returns `|q|`.
    fn list_estimates(&self, v: Variant, q: &[f32], s: &mut Scratch) -> f32 {
        let nlist = self.nlist;
        let dp = self.cq.dim_pad();
        if s.qq.as_ref().is_none_or(|x| x.dim_pad() != dp) {
            s.qq = Some(QQuery::new(dp).expect("dim_pad of stored codes is valid"));
        }
        s.qq.as_mut()
            .unwrap()
            .set(q)
            .expect("queries are checked finite");
        let qq = s.qq.as_ref().unwrap();
        grow(&mut s.cscore, nlist);
        self.cq
            .score_run_with(v, 0, nlist, qq, None, &mut s.cscore[..nlist])
            .expect("centroid run");
        let qn = q.iter().map(|&v| v * v).sum::<f32>().sqrt();
        if let Some(pq) = &self.pq {
            // The list constants of the residual scores, and the query's
            // tables (once per query, shared by every list).
            grow(&mut s.cbase, nlist);
            for ((d, &c), &b) in s.cbase[..nlist]
                .iter_mut()
                .zip(&s.cscore[..nlist])
                .zip(&self.cbias)
            {
                *d = c + b;
            }
            if s.lut.as_ref().is_none_or(|l| l.m() != pq.m()) {
                s.lut = Some(Pq4Lut::new(pq.m()).expect("m of stored codes is valid"));
            }
            s.lut
                .as_mut()
                .unwrap()
                .set(pq.codebook(), q)
                .expect("queries are checked finite");
        }
        let cs = &mut s.cscore[..nlist];
        for ((c, b), t) in cs.iter_mut().zip(&self.cbias).zip(&self.spread) {
            *c += b + qn * t;
        }
        qn
    }

    #[allow(clippy::too_many_arguments)]
    fn search_one(
        &self,
        tier: Isa,
        q: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        st: &mut SearchStats,
    ) {
        let nlist = self.nlist;
        let nprobe = (sp.nprobe as usize).min(nlist);
        let v = Variant::of(tier).expect("tier checked");
        let qn = self.list_estimates(v, q, s);
        let n = if sp.reach > 0.0 {
            self.visit_adaptive(tier, v, q, qn, k, nprobe, sp.reach, s, st)
        } else {
            self.visit_fixed(tier, v, q, nprobe, s, st)
        };
        st.scanned += n as u64;
        if (self.codes.is_none() && self.pq.is_none()) || sp.rerank == 0 {
            // Exact scores (Codes::None) or approximate ones returned as
            // they are.
            for p in s.pos[..n].iter_mut() {
                *p = self.ids[*p as usize];
            }
            if self.labels.is_none() {
                topk_segment(
                    &s.approx[..n],
                    Some(&s.pos[..n]),
                    k,
                    &mut s.heap,
                    out_ids,
                    out_scores,
                );
            } else {
                self.topk_unique(n, k, s, out_ids, out_scores);
            }
            return;
        }
        // At least k; never more than there are candidates (a huge rerank
        // must not size the scratch).
        let r = (sp.rerank as usize).max(k).min(n.max(k));
        grow(&mut s.cand, r);
        grow(&mut s.cand_sc, r);
        topk_segment(
            &s.approx[..n],
            Some(&s.pos[..n]),
            r,
            &mut s.heap,
            &mut s.cand[..r],
            &mut s.cand_sc[..r],
        );
        let mut m = s.cand[..r]
            .iter()
            .take_while(|&&p| p != TOPK_PAD_ID)
            .count();
        if self.labels.is_some() {
            // A row in several lists is re-scored once.
            m = self.dedup_positions(m, s);
        }
        st.reranked += m as u64;
        self.exact_scores(tier, q, m, s);
        topk_segment(
            &s.exact[..m],
            Some(&s.cand_ids[..m]),
            k,
            &mut s.heap,
            out_ids,
            out_scores,
        );
    }

    /// Keeps the first position of every id among the candidate positions
    /// `s.cand[..m]` (best first), in order; returns how many remain.
    fn dedup_positions(&self, m: usize, s: &mut Scratch) -> usize {
        let ids = &self.ids;
        keep_first_per_id(&mut s.order, &mut s.cand[..m], &mut s.cand_sc[..m], |p| {
            ids[p as usize]
        })
    }

    /// The top-`k` of `s.approx[..n]` by the ids in `s.pos[..n]`, each id
    /// once (label-trained lists may hold a row twice): the best `r`
    /// entries, `r` doubled until they hold `k` distinct ids or every entry.
    fn topk_unique(
        &self,
        n: usize,
        k: usize,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        let mut r = (2 * k).min(n).max(1);
        loop {
            grow(&mut s.cand, r);
            grow(&mut s.cand_sc, r);
            topk_segment(
                &s.approx[..n],
                Some(&s.pos[..n]),
                r,
                &mut s.heap,
                &mut s.cand[..r],
                &mut s.cand_sc[..r],
            );
            let j = keep_first_per_id(&mut s.order, &mut s.cand[..r], &mut s.cand_sc[..r], |id| id);
            if j >= k || r >= n {
                let j = j.min(k);
                out_ids[..j].copy_from_slice(&s.cand[..j]);
                out_scores[..j].copy_from_slice(&s.cand_sc[..j]);
                out_ids[j..k].fill(TOPK_PAD_ID);
                out_scores[j..k].fill(f32::NEG_INFINITY);
                return;
            }
            r = (2 * r).min(n);
        }
    }

    /// Scores the rows of lists `l0..l1` (positions `offsets[l0] ..
    /// offsets[l1]`) into `s.approx[n..]` (their positions into
    /// `s.pos[n..]`): from the int8 or 4-bit codes, or exactly from the
    /// owned f32 copy with [`Codes::None`]. Returns the rows scored.
    #[allow(clippy::too_many_arguments)]
    fn scan_lists(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        l0: usize,
        l1: usize,
        s: &mut Scratch,
        n: usize,
    ) -> usize {
        let (a, b) = (self.offsets[l0] as usize, self.offsets[l1] as usize);
        let len = b - a;
        grow(&mut s.approx, n + len);
        grow(&mut s.pos, n + len);
        let bias = (!self.bias_pos.is_empty()).then(|| &self.bias_pos[a..b]);
        let out = &mut s.approx[n..n + len];
        match (&self.codes, &self.pq) {
            (Some(codes), _) => {
                let qq = s.qq.as_ref().expect("query quantised");
                codes
                    .score_run_with(v, a, len, qq, bias, out)
                    .expect("runs lie within the stored rows");
            }
            (None, Some(pq)) => {
                // One run per list: each starts on its own block and adds
                // its own centroid's score.
                let lut = s.lut.as_ref().expect("tables set");
                for l in l0..l1 {
                    let (la, lb) = (
                        self.offsets[l] as usize - a,
                        self.offsets[l + 1] as usize - a,
                    );
                    pq.score_list(
                        tier,
                        l,
                        lut,
                        s.cbase[l],
                        bias.map(|x| &x[la..lb]),
                        &mut out[la..lb],
                    );
                }
            }
            (None, None) => {
                let Exact::Owned(rows) = &self.exact else {
                    unreachable!("codes None always owns its rows")
                };
                let dim = self.dim;
                if len > 0 {
                    // SAFETY: positions a..b are rows of the owned copy
                    // (stride dim), `out` holds len values; dim >= 1; the
                    // tier is supported (checked by the caller).
                    unsafe {
                        (kd::kernels(tier).tile)(
                            &rows[a * dim..],
                            dim,
                            len,
                            dim,
                            q,
                            dim,
                            1,
                            out,
                            len,
                        )
                    };
                }
                if let Some(bb) = bias {
                    for (o, &x) in out.iter_mut().zip(bb) {
                        *o += x;
                    }
                }
            }
        }
        for (d, p) in s.pos[n..n + len].iter_mut().zip(a as u32..) {
            *d = p;
        }
        len
    }

    /// Fixed selection: the `nprobe` best lists by `s.cscore`, scanned in
    /// id order with adjacent lists merged into one run (fewer calls, and
    /// the kernel's in-run prefetch carries across the boundary; the result
    /// does not depend on the order). Returns the rows scanned.
    fn visit_fixed(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        nprobe: usize,
        s: &mut Scratch,
        st: &mut SearchStats,
    ) -> usize {
        let nlist = self.nlist;
        grow(&mut s.lists, nprobe);
        grow(&mut s.lscore, nprobe);
        if nprobe <= SELECT_BY_HEAP {
            topk_segment(
                &s.cscore[..nlist],
                None,
                nprobe,
                &mut s.heap,
                &mut s.lists[..nprobe],
                &mut s.lscore[..nprobe],
            );
        } else {
            // Many lists: a linear-time selection of the same set (the
            // nprobe best by score, ties by smaller id; scores are finite).
            s.heap.clear();
            s.heap
                .extend(s.cscore[..nlist].iter().zip(0u32..).map(|(&c, l)| (c, l)));
            if nprobe < nlist {
                s.heap.select_nth_unstable_by(nprobe - 1, by_rank);
            }
            for (d, e) in s.lists[..nprobe].iter_mut().zip(&s.heap[..nprobe]) {
                *d = e.1;
            }
        }
        s.lists[..nprobe].sort_unstable();
        let mut n = 0;
        let mut i = 0;
        while i < nprobe && s.lists[i] != TOPK_PAD_ID {
            let mut j = i + 1;
            while j < nprobe && s.lists[j] == s.lists[j - 1] + 1 {
                j += 1;
            }
            st.lists += (j - i) as u64;
            let (l0, l1) = (s.lists[i] as usize, s.lists[j - 1] as usize + 1);
            i = j;
            n += self.scan_lists(tier, v, q, l0, l1, s, n);
        }
        n
    }

    /// Adaptive selection ([`SearchParams`]): the best list, then every list
    /// whose optimistic estimate reaches the running k-th score, best
    /// estimate first, at most `cap` lists. Returns the rows scanned.
    #[allow(clippy::too_many_arguments)]
    fn visit_adaptive(
        &self,
        tier: Isa,
        v: Variant,
        q: &[f32],
        qn: f32,
        k: usize,
        cap: usize,
        reach: f32,
        s: &mut Scratch,
        st: &mut SearchStats,
    ) -> usize {
        let nlist = self.nlist;
        // The best list by estimate (ties by smaller id): a branch-free max
        // (vectorised), then the first list that holds it.
        let cs = &s.cscore[..nlist];
        let first = argmax_first(cs);
        // Optimistic estimate of list l: e_l + (reach - 1) |q| spread_l.
        let extra = (reach - 1.0) * qn;
        let opt = |cs: &[f32], l: usize| cs[l] + extra * self.spread[l];
        s.theta.clear();
        let multi = self.labels.is_some();
        let mut n = 0;
        let visit = |s: &mut Scratch, l: usize, n: &mut usize| {
            let m = self.scan_lists(tier, v, q, l, l + 1, s, *n);
            // Only a score above the current k-th best changes it: one
            // compare per row, the heap only for the few that pass.
            let mut th = theta_of(&s.theta, k);
            for &x in &s.approx[*n..*n + m] {
                // A row in two label-trained lists has the same int8 score
                // in both: counted once (a distinct row with exactly the
                // same score is skipped too, which only lowers the bound).
                if x > th && !(multi && s.theta.contains(&x)) {
                    theta_push(&mut s.theta, k, x);
                    th = theta_of(&s.theta, k);
                }
            }
            *n += m;
        };
        visit(s, first, &mut n);
        let mut visited = 1usize;
        // 4-bit codes under-estimate the best rows' scores (a row far out
        // along the query is pulled towards its cell's centre), so their
        // running k-th score alone admits too many lists. The exact k-th
        // score of the first list's k best candidates is a lower bound of
        // the final k-th exact score: the threshold is the larger of the
        // two. (int8 scores are close enough: not done there.)
        let floor = if self.pq.is_some() {
            self.exact_kth(tier, q, k, s, n)
        } else {
            f32::NEG_INFINITY
        };
        // Every other list that can still pass; the k-th score only grows,
        // so a list that fails now never passes later.
        let th = theta_of(&s.theta, k).max(floor);
        // Sorted best estimate first (ties by smaller id) as one u64 key per
        // list: the high half orders the (finite) score descending, the low
        // half the id ascending; an integer sort, no comparator calls.
        s.order.clear();
        if cap > 1 {
            // 16 lists at a time: a vectorised compare into a bit mask, then
            // only the passing lists (few on a clustered layer) are pushed.
            let cs = &s.cscore[..nlist];
            let sp = &self.spread[..nlist];
            for (c0, (cc, ss)) in cs.chunks(16).zip(sp.chunks(16)).enumerate() {
                let mut mask = 0u32;
                for (j, (&c, &x)) in cc.iter().zip(ss).enumerate() {
                    mask |= u32::from(c + extra * x >= th) << j;
                }
                while mask != 0 {
                    let j = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    let l = c0 * 16 + j;
                    if l != first {
                        s.order.push(rank_key(cs[l], l as u32));
                    }
                }
            }
        }
        s.order.sort_unstable();
        let order = std::mem::take(&mut s.order);
        for &key in &order {
            if visited >= cap {
                break;
            }
            let l = key as u32 as usize;
            if opt(&s.cscore, l) < theta_of(&s.theta, k).max(floor) {
                continue;
            }
            visit(s, l, &mut n);
            visited += 1;
        }
        s.order = order;
        st.lists += visited as u64;
        n
    }

    /// The k-th best exact score among the `k` best approximate candidates
    /// `s.approx[..n]` (positions `s.pos[..n]`), `-inf` if there are fewer
    /// than `k`. Uses `s.cand`, `s.cand_sc`, `s.cand_ids` and `s.exact` as
    /// scratch.
    fn exact_kth(&self, tier: Isa, q: &[f32], k: usize, s: &mut Scratch, n: usize) -> f32 {
        if n < k || k == 0 {
            return f32::NEG_INFINITY;
        }
        grow(&mut s.cand, k);
        grow(&mut s.cand_sc, k);
        topk_segment(
            &s.approx[..n],
            Some(&s.pos[..n]),
            k,
            &mut s.heap,
            &mut s.cand[..k],
            &mut s.cand_sc[..k],
        );
        self.exact_scores(tier, q, k, s);
        s.exact[..k].iter().fold(f32::INFINITY, |a, &e| a.min(e))
    }

    /// Exact scores `w_r . q + b_r` of the candidate positions `s.cand[..m]`
    /// into `s.exact[..m]`, their original ids into `s.cand_ids[..m]`.
    fn exact_scores(&self, tier: Isa, q: &[f32], m: usize, s: &mut Scratch) {
        grow(&mut s.cand_ids, m);
        grow(&mut s.exact, m);
        let (rows, by_id) = self.exact_rows();
        for (d, &p) in s.cand_ids[..m].iter_mut().zip(&s.cand[..m]) {
            *d = self.ids[p as usize];
        }
        let fetch = if by_id {
            &s.cand_ids[..m]
        } else {
            &s.cand[..m]
        };
        // SAFETY: every id is a position < rows of the owned copy or an
        // original id < rows of the borrowed W (which holds rows rows at its
        // stride, checked at build); q holds dim floats; exact holds m.
        unsafe { (km::kernels(tier).f32)(&rows, q, fetch, &mut s.exact[..m]) };
        if !self.bias_pos.is_empty() {
            for (e, &p) in s.exact[..m].iter_mut().zip(&s.cand[..m]) {
                *e += self.bias_pos[p as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rank_key` sorts as `by_rank` (finite scores, both zeros, ties), and
    /// `argmax_first` finds the first maximum at every position and length.
    #[test]
    fn rank_key_orders_as_by_rank_and_argmax_takes_the_first() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let special = [0.0f32, -0.0, 1.0, -1.0, f32::MAX, f32::MIN, 1e-45, -1e-45];
        for n in [1usize, 2, 15, 16, 17, 33, 200] {
            let v: Vec<(f32, u32)> = (0..n)
                .map(|i| {
                    let r = next();
                    let s = if r % 4 == 0 {
                        special[(r >> 8) as usize % special.len()]
                    } else {
                        // A few distinct values, so that ties occur.
                        ((r >> 16) % 7) as f32 * 0.5 - 1.5
                    };
                    (s, i as u32)
                })
                .collect();
            let mut a = v.clone();
            a.sort_unstable_by(by_rank);
            let mut b: Vec<u64> = v.iter().map(|&(s, i)| rank_key(s, i)).collect();
            b.sort_unstable();
            let b: Vec<u32> = b.iter().map(|&k| k as u32).collect();
            let a: Vec<u32> = a.iter().map(|e| e.1).collect();
            assert_eq!(a, b, "n = {n}");
            let scores: Vec<f32> = v.iter().map(|e| e.0).collect();
            let want = (0..n)
                .max_by(|&i, &j| scores[i].total_cmp(&scores[j]).then(j.cmp(&i)))
                .unwrap();
            let got = argmax_first(&scores);
            // -0.0 == 0.0 for the argmax: the first of either.
            assert_eq!(scores[got], scores[want], "n = {n}");
            assert!(scores[..got].iter().all(|&s| s < scores[got]), "n = {n}");
        }
    }
}
