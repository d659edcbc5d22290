//! FGD, the fast graph decoder (issue 16): a small-world graph over the
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

mod file;

/// Nodes inserted one by one before batched insertion starts.
pub const SEQUENTIAL_NODES: usize = 2048;
/// After [`SEQUENTIAL_NODES`], a batch holds `inserted / BATCH_DIV` nodes.
pub const BATCH_DIV: usize = 64;
/// Highest level a node can draw.
pub const MAX_LEVEL: usize = 15;
/// Largest `m` accepted.
pub const MAX_M: u32 = 256;

/// How the transformed rows are stored.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    F32 = 0,
    /// bf16 (round to nearest even): half the bytes of f32.
    Bf16 = 1,
    /// int8 with one f32 scale per row (`max |x| / 127`).
    I8 = 2,
}

impl Storage {
    pub fn from_u32(v: u32) -> Option<Storage> {
        match v {
            0 => Some(Storage::F32),
            1 => Some(Storage::Bf16),
            2 => Some(Storage::I8),
            _ => None,
        }
    }
}

/// Build parameters. `Default` gives the documented defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphParams {
    /// Links per node on the upper levels (level 0: `2 m`); `2..=256`.
    pub m: u32,
    /// Pool size of the build's searches (`>= 1`).
    pub ef_construction: u32,
    /// Build threads; 0 = every core. The graph does not depend on it.
    pub threads: u32,
    pub storage: Storage,
    pub seed: u64,
}

impl Default for GraphParams {
    fn default() -> Self {
        GraphParams {
            m: 16,
            ef_construction: 200,
            threads: 0,
            storage: Storage::F32,
            seed: 0x5eed_f6d0,
        }
    }
}

/// Counts summed over the queries of a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    pub queries: u64,
    /// Rows scored (dot products), upper levels included.
    pub distances: u64,
}

/// How a search walks level 0.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// Every row scored with the stored rows (f32 / bf16 / int8) on the
    /// fixed-order float kernels; the pool is the result.
    Exact = 0,
    /// Walk with int8 scores (the query quantised to int8 with one scale,
    /// integer dot products on the compact walk records, see `WalkRecs`),
    /// then re-rank the best `rerank` of the pool with the stored rows:
    /// the returned scores are those of [`Walk::Exact`]'s kernels.
    Int8 = 1,
}

impl Walk {
    pub fn from_u32(v: u32) -> Option<Walk> {
        match v {
            0 => Some(Walk::Exact),
            1 => Some(Walk::Int8),
            _ => None,
        }
    }
}

