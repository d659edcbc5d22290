//! After warm-up, a query allocates nothing: a counting global allocator
//! counts the allocations made on the calling thread across repeated calls.
//! The Rust queries of every LSH family, storage and transform (with
//! multi-probing on SimHash, with and without scores), and through the C
//! ABI every per-batch call of serving, decoding and training: queries and
//! candidate sets of every source, the gathered matmul, top-k, softmax,
//! the shard merge, hashing and gathers, the union and the sampling
//! probabilities, HRR, cross-entropy, the query gradient, SGD and Adam.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-init
// thread-local Cell (no allocation, no re-entrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn count() -> u64 {
    COUNT.with(|c| c.get())
}

#[test]
fn queries_do_not_allocate_after_warm_up() {
    // The counter works.
    let c0 = count();
    let v = std::hint::black_box(vec![1u8; 10]);
    assert!(count() > c0);
    drop(v);
    let (rows, dim) = (4000, 24);
    let mut r = SplitMix64::new(1);
    let w: Vec<f32> = (0..rows * dim).map(|_| r.next_normal() as f32).collect();
    let bias: Vec<f32> = (0..rows).map(|_| r.next_normal() as f32).collect();
    let nq = 16;
    let q: Vec<f32> = (0..nq * dim).map(|_| r.next_normal() as f32).collect();
    let k = 10;
    for family in [Family::SimHash, Family::Dwta] {
        for storage in [Storage::F32, Storage::Bf16, Storage::F16, Storage::I8] {
            for transform in [Transform::None, Transform::BiasAug, Transform::Mips] {
                let p = IndexParams {
                    family,
                    bits: if family == Family::SimHash { 8 } else { 4 },
                    tables: 10,
                    storage,
                    transform,
                    threads: 1,
                    ..Default::default()
                };
                let mut idx = Index::build(&w, Some(&bias), rows, dim, dim, &p, None).unwrap();
                if storage == Storage::F32 && transform == Transform::BiasAug {
                    // The scorer's code stage runs on the same scratch.
                    idx.set_codes(lshk::ivf::Codes::I8, 12).unwrap();
                }
                let g = GatherParams {
                    probes: if family == Family::SimHash { 2 } else { 0 },
                    ..Default::default()
                };
                let mut ids = vec![0u32; nq * k];
                let mut sc = vec![0f32; nq * k];
                let mut run = |scores: bool| {
                    let s = if scores { Some(&mut sc[..]) } else { None };
                    idx.query_impl(&q, nq, dim, k as u32, &g.into(), &mut ids, s, None)
                        .unwrap();
                };
                for _ in 0..3 {
                    run(true);
                    run(false);
                }
                let before = count();
                for i in 0..100 {
                    run(i % 2 == 0);
                }
                let n = count() - before;
                assert_eq!(
                    n, 0,
                    "{n} allocations in 100 queries ({family:?} {storage:?} {transform:?})"
                );
            }
        }
    }
    println!(
        "0 allocations per query after warm-up (24 configurations, 2 with row codes, x 100 \
         batches of {nq})"
    );
}

// ------------------------------------------------------------ the C ABI

use lshk::ffi::index::{
    lshk_index, lshk_index_build, lshk_index_free, lshk_index_params_default,
    LSHK_STORAGE_BORROWED_F32,
};
use lshk::ffi::{lshk_status, LSHK_STATUS_OK};

/// A random layer of `rows` x `dim` with a bias, and `nq` queries.
fn layer(seed: u64, rows: usize, dim: usize, nq: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut r = SplitMix64::new(seed);
    let w = (0..rows * dim).map(|_| r.next_normal() as f32).collect();
    let bias = (0..rows).map(|_| r.next_normal() as f32).collect();
    let q = (0..nq * dim).map(|_| r.next_normal() as f32).collect();
    (w, bias, q)
}

fn ok(s: lshk_status, what: &str) {
    assert_eq!(s, LSHK_STATUS_OK, "{what}");
}

/// Asserts that `f` allocates nothing on this thread in 50 calls after 8
/// warm-up calls.
fn no_allocations(what: &str, f: &mut dyn FnMut()) {
    for _ in 0..8 {
        f();
    }
    let before = count();
    for _ in 0..50 {
        f();
    }
    let n = count() - before;
    assert_eq!(n, 0, "{n} allocations in 50 calls of {what}");
}

