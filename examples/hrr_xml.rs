//! Holographic reduced representations for extreme multi-label inference
//! (issue 17): the unbind-then-search pipeline against exact search, and
//! the synthetic capacity experiment.
//!
//! `cargo run --release --example hrr_xml` (a small default run, well under
//! a minute); the runs (`examples/hrr_xml.md`): `-- --m 670091
//! --d 400,800 --queries 200 --capacity --nprobe 128,512 --reach ''
//! --pq-rerank 16,64`.
//!
//! What it does, per dimension d:
//! 1. Class vectors: `m` rows from `lshk::hrr::class_vectors(seed, d)`
//!    (projected: every frequency of magnitude 1, unit norm; frozen
//!    generator), and the key `p`: row 0 of seed `seed + 1`.
//! 2. Indexes over them: `lshk::ivf::Ivf` (k-means lists, int8 codes, W
//!    borrowed for the exact re-ranking), and a flat 4-bit PQ scan
//!    ([`Pq4Flat`]: `lshk::pq4` fast-scan codes of every row, `d / 4`
//!    sub-quantisers, i.e. `d / 8` bytes per row, then the best R
//!    re-scored exactly from the f32 rows). Random class vectors have no
//!    cluster structure for the IVF lists to use, so the IVF index needs
//!    a large share of its lists for high recall; the PQ scan reads every
//!    row but 32x fewer bytes than exact search.
//! 3. Network outputs, synthesised: sample i draws `L` distinct labels
//!    (SplitMix64 of `seed + 2`) and `s_i = sum_l p ⊛ c_l` (the bound label
//!    vectors summed).
//! 4. The pipeline ([`Pipeline::query`], batched, `&self`: thread-safe):
//!    `y = p† ⊛ s` (approximate inverse: p is projected, so it is exact),
//!    `y / (|y| + 1e-8)`, then the top-k of `c_i . y` from the index.
//! 5. Exact search: the same unbound, normalised y against every class
//!    vector with `lshk::dense::DenseLayer::topk` (one SIMD pass over all
//!    of C).
//!
//! It prints, per number of bound labels L: recall@k of the pipeline
//! against the exact top-k (ids), the fraction of the L bound labels found
//! in the exact top-L and in the pipeline's top-k, and the time per query,
//! one thread, at B = 1 and B = 64, for the pipeline (unbind + normalise +
//! index; every query, best of three passes) and for exact search
//! (unbind, normalise, dense top-k; one pass over the first 16 queries at
//! B = 1, the first 64 at B = 64), with their ratio. `--capacity` adds the
//! capacity sweep: for L = 1, 2, 4, ..., up to `--max-labels`, the
//! fraction of the L labels in the exact top-L (exact search only).
//!
//! Options: `--m N` (labels, default 20000), `--d LIST` (default 400),
//! `--labels LIST` (bound labels per sample for the pipeline table,
//! default 1,5,10), `--queries N` (per L, default 100), `--k N` (5),
//! `--seed S` (1), `--nlist N` (0 = round(4 sqrt(m))), `--iters N`
//! (k-means, 10), `--reach LIST` (adaptive lists, default 3; `--reach ''`
//! for none), `--nprobe LIST` (exactly N lists; one table row per search
//! setting), `--rerank N` (IVF, 32), `--ivf 0` (no IVF index),
//! `--pq-dsub N` (dims per PQ sub-quantiser, 4), `--pq-rerank LIST` (R of
//! the PQ scan, default 64; `''` for none), `--ivf-pq4-rerank LIST` (the
//! library's IVF index with 4-bit PQ codes, `Codes::Pq4` with `d /
//! pq-dsub` sub-quantisers, every list visited, R re-ranked: the flat scan
//! as an lshk index; default 64, `''` for none), `--ivf-pq4-nlist N` (its
//! lists, 64), `--capacity`, `--max-labels
//! N` (for `--capacity`, default 64), `--threads N` (for the generation,
//! the builds and a multi-threaded check of the pipeline; 0 = all cores;
//! timings are always one thread).
//!
//! Timings are wall-clock on whatever else the machine is doing; compare
//! the figures of one run with each other.

