//! Seeded fuzz of the FGD graph's query options through the C ABI
//! (`lshk_graph_query_ex`, issue 16): random valid and invalid
//! arguments on graphs of every storage. A valid call must give the same
//! bits as the Rust `Graph::search_with` on an identical graph; an invalid
//! one its documented status, with nothing written; no call writes past
//! its outputs. (A new file: tests/fuzz_args.rs is being restructured.)
//!
//! `LSHK_FUZZ_GRAPH_ITERS` (default 1500 per graph) sets the length.

use std::ptr::{null, null_mut};

use lshk::ffi::graph::*;
use lshk::ffi::*;
use lshk::graph::{Graph, GraphParams, SearchParams, Storage, Walk};
use lshk::rng::SplitMix64;

const GUARD: usize = 8;
const ID_SENT: u32 = 0xDEAD_BEEF;
const SC_SENT: f32 = -1234.5;

struct Fx {
    h: *mut lshk_graph,
    mirror: Graph,
    rows: usize,
    dim: usize,
}

impl Drop for Fx {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_graph_build.
        unsafe { lshk_graph_free(self.h) };
    }
}

fn build(storage: u32, i: usize) -> Fx {
    let (rows, dim) = (120 + 70 * i, 3 + 9 * i);
    let layer = lshk::data::structured_layer(rows, dim, 6, 77 + i as u64);
    let mut p = lshk_graph_params_default();
    p.m = 4 + i as u32;
    p.ef_construction = 20;
    p.storage = storage;
    p.threads = 1;
    p.seed = 5 + i as u64;
    let mut h = null_mut();
    // SAFETY: W and bias of the stated sizes; writable out.
    let st = unsafe {
        lshk_graph_build(
            layer.w.as_ptr(),
            layer.bias.as_ptr(),
            rows,
            dim,
            dim,
            &p,
            &mut h,
        )
    };
    assert_eq!(st, LSHK_STATUS_OK);
    let mirror = Graph::build(
        &layer.w,
        Some(&layer.bias),
        rows,
        dim,
        dim,
        &GraphParams {
            m: p.m,
            ef_construction: 20,
            threads: 1,
            storage: Storage::from_u32(storage).unwrap(),
            seed: p.seed,
        },
    )
    .unwrap();
    Fx {
        h,
        mirror,
        rows,
        dim,
    }
}

