//! Every source's knobs, in one place below the sources: the build and
//! query parameters of the IVF lists, the graph, the forest and the LSH
//! gather. [`super::IndexParams`] and [`super::QueryParams`] nest them, and
//! each source re-exports its own (`crate::ivf::IvfParams`, ...), so the
//! seam never imports a source.

/// The IVF lists' build and query parameters (re-exported by
/// [`crate::ivf`]).
pub mod ivf {
    use crate::bail;
    use crate::error::Result;

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
        /// Both: the 4-bit codes scan the lists, the int8 codes re-score the
        /// best [`SearchParams::refine`] candidates, then exact re-ranking.
        Pq4I8 = 3,
    }

    impl Codes {
        pub fn from_u32(v: u32) -> Option<Codes> {
            match v {
                0 => Some(Codes::None),
                1 => Some(Codes::I8),
                2 => Some(Codes::Pq4),
                3 => Some(Codes::Pq4I8),
                _ => None,
            }
        }
        /// Whether the index keeps 4-bit PQ codes ([`Codes::Pq4`],
        /// [`Codes::Pq4I8`]).
        pub fn has_pq(self) -> bool {
            matches!(self, Codes::Pq4 | Codes::Pq4I8)
        }
        /// Whether the index keeps int8 codes ([`Codes::I8`], [`Codes::Pq4I8`]).
        pub fn has_i8(self) -> bool {
            matches!(self, Codes::I8 | Codes::Pq4I8)
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
        /// Sub-quantisers of [`Codes::Pq4`] and [`Codes::Pq4I8`] (4 bits each;
        /// must divide `dim`); 0 = [`default_pq_m`] (`dim / 2`). Must be 0 with
        /// other codes.
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
    ///   from the rows) keeps going. After the second list, an index with
    ///   the lists' shapes (every build; a file written before them has
    ///   none) takes `spread_l` along `q`: larger where the list's rows
    ///   spread along the query, smaller across it (docs/ivf.md, "Lists
    ///   with a shape"). Measured there
    ///   (rerank 32): `reach = 2` (the default) gives recall@10 0.999 on
    ///   the synthetic W1 (1 list of 3,274 per query), 0.996 on
    ///   w2v-gutenberg (159 of 752 lists), 0.999 on a heavy-tailed
    ///   50-dimension layer and 1.000 on the MiniLM vocabulary, with no
    ///   per-layer tuning; 1.75 gives 0.999 / 0.979 / 0.997 / 0.998.
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
        /// [`Codes::Pq4I8`] only (other codes ignore it): the best
        /// `max(refine, rerank, k)` candidates of the 4-bit pass are re-scored
        /// from their int8 codes before the exact re-rank (or, with `rerank =
        /// 0`, returned with those int8 scores); 0 = no int8 stage.
        pub refine: u32,
    }

    /// The default [`SearchParams::refine`]: 8 times the default `rerank`,
    /// which reaches int8's recall on the layers of docs/ivf.md.
    pub const DEFAULT_REFINE: u32 = 256;

    /// The default adaptive margin of [`SearchParams::reach`].
    pub const DEFAULT_REACH: f32 = 2.0;

    impl Default for SearchParams {
        fn default() -> Self {
            SearchParams {
                nprobe: u32::MAX,
                rerank: 32,
                reach: DEFAULT_REACH,
                refine: DEFAULT_REFINE,
            }
        }
    }

    impl SearchParams {
        /// The parameters' own rules: `nprobe >= 1`, `reach` finite and `>= 0`
        /// (`InvalidArgument`).
        pub fn check(&self) -> Result<()> {
            if self.nprobe == 0 {
                bail!(InvalidArgument, "nprobe must be >= 1");
            }
            if !(self.reach.is_finite() && self.reach >= 0.0) {
                bail!(
                    InvalidArgument,
                    "reach is {}; it must be finite and >= 0 (0 = fixed nprobe)",
                    self.reach
                );
            }
            Ok(())
        }

        /// Fixed list selection: the `nprobe` best lists (`reach = 0`).
        pub fn fixed(nprobe: u32, rerank: u32) -> Self {
            SearchParams {
                nprobe,
                rerank,
                reach: 0.0,
                refine: DEFAULT_REFINE,
            }
        }
    }
}

/// The FGD graph's build and query parameters (re-exported by
/// [`crate::graph`]).
pub mod graph {
    /// The graph's own (transformed) rows are kept in the one
    /// [`Storage`](crate::source::Storage): `F32`, `Bf16` (half the bytes)
    /// or `I8` (one f32 scale per row, `max |x| / 127`); the graph refuses
    /// `BorrowedF32` (its rows are transformed, never the caller's) and
    /// `F16`.
    pub use crate::source::Storage;

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
}

/// The hashing forest's build and query parameters (re-exported by
/// [`crate::forest`]).
pub mod forest {
    /// Build parameters.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ForestParams {
        /// L, the number of trees (1..=4096).
        pub trees: u32,
        /// B: a node with at least this many classes is split (>= 2).
        pub leaf_size: u32,
        pub seed: u64,
        /// Build threads (0: every core); the result does not depend on it.
        pub threads: u32,
        /// Build the trees over the unit rows `w / |w|` (module docs; the
        /// default): splits by direction only, so trees stay balanced when
        /// row norms spread. `false` splits the rows themselves.
        pub normalize_rows: bool,
    }

    impl Default for ForestParams {
        fn default() -> Self {
            ForestParams {
                trees: 8,
                leaf_size: 64,
                seed: 1,
                threads: 0,
                normalize_rows: true,
            }
        }
    }

    /// The forest family's query options.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct ForestQuery {
        /// The set size `Q` of a sample's candidates (at least `k` is used).
        pub set_size: u32,
        /// HF-A's confidence threshold `τcp` in [0, 1]: each sample keeps
        /// the fewest of its `Q` classes, by logit, whose softmax mass
        /// within the set reaches it (at least `k`); 0 (default) keeps all.
        pub confidence: f32,
    }

    impl Default for ForestQuery {
        fn default() -> Self {
            ForestQuery {
                set_size: 256,
                confidence: 0.0,
            }
        }
    }
}

/// The LSH tables' gather options and result (re-exported by
/// [`crate::tables`]).
pub mod lsh {
    /// Options of a gather (see [`Tables::gather_isa`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct GatherParams {
        /// Keep ids hit by at least this many tables (0 and 1: all).
        pub min_count: u32,
        /// Budget of distinct ids per query (0: none).
        pub max_candidates: u32,
        /// Extra buckets per table (SimHash codes only; needs projections).
        pub probes: u32,
        /// K of the SimHash codes, needed when `probes > 0`.
        pub bits_per_table: u32,
    }

    impl Default for GatherParams {
        fn default() -> Self {
            GatherParams {
                min_count: 1,
                max_candidates: 0,
                probes: 0,
                bits_per_table: 0,
            }
        }
    }

    /// Output of a gather: CSR ids/offsets, and counts parallel to ids when asked.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct GatherResult {
        pub ids: Vec<u32>,
        pub offsets: Vec<usize>,
        pub counts: Vec<u32>,
    }
}
