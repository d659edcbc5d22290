//! The forest source of the index (the hashing forest): build
//! (lshk_index_build with LSHK_SOURCE_FOREST and `p.forest`), its
//! candidate sets (lshk_index_candidates with `qp.forest.set_size`), their
//! union (lshk_index_union) and the rebuild after W changed
//! (lshk_index_rebuild), on a small index built each time, against the
//! Rust API: the index built the same way (`Index::candidate_sets`) and
//! the standalone forest (`Forest::query`, `Forest::union`).

use super::*;
use lshk::forest::{Forest, ForestParams, ForestResult};

/// The standalone forest the index's source is (the same parameters over
/// the same rows).
fn forest_twin(w: &[f32], rows: usize, dim: usize, p: &lshk_index_params) -> Forest {
    Forest::build(
        w,
        rows,
        dim,
        dim,
        &ForestParams {
            trees: p.forest.trees,
            leaf_size: p.forest.leaf_size,
            seed: p.forest.seed,
            threads: 1,
            normalize_rows: p.forest.normalize_rows == 1,
        },
    )
    .unwrap()
}

/// The candidate sets of `x` through lshk_index_candidates (valid
/// arguments), or the status.
fn candidates_of(
    h: *const lshk_index,
    x: &[f32],
    nx: usize,
    dim: usize,
    k: u32,
    set_size: u32,
) -> Result<ForestResult, lshk_status> {
    let mut qp = lshk_query_params_default();
    qp.forest.set_size = set_size;
    let mut needed = 0usize;
    let mut offs = vec![0usize; nx + 1];
    // SAFETY: a live handle; x holds nx rows of dim; a size query first.
    let st = unsafe {
        lshk_index_candidates(
            h,
            x.as_ptr(),
            nx,
            dim,
            k,
            &qp,
            null_mut(),
            0,
            offs.as_mut_ptr(),
            &mut needed,
        )
    };
    if st != LSHK_STATUS_OK && st != LSHK_STATUS_BUFFER_TOO_SMALL {
        return Err(st);
    }
    let mut ids = vec![0u32; needed];
    // SAFETY: as above, with `needed` ids.
    let st = unsafe {
        lshk_index_candidates(
            h,
            x.as_ptr(),
            nx,
            dim,
            k,
            &qp,
            ids.as_mut_ptr(),
            ids.len(),
            offs.as_mut_ptr(),
            &mut needed,
        )
    };
    if st != LSHK_STATUS_OK {
        return Err(st);
    }
    Ok(ForestResult { ids, offsets: offs })
}

