//! The hashing forest: a candidate generator for the
//! selective softmax, built from the class weights.
//!
//! # Build
//! `L` trees over the `n` class rows of W. Each tree starts with one node
//! holding every class and splits a node while it holds at least `B`
//! (`leaf_size`) classes: two of its classes `a`, `b` are drawn, and the
//! node's classes are split by the perpendicular bisector of `w_a` and
//! `w_b` (the max-margin hyperplane between the two points): with the
//! normal `h = w_a - w_b` (each coordinate computed in f64 and stored as
//! f32) and the offset `o = sum_k (w_ak^2 - w_bk^2) / 2` (f64, in
//! coordinate order), a vector `x` goes LEFT (`a`'s side) when
//! `s(x) = sum_k h_k x_k > o` (f64, coordinate order), else right. Classes
//! keep their relative order within each child (stable partition). When a
//! draw sends every class to one side (duplicates), up to 8 draws are
//! tried; then the node is split in the middle of its class list (first
//! half left), so every leaf holds fewer than `B` classes.
//!
//! **Unit rows** (`normalize_rows`, the default): the trees are built
//! over the unit rows `u = w / |w|` (`|w|` in f64, coordinate order; a
//! zero row stays zero) instead of the rows themselves. The split plane of
//! `a`, `b` is then the bisector of two unit vectors, which passes through
//! the origin: `h_k = (w_ak / |w_a| - w_bk / |w_b|)` (f64, stored as f32)
//! and `o = 0` exactly, so a class's side `s(w_j) > 0` and a query's side
//! `s(x) > 0` depend on directions only. Without it, a few rows whose
//! norms grow 20-40x during training (docs/training.md, "HF pools") pull
//! every bisector towards them and the trees become lopsided: a sample's
//! pool then is a whole large parent node. Nothing else changes (the
//! draws, the walk, the cosine ranking with the real W).
//!
//! Draws: tree `t` has its own generator `SplitMix64::new(seed ^ (t + 1) *
//! 0x9E37_79B9_7F4A_7C15)`; nodes are split depth-first, left child first,
//! and a split draws `i = below(c)`, then `j = below(c - 1)`, `j += (j >=
//! i)` (two distinct positions of the node's `c` classes in its current
//! order). Trees are built in parallel, one thread per tree, so the forest
//! is identical for every thread count (and tier: nothing is vectorised).
//!
//! # Candidates of a sample
//! For a sample `x` and a set size `Q`: in each tree, walk from the root
//! (side `s(x) > o`: left) to the first node holding fewer than `Q`
//! classes, and take all classes under its PARENT (the root's if the root
//! itself holds fewer; a leaf still holding `Q` or more is taken itself).
//! Pool the trees' classes (deduplicated), and keep the `Q` with the
//! largest cosine `w_j . x / |w_j|` (f64, coordinate order; `|x|` is common
//! to all and left out; a zero row scores 0; ties: smaller id). `S(x)` is
//! returned ascending. The W given to a query may differ from the one the
//! forest was built on (training moves W between rebuilds); only its shape
//! must match.
//!
//! # Adaptive allocation (the confidence threshold `τcp` of HF-A)
//! With a confidence `τcp` in (0, 1] ([`ForestQuery::confidence`]; 0 =
//! off), a sample keeps fewer of its `Q` classes where the model is sure:
//! the `Q` classes are ranked by logit `z_j = w_j . x (+ b_j` when a bias
//! is given`)` (the dot product of the cosine, f64, coordinate order;
//! ties: smaller id), `e_j = exp(z_j - z_max)` (f64) is summed in that
//! order, and the set is the shortest prefix of the ranking whose sum
//! reaches `τcp` times the whole sum (its softmax mass within the set),
//! and at least `min_keep` classes (1; an index query keeps at least `k`).
//! `τcp = 1` keeps every class whose `e_j` is not 0. The set is then
//! returned ascending, as without it.
//!
//! # Union with a cap
//! `S(X) = ∪ S(x)` over a batch, each class with its count `c_j` (the
//! samples whose `S(x)` holds it). When `|S(X)| > cap`, `cap` classes are
//! drawn without replacement with probabilities proportional to `c_j`,
//! renormalised after each draw (successive sampling), computed as
//! Efraimidis-Spirakis keys `k_j = ln(u_j) / c_j` with `u_j =
//! SplitMix64::new(seed ^ (j + 1) * 0x9E37_79B9_7F4A_7C15).next_f64_open()`,
//! keeping the `cap` largest keys (ties: smaller id).
//!
//! # Rebuild, save and load
//! [`Forest::rebuild`] builds again from a new W (same shape, same
//! parameters unless a new seed is given). [`Forest::save`] writes an lshk
//! container ([`crate::format`], kind [`KIND_FOREST`]); [`Forest::load`]
//! reads it back and checks every invariant (`BadFileFormat`).

use std::path::Path;

use crate::bail;
use crate::error::{first_non_finite, strided_len, try_vec, Error, Result, Status};
use crate::format::{self, cast_slice, Container, SectionOut};
use crate::rng::SplitMix64;

