//! The one index across its candidate sources: the build parameters every
//! source reads (source, storage, transform, each knob struct's checks),
//! queries and candidate sets of an index of any source with every
//! source's knobs (each source reads its own), the calls only some
//! sources have (UNSUPPORTED on the others, nothing written), describe /
//! memory / weights / the tables' memory, and lshk_index_load (with W and
//! its stride) of saved indexes of every source.

use std::path::PathBuf;

use super::*;
use lshk::ffi::train_logq::lshk_index_inclusion_prob;

/// The build parameters of the Rust API for a valid C `p`.
pub(crate) fn rust_params(p: &lshk_index_params) -> IndexParams {
    let graph_storage = match p.graph.storage {
        LSHK_STORAGE_BF16 => lshk::graph::Storage::Bf16,
        LSHK_STORAGE_I8 => lshk::graph::Storage::I8,
        _ => lshk::graph::Storage::F32,
    };
    let copy = |ptr: *const f32, n: usize| {
        // SAFETY: a valid params struct: a non-NULL array holds its length.
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec())
    };
    IndexParams {
        family: Family::from_u32(p.source).expect("a valid source"),
        bits: p.lsh.bits_per_table,
        tables: p.lsh.tables,
        sparsity: p.lsh.sparsity,
        bin_size: p.lsh.bin_size,
        seed: p.lsh.seed,
        range_bits: p.lsh.range_bits,
        bucket_cap: p.lsh.bucket_cap,
        storage: Storage::from_u32(p.storage).expect("a valid storage"),
        transform: Transform::from_u32(p.transform).expect("a valid transform"),
        threads: 1,
        planes: copy(p.lsh.planes, p.lsh.planes_len),
        // SAFETY: as above.
        dwta_map: (!p.lsh.dwta_map.is_null()).then(|| {
            unsafe { std::slice::from_raw_parts(p.lsh.dwta_map, p.lsh.dwta_map_len) }.to_vec()
        }),
        graph: lshk::graph::GraphParams {
            m: p.graph.m,
            ef_construction: p.graph.ef_construction,
            threads: 1,
            storage: graph_storage,
            seed: p.graph.seed,
        },
        ivf: IvfParams {
            nlist: p.ivf.nlist,
            iters: p.ivf.iters,
            train_rows: p.ivf.train_rows,
            codes: Codes::from_u32(p.ivf.codes).expect("valid codes"),
            pq_m: p.ivf.pq_m,
            threads: 1,
            seed: p.ivf.seed,
            ..Default::default()
        },
        ivf_row_weights: copy(p.ivf.row_weights, p.ivf.n_weights),
        forest: lshk::forest::ForestParams {
            trees: p.forest.trees,
            leaf_size: p.forest.leaf_size,
            seed: p.forest.seed,
            threads: 1,
            normalize_rows: p.forest.normalize_rows == 1,
        },
    }
}

/// lshk_index_describe of a live handle (`None` if it fails).
pub(crate) fn describe(h: *const lshk_index) -> Option<lshk_index_info> {
    // SAFETY: the info struct is plain data (integers); all zero is valid.
    let mut info: lshk_index_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<lshk_index_info>() as u32;
    // SAFETY: a live handle; a writable info whose struct_size is set.
    (unsafe { lshk_index_describe(h, &mut info) } == LSHK_STATUS_OK).then_some(info)
}

/// What lshk_index_describe must report of the mirror index.
fn info_of(ix: &Index) -> lshk_index_info {
    let (nlist, codes) = ix
        .ivf()
        .map_or((0, 0), |l| (l.nlist() as u32, l.params().codes as u32));
    lshk_index_info {
        struct_size: std::mem::size_of::<lshk_index_info>() as u32,
        source: ix.family() as u32,
        storage: ix.storage() as u32,
        transform: ix.transform() as u32,
        rows: ix.rows(),
        dim: ix.dim(),
        bits_per_table: ix.bits(),
        tables: ix.forest().map_or(ix.num_tables(), |f| f.params().trees),
        nlist,
        codes,
        labelled: u32::from(ix.label_state().is_some()),
        reserved: 0,
    }
}

/// Build parameters followed by fields a newer header would add (a larger
/// struct_size is accepted, its tail ignored).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigIndexParams {
    pub(crate) p: lshk_index_params,
    pub(crate) tail: [u8; 24],
}

pub(crate) struct ForestX {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: Index,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    pub(crate) w: Vec<f32>,
    pub(crate) storage: u32,
}

impl Drop for ForestX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build.
        unsafe { lshk_index_free(self.h) };
    }
}

/// Forest-source indexes (W borrowed, W copied) for the tests that take
/// an index of every source.
pub(crate) fn build_forests() -> Vec<ForestX> {
    [LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32]
        .iter()
        .enumerate()
        .map(|(i, &storage)| {
            let (rows, dim) = (140 + 60 * i, 6 + 3 * i);
            let layer = lshk::data::structured_layer(rows, dim, 6, 91 + i as u64);
            let mut p = lshk_index_params_default();
            p.source = LSHK_SOURCE_FOREST;
            p.storage = storage;
            p.forest.trees = 3 + i as u32;
            p.forest.leaf_size = 16;
            p.forest.seed = 4 + i as u64;
            p.build_threads = 1;
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes (W kept alive in
            // ForestX: the Vec's heap buffer does not move); writable out.
            let st = unsafe {
                lshk_index_build(
                    layer.w.as_ptr(),
                    layer.bias.as_ptr(),
                    rows,
                    dim,
                    dim,
                    &p,
                    &mut h,
                )
            };
            assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
            // SAFETY: as above (the mirror is dropped before W).
            let mirror = unsafe {
                Index::build_borrowed(
                    &layer.w,
                    Some(&layer.bias),
                    rows,
                    dim,
                    dim,
                    &rust_params(&p),
                    None,
                )
            }
            .unwrap();
            ForestX {
                h,
                mirror,
                dim,
                rows,
                w: layer.w,
                storage,
            }
        })
        .collect()
}

/// One index of the environment, whatever its source.
#[derive(Clone, Copy)]
pub(crate) struct AnyX<'a> {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: &'a Index,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    /// W at stride dim.
    pub(crate) w: &'a [f32],
    pub(crate) source: u32,
    pub(crate) storage: u32,
}

