//! LSH negative sampling (LNS / SLIDE) and the hashing forest (HF) against
//! full softmax, uniform and unigram^0.75 negatives, training a softmax
//! output layer on w2v-gutenberg or on a W1-scale synthetic task with
//! planted labels (issue 14, item 5). `lns_train.md` has the measured
//! tables.
//!
//! `cargo run --release --example lns_train [-- OPTIONS]`
//!
//! * Model: logits `z = W e_x + b` over all 35,388 words, W (35,388 x 128)
//!   and b trained, initialised with seeded N(0, 0.01^2) weights and zero
//!   bias (zero W would put every row in one SimHash bucket). The bias is
//!   stored as column 128 of W and the input gets a constant 1 there, so
//!   the training kernels update it with the row (row stride 144 floats).
//! * Inputs: the centre word's row of `input_embeddings.f32`, FIXED (no
//!   gradient to the inputs, so no `gather_dq`).
//! * Data: `train_pairs.i32` (centre, context), shuffled with a fixed seed;
//!   `--pairs N` keeps the first N after shuffling, `--steps N` mini-batches
//!   of `--batch B` samples (cycling over the kept pairs).
//! * Optimizer: plain SGD, the batch's gradient step on each row
//!   (`train::rows_update_sgd`: `W[r] -= (lr g_j) x_j` position by position,
//!   so `W[r] - lr G_r` up to rounding; until 2026-11-25 it summed `G_r`
//!   first; `--lr`, default 0.02), the same rule for every method; or `--opt adam` (`--adam-lr`, default 1e-3, betas 0.9 / 0.999):
//!   `train::Adam` (lazy: only the rows of the batch, per-row step counts)
//!   for the sampled methods, the same per-element rule on every row every
//!   step for the full softmax.
//! * Methods, at the same active-set size S per sample (`--s`, default
//!   1,024 = 2.9 % of the classes; the true label counts within S):
//!   - `full`: all logits with `lshk::dense` (`logits_isa`, B queries per
//!     pass over W), `train::softmax_xent_in_place` over the 35,388 logits
//!     of each sample, and the update of every row as a second dense
//!     product: `G = g^T X` through `lshk::dense` again (the B x N gradient
//!     transposed to N x B, X^T as a 129 x B "layer"), then `W -= lr G`;
//!   - `uniform`, `unigram`: the label plus S - 1 distinct negatives drawn
//!     uniformly / from counts^0.75 of train_pairs' contexts (alias table),
//!     by rejection of repeats and of the label;
//!   - `lsh-emb`, `lsh-label`: a `lshk::index::Index` over the current W,
//!     SimHash by default or DWTA with `--hash dwta` (K, L by `--k`,
//!     `--l`: bits per table for SimHash, bins per table for DWTA, whose
//!     bins hold `--bin-size` B coordinates; the library accepts B a power
//!     of two in 2..=256, K log2(B) <= 32 and K L <= 2^20, checked before
//!     the data are read; codes wider than the default range bits,
//!     `min(code bits, 20, ceil(log2(rows)) + 1)`, are folded into that
//!     many buckets; `--range-bits R` sets 2^R buckets per table instead:
//!     a rehash splices or re-sorts every table one of its rows moved in,
//!     at a cost that grows with the rows plus 2^R per table). What the
//!     index hashes (`--lsh-rows`): `biasaug` (the default) rows `[w, b]`
//!     (BiasAug transform), queried with `[e_x, 1]` (embedding) or
//!     `[w_y, 1]` (label); `plain` rows `w`, queries `e_x`
//!     or `w_y` (no transform: the bias is not hashed); `centred` rows
//!     `w - mu`, `mu` the mean of W's rows at the last build or rehash,
//!     queries `e_x` or `w_y - mu`; `centred-aug` rows `[w - mu, b - mu_b]`
//!     (`mu_b` the mean bias, BiasAug transform), queries `[e_x, 1]` or
//!     `[w_y - mu, 1]`. Centring keeps each query's order of the rows by
//!     logit (`e_x . (w - mu)` is `e_x . w` less one constant per query)
//!     but takes out the direction every row shares, which otherwise
//!     decides the rows' codes (see `LshDiag`). The active set:
//!     the label, then whole buckets table by table (from a random first
//!     table per sample, cyclically) while the union stays within S,
//!     stopping at the first table whose bucket would overflow it (the
//!     seed's rule); with `--walk fill` that bucket gives a uniform
//!     random part of its new rows that fills the set to exactly S;
//!   - `hf`: a `lshk::forest::Forest` over the rows `[w, b]` (`--hf-trees`
//!     L, default 4; `--hf-leaf` B, default 16), rebuilt from the current W
//!     every `--hf-rebuild` T steps (default 100); per sample S(x) with set
//!     size `--hf-q` Q (default 32) queried with `[e_x, 1]`; the batch's
//!     union S(X) capped at S - 1 classes (`forest::union_capped`, seeded by
//!     the step), and each sample's active set is its label plus S(X)
//!     (shared by the batch, as in the seed's selective softmax).
//!
//!   - `hf-a`: HF-A, the hashing forest with adaptive allocation: as `hf`,
//!     but (1) each sample keeps the fewest of its Q classes, ranked by
//!     logit `[w_j, b_j] . [e_x, 1]`, whose softmax mass within its set
//!     reaches `--hfa-tau` (the confidence threshold `τcp`, default 0.9;
//!     `Forest::query_confident`, C `qp.forest.confidence`), so confident
//!     samples bring fewer classes to the union; (2) the number of trees L
//!     starts at `--hfa-trees L0:LMAX` (default 2:8) and doubles at every
//!     rebuild up to LMAX; (3) the rebuild interval T starts at
//!     `--hfa-rebuild T0:G` (default 50:1.5) and is multiplied by G after
//!     every rebuild (50, 75, 112, ...). Early, W moves fast: frequent,
//!     cheap rebuilds with few trees; later W settles: rarer rebuilds, more
//!     trees for a more precise set. The trees are built over the unit
//!     rows (`normalize_rows`). The paper's exact schedule constants were
//!     not available here; these are lshk's reading of its rule.
//!
//!   Sampled methods: gathered logits (`matmul::WeightMatrix::matmul`),
//!   `softmax_xent_in_place` over C u {y} (no correction unless
//!   `--logq`), and `train::rows_update_sgd` on those rows only.
//! * `--logq on` (or `both`: each sampled method without and with it):
//!   the logQ (Horvitz-Thompson) correction of sampled softmax. Each
//!   sampled negative's logit becomes `z_j - ln q_j`, `q_j` its
//!   probability of being in the sample's negative set; the label's logit
//!   is kept (it is always in the set, `q_y = 1`); the softmax
//!   cross-entropy and its gradient are then taken over the corrected
//!   logits (the gradient with respect to `z_j` is unchanged by the
//!   shift, so the same rows get it). Then
//!   `exp(z_y) + sum_{j in C} exp(z_j) / q_j` is an unbiased estimate of
//!   the full softmax's partition sum when `q_j` is the exact inclusion
//!   probability. `q_j` per method:
//!   - `uniform`: `(S - 1) / (N - 1)` exactly (S - 1 distinct negatives
//!     drawn uniformly from the N - 1 other classes);
//!   - `unigram`: `1 - (1 - p_j)^T`, `p_j = count_j^0.75 / sum` and T the
//!     number of draws this sample made (repeats and label draws
//!     included). This is the usual approximation for sampling without
//!     replacement by rejection (TensorFlow's `expected_count` with
//!     `unique = True`): it treats the T draws as independent, whereas the
//!     draws stop when S - 1 distinct negatives are in.
//!   - `lsh-emb`, `lsh-label`: the seed's `1 - (1 - p^K)^l` with the
//!     SimHash collision probability `p = 1 - θ/π`, θ the angle between
//!     `[q, 1]` (the query: `[e_x, 1]` or `[w_y, 1]`) and `[w_j, b_j]` as the
//!     index stores it (the rows as of the last rehash, which the buckets
//!     hold), and `l` the number of tables whose buckets joined the set
//!     (the whole-bucket walk's stop; L when it took them all), from
//!     `Index::inclusion_probabilities` (`lshk::train_logq`). It is the
//!     probability given `l` (the stop itself depends on the buckets), for
//!     Gaussian planes and one bucket per code (K = 10 <= range_bits
//!     here).
//!
//!   `q_j` is floored at 1e-30 (never reached in the runs measured).
//!   `full` and `hf` have no sampling distribution and run without. The
//!   LSH inclusion probability is SimHash's, so `--logq on` refuses
//!   `--hash dwta`, and `--walk fill` (whose partly taken bucket it does
//!   not model).
//! * Rehashing (LSH methods): by default (`--rehash rebuild`) the index is
//!   rebuilt from the current W (an owned copy: never a borrowed W across
//!   updates) after 50 steps, then each interval is 1.25x the previous one
//!   (50, 62, 78, 97, ...), counted in the training time. With `--rehash
//!   incremental` the index is built once at step 0 and then kept up to
//!   date as a mutable index (issue 14, item 2): the rows every step
//!   updated are remembered, and on LNS's decaying schedule
//!   (`RehashSchedule { initial_period: 50, lambda }`, `--lambda`, default
//!   1e-4: rehashes at 50, 100, 150, 200, 251, ...) their new values and
//!   biases go to `Index::update_rows` and `Index::rehash_dirty` moves only
//!   them (counted in the training time, as "rebuilds"). With `--lsh-rows
//!   centred` each incremental rehash recomputes `mu` and updates every
//!   row, since a new mean moves them all (also `centred-aug`).
//! * Evaluation (not timed): held-out pairs (`--heldout N`, the first N of
//!   `heldout_pairs.i32`) grouped by centre; P@1 / P@5 of the full layer's
//!   exact top-5 (`DenseLayer::topk_threads`) against the centre's set of
//!   context words (as `halos_pk`), and the mean log-likelihood of the true
//!   context under the full softmax, per held-out pair.
//! * Time: training wall time of the steps run, extrapolated to one epoch
//!   of 2,000,000 pairs: `t / steps * ceil(2,000,000 / B)`.
//! * Threads (`--threads 1,2`: every method once per count): every kernel
//!   gets the count; the candidates, the gathered logits and the forest
//!   queries split the batch into contiguous sample ranges (each sample
//!   draws from its own generator, seeded by step and sample), the full
//!   softmax's dense products, transposes and update split W's rows. The
//!   results are the same for every count (the kernels' own rule, and
//!   every split writes disjoint outputs).
//! * `--synthetic N` (`--planted C`, default 4,096): the W1-scale task
//!   instead of w2v (see `synthetic_task`); no data files needed.
//!
//! Options: `--dir D` (default ../shared/data/w2v-gutenberg), `--pairs N`,
//! `--steps N`, `--batch B`, `--s S`, `--k K`, `--l L`, `--lr X`,
//! `--heldout N`, `--methods a,b,..`, `--progress N` (steps between lines),
//! `--rehash rebuild|incremental`, `--lambda X`, `--threads a,b,..`,
//! `--opt sgd|adam`, `--adam-lr X`, `--hf-trees L`, `--hf-leaf B`,
//! `--hf-q Q`, `--hf-rebuild T`, `--hash simhash|dwta`, `--bin-size B`
//! (DWTA, default 8), `--range-bits R` (0: the library's default),
//! `--lsh-rows biasaug|plain|centred|centred-aug`, `--walk stop|fill`,
//! `--lsh-diag N` (every N steps, the LSH methods' active
//! sets, rows and buckets: see `LshDiag`; its time is left out of the
//! training time), `--synthetic N`, `--planted C`,
//! `--seeds a,b,..` (one run per seed; with more than one, a table of
//! means ± standard deviations over the seeds follows; seed 0 gives the
//! streams of the single-seed runs before this option: see `seeded`),
//! `--logq off|on|both`, `--hf-diag on` (per forest rebuild period, what
//! the forest queries cost: see `hf_diag`), `--hf-norm on` (build the HF
//! trees over the unit rows `[w, b] / |[w, b]|`, the library's
//! `ForestParams::normalize_rows`: the bisector of two unit rows passes
//! through the origin, so a row's norm no longer decides its side; the
//! pool is still ranked by cosine with the real rows), `--hfa-tau X`,
//! `--hfa-trees L0:LMAX`, `--hfa-rebuild T0:G` (HF-A, above).
//!
//! Prints `skipped: ../shared/data not found` when the data are absent.