pub(crate) mod family;
pub use crate::source::params::forest::{ForestParams, ForestQuery};

/// The container kind of a forest file.
pub const KIND_FOREST: u32 = 14;
/// Version of the forest's `FPARAMS` record written for a forest over the
/// raw rows (7 values: version, rows, dim, trees, leaf_size, seed, trees
/// stored), readable by every library that reads forests.
pub const FOREST_VERSION: u64 = 1;
/// Version of the `FPARAMS` record of a unit-row forest: the version-1
/// values and an 8th, the flags (bit 0: `normalize_rows`; other bits 0).
/// A library that reads only version 1 refuses such a file, rightly: it
/// would not know that the planes are unit-row bisectors.
pub const FOREST_VERSION_FLAGS: u64 = 2;
/// `FPARAMS` flag bit: the trees were built over the unit rows.
const FLAG_NORMALIZE_ROWS: u64 = 1;
/// Largest number of trees.
pub const MAX_TREES: u32 = 4096;
/// Largest dimension.
pub const MAX_DIM: usize = 1 << 20;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const NO_CHILD: u32 = u32::MAX;
const MAX_DRAWS: usize = 8;

/// One node: classes `perm[start..end]` of its tree; children (both
/// `NO_CHILD` for a leaf) and its split plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
struct Node {
    start: u32,
    end: u32,
    left: u32,
    right: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct Tree {
    nodes: Vec<Node>,
    /// The classes, each node's contiguous.
    perm: Vec<u32>,
    /// Per inner node `i` (nodes with children, in node order): `dim`
    /// normal coordinates at `planes[p * dim ..]` and the offset `offs[p]`,
    /// where `p = plane_of[i]`.
    plane_of: Vec<u32>,
    planes: Vec<f32>,
    offs: Vec<f64>,
}

/// L hashing trees over the rows of a class-weight matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Forest {
    n: usize,
    dim: usize,
    p: ForestParams,
    trees: Vec<Tree>,
}

/// A node as [`Forest::tree`] lists it: `(start, end, left, right)`, its
/// classes `perm[start..end]`, children `u32::MAX` for a leaf.
pub type NodeInfo = (u32, u32, u32, u32);

/// Per-sample candidate sets: CSR, ids ascending within a sample.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForestResult {
    pub ids: Vec<u32>,
    pub offsets: Vec<usize>,
}

/// A query's buffers, kept per thread so that a query allocates nothing
/// once they have grown: the pool's bitmap over the rows (all zero between
/// samples: each sample clears the bits it set), the pool, its scored
/// entries (cosine, dot product, id) and the trim's `e_j`.
#[derive(Default)]
struct ForestScratch {
    seen: Vec<u64>,
    pool: Vec<u32>,
    scored: Vec<(f64, f64, u32)>,
    exps: Vec<f64>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<ForestScratch> =
        std::cell::RefCell::new(ForestScratch::default());
}

/// Checks a confidence threshold: finite and in [0, 1].
pub(crate) fn check_confidence(c: f32, what: impl std::fmt::Display) -> Result<()> {
    if !(0.0..=1.0).contains(&c) {
        bail!(
            InvalidArgument,
            "{what} is {c}; it must be in [0, 1] (0 = keep the whole set)"
        );
    }
    Ok(())
}

/// The adaptive allocation's trim of one sample's set (module
/// documentation): `set` holds (cosine, dot, id); it is left holding the
/// shortest prefix, by logit, whose `exp(z - z_max)` sum reaches
/// `confidence` of the whole, and at least `min_keep` entries.
fn trim_to_mass(
    set: &mut Vec<(f64, f64, u32)>,
    exps: &mut Vec<f64>,
    bias: Option<&[f32]>,
    confidence: f32,
    min_keep: usize,
) {
    if let Some(b) = bias {
        for e in set.iter_mut() {
            e.1 += b[e.2 as usize] as f64;
        }
    }
    set.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    let zmax = set[0].1;
    exps.clear();
    exps.extend(set.iter().map(|e| (e.1 - zmax).exp()));
    let total: f64 = exps.iter().sum();
    let target = confidence as f64 * total;
    let mut acc = 0f64;
    let mut keep = set.len();
    for (i, &e) in exps.iter().enumerate() {
        acc += e;
        if i + 1 >= min_keep && acc >= target {
            keep = i + 1;
            break;
        }
    }
    set.truncate(keep);
}

#[inline]
fn side(h: &[f32], o: f64, x: &[f32]) -> bool {
    let mut s = 0f64;
    for (&a, &b) in h.iter().zip(x) {
        s += a as f64 * b as f64;
    }
    s > o
}

fn check_w(w: &[f32], rows: usize, dim: usize, stride: usize) -> Result<()> {
    let need = strided_len(rows, dim, stride, "w")?;
    if w.len() < need {
        bail!(
            BufferTooSmall,
            "`w` holds {} floats, {rows} rows of stride {stride} need {need}",
            w.len()
        );
    }
    if let Some((r, j)) = first_non_finite(w, rows, dim, stride) {
        bail!(
            NonFinite,
            "w row {r} column {j} is {} (finite weights needed)",
            w[r * stride + j]
        );
    }
    Ok(())
}