use std::hint::black_box;
use std::time::Instant;

use lshk::dense::DenseLayer;
use lshk::hrr::{self, class_vectors, Hrr, Inverse, Scratch};
use lshk::ivf::{Ivf, IvfParams, SearchParams};
use lshk::matmul::TopK;
use lshk::pq4::{Codebook, Pq4Lut, Pq4Rows, TrainParams};
use lshk::rng::SplitMix64;

/// The unbinding step: the key and its plans.
struct Unbinder {
    d: usize,
    key: Vec<f32>,
    hrr: Hrr,
}

/// Per-thread buffers of an [`Unbinder`] / [`Pipeline`].
struct Buffers {
    scratch: Scratch,
    y: Vec<f32>,
}

impl Unbinder {
    fn buffers(&self, batch: usize) -> Buffers {
        Buffers {
            scratch: self.hrr.scratch().unwrap(),
            y: vec![0.0; batch * self.d],
        }
    }

    /// `y = key† ⊛ s`, normalised, for the outputs `s` (whole rows) into
    /// `b.y`.
    fn unbind(&self, s: &[f32], b: &mut Buffers) {
        let y = &mut b.y[..s.len()];
        self.hrr
            .unbind(Inverse::Approx, &self.key, s, y, &mut b.scratch)
            .expect("unbind");
        for row in y.chunks_exact_mut(self.d) {
            hrr::normalize(row);
        }
    }
}

/// A flat 4-bit PQ scan of every class vector (`lshk::pq4`, fast-scan
/// `vpshufb` kernels) whose best `rerank` candidates are re-scored exactly
/// from the f32 rows: linear in the rows, but it reads `m_sub / 2` bytes
/// per row instead of `4 d`.
struct Pq4Flat<'a> {
    cb: Codebook,
    codes: Pq4Rows,
    w: &'a [f32],
    d: usize,
}

/// Per-thread buffers of a [`Pq4Flat`] search.
struct Pq4Buf {
    lut: Pq4Lut,
    scores: Vec<f32>,
    top: TopK,
}

/// Rows scored per `score_run` call (a multiple of 32; 64 KiB of scores).
const PQ_CHUNK: usize = 16_384;

impl<'a> Pq4Flat<'a> {
    fn build(w: &'a [f32], m: usize, d: usize, m_sub: usize, seed: u64) -> Pq4Flat<'a> {
        let tp = TrainParams {
            seed,
            ..TrainParams::default()
        };
        let cb = Codebook::train(w, m, d, d, m_sub, &tp).expect("pq4 train");
        let codes = cb.encode(w, m, d).expect("pq4 encode");
        Pq4Flat { cb, codes, w, d }
    }

    fn buffers(&self) -> Pq4Buf {
        Pq4Buf {
            lut: Pq4Lut::new(self.cb.m()).unwrap(),
            scores: vec![0.0; PQ_CHUNK],
            top: TopK::new(),
        }
    }

    /// Top-k of the `n` queries `y` (rows of d): PQ scores of every row,
    /// the best `rerank` re-scored exactly (f32 dot products summed in
    /// f64), largest first, equal scores by smaller id.
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        y: &[f32],
        n: usize,
        k: usize,
        rerank: usize,
        b: &mut Pq4Buf,
        ids: &mut [u32],
        scores: &mut [f32],
    ) {
        let (d, rows) = (self.d, self.codes.rows());
        for q in 0..n {
            let yq = &y[q * d..(q + 1) * d];
            b.lut.set(&self.cb, yq).expect("pq4 lut");
            let r = rerank.max(k);
            b.top.clear();
            for first in (0..rows).step_by(PQ_CHUNK) {
                let nr = PQ_CHUNK.min(rows - first);
                self.codes
                    .score_run(first, nr, &b.lut, None, &mut b.scores[..nr])
                    .expect("pq4 score");
                b.top.offer_run(&b.scores[..nr], first as u32, r);
            }
            let mut exact: Vec<(f32, u32)> = b
                .top
                .best(r)
                .map(|(_, id)| {
                    let row = &self.w[id as usize * d..(id as usize + 1) * d];
                    let dot: f64 = row.iter().zip(yq).map(|(a, c)| *a as f64 * *c as f64).sum();
                    (dot as f32, id)
                })
                .collect();
            exact.sort_by(|a, c| c.0.total_cmp(&a.0).then(a.1.cmp(&c.1)));
            for j in 0..k {
                let (s, id) = exact
                    .get(j)
                    .copied()
                    .unwrap_or((f32::NEG_INFINITY, u32::MAX));
                ids[q * k + j] = id;
                scores[q * k + j] = s;
            }
        }
    }
}