use std::path::PathBuf;
use std::time::Instant;

use lshk::dense::DenseLayer;
use lshk::forest::{union_capped, Forest, ForestParams, ForestResult};
use lshk::index::{Family, Index, IndexParams, RehashClock, RehashSchedule, Storage, Transform};
use lshk::isa::Isa;
use lshk::kernels::train::{scalar::adam_one, AdamCoef};
use lshk::matmul::{WeightMatrix, Weights};
use lshk::rng::SplitMix64;
use lshk::tables::fold_code;
use lshk::train::{self, Batch};

const D: usize = 128;
/// Augmented width: the 128 weights and the bias.
const DA: usize = D + 1;
/// Row stride of W and of the inputs (64-byte multiple).
const ST: usize = 144;
const EPOCH_PAIRS: usize = 2_000_000;

struct Opts {
    dir: PathBuf,
    pairs: usize,
    steps: usize,
    batch: usize,
    s: usize,
    k: u32,
    l: u32,
    lr: f32,
    heldout: usize,
    methods: Vec<String>,
    progress: usize,
    incremental: bool,
    lambda: f64,
    threads: Vec<usize>,
    adam: bool,
    adam_lr: f32,
    hf_trees: u32,
    hf_leaf: u32,
    hf_q: u32,
    hf_rebuild: usize,
    /// `--hf-diag`: print what the forest queries cost (see `hf_diag`).
    hf_diag: bool,
    /// `--hf-norm`: build the trees over the unit rows.
    hf_norm: bool,
    /// HF-A: the confidence threshold `τcp`.
    hfa_tau: f32,
    /// HF-A: the first and the largest number of trees.
    hfa_trees: (u32, u32),
    /// HF-A: the first rebuild interval and its growth factor.
    hfa_rebuild: (f64, f64),
    synthetic: usize,
    planted: usize,
    /// `--seeds`: one run per seed of every method (see `seeded`).
    seeds: Vec<u64>,
    /// `--logq`: the runs without (false) and / or with (true) the logQ
    /// correction.
    logq: Vec<bool>,
    /// `--hash`: the LSH methods' family (SimHash or DWTA).
    family: Family,
    /// `--bin-size`: DWTA's bin size B.
    bin_size: u32,
    /// `--range-bits`: buckets per table 2^R (0: the library's default).
    range_bits: u32,
    /// `--lsh-rows`: what the LSH index hashes (see `LshRows`).
    lsh_rows: LshRows,
    /// `--walk fill`: the overflowing bucket contributes a random part of
    /// its new rows up to S instead of being dropped.
    walk_fill: bool,
    /// `--lsh-diag N`: every N steps, what the LSH active sets and the
    /// rows look like (see `LshDiag`); 0 = off.
    lsh_diag: usize,
}

/// What the LSH methods' index hashes, and what their queries are.
#[derive(Clone, Copy, PartialEq, Debug)]
enum LshRows {
    /// Rows `[w, b]`, queries `[q, 1]` (`Transform::BiasAug`).
    BiasAug,
    /// Rows `w`, queries `q` (`Transform::None`): the bias is not hashed.
    Plain,
    /// Rows `w - mu`, `mu` the mean of W's rows when the index is built or
    /// rehashed, queries `q` (`w_y - mu` for `lsh-label`), no transform.
    /// For a fixed query, `q . (w - mu)` differs from `q . w` by the same
    /// constant for every row, so the rows' order by logit is unchanged;
    /// only the directions SimHash / DWTA see are. `mu` changes with W, so
    /// every rehash moves every row (an incremental rehash updates all
    /// rows with the new `mu`).
    Centred,
    /// `Centred` with the bias: rows `[w - mu, b - mu_b]`, `mu_b` the mean
    /// bias, queries `[q, 1]` (`[w_y - mu, 1]` for `lsh-label`), BiasAug
    /// transform. `[q, 1] . [w - mu, b - mu_b]` is the logit less one
    /// constant per query, so the order by logit is kept here too.
    CentredAug,
}

impl LshRows {
    /// Whether the index hashes `[row, bias]` (BiasAug transform).
    fn aug(self) -> bool {
        matches!(self, LshRows::BiasAug | LshRows::CentredAug)
    }
    /// Whether the hashed rows are centred.
    fn centred(self) -> bool {
        matches!(self, LshRows::Centred | LshRows::CentredAug)
    }
}

fn opts() -> Opts {
    let mut o = Opts {
        dir: "../shared/data/w2v-gutenberg".into(),
        pairs: 2_000_000,
        steps: 100,
        batch: 128,
        s: 1024,
        k: 10,
        l: 50,
        lr: 0.02,
        heldout: 20_000,
        methods: ["full", "uniform", "unigram", "lsh-emb", "lsh-label", "hf"]
            .map(String::from)
            .to_vec(),
        progress: 0,
        incremental: false,
        lambda: lshk::index::LNS_REHASH_LAMBDA,
        threads: vec![1],
        adam: false,
        adam_lr: 1e-3,
        hf_trees: 4,
        hf_leaf: 16,
        hf_q: 32,
        hf_rebuild: 100,
        hf_diag: false,
        hf_norm: false,
        hfa_tau: 0.9,
        hfa_trees: (2, 8),
        hfa_rebuild: (50.0, 1.5),
        synthetic: 0,
        planted: 4096,
        seeds: vec![0],
        logq: vec![false],
        family: Family::SimHash,
        bin_size: 8,
        range_bits: 0,
        lsh_rows: LshRows::BiasAug,
        walk_fill: false,
        lsh_diag: 0,
    };
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < a.len() {
        let v = a.get(i + 1).cloned().unwrap_or_default();
        let n = || v.replace('_', "").parse::<usize>().expect("a number");
        match a[i].as_str() {
            "--dir" => o.dir = v.clone().into(),
            "--pairs" => o.pairs = n(),
            "--steps" => o.steps = n(),
            "--batch" => o.batch = n(),
            "--s" => o.s = n(),
            "--k" => o.k = n() as u32,
            "--l" => o.l = n() as u32,
            "--lr" => o.lr = v.parse().expect("--lr"),
            "--heldout" => o.heldout = n(),
            "--methods" => o.methods = v.split(',').map(String::from).collect(),
            "--progress" => o.progress = n(),
            "--rehash" => {
                o.incremental = match v.as_str() {
                    "rebuild" => false,
                    "incremental" => true,
                    x => panic!("--rehash {x}: rebuild or incremental"),
                }
            }
            "--lambda" => o.lambda = v.parse().expect("--lambda"),
            "--threads" => {
                o.threads = v
                    .split(',')
                    .map(|t| t.parse().expect("--threads 1,2"))
                    .collect();
                assert!(o.threads.iter().all(|&t| t >= 1), "--threads: counts >= 1");
            }
            "--opt" => {
                o.adam = match v.as_str() {
                    "sgd" => false,
                    "adam" => true,
                    x => panic!("--opt {x}: sgd or adam"),
                }
            }
            "--adam-lr" => o.adam_lr = v.parse().expect("--adam-lr"),
            "--hf-trees" => o.hf_trees = n() as u32,
            "--hf-leaf" => o.hf_leaf = n() as u32,
            "--hf-q" => o.hf_q = n() as u32,
            "--hf-rebuild" => o.hf_rebuild = n().max(1),
            "--hf-diag" => o.hf_diag = v == "on",
            "--hf-norm" => o.hf_norm = v == "on",
            "--hfa-tau" => o.hfa_tau = v.parse().expect("--hfa-tau X"),
            "--hfa-trees" => {
                let (a, b) = v.split_once(':').expect("--hfa-trees L0:LMAX");
                o.hfa_trees = (a.parse().expect("L0"), b.parse().expect("LMAX"));
            }
            "--hfa-rebuild" => {
                let (a, b) = v.split_once(':').expect("--hfa-rebuild T0:G");
                o.hfa_rebuild = (a.parse().expect("T0"), b.parse().expect("G"));
            }
            "--synthetic" => o.synthetic = n(),
            "--planted" => o.planted = n().max(1),
            "--seeds" => {
                o.seeds = v
                    .split(',')
                    .map(|t| t.parse().expect("--seeds 0,1,2"))
                    .collect()
            }
            "--logq" => {
                o.logq = match v.as_str() {
                    "off" => vec![false],
                    "on" => vec![true],
                    "both" => vec![false, true],
                    x => panic!("--logq {x}: off, on or both"),
                }
            }
            "--hash" => {
                o.family = match v.as_str() {
                    "simhash" => Family::SimHash,
                    "dwta" => Family::Dwta,
                    x => panic!("--hash {x}: simhash or dwta"),
                }
            }
            "--bin-size" => o.bin_size = n() as u32,
            "--range-bits" => o.range_bits = n() as u32,
            "--lsh-rows" => {
                o.lsh_rows = match v.as_str() {
                    "biasaug" => LshRows::BiasAug,
                    "plain" => LshRows::Plain,
                    "centred" => LshRows::Centred,
                    "centred-aug" => LshRows::CentredAug,
                    x => panic!("--lsh-rows {x}: biasaug, plain, centred or centred-aug"),
                }
            }
            "--walk" => {
                o.walk_fill = match v.as_str() {
                    "stop" => false,
                    "fill" => true,
                    x => panic!("--walk {x}: stop or fill"),
                }
            }
            "--lsh-diag" => o.lsh_diag = n(),
            x => panic!("unknown option {x} (see the header of examples/lns_train.rs)"),
        }
        i += 2;
    }
    if o.progress == 0 {
        o.progress = (o.steps / 5).max(1);
    }
    if o.family == Family::Dwta {
        // The library's rule (K * log2(B) <= 32, B a power of two in
        // 2..=256, K * L <= 2^20 bins), checked before any data is read.
        let dim = if o.lsh_rows.aug() { DA } else { D };
        if let Err(e) = lshk::dwta::check_params(dim, o.k, o.l, o.bin_size) {
            panic!(
                "--hash dwta --k {} --l {} --bin-size {}: {e}",
                o.k, o.l, o.bin_size
            );
        }
        // The logQ correction's inclusion probabilities are SimHash's.
        assert!(
            !o.logq.contains(&true),
            "--logq on needs --hash simhash (inclusion probabilities are SimHash's)"
        );
    }
    assert!(
        !(o.walk_fill && o.logq.contains(&true)),
        "--walk fill has no inclusion probability for the partly taken bucket: use --logq off"
    );
    o
}

