//! Label-aware buckets (HALOS): the model's training data decide what each
//! bucket holds.
//!
//! Training data are `n` queries with their labels as CSR
//! (`label_offsets`, `n + 1` non-decreasing entries, and `labels`, row ids
//! of the output layer; query `i` has the labels
//! `labels[label_offsets[i] .. label_offsets[i + 1]]`, several labels per
//! query being the normal case). Each query is hashed with the index's own
//! family (after the index's query transform), giving one bucket per table
//! (`fold_code(code, range_bits)`, see [`crate::tables::fold_code`]).
//!
//! **Counting** ([`count_labels`]): for every table `t` and bucket `b`, the
//! number of (query, label) pairs whose query falls in bucket `b` of table
//! `t`, per label (a label listed twice for one query counts twice). Per
//! bucket the `label_cap` most frequent labels are kept (count descending,
//! ties to the smaller id; `label_cap = 0` keeps every label). The result is
//! exact and deterministic (it does not depend on the thread count): per
//! table the `(bucket << 32 | label)` keys are sorted and run-length
//! counted; tables are spread over threads.
//!
//! **Policy** ([`LabelPolicy`]): `Beside` makes a bucket the union of the
//! rows hashed there and its top labels; `Instead` keeps only the top
//! labels. Ids stay ascending and distinct within a bucket; a row may now
//! sit in several buckets of a table, or in none.
//!
//! [`Index::train_labels`] validates everything, hashes the queries, counts,
//! and replaces the index's tables in place (the tables object keeps its
//! address, so a borrowed tables handle of the C API stays valid and sees
//! the new buckets). An index is trained at most once (a second call is
//! `InvalidArgument`: the plain buckets are no longer known); build or load
//! an untrained index to train again.
//!
//! **File**: a trained index saves an additional `LABELS` section (32
//! bytes, little-endian: `0 u32 version (1)`, `4 u32 label_cap`,
//! `8 u32 policy`, `12 u32 reserved (0)`, `16 u64 training queries`,
//! `24 u64 training pairs`) besides its tables; files without it load as
//! untrained indexes. A reader that does not know the section refuses a
//! trained file (its tables fail the one-bucket-per-row check) instead of
//! misreading it.

use crate::bail;
use crate::error::{checked_mul, try_vec, Error, Result, Status};
use crate::index::Index;
use crate::tables::{fold_code, GatherParams, GatherResult, Tables};

/// What a trained bucket holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum LabelPolicy {
    /// The rows hashed to the bucket and its top labels.
    Beside = 0,
    /// Only its top labels.
    Instead = 1,
}

impl LabelPolicy {
    pub fn from_u32(v: u32) -> Option<LabelPolicy> {
        [LabelPolicy::Beside, LabelPolicy::Instead]
            .get(v as usize)
            .copied()
    }
}

/// Parameters of [`Index::train_labels`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelParams {
    /// Labels kept per bucket (0: all). Default 64.
    pub label_cap: u32,
    /// Default [`LabelPolicy::Beside`].
    pub policy: LabelPolicy,
}

impl Default for LabelParams {
    fn default() -> Self {
        LabelParams {
            label_cap: 64,
            policy: LabelPolicy::Beside,
        }
    }
}

/// What an index remembers of its label training (saved with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelState {
    pub params: LabelParams,
    /// Training queries.
    pub queries: u64,
    /// Training (query, label) pairs.
    pub pairs: u64,
}

/// Length of the `LABELS` section.
pub const LABELS_RECORD_LEN: usize = 32;
/// Version of the `LABELS` section.
pub const LABELS_VERSION: u32 = 1;

impl LabelState {
    /// The `LABELS` section (module documentation).
    pub fn record(&self) -> Vec<u8> {
        let mut r = Vec::with_capacity(LABELS_RECORD_LEN);
        r.extend_from_slice(&LABELS_VERSION.to_le_bytes());
        r.extend_from_slice(&self.params.label_cap.to_le_bytes());
        r.extend_from_slice(&(self.params.policy as u32).to_le_bytes());
        r.extend_from_slice(&0u32.to_le_bytes());
        r.extend_from_slice(&self.queries.to_le_bytes());
        r.extend_from_slice(&self.pairs.to_le_bytes());
        r
    }

