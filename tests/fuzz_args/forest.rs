//! The hashing forest.

use super::*;

/// lshk_forest_query and lshk_forest_union on a small forest built through
/// C, against the Rust API on a twin built the same way.
pub(crate) fn fuzz_forest(c: &mut Ctx) {
    use lshk::ffi::forest::*;
    use lshk::forest::{Forest, ForestParams, ForestResult};
    let r = &mut c.r;
    let (rows, dim) = (2 + r.u(80), 1 + r.u(8));
    let mut g = SplitMix64::new(r.u(1 << 30) as u64);
    let w: Vec<f32> = (0..rows * dim).map(|_| g.next_normal() as f32).collect();
    let mut p = lshk_forest_params_default();
    p.trees = 1 + r.u(4) as u32;
    p.leaf_size = 2 + r.u(20) as u32;
    p.seed = r.0.next_u64();
    p.build_threads = r.u(3) as u32;
    p.normalize_rows = r.u(2) as u32;
    // now and then, build parameters outside their domain: refused, `out`
    // not written
    if r.u(4) == 0 {
        let mut bp = p;
        let mut vb = Verdict::default();
        match r.u(3) {
            0 => {
                bp.normalize_rows = r.pick(&[2u32, 3, 255, u32::MAX]);
                vb.err("normalize_rows > 1");
            }
            1 => {
                bp.reserved = r.pick(&[1u32, 2, u32::MAX]);
                vb.err("reserved not 0");
            }
            _ => bp.normalize_rows = r.u(2) as u32, // valid
        }
        let mut hb: *mut lshk_forest = null_mut();
        // SAFETY: W of rows*dim floats; writable out.
        let st = c.call("lshk_forest_build", || unsafe {
            lshk_forest_build(w.as_ptr(), rows, dim, dim, &bp, &mut hb)
        });
        let ok = c.judge("lshk_forest_build", st, &vb);
        if !ok && !hb.is_null() {
            c.fail("lshk_forest_build wrote `out` on an error".into());
        }
        // SAFETY: NULL or a live handle from the call above.
        unsafe { lshk_forest_free(hb) };
    }
    let r = &mut c.r;
    let mut h = null_mut();
    // SAFETY: W of rows*dim floats; writable out.
    let st = unsafe { lshk_forest_build(w.as_ptr(), rows, dim, dim, &p, &mut h) };
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    let twin = Forest::build(
        &w,
        rows,
        dim,
        dim,
        &ForestParams {
            trees: p.trees,
            leaf_size: p.leaf_size,
            seed: p.seed,
            threads: 1,
            normalize_rows: p.normalize_rows == 1,
        },
    )
    .unwrap();
    let mut v = Verdict::default();
    let mut nx = r.u(6);
    let mut xs = dim + r.u(2);
    let mut q = r.pick(&[1u32, 3, 10, 100]);
    let mut x = Arr::new((0..nx * xs).map(|_| g.next_normal() as f32).collect(), 0f32);
    let mut ids_len = nx * rows.min(q as usize) + r.u(2);
    let mut ids = Arr::new(vec![CANARY; ids_len], CANARY);
    let mut offs = Arr::new(vec![CANARY as usize; nx + 1], CANARY as usize);
    let mut handle = h.cast_const();
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(8);
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
            _ => {
                handle = null();
                v.err("NULL handle");
            }
        }
    }
    if xs < dim {
        v.err("x_stride < dim");
    }
    if q == 0 {
        v.err("q 0");
    }
    x.need(strided(nx, dim, xs), &mut v, || 0.5);
    offs.need(nx.checked_add(1).map(|v| v as u128), &mut v, || {
        CANARY as usize
    });
    ids.need(Some(ids_len as u128), &mut v, || CANARY);
    if v.skip {
        c.skipped += 1;
        // SAFETY: h is live.
        unsafe { lshk_forest_free(h) };
        return;
    }
    if x.mode == Mode::Ok && xs >= dim && v.expect_err.is_none() {
        for i in 0..nx {
            if x.v[i * xs..i * xs + dim].iter().any(|f| !f.is_finite()) {
                v.err("non-finite x");
            }
        }
    }
    // the expected result (when the call can succeed)
    let mut want = ForestResult::default();
    let twin_ok =
        v.expect_err.is_none() && twin.query(&w, dim, x.data(), nx, xs, q, &mut want).is_ok();
    if v.expect_err.is_none() && twin_ok && ids_len < want.ids.len() {
        v.err("ids_len too small");
    }
    c.desc = format!(
        "forest rows {rows} dim {dim} L {} B {} nx {nx} xs {xs} q {q} ids_len {ids_len} muts {what:?}",
        p.trees, p.leaf_size
    );
    let mut needed = CANARY as usize;
    let (xp, ip, op) = (x.ptr(), ids.mptr(), offs.mptr());
    // SAFETY: buffers sized per the verdict rules (module docs).
    let st = c.call("lshk_forest_query", || unsafe {
        lshk_forest_query(
            handle,
            w.as_ptr(),
            dim,
            xp,
            nx,
            xs,
            q,
            ip,
            ids_len,
            op,
            &mut needed,
        )
    });
    if c.judge("lshk_forest_query", st, &v) {
        let m = want.ids.len();
        if needed != m || ids.v[..m] != want.ids[..] || offs.v[..nx + 1] != want.offsets[..] {
            c.fail("lshk_forest_query differs from Forest::query".into());
        }
        if ids.v[ids_len] != CANARY {
            c.fail("lshk_forest_query wrote past ids_len".into());
        }
        // the union of the result
        let cap = c.r.pick(&[0usize, 1, 5, 1000]);
        let seed = c.r.0.next_u64();
        let mut out = vec![CANARY; m + 1];
        let mut cnt = vec![CANARY; m + 1];
        let mut need2 = 0usize;
        // SAFETY: m readable ids, m + 1 writable outputs.
        let st = c.call("lshk_forest_union", || unsafe {
            lshk_forest_union(
                h,
                want.ids.as_ptr(),
                m,
                cap,
                seed,
                out.as_mut_ptr(),
                cnt.as_mut_ptr(),
                m,
                &mut need2,
            )
        });
        if c.judge("lshk_forest_union", st, &Verdict::default()) {
            let (mut ui, mut uc) = (Vec::new(), Vec::new());
            twin.union(&want, cap, seed, &mut ui, &mut uc).unwrap();
            if need2 != ui.len() || out[..ui.len()] != ui[..] || cnt[..ui.len()] != uc[..] {
                c.fail("lshk_forest_union differs from Forest::union".into());
            }
        }
    } else if st != LSHK_STATUS_OK {
        let wrote_ids = ids.v.iter().any(|&x| x != CANARY);
        let wrote_offs = offs.v.iter().any(|&x| x != CANARY as usize);
        let buffer_small = st == LSHK_STATUS_BUFFER_TOO_SMALL;
        if wrote_ids || wrote_offs || (!buffer_small && needed != CANARY as usize) {
            c.fail(format!(
                "lshk_forest_query failed with {st} but wrote an output"
            ));
        }
    }
    // SAFETY: h is live.
    unsafe { lshk_forest_free(h) };
}