/// `1 / |w_i|` per row (f64, coordinate order; 0 for a zero row): the
/// unit-row scales of a `normalize_rows` build.
fn inverse_norms(w: &[f32], n: usize, dim: usize, stride: usize) -> Result<Vec<f64>> {
    let mut inv = try_vec::<f64>(n, "row norms")?;
    for (i, v) in inv.iter_mut().enumerate() {
        let nn: f64 = w[i * stride..i * stride + dim]
            .iter()
            .map(|&a| a as f64 * a as f64)
            .sum();
        *v = if nn > 0.0 { 1.0 / nn.sqrt() } else { 0.0 };
    }
    Ok(inv)
}

/// Builds one tree; `inv` (unit rows) holds `1 / |w_i|` per row, empty
/// for the raw rows.
fn build_tree(
    w: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
    b: usize,
    seed: u64,
    inv: &[f64],
) -> Tree {
    let row = |i: u32| &w[i as usize * stride..i as usize * stride + dim];
    let mut rng = SplitMix64::new(seed);
    let mut t = Tree {
        nodes: vec![Node {
            start: 0,
            end: n as u32,
            left: NO_CHILD,
            right: NO_CHILD,
        }],
        perm: (0..n as u32).collect(),
        plane_of: vec![NO_CHILD],
        planes: Vec::new(),
        offs: Vec::new(),
    };
    let mut scratch: Vec<u32> = Vec::new();
    let mut sides: Vec<bool> = Vec::new();
    let mut h = vec![0f32; dim];
    // Depth-first, left child first: a stack of nodes to split.
    let mut stack = vec![0usize];
    while let Some(ni) = stack.pop() {
        let Node { start, end, .. } = t.nodes[ni];
        let (s, e) = (start as usize, end as usize);
        let c = e - s;
        if c < b {
            continue;
        }
        let mut found: Option<(usize, f64)> = None;
        for _ in 0..MAX_DRAWS {
            let i = rng.below(c as u64) as usize;
            let mut j = rng.below(c as u64 - 1) as usize;
            j += (j >= i) as usize;
            let (ia, ib) = (t.perm[s + i], t.perm[s + j]);
            let (ra, rb) = (row(ia), row(ib));
            let mut o = 0f64;
            if inv.is_empty() {
                for k in 0..dim {
                    let (a, bb) = (ra[k] as f64, rb[k] as f64);
                    h[k] = (a - bb) as f32;
                    o += (a * a - bb * bb) / 2.0;
                }
            } else {
                // Unit rows: the bisector passes through the origin (o = 0).
                let (sa, sb) = (inv[ia as usize], inv[ib as usize]);
                for k in 0..dim {
                    h[k] = (ra[k] as f64 * sa - rb[k] as f64 * sb) as f32;
                }
            }
            sides.clear();
            sides.extend(t.perm[s..e].iter().map(|&id| side(&h, o, row(id))));
            let left = sides.iter().filter(|&&x| x).count();
            if left > 0 && left < c {
                found = Some((left, o));
                break;
            }
        }
        let (left, o) = match found {
            Some(v) => {
                // stable partition by `sides`
                scratch.clear();
                scratch.extend(
                    t.perm[s..e]
                        .iter()
                        .zip(&sides)
                        .filter(|p| *p.1)
                        .map(|p| *p.0),
                );
                scratch.extend(
                    t.perm[s..e]
                        .iter()
                        .zip(&sides)
                        .filter(|p| !*p.1)
                        .map(|p| *p.0),
                );
                t.perm[s..e].copy_from_slice(&scratch);
                v
            }
            // Degenerate (every draw one-sided): split the list in half.
            // The plane then routes every query to the right child: an
            // all-zero normal with offset 0 (`0 > 0` is false).
            None => {
                h.fill(0.0);
                (c / 2, 0.0)
            }
        };
        let p = t.offs.len() as u32;
        t.planes.extend_from_slice(&h);
        t.offs.push(o);
        t.plane_of[ni] = p;
        let (l, r) = (t.nodes.len() as u32, t.nodes.len() as u32 + 1);
        t.nodes.push(Node {
            start,
            end: start + left as u32,
            left: NO_CHILD,
            right: NO_CHILD,
        });
        t.nodes.push(Node {
            start: start + left as u32,
            end,
            left: NO_CHILD,
            right: NO_CHILD,
        });
        t.plane_of.push(NO_CHILD);
        t.plane_of.push(NO_CHILD);
        t.nodes[ni].left = l;
        t.nodes[ni].right = r;
        stack.push(r as usize);
        stack.push(l as usize);
    }
    t
}

