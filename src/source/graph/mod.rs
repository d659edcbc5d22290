//! FGD, the fast graph decoder: a small-world graph over the
//! rows of an output layer, searched for the largest logits.
//!
//! # The transform
//! Each row `x_i` with its bias `b_i` becomes
//! `X_i = [x_i; b_i; sqrt(U^2 - |[x_i; b_i]|^2)]` with `U` the largest norm
//! of `[x_i; b_i]` (computed in f64), and a query `h` becomes
//! `H = [h; 1; 0]`. Every `X_i` has norm `U`, so
//! `|X_i - X_j|^2 = 2 U^2 - 2 <X_i, X_j>` and
//! `|H - X_i|^2 = |h|^2 + 1 + U^2 - 2 (h . x_i + b_i)`: the Euclidean order
//! of the rows around `H` is the order of the logits `<H, X_i> = h . x_i +
//! b_i`. The graph is therefore built and searched on inner products only,
//! and a search returns the logits themselves (no distance to map back).
//!
//! # The graph
//! HNSW (Malkov and Yashunin): every node draws a level
//! `floor(-ln(u) / ln(M))` from a seeded generator; level 0 links each node
//! to at most `2M` others, upper levels to at most `M`; links are chosen
//! with HNSW's heuristic (a candidate is kept unless an already kept one is
//! closer to it than the node is). HNSW's pruning can leave a node without
//! in-links; after the insertions a repair pass links every node that is
//! not reachable from the entry point on level 0 (see
//! `repair_reachability`), so a search with `ef >= rows` is exhaustive. Level-0 lists are one flat array of
//! fixed-size slots (`1 + 2M` u32: the count, then the ids), the rows are
//! stored node by node in the graph's own buffer (f32, bf16 or int8 with a
//! per-row scale), padded to a multiple of 16 elements.
//!
//! A search descends the upper levels greedily and runs the best-first
//! search with a pool of `ef` nodes on level 0. A node's unvisited
//! neighbours are scored in one call of the graph dot kernels
//! ([`crate::kernels::graph`]: every tier, prefetching the rows ahead).
//! The visited set is a generation-stamped `u16` array in a per-thread
//! scratch, reused across queries (allocated once per thread and graph
//! size, never per query). Queries take `&Graph` and are thread-safe.
//!
//! # Determinism
//! The graph dot kernels add in the same order on every tier, so every
//! score, and with it every decision of a build or a search, is
//! bit-identical on every tier. The build inserts nodes in row order: the
//! first [`SEQUENTIAL_NODES`] one by one, then in batches (a batch is
//! `1/BATCH_DIV` of the nodes inserted so far); every node of a batch
//! searches the graph as it was before the batch (in parallel), then the
//! links are applied in node order, and the back-links of each old node are
//! pruned in node order (in parallel over old nodes, each writes only its
//! own list). So the graph is a pure function of W, the bias, the
//! parameters and the seed: **bit-identical for every thread count and
//! every tier**. (With one thread it is the same batched algorithm.)
//!
//! # Scores
//! Scores are logits of the stored rows: with f32 storage within the
//! kernels' bound of the exact `h . x_i + b_i` (see
//! [`crate::kernels::graph`]); bf16 and int8 storage round the transformed
//! rows first (bf16: relative 2^-8 per element; int8: `scale / 2` per
//! element), and their scores are the logits of the rounded rows.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::bail;
use crate::error::{checked_mul, strided_len, try_vec, Result};
use crate::isa::{self, Isa};
use crate::kernels::graph::{self as kg, DotFn, Rows, LANES};
use crate::matmul::{f32_to_bf16, TOPK_PAD_ID};
use crate::rng::{ieee754_log, SplitMix64};

pub use crate::source::params::graph::*;

/// The `GPARAM` storage word of the graph's rows: 0 F32, 1 Bf16, 2 I8
/// (`None` for the storages a graph refuses).
pub(crate) fn file_code(s: Storage) -> Option<u32> {
    match s {
        Storage::F32 => Some(0),
        Storage::Bf16 => Some(1),
        Storage::I8 => Some(2),
        Storage::BorrowedF32 | Storage::F16 => None,
    }
}

/// The storage of a `GPARAM` storage word ([`file_code`]).
pub(crate) fn storage_of_code(v: u32) -> Option<Storage> {
    [Storage::F32, Storage::Bf16, Storage::I8]
        .get(v as usize)
        .copied()
}

mod build;
pub(crate) mod family;
mod file;
mod search;

/// Nodes inserted one by one before batched insertion starts.
pub const SEQUENTIAL_NODES: usize = 2048;
/// After [`SEQUENTIAL_NODES`], a batch holds `inserted / BATCH_DIV` nodes.
pub const BATCH_DIV: usize = 64;
/// Highest level a node can draw.
pub const MAX_LEVEL: usize = 15;
/// Largest `m` accepted.
pub const MAX_M: u32 = 256;

