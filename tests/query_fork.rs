//! An index that has split a batch over its kept threads, then a `fork`
//! (Python's multiprocessing, PyTorch's data loaders): the child has none
//! of the parent's worker threads. Its threaded queries must answer the
//! same without them, and freeing the index must return (a hang is caught
//! by an alarm here). The case of a worker holding the pool's lock at
//! the moment of the fork is the unit test
//! `par::tests::a_pool_from_another_process_is_forgotten_not_waited_for`.
#![cfg(target_os = "linux")]

use lshk::index::{Family, Index, IndexParams, QueryParams};

const ROWS: usize = 3000;
const DIM: usize = 32;
const NQ: usize = 40;
const K: usize = 5;

fn answers(idx: &Index, q: &[f32], threads: u32) -> Vec<u32> {
    let qp = QueryParams {
        threads,
        ..Default::default()
    };
    let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
    idx.query_with(q, NQ, DIM, K as u32, &qp, &mut ids, &mut sc, None)
        .unwrap();
    ids.extend(sc.iter().map(|s| s.to_bits()));
    ids
}

#[test]
fn a_forked_child_queries_and_frees_an_index_with_kept_threads() {
    let g = lshk::data::structured_layer(ROWS, DIM, 40, 5);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 9);
    let p = IndexParams {
        family: Family::Ivf,
        ..Default::default()
    };
    let idx = Index::build(&g.w, Some(&g.bias), ROWS, DIM, DIM, &p, None).unwrap();
    let want = answers(&idx, &q, 0);
    // The index now keeps its workers.
    assert_eq!(answers(&idx, &q, 3), want);
    // SAFETY: the child only queries and frees the index, then leaves
    // with _exit (no destructors of the parent's state, no test harness).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe; a hang ends the
        // child by SIGALRM, which the parent reports.
        unsafe { libc::alarm(20) };
        let ok = answers(&idx, &q, 3) == want && answers(&idx, &q, 2) == want;
        drop(idx);
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child started above.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x} (exit 3: wrong answers; a signal: hung or crashed)"
    );
    // The parent's workers are still there and answer the same.
    assert_eq!(answers(&idx, &q, 3), want);
}
