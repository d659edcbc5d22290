//! The LSH tables: build, gather in every mode, update, label-aware buckets and the budget rules.

use super::*;

/// A tables handle and its Rust mirror (built from the same arguments).
pub(crate) struct Tab {
    pub(crate) h: *mut lshk_tables,
    pub(crate) mirror: Tables,
    pub(crate) codes: Vec<u32>,
    pub(crate) n: usize,
    pub(crate) l: usize,
    pub(crate) rb: u32,
    pub(crate) cap: u32,
    pub(crate) k: u32,
}

impl Drop for Tab {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_tables_build (or NULL).
        unsafe { lshk_tables_free(self.h) };
    }
}

pub(crate) fn new_codes(r: &mut R, n: usize, l: usize, k: u32) -> Vec<u32> {
    let mask = if k >= 32 { u32::MAX } else { (1u32 << k) - 1 };
    // Few distinct codes per table so buckets share rows.
    let distinct = 1 + r.u(8);
    let pool: Vec<u32> = (0..distinct * l).map(|_| r.u32() & mask).collect();
    (0..n * l)
        .map(|i| pool[(r.u(distinct)) * l + i % l])
        .collect()
}

pub(crate) fn build_tab(c: &mut Ctx) -> Tab {
    let r = &mut c.r;
    let n = 1 + r.u(200);
    let l = 1 + r.u(6);
    let rb = 1 + r.u(10) as u32;
    let k = r.pick(&[rb, rb + 3, 32, 12]);
    let cap = if r.one_in(3) { 1 + r.u(5) as u32 } else { 0 };
    let seed = r.0.next_u64();
    let codes = new_codes(r, n, l, k);
    let threads = r.pick(&[0u32, 1, 2, 7]);
    let mut h = null_mut();
    // SAFETY: codes holds n*L values; &mut h is writable.
    let st =
        unsafe { lshk_tables_build(codes.as_ptr(), n, l as u32, rb, cap, seed, threads, &mut h) };
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    let mirror = Tables::build(&codes, n, l as u32, rb, cap, seed, 1).unwrap();
    Tab {
        h,
        mirror,
        codes,
        n,
        l,
        rb,
        cap,
        k,
    }
}

/// Independent gather reference (no probes): the documented rules over
/// bucket contents computed here from the codes (or, with bucket_cap or
/// labels, taken from the mirror and checked to be plausible).
pub(crate) fn ref_gather(
    t: &Tables,
    codes_rows: Option<&[u32]>,
    qcodes: &[u32],
    q: usize,
    p: &GatherParams,
    fo: Option<&[usize]>,
    fi: &[u32],
) -> GatherResult {
    let (l, rb) = (t.tables(), t.range_bits());
    let bucket = |tt: usize, b: u32| -> Vec<u32> {
        match codes_rows {
            Some(cr) => (0..t.rows() as u32)
                .filter(|&i| fold_code(cr[i as usize * l + tt], rb) == b)
                .collect(),
            None => t.bucket(tt, b).to_vec(),
        }
    };
    let mut res = GatherResult {
        offsets: vec![0],
        ..Default::default()
    };
    for qi in 0..q {
        let forced: BTreeSet<u32> = match fo {
            Some(o) => fi[o[qi]..o[qi + 1]].iter().copied().collect(),
            None => BTreeSet::new(),
        };
        let mut seen: BTreeSet<u32> = forced.clone();
        let mut cnt: BTreeMap<u32, u32> = BTreeMap::new();
        let maxc = p.max_candidates as usize;
        'tables: for tt in 0..l {
            for id in bucket(tt, fold_code(qcodes[qi * l + tt], rb)) {
                if maxc > 0 && seen.len() >= maxc {
                    break 'tables;
                }
                seen.insert(id);
                *cnt.entry(id).or_default() += 1;
            }
        }
        let minc = p.min_count.max(1);
        for &id in &seen {
            let c = cnt.get(&id).copied().unwrap_or(0);
            if c >= minc || forced.contains(&id) {
                res.ids.push(id);
                res.counts.push(c);
            }
        }
        res.offsets.push(res.ids.len());
    }
    res
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigGather {
    pub(crate) p: lshk_gather_params,
    pub(crate) tail: [u64; 4],
}

