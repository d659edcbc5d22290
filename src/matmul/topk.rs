//! The top-k epilogue ([`topk`]).

use wide::f32x8;

use crate::bail;
use crate::error::{checked_mul, Result};
use crate::kernels::select::set_bits;

use super::check_offsets;
use crate::par::{Spare, Warm};

/// Padding id of [`topk`] when a query has fewer than k candidates.
pub const TOPK_PAD_ID: u32 = u32::MAX;

thread_local! {
    /// The calling thread's top-k buffer ([`topk`], [`super::topk_merge`]).
    pub(super) static TOP: Warm<TopK> = Warm::new(&SPARE_TOP);
}

static SPARE_TOP: Spare<TopK> = Spare::new();

/// A sort key that orders `(score, id)` by score descending, then id
/// ascending, as `f32::total_cmp` orders finite scores (so `-0.0` after
/// `0.0`): the score's bits made monotone and inverted in the high half,
/// the id in the low half, so that selections compare integers.
#[inline(always)]
pub(crate) fn rank_key_total(score: f32, id: u32) -> u64 {
    let b = score.to_bits();
    // Monotone map of the f32 order onto u32 (negatives flipped whole,
    // positives with the sign bit set), then inverted for descending.
    let m = if b >> 31 == 1 { !b } else { b | 0x8000_0000 };
    (u64::from(!m) << 32) | u64::from(id)
}

/// The key of [`TopK`]'s rank order: [`rank_key_total`] with `-0.0` taken
/// as `0.0`, so the two zeros tie (as `==` says) and are settled by id.
/// Scores are never NaN here.
#[inline(always)]
fn rank_key(score: f32, id: u32) -> u64 {
    rank_key_total(if score == 0.0 { 0.0 } else { score }, id)
}

/// One entry of [`TopK`]'s buffer: its rank key ([`rank_key`]: the id is
/// the low half) and its score as offered (the key folds `-0.0` into
/// `0.0`, the output keeps the score's own bits). The key is made once per
/// entry, so the selections compare plain integers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    key: u64,
    score: f32,
}

impl Entry {
    #[inline(always)]
    fn new(score: f32, id: u32) -> Self {
        Entry {
            key: rank_key(score, id),
            score,
        }
    }
    #[inline(always)]
    fn id(&self) -> u32 {
        self.key as u32
    }
}

/// The one running top-`k` of the crate: the best `k` `(score, id)` pairs
/// of a stream offered in pieces, by score descending, equal scores by
/// smaller id (`-0.0` ties with `0.0`), NaN never kept. Every top-k of
/// lshk runs on it: [`topk`], the index's and the IVF lists' selections,
/// their shortlists for re-ranking. Used from outside the crate as
/// [`TopK::offer_run`] / [`TopK::offer`], then [`TopK::best`].
///
/// A buffer of candidates and a threshold, the score of
/// the `k`-th best candidate kept at the last compaction (`-inf` before
/// the first). A score below the threshold can never enter the top `k`,
/// so only scores `>=` it are appended (8 lanes compared at a time); when
/// the buffer reaches `k + max(k, 32)` entries it is cut back to its `k`
/// best by a linear-time selection, and the threshold rises. Each offered
/// score thus costs one vector comparison, and the few that pass an
/// append, instead of a heap sift each (the "amortised top-n" of FAISS's
/// and ScaNN's selection). Ids need not be distinct: equal (score, id)
/// pairs are interchangeable, so the result is the same set whatever the
/// selection's internal order.
pub struct TopK {
    /// Candidates (the best `k` of the stream so far are among them);
    /// unsorted between calls.
    buf: Vec<Entry>,
    /// Scores below this are out (`-inf` until the first compaction; NaN
    /// always fails `>=`).
    thr: f32,
    /// [`topk_segment`]'s sample of a long segment ([`sample_floor`]).
    sample: Vec<f32>,
    /// [`topk_offer_masked`]'s bit masks.
    masks: Vec<u64>,
}

impl Default for TopK {
    fn default() -> Self {
        TopK {
            buf: Vec::new(),
            thr: f32::NEG_INFINITY,
            sample: Vec::new(),
            masks: Vec::new(),
        }
    }
}

/// Scores [`sample_floor`] takes from a long segment.
const SAMPLE: usize = 256;

