//! The IVF source of the index: build (lshk_index_build with
//! LSHK_SOURCE_IVF and `p.ivf`), query (lshk_index_query with `qp.ivf`),
//! calibration (lshk_index_calibrate) and label-aware lists
//! (lshk_index_train_labels). The reference is the Rust API on an index
//! built the same way (`Index`, `Family::Ivf`), bit for bit, and where the
//! lists' own answers pass through unchanged (f32 or borrowed W and an
//! exact stage), the lists' `Ivf::search_stats` too.

use super::*;

pub(crate) struct IvfX {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: Index,
    pub(crate) dim: usize,
    pub(crate) rows: usize,
    pub(crate) nlist: usize,
    /// W and the bias (a borrowed W is read in place by both indexes; the
    /// Vec's heap buffer does not move).
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) codes: Codes,
    pub(crate) storage: Storage,
}

impl Drop for IvfX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build.
        unsafe { lshk_index_free(self.h) };
    }
}

/// The C build parameters of an IVF-source index.
pub(crate) fn ivf_c_params(
    nlist: u32,
    iters: u32,
    codes: u32,
    storage: u32,
    seed: u64,
) -> lshk_index_params {
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_IVF;
    p.storage = storage;
    p.ivf.nlist = nlist;
    p.ivf.iters = iters;
    p.ivf.codes = codes;
    p.ivf.seed = seed;
    p.build_threads = 1;
    p
}