/// The index the pipeline queries.
#[derive(Clone, Copy)]
enum Engine<'a> {
    Ivf(&'a Ivf, SearchParams),
    /// The flat PQ scan and its re-rank count.
    Pq4(&'a Pq4Flat<'a>, usize),
}

/// The HRR output layer: the unbinding step and an index over the class
/// vectors. Immutable; [`Pipeline::query`] takes `&self`, so one pipeline
/// serves many threads, each with its own [`Buffers`].
struct Pipeline<'a> {
    u: &'a Unbinder,
    engine: Engine<'a>,
}

impl Pipeline<'_> {
    fn buffers(&self, batch: usize) -> (Buffers, Option<Pq4Buf>) {
        let pq = match self.engine {
            Engine::Pq4(p, _) => Some(p.buffers()),
            Engine::Ivf(..) => None,
        };
        (self.u.buffers(batch), pq)
    }

    /// Top-k labels (ids, scores) of the network outputs `s` (rows of d;
    /// at most the batch the buffers were made for).
    fn query(
        &self,
        s: &[f32],
        k: usize,
        b: &mut (Buffers, Option<Pq4Buf>),
        ids: &mut [u32],
        scores: &mut [f32],
    ) {
        let d = self.u.d;
        let n = s.len() / d;
        self.u.unbind(s, &mut b.0);
        let y = &b.0.y[..n * d];
        match self.engine {
            Engine::Ivf(ivf, sp) => ivf
                .search(y, n, d, k, &sp, ids, scores)
                .expect("ivf search"),
            Engine::Pq4(p, r) => p.search(y, n, k, r, b.1.as_mut().unwrap(), ids, scores),
        }
    }
}

struct Opts {
    m: usize,
    dims: Vec<usize>,
    labels: Vec<usize>,
    queries: usize,
    k: usize,
    seed: u64,
    nlist: u32,
    iters: u32,
    reach: Vec<f32>,
    nprobe: Vec<usize>,
    rerank: u32,
    capacity: bool,
    max_labels: usize,
    threads: u32,
    ivf: bool,
    pq_dsub: usize,
    pq_rerank: Vec<usize>,
    ivf_pq4_nlist: u32,
    ivf_pq4_rerank: Vec<usize>,
}

