//! Label entries of standalone tables: the label-aware buckets
//! ([`crate::source::labels`]) merged into a [`Tables`].

use super::Tables;
use crate::bail;
use crate::error::{try_vec, Error, Result, Status};
use crate::source::labels::{check_labels, count_labels, BucketLabels, LabelParams, LabelPolicy};

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
