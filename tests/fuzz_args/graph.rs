//! The graph source of the index (the FGD graph): build (lshk_index_build
//! with LSHK_SOURCE_GRAPH and `p.graph`) and query (lshk_index_query with
//! `qp.graph`: the pool size, the walk, its re-rank). The reference is the
//! Rust API on an index built the same way (`Index`, `Family::Graph`),
//! bit for bit; a pool of every row is the brute-force top-k.

use super::*;

pub(crate) struct GraphX {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: Index,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    /// LSHK_STORAGE_* of the index's W (the scores).
    pub(crate) storage: u32,
    /// LSHK_STORAGE_* of the graph's own rows (the walk).
    pub(crate) gstorage: u32,
}

impl Drop for GraphX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build.
        unsafe { lshk_index_free(self.h) };
    }
}

/// The C build parameters of a graph-source index.
pub(crate) fn graph_c_params(
    storage: u32,
    gstorage: u32,
    m: u32,
    efc: u32,
    seed: u64,
) -> lshk_index_params {
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_GRAPH;
    p.storage = storage;
    p.graph.m = m;
    p.graph.ef_construction = efc;
    p.graph.storage = gstorage;
    p.graph.seed = seed;
    p.build_threads = 2;
    p
}

pub(crate) fn build_graphs() -> Vec<GraphX> {
    // (index storage, graph storage, m)
    let cfgs = [
        (LSHK_STORAGE_F32, LSHK_STORAGE_F32, 4u32),
        (LSHK_STORAGE_F32, LSHK_STORAGE_BF16, 6),
        (LSHK_STORAGE_I8, LSHK_STORAGE_I8, 3),
        (LSHK_STORAGE_BF16, LSHK_STORAGE_I8, 3),
        (LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32, 5),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(storage, gstorage, m))| {
            let (rows, dim) = (150 + 40 * i, 5 + 6 * i);
            let layer = lshk::data::structured_layer(rows, dim, 5, 31 + i as u64);
            let p = graph_c_params(storage, gstorage, m, 24, 9 + i as u64);
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes (kept alive in GraphX:
            // the Vec's heap buffer does not move); writable out.
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
            GraphX {
                h,
                mirror,
                dim,
                rows,
                w: layer.w,
                bias: layer.bias,
                storage,
                gstorage,
            }
        })
        .collect()
}

/// The Rust query parameters of a graph query.
pub(crate) fn graph_query(ef: u32, walk: u32, rerank: u32) -> lshk::index::QueryParams {
    lshk::index::QueryParams {
        graph: lshk::graph::SearchParams {
            ef: ef as usize,
            walk: lshk::graph::Walk::from_u32(walk).unwrap(),
            rerank: rerank as usize,
        },
        ..Default::default()
    }
}

/// The exact logit of row `id` for `qv` in f64 and the sum of the
/// magnitudes of its terms (the scale of its f32 error bound).
fn exact_logit(gx: &GraphX, id: usize, qv: &[f32]) -> (f64, f64) {
    let (mut e, mut a) = (gx.bias[id] as f64, gx.bias[id].abs() as f64);
    for (&x, &y) in gx.w[id * gx.dim..(id + 1) * gx.dim].iter().zip(qv) {
        let p = x as f64 * y as f64;
        e += p;
        a += p.abs();
    }
    (e, a)
}