/// An index of `source` (IVF with `codes`) over the borrowed `w` (rows x
/// dim) and `bias` (None: no bias), built on one thread; free it with
/// lshk_index_free before `w` goes.
fn c_index(
    w: &[f32],
    bias: Option<&[f32]>,
    rows: usize,
    dim: usize,
    source: u32,
    codes: u32,
) -> *mut lshk_index {
    let mut p = lshk_index_params_default();
    p.source = source;
    p.storage = LSHK_STORAGE_BORROWED_F32;
    if source == lshk::ffi::index::LSHK_SOURCE_IVF {
        p.ivf.codes = codes;
    }
    if source == lshk::ffi::index::LSHK_SOURCE_SIMHASH {
        p.lsh.bits_per_table = 8;
        p.lsh.tables = 6;
    }
    p.build_threads = 1;
    let mut idx = std::ptr::null_mut();
    let b = bias.map_or(std::ptr::null(), |b| b.as_ptr());
    // SAFETY: w holds rows * dim floats and bias (when given) rows; p and
    // idx are valid; the caller keeps w alive until the index is freed.
    ok(
        unsafe { lshk_index_build(w.as_ptr(), b, rows, dim, dim, &p, &mut idx) },
        "lshk_index_build",
    );
    idx
}

fn free_index(idx: *mut lshk_index) {
    // SAFETY: idx came from lshk_index_build and is freed once.
    ok(unsafe { lshk_index_free(idx) }, "lshk_index_free");
}

/// The same through the C ABI: `lshk_index_query` (its parameter and
/// bounds checks included) on the IVF source with int8 and 4-bit + int8
/// codes (the adaptive default and a fixed `nprobe`), on the graph and on
/// the forest, one query and a batch, with and without scores and
/// statistics, allocates nothing after warm-up.
#[test]
fn c_abi_queries_do_not_allocate_after_warm_up() {
    use lshk::ffi::index::*;
    let (rows, dim, nq) = (6000usize, 32usize, 16usize);
    let (w, bias, q) = layer(2, rows, dim, nq);
    let k = 10u32;
    let mut configs = 0;
    let cases = [
        (LSHK_SOURCE_IVF, LSHK_IVF_CODES_I8),
        (LSHK_SOURCE_IVF, LSHK_IVF_CODES_PQ4_I8),
        (LSHK_SOURCE_GRAPH, 0),
        (LSHK_SOURCE_FOREST, 0),
    ];
    for (source, codes) in cases {
        let idx = c_index(&w, Some(&bias), rows, dim, source, codes);
        let reaches: &[Option<f32>] = if source == LSHK_SOURCE_IVF {
            &[None, Some(0.0)]
        } else {
            &[None]
        };
        for &reach in reaches {
            let mut qp = lshk_query_params_default();
            if let Some(x) = reach {
                qp.ivf.reach = x;
                qp.ivf.nprobe = 4;
            }
            // B = 1 also with every core asked for: one query stays on the
            // calling thread, and the core count is not read again. A
            // batch split over two threads runs on the index's workers,
            // started in the warm-up: the call lends them its ranges and
            // allocates nothing either.
            for (b, threads) in [
                (1usize, 1u32),
                (1, LSHK_QUERY_THREADS_ALL),
                (nq, 1),
                (nq, 2),
            ] {
                qp.threads = threads;
                let mut ids = vec![0u32; b * k as usize];
                let mut sc = vec![0f32; b * k as usize];
                let mut st = lshk_query_stats {
                    struct_size: std::mem::size_of::<lshk_query_stats>() as u32,
                    ..Default::default()
                };
                let mut run = |i: usize, scores: bool| {
                    let qs = &q[(i % (nq / b)) * b * dim..];
                    let sp = if scores {
                        sc.as_mut_ptr()
                    } else {
                        std::ptr::null_mut()
                    };
                    // Statistics on every third call.
                    let stp: *mut lshk_query_stats = if i.is_multiple_of(3) {
                        &mut st
                    } else {
                        std::ptr::null_mut()
                    };
                    // SAFETY: qs holds b rows of dim floats; the outputs b * k
                    // values each; qp valid; idx live.
                    let s = unsafe {
                        lshk_index_query(
                            idx,
                            qs.as_ptr(),
                            b,
                            dim,
                            k,
                            &qp,
                            ids.as_mut_ptr(),
                            sp,
                            stp,
                        )
                    };
                    ok(s, "lshk_index_query");
                };
                // Warm-up on every query (a query that visits more lists
                // than any before may grow the thread's buffers).
                for i in 0..nq {
                    run(i, true);
                    run(i, false);
                }
                let mut i = 0;
                no_allocations(
                    &format!(
                        "lshk_index_query (source {source}, codes {codes}, reach {reach:?}, \
                         B = {b}, threads {threads})"
                    ),
                    &mut || {
                        run(i, i % 2 == 0);
                        i += 1;
                    },
                );
                configs += 1;
            }
        }
        free_index(idx);
    }
    println!("0 allocations per lshk_index_query call after warm-up ({configs} configurations)");
}