/// Build (mutated now and then), candidates (mutated), union (mutated)
/// and rebuild (mutated) of one small forest-source index.
pub(crate) fn fuzz_forest(c: &mut Ctx) {
    let r = &mut c.r;
    let (rows, dim) = (2 + r.u(80), 1 + r.u(8));
    let mut g = SplitMix64::new(r.u(1 << 30) as u64);
    let mut w: Vec<f32> = (0..rows * dim).map(|_| g.next_normal() as f32).collect();
    let bias: Vec<f32> = (0..rows).map(|_| g.next_normal() as f32 * 0.1).collect();
    let use_bias = r.one_in(2);
    let bp = if use_bias { bias.as_ptr() } else { null() };
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_FOREST;
    p.storage = r.pick(&[LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_F32]);
    p.forest.trees = 1 + r.u(4) as u32;
    p.forest.leaf_size = 2 + r.u(20) as u32;
    p.forest.seed = r.0.next_u64();
    p.build_threads = r.u(3) as u32;
    p.forest.normalize_rows = r.u(2) as u32;
    // now and then, build parameters outside their domain: refused, `out`
    // not written
    if r.u(4) == 0 {
        let mut bp2 = p;
        let mut vb = Verdict::default();
        match r.u(6) {
            0 => {
                bp2.forest.normalize_rows = r.pick(&[2u32, 3, 255, u32::MAX]);
                vb.err("normalize_rows > 1");
            }
            1 => {
                bp2.forest.reserved = r.pick(&[1u32, 2, u32::MAX]);
                vb.err("reserved not 0");
            }
            2 => {
                bp2.storage = r.pick(&[LSHK_STORAGE_BF16, LSHK_STORAGE_F16, LSHK_STORAGE_I8]);
                vb.err("a storage without f32 rows");
            }
            3 => {
                bp2.forest.trees = r.pick(&[0u32, 4097, u32::MAX]);
                vb.err("trees outside 1..=4096");
            }
            4 => {
                bp2.forest.leaf_size = r.pick(&[0u32, 1]);
                vb.err("leaf_size < 2");
            }
            _ => bp2.forest.normalize_rows = r.u(2) as u32, // valid
        }
        c.desc = format!(
            "forest build rows {rows} dim {dim} storage {} L {} B {} norm {} reserved {}",
            bp2.storage,
            bp2.forest.trees,
            bp2.forest.leaf_size,
            bp2.forest.normalize_rows,
            bp2.forest.reserved
        );
        let mut hb: *mut lshk_index = null_mut();
        // SAFETY: W of rows*dim floats (alive until hb is freed); writable out.
        let st = c.call("lshk_index_build", || unsafe {
            lshk_index_build(w.as_ptr(), bp, rows, dim, dim, &bp2, &mut hb)
        });
        let ok = c.judge("lshk_index_build", st, &vb);
        if !ok && !hb.is_null() {
            c.fail("lshk_index_build (forest) wrote `out` on an error".into());
        }
        // SAFETY: NULL or a live handle from the call above.
        unsafe { lshk_index_free(hb) };
    }
    let r = &mut c.r;
    let mut h = null_mut();
    // SAFETY: W of rows*dim floats (alive until h is freed); writable out.
    let st = unsafe { lshk_index_build(w.as_ptr(), bp, rows, dim, dim, &p, &mut h) };
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    let twin = forest_twin(&w, rows, dim, &p);
    let wm = w.clone();
    // SAFETY: `wm` outlives the mirror (both dropped at the end).
    let mirror = unsafe {
        Index::build_borrowed(
            &wm,
            use_bias.then_some(&bias[..]),
            rows,
            dim,
            dim,
            &rust_params(&p),
            None,
        )
    }
    .unwrap();
    let mut v = Verdict::default();
    let mut nx = r.u(6);
    let mut xs = dim + r.u(2);
    let mut q = r.pick(&[1u32, 3, 10, 100]);
    let mut k = r.pick(&[0u32, 0, 1, 5]);
    let mut x = Arr::new((0..nx * xs).map(|_| g.next_normal() as f32).collect(), 0f32);
    let mut ids_len = nx * rows.min(q.max(k) as usize) + r.u(2);
    let mut ids = Arr::new(vec![CANARY; ids_len], CANARY);
    let mut offs = Arr::new(vec![CANARY as usize; nx + 1], CANARY as usize);
    let mut handle = h.cast_const();
    let mut qmode = 0; // 0 struct, 1 NULL (set_size 256), 2 struct_size too small
                       // HF-A's confidence: mostly off, sometimes a valid trim, sometimes out
                       // of its domain.
    let conf: f32 = match r.u(8) {
        0 => 0.5,
        1 => 0.95,
        2 => 1.0,
        3 => r.pick(&[-0.1f32, 1.5, f32::NAN, f32::INFINITY]),
        _ => 0.0,
    };
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(10);
        what.push(m);
        match m {
            0 => match r.u(3) {
                0 => x.mode = Mode::Null,
                1 => ids.mode = Mode::Null,
                _ => offs.mode = Mode::Null,
            },
            1 => match r.u(3) {
                0 => x.mode = Mode::Mis,
                1 => ids.mode = Mode::Mis,
                _ => offs.mode = Mode::Mis,
            },
            2 => nx = r.size(nx),
            3 => xs = r.size(xs),
            4 => q = r.pick(&[0u32, 1, u32::MAX]),
            5 if x.len() > 0 => {
                let j = r.u(x.len());
                r.spoil(x.data_mut(), j);
            }
            6 => ids_len = r.size(ids_len),
            7 => k = r.pick(&[0u32, 1, 100, 1 << 20]),
            8 => qmode = r.pick(&[1, 2]),
            _ => {
                handle = null();
                v.err("NULL handle");
            }
        }
    }
    if xs < dim {
        v.err("x_stride < dim");
    }
    if qmode == 2 {
        v.err("query params struct_size too small");
    }
    if qmode == 0 && !(0.0..=1.0).contains(&conf) {
        v.err("forest.confidence outside [0, 1]");
    }
    let conf_used = if qmode == 0 { conf } else { 0.0 };
    x.need(strided(nx, dim, xs), &mut v, || 0.5);
    offs.need(nx.checked_add(1).map(|v| v as u128), &mut v, || {
        CANARY as usize
    });
    ids.need(Some(ids_len as u128), &mut v, || CANARY);
    // Keep the sets (max(set_size, k) classes a sample) small to compute.
    if v.skip || (v.expect_err.is_none() && (q as usize).max(k as usize) > 4096 && rows > 64) {
        c.skipped += 1;
        // SAFETY: h is live.
        unsafe { lshk_index_free(h) };
        return;
    }
    if x.mode == Mode::Ok && xs >= dim && v.expect_err.is_none() {
        for i in 0..nx {
            if x.v[i * xs..i * xs + dim].iter().any(|f| !f.is_finite()) {
                v.err("non-finite x");
            }
        }
    }
    let set = if qmode == 1 { 256 } else { q };
    // The expected result (when the call can succeed): the mirror index's
    // sets, and the standalone forest's sets of max(set_size, k, 1).
    let mut want = GatherResult::default();
    if v.expect_err.is_none() {
        let qpar = lshk::index::QueryParams {
            forest: lshk::forest::ForestQuery {
                set_size: set,
                confidence: conf_used,
            },
            ..Default::default()
        };
        match mirror.candidate_sets(
            view(&x, strided(nx, dim, xs).unwrap() as usize),
            nx,
            xs,
            k,
            &qpar,
            &mut want,
        ) {
            Ok(()) => {
                if ids_len < want.ids.len() {
                    v.err("ids_len too small");
                }
            }
            Err(_) => v.err("the Rust API refuses the query"),
        }
    }
    c.desc = format!(
        "forest rows {rows} dim {dim} storage {} L {} B {} nx {nx} xs {xs} set {set} conf {conf} k {k} qmode {qmode} ids_len {ids_len} muts {what:?}",
        p.storage, p.forest.trees, p.forest.leaf_size
    );
    let mut qp = lshk_query_params_default();
    qp.forest.set_size = q;
    qp.forest.confidence = conf;
    if qmode == 2 {
        qp.struct_size = r.pick(&[0, 4, std::mem::size_of::<lshk_query_params>() as u32 - 1]);
    }
    let qpp: *const lshk_query_params = if qmode == 1 { null() } else { &qp };
    let mut needed = CANARY as usize;
    let (xp, ip, op) = (x.ptr(), ids.mptr(), offs.mptr());
    let x0 = bits(&x.v);
    // SAFETY: buffers sized per the verdict rules (module docs).
    let st = c.call("lshk_index_candidates", || unsafe {
        lshk_index_candidates(handle, xp, nx, xs, k, qpp, ip, ids_len, op, &mut needed)
    });
    if bits(&x.v) != x0 {
        c.fail("lshk_index_candidates changed an input".into());
    }
    if c.judge("lshk_index_candidates", st, &v) {
        let m = want.ids.len();
        if needed != m || ids.v[..m] != want.ids[..] || offs.v[..nx + 1] != want.offsets[..] {
            c.fail("lshk_index_candidates differs from Index::candidate_sets".into());
        }
        // The standalone forest's sets of the same size (and trim).
        let mut fr = ForestResult::default();
        let size = set.max(k).max(1);
        let xd = &x.data()[..strided(nx, dim, xs).unwrap() as usize];
        let b = use_bias.then_some(&bias[..]);
        if twin
            .query_confident(&w, dim, b, xd, nx, xs, size, conf_used, k.max(1), &mut fr)
            .is_err()
            || fr.ids != want.ids
            || fr.offsets != want.offsets
        {
            c.fail("lshk_index_candidates differs from Forest::query".into());
        }
        if ids.v[ids_len] != CANARY {
            c.fail("lshk_index_candidates wrote past ids_len".into());
        }
        fuzz_union(c, h, rows, &twin, &fr);
    } else if st != LSHK_STATUS_OK {
        let wrote_ids = ids.v.iter().any(|&x| x != CANARY);
        let wrote_offs = offs.v.iter().any(|&x| x != CANARY as usize);
        let buffer_small = st == LSHK_STATUS_BUFFER_TOO_SMALL;
        if wrote_ids
            || wrote_offs
            || (!buffer_small && needed != CANARY as usize)
            || (buffer_small && needed != want.ids.len())
        {
            c.fail(format!(
                "lshk_index_candidates failed with {st} but wrote an output (or a wrong *needed)"
            ));
        }
    }
    if c.r.one_in(3) {
        fuzz_rebuild(c, h, &mut w, rows, dim, &p);
    }
    // SAFETY: h is live (and W with it).
    unsafe { lshk_index_free(h) };
    drop(mirror);
}