/// Every index of the environment (LSH, IVF, graph, forest).
pub(crate) fn every_index(e: &Env) -> Vec<AnyX<'_>> {
    let mut v = Vec::new();
    for x in &e.idx {
        v.push(AnyX {
            h: x.h,
            mirror: &x.mirror,
            dim: x.dim,
            rows: x.rows,
            w: &x.w,
            source: x.family as u32,
            storage: x.storage as u32,
        });
    }
    for x in &e.ivfs {
        v.push(AnyX {
            h: x.h,
            mirror: &x.mirror,
            dim: x.dim,
            rows: x.rows,
            w: &x.w,
            source: LSHK_SOURCE_IVF,
            storage: x.storage as u32,
        });
    }
    for x in &e.graphs {
        v.push(AnyX {
            h: x.h,
            mirror: &x.mirror,
            dim: x.dim,
            rows: x.rows,
            w: &x.w,
            source: LSHK_SOURCE_GRAPH,
            storage: x.storage,
        });
    }
    for x in &e.forests {
        v.push(AnyX {
            h: x.h,
            mirror: &x.mirror,
            dim: x.dim,
            rows: x.rows,
            w: &x.w,
            source: LSHK_SOURCE_FOREST,
            storage: x.storage,
        });
    }
    v
}

/// Queries near rows of `x` (row i near row 37 i).
fn queries_near(r: &mut R, x: &AnyX, n: usize, stride: usize) -> Vec<f32> {
    let ql = strided(n, x.dim, stride).unwrap() as usize;
    (0..ql)
        .map(|i| {
            let row = (i / stride * 37) % x.rows;
            x.w[row * x.dim + (i % stride).min(x.dim - 1)] + r.f(-0.2, 0.2)
        })
        .collect()
}

/// The Rust form of valid C query parameters.
fn rust_query(p: &lshk_query_params) -> lshk::index::QueryParams {
    lshk::index::QueryParams {
        gather: GatherParams {
            min_count: p.lsh.min_count,
            max_candidates: p.lsh.max_candidates,
            probes: p.lsh.probes,
            bits_per_table: p.lsh.bits_per_table,
        },
        graph: lshk::graph::SearchParams {
            ef: p.graph.ef as usize,
            walk: lshk::graph::Walk::from_u32(p.graph.walk).unwrap_or(lshk::graph::Walk::Exact),
            rerank: p.graph.rerank as usize,
        },
        ivf: SearchParams {
            nprobe: p.ivf.nprobe,
            rerank: p.ivf.rerank,
            reach: p.ivf.reach,
            refine: p.ivf.refine,
        },
        forest: lshk::forest::ForestQuery {
            set_size: p.forest.set_size,
            confidence: p.forest.confidence,
        },
        threads: p.threads,
    }
}