/// Vose's alias table: O(1) draws from a discrete distribution.
struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    fn new(w: &[f64]) -> Alias {
        let n = w.len();
        let sum: f64 = w.iter().sum();
        let mut p: Vec<f64> = w.iter().map(|x| x * n as f64 / sum).collect();
        let mut alias = vec![0u32; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| p[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s] = l as u32;
            p[l] -= 1.0 - p[s];
            if p[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        for i in large.into_iter().chain(small) {
            p[i] = 1.0;
        }
        Alias { prob: p, alias }
    }
    fn draw(&self, rng: &mut SplitMix64) -> u32 {
        let i = rng.below(self.prob.len() as u64) as usize;
        if rng.next_f64_open() < self.prob[i] {
            i as u32
        } else {
            self.alias[i]
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Full,
    Uniform,
    Unigram,
    LshEmb,
    LshLabel,
    Hf,
    HfA,
}

fn method(s: &str) -> Method {
    match s {
        "full" => Method::Full,
        "uniform" => Method::Uniform,
        "unigram" => Method::Unigram,
        "lsh-emb" => Method::LshEmb,
        "lsh-label" => Method::LshLabel,
        "hf" => Method::Hf,
        "hf-a" => Method::HfA,
        x => panic!("unknown method {x}"),
    }
}

struct Shared<'a> {
    o: &'a Opts,
    rows: usize,
    emb: &'a [f32],
    /// Shuffled training pairs (centre, context).
    train: &'a [(u32, u32)],
    unigram: &'a Alias,
    /// The unigram^0.75 sampling distribution (sums to 1).
    unigram_p: &'a [f64],
    held: &'a common::Grouped,
    held_all: &'a common::Grouped,
    tier: Isa,
}

struct Result_ {
    name: String,
    seed: u64,
    logq: bool,
    threads: usize,
    steps: usize,
    train_s: f64,
    rebuilds: usize,
    rebuild_s: f64,
    mean_active: f64,
    last_loss: f64,
    p1: f64,
    p5: f64,
    ll: f64,
}

/// `k`-th of `t` contiguous ranges of `0..n` (`n k / t`).
fn cut(n: usize, t: usize, k: usize) -> usize {
    n * k / t
}

/// Splits `s` at the ascending positions `at` (first 0, last `s.len()`).
fn split_at_cuts<'a, T>(mut s: &'a mut [T], at: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(at.len().saturating_sub(1));
    for k in 0..at.len() - 1 {
        let (a, b) = std::mem::take(&mut s).split_at_mut(at[k + 1] - at[k]);
        out.push(a);
        s = b;
    }
    out
}

/// Runs `f(k, part)` for every part on its own thread (inline for one
/// part); each part is an independent slice, so the result does not
/// depend on the number of parts.
fn par_parts<P: Send>(parts: Vec<P>, f: impl Fn(usize, P) + Sync) {
    if parts.len() == 1 {
        for p in parts {
            f(0, p);
        }
        return;
    }
    std::thread::scope(|sc| {
        for (k, p) in parts.into_iter().enumerate() {
            let f = &f;
            sc.spawn(move || f(k, p));
        }
    });
}

/// `dst` rows `j0 .. j1` of `src^T` (`src` is `n x m` row-major, `dst`
/// the `(j1 - j0) x n` block): blocks of 64 source columns, each read row
/// by row (contiguous).
fn transpose_cols(src: &[f32], n: usize, m: usize, j0: usize, j1: usize, dst: &mut [f32]) {
    for c0 in (j0..j1).step_by(64) {
        let c1 = (c0 + 64).min(j1);
        for i in 0..n {
            let row = &src[i * m + c0..i * m + c1];
            for (jj, &v) in row.iter().enumerate() {
                dst[(c0 - j0 + jj) * n + i] = v;
            }
        }
    }
}

/// `dst` (`m x n`) = `src^T` (`src` is `n x m`) on `th` threads, each
/// writing a contiguous block of destination rows.
fn transpose(th: usize, src: &[f32], n: usize, m: usize, dst: &mut [f32]) {
    let at: Vec<usize> = (0..=th).map(|k| cut(m, th, k) * n).collect();
    par_parts(split_at_cuts(&mut dst[..m * n], &at), |k, d| {
        transpose_cols(src, n, m, cut(m, th, k), cut(m, th, k + 1), d)
    });
}

/// The inputs `[e_x, 1, 0...]` (stride ST) of a batch.
fn fill_inputs(sh: &Shared, batch: &[(u32, u32)], xq: &mut [f32]) {
    for (b, &(c, _)) in batch.iter().enumerate() {
        let x = &mut xq[b * ST..(b + 1) * ST];
        x[..D].copy_from_slice(&sh.emb[c as usize * D..(c as usize + 1) * D]);
        x[D] = 1.0;
    }
}

/// The mean of W's rows (`D` weights and the bias) into `mu` (`DA`).
fn row_mean(w: &[f32], rows: usize, mu: &mut Vec<f32>) {
    let mut acc = vec![0f64; DA];
    for r in 0..rows {
        for (a, &v) in acc.iter_mut().zip(&w[r * ST..r * ST + DA]) {
            *a += v as f64;
        }
    }
    mu.clear();
    mu.extend(acc.iter().map(|&a| (a / rows as f64) as f32));
}

/// `--lsh-rows centred[-aug]`: `buf` (stride ST) = W's rows and biases
/// minus their means, which go to `mu`.
fn centred_rows(w: &[f32], rows: usize, mu: &mut Vec<f32>, buf: &mut Vec<f32>) {
    row_mean(w, rows, mu);
    buf.resize(rows * ST, 0.0);
    for r in 0..rows {
        let (src, dst) = (&w[r * ST..r * ST + DA], &mut buf[r * ST..r * ST + DA]);
        for ((d, &v), &m) in dst.iter_mut().zip(src).zip(mu.iter()) {
            *d = v - m;
        }
    }
}

/// The LSH methods' index over the current W, in the form `--lsh-rows`
/// says (`mu` and `cbuf` are `centred_rows`' outputs when centred).
fn build_index(
    sh: &Shared,
    w: &[f32],
    bias: &mut [f32],
    mu: &mut Vec<f32>,
    cbuf: &mut Vec<f32>,
    threads: usize,
    seed: u64,
) -> Index {
    let o = sh.o;
    let p = IndexParams {
        family: o.family,
        bits: o.k,
        tables: o.l,
        bin_size: o.bin_size,
        range_bits: o.range_bits,
        seed: seeded(11, seed),
        storage: Storage::F32,
        transform: if o.lsh_rows.aug() {
            Transform::BiasAug
        } else {
            Transform::None
        },
        threads: threads as u32,
        ..IndexParams::default()
    };
    let built = match o.lsh_rows {
        LshRows::BiasAug => {
            for (r, b) in bias.iter_mut().enumerate() {
                *b = w[r * ST + D];
            }
            Index::build(w, Some(bias), sh.rows, D, ST, &p, None)
        }
        LshRows::Plain => Index::build(w, None, sh.rows, D, ST, &p, None),
        LshRows::Centred => {
            centred_rows(w, sh.rows, mu, cbuf);
            Index::build(cbuf, None, sh.rows, D, ST, &p, None)
        }
        LshRows::CentredAug => {
            centred_rows(w, sh.rows, mu, cbuf);
            for (r, b) in bias.iter_mut().enumerate() {
                *b = cbuf[r * ST + D];
            }
            Index::build(cbuf, Some(bias), sh.rows, D, ST, &p, None)
        }
    };
    built.unwrap_or_else(|e| panic!("index ({:?} K {} L {}): {e}", o.family, o.k, o.l))
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A run's stream seed: `base` for seed 0 (the single-seed runs of the
/// earlier tables), `base ^ seed * GOLDEN` otherwise. `--seeds` changes
/// W's initialisation, the shuffle of the training pairs, every sample's
/// negatives (and LSH first table), the SimHash planes, the forest and
/// the HF cap's draws; the held-out data stay the same.
fn seeded(base: u64, seed: u64) -> u64 {
    base ^ seed.wrapping_mul(GOLDEN)
}

/// What the candidate step of samples `b0..b1` reads.
struct Cands<'a> {
    sh: &'a Shared<'a>,
    m: Method,
    batch: &'a [(u32, u32)],
    step: usize,
    index: Option<&'a Index>,
    /// The batch's SimHash codes (LSH methods), `L` per sample.
    codes: &'a [u32],
    /// HF: the batch's capped union `S(X)`.
    hf: &'a [u32],
    /// `--seeds`: the run's seed.
    seed: u64,
}

/// Per-thread scratch of the candidate step.
struct Scratch {
    stamp: Vec<u32>,
    stamp_id: u32,
    ids: Vec<u32>,
    lens: Vec<usize>,
    /// Per sample, for the logQ correction: the tables whose buckets
    /// joined the set (LSH) or the number of draws made (unigram).
    draws: Vec<u32>,
}

impl Scratch {
    fn new(rows: usize) -> Scratch {
        Scratch {
            stamp: vec![u32::MAX; rows],
            stamp_id: 0,
            ids: Vec::new(),
            lens: Vec::new(),
            draws: Vec::new(),
        }
    }
}

/// The active set of each sample `b0..b1` (the label first) into
/// `s.ids` / `s.lens`. Each sample draws from its own generator (seeded
/// by step and sample), so the sets do not depend on how the batch is
/// split between threads.
fn candidates(c: &Cands, b0: usize, b1: usize, s: &mut Scratch) {
    let (sh, m) = (c.sh, c.m);
    let (rows, cap, l) = (sh.rows, sh.o.s, sh.o.l as usize);
    s.ids.clear();
    s.lens.clear();
    s.draws.clear();
    for b in b0..b1 {
        let y = c.batch[b].1;
        let mut rng = SplitMix64::new(
            seeded(0x5EED, c.seed) ^ ((c.step * c.batch.len() + b) as u64 + 1).wrapping_mul(GOLDEN),
        );
        let mut draws = 0u32;
        if s.stamp_id >= u32::MAX - 1 {
            s.stamp.fill(u32::MAX);
            s.stamp_id = 0;
        }
        s.stamp_id += 1;
        let sid = s.stamp_id;
        let (ids, stamp) = (&mut s.ids, &mut s.stamp);
        let start = ids.len();
        ids.push(y);
        stamp[y as usize] = sid;
        match m {
            Method::Uniform | Method::Unigram => {
                while ids.len() - start < cap {
                    draws += 1;
                    let r = if m == Method::Uniform {
                        rng.below(rows as u64) as u32
                    } else {
                        sh.unigram.draw(&mut rng)
                    };
                    if stamp[r as usize] != sid {
                        stamp[r as usize] = sid;
                        ids.push(r);
                    }
                }
            }
            Method::Hf | Method::HfA => ids.extend(c.hf.iter().filter(|&&r| r != y)),
            Method::LshEmb | Method::LshLabel => {
                let tabs = c.index.expect("index").tables();
                let rb = tabs.range_bits();
                let t0 = rng.below(l as u64) as usize;
                // One pass per bucket: its new rows are marked and
                // appended; a bucket that overflows S is taken back (the
                // stop between tables), so each entry's stamp is read once.
                draws = l as u32;
                for j in 0..l {
                    let t = (t0 + j) % l;
                    let bucket = tabs.bucket(t, fold_code(c.codes[b * l + t], rb));
                    let mark = ids.len();
                    for &r in bucket {
                        if stamp[r as usize] != sid {
                            stamp[r as usize] = sid;
                            ids.push(r);
                        }
                    }
                    if ids.len() - start > cap {
                        // `--walk fill`: a uniform random part of the
                        // bucket's new rows (partial Fisher-Yates) fills
                        // the set to exactly S; otherwise none of them.
                        let keep = if sh.o.walk_fill {
                            let need = cap - (mark - start);
                            let new = &mut ids[mark..];
                            for i in 0..need {
                                let k = i + rng.below((new.len() - i) as u64) as usize;
                                new.swap(i, k);
                            }
                            need
                        } else {
                            0
                        };
                        for &r in &ids[mark + keep..] {
                            stamp[r as usize] = u32::MAX;
                        }
                        ids.truncate(mark + keep);
                        draws = j as u32;
                        break;
                    }
                }
            }
            Method::Full => unreachable!(),
        }
        s.lens.push(ids.len() - start);
        s.draws.push(draws);
    }
}

/// Dense Adam on `n` values (the full softmax's update): the lazy
/// kernels' per-element rule (`kernels::train::scalar::adam_one`), every
/// row updated every step.
fn adam_dense(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], c: &AdamCoef) {
    for (((w, m), v), &g) in w.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
        adam_one(w, m, v, g, c);
    }
}

