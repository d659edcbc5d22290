//! Reassembling tables from stored parts (an index file, owned or mapped)
//! and the checks that every invariant a build guarantees holds.

use crate::error::{Error, Result, Status};

use super::{Csr, Tables, U32s, MAX_RANGE_BITS, MAX_ROWS};

impl Tables {
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
    /// [`crate::source::labels`]). Checks per table: `2^range_bits + 1` offsets that
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
