//! Label-aware buckets (lshk's extension of data-aware LSH; not in the
//! HALOS paper, whose method is IUL): the model's training data decide
//! what each bucket holds.
//!
//! Training data are `n` queries with their labels as CSR
//! (`label_offsets`, `n + 1` non-decreasing entries, and `labels`, row ids
//! of the output layer; query `i` has the labels
//! `labels[label_offsets[i] .. label_offsets[i + 1]]`, several labels per
//! query being the normal case). Each query is hashed with the index's own
//! family (after the index's query transform), giving one bucket per table
//! (`fold_code(code, range_bits)`, see [`crate::source::lsh::tables::fold_code`]).
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
use crate::source::fold_code;

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
    if range_bits == 0 || range_bits > crate::source::MAX_RANGE_BITS {
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
    let nthreads = crate::par::threads_for(threads as usize, l);
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

/// `NonFinite` ("query r coordinate j is v") if a query holds a NaN or an
/// infinity: the check of every query path of an index.
pub(crate) fn check_finite(q: &[f32], n: usize, dim: usize, stride: usize) -> Result<()> {
    crate::error::check_finite_coords(q, n, dim, stride, "query")
}