fn run(sh: &Shared, name: &str, th: usize, seed: u64, logq: bool) -> Result_ {
    let o = sh.o;
    let m = method(name);
    // The logQ correction applies to the sampled methods with a sampling
    // distribution (not to the full softmax, nor to HF).
    let logq = logq && !matches!(m, Method::Full | Method::Hf | Method::HfA);
    let (rows, nb, tier) = (sh.rows, o.batch, sh.tier);
    let mut rng = SplitMix64::new(seeded(1234, seed));
    let mut w = vec![0f32; rows * ST];
    for r in 0..rows {
        for v in &mut w[r * ST..r * ST + D] {
            *v = (rng.next_normal() * 0.01) as f32;
        }
    }
    let adam_p = train::AdamParams {
        lr: o.adam_lr,
        ..train::AdamParams::default()
    };
    // Lazy Adam (sampled methods) over the DA = 129 columns, or dense Adam
    // moments (full softmax).
    let mut adam =
        (o.adam && m != Method::Full).then(|| train::Adam::new(rows, DA, adam_p).expect("adam"));
    let (mut am, mut av) = if o.adam && m == Method::Full {
        (vec![0f32; rows * DA], vec![0f32; rows * DA])
    } else {
        Default::default()
    };
    let mut xq = vec![0f32; nb * ST];
    let mut lq = vec![0f32; nb * ST];
    let mut loss = vec![0f32; nb];
    // Sampled methods.
    let mut ids: Vec<u32> = Vec::new();
    let mut offsets: Vec<usize> = vec![0];
    let mut targets: Vec<f32> = Vec::new();
    let mut logits: Vec<f32> = Vec::new();
    // logQ: per sample the tables taken (LSH) / draws made (unigram), and
    // the LSH inclusion probabilities of the batch's candidates.
    let mut draws: Vec<u32> = Vec::new();
    let mut probs: Vec<f64> = Vec::new();
    let mut floored = 0usize;
    let mut scratch: Vec<Scratch> = (0..th).map(|_| Scratch::new(rows)).collect();
    let mut codes = vec![0u32; nb * o.l as usize];
    let mut bias = vec![0f32; rows];
    // --lsh-rows centred: the rows' mean and the centred rows.
    let (mut mu, mut cbuf): (Vec<f32>, Vec<f32>) = (Vec::new(), Vec::new());
    let lsh = matches!(m, Method::LshEmb | Method::LshLabel);
    let mut diag = (lsh && o.lsh_diag > 0).then(|| LshDiag::new(sh, &w));
    let mut forest: Option<Forest> = None;
    // The forest of `hf` and `hf-a` with `trees` trees.
    let forest_params = |trees: u32, normalize_rows: bool| ForestParams {
        trees,
        leaf_size: o.hf_leaf,
        seed: seeded(7, seed),
        threads: th as u32,
        normalize_rows,
    };
    // HF-A's schedule: the next rebuild step, the interval, the trees.
    let (mut hfa_next, mut hfa_t, mut hfa_l) = (0usize, o.hfa_rebuild.0.max(1.0), o.hfa_trees.0);
    let mut hf_set_sum = 0f64;
    let mut hf_parts: Vec<ForestResult> = (0..th).map(|_| ForestResult::default()).collect();
    let (mut hf_ids, mut hf_all, mut hf_counts) = (Vec::new(), Vec::new(), Vec::new());
    let mut hf_union_sum = 0f64;
    // Full softmax.
    let full = m == Method::Full;
    let (mut zf, mut tf, mut gt, mut xt, mut gw) = if full {
        (
            vec![0f32; nb * rows],
            vec![0f32; nb * rows],
            vec![0f32; rows * nb],
            vec![0f32; DA * nb],
            vec![0f32; rows * DA],
        )
    } else {
        Default::default()
    };
    let foffs: Vec<usize> = (0..=nb).map(|b| b * rows).collect();
    let bcuts: Vec<usize> = (0..=th).map(|k| cut(nb, th, k)).collect();

    let mut index: Option<Index> = None;
    let (mut next_rebuild, mut interval) = (0usize, 50f64);
    // --rehash incremental: LNS's schedule and the rows updated since the
    // last rehash.
    let mut clock = RehashClock::new(RehashSchedule {
        initial_period: 50.0,
        lambda: o.lambda,
    })
    .expect("schedule");
    let mut dirty = vec![false; rows];
    let mut dirty_ids: Vec<u32> = Vec::new();
    let (mut rbuf, mut rbias): (Vec<f32>, Vec<f32>) = (Vec::new(), Vec::new());
    let mut rehashed_rows = 0usize;
    let (mut rebuilds, mut rebuild_s) = (0usize, 0f64);
    let (mut active_sum, mut loss_sum, mut loss_n) = (0f64, 0f64, 0usize);
    let mut last_loss = 0f64;
    // Seconds per phase: full softmax: logits, xent, transposes, G, W
    // update; sampled: candidates, logits, xent, update, dirty marks,
    // hashing the batch (within candidates).
    let mut phase = [0f64; 7];
    let mut cursor = 0usize;
    // --lsh-diag's own time, left out of the training time.
    let mut diag_s = 0f64;
    let t0 = Instant::now();
    for step in 0..o.steps {
        // ---- the batch
        let batch: Vec<(u32, u32)> = (0..nb)
            .map(|_| {
                let p = sh.train[cursor];
                cursor = (cursor + 1) % sh.train.len();
                p
            })
            .collect();
        fill_inputs(sh, &batch, &mut xq);
        if full {
            let tp = Instant::now();
            // z^T[r][b] = W[r] . x_b: the batch as the "layer" (nb rows),
            // the rows of W as the "queries" (3x faster here than W as the
            // layer and the batch as queries), then transposed to z[b][r].
            // Threads: contiguous ranges of W's rows.
            let xl = DenseLayer::new(&xq, nb, DA, ST, None).expect("batch layer");
            let at: Vec<usize> = (0..=th).map(|k| cut(rows, th, k) * nb).collect();
            par_parts(split_at_cuts(&mut gt, &at), |k, part| {
                let r0 = cut(rows, th, k);
                let n = cut(rows, th, k + 1) - r0;
                xl.logits_isa(tier, &w[r0 * ST..], n, ST, part)
                    .expect("logits");
            });
            transpose(th, &gt, rows, nb, &mut zf);
            phase[0] += tp.elapsed().as_secs_f64();
            let tp = Instant::now();
            for (b, &(_, y)) in batch.iter().enumerate() {
                tf[b * rows + y as usize] = 1.0;
            }
            train::softmax_xent_in_place(tier, th, &mut zf, &tf, &foffs, &mut loss).expect("xent");
            for (b, &(_, y)) in batch.iter().enumerate() {
                tf[b * rows + y as usize] = 0.0;
            }
            phase[1] += tp.elapsed().as_secs_f64();
            let tp = Instant::now();
            // g^T (rows x nb).
            transpose(th, &zf, nb, rows, &mut gt);
            for k in 0..DA {
                for b in 0..nb {
                    xt[k * nb + b] = xq[b * ST + k];
                }
            }
            phase[2] += tp.elapsed().as_secs_f64();
            // G[r][k] = sum_b g[b][r] x[b][k]: the "layer" X^T (DA rows of
            // nb), the "queries" the rows of g^T.
            let tp = Instant::now();
            let xl = DenseLayer::new(&xt, DA, nb, nb, None).expect("x layer");
            let at: Vec<usize> = (0..=th).map(|k| cut(rows, th, k) * DA).collect();
            par_parts(split_at_cuts(&mut gw, &at), |k, part| {
                let r0 = cut(rows, th, k);
                let n = cut(rows, th, k + 1) - r0;
                xl.logits_isa(tier, &gt[r0 * nb..], n, nb, part).expect("G");
            });
            phase[3] += tp.elapsed().as_secs_f64();
            let tp = Instant::now();
            let (lr, gw) = (o.lr, &gw);
            let coef = adam_p.coef(step as u32 + 1);
            let at: Vec<usize> = (0..=th).map(|k| cut(rows, th, k) * ST).collect();
            // Adam's moments split with W (empty for SGD).
            let at2: Vec<usize> = (0..=th)
                .map(|k| if o.adam { cut(rows, th, k) * DA } else { 0 })
                .collect();
            let parts: Vec<_> = split_at_cuts(&mut w, &at)
                .into_iter()
                .zip(split_at_cuts(&mut am, &at2))
                .zip(split_at_cuts(&mut av, &at2))
                .collect();
            par_parts(parts, |k, ((part, pm), pv)| {
                let r0 = cut(rows, th, k);
                let n = cut(rows, th, k + 1) - r0;
                let g = &gw[r0 * DA..(r0 + n) * DA];
                for r in 0..n {
                    let (wr, gr) = (&mut part[r * ST..r * ST + DA], &g[r * DA..(r + 1) * DA]);
                    if o.adam {
                        let (mr, vr) =
                            (&mut pm[r * DA..(r + 1) * DA], &mut pv[r * DA..(r + 1) * DA]);
                        adam_dense(wr, mr, vr, gr, &coef);
                    } else {
                        wr.iter_mut().zip(gr).for_each(|(w, g)| *w -= lr * g);
                    }
                }
            });
            phase[4] += tp.elapsed().as_secs_f64();
            active_sum += (rows * nb) as f64;
        } else {
            // ---- rehash / rebuild
            let built = index.is_some();
            if lsh && o.incremental && built && clock.due(step as u64) {
                let t = Instant::now();
                rbuf.clear();
                rbias.clear();
                dirty_ids.clear();
                let centred = o.lsh_rows.centred();
                if centred {
                    // A new mean moves every row.
                    row_mean(&w, rows, &mut mu);
                }
                for (r, d) in dirty.iter_mut().enumerate() {
                    if std::mem::take(d) || centred {
                        dirty_ids.push(r as u32);
                        let wr = &w[r * ST..r * ST + D];
                        if centred {
                            rbuf.extend(wr.iter().zip(&mu).map(|(&v, &m)| v - m));
                            rbias.push(w[r * ST + D] - mu[D]);
                        } else {
                            rbuf.extend_from_slice(wr);
                            rbias.push(w[r * ST + D]);
                        }
                    }
                }
                let idx = index.as_mut().expect("index");
                let b = o.lsh_rows.aug().then_some(&rbias[..]);
                idx.update_rows(&dirty_ids, Some((&rbuf, D)), b)
                    .expect("update_rows");
                rehashed_rows += idx.rehash_dirty().expect("rehash");
                rebuild_s += t.elapsed().as_secs_f64();
                rebuilds += 1;
            } else if lsh && (!o.incremental || !built) && step >= next_rebuild {
                let t = Instant::now();
                drop(index.take());
                index = Some(build_index(sh, &w, &mut bias, &mut mu, &mut cbuf, th, seed));
                rebuild_s += t.elapsed().as_secs_f64();
                rebuilds += 1;
                next_rebuild = step + interval.round() as usize;
                if step > 0 {
                    interval *= 1.25;
                }
            } else if m == Method::HfA && step >= hfa_next {
                // HF-A: a fresh forest of the scheduled size over the unit
                // rows; then L doubles (up to LMAX) and T grows by G.
                let t = Instant::now();
                let p = forest_params(hfa_l, true);
                forest = Some(Forest::build(&w, rows, DA, ST, &p).expect("forest"));
                rebuild_s += t.elapsed().as_secs_f64();
                rebuilds += 1;
                hfa_next = step + hfa_t.round() as usize;
                hfa_t *= o.hfa_rebuild.1;
                hfa_l = (hfa_l * 2).min(o.hfa_trees.1);
            } else if m == Method::Hf && step % o.hf_rebuild == 0 {
                let t = Instant::now();
                // --hf-norm on: the library builds the trees over the unit
                // rows [w, b] / |[w, b]| (ForestParams::normalize_rows; the
                // queries still rank the pool by cosine with the real W).
                match forest.as_mut() {
                    None => {
                        let p = forest_params(o.hf_trees, o.hf_norm);
                        forest = Some(Forest::build(&w, rows, DA, ST, &p).expect("forest"));
                    }
                    Some(f) => f.rebuild(&w, ST, None).expect("forest rebuild"),
                }
                rebuild_s += t.elapsed().as_secs_f64();
                rebuilds += 1;
            }
            // ---- candidates
            let tp = Instant::now();
            if let Some(idx) = &index {
                let q: &[f32] = if m == Method::LshEmb {
                    &xq
                } else {
                    for (b, &(_, y)) in batch.iter().enumerate() {
                        let y = y as usize;
                        let q = &mut lq[b * ST..b * ST + DA];
                        q[..D].copy_from_slice(&w[y * ST..y * ST + D]);
                        if o.lsh_rows.centred() {
                            q[..D].iter_mut().zip(&mu).for_each(|(v, &m)| *v -= m);
                        }
                        // Read by the BiasAug transform only.
                        q[D] = 1.0;
                    }
                    &lq
                };
                let th0 = Instant::now();
                idx.hash_family().hash(q, nb, ST, &mut codes).expect("hash");
                phase[5] += th0.elapsed().as_secs_f64();
            }
            if let Some(f) = &forest {
                // S(x) per sample (threads: contiguous sample ranges), then
                // S(X) capped to S - 1 (the label is added per sample).
                let (wr, xr) = (&w, &xq);
                let mut parts: Vec<&mut [ForestResult]> =
                    hf_parts.chunks_mut(1).collect::<Vec<_>>();
                parts.truncate(th);
                let tq = Instant::now();
                // HF-A trims each sample's set by its confidence (the bias
                // is column D of the rows, the query's 1 picks it up).
                let tau = if m == Method::HfA { o.hfa_tau } else { 0.0 };
                par_parts(parts, |k, r| {
                    let (b0, b1) = (bcuts[k], bcuts[k + 1]);
                    let x = &xr[b0 * ST..];
                    f.query_confident(wr, ST, None, x, b1 - b0, ST, o.hf_q, tau, 1, &mut r[0])
                        .expect("forest query");
                });
                let tq = tq.elapsed().as_secs_f64();
                let r = o.hf_rebuild;
                if o.hf_diag && (step % r == 0 || step % r == r - 1 || step + 1 == o.steps) {
                    hf_diag(f, &w, &xq, nb.min(32), o.hf_q as usize, step, tq);
                }
                hf_all.clear();
                for p in &hf_parts {
                    hf_all.extend_from_slice(&p.ids);
                }
                hf_set_sum += hf_all.len() as f64 / nb as f64;
                let useed = seeded(step as u64, seed);
                union_capped(rows, &hf_all, o.s - 1, useed, &mut hf_ids, &mut hf_counts)
                    .expect("union");
                let mut u = hf_counts.len();
                // The uncapped union's size, for the report.
                if u == o.s - 1 {
                    u = {
                        hf_all.sort_unstable();
                        hf_all.dedup();
                        hf_all.len()
                    };
                }
                hf_union_sum += u as f64;
            }
            let cx = Cands {
                sh,
                m,
                batch: &batch,
                step,
                index: index.as_ref(),
                codes: &codes,
                hf: &hf_ids,
                seed,
            };
            {
                let parts: Vec<&mut [Scratch]> = scratch.chunks_mut(1).collect();
                par_parts(parts, |k, s| {
                    candidates(&cx, bcuts[k], bcuts[k + 1], &mut s[0])
                });
            }
            ids.clear();
            offsets.truncate(1);
            draws.clear();
            for s in &scratch {
                ids.extend_from_slice(&s.ids);
                draws.extend_from_slice(&s.draws);
                for &n in &s.lens {
                    offsets.push(offsets.last().copied().unwrap_or(0) + n);
                }
            }
            targets.clear();
            targets.resize(ids.len(), 0.0);
            for b in 0..nb {
                targets[offsets[b]] = 1.0;
            }
            active_sum += ids.len() as f64;
            phase[0] += tp.elapsed().as_secs_f64();
            if let Some(dg) = diag.as_mut() {
                dg.observe(&ids, &offsets, &draws);
                if step % o.lsh_diag == 0 || step + 1 == o.steps {
                    let td = Instant::now();
                    let idx = index.as_ref().expect("index");
                    dg.report(sh, step, idx, &w, &mu, &codes);
                    diag_s += td.elapsed().as_secs_f64();
                }
            }
            // ---- forward, loss, update
            let tp = Instant::now();
            logits.resize(ids.len(), 0.0);
            let wm = WeightMatrix::new(Weights::F32(&w), rows, DA, ST).expect("W");
            let at: Vec<usize> = bcuts.iter().map(|&b| offsets[b]).collect();
            par_parts(split_at_cuts(&mut logits, &at), |k, part| {
                let (b0, b1) = (bcuts[k], bcuts[k + 1]);
                let offs: Vec<usize> = offsets[b0..=b1].iter().map(|&x| x - offsets[b0]).collect();
                wm.matmul_isa(
                    tier,
                    &xq[b0 * ST..],
                    b1 - b0,
                    ST,
                    &ids[offsets[b0]..offsets[b1]],
                    &offs,
                    part,
                )
                .expect("gathered matmul");
            });
            phase[1] += tp.elapsed().as_secs_f64();
            if logq {
                // The logQ correction (module docs): z_j - log q_j for
                // every sampled negative j (the label, first in its
                // segment, is kept: it is always in the set).
                let tp = Instant::now();
                let nneg = (rows - 1) as f64;
                match m {
                    Method::Uniform => {
                        for b in 0..nb {
                            let (s0, s1) = (offsets[b], offsets[b + 1]);
                            let lq = (((s1 - s0 - 1) as f64) / nneg).ln() as f32;
                            logits[s0 + 1..s1].iter_mut().for_each(|z| *z -= lq);
                        }
                    }
                    Method::Unigram => {
                        for b in 0..nb {
                            let t = draws[b] as f64;
                            for j in offsets[b] + 1..offsets[b + 1] {
                                let p = sh.unigram_p[ids[j] as usize];
                                let q = -(t * (-p).ln_1p()).exp_m1();
                                floored += (q < 1e-30) as usize;
                                logits[j] -= q.max(1e-30).ln() as f32;
                            }
                        }
                    }
                    Method::LshEmb | Method::LshLabel => {
                        let q: &[f32] = if m == Method::LshEmb { &xq } else { &lq };
                        probs.resize(ids.len(), 0.0);
                        index
                            .as_ref()
                            .expect("index")
                            .inclusion_probabilities(
                                q,
                                nb,
                                ST,
                                &ids,
                                &offsets,
                                Some(&draws),
                                &mut probs,
                            )
                            .expect("inclusion probabilities");
                        for b in 0..nb {
                            for j in offsets[b] + 1..offsets[b + 1] {
                                floored += (probs[j] < 1e-30) as usize;
                                logits[j] -= probs[j].max(1e-30).ln() as f32;
                            }
                        }
                    }
                    Method::Full | Method::Hf | Method::HfA => unreachable!(),
                }
                phase[6] += tp.elapsed().as_secs_f64();
            }
            let tp = Instant::now();
            train::softmax_xent_in_place(tier, th, &mut logits, &targets, &offsets, &mut loss)
                .expect("xent");
            phase[2] += tp.elapsed().as_secs_f64();
            let tp = Instant::now();
            let bt = Batch {
                q: &xq,
                q_stride: ST,
                ids: &ids,
                offsets: &offsets,
                grad: &logits,
            };
            match adam.as_mut() {
                Some(a) => a.step(tier, th, &mut w, ST, &bt).expect("adam"),
                None => {
                    train::rows_update_sgd(tier, th, &mut w, rows, DA, ST, &bt, o.lr).expect("sgd")
                }
            }
            phase[3] += tp.elapsed().as_secs_f64();
            let tp = Instant::now();
            if o.incremental && index.is_some() {
                // A plain store per position (no branch); the rehash
                // collects the marked rows in ascending order.
                for &r in &ids {
                    dirty[r as usize] = true;
                }
            }
            phase[4] += tp.elapsed().as_secs_f64();
        }
        loss_sum += loss.iter().map(|&x| x as f64).sum::<f64>();
        loss_n += nb;
        if (step + 1) % o.progress == 0 || step + 1 == o.steps {
            last_loss = loss_sum / loss_n as f64;
            println!(
                "  {name:>9} ({th} thr) step {:>6}/{}: train loss (over its active set) {:.4}, {:.1} active/sample, {:.1} s, {} rebuilds ({:.2} s)",
                step + 1,
                o.steps,
                last_loss,
                active_sum / ((step + 1) * nb) as f64,
                t0.elapsed().as_secs_f64(),
                rebuilds,
                rebuild_s
            );
            (loss_sum, loss_n) = (0.0, 0);
        }
    }
    let train_s = t0.elapsed().as_secs_f64() - diag_s;
    let ms = |x: f64| x * 1e3 / o.steps as f64;
    if !full {
        println!(
            "  {name} ({th} thr) per step: candidates (incl. hashing the batch {:.2} ms / forest queries + union, not rebuilds) {:.2} ms, \
             gathered logits {:.2} ms, xent {:.2} ms, row update {:.2} ms, \
             marking updated rows {:.2} ms, rebuilds {:.2} ms{}",
            ms(phase[5]),
            ms(phase[0]),
            ms(phase[1]),
            ms(phase[2]),
            ms(phase[3]),
            ms(phase[4]),
            ms(rebuild_s),
            if logq {
                format!(
                    ", logQ correction {:.2} ms ({floored} q_j floored at 1e-30)",
                    ms(phase[6])
                )
            } else {
                String::new()
            }
        );
    }
    if m == Method::Hf {
        println!(
            "  hf: mean |S(X)| before the cap {:.0} (cap {}), {} trees, leaf size {}, Q {}, rebuilt every {} steps",
            hf_union_sum / o.steps as f64,
            o.s - 1,
            o.hf_trees,
            o.hf_leaf,
            o.hf_q,
            o.hf_rebuild
        );
    }
    if m == Method::HfA {
        println!(
            "  hf-a: mean |S(x)| {:.1} of Q {}, mean |S(X)| before the cap {:.0} (cap {}), tau {}, \
             trees {} -> {}, leaf size {}, {} rebuilds (T from {} by x{}), last interval {:.0}",
            hf_set_sum / o.steps as f64,
            o.hf_q,
            hf_union_sum / o.steps as f64,
            o.s - 1,
            o.hfa_tau,
            o.hfa_trees.0,
            forest.as_ref().map_or(0, |f| f.params().trees),
            o.hf_leaf,
            rebuilds,
            o.hfa_rebuild.0,
            o.hfa_rebuild.1,
            hfa_t / o.hfa_rebuild.1
        );
    }
    if o.incremental && rebuilds > 1 && !matches!(m, Method::Hf | Method::HfA) {
        println!(
            "  {name} incremental rehashes: {} after the build, {:.0} rows each on average \
             ({:.1} % of the classes), {:.1} ms each",
            rebuilds - 1,
            rehashed_rows as f64 / (rebuilds - 1) as f64,
            100.0 * rehashed_rows as f64 / ((rebuilds - 1) * rows) as f64,
            1e3 * rebuild_s / rebuilds as f64
        );
    }
    if full {
        println!(
            "  full softmax ({th} thr) per step: logits (incl. their transpose) {:.2} ms, xent {:.2} ms, transposes {:.2} ms, \
             G = g^T X {:.2} ms, W update {:.2} ms",
            ms(phase[0]),
            ms(phase[1]),
            ms(phase[2]),
            ms(phase[3]),
            ms(phase[4])
        );
    }
    drop(index);
    let (p1, p5, ll) = evaluate(sh, &w);
    Result_ {
        name: name.to_string(),
        seed,
        logq,
        threads: th,
        steps: o.steps,
        train_s,
        rebuilds,
        rebuild_s,
        mean_active: active_sum / (o.steps * nb) as f64,
        last_loss,
        p1,
        p5,
        ll,
    }
}

