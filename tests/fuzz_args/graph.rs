//! The FGD graph: build and query.

use super::*;

pub(crate) struct GraphX {
    pub(crate) h: *mut lshk_graph,
    pub(crate) mirror: lshk::graph::Graph,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) storage: u32,
}

impl Drop for GraphX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_graph_build.
        unsafe { lshk_graph_free(self.h) };
    }
}

pub(crate) fn graph_params(m: u32, efc: u32, storage: u32, seed: u64) -> lshk::graph::GraphParams {
    lshk::graph::GraphParams {
        m,
        ef_construction: efc,
        threads: 1,
        storage: lshk::graph::Storage::from_u32(storage).unwrap(),
        seed,
    }
}

pub(crate) fn build_graphs() -> Vec<GraphX> {
    // (storage, m)
    let cfgs = [
        (LSHK_GRAPH_STORAGE_F32, 4u32),
        (LSHK_GRAPH_STORAGE_BF16, 6),
        (LSHK_GRAPH_STORAGE_I8, 3),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(storage, m))| {
            let (rows, dim) = (150 + 40 * i, 5 + 6 * i);
            let layer = lshk::data::structured_layer(rows, dim, 5, 31 + i as u64);
            let mut p = lshk_graph_params_default();
            p.m = m;
            p.ef_construction = 24;
            p.storage = storage;
            p.threads = 2;
            p.seed = 9 + i as u64;
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
            assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
            let mirror = lshk::graph::Graph::build(
                &layer.w,
                Some(&layer.bias),
                rows,
                dim,
                dim,
                &graph_params(m, 24, storage, 9 + i as u64),
            )
            .unwrap();
            GraphX {
                h,
                mirror,
                dim,
                rows,
                w: layer.w,
                bias: layer.bias,
                storage,
            }
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigGraphStats {
    pub(crate) s: lshk_graph_stats,
    pub(crate) tail: [u64; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigGraphParams {
    pub(crate) p: lshk_graph_params,
    pub(crate) tail: [u8; 24],
}

pub(crate) fn fuzz_graph_query(c: &mut Ctx, gs: &[GraphX]) {
    let gx = &gs[c.r.u(gs.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let dim = gx.dim;
    let mut nq = r.u(5);
    let mut q_stride = dim + if r.one_in(3) { r.u(4) } else { 0 };
    let ql = if nq == 0 {
        0
    } else {
        (nq - 1) * q_stride + dim
    };
    let mut q = Arr::new(
        (0..ql)
            .map(|i| {
                let row = (i / q_stride * 37) % gx.rows;
                gx.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.2, 0.2)
            })
            .collect(),
        0.0f32,
    );
    let mut k = r.u(12) as u32;
    // A pool of every row a third of the time: the exact top-k then.
    let mut ef: u32 = if r.one_in(3) {
        r.pick(&[gx.rows as u32, u32::MAX])
    } else {
        r.pick(&[1, 2, 8, 30])
    };
    let mut use_scores = !r.one_in(4);
    let mut tmode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_graph_stats>() as u32;
    let mut handle: *const lshk_graph = gx.h;
    let mut foreign = [0u64; 8];
    let (mut oi_mode, mut os_mode) = (Mode::Ok, Mode::Ok);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(10);
        what.push(m);
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => match r.u(4) {
                0 => q.mode = Mode::Null,
                1 => oi_mode = Mode::Null,
                2 => handle = null(),
                _ => use_scores = false,
            },
            1 => match r.u(3) {
                0 => q.mode = Mode::Mis,
                1 => oi_mode = Mode::Mis,
                _ => {
                    use_scores = true;
                    os_mode = Mode::Mis
                }
            },
            2 => q_stride = r.pick(&[dim - 1, 0, hv, q_stride.saturating_add(1)]),
            3 => nq = r.size(nq),
            4 => k = r.pick(&[k.saturating_add(1), 0, hv32, 100_000, gx.rows as u32 + 3]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => ef = r.pick(&[0, 1, u32::MAX, hv32]),
            7 => {
                tmode = r.pick(&[1, 2]);
                if r.one_in(2) {
                    let full = std::mem::size_of::<lshk_graph_stats>() as u32;
                    st_size = r.pick(&[0, 8, full - 1]);
                }
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = r.pick(&[foreign.as_ptr().cast(), gs[0].h.cast_const()]);
            }
        }
    }
    if handle.is_null() {
        v.err("NULL handle");
    } else if handle == foreign.as_ptr().cast() {
        v.err("foreign handle");
    } else if handle != gx.h.cast_const() {
        c.skipped += 1; // another live graph: valid, another shape
        return;
    }
    q.need(strided(nq, dim, q_stride), &mut v, || 0.5);
    let need = mul(nq, k as usize);
    let mut oi = Arr::new(Vec::new(), CANARY);
    oi.mode = oi_mode;
    oi.need(need, &mut v, || CANARY);
    let mut os = Arr::new(Vec::new(), f32::from_bits(CANARY));
    os.mode = os_mode;
    if use_scores {
        os.need(need, &mut v, || f32::from_bits(CANARY));
    }
    // The pool is max(ef, k): keep huge pools on small graphs only.
    if v.skip || (k as usize > 4096 && v.expect_err.is_none()) {
        c.skipped += 1;
        return;
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    if ef == 0 {
        v.err("ef 0");
    }
    nonfinite_queries(&mut v, &q, nq, dim, q_stride);
    let mut bs = BigGraphStats {
        s: lshk_graph_stats {
            struct_size: st_size,
            reserved: 0xA5A5,
            distances: 0xA5A5,
        },
        tail: [7, 7],
    };
    if tmode == 2 && st_size as usize == std::mem::size_of::<lshk_graph_stats>() {
        bs.s.struct_size = std::mem::size_of::<BigGraphStats>() as u32;
    }
    if tmode != 0 && (bs.s.struct_size as usize) < std::mem::size_of::<lshk_graph_stats>() {
        v.err("stats struct_size too small");
    }
    let stp: *mut lshk_graph_stats = if tmode == 0 {
        null_mut()
    } else {
        (&mut bs as *mut BigGraphStats).cast()
    };
    c.desc = format!(
        "graph query storage {} rows {} nq {nq} qs {q_stride} k {k} ef {ef} scores {use_scores} tmode {tmode} muts {what:?}",
        gx.storage, gx.rows
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_graph_query", || unsafe {
        lshk_graph_query(handle, qp, nq, q_stride, k, ef, oip, osp, stp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_graph_query changed an input".into());
    }
    if !c.judge("lshk_graph_query", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.v != oi0
                || bits(&os.v) != os0
                || (bs.s.reserved, bs.s.distances) != (0xA5A5, 0xA5A5)
                || bs.tail != [7, 7])
        {
            c.fail(format!(
                "lshk_graph_query failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let kk = k as usize;
    let nk = nq * kk;
    if oi.v[nk] != CANARY
        || (use_scores && os.v[nk].to_bits() != CANARY)
        || bs.tail != [7, 7]
        || bs.s.reserved != 0xA5A5
    {
        c.fail("lshk_graph_query wrote past its outputs".into());
    }
    // Reference 1: the Rust API on an identically built graph.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = lshk::graph::GraphStats::default();
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    if let Err(e) = gx.mirror.search_stats(
        lshk::isa::active(),
        qd,
        nq,
        q_stride,
        kk,
        ef as usize,
        &mut ri,
        &mut rs,
        Some(&mut rst),
    ) {
        c.fail(format!(
            "lshk_graph_query returned OK, Graph::search refused: {e}"
        ));
        return;
    }
    if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
        c.fail(format!(
            "lshk_graph_query: ids {:?} vs Rust {:?}",
            &oi.data()[..nk],
            ri
        ));
    }
    if tmode != 0 && bs.s.distances != rst.distances {
        c.fail("lshk_graph_query: stats differ from Graph::search_stats".into());
    }
    // Reference 2 (independent): a pool of every row on f32 storage is
    // the exact top-k up to ties within the f32 bound.
    if ef as usize >= gx.rows && gx.storage == LSHK_GRAPH_STORAGE_F32 {
        for qi in 0..nq {
            let qv = &qd[qi * q_stride..qi * q_stride + dim];
            let mut all: Vec<(f64, f64)> = (0..gx.rows)
                .map(|rr| {
                    let (mut e, mut a) = (gx.bias[rr] as f64, gx.bias[rr].abs() as f64);
                    for (&x, &y) in gx.w[rr * dim..(rr + 1) * dim].iter().zip(qv) {
                        let p = x as f64 * y as f64;
                        e += p;
                        a += p.abs();
                    }
                    (e, a)
                })
                .collect();
            all.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap());
            let maxb = all.iter().fold(0f64, |m, x| m.max(x.1)) * gamma(dim + 2) * 2.0;
            for t in 0..kk {
                let (id, s) = (ri[qi * kk + t], rs[qi * kk + t]);
                if t >= gx.rows {
                    if id != u32::MAX || s != f32::NEG_INFINITY {
                        c.fail("a full graph search beyond rows is not padded".into());
                    }
                    continue;
                }
                if id as usize >= gx.rows {
                    c.fail(format!("full graph search: id {id} out of range"));
                    break;
                }
                let (mut e, mut a) = (
                    gx.bias[id as usize] as f64,
                    gx.bias[id as usize].abs() as f64,
                );
                for (&x, &y) in gx.w[id as usize * dim..(id as usize + 1) * dim]
                    .iter()
                    .zip(qv)
                {
                    let p = x as f64 * y as f64;
                    e += p;
                    a += p.abs();
                }
                if (s as f64 - e).abs() > gamma(dim + 2) * a + 1e-40
                    || (e - all[t].0).abs() > maxb + 1e-40
                {
                    c.fail(format!(
                        "full graph search: rank {t} id {id} score {s} exact {e}, brute force {}",
                        all[t].0
                    ));
                }
            }
        }
    }
}

pub(crate) fn fuzz_graph_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut rows = 1 + r.u(60);
    let mut dim = 1 + r.u(12);
    let mut w_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut p = lshk_graph_params_default();
    p.m = r.pick(&[2, 3, 4, 8]);
    p.ef_construction = r.pick(&[1, 4, 16]);
    p.storage = r.pick(&[
        LSHK_GRAPH_STORAGE_F32,
        LSHK_GRAPH_STORAGE_BF16,
        LSHK_GRAPH_STORAGE_I8,
    ]);
    p.threads = r.pick(&[0, 1, 2]);
    p.seed = r.0.next_u64();
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut bias = Arr::new((0..rows).map(|_| r.f(-0.5, 0.5)).collect(), 0.0f32);
    let mut use_bias = !r.one_in(3);
    let mut pmode = r.pick(&[0, 0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(11);
        what.push(m);
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => w.mode = r.pick(&[Mode::Null, Mode::Mis]),
            1 => {
                use_bias = true;
                bias.mode = Mode::Mis
            }
            2 => rows = r.pick(&[0, rows.saturating_add(1), hv, rows.saturating_sub(1)]),
            3 => dim = r.pick(&[0, dim.saturating_add(1), hv]),
            4 => w_stride = r.pick(&[dim.saturating_sub(1), 0, hv, w_stride.saturating_add(1)]),
            5 => p.m = r.pick(&[0, 1, 257, hv32, 256]),
            6 => match r.u(3) {
                0 => p.storage = r.pick(&[3, u32::MAX]),
                1 => p.reserved = r.pick(&[1, u32::MAX]),
                _ => p.ef_construction = 0,
            },
            7 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_graph_params>() as u32;
                p.struct_size = r.pick(&[0, 8, full - 1]);
            }
            8 if w.len() > 0 => {
                let j = r.u(w.len());
                r.spoil(w.data_mut(), j);
            }
            9 => {
                use_bias = true;
                let j = r.u(bias.len());
                r.spoil(bias.data_mut(), j);
            }
            _ => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
        }
    }
    if pmode == 2 {
        p.struct_size = std::mem::size_of::<BigGraphParams>() as u32;
    }
    let eff = if pmode == 1 {
        lshk_graph_params_default()
    } else {
        p
    };
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    if pmode != 1 && (p.struct_size as usize) < std::mem::size_of::<lshk_graph_params>() {
        v.err("struct_size too small");
    }
    if eff.storage > 2 || eff.reserved != 0 {
        v.err("bad storage / reserved");
    }
    if rows == 0 || dim == 0 {
        v.err("rows or dim 0");
    }
    if w_stride < dim {
        v.err("w_stride < dim");
    }
    w.need(strided(rows, dim, w_stride), &mut v, || 0.25);
    if use_bias {
        bias.need(Some(rows as u128), &mut v, || 0.0);
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    if rows >= u32::MAX as usize {
        v.err("rows >= 2^32 - 1");
    }
    if !(2..=256).contains(&eff.m) || eff.ef_construction == 0 {
        v.err("m or ef_construction out of range");
    }
    let mut overflow = false;
    if v.expect_err.is_none() {
        let wd = w.data();
        let bad_w = (0..rows).any(|rr| {
            wd[rr * w_stride..rr * w_stride + dim]
                .iter()
                .any(|x| !x.is_finite())
        });
        let bad_b = use_bias && bias.data()[..rows].iter().any(|x| !x.is_finite());
        if bad_w || bad_b {
            v.err("non-finite W or bias");
        } else {
            // |[w; b]|^2 overflowing f32 (a special value 3e38 or f32::MAX).
            let n2 = (0..rows)
                .map(|rr| {
                    let b = if use_bias {
                        bias.data()[rr] as f64
                    } else {
                        0.0
                    };
                    wd[rr * w_stride..rr * w_stride + dim]
                        .iter()
                        .map(|&x| x as f64 * x as f64)
                        .sum::<f64>()
                        + b * b
                })
                .fold(0f64, f64::max);
            if n2 > 1e37 {
                overflow = true;
            }
        }
    }
    c.desc = format!(
        "graph build rows {rows} dim {dim} stride {w_stride} m {} efc {} storage {} reserved {} pmode {pmode} bias {use_bias} muts {what:?}",
        eff.m, eff.ef_construction, eff.storage, eff.reserved
    );
    let big = BigGraphParams {
        p,
        tail: [0xEE; 24],
    };
    let pp: *const lshk_graph_params = match pmode {
        1 => null(),
        2 => (&big as *const BigGraphParams).cast(),
        _ => &p,
    };
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_graph;
    let mut outv: [*mut lshk_graph; 2] = [canary, canary];
    let outp: *mut *mut lshk_graph = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let (wp, bp) = (w.ptr(), if use_bias { bias.ptr() } else { null() });
    let (w0, b0) = (bits(&w.v), bits(&bias.v));
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_graph_build", || unsafe {
        lshk_graph_build(wp, bp, rows, dim, w_stride, pp, outp)
    });
    if bits(&w.v) != w0 || bits(&bias.v) != b0 {
        c.fail("lshk_graph_build changed an input".into());
    }
    if overflow {
        // Near f32::MAX the overflow check decides: either outcome is
        // documented (NON_FINITE when U^2 overflows f32).
        if st == LSHK_STATUS_OK {
            // SAFETY: a live handle from the call above.
            unsafe { lshk_graph_free(outv[0]) };
        } else if st != LSHK_STATUS_NON_FINITE || outv != [canary, canary] {
            c.fail(format!("lshk_graph_build: {st} on a huge row"));
        }
        return;
    }
    if !c.judge("lshk_graph_build", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_graph_build failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_graph_build wrote past *out".into());
    }
    // Reference: the Rust build (one thread: the graph does not depend on
    // it) answers the same queries bit for bit, with the same shape and
    // memory.
    let bs = use_bias.then(|| &bias.data()[..rows]);
    let wd = &w.data()[..strided(rows, dim, w_stride).unwrap() as usize];
    let mirror = lshk::graph::Graph::build(
        wd,
        bs,
        rows,
        dim,
        w_stride,
        &graph_params(eff.m, eff.ef_construction, eff.storage, eff.seed),
    )
    .unwrap();
    let (mut sr, mut sd, mut mem) = (0usize, 0usize, 0usize);
    // SAFETY: a live handle; writable outputs.
    let s2 =
        unsafe { lshk_graph_shape(h, &mut sr, &mut sd) | lshk_graph_memory_bytes(h, &mut mem) };
    if s2 != LSHK_STATUS_OK || (sr, sd) != (rows, dim) || mem != mirror.memory_bytes() {
        c.fail("lshk_graph_build: shape or memory differ from Graph::build's".into());
    }
    let nq = 3;
    let qs: Vec<f32> = (0..nq * dim)
        .map(|i| wd[(i % dim) + (i / dim % rows) * w_stride] + 0.125)
        .collect();
    let kk = 4;
    for ef in [1u32, 8, u32::MAX] {
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let s3 = unsafe {
            lshk_graph_query(
                h,
                qs.as_ptr(),
                nq,
                dim,
                kk as u32,
                ef,
                ci.as_mut_ptr(),
                cs.as_mut_ptr(),
                null_mut(),
            )
        };
        mirror
            .search(&qs, nq, dim, kk, ef as usize, &mut ri, &mut rs)
            .unwrap();
        if s3 != LSHK_STATUS_OK || ci != ri || bits(&cs) != bits(&rs) {
            c.fail(format!(
                "lshk_graph_build: ef {ef} query {ci:?} differs from the Rust graph's {ri:?}"
            ));
        }
    }
    // SAFETY: a live handle from lshk_graph_build.
    unsafe { lshk_graph_free(h) };
}

/// How often each `lshk_graph_query_ex` case ran (index: the mutation of
/// [`fuzz_graph_query_ex`]; 11 = none); the test checks that every one did.
pub(crate) static GRAPH_EX_CASES: [AtomicU64; 12] = [const { AtomicU64::new(0) }; 12];

/// `lshk_graph_query_ex` (issue 16): the query options (walk, ef, rerank)
/// on graphs of every storage, with at most one mutation per call, each
/// with its exact documented status (nothing written on a refusal); an OK
/// call equals `Graph::search_with` on the mirror graph bit for bit and
/// writes nothing past its outputs. (Formerly tests/fuzz_graph.rs.)
pub(crate) fn fuzz_graph_query_ex(c: &mut Ctx, gs: &[GraphX]) {
    const GUARD: usize = 8;
    let sc_sent = f32::from_bits(CANARY);
    let gx = &gs[c.r.u(gs.len())];
    let r = &mut c.r;
    let (rows, dim) = (gx.rows, gx.dim);
    let mut p = lshk_graph_query_params_default();
    p.walk = r.u(2) as u32;
    p.ef = match r.u(4) {
        0 => 1,
        1 => u32::MAX,
        _ => 1 + r.u(2 * rows) as u32,
    };
    p.rerank = match r.u(3) {
        0 => 0,
        1 => u32::MAX,
        _ => r.u(40) as u32,
    };
    let k = r.u(15) as u32;
    let nq = r.u(4);
    let q_stride = dim + r.u(3);
    let ql = if nq == 0 {
        0
    } else {
        (nq - 1) * q_stride + dim
    };
    let mut q: Vec<f32> = (0..ql.max(1)).map(|_| r.0.next_normal() as f32).collect();
    let n = nq * k as usize;
    let mut ids = vec![CANARY; n + GUARD];
    let mut sc = vec![sc_sent; n + GUARD];
    let mut stats = lshk_graph_stats {
        struct_size: std::mem::size_of::<lshk_graph_stats>() as u32,
        reserved: 0,
        distances: 0,
    };
    let mut use_p = true;
    let (mut use_scores, mut use_stats) = (!r.one_in(4), !r.one_in(3));
    let mut handle = gx.h as *const lshk_graph;
    let (mut q_null, mut ids_null) = (false, false);
    let mut q_stride_c = q_stride;
    // One mutation (or none) per call; its documented status.
    let mut mutation = r.u(12);
    let want = match mutation {
        0 => {
            p.walk = 2 + r.u(1000) as u32;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        1 => {
            p.ef = 0;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        2 => {
            p.struct_size = r.u(16) as u32;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        3 => {
            use_p = false; // defaults: WALK_EXACT, ef 100
            LSHK_STATUS_OK
        }
        4 if nq > 0 => {
            let i = r.u(nq) * q_stride + r.u(dim);
            q[i] = r.pick(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
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
            q_stride_c = r.u(dim);
            LSHK_STATUS_INVALID_ARGUMENT
        }
        8 => {
            use_stats = true;
            stats.struct_size = r.u(16) as u32;
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
        _ => {
            mutation = 11; // none (also a guarded case whose guard failed)
            LSHK_STATUS_OK
        }
    };
    GRAPH_EX_CASES[mutation].fetch_add(1, Ordering::Relaxed);
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a documented refusal");
    }
    c.desc = format!(
        "graph query_ex storage {} rows {rows} mutation {mutation}: walk {} ef {} rerank {} k {k} nq {nq} stride {q_stride_c} p {use_p} scores {use_scores} stats {use_stats}",
        gx.storage, p.walk, p.ef, p.rerank
    );
    let q0 = bits(&q);
    let qp = if q_null { null() } else { q.as_ptr() };
    let pp: *const lshk_graph_query_params = if use_p { &p } else { null() };
    let idp = if ids_null {
        null_mut()
    } else {
        ids.as_mut_ptr()
    };
    let scp = if use_scores {
        sc.as_mut_ptr()
    } else {
        null_mut()
    };
    let stp: *mut lshk_graph_stats = if use_stats { &mut stats } else { null_mut() };
    // SAFETY: every non-NULL pointer covers what the arguments promise
    // (q: ql floats, ids/sc: n values + guard, stats and p: whole
    // structs); the invalid ones are the documented refusals above.
    let st = c.call("lshk_graph_query_ex", || unsafe {
        lshk_graph_query_ex(handle, pp, qp, nq, q_stride_c, k, idp, scp, stp)
    });
    if st != want {
        c.fail(format!(
            "lshk_graph_query_ex returned {st}, expected {want}"
        ));
    }
    if bits(&q) != q0 {
        c.fail("lshk_graph_query_ex changed q".into());
    }
    if ids[n..].iter().any(|&x| x != CANARY) || bits(&sc[n..]) != bits(&[sc_sent; GUARD]) {
        c.fail("lshk_graph_query_ex wrote past its outputs".into());
    }
    if !c.judge("lshk_graph_query_ex", st, &v) {
        if ids.iter().any(|&x| x != CANARY) || sc.iter().any(|x| x.to_bits() != CANARY) {
            c.fail("lshk_graph_query_ex refused the call but wrote an output".into());
        }
        return;
    }
    if st != LSHK_STATUS_OK {
        return;
    }
    let sp = if use_p {
        lshk::graph::SearchParams {
            ef: p.ef as usize,
            walk: lshk::graph::Walk::from_u32(p.walk).unwrap(),
            rerank: p.rerank as usize,
        }
    } else {
        lshk::graph::SearchParams::default()
    };
    let (mut wi, mut ws) = (vec![0u32; n], vec![0f32; n]);
    if let Err(e) = gx.mirror.search_with(
        lshk::isa::active(),
        &q,
        nq,
        q_stride,
        k as usize,
        &sp,
        &mut wi,
        &mut ws,
        None,
    ) {
        c.fail(format!(
            "lshk_graph_query_ex returned OK, Graph::search_with refused: {e}"
        ));
        return;
    }
    if ids[..n] != wi[..] || (use_scores && bits(&sc[..n]) != bits(&ws)) {
        c.fail(format!(
            "lshk_graph_query_ex: ids {:?} vs Rust {wi:?} (or the scores differ)",
            &ids[..n]
        ));
    }
    if ids[..n]
        .iter()
        .any(|&x| x as usize >= rows && x != u32::MAX)
    {
        c.fail("lshk_graph_query_ex: an id out of range".into());
    }
}
