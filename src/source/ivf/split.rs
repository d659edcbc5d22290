//! A batch split over threads that still shares its list scans.
//!
//! Splitting a batch into contiguous ranges of queries, one per thread,
//! gives each thread fewer queries per visited list: at 64 queries on two
//! threads each half shares its lists as a batch of 32 does, which is what
//! the split loses on a layer whose queries share many lists
//! (benches/threads.md). Here the threads ("members") instead keep every
//! query of the block on each list:
//!
//! - each member starts its own contiguous range of the block's queries as
//!   [`Ivf::search_batch`] does (centroid scores, first lists, orders);
//! - each round of adaptive selection ([`Ivf::adaptive_rounds`]), every
//!   member publishes its queries' proposals; after a barrier each member
//!   scores a share of the round's lists (a range of whole lists in list
//!   order, balanced by rows scored) for every member's queries that
//!   proposed them, writing each score where its query's member reads it;
//!   after a second barrier each member keeps its own queries' proposals
//!   in order;
//! - each member re-ranks its own queries.
//!
//! Every row's score is the same integer dot product and epilogue
//! whichever member computes it, and each query keeps its proposals in its
//! own order, so the answers are the bits of one query at a time.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use super::batch::{Prop, BATCH};
use super::*;

/// Bits of a proposal's index in a shared round's keys (`(list << 32) |
/// (member << PROP_BITS) | proposal`): a member proposes at most
/// `BATCH * ROUND_LISTS` lists a round.
const PROP_BITS: u32 = 20;
const _: () = assert!(BATCH * super::batch::ROUND_LISTS < 1 << PROP_BITS);
const _: () = assert!(BATCH <= 1 << (32 - PROP_BITS));

/// The narrowest int8 rows (bytes, padded) whose batches share blocks
/// over threads ([`Ivf::split_pays`]): between the widths measured to
/// gain (384) and to break even (128) against contiguous ranges
/// (benches/threads.md, "Threads that share a block").
pub(super) const SPLIT_MIN_ROW_BYTES: usize = 256;

/// A spinning barrier for the members of one block: they run on cores of
/// their own and meet twice a round (a block of 64 queries takes about a
/// millisecond), so a wait is short. A member that panics marks it
/// aborted (`Abort`), and the others then panic out of their waits
/// instead of waiting for it forever.
struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    aborted: AtomicBool,
}

impl Barrier {
    fn new(n: usize) -> Self {
        Self {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
        }
    }

    /// Returns once all `n` members have called it (again). Everything a
    /// member wrote before its call is seen by every member after it.
    fn wait(&self) {
        let g = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == g {
            assert!(
                !self.aborted.load(Ordering::Acquire),
                "another thread of the batch panicked"
            );
            // Spin while the others are likely a few microseconds away
            // (about 50 µs); then yield, in case other work shares the
            // cores.
            if spins < 1 << 10 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Marks the barrier aborted if its member unwinds.
struct Abort<'a>(&'a Barrier);

impl Drop for Abort<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.aborted.store(true, Ordering::Release);
        }
    }
}

/// What a member publishes for a round: its proposals, where their scores
/// go, and its quantised queries. Written by the member before the
/// round's first barrier, read by the others between the two.
struct Part {
    props: AtomicPtr<Prop>,
    nprops: AtomicUsize,
    seg: AtomicPtr<f32>,
    seg_len: AtomicUsize,
    qq: AtomicPtr<QQuery>,
}