    /// Parses a `LABELS` section; the error is a message for BadFileFormat.
    pub fn parse(rec: &[u8]) -> std::result::Result<LabelState, String> {
        if rec.len() < 4 {
            return Err(format!("LABELS section is {} bytes", rec.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(rec[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(rec[o..o + 8].try_into().unwrap());
        let v = u32_at(0);
        if v != LABELS_VERSION {
            return Err(format!(
                "LABELS version {v} is unknown to this library (knows {LABELS_VERSION})"
            ));
        }
        if rec.len() != LABELS_RECORD_LEN {
            return Err(format!(
                "LABELS section is {} bytes, {LABELS_RECORD_LEN} expected",
                rec.len()
            ));
        }
        let policy = LabelPolicy::from_u32(u32_at(8))
            .ok_or_else(|| format!("LABELS: unknown policy {}", u32_at(8)))?;
        if u32_at(12) != 0 {
            return Err("LABELS: reserved field is not zero".into());
        }
        Ok(LabelState {
            params: LabelParams {
                label_cap: u32_at(4),
                policy,
            },
            queries: u64_at(16),
            pairs: u64_at(24),
        })
    }
}

/// Top labels of every bucket of one table: CSR over the `2^range_bits`
/// buckets, labels ascending within a bucket, `counts` parallel to
/// `labels` (pairs seen).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketLabels {
    pub offsets: Vec<u32>,
    pub labels: Vec<u32>,
    pub counts: Vec<u32>,
}

impl BucketLabels {
    /// (labels, counts) of bucket `b`.
    pub fn bucket(&self, b: usize) -> (&[u32], &[u32]) {
        let (s, e) = (self.offsets[b] as usize, self.offsets[b + 1] as usize);
        (&self.labels[s..e], &self.counts[s..e])
    }
}

/// Checks CSR labels for `n` queries over `rows` rows: `label_offsets`
/// holds at least `n + 1` non-decreasing entries, `labels` at least
/// `label_offsets[n]`, and every used label is `< rows`
/// (`IndexOutOfRange` naming its position).
pub fn check_labels(n: usize, rows: usize, label_offsets: &[usize], labels: &[u32]) -> Result<()> {
    check_label_csr(
        n,
        rows,
        label_offsets,
        labels,
        false,
        Status::IndexOutOfRange,
    )
}

/// The one label-CSR check (behind [`check_labels`] and IUL's
/// validation): `n + 1` non-decreasing offsets (starting at 0 when
/// `from_zero`), enough labels, every used label `< rows` (else
/// `out_of_range`).
pub(crate) fn check_label_csr(
    n: usize,
    rows: usize,
    label_offsets: &[usize],
    labels: &[u32],
    from_zero: bool,
    out_of_range: Status,
) -> Result<()> {
    if label_offsets.len() < n + 1 {
        bail!(
            BufferTooSmall,
            "label_offsets holds {} values, n + 1 = {} needed",
            label_offsets.len(),
            n + 1
        );
    }
    let off = &label_offsets[..n + 1];
    if from_zero && off[0] != 0 {
        bail!(
            InvalidArgument,
            "label_offsets[0] is {}; it must be 0",
            off[0]
        );
    }
    if let Some(i) = off.windows(2).position(|w| w[1] < w[0]) {
        bail!(
            InvalidArgument,
            "label_offsets decreases at {}: {} < {}",
            i + 1,
            off[i + 1],
            off[i]
        );
    }
    if off[n] > labels.len() {
        bail!(
            BufferTooSmall,
            "label_offsets[n] = {} but labels holds {} values",
            off[n],
            labels.len()
        );
    }
    let used = &labels[off[0]..off[n]];
    if let Some(j) = used.iter().position(|&y| y as usize >= rows) {
        return Err(Error::new(
            out_of_range,
            format!(
                "labels[{}] = {} but the layer has {rows} rows",
                off[0] + j,
                used[j]
            ),
        ));
    }
    Ok(())
}

fn threads_for(threads: u32, jobs: usize) -> usize {
    crate::par::threads(threads as usize).clamp(1, jobs.max(1))
}

/// Counts and caps the labels of every bucket (module documentation).
/// `codes` are the queries' raw codes, `n x L` row-major; the labels must
/// already be valid ([`check_labels`]; labels are not range-checked here).
/// `threads = 0` uses every core.
#[allow(clippy::too_many_arguments)]
pub fn count_labels(
    codes: &[u32],
    n: usize,
    l: usize,
    range_bits: u32,
    label_offsets: &[usize],
    labels: &[u32],
    label_cap: u32,
    threads: u32,
) -> Result<Vec<BucketLabels>> {
    if l == 0 {
        bail!(InvalidArgument, "L must be >= 1");
    }
    if range_bits == 0 || range_bits > crate::tables::MAX_RANGE_BITS {
        bail!(InvalidArgument, "range_bits {range_bits} is outside 1..=24");
    }
    if codes.len() != checked_mul(n, l, "n*L")? {
        bail!(
            InvalidArgument,
            "codes holds {} values, n*L = {} expected",
            codes.len(),
            n * l
        );
    }
    if label_offsets.len() < n + 1 || label_offsets[n] > labels.len() {
        bail!(InvalidArgument, "label_offsets / labels do not match n");
    }
    let pairs = label_offsets[n] - label_offsets[0];
    if pairs > u32::MAX as usize {
        bail!(
            SizeOverflow,
            "{pairs} training pairs; at most 2^32 - 1 are counted"
        );
    }
    let mut out: Vec<BucketLabels> = (0..l).map(|_| BucketLabels::default()).collect();
    let nthreads = threads_for(threads, l);
    let per = l.div_ceil(nthreads);
    let mut keys_per_thread = Vec::with_capacity(nthreads);
    for _ in 0..nthreads {
        keys_per_thread.push(try_vec::<u64>(pairs, "label count keys")?);
    }
    let run = |t0: usize, chunk: &mut [BucketLabels], keys: &mut Vec<u64>| {
        let mut tmp: Vec<(u32, u32)> = Vec::new();
        for (j, bl) in chunk.iter_mut().enumerate() {
            count_table(
                codes,
                n,
                l,
                t0 + j,
                range_bits,
                label_offsets,
                labels,
                label_cap,
                keys,
                &mut tmp,
                bl,
            );
        }
    };
    if nthreads == 1 {
        run(0, &mut out, &mut keys_per_thread[0]);
    } else {
        crate::par::map(
            out.chunks_mut(per).enumerate().zip(&mut keys_per_thread),
            |((ci, chunk), keys)| run(ci * per, chunk, keys),
        );
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn count_table(
    codes: &[u32],
    n: usize,
    l: usize,
    t: usize,
    range_bits: u32,
    label_offsets: &[usize],
    labels: &[u32],
    label_cap: u32,
    keys: &mut [u64],
    tmp: &mut Vec<(u32, u32)>,
    out: &mut BucketLabels,
) {
    let nb = 1usize << range_bits;
    let mut k = 0;
    for i in 0..n {
        let b = fold_code(codes[i * l + t], range_bits) as u64;
        for &y in &labels[label_offsets[i]..label_offsets[i + 1]] {
            keys[k] = (b << 32) | y as u64;
            k += 1;
        }
    }
    let keys = &mut keys[..k];
    keys.sort_unstable();
    out.offsets.clear();
    out.labels.clear();
    out.counts.clear();
    out.offsets.resize(nb + 1, 0);
    let cap = if label_cap == 0 {
        usize::MAX
    } else {
        label_cap as usize
    };
    let mut i = 0;
    let mut next_bucket = 0usize; // buckets < next_bucket have their offsets
    while i < keys.len() {
        let b = (keys[i] >> 32) as usize;
        for o in &mut out.offsets[next_bucket..=b] {
            *o = out.labels.len() as u32;
        }
        next_bucket = b + 1;
        // The runs of bucket b.
        tmp.clear();
        while i < keys.len() && (keys[i] >> 32) as usize == b {
            let key = keys[i];
            let mut j = i + 1;
            while j < keys.len() && keys[j] == key {
                j += 1;
            }
            tmp.push((key as u32, (j - i) as u32));
            i = j;
        }
        if tmp.len() > cap {
            // Count descending, ties to the smaller label; then ascending ids.
            tmp.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            tmp.truncate(cap);
            tmp.sort_unstable_by_key(|a| a.0);
        }
        for &(y, c) in tmp.iter() {
            out.labels.push(y);
            out.counts.push(c);
        }
    }
    for o in &mut out.offsets[next_bucket..] {
        *o = out.labels.len() as u32;
    }
}

/// Standalone tables with label entries (the C `lshk_tables_add_labels`):
/// counts the labels of `n` training queries whose per-table codes are
/// `codes` (`n x L`, hashed with the family that built `plain`, the same
/// way its rows were), keeps each bucket's `p.label_cap` most frequent
/// labels (ties to the smaller id) and merges them by `p.policy`. The
/// result is frozen: it cannot be updated, nor given labels again.
#[allow(clippy::too_many_arguments)]
pub fn tables_with_labels(
    plain: &Tables,
    codes: &[u32],
    n: usize,
    label_offsets: &[usize],
    labels: &[u32],
    p: &LabelParams,
    threads: u32,
) -> Result<Tables> {
    if plain.is_frozen() {
        bail!(
            InvalidArgument,
            "these tables are frozen (they already carry labels or were loaded): \
             add labels to tables fresh from lshk_tables_build"
        );
    }
    check_labels(n, plain.rows(), label_offsets, labels)?;
    let need = crate::error::checked_mul(n, plain.tables(), "n*L")?;
    if codes.len() < need {
        bail!(
            BufferTooSmall,
            "codes holds {} values, n*L = {need} needed",
            codes.len()
        );
    }
    let lab = count_labels(
        &codes[..need],
        n,
        plain.tables(),
        plain.range_bits(),
        label_offsets,
        labels,
        p.label_cap,
        threads,
    )?;
    merge_tables(plain, &lab, p.policy)
}

/// The tables of `plain` with the label entries of `lab` per `policy`
/// (frozen; every bucket ascending, deduplicated).
pub fn merge_tables(plain: &Tables, lab: &[BucketLabels], policy: LabelPolicy) -> Result<Tables> {
    let (l, nb) = (plain.tables(), plain.num_buckets());
    if lab.len() != l || lab.iter().any(|b| b.offsets.len() != nb + 1) {
        bail!(InvalidArgument, "label buckets do not match the tables");
    }
    let mut offs = Vec::with_capacity(l);
    let mut ids = Vec::with_capacity(l);
    for (t, bl) in lab.iter().enumerate() {
        let (po, pi) = plain.csr(t);
        let total = match policy {
            LabelPolicy::Beside => pi.len() + bl.labels.len(),
            LabelPolicy::Instead => bl.labels.len(),
        };
        if total > u32::MAX as usize {
            bail!(
                SizeOverflow,
                "table {t} would hold {total} ids, more than 2^32 - 1"
            );
        }
        let mut o = try_vec::<u32>(nb + 1, "label table offsets")?;
        let mut v: Vec<u32> = Vec::new();
        v.try_reserve_exact(total).map_err(|_| {
            Error::new(
                Status::AllocationFailed,
                format!("cannot allocate {total} ids for a label-aware table"),
            )
        })?;
        for b in 0..nb {
            o[b] = v.len() as u32;
            let (ys, _) = bl.bucket(b);
            match policy {
                LabelPolicy::Instead => v.extend_from_slice(ys),
                LabelPolicy::Beside => {
                    let rs = &pi[po[b] as usize..po[b + 1] as usize];
                    let (mut i, mut j) = (0, 0);
                    while i < rs.len() && j < ys.len() {
                        let (a, c) = (rs[i], ys[j]);
                        v.push(a.min(c));
                        i += (a <= c) as usize;
                        j += (c <= a) as usize;
                    }
                    v.extend_from_slice(&rs[i..]);
                    v.extend_from_slice(&ys[j..]);
                }
            }
        }
        o[nb] = v.len() as u32;
        offs.push(o);
        ids.push(v);
    }
    Tables::from_parts_multi(
        plain.rows(),
        plain.range_bits(),
        plain.bucket_cap(),
        plain.seed(),
        0,
        offs,
        ids,
    )
}

/// Queries hashed per block in [`Index::query_codes`].
const CODE_BLOCK: usize = 1024;

impl Index {
    /// The codes (`n x L`, row-major, unfolded) the index's family gives
    /// the `n` queries (`q` row `i` at `i * q_stride`), after the index's
    /// query transform: what a query gathers with. Queries must be finite.
    /// Uses every core for large `n`.
    pub fn query_codes(&self, q: &[f32], n: usize, q_stride: usize, out: &mut [u32]) -> Result<()> {
        self.lsh("query_codes")?;
        self.check_queries(q, n, q_stride, "queries")?;
        let nc = checked_mul(n, self.num_tables() as usize, "n * L")?;
        if out.len() < nc {
            bail!(
                BufferTooSmall,
                "codes hold {} values, n * L = {nc} needed",
                out.len()
            );
        }
        if n == 0 {
            return Ok(());
        }
        self.query_codes_unchecked(q, n, q_stride, &mut out[..nc])
    }

    /// `query_codes` after its checks (`n >= 1`, `out` exactly `n * L`):
    /// the index's pipeline ([`Index::hash_queries`]) in blocks of
    /// [`CODE_BLOCK`] queries, on every core for large `n`.
    fn query_codes_unchecked(
        &self,
        q: &[f32],
        n: usize,
        q_stride: usize,
        out: &mut [u32],
    ) -> Result<()> {
        let l = self.num_tables() as usize;
        let work = |i0: usize, c: &mut [u32]| -> Result<()> {
            let m = c.len() / l;
            let mut tq = self.transform_scratch(CODE_BLOCK.min(m))?;
            let mut b0 = 0;
            while b0 < m {
                let b = (m - b0).min(CODE_BLOCK);
                let qb = &q[(i0 + b0) * q_stride..];
                let cb = &mut c[b0 * l..(b0 + b) * l];
                self.hash_queries(qb, b, q_stride, &mut tq, cb, None)?;
                b0 += b;
            }
            Ok(())
        };
        let nthreads = threads_for(0, n.div_ceil(CODE_BLOCK));
        if nthreads == 1 {
            return work(0, out);
        }
        let per = n.div_ceil(nthreads);
        crate::par::try_map(out.chunks_mut(per * l).enumerate(), |(j, c)| {
            work(j * per, c)
        })
        .map(|_| ())
    }

    /// The candidate sets the index's query would score, for `nq` queries:
    /// CSR in `out` (ids ascending per query), exactly as [`Index::query`]
    /// gathers them with `g` (`g.probes > 0` multi-probes a SimHash index;
    /// `g.bits_per_table` 0 or K). Thread-safe.
    pub fn candidates(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        g: &GatherParams,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_queries(q, nq, q_stride, g, None, out)
    }

    /// Adds label-aware entries to the index's buckets from training data
    /// (module documentation): `n` queries (`queries` row `i` at
    /// `i * q_stride`, `q_stride >= dim`, finite) with CSR labels (row ids
    /// `< rows`). Everything is validated before the index changes; on
    /// error it is unchanged. Needs exclusive access: no query (and no use
    /// of the index's tables) may run concurrently. An index is trained at
    /// most once (`InvalidArgument` afterwards). Uses every core.
    pub fn train_labels(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &LabelParams,
    ) -> Result<()> {
        if self.ivf().is_some() {
            let (a, dim) = (self.vmax, self.dim());
            if n > 0 {
                self.check_queries(queries, n, q_stride, "queries")?;
                crate::error::check_query_range(queries, n, dim, q_stride, a, "queries")?;
            }
            let ivf = self.ivf_source_mut("train_labels")?;
            return ivf.train_labels(queries, n, q_stride, label_offsets, labels, p);
        }
        self.lsh("train_labels")?;
        if let Some(s) = &self.labels {
            bail!(
                InvalidArgument,
                "the index is already trained with labels ({} pairs, label_cap {}, {:?}); \
                 build or load an untrained index to train again",
                s.pairs,
                s.params.label_cap,
                s.params.policy
            );
        }
        let l = self.num_tables() as usize;
        self.check_queries(queries, n, q_stride, "queries")?;
        check_labels(n, self.rows(), label_offsets, labels)?;
        let mut codes = try_vec::<u32>(checked_mul(n, l, "n * L")?, "training query codes")?;
        if n > 0 {
            self.query_codes_unchecked(queries, n, q_stride, &mut codes)?;
        }
        let lab = count_labels(
            &codes,
            n,
            l,
            self.range_bits(),
            label_offsets,
            labels,
            p.label_cap,
            0,
        )?;
        drop(codes);
        let merged = merge_tables(&self.lsh("train_labels")?.tables, &lab, p.policy)?;
        // In place: the Box (and a borrowed C handle to it) keeps its address.
        *self.lsh_mut("train_labels")?.tables = merged;
        self.labels = Some(LabelState {
            params: *p,
            queries: n as u64,
            pairs: (label_offsets[n] - label_offsets[0]) as u64,
        });
        Ok(())
    }

    /// The label training of the index (also after a load), if any.
    pub fn label_state(&self) -> Option<LabelState> {
        self.labels
            .or_else(|| self.ivf().and_then(|i| i.label_state()))
    }
}

/// `NonFinite` ("query r coordinate j is v") if a query holds a NaN or an
/// infinity: the check of every query path of an index.
pub(crate) fn check_finite(q: &[f32], n: usize, dim: usize, stride: usize) -> Result<()> {
    crate::error::check_finite_coords(q, n, dim, stride, "query")
}
