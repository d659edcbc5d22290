//! Query-directed multi-probe: the flip masks of a table's extra buckets.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    // `|p|` is never negative, so its bits order as `total_cmp` does (NaN
    // last): one integer key per entry, the bit index breaking ties.
    order.sort_unstable_by_key(|e| (u64::from(e.0.to_bits()) << 32) | u64::from(e.1));
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
