//! The crate's one way to run work on several threads (the
//! thread-count rule and the spawn / join / panic code were written out at
//! every parallel site).
//!
//! Determinism never depends on this module: every caller splits its work
//! into the same jobs whatever the thread count allows and combines the
//! results in job order, so a result is the same for 1, 2 or 64 threads.

/// The thread-count rule: 0 = every core the process may use
/// ([`cores`]), otherwise the number given.
pub(crate) fn threads(requested: usize) -> usize {
    if requested == 0 {
        cores()
    } else {
        requested
    }
}

/// The threads for `work` units of a call asking for `requested` (0 =
/// every core): never more than one per unit, at least one.
pub(crate) fn threads_for(requested: usize, work: usize) -> usize {
    threads(requested).min(work).max(1)
}

/// [`threads_for`], where `requested` 0 (every core, the library's
/// choice) also gives each thread at least `min_per_thread` of the call's
/// `elems` elements: calls without a [`Pool`] start their threads per
/// call ([`map`]), which costs more than a small call's whole work
/// (benches/train.md, benches/hrr.md), so a small call stays on the
/// calling thread. An explicit count is kept as given.
pub(crate) fn threads_auto(
    requested: usize,
    work: usize,
    elems: usize,
    min_per_thread: usize,
) -> usize {
    let t = threads_for(requested, work);
    if requested == 0 {
        t.min(elems / min_per_thread).max(1)
    } else {
        t
    }
}

/// The cores the process may use (`available_parallelism`, 1 if unknown),
/// read on first use and kept: on Linux `available_parallelism` reads the
/// affinity mask and the cgroup's CPU quota files on every call (about
/// twenty system calls and a few allocations: more than a small query
/// costs, docs/c-api.md), which a query or a training step that asks for
/// every core would pay per call. A later change of the process's
/// affinity or quota is not seen (OpenMP runtimes read theirs once too);
/// ask for a count to override it.
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |v| v.get()))
}

/// Scratch values that threads left behind when they exited, for the next
/// new thread of the process ([`Warm`]): a thread [`map`] starts then gets
/// buffers already allocated and faulted in, sized by earlier queries, and
/// does not grow them again from nothing. At most [`SPARE_MAX`] are kept;
/// the rest are freed.
pub(crate) struct Spare<T> {
    held: std::sync::Mutex<Vec<T>>,
}

impl<T> Spare<T> {
    pub(crate) const fn new() -> Self {
        Self {
            held: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The list, unless another thread holds it: then nothing is taken
    /// or kept (a thread starts cold, or its scratch is freed) and no
    /// thread ever waits here, not even a child forked while the lock was
    /// held. A panic cannot leave the list half-changed (push and pop
    /// only).
    fn try_lock(&self) -> Option<std::sync::MutexGuard<'_, Vec<T>>> {
        match self.held.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// The most values a [`Spare`] keeps (a constant: the core count would
/// cost a query of the system at every thread exit).
const SPARE_MAX: usize = 64;

/// A thread-local scratch value (`thread_local!` holds it) that starts from
/// a [`Spare`] one when there is one, and is left in the spares when its
/// thread exits. The lock is taken once per thread, never per query.
pub(crate) struct Warm<T: Default + 'static> {
    cell: std::cell::RefCell<T>,
    spare: &'static Spare<T>,
}

impl<T: Default + 'static> Warm<T> {
    pub(crate) fn new(spare: &'static Spare<T>) -> Self {
        let v = spare
            .try_lock()
            .and_then(|mut h| h.pop())
            .unwrap_or_default();
        Self {
            cell: std::cell::RefCell::new(v),
            spare,
        }
    }
}

impl<T: Default + 'static> std::ops::Deref for Warm<T> {
    type Target = std::cell::RefCell<T>;
    fn deref(&self) -> &Self::Target {
        &self.cell
    }
}

