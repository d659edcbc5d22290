//! Shared by `examples/demo.rs` and `examples/w2v_recall.rs`: the data
//! sources, the exact dense ground truth, a retrieval pipeline and the
//! recall measures.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use lshk::dense::DenseLayer;

/// An output layer and queries (labels when known).
pub struct Data {
    pub name: String,
    pub w: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub rows: usize,
    pub dim: usize,
    pub q: Vec<f32>,
    pub nq: usize,
    pub labels: Option<Vec<u32>>,
}

impl Data {
    pub fn query(&self, i: usize) -> &[f32] {
        &self.q[i * self.dim..(i + 1) * self.dim]
    }
    pub fn layer(&self) -> DenseLayer<'_> {
        DenseLayer::new(&self.w, self.rows, self.dim, self.dim, self.bias.as_deref())
            .expect("valid layer")
    }
}

/// Seeds of the embedded default (fixed: the demo's numbers are reproducible).
pub const LAYER_SEED: u64 = 20_240_601;
pub const QUERY_SEED: u64 = 7;

/// The embedded default: `lshk::data::structured_layer(rows, 128, clusters,
/// LAYER_SEED)` and `queries_near_labels(.., nq, QUERY_SEED)`.
pub fn synthetic(rows: usize, clusters: usize, nq: usize) -> Data {
    let dim = 128;
    let layer = lshk::data::structured_layer(rows, dim, clusters, LAYER_SEED);
    let (q, labels) = lshk::data::queries_near_labels(&layer.w, rows, dim, nq, QUERY_SEED);
    Data {
        name: format!("synthetic structured layer {rows} x {dim}, {clusters} clusters"),
        w: layer.w,
        bias: Some(layer.bias),
        rows,
        dim,
        q,
        nq,
        labels: Some(labels),
    }
}

/// The w2v-gutenberg output layer (no bias) with the first `nq` held-out
/// pairs: query = input embedding of the centre word, label = context word.
/// `None` when the directory is absent.
pub fn w2v(dir: &Path, nq: usize) -> Option<lshk::Result<Data>> {
    if !dir.join("output_layer.f32").exists() {
        return None;
    }
    Some((|| {
        let dim = 128;
        let (w, rows) = lshk::data::read_raw_f32(&dir.join("output_layer.f32"), dim)?;
        let (emb, erows) = lshk::data::read_raw_f32(&dir.join("input_embeddings.f32"), dim)?;
        let pairs = lshk::data::read_raw_i32(&dir.join("heldout_pairs.i32"))?;
        let nq = nq.min(pairs.len() / 2);
        let mut q = Vec::with_capacity(nq * dim);
        let mut labels = Vec::with_capacity(nq);
        for p in pairs.chunks_exact(2).take(nq) {
            let (c, l) = (p[0] as usize, p[1] as u32);
            assert!(c < erows && (l as usize) < rows, "pair out of range");
            q.extend_from_slice(&emb[c * dim..(c + 1) * dim]);
            labels.push(l);
        }
        Ok(Data {
            name: format!("w2v-gutenberg output layer {rows} x {dim}, {nq} held-out pairs"),
            w,
            bias: None,
            rows,
            dim,
            q,
            nq,
            labels: Some(labels),
        })
    })())
}

/// User weights (`.npy`, f32, C order), optional bias and queries.
pub fn npy(weights: &Path, bias: Option<&Path>, queries: &Path) -> lshk::Result<Data> {
    let (w, rows, dim) = lshk::data::read_npy_f32(weights)?;
    let bias = match bias {
        Some(p) => {
            let (b, n, c) = lshk::data::read_npy_f32(p)?;
            if n * c != rows {
                return Err(lshk::Error::new(
                    lshk::Status::InvalidArgument,
                    format!("bias has {} values, W has {rows} rows", n * c),
                ));
            }
            Some(b)
        }
        None => None,
    };
    let (q, nq, qd) = lshk::data::read_npy_f32(queries)?;
    if qd != dim {
        return Err(lshk::Error::new(
            lshk::Status::InvalidArgument,
            format!("queries have {qd} columns, W has {dim}"),
        ));
    }
    Ok(Data {
        name: format!("{} ({rows} x {dim}), {nq} queries", weights.display()),
        w,
        bias,
        rows,
        dim,
        q,
        nq,
        labels: None,
    })
}

