//! The training kernels: softmax cross-entropy over CSR segments, the transposed product dq and the SGD row update.

use super::*;

/// `lshk_softmax_xent_csr[_isa]`: OK results equal the safe Rust API bit
/// for bit (every tier returns the same bits, so the scalar tier is the
/// reference), failures write nothing.
pub(crate) fn fuzz_xent(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let isa = if r.one_in(2) {
        Some(tier(r, &mut v))
    } else {
        None
    };
    let mut nb = r.u(5);
    let o = csr(r, nb, 40);
    let total = *o.last().unwrap();
    let spread = r.pick(&[1.0f32, 30.0, 120.0]);
    let mut z = Arr::new((0..total).map(|_| r.f(-spread, spread)).collect(), 0.0f32);
    let mut y = Arr::new(
        (0..total)
            .map(|_| if r.one_in(3) { r.f(0.0, 2.0) } else { 0.0 })
            .collect(),
        0.0f32,
    );
    let mut offs = Arr::new(o, 0usize);
    let in_place = r.one_in(4);
    let cf = f32::from_bits(CANARY);
    let mut grad = Arr::new(vec![cf; total], cf);
    let mut loss = Arr::new(vec![cf; nb], cf);
    let threads = r.pick(&[0u32, 1, 2, 3, 7]);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(7);
        what.push(m);
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                match r.u(5) {
                    0 => z.mode = mode,
                    1 => y.mode = mode,
                    2 => offs.mode = mode,
                    3 => grad.mode = mode,
                    _ => loss.mode = mode,
                }
            }
            2 => nb = r.size(nb),
            3 => mutate_offsets(r, offs.data_mut()),
            4 if total > 0 => {
                let j = r.u(total);
                r.spoil(z.data_mut(), j);
            }
            5 if total > 0 => {
                let j = r.u(total);
                y.data_mut()[j] = r.pick(&[f32::NAN, f32::INFINITY, -1.0, -1e-30, -0.0, 1e30]);
            }
            _ => {}
        }
    }
    offs.need(Some(nb as u128 + 1), &mut v, || 0);
    let tclaim = if offs.mode == Mode::Ok && offs.len() > nb {
        offs.data()[nb] as u128
    } else {
        0
    };
    z.need(Some(tclaim), &mut v, || 0.5);
    y.need(Some(tclaim), &mut v, || 0.0);
    if !in_place {
        grad.need(Some(tclaim), &mut v, || cf);
    }
    loss.need(Some(nb as u128), &mut v, || cf);
    if v.skip {
        c.skipped += 1;
        return;
    }
    let total = offs.v[nb.min(offs.len() - 1)];
    if offs.mode == Mode::Ok && offs.len() > nb && !offsets_valid(&offs.data()[..nb + 1], total) {
        v.err("offsets are invalid");
    }
    if z.mode == Mode::Ok && total <= z.len() && z.data()[..total].iter().any(|x| !x.is_finite()) {
        v.err("a logit is not finite");
    }
    if y.mode == Mode::Ok
        && total <= y.len()
        && y.data()[..total].iter().any(|x| !x.is_finite() || *x < 0.0)
    {
        v.err("a target is negative or not finite");
    }
    c.desc = format!(
        "xent isa {isa:?} nb {nb} total {total} in_place {in_place} threads {threads} muts {what:?}"
    );
    let (z0, y0, o0) = (bits(&z.v), bits(&y.v), offs.v.clone());
    let (g0, l0) = (bits(&grad.v), bits(&loss.v));
    let (zp, yp, op, lp) = (z.ptr(), y.ptr(), offs.ptr(), loss.mptr());
    let gp = if in_place { zp.cast_mut() } else { grad.mptr() };
    let func = if isa.is_some() {
        "lshk_softmax_xent_csr_isa"
    } else {
        "lshk_softmax_xent_csr"
    };
    // SAFETY: every buffer holds what its claimed length says, or the
    // call must fail before touching it (see the module docs).
    let st = c.call(func, || unsafe {
        match isa {
            Some(t) => lshk_softmax_xent_csr_isa(t, zp, yp, op, nb, threads, lp, gp),
            None => lshk_softmax_xent_csr(zp, yp, op, nb, threads, lp, gp),
        }
    });
    tier_ran(isa.filter(|_| st == LSHK_STATUS_OK));
    if bits(&y.v) != y0 || offs.v != o0 || (!in_place && bits(&z.v) != z0) {
        c.fail(format!("{func} changed an input"));
    }
    if !c.judge(func, st, &v) {
        if st != LSHK_STATUS_OK
            && (bits(&grad.v) != g0 || bits(&loss.v) != l0 || (in_place && bits(&z.v) != z0))
        {
            c.fail(format!("{func} failed with {st} but wrote an output"));
        }
        return;
    }
    let zin: Vec<f32> = z0[..total].iter().map(|&b| f32::from_bits(b)).collect();
    let mut rl = vec![0f32; nb];
    let mut rg = vec![0f32; total];
    let want = lshk::train::softmax_xent(
        Isa::Scalar,
        1,
        &zin,
        &y.data()[..total],
        &o0[..nb + 1],
        &mut rl,
        &mut rg,
    );
    if want.is_err() {
        c.fail(format!("{func} returned OK, the Rust API {want:?}"));
        return;
    }
    let got_g = if in_place { &z.v } else { &grad.v };
    if bits(&got_g[..total]) != bits(&rg) || bits(&loss.v[..nb]) != bits(&rl) {
        c.fail(format!("{func}: results differ from the Rust API"));
    }
    if !in_place && grad.v[total].to_bits() != CANARY || loss.v[nb].to_bits() != CANARY {
        c.fail(format!("{func} wrote past its outputs"));
    }
}