pub(crate) fn fuzz_gather(c: &mut Ctx, idx: &[Idx]) {
    // Tables: fresh ones, or an index's borrowed tables.
    let borrowed = c.r.one_in(5);
    let tab;
    let (h, mirror, rowcodes, l, k, n): (
        *const lshk_tables,
        &Tables,
        Option<&[u32]>,
        usize,
        u32,
        usize,
    );
    if borrowed {
        let ix = &idx[c.r.u(idx.len())];
        let mut th = null();
        // SAFETY: live index handle; writable out.
        assert_eq!(unsafe { lshk_index_tables(ix.h, &mut th) }, LSHK_STATUS_OK);
        h = th;
        mirror = ix.mirror.tables();
        rowcodes = None;
        l = mirror.tables();
        k = ix.k;
        n = mirror.rows();
    } else {
        tab = build_tab(c);
        h = tab.h;
        mirror = &tab.mirror;
        rowcodes = if tab.cap == 0 { Some(&tab.codes) } else { None };
        l = tab.l;
        k = tab.k;
        n = tab.n;
        if tab.cap > 0 {
            // The sample must be a subset of the bucket's members.
            for tt in 0..l {
                let mut members = vec![Vec::new(); 1 << tab.rb];
                for i in 0..n {
                    members[fold_code(tab.codes[i * l + tt], tab.rb) as usize].push(i as u32);
                }
                for (b, all) in members.iter().enumerate() {
                    let got = mirror.bucket(tt, b as u32);
                    if got.len() != all.len().min(tab.cap as usize)
                        || got.iter().any(|x| all.binary_search(x).is_err())
                    {
                        c.fail(format!(
                            "bucket_cap sample of table {tt} bucket {b} is wrong"
                        ));
                    }
                }
            }
        }
    }
    let r = &mut c.r;
    let mut v = Verdict::default();
    let isa = if r.one_in(2) {
        Some(tier(r, &mut v))
    } else {
        None
    };
    let mut q = r.u(5);
    // Query codes: mostly some row's codes (hits), some random.
    let mut qcodes = Vec::new();
    let allcodes: Option<Vec<u32>> = rowcodes.map(|x| x.to_vec());
    for _ in 0..q {
        for tt in 0..l {
            let cde = match (&allcodes, r.one_in(3)) {
                (Some(a), false) => a[r.u(n) * l + tt],
                _ => {
                    let mask = if k >= 32 { u32::MAX } else { (1u32 << k) - 1 };
                    r.u32() & mask
                }
            };
            qcodes.push(cde);
        }
    }
    let mut codes = Arr::new(qcodes, 0u32);
    let mut gp = lshk_gather_params_default();
    gp.min_count = r.pick(&[0, 1, 1, 2, 3]);
    gp.max_candidates = if r.one_in(3) { 1 + r.u(40) as u32 } else { 0 };
    let probing = k <= 24 && r.one_in(if borrowed { 4 } else { 3 });
    if probing {
        gp.probes = 1 + r.u(4) as u32;
        gp.probes = gp.probes.min((1u32 << k.min(31)) - 1).max(1);
        gp.bits_per_table = k;
    }
    let mut params_mode = 0; // 0 struct, 1 NULL, 2 big struct
    let mut proj_len = if probing { q * k as usize * l } else { 0 };
    let mut proj = Arr::new((0..proj_len).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let forced = r.one_in(3);
    let fo0 = if forced { csr(r, q, 4) } else { vec![0; q + 1] };
    let mut fi_len = *fo0.last().unwrap();
    let mut fi = Arr::new((0..fi_len).map(|_| r.u(n) as u32).collect(), 0u32);
    let mut fo = Arr::new(fo0, 0usize);
    let mut use_fo = forced;
    // Outputs sized from the reference when there is one; else generous.
    let mut ids_len = q * n + fi_len;
    let want_counts = r.one_in(2);
    let mut handle = h;
    let mut freed: Option<*mut lshk_tables> = None;
    let mut foreign = [0u64; 8];
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(16);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => match r.u(6) {
                0 => codes.mode = Mode::Null,
                1 => proj.mode = Mode::Null,
                2 => fi.mode = Mode::Null,
                3 => {
                    use_fo = false;
                }
                4 => handle = null(),
                _ => params_mode = 1,
            },
            1 => match r.u(4) {
                0 => codes.mode = Mode::Mis,
                1 => proj.mode = Mode::Mis,
                2 => fi.mode = Mode::Mis,
                _ => {
                    use_fo = true;
                    fo.mode = Mode::Mis
                }
            },
            2 => {
                let full = std::mem::size_of::<lshk_gather_params>() as u32;
                gp.struct_size = r.pick(&[0, 4, full - 4, full - 1]);
            }
            3 => params_mode = 2,
            4 => {
                gp.probes = r.pick(&[4097, 1 << k.min(31), u32::MAX, 2, 5000]);
            }
            5 => gp.bits_per_table = r.pick(&[0, 33, u32::MAX, k + 1, 1]),
            6 => gp.min_count = r.pick(&[u32::MAX, l as u32, l as u32 + 1, 0]),
            7 => gp.max_candidates = r.pick(&[1, u32::MAX, 2]),
            8 => q = r.size(q),
            9 => proj_len = r.size(proj_len),
            10 if proj.len() > 0 => {
                let j = r.u(proj.len());
                proj.data_mut()[j] = r.pick(&[f32::NAN, f32::INFINITY, -0.0, f32::NEG_INFINITY]);
            }
            11 => {
                use_fo = true;
                mutate_offsets(r, fo.data_mut());
            }
            12 if fi.len() > 0 => {
                let j = r.u(fi.len());
                fi.data_mut()[j] = r.pick(&[n as u32, u32::MAX, n as u32 - 1, 0]);
            }
            13 => fi_len = r.size(fi_len),
            14 => ids_len = r.pick(&[0, 1, ids_len / 2, hv]),
            _ => {
                // Dead and foreign handles.
                match r.u(3) {
                    0 => freed = Some(null_mut()),
                    1 => {
                        foreign[0] = r.0.next_u64();
                        handle = foreign.as_ptr().cast();
                        v.err("foreign handle");
                    }
                    _ => {
                        handle = idx[0].h.cast();
                        v.err("an index handle passed as tables");
                    }
                }
            }
        }
    }
    if handle.is_null() {
        v.err("NULL handle");
    }
    // Claims.
    codes.need(mul(q, l), &mut v, || 1);
    proj.need(Some(proj_len as u128), &mut v, || 0.25);
    if use_fo {
        fo.need(Some(q as u128 + 1), &mut v, || 0);
    } else if fi_len > 0 {
        v.err("forced_offsets NULL with forced ids");
    }
    fi.need(Some(fi_len as u128), &mut v, || 0);
    let mut ids = Arr::new(vec![], CANARY);
    let mut cnts = Arr::new(vec![], CANARY);
    ids.need(Some(ids_len as u128), &mut v, || CANARY);
    if want_counts {
        cnts.need(Some(ids_len as u128), &mut v, || CANARY);
    }
    let mut offs = Arr::new(vec![], usize::MAX);
    offs.need(Some(q as u128 + 1), &mut v, || usize::MAX);
    if r.one_in(30) {
        offs.mode = r.pick(&[Mode::Null, Mode::Mis]);
        v.err("bad offsets output");
    }
    let mut needed = Arr::new(vec![usize::MAX], usize::MAX);
    if r.one_in(30) {
        needed.mode = r.pick(&[Mode::Null, Mode::Mis]);
        v.err("bad needed output");
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    let mut big = BigGather {
        p: gp,
        tail: [0; 4],
    };
    if params_mode == 2 && gp.struct_size as usize == std::mem::size_of::<lshk_gather_params>() {
        big.p.struct_size = std::mem::size_of::<BigGather>() as u32;
    }
    if params_mode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_gather_params>()
    {
        v.err("struct_size too small");
    }
    let pp: *const lshk_gather_params = match params_mode {
        1 => null(),
        2 => (&big as *const BigGather).cast(),
        _ => &gp,
    };
    let eff = if params_mode == 1 {
        GatherParams::default()
    } else {
        GatherParams {
            min_count: gp.min_count,
            max_candidates: gp.max_candidates,
            probes: gp.probes,
            bits_per_table: gp.bits_per_table,
        }
    };
    if eff.probes > 0
        && (eff.bits_per_table == 0
            || eff.bits_per_table > 32
            || eff.probes > 4096
            || (eff.bits_per_table < 32 && eff.probes >= 1 << eff.bits_per_table))
    {
        v.err("bad probes");
    }
    if eff.probes > 0
        && proj.mode == Mode::Ok
        && (proj_len as u128) < q as u128 * eff.bits_per_table as u128 * l as u128
    {
        v.err("projections too short");
    }
    if eff.probes > 0
        && proj.mode == Mode::Ok
        && proj.data()[..proj_len.min(proj.len()).min(
            q.saturating_mul(eff.bits_per_table.min(32) as usize)
                .saturating_mul(l),
        )]
            .iter()
            .any(|x| !x.is_finite())
    {
        v.err("non-finite projection");
    }
    let fo_valid = !use_fo
        || (fo.mode == Mode::Ok && fo.len() > q && {
            let o = &fo.data()[..q + 1];
            o[0] == 0 && o.windows(2).all(|w| w[0] <= w[1]) && o[q] <= fi_len
        });
    if !fo_valid {
        v.err("forced_offsets invalid");
    }
    if use_fo
        && fo_valid
        && fi.mode == Mode::Ok
        && fi.data()[..fo.data()[q].min(fi.len())]
            .iter()
            .any(|&x| x as usize >= n)
    {
        v.err("forced id >= n");
    }
    // Reference (when the call can succeed).
    let reference = if v.expect_err.is_none() {
        let input = GatherInput {
            codes: view(&codes, q * l),
            q,
            projections: (eff.probes > 0).then(|| view(&proj, proj_len)),
            forced_offsets: if use_fo { Some(view(&fo, q + 1)) } else { None },
            forced_ids: view(&fi, fi_len),
        };
        if eff.probes > 0 {
            let mut res = GatherResult::default();
            mirror
                .gather_isa(Isa::Scalar, &eff, &input, true, &mut res)
                .ok()
                .map(|_| res)
        } else {
            Some(ref_gather(
                mirror,
                rowcodes,
                input.codes,
                q,
                &eff,
                input.forced_offsets,
                input.forced_ids,
            ))
        }
    } else {
        None
    };
    if let Some(rf) = &reference {
        if ids.mode == Mode::Ok && ids_len < rf.ids.len() {
            v.err("ids_len too small");
        }
    }
    if let Some(f) = freed.as_mut() {
        // A tables handle freed just before the call.
        let t2 = build_tab(c);
        let mut t2 = t2;
        *f = t2.h;
        // SAFETY: live handle, freed once; t2's Drop then sees NULL.
        unsafe { lshk_tables_free(t2.h) };
        t2.h = null_mut();
        handle = *f;
        v.err("freed handle");
    }
    c.desc = format!("gather isa {isa:?} n {n} L {l} K {k} q {q} params {eff:?} mode {params_mode} proj_len {proj_len} fo {use_fo} fi_len {fi_len} ids_len {ids_len} counts {want_counts} borrowed {borrowed} muts {what:?}");
    let ins0 = (codes.v.clone(), bits(&proj.v), fo.v.clone(), fi.v.clone());
    let outs0 = (ids.v.clone(), cnts.v.clone(), offs.v.clone());
    let (cp, prp, fop, fip) = (
        codes.ptr(),
        proj.ptr(),
        if use_fo { fo.ptr() } else { null() },
        fi.ptr(),
    );
    let (ip, op, np) = (ids.mptr(), offs.mptr(), needed.mptr());
    let cnp = if want_counts { cnts.mptr() } else { null_mut() };
    let func = if isa.is_some() {
        "lshk_tables_gather_isa"
    } else {
        "lshk_tables_gather"
    };
    // SAFETY: as in fuzz_matmul.
    let st = c.call(func, || unsafe {
        match isa {
            Some(t) => lshk_tables_gather_isa(
                t, handle, cp, q, pp, prp, proj_len, fop, fip, fi_len, ip, ids_len, op, cnp, np,
            ),
            None => lshk_tables_gather(
                handle, cp, q, pp, prp, proj_len, fop, fip, fi_len, ip, ids_len, op, cnp, np,
            ),
        }
    });
    if (codes.v.clone(), bits(&proj.v), fo.v.clone(), fi.v.clone()) != ins0 {
        c.fail(format!("{func} changed an input"));
    }
    if !c.judge(func, st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if (ids.v.clone(), cnts.v.clone(), offs.v.clone()) != outs0 {
            c.fail(format!(
                "{func} failed with {st} but wrote ids/counts/offsets"
            ));
        }
        if needed.v[0] != usize::MAX && st != LSHK_STATUS_BUFFER_TOO_SMALL {
            c.fail(format!("{func} failed with {st} but wrote *needed"));
        }
        if st == LSHK_STATUS_BUFFER_TOO_SMALL {
            if let Some(rf) = &reference {
                if needed.v[0] != rf.ids.len() {
                    c.fail(format!(
                        "{func}: *needed = {} on BUFFER_TOO_SMALL, reference {}",
                        needed.v[0],
                        rf.ids.len()
                    ));
                }
            }
        }
        return;
    }
    tier_ran(isa);
    let Some(rf) = reference else {
        c.fail(format!(
            "{func} returned OK where the reference refused the call"
        ));
        return;
    };
    let need = rf.ids.len();
    if needed.v[0] != need
        || offs.data()[..q + 1] != rf.offsets[..]
        || ids.data()[..need] != rf.ids[..]
    {
        c.fail(format!(
            "{func}: got needed {} offsets {:?} ids {:?}; reference offsets {:?} ids {:?}",
            needed.v[0],
            &offs.data()[..q + 1],
            &ids.data()[..need.min(ids.len())],
            rf.offsets,
            rf.ids
        ));
        return;
    }
    if want_counts && cnts.data()[..need] != rf.counts[..] {
        c.fail(format!(
            "{func}: counts {:?}, reference {:?}",
            &cnts.data()[..need],
            rf.counts
        ));
    }
    if ids.v[need..].iter().any(|&x| x != CANARY)
        || offs.v[q + 1] != usize::MAX
        || (want_counts && cnts.v[need..].iter().any(|&x| x != CANARY))
    {
        c.fail(format!("{func} wrote past the documented outputs"));
    }
}

