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
//!    scale, [`crate::quant::qdot`]) and, unless W is borrowed, an f32 copy of the
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
//! blocks (`src/ivf/pq.rs`, [`crate::quant::pq4`]), and the same exact re-rank;
//! its shortlists are chosen by an optimistic key that allows for each
//! row's coding error, and its exact re-rank grows with the scan, so that
//! a larger budget drives recall to 1 (`search::PQ4_I8_KEY_G`).
//! [`Codes::Pq4I8`] keeps both codes and adds a middle stage: the 4-bit
//! pass picks the best `refine` candidates, their int8 codes re-score them
//! (rows gathered by position, prefetched), and the best `rerank` of those
//! are re-scored exactly. On wide rows (d = 384), where the int8 pass is
//! bound by the `vpdpbusd` count per row, this reaches int8's recall at
//! the 4-bit pass's cost (docs/ivf.md, "Two-stage codes").
//!
//! # Lists with a shape
//! Adaptive selection (`SearchParams::reach`) ranks a list by how far its
//! best row may reach beyond the centroid along the query, `|q| spread_l`.
//! A plain spread is the same in every direction; a trained layer's lists
//! are not round (on w2v-gutenberg four directions hold a third of a list's
//! residual variance, against 4 / 128 for a round one). The build keeps
//! per list the `LIST_DIRS` top principal directions of its rows'
//! residuals, scaled by their excess variance, as int8 rows
//! (`kmeans::list_shapes`), and from a query's second list on the spread
//! is `sqrt(sum_j <q, g_j>^2 + kappa |q|^2) / |q|` (at least the far-row
//! floor): one int8 pass over `LIST_DIRS * nlist` short rows buys a test
//! that admits the lists whose rows stretch towards the query and skips
//! those that stretch across it (docs/ivf.md, "Lists with a shape").
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
//! `rerank = 0` they are the approximations (int8; 4-bit with
//! [`Codes::Pq4`]; int8 with [`Codes::Pq4I8`] and `refine > 0`).

use std::path::Path;

use crate::bail;
use crate::buf::Buf;
use crate::centroid::Panels;
use crate::error::{checked_mul, strided_len, Error, Result, Status};
use crate::format::{self, SectionOut};
use crate::isa::{self, Isa};
use crate::kernels::centroid::TOP;
use crate::kernels::dense as kd;
use crate::kernels::matmul::{self as km, Rows};
use crate::matmul::{topk_segment, topk_set, TopK, TOPK_PAD_ID};
use crate::quant::pq4::Pq4Lut;
use crate::quant::qdot::{self, NibPanels, QPanels, QQuery, QRows, Variant};
use crate::rng::SplitMix64;
use crate::source::labels::LabelState;

pub use crate::source::params::ivf::*;

mod batch;
mod build;
mod calibrate;
pub(crate) mod family;
mod file;
mod kmeans;
mod labels;
mod pq;
mod search;
mod split;
mod weights;
pub use calibrate::Calibration;
#[cfg(test)]
use kmeans::list_spread;
pub use kmeans::LIST_DIRS;
use kmeans::{assign, kmeans, list_shapes, CentView, KMeans, ListRows, Points, Shapes, NO_TRACK};
pub use pq::{default_m as default_pq_m, TRAIN_ROWS as PQ_TRAIN_ROWS};
use search::*;
use weights::check_row_weights;
pub use weights::row_weights_from_hits;

/// Per-query counts from [`Ivf::search_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Rows scored from codes (or exactly, with [`Codes::None`]).
    pub scanned: u64,
    /// Rows re-scored exactly.
    pub reranked: u64,
    /// Lists visited.
    pub lists: u64,
    /// Rows re-scored from int8 codes after the 4-bit pass
    /// ([`Codes::Pq4I8`]).
    pub refined: u64,
}

impl SearchStats {
    /// Adds another call's counts.
    pub(crate) fn add(&mut self, o: &SearchStats) {
        self.scanned += o.scanned;
        self.reranked += o.reranked;
        self.lists += o.lists;
        self.refined += o.refined;
    }
}

/// `round(4 sqrt(rows))`, at least 1 and at most `rows`.
pub fn auto_nlist(rows: usize) -> usize {
    ((4.0 * (rows as f64).sqrt()).round() as usize).clamp(1, rows.max(1))
}