impl Part {
    const fn new() -> Self {
        Self {
            props: AtomicPtr::new(std::ptr::null_mut()),
            nprops: AtomicUsize::new(0),
            seg: AtomicPtr::new(std::ptr::null_mut()),
            seg_len: AtomicUsize::new(0),
            qq: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// One block's members: member `r` answers queries `r * per ..` of the
/// block's `q`.
pub(super) struct Coop<'a> {
    q: &'a [f32],
    q_stride: usize,
    dim: usize,
    per: usize,
    parts: [Part; BATCH],
    members: usize,
    barrier: Barrier,
}

/// Member `r` of a [`Coop`].
#[derive(Clone, Copy)]
pub(super) struct Member<'a> {
    coop: &'a Coop<'a>,
    r: usize,
}

impl<'a> Member<'a> {
    /// Publishes this member's round: its proposals, the buffer their
    /// scores go to (every proposal's offset and length within it) and its
    /// quantised queries; then waits for the others'.
    pub(super) fn publish(&self, props: &[Prop], seg: &mut [f32], qq: &[QQuery]) {
        let p = &self.coop.parts[self.r];
        p.props.store(props.as_ptr().cast_mut(), Ordering::Relaxed);
        p.nprops.store(props.len(), Ordering::Relaxed);
        p.seg.store(seg.as_mut_ptr(), Ordering::Relaxed);
        p.seg_len.store(seg.len(), Ordering::Relaxed);
        p.qq.store(qq.as_ptr().cast_mut(), Ordering::Relaxed);
        self.coop.barrier.wait();
    }

    /// Waits until every member has scored its share of the round.
    pub(super) fn scored(&self) {
        self.coop.barrier.wait();
    }

    /// The round's proposals, all members'.
    pub(super) fn proposals(&self) -> usize {
        let c = self.coop;
        c.parts[..c.members]
            .iter()
            .map(|p| p.nprops.load(Ordering::Relaxed))
            .sum()
    }

    /// This member's share of the round: the proposals, every member's,
    /// of a range of whole lists, as `(list << 32) | (member << PROP_BITS)
    /// | proposal` keys in `keys`, sorted by list (then member and
    /// proposal: pushed in that order, the stable sort on the list half
    /// keeps it). The ranges cut the lists in order where the rows the
    /// round scores (`len(l)` per proposal of list `l`, counted into
    /// `rows[..nlist]`) reach `r / members` of the whole: every member
    /// computes the same cuts, and sorts only its own keys.
    pub(super) fn share(
        &self,
        len: impl Fn(usize) -> usize,
        rows: &mut Vec<usize>,
        nlist: usize,
        keys: &mut Vec<u64>,
        tmp: &mut Vec<u64>,
    ) {
        let c = self.coop;
        grow(rows, nlist);
        rows[..nlist].fill(0);
        let mut total = 0;
        self.each_prop(|_, _, l| {
            rows[l] += len(l);
            total += len(l);
        });
        // List `l` is this member's when the rows before it are at least
        // `r total / members` and less than `(r + 1) total / members`.
        let (lo, hi) = (total * self.r / c.members, total * (self.r + 1) / c.members);
        let (mut first, mut end, mut acc) = (nlist, nlist, 0);
        for (l, &n) in rows[..nlist].iter().enumerate() {
            if acc >= lo && first == nlist {
                first = l;
            }
            if acc >= hi && self.r + 1 < c.members {
                end = l;
                break;
            }
            acc += n;
        }
        keys.clear();
        self.each_prop(|m, j, l| {
            if (first..end).contains(&l) {
                keys.push(((l as u64) << 32) | ((m as u64) << PROP_BITS) | j as u64);
            }
        });
        sort_rank_keys(keys, tmp);
    }

    /// `f(member, proposal, list)` for every member's proposals, in
    /// member order.
    fn each_prop(&self, mut f: impl FnMut(usize, usize, usize)) {
        let c = self.coop;
        for (m, p) in c.parts[..c.members].iter().enumerate() {
            let n = p.nprops.load(Ordering::Relaxed);
            let props = p.props.load(Ordering::Relaxed);
            for j in 0..n {
                // SAFETY: member m published `n` proposals at `props`
                // before the barrier this member has passed, and does not
                // change them before the next.
                let l = unsafe { (*props.add(j)).1 };
                f(m, j, l as usize);
            }
        }
    }

    /// The quantised and the f32 query of a key of [`Member::share`].
    pub(super) fn query(&self, x: u64) -> (&'a QQuery, &'a [f32]) {
        let c = self.coop;
        let (m, j) = key_parts(x);
        let p = &c.parts[m];
        // SAFETY: member m published its proposals and queries before the
        // barrier this member has passed; neither changes before the next.
        let (i, qq) = unsafe {
            let i = (*p.props.load(Ordering::Relaxed).add(j)).0 as usize;
            (i, &*p.qq.load(Ordering::Relaxed).add(i))
        };
        let at = (m * c.per + i) * c.q_stride;
        (qq, &c.q[at..at + c.dim])
    }