impl<T: Default + 'static> Drop for Warm<T> {
    fn drop(&mut self) {
        // A value still borrowed (a thread unwinding out of a query) is
        // dropped, not kept.
        let Ok(mut v) = self.cell.try_borrow_mut() else {
            return;
        };
        let v = std::mem::take(&mut *v);
        if let Some(mut held) = self.spare.try_lock() {
            if held.len() < SPARE_MAX {
                held.push(v);
            }
        }
    }
}

/// Runs `f` on the calling thread's scratch value in `key`, taken out of its
/// cell for the call and put back after it (also when `f` returns an
/// error): a panic inside `f` drops the value rather than leaving it
/// half-updated for the next call (a bitmap or counters kept all zero
/// between calls), and no borrow of the cell is held while `f` runs.
pub(crate) fn with_taken<T: Default, R>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    let mut v = key.with(|c| c.take());
    let r = f(&mut v);
    key.with(|c| *c.borrow_mut() = v);
    r
}

/// Runs `f` on every job, the first on the calling thread and each other
/// on a scoped thread of its own, and returns the results in job order.
/// The calling thread keeps its warm thread-local scratch (a query's
/// buffers), which a new thread would allocate and fault in again. Every
/// thread is joined explicitly (pthread_join: an unjoined scoped thread may
/// still be exiting after the scope returns); a job's panic is resumed
/// here, after every thread has finished.
pub(crate) fn map<J: Send, R: Send>(
    jobs: impl IntoIterator<Item = J>,
    f: impl Fn(J) -> R + Sync,
) -> Vec<R> {
    let mut jobs = jobs.into_iter();
    let Some(first) = jobs.next() else {
        return Vec::new();
    };
    let rest: Vec<J> = jobs.collect();
    if rest.is_empty() {
        return vec![f(first)];
    }
    let f = &f;
    std::thread::scope(|s| {
        let hs: Vec<_> = rest.into_iter().map(|j| s.spawn(move || f(j))).collect();
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(first)));
        let others: Vec<_> = hs.into_iter().map(|h| h.join()).collect();
        let mut out = Vec::with_capacity(others.len() + 1);
        out.push(mine.unwrap_or_else(|p| std::panic::resume_unwind(p)));
        for r in others {
            out.push(r.unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
}

/// Worker threads that an owner (an index) keeps between calls, so that a
/// batch split over threads pays neither a thread start (tens of µs) nor a
/// cold thread-local scratch per call. The workers are started by the first
/// call that needs them, sleep between calls, and are joined when the pool
/// is dropped: nothing outlives its owner. One call uses the pool at a
/// time; a call that finds it busy (another thread querying the same
/// index) runs on scoped threads instead ([`map`]), with the same results.
#[derive(Default)]
pub(crate) struct Pool {
    workers: std::sync::Mutex<Workers>,
}

/// The workers of a [`Pool`] and the state they share, in the process
/// that started them.
#[derive(Default)]
struct Workers {
    handles: Vec<std::thread::JoinHandle<()>>,
    shared: std::sync::Arc<PoolShared>,
    /// The process that started the workers: a child forked from it has
    /// none of them (fork copies only the calling thread), and its copy
    /// of the shared state may hold a lock taken by one; the child then
    /// forgets both and starts its own.
    pid: u32,
}

impl Workers {
    /// Forgets workers started by another process (see [`Workers::pid`]):
    /// never joined nor detached, as the threads they name do not exist
    /// here.
    fn own(&mut self) {
        let pid = std::process::id();
        if self.pid != pid {
            for h in self.handles.drain(..) {
                std::mem::forget(h);
            }
            self.shared = Default::default();
            self.pid = pid;
        }
    }
}

/// A job the caller lends the workers, its lifetime erased: the caller
/// does not return before every worker is done with it ([`Pool::for_each`]).
type ErasedJob = &'static (dyn Fn(usize) + Sync);

#[derive(Default)]
struct PoolShared {
    state: std::sync::Mutex<PoolState>,
    /// Workers wait here for a new job (or the quit flag).
    go: std::sync::Condvar,
    /// The caller waits here for the last job to finish.
    done: std::sync::Condvar,
    /// Calls posted so far, read without the lock by spinning workers.
    posted: std::sync::atomic::AtomicU64,
    /// `remaining`, read without the lock by the spinning caller.
    left: std::sync::atomic::AtomicUsize,
}

/// How long a worker looks for the next call, and the caller for the last
/// job's end, before sleeping on a condition variable. Waking a sleeping
/// thread costs tens of µs on a virtual machine (an interprocessor
/// interrupt through the hypervisor), as much as a small batch's share of
/// work; a back-to-back caller finds its workers awake. OpenMP runtimes
/// spin likewise (GOMP_SPINCOUNT, KMP_BLOCKTIME), for longer.
const SPIN: std::time::Duration = std::time::Duration::from_micros(100);

/// Spins until `ready()` or [`SPIN`] has passed (the caller checks its
/// condition again under the lock either way).
fn spin_until(ready: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < SPIN {
        for _ in 0..64 {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

#[derive(Default)]
struct PoolState {
    job: Option<ErasedJob>,
    /// The next job to take, of `n`.
    next: usize,
    n: usize,
    /// Jobs taken or not, still unfinished.
    remaining: usize,
    panic: Option<Box<dyn std::any::Any + Send>>,
    quit: bool,
}

impl PoolShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // Jobs run outside the lock and their panics are caught, so the
        // state is never left half-changed.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs the posted call's jobs from the counter until none is left
    /// (taken with the lock held, run without it); returns the lock.
    fn take_jobs<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, PoolState>,
    ) -> std::sync::MutexGuard<'a, PoolState> {
        while st.next < st.n {
            let i = st.next;
            st.next += 1;
            let Some(job) = st.job else {
                unreachable!("a call with jobs left has its job set")
            };
            drop(st);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(i)));
            st = self.lock();
            if let Err(p) = r {
                st.panic.get_or_insert(p);
            }
            st.remaining -= 1;
            self.left
                .store(st.remaining, std::sync::atomic::Ordering::Release);
            if st.remaining == 0 {
                self.done.notify_all();
            }
        }
        st
    }

    fn worker(&self) {
        use std::sync::atomic::Ordering;
        let mut st = self.lock();
        loop {
            if !st.quit && st.next >= st.n {
                let seen = self.posted.load(Ordering::Acquire);
                drop(st);
                spin_until(|| self.posted.load(Ordering::Acquire) != seen);
                st = self.lock();
            }
            while !st.quit && st.next >= st.n {
                st = self.go.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.quit {
                return;
            }
            st = self.take_jobs(st);
        }
    }
}

impl Pool {
    /// [`map`] on up to `threads` threads ([`Pool::for_each`] over the
    /// jobs' slots): the results in job order. The tests drive the pool
    /// through it.
    #[cfg(test)]
    pub(crate) fn map<J: Send, R: Send>(
        &self,
        threads: usize,
        jobs: Vec<J>,
        f: impl Fn(J) -> R + Sync,
    ) -> Vec<R> {
        let n = jobs.len();
        if threads.clamp(1, n.max(1)) == 1 {
            return jobs.into_iter().map(f).collect();
        }
        let slots: Vec<std::sync::Mutex<(Option<J>, Option<R>)>> = jobs
            .into_iter()
            .map(|j| std::sync::Mutex::new((Some(j), None)))
            .collect();
        self.for_each(threads, n, |i| {
            let lock = |i: usize| slots[i].lock().unwrap_or_else(|e| e.into_inner());
            let Some(j) = lock(i).0.take() else {
                unreachable!("each job is run once")
            };
            let r = f(j);
            lock(i).1 = Some(r);
        });
        slots
            .into_iter()
            .map(|m| {
                let (_, r) = m.into_inner().unwrap_or_else(|e| e.into_inner());
                let Some(r) = r else {
                    unreachable!("every job ran without a panic")
                };
                r
            })
            .collect()
    }

    /// `f(i)` for every `i < n`, once each, on up to `threads` threads:
    /// the calling thread and the pool's workers take the indices in order
    /// from a shared counter. Returns when every call has returned; the
    /// first panic is resumed then. Once the workers are started this
    /// allocates nothing (the job is lent to them by reference); a call
    /// that finds the pool busy, or cannot start a worker, runs on scoped
    /// threads instead ([`map_indexed`]), which do allocate.
    pub(crate) fn for_each(&self, threads: usize, n: usize, f: impl Fn(usize) + Sync) {
        let threads = threads.clamp(1, n.max(1));
        if threads == 1 {
            (0..n).for_each(f);
            return;
        }
        // Busy (another call on this pool) or no thread to be had: scoped
        // threads, which report a failed start as std does.
        if !self.on_workers(threads, n, &f) {
            map_indexed(n, threads, || (), |_, i| f(i));
        }
    }

    /// `f(i)` for every `i < n` on the calling thread and `n - 1` of the
    /// pool's workers: as many threads as jobs, so that the jobs may wait
    /// for each other (a job that waits keeps its thread, and every other
    /// job still has one). Returns `false` without running any job when
    /// the pool is busy (another call) or a worker cannot be started; the
    /// caller then does the work another way. Scoped threads are never
    /// used: one that failed to start would leave the others waiting.
    pub(crate) fn together(&self, n: usize, f: impl Fn(usize) + Sync) -> bool {
        match n {
            0 => true,
            1 => {
                f(0);
                true
            }
            _ => self.on_workers(n, n, &f),
        }
    }

    /// [`Pool::for_each`] on the calling thread and `threads - 1` (`>= 1`)
    /// of the pool's workers, started here if need be; `false` (no job
    /// run) when the pool is busy or a worker cannot be started.
    fn on_workers(&self, threads: usize, n: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
        use std::sync::atomic::Ordering;
        let mut workers = match self.workers.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        workers.own();
        while workers.handles.len() < threads - 1 {
            let sh = std::sync::Arc::clone(&workers.shared);
            match std::thread::Builder::new()
                .name("lshk-query".into())
                .spawn(move || sh.worker())
            {
                Ok(h) => workers.handles.push(h),
                Err(_) => return false,
            }
        }
        let shared: &PoolShared = &workers.shared;
        let job: &(dyn Fn(usize) + Sync) = f;
        // SAFETY: the reference is erased to 'static only to pass it to the
        // workers through the shared state. This function does not return,
        // nor unwind, before `remaining` is 0, i.e. before every job has
        // returned (panics are caught and resumed only after that wait),
        // and the state's copy is cleared before `f` goes out of scope.
        let job: ErasedJob =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), ErasedJob>(job) };
        {
            let mut st = shared.lock();
            st.job = Some(job);
            st.next = 0;
            st.n = n;
            st.remaining = n;
            st.panic = None;
            shared.left.store(n, Ordering::Release);
            shared.posted.fetch_add(1, Ordering::Release);
        }
        shared.go.notify_all();
        // The caller takes jobs like a worker until none is left.
        drop(shared.take_jobs(shared.lock()));
        spin_until(|| shared.left.load(Ordering::Acquire) == 0);
        let panic = {
            let mut st = shared.lock();
            while st.remaining > 0 {
                st = shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.job = None;
            st.n = 0;
            st.next = 0;
            st.panic.take()
        };
        drop(workers);
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        true
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let w = self.workers.get_mut().unwrap_or_else(|e| e.into_inner());
        w.own();
        w.shared.lock().quit = true;
        w.shared.go.notify_all();
        for h in w.handles.drain(..) {
            // A worker's job panics are caught; a join error cannot carry one.
            let _ = h.join();
        }
    }
}