/// Counts summed over the queries of a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    pub queries: u64,
    /// Rows scored (dot products), upper levels included.
    pub distances: u64,
}

enum Data {
    F32(Vec<f32>),
    Bf16(Vec<u16>),
    I8 { w: Vec<i8>, scales: Vec<f32> },
}

/// An FGD graph over the rows of a layer (see the module documentation).
pub struct Graph {
    rows: usize,
    /// Columns of W (the query length).
    dim: usize,
    /// Stored row length: `dim + 2` rounded up to a multiple of 16.
    sdim: usize,
    /// `U`, the norm of every transformed row.
    u: f32,
    has_bias: bool,
    params: GraphParams,
    data: Data,
    /// Level 0: `rows` slots of `1 + 2m` u32 (count, ids).
    links0: Vec<u32>,
    levels: Vec<u8>,
    /// Per node, the start of its upper-level slots in `upper` (`level`
    /// slots of `1 + m` u32, level 1 first; never read for level-0 nodes).
    upper_off: Vec<u32>,
    upper: Vec<u32>,
    entry: u32,
    max_level: usize,
    /// The compact walk records (see [`WalkRecs`]); `None` only when the
    /// rows are too long for the int8 walk (`dim > MAX_WALK_DIM`).
    walk: Option<WalkRecs>,
}

/// Longest `dim` the int8 walk accepts (its i32 sums cannot wrap).
pub const MAX_WALK_DIM: usize = 65_536 - kg::WALK_PAD;

/// One cache line: the walk records are aligned to it.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

impl Default for Line {
    fn default() -> Self {
        Line([0; 64])
    }
}

/// The int8 walk's records, one per node, `stride` bytes each (a multiple
/// of 64, so each record starts on a cache line): the row's first `dim`
/// values (not the bias, not the FGD padding coordinate, which a query
/// multiplies by 1 and 0) as int8 codes with one f32 scale per row
/// (`max |x| / 127`, codes `round(x / scale)`), stored as `code + 128` and
/// padded to `dpad` (a multiple of 64) bytes; then the node's level-0
/// links (`2m` u32, unused slots `u32::MAX`). A hop reads the expanded
/// node's links and its neighbours' codes from these records alone.
/// `side[r]` = (scale, bias) of row `r`.
struct WalkRecs {
    lines: Vec<Line>,
    stride: usize,
    dpad: usize,
    side: Vec<[f32; 2]>,
}

impl WalkRecs {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `Line` is 64 plain bytes (repr(C), no padding); the
        // slice covers exactly the vector's initialised elements.
        unsafe {
            std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.lines.len() * 64)
        }
    }
    /// The level-0 links slot (`2m` u32) of `node`.
    #[inline(always)]
    fn links(&self, node: usize, slots: usize) -> &[u32] {
        let start = node * self.stride + self.dpad;
        let b = &self.bytes()[start..start + 4 * slots];
        // SAFETY: `start` is a multiple of 64 (stride and dpad are) from a
        // 64-aligned buffer, so 4-aligned; `b` holds exactly 4 * slots
        // initialised bytes, and every bit pattern is a valid u32.
        unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<u32>(), slots) }
    }
}

// ---------------------------------------------------------------- ordering

/// A scored node; `Ord` ranks the better one greater: larger score, equal
/// scores by the smaller id (a total order: `total_cmp` on the score).
#[derive(Clone, Copy, Debug)]
struct Cand {
    s: f32,
    id: u32,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.s.total_cmp(&o.s).then(o.id.cmp(&self.id))
    }
}

/// The per-thread search state: reused across queries, resized only when
/// a graph with more rows (or longer rows) comes along.
#[derive(Default)]
pub struct Scratch {
    visited: Vec<u16>,
    gen: u16,
    /// Max-heap: the best unexpanded candidate on top.
    cand: BinaryHeap<Cand>,
    /// Min-heap (reversed): the worst of the pool on top.
    pool: BinaryHeap<std::cmp::Reverse<Cand>>,
    ids: Vec<u32>,
    out: Vec<f32>,
    q: Vec<f32>,
    /// The int8 query of the walk.
    q8: Vec<i8>,
    raw: Vec<i32>,
    sorted: Vec<Cand>,
    distances: u64,
}

impl Scratch {
    fn prepare(&mut self, rows: usize, sdim: usize) {
        if self.visited.len() < rows {
            self.visited.clear();
            self.visited.resize(rows, 0);
            self.gen = 0;
        }
        if self.q.len() < sdim {
            self.q.resize(sdim, 0.0);
        }
        if self.q8.len() < sdim + kg::WALK_PAD {
            self.q8.resize(sdim + kg::WALK_PAD, 0);
        }
    }