    /// Writes the scores of a key of [`Member::share`] where its member
    /// reads them.
    pub(super) fn write(&self, x: u64, sc: &[f32]) {
        let (m, j) = key_parts(x);
        let p = &self.coop.parts[m];
        // SAFETY: member m published a score buffer holding every one of
        // its proposals' scores at the proposal's offset (a proposal of
        // list l has len(l) = sc.len() of them), and reads it only after
        // the round's second barrier. Each key is in one member's share,
        // so no two members write the same scores.
        unsafe {
            let off = (*p.props.load(Ordering::Relaxed).add(j)).2;
            debug_assert!(off + sc.len() <= p.seg_len.load(Ordering::Relaxed));
            let dst = p.seg.load(Ordering::Relaxed).add(off);
            std::ptr::copy_nonoverlapping(sc.as_ptr(), dst, sc.len());
        }
    }
}

fn key_parts(x: u64) -> (usize, usize) {
    let low = x as u32;
    (
        (low >> PROP_BITS) as usize,
        (low & ((1 << PROP_BITS) - 1)) as usize,
    )
}

/// The callers' outputs, lent to the members (each writes its own
/// queries' elements).
#[derive(Clone, Copy)]
struct Out(*mut u32, *mut f32);

// SAFETY: the members write disjoint elements (see the use).
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

impl Out {
    fn get(self) -> (*mut u32, *mut f32) {
        (self.0, self.1)
    }
}

impl Ivf {
    /// Whether [`Ivf::search_split`] shares the list scans of a batch split
    /// over threads under `sp`: adaptive selection on int8 codes, lists
    /// not label-trained (the batches' rounds).
    pub(crate) fn shares_rounds(&self, sp: &SearchParams) -> bool {
        sp.reach > 0.0 && self.codes.is_some() && self.pq.is_none() && self.labels.is_none()
    }

    /// Whether a batch split over threads should share its blocks
    /// ([`Ivf::search_split`]) rather than take contiguous ranges of
    /// queries: the rounds are shared ([`Ivf::shares_rounds`]) and the
    /// lists' int8 rows are at least [`SPLIT_MIN_ROW_BYTES`] wide. The
    /// members' scores cross cores (4 bytes a row scored, half of them on
    /// two threads) and meet at barriers, which narrow rows do not repay
    /// (benches/threads.md).
    pub(crate) fn split_pays(&self, sp: &SearchParams) -> bool {
        self.shares_rounds(sp)
            && self
                .codes
                .as_ref()
                .is_some_and(|c| c.dim_pad() >= SPLIT_MIN_ROW_BYTES)
    }