impl Forest {
    /// Builds a forest over `rows` rows of `dim` floats of `w` (row `r` at
    /// `r * w_stride`; finite).
    pub fn build(
        w: &[f32],
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &ForestParams,
    ) -> Result<Forest> {
        if !(2..=crate::source::MAX_ROWS).contains(&rows) {
            bail!(
                InvalidArgument,
                "rows is {rows}; it must be in 2..={}",
                crate::source::MAX_ROWS
            );
        }
        if dim == 0 || dim > MAX_DIM {
            bail!(InvalidArgument, "dim is {dim}; it must be in 1..={MAX_DIM}");
        }
        if p.trees == 0 || p.trees > MAX_TREES {
            bail!(
                InvalidArgument,
                "trees is {}; it must be in 1..={MAX_TREES}",
                p.trees
            );
        }
        if p.leaf_size < 2 {
            bail!(
                InvalidArgument,
                "leaf_size is {}; it must be >= 2",
                p.leaf_size
            );
        }
        check_w(w, rows, dim, w_stride)?;
        // Per tree: perm + 2 nodes per leaf-ish (< 2n/ (B/2)) ... bounded by
        // the perm (n u32), at most 2n nodes (16 bytes) and n planes.
        crate::error::check_fits_memory(
            p.trees as u128 * rows as u128 * (4 + 2 * 20 + 4),
            "the forest",
        )?;
        let inv = if p.normalize_rows {
            inverse_norms(w, rows, dim, w_stride)?
        } else {
            Vec::new()
        };
        let l = p.trees as usize;
        let nthreads = crate::par::threads_for(p.threads as usize, l);
        let mut trees: Vec<Option<Tree>> = vec![None; l];
        let b = p.leaf_size as usize;
        let seed_of = |t: usize| p.seed ^ (t as u64 + 1).wrapping_mul(GOLDEN);
        if nthreads == 1 {
            for (t, slot) in trees.iter_mut().enumerate() {
                *slot = Some(build_tree(w, rows, dim, w_stride, b, seed_of(t), &inv));
            }
        } else {
            let per = l.div_ceil(nthreads);
            crate::par::map(trees.chunks_mut(per).enumerate(), |(ci, chunk)| {
                for (k, slot) in chunk.iter_mut().enumerate() {
                    let t = ci * per + k;
                    *slot = Some(build_tree(w, rows, dim, w_stride, b, seed_of(t), &inv));
                }
            });
        }
        Ok(Forest {
            n: rows,
            dim,
            p: *p,
            trees: trees.into_iter().map(|t| t.expect("built")).collect(),
        })
    }

    /// Builds again from `w` (same rows and dim), with the same parameters,
    /// or with `seed` when given. On error the forest is unchanged.
    pub fn rebuild(&mut self, w: &[f32], w_stride: usize, seed: Option<u64>) -> Result<()> {
        let mut p = self.p;
        if let Some(s) = seed {
            p.seed = s;
        }
        *self = Forest::build(w, self.n, self.dim, w_stride, &p)?;
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.n
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn params(&self) -> ForestParams {
        self.p
    }
    /// Nodes of tree `t`.
    pub fn nodes(&self, t: usize) -> usize {
        self.trees[t].nodes.len()
    }
    /// The classes of tree `t` in its order, and each node's
    /// `(start, end, left, right)` (children `u32::MAX` for a leaf).
    pub fn tree(&self, t: usize) -> (&[u32], Vec<NodeInfo>) {
        let tr = &self.trees[t];
        (
            &tr.perm,
            tr.nodes
                .iter()
                .map(|n| (n.start, n.end, n.left, n.right))
                .collect(),
        )
    }
    /// The split plane of node `i` of tree `t` (None for a leaf): normal
    /// (`dim` values) and offset.
    pub fn plane(&self, t: usize, i: usize) -> Option<(&[f32], f64)> {
        let tr = &self.trees[t];
        let p = tr.plane_of[i];
        (p != NO_CHILD).then(|| {
            let p = p as usize;
            (&tr.planes[p * self.dim..(p + 1) * self.dim], tr.offs[p])
        })
    }
    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .trees
                .iter()
                .map(|t| {
                    t.nodes.capacity() * 16
                        + t.perm.capacity() * 4
                        + t.plane_of.capacity() * 4
                        + t.planes.capacity() * 4
                        + t.offs.capacity() * 8
                })
                .sum::<usize>()
    }

    /// The classes tree `t` proposes for `x` (a range of its `perm`).
    fn walk(&self, t: usize, x: &[f32], q: usize) -> &[u32] {
        let tr = &self.trees[t];
        let mut node = 0usize;
        let mut parent = 0usize;
        loop {
            let nd = tr.nodes[node];
            if ((nd.end - nd.start) as usize) < q {
                let pn = tr.nodes[parent];
                return &tr.perm[pn.start as usize..pn.end as usize];
            }
            if nd.left == NO_CHILD {
                return &tr.perm[nd.start as usize..nd.end as usize];
            }
            let p = tr.plane_of[node] as usize;
            let h = &tr.planes[p * self.dim..(p + 1) * self.dim];
            parent = node;
            node = if side(h, tr.offs[p], x) {
                nd.left as usize
            } else {
                nd.right as usize
            };
        }
    }