fn usage(msg: &str) -> ! {
    eprintln!("error: {msg}");
    eprintln!(
        "usage: hrr_xml [--m N] [--d LIST] [--labels LIST] [--queries N] [--k N] [--seed S]\n\
         \x20              [--nlist N] [--iters N] [--reach LIST] [--nprobe LIST] [--rerank N]\n\
         \x20              [--capacity] [--max-labels N] [--threads N] [--ivf 0|1]\n\
         \x20              [--pq-dsub N] [--pq-rerank LIST] [--ivf-pq4-nlist N] [--ivf-pq4-rerank LIST]"
    );
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts {
        m: 20_000,
        dims: vec![400],
        labels: vec![1, 5, 10],
        queries: 100,
        k: 5,
        seed: 1,
        nlist: 0,
        iters: 10,
        reach: vec![3.0],
        nprobe: vec![],
        rerank: 32,
        capacity: false,
        max_labels: 64,
        threads: 0,
        ivf: true,
        pq_dsub: 4,
        pq_rerank: vec![64],
        ivf_pq4_nlist: 64,
        ivf_pq4_rerank: vec![64],
    };
    let mut a = std::env::args().skip(1);
    let list = |v: String| -> Vec<usize> {
        v.split(',')
            .map(|x| x.trim().parse().unwrap_or_else(|_| usage("bad list")))
            .collect()
    };
    while let Some(f) = a.next() {
        if f == "--capacity" {
            o.capacity = true;
            continue;
        }
        let v = a
            .next()
            .unwrap_or_else(|| usage(&format!("{f} needs a value")));
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{f}: bad number")))
        };
        match f.as_str() {
            "--m" => o.m = num(&v) as usize,
            "--d" => o.dims = list(v),
            "--labels" => o.labels = list(v),
            "--queries" => o.queries = num(&v) as usize,
            "--k" => o.k = num(&v) as usize,
            "--seed" => o.seed = num(&v),
            "--nlist" => o.nlist = num(&v) as u32,
            "--iters" => o.iters = num(&v) as u32,
            "--reach" => {
                o.reach = v
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| {
                        x.trim()
                            .parse()
                            .unwrap_or_else(|_| usage("--reach: bad number"))
                    })
                    .collect()
            }
            "--nprobe" => o.nprobe = list(v),
            "--rerank" => o.rerank = num(&v) as u32,
            "--max-labels" => o.max_labels = num(&v) as usize,
            "--threads" => o.threads = num(&v) as u32,
            "--ivf" => o.ivf = num(&v) != 0,
            "--pq-dsub" => o.pq_dsub = num(&v) as usize,
            "--pq-rerank" => o.pq_rerank = if v.is_empty() { vec![] } else { list(v) },
            "--ivf-pq4-nlist" => {
                o.ivf_pq4_nlist = v.parse().unwrap_or_else(|_| usage("--ivf-pq4-nlist"))
            }
            "--ivf-pq4-rerank" => o.ivf_pq4_rerank = if v.is_empty() { vec![] } else { list(v) },
            _ => usage(&format!("unknown option {f}")),
        }
    }
    if o.m == 0 || o.k == 0 || o.queries == 0 || o.dims.contains(&0) || o.labels.contains(&0) {
        usage("sizes must be >= 1");
    }
    o
}