    /// [`Ivf::search_stats`] for `nq` queries on up to `threads` threads
    /// of `pool` (`split`; the calling one included) that share each
    /// block's list scans (module docs); the same bits as one thread.
    /// Without `split`, or with one thread, it is [`Ivf::search_stats`].
    /// Blocks that the pool cannot run (busy with another call, or a
    /// thread that cannot start) run on the calling thread.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_split(
        &self,
        split: Option<(&crate::par::Pool, usize)>,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut SearchStats>,
    ) -> Result<()> {
        let Some((pool, threads)) =
            split.filter(|&(_, t)| t >= 2 && k > 0 && nq >= 2 && self.shares_rounds(sp))
        else {
            return self.search_stats(tier, q, nq, q_stride, k, sp, out_ids, out_scores, stats);
        };
        self.check_search(tier, q, nq, q_stride, k, sp, out_ids, out_scores)?;
        let total = std::sync::Mutex::new(SearchStats::default());
        // `n` queries of a block on this thread (`coop`: as a member),
        // their counts added to the call's.
        let run = |q: &[f32], n: usize, ids: &mut [u32], scs: &mut [f32], coop: Option<Member>| {
            let mut st = SearchStats::default();
            SCRATCH.with(|s| {
                self.search_batch(
                    tier,
                    q,
                    n,
                    q_stride,
                    k,
                    sp,
                    &mut s.borrow_mut(),
                    ids,
                    scs,
                    &mut st,
                    coop,
                );
            });
            total.lock().unwrap_or_else(|e| e.into_inner()).add(&st);
        };
        for a in (0..nq).step_by(BATCH) {
            let nb = BATCH.min(nq - a);
            let per = nb.div_ceil(threads.min(nb));
            let members = nb.div_ceil(per);
            let qb = &q[a * q_stride..];
            let (oi, os) = (
                &mut out_ids[a * k..(a + nb) * k],
                &mut out_scores[a * k..(a + nb) * k],
            );
            let coop = Coop {
                q: qb,
                q_stride,
                dim: self.dim,
                per,
                parts: [const { Part::new() }; BATCH],
                members,
                barrier: Barrier::new(members),
            };
            let out = Out(oi.as_mut_ptr(), os.as_mut_ptr());
            let ran = members > 1
                && pool.together(members, |r| {
                    let _abort = Abort(&coop.barrier);
                    let (i0, n) = (r * per, per.min(nb - r * per));
                    // SAFETY: member r's outputs are elements
                    // [i0 k, (i0 + n) k) of oi and os (each nb k long),
                    // disjoint from every other member's; `together`
                    // returns only after every member has returned, while
                    // the borrows of oi and os are still held.
                    let (ids, scs) = unsafe {
                        let (pi, ps) = out.get();
                        (
                            std::slice::from_raw_parts_mut(pi.add(i0 * k), n * k),
                            std::slice::from_raw_parts_mut(ps.add(i0 * k), n * k),
                        )
                    };
                    run(
                        &qb[i0 * q_stride..],
                        n,
                        ids,
                        scs,
                        Some(Member { coop: &coop, r }),
                    );
                });
            if !ran {
                run(qb, nb, oi, os, None);
            }
        }
        if let Some(o) = stats {
            *o = total.into_inner().unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members of every count (more than the cores included) answer the
    /// ids, score bits and counts of one thread, on every tier, over
    /// blocks of 64 and a last short one.
    #[test]
    fn members_answer_what_one_thread_answers() {
        let (rows, dim, nq, k) = (3000, 40, 150, 10);
        let g = crate::data::structured_layer(rows, dim, 60, 11);
        let (q, _) = crate::data::queries_near_labels(&g.w, rows, dim, nq, 3);
        let ivf = Ivf::build(&g.w, Some(&g.bias), rows, dim, dim, &IvfParams::default()).unwrap();
        let sp = SearchParams::default();
        assert!(ivf.shares_rounds(&sp));
        let pool = crate::par::Pool::default();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for tier in Isa::supported() {
            let (mut a, mut sa) = (vec![0u32; nq * k], vec![0f32; nq * k]);
            let mut st_a = SearchStats::default();
            ivf.search_stats(tier, &q, nq, dim, k, &sp, &mut a, &mut sa, Some(&mut st_a))
                .unwrap();
            assert!(st_a.lists > 2 * nq as u64, "queries visit several lists");
            for threads in [2, 3, 5, 64] {
                let (mut b, mut sb) = (vec![0u32; nq * k], vec![0f32; nq * k]);
                let mut st_b = SearchStats::default();
                ivf.search_split(
                    Some((&pool, threads)),
                    tier,
                    &q,
                    nq,
                    dim,
                    k,
                    &sp,
                    &mut b,
                    &mut sb,
                    Some(&mut st_b),
                )
                .unwrap();
                let what = format!("{} threads {threads}", tier.name());
                assert_eq!(a, b, "{what}: ids");
                assert_eq!(bits(&sa), bits(&sb), "{what}: score bits");
                assert_eq!(st_a, st_b, "{what}: counts");
            }
        }
    }

    /// A member that panics releases the others from the barrier (they
    /// panic too) instead of leaving them waiting.
    #[test]
    fn a_member_that_panics_releases_the_others() {
        let b = Barrier::new(3);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::par::map(0..3, |i| {
                let _abort = Abort(&b);
                assert_ne!(i, 2, "member 2 fails");
                b.wait();
            })
        }));
        assert!(r.is_err());
    }
}