    /// `S(x)` of `nx` samples (`x` row `i` at `i * x_stride`, finite) with
    /// set size `q` (>= 1), ranked by cosine with the rows of `w` (the
    /// forest's shape, row stride `w_stride`, finite), into `out` (CSR, ids
    /// ascending per sample); see the module documentation.
    #[allow(clippy::too_many_arguments)]
    pub fn query(
        &self,
        w: &[f32],
        w_stride: usize,
        x: &[f32],
        nx: usize,
        x_stride: usize,
        q: u32,
        out: &mut ForestResult,
    ) -> Result<()> {
        self.query_confident(w, w_stride, None, x, nx, x_stride, q, 0.0, 1, out)
    }

    /// [`Forest::query`] with the adaptive allocation of the module
    /// documentation: each sample keeps the fewest of its `q` classes,
    /// ranked by logit `w_j . x + bias_j` (`bias`: `rows` finite floats,
    /// or None for 0), whose softmax mass within the set reaches
    /// `confidence` (in [0, 1]; 0 keeps all `q`), and at least `min_keep`.
    #[allow(clippy::too_many_arguments)]
    pub fn query_confident(
        &self,
        w: &[f32],
        w_stride: usize,
        bias: Option<&[f32]>,
        x: &[f32],
        nx: usize,
        x_stride: usize,
        q: u32,
        confidence: f32,
        min_keep: u32,
        out: &mut ForestResult,
    ) -> Result<()> {
        if q == 0 {
            bail!(InvalidArgument, "q (the set size) must be >= 1");
        }
        check_confidence(confidence, "confidence")?;
        check_w(w, self.n, self.dim, w_stride)?;
        if let Some(b) = bias {
            if b.len() < self.n {
                bail!(
                    BufferTooSmall,
                    "`bias` holds {} floats; the forest has {} rows",
                    b.len(),
                    self.n
                );
            }
            if let Some(i) = b[..self.n].iter().position(|v| !v.is_finite()) {
                bail!(NonFinite, "bias[{i}] is {}", b[i]);
            }
        }
        self.query_finite_w(
            w,
            w_stride,
            bias,
            x,
            nx,
            x_stride,
            q,
            confidence,
            min_keep.max(1),
            out,
        )
    }

