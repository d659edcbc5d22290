//! The top-k epilogue ([`topk`]).

use std::cell::RefCell;

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, Result};

use super::check_offsets;

/// Padding id of [`topk`] when a query has fewer than k candidates.
pub const TOPK_PAD_ID: u32 = u32::MAX;

/// `a` ranks before `b`: larger score, or equal score and smaller id.
#[inline(always)]
fn better(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

thread_local! {
    static HEAP: RefCell<Vec<(f32, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Min-heap by rank (root = the worst kept entry): restore after the root
/// was replaced.
#[inline]
fn sift_down(h: &mut [(f32, u32)], mut i: usize) {
    let n = h.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            break;
        }
        let r = l + 1;
        let c = if r < n && better(h[l], h[r]) { r } else { l };
        if better(h[i], h[c]) {
            h.swap(i, c);
            i = c;
        } else {
            break;
        }
    }
}

#[inline]
fn sift_up(h: &mut [(f32, u32)], mut i: usize) {
    while i > 0 {
        let p = (i - 1) / 2;
        if better(h[p], h[i]) {
            h.swap(p, i);
            i = p;
        } else {
            break;
        }
    }
}

pub(crate) fn topk_segment(
    scores: &[f32],
    ids: Option<&[u32]>,
    k: usize,
    heap: &mut Vec<(f32, u32)>,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) {
    heap.clear();
    match ids {
        Some(ids) => topk_offer(scores, |j| ids[j], k, heap),
        None => topk_offer(scores, |j| j as u32, k, heap),
    }
    topk_drain(heap, out_ids, out_scores);
}

/// Offers `scores[j]` with id `id_of(j)`, for every `j`, to the running
/// top-`k` in `heap` (a min-heap by rank, root = the worst kept entry; empty
/// at the start of a stream). Offering a stream in pieces and then calling
/// [`topk_drain`] gives exactly [`topk_segment`] of the whole stream: the
/// `k` best by (score descending, id ascending), NaN never kept.
#[inline]
pub(crate) fn topk_offer(
    scores: &[f32],
    id_of: impl Fn(usize) -> u32,
    k: usize,
    heap: &mut Vec<(f32, u32)>,
) {
    let n = scores.len();
    let mut j = 0;
    // Fill: the first k non-NaN candidates.
    while j < n && heap.len() < k {
        let s = scores[j];
        if !s.is_nan() {
            heap.push((s, id_of(j)));
            let last = heap.len() - 1;
            sift_up(heap, last);
        }
        j += 1;
    }
    if heap.len() == k && k > 0 {
        let consider = |j: usize, heap: &mut Vec<(f32, u32)>| {
            let c = (scores[j], id_of(j));
            if better(c, heap[0]) {
                heap[0] = c;
                sift_down(heap, 0);
            }
        };
        // Scan 8 at a time: only lanes >= the current k-th score (NaN
        // compares false) can enter, ties are settled by id in `consider`.
        let mut thr = f32x8::splat(heap[0].0);
        while j + 8 <= n {
            let v = f32x8::from(<[f32; 8]>::try_from(&scores[j..j + 8]).unwrap());
            let mut m = v.simd_ge(thr).to_bitmask();
            if m != 0 {
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    consider(j + l, heap);
                    m &= m - 1;
                }
                thr = f32x8::splat(heap[0].0);
            }
            j += 8;
        }
        while j < n {
            if scores[j] >= heap[0].0 {
                consider(j, heap);
            }
            j += 1;
        }
    }
}

/// Ends a stream of [`topk_offer`]: the kept entries best first into
/// `out_ids` / `out_scores` (as many as they hold), padded with
/// [`TOPK_PAD_ID`] / `-inf`. Leaves `heap` sorted (no longer a heap).
pub(crate) fn topk_drain(heap: &mut [(f32, u32)], out_ids: &mut [u32], out_scores: &mut [f32]) {
    heap.sort_unstable_by(|a, b| {
        if better(*a, *b) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Greater
        }
    });
    for (t, (oi, os)) in out_ids.iter_mut().zip(out_scores.iter_mut()).enumerate() {
        match heap.get(t) {
            Some(&(s, id)) => {
                *oi = id;
                *os = s;
            }
            None => {
                *oi = TOPK_PAD_ID;
                *os = f32::NEG_INFINITY;
            }
        }
    }
}

/// Per query `i` (segment `offsets[i] .. offsets[i + 1]` of `scores` and
/// `ids`), the `k` best candidates into `out_ids[i*k ..]` / `out_scores[i*k ..]`:
/// largest score first, equal scores by smaller id, NaN never selected,
/// padded with id [`TOPK_PAD_ID`] and score `-inf` when fewer than `k`
/// non-NaN candidates exist. `ids = None` ranks by position in the segment.
/// Duplicate ids are distinct candidates.
pub fn topk(
    scores: &[f32],
    ids: Option<&[u32]>,
    offsets: &[usize],
    k: usize,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) -> Result<()> {
    let nq = offsets.len().saturating_sub(1);
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nq + 1 >= 1 entries");
    }
    check_offsets(offsets, nq, scores.len(), "scores")?;
    if let Some(ids) = ids {
        if ids.len() != scores.len() {
            bail!(
                InvalidArgument,
                "`ids` has {} entries, `scores` {}",
                ids.len(),
                scores.len()
            );
        }
    }
    let need = checked_mul(nq, k, "nq * k")?;
    if out_ids.len() < need || out_scores.len() < need {
        bail!(
            BufferTooSmall,
            "outputs hold {} ids and {} scores, nq * k = {need} needed",
            out_ids.len(),
            out_scores.len()
        );
    }
    if k > u32::MAX as usize {
        bail!(InvalidArgument, "k = {k} is too large");
    }
    HEAP.with(|h| {
        let mut h = h.borrow_mut();
        for i in 0..nq {
            let (s, e) = (offsets[i], offsets[i + 1]);
            topk_segment(
                &scores[s..e],
                ids.map(|v| &v[s..e]),
                k,
                &mut h,
                &mut out_ids[i * k..(i + 1) * k],
                &mut out_scores[i * k..(i + 1) * k],
            );
        }
    });
    Ok(())
}
