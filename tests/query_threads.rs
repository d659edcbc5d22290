//! `QueryParams::threads`: a batch split over threads answers the same ids,
//! score bits and counts as on the calling thread, for every source and
//! every thread count (more threads than queries included).

use lshk::index::{
    Family, Index, IndexParams, QueryParams, QueryStats, Storage, QUERY_THREADS_ALL,
};

const ROWS: usize = 2000;
const DIM: usize = 24;
const NQ: usize = 45;
const K: usize = 7;

fn answers(idx: &Index, q: &[f32], nq: usize, threads: u32) -> (Vec<u32>, Vec<u32>, QueryStats) {
    let qp = QueryParams {
        threads,
        ..Default::default()
    };
    let (mut ids, mut sc) = (vec![0u32; nq * K], vec![0f32; nq * K]);
    let mut st = QueryStats::default();
    idx.query_with(q, nq, DIM, K as u32, &qp, &mut ids, &mut sc, Some(&mut st))
        .unwrap();
    (ids, sc.iter().map(|s| s.to_bits()).collect(), st)
}

#[test]
fn every_thread_count_answers_the_same() {
    let g = lshk::data::structured_layer(ROWS, DIM, 40, 5);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 9);
    for family in Family::ALL {
        for storage in [Storage::F32, Storage::Bf16] {
            if family == Family::Forest && storage != Storage::F32 {
                continue;
            }
            let p = IndexParams {
                family,
                storage,
                bits: 8,
                tables: 12,
                ..Default::default()
            };
            let idx = Index::build(&g.w, Some(&g.bias), ROWS, DIM, DIM, &p, None).unwrap();
            for nq in [1, 2, NQ] {
                let want = answers(&idx, &q, nq, 0);
                assert_eq!(want.2.queries, nq as u64);
                for t in [1, 2, 3, 8, 64, QUERY_THREADS_ALL] {
                    let got = answers(&idx, &q, nq, t);
                    assert_eq!(got, want, "{family:?} {storage:?} nq {nq} threads {t}");
                }
            }
        }
    }
}

/// An IVF layer with rows wide enough that a batch's threads share each
/// block's list scans (rows of at least 256 bytes of codes): every thread
/// count, batches of one block, of a block and a part, and of several
/// blocks, answers the same as the calling thread.
#[test]
fn threads_that_share_ivf_blocks_answer_the_same() {
    let (rows, dim, nq, k) = (3000usize, 260usize, 150usize, 10u32);
    // Random rows and queries: flat scores, so each query visits many
    // lists and the rounds share them.
    let mut r = lshk::rng::SplitMix64::new(6);
    let mut randn = |n: usize| (0..n).map(|_| r.next_normal() as f32).collect::<Vec<_>>();
    let (w, q) = (randn(rows * dim), randn(nq * dim));
    let p = IndexParams {
        family: Family::Ivf,
        ..Default::default()
    };
    let idx = Index::build(&w, None, rows, dim, dim, &p, None).unwrap();
    let run = |nq: usize, threads: u32| {
        let qp = QueryParams {
            threads,
            ..Default::default()
        };
        let n = nq * k as usize;
        let (mut ids, mut sc) = (vec![0u32; n], vec![0f32; n]);
        let mut st = QueryStats::default();
        idx.query_with(&q, nq, dim, k, &qp, &mut ids, &mut sc, Some(&mut st))
            .unwrap();
        (ids, sc.iter().map(|s| s.to_bits()).collect::<Vec<_>>(), st)
    };
    for nq in [2, 64, 100, nq] {
        let want = run(nq, 0);
        assert!(want.2.lists > 2 * nq as u64, "queries visit several lists");
        for t in [2, 3, 8, QUERY_THREADS_ALL] {
            assert_eq!(run(nq, t), want, "nq {nq} threads {t}");
        }
    }
}

/// The index keeps its query threads between calls; callers on several
/// threads at once share one index, and the calls that find its threads
/// busy run on threads of their own: every call still answers the same.
#[test]
fn concurrent_threaded_calls_on_one_index_answer_the_same() {
    let g = lshk::data::structured_layer(ROWS, DIM, 40, 5);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 9);
    for family in [Family::Ivf, Family::SimHash] {
        let p = IndexParams {
            family,
            bits: 8,
            tables: 12,
            ..Default::default()
        };
        let idx = Index::build(&g.w, Some(&g.bias), ROWS, DIM, DIM, &p, None).unwrap();
        let want = answers(&idx, &q, NQ, 0);
        std::thread::scope(|s| {
            for c in 0..3u32 {
                let (idx, q, want) = (&idx, &q, &want);
                s.spawn(move || {
                    for r in 0..20u32 {
                        let got = answers(idx, q, NQ, 2 + (c + r) % 3);
                        assert_eq!(&got, want, "{family:?} caller {c} call {r}");
                    }
                });
            }
        });
        // Dropping the index joins the threads it kept.
        drop(idx);
    }
}
