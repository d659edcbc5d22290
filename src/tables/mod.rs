//! LSH tables and the bucket gather.
//!
//! # Tables
//! [`Tables`] holds `L` hash tables over `n` rows. Row `i` sits in table
//! `t`'s bucket `fold(codes[i*L + t], range_bits)`; every table has
//! `2^range_bits` buckets (`1 <= range_bits <= 24`).
//!
//! **Folding** ([`fold_code`]): a code that fits (`code < 2^range_bits`) is
//! its own bucket; any other code goes to the top `range_bits` bits of
//! [`mix32`]`(code)`, where `mix32` is the "lowbias32" integer hash
//! (`x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b;
//! x ^= x >> 16`, wrapping 32-bit arithmetic). Frozen: golden values are
//! tested.
//!
//! **Storage**: per table a flat CSR (`2^range_bits + 1` u32 bucket offsets
//! and the ids), ids strictly ascending within a bucket. Besides the CSR the
//! object keeps every row's bucket in every table (`L x n` u32, table-major),
//! which [`Tables::update`] needs to rebuild a table.
//!
//! **`bucket_cap`**: 0 keeps every id. Otherwise a bucket with `c > cap`
//! members keeps a uniform sample of `cap` of them, chosen by reservoir
//! sampling (Algorithm R) over the members in ascending id order
//! `m_0 < m_1 < ... < m_{c-1}`: the reservoir starts as `m_0..m_{cap-1}`;
//! for `i = cap .. c-1`, `j = rng.below(i + 1)` and if `j < cap` the
//! reservoir slot `j` becomes `m_i`; the kept ids are then sorted. The
//! generator of bucket `b` of table `t` is
//! `SplitMix64::new(seed ^ ((t << 32) | b))` (see [`crate::rng`]): it depends
//! only on the seed, the table, the bucket and the bucket's members, so the
//! result is identical for every thread count, and an update followed by a
//! gather equals a rebuild from the new codes.
//!
//! **Threads**: `threads = 0` uses every core (`available_parallelism`);
//! tables are split into contiguous ranges, one per thread
//! (`std::thread::scope`); each table is built by exactly one thread with the
//! same code, so the result does not depend on the thread count.
//!
//! **Updates** need `&mut self`: an update must not run concurrently with
//! queries (exclusive access), so a query never sees a torn state. An
//! update first applies the moves to the row-to-bucket map, then, for each
//! table where some row changed bucket, recomputes only the affected
//! buckets (those losing or gaining a row) and splices them into a fresh
//! copy of the table's CSR: `O(ids + 2^range_bits + moved)` per changed
//! table without `bucket_cap`; with `bucket_cap` one more `O(n)` scan of the
//! table's row-to-bucket map recovers the affected buckets' full membership
//! (the stored sample lacks the dropped ids), which is then resampled with
//! the bucket's own generator. When at least 1/8 of a table's buckets
//! change, the table is instead rebuilt by one counting sort of its
//! row-to-bucket map (`O(n + 2^range_bits)`, cheaper than splicing most
//! buckets). Either way every bucket equals what a fresh build from the
//! updated codes gives. Tables are spread over the build's
//! thread count; the per-thread splice buffers (n ids each) are allocated
//! before anything changes.
//!
//! # Gather
//! See [`Tables::gather_isa`] and [`GatherParams`]. Per query: the union of
//! its buckets (one per table, plus `probes` extra ones per table), ids
//! ascending, deduplicated with a bitmap over the rows plus a summary bitmap
//! over the bitmap's words (one bit per 64 rows), so that extraction costs
//! `O(n / 4096 + candidates)` and yields sorted ids without a sort. Counting
//! modes add a u32 counter per row. The scratch is thread-local, sized for
//! the largest `n` seen on the thread, and kept all-zero between calls, so
//! nothing is allocated per query after warm-up.

