//! The LSH inclusion probabilities of a logQ correction:
//! lshk_index_inclusion_prob against `Index::inclusion_probabilities` on
//! the identically built mirror index, bit for bit.

use super::*;

const CANARY64: u64 = 0xA5A5_A5A5_A5A5_A5A5;

pub(crate) fn fuzz_inclusion_prob(c: &mut Ctx, idx: &[Idx]) {
    use lshk::ffi::train_logq::lshk_index_inclusion_prob;
    let ix = &idx[c.r.u(idx.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let (dim, rows) = (ix.dim, ix.rows);
    let l = ix.mirror.num_tables();
    let mut nq = r.u(5);
    let mut q_stride = dim + if r.one_in(3) { r.u(4) } else { 0 };
    let ql = strided(nq, dim, q_stride).unwrap() as usize;
    let mut q = Arr::new(
        (0..ql)
            .map(|i| {
                let row = (i / q_stride * 31) % rows;
                ix.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.3, 0.3)
            })
            .collect(),
        0.0f32,
    );
    let o0 = csr(r, nq, 7);
    let total0 = o0[nq];
    let mut offs = Arr::new(o0, usize::MAX);
    let mut ids = Arr::new((0..total0).map(|_| r.u(rows) as u32).collect(), CANARY);
    let mut tabs = Arr::new((0..nq).map(|_| r.u(l as usize + 1) as u32).collect(), 0u32);
    let mut use_tabs = !r.one_in(3);
    let slack = f64::from_bits(CANARY64);
    let mut out = Arr::new(vec![slack; total0], slack);
    let mut handle: *const lshk_index = ix.h;
    let mut foreign = [0u64; 8];
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
        what.push(m);
        let hv = r.pick(&HUGE);
        match m {
            0 => match r.u(6) {
                0 => q.mode = Mode::Null,
                1 => ids.mode = Mode::Null,
                2 => offs.mode = Mode::Null,
                3 => out.mode = Mode::Null,
                4 => {
                    handle = null();
                    v.err("NULL handle")
                }
                _ => use_tabs = false,
            },
            1 => match r.u(5) {
                0 => q.mode = Mode::Mis,
                1 => ids.mode = Mode::Mis,
                2 => offs.mode = Mode::Mis,
                3 => {
                    use_tabs = true;
                    tabs.mode = Mode::Mis
                }
                _ => out.mode = Mode::Mis,
            },
            2 => q_stride = r.pick(&[dim - 1, 0, hv, q_stride.saturating_add(1)]),
            3 => nq = r.size(nq),
            4 if ids.len() > 0 => {
                let j = r.u(ids.len());
                ids.data_mut()[j] = r.pick(&[rows as u32, rows as u32 + 1, u32::MAX]);
            }
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                r.spoil(q.data_mut(), j);
            }
            6 => mutate_offsets(r, offs.data_mut()),
            7 if tabs.len() > 0 => {
                use_tabs = true;
                let j = r.u(tabs.len());
                tabs.data_mut()[j] = r.pick(&[l + 1, u32::MAX, 0, l]);
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = foreign.as_ptr().cast();
                v.err("foreign handle");
            }
        }
    }
    // The buffers honour their claims (module docs of fuzz_args).
    offs.need(
        (nq as u128)
            .checked_add(1)
            .filter(|&n| n <= usize::MAX as u128),
        &mut v,
        || usize::MAX,
    );
    let mut total: Option<usize> = None;
    if offs.mode == Mode::Ok && v.expect_err.is_none() && !v.skip {
        let o = &offs.data()[..nq + 1];
        if offsets_valid(o, o[nq]) {
            total = Some(o[nq]);
        } else {
            v.err("bad offsets");
        }
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    if let Some(t) = total {
        q.need(strided(nq, dim, q_stride), &mut v, || 0.25);
        ids.need(Some(t as u128), &mut v, || 1);
        out.need(Some(t as u128), &mut v, || slack);
        if use_tabs {
            tabs.need(Some(nq as u128), &mut v, || 1);
        }
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    if let Some(t) = total {
        if v.expect_err.is_none() {
            nonfinite_queries(&mut v, &q, nq, dim, q_stride);
            if ids.mode == Mode::Ok && ids.data()[..t].iter().any(|&x| x as usize >= rows) {
                v.err("id >= rows");
            }
            if use_tabs && tabs.mode == Mode::Ok && tabs.data()[..nq].iter().any(|&x| x > l) {
                v.err("tables_used > L");
            }
            if ix.family == Family::Dwta {
                v.err("DWTA index");
            }
        }
    }
    c.desc = format!(
        "inclusion_prob {:?}/{:?} nq {nq} qs {q_stride} total {total:?} tabs {use_tabs} muts {what:?}",
        ix.family, ix.storage
    );
    let (q0, ids0, o0, t0) = (bits(&q.v), ids.v.clone(), offs.v.clone(), tabs.v.clone());
    let out0: Vec<u64> = out.v.iter().map(|x| x.to_bits()).collect();
    let (qp, ip, op) = (q.ptr(), ids.ptr(), offs.ptr());
    let tp = if use_tabs { tabs.ptr() } else { null() };
    let outp = out.mptr();
    // SAFETY: every buffer holds what its claim says, or the call must
    // refuse the claim before reading (module docs).
    let st = c.call("lshk_index_inclusion_prob", || unsafe {
        lshk_index_inclusion_prob(handle, qp, nq, q_stride, ip, op, tp, outp)
    });
    if bits(&q.v) != q0 || ids.v != ids0 || offs.v != o0 || tabs.v != t0 {
        c.fail("lshk_index_inclusion_prob changed an input".into());
    }
    let out_bits: Vec<u64> = out.v.iter().map(|x| x.to_bits()).collect();
    if !c.judge("lshk_index_inclusion_prob", st, &v) {
        if st != LSHK_STATUS_OK && v.expect_err.is_none() {
            let m = last_msg();
            c.fail(format!(
                "lshk_index_inclusion_prob refused a valid call with {st}: {m}"
            ));
        }
        if st != LSHK_STATUS_OK && out_bits != out0 {
            c.fail(format!(
                "lshk_index_inclusion_prob failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let t = total.expect("OK needs valid offsets");
    if out.v[t].to_bits() != CANARY64 {
        c.fail("lshk_index_inclusion_prob wrote past its output".into());
    }
    let mut want = vec![0f64; t];
    let tv = if use_tabs {
        Some(&tabs.data()[..nq])
    } else {
        None
    };
    match ix.mirror.inclusion_probabilities(
        view(&q, strided(nq, dim, q_stride).unwrap() as usize),
        nq,
        q_stride,
        view(&ids, t),
        &offs.data()[..nq + 1],
        tv,
        &mut want,
    ) {
        Err(e) => c.fail(format!(
            "lshk_index_inclusion_prob returned OK, the Rust API refused: {e}"
        )),
        Ok(()) => {
            let got = &out_bits[..t];
            let exp: Vec<u64> = want.iter().map(|x| x.to_bits()).collect();
            if got != &exp[..] {
                c.fail(format!(
                    "lshk_index_inclusion_prob: {:?} vs Rust {:?}",
                    &out.v[..t],
                    want
                ));
            }
            if want.iter().any(|p| !(0.0..=1.0).contains(p)) {
                c.fail(format!("a probability outside [0, 1]: {want:?}"));
            }
        }
    }
}