/// lshk_index_union of a candidate set `fr` (valid, or mutated: an id out
/// of range, NULL or misaligned buffers, a short output, no counts)
/// against `Forest::union`; nothing but `*needed` written on a refusal.
fn fuzz_union(c: &mut Ctx, h: *const lshk_index, rows: usize, twin: &Forest, fr: &ForestResult) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut ins = Arr::new(fr.ids.clone(), CANARY);
    let mut count = ins.len();
    let cap = r.pick(&[0usize, 1, 5, 1000]);
    let seed = r.0.next_u64();
    let mut out_len = count;
    let mut out = Arr::new(vec![CANARY; count], CANARY);
    let mut cnt = Arr::new(vec![CANARY; count], CANARY);
    let mut use_counts = !r.one_in(4);
    let mut needed_null = false;
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(6);
        what.push(m);
        match m {
            0 if ins.len() > 0 => {
                let j = r.u(ins.len());
                ins.data_mut()[j] = r.pick(&[rows as u32, u32::MAX]);
            }
            1 => match r.u(3) {
                0 => ins.mode = r.pick(&[Mode::Null, Mode::Mis]),
                1 => out.mode = r.pick(&[Mode::Null, Mode::Mis]),
                _ => {
                    use_counts = true;
                    cnt.mode = Mode::Mis
                }
            },
            2 => count = r.size(count),
            3 => out_len = r.size(out_len),
            4 => use_counts = false,
            _ => {
                needed_null = true;
                v.err("needed NULL");
            }
        }
    }
    ins.need(Some(count as u128), &mut v, || 0);
    out.need(Some(out_len as u128), &mut v, || CANARY);
    if use_counts {
        cnt.need(Some(out_len as u128), &mut v, || CANARY);
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    if ins.mode == Mode::Ok
        && count <= ins.len()
        && ins.data()[..count].iter().any(|&i| i as usize >= rows)
    {
        v.err("an id >= rows");
    }
    // The union of the ids actually passed (a larger count reads the
    // grown buffer's zeros).
    let (mut ui, mut uc) = (Vec::new(), Vec::new());
    if v.expect_err.is_none() {
        let mut set = fr.clone();
        set.ids = view(&ins, count).to_vec();
        if twin.union(&set, cap, seed, &mut ui, &mut uc).is_err() {
            v.err("the Rust API refuses the union");
        } else if out_len < ui.len() {
            v.err("out_len too small");
        }
    }
    c.desc = format!(
        "forest union count {count} cap {cap} out_len {out_len} counts {use_counts} muts {what:?}"
    );
    let mut need2 = CANARY as usize;
    let np: *mut usize = if needed_null { null_mut() } else { &mut need2 };
    let (ip, op) = (ins.ptr(), out.mptr());
    let cp = if use_counts { cnt.mptr() } else { null_mut() };
    let i0 = ins.v.clone();
    // SAFETY: buffers sized per the verdict rules (module docs).
    let st = c.call("lshk_index_union", || unsafe {
        lshk_index_union(h, ip, count, cap, seed, op, cp, out_len, np)
    });
    if ins.v != i0 {
        c.fail("lshk_index_union changed its input".into());
    }
    if c.judge("lshk_index_union", st, &v) {
        let n = ui.len();
        if need2 != n
            || out.v[..n] != ui[..]
            || (use_counts && cnt.v[..n] != uc[..])
            || out.v[out_len] != CANARY
            || cnt.v[cnt.len()] != CANARY
        {
            c.fail("lshk_index_union differs from Forest::union (or wrote past out_len)".into());
        }
    } else if st != LSHK_STATUS_OK {
        let wrote = out.v.iter().chain(&cnt.v).any(|&x| x != CANARY);
        let small = st == LSHK_STATUS_BUFFER_TOO_SMALL;
        if wrote || (!small && need2 != CANARY as usize) || (small && need2 != ui.len()) {
            c.fail(format!(
                "lshk_index_union failed with {st} but wrote an output (or a wrong *needed)"
            ));
        }
    }
}