pub(crate) fn fuzz_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut n = r.u(150);
    let mut l = 1 + r.u(5) as u32;
    let mut rb = 1 + r.u(12) as u32;
    let mut cap = if r.one_in(3) { r.u(4) as u32 } else { 0 };
    let seed = r.0.next_u64();
    let mut threads = r.pick(&[0u32, 1, 3]);
    let mut codes = Arr::new(new_codes(r, n, l as usize, 14), 0u32);
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => codes.mode = r.pick(&[Mode::Null, Mode::Mis]),
            1 => n = r.size(n),
            2 => l = r.pick(&[0, l.saturating_add(1), u32::MAX, 1 << 31, 3]),
            3 => rb = r.pick(&[0, 25, 32, u32::MAX, 24, 1]),
            4 => cap = r.pick(&[u32::MAX, 1, 0]),
            5 => threads = r.pick(&[u32::MAX, 1000, 0]),
            6 => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
            7 if codes.len() > 0 => {
                let j = r.u(codes.len());
                codes.data_mut()[j] = r.pick(&[u32::MAX, 0, 1 << rb.min(31)]);
            }
            _ => n = r.pick(&[1 << 31, (1 << 31) - 1]),
        }
    }
    // Keep the tables' own memory (L * 2^range_bits offsets) reasonable:
    // a huge but valid request is a resource question, not an argument bug.
    if rb <= 24 && l as u64 * (1u64 << rb) > 1 << 22 {
        c.skipped += 1;
        return;
    }
    codes.need(mul(n, l as usize), &mut v, || 5);
    if v.skip {
        c.skipped += 1;
        return;
    }
    if l == 0 || l > i32::MAX as u32 || rb == 0 || rb > 24 || n > i32::MAX as usize {
        v.err("bad tables / range_bits / n");
    }
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    c.desc = format!("build n {n} L {l} rb {rb} cap {cap} threads {threads} muts {what:?}");
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_tables;
    let mut outv: [*mut lshk_tables; 2] = [canary, canary];
    let outp: *mut *mut lshk_tables = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let cp = codes.ptr();
    let c0 = codes.v.clone();
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_tables_build", || unsafe {
        lshk_tables_build(cp, n, l, rb, cap, seed, threads, outp)
    });
    if codes.v != c0 {
        c.fail("lshk_tables_build changed an input".into());
    }
    if !c.judge("lshk_tables_build", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if outv != [canary, canary] {
            c.fail("lshk_tables_build failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_tables_build wrote past *out".into());
    }
    let mirror = Tables::build(&codes.data()[..n * l as usize], n, l, rb, cap, seed, 1).unwrap();
    let (mut sn, mut sl, mut srb) = (0usize, 0u32, 0u32);
    let mut stats = vec![lshk_table_stats::default(); l as usize];
    // SAFETY: live handle, writable outputs.
    unsafe {
        assert_eq!(
            lshk_tables_shape(h, &mut sn, &mut sl, &mut srb),
            LSHK_STATUS_OK
        );
        assert_eq!(
            lshk_tables_stats(h, stats.as_mut_ptr(), stats.len()),
            LSHK_STATUS_OK
        );
    }
    let ms = mirror.stats();
    let same = (sn, sl, srb) == (n, l, rb)
        && stats.iter().zip(&ms).all(|(a, b)| {
            (a.nonempty_buckets, a.stored_ids, a.largest_bucket)
                == (b.nonempty_buckets, b.stored_ids, b.largest_bucket)
        });
    // Independent: without a cap every row is stored once per table.
    let stored_ok = cap != 0 || stats.iter().all(|s| s.stored_ids == n as u64);
    if !same || !stored_ok {
        c.fail("lshk_tables_build: shape/stats differ from Tables::build".into());
    }
    // SAFETY: live handle.
    unsafe { lshk_tables_free(h) };
}