    /// A fresh visited generation (clears the stamps on wrap-around).
    fn next_gen(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.visited.fill(0);
            self.gen = 1;
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// A view of the rows and the kernel that scores them.
struct View<'a, T> {
    rows: Rows<'a, T>,
    dot: DotFn<T>,
}

impl<T> View<'_, T> {
    #[inline(always)]
    fn score(&self, q: &[f32], ids: &[u32], out: &mut [f32]) {
        debug_assert_eq!(ids.len(), out.len());
        // SAFETY: the graph's invariants: ids < rows (links and entry are
        // checked on build and load), `w` holds rows * sdim elements, sdim
        // a nonzero multiple of 16, q holds sdim floats (the scratch query
        // or a row), the tier was checked by the caller.
        unsafe { (self.dot)(&self.rows, q, ids, out) }
    }
}

impl Graph {
    // ------------------------------------------------------------ links

    #[inline(always)]
    fn max_links(&self, lev: usize) -> usize {
        if lev == 0 {
            2 * self.params.m as usize
        } else {
            self.params.m as usize
        }
    }

    #[inline(always)]
    fn slot_range(&self, node: usize, lev: usize) -> (bool, usize, usize) {
        if lev == 0 {
            let s0 = 1 + 2 * self.params.m as usize;
            (false, node * s0, s0)
        } else {
            let s = 1 + self.params.m as usize;
            (true, self.upper_off[node] as usize + (lev - 1) * s, s)
        }
    }

    /// The links of `node` at level `lev` (`lev <= levels[node]`).
    #[inline(always)]
    fn links(&self, node: usize, lev: usize) -> &[u32] {
        let (up, start, len) = self.slot_range(node, lev);
        let slot = if up {
            &self.upper[start..start + len]
        } else {
            &self.links0[start..start + len]
        };
        &slot[1..1 + slot[0] as usize]
    }

    /// Hints that the links of `node` at `lev` are needed soon.
    #[inline(always)]
    fn prefetch_links(&self, node: usize, lev: usize) {
        let (up, start, len) = self.slot_range(node, lev);
        let v = if up { &self.upper } else { &self.links0 };
        if let Some(p) = v.get(start..start + len) {
            crate::kernels::prefetch(p.as_ptr().cast(), len * 4);
        }
    }

    fn slot_mut(&mut self, node: usize, lev: usize) -> &mut [u32] {
        let (up, start, len) = self.slot_range(node, lev);
        if up {
            &mut self.upper[start..start + len]
        } else {
            &mut self.links0[start..start + len]
        }
    }

    // ------------------------------------------------------------ accessors

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn params(&self) -> &GraphParams {
        &self.params
    }
    /// `U`, the largest norm of `[x_i; b_i]` (every transformed row's norm).
    pub fn max_norm(&self) -> f32 {
        self.u
    }
    pub fn has_bias(&self) -> bool {
        self.has_bias
    }
    /// The highest level of the graph.
    pub fn max_level(&self) -> usize {
        self.max_level
    }
    pub fn entry_point(&self) -> u32 {
        self.entry
    }
    /// Links of `node` at level `lev` (empty above the node's level).
    pub fn neighbors(&self, node: usize, lev: usize) -> &[u32] {
        if node >= self.rows || lev > self.levels[node] as usize {
            return &[];
        }
        self.links(node, lev)
    }
    /// A node's level.
    pub fn level(&self, node: usize) -> usize {
        self.levels[node] as usize
    }

    /// Bytes held by the graph's buffers.
    pub fn memory_bytes(&self) -> usize {
        let data = match &self.data {
            Data::F32(v) => v.capacity() * 4,
            Data::Bf16(v) => v.capacity() * 2,
            Data::I8 { w, scales } => w.capacity() + scales.capacity() * 4,
        };
        std::mem::size_of::<Self>()
            + data
            + self.links0.capacity() * 4
            + self.levels.capacity()
            + self.upper_off.capacity() * 4
            + self.upper.capacity() * 4
            + self
                .walk
                .as_ref()
                .map_or(0, |w| w.lines.capacity() * 64 + w.side.capacity() * 8)
    }

    /// A checksum of the graph's structure (links, levels, entry point):
    /// FNV-1a over the little-endian words, for golden tests.
    pub fn structure_checksum(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |v: u32| {
            for b in v.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(self.entry);
        eat(self.max_level as u32);
        self.levels.iter().for_each(|&l| eat(l as u32));
        self.links0.iter().for_each(|&v| eat(v));
        self.upper.iter().for_each(|&v| eat(v));
        h
    }
}