/// `--lsh-diag N`: what the LSH methods' active sets and rows look like,
/// printed at step 0, every N steps and at the last step (not timed: its
/// time is left out of the training time). Per report:
/// * `sets`: since the last report, the mean active set per sample, the
///   share of samples whose set is the label alone (the first table's
///   bucket overflowed S, or every bucket was empty), the mean number of
///   tables the walk took, the
///   distinct rows in the sets; and the rows ever in a set so far.
/// * `rows`: for the rows ever sampled (`ever`) and the others (`never`):
///   their number, mean |w|, mean b and mean |b| / |[w, b]| (the bias's
///   share of what BiasAug hashes).
/// * `direction`: `m` = the mean of the ever-sampled rows' w; |m| over
///   their mean |w| (1: identical rows, ~0: no common direction); the mean
///   cosine of each ever / never row with `m`; the cosine of `m` with the
///   mean input `e` (over the training pairs' centres).
/// * `moves`: since the last report, over the rows in a set meanwhile:
///   the mean |w_now - w_then|, the mean change of b, the coherence of the
///   moves (|mean move| / mean |move|) and the cosine of the mean move
///   with `e`.
/// * `buckets`: what the batch's queries hit, per (sample, table): the
///   mean bucket size and the share of buckets of at least S rows, in the
///   index's tables (`stored`) and in tables of the current rows hashed
///   now (`fresh`, the same family and folding); the mean over tables of
///   the largest bucket (stored / fresh); and the staleness: the rows
///   whose stored copy differs from the current form, and the share of
///   (row, table) codes that differ.
struct LshDiag {
    ever: Vec<bool>,
    touched: Vec<bool>,
    n_touched: usize,
    samples: usize,
    active: usize,
    label_only: usize,
    tables: u64,
    /// W at the last report.
    w_prev: Vec<f32>,
    /// The mean input over the training pairs' centres.
    e_mean: Vec<f64>,
    buf: Vec<f32>,
    fresh: Vec<u32>,
    stored: Vec<u32>,
    count: Vec<u32>,
}