    /// [`Forest::query_confident`] for a `w` (and `bias`) known to be
    /// finite and long enough (an index's own rows, checked when they were
    /// stored): without the scan of all of `w`, which costs more than the
    /// query itself. `q >= 1`, `min_keep >= 1`, `confidence` in [0, 1].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn query_finite_w(
        &self,
        w: &[f32],
        w_stride: usize,
        bias: Option<&[f32]>,
        x: &[f32],
        nx: usize,
        x_stride: usize,
        q: u32,
        confidence: f32,
        min_keep: u32,
        out: &mut ForestResult,
    ) -> Result<()> {
        debug_assert!(q >= 1 && w.len() >= strided_len(self.n, self.dim, w_stride, "w")?);
        debug_assert!(min_keep >= 1 && (0.0..=1.0).contains(&confidence));
        let xl = strided_len(nx, self.dim, x_stride, "x")?;
        if x.len() < xl {
            bail!(
                BufferTooSmall,
                "`x` holds {} floats, {nx} samples of stride {x_stride} need {xl}",
                x.len()
            );
        }
        if let Some((r, j)) = first_non_finite(x, nx, self.dim, x_stride) {
            bail!(NonFinite, "x row {r} column {j} is {}", x[r * x_stride + j]);
        }
        let (n, dim) = (self.n, self.dim);
        // The thread's buffers (a panic inside drops them rather than
        // leaving a half-cleared bitmap for the next call).
        crate::par::with_taken(&SCRATCH, |sc| -> Result<()> {
            if sc.seen.len() < n.div_ceil(64) {
                sc.seen = try_vec::<u64>(n.div_ceil(64), "pool bitmap")?;
            }
            let ForestScratch {
                seen,
                pool,
                scored,
                exps,
            } = sc;
            out.ids.clear();
            out.offsets.clear();
            out.offsets.push(0);
            let qq = q as usize;
            for i in 0..nx {
                let xi = &x[i * x_stride..i * x_stride + dim];
                pool.clear();
                for t in 0..self.trees.len() {
                    for &id in self.walk(t, xi, qq) {
                        let (wd, bit) = (id as usize >> 6, 1u64 << (id & 63));
                        if seen[wd] & bit == 0 {
                            seen[wd] |= bit;
                            pool.push(id);
                        }
                    }
                }
                scored.clear();
                for &id in pool.iter() {
                    seen[id as usize >> 6] = 0;
                }
                let row = |id: u32| &w[id as usize * w_stride..id as usize * w_stride + dim];
                let cos = |dot: f64, nn: f64| if nn > 0.0 { dot / nn.sqrt() } else { 0.0 };
                // Four candidates at a time: eight independent f64 chains
                // (each still summed in coordinate order, so the same bits as
                // one at a time) instead of two latency-bound ones.
                let mut quads = pool.chunks_exact(4);
                for c in &mut quads {
                    let (r0, r1, r2, r3) = (row(c[0]), row(c[1]), row(c[2]), row(c[3]));
                    let (mut d, mut nn) = ([0f64; 4], [0f64; 4]);
                    for k in 0..dim {
                        let x = xi[k] as f64;
                        let a = [r0[k] as f64, r1[k] as f64, r2[k] as f64, r3[k] as f64];
                        for l in 0..4 {
                            d[l] += a[l] * x;
                            nn[l] += a[l] * a[l];
                        }
                    }
                    for l in 0..4 {
                        scored.push((cos(d[l], nn[l]), d[l], c[l]));
                    }
                }
                for &id in quads.remainder() {
                    let (mut dot, mut nn) = (0f64, 0f64);
                    for (&a, &b) in row(id).iter().zip(xi) {
                        dot += a as f64 * b as f64;
                        nn += a as f64 * a as f64;
                    }
                    scored.push((cos(dot, nn), dot, id));
                }
                let keep = qq.min(scored.len());
                let cmp = |a: &(f64, f64, u32), b: &(f64, f64, u32)| {
                    b.0.total_cmp(&a.0).then(a.2.cmp(&b.2))
                };
                if keep < scored.len() {
                    scored.select_nth_unstable_by(keep, cmp);
                    scored.truncate(keep);
                }
                if confidence > 0.0 && scored.len() > min_keep as usize {
                    trim_to_mass(scored, exps, bias, confidence, min_keep as usize);
                }
                let s0 = out.ids.len();
                out.ids.extend(scored.iter().map(|p| p.2));
                out.ids[s0..].sort_unstable();
                out.offsets.push(out.ids.len());
            }
            Ok(())
        })
    }

    /// `S(X)`: the union of the per-sample sets in `r` (ids `< rows`),
    /// sampled down to `cap` classes when larger (`cap` 0: no cap), into
    /// `ids` (ascending) and `counts` (each class's number of samples);
    /// see the module documentation.
    pub fn union(
        &self,
        r: &ForestResult,
        cap: usize,
        seed: u64,
        ids: &mut Vec<u32>,
        counts: &mut Vec<u32>,
    ) -> Result<()> {
        union_capped(self.n, &r.ids, cap, seed, ids, counts)
    }

    /// Writes the forest (atomic: temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut keep = Vec::new();
        let secs = self.file_sections(&mut keep);
        format::write_file(path, KIND_FOREST, &secs)
    }

    /// The forest's sections (a forest file's, or an index file's whose
    /// candidate source is the forest); `keep` holds the bytes they borrow.
    pub(crate) fn file_sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        let l = self.trees.len();
        // Raw-row forests keep the version-1 record (readable by older
        // libraries); unit-row forests need version 2 and its flags.
        let mut rec: Vec<u64> = vec![
            FOREST_VERSION,
            self.n as u64,
            self.dim as u64,
            self.p.trees as u64,
            self.p.leaf_size as u64,
            self.p.seed,
            l as u64,
        ];
        if self.p.normalize_rows {
            rec[0] = FOREST_VERSION_FLAGS;
            rec.push(FLAG_NORMALIZE_ROWS);
        }
        let counts: Vec<u64> = self
            .trees
            .iter()
            .flat_map(|t| [t.nodes.len() as u64, t.offs.len() as u64])
            .collect();
        let base = keep.len();
        keep.push(format::as_bytes(rec.as_slice()).to_vec());
        keep.push(format::as_bytes(&counts).to_vec());
        // The offsets as their bit patterns (u64), one part per tree.
        for t in &self.trees {
            let bits: Vec<u64> = t.offs.iter().map(|v| v.to_bits()).collect();
            keep.push(format::as_bytes(&bits).to_vec());
        }
        let keep: &'a Vec<Vec<u8>> = keep;
        let mut parts_nodes: Vec<&[u8]> = Vec::new();
        let mut parts_perm: Vec<&[u8]> = Vec::new();
        let mut parts_pof: Vec<&[u8]> = Vec::new();
        let mut parts_planes: Vec<&[u8]> = Vec::new();
        let mut parts_offs: Vec<&[u8]> = Vec::new();
        for (t, ob) in self.trees.iter().zip(&keep[base + 2..]) {
            parts_nodes.push(node_bytes(&t.nodes));
            parts_perm.push(format::as_bytes(&t.perm));
            parts_pof.push(format::as_bytes(&t.plane_of));
            parts_planes.push(format::as_bytes(&t.planes));
            parts_offs.push(ob);
        }
        vec![
            SectionOut::new("FPARAMS", vec![&keep[base]]),
            SectionOut::new("FCOUNTS", vec![&keep[base + 1]]),
            SectionOut::new("FNODES", parts_nodes),
            SectionOut::new("FPERM", parts_perm),
            SectionOut::new("FPLANEOF", parts_pof),
            SectionOut::new("FPLANES", parts_planes),
            SectionOut::new("FOFFS", parts_offs),
        ]
    }

    /// Reads a forest written by [`Forest::save`], checking every
    /// invariant of a build (`BadFileFormat` naming what is wrong).
    pub fn load(path: &Path) -> Result<Forest> {
        let c = Container::open(path, KIND_FOREST)?;
        Self::from_container(&c)
    }

    /// The forest held by the forest sections of `c` (a forest file, or an
    /// index file whose candidate source is the forest), every invariant
    /// checked.
    pub(crate) fn from_container(c: &Container) -> Result<Forest> {
        let bad = |m: String| Error::new(Status::BadFileFormat, m);
        let rec: &[u64] = cast_slice(c.section("FPARAMS")?, "FPARAMS")?;
        if rec.len() < 7 {
            return Err(bad(format!(
                "FPARAMS holds {} values, 7 expected",
                rec.len()
            )));
        }
        let normalize_rows = match rec[0] {
            FOREST_VERSION => false,
            FOREST_VERSION_FLAGS => {
                let flags = *rec.get(7).ok_or_else(|| {
                    bad(format!(
                        "FPARAMS version 2 holds {} values, 8 expected",
                        rec.len()
                    ))
                })?;
                if flags & !FLAG_NORMALIZE_ROWS != 0 {
                    return Err(bad(format!("FPARAMS flags {flags:#x} hold unknown bits")));
                }
                flags & FLAG_NORMALIZE_ROWS != 0
            }
            v => {
                return Err(bad(format!(
                    "forest version {v} (this library reads 1 and 2)"
                )))
            }
        };
        let (n, dim, trees, leaf, seed, l) = (rec[1], rec[2], rec[3], rec[4], rec[5], rec[6]);
        if n < 2 || n > crate::source::MAX_ROWS as u64 || dim == 0 || dim > MAX_DIM as u64 {
            return Err(bad(format!("rows {n} / dim {dim} out of range")));
        }
        if trees == 0
            || trees > MAX_TREES as u64
            || l != trees
            || leaf < 2
            || leaf > u32::MAX as u64
        {
            return Err(bad(format!(
                "trees {trees} (stored {l}) or leaf_size {leaf} out of range"
            )));
        }
        let (n, dim, l) = (n as usize, dim as usize, l as usize);
        let counts: &[u64] = cast_slice(c.section("FCOUNTS")?, "FCOUNTS")?;
        if counts.len() != 2 * l {
            return Err(bad(format!(
                "FCOUNTS holds {} values, 2L = {} expected",
                counts.len(),
                2 * l
            )));
        }
        let nodes_raw: &[u32] = cast_slice(c.section("FNODES")?, "FNODES")?;
        let perm: &[u32] = cast_slice(c.section("FPERM")?, "FPERM")?;
        let pof: &[u32] = cast_slice(c.section("FPLANEOF")?, "FPLANEOF")?;
        let planes: &[f32] = cast_slice(c.section("FPLANES")?, "FPLANES")?;
        let offs: &[u64] = cast_slice(c.section("FOFFS")?, "FOFFS")?;
        let (mut an, mut ap, mut ao) = (0usize, 0usize, 0usize);
        let mut out = Vec::with_capacity(l);
        for t in 0..l {
            let (nn, np) = (counts[2 * t] as usize, counts[2 * t + 1] as usize);
            if nn == 0 || nn > 2 * n || np > n || np.saturating_mul(2) + 1 != nn {
                return Err(bad(format!("tree {t}: {nn} nodes and {np} planes")));
            }
            let nd = nodes_raw
                .get(an * 4..(an + nn) * 4)
                .ok_or_else(|| bad(format!("tree {t}: FNODES too short")))?;
            let pm = perm
                .get(t * n..(t + 1) * n)
                .ok_or_else(|| bad(format!("tree {t}: FPERM too short")))?;
            let po = pof
                .get(an..an + nn)
                .ok_or_else(|| bad(format!("tree {t}: FPLANEOF too short")))?;
            let pl = planes
                .get(ap * dim..(ap + np) * dim)
                .ok_or_else(|| bad(format!("tree {t}: FPLANES too short")))?;
            let of = offs
                .get(ao..ao + np)
                .ok_or_else(|| bad(format!("tree {t}: FOFFS too short")))?;
            let tree = Tree {
                nodes: nd
                    .chunks(4)
                    .map(|c| Node {
                        start: c[0],
                        end: c[1],
                        left: c[2],
                        right: c[3],
                    })
                    .collect(),
                perm: pm.to_vec(),
                plane_of: po.to_vec(),
                planes: pl.to_vec(),
                offs: of.iter().map(|&b| f64::from_bits(b)).collect(),
            };
            check_tree(&tree, n, leaf as usize).map_err(|m| bad(format!("tree {t}: {m}")))?;
            if normalize_rows && tree.offs.iter().any(|&o| o != 0.0) {
                return Err(bad(format!(
                    "tree {t}: a unit-row forest has a split offset other than 0"
                )));
            }
            out.push(tree);
            an += nn;
            ap += np;
            ao += np;
        }
        if an * 4 != nodes_raw.len()
            || l * n != perm.len()
            || an != pof.len()
            || ap * dim != planes.len()
            || ao != offs.len()
        {
            return Err(bad("forest sections hold trailing values".into()));
        }
        Ok(Forest {
            n,
            dim,
            p: ForestParams {
                trees: l as u32,
                leaf_size: leaf as u32,
                seed,
                threads: 0,
                normalize_rows,
            },
            trees: out,
        })
    }
}