use std::any::Any;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::bail;
use crate::error::{checked_mul, try_vec, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::gather as k;
use crate::rng::SplitMix64;

/// Largest `range_bits` accepted.
pub const MAX_RANGE_BITS: u32 = 24;
/// Largest number of rows: ids are u32 and the AVX2/AVX-512 gathers index
/// with signed 32-bit lanes.
pub const MAX_ROWS: usize = i32::MAX as usize;
/// Largest `probes` accepted (extra buckets per table).
pub const MAX_PROBES: u32 = 4096;
/// Flag bit set in a counting-mode counter for forced ids (internal).
pub(crate) const FORCED: u32 = 0x8000_0000;

/// The "lowbias32" 32-bit integer hash (Chris Wellons' hash-prospector),
/// frozen as part of the bucket-folding contract.
#[inline(always)]
pub const fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The bucket of `code` in a table of `2^range_bits` buckets
/// (`1 <= range_bits <= 24`): `code` itself when it is `< 2^range_bits`,
/// else the top `range_bits` bits of `mix32(code)`.
#[inline(always)]
pub const fn fold_code(code: u32, range_bits: u32) -> u32 {
    if code >> range_bits == 0 {
        code
    } else {
        mix32(code) >> (32 - range_bits)
    }
}

/// The generator seed of bucket `b` of table `t` for reservoir sampling.
#[inline]
pub const fn bucket_stream_seed(seed: u64, t: u32, b: u32) -> u64 {
    seed ^ (((t as u64) << 32) | b as u64)
}

/// What keeps viewed table memory alive: e.g. the mapping of an index file
/// ([`crate::index::Index::load`] opens tables without copying them).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// A table's u32 array: owned, or a read-only view of memory that `keep`
/// keeps alive (a mapped file). Reads see a slice either way; changing a
/// viewed array copies it first ([`U32s::to_mut`]).
#[derive(Clone)]
pub(crate) enum U32s {
    Owned(Vec<u32>),
    Viewed {
        ptr: *const u32,
        len: usize,
        _keep: KeepAlive,
    },
}

// SAFETY: a Viewed array is read-only memory owned by `keep` (Send + Sync);
// an Owned one is a Vec.
unsafe impl Send for U32s {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for U32s {}

impl U32s {
    /// A view of `s`, which must stay valid and unchanged while `keep` lives.
    ///
    /// # Safety
    /// `s` is owned (directly or not) by `keep` and never written.
    pub(crate) unsafe fn view(s: &[u32], keep: &KeepAlive) -> U32s {
        U32s::Viewed {
            ptr: s.as_ptr(),
            len: s.len(),
            _keep: Arc::clone(keep),
        }
    }

    /// The array as a Vec to change, copying a viewed one first.
    fn to_mut(&mut self) -> &mut Vec<u32> {
        if let U32s::Viewed { .. } = self {
            *self = U32s::Owned(self.to_vec());
        }
        match self {
            U32s::Owned(v) => v,
            U32s::Viewed { .. } => unreachable!("converted above"),
        }
    }

    /// Bytes held: an owned array's capacity, a viewed one's length (the
    /// mapped pages it occupies).
    fn held_bytes(&self) -> usize {
        match self {
            U32s::Owned(v) => v.capacity() * 4,
            U32s::Viewed { len, .. } => len * 4,
        }
    }

    fn is_view(&self) -> bool {
        matches!(self, U32s::Viewed { .. })
    }
}

impl Default for U32s {
    fn default() -> Self {
        U32s::Owned(Vec::new())
    }
}

impl std::ops::Deref for U32s {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            U32s::Owned(v) => v,
            // SAFETY: ptr/len describe memory `keep` owns and nobody writes
            // (the contract of U32s::view), alive as long as self.
            U32s::Viewed { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl std::fmt::Debug for U32s {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_view() { "view" } else { "owned" };
        write!(f, "U32s({kind}, {} values)", self.len())
    }
}

impl From<Vec<u32>> for U32s {
    fn from(v: Vec<u32>) -> Self {
        U32s::Owned(v)
    }
}

/// One table's CSR.
#[derive(Clone, Debug, Default)]
struct Csr {
    /// `2^range_bits + 1` offsets into `ids`.
    offsets: U32s,
    ids: U32s,
}

/// Per-table statistics (see [`Tables::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TableStats {
    /// Buckets holding at least one id.
    pub nonempty_buckets: u64,
    /// Ids in the largest bucket (after `bucket_cap`).
    pub largest_bucket: u32,
    /// Stored ids / non-empty buckets (0 when the table is empty).
    pub mean_bucket_size: f64,
    /// Ids stored in the table (n unless `bucket_cap` dropped some).
    pub stored_ids: u64,
}

/// L LSH tables over n rows (see the module documentation).
#[derive(Clone, Debug)]
pub struct Tables {
    n: usize,
    l: usize,
    range_bits: u32,
    bucket_cap: u32,
    seed: u64,
    threads: usize,
    /// `row_bucket[t * n + i]`: bucket of row i in table t. Empty once
    /// the tables are frozen ([`Tables::freeze`]).
    row_bucket: Vec<u32>,
    frozen: bool,
    csr: Vec<Csr>,
}

/// Counting sort of one table from its row-to-bucket slice, then the
/// bucket_cap sampling. `cursor` is scratch of `nb` u32.
fn build_table(
    buckets: &[u32],
    nb: usize,
    cap: u32,
    seed: u64,
    t: u32,
    csr: &mut Csr,
    cursor: &mut [u32],
) {
    let n = buckets.len();
    let off = csr.offsets.to_mut();
    debug_assert_eq!(off.len(), nb + 1);
    off.fill(0);
    for &b in buckets {
        off[b as usize + 1] += 1;
    }
    for b in 0..nb {
        off[b + 1] += off[b];
    }
    cursor.copy_from_slice(&off[..nb]);
    // Capacity >= n was reserved at build time and is kept by truncate.
    let ids = csr.ids.to_mut();
    ids.resize(n, 0);
    for (i, &b) in buckets.iter().enumerate() {
        let c = &mut cursor[b as usize];
        ids[*c as usize] = i as u32;
        *c += 1;
    }
    if cap == 0 {
        return;
    }
    let cap = cap as usize;
    let mut w = 0usize;
    let mut res: Vec<u32> = Vec::new();
    for b in 0..nb {
        let (s, e) = (off[b] as usize, off[b + 1] as usize);
        off[b] = w as u32;
        let c = e - s;
        if c <= cap {
            ids.copy_within(s..e, w);
            w += c;
        } else {
            reservoir(&ids[s..e], cap, seed, t, b as u32, &mut res);
            ids[w..w + cap].copy_from_slice(&res);
            w += cap;
        }
    }
    off[nb] = w as u32;
    ids.truncate(w);
}

/// The bucket_cap sample of one bucket's members (ascending in, ascending
/// out): Algorithm R with the bucket's own generator.
fn reservoir(members: &[u32], cap: usize, seed: u64, t: u32, b: u32, res: &mut Vec<u32>) {
    res.clear();
    if members.len() <= cap {
        res.extend_from_slice(members);
        return;
    }
    res.extend_from_slice(&members[..cap]);
    let mut rng = SplitMix64::new(bucket_stream_seed(seed, t, b));
    for (i, &m) in members.iter().enumerate().skip(cap) {
        let j = rng.below(i as u64 + 1) as usize;
        if j < cap {
            res[j] = m;
        }
    }
    res.sort_unstable();
}

/// Incremental update of one table: recomputes the buckets in `aff`
/// (sorted, distinct) from the updated row-to-bucket map `rb` and splices
/// them into a fresh copy of the CSR built in `buf` (which then swaps with
/// the table's ids). With `cap == 0` a bucket's new members are its old
/// ids still mapped to it plus the updated ids `uids` now mapped to it;
/// with a cap the full membership is recovered by one scan of `rb`, since
/// the stored sample lacks the dropped members. Either way the bucket
/// equals what a fresh build gives.
#[allow(clippy::too_many_arguments)]
fn splice_table(
    rb: &[u32],
    csr: &mut Csr,
    aff: &[u32],
    uids: &[u32],
    updated: &[u64],
    cap: u32,
    seed: u64,
    t: u32,
    nb: usize,
    buf: &mut Vec<u32>,
) {
    // New contents of the affected buckets, flat: bucket aff[j] gets
    // flat[starts[j]..starts[j + 1]].
    let mut flat: Vec<u32> = Vec::new();
    let mut starts: Vec<usize> = Vec::with_capacity(aff.len() + 1);
    if cap == 0 {
        // Updated rows by their (new) bucket, ids ascending within one.
        let mut ins: Vec<(u32, u32)> = uids
            .iter()
            .map(|&id| (rb[id as usize], id))
            .filter(|(b, _)| aff.binary_search(b).is_ok())
            .collect();
        ins.sort_unstable();
        let mut k = 0;
        for &b in aff {
            starts.push(flat.len());
            let old =
                &csr.ids[csr.offsets[b as usize] as usize..csr.offsets[b as usize + 1] as usize];
            while k < ins.len() && ins[k].0 < b {
                k += 1;
            }
            let k0 = k;
            while k < ins.len() && ins[k].0 == b {
                k += 1;
            }
            // Merge the old members that stay (not updated, or updated but
            // still here) with the updated rows now here; both ascending.
            let stays =
                |id: u32| updated[id as usize >> 6] >> (id & 63) & 1 == 0 || rb[id as usize] == b;
            let mut oi = old.iter().copied().filter(|&id| stays(id)).peekable();
            let mut ni = ins[k0..k].iter().map(|p| p.1).peekable();
            loop {
                let next = match (oi.peek(), ni.peek()) {
                    (Some(&x), Some(&y)) => {
                        if x < y {
                            oi.next();
                            x
                        } else if y < x {
                            ni.next();
                            y
                        } else {
                            oi.next();
                            ni.next();
                            x
                        }
                    }
                    (Some(&x), None) => {
                        oi.next();
                        x
                    }
                    (None, Some(&y)) => {
                        ni.next();
                        y
                    }
                    (None, None) => break,
                };
                flat.push(next);
            }
        }
    } else {
        let mut is_aff = vec![0u64; nb.div_ceil(64)];
        for &b in aff {
            is_aff[b as usize >> 6] |= 1u64 << (b & 63);
        }
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); aff.len()];
        for (i, &b) in rb.iter().enumerate() {
            if is_aff[b as usize >> 6] >> (b & 63) & 1 == 1 {
                let idx = aff.binary_search(&b).unwrap();
                lists[idx].push(i as u32);
            }
        }
        let mut res = Vec::new();
        for (members, &b) in lists.iter().zip(aff) {
            starts.push(flat.len());
            reservoir(members, cap as usize, seed, t, b, &mut res);
            flat.extend_from_slice(&res);
        }
    }
    starts.push(flat.len());
    // Splice: offsets are rewritten in place, ascending (off[i + 1] is
    // still the old value when bucket i is handled).
    buf.clear();
    let off = csr.offsets.to_mut();
    let mut delta: i64 = 0;
    let mut ai = 0;
    let mut run_start = 0usize; // old offset where the pending copy starts
    for i in 0..nb {
        let (os, oe) = (off[i] as usize, off[i + 1] as usize);
        off[i] = (os as i64 + delta) as u32;
        if ai < aff.len() && aff[ai] as usize == i {
            buf.extend_from_slice(&csr.ids[run_start..os]);
            let c = &flat[starts[ai]..starts[ai + 1]];
            buf.extend_from_slice(c);
            delta += c.len() as i64 - (oe - os) as i64;
            run_start = oe;
            ai += 1;
        }
    }
    let end = off[nb] as usize;
    buf.extend_from_slice(&csr.ids[run_start..end]);
    off[nb] = (end as i64 + delta) as u32;
    std::mem::swap(buf, csr.ids.to_mut());
}