/// `lshk_gather_dq[_isa]` (float rows: dtype F32 or BORROWED_F32; other
/// dtypes mutated in) and `lshk_rows_update_sgd[_isa]`: the same argument
/// block (W, ids, offsets, grad; q and lr for the update, dq for the
/// product). OK results equal the Rust API (scalar tier, one thread) bit
/// for bit; failures write nothing.
pub(crate) fn fuzz_backward(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let upd = r.one_in(2);
    let isa = if r.one_in(2) {
        Some(tier(r, &mut v))
    } else {
        None
    };
    let mut rows = 1 + r.u(30);
    let mut dim = 1 + r.u(40);
    let mut w_stride = dim + if r.one_in(3) { r.u(4) } else { 0 };
    let mut nb = r.u(5);
    let mut q_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut dq_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let ql = if nb == 0 {
        0
    } else {
        (nb - 1) * q_stride + dim
    };
    let mut q = Arr::new((0..ql).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let o = csr(r, nb, 12);
    let n = *o.last().unwrap();
    let mut ids = Arr::new((0..n).map(|_| r.u(rows) as u32).collect(), 0u32);
    let mut g = Arr::new((0..n).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut offs = Arr::new(o, 0usize);
    let cf = f32::from_bits(CANARY);
    let dql = if nb == 0 {
        0
    } else {
        (nb - 1) * dq_stride + dim
    };
    let mut dq = Arr::new(vec![cf; dql], cf);
    let mut lr = r.f(0.01, 1.0);
    let threads = r.pick(&[0u32, 1, 2, 3]);
    let mut dtype = r.pick(&[LSHK_STORAGE_F32, LSHK_STORAGE_BORROWED_F32]);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(13);
        what.push(m);
        let hv = r.pick(&HUGE);
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                match r.u(6) {
                    0 => w.mode = mode,
                    1 => q.mode = mode,
                    2 => ids.mode = mode,
                    3 => g.mode = mode,
                    4 => offs.mode = mode,
                    _ => dq.mode = mode,
                }
            }
            2 => rows = r.size(rows),
            3 => dim = r.pick(&[0, dim.saturating_add(1), dim.saturating_sub(1).max(1)]),
            4 => {
                w_stride = r.pick(&[
                    w_stride.saturating_sub(1),
                    0,
                    hv,
                    w_stride.saturating_add(1),
                ])
            }
            5 => q_stride = r.pick(&[q_stride.saturating_sub(1), hv, q_stride.saturating_add(2)]),
            6 => {
                dq_stride = r.pick(&[dq_stride.saturating_sub(1), hv, dq_stride.saturating_add(2)])
            }
            7 => nb = r.size(nb),
            8 => mutate_offsets(r, offs.data_mut()),
            9 if ids.len() > 0 => {
                let j = r.u(ids.len());
                ids.data_mut()[j] = r.pick(&[rows as u32, u32::MAX, hv as u32]);
            }
            10 => match r.u(3) {
                0 if g.len() > 0 => {
                    let j = r.u(g.len());
                    r.spoil(g.data_mut(), j);
                }
                1 if q.len() > 0 => {
                    let j = r.u(q.len());
                    r.spoil(q.data_mut(), j);
                }
                _ => lr = r.special(),
            },
            11 if !upd => dtype = r.pick(&[LSHK_STORAGE_F16, LSHK_STORAGE_I8, 5, u32::MAX]),
            _ => {}
        }
    }
    if !upd && dtype > LSHK_STORAGE_BF16 {
        v.err("dtype neither float nor bf16");
    }
    if dim == 0 || w_stride < dim || (upd && q_stride < dim) || (!upd && dq_stride < dim) {
        v.err("dim 0 or a stride < dim");
    }
    w.need(strided(rows, dim, w_stride), &mut v, || 0.25);
    if upd {
        q.need(strided(nb, dim, q_stride), &mut v, || 0.5);
    } else {
        dq.need(strided(nb, dim, dq_stride), &mut v, || cf);
    }
    offs.need(Some(nb as u128 + 1), &mut v, || 0);
    let tclaim = if offs.mode == Mode::Ok && offs.len() > nb {
        offs.data()[nb] as u128
    } else {
        0
    };
    ids.need(Some(tclaim), &mut v, || 0);
    g.need(Some(tclaim), &mut v, || 0.5);
    if v.skip {
        c.skipped += 1;
        return;
    }
    let n = offs.v[nb.min(offs.len() - 1)];
    if offs.mode == Mode::Ok && offs.len() > nb && !offsets_valid(&offs.data()[..nb + 1], n) {
        v.err("offsets are invalid");
    }
    if ids.mode == Mode::Ok && n <= ids.len() && ids.data()[..n].iter().any(|&i| i as usize >= rows)
    {
        v.err("an id >= rows");
    }
    if upd {
        if !lr.is_finite() {
            v.err("lr is not finite");
        }
        if g.mode == Mode::Ok && n <= g.len() && g.data()[..n].iter().any(|x| !x.is_finite()) {
            v.err("a gradient is not finite");
        }
        let qfits = strided(nb, dim, q_stride).is_some_and(|c| c <= q.len() as u128);
        if q.mode == Mode::Ok
            && dim > 0
            && qfits
            && (0..nb).any(|b| {
                q.data()[b * q_stride..b * q_stride + dim]
                    .iter()
                    .any(|x| !x.is_finite())
            })
        {
            v.err("a q value is not finite");
        }
    }
    c.desc = format!(
        "{} isa {isa:?} dtype {dtype} rows {rows} dim {dim} w_stride {w_stride} nb {nb} n {n} threads {threads} muts {what:?}",
        if upd { "sgd" } else { "dq" }
    );
    let (w0, q0, i0, g0, o0, d0) = (
        bits(&w.v),
        bits(&q.v),
        ids.v.clone(),
        bits(&g.v),
        offs.v.clone(),
        bits(&dq.v),
    );
    let (qp, ip, gp, op) = (q.ptr(), ids.ptr(), g.ptr(), offs.ptr());
    let func = match (upd, isa.is_some()) {
        (true, true) => "lshk_rows_update_sgd_isa",
        (true, false) => "lshk_rows_update_sgd",
        (false, true) => "lshk_gather_dq_isa",
        (false, false) => "lshk_gather_dq",
    };
    let wp = w.mptr();
    let dp = dq.mptr();
    // SAFETY: as in fuzz_xent.
    let st = c.call(func, || unsafe {
        match (upd, isa) {
            (true, Some(t)) => lshk_rows_update_sgd_isa(
                t, wp, rows, dim, w_stride, qp, q_stride, gp, ip, op, nb, lr, threads,
            ),
            (true, None) => lshk_rows_update_sgd(
                wp, rows, dim, w_stride, qp, q_stride, gp, ip, op, nb, lr, threads,
            ),
            (false, Some(t)) => lshk_gather_dq_isa(
                t,
                dtype,
                wp.cast_const().cast(),
                rows,
                dim,
                w_stride,
                gp,
                ip,
                op,
                nb,
                threads,
                dp,
                dq_stride,
            ),
            (false, None) => lshk_gather_dq(
                dtype,
                wp.cast_const().cast(),
                rows,
                dim,
                w_stride,
                gp,
                ip,
                op,
                nb,
                threads,
                dp,
                dq_stride,
            ),
        }
    });
    tier_ran(isa.filter(|_| st == LSHK_STATUS_OK));
    if bits(&q.v) != q0
        || ids.v != i0
        || bits(&g.v) != g0
        || offs.v != o0
        || (!upd && bits(&w.v) != w0)
    {
        c.fail(format!("{func} changed an input"));
    }
    if !c.judge(func, st, &v) {
        if st != LSHK_STATUS_OK && (bits(&w.v) != w0 || bits(&dq.v) != d0) {
            c.fail(format!("{func} failed with {st} but wrote an output"));
        }
        return;
    }
    let win: Vec<f32> = w0[..w.len()].iter().map(|&b| f32::from_bits(b)).collect();
    if upd {
        let mut rw = win.clone();
        let b = lshk::train::Batch {
            q: &q.data()[..strided(nb, dim, q_stride).unwrap() as usize],
            q_stride,
            ids: &ids.data()[..n],
            offsets: &o0[..nb + 1],
            grad: &g.data()[..n],
        };
        let wl = strided(rows, dim, w_stride).unwrap() as usize;
        if let Err(e) =
            lshk::train::rows_update_sgd(Isa::Scalar, 1, &mut rw[..wl], rows, dim, w_stride, &b, lr)
        {
            c.fail(format!("{func} returned OK, the Rust API {e}"));
            return;
        }
        if bits(&w.v[..w.len()]) != bits(&rw) || w.v[w.len()].to_bits() != 0 {
            c.fail(format!("{func}: W differs from the Rust API"));
        }
    } else {
        let dql = strided(nb, dim, dq_stride).unwrap() as usize;
        let mut rd = dq.data()[..dql].to_vec();
        rd.iter_mut().for_each(|x| *x = cf);
        let wl = strided(rows, dim, w_stride).unwrap() as usize;
        if let Err(e) = lshk::train::gather_dq(
            Isa::Scalar,
            1,
            lshk::train::DqWeights::F32(&win[..wl]),
            rows,
            dim,
            w_stride,
            &g.data()[..n],
            &ids.data()[..n],
            &o0[..nb + 1],
            &mut rd,
            dq_stride,
        ) {
            c.fail(format!("{func} returned OK, the Rust API {e}"));
            return;
        }
        if bits(&dq.v[..dql]) != bits(&rd) || dq.v[dql].to_bits() != CANARY {
            c.fail(format!("{func}: dq differs from the Rust API"));
        }
    }
}