/// A batch split over two threads that share each IVF block's list scans
/// (rows of at least 256 bytes of codes: `ivf::split`) allocates nothing
/// after warm-up either: the members run on the index's workers with
/// their threads' scratch, and meet at barriers on the caller's stack.
#[test]
fn shared_block_queries_do_not_allocate_after_warm_up() {
    use lshk::ffi::index::*;
    let (rows, dim, nq) = (4000usize, 260usize, 48usize);
    let (w, bias, q) = layer(3, rows, dim, nq);
    let k = 10u32;
    let idx = c_index(
        &w,
        Some(&bias),
        rows,
        dim,
        LSHK_SOURCE_IVF,
        LSHK_IVF_CODES_I8,
    );
    let mut qp = lshk_query_params_default();
    qp.threads = 2;
    let mut ids = vec![0u32; nq * k as usize];
    let mut sc = vec![0f32; nq * k as usize];
    let mut run = || {
        // SAFETY: q holds nq rows of dim floats; the outputs nq * k values
        // each; qp valid; idx live.
        let s = unsafe {
            lshk_index_query(
                idx,
                q.as_ptr(),
                nq,
                dim,
                k,
                &qp,
                ids.as_mut_ptr(),
                sc.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        ok(s, "lshk_index_query");
    };
    no_allocations(
        "lshk_index_query (IVF, 260 dims, B = 48, threads 2)",
        &mut run,
    );
    free_index(idx);
}

/// The per-batch C calls of a serving loop allocate nothing after warm-up
/// either: the candidate sets of an index (IVF, forest, SimHash), the
/// gathered matmul over them, top-k, softmax, and the merge of shards'
/// top-k lists.
#[test]
fn c_abi_serving_calls_do_not_allocate_after_warm_up() {
    use lshk::ffi::index::*;
    use lshk::ffi::matmul::*;
    let (rows, dim, nq) = (6000usize, 32usize, 8usize);
    let (w, bias, q) = layer(3, rows, dim, nq);
    let k = 10u32;
    let measure = no_allocations;
    for source in [LSHK_SOURCE_IVF, LSHK_SOURCE_FOREST, LSHK_SOURCE_SIMHASH] {
        let idx = c_index(&w, Some(&bias), rows, dim, source, LSHK_IVF_CODES_I8);
        let mut qp = lshk_query_params_default();
        qp.threads = 1;
        let cap = nq * rows;
        let mut ids = vec![0u32; cap];
        let mut offs = vec![0usize; nq + 1];
        let mut needed = 0usize;
        let mut cand = || {
            // SAFETY: q holds nq rows; ids cap values, offs nq + 1.
            let s = unsafe {
                lshk_index_candidates(
                    idx,
                    q.as_ptr(),
                    nq,
                    dim,
                    k,
                    &qp,
                    ids.as_mut_ptr(),
                    cap,
                    offs.as_mut_ptr(),
                    &mut needed,
                )
            };
            ok(s, "lshk_index_candidates");
        };
        measure(
            &format!("lshk_index_candidates (source {source})"),
            &mut cand,
        );
        cand();
        let total = offs[nq];
        let view = lshk_weights_view {
            struct_size: std::mem::size_of::<lshk_weights_view>() as u32,
            storage: LSHK_STORAGE_BORROWED_F32,
            w: w.as_ptr().cast(),
            scales: std::ptr::null(),
            bias: bias.as_ptr(),
            rows,
            dim,
            w_stride: dim,
        };
        let mut logits = vec![0f32; total.max(1)];
        measure("lshk_gathered_matmul", &mut || {
            // SAFETY: the CSR candidates above, ids < rows; out total floats.
            let s = unsafe {
                lshk_gathered_matmul(
                    &view,
                    q.as_ptr(),
                    nq,
                    dim,
                    ids.as_ptr(),
                    offs.as_ptr(),
                    logits.as_mut_ptr(),
                    total,
                )
            };
            ok(s, "lshk_gathered_matmul");
        });
        let (mut tid, mut tsc) = (vec![0u32; nq * k as usize], vec![0f32; nq * k as usize]);
        measure("lshk_topk", &mut || {
            // SAFETY: scores / ids in CSR by offs; outputs nq * k.
            let s = unsafe {
                lshk_topk(
                    logits.as_ptr(),
                    ids.as_ptr(),
                    offs.as_ptr(),
                    nq,
                    k,
                    tid.as_mut_ptr(),
                    tsc.as_mut_ptr(),
                )
            };
            ok(s, "lshk_topk");
        });
        let mut probs = vec![0f32; total.max(1)];
        let mut lse = vec![0f32; nq];
        measure("lshk_softmax", &mut || {
            // SAFETY: scores in CSR by offs; out total floats, lse nq.
            let s = unsafe {
                lshk_softmax(
                    logits.as_ptr(),
                    offs.as_ptr(),
                    nq,
                    probs.as_mut_ptr(),
                    lse.as_mut_ptr(),
                )
            };
            ok(s, "lshk_softmax");
        });
        let shards = [
            lshk_shard_topk {
                ids: tid.as_ptr(),
                scores: tsc.as_ptr(),
                k: k as usize,
                first_row: 0,
                reserved: 0,
            },
            lshk_shard_topk {
                ids: tid.as_ptr(),
                scores: tsc.as_ptr(),
                k: k as usize,
                first_row: rows as u32,
                reserved: 0,
            },
        ];
        let (mut mid, mut msc) = (vec![0u32; nq * k as usize], vec![0f32; nq * k as usize]);
        measure("lshk_topk_merge", &mut || {
            // SAFETY: two shards of nq * k entries each; outputs nq * k.
            let s = unsafe {
                lshk_topk_merge(
                    shards.as_ptr(),
                    2,
                    nq,
                    k as usize,
                    mid.as_mut_ptr(),
                    msc.as_mut_ptr(),
                )
            };
            ok(s, "lshk_topk_merge");
        });
        free_index(idx);
    }
}

/// The training step's C calls (cross-entropy over the candidates'
/// logits, the query gradient, and an SGD update position by position and grouped by row, or a lazy Adam update
/// of the rows), on one thread, allocate nothing after warm-up.
#[test]
fn c_abi_training_calls_do_not_allocate_after_warm_up() {
    use lshk::ffi::index::*;
    use lshk::ffi::train::*;
    let (rows, dim, nb, per) = (3000usize, 32usize, 8usize, 40usize);
    let mut r = SplitMix64::new(4);
    let mut w: Vec<f32> = (0..rows * dim)
        .map(|_| r.next_normal() as f32 * 0.1)
        .collect();
    let q: Vec<f32> = (0..nb * dim).map(|_| r.next_normal() as f32).collect();
    let ids: Vec<u32> = (0..nb * per)
        .map(|_| (r.next_u64() % rows as u64) as u32)
        .collect();
    let offs: Vec<usize> = (0..=nb).map(|b| b * per).collect();
    let targets: Vec<f32> = (0..nb * per)
        .map(|j| if j % per == 0 { 1.0 } else { 0.0 })
        .collect();
    let grad: Vec<f32> = (0..nb * per)
        .map(|_| r.next_normal() as f32 * 0.01)
        .collect();
    let mut g2 = vec![0f32; nb * per];
    let mut loss = vec![0f32; nb];
    let mut dq = vec![0f32; nb * dim];
    let measure = no_allocations;
    // threads 0 (every core) too: the batch is too small for a second
    // thread, so the call stays on this one, and the core count is not
    // read again.
    for threads in [1u32, 0] {
        measure(
            &format!("lshk_softmax_xent_csr (threads {threads})"),
            &mut || {
                // SAFETY: every buffer holds the counts the call reads and writes.
                let s = unsafe {
                    lshk_softmax_xent_csr(
                        grad.as_ptr(),
                        targets.as_ptr(),
                        offs.as_ptr(),
                        nb,
                        threads,
                        loss.as_mut_ptr(),
                        g2.as_mut_ptr(),
                    )
                };
                ok(s, "lshk_softmax_xent_csr");
            },
        );
    }
    for threads in [1u32, 0] {
        measure(&format!("lshk_gather_dq (threads {threads})"), &mut || {
            // SAFETY: as above.
            let s = unsafe {
                lshk_gather_dq(
                    LSHK_STORAGE_F32,
                    w.as_ptr().cast(),
                    rows,
                    dim,
                    dim,
                    grad.as_ptr(),
                    ids.as_ptr(),
                    offs.as_ptr(),
                    nb,
                    threads,
                    dq.as_mut_ptr(),
                    dim,
                )
            };
            ok(s, "lshk_gather_dq");
        });
    }
    // All rows (SGD position by position), then a batch covering many of
    // few rows (2 n >= rows: grouped by row).
    let few = 400usize;
    let ids_few: Vec<u32> = ids.iter().map(|&i| i % few as u32).collect();
    for (n_rows, ids_b, what) in [
        (rows, &ids, "lshk_rows_update_sgd"),
        (few, &ids_few, "lshk_rows_update_sgd (grouped by row)"),
    ] {
        measure(what, &mut || {
            // SAFETY: the first n_rows rows of w, every id below n_rows;
            // w is not aliased by the inputs.
            let s = unsafe {
                lshk_rows_update_sgd(
                    w.as_mut_ptr(),
                    n_rows,
                    dim,
                    dim,
                    q.as_ptr(),
                    dim,
                    grad.as_ptr(),
                    ids_b.as_ptr(),
                    offs.as_ptr(),
                    nb,
                    1e-3,
                    1,
                )
            };
            ok(s, what);
        });
    }
    let mut adam = std::ptr::null_mut();
    // SAFETY: NULL parameters take the defaults; adam is written.
    ok(
        unsafe { lshk_adam_new(rows, dim, std::ptr::null(), &mut adam) },
        "lshk_adam_new",
    );
    measure("lshk_adam_step", &mut || {
        // SAFETY: as above; the state is used by this thread only.
        let s = unsafe {
            lshk_adam_step(
                adam,
                w.as_mut_ptr(),
                rows,
                dim,
                dim,
                q.as_ptr(),
                dim,
                grad.as_ptr(),
                ids.as_ptr(),
                offs.as_ptr(),
                nb,
                1,
            )
        };
        ok(s, "lshk_adam_step");
    });
    // SAFETY: created above, freed once.
    ok(unsafe { lshk_adam_free(adam) }, "lshk_adam_free");
}

/// The hashing and decoding C calls allocate nothing after warm-up either:
/// SimHash and DWTA codes, a gather from tables, the union of a batch's
/// candidate sets, the sampling probabilities of a SimHash index, and HRR
/// projection, binding and unbinding.
#[test]
fn c_abi_hashing_and_decoding_calls_do_not_allocate_after_warm_up() {
    use lshk::ffi::dwta::*;
    use lshk::ffi::hrr::*;
    use lshk::ffi::index::*;
    use lshk::ffi::simhash::*;
    use lshk::ffi::tables::*;
    use lshk::ffi::train_logq::*;
    let (rows, dim, nq) = (4000usize, 32usize, 8usize);
    let (kb, l) = (8u32, 6u32);
    let (w, _, q) = layer(5, rows, dim, nq);
    let mut r = SplitMix64::new(6);
    let measure = no_allocations;
    // SimHash codes of the rows (tables) and of the queries (gathers).
    let mut sh = std::ptr::null_mut();
    ok(
        lshk_simhash_new(dim as u32, kb, l, 0, 7, &mut sh),
        "lshk_simhash_new",
    );
    let mut row_codes = vec![0u32; rows * l as usize];
    // SAFETY: w holds rows rows of dim; row_codes rows * L.
    ok(
        unsafe {
            lshk_simhash_hash(
                sh,
                w.as_ptr(),
                rows,
                dim,
                row_codes.as_mut_ptr(),
                row_codes.len(),
            )
        },
        "lshk_simhash_hash",
    );
    let mut qc = vec![0u32; nq * l as usize];
    measure("lshk_simhash_hash", &mut || {
        // SAFETY: q holds nq rows; qc nq * L.
        let s = unsafe { lshk_simhash_hash(sh, q.as_ptr(), nq, dim, qc.as_mut_ptr(), qc.len()) };
        ok(s, "lshk_simhash_hash");
    });
    let mut dw = std::ptr::null_mut();
    ok(
        lshk_dwta_new(dim as u32, 4, l, 8, 7, &mut dw),
        "lshk_dwta_new",
    );
    let mut dc = vec![0u32; nq * l as usize];
    measure("lshk_dwta_hash_dense", &mut || {
        // SAFETY: as above.
        let s = unsafe { lshk_dwta_hash_dense(dw, q.as_ptr(), nq, dim, dc.as_mut_ptr(), dc.len()) };
        ok(s, "lshk_dwta_hash_dense");
    });
    let mut t = std::ptr::null_mut();
    // SAFETY: row_codes holds rows * L codes.
    ok(
        unsafe { lshk_tables_build(row_codes.as_ptr(), rows, l, kb, 0, 7, 1, &mut t) },
        "lshk_tables_build",
    );
    let gp = lshk_gather_params_default();
    let cap = nq * rows;
    let (mut ids, mut offs, mut counts) = (vec![0u32; cap], vec![0usize; nq + 1], vec![0u32; cap]);
    let mut needed = 0usize;
    measure("lshk_tables_gather", &mut || {
        // SAFETY: qc holds nq * L codes; ids / counts cap, offs nq + 1.
        let s = unsafe {
            lshk_tables_gather(
                t,
                qc.as_ptr(),
                nq,
                &gp,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                0,
                ids.as_mut_ptr(),
                cap,
                offs.as_mut_ptr(),
                counts.as_mut_ptr(),
                &mut needed,
            )
        };
        ok(s, "lshk_tables_gather");
    });
    let total = offs[nq];
    // An index over the same rows: the union and the inclusion
    // probabilities of its candidate sets.
    // (c_index's SimHash index has K = kb, L = l.)
    let idx = c_index(&w, None, rows, dim, LSHK_SOURCE_SIMHASH, 0);
    let (mut uids, mut ucounts) = (vec![0u32; rows], vec![0u32; rows]);
    measure("lshk_index_union", &mut || {
        // SAFETY: ids holds total (< rows each) ids; outputs rows values.
        let s = unsafe {
            lshk_index_union(
                idx,
                ids.as_ptr(),
                total,
                64,
                9,
                uids.as_mut_ptr(),
                ucounts.as_mut_ptr(),
                rows,
                &mut needed,
            )
        };
        ok(s, "lshk_index_union");
    });
    let mut prob = vec![0f64; total.max(1)];
    measure("lshk_index_inclusion_prob", &mut || {
        // SAFETY: q holds nq rows; ids / offs the CSR above; prob total.
        let s = unsafe {
            lshk_index_inclusion_prob(
                idx,
                q.as_ptr(),
                nq,
                dim,
                ids.as_ptr(),
                offs.as_ptr(),
                std::ptr::null(),
                prob.as_mut_ptr(),
            )
        };
        ok(s, "lshk_index_inclusion_prob");
    });
    // HRR on d = 64 (a power of two) and d = 48.
    for d in [64usize, 48] {
        let mut h = std::ptr::null_mut();
        ok(lshk_hrr_new(d, &mut h), "lshk_hrr_new");
        let x: Vec<f32> = (0..nq * d).map(|_| r.next_normal() as f32).collect();
        let y: Vec<f32> = (0..nq * d).map(|_| r.next_normal() as f32).collect();
        let mut out = vec![0f32; nq * d];
        measure("lshk_hrr_project", &mut || {
            // SAFETY: x holds nq rows of d; out as many.
            ok(
                unsafe { lshk_hrr_project(h, x.as_ptr(), nq, out.as_mut_ptr()) },
                "project",
            );
        });
        measure("lshk_hrr_bind", &mut || {
            // SAFETY: x and y hold nq rows of d; out as many.
            ok(
                unsafe { lshk_hrr_bind(h, x.as_ptr(), nq, y.as_ptr(), nq, out.as_mut_ptr()) },
                "bind",
            );
        });
        measure("lshk_hrr_unbind", &mut || {
            // SAFETY: as above.
            let s = unsafe {
                lshk_hrr_unbind(
                    h,
                    LSHK_HRR_INVERSE_APPROX,
                    x.as_ptr(),
                    nq,
                    y.as_ptr(),
                    nq,
                    out.as_mut_ptr(),
                )
            };
            ok(s, "unbind");
        });
        // SAFETY: created above, freed once.
        ok(unsafe { lshk_hrr_free(h) }, "lshk_hrr_free");
    }
    free_index(idx);
    // SAFETY: each created above, freed once.
    unsafe {
        ok(lshk_tables_free(t), "lshk_tables_free");
        ok(lshk_dwta_free(dw), "lshk_dwta_free");
        ok(lshk_simhash_free(sh), "lshk_simhash_free");
    }
}