/// [`Tables::update`] splices the changed buckets of a table while fewer
/// than `1 / SPLICE_MAX_FRACTION` of its buckets change; beyond that it
/// rebuilds the table by counting sort from the row-to-bucket map (the same
/// result; measured faster once most buckets change, e.g. 1 % of W1's rows
/// moved in tables of 1,024 buckets: every bucket changes).
const SPLICE_MAX_FRACTION: usize = 8;

/// Runs `run` on the chunks of `per` items of `work`, one thread per chunk
/// ([`crate::par::map`]), each with its own `scratch` entry.
fn par_chunks<W: Send, S: Send>(
    work: &mut [W],
    per: usize,
    scratch: &mut [S],
    run: &(dyn Fn(&mut [W], &mut S) + Sync),
) {
    crate::par::map(
        work.chunks_mut(per).zip(scratch.iter_mut()),
        |(chunk, sc)| run(chunk, sc),
    );
}

impl Tables {
    /// Builds L tables from `codes` (`n x L`, row-major: `codes[i*L + t]` is
    /// row i's code in table t).
    pub fn build(
        codes: &[u32],
        n: usize,
        tables: u32,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
    ) -> Result<Self> {
        if tables == 0 {
            bail!(InvalidArgument, "tables must be >= 1");
        }
        if tables > i32::MAX as u32 {
            bail!(InvalidArgument, "tables is {tables}; at most 2^31 - 1");
        }
        if range_bits == 0 || range_bits > MAX_RANGE_BITS {
            bail!(
                InvalidArgument,
                "range_bits is {range_bits}; it must be in 1..={MAX_RANGE_BITS}"
            );
        }
        if n > MAX_ROWS {
            bail!(InvalidArgument, "n is {n}; at most {MAX_ROWS} rows");
        }
        let l = tables as usize;
        let need = checked_mul(n, l, "n*L")?;
        if codes.len() != need {
            bail!(
                InvalidArgument,
                "codes holds {} values, expected n*L = {need}",
                codes.len()
            );
        }
        let nb = 1usize << range_bits;
        checked_mul(l, nb + 1, "L * (2^range_bits + 1)")?;
        // Offsets, ids and the row-to-bucket map, all u32.
        crate::error::check_fits_memory(
            4 * (l as u128 * (nb as u128 + 1) + 2 * need as u128),
            "the tables",
        )?;
        let row_bucket = try_vec::<u32>(need, "row-to-bucket map")?;
        let mut csr = Vec::new();
        csr.try_reserve_exact(l)
            .map_err(|_| Error::new(Status::AllocationFailed, "cannot allocate the table list"))?;
        for _ in 0..l {
            let offsets = try_vec::<u32>(nb + 1, "bucket offsets")?;
            let mut ids = Vec::new();
            ids.try_reserve_exact(n).map_err(|_| {
                Error::new(
                    Status::AllocationFailed,
                    format!("cannot allocate {n} ids for a table"),
                )
            })?;
            csr.push(Csr {
                offsets: offsets.into(),
                ids: ids.into(),
            });
        }
        let mut t = Tables {
            n,
            l,
            range_bits,
            bucket_cap,
            seed,
            threads: crate::par::threads(threads as usize),
            row_bucket,
            frozen: false,
            csr,
        };
        let all = vec![true; l];
        t.rebuild(Some(codes), &all)?;
        Ok(t)
    }

    /// Rebuilds the tables flagged in `dirty`; with `codes`, first refills
    /// their row-to-bucket maps from the row-major codes.
    fn rebuild(&mut self, codes: Option<&[u32]>, dirty: &[bool]) -> Result<()> {
        let (n, l, nb) = (self.n, self.l, 1usize << self.range_bits);
        let jobs: Vec<usize> = (0..l).filter(|&t| dirty[t]).collect();
        if jobs.is_empty() {
            return Ok(());
        }
        let nthreads = self.threads.clamp(1, jobs.len());
        // Contiguous ranges of the dirty tables, one per thread.
        let per = jobs.len().div_ceil(nthreads);
        let mut cursors = Vec::with_capacity(nthreads);
        for _ in 0..nthreads {
            cursors.push(try_vec::<u32>(nb, "counting-sort scratch")?);
        }
        let (range_bits, cap, seed) = (self.range_bits, self.bucket_cap, self.seed);
        // Hand every table's (row_bucket slice, csr) pair to its thread.
        let mut work: Vec<(usize, &mut [u32], &mut Csr)> = Vec::new();
        let mut rb_iter = self.row_bucket.chunks_mut(n.max(1));
        for (t, c) in self.csr.iter_mut().enumerate() {
            let rb: &mut [u32] = if n == 0 {
                &mut []
            } else {
                rb_iter.next().unwrap()
            };
            if dirty[t] {
                work.push((t, rb, c));
            }
        }
        let run = |chunk: &mut [(usize, &mut [u32], &mut Csr)], cursor: &mut Vec<u32>| {
            if let Some(codes) = codes {
                // Row-major read of the codes, one write stream per table.
                for i in 0..n {
                    let row = &codes[i * l..(i + 1) * l];
                    for (t, rb, _) in chunk.iter_mut() {
                        rb[i] = fold_code(row[*t], range_bits);
                    }
                }
            }
            for (t, rb, c) in chunk.iter_mut() {
                build_table(rb, nb, cap, seed, *t as u32, c, cursor);
            }
        };
        if nthreads == 1 {
            run(&mut work, &mut cursors[0]);
        } else {
            par_chunks(&mut work, per, &mut cursors, &run);
        }
        Ok(())
    }