/// [`map`] for jobs that return a `Result`: the first error in job order,
/// after every job has finished.
pub(crate) fn try_map<J: Send, R: Send, E: Send>(
    jobs: impl IntoIterator<Item = J>,
    f: impl Fn(J) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    map(jobs, f).into_iter().collect()
}

/// `f(scratch, i)` for every `i < n` on up to `threads` threads that take
/// the next index from a shared counter (for jobs of uneven cost), each with
/// its own scratch from `scratch()`; the results in index order.
pub(crate) fn map_indexed<S, R: Send>(
    n: usize,
    threads: usize,
    scratch: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let counter = AtomicUsize::new(0);
    let parts = map(0..threads.clamp(1, n.max(1)), |_| {
        let mut s = scratch();
        let mut mine = Vec::new();
        loop {
            let i = counter.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            mine.push((i, f(&mut s, i)));
        }
        mine
    });
    let mut all: Vec<(usize, R)> = parts.into_iter().flatten().collect();
    all.sort_unstable_by_key(|x| x.0);
    all.into_iter().map(|x| x.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_gives_each_thread_its_minimum_and_an_explicit_count_is_kept() {
        let cores = cores();
        // Every core: at most one thread per `min` elements, at least one.
        assert_eq!(threads_auto(0, 1000, 0, 64), 1);
        assert_eq!(threads_auto(0, 1000, 63, 64), 1);
        assert_eq!(threads_auto(0, 1000, 3 * 64, 64), cores.min(3));
        assert_eq!(threads_auto(0, 2, 1 << 30, 64), cores.min(2));
        // An explicit count: capped by the work units only.
        assert_eq!(threads_auto(3, 1000, 0, 64), 3);
        assert_eq!(threads_auto(3, 2, 0, 64), 2);
    }

    #[test]
    fn results_come_in_job_order_and_panics_propagate() {
        for n in [0usize, 1, 2, 7] {
            let v = map(0..n, |j| j * j);
            assert_eq!(v, (0..n).map(|j| j * j).collect::<Vec<_>>());
        }
        let mut data = vec![0u32; 10];
        map(data.chunks_mut(3).enumerate(), |(i, c)| c.fill(i as u32));
        assert_eq!(data, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
        assert_eq!(
            try_map(0..4, |j| if j == 2 { Err(j) } else { Ok(j) }),
            Err(2)
        );
        let r = std::panic::catch_unwind(|| map(0..3, |j| assert_ne!(j, 1, "job 1")));
        assert!(r.is_err());
        for (n, t) in [(0usize, 3usize), (1, 1), (50, 1), (50, 3)] {
            let v = map_indexed(n, t, || 10usize, |s, i| *s + i);
            assert_eq!(v, (0..n).map(|i| 10 + i).collect::<Vec<_>>());
        }
        assert!(threads(0) >= 1);
        assert_eq!(threads(3), 3);
    }

    #[test]
    fn pool_answers_in_job_order_on_any_thread_count_and_reuses_its_workers() {
        let pool = Pool::default();
        for round in 0..3 {
            for (t, n) in [
                (1usize, 5usize),
                (2, 2),
                (2, 7),
                (3, 3),
                (3, 10),
                (8, 4),
                (2, 0),
            ] {
                let v = pool.map(t, (0..n).collect(), |j| j * 10 + round);
                assert_eq!(v, (0..n).map(|j| j * 10 + round).collect::<Vec<_>>());
            }
        }
        // Up to `threads - 1` workers, never one per job: 8 threads asked
        // for 4 jobs start 3.
        assert_eq!(pool.workers.lock().unwrap().handles.len(), 3);
        // for_each: every index once, on the started workers.
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits: Vec<AtomicUsize> = (0..9).map(|_| AtomicUsize::new(0)).collect();
        pool.for_each(3, 9, |i| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn pool_resumes_a_jobs_panic_after_every_job_and_stays_usable() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pool = Pool::default();
        for bad in [0usize, 3] {
            let finished = AtomicUsize::new(0);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.map(2, (0..6).collect(), |j| {
                    assert_ne!(j, bad, "job {bad}");
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    finished.fetch_add(1, Ordering::Relaxed);
                })
            }));
            assert!(r.is_err());
            // Every other job ran to its end before the panic came back.
            assert_eq!(finished.load(Ordering::Relaxed), 5);
            assert_eq!(pool.map(2, vec![1, 2, 3], |j| j + 1), [2, 3, 4]);
        }
    }

    #[test]
    fn a_busy_pool_runs_the_second_call_on_scoped_threads() {
        let pool = Pool::default();
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            let calls: Vec<_> = (0..2usize)
                .map(|c| {
                    let (pool, barrier) = (&pool, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let mut all = Vec::new();
                        for r in 0..50 {
                            all.push(pool.map(2, (0..4).collect(), |j| c * 1000 + r * 10 + j));
                        }
                        all
                    })
                })
                .collect();
            for (c, h) in calls.into_iter().enumerate() {
                for (r, v) in h.join().unwrap().into_iter().enumerate() {
                    assert_eq!(v, (0..4).map(|j| c * 1000 + r * 10 + j).collect::<Vec<_>>());
                }
            }
        });
    }

    #[test]
    fn dropping_a_pool_joins_its_workers() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static EXITED: AtomicUsize = AtomicUsize::new(0);
        struct OnExit;
        impl Drop for OnExit {
            fn drop(&mut self) {
                EXITED.fetch_add(1, Ordering::SeqCst);
            }
        }
        thread_local! {
            static GUARD: OnExit = const { OnExit };
        }
        let pool = Pool::default();
        let me = std::thread::current().id();
        // The three jobs meet at a barrier, so each runs on its own thread:
        // the caller and both workers.
        let all = std::sync::Barrier::new(3);
        pool.map(3, (0..3).collect(), |_| {
            all.wait();
            if std::thread::current().id() != me {
                GUARD.with(|_| ());
            }
        });
        let workers = pool.workers.lock().unwrap().handles.len();
        assert_eq!(workers, 2);
        let before = EXITED.load(Ordering::SeqCst);
        drop(pool);
        // Both workers have run their thread-local destructors, i.e.
        // exited, before drop returned.
        assert_eq!(EXITED.load(Ordering::SeqCst), before + 2);
    }

    #[test]
    fn a_new_thread_starts_from_the_scratch_an_exited_one_left() {
        static SPARE: Spare<Vec<u8>> = Spare::new();
        thread_local! {
            static BUF: Warm<Vec<u8>> = Warm::new(&SPARE);
        }
        std::thread::spawn(|| BUF.with(|b| b.borrow_mut().reserve(1 << 20)))
            .join()
            .unwrap();
        let cap = std::thread::spawn(|| BUF.with(|b| b.borrow().capacity()))
            .join()
            .unwrap();
        assert!(cap >= 1 << 20, "capacity {cap}");
        // At most SPARE_MAX values are kept.
        for _ in 0..SPARE_MAX + 5 {
            SPARE.try_lock().unwrap().pop();
        }
        std::thread::scope(|s| {
            for _ in 0..SPARE_MAX + 5 {
                s.spawn(|| BUF.with(|b| b.borrow_mut().push(1)));
            }
        });
        assert!(SPARE.try_lock().unwrap().len() <= SPARE_MAX);
    }

    #[test]
    fn a_pool_from_another_process_is_forgotten_not_waited_for() {
        // What a forked child sees: workers started by the parent (gone
        // here) and their shared state locked by one of them at the fork.
        let pool = Pool::default();
        assert_eq!(pool.map(3, (0..6).collect(), |j| j + 1), [1, 2, 3, 4, 5, 6]);
        {
            let mut w = pool.workers.lock().unwrap();
            let stale = std::sync::Arc::clone(&w.shared);
            std::mem::forget(stale.state.lock().unwrap());
            w.pid = w.pid.wrapping_add(1);
            drop(stale);
            // This process's two workers now block on that lock for good;
            // they end with the test process (as the parent's stay alive
            // in the parent).
        }
        // The stale state's lock is never taken: new workers, same answers.
        assert_eq!(
            pool.map(3, (0..6).collect(), |j| j * 2),
            [0, 2, 4, 6, 8, 10]
        );
        assert_eq!(pool.workers.lock().unwrap().handles.len(), 2);
        drop(pool);
    }
}
