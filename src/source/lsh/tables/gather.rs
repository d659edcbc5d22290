//! The bucket gather: per query, the union of its buckets (with probes,
//! forced ids, a budget and counting modes) through the per-tier mark and
//! extract kernels, with thread-local scratch.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bail;
use crate::error::{checked_mul, Result};
use crate::isa::{self, Isa};
use crate::kernels::gather as k;
use crate::rng::SplitMix64;

use super::{fold_code, probe_masks, Tables, FORCED, MAX_PROBES};
use crate::source::params::lsh::{GatherParams, GatherResult};

impl Tables {
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
            // One look at the table's buffer, not one per bucket.
            let offsets: &[u32] = &csr.offsets;
            for &b in visited.iter() {
                let (s, e) = (offsets[b as usize], offsets[b as usize + 1]);
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
    crate::kernels::prefetch(
        ids.as_ptr().cast(),
        (ids.len() * 4).min(PREFETCH_LINES * 64),
    );
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