fn norm64(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Cosine of an f32 row with an f64 vector (0 for a zero vector).
fn cos_f(a: &[f32], b: &[f64], nb: f64) -> f64 {
    let (mut d, mut na) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        d += x as f64 * y;
        na += x as f64 * x as f64;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        d / (na.sqrt() * nb)
    }
}

impl LshDiag {
    fn new(sh: &Shared, w: &[f32]) -> LshDiag {
        let mut e_mean = vec![0f64; D];
        let n = sh.train.len().min(200_000);
        for &(c, _) in &sh.train[..n] {
            let e = &sh.emb[c as usize * D..(c as usize + 1) * D];
            e_mean.iter_mut().zip(e).for_each(|(a, &v)| *a += v as f64);
        }
        e_mean.iter_mut().for_each(|a| *a /= n as f64);
        let mean_e = sh.train[..n]
            .iter()
            .map(|&(c, _)| {
                let e = &sh.emb[c as usize * D..(c as usize + 1) * D];
                e.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt()
            })
            .sum::<f64>()
            / n as f64;
        println!(
            "  lsh-diag: inputs: mean |e_x| {mean_e:.3}, |mean e| {:.3} (over {n} training centres)",
            norm64(&e_mean)
        );
        LshDiag {
            ever: vec![false; sh.rows],
            touched: vec![false; sh.rows],
            n_touched: 0,
            samples: 0,
            active: 0,
            label_only: 0,
            tables: 0,
            w_prev: w.to_vec(),
            e_mean,
            buf: Vec::new(),
            fresh: Vec::new(),
            stored: Vec::new(),
            count: Vec::new(),
        }
    }

    fn observe(&mut self, ids: &[u32], offsets: &[usize], draws: &[u32]) {
        for &r in ids {
            let r = r as usize;
            self.ever[r] = true;
            if !self.touched[r] {
                self.touched[r] = true;
                self.n_touched += 1;
            }
        }
        for (b, w) in offsets.windows(2).enumerate() {
            self.samples += 1;
            self.active += w[1] - w[0];
            self.label_only += (w[1] - w[0] == 1) as usize;
            self.tables += draws[b] as u64;
        }
    }

