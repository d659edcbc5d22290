//! The one-call index: queries, and the mutable index (update / rehash).

use super::*;

pub(crate) struct Idx {
    pub(crate) h: *mut lshk_index,
    pub(crate) mirror: Index,
    pub(crate) dim: usize,
    pub(crate) k: u32,
    pub(crate) family: Family,
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) rows: usize,
    pub(crate) storage: Storage,
}

impl Drop for Idx {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build.
        unsafe { lshk_index_free(self.h) };
    }
}

pub(crate) fn build_indexes() -> Vec<Idx> {
    let cfgs = [
        (Family::SimHash, Storage::F32, Transform::None, 8u32),
        (Family::Dwta, Storage::Bf16, Transform::Mips, 2),
        (Family::SimHash, Storage::I8, Transform::BiasAug, 6),
        (Family::SimHash, Storage::F16, Transform::None, 5),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(family, storage, transform, bits))| {
            let (rows, dim) = (250 + 40 * i, 9 + 4 * i);
            let layer = lshk::data::structured_layer(rows, dim, 7, 3 + i as u64);
            let mut p = lshk_index_params_default();
            p.source = family as u32;
            p.storage = storage as u32;
            p.transform = transform as u32;
            p.lsh.bits_per_table = bits;
            p.lsh.tables = 6;
            p.lsh.bin_size = 4;
            p.lsh.seed = 77 + i as u64;
            p.build_threads = 1;
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes; writable out.
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
            let ip = IndexParams {
                family,
                bits,
                tables: 6,
                bin_size: 4,
                seed: 77 + i as u64,
                storage,
                transform,
                threads: 1,
                ..Default::default()
            };
            let mirror =
                Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &ip, None).unwrap();
            Idx {
                h,
                mirror,
                dim,
                k: bits,
                family,
                w: layer.w,
                bias: layer.bias,
                rows,
                storage,
            }
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigStats {
    pub(crate) s: lshk_query_stats,
    pub(crate) tail: [u64; 2],
}

/// Query parameters followed by fields a newer header would add (a larger
/// struct_size is accepted, its tail ignored).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigQuery {
    pub(crate) p: lshk_query_params,
    pub(crate) tail: [u64; 4],
}

/// Stats whose every field but struct_size holds 0xA5A5 (nothing written).
pub(crate) fn canary_stats(struct_size: u32) -> lshk_query_stats {
    lshk_query_stats {
        struct_size,
        reserved: 0xA5A5,
        queries: 0xA5A5,
        candidates_total: 0xA5A5,
        candidates_min: 0xA5A5,
        candidates_max: 0xA5A5,
        lists: 0xA5A5,
        scanned: 0xA5A5,
        reranked: 0xA5A5,
    }
}

/// Whether the stats still hold [`canary_stats`] (the reserved field
/// included: lshk never writes it).
pub(crate) fn stats_untouched(s: &lshk_query_stats) -> bool {
    let c = canary_stats(s.struct_size);
    (
        s.reserved,
        s.queries,
        s.candidates_total,
        s.candidates_min,
        s.candidates_max,
        s.lists,
        s.scanned,
        s.reranked,
    ) == (
        c.reserved,
        c.queries,
        c.candidates_total,
        c.candidates_min,
        c.candidates_max,
        c.lists,
        c.scanned,
        c.reranked,
    )
}

/// The C stats equal the Rust API's.
pub(crate) fn stats_equal(s: &lshk_query_stats, r: &lshk::index::QueryStats) -> bool {
    (
        s.queries,
        s.candidates_total,
        s.candidates_min,
        s.candidates_max,
        s.lists,
        s.scanned,
        s.reranked,
    ) == (
        r.queries,
        r.candidates_total,
        r.candidates_min,
        r.candidates_max,
        r.lists,
        r.scanned,
        r.reranked,
    )
}

