//! Shared by `examples/demo.rs` and `examples/w2v_recall.rs`: the data
//! sources, the exact dense ground truth, a retrieval pipeline and the
//! recall measures.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use lshk::dense::DenseLayer;
use lshk::matmul::{topk, WeightMatrix, Weights};
use lshk::tables::{GatherInput, GatherParams, GatherResult, Tables};
use lshk::{Dwta, SimHash};

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    SimHash,
    Dwta,
}

/// How rows and queries are mapped before hashing (logits never change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    None,
    /// index `[w, b]`, query `[q, 1]`.
    BiasAug,
    /// Neyshabur & Srebro: index `[w/U, sqrt(1 - |w/U|^2)]`, query `[q/|q|, 0]`.
    Mips,
}

impl Transform {
    pub fn name(self) -> &'static str {
        match self {
            Transform::None => "none",
            Transform::BiasAug => "bias-aug",
            Transform::Mips => "mips",
        }
    }
    fn extra(self) -> usize {
        if self == Transform::None {
            0
        } else {
            1
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub family: Family,
    pub bits: u32,
    pub tables: u32,
    pub bin_size: u32,
    pub range_bits: u32,
    pub transform: Transform,
    pub seed: u64,
}

impl Params {
    pub fn describe(&self) -> String {
        match self.family {
            Family::SimHash => format!(
                "SimHash K={} L={} range_bits={} transform={}",
                self.bits,
                self.tables,
                self.range_bits,
                self.transform.name()
            ),
            Family::Dwta => format!(
                "DWTA K={} L={} bin={} range_bits={} transform={}",
                self.bits,
                self.tables,
                self.bin_size,
                self.range_bits,
                self.transform.name()
            ),
        }
    }
}

enum Hasher {
    Sim(SimHash),
    Dwta(Dwta),
}

/// hash -> gather -> gathered matmul (+ bias) -> top-k, with the kernels
/// called directly (the same pipeline as `lshk::index::Index`).
pub struct Direct<'a> {
    hasher: Hasher,
    tables: Tables,
    wm: WeightMatrix<'a>,
    p: Params,
    dim: usize,
    /// U of the MIPS transform.
    max_norm: f32,
    qt: Vec<f32>,
    codes: Vec<u32>,
    proj: Vec<f32>,
    res: GatherResult,
    scores: Vec<f32>,
}

/// Transformed copy of rows `r0..r0+n` (dim + extra columns).
fn transform_rows(d: &Data, p: &Params, u: f32, r0: usize, n: usize, out: &mut Vec<f32>) {
    let dt = d.dim + p.transform.extra();
    out.clear();
    out.resize(n * dt, 0.0);
    for (i, o) in out.chunks_exact_mut(dt).enumerate() {
        let r = r0 + i;
        let w = &d.w[r * d.dim..(r + 1) * d.dim];
        match p.transform {
            Transform::None => o.copy_from_slice(w),
            Transform::BiasAug => {
                o[..d.dim].copy_from_slice(w);
                o[d.dim] = d.bias.as_ref().map_or(0.0, |b| b[r]);
            }
            Transform::Mips => {
                let mut n2 = 0.0f32;
                for (a, b) in o.iter_mut().zip(w) {
                    *a = b / u;
                    n2 += *a * *a;
                }
                o[d.dim] = (1.0 - n2).max(0.0).sqrt();
            }
        }
    }
}