    /// Moves rows `ids[j]` to the buckets of `new_codes[j*L .. (j+1)*L]`.
    /// When an id appears several times the last occurrence wins. Afterwards
    /// every gather equals one on tables built from the updated codes.
    /// Requires exclusive access (no query may run meanwhile).
    pub fn update(&mut self, ids: &[u32], new_codes: &[u32]) -> Result<()> {
        if self.frozen {
            bail!(
                InvalidArgument,
                "these tables are frozen (no row-to-bucket map): they cannot be updated"
            );
        }
        let (n, l) = (self.n, self.l);
        let need = checked_mul(ids.len(), l, "count*L")?;
        if new_codes.len() != need {
            bail!(
                InvalidArgument,
                "new_codes holds {} values, expected count*L = {need}",
                new_codes.len()
            );
        }
        if let Some(j) = ids.iter().position(|&i| i as usize >= n) {
            bail!(
                IndexOutOfRange,
                "ids[{j}] = {} but the tables hold {n} rows",
                ids[j]
            );
        }
        let nb = 1usize << self.range_bits;
        let nthreads = self.threads.clamp(1, l);
        // Per-thread splice buffers and counting-sort cursors, allocated
        // before anything changes.
        let mut bufs = Vec::with_capacity(nthreads);
        for _ in 0..nthreads {
            let mut v: Vec<u32> = Vec::new();
            v.try_reserve_exact(n).map_err(|_| {
                Error::new(
                    Status::AllocationFailed,
                    format!("cannot allocate {n} ids of update scratch"),
                )
            })?;
            bufs.push((v, try_vec::<u32>(nb, "counting-sort scratch")?));
        }
        // Apply the moves to the row-to-bucket map; remember, per table,
        // the buckets that lose or gain a row.
        let mut affected: Vec<Vec<u32>> = vec![Vec::new(); l];
        for (j, &id) in ids.iter().enumerate() {
            let row = &new_codes[j * l..(j + 1) * l];
            for (t, aff) in affected.iter_mut().enumerate() {
                let b = fold_code(row[t], self.range_bits);
                let slot = &mut self.row_bucket[t * n + id as usize];
                if *slot != b {
                    aff.push(*slot);
                    aff.push(b);
                    *slot = b;
                }
            }
        }
        let mut uids = ids.to_vec();
        uids.sort_unstable();
        uids.dedup();
        // Bitmap of the updated rows: an old member that was not updated
        // keeps its bucket without a look-up in the row-to-bucket map.
        let mut updated = vec![0u64; n.div_ceil(64)];
        for &id in &uids {
            updated[id as usize >> 6] |= 1u64 << (id & 63);
        }
        let updated = &updated[..];
        let (cap, seed) = (self.bucket_cap, self.seed);
        let mut work: Vec<(usize, &[u32], &mut Csr, Vec<u32>)> = Vec::new();
        let rbs = self.row_bucket.chunks(n.max(1));
        for ((t, c), (rb, aff)) in self.csr.iter_mut().enumerate().zip(rbs.zip(affected)) {
            if !aff.is_empty() {
                work.push((t, rb, c, aff));
            }
        }
        if work.is_empty() {
            return Ok(());
        }
        let per = work.len().div_ceil(nthreads);
        let uids = &uids[..];
        let run = |chunk: &mut [(usize, &[u32], &mut Csr, Vec<u32>)],
                   buf: &mut (Vec<u32>, Vec<u32>)| {
            for (t, rb, c, aff) in chunk.iter_mut() {
                aff.sort_unstable();
                aff.dedup();
                if aff.len() * SPLICE_MAX_FRACTION >= nb {
                    // Most buckets change: one counting sort of the table
                    // from its row-to-bucket map (the same result).
                    build_table(rb, nb, cap, seed, *t as u32, c, &mut buf.1);
                } else {
                    splice_table(
                        rb, c, aff, uids, updated, cap, seed, *t as u32, nb, &mut buf.0,
                    );
                }
            }
        };
        if nthreads == 1 || work.len() == 1 {
            run(&mut work, &mut bufs[0]);
        } else {
            par_chunks(&mut work, per, &mut bufs, &run);
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.n
    }
    pub fn tables(&self) -> usize {
        self.l
    }
    pub fn range_bits(&self) -> u32 {
        self.range_bits
    }
    pub fn bucket_cap(&self) -> u32 {
        self.bucket_cap
    }
    pub fn num_buckets(&self) -> usize {
        1 << self.range_bits
    }

    /// The ids of bucket `b` of table `t` (ascending).
    pub fn bucket(&self, t: usize, b: u32) -> &[u32] {
        let c = &self.csr[t];
        &c.ids[c.offsets[b as usize] as usize..c.offsets[b as usize + 1] as usize]
    }

    /// The seed of the `bucket_cap` sampling.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Table `t`'s CSR: `2^range_bits + 1` bucket offsets and the ids.
    pub fn csr(&self, t: usize) -> (&[u32], &[u32]) {
        let c = &self.csr[t];
        (&c.offsets, &c.ids)
    }

    /// The row-to-bucket map, `L x n` table-major (`[t * n + i]`); empty
    /// for frozen tables.
    pub fn row_buckets(&self) -> &[u32] {
        &self.row_bucket
    }

    /// Drops the row-to-bucket map (`L x n` u32, as large as the ids), which
    /// only [`Tables::update`] needs: afterwards `update` is refused
    /// (`InvalidArgument`); gathers are unchanged. Used by the index, whose
    /// tables never change.
    pub fn freeze(&mut self) {
        self.row_bucket = Vec::new();
        self.frozen = true;
    }

    /// Makes frozen tables updatable again without rehashing: refills the
    /// row-to-bucket map from the CSR. Possible only when every row sits in
    /// exactly one bucket of every table (no `bucket_cap`, no label-aware
    /// buckets); otherwise `InvalidArgument` and nothing changes. No-op on
    /// tables that are not frozen.
    pub(crate) fn unfreeze_from_csr(&mut self) -> Result<()> {
        if !self.frozen {
            return Ok(());
        }
        let (n, l) = (self.n, self.l);
        if self.bucket_cap != 0 {
            bail!(
                InvalidArgument,
                "frozen tables with bucket_cap {} lack the dropped rows' buckets",
                self.bucket_cap
            );
        }
        let mut rb = try_vec::<u32>(checked_mul(n, l, "n*L")?, "row-to-bucket map")?;
        let mut seen = vec![0u64; n.div_ceil(64)];
        for (t, c) in self.csr.iter().enumerate() {
            seen.fill(0);
            if c.ids.len() != n {
                bail!(
                    InvalidArgument,
                    "table {t} holds {} ids, not one per row ({n}): label-aware buckets cannot be updated",
                    c.ids.len()
                );
            }
            let map = &mut rb[t * n..(t + 1) * n];
            for (b, w) in c.offsets.windows(2).enumerate() {
                for &i in &c.ids[w[0] as usize..w[1] as usize] {
                    let (wd, bit) = (i as usize >> 6, 1u64 << (i & 63));
                    if seen[wd] & bit != 0 {
                        bail!(
                            InvalidArgument,
                            "table {t} holds row {i} twice: label-aware buckets cannot be updated"
                        );
                    }
                    seen[wd] |= bit;
                    map[i as usize] = b as u32;
                }
            }
        }
        self.row_bucket = rb;
        self.frozen = false;
        Ok(())
    }

    /// Whether every table's arrays are views of memory the tables do not
    /// own (a mapped index file), i.e. nothing was copied.
    pub fn is_viewed(&self) -> bool {
        self.csr
            .iter()
            .all(|c| c.offsets.is_view() && c.ids.is_view())
    }

    /// Whether [`Tables::freeze`] was called.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Reassembles tables from their parts (as [`Tables::csr`] and
    /// [`Tables::row_buckets`] give them, e.g. read back from a file),
    /// checking every invariant a build guarantees; any violation is
    /// `BadFileFormat` naming the table and what is wrong: per table
    /// `offsets` (`2^range_bits + 1` of them) start at 0, never decrease and
    /// end at the table's id count; ids are `< n` and strictly ascending in a
    /// bucket; `row_bucket` entries are `< 2^range_bits`; every stored id
    /// sits in the bucket `row_bucket` gives it; without `bucket_cap` a table
    /// stores exactly `n` ids (each row once), with it no bucket holds more
    /// than `cap`. An empty `row_bucket` (with `n > 0`) gives frozen tables
    /// (see [`Tables::freeze`]); then the bucket of each id cannot be
    /// checked, but each row still appears at most once per table.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n: usize,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
        offsets: Vec<Vec<u32>>,
        ids: Vec<Vec<u32>>,
        row_bucket: Vec<u32>,
    ) -> Result<Self> {
        Self::from_stored_parts(
            n,
            range_bits,
            bucket_cap,
            seed,
            threads,
            offsets.into_iter().map(U32s::from).collect(),
            ids.into_iter().map(U32s::from).collect(),
            row_bucket,
        )
    }