    fn report(
        &mut self,
        sh: &Shared,
        step: usize,
        idx: &Index,
        w: &[f32],
        mu: &[f32],
        qcodes: &[u32],
    ) {
        let (o, rows) = (sh.o, sh.rows);
        let (l, cap, nb) = (o.l as usize, o.s, o.batch);
        let n_ever = self.ever.iter().filter(|&&e| e).count();
        let ns = self.samples.max(1) as f64;
        println!(
            "  lsh-diag step {step}: sets: {:.1} active / sample, {:.1} % label only, {:.1} tables taken, \
             {} distinct rows since the last report; {n_ever} rows ever sampled",
            self.active as f64 / ns,
            100.0 * self.label_only as f64 / ns,
            self.tables as f64 / ns,
            self.n_touched
        );
        // Rows, ever vs never sampled.
        let row = |r: usize| &w[r * ST..r * ST + D];
        let nrm = |v: &[f32]| v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
        let mut m = vec![0f64; D];
        let mut g = [[0f64; 4]; 2]; // count, sum |w|, sum b, sum |b| / |[w, b]|
        for r in 0..rows {
            let (wr, b) = (row(r), w[r * ST + D] as f64);
            let n = nrm(wr);
            let k = (!self.ever[r]) as usize;
            g[k][0] += 1.0;
            g[k][1] += n;
            g[k][2] += b;
            g[k][3] += b.abs() / (n * n + b * b).sqrt().max(1e-30);
            if k == 0 {
                m.iter_mut().zip(wr).for_each(|(a, &v)| *a += v as f64);
            }
        }
        m.iter_mut().for_each(|a| *a /= g[0][0].max(1.0));
        let nm = norm64(&m);
        let (mut cos_e, mut cos_n) = (0f64, 0f64);
        for r in 0..rows {
            let c = cos_f(row(r), &m, nm);
            if self.ever[r] {
                cos_e += c;
            } else {
                cos_n += c;
            }
        }
        let ne = norm64(&self.e_mean);
        let cme =
            m.iter().zip(&self.e_mean).map(|(a, b)| a * b).sum::<f64>() / (nm * ne).max(1e-30);
        let f = |k: usize, j: usize| g[k][j] / g[k][0].max(1.0);
        println!(
            "    rows: ever {:.0}: |w| {:.3}, b {:+.3}, |b|/|[w,b]| {:.3}; never {:.0}: |w| {:.3}, b {:+.3}, |b|/|[w,b]| {:.3}",
            g[0][0], f(0, 1), f(0, 2), f(0, 3), g[1][0], f(1, 1), f(1, 2), f(1, 3)
        );
        println!(
            "    direction: |m| / mean |w| (ever) {:.3}; mean cos(w, m) ever {:.3} never {:.3}; cos(m, e) {:+.3}",
            nm / f(0, 1).max(1e-30),
            cos_e / g[0][0].max(1.0),
            cos_n / g[1][0].max(1.0),
            cme
        );
        // Moves since the last report.
        let mut dm = vec![0f64; D];
        let (mut dn, mut db, mut nt) = (0f64, 0f64, 0f64);
        for r in 0..rows {
            if !self.touched[r] {
                continue;
            }
            let (a, p) = (row(r), &self.w_prev[r * ST..r * ST + D]);
            let mut s2 = 0f64;
            for ((d, &x), &y) in dm.iter_mut().zip(a).zip(p) {
                let v = x as f64 - y as f64;
                *d += v;
                s2 += v * v;
            }
            dn += s2.sqrt();
            db += w[r * ST + D] as f64 - self.w_prev[r * ST + D] as f64;
            nt += 1.0;
        }
        if nt > 0.0 {
            dm.iter_mut().for_each(|a| *a /= nt);
            let ndm = norm64(&dm);
            let c = dm.iter().zip(&self.e_mean).map(|(a, b)| a * b).sum::<f64>()
                / (ndm * ne).max(1e-30);
            println!(
                "    moves ({nt:.0} rows): mean |dw| {:.4}, mean db {:+.4}, coherence {:.3}, cos(mean dw, e) {:+.3}",
                dn / nt,
                db / nt,
                ndm / (dn / nt).max(1e-30),
                c
            );
        }
        // Buckets: stored tables, and the current rows hashed now.
        let tabs = idx.tables();
        let rb = tabs.range_bits();
        let fam = idx.hash_family();
        let hd = idx.hash_dim();
        let (mut hit_s, mut big_s, mut max_s) = (0f64, 0usize, 0f64);
        for t in 0..l {
            let (offs, _) = tabs.csr(t);
            max_s += offs.windows(2).map(|x| x[1] - x[0]).max().unwrap_or(0) as f64;
            for b in 0..nb {
                let n = tabs.bucket(t, fold_code(qcodes[b * l + t], rb)).len();
                hit_s += n as f64;
                big_s += (n >= cap) as usize;
            }
        }
        // The current rows in the form the index hashes.
        self.buf.resize(rows * ST, 0.0);
        for r in 0..rows {
            let dst = &mut self.buf[r * ST..r * ST + DA];
            dst.copy_from_slice(&w[r * ST..r * ST + DA]);
            if o.lsh_rows.centred() {
                dst.iter_mut().zip(mu).for_each(|(v, &m)| *v -= m);
            }
        }
        self.fresh.resize(rows * l, 0);
        fam.hash(&self.buf, rows, ST, &mut self.fresh)
            .expect("hash");
        // The stored rows (and bias) as the index holds them.
        let Weights::F32(sw) = idx.weights() else {
            unreachable!("F32 storage")
        };
        let ws = idx.weight_stride();
        let mut stale = 0usize;
        for r in 0..rows {
            let dst = &mut self.buf[r * ST..r * ST + DA];
            let mut diff = false;
            for (d, &v) in dst[..D].iter_mut().zip(&sw[r * ws..r * ws + D]) {
                diff |= *d != v;
                *d = v;
            }
            if let Some(b) = idx.bias() {
                diff |= dst[D] != b[r];
                dst[D] = b[r];
            }
            stale += diff as usize;
        }
        debug_assert!(hd <= DA);
        self.stored.resize(rows * l, 0);
        fam.hash(&self.buf, rows, ST, &mut self.stored)
            .expect("hash");
        let changed = self
            .fresh
            .iter()
            .zip(&self.stored)
            .filter(|(a, b)| a != b)
            .count();
        let (mut hit_f, mut big_f, mut max_f) = (0f64, 0usize, 0f64);
        self.count.resize(1 << rb, 0);
        for t in 0..l {
            self.count.fill(0);
            for r in 0..rows {
                self.count[fold_code(self.fresh[r * l + t], rb) as usize] += 1;
            }
            max_f += *self.count.iter().max().unwrap_or(&0) as f64;
            for b in 0..nb {
                let n = self.count[fold_code(qcodes[b * l + t], rb) as usize] as usize;
                hit_f += n as f64;
                big_f += (n >= cap) as usize;
            }
        }
        let pairs = (nb * l) as f64;
        println!(
            "    buckets hit by the batch: stored mean {:.0}, {:.1} % >= S; fresh mean {:.0}, {:.1} % >= S; \
             largest per table (mean) stored {:.0} fresh {:.0}; stale rows {stale} ({:.1} %), codes changed {:.1} %",
            hit_s / pairs,
            100.0 * big_s as f64 / pairs,
            hit_f / pairs,
            100.0 * big_f as f64 / pairs,
            max_s / l as f64,
            max_f / l as f64,
            100.0 * stale as f64 / rows as f64,
            100.0 * changed as f64 / (rows * l) as f64
        );
        self.w_prev.copy_from_slice(w);
        self.touched.fill(false);
        (
            self.n_touched,
            self.samples,
            self.active,
            self.label_only,
            self.tables,
        ) = (0, 0, 0, 0, 0);
    }
}

