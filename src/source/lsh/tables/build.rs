//! Building and updating the tables: the counting sort of a table from
//! its row-to-bucket map, the `bucket_cap` reservoir, the incremental
//! splice of [`Tables::update`], and freezing (dropping the row-to-bucket
//! map) and unfreezing.

use crate::bail;
use crate::error::{checked_mul, try_vec, Error, Result, Status};
use crate::rng::SplitMix64;

use super::{bucket_stream_seed, fold_code, Csr, Tables, MAX_RANGE_BITS, MAX_ROWS};

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
}