pub(crate) fn fuzz_query(c: &mut Ctx, idx: &[Idx]) {
    let ix = &idx[c.r.u(idx.len())];
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
                // Near some row, so queries find candidates.
                let row = (i / q_stride * 37) % ix.rows;
                ix.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.1, 0.1)
            })
            .collect(),
        0.0f32,
    );
    let mut k = r.u(13) as u32;
    let mut qpar = lshk_query_params_default();
    let mut gmode = r.pick(&[0, 0, 1]); // 0 struct, 1 NULL, 2 big
    if ix.family == Family::SimHash && r.one_in(3) {
        qpar.lsh.probes = 1 + r.u(3) as u32;
        qpar.lsh.bits_per_table = r.pick(&[0, ix.k]);
    }
    qpar.lsh.min_count = r.pick(&[1, 1, 2]);
    qpar.lsh.max_candidates = if r.one_in(4) { 1 + r.u(30) as u32 } else { 0 };
    // The other sources' knobs, out of their domain now and then: an LSH
    // source does not read them.
    if r.one_in(4) {
        qpar.ivf.nprobe = 0;
        qpar.ivf.reach = r.pick(&[f32::NAN, -1.0]);
        qpar.graph.ef = 0;
        qpar.forest.set_size = r.pick(&[0, u32::MAX]);
    }
    let mut use_scores = !r.one_in(4);
    let mut smode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_query_stats>() as u32;
    let mut handle: *const lshk_index = ix.h;
    let mut foreign = [0u64; 8];
    let mut oi_mode = Mode::Ok;
    let mut os_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(13);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => match r.u(4) {
                0 => q.mode = Mode::Null,
                1 => oi_mode = Mode::Null,
                2 => {
                    handle = null();
                    v.err("NULL handle")
                }
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
            4 => k = r.pick(&[k.saturating_add(1), 0, hv32, 100_000]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => {
                gmode = 0;
                let full = std::mem::size_of::<lshk_query_params>() as u32;
                qpar.struct_size = r.pick(&[0, 8, full - 1]);
            }
            7 => gmode = 2,
            8 => {
                qpar.lsh.probes = r.pick(&[1, 4097, u32::MAX]);
                qpar.lsh.bits_per_table = r.pick(&[0, ix.k, ix.k + 1, 33]);
            }
            12 => {
                // Fields every source's query refuses: a reserved field
                // not 0, a walk that is no LSHK_GRAPH_WALK_* value (and a
                // thread count, which is never refused).
                gmode = r.pick(&[0, 2]);
                match r.u(4) {
                    0 => qpar.threads = r.pick(&[2, 5, u32::MAX]),
                    1 => qpar.graph.reserved = 1,
                    2 => qpar.forest.confidence = r.pick(&[-0.5, 1.5, f32::NAN]),
                    _ => qpar.graph.walk = r.pick(&[2, u32::MAX]),
                }
            }
            9 => {
                smode = 1;
                let full = std::mem::size_of::<lshk_query_stats>() as u32;
                st_size = r.pick(&[0, 4, full - 1]);
            }
            10 => smode = 2,
            _ => {
                if r.one_in(2) {
                    foreign[0] = r.0.next_u64();
                    handle = foreign.as_ptr().cast();
                    v.err("foreign handle");
                } else {
                    qpar.lsh.min_count = r.pick(&[u32::MAX, 7, 0]);
                    qpar.lsh.max_candidates = r.pick(&[1, u32::MAX]);
                }
            }
        }
    }
    q.need(strided(nq, dim, q_stride), &mut v, || 0.5);
    let need = mul(nq, k as usize);
    let n0 = 0;
    let mut oi = Arr::new(vec![CANARY; n0], CANARY);
    oi.mode = oi_mode;
    oi.need(need, &mut v, || CANARY);
    let mut os = Arr::new(vec![f32::from_bits(CANARY); n0], f32::from_bits(CANARY));
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
    let eff = if gmode == 1 {
        GatherParams::default()
    } else {
        GatherParams {
            min_count: qpar.lsh.min_count,
            max_candidates: qpar.lsh.max_candidates,
            probes: qpar.lsh.probes,
            bits_per_table: qpar.lsh.bits_per_table,
        }
    };
    if gmode != 1
        && (qpar.graph.reserved != 0
            || !(0.0..=1.0).contains(&qpar.forest.confidence)
            || qpar.graph.walk > LSHK_GRAPH_WALK_INT8)
    {
        v.err("a reserved field or the walk out of its domain");
    }
    if eff.probes > 0
        && (ix.family == Family::Dwta
            || (eff.bits_per_table != 0 && eff.bits_per_table != ix.k)
            || eff.probes > 4096
            || eff.probes >= 1 << ix.k)
    {
        v.err("bad probes");
    }
    let mut big = BigQuery {
        p: qpar,
        tail: [0; 4],
    };
    if gmode == 2 && qpar.struct_size as usize == std::mem::size_of::<lshk_query_params>() {
        big.p.struct_size = std::mem::size_of::<BigQuery>() as u32;
    }
    if gmode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_query_params>() {
        v.err("struct_size too small");
    }
    let gpp: *const lshk_query_params = match gmode {
        1 => null(),
        2 => (&big as *const BigQuery).cast(),
        _ => &qpar,
    };
    let mut bs = BigStats {
        s: canary_stats(st_size),
        tail: [7, 7],
    };
    if smode == 2 && st_size as usize == std::mem::size_of::<lshk_query_stats>() {
        bs.s.struct_size = std::mem::size_of::<BigStats>() as u32;
    }
    if smode != 0 && (bs.s.struct_size as usize) < std::mem::size_of::<lshk_query_stats>() {
        v.err("stats struct_size too small");
    }
    let sp: *mut lshk_query_stats = if smode == 0 {
        null_mut()
    } else {
        (&mut bs as *mut BigStats).cast()
    };
    c.desc = format!("query {:?}/{:?} nq {nq} qs {q_stride} k {k} g {eff:?} gmode {gmode} scores {use_scores} smode {smode} muts {what:?}", ix.family, ix.storage);
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_index_query", || unsafe {
        lshk_index_query(handle, qp, nq, q_stride, k, gpp, oip, osp, sp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_index_query changed an input".into());
    }
    let stats_same = |b: &BigStats| stats_untouched(&b.s) && b.tail == [7, 7];
    if !c.judge("lshk_index_query", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if oi.v != oi0 || bits(&os.v) != os0 || !stats_same(&bs) {
            c.fail(format!(
                "lshk_index_query failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let nk = nq * k as usize;
    if oi.v[nk] != CANARY
        || (use_scores && os.v[nk].to_bits() != CANARY)
        || bs.tail != [7, 7]
        || (smode != 0 && bs.s.reserved != 0xA5A5)
    {
        c.fail("lshk_index_query wrote past its outputs (or its stats' reserved field)".into());
    }
    // Reference: the safe Rust API on an identically built index.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = lshk::index::QueryStats::default();
    match ix.mirror.query(
        &q.data()[..strided(nq, dim, q_stride).unwrap() as usize],
        nq,
        q_stride,
        k,
        &eff,
        &mut ri,
        &mut rs,
        Some(&mut rst),
    ) {
        Err(e) => c.fail(format!(
            "lshk_index_query returned OK, Index::query refused: {e}"
        )),
        Ok(()) => {
            if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
                c.fail(format!(
                    "lshk_index_query: ids {:?} vs Rust {:?}",
                    &oi.data()[..nk],
                    ri
                ));
            }
            if smode != 0 && !stats_equal(&bs.s, &rst) {
                c.fail("lshk_index_query: stats differ from Index::query".into());
            }
        }
    }
    // Independent: descending scores, ties by id, ids in range, and (f32
    // storage) each score within the matmul bound of the exact logit.
    for qi in 0..nq {
        let kk = k as usize;
        for t in 0..kk {
            let (id, s) = (ri[qi * kk + t], rs[qi * kk + t]);
            if id == u32::MAX {
                if s != f32::NEG_INFINITY {
                    c.fail("padding with a finite score".into());
                }
                continue;
            }
            if id as usize >= ix.rows {
                c.fail(format!("id {id} out of range"));
                continue;
            }
            if t > 0 {
                let (pi, ps) = (ri[qi * kk + t - 1], rs[qi * kk + t - 1]);
                if pi == u32::MAX || ps < s || (ps == s && pi > id) {
                    c.fail("top-k order violated".into());
                }
            }
            if ix.storage == Storage::F32 {
                let (mut e, mut a) = (
                    ix.bias[id as usize] as f64,
                    ix.bias[id as usize].abs() as f64,
                );
                for d in 0..dim {
                    let p = ix.w[id as usize * dim + d] as f64 * q.v[qi * q_stride + d] as f64;
                    e += p;
                    a += p.abs();
                }
                if (s as f64 - e).abs() > gamma(dim + 2) * a + 1e-40 {
                    c.fail(format!("score {s} of id {id}, exact {e}"));
                }
            }
        }
    }
}

/// Top-10 ids and score bits of a few fixed queries, through the C API
/// (NON_FINITE, for rows whose scores would overflow against these
/// queries, gives no ids and the status).
pub(crate) fn index_results(h: *const lshk_index, dim: usize) -> (Vec<u32>, Vec<u32>) {
    let q: Vec<f32> = (0..4 * dim).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let (mut ids, mut sc) = (vec![0u32; 40], vec![0f32; 40]);
    // SAFETY: a live index, 4 queries of dim floats, 40-element outputs.
    let st = unsafe {
        lshk_index_query(
            h,
            q.as_ptr(),
            4,
            dim,
            10,
            null(),
            ids.as_mut_ptr(),
            sc.as_mut_ptr(),
            null_mut(),
        )
    };
    if st == LSHK_STATUS_NON_FINITE {
        return (Vec::new(), vec![st]);
    }
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    (ids, bits(&sc))
}

pub(crate) fn rust_results(idx: &Index) -> (Vec<u32>, Vec<u32>) {
    let dim = idx.dim();
    let q: Vec<f32> = (0..4 * dim).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let (mut ids, mut sc) = (vec![0u32; 40], vec![0f32; 40]);
    match idx.query(
        &q,
        4,
        dim,
        10,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        None,
    ) {
        Err(e) if e.status == lshk::error::Status::NonFinite => (Vec::new(), vec![e.status as u32]),
        r => {
            r.unwrap();
            (ids, bits(&sc))
        }
    }
}

/// lshk_index_update_rows (then lshk_index_rehash_dirty / _rehash_rows) on
/// a fresh small index, against the Rust API on a twin index; and
/// lshk_rehash_next against RehashSchedule.
pub(crate) fn fuzz_index_update(c: &mut Ctx) {
    let r = &mut c.r;
    if r.one_in(5) {
        let mut p0 = r.pick(&[1.0, 50.0, 7.5, 1e18]);
        let mut lambda = r.pick(&[0.0, 1e-4, 0.5]);
        let t = r.pick(&[0u64, 1, 200, 1 << 40, u64::MAX]);
        let mut v = Verdict::default();
        match r.u(4) {
            0 => {
                p0 = r.pick(&[0.0, 0.99, -1.0, f64::NAN, f64::INFINITY]);
                v.err("bad initial period");
            }
            1 => {
                lambda = r.pick(&[-1e-4, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
                v.err("bad lambda");
            }
            _ => {}
        }
        let mut out = [CANARY as u64; 2];
        let mis = r.one_in(6);
        if mis {
            v.err("misaligned out");
        }
        let op: *mut u64 = if mis {
            out.as_mut_ptr().cast::<u8>().wrapping_add(1).cast()
        } else {
            out.as_mut_ptr()
        };
        c.desc = format!("rehash_next p0 {p0} lambda {lambda} t {t}");
        // SAFETY: out has 2 writable u64 (a misaligned pointer stays inside).
        let st = c.call("lshk_rehash_next", || unsafe {
            lshk_rehash_next(p0, lambda, t, op)
        });
        if c.judge("lshk_rehash_next", st, &v) {
            let want = lshk::index::RehashSchedule {
                initial_period: p0,
                lambda,
            }
            .next_after(t);
            if out[0] != want || out[1] != CANARY as u64 {
                c.fail(format!("lshk_rehash_next wrote {out:?}, want {want}"));
            }
        } else if out != [CANARY as u64; 2] {
            c.fail("lshk_rehash_next failed but wrote its output".into());
        }
        return;
    }
    let (rows, dim) = (20 + r.u(60), 1 + r.u(9));
    let borrowed = r.one_in(3);
    let with_bias = r.one_in(2);
    let transform = [Transform::None, Transform::BiasAug, Transform::Mips][r.u(3)];
    let cap = r.pick(&[0u32, 0, 3]);
    let mut g = SplitMix64::new(r.u(1 << 30) as u64);
    let w0: Vec<f32> = (0..rows * dim).map(|_| g.next_normal() as f32).collect();
    let b0: Vec<f32> = (0..rows).map(|_| g.next_normal() as f32 * 0.3).collect();
    let storage = if borrowed {
        Storage::BorrowedF32
    } else {
        Storage::F32
    };
    let mut p = lshk_index_params_default();
    p.lsh.bits_per_table = 4;
    p.lsh.tables = 3;
    p.storage = storage as u32;
    p.transform = transform as u32;
    p.lsh.bucket_cap = cap;
    p.build_threads = 1 + r.u(2) as u32;
    let ip = IndexParams {
        bits: 4,
        tables: 3,
        storage,
        transform,
        bucket_cap: cap,
        threads: 1,
        ..Default::default()
    };
    // The C index's W and the twin's (both borrowed when `borrowed`).
    let (mut wc, mut wt) = (w0.clone(), w0.clone());
    let bias = with_bias.then_some(&b0[..]);
    let mut h = null_mut();
    // SAFETY: W and bias of the stated sizes, alive until the free below.
    let st = unsafe {
        lshk_index_build(
            wc.as_ptr(),
            bias.map_or(null(), |b| b.as_ptr()),
            rows,
            dim,
            dim,
            &p,
            &mut h,
        )
    };
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    // SAFETY: wt outlives the twin (dropped before the end of this function).
    let mut twin = unsafe { Index::build_borrowed(&wt, bias, rows, dim, dim, &ip, None).unwrap() };
    let mut v = Verdict::default();
    let mut count = r.u(8);
    let mut stride = dim + r.u(3);
    let mut ids = Arr::new((0..count).map(|_| r.u(rows) as u32).collect(), 0u32);
    let mut vals = Arr::new(
        (0..count * stride)
            .map(|_| g.next_normal() as f32)
            .collect(),
        0f32,
    );
    let mut nb = Arr::new((0..count).map(|_| g.next_normal() as f32).collect(), 0f32);
    if borrowed {
        vals.mode = Mode::Null; // the caller changes W in place
    }
    if !with_bias || r.one_in(3) {
        nb.mode = Mode::Null;
    }
    let mut handle = h;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
        what.push(m);
        match m {
            0 => match r.u(4) {
                0 => ids.mode = Mode::Null,
                1 => vals.mode = Mode::Null,
                2 => nb.mode = Mode::Null,
                _ => {
                    handle = null_mut();
                    v.err("NULL handle")
                }
            },
            1 => match r.u(3) {
                0 => ids.mode = Mode::Mis,
                1 => vals.mode = Mode::Mis,
                _ => nb.mode = Mode::Mis,
            },
            2 if ids.len() > 0 => {
                let j = r.u(ids.len());
                ids.data_mut()[j] = r.pick(&[rows as u32, u32::MAX, rows as u32 - 1]);
            }
            3 => count = r.size(count),
            4 => stride = r.size(stride),
            5 if vals.len() > 0 => {
                let j = r.u(vals.len());
                r.spoil(vals.data_mut(), j);
            }
            6 if nb.len() > 0 => {
                let j = r.u(nb.len());
                r.spoil(nb.data_mut(), j);
            }
            7 => {
                // rows for a borrowed W, or a bias for an index without one
                if r.one_in(2) {
                    vals.mode = Mode::Ok
                } else {
                    nb.mode = Mode::Ok
                }
            }
            _ => {
                let mut th = null();
                // SAFETY: live index, writable out.
                unsafe { lshk_index_tables(h, &mut th) };
                handle = th.cast_mut().cast();
                v.err("foreign handle");
            }
        }
    }
    ids.need(Some(count as u128), &mut v, || 0);
    let rows_given = vals.mode != Mode::Null;
    if rows_given {
        if stride < dim {
            v.err("stride < dim");
        } else {
            vals.need(strided(count, dim, stride), &mut v, || 0.5);
        }
        if borrowed {
            v.err("rows given for a borrowed W");
        }
    }
    let bias_given = nb.mode != Mode::Null;
    if bias_given {
        nb.need(Some(count as u128), &mut v, || 0.25);
        if !with_bias {
            v.err("bias for an index without one");
        }
    }
    if v.skip {
        c.skipped += 1;
        // SAFETY: h is live.
        unsafe { lshk_index_free(h) };
        return;
    }
    let cnt = count.min(ids.len());
    if ids.mode == Mode::Ok && ids.data()[..cnt].iter().any(|&i| i as usize >= rows) {
        v.err("id >= rows");
    }
    if rows_given && vals.mode == Mode::Ok && stride >= dim && v.expect_err.is_none() {
        for j in 0..count {
            if vals.v[j * stride..j * stride + dim]
                .iter()
                .any(|x| !x.is_finite())
            {
                v.err("non-finite row");
            }
        }
    }
    if bias_given
        && nb.mode == Mode::Ok
        && nb.data()[..count.min(nb.len())]
            .iter()
            .any(|x| !x.is_finite())
    {
        v.err("non-finite bias");
    }
    c.desc = format!(
        "index_update rows {rows} dim {dim} borrowed {borrowed} bias {with_bias} {transform:?} \
         cap {cap} count {count} stride {stride} muts {what:?}"
    );
    let before = index_results(h, dim);
    let (ip_, vp, bp) = (ids.ptr(), vals.ptr(), nb.ptr());
    // SAFETY: buffers sized per the verdict rules (module docs).
    let st = c.call("lshk_index_update_rows", || unsafe {
        lshk_index_update_rows(handle, ip_, count, vp, stride, bp)
    });
    let ok = c.judge("lshk_index_update_rows", st, &v);
    if !ok {
        let mut dirty = 7usize;
        // SAFETY: live index, writable out.
        unsafe { lshk_index_dirty_rows(h, &mut dirty) };
        if index_results(h, dim) != before || dirty != 0 {
            c.fail(format!(
                "lshk_index_update_rows failed with {st} but changed the index"
            ));
        }
        // SAFETY: h is live.
        unsafe { lshk_index_free(h) };
        return;
    }
    // The twin, through the Rust API; a borrowed W changes in place.
    let idv = ids.data()[..count].to_vec();
    if borrowed {
        for (j, &id) in idv.iter().enumerate() {
            for d in 0..dim {
                let x = (j * 31 + d) as f32 * 0.01 - 0.3;
                wc[id as usize * dim + d] = x;
                wt[id as usize * dim + d] = x;
            }
        }
    }
    let rws = rows_given.then(|| (&vals.v[..], stride));
    let bs = bias_given.then(|| &nb.v[..count]);
    twin.update_rows(&idv, rws, bs).unwrap();
    let by_rows = c.r.one_in(2);
    let mut n_c = CANARY as usize;
    // SAFETY: live index; the ids buffer holds count ids; writable out.
    let st = if by_rows {
        c.call("lshk_index_rehash_rows", || unsafe {
            lshk_index_rehash_rows(h, idv.as_ptr(), idv.len(), &mut n_c)
        })
    } else {
        c.call("lshk_index_rehash_dirty", || unsafe {
            lshk_index_rehash_dirty(h, &mut n_c)
        })
    };
    let n_r = twin.rehash_dirty().unwrap();
    let name = if by_rows {
        "lshk_index_rehash_rows"
    } else {
        "lshk_index_rehash_dirty"
    };
    if c.judge(name, st, &Verdict::default()) {
        if n_c != n_r {
            c.fail(format!("{name}: {n_c} rows rehashed, the Rust API {n_r}"));
        }
        if index_results(h, dim) != rust_results(&twin) {
            c.fail(format!("{name}: results differ from the Rust API's"));
        }
    }
    drop(twin);
    // SAFETY: h is live.
    unsafe { lshk_index_free(h) };
    drop((wc, wt));
}