/// Compares a tables handle with a Rust Tables through stats and a gather
/// of every bucket-representative code.
pub(crate) fn same_tables(h: *const lshk_tables, t: &Tables, probe_codes: &[u32]) -> bool {
    let l = t.tables();
    let q = probe_codes.len() / l;
    let mut stats = vec![lshk_table_stats::default(); l];
    let mut ids = vec![0u32; q * t.rows() * 2 + 1];
    let mut cnt = vec![0u32; ids.len()];
    let mut offs = vec![0usize; q + 1];
    let mut needed = 0usize;
    // SAFETY: live handle; buffers sized as passed.
    let st = unsafe {
        lshk_tables_stats(h, stats.as_mut_ptr(), l);
        lshk_tables_gather(
            h,
            probe_codes.as_ptr(),
            q,
            null(),
            null(),
            0,
            null(),
            null(),
            0,
            ids.as_mut_ptr(),
            ids.len(),
            offs.as_mut_ptr(),
            cnt.as_mut_ptr(),
            &mut needed,
        )
    };
    let mut res = GatherResult::default();
    let input = GatherInput {
        codes: probe_codes,
        q,
        ..Default::default()
    };
    t.gather_isa(
        Isa::Scalar,
        &GatherParams::default(),
        &input,
        true,
        &mut res,
    )
    .unwrap();
    st == LSHK_STATUS_OK
        && res.ids[..] == ids[..needed]
        && res.counts[..] == cnt[..needed]
        && res.offsets[..] == offs[..]
        && stats.iter().zip(t.stats()).all(|(a, b)| {
            (a.nonempty_buckets, a.stored_ids, a.largest_bucket)
                == (b.nonempty_buckets, b.stored_ids, b.largest_bucket)
        })
}