/// lshk_index_rebuild after W changed (in place when borrowed), with the
/// forest's seed or a new one, against the standalone forest built on the
/// W the index now holds; mutated: a NULL handle, a misaligned seed, a
/// NaN written into a borrowed W (NON_FINITE, the trees unchanged).
fn fuzz_rebuild(
    c: &mut Ctx,
    h: *mut lshk_index,
    w: &mut [f32],
    rows: usize,
    dim: usize,
    p: &lshk_index_params,
) {
    let r = &mut c.r;
    let borrowed = p.storage == LSHK_STORAGE_BORROWED_F32;
    let probe: Vec<f32> = (0..2 * dim).map(|_| r.f(-1.0, 1.0)).collect();
    let before = candidates_of(h, &probe, 2, dim, 0, 7);
    let w_before = w.to_vec();
    let mut v = Verdict::default();
    let new_seed = [r.0.next_u64(), 0];
    let mut seed_mode = r.u(3); // 0 NULL (the forest's seed), 1 new seed, 2 misaligned
    let mut handle = h;
    let mut nan = false;
    if borrowed {
        // Training moved some rows (changed while no call uses the index).
        for _ in 0..1 + r.u(rows) {
            let j = r.u(rows * dim);
            w[j] = w[j] * r.f(0.5, 2.0) + r.f(-0.5, 0.5);
        }
    }
    match r.u(6) {
        0 => {
            handle = null_mut();
            v.err("NULL handle");
        }
        1 if borrowed => {
            w[r.u(rows * dim)] = f32::NAN;
            nan = true;
            v.err("NaN in W");
        }
        _ => {}
    }
    if seed_mode == 2 {
        v.err("new_seed misaligned");
    }
    let sp: *const u64 = match seed_mode {
        0 => null(),
        1 => new_seed.as_ptr(),
        _ => new_seed.as_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    c.desc = format!(
        "forest rebuild borrowed {borrowed} seed {seed_mode} nan {nan} null {}",
        handle.is_null()
    );
    // SAFETY: a live handle (or NULL) used by no other call; a readable
    // (or misaligned, refused) seed; a borrowed W of rows x dim.
    let st = c.call("lshk_index_rebuild", || unsafe {
        lshk_index_rebuild(handle, sp)
    });
    if !c.judge("lshk_index_rebuild", st, &v) {
        // The trees are unchanged: on the W they were built from, the
        // same sets as before.
        w.copy_from_slice(&w_before);
        if st != LSHK_STATUS_OK && candidates_of(h, &probe, 2, dim, 0, 7) != before {
            c.fail(format!(
                "lshk_index_rebuild failed with {st} but changed the index"
            ));
        }
        return;
    }
    // The index's W: the caller's changed one when borrowed, else its copy
    // (the original rows).
    if !borrowed {
        seed_mode = seed_mode.min(1);
    }
    let mut q = *p;
    if seed_mode == 1 {
        q.forest.seed = new_seed[0];
    }
    let twin = forest_twin(w, rows, dim, &q);
    let mut fr = ForestResult::default();
    let ok = twin.query(w, dim, &probe, 2, dim, 7, &mut fr).is_ok();
    match candidates_of(h, &probe, 2, dim, 0, 7) {
        Ok(got) if ok && got.ids == fr.ids && got.offsets == fr.offsets => {}
        got => c.fail(format!(
            "lshk_index_rebuild: the sets {got:?} differ from a forest built on the new W ({:?})",
            fr.ids
        )),
    }
}