fn node_bytes(nodes: &[Node]) -> &[u8] {
    // SAFETY: Node is #[repr(C)] of four u32 (16 bytes, no padding); the
    // bytes of `nodes` are initialised and live as long as the slice.
    unsafe { std::slice::from_raw_parts(nodes.as_ptr().cast::<u8>(), std::mem::size_of_val(nodes)) }
}

/// The invariants of a built tree: the perm is a permutation of 0..n; the
/// root covers it; an inner node has a plane and two children (created
/// after it) that split its range at a point strictly inside; leaves hold
/// fewer than `b` classes; every node but the root is some node's child
/// once; planes finite.
fn check_tree(t: &Tree, n: usize, b: usize) -> std::result::Result<(), String> {
    let mut seen = vec![false; n];
    for &i in &t.perm {
        if i as usize >= n || std::mem::replace(&mut seen[i as usize], true) {
            return Err(format!("class {i} out of range or repeated"));
        }
    }
    if t.nodes[0].start != 0 || t.nodes[0].end as usize != n {
        return Err("the root does not cover every class".into());
    }
    if t.planes.iter().any(|v| !v.is_finite()) || t.offs.iter().any(|v| !v.is_finite()) {
        return Err("a split plane is not finite".into());
    }
    let mut parented = vec![false; t.nodes.len()];
    for (i, nd) in t.nodes.iter().enumerate() {
        if nd.start >= nd.end {
            return Err(format!("node {i} is empty"));
        }
        if nd.left == NO_CHILD && nd.right == NO_CHILD {
            if t.plane_of[i] != NO_CHILD || (nd.end - nd.start) as usize >= b {
                return Err(format!(
                    "leaf {i} has a plane or {} classes",
                    nd.end - nd.start
                ));
            }
            continue;
        }
        let (l, r) = (nd.left as usize, nd.right as usize);
        if l <= i || r <= i || l >= t.nodes.len() || r >= t.nodes.len() || l == r {
            return Err(format!("node {i} has bad children"));
        }
        if std::mem::replace(&mut parented[l], true) || std::mem::replace(&mut parented[r], true) {
            return Err(format!("node {i}: a child has two parents"));
        }
        let (ln, rn) = (t.nodes[l], t.nodes[r]);
        if ln.start != nd.start || ln.end != rn.start || rn.end != nd.end {
            return Err(format!("node {i}: children do not split its range"));
        }
        if t.plane_of[i] as usize >= t.offs.len() {
            return Err(format!("node {i}: plane index out of range"));
        }
    }
    Ok(())
}