pub(crate) fn fuzz_update(c: &mut Ctx, idx: &[Idx]) {
    let mut tab = build_tab(c);
    let (n, l, k) = (tab.n, tab.l, tab.k);
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut count = r.u(12);
    let mut ids = Arr::new((0..count).map(|_| r.u(n) as u32).collect(), 0u32);
    let mut codes = Arr::new(new_codes(r, count, l, k), 0u32);
    let mut handle = tab.h;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(7);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => match r.u(3) {
                0 => ids.mode = Mode::Null,
                1 => codes.mode = Mode::Null,
                _ => {
                    handle = null_mut();
                    v.err("NULL handle")
                }
            },
            1 => {
                if r.one_in(2) {
                    ids.mode = Mode::Mis
                } else {
                    codes.mode = Mode::Mis
                }
            }
            2 if ids.len() > 0 => {
                let j = r.u(ids.len());
                ids.data_mut()[j] = r.pick(&[n as u32, u32::MAX, n as u32 - 1]);
            }
            3 => count = r.size(count),
            4 => {
                let mut th = null();
                // SAFETY: live index, writable out.
                unsafe { lshk_index_tables(idx[r.u(idx.len())].h, &mut th) };
                handle = th.cast_mut();
                v.err("borrowed tables");
            }
            5 if ids.len() > 0 => {
                // Duplicate ids: the last codes win.
                let j = r.u(ids.len());
                ids.data_mut()[j] = ids.data()[0];
            }
            _ => {
                handle = idx[0].h.cast();
                v.err("foreign handle");
            }
        }
    }
    ids.need(Some(count as u128), &mut v, || 0);
    codes.need(mul(count, l), &mut v, || 3);
    if v.skip {
        c.skipped += 1;
        return;
    }
    if ids.mode == Mode::Ok
        && ids.data()[..count.min(ids.len())]
            .iter()
            .any(|&i| i as usize >= n)
    {
        v.err("id >= n");
    }
    c.desc = format!("update n {n} L {l} count {count} muts {what:?}");
    // Probe codes: every row's codes (hits every non-empty bucket).
    let probe = tab.codes.clone();
    let (ip, cp) = (ids.ptr(), codes.ptr());
    let i0 = (ids.v.clone(), codes.v.clone());
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_tables_update", || unsafe {
        lshk_tables_update(handle, ip, cp, count)
    });
    if (ids.v.clone(), codes.v.clone()) != i0 {
        c.fail("lshk_tables_update changed an input".into());
    }
    if !c.judge("lshk_tables_update", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if !same_tables(tab.h, &tab.mirror, &probe) {
            c.fail(format!(
                "lshk_tables_update failed with {st} but changed the tables"
            ));
        }
        return;
    }
    if handle != tab.h {
        return; // count 0 on a borrowed handle could only be refused above
    }
    // Oracle: a fresh build from the updated codes (documented equality).
    let mut newc = tab.codes.clone();
    for j in 0..count {
        let id = ids.v[j] as usize;
        newc[id * l..id * l + l].copy_from_slice(&codes.v[j * l..j * l + l]);
    }
    let fresh = Tables::build(&newc, n, l as u32, tab.rb, tab.cap, tab.mirror.seed(), 1).unwrap();
    let mut probe2 = probe.clone();
    probe2.extend_from_slice(&newc);
    if !same_tables(tab.h, &fresh, &probe2) {
        c.fail(
            "lshk_tables_update: the tables differ from a rebuild from the updated codes".into(),
        );
    }
    tab.mirror = fresh;
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BigLabel {
    pub(crate) p: lshk_label_params,
    pub(crate) tail: [u64; 2],
}

