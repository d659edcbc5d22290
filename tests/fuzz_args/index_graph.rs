//! The graph family of the index (issue 16): lshk_index_query_ex on graph
//! indexes (the graph's query parameters mutated, checked against the Rust
//! API's `Index::query_with` on an identically built index) and
//! lshk_index_build_ex (the graph's build parameters mutated).

use super::*;

pub(crate) struct GIdx {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: Index,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    pub(crate) w: Vec<f32>,
}

impl Drop for GIdx {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build_ex.
        unsafe { lshk_index_free(self.h) };
    }
}

pub(crate) fn build_graph_indexes() -> Vec<GIdx> {
    // (index storage, graph storage, m)
    let cfgs = [
        (Storage::F32, LSHK_GRAPH_STORAGE_F32, 4u32),
        (Storage::Bf16, LSHK_GRAPH_STORAGE_I8, 3),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(storage, gs, m))| {
            let (rows, dim) = (120 + 50 * i, 6 + 5 * i);
            let layer = lshk::data::structured_layer(rows, dim, 5, 71 + i as u64);
            let mut p = lshk_index_params_default();
            p.family = Family::Graph as u32;
            p.storage = storage as u32;
            let mut gp = lshk_graph_params_default();
            gp.m = m;
            gp.ef_construction = 20;
            gp.storage = gs;
            gp.threads = 1;
            gp.seed = 5 + i as u64;
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes; writable out.
            let st = unsafe {
                lshk_index_build_ex(
                    layer.w.as_ptr(),
                    layer.bias.as_ptr(),
                    rows,
                    dim,
                    dim,
                    &p,
                    &gp,
                    &mut h,
                )
            };
            assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
            let ip = IndexParams {
                family: Family::Graph,
                storage,
                graph: graph_params(m, 20, gs, 5 + i as u64),
                ..Default::default()
            };
            let mirror =
                Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &ip, None).unwrap();
            GIdx {
                h,
                mirror,
                dim,
                rows,
                w: layer.w,
            }
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BigQueryParams {
    p: lshk_graph_query_params,
    tail: [u8; 24],
}

pub(crate) fn fuzz_index_graph_query(c: &mut Ctx, gs: &[GIdx]) {
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
    let mut gq = lshk_graph_query_params_default();
    gq.ef = r.pick(&[1, 4, 30, gx.rows as u32, u32::MAX]);
    gq.walk = r.pick(&[LSHK_GRAPH_WALK_EXACT, LSHK_GRAPH_WALK_INT8]);
    gq.rerank = r.pick(&[0, 0, 1, 3, 1000]);
    let mut qmode = r.pick(&[0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut gp = lshk_gather_params_default();
    gp.probes = r.pick(&[0, 0, 5]); // ignored by the graph family
    let mut use_scores = !r.one_in(4);
    let mut handle: *const lshk_index = gx.h;
    let mut foreign = [0u64; 8];
    let (mut oi_mode, mut os_mode) = (Mode::Ok, Mode::Ok);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
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
            4 => k = r.pick(&[k.saturating_add(1), 0, hv32, gx.rows as u32 + 3]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => match r.u(3) {
                0 => gq.ef = 0,
                1 => gq.walk = r.pick(&[2, u32::MAX]),
                _ => gq.rerank = r.pick(&[0, u32::MAX]),
            },
            7 => {
                qmode = 0;
                let full = std::mem::size_of::<lshk_graph_query_params>() as u32;
                gq.struct_size = r.pick(&[0, 8, full - 1]);
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = foreign.as_ptr().cast();
            }
        }
    }
    if handle.is_null() {
        v.err("NULL handle");
    } else if handle == foreign.as_ptr().cast() {
        v.err("foreign handle");
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
    if v.skip || (k as usize > 4096 && v.expect_err.is_none()) {
        c.skipped += 1;
        return;
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    let mut big = BigQueryParams {
        p: gq,
        tail: [0x5a; 24],
    };
    if qmode == 2 && gq.struct_size as usize == std::mem::size_of::<lshk_graph_query_params>() {
        big.p.struct_size = std::mem::size_of::<BigQueryParams>() as u32;
    }
    let eff = if qmode == 1 {
        lshk_graph_query_params_default()
    } else {
        gq
    };
    if qmode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_graph_query_params>() {
        v.err("struct_size too small");
    }
    if eff.walk > 1 {
        v.err("bad walk");
    }
    if eff.ef == 0 {
        v.err("ef 0");
    }
    nonfinite_queries(&mut v, &q, nq, dim, q_stride);
    let gqp: *const lshk_graph_query_params = match qmode {
        1 => null(),
        2 => (&big as *const BigQueryParams).cast(),
        _ => &gq,
    };
    c.desc = format!(
        "index graph query rows {} nq {nq} qs {q_stride} k {k} gq {}/{}/{} qmode {qmode} scores {use_scores} muts {what:?}",
        gx.rows, eff.ef, eff.walk, eff.rerank
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_query_ex", || unsafe {
        lshk_index_query_ex(handle, qp, nq, q_stride, k, &gp, gqp, oip, osp, null_mut())
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_index_query_ex changed an input".into());
    }
    if !c.judge("lshk_index_query_ex", st, &v) {
        if st != LSHK_STATUS_OK && (oi.v != oi0 || bits(&os.v) != os0) {
            c.fail(format!(
                "lshk_index_query_ex failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let nk = nq * k as usize;
    if oi.v[nk] != CANARY || (use_scores && os.v[nk].to_bits() != CANARY) {
        c.fail("lshk_index_query_ex wrote past its outputs".into());
    }
    // Reference: the Rust API on an identically built index.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let qpar = lshk::index::QueryParams {
        graph: lshk::graph::SearchParams {
            ef: eff.ef as usize,
            walk: lshk::graph::Walk::from_u32(eff.walk).unwrap(),
            rerank: eff.rerank as usize,
        },
        ..Default::default()
    };
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    match gx
        .mirror
        .query_with(qd, nq, q_stride, k, &qpar, &mut ri, &mut rs, None)
    {
        Err(e) => c.fail(format!(
            "lshk_index_query_ex returned OK, Index::query_with refused: {e}"
        )),
        Ok(()) => {
            if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
                c.fail(format!(
                    "lshk_index_query_ex: ids {:?} vs Rust {:?}",
                    &oi.data()[..nk],
                    ri
                ));
            }
            if ri
                .iter()
                .any(|&id| id != u32::MAX && id as usize >= gx.rows)
            {
                c.fail("lshk_index_query_ex: an id out of range".into());
            }
        }
    }
}

pub(crate) fn fuzz_index_graph_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let (rows, dim) = (1 + r.u(40), 1 + r.u(8));
    let layer = lshk::data::structured_layer(rows.max(2), dim, 3, r.0.next_u64() % 1000);
    let mut p = lshk_index_params_default();
    p.family = Family::Graph as u32;
    let mut gp = lshk_graph_params_default();
    gp.m = r.pick(&[2, 3, 8]);
    gp.ef_construction = r.pick(&[1, 8]);
    gp.storage = r.pick(&[0, 1, 2]);
    gp.threads = 1;
    let mut gmode = r.pick(&[0, 0, 1]); // 0 struct, 1 NULL
    let mut out_bad = false;
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(7);
        what.push(m);
        match m {
            0 => gp.m = r.pick(&[0, 1, 257, u32::MAX]),
            1 => gp.ef_construction = 0,
            2 => gp.storage = r.pick(&[3, u32::MAX]),
            3 => gp.reserved = r.pick(&[1, u32::MAX]),
            4 => {
                gmode = 0;
                let full = std::mem::size_of::<lshk_graph_params>() as u32;
                gp.struct_size = r.pick(&[0, 8, full - 1]);
            }
            5 => p.transform = r.pick(&[1, 2]),
            _ => out_bad = true,
        }
    }
    let eff = if gmode == 1 {
        lshk_graph_params_default()
    } else {
        gp
    };
    if out_bad {
        v.err("NULL out");
    }
    if gmode == 0 && (gp.struct_size as usize) < std::mem::size_of::<lshk_graph_params>() {
        v.err("struct_size too small");
    }
    if eff.storage > 2 || eff.reserved != 0 {
        v.err("bad storage / reserved");
    }
    if !(2..=256).contains(&eff.m) || eff.ef_construction == 0 {
        v.err("m or ef_construction out of range");
    }
    if p.transform != 0 {
        v.err("a transform on the graph family");
    }
    c.desc = format!("index graph build rows {rows} dim {dim} muts {what:?}");
    let gpp: *const lshk_graph_params = if gmode == 1 { null() } else { &gp };
    let mut h: *mut lshk_index = null_mut();
    let outp: *mut *mut lshk_index = if out_bad { null_mut() } else { &mut h };
    // SAFETY: W and bias of rows x dim; `out` NULL (refused) or writable.
    let st = c.call("lshk_index_build_ex", || unsafe {
        lshk_index_build_ex(
            layer.w.as_ptr(),
            layer.bias.as_ptr(),
            rows,
            dim,
            dim,
            &p,
            gpp,
            outp,
        )
    });
    if !c.judge("lshk_index_build_ex", st, &v) {
        if st != LSHK_STATUS_OK && !h.is_null() {
            c.fail("lshk_index_build_ex failed but wrote *out".into());
        }
        return;
    }
    // SAFETY: a live handle from the build.
    unsafe { lshk_index_free(h) };
}
