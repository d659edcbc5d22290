//! The crate's one way to run work on several threads (the
//! thread-count rule and the spawn / join / panic code were written out at
//! every parallel site).
//!
//! Determinism never depends on this module: every caller splits its work
//! into the same jobs whatever the thread count allows and combines the
//! results in job order, so a result is the same for 1, 2 or 64 threads.

/// The thread-count rule: 0 = every core the process may use
/// (`available_parallelism`, 1 if unknown), otherwise the number given.
pub(crate) fn threads(requested: usize) -> usize {
    if requested == 0 {
        std::thread::available_parallelism()
            .map(|v| v.get())
            .unwrap_or(1)
    } else {
        requested
    }
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
}