pub(crate) fn fuzz_add_labels(c: &mut Ctx, idx: &[Idx]) {
    let tab = build_tab(c);
    let (n, l, k) = (tab.n, tab.l, tab.k);
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut nt = r.u(20);
    let mut codes = Arr::new(new_codes(r, nt, l, k), 0u32);
    let lo0 = csr(r, nt, 3);
    let mut labels = Arr::new(
        (0..*lo0.last().unwrap()).map(|_| r.u(n) as u32).collect(),
        0u32,
    );
    let mut lo = Arr::new(lo0, 0usize);
    let mut lp = lshk_label_params_default();
    lp.label_cap = r.pick(&[0, 1, 2, 64]);
    lp.policy = r.pick(&[LSHK_LABEL_POLICY_BESIDE, LSHK_LABEL_POLICY_INSTEAD]);
    let mut pmode = 0;
    let mut handle = tab.h;
    let mut twice = false;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(10);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 => match r.u(4) {
                0 => codes.mode = Mode::Null,
                1 => lo.mode = Mode::Null,
                2 => labels.mode = Mode::Null,
                _ => pmode = 1,
            },
            1 => match r.u(3) {
                0 => codes.mode = Mode::Mis,
                1 => lo.mode = Mode::Mis,
                _ => labels.mode = Mode::Mis,
            },
            2 => nt = r.size(nt),
            3 => mutate_offsets(r, lo.data_mut()),
            4 if labels.len() > 0 => {
                let j = r.u(labels.len());
                labels.data_mut()[j] = r.pick(&[n as u32, u32::MAX]);
            }
            5 => {
                lp.policy = r.pick(&[2, u32::MAX]);
            }
            6 => {
                let full = std::mem::size_of::<lshk_label_params>() as u32;
                lp.struct_size = r.pick(&[0, 4, full - 1]);
            }
            7 => pmode = 2,
            8 => {
                let mut th = null();
                // SAFETY: live index, writable out.
                unsafe { lshk_index_tables(idx[r.u(idx.len())].h, &mut th) };
                handle = th.cast_mut();
                v.err("borrowed tables");
            }
            _ => twice = true,
        }
    }
    codes.need(mul(nt, l), &mut v, || 1);
    lo.need(Some(nt as u128 + 1), &mut v, || 0);
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
        return;
    }
    // The labels used are labels[label_offsets[0] .. label_offsets[nt]].
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
            .any(|&y| y as usize >= n)
    {
        v.err("label >= rows");
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
    if twice && handle == tab.h {
        // First a valid empty training freezes the tables.
        let z = [0usize];
        // SAFETY: n = 0: one offset, no codes, no labels.
        let s = unsafe { lshk_tables_add_labels(tab.h, null(), 0, z.as_ptr(), null(), null()) };
        assert_eq!(s, LSHK_STATUS_OK, "{}", last_msg());
        v.err("tables already carry labels");
    }
    c.desc = format!(
        "add_labels n {n} L {l} nt {nt} params {eff:?} pmode {pmode} twice {twice} muts {what:?}"
    );
    let probe: Vec<u32> = tab.codes.clone();
    let before_frozen = if twice && handle == tab.h {
        // After the empty training the tables equal the plain ones.
        tab.mirror.clone()
    } else {
        tab.mirror.clone()
    };
    let (cp, op, yp) = (codes.ptr(), lo.ptr(), labels.ptr());
    let i0 = (codes.v.clone(), lo.v.clone(), labels.v.clone());
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_tables_add_labels", || unsafe {
        lshk_tables_add_labels(handle, cp, nt, op, yp, pp)
    });
    if (codes.v.clone(), lo.v.clone(), labels.v.clone()) != i0 {
        c.fail("lshk_tables_add_labels changed an input".into());
    }
    if !c.judge("lshk_tables_add_labels", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if !same_tables(tab.h, &before_frozen, &probe) {
            c.fail(format!(
                "lshk_tables_add_labels failed with {st} but changed the tables"
            ));
        }
        return;
    }
    let want = lshk::tables::tables_with_labels(
        &tab.mirror,
        &codes.data()[..nt * l],
        nt,
        &lo.data()[..nt + 1],
        labels.data(),
        &eff,
        1,
    );
    let mut probe2 = probe.clone();
    probe2.extend_from_slice(&codes.data()[..nt * l]);
    match want {
        Ok(t) if same_tables(tab.h, &t, &probe2) => {}
        Ok(_) => {
            c.fail("lshk_tables_add_labels: tables differ from tables::tables_with_labels".into())
        }
        Err(e) => c.fail(format!(
            "lshk_tables_add_labels returned OK, the Rust API refused: {e}"
        )),
    }
}