    /// [`Tables::from_parts`] over arrays that may be views of a mapped
    /// file (checked the same way; nothing is copied).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_stored_parts(
        n: usize,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
        offsets: Vec<U32s>,
        ids: Vec<U32s>,
        row_bucket: Vec<u32>,
    ) -> Result<Self> {
        let bad = |m: String| Error::new(Status::BadFileFormat, m);
        let l = check_stored_shape(&offsets, &ids, range_bits).map_err(bad)?;
        if n > MAX_ROWS {
            return Err(bad(format!("tables: {n} rows exceed {MAX_ROWS}")));
        }
        let nb = 1usize << range_bits;
        let frozen = row_bucket.is_empty() && n > 0;
        if !frozen && row_bucket.len() as u128 != (n as u128) * (l as u128) {
            return Err(bad(format!(
                "tables: the row-to-bucket map holds {} entries, n*L = {}",
                row_bucket.len(),
                n as u128 * l as u128
            )));
        }
        if let Some(i) = row_bucket.iter().position(|&b| b as usize >= nb) {
            return Err(bad(format!(
                "tables: row-to-bucket entry {i} is {} but there are {nb} buckets",
                row_bucket[i]
            )));
        }
        for t in 0..l {
            let (off, id) = (&offsets[t], &ids[t]);
            check_table_csr(t, off, id, nb).map_err(bad)?;
            if bucket_cap == 0 && id.len() != n {
                return Err(bad(format!(
                    "table {t}: holds {} ids, but without bucket_cap every one of the {n} rows is stored once",
                    id.len()
                )));
            }
            let rb: &[u32] = if frozen {
                &[]
            } else {
                &row_bucket[t * n..(t + 1) * n]
            };
            let mut seen = vec![0u64; if frozen { n.div_ceil(64) } else { 0 }];
            for b in 0..nb {
                let members = &id[off[b] as usize..off[b + 1] as usize];
                if bucket_cap > 0 && members.len() > bucket_cap as usize {
                    return Err(bad(format!(
                        "table {t}: bucket {b} holds {} ids, more than bucket_cap {bucket_cap}",
                        members.len()
                    )));
                }
                let mut prev: Option<u32> = None;
                for &i in members {
                    if i as usize >= n {
                        return Err(bad(format!(
                            "table {t}: bucket {b} holds id {i}, but there are {n} rows"
                        )));
                    }
                    if prev.is_some_and(|p| p >= i) {
                        return Err(bad(format!(
                            "table {t}: ids of bucket {b} are not strictly ascending"
                        )));
                    }
                    if frozen {
                        let (wd, bit) = (i as usize / 64, 1u64 << (i % 64));
                        if seen[wd] & bit != 0 {
                            return Err(bad(format!(
                                "table {t}: id {i} is stored in more than one bucket"
                            )));
                        }
                        seen[wd] |= bit;
                    } else if rb[i as usize] != b as u32 {
                        return Err(bad(format!(
                            "table {t}: id {i} is stored in bucket {b} but its bucket is {}",
                            rb[i as usize]
                        )));
                    }
                    prev = Some(i);
                }
            }
        }
        let csr = offsets
            .into_iter()
            .zip(ids)
            .map(|(offsets, ids)| Csr { offsets, ids })
            .collect();
        Ok(Tables {
            n,
            l,
            range_bits,
            bucket_cap,
            seed,
            threads: crate::par::threads(threads as usize),
            row_bucket,
            frozen,
            csr,
        })
    }

    /// Reassembles frozen tables whose rows may sit in several buckets of a
    /// table (or in none), as label-aware buckets make them (see
    /// [`crate::labels`]). Checks per table: `2^range_bits + 1` offsets that
    /// start at 0, never decrease and end at the table's id count; ids
    /// `< n` and strictly ascending within a bucket. Violations are
    /// `BadFileFormat` naming the table. `bucket_cap` is only recorded (the
    /// plain part of a bucket was capped when it was built).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts_multi(
        n: usize,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
        offsets: Vec<Vec<u32>>,
        ids: Vec<Vec<u32>>,
    ) -> Result<Self> {
        Self::from_stored_parts_multi(
            n,
            range_bits,
            bucket_cap,
            seed,
            threads,
            offsets.into_iter().map(U32s::from).collect(),
            ids.into_iter().map(U32s::from).collect(),
        )
    }

    /// [`Tables::from_parts_multi`] over arrays that may be views of a
    /// mapped file (checked the same way; nothing is copied).
    pub(crate) fn from_stored_parts_multi(
        n: usize,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
        offsets: Vec<U32s>,
        ids: Vec<U32s>,
    ) -> Result<Self> {
        let bad = |m: String| Error::new(Status::BadFileFormat, m);
        let l = check_stored_shape(&offsets, &ids, range_bits).map_err(bad)?;
        if n == 0 || n > MAX_ROWS {
            return Err(bad(format!("tables: {n} rows (need 1..={MAX_ROWS})")));
        }
        let nb = 1usize << range_bits;
        for t in 0..l {
            let (off, id) = (&offsets[t], &ids[t]);
            check_table_csr(t, off, id, nb).map_err(bad)?;
            for b in 0..nb {
                let members = &id[off[b] as usize..off[b + 1] as usize];
                if let Some(&i) = members.iter().find(|&&i| i as usize >= n) {
                    return Err(bad(format!(
                        "table {t}: bucket {b} holds id {i}, but there are {n} rows"
                    )));
                }
                if members.windows(2).any(|w| w[1] <= w[0]) {
                    return Err(bad(format!(
                        "table {t}: ids of bucket {b} are not strictly ascending"
                    )));
                }
            }
        }
        let csr = offsets
            .into_iter()
            .zip(ids)
            .map(|(offsets, ids)| Csr { offsets, ids })
            .collect();
        Ok(Tables {
            n,
            l,
            range_bits,
            bucket_cap,
            seed,
            threads: crate::par::threads(threads as usize),
            row_bucket: Vec::new(),
            frozen: true,
            csr,
        })
    }

    /// Bytes held by the object (CSR offsets and ids at their capacity, or
    /// their length when they are views of a mapped index file, the
    /// row-to-bucket map, and the struct itself).
    pub fn memory_bytes(&self) -> usize {
        let mut b = std::mem::size_of::<Self>()
            + self.row_bucket.capacity() * 4
            + self.csr.capacity() * std::mem::size_of::<Csr>();
        for c in &self.csr {
            b += c.offsets.held_bytes() + c.ids.held_bytes();
        }
        b
    }

    /// Per-table statistics.
    pub fn stats(&self) -> Vec<TableStats> {
        self.csr
            .iter()
            .map(|c| {
                let mut s = TableStats::default();
                for w in c.offsets.windows(2) {
                    let len = w[1] - w[0];
                    if len > 0 {
                        s.nonempty_buckets += 1;
                        s.largest_bucket = s.largest_bucket.max(len);
                    }
                }
                s.stored_ids = c.ids.len() as u64;
                if s.nonempty_buckets > 0 {
                    s.mean_bucket_size = s.stored_ids as f64 / s.nonempty_buckets as f64;
                }
                s
            })
            .collect()
    }

    /// Candidates for `q` queries on the active tier (see
    /// [`Tables::gather_isa`]).
    pub fn gather(
        &self,
        params: &GatherParams,
        input: &GatherInput<'_>,
        want_counts: bool,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_isa(isa::active(), params, input, want_counts, out)
    }

    /// Candidates for `input.q` queries on one tier, into `out` (cleared
    /// first). For query `i` (codes `input.codes[i*L .. (i+1)*L]`):
    ///
    /// 1. Its forced ids (deduplicated) are marked first.
    /// 2. Tables are visited in order `t = 0 .. L-1`; in table `t` the bucket
    ///    `fold(code_t)` and then `probes` multi-probe buckets (see
    ///    [`probe_masks`]; a probe whose bucket was already visited in this
    ///    table is skipped), each bucket's ids ascending. Each visited id is
    ///    marked and its table-hit count increases by one.
    /// 3. Budget (`max_candidates > 0`): before each id the number of
    ///    distinct ids marked so far (forced ids included) is compared with
    ///    `max_candidates`; once it is reached the visit stops for this
    ///    query. The result is thus the forced ids plus the first
    ///    `max_candidates - |forced|` distinct ids in visiting order.
    /// 4. Output: the marked ids hit by at least `min_count` tables (0 and 1
    ///    mean every marked id), plus every forced id, ascending; with
    ///    `want_counts`, each id's table-hit count (forced ids: their true
    ///    hits, possibly 0). A row is in one bucket per table, so a count
    ///    is at most L.
    pub fn gather_isa(
        &self,
        tier: Isa,
        params: &GatherParams,
        input: &GatherInput<'_>,
        want_counts: bool,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_budget_isa(tier, params, BudgetRule::MidBucket, input, want_counts, out)
    }

    /// [`Tables::gather`] with a budget rule (see [`BudgetRule`]).
    pub fn gather_budget(
        &self,
        params: &GatherParams,
        rule: BudgetRule,
        input: &GatherInput<'_>,
        want_counts: bool,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_budget_isa(isa::active(), params, rule, input, want_counts, out)
    }

    /// [`Tables::gather_isa`] with a budget rule: how `max_candidates`
    /// cuts the union of the buckets (see [`BudgetRule`]; with
    /// [`BudgetRule::MidBucket`] this is `gather_isa`).
    pub fn gather_budget_isa(
        &self,
        tier: Isa,
        params: &GatherParams,
        rule: BudgetRule,
        input: &GatherInput<'_>,
        want_counts: bool,
        out: &mut GatherResult,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_gather(params, input)?;
        out.ids.clear();
        out.counts.clear();
        out.offsets.clear();
        out.offsets.push(0);
        if input.q == 0 {
            return Ok(());
        }
        let kern = k::kernels(tier);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            s.prepare(self.n, want_counts || params.min_count > 1);
            for qi in 0..input.q {
                s.clean = false;
                self.gather_one(kern, &mut s, params, rule, input, qi, want_counts, out);
                s.clean = true;
                out.offsets.push(out.ids.len());
            }
        });
        Ok(())
    }

    fn check_gather(&self, p: &GatherParams, input: &GatherInput<'_>) -> Result<()> {
        let l = self.l;
        let need = checked_mul(input.q, l, "q*L")?;
        if input.codes.len() != need {
            bail!(
                InvalidArgument,
                "codes holds {} values, expected q*L = {need}",
                input.codes.len()
            );
        }
        if p.probes > 0 {
            let kb = p.bits_per_table;
            if kb == 0 || kb > 32 {
                bail!(
                    InvalidArgument,
                    "probes need bits_per_table in 1..=32 (got {kb})"
                );
            }
            let maxp = if kb >= 32 { u32::MAX } else { (1u32 << kb) - 1 };
            if p.probes > MAX_PROBES {
                bail!(
                    InvalidArgument,
                    "probes is {}; at most {MAX_PROBES} per table",
                    p.probes
                );
            }
            if p.probes > maxp {
                bail!(
                    InvalidArgument,
                    "probes is {}, but K = {kb} bits allow at most 2^K - 1 = {maxp}",
                    p.probes
                );
            }
            let np = checked_mul(need, kb as usize, "q*K*L")?;
            match input.projections {
                None => bail!(InvalidArgument, "probes > 0 need the projections"),
                Some(pr) => {
                    if pr.len() < np {
                        bail!(
                            BufferTooSmall,
                            "projections hold {} values, q*K*L = {np} needed",
                            pr.len()
                        );
                    }
                    if let Some(i) = pr[..np].iter().position(|v| !v.is_finite()) {
                        bail!(NonFinite, "projections[{i}] is {}", pr[i]);
                    }
                }
            }
        }
        if let Some(fo) = input.forced_offsets {
            if fo.len() != input.q + 1 {
                bail!(
                    InvalidArgument,
                    "forced_offsets holds {} values, expected q + 1 = {}",
                    fo.len(),
                    input.q + 1
                );
            }
            if fo[0] != 0 {
                bail!(InvalidArgument, "forced_offsets[0] is {}, not 0", fo[0]);
            }
            for i in 0..input.q {
                if fo[i + 1] < fo[i] {
                    bail!(
                        InvalidArgument,
                        "forced_offsets decreases at {}: {} < {}",
                        i + 1,
                        fo[i + 1],
                        fo[i]
                    );
                }
            }
            if fo[input.q] > input.forced_ids.len() {
                bail!(
                    InvalidArgument,
                    "forced_offsets[q] = {} exceeds the {} forced ids",
                    fo[input.q],
                    input.forced_ids.len()
                );
            }
            let used = &input.forced_ids[..fo[input.q]];
            if let Some(j) = used.iter().position(|&i| i as usize >= self.n) {
                bail!(
                    IndexOutOfRange,
                    "forced_ids[{j}] = {} but the tables hold {} rows",
                    used[j],
                    self.n
                );
            }
        } else if !input.forced_ids.is_empty() {
            bail!(InvalidArgument, "forced_ids given without forced_offsets");
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn gather_one(
        &self,
        kern: &k::Kernels,
        s: &mut Scratch,
        p: &GatherParams,
        rule: BudgetRule,
        input: &GatherInput<'_>,
        qi: usize,
        want_counts: bool,
        out: &mut GatherResult,
    ) {
        let l = self.l;
        let counting = want_counts || p.min_count > 1;
        let budget = p.max_candidates as usize;
        let Scratch {
            bits,
            summary,
            cnt,
            forced,
            probe,
            visited,
            heap,
            order,
            ranges,
            pending,
            ..
        } = s;
        // 1. forced ids
        forced.clear();
        if let Some(fo) = input.forced_offsets {
            forced.extend_from_slice(&input.forced_ids[fo[qi]..fo[qi + 1]]);
            forced.sort_unstable();
            forced.dedup();
        }
        for &f in forced.iter() {
            mark_one(bits, summary, f);
            if counting {
                cnt[f as usize] = FORCED;
            }
        }
        let mut distinct = forced.len();
        let codes = &input.codes[qi * l..(qi + 1) * l];
        let kb = p.bits_per_table as usize;
        // The rotated rules' per-query stream and start table.
        let mut stream = match rule {
            BudgetRule::MidBucket => None,
            BudgetRule::MidBucketRotated { seed } | BudgetRule::WholeBuckets { seed } => {
                Some(budget_stream(seed, codes))
            }
        };
        let start = stream.as_mut().map_or(0, |r| r.below(l as u64) as usize);
        // Phase 1: the buckets to visit, in order, as (table, start, end).
        ranges.clear();
        for step in 0..l {
            let t = (start + step) % l;
            let (csr, code) = (&self.csr[t], codes[t]);
            visited.clear();
            visited.push(fold_code(code, self.range_bits));
            if p.probes > 0 {
                let pr = input.projections.unwrap();
                let base = (qi * l + t) * kb;
                probe_masks(&pr[base..base + kb], p.probes, probe, heap, order);
                // Flipping bits below range_bits of a code that fits keeps
                // it fitting, so distinct masks give distinct buckets; only
                // folded codes can collide and need the check.
                let identity = kb as u32 <= self.range_bits && code >> self.range_bits == 0;
                for &m in probe.iter() {
                    let b = fold_code(code ^ m, self.range_bits);
                    if identity || !visited.contains(&b) {
                        visited.push(b);
                    }
                }
            }
            for &b in visited.iter() {
                let (s, e) = (csr.offsets[b as usize], csr.offsets[b as usize + 1]);
                if e > s {
                    ranges.push((t as u32, s, e));
                }
            }
        }
        if let BudgetRule::WholeBuckets { .. } = rule {
            // Phase 2, whole buckets: a table's buckets join the set
            // together, or the visit stops before them.
            let mut j = 0;
            while j < ranges.len() {
                let t = ranges[j].0;
                let mut k = j;
                while k < ranges.len() && ranges[k].0 == t {
                    k += 1;
                }
                pending.clear();
                for &(tt, s, e) in &ranges[j..k] {
                    for &id in &self.csr[tt as usize].ids[s as usize..e as usize] {
                        let (w, m) = ((id >> 6) as usize, 1u64 << (id & 63));
                        if bits[w] & m == 0 {
                            bits[w] |= m;
                            pending.push(id);
                        }
                    }
                }
                if budget > 0 && distinct + pending.len() > budget {
                    for &id in pending.iter() {
                        bits[(id >> 6) as usize] &= !(1u64 << (id & 63));
                    }
                    break;
                }
                for &id in pending.iter() {
                    let w = (id >> 6) as usize;
                    summary[w >> 6] |= 1u64 << (w & 63);
                }
                distinct += pending.len();
                if counting {
                    for &(tt, s, e) in &ranges[j..k] {
                        for &id in &self.csr[tt as usize].ids[s as usize..e as usize] {
                            cnt[id as usize] = cnt[id as usize].wrapping_add(1);
                        }
                    }
                }
                j = k;
            }
            ranges.clear();
        }
        // Phase 2: mark, prefetching the ids of the bucket PREFETCH_AHEAD
        // places ahead (the CSR ids are the DRAM-resident part).
        for j in 0..ranges.len() {
            if let Some(&(t, s, e)) = ranges.get(j + PREFETCH_AHEAD) {
                prefetch_ids(&self.csr[t as usize].ids[s as usize..e as usize]);
            }
            let (t, s, e) = ranges[j];
            let ids = &self.csr[t as usize].ids[s as usize..e as usize];
            if budget > 0 {
                if distinct >= budget {
                    break;
                }
                let rem = budget - distinct;
                if ids.len() > rem {
                    // Id by id until the budget is reached; the rotated
                    // rule starts at a per-query position, cyclically.
                    let o = stream
                        .as_mut()
                        .map_or(0, |r| r.below(ids.len() as u64) as usize);
                    for &id in ids[o..].iter().chain(&ids[..o]) {
                        if distinct >= budget {
                            break;
                        }
                        let new = mark_one(bits, summary, id);
                        if counting {
                            cnt[id as usize] = cnt[id as usize].wrapping_add(1);
                        }
                        distinct += new as usize;
                    }
                    continue;
                }
            }
            // SAFETY: every id stored in the tables is < n, and the
            // scratch was sized for n rows by `prepare`; a bucket's ids
            // are distinct.
            let new = unsafe {
                if counting {
                    (kern.mark_count)(bits, summary, cnt, ids)
                } else {
                    (kern.mark)(bits, summary, ids)
                }
            };
            distinct += new;
        }
        // Room for every marked id plus the decoders' overhang.
        out.ids.reserve(distinct + 128);
        if want_counts {
            out.counts.reserve(distinct + 128);
        }
        let words = self.n.div_ceil(64);
        let sw = words.div_ceil(64);
        // SAFETY: bits holds >= `words` words, summary >= `sw`, cnt >= n
        // counters when counting; only bits of rows < n are set.
        unsafe {
            if counting {
                let min = p.min_count.clamp(1, l as u32 + 1);
                let counts = if want_counts {
                    Some(&mut out.counts)
                } else {
                    None
                };
                (kern.extract_count)(
                    &mut bits[..],
                    &mut summary[..sw],
                    cnt,
                    min,
                    &mut out.ids,
                    counts,
                );
            } else {
                (kern.extract)(&mut bits[..], &mut summary[..sw], &mut out.ids);
            }
        }
    }
}

/// Buckets between the one being marked and the one being prefetched.
const PREFETCH_AHEAD: usize = 3;
/// At most this many cache lines of a bucket are prefetched (the hardware
/// stream prefetcher continues longer buckets).
const PREFETCH_LINES: usize = 4;

/// Prefetches the first cache lines of a bucket's ids.
#[inline(always)]
fn prefetch_ids(ids: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let lines = (ids.len() * 4).div_ceil(64).min(PREFETCH_LINES);
        for i in 0..lines {
            // SAFETY: a prefetch never faults; the address lies inside (or
            // one line past the start of) the slice. SSE is baseline on
            // x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(ids.as_ptr().wrapping_add(i * 16).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ids;
}

/// Marks one id; returns whether it was new.
#[inline(always)]
fn mark_one(bits: &mut [u64], summary: &mut [u64], id: u32) -> bool {
    let w = (id >> 6) as usize;
    let m = 1u64 << (id & 63);
    let old = bits[w];
    bits[w] = old | m;
    summary[w >> 6] |= 1u64 << (w & 63);
    old & m == 0
}

/// The stored tables' shape (`L >= 1` offset and id arrays, range_bits in
/// range): `L`, or the message of a `BadFileFormat` error.
fn check_stored_shape(
    offsets: &[U32s],
    ids: &[U32s],
    range_bits: u32,
) -> std::result::Result<usize, String> {
    let l = offsets.len();
    if l == 0 || ids.len() != l {
        return Err(format!(
            "tables: {l} offset arrays and {} id arrays (need L >= 1 of each)",
            ids.len()
        ));
    }
    if range_bits == 0 || range_bits > MAX_RANGE_BITS {
        return Err(format!(
            "tables: range_bits {range_bits} is outside 1..={MAX_RANGE_BITS}"
        ));
    }
    Ok(l)
}

/// The one CSR check of a stored table `t` (`nb` buckets): `nb + 1`
/// offsets from 0, non-decreasing, the last one the number of ids; or the
/// message of a `BadFileFormat` error.
fn check_table_csr(
    t: usize,
    off: &[u32],
    id: &[u32],
    nb: usize,
) -> std::result::Result<(), String> {
    if off.len() != nb + 1 {
        return Err(format!(
            "table {t}: {} bucket offsets, 2^range_bits + 1 = {} expected",
            off.len(),
            nb + 1
        ));
    }
    if off[0] != 0 {
        return Err(format!("table {t}: the first offset is {}", off[0]));
    }
    if let Some(b) = off.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!(
            "table {t}: bucket offsets decrease at bucket {b} ({} then {})",
            off[b],
            off[b + 1]
        ));
    }
    if off[nb] as usize != id.len() {
        return Err(format!(
            "table {t}: the last offset is {} but the table holds {} ids",
            off[nb],
            id.len()
        ));
    }
    Ok(())
}