/// Query parameters (`Default`: ef 100, [`Walk::Exact`], rerank 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchParams {
    /// Pool size, `>= 1` (the pool is `max(ef, k)`).
    pub ef: usize,
    pub walk: Walk,
    /// [`Walk::Int8`]: how many of the pool's best (by int8 score) are
    /// re-scored exactly, `0` = the whole pool; at least `k` are.
    /// Ignored by [`Walk::Exact`].
    pub rerank: usize,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            ef: 100,
            walk: Walk::Exact,
            rerank: 0,
        }
    }
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
    // ------------------------------------------------------------ build

    /// Builds the graph over `rows` rows of `dim` floats (row `r` at
    /// `w[r * w_stride ..]`) with an optional bias, on the active tier.
    pub fn build(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &GraphParams,
    ) -> Result<Graph> {
        Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p)
    }

    /// [`Graph::build`] on one chosen tier (the graph is the same on every
    /// tier; tests check it).
    #[doc(hidden)]
    pub fn build_isa(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &GraphParams,
    ) -> Result<Graph> {
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
        if !(2..=MAX_M).contains(&p.m) {
            bail!(InvalidArgument, "m is {}; it must be in 2..=256", p.m);
        }
        if p.ef_construction == 0 {
            bail!(InvalidArgument, "ef_construction must be >= 1");
        }
        crate::error::check_finite_rows(w, rows, dim, w_stride, "w")?;
        if let Some(b) = bias {
            if let Some(r) = b[..rows].iter().position(|v| !v.is_finite()) {
                bail!(NonFinite, "bias[{r}] is {} (finite values needed)", b[r]);
            }
        }
        let sdim = (dim + 2).div_ceil(LANES) * LANES;
        let total = checked_mul(rows, sdim, "rows * stored row length")?;
        crate::error::check_fits_memory(total as u128 * 4, "graph rows")?;
        // The transform, in f64: U = max |[x; b]|, t = sqrt(U^2 - |[x; b]|^2).
        let norm2 = |r: usize| -> f64 {
            let x = &w[r * w_stride..r * w_stride + dim];
            let b = bias.map_or(0.0, |b| b[r] as f64);
            x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() + b * b
        };
        let mut n2 = try_vec::<f64>(rows, "graph norms")?;
        for (r, v) in n2.iter_mut().enumerate() {
            *v = norm2(r);
        }
        let u2 = n2.iter().fold(0.0f64, |a, &b| a.max(b));
        let u = u2.sqrt() as f32;
        if !(u * u).is_finite() || !(u2 as f32).is_finite() {
            bail!(
                InvalidArgument,
                "the largest row norm |[w; b]| = {} squared overflows f32",
                u2.sqrt()
            );
        }
        let mut xf = try_vec::<f32>(total, "graph rows")?;
        for r in 0..rows {
            let o = &mut xf[r * sdim..(r + 1) * sdim];
            o[..dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            o[dim] = bias.map_or(0.0, |b| b[r]);
            o[dim + 1] = (u2 - n2[r]).max(0.0).sqrt() as f32;
        }
        drop(n2);
        // Levels from the seed, then the upper-level slot offsets.
        let m = p.m as usize;
        let ml = 1.0 / ieee754_log(m as f64);
        let mut rng = SplitMix64::new(p.seed);
        let mut levels = try_vec::<u8>(rows, "graph levels")?;
        for l in levels.iter_mut() {
            let lv = (-ieee754_log(rng.next_f64_open()) * ml).floor();
            *l = lv.clamp(0.0, MAX_LEVEL as f64) as u8;
        }
        let mut upper_off = try_vec::<u32>(rows, "graph upper offsets")?;
        let mut acc = 0usize;
        for (o, &l) in upper_off.iter_mut().zip(&levels) {
            if acc > u32::MAX as usize {
                bail!(SizeOverflow, "upper-level links exceed 2^32 entries");
            }
            *o = acc as u32;
            acc += l as usize * (1 + m);
        }
        if acc > u32::MAX as usize {
            bail!(SizeOverflow, "upper-level links exceed 2^32 entries");
        }
        let slot0 = 1 + 2 * m;
        let links0 = try_vec::<u32>(checked_mul(rows, slot0, "rows * (1 + 2m)")?, "graph links")?;
        let upper = try_vec::<u32>(acc, "graph upper links")?;
        let mut g = Graph {
            rows,
            dim,
            sdim,
            u,
            has_bias: bias.is_some(),
            params: *p,
            data: Data::F32(xf),
            links0,
            levels,
            upper_off,
            upper,
            entry: 0,
            max_level: 0,
            walk: None,
        };
        g.max_level = g.levels[0] as usize;
        let threads = match p.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t as usize,
        };
        g.insert_all(tier, threads);
        g.repair_reachability(tier);
        g.convert_storage(p.storage)?;
        g.build_walk()?;
        Ok(g)
    }

    /// Inserts nodes `1..rows` (node 0 is the first entry point).
    fn insert_all(&mut self, tier: Isa, threads: usize) {
        let mut next = 1usize;
        while next < self.rows {
            let len = if next < SEQUENTIAL_NODES {
                1
            } else {
                (next / BATCH_DIV).max(1)
            };
            let end = (next + len).min(self.rows);
            let plans = self.plan_batch(tier, next..end, threads);
            self.apply_batch(tier, next, &plans, threads);
            next = end;
        }
    }

    /// Makes every node reachable from the entry point on level 0 (HNSW's
    /// pruning can leave a node without in-links). In node order, each
    /// unreachable node `u` is linked from the best-scoring reachable node
    /// with room found by a search for `u` (`ef_construction`), or, when
    /// none has room, replaces the last link of the best one whose target
    /// keeps another in-link; then everything reachable from `u` counts as
    /// reachable. Sequential and deterministic.
    fn repair_reachability(&mut self, tier: Isa) {
        let rows = self.rows;
        let mut seen = vec![false; rows];
        let mut indeg = vec![0u32; rows];
        for n in 0..rows {
            for &t in self.links(n, 0) {
                indeg[t as usize] += 1;
            }
        }
        let mut stack = Vec::new();
        let mut mark = |g: &Graph, from: usize, seen: &mut Vec<bool>| {
            if seen[from] {
                return;
            }
            seen[from] = true;
            stack.push(from);
            while let Some(n) = stack.pop() {
                for &t in g.links(n, 0) {
                    if !seen[t as usize] {
                        seen[t as usize] = true;
                        stack.push(t as usize);
                    }
                }
            }
        };
        mark(self, self.entry as usize, &mut seen);
        let cap = 2 * self.params.m as usize;
        let mut s = Scratch::default();
        for u in 0..rows {
            if seen[u] {
                continue;
            }
            let Data::F32(xf) = &self.data else {
                unreachable!("the build works on f32 rows")
            };
            let view = View {
                rows: Rows {
                    w: xf,
                    dim: self.sdim,
                    scales: &[],
                },
                dot: kg::kernels(tier).f32,
            };
            s.prepare(rows, self.sdim);
            let q = &xf[u * self.sdim..(u + 1) * self.sdim];
            let ep = self.descend(&view, q, 1, &mut s);
            self.search_layer(
                &view,
                q,
                0,
                ep,
                self.params.ef_construction as usize,
                &mut s,
            );
            s.sorted.clear();
            s.sorted.extend(s.pool.drain().map(|r| r.0));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            let pick = s
                .sorted
                .iter()
                .find(|c| {
                    c.id as usize != u
                        && seen[c.id as usize]
                        && self.links(c.id as usize, 0).len() < cap
                })
                .map(|c| (c.id as usize, None))
                .or_else(|| {
                    s.sorted.iter().find_map(|c| {
                        let v = c.id as usize;
                        if v == u || !seen[v] {
                            return None;
                        }
                        let l = self.links(v, 0);
                        l.iter()
                            .rposition(|&t| indeg[t as usize] >= 2)
                            .map(|pos| (v, Some(pos)))
                    })
                });
            let Some((v, replace)) = pick else {
                continue;
            };
            let slot = self.slot_mut(v, 0);
            match replace {
                None => {
                    let n = slot[0] as usize;
                    slot[1 + n] = u as u32;
                    slot[0] += 1;
                }
                Some(pos) => {
                    let old = slot[1 + pos] as usize;
                    slot[1 + pos] = u as u32;
                    indeg[old] -= 1;
                }
            }
            indeg[u] += 1;
            mark(self, u, &mut seen);
        }
    }

    /// Every node of the batch searches the current (frozen) graph: per
    /// level `0..=min(level, max_level)`, its selected neighbours.
    fn plan_batch(&self, tier: Isa, nodes: std::ops::Range<usize>, threads: usize) -> Vec<Plan> {
        let n = nodes.len();
        let work = |s: &mut Scratch, i: usize| self.plan_node(tier, nodes.start + i, s);
        if threads <= 1 || n < 2 {
            return SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                (0..n).map(|i| work(s, i)).collect()
            });
        }
        crate::par::map_indexed(n, threads, Scratch::default, work)
    }

    fn plan_node(&self, tier: Isa, node: usize, s: &mut Scratch) -> Plan {
        let Data::F32(xf) = &self.data else {
            unreachable!("the build works on f32 rows")
        };
        let view = View {
            rows: Rows {
                w: xf,
                dim: self.sdim,
                scales: &[],
            },
            dot: kg::kernels(tier).f32,
        };
        s.prepare(self.rows, self.sdim);
        let q = &xf[node * self.sdim..(node + 1) * self.sdim];
        let level = self.levels[node] as usize;
        let mut cur = self.descend(&view, q, level + 1, s);
        let mut plan = Plan { levels: Vec::new() };
        let ef = self.params.ef_construction as usize;
        let m = self.params.m as usize;
        for lev in (0..=level.min(self.max_level)).rev() {
            self.search_layer(&view, q, lev, cur, ef, s);
            // The pool, best first.
            s.sorted.clear();
            s.sorted.extend(s.pool.drain().map(|r| r.0));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            cur = s.sorted[0];
            let sel = select_heuristic(&view, &s.sorted, m, &mut s.ids, &mut s.out);
            plan.levels.push((lev, sel));
        }
        plan
    }

    /// Applies a batch's plans: the new nodes' own links (in node order),
    /// then the back-links of every old node they chose, pruned in node
    /// order (in parallel over old nodes).
    fn apply_batch(&mut self, tier: Isa, first: usize, plans: &[Plan], threads: usize) {
        let mut requests: Vec<(usize, u32, u32)> = Vec::new(); // (level, target, node)
        for (i, plan) in plans.iter().enumerate() {
            let node = (first + i) as u32;
            for (lev, sel) in &plan.levels {
                let slot = self.slot_mut(node as usize, *lev);
                slot[0] = sel.len() as u32;
                slot[1..1 + sel.len()].copy_from_slice(sel);
                requests.extend(sel.iter().map(|&t| (*lev, t, node)));
            }
        }
        requests.sort_unstable();
        // Group by (level, target).
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut a = 0;
        while a < requests.len() {
            let mut b = a + 1;
            while b < requests.len()
                && requests[b].0 == requests[a].0
                && requests[b].1 == requests[a].1
            {
                b += 1;
            }
            groups.push((a, b));
            a = b;
        }
        let work = |gi: usize, s: &mut Scratch| -> Vec<u32> {
            let (a, b) = groups[gi];
            let (lev, target) = (requests[a].0, requests[a].1 as usize);
            self.backlink(tier, lev, target, requests[a..b].iter().map(|r| r.2), s)
        };
        let n = groups.len();
        let lists: Vec<Vec<u32>> = if threads <= 1 || n < 64 {
            SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                (0..n).map(|gi| work(gi, s)).collect()
            })
        } else {
            crate::par::map_indexed(n, threads, Scratch::default, |s, i| work(i, s))
        };
        for (gi, list) in lists.into_iter().enumerate() {
            let (lev, target) = (requests[groups[gi].0].0, requests[groups[gi].0].1 as usize);
            let slot = self.slot_mut(target, lev);
            slot[0] = list.len() as u32;
            slot[1..1 + list.len()].copy_from_slice(&list);
        }
        // The entry point: the first node of the highest level.
        for i in 0..plans.len() {
            let l = self.levels[first + i] as usize;
            if l > self.max_level {
                self.max_level = l;
                self.entry = (first + i) as u32;
            }
        }
    }

    /// The new list of `target` at `lev` after adding `news` one by one
    /// (append while there is room, otherwise HNSW's heuristic over the
    /// list and the new node).
    fn backlink(
        &self,
        tier: Isa,
        lev: usize,
        target: usize,
        news: impl Iterator<Item = u32>,
        s: &mut Scratch,
    ) -> Vec<u32> {
        let Data::F32(xf) = &self.data else {
            unreachable!("the build works on f32 rows")
        };
        let view = View {
            rows: Rows {
                w: xf,
                dim: self.sdim,
                scales: &[],
            },
            dot: kg::kernels(tier).f32,
        };
        let cap = self.max_links(lev);
        let mut list = self.links(target, lev).to_vec();
        let q = &xf[target * self.sdim..(target + 1) * self.sdim];
        for nb in news {
            if list.len() < cap {
                list.push(nb);
                continue;
            }
            list.push(nb);
            s.out.clear();
            s.out.resize(list.len(), 0.0);
            view.score(q, &list, &mut s.out);
            s.sorted.clear();
            s.sorted
                .extend(list.iter().zip(&s.out).map(|(&id, &sc)| Cand { s: sc, id }));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            let sorted = std::mem::take(&mut s.sorted);
            list = select_heuristic(&view, &sorted, cap, &mut s.ids, &mut s.out);
            s.sorted = sorted;
        }
        list
    }

    /// The stored row `r` as f32 (`sdim` values) into `out`.
    fn stored_row(&self, r: usize, out: &mut [f32]) {
        let span = r * self.sdim..(r + 1) * self.sdim;
        match &self.data {
            Data::F32(v) => out.copy_from_slice(&v[span]),
            Data::Bf16(v) => out
                .iter_mut()
                .zip(&v[span])
                .for_each(|(o, &b)| *o = crate::kernels::matmul::bf16_to_f32(b)),
            Data::I8 { w, scales } => out
                .iter_mut()
                .zip(&w[span])
                .for_each(|(o, &c)| *o = c as f32 * scales[r]),
        }
    }

    /// Makes the int8 walk's records (see [`WalkRecs`]) from the stored
    /// rows and the level-0 links (after a build or a load; plain scalar
    /// code, so the same on every tier).
    fn build_walk(&mut self) -> Result<()> {
        if self.dim > MAX_WALK_DIM {
            self.walk = None;
            return Ok(());
        }
        let dpad = self.dim.div_ceil(kg::WALK_PAD) * kg::WALK_PAD;
        let slots = 2 * self.params.m as usize;
        let stride = (dpad + 4 * slots).div_ceil(64) * 64;
        let lines_n = checked_mul(self.rows, stride / 64, "walk records")?;
        let mut lines = try_vec::<Line>(lines_n, "graph walk records")?;
        let mut side = try_vec::<[f32; 2]>(self.rows, "graph walk scales")?;
        let mut row = vec![0.0f32; self.sdim];
        for r in 0..self.rows {
            self.stored_row(r, &mut row);
            let x = &row[..self.dim];
            let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
            let scale = amax / 127.0;
            side[r] = [scale, row[self.dim]];
            let rec: &mut [u8] = {
                let ls = &mut lines[r * stride / 64..(r + 1) * stride / 64];
                // SAFETY: `Line` is 64 plain bytes; the slice covers
                // exactly `ls`, borrowed mutably here.
                unsafe { std::slice::from_raw_parts_mut(ls.as_mut_ptr().cast::<u8>(), stride) }
            };
            for (t, c) in rec[..dpad].iter_mut().enumerate() {
                let code = if t < self.dim && scale > 0.0 {
                    (x[t] / scale).round().clamp(-127.0, 127.0) as i32
                } else {
                    0
                };
                *c = (code + 128) as u8;
            }
            let links = self.links(r, 0);
            for t in 0..slots {
                let v = links.get(t).copied().unwrap_or(u32::MAX);
                rec[dpad + 4 * t..dpad + 4 * t + 4].copy_from_slice(&v.to_ne_bytes());
            }
        }
        self.walk = Some(WalkRecs {
            lines,
            stride,
            dpad,
            side,
        });
        Ok(())
    }

    fn convert_storage(&mut self, st: Storage) -> Result<()> {
        let Data::F32(xf) = &self.data else {
            return Ok(());
        };
        self.data = match st {
            Storage::F32 => return Ok(()),
            Storage::Bf16 => {
                let mut v = try_vec::<u16>(xf.len(), "graph bf16 rows")?;
                v.iter_mut().zip(xf).for_each(|(d, &s)| *d = f32_to_bf16(s));
                Data::Bf16(v)
            }
            Storage::I8 => {
                let mut v = try_vec::<i8>(xf.len(), "graph int8 rows")?;
                let mut scales = try_vec::<f32>(self.rows, "graph int8 scales")?;
                crate::matmul::quantize_rows_i8(
                    xf,
                    self.rows,
                    self.sdim,
                    self.sdim,
                    &mut v,
                    self.sdim,
                    &mut scales,
                )?;
                Data::I8 { w: v, scales }
            }
        };
        Ok(())
    }

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
            kg::prefetch(p.as_ptr().cast(), len * 4);
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

    // ------------------------------------------------------------ search core

    /// Greedy descent from the entry point through levels
    /// `max_level .. stop` (exclusive), returning the node reached.
    fn descend<T>(&self, view: &View<'_, T>, q: &[f32], stop: usize, s: &mut Scratch) -> Cand {
        let e = self.entry;
        s.out.clear();
        s.out.push(0.0);
        view.score(q, &[e], &mut s.out[..1]);
        s.distances += 1;
        let mut cur = Cand { s: s.out[0], id: e };
        let mut lev = self.max_level;
        while lev >= stop && lev > 0 {
            loop {
                let links = self.links(cur.id as usize, lev);
                if links.is_empty() {
                    break;
                }
                s.out.clear();
                s.out.resize(links.len(), 0.0);
                view.score(q, links, &mut s.out);
                s.distances += links.len() as u64;
                let mut best = cur;
                for (&id, &sc) in links.iter().zip(&s.out) {
                    let c = Cand { s: sc, id };
                    if c > best {
                        best = c;
                    }
                }
                if best.id == cur.id {
                    break;
                }
                cur = best;
            }
            lev -= 1;
        }
        cur
    }

    /// Best-first search of level `lev` from `ep` with a pool of `ef`;
    /// leaves the pool in `s.pool`.
    fn search_layer<T>(
        &self,
        view: &View<'_, T>,
        q: &[f32],
        lev: usize,
        ep: Cand,
        ef: usize,
        s: &mut Scratch,
    ) {
        s.next_gen();
        let gen = s.gen;
        s.cand.clear();
        s.pool.clear();
        s.visited[ep.id as usize] = gen;
        s.cand.push(ep);
        s.pool.push(std::cmp::Reverse(ep));
        while let Some(c) = s.cand.pop() {
            let worst = s.pool.peek().unwrap().0;
            if c < worst && s.pool.len() >= ef {
                break;
            }
            // The next candidate's links are needed after this one's rows:
            // start fetching them now.
            if let Some(n) = s.cand.peek() {
                self.prefetch_links(n.id as usize, lev);
            }
            s.ids.clear();
            for &nb in self.links(c.id as usize, lev) {
                let v = &mut s.visited[nb as usize];
                if *v != gen {
                    *v = gen;
                    s.ids.push(nb);
                }
            }
            if s.ids.is_empty() {
                continue;
            }
            s.out.clear();
            s.out.resize(s.ids.len(), 0.0);
            view.score(q, &s.ids, &mut s.out);
            s.distances += s.ids.len() as u64;
            for (&id, &sc) in s.ids.iter().zip(&s.out) {
                let n = Cand { s: sc, id };
                if s.pool.len() < ef {
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                } else if n > s.pool.peek().unwrap().0 {
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                    s.pool.pop();
                }
            }
        }
    }

    /// The int8 walk of level 0 from `ep` with a pool of `ef` (the best-
    /// first search of [`Graph::search_layer`], scoring with the walk
    /// kernel on the records); leaves the pool in `s.pool`.
    #[allow(clippy::too_many_arguments)]
    fn walk_layer(
        &self,
        wr: &WalkRecs,
        wk: kg::WalkFn,
        qs: f32,
        corr: i32,
        ep: u32,
        ef: usize,
        s: &mut Scratch,
    ) {
        let recs = kg::Recs {
            base: wr.bytes(),
            stride: wr.stride,
            dim: wr.dpad,
        };
        let slots = 2 * self.params.m as usize;
        let q8 = std::mem::take(&mut s.q8);
        let score = |raw: i32, id: u32| -> f32 {
            let [sc, b] = wr.side[id as usize];
            raw.wrapping_sub(corr) as f32 * (sc * qs) + b
        };
        s.next_gen();
        let gen = s.gen;
        s.cand.clear();
        s.pool.clear();
        s.visited[ep as usize] = gen;
        s.raw.clear();
        s.raw.push(0);
        // SAFETY: ids < rows (graph invariant), records hold rows * stride
        // bytes, dpad a nonzero multiple of 64 <= stride, q8 holds at
        // least dpad bytes (Scratch::prepare), the tier was checked.
        unsafe { wk(&recs, &q8, &[ep], &mut s.raw[..1]) };
        s.distances += 1;
        let e = Cand {
            s: score(s.raw[0], ep),
            id: ep,
        };
        s.cand.push(e);
        s.pool.push(std::cmp::Reverse(e));
        while let Some(c) = s.cand.pop() {
            let worst = s.pool.peek().unwrap().0;
            if c < worst && s.pool.len() >= ef {
                break;
            }
            if let Some(n) = s.cand.peek() {
                kg::prefetch(
                    recs.base[n.id as usize * wr.stride + wr.dpad..].as_ptr(),
                    4 * slots,
                );
            }
            s.ids.clear();
            for &nb in wr.links(c.id as usize, slots) {
                if nb == u32::MAX {
                    break;
                }
                let v = &mut s.visited[nb as usize];
                if *v != gen {
                    *v = gen;
                    s.ids.push(nb);
                    // Its scale and bias are read after the kernel.
                    kg::prefetch(wr.side[nb as usize..].as_ptr().cast(), 8);
                }
            }
            if s.ids.is_empty() {
                continue;
            }
            s.raw.clear();
            s.raw.resize(s.ids.len(), 0);
            // SAFETY: as above (the ids are links: < rows).
            unsafe { wk(&recs, &q8, &s.ids, &mut s.raw) };
            s.distances += s.ids.len() as u64;
            for (&id, &raw) in s.ids.iter().zip(&s.raw) {
                let n = Cand {
                    s: score(raw, id),
                    id,
                };
                if s.pool.len() < ef || n > s.pool.peek().unwrap().0 {
                    // A kept node may be expanded soon: start fetching
                    // its links (the record's second part) now.
                    kg::prefetch(
                        recs.base[id as usize * wr.stride + wr.dpad..].as_ptr(),
                        4 * slots,
                    );
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                    if s.pool.len() > ef {
                        s.pool.pop();
                    }
                }
            }
        }
        s.q8 = q8;
    }

    /// One query with the int8 walk: exact greedy descent of the upper
    /// levels, int8 walk of level 0, exact re-rank of the pool's best
    /// `rerank` (0 = all) with the stored rows.
    #[allow(clippy::too_many_arguments)]
    fn query_walk<T>(
        &self,
        view: &View<'_, T>,
        wr: &WalkRecs,
        wk: kg::WalkFn,
        h: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        let mut q = std::mem::take(&mut s.q);
        q[..self.dim].copy_from_slice(h);
        q[self.dim] = 1.0;
        q[self.dim + 1..self.sdim].fill(0.0);
        // The int8 query: one scale, codes round(h / scale) in -127..=127.
        let amax = h.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        let qs = amax / 127.0;
        // Round to nearest even by adding and subtracting 1.5 * 2^23
        // (exact for |x| <= 2^22; here |x| <= 127): no libm call.
        const RND: f32 = 12_582_912.0;
        let mut qsum = 0i32;
        for (t, c) in s.q8[..wr.dpad].iter_mut().enumerate() {
            *c = if t < self.dim && qs > 0.0 {
                ((h[t] / qs + RND) - RND).clamp(-127.0, 127.0) as i8
            } else {
                0
            };
            qsum += *c as i32;
        }
        let corr = qsum.wrapping_mul(128);
        let ep = self.descend(view, &q[..self.sdim], 1, s);
        let ef = sp.ef.max(k);
        self.walk_layer(wr, wk, qs, corr, ep.id, ef, s);
        // The pool by int8 score, best first; the best `take` re-scored.
        s.sorted.clear();
        s.sorted.extend(s.pool.drain().map(|r| r.0));
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
        let take = match sp.rerank {
            0 => s.sorted.len(),
            r => r.max(k).min(s.sorted.len()),
        };
        s.ids.clear();
        s.ids.extend(s.sorted[..take].iter().map(|c| c.id));
        s.out.clear();
        s.out.resize(take, 0.0);
        view.score(&q[..self.sdim], &s.ids, &mut s.out);
        s.distances += take as u64;
        s.q = q;
        s.sorted.clear();
        s.sorted.extend(
            s.ids
                .iter()
                .zip(&s.out)
                .map(|(&id, &sc)| Cand { s: sc, id }),
        );
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
        self.write_top(s, out_ids, out_scores);
    }

    fn write_top(&self, s: &Scratch, out_ids: &mut [u32], out_scores: &mut [f32]) {
        for (t, (oi, os)) in out_ids.iter_mut().zip(out_scores.iter_mut()).enumerate() {
            match s.sorted.get(t) {
                Some(c) => {
                    *oi = c.id;
                    *os = c.s;
                }
                None => {
                    *oi = TOPK_PAD_ID;
                    *os = f32::NEG_INFINITY;
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn query_one<T>(
        &self,
        view: &View<'_, T>,
        h: &[f32],
        k: usize,
        ef: usize,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        let mut q = std::mem::take(&mut s.q);
        q[..self.dim].copy_from_slice(h);
        q[self.dim] = 1.0;
        q[self.dim + 1..self.sdim].fill(0.0);
        let ep = self.descend(view, &q[..self.sdim], 1, s);
        self.search_layer(view, &q[..self.sdim], 0, ep, ef.max(k), s);
        s.q = q;
        s.sorted.clear();
        s.sorted.extend(s.pool.drain().map(|r| r.0));
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
        self.write_top(s, out_ids, out_scores);
    }

    // ------------------------------------------------------------ search API

    /// The approximate top-`k` logits `h . x_i + b_i` of `nq` queries (`q`
    /// rows of `dim` floats at `q_stride`) with a search pool of
    /// `max(ef, k)`: `out_ids` / `out_scores` get `nq * k` entries, largest
    /// first, equal scores by smaller id, padded with [`TOPK_PAD_ID`] /
    /// `-inf` when the graph has fewer than `k` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        ef: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        self.search_stats(
            isa::active(),
            q,
            nq,
            q_stride,
            k,
            ef,
            out_ids,
            out_scores,
            None,
        )
    }

    /// [`Graph::search`] on one tier, with optional counts (added to
    /// `stats`).
    #[allow(clippy::too_many_arguments)]
    pub fn search_stats(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        ef: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut GraphStats>,
    ) -> Result<()> {
        let sp = SearchParams {
            ef,
            walk: Walk::Exact,
            rerank: 0,
        };
        self.search_with(tier, q, nq, q_stride, k, &sp, out_ids, out_scores, stats)
    }

    /// The search with every query option ([`SearchParams`]) on one tier,
    /// with optional counts (added to `stats`; with [`Walk::Int8`] the
    /// re-ranked rows count as scored too).
    #[allow(clippy::too_many_arguments)]
    pub fn search_with(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut GraphStats>,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        let ef = sp.ef;
        if ef == 0 {
            bail!(InvalidArgument, "ef must be >= 1");
        }
        if sp.walk == Walk::Int8 && self.walk.is_none() {
            bail!(
                InvalidArgument,
                "the int8 walk needs dim <= {MAX_WALK_DIM}; this graph has dim {}",
                self.dim
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
        crate::error::check_finite_rows(q, nq, self.dim, q_stride, "q")?;
        let need = checked_mul(nq, k, "nq * k")?;
        if out_ids.len() < need || out_scores.len() < need {
            bail!(
                BufferTooSmall,
                "outputs hold {} ids and {} scores, nq * k = {need} needed",
                out_ids.len(),
                out_scores.len()
            );
        }
        if k == 0 || nq == 0 {
            return Ok(());
        }
        let ks = kg::kernels(tier);
        let distances = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            s.prepare(self.rows, self.sdim);
            s.distances = 0;
            for i in 0..nq {
                let h = &q[i * q_stride..i * q_stride + self.dim];
                let (oi, os) = (
                    &mut out_ids[i * k..(i + 1) * k],
                    &mut out_scores[i * k..(i + 1) * k],
                );
                match &self.data {
                    Data::F32(w) => {
                        let v = View {
                            rows: Rows {
                                w,
                                dim: self.sdim,
                                scales: &[],
                            },
                            dot: ks.f32,
                        };
                        self.query_any(&v, ks, h, k, sp, s, oi, os)
                    }
                    Data::Bf16(w) => {
                        let v = View {
                            rows: Rows {
                                w,
                                dim: self.sdim,
                                scales: &[],
                            },
                            dot: ks.bf16,
                        };
                        self.query_any(&v, ks, h, k, sp, s, oi, os)
                    }
                    Data::I8 { w, scales } => {
                        let v = View {
                            rows: Rows {
                                w,
                                dim: self.sdim,
                                scales,
                            },
                            dot: ks.i8,
                        };
                        self.query_any(&v, ks, h, k, sp, s, oi, os)
                    }
                }
            }
            s.distances
        });
        if let Some(st) = stats {
            st.queries += nq as u64;
            st.distances += distances;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn query_any<T>(
        &self,
        view: &View<'_, T>,
        ks: &kg::Kernels,
        h: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        match (sp.walk, &self.walk) {
            (Walk::Int8, Some(wr)) => {
                self.query_walk(view, wr, ks.walk, h, k, sp, s, out_ids, out_scores)
            }
            _ => self.query_one(view, h, k, sp.ef, s, out_ids, out_scores),
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

/// One node's build plan: per level (highest first), the chosen links.
struct Plan {
    levels: Vec<(usize, Vec<u32>)>,
}

/// HNSW's neighbour heuristic: `sorted` holds candidates best first (their
/// score to the base node); a candidate is kept unless a kept one scores
/// higher with it than the base does (is closer to it, all norms being
/// equal). At most `m` are kept; with fewer than `m` candidates all are.
fn select_heuristic(
    view: &View<'_, f32>,
    sorted: &[Cand],
    m: usize,
    ids: &mut Vec<u32>,
    out: &mut Vec<f32>,
) -> Vec<u32> {
    if sorted.len() <= m {
        return sorted.iter().map(|c| c.id).collect();
    }
    ids.clear();
    for c in sorted {
        if ids.len() >= m {
            break;
        }
        let good = if ids.is_empty() {
            true
        } else {
            out.clear();
            out.resize(ids.len(), 0.0);
            let r = c.id as usize * view.rows.dim;
            view.score(&view.rows.w[r..r + view.rows.dim], ids, out);
            out.iter().all(|&v| v <= c.s)
        };
        if good {
            ids.push(c.id);
        }
    }
    ids.clone()
}