/// `--hf-diag`: where the forest queries' time goes, printed for the
/// first `n` samples of a batch. It replicates the walk of
/// `lshk::forest` (its module documentation) through `Forest::tree` and
/// `Forest::plane`: per tree, the proposal (the classes under the parent
/// of the first node holding fewer than Q classes), the depth reached,
/// and the pooled, deduplicated size that the query then ranks by cosine
/// (one f64 dot product of `dim` with each row). Per tree it also counts
/// the "lopsided" inner nodes: those with at least 4 Q classes whose
/// smaller child holds fewer than Q (a walk that enters that child
/// proposes the whole node). Not timed separately: `--hf-diag` runs add
/// its time to the step time. Also the norms of the rows `[w, b]`.
fn hf_diag(f: &Forest, w: &[f32], x: &[f32], n: usize, q: usize, step: usize, tq: f64) {
    let trees = f.params().trees as usize;
    let rows = f.rows();
    let dim = f.dim();
    let infos: Vec<_> = (0..trees).map(|t| f.tree(t)).collect();
    let side = |h: &[f32], o: f64, xi: &[f32]| {
        let mut s = 0f64;
        for (&a, &b) in h.iter().zip(xi) {
            s += a as f64 * b as f64;
        }
        s > o
    };
    let mut seen = vec![false; rows];
    let (mut pool_sum, mut pool_max, mut prop_sum, mut depth_sum) =
        (0usize, 0usize, 0usize, 0usize);
    let mut pool: Vec<u32> = Vec::new();
    for i in 0..n {
        let xi = &x[i * ST..i * ST + dim];
        pool.clear();
        for (t, (perm, nodes)) in infos.iter().enumerate() {
            let (mut node, mut parent, mut depth) = (0usize, 0usize, 0usize);
            let prop = loop {
                let (s0, e0, l0, r0) = nodes[node];
                if ((e0 - s0) as usize) < q {
                    let (ps, pe, _, _) = nodes[parent];
                    break &perm[ps as usize..pe as usize];
                }
                if l0 == u32::MAX {
                    break &perm[s0 as usize..e0 as usize];
                }
                let (h, o) = f.plane(t, node).expect("inner node");
                parent = node;
                depth += 1;
                node = if side(h, o, xi) {
                    l0 as usize
                } else {
                    r0 as usize
                };
            };
            prop_sum += prop.len();
            depth_sum += depth;
            for &id in prop {
                if !seen[id as usize] {
                    seen[id as usize] = true;
                    pool.push(id);
                }
            }
        }
        for &id in &pool {
            seen[id as usize] = false;
        }
        pool_sum += pool.len();
        pool_max = pool_max.max(pool.len());
    }
    let (mut lop, mut big, mut maxd) = (0usize, 0usize, 0usize);
    for (_, nodes) in &infos {
        let mut depth = vec![0usize; nodes.len()];
        for (i, &(s0, e0, l0, r0)) in nodes.iter().enumerate() {
            if l0 == u32::MAX {
                maxd = maxd.max(depth[i]);
                continue;
            }
            depth[l0 as usize] = depth[i] + 1;
            depth[r0 as usize] = depth[i] + 1;
            if ((e0 - s0) as usize) >= 4 * q {
                big += 1;
                let size = |c: u32| (nodes[c as usize].1 - nodes[c as usize].0) as usize;
                if size(l0).min(size(r0)) < q {
                    lop += 1;
                }
            }
        }
    }
    let norms: Vec<f64> = (0..rows)
        .map(|r| {
            w[r * ST..r * ST + dim]
                .iter()
                .map(|&v| v as f64 * v as f64)
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    let nmean = norms.iter().sum::<f64>() / rows as f64;
    let nmax = norms.iter().cloned().fold(0.0, f64::max);
    let nmin = norms.iter().cloned().fold(f64::INFINITY, f64::min);
    println!(
        "  hf-diag step {step}: forest query {:.1} ms for the batch; per sample (first {n}): pool {:.0} \
         (max {pool_max}), proposal per tree {:.0}, depth {:.1}; trees: {big} inner nodes >= 4Q, {lop} lopsided \
         (smaller child < Q), max depth {maxd}; |[w, b]| min {nmin:.3} mean {nmean:.3} max {nmax:.3}",
        tq * 1e3,
        pool_sum as f64 / n as f64,
        prop_sum as f64 / (n * trees) as f64,
        depth_sum as f64 / (n * trees) as f64,
    );
}

/// P@1, P@5 of the full layer's exact top-5 per held-out centre (all
/// threads), and the mean log-likelihood per held-out pair.
fn evaluate(sh: &Shared, w: &[f32]) -> (f64, f64, f64) {
    let rows = sh.rows;
    let layer = DenseLayer::new(w, rows, DA, ST, None).expect("layer");
    let aug = |g: &common::Grouped| {
        let mut q = vec![0f32; g.len() * ST];
        for (i, &c) in g.centres.iter().enumerate() {
            q[i * ST..i * ST + D].copy_from_slice(&sh.emb[c as usize * D..(c as usize + 1) * D]);
            q[i * ST + D] = 1.0;
        }
        q
    };
    let held = sh.held;
    let nq = held.len();
    let q = aug(held);
    const K: usize = 5;
    let (mut ids, mut sc) = (vec![0u32; nq * K], vec![0f32; nq * K]);
    layer
        .topk_threads(0, &q, nq, ST, K, &mut ids, &mut sc)
        .expect("top-k");
    let (mut p1, mut p5) = (0usize, 0usize);
    for i in 0..nq {
        let ls = held.labels_of(i);
        let got = &ids[i * K..(i + 1) * K];
        p1 += ls.binary_search(&got[0]).is_ok() as usize;
        p5 += got.iter().filter(|y| ls.binary_search(y).is_ok()).count();
    }
    // Log-likelihood: all logits of 64 centres at a time, split between
    // two threads.
    let ha = sh.held_all;
    let qa = aug(ha);
    let na = ha.len();
    let chunk = 64;
    let per_thread = na.div_ceil(2).div_ceil(chunk) * chunk;
    let ll: f64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..na)
            .step_by(per_thread.max(1))
            .map(|c0| {
                let (qa, layer) = (&qa, &layer);
                s.spawn(move || {
                    let mut z = vec![0f32; chunk * rows];
                    let mut sum = 0f64;
                    let c1 = (c0 + per_thread).min(na);
                    for c in (c0..c1).step_by(chunk) {
                        let n = chunk.min(c1 - c);
                        layer
                            .logits_isa(sh.tier, &qa[c * ST..], n, ST, &mut z)
                            .expect("logits");
                        for i in 0..n {
                            let zi = &z[i * rows..(i + 1) * rows];
                            let mx = zi.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
                            let lse =
                                mx + zi.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln();
                            for &y in ha.labels_of(c + i) {
                                sum += zi[y as usize] as f64 - lse;
                            }
                        }
                    }
                    sum
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("ll thread")).sum()
    });
    (
        p1 as f64 / nq as f64,
        p5 as f64 / (K * nq) as f64,
        ll / ha.labels.len() as f64,
    )
}

mod common;

/// A training task: the input vectors (`emb`, D per row), the (input,
/// class) training pairs, the held-out pairs (flat i32, for
/// `common::group_pairs`) and the class counts of the training pairs.
struct Task {
    name: String,
    rows: usize,
    emb: Vec<f32>,
    train: Vec<(u32, u32)>,
    held: Vec<i32>,
    epoch_pairs: usize,
}

fn w2v_task(o: &Opts) -> Option<Task> {
    if !o.dir.join("output_layer.f32").exists() {
        return None;
    }
    let (emb, rows) =
        lshk::data::read_raw_f32(&o.dir.join("input_embeddings.f32"), D).expect("embeddings");
    let tp = lshk::data::read_raw_i32(&o.dir.join("train_pairs.i32")).expect("train pairs");
    let held = lshk::data::read_raw_i32(&o.dir.join("heldout_pairs.i32")).expect("held-out pairs");
    let train: Vec<(u32, u32)> = tp
        .chunks_exact(2)
        .map(|p| {
            assert!(p[0] >= 0 && (p[0] as usize) < rows && p[1] >= 0 && (p[1] as usize) < rows);
            (p[0] as u32, p[1] as u32)
        })
        .collect();
    Some(Task {
        name: "w2v-gutenberg".into(),
        rows,
        emb,
        train,
        held,
        epoch_pairs: EPOCH_PAIRS,
    })
}

/// The W1-scale synthetic task (`--synthetic N`): N classes, a planted
/// layer W* from `lshk::data::structured_layer(N, 128, 1024 clusters)`,
/// and `--planted C` labelled classes spread evenly over the ids
/// (`i * N / C`); each sample's label is drawn uniformly from those C and
/// its input is `w*_y / |w*_y| + noise` (N(0, 0.25^2 / 128) per
/// coordinate, as `data::queries_near_labels`). The other N - C classes
/// never occur: the output layer must learn to keep them down. Training
/// pairs: `steps * batch` distinct samples (one pass), held-out:
/// `--heldout` more.
fn synthetic_task(o: &Opts) -> Task {
    let n = o.synthetic;
    let layer = lshk::data::structured_layer(n, D, 1024, 5);
    let c = o.planted.min(n);
    let (ntr, nho) = (o.steps * o.batch, o.heldout);
    let mut r = SplitMix64::new(17);
    let noise = 0.25 / (D as f32).sqrt();
    let mut emb = vec![0f32; (ntr + nho) * D];
    let mut ys = Vec::with_capacity(ntr + nho);
    for x in emb.chunks_mut(D) {
        let y = (r.below(c as u64) as usize * n / c) as u32;
        ys.push(y);
        let wy = &layer.w[y as usize * D..(y as usize + 1) * D];
        let norm = wy
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt()
            .max(f32::MIN_POSITIVE);
        for (v, &wv) in x.iter_mut().zip(wy) {
            *v = wv / norm + noise * r.next_normal() as f32;
        }
    }
    let train = (0..ntr).map(|i| (i as u32, ys[i])).collect();
    let held = (ntr..ntr + nho)
        .flat_map(|i| [i as i32, ys[i] as i32])
        .collect();
    Task {
        name: format!("synthetic ({n} classes, {c} planted)"),
        rows: n,
        emb,
        train,
        held,
        epoch_pairs: ntr,
    }
}

fn main() {
    let o = opts();
    let t0 = Instant::now();
    let task = if o.synthetic > 0 {
        synthetic_task(&o)
    } else {
        match w2v_task(&o) {
            Some(t) => t,
            None => {
                println!("skipped: ../shared/data not found ({})", o.dir.display());
                return;
            }
        }
    };
    let (rows, emb, hp) = (task.rows, &task.emb, &task.held);
    let erows = emb.len() / D;
    let mut count = vec![0f64; rows];
    for &(_, y) in &task.train {
        count[y as usize] += 1.0;
    }
    let upow: Vec<f64> = count.iter().map(|c| c.powf(0.75)).collect();
    let unigram = Alias::new(&upow);
    let usum: f64 = upow.iter().sum();
    let unigram_p: Vec<f64> = upow.iter().map(|x| x / usum).collect();
    let held = common::group_pairs(hp, o.heldout, erows, rows, true);
    let held_all = common::group_pairs(hp, o.heldout, erows, rows, false);
    let tier = lshk::isa::active();
    println!(
        "{}: {rows} classes x {D} (+ bias); {} training pairs used (shuffled, seed 99 ^ seed), \
         {} steps of B = {}, {}; held-out: {} pairs -> {} centres; S = {} ({:.1} % of the classes); \
         LSH {:?} K = {} L = {}{} (rows {:?}, walk {}), {}; \
         tier {tier:?}, threads {:?}, seeds {:?}, logQ {:?}; data in {:.1} s",
        task.name,
        task.train.len().min(o.pairs.max(1)),
        o.steps,
        o.batch,
        if o.adam {
            format!("lazy Adam lr {} (dense Adam for the full softmax)", o.adam_lr)
        } else {
            format!("SGD lr {}", o.lr)
        },
        held_all.labels.len(),
        held.len(),
        o.s,
        100.0 * o.s as f64 / rows as f64,
        o.family,
        o.k,
        o.l,
        if o.family == Family::Dwta {
            format!(" B = {}", o.bin_size)
        } else {
            String::new()
        },
        o.lsh_rows,
        if o.walk_fill { "fill" } else { "stop" },
        if o.incremental {
            format!(
                "built at step 0, then incremental rehashes of the updated rows on LNS's \
                 schedule (P0 50, lambda {})",
                o.lambda
            )
        } else {
            "rebuilt at step 0, 50, then intervals x1.25".to_string()
        },
        o.threads,
        o.seeds,
        o.logq,
        t0.elapsed().as_secs_f64()
    );
    let mut res = Vec::new();
    for &seed in &o.seeds {
        let mut train = task.train.clone();
        SplitMix64::new(seeded(99, seed)).shuffle(&mut train);
        train.truncate(o.pairs.max(1));
        let sh = Shared {
            o: &o,
            rows,
            emb,
            train: &train,
            unigram: &unigram,
            unigram_p: &unigram_p,
            held: &held,
            held_all: &held_all,
            tier,
        };
        for &th in &o.threads {
            for &lq in &o.logq {
                for name in &o.methods {
                    if lq && matches!(name.as_str(), "full" | "hf" | "hf-a") && o.logq.len() > 1 {
                        continue; // no sampling distribution: once, without
                    }
                    let r = run(&sh, name, th, seed, lq);
                    println!(
                        "{:>9} ({th} thr, seed {seed}, logQ {}): P@1 {:.4}  P@5 {:.4}  held-out LL {:.4}  train {:.2} s for {} steps",
                        r.name,
                        if r.logq { "on" } else { "off" },
                        r.p1,
                        r.p5,
                        r.ll,
                        r.train_s,
                        r.steps
                    );
                    res.push(r);
                }
            }
        }
    }
    let steps_epoch = task.epoch_pairs.div_ceil(o.batch);
    println!(
        "\n| method | logQ | seed | threads | active/sample | P@1 | P@5 | held-out LL | last train loss | ms/step | s/epoch (extrap.) | vs full (same threads, seed) | rebuilds (s) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &res {
        let per = r.train_s / r.steps as f64;
        let full_t = res
            .iter()
            .find(|f| f.name == "full" && f.threads == r.threads && f.seed == r.seed)
            .map(|f| f.train_s / f.steps as f64);
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.4} | {:.4} | {:.4} | {:.4} | {:.2} | {:.0} | {} | {} ({:.2}) |",
            r.name,
            if r.logq { "on" } else { "off" },
            r.seed,
            r.threads,
            r.mean_active,
            r.p1,
            r.p5,
            r.ll,
            r.last_loss,
            per * 1e3,
            per * steps_epoch as f64,
            full_t.map_or("-".into(), |f| format!("{:.1}x", f / per)),
            r.rebuilds,
            r.rebuild_s
        );
    }
    if o.seeds.len() > 1 {
        summary(&res);
    }
    println!(
        "\n(epoch = {} pairs = {steps_epoch} steps; total {:.1} s)",
        task.epoch_pairs,
        t0.elapsed().as_secs_f64()
    );
}

/// Mean ± sample standard deviation over the seeds, per method, logQ
/// setting and thread count (in the order of the runs).
fn summary(res: &[Result_]) {
    let stat = |v: &[f64]| {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let sd = if v.len() > 1 {
            (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        (m, sd)
    };
    println!(
        "\nOver the seeds (mean ± sd):\n\n| method | logQ | threads | seeds | active/sample | P@1 | P@5 | held-out LL | ms/step |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut seen: Vec<(&str, bool, usize)> = Vec::new();
    for r in res {
        let key = (r.name.as_str(), r.logq, r.threads);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let g: Vec<&Result_> = res
            .iter()
            .filter(|x| (x.name.as_str(), x.logq, x.threads) == key)
            .collect();
        let col = |f: &dyn Fn(&Result_) -> f64| stat(&g.iter().map(|&x| f(x)).collect::<Vec<_>>());
        let (a, _) = col(&|x| x.mean_active);
        let (p1, p1s) = col(&|x| x.p1);
        let (p5, p5s) = col(&|x| x.p5);
        let (ll, lls) = col(&|x| x.ll);
        let (t, ts) = col(&|x| x.train_s * 1e3 / x.steps as f64);
        println!(
            "| {} | {} | {} | {} | {a:.0} | {p1:.4} ± {p1s:.4} | {p5:.4} ± {p5s:.4} | {ll:.4} ± {lls:.4} | {t:.2} ± {ts:.2} |",
            r.name,
            if r.logq { "on" } else { "off" },
            r.threads,
            g.len()
        );
    }
}