/// The layer of a directory: `DIR/W.npy`, `DIR/Q.npy` and, if present,
/// `DIR/b.npy` (e.g. what `benches/peers/minilm_export.py` writes).
pub fn npy_dir(dir: &Path) -> lshk::Result<Data> {
    let b = dir.join("b.npy");
    npy(
        &dir.join("W.npy"),
        b.exists().then_some(b.as_path()),
        &dir.join("Q.npy"),
    )
}

/// Exact top-k of the first `nq` queries (all cores), and the seconds it took.
pub fn exact_topk(d: &Data, nq: usize, k: usize) -> (Vec<u32>, Vec<f32>, f64) {
    let (mut ids, mut sc) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    let t = Instant::now();
    d.layer()
        .topk_threads(0, &d.q, nq, d.dim, k, &mut ids, &mut sc)
        .expect("exact top-k");
    (ids, sc, t.elapsed().as_secs_f64())
}

// ------------------------------------------------------------- retrieval

pub use lshk::index::{Family, Index, IndexParams, QueryStats, Storage, Transform};

pub fn transform_name(t: Transform) -> &'static str {
    match t {
        Transform::None => "none",
        Transform::BiasAug => "bias-aug",
        Transform::Mips => "mips",
    }
}

/// One line describing the parameters that matter here.
pub fn describe(p: &IndexParams, range_bits: u32) -> String {
    match p.family {
        Family::SimHash => format!(
            "SimHash K={} L={} range_bits={range_bits} transform={}",
            p.bits,
            p.tables,
            transform_name(p.transform)
        ),
        Family::Dwta => format!(
            "DWTA K={} L={} bin={} range_bits={range_bits} transform={}",
            p.bits,
            p.tables,
            p.bin_size,
            transform_name(p.transform)
        ),
        Family::Graph => format!(
            "graph M={} efConstruction={} storage={:?}",
            p.graph.m, p.graph.ef_construction, p.graph.storage
        ),
        Family::Ivf => format!(
            "IVF nlist={} codes={:?} storage={:?}",
            p.ivf.nlist, p.ivf.codes, p.storage
        ),
        Family::Forest => format!(
            "forest trees={} leaf_size={} storage={:?}",
            p.forest.trees, p.forest.leaf_size, p.storage
        ),
    }
}

