//! The top-k of several shards' top-k lists ([`topk_merge`]): a layer too
//! wide for one index is split into shards of consecutive rows, each shard
//! answers the same queries with its own ids, and the merge gives each
//! query the top `k` over all shards, ranked as one index over all rows
//! ranks ([`super::topk`]'s order).

use crate::bail;
use crate::error::{checked_mul, Result};

use super::topk::{topk_drain, TOP};
use super::TOPK_PAD_ID;

/// One shard's answers to the `nq` queries of a merge: `k` entries per
/// query (query `i`'s at `i * k`), ids local to the shard (padding
/// [`TOPK_PAD_ID`], skipped), and the shard's first global row.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardTopK<'a> {
    pub ids: &'a [u32],
    pub scores: &'a [f32],
    pub k: usize,
    pub first_row: u32,
}

/// Per query `i < nq`, the `k` best entries over every shard's list into
/// `out_ids[i*k ..]` / `out_scores[i*k ..]`: global id = the shard's
/// `first_row` + its local id; largest score first, equal scores by the
/// smaller global id (`-0.0` ties with `0.0`), NaN never selected, padded
/// with [`TOPK_PAD_ID`] / `-inf` when the shards hold fewer than `k` real
/// entries. Shards hold disjoint rows (a global id given twice is two
/// entries). With every shard's list its exact top-`k_s >= k`, this is the
/// exact top-k of the whole layer, ids and scores, as one index over all
/// rows answers it.
///
/// Errors, before anything is written: `BufferTooSmall` (a shard's ids or
/// scores shorter than `nq * k_s`, an output shorter than `nq * k`),
/// `IndexOutOfRange` (a real entry whose global id would reach
/// `u32::MAX`, the padding id), `SizeOverflow`.
pub fn topk_merge(
    shards: &[ShardTopK<'_>],
    nq: usize,
    k: usize,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) -> Result<()> {
    let need = checked_mul(nq, k, "nq * k")?;
    if out_ids.len() < need || out_scores.len() < need {
        bail!(
            BufferTooSmall,
            "outputs hold {} ids and {} scores, nq * k = {need} needed",
            out_ids.len(),
            out_scores.len()
        );
    }
    for (s, p) in shards.iter().enumerate() {
        let n = checked_mul(nq, p.k, "nq * shard k")?;
        if p.ids.len() < n || p.scores.len() < n {
            bail!(
                BufferTooSmall,
                "shard {s} holds {} ids and {} scores, nq * k = {n} needed",
                p.ids.len(),
                p.scores.len()
            );
        }
        let limit = TOPK_PAD_ID - p.first_row;
        if let Some(j) = p.ids[..n]
            .iter()
            .position(|&id| id != TOPK_PAD_ID && id >= limit)
        {
            bail!(
                IndexOutOfRange,
                "shard {s}: id {} + first_row {} reaches {TOPK_PAD_ID} (entry {j})",
                p.ids[j],
                p.first_row
            );
        }
    }
    if k == 0 {
        return Ok(());
    }
    TOP.with(|cell| {
        let top = &mut *cell.borrow_mut();
        for i in 0..nq {
            top.clear();
            for p in shards {
                let r = i * p.k..(i + 1) * p.k;
                for (&id, &s) in p.ids[r.clone()].iter().zip(&p.scores[r]) {
                    if id != TOPK_PAD_ID {
                        top.offer(s, p.first_row + id, k);
                    }
                }
            }
            topk_drain(
                top,
                k,
                &mut out_ids[i * k..(i + 1) * k],
                &mut out_scores[i * k..(i + 1) * k],
            );
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_with_offsets_ties_and_padding() {
        let a_ids = [0, 2, TOPK_PAD_ID, 1, 0, TOPK_PAD_ID];
        let a_sc = [3.0, 1.0, f32::NEG_INFINITY, 5.0, -0.0, f32::NEG_INFINITY];
        let b_ids = [1, 0, 0, TOPK_PAD_ID];
        let b_sc = [3.0, f32::NAN, 0.0, f32::NEG_INFINITY];
        let shards = [
            ShardTopK {
                ids: &a_ids,
                scores: &a_sc,
                k: 3,
                first_row: 0,
            },
            ShardTopK {
                ids: &b_ids,
                scores: &b_sc,
                k: 2,
                first_row: 10,
            },
        ];
        let (mut oi, mut os) = ([0u32; 8], [0f32; 8]);
        topk_merge(&shards, 2, 4, &mut oi, &mut os).unwrap();
        // Query 0: 3.0 at 0 and 11 (tie: smaller id first), then 1.0; NaN
        // never selected; padded.
        assert_eq!(&oi[..4], &[0, 11, 2, TOPK_PAD_ID]);
        assert_eq!(&os[..3], &[3.0, 3.0, 1.0]);
        assert_eq!(os[3], f32::NEG_INFINITY);
        // Query 1: 5.0 at 1, then -0.0 at 0 ties 0.0 at 10 by id.
        assert_eq!(&oi[4..7], &[1, 0, 10]);
        assert_eq!(os[5].to_bits(), (-0.0f32).to_bits());
        assert_eq!(oi[7], TOPK_PAD_ID);
    }

    #[test]
    fn bad_inputs_are_refused_before_writing() {
        let ids = [u32::MAX - 5];
        let sc = [1.0];
        let (mut oi, mut os) = ([7u32; 2], [7f32; 2]);
        let s = [ShardTopK {
            ids: &ids,
            scores: &sc,
            k: 1,
            first_row: 5,
        }];
        let e = topk_merge(&s, 1, 2, &mut oi, &mut os).unwrap_err();
        assert_eq!(e.status, crate::Status::IndexOutOfRange);
        let s = [ShardTopK {
            ids: &ids,
            scores: &sc,
            k: 2,
            first_row: 0,
        }];
        let e = topk_merge(&s, 1, 2, &mut oi, &mut os).unwrap_err();
        assert_eq!(e.status, crate::Status::BufferTooSmall);
        let s = [ShardTopK {
            ids: &ids,
            scores: &sc,
            k: 1,
            first_row: 0,
        }];
        let e = topk_merge(&s, 1, 3, &mut oi, &mut os).unwrap_err();
        assert_eq!(e.status, crate::Status::BufferTooSmall);
        assert_eq!((oi, os), ([7; 2], [7.0; 2]));
    }
}