/// lshk_tables_gather_budget against Tables::gather_budget (bit for bit),
/// with the budget params mutated (NULL, struct_size, rule, misaligned).
pub(crate) fn fuzz_gather_budget(c: &mut Ctx) {
    let tab = build_tab(c);
    let (n, l, k) = (tab.n, tab.l, tab.k);
    let r = &mut c.r;
    let q = r.u(6);
    let qcodes = new_codes(r, q, l, k);
    let mut v = Verdict::default();
    let mut gp = lshk_gather_params_default();
    gp.max_candidates = r.pick(&[0u32, 1, 3, 10, 40, 1000]);
    gp.min_count = r.pick(&[1u32, 1, 2]);
    let mut bp = lshk_budget_params_default();
    bp.rule = r.u(3) as u32;
    bp.seed = r.0.next_u64();
    let mut fo = vec![0usize];
    let mut fi = Vec::new();
    let forced = r.one_in(2);
    if forced {
        for _ in 0..q {
            for _ in 0..r.u(3) {
                fi.push(r.u(n) as u32);
            }
            fo.push(fi.len());
        }
    }
    #[repr(C, align(8))]
    struct BigB {
        p: lshk_budget_params,
        tail: [u64; 2],
    }
    let mut big = BigB {
        p: bp,
        tail: [0x55; 2],
    };
    let mut kind = 0; // 0: &bp, 1: NULL, 2: misaligned, 3: a larger struct
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(6);
        what.push(m);
        match m {
            0 => kind = 1, // defaults: the mid-bucket rule
            1 => bp.struct_size = r.pick(&[0u32, 15, 8]),
            2 => bp.rule = r.pick(&[3u32, 4, u32::MAX]),
            3 => kind = 2,
            4 => kind = 3,
            _ => gp.max_candidates = r.pick(&[0u32, 2, 7]),
        }
    }
    let good_size = bp.struct_size as usize >= std::mem::size_of::<lshk_budget_params>();
    let bptr: *const lshk_budget_params = match kind {
        1 => null(),
        2 => (&bp as *const lshk_budget_params)
            .cast::<u8>()
            .wrapping_add(1)
            .cast(),
        3 => {
            big.p = bp;
            if good_size {
                big.p.struct_size = std::mem::size_of::<BigB>() as u32;
            }
            &big.p
        }
        _ => &bp,
    };
    if kind == 2 {
        v.err("misaligned budget");
    }
    if kind != 1 && !good_size {
        v.err("budget struct_size too small");
    }
    if kind != 1 && bp.rule > 2 {
        v.err("unknown budget rule");
    }
    let rule = if bptr.is_null() {
        lshk::tables::BudgetRule::MidBucket
    } else {
        match bp.rule {
            0 => lshk::tables::BudgetRule::MidBucket,
            1 => lshk::tables::BudgetRule::MidBucketRotated { seed: bp.seed },
            _ => lshk::tables::BudgetRule::WholeBuckets { seed: bp.seed },
        }
    };
    c.desc = format!(
        "gather_budget n {n} L {l} q {q} budget {} rule {} forced {forced} muts {what:?}",
        gp.max_candidates, bp.rule
    );
    let cap_ids = q * n + 1;
    let mut ids = vec![CANARY; cap_ids + 1];
    let mut offs = vec![CANARY as usize; q + 2];
    let mut counts = vec![CANARY; cap_ids + 1];
    let mut needed = CANARY as usize;
    // SAFETY: codes q*L, forced CSR of q + 1 offsets when given; outputs
    // sized q*n + 1 (at most n ids per query), q + 1 offsets.
    let st = c.call("lshk_tables_gather_budget", || unsafe {
        lshk_tables_gather_budget(
            tab.h,
            qcodes.as_ptr(),
            q,
            &gp,
            bptr,
            null(),
            0,
            if forced { fo.as_ptr() } else { null() },
            fi.as_ptr(),
            fi.len(),
            ids.as_mut_ptr(),
            cap_ids,
            offs.as_mut_ptr(),
            counts.as_mut_ptr(),
            &mut needed,
        )
    });
    if !c.judge("lshk_tables_gather_budget", st, &v) {
        if st != LSHK_STATUS_OK
            && (ids.iter().any(|&x| x != CANARY)
                || offs.iter().any(|&x| x != CANARY as usize)
                || needed != CANARY as usize)
        {
            c.fail("lshk_tables_gather_budget failed but wrote an output".into());
        }
        return;
    }
    let p = GatherParams {
        min_count: gp.min_count,
        max_candidates: gp.max_candidates,
        probes: 0,
        bits_per_table: 0,
    };
    let input = GatherInput {
        codes: &qcodes,
        q,
        projections: None,
        forced_offsets: forced.then_some(&fo[..]),
        forced_ids: &fi,
    };
    let mut want = GatherResult::default();
    tab.mirror
        .gather_budget(&p, rule, &input, true, &mut want)
        .unwrap();
    let m = want.ids.len();
    if needed != m
        || ids[..m] != want.ids[..]
        || offs[..q + 1] != want.offsets[..]
        || counts[..m] != want.counts[..]
        || ids[m] != CANARY
        || offs[q + 1] != CANARY as usize
    {
        c.fail("lshk_tables_gather_budget differs from Tables::gather_budget".into());
    }
    if let lshk::tables::BudgetRule::WholeBuckets { .. } = rule {
        let b = gp.max_candidates as usize;
        for i in 0..q {
            let got = offs[i + 1] - offs[i];
            let nf = {
                let mut f = fi
                    .get(fo.get(i).copied().unwrap_or(0)..fo.get(i + 1).copied().unwrap_or(0))
                    .unwrap_or(&[])
                    .to_vec();
                f.sort_unstable();
                f.dedup();
                f.len()
            };
            if b > 0 && got > b.max(nf) {
                c.fail(format!("whole buckets: {got} ids over the budget {b}"));
            }
        }
    }
}