/// A guess at a score no better than the `k`-th best of `scores` (`n >=
/// 16 * SAMPLE`, `k` well below `n`), from a fixed-stride sample (no
/// randomness: the same scores give the same guess): the sample's
/// `2 k SAMPLE / n + 4`-th best, twice the rank the `k`-th best of the
/// whole would have in the sample plus a margin. `-inf` when the sample
/// is too small for it. [`topk_segment`] only uses the guess to skip
/// scores, and checks it: at least `k` scores must reach it.
fn sample_floor(scores: &[f32], k: usize, sample: &mut Vec<f32>) -> f32 {
    let n = scores.len();
    let step = n / SAMPLE;
    sample.clear();
    sample.extend(
        (0..SAMPLE)
            .map(|i| scores[i * step + step / 2])
            .filter(|v| !v.is_nan()),
    );
    let j = (2 * k * SAMPLE).div_ceil(n) + 4;
    if j >= sample.len() {
        return f32::NEG_INFINITY;
    }
    sample.select_nth_unstable_by(j, |a, b| b.total_cmp(a));
    sample[j]
}

impl TopK {
    /// An empty top-k (no allocation until offered).
    pub fn new() -> TopK {
        TopK::default()
    }

    /// Offers `scores[j]` with id `first_id + j`, for every `j`, to the
    /// running top-`k` (the same `k` for every piece of a stream). Panics if
    /// the ids would pass `u32::MAX`.
    pub fn offer_run(&mut self, scores: &[f32], first_id: u32, k: usize) {
        assert!(
            scores.is_empty() || scores.len() - 1 <= (u32::MAX - first_id) as usize,
            "offer_run: ids {first_id} + {} overflow u32",
            scores.len()
        );
        topk_offer(scores, |j| first_id + j as u32, k, self);
    }

    /// Offers one `(score, id)` to the running top-`k`.
    #[inline]
    pub fn offer(&mut self, score: f32, id: u32, k: usize) {
        topk_offer(std::slice::from_ref(&score), |_| id, k, self);
    }

    /// A score below this can no longer enter: the `k`-th best score kept
    /// at the last compaction (`-inf` before the first), never above the
    /// `k`-th best offered so far.
    pub fn threshold(&self) -> f32 {
        self.thr
    }

    /// The stream's `min(k, offered non-NaN)` best so far, best first
    /// (offered with this `k`). More may be offered afterwards.
    pub fn best(&mut self, k: usize) -> impl ExactSizeIterator<Item = (f32, u32)> + '_ {
        if k > 0 {
            self.compact(k);
        } else {
            self.buf.clear();
        }
        self.buf.sort_unstable_by_key(|e| e.key);
        self.buf.iter().map(|e| (e.score, e.id()))
    }

    /// Starts a new stream.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
        self.thr = f32::NEG_INFINITY;
    }

    /// Keeps the `k` (`>= 1`) best entries of the buffer and, when it holds
    /// `k`, raises the threshold to the worst of them.
    #[inline(never)]
    fn compact(&mut self, k: usize) {
        if self.buf.len() > k {
            self.buf.select_nth_unstable_by_key(k - 1, |e| e.key);
            self.buf.truncate(k);
        }
        if self.buf.len() == k {
            // select_nth puts the k-th best at k - 1 and nothing worse
            // before it, so this is the smallest kept score.
            self.thr = self.buf[k - 1].score;
        }
    }
}

pub(crate) fn topk_segment(
    scores: &[f32],
    ids: Option<&[u32]>,
    k: usize,
    top: &mut TopK,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) {
    topk_segment_in(scores, ids, k, top, out_ids, out_scores, true);
}

/// [`topk_segment`]'s set in an unspecified (but deterministic) order,
/// padding last: for callers that only use the set (re-scoring stages).
pub(crate) fn topk_set(
    scores: &[f32],
    ids: Option<&[u32]>,
    k: usize,
    top: &mut TopK,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
) {
    topk_segment_in(scores, ids, k, top, out_ids, out_scores, false);
}