/// An index of any source queried (lshk_index_query) or asked for its
/// candidate sets (lshk_index_candidates) with every source's knobs, in
/// and out of their domains: only the index's own source's knobs (and
/// the fields every source checks) may refuse the call, and the answer
/// equals the Rust API's on the mirror index; a call valid by these rules
/// is refused only where the Rust API refuses it with the same status.
pub(crate) fn fuzz_source_query(c: &mut Ctx, e: &Env) {
    let all = every_index(e);
    let x = all[c.r.u(all.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let dim = x.dim;
    let nq = r.u(4);
    let mut q_stride = dim + r.u(2);
    let mut q = Arr::new(queries_near(r, &x, nq, q_stride), 0.0f32);
    let k = r.pick(&[0u32, 1, 5, 12]);
    let mut p = lshk_query_params_default();
    // Each source's knobs: valid values, and one out of its domain now
    // and then.
    p.lsh.min_count = r.pick(&[0, 1, 2]);
    p.lsh.max_candidates = r.pick(&[0, 0, 7]);
    if r.one_in(3) {
        p.lsh.probes = r.pick(&[1, 3, 4097]);
        p.lsh.bits_per_table = r.pick(&[0, 0, 5, 33]);
    }
    p.ivf.nprobe = r.pick(&[1, 3, u32::MAX, 0]);
    p.ivf.rerank = r.pick(&[0, 8, u32::MAX]);
    p.ivf.reach = r.pick(&[0.0, 3.0, -1.0, f32::NAN]);
    p.ivf.refine = r.pick(&[0, 256]);
    p.graph.ef = r.pick(&[1, 16, 0]);
    p.graph.walk = r.pick(&[LSHK_GRAPH_WALK_EXACT, LSHK_GRAPH_WALK_INT8]);
    p.graph.rerank = r.pick(&[0, 4]);
    p.forest.set_size = r.pick(&[0, 5, 300]);
    let mut pmode = r.pick(&[0, 0, 0, 1]); // 0 struct, 1 NULL
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(6);
        what.push(m);
        match m {
            // Any thread count is valid and answers the same.
            0 => p.threads = r.pick(&[0, 1, 2, 3, 64, u32::MAX]),
            1 => p.graph.reserved = r.pick(&[1, u32::MAX]),
            2 => p.forest.confidence = r.pick(&[0.5, 1.0, -1.0, 1.5, f32::NAN]),
            3 => p.graph.walk = r.pick(&[2, u32::MAX]),
            4 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_query_params>() as u32;
                p.struct_size = r.pick(&[0, 8, full - 1]);
            }
            _ => q_stride = dim - 1,
        }
    }
    let eff = if pmode == 1 {
        lshk_query_params_default()
    } else {
        p
    };
    if pmode == 0 {
        if (p.struct_size as usize) < std::mem::size_of::<lshk_query_params>() {
            v.err("struct_size too small");
        }
        if p.graph.reserved != 0 {
            v.err("a reserved field not 0");
        }
        if !(0.0..=1.0).contains(&p.forest.confidence) {
            v.err("forest.confidence outside [0, 1]");
        }
        if p.graph.walk > LSHK_GRAPH_WALK_INT8 {
            v.err("a walk that is no LSHK_GRAPH_WALK_* value");
        }
    }
    if q_stride < dim && nq > 1 {
        v.err("q_stride < dim");
    }
    q.need(strided(nq, dim, q_stride), &mut v, || 0.5);
    // The index's own knobs.
    match x.source {
        LSHK_SOURCE_SIMHASH | LSHK_SOURCE_DWTA => {
            let kb = x.mirror.bits();
            let g = &eff.lsh;
            if g.probes > 0
                && (x.source == LSHK_SOURCE_DWTA
                    || (g.bits_per_table != 0 && g.bits_per_table != kb)
                    || g.probes > 4096
                    || (kb < 32 && g.probes >= 1 << kb))
            {
                v.err("bad probes");
            }
        }
        LSHK_SOURCE_IVF
            if eff.ivf.nprobe == 0 || !(eff.ivf.reach.is_finite() && eff.ivf.reach >= 0.0) =>
        {
            v.err("bad IVF knobs")
        }
        LSHK_SOURCE_GRAPH if eff.graph.ef == 0 => v.err("ef 0"),
        _ => {}
    }
    let candidates = r.one_in(2);
    let func = if candidates {
        "lshk_index_candidates"
    } else {
        "lshk_index_query"
    };
    c.desc = format!(
        "{func} source {} storage {} nq {nq} qs {q_stride} k {k} pmode {pmode} lsh {:?} ivf {:?} graph {:?} forest {:?} muts {what:?}",
        x.source, x.storage, eff.lsh, eff.ivf, eff.graph, eff.forest
    );
    let pp: *const lshk_query_params = if pmode == 1 { null() } else { &p };
    let nk = nq * k as usize;
    let qd = view(
        &q,
        strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize,
    );
    let rqp = rust_query(&eff);
    let q0 = bits(&q.v);
    let qp = q.ptr();
    let (st, got, want): (lshk_status, Vec<u32>, Result<Vec<u32>, lshk::Status>) = if candidates {
        let cap = nq * x.rows + 1;
        let mut ids = vec![CANARY; cap + 1];
        let mut offs = vec![usize::MAX; nq + 2];
        let mut needed = usize::MAX;
        let (ip, op) = (ids.as_mut_ptr(), offs.as_mut_ptr());
        // SAFETY: q holds what nq and q_stride claim (or the call must
        // refuse the stride); ids hold cap, offsets nq + 1 (+ a guard).
        let st = c.call(func, || unsafe {
            lshk_index_candidates(x.h, qp, nq, q_stride, k, pp, ip, cap, op, &mut needed)
        });
        let mut rr = GatherResult::default();
        let want = x
            .mirror
            .candidate_sets(qd, nq, q_stride, k, &rqp, &mut rr)
            .map(|()| {
                let mut o: Vec<u32> = rr.offsets.iter().map(|&o| o as u32).collect();
                o.extend(&rr.ids);
                o
            })
            .map_err(|e| e.status);
        if ids[cap] != CANARY || offs[nq + 1] != usize::MAX {
            c.fail(format!("{func} wrote past its outputs"));
        }
        let got = if st == LSHK_STATUS_OK {
            let mut o: Vec<u32> = offs[..nq + 1].iter().map(|&o| o as u32).collect();
            o.extend(&ids[..needed.min(cap)]);
            o
        } else {
            if ids.iter().any(|&i| i != CANARY) || offs.iter().any(|&o| o != usize::MAX) {
                c.fail(format!("{func} failed with {st} but wrote an output"));
            }
            Vec::new()
        };
        (st, got, want)
    } else {
        let mut ids = vec![CANARY; nk + 1];
        let mut sc = vec![f32::from_bits(CANARY); nk + 1];
        let (ip, sp) = (ids.as_mut_ptr(), sc.as_mut_ptr());
        // SAFETY: as above; outputs of nq * k (+ a guard).
        let st = c.call(func, || unsafe {
            lshk_index_query(x.h, qp, nq, q_stride, k, pp, ip, sp, null_mut())
        });
        let (mut ri, mut rs) = (vec![0u32; nk], vec![0f32; nk]);
        let want = x
            .mirror
            .query_with(qd, nq, q_stride, k, &rqp, &mut ri, &mut rs, None)
            .map(|()| ri.iter().copied().chain(bits(&rs)).collect())
            .map_err(|e| e.status);
        if ids[nk] != CANARY || sc[nk].to_bits() != CANARY {
            c.fail(format!("{func} wrote past its outputs"));
        }
        let got = if st == LSHK_STATUS_OK {
            ids[..nk].iter().copied().chain(bits(&sc[..nk])).collect()
        } else {
            if ids.iter().any(|&i| i != CANARY) || sc.iter().any(|s| s.to_bits() != CANARY) {
                c.fail(format!("{func} failed with {st} but wrote an output"));
            }
            Vec::new()
        };
        (st, got, want)
    };
    if bits(&q.v) != q0 {
        c.fail(format!("{func} changed an input"));
    }
    if c.judge(func, st, &v) {
        match want {
            Ok(w) if w == got => {}
            Ok(_) => c.fail(format!("{func}: the answer differs from the Rust API's")),
            Err(e) => c.fail(format!("{func} returned OK, the Rust API {e:?}")),
        }
    } else if st != LSHK_STATUS_OK && v.expect_err.is_none() {
        match want {
            Ok(_) => c.fail(format!(
                "{func} refused a valid call with {st}: {}",
                last_msg()
            )),
            Err(e) if e as u32 != st => c.fail(format!("{func} returned {st}, the Rust API {e:?}")),
            Err(_) => {}
        }
    }
}