/// The Rust query parameters of an IVF query.
pub(crate) fn ivf_query(nprobe: u32, rerank: u32, reach: f32) -> lshk::index::QueryParams {
    lshk::index::QueryParams {
        ivf: SearchParams {
            nprobe,
            rerank,
            reach,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Queries of a C handle and of its Rust mirror (every list re-ranked, one
/// list without re-ranking, the defaults), bit for bit, or refused by both
/// with the same status (queries whose scores could overflow f32).
pub(crate) fn ivf_same_answers(
    h: *const lshk_index,
    mirror: &Index,
    qs: &[f32],
    nq: usize,
    dim: usize,
) -> bool {
    let kk = 4;
    [
        (u32::MAX, u32::MAX, 0.0f32),
        (1, 0, 0.0),
        (u32::MAX, 32, 3.0),
    ]
    .iter()
    .all(|&(nprobe, rerank, reach)| {
        let mut qp = lshk_query_params_default();
        qp.ivf.nprobe = nprobe;
        qp.ivf.rerank = rerank;
        qp.ivf.reach = reach;
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let st = unsafe {
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
        match mirror.query_with(
            qs,
            nq,
            dim,
            kk as u32,
            &ivf_query(nprobe, rerank, reach),
            &mut ri,
            &mut rs,
            None,
        ) {
            Ok(()) => st == LSHK_STATUS_OK && ci == ri && bits(&cs) == bits(&rs),
            Err(e) => st == e.status as u32,
        }
    })
}

/// Whether the label information of the C handle is `want` (trained with
/// these parameters) or untrained (`None`), also through describe.
fn label_info_is(h: *const lshk_index, want: Option<&LabelParams>) -> bool {
    let (mut tr, mut lpo) = (9u32, lshk_label_params_default());
    // SAFETY: a live handle; writable outputs.
    let si = unsafe { lshk_index_label_info(h, &mut tr, &mut lpo) };
    let info = describe(h);
    si == LSHK_STATUS_OK
        && info.is_some_and(|i| i.labelled == u32::from(want.is_some()))
        && match want {
            None => tr == 0,
            Some(p) => tr == 1 && lpo.label_cap == p.label_cap && lpo.policy == p.policy as u32,
        }
}

/// lshk_index_train_labels on a fresh small IVF-source index (int8 codes
/// on a borrowed W or a copy, exact lists, or PQ4, which must refuse):
/// mutated queries, stride, CSR labels, parameters, a second training. OK
/// must give the lists that `Index::train_labels` gives the Rust mirror
/// (the same queries afterwards, bit for bit, and the same
/// lshk_index_label_info); a refusal must leave the index answering as
/// before; inputs never change.
pub(crate) fn fuzz_ivf_labels(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let rows = 16 + r.u(40);
    let dim = 1 + r.u(10);
    let codes = r.pick(&[
        LSHK_IVF_CODES_I8,
        LSHK_IVF_CODES_NONE,
        LSHK_IVF_CODES_PQ4,
        LSHK_IVF_CODES_PQ4_I8,
    ]);
    let storage = r.pick(&[
        LSHK_STORAGE_F32,
        LSHK_STORAGE_BORROWED_F32,
        LSHK_STORAGE_BF16,
    ]);
    let w: Vec<f32> = (0..rows * dim).map(|_| r.f(-1.0, 1.0)).collect();
    let bias: Vec<f32> = (0..rows).map(|_| r.f(-0.5, 0.5)).collect();
    let p = ivf_c_params(1 + r.u(6) as u32, 2, codes, storage, r.0.next_u64());
    let mut h: *mut lshk_index = null_mut();
    // SAFETY: valid W, bias and params; a writable out; W outlives h.
    let s0 = unsafe { lshk_index_build(w.as_ptr(), bias.as_ptr(), rows, dim, dim, &p, &mut h) };
    assert_eq!(s0, LSHK_STATUS_OK, "{}", last_msg());
    // SAFETY: W outlives the mirror (both dropped at the end).
    let mut mirror =
        unsafe { Index::build_borrowed(&w, Some(&bias), rows, dim, dim, &rust_params(&p), None) }
            .unwrap();
    if codes == LSHK_IVF_CODES_PQ4 || codes == LSHK_IVF_CODES_PQ4_I8 {
        v.err("PQ4 lists cannot take labels");
    }
    let mut nt = r.u(12);
    let mut q_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut q = Arr::new((0..nt * q_stride).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let lo0 = csr(r, nt, 3);
    let mut labels = Arr::new(
        (0..*lo0.last().unwrap())
            .map(|_| r.u(rows) as u32)
            .collect(),
        0u32,
    );
    let mut lo = Arr::new(lo0, 0usize);
    let mut lp = lshk_label_params_default();
    lp.label_cap = r.pick(&[0, 1, 2, 64]);
    lp.policy = r.pick(&[LSHK_LABEL_POLICY_BESIDE, LSHK_LABEL_POLICY_INSTEAD]);
    let mut pmode = 0;
    let mut twice = false;
    let mut nan_at = None;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(11);
        what.push(m);
        match m {
            0 => match r.u(4) {
                0 => q.mode = Mode::Null,
                1 => lo.mode = Mode::Null,
                2 => labels.mode = Mode::Null,
                _ => pmode = 1,
            },
            1 => match r.u(3) {
                0 => q.mode = Mode::Mis,
                1 => lo.mode = Mode::Mis,
                _ => labels.mode = Mode::Mis,
            },
            2 => nt = r.size(nt),
            3 => mutate_offsets(r, lo.data_mut()),
            4 if labels.len() > 0 => {
                let j = r.u(labels.len());
                labels.data_mut()[j] = r.pick(&[rows as u32, u32::MAX]);
            }
            5 => lp.policy = r.pick(&[2, u32::MAX]),
            6 => {
                let full = std::mem::size_of::<lshk_label_params>() as u32;
                lp.struct_size = r.pick(&[0, 4, full - 1]);
            }
            7 => pmode = 2,
            8 => {
                let hv = r.pick(&HUGE);
                q_stride = r.pick(&[dim - 1, 0, hv]);
            }
            9 if nt > 0 => nan_at = Some((r.u(nt), r.u(dim))),
            _ => twice = true,
        }
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    q.need(strided(nt, dim, q_stride), &mut v, || 0.5);
    lo.need(nt.checked_add(1).map(|x| x as u128), &mut v, || 0);
    let total = if lo.mode == Mode::Ok && lo.len() > nt {
        lo.data()[nt] as u128
    } else {
        0
    };
    if lo.mode == Mode::Ok && lo.len() > nt && lo.data()[..nt + 1].windows(2).any(|w| w[1] < w[0]) {
        v.err("label_offsets decrease");
    }
    labels.need(Some(total), &mut v, || 0);
    if v.skip {
        c.skipped += 1;
        // SAFETY: a live handle.
        unsafe { lshk_index_free(h) };
        return;
    }
    let first = if lo.mode == Mode::Ok && lo.len() > nt {
        lo.data()[0]
    } else {
        0
    };
    let used_end = (total as usize).min(labels.len());
    if labels.mode == Mode::Ok
        && first <= used_end
        && labels.data()[first..used_end]
            .iter()
            .any(|&y| y as usize >= rows)
    {
        v.err("label >= rows");
    }
    if let (Some((i, j)), Mode::Ok, true) = (nan_at, q.mode, q_stride >= dim) {
        let at = i.checked_mul(q_stride).and_then(|x| x.checked_add(j));
        if let (Some(at), true) = (at, i < nt) {
            if at >= q.len() {
                // Beyond the buffer (a claim the call cannot make): no NaN.
                what.push(99);
            } else {
                q.data_mut()[at] = f32::NAN;
                v.err("non-finite query");
            }
        }
    }
    let mut big = BigLabel {
        p: lp,
        tail: [u64::MAX; 2],
    };
    if pmode == 2 && lp.struct_size as usize == std::mem::size_of::<lshk_label_params>() {
        big.p.struct_size = std::mem::size_of::<BigLabel>() as u32;
    }
    if pmode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_label_params>() {
        v.err("struct_size too small");
    }
    if pmode != 1 && lp.policy > 1 {
        v.err("bad policy");
    }
    let pp: *const lshk_label_params = match pmode {
        1 => null(),
        2 => (&big as *const BigLabel).cast(),
        _ => &lp,
    };
    let eff = if pmode == 1 {
        LabelParams::default()
    } else {
        LabelParams {
            label_cap: lp.label_cap,
            policy: LabelPolicy::from_u32(lp.policy).unwrap_or(LabelPolicy::Beside),
        }
    };
    let mut trained_before = None;
    if twice && codes != LSHK_IVF_CODES_PQ4 && codes != LSHK_IVF_CODES_PQ4_I8 {
        // First a valid training with no queries (the lists stay as they
        // are, but the index counts as trained).
        let z = [0usize];
        // SAFETY: n = 0: one offset, no queries, no labels.
        let s = unsafe { lshk_index_train_labels(h, null(), 0, dim, z.as_ptr(), null(), null()) };
        assert_eq!(s, LSHK_STATUS_OK, "{}", last_msg());
        mirror
            .train_labels(&[], 0, dim, &z, &[], &LabelParams::default())
            .unwrap();
        trained_before = Some(LabelParams::default());
        v.err("the index is already trained");
    }
    c.desc = format!(
        "ivf train_labels rows {rows} dim {dim} codes {codes} storage {storage} nlist {} nt {nt} qs {q_stride} params {eff:?} pmode {pmode} twice {twice} muts {what:?}",
        p.ivf.nlist
    );
    let probe: Vec<f32> = (0..3 * dim).map(|i| w[i % (rows * dim)] + 0.25).collect();
    let (qp, op, yp) = (q.ptr(), lo.ptr(), labels.ptr());
    let i0 = (bits(&q.v), lo.v.clone(), labels.v.clone());
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_train_labels", || unsafe {
        lshk_index_train_labels(h, qp, nt, q_stride, op, yp, pp)
    });
    if (bits(&q.v), lo.v.clone(), labels.v.clone()) != i0 {
        c.fail("lshk_index_train_labels changed an input".into());
    }
    if c.judge("lshk_index_train_labels", st, &v) {
        let ql = strided(nt, dim, q_stride).unwrap() as usize;
        let rr = mirror.train_labels(
            view(&q, ql),
            nt,
            q_stride,
            view(&lo, nt + 1),
            view(&labels, total as usize),
            &eff,
        );
        if rr.is_err()
            || !label_info_is(h, Some(&eff))
            || !ivf_same_answers(h, &mirror, &probe, 3, dim)
        {
            c.fail(
                "lshk_index_train_labels: lists or label info differ from Index::train_labels's"
                    .into(),
            );
        }
    } else if st != LSHK_STATUS_OK
        && !(ivf_same_answers(h, &mirror, &probe, 3, dim)
            && label_info_is(h, trained_before.as_ref()))
    {
        c.fail(format!(
            "lshk_index_train_labels failed with {st} but changed the index"
        ));
    }
    // SAFETY: a live handle.
    unsafe { lshk_index_free(h) };
    drop(mirror);
}

pub(crate) fn build_ivfs() -> Vec<IvfX> {
    // (codes, storage, nlist)
    let cfgs = [
        (Codes::I8, Storage::BorrowedF32, 9u32),
        (Codes::I8, Storage::F32, 1),
        (Codes::None, Storage::F32, 14),
        (Codes::Pq4, Storage::BorrowedF32, 5),
        (Codes::Pq4I8, Storage::BorrowedF32, 4),
        (Codes::I8, Storage::Bf16, 6),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(codes, storage, nlist))| {
            let (rows, dim) = (180 + 50 * i, 7 + 5 * i);
            let layer = lshk::data::structured_layer(rows, dim, 6, 21 + i as u64);
            let p = ivf_c_params(nlist, 4, codes as u32, storage as u32, 5 + i as u64);
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes (kept alive in IvfX:
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
            IvfX {
                h,
                mirror,
                dim,
                rows,
                nlist: nlist as usize,
                w: layer.w,
                bias: layer.bias,
                codes,
                storage,
            }
        })
        .collect()
}

/// The exact top-k of query `qv` (f64 logits), for the brute-force oracle.
pub(crate) fn ivf_brute(ix: &IvfX, qv: &[f32], k: usize) -> Vec<(f64, f64)> {
    let mut all: Vec<(f64, f64)> = (0..ix.rows)
        .map(|r| {
            let (mut e, mut a) = (ix.bias[r] as f64, ix.bias[r].abs() as f64);
            for (&x, &y) in ix.w[r * ix.dim..(r + 1) * ix.dim].iter().zip(qv) {
                let p = x as f64 * y as f64;
                e += p;
                a += p.abs();
            }
            (e, a)
        })
        .collect();
    all.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap());
    all.truncate(k);
    all
}

pub(crate) fn fuzz_ivf_query(c: &mut Ctx, ivfs: &[IvfX]) {
    let ix = &ivfs[c.r.u(ivfs.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let dim = ix.dim;
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
                let row = (i / q_stride * 41) % ix.rows;
                ix.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.2, 0.2)
            })
            .collect(),
        0.0f32,
    );
    let mut k = r.u(12) as u32;
    let mut sp = lshk_query_params_default();
    // A full search (every list, every candidate re-ranked) a third of the
    // time: then the brute force is the oracle too.
    if r.one_in(3) {
        sp.ivf.nprobe = r.pick(&[ix.nlist as u32, u32::MAX]);
        sp.ivf.rerank = r.pick(&[ix.rows as u32, u32::MAX]);
        sp.ivf.reach = 0.0;
    } else {
        sp.ivf.nprobe = 1 + r.u(ix.nlist + 2) as u32;
        sp.ivf.rerank = r.pick(&[0, 1, 5, 64, 1000]);
        sp.ivf.reach = r.pick(&[0.0, 0.5, 2.0, 50.0]);
        sp.ivf.refine = r.pick(&[0, 3, 256, u32::MAX]);
    }
    // The other sources' knobs: an IVF source does not read them.
    if r.one_in(4) {
        sp.lsh.probes = u32::MAX;
        sp.lsh.bits_per_table = 99;
        sp.graph.ef = 0;
        sp.forest.set_size = 0;
    }
    let mut smode = r.pick(&[0, 0, 1]); // 0 struct, 1 NULL, 2 big
    let mut use_scores = !r.one_in(4);
    let mut tmode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_query_stats>() as u32;
    let mut handle: *const lshk_index = ix.h;
    let mut foreign = [0u64; 8];
    let (mut oi_mode, mut os_mode) = (Mode::Ok, Mode::Ok);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(11);
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
            4 => k = r.pick(&[k.saturating_add(1), 0, hv32, 100_000, ix.rows as u32 + 3]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => {
                smode = 0;
                let full = std::mem::size_of::<lshk_query_params>() as u32;
                sp.struct_size = r.pick(&[0, 4, full - 1]);
            }
            7 => smode = 2,
            8 => {
                sp.ivf.nprobe = r.pick(&[0, 1, u32::MAX]);
                sp.ivf.rerank = r.pick(&[0, u32::MAX, hv32]);
                sp.ivf.reach = r.pick(&[0.0, 2.0, -1.0, -1e-30, f32::NAN, f32::INFINITY, 1e30]);
            }
            9 => {
                tmode = r.pick(&[1, 2]);
                if r.one_in(2) {
                    let full = std::mem::size_of::<lshk_query_stats>() as u32;
                    st_size = r.pick(&[0, 8, full - 1]);
                }
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = r.pick(&[foreign.as_ptr().cast(), ivfs[0].h.cast_const()]);
            }
        }
    }
    if !ivf_handle_verdict(&mut v, handle, &foreign, ix) {
        c.skipped += 1;
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
    if v.skip {
        c.skipped += 1;
        return;
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    nonfinite_queries(&mut v, &q, nq, dim, q_stride);
    let mut big = BigQuery {
        p: sp,
        tail: [0x5a5a_5a5a; 4],
    };
    if smode == 2 && sp.struct_size as usize == std::mem::size_of::<lshk_query_params>() {
        big.p.struct_size = std::mem::size_of::<BigQuery>() as u32;
    }
    if smode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_query_params>() {
        v.err("query params struct_size too small");
    }
    let eff = if smode == 1 {
        lshk_query_params_default()
    } else {
        sp
    };
    if eff.ivf.nprobe == 0 {
        v.err("nprobe 0");
    }
    if !(eff.ivf.reach.is_finite() && eff.ivf.reach >= 0.0) {
        v.err("reach negative or not finite");
    }
    let spp: *const lshk_query_params = match smode {
        1 => null(),
        2 => (&big as *const BigQuery).cast(),
        _ => &sp,
    };
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
    c.desc = format!(
        "ivf query {:?}/{:?} nlist {} nq {nq} qs {q_stride} k {k} nprobe {} rerank {} reach {} refine {} smode {smode} scores {use_scores} tmode {tmode} muts {what:?}",
        ix.codes, ix.storage, ix.nlist, eff.ivf.nprobe, eff.ivf.rerank, eff.ivf.reach, eff.ivf.refine
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_query", || unsafe {
        lshk_index_query(handle, qp, nq, q_stride, k, spp, oip, osp, stp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_index_query (IVF) changed an input".into());
    }
    let rqp = lshk::index::QueryParams {
        ivf: SearchParams {
            nprobe: eff.ivf.nprobe,
            rerank: eff.ivf.rerank,
            reach: eff.ivf.reach,
            refine: eff.ivf.refine,
        },
        ..Default::default()
    };
    let kk = k as usize;
    let nk = nq.saturating_mul(kk);
    let qd = view(
        &q,
        strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize,
    );
    if !c.judge("lshk_index_query", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.v != oi0 || bits(&os.v) != os0 || !stats_untouched(&bs.s) || bs.tail != [7, 7])
        {
            c.fail(format!(
                "lshk_index_query (IVF) failed with {st} but wrote an output"
            ));
        }
        // A call valid by every rule above is refused only where the Rust
        // API refuses it too, with the same status.
        if st != LSHK_STATUS_OK && v.expect_err.is_none() {
            let (mut ri, mut rs) = (vec![0u32; nk], vec![0f32; nk]);
            match ix
                .mirror
                .query_with(qd, nq, q_stride, k, &rqp, &mut ri, &mut rs, None)
            {
                Ok(()) => c.fail(format!(
                    "lshk_index_query (IVF) refused a valid call with {st}: {}",
                    last_msg()
                )),
                Err(e) if e.status as u32 != st => c.fail(format!(
                    "lshk_index_query (IVF) returned {st}, the Rust API {:?}",
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
        || (smode == 2 && big.tail != [0x5a5a_5a5a; 4])
    {
        c.fail("lshk_index_query (IVF) wrote past its outputs".into());
    }
    // Reference 1: the safe Rust API on an identically built index.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = lshk::index::QueryStats::default();
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    if let Err(e) =
        ix.mirror
            .query_with(qd, nq, q_stride, k, &rqp, &mut ri, &mut rs, Some(&mut rst))
    {
        c.fail(format!(
            "lshk_index_query (IVF) returned OK, Index::query_with refused: {e}"
        ));
        return;
    }
    if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
        c.fail(format!(
            "lshk_index_query (IVF): ids {:?} vs Rust {:?}",
            &oi.data()[..nk],
            ri
        ));
    }
    if tmode != 0 && !stats_equal(&bs.s, &rst) {
        c.fail("lshk_index_query (IVF): stats differ from Index::query_with".into());
    }
    // Reference 2: where the lists' answers are final (f32 or borrowed W,
    // an exact stage), they are the lists' own `Ivf::search_stats`,
    // counts included.
    let lists = ix.mirror.ivf().expect("an IVF-source index");
    let exact_stage = eff.ivf.rerank > 0 || ix.codes == Codes::None;
    if matches!(ix.storage, Storage::F32 | Storage::BorrowedF32) && exact_stage {
        let (mut li, mut ls) = (vec![0u32; nk], vec![0f32; nk]);
        let mut lst = SearchStats::default();
        let ok = lists
            .search_stats(
                lshk::isa::active(),
                qd,
                nq,
                q_stride,
                kk,
                &rqp.ivf,
                &mut li,
                &mut ls,
                Some(&mut lst),
            )
            .is_ok();
        if !ok
            || li != ri
            || bits(&ls) != bits(&rs)
            || (rst.lists, rst.scanned, rst.reranked) != (lst.lists, lst.scanned, lst.reranked)
        {
            c.fail("lshk_index_query (IVF): differs from the lists' Ivf::search_stats".into());
        }
    }
    // Reference 3 (independent): a full search is the exact top-k up to
    // ties within the f32 bound (scores from the stored W: f32 storage).
    let full = eff.ivf.nprobe as usize >= ix.nlist
        && eff.ivf.reach == 0.0
        && (ix.codes == Codes::None || eff.ivf.rerank as usize >= ix.rows)
        && matches!(ix.storage, Storage::F32 | Storage::BorrowedF32);
    if full {
        for qi in 0..nq {
            let qv = &qd[qi * q_stride..qi * q_stride + dim];
            let want = ivf_brute(ix, qv, kk);
            let maxb = want.iter().fold(0f64, |m, x| m.max(x.1)) * gamma(dim + 2) * 2.0;
            for t in 0..kk {
                let (id, s) = (ri[qi * kk + t], rs[qi * kk + t]);
                if t >= ix.rows {
                    if id != u32::MAX || s != f32::NEG_INFINITY {
                        c.fail("a full search beyond rows is not padded".into());
                    }
                    continue;
                }
                if id as usize >= ix.rows {
                    c.fail(format!("full search: id {id} out of range"));
                    break;
                }
                let (mut e, mut a) = (
                    ix.bias[id as usize] as f64,
                    ix.bias[id as usize].abs() as f64,
                );
                let row = &ix.w[id as usize * dim..(id as usize + 1) * dim];
                for (&x, &y) in row.iter().zip(qv) {
                    let p = x as f64 * y as f64;
                    e += p;
                    a += p.abs();
                }
                if (s as f64 - e).abs() > gamma(dim + 2) * a + 1e-40
                    || (e - want[t].0).abs() > maxb + gamma(dim + 2) * a * 2.0 + 1e-40
                {
                    c.fail(format!(
                        "full search: rank {t} id {id} score {s} exact {e}, brute force {}",
                        want[t].0
                    ));
                }
            }
        }
    }
}

pub(crate) fn fuzz_ivf_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut rows = 1 + r.u(60);
    let mut dim = 1 + r.u(12);
    let mut w_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_IVF;
    p.ivf.nlist = r.pick(&[0, 1, 2, 5]);
    p.ivf.iters = 1 + r.u(3) as u32;
    p.ivf.train_rows = r.pick(&[0, 0, 7, 30]);
    p.ivf.codes = r.pick(&[
        LSHK_IVF_CODES_I8,
        LSHK_IVF_CODES_NONE,
        LSHK_IVF_CODES_PQ4,
        LSHK_IVF_CODES_PQ4_I8,
    ]);
    p.storage = r.pick(&[
        LSHK_STORAGE_BORROWED_F32,
        LSHK_STORAGE_BORROWED_F32,
        LSHK_STORAGE_F32,
        LSHK_STORAGE_F32,
        LSHK_STORAGE_BF16,
        LSHK_STORAGE_F16,
        LSHK_STORAGE_I8,
    ]);
    if p.ivf.codes == LSHK_IVF_CODES_PQ4 || p.ivf.codes == LSHK_IVF_CODES_PQ4_I8 {
        // A divisor of dim (checked below), or 0 = dim / 2.
        p.ivf.pq_m = r.pick(&[0, 0, 1, 2, 3]);
        rows = rows.max(16);
    }
    p.build_threads = r.pick(&[0, 1, 2]);
    p.ivf.seed = r.0.next_u64();
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut bias = Arr::new((0..rows).map(|_| r.f(-0.5, 0.5)).collect(), 0.0f32);
    let mut use_bias = !r.one_in(3);
    let mut pmode = r.pick(&[0, 0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    // Row weights (p.ivf.row_weights) in a third of the builds: `rows`
    // weights in [0, 3), some zero; mutated below (pointer, count, values).
    let weighted = r.one_in(3);
    let mut wts = Arr::new(
        (0..rows)
            .map(|_| if r.one_in(4) { 0.0 } else { r.f(0.0, 3.0) })
            .collect(),
        0.0f32,
    );
    let mut n_wt = rows;
    let mut wmut = None;
    if weighted && r.one_in(2) {
        let (m, hv) = (r.u(6), r.pick(&HUGE));
        wmut = Some(m);
        match m {
            0 => wts.mode = r.pick(&[Mode::Null, Mode::Mis]),
            1 => n_wt = r.pick(&[0, rows - 1, rows + 1, usize::MAX, hv]),
            2 => {
                let j = r.u(rows);
                r.spoil(wts.data_mut(), j);
            }
            3 => {
                let j = r.u(rows);
                wts.data_mut()[j] = r.pick(&[-1.0, -1e-45, -3e38, -0.0]);
            }
            4 => wts.data_mut().iter_mut().for_each(|x| *x = 0.0),
            _ => {
                // One positive weight among zeros: fine.
                wts.data_mut().iter_mut().for_each(|x| *x = 0.0);
                let j = r.u(rows);
                wts.data_mut()[j] = 1e-30;
            }
        }
    }
    for _ in 0..r.u(4) {
        let m = r.u(13);
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
            5 => {
                p.ivf.nlist = r.pick(&[rows as u32, (rows as u32).wrapping_add(1), u32::MAX, hv32])
            }
            6 => p.ivf.train_rows = r.pick(&[1, p.ivf.nlist.saturating_sub(1), u32::MAX]),
            7 => match r.u(5) {
                0 => p.ivf.codes = r.pick(&[4, 5, u32::MAX]),
                1 => p.storage = r.pick(&[5, u32::MAX, LSHK_STORAGE_BORROWED_F32]),
                2 => p.ivf.pq_m = r.pick(&[1, 5, 13, u32::MAX]),
                3 => p.ivf.reserved = r.pick(&[1, u32::MAX]),
                _ => p.ivf.iters = 0,
            },
            8 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_index_params>() as u32;
                p.struct_size = r.pick(&[0, 8, full - 1]);
            }
            9 if w.len() > 0 => {
                let j = r.u(w.len());
                r.spoil(w.data_mut(), j);
            }
            10 => {
                use_bias = true;
                let j = r.u(bias.len());
                r.spoil(bias.data_mut(), j);
            }
            11 => p.transform = r.pick(&[LSHK_TRANSFORM_BIAS_AUG, LSHK_TRANSFORM_MIPS, 3]),
            _ => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
        }
    }
    if weighted {
        p.ivf.row_weights = wts.ptr();
        p.ivf.n_weights = n_wt;
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
    // Order of the documented checks: out, params, rows/dim, buffers.
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    if pmode != 1 {
        if weighted {
            wts.need(Some(n_wt as u128), &mut v, || 1.0);
        }
        if (p.struct_size as usize) < std::mem::size_of::<lshk_index_params>() {
            v.err("struct_size too small");
        }
    }
    if eff.ivf.codes > 3 || eff.storage > LSHK_STORAGE_I8 || eff.ivf.reserved != 0 {
        v.err("bad codes / storage / reserved");
    }
    if eff.transform > LSHK_TRANSFORM_MIPS {
        v.err("not an LSHK_TRANSFORM_* value");
    }
    if eff.source == LSHK_SOURCE_IVF && eff.transform != 0 {
        v.err("a transform on the IVF source");
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
    let ivf = eff.source == LSHK_SOURCE_IVF;
    if ivf {
        if weighted && n_wt != rows {
            v.err("n_weights != rows");
        }
        if eff.ivf.iters == 0 {
            v.err("iters 0");
        }
        if eff.ivf.codes == LSHK_IVF_CODES_PQ4 || eff.ivf.codes == LSHK_IVF_CODES_PQ4_I8 {
            let m = if eff.ivf.pq_m == 0 {
                lshk::ivf::default_pq_m(dim)
            } else {
                eff.ivf.pq_m as usize
            };
            if m > dim || !dim.is_multiple_of(m) {
                v.err("pq_m does not divide dim");
            }
            if rows < 16 {
                v.err("PQ4 needs 16 rows");
            }
        } else if eff.ivf.codes <= 3 && eff.ivf.pq_m != 0 {
            v.err("pq_m without PQ4");
        }
    }
    if v.expect_err.is_none() {
        if ivf {
            let nlist = if eff.ivf.nlist == 0 {
                lshk::ivf::auto_nlist(rows)
            } else {
                eff.ivf.nlist as usize
            };
            let ntrain = if eff.ivf.train_rows == 0 {
                rows.min(64 * nlist)
            } else {
                (eff.ivf.train_rows as usize).min(rows)
            };
            if nlist > rows || ntrain < nlist {
                v.err("nlist > rows or train_rows < nlist");
            }
        }
        let wd = w.data();
        let bd = &bias.data()[..if use_bias { rows } else { 0 }];
        let rowvals = || (0..rows).flat_map(|rr| wd[rr * w_stride..rr * w_stride + dim].iter());
        if rowvals().chain(bd).any(|x| !x.is_finite()) {
            v.err("non-finite W or bias");
        } else {
            let a = rowvals().chain(bd).fold(0f32, |m, x| m.max(x.abs())) as f64;
            let lim = if ivf {
                lshk::error::row_value_limit(dim)
            } else {
                lshk::error::score_limit(dim)
            };
            if a > lim {
                v.err("a value beyond the limit of the scores");
            }
            if eff.storage == LSHK_STORAGE_F16 && rowvals().any(|x| x.abs() > 65504.0) {
                v.err("beyond the f16 range");
            }
        }
        if ivf && weighted {
            let wd = &wts.data()[..rows];
            if wd.iter().any(|x| !x.is_finite()) {
                v.err("non-finite weight");
            }
            if wd.iter().any(|&x| x < 0.0) {
                v.err("negative weight");
            }
            if wd.iter().all(|&x| x == 0.0) {
                v.err("every weight 0");
            }
        }
    }
    c.desc = format!(
        "ivf build rows {rows} dim {dim} stride {w_stride} source {} nlist {} iters {} train {} codes {} pq_m {} storage {} transform {} pmode {pmode} bias {use_bias} muts {what:?} weighted {weighted} n_wt {n_wt} wmut {wmut:?}",
        eff.source, eff.ivf.nlist, eff.ivf.iters, eff.ivf.train_rows, eff.ivf.codes, eff.ivf.pq_m, eff.storage, eff.transform
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
    let (w0, b0, t0) = (bits(&w.v), bits(&bias.v), bits(&wts.v));
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_build", || unsafe {
        lshk_index_build(wp, bp, rows, dim, w_stride, pp, outp)
    });
    if bits(&w.v) != w0 || bits(&bias.v) != b0 || bits(&wts.v) != t0 {
        c.fail("lshk_index_build (IVF) changed an input".into());
    }
    if !c.judge("lshk_index_build", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_index_build (IVF) failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_index_build (IVF) wrote past *out".into());
    }
    // Reference: the Rust build with the same parameters gives the same
    // index (the same sizes and queries; every 16th build also the same
    // saved file, which compares every section: a save syncs to disk).
    let mut rp = rust_params(&eff);
    rp.ivf_row_weights = (ivf && weighted).then(|| wts.data()[..rows].to_vec());
    let bs = use_bias.then(|| &bias.data()[..rows]);
    let wd = &w.data()[..strided(rows, dim, w_stride).unwrap() as usize];
    // SAFETY: `w` outlives the mirror (dropped at the end of this function).
    let mirror = match unsafe { Index::build_borrowed(wd, bs, rows, dim, w_stride, &rp, None) } {
        Ok(m) => m,
        Err(e) => {
            c.fail(format!(
                "lshk_index_build (IVF) returned OK, Index::build refused: {e}"
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
    let want_nlist = mirror.ivf().map_or(0, |l| l.nlist() as u32);
    if s2 != LSHK_STATUS_OK
        || info.is_none_or(|i| {
            (i.rows, i.dim, i.source, i.storage, i.nlist)
                != (rows, dim, eff.source, eff.storage, want_nlist)
        })
        || mem != mirror.memory_bytes()
    {
        c.fail("lshk_index_build (IVF): describe or memory differ from Index::build's".into());
    }
    let nq = 3;
    let qs: Vec<f32> = (0..nq * dim)
        .map(|i| wd[(i % dim) + (i / dim % rows) * w_stride] + 0.125)
        .collect();
    if !ivf_same_answers(h, &mirror, &qs, nq, dim) {
        c.fail("lshk_index_build (IVF): queries differ from Index::build's".into());
    }
    if c.r.one_in(16) {
        let dir = std::env::temp_dir();
        let (pa, pb) = (
            dir.join(format!("lshk-fuzz-ivf-{}-a", std::process::id())),
            dir.join(format!("lshk-fuzz-ivf-{}-b", std::process::id())),
        );
        let cpa = std::ffi::CString::new(pa.to_str().unwrap()).unwrap();
        // SAFETY: a live handle and a NUL-terminated path.
        let s1 = unsafe { lshk_index_save(h, cpa.as_ptr()) };
        mirror.save(&pb).unwrap();
        let (fa, fb) = (
            std::fs::read(&pa).unwrap_or_default(),
            std::fs::read(&pb).unwrap(),
        );
        let _ = (std::fs::remove_file(&pa), std::fs::remove_file(&pb));
        if s1 != LSHK_STATUS_OK || fa != fb {
            c.fail("lshk_index_build (IVF): the saved index differs from Index::build's".into());
        }
    }
    // SAFETY: a live handle, freed once.
    unsafe { lshk_index_free(h) };
    drop(mirror);
}

/// lshk_index_calibrate: sample shapes, target, k, rerank, threads, the
/// output struct (NULL, misaligned, struct_size, larger, overlapping the
/// queries), handles (NULL, foreign, another source: UNSUPPORTED) and
/// query values; on OK every field equals `Index::calibrate` on the mirror
/// (bit for bit), `query` is the default query parameters with its `ivf`,
/// and the caller's tail is untouched; on failure nothing is written.
pub(crate) fn fuzz_ivf_calibrate(c: &mut Ctx, ivfs: &[IvfX], others: &[*mut lshk_index]) {
    let ix = &ivfs[c.r.u(ivfs.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let dim = ix.dim;
    let mut nq = 1 + r.u(6);
    let mut q_stride = dim + if r.one_in(3) { r.u(4) } else { 0 };
    let ql = (nq - 1) * q_stride + dim;
    let mut q = Arr::new(
        (0..ql)
            .map(|i| {
                let row = (i / q_stride * 53) % ix.rows;
                ix.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.3, 0.3)
            })
            .collect(),
        0.0f32,
    );
    let mut k = 1 + r.u(12) as u32;
    let mut target = r.pick(&[0.5f32, 0.8, 0.9, 0.99, 1.0]);
    let mut rerank = r.pick(&[0u32, 4, 32, 1000, u32::MAX]);
    let mut threads = r.pick(&[0u32, 1, 2, 3]);
    let size = std::mem::size_of::<lshk_calibration>() as u32;
    let mut out_size = size;
    let mut omode = 0; // 0 plain, 1 NULL, 2 misaligned, 3 big, 4 overlapping q
    let mut handle: *const lshk_index = ix.h;
    let mut foreign = [0u64; 8];
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(10);
        what.push(m);
        match m {
            0 => match r.u(2) {
                0 => q.mode = Mode::Null,
                _ => handle = null(),
            },
            1 => q.mode = Mode::Mis,
            2 => {
                let hv = r.pick(&HUGE);
                q_stride = r.pick(&[dim - 1, 0, hv, q_stride.saturating_add(1)])
            }
            3 => {
                let big = r.size(nq);
                nq = r.pick(&[0, nq.saturating_add(1), big])
            }
            4 => k = r.pick(&[0, k.saturating_add(1), u32::MAX, ix.rows as u32 + 3]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => {
                target = r.pick(&[0.0, -0.1, 1.0, 1.0001, f32::NAN, f32::INFINITY, 1e-30]);
                rerank = r.pick(&[0, 1, u32::MAX]);
                threads = r.pick(&[0, 1, 64, u32::MAX]);
            }
            7 => {
                omode = r.u(5);
                if omode == 0 {
                    out_size = r.pick(&[0, 4, size - 1]);
                }
            }
            8 if !others.is_empty() => handle = r.pick(others).cast_const(),
            _ => {
                foreign[0] = r.0.next_u64();
                handle = r.pick(&[foreign.as_ptr().cast(), ivfs[0].h.cast_const()]);
            }
        }
    }
    // Another source: UNSUPPORTED, whatever the other arguments.
    let other_source = others.iter().any(|&o| o.cast_const() == handle);
    if !other_source && !ivf_handle_verdict(&mut v, handle, &foreign, ix) {
        c.skipped += 1;
        return;
    }
    q.need(strided(nq, dim, q_stride), &mut v, || 0.5);
    // Each evaluation searches the whole sample: keep the calls short.
    if v.skip || (v.expect_err.is_none() && nq > 64) {
        c.skipped += 1;
        return;
    }
    match omode {
        1 => v.err("out NULL"),
        2 => v.err("out misaligned"),
        4 if nq > 0 && q.mode == Mode::Ok => v.err("out overlaps q"),
        _ => {}
    }
    if omode == 0 && out_size < size {
        v.err("out struct_size too small");
    }
    if nq == 0 {
        v.err("nq 0");
    }
    if k == 0 {
        v.err("k 0");
    }
    if !(target > 0.0 && target <= 1.0) {
        v.err("target not in (0, 1]");
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    nonfinite_queries(&mut v, &q, nq, dim, q_stride);
    if other_source {
        v.err("a source without lists");
    }
    #[repr(C)]
    struct Big {
        c: lshk_calibration,
        tail: [u32; 6],
    }
    // SAFETY: all-zero is a valid value of these plain C structs.
    let mut big: Big = unsafe { std::mem::zeroed() };
    big.tail = [0x5a5a_5a5a; 6];
    let fill = |b: &mut Big, s: u32| {
        // SAFETY: plain bytes of a repr(C) struct of integers and floats.
        unsafe {
            std::ptr::write_bytes(
                (b as *mut Big).cast::<u8>(),
                0xA5,
                std::mem::size_of::<lshk_calibration>(),
            )
        };
        b.c.struct_size = s;
    };
    fill(
        &mut big,
        if omode == 3 {
            std::mem::size_of::<Big>() as u32
        } else {
            out_size
        },
    );
    let before = bits_of(&big);
    let outp: *mut lshk_calibration = match omode {
        1 => null_mut(),
        2 => ((&mut big as *mut Big as usize) + 1) as *mut lshk_calibration,
        4 if q.len() > 0 => q.mptr().cast(),
        _ => &mut big.c,
    };
    c.desc = format!(
        "ivf calibrate {:?}/{:?} nlist {} nq {nq} qs {q_stride} k {k} target {target} rerank {rerank} threads {threads} omode {omode} other source {other_source} muts {what:?}",
        ix.codes, ix.storage, ix.nlist
    );
    let q0 = bits(&q.v);
    let qp = q.ptr();
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_calibrate", || unsafe {
        lshk_index_calibrate(handle, qp, nq, q_stride, k, target, rerank, threads, outp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_index_calibrate changed an input".into());
    }
    if other_source && st != LSHK_STATUS_UNSUPPORTED {
        c.fail(format!(
            "lshk_index_calibrate on another source returned {st}, not UNSUPPORTED"
        ));
    }
    if !c.judge("lshk_index_calibrate", st, &v) {
        if st != LSHK_STATUS_OK && bits_of(&big) != before {
            c.fail(format!(
                "lshk_index_calibrate failed with {st} but wrote an output"
            ));
        }
        return;
    }
    if big.tail != [0x5a5a_5a5a; 6] {
        c.fail("lshk_index_calibrate wrote past its struct".into());
    }
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    let want = match ix.mirror.calibrate(
        qd,
        nq,
        q_stride,
        k as usize,
        target,
        rerank,
        threads.min(4) as usize,
    ) {
        Ok(w) => w,
        Err(e) => {
            c.fail(format!(
                "lshk_index_calibrate returned OK, Index::calibrate refused: {e}"
            ));
            return;
        }
    };
    let got = &big.c;
    let mut want_query = lshk_query_params_default();
    want_query.ivf.nprobe = want.params.nprobe;
    want_query.ivf.rerank = want.params.rerank;
    want_query.ivf.reach = want.params.reach;
    want_query.ivf.refine = want.params.refine;
    let same = got.met == u32::from(want.met)
        && bits_of(&got.query) == bits_of(&want_query)
        && got.recall.to_bits() == want.recall.to_bits()
        && got.scanned.to_bits() == want.scanned.to_bits()
        && (
            got.fixed_nprobe,
            got.fixed_recall.to_bits(),
            got.fixed_scanned.to_bits(),
        ) == (want.fixed.0, want.fixed.1.to_bits(), want.fixed.2.to_bits())
        && (
            got.adaptive_reach.to_bits(),
            got.adaptive_recall.to_bits(),
            got.adaptive_scanned.to_bits(),
        ) == (
            want.adaptive.0.to_bits(),
            want.adaptive.1.to_bits(),
            want.adaptive.2.to_bits(),
        )
        && got.recall_lower.to_bits() == want.recall_lower.to_bits();
    if !same {
        c.fail(format!("lshk_index_calibrate: {got:?} vs Rust {want:?}"));
    }
}

/// The bytes of a plain struct (for "nothing was written" checks).
pub(crate) fn bits_of<T>(x: &T) -> Vec<u8> {
    // SAFETY: reads the struct's own bytes (plain C data, no padding
    // holes that matter for an equality of two snapshots of one value).
    unsafe { std::slice::from_raw_parts((x as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
        .to_vec()
}

/// The verdict on a possibly mutated IVF handle: NULL and a foreign block
/// are errors; false for another live IVF handle (valid, but of another
/// shape: the caller skips the execution to keep its oracle simple).
fn ivf_handle_verdict(v: &mut Verdict, h: *const lshk_index, foreign: &[u64], ix: &IvfX) -> bool {
    if h.is_null() {
        v.err("NULL handle");
    } else if h == foreign.as_ptr().cast() {
        v.err("foreign handle");
    } else if h != ix.h.cast_const() {
        return false;
    }
    true
}