/// The rows used for exact scores.
enum Exact {
    /// f32 rows in list order (`rows * dim`, stride `dim`).
    Owned(Vec<f32>),
    /// The caller's W, by original id (kept alive by the caller: the
    /// contract of [`Ivf::build_borrowed`] / [`Ivf::load_borrowed`]).
    Borrowed { w: Buf<f32>, stride: usize },
    /// The rows of the index whose candidate source these lists are, in
    /// its bf16, f16 or int8 storage, by original id: the re-rank scores
    /// them with the gathered matmul's kernel of that storage, as the
    /// index's scorer does, so W is held once, in the index's storage. The
    /// index keeps them alive and drops them after its source.
    Narrow { w: NarrowRows, stride: usize },
}

/// The index's rows behind [`Exact::Narrow`].
#[derive(Clone)]
enum NarrowRows {
    /// bf16 bit patterns.
    Bf16(Buf<u16>),
    /// IEEE binary16 bit patterns.
    F16(Buf<u16>),
    /// Row `r` is `scales[r] * w[r]`.
    I8 { w: Buf<i8>, scales: Buf<f32> },
}

/// Rows of the layer the lists re-rank from without owning them: the
/// caller's (or the index's) f32 W, or the index's rows in a narrower
/// storage ([`Exact::Narrow`]); each at its row stride.
pub(crate) enum RowsIn<'a> {
    F32(&'a [f32], usize),
    Narrow(crate::matmul::Weights<'a>, usize),
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
    /// unit of |q| (see `kmeans::spread_of`).
    spread: Vec<f32>,
    /// List `l` holds positions `offsets[l] .. offsets[l + 1]`.
    offsets: Vec<u32>,
    /// Original row id of each position.
    ids: Vec<u32>,
    /// Bias by position (empty without a bias).
    bias_pos: Vec<f32>,
    exact: Exact,
    /// int8 codes by position ([`Codes::I8`], [`Codes::Pq4I8`]).
    codes: Option<QRows>,
    /// 4-bit residual codes by list ([`Codes::Pq4`], [`Codes::Pq4I8`]).
    pq: Option<Box<pq::ListPq>>,
    /// int8 codes of the centroids: the lists are chosen from these, and
    /// they are all the index keeps of the centroids' `w` part (the f32
    /// centroids are only needed while building; see `memory_bytes`).
    cq: QRows,
    /// The same codes as panels for the multi-query kernels (AVX-512:
    /// [`QPanels`]), used by batches, with at least [`PANEL_MIN_LISTS`]
    /// lists; derived from `cq`, never stored in the file.
    cpan: Option<QPanels>,
    /// The same codes as 4-bit panels with an error bound
    /// ([`NibPanels`]), with at least [`PANEL_MIN_LISTS`] lists: one
    /// query's adaptive selection bounds every list's estimate from them
    /// and scores from `cq` only the lists the bound cannot set aside
    /// (docs/ivf.md, "The centroid pass in 4 bits"); derived from `cq`,
    /// never stored in the file.
    cnib: Option<NibPanels>,
    /// The lists' shapes ([`Shape`]); `None` in files written before them
    /// (their queries rank lists by `spread` alone).
    shape: Option<Box<Shape>>,
    /// The int8 codes of the lists that batches have shared, as panels
    /// ([`ListPanels`]); never stored in the file.
    lpan: ListPanels,
    /// The lists' shape directions as panels, once a batch has shared
    /// their pass ([`Ivf::dir_panels`]); never stored in the file.
    dpan: std::sync::OnceLock<Box<QPanels>>,
    /// Label training ([`Ivf::train_labels`]): lists then hold training
    /// labels too, so a row may stand in several lists (positions outnumber
    /// rows) and results are deduplicated by id.
    labels: Option<Box<LabelState>>,
    /// The largest |value| a query's arithmetic reads from the index (the
    /// `A` of [`crate::error::score_limit`]); derived, never stored.
    vmax: f32,
}

/// The int8 codes of each list as panels ([`QPanels`]: the AVX-512
/// multi-query kernels' layout), kept once a batch has re-laid them. A
/// batch scores a list that four or more of its queries visit from
/// panels, four queries per load of its codes; re-laying the list for
/// every batch is a transposing copy from L3 or DRAM that the multiply
/// does not hide, on wide rows a large part of the batch (docs/ivf.md,
/// "Lists kept as panels"). Only a list a batch shares is kept, so an
/// index whose batches rarely share their lists (one list a query among
/// thousands, as W1) keeps few; at most every list's codes a second
/// time, plus 8 bytes a row and the padding of each list to 16 rows.
/// The bytes are the re-lay's on every tier and thread (the vector
/// re-lay is tested bit for bit against the scalar one); a query reads a
/// kept list without a lock, and of two threads that re-lay the same
/// list at once the first to finish keeps it. Each kept list is re-laid
/// into buffers of its own size, not a batch's scratch.
pub(super) struct ListPanels(Vec<std::sync::OnceLock<Box<QPanels>>>);

impl ListPanels {
    /// No list kept yet: room for `nlist` where the lists have int8 codes
    /// (none otherwise: only their shared passes read panels).
    fn new(nlist: usize, codes: bool) -> Self {
        Self(if codes {
            (0..nlist).map(|_| std::sync::OnceLock::new()).collect()
        } else {
            Vec::new()
        })
    }

    /// List `l`'s panels: the kept ones, else `relay()`'s, kept (if
    /// another thread keeps its own first, the same bytes, this call's are
    /// dropped). The lists have int8 codes.
    pub(super) fn get_or_relay(&self, l: usize, relay: impl FnOnce() -> QPanels) -> &QPanels {
        let c = &self.0[l];
        if let Some(p) = c.get() {
            return p;
        }
        let _ = c.set(Box::new(relay()));
        c.get().expect("kept")
    }

    fn memory_bytes(&self) -> usize {
        self.0
            .iter()
            .filter_map(|c| c.get())
            .map(|p| p.memory_bytes() + std::mem::size_of::<QPanels>())
            .sum::<usize>()
            + self.0.len() * std::mem::size_of::<std::sync::OnceLock<Box<QPanels>>>()
    }
}

/// The lists' shapes (`kmeans::list_shapes`; module docs, "Lists with a
/// shape"): the adaptive selection's query-dependent spreads.
pub(super) struct Shape {
    /// `LIST_DIRS` scaled directions per list, as int8 rows (scored with
    /// the centroid pass's quantised query).
    dirs: QRows,
    /// Per list, the isotropic rest `2 ln n rho` of its squared spread.
    kappa: Vec<f32>,
    /// Per list, the far-row floor of its spread (per unit of |q|).
    far: Vec<f32>,
}

impl Shape {
    fn memory_bytes(&self) -> usize {
        self.dirs.memory_bytes() + 4 * (self.kappa.len() + self.far.len())
    }
}

/// Lists from which the index keeps its centroid codes a second time, as
/// panels ([`QPanels`]), for the AVX-512 multi-query kernels: a batch scores
/// four queries per load of the codes, in under half the time per (centroid,
/// query) (`benches/qdot.md`; one query alone gains nothing), which pays where the centroid pass is a large part of a query (many
/// lists, few rows per list: 3,274 centroids against about 450 list rows
/// at `nprobe` 1 on W1). Below it the pass is cheap beside the lists, and
/// the copy (`4 / sqrt(rows)` of the codes at the default `nlist`) would
/// break the memory rule of `memory_bytes` on small layers.
pub const PANEL_MIN_LISTS: usize = 1024;

/// [`Ivf::cnib`]: the 4-bit panels of `cq` when it has [`PANEL_MIN_LISTS`]
/// rows (below it the int8 pass is a small part of a query), with the
/// lists' bias and spread as the row terms: their bounds are bounds of the
/// list estimates (`search.rs`, `finish_estimates`).
fn centroid_nibbles(cq: &QRows, cbias: &[f32], spread: &[f32]) -> Result<Option<NibPanels>> {
    Ok(if cq.rows() >= PANEL_MIN_LISTS {
        Some(NibPanels::new(cq, cbias, spread)?)
    } else {
        None
    })
}

/// [`Ivf::cpan`]: the panels of `cq` when it has [`PANEL_MIN_LISTS`] rows.
fn centroid_panels(cq: &QRows) -> Result<Option<QPanels>> {
    Ok(if cq.rows() >= PANEL_MIN_LISTS {
        Some(QPanels::new(cq)?)
    } else {
        None
    })
}

impl Ivf {
    /// The lists' shape directions as panels, re-laid by the first call
    /// that asks and kept (a batch's queries that project onto every
    /// list's directions score them four per load; kept, they are not
    /// re-laid per batch, nor by each thread of a block split over
    /// threads); `None` without shapes. `v`: the caller's tier (the re-lay
    /// writes the same bytes on every tier).
    pub(super) fn dir_panels(&self, v: Variant) -> Option<&QPanels> {
        let d = self.shape_dirs()?;
        if let Some(p) = self.dpan.get() {
            return Some(p);
        }
        let mut p = QPanels::default();
        p.set_rows(Some(v), d, 0, d.rows()).ok()?;
        let _ = self.dpan.set(Box::new(p));
        self.dpan.get().map(|p| &**p)
    }

    /// The largest |value| that scoring a query reads from the index: the
    /// exact rows and biases, the list constants (centroid bias, spread),
    /// the int8 code scales times 127 (the largest value each code row
    /// stands for) and the PQ centroids.
    fn value_max(&self) -> f32 {
        use crate::error::max_abs_rows;
        let all = |v: &[f32]| max_abs_rows(v, 1, v.len(), v.len());
        let rows = match &self.exact {
            Exact::Owned(v) => all(v),
            Exact::Borrowed { w, stride } => max_abs_rows(w, self.rows, self.dim, *stride),
            Exact::Narrow { .. } => self.narrow_max(),
        };
        let scales = |q: &QRows| all(q.scales()) * 127.0;
        rows.max(all(&self.bias_pos))
            .max(all(&self.cbias))
            .max(all(&self.spread))
            .max(scales(&self.cq))
            .max(self.codes.as_ref().map_or(0.0, scales))
            .max(self.shape.as_ref().map_or(0.0, |sh| {
                scales(&sh.dirs)
                    .max(all(&sh.far))
                    .max(all(&sh.kappa).sqrt())
            }))
            .max(
                self.pq
                    .as_ref()
                    .map_or(0.0, |p| all(p.codebook().centroids())),
            )
    }

    /// `NonFinite` when a query of `q` could make this index's scores
    /// overflow f32 ([`crate::error::score_limit`]).
    pub(super) fn check_query_range(&self, q: &[f32], nq: usize, q_stride: usize) -> Result<()> {
        crate::error::check_query_range(q, nq, self.dim, q_stride, self.vmax, "q")
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Whether the rows have a bias (the lists score `[w, b]`).
    pub fn has_bias(&self) -> bool {
        !self.bias_pos.is_empty()
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
    /// The lists' shapes (module docs, "Lists with a shape"): the
    /// `LIST_DIRS` scaled directions of every list as int8 rows (list `l`'s
    /// at rows `l * LIST_DIRS ..`), and per list its isotropic rest `kappa`
    /// and far-row floor; `None` for an index loaded from a file written
    /// before them.
    pub fn list_shapes(&self) -> Option<(&QRows, &[f32], &[f32])> {
        self.shape
            .as_ref()
            .map(|s| (&s.dirs, &s.kappa[..], &s.far[..]))
    }

    /// Per list, the reach term of its estimate (`kmeans::spread_of` in the
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
        matches!(self.exact, Exact::Borrowed { .. } | Exact::Narrow { .. })
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
                Exact::Borrowed { .. } | Exact::Narrow { .. } => 0,
            }
            + self.codes.as_ref().map_or(0, |c| c.memory_bytes())
            + self.pq.as_ref().map_or(0, |c| c.memory_bytes())
            + self.cq.memory_bytes()
            + self.cpan.as_ref().map_or(0, |p| p.memory_bytes())
            + self.cnib.as_ref().map_or(0, |p| p.memory_bytes())
            + self.shape.as_ref().map_or(0, |p| p.memory_bytes())
            + self.lpan.memory_bytes()
            + self.dpan.get().map_or(0, |p| p.memory_bytes())
            + std::mem::size_of::<Ivf>()
    }

    /// W (`rows x dim`, compact) and the bias, by original row id, from
    /// the exact rows (used to load an IVF file of lshk 0.2 as an index).
    pub(crate) fn rows_by_id(&self) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
        let (n, d) = (self.rows, self.dim);
        let mut w = crate::error::try_vec::<f32>(
            crate::error::checked_mul(n, d, "rows * dim")?,
            "rows by id",
        )?;
        let mut b = if self.has_bias() {
            Some(vec![0.0f32; n])
        } else {
            None
        };
        let (ex, stride, by_id) = self.f32_rows()?;
        for (p, &id) in self.ids.iter().enumerate() {
            let id = id as usize;
            let src = if by_id { id * stride } else { p * d };
            w[id * d..(id + 1) * d].copy_from_slice(&ex[src..src + d]);
            if let Some(b) = &mut b {
                b[id] = self.bias_pos[p];
            }
        }
        Ok((w, b))
    }

    /// The exact rows as f32 (`rows`, their stride, whether they are by
    /// original id rather than by position): the owned copy or borrowed W
    /// in place, the index's narrower rows decoded (a temporary copy, for
    /// label training and conversions, never on the query path).
    pub(super) fn f32_rows(&self) -> Result<(std::borrow::Cow<'_, [f32]>, usize, bool)> {
        use std::borrow::Cow;
        Ok(match &self.exact {
            Exact::Owned(v) => (Cow::Borrowed(&v[..]), self.dim, false),
            Exact::Borrowed { w, stride } => (Cow::Borrowed(&w[..]), *stride, true),
            Exact::Narrow { w, stride } => {
                let (n, d) = (self.rows, self.dim);
                let mut out = crate::error::try_vec::<f32>(
                    crate::error::checked_mul(n, d, "rows * dim")?,
                    "decoded rows",
                )?;
                for (r, o) in out.chunks_exact_mut(d).enumerate() {
                    let at = r * stride;
                    match w {
                        NarrowRows::Bf16(v) => {
                            for (x, &b) in o.iter_mut().zip(&v[at..at + d]) {
                                *x = crate::matmul::bf16_to_f32(b);
                            }
                        }
                        NarrowRows::F16(v) => {
                            for (x, &b) in o.iter_mut().zip(&v[at..at + d]) {
                                *x = crate::matmul::f16_to_f32(b);
                            }
                        }
                        NarrowRows::I8 { w, scales } => {
                            for (x, &b) in o.iter_mut().zip(&w[at..at + d]) {
                                *x = scales[r] * b as f32;
                            }
                        }
                    }
                }
                (Cow::Owned(out), d, true)
            }
        })
    }

    /// The largest |value| of the [`Exact::Narrow`] rows (0 otherwise).
    fn narrow_max(&self) -> f32 {
        let Exact::Narrow { w, stride } = &self.exact else {
            return 0.0;
        };
        let (n, d) = (self.rows, self.dim);
        let mut m = 0f32;
        for r in 0..n {
            let at = r * stride;
            let rm = match w {
                NarrowRows::Bf16(v) => v[at..at + d]
                    .iter()
                    .fold(0f32, |a, &b| a.max(crate::matmul::bf16_to_f32(b).abs())),
                NarrowRows::F16(v) => v[at..at + d]
                    .iter()
                    .fold(0f32, |a, &b| a.max(crate::matmul::f16_to_f32(b).abs())),
                NarrowRows::I8 { w, scales } => {
                    let a = w[at..at + d]
                        .iter()
                        .fold(0i32, |a, &b| a.max((b as i32).abs()));
                    scales[r].abs() * a as f32
                }
            };
            m = m.max(rm);
        }
        m
    }

    /// Re-ranks from the index's rows in `rows` instead of the f32 rows the
    /// lists were built with (which need not outlive the call): the lists
    /// of an index on bf16, f16 or int8 storage. Lists with
    /// [`Codes::None`] scan exact f32 rows and keep their own.
    ///
    /// # Safety
    /// `rows` (the index's weights) stay alive and unchanged while the
    /// lists live.
    pub(crate) unsafe fn use_rows(&mut self, rows: RowsIn<'_>) -> Result<()> {
        use crate::matmul::Weights;
        if self.codes.is_none() && self.pq.is_none() {
            bail!(
                InvalidArgument,
                "lists without codes scan their own exact f32 rows"
            );
        }
        let len = |stride: usize| strided_len(self.rows, self.dim, stride, "index rows");
        // SAFETY (every Buf::borrowed below): this function's contract.
        self.exact = match rows {
            RowsIn::F32(w, stride) => Exact::Borrowed {
                w: unsafe { Buf::borrowed(&w[..len(stride)?]) },
                stride,
            },
            RowsIn::Narrow(w, stride) => {
                let n = len(stride)?;
                let w = match w {
                    Weights::F32(_) => bail!(InvalidArgument, "f32 rows are not narrow"),
                    Weights::Bf16(v) => NarrowRows::Bf16(unsafe { Buf::borrowed(&v[..n]) }),
                    Weights::F16(v) => NarrowRows::F16(unsafe { Buf::borrowed(&v[..n]) }),
                    Weights::I8 { w, scales } => NarrowRows::I8 {
                        w: unsafe { Buf::borrowed(&w[..n]) },
                        scales: unsafe { Buf::borrowed(&scales[..self.rows]) },
                    },
                };
                Exact::Narrow { w, stride }
            }
        };
        self.vmax = self.value_max();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Ivf` is `Send + Sync` by derivation (its borrowed W is a
    /// [`Buf`]), not by an `unsafe impl` of its own.
    #[test]
    fn ivf_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Ivf>();
    }

    /// The 4-bit centroid pass (`search.rs`, `list_bounds`): on every
    /// variant with a 4-bit kernel, every list's bounded estimate is at
    /// least its exact one (`list_estimates`), the first list found from
    /// the bounds is the exact estimates' best (ties by smaller id) and the
    /// list a fixed selection of one picks, and a list made exact has the
    /// exact estimate's bits. Queries: random,
    /// the layer's rows (a centroid's own direction, where the 4-bit and
    /// int8 scores differ most), their negatives, zero, and huge and tiny
    /// scales.
    #[test]
    fn centroid_bounds_hold_and_the_first_list_is_exact() {
        use crate::rng::SplitMix64;
        use search::{argmax_first, Scratch};
        let nlist = PANEL_MIN_LISTS + 29;
        let (rows, dim) = (6 * nlist, 40);
        let mut rng = SplitMix64::new(5);
        let w: Vec<f32> = (0..rows * dim).map(|_| rng.next_normal() as f32).collect();
        let b: Vec<f32> = (0..rows).map(|_| rng.next_normal() as f32).collect();
        let p = IvfParams {
            nlist: nlist as u32,
            iters: 1,
            ..Default::default()
        };
        let ivf = Ivf::build(&w, Some(&b), rows, dim, dim, &p).unwrap();
        assert!(ivf.cnib.is_some());
        let mut queries: Vec<Vec<f32>> = (0..40)
            .map(|_| (0..dim).map(|_| rng.next_normal() as f32).collect())
            .collect();
        for r in 0..20 {
            let row = w[r * dim..(r + 1) * dim].to_vec();
            queries.push(row.iter().map(|x| -x).collect());
            queries.push(row.iter().map(|x| x * 1e6).collect());
            queries.push(row.iter().map(|x| x * 1e-6).collect());
            queries.push(row);
        }
        queries.push(vec![0.0; dim]);
        let mut ran = 0;
        for v in Variant::all() {
            let (mut sb, mut se) = (Scratch::default(), Scratch::default());
            let sel = crate::kernels::select::kernels(v.tier());
            for (qi, q) in queries.iter().enumerate() {
                // No bound for the zero query (its scale is 0: the int8
                // pass), one for every other where the variant has a kernel.
                let zero = q.iter().all(|&x| x == 0.0);
                let bounded = ivf.list_bounds(v, q, &mut sb);
                assert_eq!(
                    bounded.is_some(),
                    NibPanels::has_kernel(v) && !zero,
                    "{v:?} query {qi}"
                );
                if bounded.is_none() {
                    continue;
                }
                ran += 1;
                let qn = ivf.list_estimates(v, q, &mut se);
                assert_eq!(bounded, Some(qn), "{v:?} query {qi}: the norm");
                let ex = se.cscore[..nlist].to_vec();
                let (ub, ex) = (&sb.cscore[..nlist], &ex[..]);
                for l in 0..nlist {
                    assert!(
                        ub[l] >= ex[l],
                        "{v:?} query {qi} list {l}: {} < {}",
                        ub[l],
                        ex[l]
                    );
                }
                let first = ivf.first_exact(v, sel, qn, &mut sb);
                assert_eq!(first, argmax_first(sel, ex), "{v:?} query {qi}: first list");
                // The fixed selection of one list picks the same (its ties
                // by smaller id too).
                assert_eq!(ivf.select_fixed(1, &mut se), 1);
                assert_eq!(se.lists[0] as usize, first, "{v:?} query {qi}: nprobe 1");
                // Every list made exact: the estimates' bits.
                sb.rlist.clear();
                sb.rlist.extend(
                    (0..nlist as u32)
                        .filter(|&l| sb.known[l as usize / 64] & (1u64 << (l % 64)) == 0),
                );
                ivf.refine_lists(v, qn, &mut sb);
                let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&sb.cscore[..nlist]),
                    bits(ex),
                    "{v:?} query {qi}: refined"
                );
            }
        }
        let with_kernel = Variant::all()
            .into_iter()
            .filter(|&v| NibPanels::has_kernel(v));
        assert_eq!(ran, with_kernel.count() * (queries.len() - 1));
    }

    /// `theta_update` keeps what pushing every score above the running
    /// k-th one by one keeps, on both of its paths (short lists inline,
    /// long ones through the selection masks of every tier), with and
    /// without skipping scores already held, from an empty or a full heap.
    /// (A pre-filter one step too strict fails it.)
    #[test]
    fn theta_update_equals_one_push_per_passing_score() {
        use search::{theta_of, theta_push, theta_update};
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Coarse values near 0, so that ties, repeated scores and
            // scores just above the k-th occur.
            ((x >> 40) % 40) as f32 * 0.25 - 5.0
        };
        for len in [
            0usize, 1, 15, 16, 17, 63, 127, 128, 129, 160, 300, 1000, 1100,
        ] {
            for k in [1usize, 10, 64] {
                for multi in [false, true] {
                    // Empty; k random scores; k zeros (the k-th score then
                    // stays at 0 while the first k positive scores come in,
                    // so every score just above it matters).
                    for prefill in 0..3 {
                        let start: Vec<f32> = {
                            let mut h = Vec::new();
                            for _ in 0..[0, k, k][prefill] {
                                let v = if prefill == 2 { 0.0 } else { next() };
                                theta_push(&mut h, k, v);
                            }
                            h
                        };
                        let sc: Vec<f32> = (0..len).map(|_| next()).collect();
                        let mut want = start.clone();
                        for &v in &sc {
                            if v > theta_of(&want, k) && !(multi && want.contains(&v)) {
                                theta_push(&mut want, k, v);
                            }
                        }
                        let mut want_sorted = want.clone();
                        want_sorted.sort_by(f32::total_cmp);
                        for tier in crate::isa::Isa::supported() {
                            let sel = crate::kernels::select::kernels(tier);
                            let (mut got, mut masks) = (start.clone(), Vec::new());
                            theta_update(&mut got, k, &sc, multi, sel, &mut masks);
                            got.sort_by(f32::total_cmp);
                            assert_eq!(got, want_sorted, "{tier:?} len {len} k {k} multi {multi}");
                        }
                    }
                }
            }
        }
    }

    /// `sort_rank_keys` gives `sort_unstable`'s order for keys pushed in
    /// ascending id order: ties, both zeros, the extremes, scores sharing
    /// some of their bytes (skipped digits) and every size around the
    /// cut-over to the radix passes.
    #[test]
    fn sort_rank_keys_is_sort_unstable_for_ascending_ids() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let special = [0.0f32, -0.0, 1.0, -1.0, f32::MAX, f32::MIN, 1e-45, -1e-45];
        let mut tmp = Vec::new();
        for n in [0usize, 1, 63, 64, 65, 200, 777, 3000] {
            for kind in 0..4 {
                let keys: Vec<u64> = (0..n)
                    .map(|i| {
                        let r = next();
                        let s = match kind {
                            0 => ((r >> 16) % 7) as f32 * 0.5 - 1.5,
                            1 => special[(r >> 8) as usize % special.len()],
                            2 => 1.0 + ((r >> 20) % 256) as f32 / 1024.0,
                            _ => f32::from_bits((r >> 33) as u32) - 0.5,
                        };
                        rank_key(s, i as u32 * 3 + (r % 3) as u32)
                    })
                    .collect();
                let mut want = keys.clone();
                want.sort_unstable();
                let mut got = keys;
                sort_rank_keys(&mut got, &mut tmp);
                assert_eq!(got, want, "n = {n}, kind = {kind}");
            }
        }
    }

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
        for n in [1usize, 2, 15, 16, 17, 33, 200, 1000, 3275] {
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
            for tier in crate::isa::Isa::supported() {
                let got = argmax_first(crate::kernels::select::kernels(tier), &scores);
                // -0.0 == 0.0 for the argmax: the first of either.
                assert_eq!(scores[got], scores[want], "{tier:?} n = {n}");
                assert!(
                    scores[..got].iter().all(|&s| s < scores[got]),
                    "{tier:?} n = {n}"
                );
            }
        }
    }

    /// The spread of a list with one row far out (a hub) covers that row:
    /// at least `FAR_ROW_Z` of its own projection's deviations, far above
    /// what the mean residual gives; a list of rows alike keeps the
    /// Gaussian extreme term, which is the larger there.
    #[test]
    fn list_spread_covers_the_farthest_row() {
        let (dim, n) = (50usize, 47usize);
        let cent = vec![0.0f32; dim];
        // n rows of +-0.1 on every coordinate (|x| = 0.1 sqrt(dim)).
        let mut w: Vec<f32> = (0..n * dim)
            .map(|i| {
                if (i * 7 + i / dim) % 2 == 0 {
                    0.1
                } else {
                    -0.1
                }
            })
            .collect();
        let ids: Vec<u32> = (0..n as u32).collect();
        let offsets = [0u32, n as u32];
        let alike = list_spread(&rows_of(&w, &cent, &offsets, &ids))[0];
        let bulk = (0.1f64 * (2.0 * (n as f64).ln()).sqrt()) as f32;
        assert!((alike - bulk).abs() <= 1e-6, "{alike} vs {bulk}");
        // One row 30 times farther out.
        w[..dim].iter_mut().for_each(|x| *x *= 30.0);
        let far = 3.0f32;
        let hub = list_spread(&rows_of(&w, &cent, &offsets, &ids))[0];
        let mean_only = {
            let ss = (n - 1) as f64 * 0.01 * dim as f64 + 9.0 * dim as f64;
            ((ss / n as f64 / dim as f64).sqrt() * (2.0 * (n as f64).ln()).sqrt()) as f32
        };
        assert!(hub >= 1.5 * far * 0.999_999, "{hub} vs {}", 1.5 * far);
        assert!(hub > 1.5 * mean_only, "{hub} vs the mean-only {mean_only}");
    }

    /// One list's rows (no bias) for `list_spread` / `list_shapes`.
    fn rows_of<'a>(
        w: &'a [f32],
        cent: &'a [f32],
        offsets: &'a [u32],
        ids: &'a [u32],
    ) -> ListRows<'a> {
        let dim = cent.len() / (offsets.len() - 1);
        ListRows {
            w,
            bias: None,
            dim,
            stride: dim,
            cent,
            xdim: dim,
            offsets,
            ids,
        }
    }

    /// The shaped spread of a list whose rows stretch along one axis (3x,
    /// so that the far-row floor stays below both) is larger than the
    /// plain spread along that axis and smaller across it; for a round
    /// list it is within 20 % of the plain spread.
    #[test]
    fn list_shapes_follow_the_rows() {
        let (dim, n) = (32usize, 400usize);
        let mut r = SplitMix64::new(5);
        let shaped = |w: &[f32], q: &[f32]| {
            let ids: Vec<u32> = (0..n as u32).collect();
            let (offsets, cent) = ([0u32, n as u32], vec![0.0f32; dim]);
            let lr = rows_of(w, &cent, &offsets, &ids);
            let plain = list_spread(&lr)[0];
            let Shapes {
                dirs: g,
                kappa,
                far,
                spread,
            } = list_shapes(&lr, 2);
            assert_eq!(spread[0].to_bits(), plain.to_bits());
            let qn = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            let mut v = kappa[0] * qn * qn;
            for gj in g.chunks_exact(dim) {
                let p: f32 = gj.iter().zip(q).map(|(a, b)| a * b).sum();
                v += p * p;
            }
            ((v.sqrt() / qn).max(far[0]), plain)
        };
        let round: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let axis =
            |j: usize| -> Vec<f32> { (0..dim).map(|i| f32::from(u8::from(i == j))).collect() };
        let (s, p) = shaped(&round, &axis(3));
        assert!((s / p - 1.0).abs() < 0.2, "round: shaped {s}, plain {p}");
        let mut long = round.clone();
        for row in long.chunks_exact_mut(dim) {
            row[0] *= 3.0;
        }
        let (along, p) = shaped(&long, &axis(0));
        let (across, _) = shaped(&long, &axis(5));
        assert!(along > 1.5 * p, "along: shaped {along}, plain {p}");
        assert!(across < 0.95 * p, "across: shaped {across}, plain {p}");
    }
}