fn topk_segment_in(
    scores: &[f32],
    ids: Option<&[u32]>,
    k: usize,
    top: &mut TopK,
    out_ids: &mut [u32],
    out_scores: &mut [f32],
    sorted: bool,
) {
    top.clear();
    // A floor instead of -inf, so that the buffer fills with contenders
    // only: on a long segment a sampled guess, on a shorter one the floor
    // of its chunks' maxima (which at least k scores reach by
    // construction). If at least k scores reach the floor, the k-th best
    // does too, so every entry of the top k was offered: the same result.
    // Otherwise (a sampled guess too high) start again.
    let floor = if k > 0 && scores.len() >= 16 * SAMPLE && scores.len() >= 8 * k {
        Some(sample_floor(scores, k, &mut top.sample))
    } else {
        chunk_floor(scores, k)
    };
    if let Some(floor) = floor {
        top.thr = floor;
        match ids {
            Some(ids) => topk_offer_masked(scores, |j| ids[j], k, top),
            None => topk_offer_masked(scores, |j| j as u32, k, top),
        }
        if top.buf.len() >= k {
            drain(top, k, out_ids, out_scores, sorted);
            return;
        }
        top.clear();
    }
    match ids {
        Some(ids) => topk_offer(scores, |j| ids[j], k, top),
        None => topk_offer(scores, |j| j as u32, k, top),
    }
    drain(top, k, out_ids, out_scores, sorted);
}

/// The most groups whose maxima [`chunk_floor`] takes (16 lanes of 8
/// blocks); its largest `k` is half of it.
pub(crate) const FLOOR_GROUPS: usize = 128;

/// A score that at least `k` distinct elements of `v` reach: the `k`-th
/// largest of the maxima of 64 disjoint groups of `v` (128 for `k` above
/// 32), so the `k`-th best of `v` reaches it too, and an element below it
/// is never among the best `k`. The groups are the 16 lanes of each of
/// four (eight) contiguous blocks, a block a multiple of 16 elements
/// long and lane `l` its elements `16 i + l`: the maxima are one pass of
/// 16-lane vector maxima whatever the length, and a segment of a few
/// hundred scores still has its 64 groups. `None` when it would not pay or
/// not hold: `k` is 0 or above [`FLOOR_GROUPS`] / 2 (with fewer than two
/// groups per wanted element the floor passes most of a segment), `v` has
/// fewer than `max(8 k, 128)` elements, or the floor is `-inf` (a group
/// that is empty or all NaN: NaN is never a maximum). One pass and a
/// selection among 64 (128) values.
pub(crate) fn chunk_floor(v: &[f32], k: usize) -> Option<f32> {
    if !(1..=FLOOR_GROUPS / 2).contains(&k) || v.len() < (8 * k).max(128) {
        return None;
    }
    let groups = if 2 * k <= FLOOR_GROUPS / 2 {
        FLOOR_GROUPS / 2
    } else {
        FLOOR_GROUPS
    };
    let block = v.len().div_ceil(groups / 16).next_multiple_of(16);
    let mut maxima = [f32::NEG_INFINITY; FLOOR_GROUPS];
    for (lanes, c) in maxima[..groups].chunks_exact_mut(16).zip(v.chunks(block)) {
        // Selects, so the loop vectorises (a serial fold would wait on
        // each compare).
        let mut rows = c.chunks_exact(16);
        for b in &mut rows {
            for (l, &x) in lanes.iter_mut().zip(b) {
                *l = if x > *l { x } else { *l };
            }
        }
        for (l, &x) in lanes.iter_mut().zip(rows.remainder()) {
            *l = if x > *l { x } else { *l };
        }
    }
    let (_, &mut floor, _) = maxima[..groups].select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    (floor > f32::NEG_INFINITY).then_some(floor)
}