/// The calls only some sources have, each on an index of every source with
/// otherwise valid arguments: OK on its own sources (the read-only ones),
/// exactly UNSUPPORTED on the others (INVALID_ARGUMENT where the header
/// says so: a DWTA index for the SimHash-only training and logQ calls),
/// with the function's message, nothing written and the index unchanged.
pub(crate) fn fuzz_unsupported(c: &mut Ctx, e: &Env) {
    let all = every_index(e);
    let x = all[c.r.u(all.len())];
    let r = &mut c.r;
    let lsh = x.source == LSHK_SOURCE_SIMHASH || x.source == LSHK_SOURCE_DWTA;
    let mut which = r.u(12);
    // The family accessors (0 SimHash, 1 DWTA) succeed only on their own
    // source: half the time ask an LSH index for its own, so that both
    // get OK calls at any seed.
    if which < 2 && lsh && r.one_in(2) {
        which = usize::from(x.source == LSHK_SOURCE_DWTA);
    }
    let dim = x.dim;
    let q: Vec<f32> = (0..dim).map(|i| x.w[i] + 0.1).collect();
    let probe: Vec<f32> = (0..2 * dim).map(|i| x.w[i % x.w.len()] * 0.5).collect();
    let before = (
        answers(x.h, &probe, 2, dim),
        describe(x.h).map(|i| bits_of(&i)),
    );
    let mut out = [usize::MAX; 2];
    let mut outp = [std::ptr::dangling::<u8>(); 2];
    let (func, st, want): (&'static str, lshk_status, lshk_status) = match which {
        0 => {
            let st = c.call("lshk_index_simhash", || {
                // SAFETY: a live handle; a writable out.
                unsafe { lshk_index_simhash(x.h, outp.as_mut_ptr().cast()) }
            });
            let ok = x.source == LSHK_SOURCE_SIMHASH;
            (
                "lshk_index_simhash",
                st,
                if ok { 0 } else { LSHK_STATUS_UNSUPPORTED },
            )
        }
        1 => {
            let st = c.call("lshk_index_dwta", || {
                // SAFETY: as above.
                unsafe { lshk_index_dwta(x.h, outp.as_mut_ptr().cast()) }
            });
            let ok = x.source == LSHK_SOURCE_DWTA;
            (
                "lshk_index_dwta",
                st,
                if ok { 0 } else { LSHK_STATUS_UNSUPPORTED },
            )
        }
        2 => {
            let st = c.call("lshk_index_tables", || {
                // SAFETY: as above.
                unsafe { lshk_index_tables(x.h, outp.as_mut_ptr().cast()) }
            });
            (
                "lshk_index_tables",
                st,
                if lsh { 0 } else { LSHK_STATUS_UNSUPPORTED },
            )
        }
        3 => {
            let (ids, offs, mut prob) = ([0u32, 1], [0usize, 2], [f64::NAN; 3]);
            let st = c.call("lshk_index_inclusion_prob", || {
                // SAFETY: one query of dim floats, 2 ids, 2 offsets, 2
                // outputs (+ a guard).
                unsafe {
                    lshk_index_inclusion_prob(
                        x.h,
                        q.as_ptr(),
                        1,
                        dim,
                        ids.as_ptr(),
                        offs.as_ptr(),
                        null(),
                        prob.as_mut_ptr(),
                    )
                }
            });
            if st != LSHK_STATUS_OK && prob.iter().any(|p| !p.is_nan()) {
                c.fail("lshk_index_inclusion_prob refused but wrote an output".into());
            }
            let want = match x.source {
                LSHK_SOURCE_SIMHASH => 0,
                LSHK_SOURCE_DWTA => LSHK_STATUS_INVALID_ARGUMENT,
                _ => LSHK_STATUS_UNSUPPORTED,
            };
            ("lshk_index_inclusion_prob", st, want)
        }
        4 => {
            let st = c.call("lshk_index_dirty_rows", || {
                // SAFETY: a live handle; a writable out.
                unsafe { lshk_index_dirty_rows(x.h, out.as_mut_ptr()) }
            });
            if st == LSHK_STATUS_OK && out[0] != 0 {
                c.fail(format!("lshk_index_dirty_rows: {} dirty rows", out[0]));
            }
            ("lshk_index_dirty_rows", st, 0)
        }
        // The calls that change an index: on the sources that lack them
        // only (the refusal leaves the shared index as it is).
        _ if lsh => {
            c.skipped += 1;
            return;
        }
        5 => {
            let st = c.call("lshk_index_update_rows", || {
                // SAFETY: count 0: no ids, rows or bias are read.
                unsafe { lshk_index_update_rows(x.h, null(), 0, null(), dim, null()) }
            });
            ("lshk_index_update_rows", st, LSHK_STATUS_UNSUPPORTED)
        }
        6 => {
            let ids = [0u32];
            let st = c.call("lshk_index_rehash_rows", || {
                // SAFETY: one id; a writable out.
                unsafe { lshk_index_rehash_rows(x.h, ids.as_ptr(), 1, out.as_mut_ptr()) }
            });
            ("lshk_index_rehash_rows", st, LSHK_STATUS_UNSUPPORTED)
        }
        7 => {
            let st = c.call("lshk_index_rehash_dirty", || {
                // SAFETY: a writable out.
                unsafe { lshk_index_rehash_dirty(x.h, out.as_mut_ptr()) }
            });
            ("lshk_index_rehash_dirty", st, LSHK_STATUS_UNSUPPORTED)
        }
        8 => {
            let (offs, ys) = ([0usize, 1], [0u32]);
            let mut reports = [lshk_iul_report {
                round: u32::MAX,
                ..Default::default()
            }; 1];
            let mut ip = lshk_iul_params_default();
            ip.rounds = 1;
            let st = c.call("lshk_index_train_iul", || {
                // SAFETY: one query of dim floats with one label; one report.
                unsafe {
                    lshk_index_train_iul(
                        x.h,
                        q.as_ptr(),
                        1,
                        dim,
                        offs.as_ptr(),
                        ys.as_ptr(),
                        &ip,
                        reports.as_mut_ptr(),
                        1,
                    )
                }
            });
            if reports[0].round != u32::MAX {
                c.fail("lshk_index_train_iul refused but wrote a report".into());
            }
            ("lshk_index_train_iul", st, LSHK_STATUS_UNSUPPORTED)
        }
        9 if x.source != LSHK_SOURCE_IVF => {
            let (offs, ys) = ([0usize, 1], [0u32]);
            let st = c.call("lshk_index_train_labels", || {
                // SAFETY: one query of dim floats with one label.
                unsafe {
                    lshk_index_train_labels(
                        x.h,
                        q.as_ptr(),
                        1,
                        dim,
                        offs.as_ptr(),
                        ys.as_ptr(),
                        null(),
                    )
                }
            });
            ("lshk_index_train_labels", st, LSHK_STATUS_UNSUPPORTED)
        }
        10 if x.source != LSHK_SOURCE_FOREST => {
            let seed = 5u64;
            let st = c.call("lshk_index_rebuild", || {
                // SAFETY: a readable seed.
                unsafe { lshk_index_rebuild(x.h, &seed) }
            });
            ("lshk_index_rebuild", st, LSHK_STATUS_UNSUPPORTED)
        }
        _ if x.source != LSHK_SOURCE_IVF => {
            // SAFETY: plain data; all zero is valid.
            let mut cal: lshk_calibration = unsafe { std::mem::zeroed() };
            cal.struct_size = std::mem::size_of::<lshk_calibration>() as u32;
            let st = c.call("lshk_index_calibrate", || {
                // SAFETY: one query of dim floats; a writable calibration.
                unsafe { lshk_index_calibrate(x.h, q.as_ptr(), 1, dim, 3, 0.9, 8, 1, &mut cal) }
            });
            if cal.met != 0 || cal.fixed_nprobe != 0 {
                c.fail("lshk_index_calibrate refused but wrote its output".into());
            }
            ("lshk_index_calibrate", st, LSHK_STATUS_UNSUPPORTED)
        }
        _ => {
            c.skipped += 1;
            return;
        }
    };
    c.desc = format!("{func} on source {} storage {}", x.source, x.storage);
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a call the index's source lacks");
    }
    if st != want {
        c.fail(format!(
            "{func} on source {} returned {st}, expected {want}: {}",
            x.source,
            last_msg()
        ));
    }
    c.judge(func, st, &v);
    if st != LSHK_STATUS_OK && (out != [usize::MAX; 2] || outp != [std::ptr::dangling::<u8>(); 2]) {
        c.fail(format!("{func} failed with {st} but wrote an output"));
    }
    let after = (
        answers(x.h, &probe, 2, dim),
        describe(x.h).map(|i| bits_of(&i)),
    );
    if after != before {
        c.fail(format!("{func} on source {} changed the index", x.source));
    }
}