impl<'a> Direct<'a> {
    /// Hashes every row (both cores, progress through `progress(done, total)`)
    /// and builds the tables.
    pub fn build(
        d: &'a Data,
        p: Params,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> lshk::Result<Self> {
        let dt = d.dim + p.transform.extra();
        let hasher = match p.family {
            Family::SimHash => Hasher::Sim(SimHash::new(dt, p.bits, p.tables, 0, p.seed)?),
            Family::Dwta => Hasher::Dwta(Dwta::new(dt, p.bits, p.tables, p.bin_size, p.seed)?),
        };
        let max_norm =
            d.w.chunks_exact(d.dim)
                .map(|r| r.iter().map(|v| v * v).sum::<f32>().sqrt())
                .fold(0.0f32, f32::max)
                .max(f32::MIN_POSITIVE);
        let l = p.tables as usize;
        let mut codes = vec![0u32; d.rows * l];
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = 16_384;
        let done = std::sync::atomic::AtomicU64::new(0);
        let per_thread = d.rows.div_ceil(threads).div_ceil(chunk).max(1) * chunk;
        std::thread::scope(|s| -> lshk::Result<()> {
            let mut hs = Vec::new();
            for (ti, cs) in codes.chunks_mut(per_thread * l).enumerate() {
                let (hasher, done) = (&hasher, &done);
                hs.push(s.spawn(move || -> lshk::Result<()> {
                    let mut buf = Vec::new();
                    for (ci, c) in cs.chunks_mut(chunk * l).enumerate() {
                        let r0 = ti * per_thread + ci * chunk;
                        let n = c.len() / l;
                        transform_rows(d, &p, max_norm, r0, n, &mut buf);
                        match hasher {
                            Hasher::Sim(h) => h.hash(&buf, n, dt, c)?,
                            Hasher::Dwta(h) => h.hash_dense(&buf, n, dt, c)?,
                        }
                        let now = done.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                        progress(now + n as u64, d.rows as u64);
                    }
                    Ok(())
                }));
            }
            for h in hs {
                h.join().expect("hash thread")?;
            }
            Ok(())
        })?;
        let tables = Tables::build(&codes, d.rows, p.tables, p.range_bits, 0, p.seed, 0)?;
        let mut wm = WeightMatrix::new(Weights::F32(&d.w), d.rows, d.dim, d.dim)?;
        if let Some(b) = &d.bias {
            wm = wm.with_bias(b)?;
        }
        Ok(Direct {
            hasher,
            tables,
            wm,
            p,
            dim: d.dim,
            max_norm,
            qt: Vec::new(),
            codes: Vec::new(),
            proj: Vec::new(),
            res: GatherResult::default(),
            scores: Vec::new(),
        })
    }

    /// Bytes of the hash family and the tables (W is borrowed, not counted).
    pub fn memory_bytes(&self) -> usize {
        let h = match &self.hasher {
            Hasher::Sim(h) => h.num_planes() * h.dim() * 4 * 2,
            Hasher::Dwta(h) => h.num_bins() * h.bin_size() as usize * 4,
        };
        h + self.tables.memory_bytes()
    }

    /// Top-k of `nq` queries; returns the candidates summed over the batch.
    pub fn query(
        &mut self,
        q: &[f32],
        nq: usize,
        k: usize,
        g: &GatherParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> lshk::Result<u64> {
        let dim = self.dim;
        let dt = dim + self.p.transform.extra();
        let l = self.p.tables as usize;
        self.qt.resize(nq * dt, 0.0);
        for i in 0..nq {
            let src = &q[i * dim..(i + 1) * dim];
            let o = &mut self.qt[i * dt..(i + 1) * dt];
            o[..dim].copy_from_slice(src);
            match self.p.transform {
                Transform::None => {}
                Transform::BiasAug => o[dim] = 1.0,
                Transform::Mips => {
                    let n = src
                        .iter()
                        .map(|v| v * v)
                        .sum::<f32>()
                        .sqrt()
                        .max(f32::MIN_POSITIVE);
                    o[..dim].iter_mut().for_each(|v| *v /= n);
                    o[dim] = 0.0;
                }
            }
        }
        self.codes.resize(nq * l, 0);
        let mut g = *g;
        match &self.hasher {
            Hasher::Sim(h) => {
                h.hash(&self.qt, nq, dt, &mut self.codes)?;
                if g.probes > 0 {
                    self.proj.resize(nq * h.num_planes(), 0.0);
                    h.project(&self.qt, nq, dt, &mut self.proj)?;
                    g.bits_per_table = self.p.bits;
                }
            }
            Hasher::Dwta(h) => {
                h.hash_dense(&self.qt, nq, dt, &mut self.codes)?;
                g.probes = 0;
            }
        }
        let input = GatherInput {
            codes: &self.codes,
            q: nq,
            projections: if g.probes > 0 { Some(&self.proj) } else { None },
            forced_offsets: None,
            forced_ids: &[],
        };
        self.tables.gather(&g, &input, false, &mut self.res)?;
        self.scores.resize(self.res.ids.len(), 0.0);
        self.wm.matmul(
            q,
            nq,
            dim,
            &self.res.ids,
            &self.res.offsets,
            &mut self.scores,
        )?;
        topk(
            &self.scores,
            Some(&self.res.ids),
            &self.res.offsets,
            k,
            out_ids,
            out_scores,
        )?;
        Ok(self.res.ids.len() as u64)
    }
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