/// `n` network outputs of `l` labels each: the labels (row-major, `l`
/// per sample) and `s_i = sum_l p ⊛ c_l`.
fn synthesise(
    hrr: &Hrr,
    key: &[f32],
    classes: &[f32],
    m: usize,
    n: usize,
    l: usize,
    seed: u64,
) -> (Vec<u32>, Vec<f32>) {
    let d = hrr.dim();
    let mut r = SplitMix64::new(seed ^ (l as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut labels = Vec::with_capacity(n * l);
    let mut s = vec![0.0f32; n * d];
    let mut sc = hrr.scratch().unwrap();
    let mut rows = vec![0.0f32; l * d];
    let mut bound = vec![0.0f32; l * d];
    for i in 0..n {
        let mut chosen: Vec<u32> = Vec::with_capacity(l);
        while chosen.len() < l.min(m) {
            let c = r.below(m as u64) as u32;
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        for (j, &c) in chosen.iter().enumerate() {
            rows[j * d..(j + 1) * d]
                .copy_from_slice(&classes[c as usize * d..(c as usize + 1) * d]);
        }
        let lc = chosen.len();
        hrr.bind(key, &rows[..lc * d], &mut bound[..lc * d], &mut sc)
            .unwrap();
        let si = &mut s[i * d..(i + 1) * d];
        for b in bound[..lc * d].chunks_exact(d) {
            for (o, v) in si.iter_mut().zip(b) {
                *o += v;
            }
        }
        labels.extend(chosen);
    }
    (labels, s)
}

/// Mean over queries of |got_q ∩ want_q| / |want_q| (k ids per query).
fn recall(got: &[u32], want: &[u32], k: usize) -> f64 {
    let n = want.len() / k;
    let mut s = 0.0;
    for q in 0..n {
        let w = &want[q * k..(q + 1) * k];
        let g = &got[q * k..(q + 1) * k];
        s += w.iter().filter(|x| g.contains(x)).count() as f64 / k as f64;
    }
    s / n as f64
}

/// Mean over samples of the fraction of its `l` labels among the first
/// `k` ids of `got` (`kk` ids per query).
fn label_recall(got: &[u32], kk: usize, k: usize, labels: &[u32], l: usize) -> f64 {
    let n = labels.len() / l;
    let mut s = 0.0;
    for q in 0..n {
        let g = &got[q * kk..q * kk + k.min(kk)];
        s += labels[q * l..(q + 1) * l]
            .iter()
            .filter(|x| g.contains(x))
            .count() as f64
            / l as f64;
    }
    s / n as f64
}

/// Seconds per query of `f` run over `n` queries in calls of `b`; the best
/// of `reps` passes.
fn time_per_query(n: usize, b: usize, reps: usize, mut f: impl FnMut(usize, usize)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        for c in (0..n).step_by(b) {
            f(c, b.min(n - c));
        }
        best = best.min(t.elapsed().as_secs_f64() / n as f64);
    }
    best
}

fn main() {
    let o = parse();
    println!(
        "lshk {} hrr_xml (tier {}): m = {} labels, k = {}, {} queries per L",
        env!("CARGO_PKG_VERSION"),
        lshk::isa::active().name(),
        o.m,
        o.k,
        o.queries
    );
    for &d in &o.dims {
        run(&o, d);
    }
}

fn run(o: &Opts, d: usize) {
    let (m, k) = (o.m, o.k);
    println!("\n== d = {d} ==");
    let t = Instant::now();
    let mut classes = vec![0.0f32; m * d];
    class_vectors(o.seed, d, 0, &mut classes, o.threads).expect("class vectors");
    let mut key = vec![0.0f32; d];
    class_vectors(o.seed + 1, d, 0, &mut key, 1).expect("key");
    println!(
        "class vectors: {:.1} s ({:.1} MiB)",
        t.elapsed().as_secs_f64(),
        (m * d * 4) as f64 / (1 << 20) as f64
    );
    let hrr = Hrr::new(d).expect("hrr");
    let dense = DenseLayer::new(&classes, m, d, d, None).expect("dense");

    // Exact search (unbind + normalise + dense top-k) for a list of samples.
    let u = Unbinder {
        d,
        key,
        hrr: hrr.clone(),
    };
    let exact_topk = |s: &[f32], n: usize, kk: usize| -> Vec<u32> {
        let mut ids = vec![0u32; n * kk];
        let mut sc = vec![0.0f32; n * kk];
        let mut b = u.buffers(64);
        for c in (0..n).step_by(64) {
            let nb = 64.min(n - c);
            u.unbind(&s[c * d..(c + nb) * d], &mut b);
            dense
                .topk(
                    &b.y[..nb * d],
                    nb,
                    d,
                    kk,
                    &mut ids[c * kk..(c + nb) * kk],
                    &mut sc[c * kk..(c + nb) * kk],
                )
                .unwrap();
        }
        ids
    };

    if o.capacity {
        println!("capacity (exact search): fraction of the L bound labels in the exact top-L");
        println!("{:>6} {:>10}", "L", "P@L");
        let mut l = 1;
        while l <= o.max_labels.min(m) {
            let (labels, s) = synthesise(&hrr, &u.key, &classes, m, o.queries, l, o.seed + 2);
            let ids = exact_topk(&s, o.queries, l);
            println!("{:>6} {:>10.3}", l, label_recall(&ids, l, l, &labels, l));
            l *= 2;
        }
    }

    // The engines: an IVF index (adaptive lists for each --reach, exactly
    // N lists for each --nprobe), and the flat 4-bit PQ scan (one setting
    // per --pq-rerank).
    let mut ivf_holder = None;
    if o.ivf {
        let t = Instant::now();
        let p = IvfParams {
            nlist: o.nlist,
            iters: o.iters,
            threads: o.threads,
            ..IvfParams::default()
        };
        // SAFETY: `classes` outlives the index (both live until the end of run).
        let ivf = unsafe { Ivf::build_borrowed(&classes, None, m, d, d, &p) }.expect("ivf build");
        println!(
            "index: IVF, {} lists, int8 codes, rerank {}; build {:.1} s, memory {:.1} MiB",
            ivf.nlist(),
            o.rerank,
            t.elapsed().as_secs_f64(),
            ivf.memory_bytes() as f64 / (1 << 20) as f64
        );
        ivf_holder = Some(ivf);
    }
    let mut pq_holder = None;
    if !o.pq_rerank.is_empty() {
        let t = Instant::now();
        let m_sub = d / o.pq_dsub.max(1);
        let pq = Pq4Flat::build(&classes, m, d, m_sub, o.seed + 4);
        println!(
            "index: flat 4-bit PQ, {} sub-quantisers of {} dims ({} bytes per row), exact re-rank; build {:.1} s, memory {:.1} MiB",
            m_sub,
            o.pq_dsub,
            pq.codes.m_pad() / 2,
            t.elapsed().as_secs_f64(),
            pq.codes.memory_bytes() as f64 / (1 << 20) as f64
        );
        pq_holder = Some(pq);
    }
    let mut ivf_pq4_holder = None;
    if !o.ivf_pq4_rerank.is_empty() {
        let t = Instant::now();
        let p = IvfParams {
            nlist: o.ivf_pq4_nlist,
            iters: o.iters,
            threads: o.threads,
            codes: lshk::ivf::Codes::Pq4,
            pq_m: (d / o.pq_dsub.max(1)) as u32,
            seed: o.seed + 5,
            ..IvfParams::default()
        };
        // SAFETY: `classes` outlives the index (both live until the end of run).
        let ivf =
            unsafe { Ivf::build_borrowed(&classes, None, m, d, d, &p) }.expect("ivf pq4 build");
        println!(
            "index: IVF with 4-bit PQ codes (lshk::ivf::Codes::Pq4), {} lists, {} sub-quantisers, every list visited; build {:.1} s, memory {:.1} MiB",
            ivf.nlist(),
            ivf.params().pq_m,
            t.elapsed().as_secs_f64(),
            ivf.memory_bytes() as f64 / (1 << 20) as f64
        );
        ivf_pq4_holder = Some(ivf);
    }
    let mut configs: Vec<(String, Engine)> = Vec::new();
    if let Some(ivf) = &ivf_pq4_holder {
        for &r in &o.ivf_pq4_rerank {
            let sp = SearchParams::fixed(ivf.nlist() as u32, r as u32);
            configs.push((format!("ivf-pq4 rerank {r}"), Engine::Ivf(ivf, sp)));
        }
    }
    if let Some(ivf) = &ivf_holder {
        for &r in &o.reach {
            let sp = SearchParams {
                nprobe: u32::MAX,
                rerank: o.rerank,
                reach: r,
                ..SearchParams::default()
            };
            configs.push((format!("ivf reach {r}"), Engine::Ivf(ivf, sp)));
        }
        for &np in &o.nprobe {
            let sp = SearchParams::fixed(np as u32, o.rerank);
            configs.push((format!("ivf nprobe {np}"), Engine::Ivf(ivf, sp)));
        }
    }
    if let Some(pq) = &pq_holder {
        for &r in &o.pq_rerank {
            configs.push((format!("pq4 rerank {r}"), Engine::Pq4(pq, r)));
        }
    }

    println!(
        "{:>4} {:>17} {:>9} {:>9} {:>9} | {:>11} {:>11} {:>7} | {:>11} {:>11} {:>7}",
        "L",
        "index",
        format!("recall@{k}"),
        "labels@L",
        format!("labels@{k}"),
        "pipe B=1",
        "exact B=1",
        "ratio",
        "pipe B=64",
        "exact B=64",
        "ratio"
    );
    for &l in &o.labels {
        let n = o.queries;
        let (labels, s) = synthesise(&hrr, &u.key, &classes, m, n, l, o.seed + 2);
        let want = exact_topk(&s, n, k);
        let want_l = exact_topk(&s, n, l);
        let mut b1 = u.buffers(64);
        let (mut oi, mut os) = (vec![0u32; 64 * k], vec![0.0f32; 64 * k]);
        // Exact search reads all of C per call (tens of ms at B = 1 for
        // m = 670,091): one pass over the first 16 queries at B = 1 and
        // the first 64 at B = 64.
        let mut exact_time = |bsz: usize| {
            let nt = n.min(if bsz == 1 { 16 } else { 64 });
            time_per_query(nt, bsz, 1, |c, nb| {
                u.unbind(&s[c * d..(c + nb) * d], &mut b1);
                dense
                    .topk(
                        &b1.y[..nb * d],
                        nb,
                        d,
                        k,
                        &mut oi[..nb * k],
                        &mut os[..nb * k],
                    )
                    .unwrap();
                black_box(&oi);
            })
        };
        let (e1, e64) = (exact_time(1), exact_time(64));
        for (cname, engine) in &configs {
            let pl = Pipeline {
                u: &u,
                engine: *engine,
            };
            // pipeline results, single-threaded, batches of 64
            let mut ids = vec![0u32; n * k];
            let mut sc = vec![0.0f32; n * k];
            let mut b = pl.buffers(64);
            for c in (0..n).step_by(64) {
                let nb = 64.min(n - c);
                pl.query(
                    &s[c * d..(c + nb) * d],
                    k,
                    &mut b,
                    &mut ids[c * k..(c + nb) * k],
                    &mut sc[c * k..(c + nb) * k],
                );
            }
            // the same from several threads: identical
            let threads = lshk_threads(o.threads).min(n);
            let per = n.div_ceil(threads);
            let mut ids_mt = vec![0u32; n * k];
            let mut sc_mt = vec![0.0f32; n * k];
            std::thread::scope(|scope| {
                for ((c, oi), os) in (0..n)
                    .step_by(per)
                    .zip(ids_mt.chunks_mut(per * k))
                    .zip(sc_mt.chunks_mut(per * k))
                {
                    let pl = &pl;
                    let s = &s;
                    scope.spawn(move || {
                        let nb = per.min(n - c);
                        let mut b = pl.buffers(nb);
                        pl.query(&s[c * d..(c + nb) * d], k, &mut b, oi, os);
                    });
                }
            });
            assert!(ids_mt == ids && sc_mt == sc, "threaded pipeline differs");
            // the pipeline's time: every query, best of 3 passes
            let mut pipe_time = |bsz: usize| {
                time_per_query(n, bsz, 3, |c, nb| {
                    pl.query(
                        &s[c * d..(c + nb) * d],
                        k,
                        &mut b,
                        &mut oi[..nb * k],
                        &mut os[..nb * k],
                    );
                    black_box(&oi);
                })
            };
            let (p1, p64) = (pipe_time(1), pipe_time(64));
            println!(
                "{:>4} {:>17} {:>9.3} {:>9.3} {:>9.3} | {:>8.1} us {:>8.1} us {:>6.1}x | {:>8.1} us {:>8.1} us {:>6.1}x",
                l,
                cname,
                recall(&ids, &want, k),
                label_recall(&want_l, l, l, &labels, l),
                label_recall(&ids, k, k, &labels, l),
                p1 * 1e6,
                e1 * 1e6,
                e1 / p1,
                p64 * 1e6,
                e64 * 1e6,
                e64 / p64
            );
        }
    }
    // The unbind alone (B = 64), for scale.
    let n = o.queries.max(64);
    let (_, s) = synthesise(&hrr, &u.key, &classes, m, n, 1, o.seed + 3);
    let mut b = u.buffers(64);
    let tu = time_per_query(n, 64, 3, |c, nb| u.unbind(&s[c * d..(c + nb) * d], &mut b));
    println!(
        "unbind + normalise alone: {:.2} us per query (B = 64)",
        tu * 1e6
    );
}

fn lshk_threads(t: u32) -> usize {
    if t == 0 {
        std::thread::available_parallelism().map_or(1, |v| v.get())
    } else {
        t as usize
    }
}