/// The answers of one query block are scores of the index's W (f32 or
/// borrowed: the exact logits within the f32 bound), descending, ties by
/// id, ids in range, padding last; `Err` names the first violation.
fn check_exact_scores(
    gx: &GraphX,
    qd: &[f32],
    nq: usize,
    q_stride: usize,
    k: usize,
    ids: &[u32],
    sc: &[f32],
) -> Result<(), String> {
    let dim = gx.dim;
    let f32_scores = matches!(gx.storage, LSHK_STORAGE_F32 | LSHK_STORAGE_BORROWED_F32);
    for qi in 0..nq {
        let qv = &qd[qi * q_stride..qi * q_stride + dim];
        for t in 0..k {
            let (id, s) = (ids[qi * k + t], sc[qi * k + t]);
            if id == u32::MAX {
                if s != f32::NEG_INFINITY {
                    return Err("padding with a finite score".into());
                }
                continue;
            }
            if id as usize >= gx.rows {
                return Err(format!("id {id} out of range"));
            }
            if t > 0 {
                let (pi, ps) = (ids[qi * k + t - 1], sc[qi * k + t - 1]);
                if pi == u32::MAX || ps < s || (ps == s && pi > id) {
                    return Err("top-k order violated".into());
                }
            }
            if f32_scores {
                let (e, a) = exact_logit(gx, id as usize, qv);
                if (s as f64 - e).abs() > gamma(dim + 2) * a + 1e-40 {
                    return Err(format!("score {s} of id {id}, exact {e}"));
                }
            }
        }
    }
    Ok(())
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
    let mut qpar = lshk_query_params_default();
    // A pool of every row a third of the time: the exact top-k then.
    qpar.graph.ef = if r.one_in(3) {
        r.pick(&[gx.rows as u32, u32::MAX])
    } else {
        r.pick(&[1, 2, 8, 30])
    };
    // The other sources' knobs: the graph does not read them.
    if r.one_in(4) {
        qpar.lsh.probes = 5;
        qpar.lsh.bits_per_table = 77;
        qpar.ivf.nprobe = 0;
        qpar.ivf.reach = f32::NAN;
        qpar.forest.set_size = 0;
    }
    let mut use_scores = !r.one_in(4);
    let mut tmode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_query_stats>() as u32;
    let mut handle: *const lshk_index = gx.h;
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
            6 => qpar.graph.ef = r.pick(&[0, 1, u32::MAX, hv32]),
            7 => {
                tmode = r.pick(&[1, 2]);
                if r.one_in(2) {
                    let full = std::mem::size_of::<lshk_query_stats>() as u32;
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
    if qpar.graph.ef == 0 {
        v.err("ef 0");
    }
    nonfinite_queries(&mut v, &q, nq, dim, q_stride);
    let mut bs = BigStats {
        s: canary_stats(st_size),
        tail: [7, 7],
    };
    if tmode == 2 && st_size as usize == std::mem::size_of::<lshk_query_stats>() {
        bs.s.struct_size = std::mem::size_of::<BigStats>() as u32;
    }
    if tmode != 0 && (bs.s.struct_size as usize) < std::mem::size_of::<lshk_query_stats>() {
        v.err("stats struct_size too small");
    }
    let stp: *mut lshk_query_stats = if tmode == 0 {
        null_mut()
    } else {
        (&mut bs as *mut BigStats).cast()
    };
    let ef = qpar.graph.ef;
    c.desc = format!(
        "graph query storage {}/{} rows {} nq {nq} qs {q_stride} k {k} ef {ef} scores {use_scores} tmode {tmode} muts {what:?}",
        gx.storage, gx.gstorage, gx.rows
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_query", || unsafe {
        lshk_index_query(handle, qp, nq, q_stride, k, &qpar, oip, osp, stp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_index_query (graph) changed an input".into());
    }
    let kk = k as usize;
    let nk = nq.saturating_mul(kk);
    let rqp = graph_query(ef, LSHK_GRAPH_WALK_EXACT, 0);
    if !c.judge("lshk_index_query", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.v != oi0 || bits(&os.v) != os0 || !stats_untouched(&bs.s) || bs.tail != [7, 7])
        {
            c.fail(format!(
                "lshk_index_query (graph) failed with {st} but wrote an output"
            ));
        }
        // A call valid by every rule above is refused only where the Rust
        // API refuses it too, with the same status.
        if st != LSHK_STATUS_OK && v.expect_err.is_none() {
            let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
            let (mut ri, mut rs) = (vec![0u32; nk], vec![0f32; nk]);
            match gx
                .mirror
                .query_with(qd, nq, q_stride, k, &rqp, &mut ri, &mut rs, None)
            {
                Ok(()) => c.fail(format!(
                    "lshk_index_query (graph) refused a valid call with {st}: {}",
                    last_msg()
                )),
                Err(e) if e.status as u32 != st => c.fail(format!(
                    "lshk_index_query (graph) returned {st}, the Rust API {:?}",
                    e.status
                )),
                Err(_) => {}
            }
        }
        return;
    }
    if oi.v[nk] != CANARY
        || (use_scores && os.v[nk].to_bits() != CANARY)
        || bs.tail != [7, 7]
        || (tmode != 0 && bs.s.reserved != 0xA5A5)
    {
        c.fail("lshk_index_query (graph) wrote past its outputs".into());
    }
    // Reference 1: the Rust API on an identically built index.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = lshk::index::QueryStats::default();
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    if let Err(e) =
        gx.mirror
            .query_with(qd, nq, q_stride, k, &rqp, &mut ri, &mut rs, Some(&mut rst))
    {
        c.fail(format!(
            "lshk_index_query (graph) returned OK, Index::query_with refused: {e}"
        ));
        return;
    }
    if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
        c.fail(format!(
            "lshk_index_query (graph): ids {:?} vs Rust {:?}",
            &oi.data()[..nk],
            ri
        ));
    }
    if tmode != 0 && !stats_equal(&bs.s, &rst) {
        c.fail("lshk_index_query (graph): stats differ from Index::query_with".into());
    }
    // Reference 2 (independent): scores of the index's W, in order.
    if let Err(e) = check_exact_scores(gx, qd, nq, q_stride, kk, &ri, &rs) {
        c.fail(format!("lshk_index_query (graph): {e}"));
    }
    // Reference 3 (independent): a pool of every row with exact scores
    // (f32 W) is the exact top-k up to ties within the f32 bound.
    let f32_scores = matches!(gx.storage, LSHK_STORAGE_F32 | LSHK_STORAGE_BORROWED_F32);
    if ef as usize >= gx.rows && f32_scores {
        for qi in 0..nq {
            let qv = &qd[qi * q_stride..qi * q_stride + dim];
            let mut all: Vec<(f64, f64)> = (0..gx.rows).map(|rr| exact_logit(gx, rr, qv)).collect();
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
                let (e, _) = exact_logit(gx, id as usize, qv);
                if (e - all[t].0).abs() > maxb + 1e-40 {
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
    let mut p = graph_c_params(
        r.pick(&[
            LSHK_STORAGE_F32,
            LSHK_STORAGE_F32,
            LSHK_STORAGE_BORROWED_F32,
            LSHK_STORAGE_BF16,
            LSHK_STORAGE_F16,
            LSHK_STORAGE_I8,
        ]),
        r.pick(&[LSHK_STORAGE_F32, LSHK_STORAGE_BF16, LSHK_STORAGE_I8]),
        r.pick(&[2, 3, 4, 8]),
        r.pick(&[1, 4, 16]),
        r.0.next_u64(),
    );
    p.build_threads = r.pick(&[0, 1, 2]);
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut bias = Arr::new((0..rows).map(|_| r.f(-0.5, 0.5)).collect(), 0.0f32);
    let mut use_bias = !r.one_in(3);
    let mut pmode = r.pick(&[0, 0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(12);
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
            5 => p.graph.m = r.pick(&[0, 1, 257, hv32, 256]),
            6 => match r.u(4) {
                // BORROWED_F32 and F16 are storages, not of the graph's rows.
                0 => p.graph.storage = r.pick(&[0, 3, 5, u32::MAX]),
                1 => p.graph.reserved = r.pick(&[1, u32::MAX]),
                2 => p.storage = r.pick(&[5, u32::MAX]),
                _ => p.graph.ef_construction = 0,
            },
            7 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_index_params>() as u32;
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
            10 => p.transform = r.pick(&[LSHK_TRANSFORM_BIAS_AUG, LSHK_TRANSFORM_MIPS]),
            _ => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
        }
    }
    let big = BigIndexParams {
        p: lshk_index_params {
            struct_size: if pmode == 2 {
                std::mem::size_of::<BigIndexParams>() as u32
            } else {
                p.struct_size
            },
            ..p
        },
        tail: [0xEE; 24],
    };
    let eff = if pmode == 1 {
        lshk_index_params_default()
    } else {
        p
    };
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    if pmode != 1 && (p.struct_size as usize) < std::mem::size_of::<lshk_index_params>() {
        v.err("struct_size too small");
    }
    let gs_ok = matches!(
        eff.graph.storage,
        LSHK_STORAGE_F32 | LSHK_STORAGE_BF16 | LSHK_STORAGE_I8
    );
    if !gs_ok || eff.graph.reserved != 0 || eff.storage > LSHK_STORAGE_I8 {
        v.err("bad storage / reserved");
    }
    let graph = eff.source == LSHK_SOURCE_GRAPH;
    if graph && eff.transform != 0 {
        v.err("a transform on the graph source");
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
    if graph && (!(2..=256).contains(&eff.graph.m) || eff.graph.ef_construction == 0) {
        v.err("m or ef_construction out of range");
    }
    let mut overflow = false;
    if v.expect_err.is_none() {
        let wd = w.data();
        let bd = &bias.data()[..if use_bias { rows } else { 0 }];
        let rowvals = || (0..rows).flat_map(|rr| wd[rr * w_stride..rr * w_stride + dim].iter());
        if rowvals().chain(bd).any(|x| !x.is_finite()) {
            v.err("non-finite W or bias");
        } else {
            let a = rowvals().chain(bd).fold(0f32, |m, x| m.max(x.abs())) as f64;
            if a > lshk::error::score_limit(dim) {
                v.err("a value beyond the limit of the scores");
            }
            if eff.storage == LSHK_STORAGE_F16 && rowvals().any(|x| x.abs() > 65504.0) {
                v.err("beyond the f16 range");
            }
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
            if graph && n2 > 1e37 && v.expect_err.is_none() {
                overflow = true;
            }
        }
    }
    c.desc = format!(
        "graph build rows {rows} dim {dim} stride {w_stride} source {} storage {} m {} efc {} gstorage {} reserved {} transform {} pmode {pmode} bias {use_bias} muts {what:?}",
        eff.source, eff.storage, eff.graph.m, eff.graph.ef_construction, eff.graph.storage, eff.graph.reserved, eff.transform
    );
    let pp: *const lshk_index_params = match pmode {
        1 => null(),
        2 => &big.p,
        _ => &p,
    };
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_index;
    let mut outv: [*mut lshk_index; 2] = [canary, canary];
    let outp: *mut *mut lshk_index = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let (wp, bp) = (w.ptr(), if use_bias { bias.ptr() } else { null() });
    let (w0, b0) = (bits(&w.v), bits(&bias.v));
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_build", || unsafe {
        lshk_index_build(wp, bp, rows, dim, w_stride, pp, outp)
    });
    if bits(&w.v) != w0 || bits(&bias.v) != b0 {
        c.fail("lshk_index_build (graph) changed an input".into());
    }
    if overflow {
        // Near f32::MAX the overflow check decides: either outcome is
        // documented (NON_FINITE when U^2 overflows f32).
        if st == LSHK_STATUS_OK {
            // SAFETY: a live handle from the call above.
            unsafe { lshk_index_free(outv[0]) };
        } else if st != LSHK_STATUS_NON_FINITE || outv != [canary, canary] {
            c.fail(format!("lshk_index_build (graph): {st} on a huge row"));
        }
        return;
    }
    if !c.judge("lshk_index_build", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_index_build (graph) failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_index_build (graph) wrote past *out".into());
    }
    // Reference: the Rust build (one thread: the index does not depend on
    // it) answers the same queries bit for bit, with the same description
    // and memory.
    let bs = use_bias.then(|| &bias.data()[..rows]);
    let wd = &w.data()[..strided(rows, dim, w_stride).unwrap() as usize];
    // SAFETY: `w` outlives the mirror (dropped at the end of this function).
    let mirror = match unsafe {
        Index::build_borrowed(wd, bs, rows, dim, w_stride, &rust_params(&eff), None)
    } {
        Ok(m) => m,
        Err(e) => {
            c.fail(format!(
                "lshk_index_build (graph) returned OK, Index::build refused: {e}"
            ));
            // SAFETY: a live handle, freed once.
            unsafe { lshk_index_free(h) };
            return;
        }
    };
    let info = describe(h);
    let mut mem = 0usize;
    // SAFETY: a live handle; a writable output.
    let s2 = unsafe { lshk_index_memory_bytes(h, &mut mem) };
    if s2 != LSHK_STATUS_OK
        || info.is_none_or(|i| {
            (i.rows, i.dim, i.source, i.storage, i.transform)
                != (rows, dim, eff.source, eff.storage, eff.transform)
        })
        || mem != mirror.memory_bytes()
    {
        c.fail("lshk_index_build (graph): describe or memory differ from Index::build's".into());
    }
    let nq = 3;
    let qs: Vec<f32> = (0..nq * dim)
        .map(|i| wd[(i % dim) + (i / dim % rows) * w_stride] + 0.125)
        .collect();
    let kk = 4;
    for ef in [1u32, 8, u32::MAX] {
        let mut qp = lshk_query_params_default();
        qp.graph.ef = ef;
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let s3 = unsafe {
            lshk_index_query(
                h,
                qs.as_ptr(),
                nq,
                dim,
                kk as u32,
                &qp,
                ci.as_mut_ptr(),
                cs.as_mut_ptr(),
                null_mut(),
            )
        };
        // The same answer, or the same refusal (queries whose scores
        // could overflow f32 against huge rows).
        let same = match mirror.query_with(
            &qs,
            nq,
            dim,
            kk as u32,
            &graph_query(ef, LSHK_GRAPH_WALK_EXACT, 0),
            &mut ri,
            &mut rs,
            None,
        ) {
            Ok(()) => s3 == LSHK_STATUS_OK && ci == ri && bits(&cs) == bits(&rs),
            Err(e) => s3 == e.status as u32,
        };
        if !same {
            c.fail(format!(
                "lshk_index_build (graph): ef {ef} query ({s3}) {ci:?} differs from the Rust index's {ri:?}"
            ));
        }
    }
    // SAFETY: a live handle from lshk_index_build.
    unsafe { lshk_index_free(h) };
    drop(mirror);
}

/// How often each case of [`fuzz_graph_walk`] ran (index: its mutation;
/// 12 = none); the test checks that every one did.
pub(crate) static GRAPH_WALK_CASES: [AtomicU64; 13] = [const { AtomicU64::new(0) }; 13];

/// The graph's query options through lshk_index_query (`qp.graph`: walk,
/// ef, rerank) on graph indexes of every storage, with at most one
/// mutation per call, each with its exact documented status (nothing
/// written on a refusal); an OK call equals `Index::query_with` on the
/// mirror index bit for bit, returns scores of the index's W in order,
/// and writes nothing past its outputs.
pub(crate) fn fuzz_graph_walk(c: &mut Ctx, gs: &[GraphX]) {
    const GUARD: usize = 8;
    let sc_sent = f32::from_bits(CANARY);
    let gx = &gs[c.r.u(gs.len())];
    let r = &mut c.r;
    let (rows, dim) = (gx.rows, gx.dim);
    let mut p = lshk_query_params_default();
    p.graph.walk = r.u(2) as u32;
    p.graph.ef = match r.u(4) {
        0 => 1,
        1 => u32::MAX,
        _ => 1 + r.u(2 * rows) as u32,
    };
    p.graph.rerank = match r.u(3) {
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
    let mut stats = lshk_query_stats {
        struct_size: std::mem::size_of::<lshk_query_stats>() as u32,
        ..Default::default()
    };
    let mut use_p = true;
    let (mut use_scores, mut use_stats) = (!r.one_in(4), !r.one_in(3));
    let mut handle = gx.h as *const lshk_index;
    let (mut q_null, mut ids_null) = (false, false);
    let mut q_stride_c = q_stride;
    // One mutation (or none) per call; its documented status.
    let mut mutation = r.u(13);
    let want = match mutation {
        0 => {
            p.graph.walk = 2 + r.u(1000) as u32;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        1 => {
            p.graph.ef = 0;
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
        11 => {
            p.graph.reserved = 1 + r.u(1000) as u32;
            LSHK_STATUS_INVALID_ARGUMENT
        }
        _ => {
            mutation = 12; // none (also a guarded case whose guard failed)
            LSHK_STATUS_OK
        }
    };
    GRAPH_WALK_CASES[mutation].fetch_add(1, Ordering::Relaxed);
    let mut v = Verdict::default();
    if want != LSHK_STATUS_OK {
        v.err("a documented refusal");
    }
    c.desc = format!(
        "graph walk storage {}/{} rows {rows} mutation {mutation}: walk {} ef {} rerank {} k {k} nq {nq} stride {q_stride_c} p {use_p} scores {use_scores} stats {use_stats}",
        gx.storage, gx.gstorage, p.graph.walk, p.graph.ef, p.graph.rerank
    );
    let q0 = bits(&q);
    let qp = if q_null { null() } else { q.as_ptr() };
    let pp: *const lshk_query_params = if use_p { &p } else { null() };
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
    let stp: *mut lshk_query_stats = if use_stats { &mut stats } else { null_mut() };
    // SAFETY: every non-NULL pointer covers what the arguments promise
    // (q: ql floats, ids/sc: n values + guard, stats and p: whole
    // structs); the invalid ones are the documented refusals above.
    let st = c.call("lshk_index_query", || unsafe {
        lshk_index_query(handle, qp, nq, q_stride_c, k, pp, idp, scp, stp)
    });
    if st != want {
        c.fail(format!(
            "lshk_index_query (graph walk) returned {st}, expected {want}: {}",
            last_msg()
        ));
    }
    if bits(&q) != q0 {
        c.fail("lshk_index_query (graph walk) changed q".into());
    }
    if ids[n..].iter().any(|&x| x != CANARY) || bits(&sc[n..]) != bits(&[sc_sent; GUARD]) {
        c.fail("lshk_index_query (graph walk) wrote past its outputs".into());
    }
    if !c.judge("lshk_index_query", st, &v) {
        if ids.iter().any(|&x| x != CANARY) || sc.iter().any(|x| x.to_bits() != CANARY) {
            c.fail("lshk_index_query (graph walk) refused the call but wrote an output".into());
        }
        return;
    }
    if st != LSHK_STATUS_OK {
        return;
    }
    let rqp = if use_p {
        graph_query(p.graph.ef, p.graph.walk, p.graph.rerank)
    } else {
        lshk::index::QueryParams::default()
    };
    let (mut wi, mut ws) = (vec![0u32; n], vec![0f32; n]);
    let mut rst = lshk::index::QueryStats::default();
    if let Err(e) =
        gx.mirror
            .query_with(&q, nq, q_stride, k, &rqp, &mut wi, &mut ws, Some(&mut rst))
    {
        c.fail(format!(
            "lshk_index_query (graph walk) returned OK, Index::query_with refused: {e}"
        ));
        return;
    }
    if ids[..n] != wi[..] || (use_scores && bits(&sc[..n]) != bits(&ws)) {
        c.fail(format!(
            "lshk_index_query (graph walk): ids {:?} vs Rust {wi:?} (or the scores differ)",
            &ids[..n]
        ));
    }
    if use_stats && !stats_equal(&stats, &rst) {
        c.fail("lshk_index_query (graph walk): stats differ from Index::query_with".into());
    }
    if let Err(e) = check_exact_scores(gx, &q, nq, q_stride, k as usize, &wi, &ws) {
        c.fail(format!("lshk_index_query (graph walk): {e}"));
    }
}