/// The union of `ids` (each `< n`) with counts, capped (module docs).
pub fn union_capped(
    n: usize,
    ids: &[u32],
    cap: usize,
    seed: u64,
    out: &mut Vec<u32>,
    counts: &mut Vec<u32>,
) -> Result<()> {
    if let Some(j) = ids.iter().position(|&i| i as usize >= n) {
        bail!(
            IndexOutOfRange,
            "ids[{j}] = {} but there are {n} classes",
            ids[j]
        );
    }
    // The thread's buffers; the counters are all zero between calls.
    crate::par::with_taken(&UNION, |sc| -> Result<()> {
        if sc.cnt.len() < n {
            sc.cnt = try_vec::<u32>(n, "class counts")?;
        }
        let UnionScratch { cnt, uniq, keyed } = sc;
        uniq.clear();
        for &i in ids {
            if cnt[i as usize] == 0 {
                uniq.push(i);
            }
            cnt[i as usize] += 1;
        }
        out.clear();
        counts.clear();
        if cap > 0 && uniq.len() > cap {
            keyed.clear();
            keyed.extend(uniq.iter().map(|&j| {
                let u = SplitMix64::new(seed ^ (j as u64 + 1).wrapping_mul(GOLDEN)).next_f64_open();
                (u.ln() / cnt[j as usize] as f64, j)
            }));
            keyed.select_nth_unstable_by(cap, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            out.extend(keyed[..cap].iter().map(|p| p.1));
        } else {
            out.extend_from_slice(uniq);
        }
        out.sort_unstable();
        counts.extend(out.iter().map(|&j| cnt[j as usize]));
        for &j in uniq.iter() {
            cnt[j as usize] = 0;
        }
        Ok(())
    })
}

/// [`union_capped`]'s buffers: a counter per class (zero between calls:
/// each call clears the ones it raised), the distinct ids in order of
/// first occurrence, and the capped draw's keys.
#[derive(Default)]
struct UnionScratch {
    cnt: Vec<u32>,
    uniq: Vec<u32>,
    keyed: Vec<(f64, u32)>,
}

thread_local! {
    static UNION: std::cell::RefCell<UnionScratch> =
        std::cell::RefCell::new(UnionScratch::default());
}