/// The top-5 ids and score bits of `nq` queries (default parameters), or
/// the status.
fn answers(
    h: *const lshk_index,
    q: &[f32],
    nq: usize,
    dim: usize,
) -> Result<Vec<u32>, lshk_status> {
    let (mut ids, mut sc) = (vec![0u32; nq * 5], vec![0f32; nq * 5]);
    // SAFETY: nq queries of dim floats; outputs of nq * 5.
    let st = unsafe {
        lshk_index_query(
            h,
            q.as_ptr(),
            nq,
            dim,
            5,
            null(),
            ids.as_mut_ptr(),
            sc.as_mut_ptr(),
            null_mut(),
        )
    };
    if st != LSHK_STATUS_OK {
        return Err(st);
    }
    ids.extend(bits(&sc));
    Ok(ids)
}

/// lshk_index_build with one mutation of the fields every source's build
/// reads, whatever the source: the source value, the storage, a transform
/// on a source without one, row weights on a source other than IVF, a
/// storage the forest cannot rank by, each knob struct's reserved field
/// and enum values (checked for every source), an array NULL with a
/// length; each with its documented status, `*out` untouched on a
/// refusal; an OK build describes itself as asked.
pub(crate) fn fuzz_source_build(c: &mut Ctx) {
    let r = &mut c.r;
    let (rows, dim) = (16 + r.u(40), 1 + r.u(8));
    let layer = lshk::data::structured_layer(rows, dim, 3, r.0.next_u64() % 1000);
    let source = r.pick(&[
        LSHK_SOURCE_SIMHASH,
        LSHK_SOURCE_DWTA,
        LSHK_SOURCE_GRAPH,
        LSHK_SOURCE_IVF,
        LSHK_SOURCE_FOREST,
    ]);
    let mut p = lshk_index_params_default();
    p.source = source;
    p.storage = r.pick(&[LSHK_STORAGE_F32, LSHK_STORAGE_BORROWED_F32]);
    p.lsh.bits_per_table = 4;
    p.lsh.tables = 3;
    p.lsh.bin_size = 4;
    p.lsh.seed = r.0.next_u64();
    p.graph.m = r.pick(&[2, 3, 8]);
    p.graph.ef_construction = r.pick(&[1, 8]);
    p.graph.storage = r.pick(&[LSHK_STORAGE_F32, LSHK_STORAGE_BF16, LSHK_STORAGE_I8]);
    p.ivf.nlist = r.pick(&[0, 3]);
    p.ivf.iters = 2;
    p.forest.trees = 2;
    p.forest.leaf_size = 8;
    p.build_threads = 1;
    let weights = vec![1.0f32; rows];
    let lsh = source <= LSHK_SOURCE_DWTA;
    let mut out_bad = false;
    let mutation = r.u(14);
    let want = match mutation {
        0 => {
            p.source = r.pick(&[5, 6, u32::MAX]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        1 => {
            p.storage = r.pick(&[5, u32::MAX]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        2 => {
            p.transform = r.pick(&[LSHK_TRANSFORM_BIAS_AUG, LSHK_TRANSFORM_MIPS]);
            if lsh {
                LSHK_STATUS_OK
            } else {
                LSHK_STATUS_INVALID_ARGUMENT
            }
        }
        3 => {
            p.ivf.row_weights = weights.as_ptr();
            p.ivf.n_weights = rows;
            if source == LSHK_SOURCE_IVF {
                LSHK_STATUS_OK
            } else {
                LSHK_STATUS_INVALID_ARGUMENT
            }
        }
        4 => {
            p.storage = r.pick(&[LSHK_STORAGE_BF16, LSHK_STORAGE_F16, LSHK_STORAGE_I8]);
            if source == LSHK_SOURCE_FOREST {
                LSHK_STATUS_INVALID_ARGUMENT
            } else {
                LSHK_STATUS_OK
            }
        }
        5 => {
            p.ivf.reserved = 1;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        6 => {
            p.graph.reserved = r.pick(&[1, u32::MAX]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        7 => {
            p.forest.reserved = 1;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        8 => {
            p.ivf.codes = r.pick(&[4, u32::MAX]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        9 => {
            p.graph.storage = r.pick(&[LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F16, 9]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        10 => {
            p.forest.normalize_rows = r.pick(&[2, u32::MAX]);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        11 => {
            match r.u(3) {
                0 => p.lsh.planes_len = 1 + r.u(10),
                1 => p.lsh.dwta_map_len = 1 + r.u(10),
                _ => p.ivf.n_weights = 1 + r.u(10),
            }
            LSHK_STATUS_NULL_POINTER
        }
        12 => {
            out_bad = true;
            LSHK_STATUS_NULL_POINTER
        }
        _ => LSHK_STATUS_OK,
    };
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a documented refusal");
    }
    c.desc = format!(
        "source build source {source} rows {rows} dim {dim} mutation {mutation}: source {} storage {} transform {} graph.storage {}",
        p.source, p.storage, p.transform, p.graph.storage
    );
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_index;
    let mut h = canary;
    let outp: *mut *mut lshk_index = if out_bad { null_mut() } else { &mut h };
    // SAFETY: W and bias of rows x dim (alive until the index is freed);
    // `out` NULL (refused) or writable; the arrays of p hold their lengths
    // or are NULL.
    let st = c.call("lshk_index_build", || unsafe {
        lshk_index_build(
            layer.w.as_ptr(),
            layer.bias.as_ptr(),
            rows,
            dim,
            dim,
            &p,
            outp,
        )
    });
    if st != want {
        c.fail(format!(
            "lshk_index_build (source {source}, mutation {mutation}) returned {st}, expected {want}: {}",
            last_msg()
        ));
    }
    if !c.judge("lshk_index_build", st, &v) {
        if st != LSHK_STATUS_OK && h != canary {
            c.fail("lshk_index_build failed but wrote *out".into());
        }
        return;
    }
    match describe(h) {
        Some(i)
            if (i.source, i.storage, i.transform, i.rows, i.dim)
                == (p.source, p.storage, p.transform, rows, dim) => {}
        i => c.fail(format!(
            "lshk_index_build: describe {:?} after a build with source {} storage {} transform {}",
            i.map(|i| (i.source, i.storage, i.transform)),
            p.source,
            p.storage,
            p.transform
        )),
    }
    if c.r.one_in(2) {
        fuzz_set_codes(c, h, &layer, rows, dim, &p);
    }
    // SAFETY: a live handle from the build.
    unsafe { lshk_index_free(h) };
}

/// lshk_index_set_codes on a freshly built index of any source, with one
/// of: a NULL handle, an unknown or 4-bit codes value, rerank 0; each with
/// its documented status and the index unchanged (its answers and
/// describe) on a refusal; OK answers equal those of the Rust mirror given
/// the same codes, bit for bit, and describe reports the codes.
fn fuzz_set_codes(
    c: &mut Ctx,
    h: *mut lshk_index,
    layer: &lshk::data::Layer,
    rows: usize,
    dim: usize,
    p: &lshk_index_params,
) {
    let r = &mut c.r;
    let codes = r.pick(&[
        LSHK_IVF_CODES_I8,
        LSHK_IVF_CODES_I8,
        LSHK_IVF_CODES_NONE,
        LSHK_IVF_CODES_PQ4,
        LSHK_IVF_CODES_PQ4_I8,
        4,
        u32::MAX,
    ]);
    let rerank = r.pick(&[0u32, 1, 3, 8, u32::MAX]);
    let null = r.one_in(8);
    let probe: Vec<f32> = (0..2 * dim).map(|_| r.f(-1.0, 1.0)).collect();
    let want = if null {
        LSHK_STATUS_NULL_POINTER
    } else if codes > LSHK_IVF_CODES_PQ4_I8 {
        LSHK_STATUS_INVALID_ARGUMENT
    } else if p.source == LSHK_SOURCE_IVF {
        LSHK_STATUS_UNSUPPORTED
    } else if codes != LSHK_IVF_CODES_NONE
        && (codes != LSHK_IVF_CODES_I8 || rerank == 0 || p.storage == LSHK_STORAGE_I8)
    {
        LSHK_STATUS_INVALID_ARGUMENT
    } else {
        LSHK_STATUS_OK
    };
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a documented refusal");
    }
    c.desc = format!(
        "set_codes source {} storage {} codes {codes} rerank {rerank} null {null}",
        p.source, p.storage
    );
    let before = (answers(h, &probe, 2, dim), describe(h).map(|i| bits_of(&i)));
    let hh = if null { null_mut() } else { h };
    // SAFETY: a live handle used by no other call, or NULL (refused).
    let st = c.call("lshk_index_set_codes", || unsafe {
        lshk_index_set_codes(hh, codes, rerank)
    });
    if st != want {
        c.fail(format!(
            "lshk_index_set_codes returned {st}, expected {want}: {}",
            last_msg()
        ));
    }
    if !c.judge("lshk_index_set_codes", st, &v) {
        let after = (answers(h, &probe, 2, dim), describe(h).map(|i| bits_of(&i)));
        if st != LSHK_STATUS_OK && after != before {
            c.fail(format!(
                "lshk_index_set_codes failed with {st} but changed the index"
            ));
        }
        return;
    }
    // SAFETY: the layer outlives the mirror (dropped at the end).
    let mut mirror = unsafe {
        Index::build_borrowed(
            &layer.w,
            Some(&layer.bias),
            rows,
            dim,
            dim,
            &rust_params(p),
            None,
        )
    }
    .unwrap();
    mirror
        .set_codes(Codes::from_u32(codes).unwrap(), rerank)
        .unwrap();
    let (mut ids, mut sc) = (vec![0u32; 10], vec![0f32; 10]);
    let qp = lshk::index::QueryParams::default();
    mirror
        .query_with(&probe, 2, dim, 5, &qp, &mut ids, &mut sc, None)
        .unwrap();
    ids.extend(bits(&sc));
    match answers(h, &probe, 2, dim) {
        Ok(got) if got == ids => {}
        got => c.fail(format!(
            "lshk_index_set_codes({codes}, {rerank}): answers {got:?}, the mirror's {ids:?}"
        )),
    }
    if describe(h).map(|i| i.codes) != Some(codes) {
        c.fail(format!("describe does not report row codes {codes}"));
    }
}

/// lshk_index_describe, lshk_index_memory_bytes, lshk_index_weights (and,
/// for LSH indexes, lshk_tables_memory_bytes of the borrowed tables) on an
/// index of any source: NULL, misaligned and too-small outputs refused
/// with nothing written, a larger struct_size accepted (its tail
/// untouched), NULL and foreign handles refused; OK answers equal what
/// the Rust API reports of the mirror index.
pub(crate) fn fuzz_describe(c: &mut Ctx, e: &Env) {
    let all = every_index(e);
    let x = all[c.r.u(all.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut foreign = [0u64; 8];
    let mut handle: *const lshk_index = x.h;
    let mut omode = 0; // 0 plain, 1 NULL, 2 misaligned, 3 larger struct, 4 struct_size small
    let which = r.u(4);
    match r.u(6) {
        0 => {
            handle = null();
            v.err("NULL handle");
        }
        1 => {
            foreign[0] = r.0.next_u64();
            handle = foreign.as_ptr().cast();
            v.err("foreign handle");
        }
        2 => {
            omode = r.pick(&[1, 2, 4]);
            match omode {
                1 => v.err("out NULL"),
                2 => v.err("out misaligned"),
                _ if which == 0 || which == 2 => v.err("struct_size too small"),
                _ => {}
            }
        }
        3 => omode = 3,
        _ => {}
    }
    #[repr(C, align(8))]
    struct Block([u64; 16]);
    let mut block = Block([CANARY as u64 | (CANARY as u64) << 32; 16]);
    let base = block.0.as_mut_ptr().cast::<u8>();
    let outp: *mut u8 = match omode {
        1 => null_mut(),
        2 => base.wrapping_add(1),
        _ => base,
    };
    let size_of = |which: usize| match which {
        0 => std::mem::size_of::<lshk_index_info>(),
        2 => std::mem::size_of::<lshk_weights_view>(),
        _ => 8,
    };
    let set_size = |block: &mut Block, s: u32| {
        block.0[0] = (block.0[0] & !0xFFFF_FFFF) | s as u64;
    };
    let full = size_of(which) as u32;
    match (which, omode) {
        (0 | 2, 3) => set_size(&mut block, 120),
        (0 | 2, 4) => set_size(&mut block, r.pick(&[0, 4, full - 1])),
        (0 | 2, _) => set_size(&mut block, full),
        _ => {}
    }
    let before = block.0;
    let lsh = x.source == LSHK_SOURCE_SIMHASH || x.source == LSHK_SOURCE_DWTA;
    if which == 3 && !lsh {
        c.skipped += 1;
        return;
    }
    let func = [
        "lshk_index_describe",
        "lshk_index_memory_bytes",
        "lshk_index_weights",
        "lshk_tables_memory_bytes",
    ][which];
    c.desc = format!(
        "{func} source {} storage {} omode {omode}",
        x.source, x.storage
    );
    let st = match which {
        // SAFETY: the block holds 128 writable, 8-aligned bytes (the
        // misaligned pointer stays inside it).
        0 => c.call(func, || unsafe { lshk_index_describe(handle, outp.cast()) }),
        // SAFETY: as above.
        1 => c.call(func, || unsafe {
            lshk_index_memory_bytes(handle, outp.cast())
        }),
        // SAFETY: as above.
        2 => c.call(func, || unsafe { lshk_index_weights(handle, outp.cast()) }),
        _ => {
            let mut t = null();
            // SAFETY: a live LSH index (its tables), a writable out.
            assert_eq!(unsafe { lshk_index_tables(x.h, &mut t) }, LSHK_STATUS_OK);
            let th = if handle == x.h.cast_const() {
                t
            } else {
                handle.cast()
            };
            // SAFETY: as above.
            c.call(func, || unsafe {
                lshk_tables_memory_bytes(th, outp.cast())
            })
        }
    };
    if !c.judge(func, st, &v) {
        if st != LSHK_STATUS_OK && block.0 != before {
            c.fail(format!("{func} failed with {st} but wrote its output"));
        }
        return;
    }
    let n = size_of(which);
    // SAFETY: the block's bytes (plain integers).
    let bytes: Vec<u8> =
        unsafe { std::slice::from_raw_parts(block.0.as_ptr().cast::<u8>(), 128) }.to_vec();
    let before_bytes: Vec<u8> = before.iter().flat_map(|w| w.to_le_bytes()).collect();
    if bytes[n..] != before_bytes[n..] {
        c.fail(format!("{func} wrote past its output"));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let good = match which {
        0 => {
            let mut want = info_of(x.mirror);
            want.struct_size = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            bytes[..n] == bits_of(&want)[..]
        }
        1 => word(0) as usize == x.mirror.memory_bytes(),
        2 => {
            // SAFETY: the bytes of a view lshk wrote.
            let got: lshk_weights_view = unsafe { std::ptr::read(block.0.as_ptr().cast()) };
            let stride = x.mirror.weight_stride();
            (
                got.storage,
                got.rows,
                got.dim,
                got.w_stride,
                got.bias.is_null(),
            ) == (x.storage, x.rows, x.dim, stride, x.mirror.bias().is_none())
                && (got.scales.is_null() == (x.storage != LSHK_STORAGE_I8))
                && (x.storage != LSHK_STORAGE_BORROWED_F32 || got.w == x.w.as_ptr().cast())
        }
        _ => word(0) as usize == x.mirror.lsh_tables().map_or(0, |t| t.memory_bytes()),
    };
    if !good {
        c.fail(format!(
            "{func}: differs from the Rust API's report of the index"
        ));
    }
}

/// An index file saved from the environment, and how to load it.
pub(crate) struct Saved {
    pub(crate) path: PathBuf,
    /// Position in [`every_index`].
    pub(crate) which: usize,
    /// Saved from a BORROWED_F32 index: loading needs its W.
    pub(crate) borrowed: bool,
}

/// Saves every index of the environment (once, before the executions).
pub(crate) fn save_indexes(e: &Env, dir: &std::path::Path) -> Vec<Saved> {
    std::fs::create_dir_all(dir).unwrap();
    every_index(e)
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let path = dir.join(format!("index-{i}.lshk"));
            let cp = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: a live handle and a NUL-terminated path.
            let st = unsafe { lshk_index_save(x.h, cp.as_ptr()) };
            assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
            Saved {
                path,
                which: i,
                borrowed: x.storage == LSHK_STORAGE_BORROWED_F32,
            }
        })
        .collect()
}

/// lshk_index_load of a saved index of any source: the path (NULL, empty,
/// missing), `borrowed_w` (the W a borrowed index needs, or one given to
/// a file that stores its own), `w_stride` (0, the recorded one, another)
/// and `out` (NULL, misaligned) mutated, each with its documented status
/// and `*out` untouched on a refusal; a loaded index describes itself and
/// answers queries exactly as the index that was saved.
pub(crate) fn fuzz_load(c: &mut Ctx, e: &Env, files: &[Saved]) {
    let all = every_index(e);
    let f = &files[c.r.u(files.len())];
    let x = all[f.which];
    let r = &mut c.r;
    let dim = x.dim;
    // W at stride dim + 1 for a wrong-stride call that stays inside the
    // caller's buffer whichever stride is read.
    let mut padded = vec![0f32; (x.rows - 1) * (dim + 1) + dim];
    for (i, row) in x.w.chunks(dim).enumerate() {
        padded[i * (dim + 1)..i * (dim + 1) + dim].copy_from_slice(row);
    }
    let mut path = std::ffi::CString::new(f.path.to_str().unwrap()).unwrap();
    let mut null_path = false;
    let mut wp: *const f32 = if f.borrowed { x.w.as_ptr() } else { null() };
    let mut ws = r.pick(&[0, dim]);
    let mut out_mode = Mode::Ok;
    let mutation = r.u(9);
    let want = match mutation {
        0 => {
            null_path = true;
            LSHK_STATUS_NULL_POINTER
        }
        1 => {
            path = std::ffi::CString::new("").unwrap();
            LSHK_STATUS_INVALID_ARGUMENT
        }
        2 => {
            path = std::ffi::CString::new(format!("{}.missing", f.path.display())).unwrap();
            LSHK_STATUS_IO_ERROR
        }
        3 => {
            out_mode = Mode::Null;
            LSHK_STATUS_NULL_POINTER
        }
        4 => {
            out_mode = Mode::Mis;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        5 => {
            // The wrong W argument: none for a borrowed index, one for a
            // file that stores its weights.
            wp = if f.borrowed { null() } else { x.w.as_ptr() };
            LSHK_STATUS_INVALID_ARGUMENT
        }
        6 => {
            // A stride other than the recorded one.
            ws = dim + 1;
            if f.borrowed {
                wp = padded.as_ptr();
            }
            LSHK_STATUS_INVALID_ARGUMENT
        }
        _ => LSHK_STATUS_OK,
    };
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a documented refusal");
    }
    c.desc = format!(
        "load source {} storage {} borrowed {} stride {ws} mutation {mutation}",
        x.source, x.storage, f.borrowed
    );
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_index;
    let mut outv = [canary, canary];
    let outp: *mut *mut lshk_index = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let pp = if null_path { null() } else { path.as_ptr() };
    // SAFETY: a NUL-terminated path (or NULL); W of the saved shape at
    // stride dim (or padded to dim + 1) or NULL; `out` NULL, misaligned
    // inside `outv`, or writable.
    let st = c.call("lshk_index_load", || unsafe {
        lshk_index_load(pp, wp, ws, outp)
    });
    if st != want {
        c.fail(format!(
            "lshk_index_load (mutation {mutation}) returned {st}, expected {want}: {}",
            last_msg()
        ));
    }
    if !c.judge("lshk_index_load", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_index_load failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_index_load wrote past *out".into());
    }
    let probe: Vec<f32> = (0..3 * dim)
        .map(|i| x.w[(i * 7) % x.w.len()] + 0.05)
        .collect();
    let same_info = describe(h).map(|i| bits_of(&i)) == describe(x.h).map(|i| bits_of(&i));
    if !same_info || answers(h, &probe, 3, dim) != answers(x.h, &probe, 3, dim) {
        c.fail(format!(
            "lshk_index_load: the loaded source-{} index differs from the saved one",
            x.source
        ));
    }
    // SAFETY: a live handle from the load, freed once.
    unsafe { lshk_index_free(h) };
}