/// Offers `scores[j]` with id `id_of(j)`, for every `j`, to the running
/// top-`k` in `top` ([`TopK::clear`]ed at the start of a stream; the same
/// `k` for every piece). Offering a stream in pieces and then calling
/// [`topk_drain`] with the same `k` gives exactly [`topk_segment`] of the
/// whole stream: the `k` best by (score descending, id ascending), NaN
/// never kept.
#[inline]
pub(crate) fn topk_offer(scores: &[f32], id_of: impl Fn(usize) -> u32, k: usize, top: &mut TopK) {
    if k == 0 {
        return;
    }
    let cap = k + k.max(32);
    let n = scores.len();
    let mut j = 0;
    let mut thr = f32x8::splat(top.thr);
    while j + 8 <= n {
        let v = f32x8::from(<[f32; 8]>::try_from(&scores[j..j + 8]).unwrap());
        let mut m = v.simd_ge(thr).to_bitmask();
        if m != 0 {
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                top.buf.push(Entry::new(scores[j + l], id_of(j + l)));
                m &= m - 1;
            }
            if top.buf.len() >= cap {
                top.compact(k);
                thr = f32x8::splat(top.thr);
            }
        }
        j += 8;
    }
    while j < n {
        if scores[j] >= top.thr {
            top.buf.push(Entry::new(scores[j], id_of(j)));
            if top.buf.len() >= cap {
                top.compact(k);
            }
        }
        j += 1;
    }
}

/// [`topk_offer_floored`] tests a piece of at least this many scores
/// against a threshold it already has by the tier's compare kernel (16
/// lanes, one call) rather than 8 lanes and a branch per block.
const MASKED_MIN: usize = 64;

/// [`topk_offer`], where the stream has no threshold yet (`-inf`: fewer
/// than `k` entries kept so far) starting it from the piece's
/// [`chunk_floor`]: `k` of its scores reach the floor, so the stream's
/// `k`-th best does too and nothing below it could enter. The buffer then
/// fills with contenders only instead of being cut back every `max(k, 32)`
/// entries from `-inf`. The same entries reach the top `k`.
pub(crate) fn topk_offer_floored(
    scores: &[f32],
    id_of: impl Fn(usize) -> u32,
    k: usize,
    top: &mut TopK,
) {
    if top.thr == f32::NEG_INFINITY {
        if let Some(floor) = chunk_floor(scores, k) {
            top.thr = floor;
            topk_offer_masked(scores, id_of, k, top);
            return;
        }
    } else if scores.len() >= MASKED_MIN {
        topk_offer_masked(scores, id_of, k, top);
        return;
    }
    topk_offer(scores, id_of, k, top);
}

/// [`topk_offer`] of a segment once the threshold is a floor (sampled, or
/// [`chunk_floor`]'s): which scores reach it, as bits from the active tier's vector compare
/// (`kernels::select`, one call for the whole segment), then only those
/// are offered, each against the threshold as it rises. The same entries
/// as [`topk_offer`] reach the buffer's top `k` (a score below the
/// threshold never can), without a compare-and-branch per block of 8.
fn topk_offer_masked(scores: &[f32], id_of: impl Fn(usize) -> u32, k: usize, top: &mut TopK) {
    if k == 0 || top.thr == f32::NEG_INFINITY || top.thr.is_nan() {
        // The bits test `>`, and `>= -inf` has no strict equivalent.
        topk_offer(scores, id_of, k, top);
        return;
    }
    let cap = k + k.max(32);
    let nw = crate::kernels::select::words(scores.len());
    let mut masks = std::mem::take(&mut top.masks);
    masks.clear();
    masks.resize(nw, 0);
    // `x >= thr` is `x > next_down(thr)` for every non-NaN `x` (the two
    // zeros included: `-0.0 > next_down(0.0)`), and false for NaN alike.
    (crate::kernels::select::kernels(crate::isa::active()).gt_masks)(
        scores,
        top.thr.next_down(),
        &mut masks,
    );
    let passing: usize = masks.iter().map(|w| w.count_ones() as usize).sum();
    if top.buf.len() + passing <= ALL_AT_ONCE * cap {
        // Few enough to hold: every passing score goes in, and the one
        // selection of the drain replaces the compactions (each a
        // selection over the buffer) and the compare per entry.
        top.buf.reserve(passing);
        top.buf
            .extend(set_bits(&masks).map(|j| Entry::new(scores[j], id_of(j))));
    } else {
        for j in set_bits(&masks) {
            let x = scores[j];
            if x >= top.thr {
                top.buf.push(Entry::new(x, id_of(j)));
                if top.buf.len() >= cap {
                    top.compact(k);
                }
            }
        }
    }
    top.masks = masks;
}

/// [`topk_offer_masked`] takes every score that passes its floor without
/// compacting when they number at most this many times the buffer's
/// compaction size (`2 k` or `k + 32`): the buffer then holds at most
/// twice what the compacting path lets it reach.
const ALL_AT_ONCE: usize = 2;