/// The first `probes` multi-probe flip masks of one table (query-directed,
/// Lv et al. 2007, for SimHash codes of K = `proj.len()` bits).
///
/// The bits are ranked by `|proj[k]|` ascending (ties: lower bit first),
/// giving `z_0 <= z_1 <= ... <= z_{K-1}` (as f64). A perturbation set is a
/// non-empty set of ranks; its score is `sum of z_r` over its ranks, added in
/// ascending rank order in f64. The probes are the sets in ascending
/// `(score, mask)` order, where `mask = sum of 2^r` over the set's ranks,
/// generated lazily with a heap (shift/expand from `{0}`). The flip mask of
/// a set XORs bit `bit(r)` of the code for every rank `r` in it.
pub fn probe_masks(
    proj: &[f32],
    probes: u32,
    out: &mut Vec<u32>,
    heap: &mut BinaryHeap<Reverse<(u64, u32)>>,
    order: &mut Vec<(f32, u32)>,
) {
    out.clear();
    heap.clear();
    let kb = proj.len();
    if probes == 0 || kb == 0 {
        return;
    }
    order.clear();
    order.extend(proj.iter().enumerate().map(|(i, v)| (v.abs(), i as u32)));
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let score = |mask: u32| -> f64 {
        let mut s = 0.0f64;
        let mut m = mask;
        while m != 0 {
            let r = m.trailing_zeros() as usize;
            m &= m - 1;
            s += order[r].0 as f64;
        }
        s
    };
    // Scores are >= 0, so their f64 bit patterns order like the values.
    heap.push(Reverse((score(1).to_bits(), 1)));
    while let Some(Reverse((_, set))) = heap.pop() {
        let mut flip = 0u32;
        let mut m = set;
        while m != 0 {
            let r = m.trailing_zeros() as usize;
            m &= m - 1;
            flip |= 1 << order[r].1;
        }
        out.push(flip);
        if out.len() == probes as usize {
            break;
        }
        let top = 31 - set.leading_zeros() as usize;
        if top + 1 < kb {
            let next = 1u32 << (top + 1);
            let shifted = (set & !(1u32 << top)) | next;
            let expanded = set | next;
            heap.push(Reverse((score(shifted).to_bits(), shifted)));
            heap.push(Reverse((score(expanded).to_bits(), expanded)));
        }
    }
}