#[test]
fn fuzz_graph_query_ex() {
    let iters: usize = std::env::var("LSHK_FUZZ_GRAPH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let fxs = [
        build(LSHK_GRAPH_STORAGE_F32, 0),
        build(LSHK_GRAPH_STORAGE_BF16, 1),
        build(LSHK_GRAPH_STORAGE_I8, 2),
    ];
    let mut r = SplitMix64::new(0x6a09_e667);
    let mut counts = [0usize; 12];
    for fx in &fxs {
        for _ in 0..iters {
            let (rows, dim) = (fx.rows, fx.dim);
            let mut p = lshk_graph_query_params_default();
            p.walk = (r.next_u64() % 2) as u32;
            p.ef = match r.next_u64() % 4 {
                0 => 1,
                1 => u32::MAX,
                _ => 1 + (r.next_u64() % (2 * rows as u64)) as u32,
            };
            p.rerank = match r.next_u64() % 3 {
                0 => 0,
                1 => u32::MAX,
                _ => (r.next_u64() % 40) as u32,
            };
            let k = (r.next_u64() % 15) as u32;
            let nq = (r.next_u64() % 4) as usize;
            let q_stride = dim + (r.next_u64() % 3) as usize;
            let ql = if nq == 0 {
                0
            } else {
                (nq - 1) * q_stride + dim
            };
            let mut q: Vec<f32> = (0..ql.max(1)).map(|_| r.next_normal() as f32).collect();
            let n = nq * k as usize;
            let mut ids = vec![ID_SENT; n + GUARD];
            let mut sc = vec![SC_SENT; n + GUARD];
            let mut stats = lshk_graph_stats {
                struct_size: std::mem::size_of::<lshk_graph_stats>() as u32,
                reserved: 0,
                distances: 0,
            };
            let mut use_p = true;
            let (mut use_scores, mut use_stats) = (
                !r.next_u64().is_multiple_of(4),
                !r.next_u64().is_multiple_of(3),
            );
            let mut handle = fx.h as *const lshk_graph;
            let (mut q_null, mut ids_null) = (false, false);
            let mut q_stride_c = q_stride;
            // One mutation (or none) per call; its documented status.
            let mutation = (r.next_u64() % 12) as usize;
            counts[mutation] += 1;
            let want = match mutation {
                0 => {
                    p.walk = 2 + (r.next_u64() % 1000) as u32;
                    LSHK_STATUS_INVALID_ARGUMENT
                }
                1 => {
                    p.ef = 0;
                    LSHK_STATUS_INVALID_ARGUMENT
                }
                2 => {
                    p.struct_size = (r.next_u64() % 16) as u32;
                    LSHK_STATUS_INVALID_ARGUMENT
                }
                3 => {
                    use_p = false; // defaults: WALK_EXACT, ef 100
                    LSHK_STATUS_OK
                }
                4 if nq > 0 => {
                    let i = (r.next_u64() % nq as u64) as usize * q_stride
                        + (r.next_u64() % dim as u64) as usize;
                    q[i] =
                        [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][(r.next_u64() % 3) as usize];
                    LSHK_STATUS_NON_FINITE
                }
                5 if nq > 0 => {
                    q_null = true;
                    LSHK_STATUS_NULL_POINTER
                }
                6 if n > 0 => {
                    ids_null = true;
                    LSHK_STATUS_NULL_POINTER
                }
                7 if nq > 1 => {
                    q_stride_c = (r.next_u64() % dim as u64) as usize;
                    LSHK_STATUS_INVALID_ARGUMENT
                }
                8 => {
                    use_stats = true;
                    stats.struct_size = (r.next_u64() % 16) as u32;
                    LSHK_STATUS_INVALID_ARGUMENT
                }
                9 => {
                    handle = null();
                    LSHK_STATUS_NULL_POINTER
                }
                10 => {
                    use_scores = false;
                    LSHK_STATUS_OK
                }
                _ => LSHK_STATUS_OK,
            };
            let q_before = q.clone();
            // SAFETY: every non-NULL pointer covers what the arguments
            // promise (q: ql floats, ids/sc: n values + guard, stats and
            // p: whole structs); the invalid ones are the documented
            // refusals above.
            let st = unsafe {
                lshk_graph_query_ex(
                    handle,
                    if use_p { &p } else { null() },
                    if q_null { null() } else { q.as_ptr() },
                    nq,
                    q_stride_c,
                    k,
                    if ids_null {
                        null_mut()
                    } else {
                        ids.as_mut_ptr()
                    },
                    if use_scores {
                        sc.as_mut_ptr()
                    } else {
                        null_mut()
                    },
                    if use_stats { &mut stats } else { null_mut() },
                )
            };
            assert_eq!(
                st, want,
                "mutation {mutation}: walk {} ef {} rerank {} k {k} nq {nq} stride {q_stride_c}",
                p.walk, p.ef, p.rerank
            );
            assert_eq!(q.len(), q_before.len());
            assert!(
                q.iter()
                    .zip(&q_before)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "q changed"
            );
            assert!(ids[n..].iter().all(|&v| v == ID_SENT), "wrote past out_ids");
            assert!(
                sc[n..].iter().all(|&v| v == SC_SENT),
                "wrote past out_scores"
            );
            if st != LSHK_STATUS_OK {
                assert!(ids.iter().all(|&v| v == ID_SENT), "refused call wrote ids");
                assert!(
                    sc.iter().all(|&v| v == SC_SENT),
                    "refused call wrote scores"
                );
                continue;
            }
            let sp = if use_p {
                SearchParams {
                    ef: p.ef as usize,
                    walk: Walk::from_u32(p.walk).unwrap(),
                    rerank: p.rerank as usize,
                }
            } else {
                SearchParams::default()
            };
            let (mut wi, mut ws) = (vec![0u32; n], vec![0f32; n]);
            fx.mirror
                .search_with(
                    lshk::isa::active(),
                    &q,
                    nq,
                    q_stride,
                    k as usize,
                    &sp,
                    &mut wi,
                    &mut ws,
                    None,
                )
                .unwrap();
            assert_eq!(&ids[..n], &wi[..], "ids differ from the Rust search");
            if use_scores {
                assert!(
                    sc[..n]
                        .iter()
                        .zip(&ws)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "scores differ from the Rust search"
                );
            }
            for i in 0..nq {
                let row = &ids[i * k as usize..(i + 1) * k as usize];
                assert!(row.iter().all(|&v| (v as usize) < rows || v == u32::MAX));
            }
        }
    }
    assert!(
        counts.iter().all(|&c| c > 0),
        "every mutation ran: {counts:?}"
    );
}