/// Ends a stream of [`topk_offer`] (offered with this `k`): its `k` best
/// entries, best first, into `out_ids` / `out_scores`, padded with
/// [`TOPK_PAD_ID`] / `-inf` to their length. Leaves the buffer cut to
/// them, sorted.
pub(crate) fn topk_drain(top: &mut TopK, k: usize, out_ids: &mut [u32], out_scores: &mut [f32]) {
    drain(top, k, out_ids, out_scores, true);
}

fn drain(top: &mut TopK, k: usize, out_ids: &mut [u32], out_scores: &mut [f32], sorted: bool) {
    if k > 0 {
        top.compact(k);
    } else {
        top.buf.clear();
    }
    if sorted {
        top.buf.sort_unstable_by_key(|e| e.key);
    }
    for (t, (oi, os)) in out_ids.iter_mut().zip(out_scores.iter_mut()).enumerate() {
        match top.buf.get(t) {
            Some(e) => {
                *oi = e.id();
                *os = e.score;
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
    TOP.with(|h| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A stream offered in random pieces selects what the whole stream
    /// does, for `k` around the compaction sizes, with ties, NaN and
    /// infinities.
    #[test]
    fn pieces_equal_whole() {
        let mut rng = SplitMix64::new(7);
        for trial in 0..400 {
            let n = rng.below(2000) as usize;
            let scores: Vec<f32> = (0..n)
                .map(|_| match rng.below(50) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    4 => 0.0,
                    _ if trial % 3 == 0 => rng.below(8) as f32,
                    _ => rng.next_normal() as f32,
                })
                .collect();
            let k = [1, 2, 10, 31, 32, 33, 64, 100, 3000][rng.below(9) as usize];
            let (mut wi, mut ws) = (vec![0u32; k], vec![0f32; k]);
            let mut top = TopK::default();
            topk_segment(&scores, None, k, &mut top, &mut wi, &mut ws);
            top.clear();
            let mut a = 0;
            while a < n {
                if rng.below(5) == 0 {
                    topk_offer(&[], |j| j as u32, k, &mut top);
                }
                let e = (a + 1 + rng.below(300) as usize).min(n);
                topk_offer(&scores[a..e], |j| (a + j) as u32, k, &mut top);
                a = e;
            }
            // The rank order by sorting (-0.0 and 0.0 tie, then by id).
            let mut r: Vec<(f32, u32)> = scores
                .iter()
                .zip(0u32..)
                .filter(|e| !e.0.is_nan())
                .map(|(&s, i)| (s, i))
                .collect();
            r.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
            r.resize(k.max(r.len()), (f32::NEG_INFINITY, TOPK_PAD_ID));
            let ri: Vec<u32> = r[..k].iter().map(|e| e.1).collect();
            assert_eq!(wi, ri, "trial {trial}: against sorting");
            let (mut gi, mut gs) = (vec![0u32; k], vec![0f32; k]);
            topk_drain(&mut top, k, &mut gi, &mut gs);
            assert_eq!(gi, wi, "trial {trial}");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gs), bits(&ws));
        }
    }

    /// `n` scores of one of eight shapes that stress a floor: normal,
    /// ascending (the best last), descending (the best first), all tied,
    /// few distinct values, the best packed into one run a stride may
    /// miss, NaN / signed zeros / infinities, and clusters as IVF lists.
    fn shaped_scores(rng: &mut SplitMix64, n: usize, shape: usize) -> Vec<f32> {
        (0..n)
            .map(|j| match shape {
                0 => rng.next_normal() as f32,
                1 => j as f32,
                2 => -(j as f32),
                3 => 1.0,
                4 => rng.below(3) as f32,
                5 if (n / 2..n / 2 + 40).contains(&j) => 100.0 + j as f32,
                5 => rng.next_normal() as f32,
                6 => match rng.below(6) {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    3 if rng.below(50) == 0 => f32::INFINITY,
                    4 if rng.below(50) == 0 => f32::NEG_INFINITY,
                    _ => rng.next_normal() as f32,
                },
                // A level per block of 64.
                _ => (j / 64 % 17) as f32 + 0.01 * rng.next_normal() as f32,
            })
            .collect()
    }

    /// The ids of the `k` best by sorting (-0.0 and 0.0 tie, then by id;
    /// NaN never), padded.
    fn sorted_top_ids(scores: &[f32], k: usize) -> Vec<u32> {
        let mut r: Vec<(f32, u32)> = scores
            .iter()
            .zip(0u32..)
            .filter(|e| !e.0.is_nan())
            .map(|(&s, i)| (if s == 0.0 { 0.0 } else { s }, i))
            .collect();
        r.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        r.resize(k.max(r.len()), (f32::NEG_INFINITY, TOPK_PAD_ID));
        r[..k].iter().map(|e| e.1).collect()
    }

    /// Segments of a few hundred to a few thousand scores, where the
    /// selections start from [`chunk_floor`]: at least `k` non-NaN scores
    /// reach the floor (so the `k`-th best does), and [`topk_segment`] and
    /// a stream of [`topk_offer_floored`] pieces (each may start the
    /// threshold) select what sorting does.
    #[test]
    fn short_segments_from_the_chunk_floor() {
        let mut rng = SplitMix64::new(12);
        let mut floored = 0;
        for trial in 0..600 {
            let n = rng.below(4096) as usize;
            let shape = trial % 8;
            let scores = shaped_scores(&mut rng, n, shape);
            let k = 1 + rng.below(70) as usize;
            if let Some(f) = chunk_floor(&scores, k) {
                floored += 1;
                let reach = scores.iter().filter(|&&x| x >= f).count();
                assert!(reach >= k, "trial {trial}: {reach} of {k} reach {f}");
            }
            let ri = sorted_top_ids(&scores, k);
            let mut top = TopK::default();
            let (mut wi, mut ws) = (vec![0u32; k], vec![0f32; k]);
            topk_segment(&scores, None, k, &mut top, &mut wi, &mut ws);
            assert_eq!(wi, ri, "trial {trial} shape {shape} n {n} k {k}");
            top.clear();
            let mut a = 0;
            while a < n {
                let e = (a + 1 + rng.below(900) as usize).min(n);
                topk_offer_floored(&scores[a..e], |j| (a + j) as u32, k, &mut top);
                a = e;
            }
            let (mut gi, mut gs) = (vec![0u32; k], vec![0f32; k]);
            topk_drain(&mut top, k, &mut gi, &mut gs);
            assert_eq!(gi, wi, "trial {trial}: floored pieces");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gs), bits(&ws));
        }
        assert!(floored > 300, "the floor was taken in {floored} trials");
    }

    /// Long segments, where [`topk_segment`] starts from a sampled floor:
    /// the same result as sorting, whether the floor holds or fails (too
    /// few scores reach it: all-equal scores, the best scores packed where
    /// the sample does not look, NaN), and [`topk_set`] the same set; the
    /// scores that pass the floor taken all at once (a spread-out shape)
    /// or, when more pass (ties at the floor), compacted as they come.
    #[test]
    fn long_segments_from_a_sampled_floor() {
        let mut rng = SplitMix64::new(11);
        for trial in 0..120 {
            let n = 4096 + rng.below(30_000) as usize;
            let shape = trial % 8;
            let scores = shaped_scores(&mut rng, n, shape);
            let k = [1, 10, 32, 100, 256, 600, 1000][rng.below(7) as usize];
            let ri = sorted_top_ids(&scores, k);
            let mut top = TopK::default();
            let (mut wi, mut ws) = (vec![0u32; k], vec![0f32; k]);
            topk_segment(&scores, None, k, &mut top, &mut wi, &mut ws);
            assert_eq!(wi, ri, "trial {trial} shape {shape} n {n} k {k}");
            let (mut si, mut ss) = (vec![0u32; k], vec![0f32; k]);
            topk_set(&scores, None, k, &mut top, &mut si, &mut ss);
            let mut set: Vec<(u32, u32)> =
                si.iter().zip(&ss).map(|(&i, s)| (i, s.to_bits())).collect();
            let mut want: Vec<(u32, u32)> =
                wi.iter().zip(&ws).map(|(&i, s)| (i, s.to_bits())).collect();
            set.sort_unstable();
            want.sort_unstable();
            assert_eq!(set, want, "trial {trial}: topk_set");
        }
    }
}