/// How a gather's budget (`GatherParams::max_candidates`, forced ids
/// included; 0 = none) cuts the union of a query's buckets. Every rule
/// visits, per table, the query's bucket and then its multi-probe buckets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetRule {
    /// Tables in order `0 .. L-1`, ids ascending within a bucket, and the
    /// bucket that reaches the budget is cut mid-bucket, keeping its
    /// SMALLEST ids (the rule of [`Tables::gather_isa`]). Over many queries
    /// this favours small ids (measured in docs/training.md).
    #[default]
    MidBucket,
    /// The same cut without the small-id preference: tables are visited
    /// cyclically from a per-query start table `s`, and the bucket that
    /// reaches the budget is read cyclically from a per-query position
    /// `o`: `r = budget_stream(seed, codes)`, `s = r.below(L)`, then, when
    /// a bucket of `c` ids is cut, `o = r.below(c)` (see
    /// [`budget_stream`]). Over seeds, every id of the cut bucket is kept
    /// with the same probability.
    MidBucketRotated { seed: u64 },
    /// The LNS seed's rule: whole buckets, table by table (cyclically from
    /// the start table `s` above), and the visit stops BETWEEN tables: a
    /// table's buckets join the set only if the set (forced ids included)
    /// then holds at most `max_candidates` ids; the first table that would
    /// exceed it ends the visit (later tables are not tried). Never cuts a
    /// bucket, so the set may stay well below the budget.
    WholeBuckets { seed: u64 },
}

