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
//! **Threads**: `threads = 0` uses every core (`crate::par::cores`);
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
//!
//! # Files
//! `mod.rs` the type, its storage and accessors; `build.rs` build, update,
//! freeze; `gather.rs` the gather and its options; `probe.rs` the
//! multi-probe order; `parts.rs` reassembly from stored parts (a file) with
//! every check.

mod build;
mod gather;
mod labels;
mod parts;
mod probe;

pub use crate::source::params::lsh::{GatherParams, GatherResult};
pub use gather::{budget_stream, BudgetRule, GatherInput};
pub use labels::{merge_tables, tables_with_labels};
pub use probe::probe_masks;

pub use crate::source::{fold_code, mix32, MAX_RANGE_BITS, MAX_ROWS};
/// Largest `probes` accepted (extra buckets per table).
pub const MAX_PROBES: u32 = 4096;
/// Flag bit set in a counting-mode counter for forced ids (internal).
pub(crate) const FORCED: u32 = 0x8000_0000;

/// The generator seed of bucket `b` of table `t` for reservoir sampling.
#[inline]
pub const fn bucket_stream_seed(seed: u64, t: u32, b: u32) -> u64 {
    seed ^ (((t as u64) << 32) | b as u64)
}

pub use crate::buf::KeepAlive;

/// A table's u32 array: owned, or a read-only view of memory that a
/// [`KeepAlive`] keeps alive (a mapped file); see [`crate::buf::Buf`].
pub(crate) type U32s = crate::buf::Buf<u32>;

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

impl Tables {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

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