/// An index over `d`'s layer: with `p.storage` F32 (the default) W is
/// borrowed, not copied; bf16 / f16 / i8 store a converted copy.
pub fn build(
    d: &Data,
    p: &IndexParams,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> lshk::Result<Index> {
    if !matches!(p.storage, Storage::F32 | Storage::BorrowedF32) {
        return Index::build(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, p, progress);
    }
    let p = IndexParams {
        storage: Storage::BorrowedF32,
        ..p.clone()
    };
    // SAFETY: `d.w` is neither changed nor dropped while the index lives:
    // every caller keeps `d` borrowed for the index's lifetime (the index
    // is dropped before `d` in each function that builds one).
    unsafe { Index::build_borrowed(&d.w, d.bias.as_deref(), d.rows, d.dim, d.dim, &p, progress) }
}

/// Top-k of queries `q0 .. q0 + nq` of `d` in batches of 64; returns the
/// mean candidates per query.
#[allow(clippy::too_many_arguments)]
pub fn query_all(
    idx: &Index,
    d: &Data,
    q0: usize,
    nq: usize,
    k: usize,
    g: &lshk::tables::GatherParams,
    batch: usize,
    ids: &mut [u32],
    sc: &mut [f32],
) -> f64 {
    let mut total = 0u64;
    for c in (0..nq).step_by(batch) {
        let n = batch.min(nq - c);
        let mut st = QueryStats::default();
        idx.query(
            &d.q[(q0 + c) * d.dim..],
            n,
            d.dim,
            k as u32,
            g,
            &mut ids[c * k..(c + n) * k],
            &mut sc[c * k..(c + n) * k],
            Some(&mut st),
        )
        .expect("query");
        total += st.candidates_total;
    }
    total as f64 / nq.max(1) as f64
}

// ------------------------------------------------------------- measures

/// Recall of a retrieval run against the exact top-k (`k >= 10` columns).
#[derive(Default, Clone, Copy, Debug)]
pub struct Recall {
    pub top1: f64,
    pub top10: f64,
    /// Label among lshk's top-10.
    pub label10: f64,
    /// Label among the exact top-10 (the ceiling for `label10`).
    pub exact_label10: f64,
}

pub fn recall(got: &[u32], exact: &[u32], k: usize, nq: usize, labels: Option<&[u32]>) -> Recall {
    let kk = k.min(10);
    let mut r = Recall::default();
    for i in 0..nq {
        let g = &got[i * k..i * k + kk];
        let e = &exact[i * k..i * k + kk];
        r.top1 += (g[0] == e[0]) as u32 as f64;
        r.top10 += e.iter().filter(|x| g.contains(x)).count() as f64 / kk as f64;
        if let Some(l) = labels {
            r.label10 += g.contains(&l[i]) as u32 as f64;
            r.exact_label10 += e.contains(&l[i]) as u32 as f64;
        }
    }
    let n = nq.max(1) as f64;
    r.top1 /= n;
    r.top10 /= n;
    r.label10 /= n;
    r.exact_label10 /= n;
    r
}

/// A progress printer: one line rewritten in place on a terminal, a line
/// per quarter otherwise.
pub fn progress_line(what: &'static str) -> impl Fn(u64, u64) + Sync {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let step = if tty { 1 } else { 25 };
    let last = std::sync::Mutex::new(0u64);
    move |done, total| {
        let pct = done * 100 / total.max(1);
        let mut l = last.lock().unwrap();
        if pct >= *l + step || (done == total && *l != 100) {
            *l = pct;
            if tty {
                print!("\r  {what}: {done}/{total} rows hashed ({pct}%)");
                if done == total {
                    println!();
                }
            } else {
                println!("  {what}: {done}/{total} rows hashed ({pct}%)");
            }
            let _ = std::io::stdout().flush();
        }
    }
}

// ------------------------------------------------------------- multi-label

/// (centre, context) pairs grouped by centre word, in increasing centre
/// order: one multi-label query per centre that occurs.
pub struct Grouped {
    /// The centre word of each query.
    pub centres: Vec<u32>,
    /// CSR offsets (`centres.len() + 1`) into `labels`.
    pub offsets: Vec<usize>,
    /// Per query its context words: every occurrence (repeats are the
    /// counts) or, with `dedup`, each once in increasing order.
    pub labels: Vec<u32>,
}

impl Grouped {
    pub fn len(&self) -> usize {
        self.centres.len()
    }
    pub fn labels_of(&self, i: usize) -> &[u32] {
        &self.labels[self.offsets[i]..self.offsets[i + 1]]
    }
    /// Queries: the rows of `emb` (`dim` wide) of the centres, packed.
    pub fn queries(&self, emb: &[f32], dim: usize) -> Vec<f32> {
        let mut q = Vec::with_capacity(self.len() * dim);
        for &c in &self.centres {
            q.extend_from_slice(&emb[c as usize * dim..(c as usize + 1) * dim]);
        }
        q
    }
}

/// Groups the first `max_pairs` of `pairs` (flat `[centre, context]` i32)
/// by centre (counting sort, stable: labels keep their pair order unless
/// `dedup`). Panics on ids outside `centres` / `rows`.
pub fn group_pairs(
    pairs: &[i32],
    max_pairs: usize,
    centres: usize,
    rows: usize,
    dedup: bool,
) -> Grouped {
    let pairs = &pairs[..(2 * max_pairs).min(pairs.len() / 2 * 2)];
    let mut cnt = vec![0usize; centres + 1];
    for p in pairs.chunks_exact(2) {
        assert!(
            p[0] >= 0 && (p[0] as usize) < centres && p[1] >= 0 && (p[1] as usize) < rows,
            "pair ({}, {}) out of range",
            p[0],
            p[1]
        );
        cnt[p[0] as usize + 1] += 1;
    }
    for i in 0..centres {
        cnt[i + 1] += cnt[i];
    }
    let mut fill = cnt.clone();
    let mut ys = vec![0u32; pairs.len() / 2];
    for p in pairs.chunks_exact(2) {
        let c = p[0] as usize;
        ys[fill[c]] = p[1] as u32;
        fill[c] += 1;
    }
    let mut g = Grouped {
        centres: Vec::new(),
        offsets: vec![0],
        labels: Vec::with_capacity(ys.len()),
    };
    for c in 0..centres {
        if cnt[c + 1] > cnt[c] {
            let s = &mut ys[cnt[c]..cnt[c + 1]];
            let start = g.labels.len();
            g.labels.extend_from_slice(s);
            if dedup {
                g.labels[start..].sort_unstable();
                let mut n = start;
                for j in start..g.labels.len() {
                    if j == start || g.labels[j] != g.labels[n - 1] {
                        g.labels[n] = g.labels[j];
                        n += 1;
                    }
                }
                g.labels.truncate(n);
            }
            g.centres.push(c as u32);
            g.offsets.push(g.labels.len());
        }
    }
    g
}