/// The per-query stream of the rotated budget rules: `h = seed`, then for
/// each of the query's `L` codes `c` (table order, unfolded) `h =
/// SplitMix64::new(h ^ c).next_u64()`; the stream is `SplitMix64::new(h)`.
/// The same seed and codes always give the same stream (a caller wanting a
/// fresh sample per training step passes a new seed, e.g. the step).
pub fn budget_stream(seed: u64, codes: &[u32]) -> SplitMix64 {
    let mut h = seed;
    for &c in codes {
        h = SplitMix64::new(h ^ c as u64).next_u64();
    }
    SplitMix64::new(h)
}

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

/// Per-call inputs of a gather.
#[derive(Clone, Copy, Debug, Default)]
pub struct GatherInput<'a> {
    /// `q x L` codes.
    pub codes: &'a [u32],
    pub q: usize,
    /// `q x K*L` projections from `SimHash::project` (needed for probes).
    pub projections: Option<&'a [f32]>,
    /// CSR offsets (q + 1) into `forced_ids`, or None.
    pub forced_offsets: Option<&'a [usize]>,
    pub forced_ids: &'a [u32],
}

/// Output of a gather: CSR ids/offsets, and counts parallel to ids when asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatherResult {
    pub ids: Vec<u32>,
    pub offsets: Vec<usize>,
    pub counts: Vec<u32>,
}

/// Thread-local gather scratch; all bitmaps and counters are zero between
/// queries (`clean`), restored after a panic mid-query.
#[derive(Default)]
struct Scratch {
    clean: bool,
    bits: Vec<u64>,
    summary: Vec<u64>,
    cnt: Vec<u32>,
    forced: Vec<u32>,
    probe: Vec<u32>,
    visited: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    order: Vec<(f32, u32)>,
    ranges: Vec<(u32, u32, u32)>,
    pending: Vec<u32>,
}

impl Scratch {
    fn prepare(&mut self, n: usize, counting: bool) {
        if !self.clean {
            self.bits.fill(0);
            self.summary.fill(0);
            self.cnt.fill(0);
            self.clean = true;
        }
        // Extra words so that SIMD tiers may read whole vectors.
        let words = n.div_ceil(64) + 8;
        if self.bits.len() < words {
            self.bits.resize(words, 0);
        }
        let sw = words.div_ceil(64) + 1;
        if self.summary.len() < sw {
            self.summary.resize(sw, 0);
        }
        if counting && self.cnt.len() < n {
            self.cnt.resize(n, 0);
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch { clean: true, ..Default::default() });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_golden_values() {
        // Codes that fit are their own bucket.
        assert_eq!(fold_code(0, 12), 0);
        assert_eq!(fold_code(4095, 12), 4095);
        assert_eq!(fold_code(1, 1), 1);
        // lowbias32 values (frozen).
        assert_eq!(mix32(0), 0);
        assert_eq!(mix32(1), 0x6889_90c0);
        assert_eq!(mix32(0x1234_5678), 0xf5e7_1c96);
        assert_eq!(mix32(0xffff_ffff), 0x6768_824a);
        assert_eq!(fold_code(4096, 12), 0xc87);
        assert_eq!(fold_code(0xffff_ffff, 24), 0x67_6882);
        assert_eq!(fold_code(0xdead_beef, 16), 0xe628);
        assert_eq!(bucket_stream_seed(7, 3, 5), 7 ^ 0x0000_0003_0000_0005);
    }

    #[test]
    fn reservoir_golden() {
        // 10 rows in one bucket, cap 3, seed 1: the kept ids follow
        // Algorithm R with SplitMix64::new(1 ^ 0) (table 0, bucket 0).
        let codes = [0u32; 10];
        let t = Tables::build(&codes, 10, 1, 4, 3, 1, 1).unwrap();
        let mut res = [0u32, 1, 2];
        let mut rng = SplitMix64::new(1);
        for i in 3..10u32 {
            let j = rng.below(i as u64 + 1) as usize;
            if j < 3 {
                res[j] = i;
            }
        }
        res.sort();
        assert_eq!(t.bucket(0, 0), &res[..]);
        assert_eq!(t.bucket(0, 0), GOLDEN_RESERVOIR);
    }

    const GOLDEN_RESERVOIR: &[u32] = &[0, 1, 3];
}
