//! The stateless kernels: the gathered matmul in every storage (through
//! an lshk_weights_view), the element conversions, top-k and softmax.

use super::*;

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Dt {
    F32,
    Bf16,
    F16,
    I8,
}

pub(crate) fn fuzz_matmul(c: &mut Ctx) {
    let r = &mut c.r;
    let dt = r.pick(&[Dt::F32, Dt::Bf16, Dt::F16, Dt::I8]);
    let mut v = Verdict::default();
    let isa = if r.one_in(2) {
        Some(tier(r, &mut v))
    } else {
        None
    };
    let big = r.one_in(8);
    let mut rows = 1 + r.u(if big { 300 } else { 40 });
    let mut dim = if r.one_in(4) {
        60 + r.u(12)
    } else {
        1 + r.u(33)
    };
    let mut w_stride = dim + if r.one_in(3) { r.u(20) } else { 0 };
    let mut nq = r.u(5);
    let mut q_stride = dim + if r.one_in(3) { r.u(5) } else { 0 };
    let wl = (rows - 1) * w_stride + dim;
    let mut wf = Arr::new((0..wl).map(|_| r.f(-2.0, 2.0)).collect(), 0.0f32);
    let mut wh = Arr::new(
        (0..wl)
            .map(|_| {
                let x = r.f(-2.0, 2.0);
                if dt == Dt::F16 {
                    half(x)
                } else {
                    (x.to_bits() >> 16) as u16
                }
            })
            .collect(),
        0u16,
    );
    let mut wi = Arr::new((0..wl).map(|_| r.u(255) as i8).collect(), 0i8);
    wi.data_mut()
        .iter_mut()
        .for_each(|x| *x = x.wrapping_sub(127));
    let mut scales = Arr::new((0..rows).map(|_| r.f(0.0, 0.05)).collect(), 0.0f32);
    let mut use_bias = r.u(10) < 7;
    let mut bias = Arr::new((0..rows).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let ql = if nq == 0 {
        0
    } else {
        (nq - 1) * q_stride + dim
    };
    let mut q = Arr::new((0..ql).map(|_| r.f(-2.0, 2.0)).collect(), 0.0f32);
    let offs0 = csr(r, nq, 12);
    let mut out_len = *offs0.last().unwrap();
    let mut ids = Arr::new((0..out_len).map(|_| r.u(rows) as u32).collect(), 0u32);
    let mut offs = Arr::new(offs0, 0usize);
    let mut out = Arr::new(
        vec![f32::from_bits(CANARY); out_len],
        f32::from_bits(CANARY),
    );

    // The view: its storage (F32 or BORROWED_F32 for float rows, both
    // read as f32) and, mutated below, its own fields and pointer.
    let mut storage = match dt {
        Dt::F32 => r.pick(&[LSHK_STORAGE_F32, LSHK_STORAGE_BORROWED_F32]),
        Dt::Bf16 => LSHK_STORAGE_BF16,
        Dt::F16 => LSHK_STORAGE_F16,
        Dt::I8 => LSHK_STORAGE_I8,
    };
    let view_size = std::mem::size_of::<lshk_weights_view>() as u32;
    let mut vsize = view_size;
    let mut vmode = 0; // 0 plain, 1 NULL, 2 misaligned, 3 larger struct
    let mut stray_scales = false;
    let nmut = r.u(4);
    let mut alias = false;
    let mut what = Vec::new();
    for _ in 0..nmut {
        let k = r.u(16);
        what.push(k);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match k {
            0 | 1 => {
                let mode = if k == 0 { Mode::Null } else { Mode::Mis };
                match r.u(6) {
                    0 => match dt {
                        Dt::F32 => wf.mode = mode,
                        Dt::Bf16 | Dt::F16 => wh.mode = mode,
                        Dt::I8 => wi.mode = Mode::Null,
                    },
                    1 if dt == Dt::I8 => scales.mode = mode,
                    1 => {
                        use_bias = true;
                        if mode == Mode::Mis {
                            bias.mode = mode
                        }
                    }
                    2 => q.mode = mode,
                    3 => ids.mode = mode,
                    4 => offs.mode = mode,
                    _ => out.mode = mode,
                }
            }
            2 => rows = r.size(rows),
            3 => dim = r.size(dim),
            4 => {
                w_stride = r.pick(&[
                    w_stride.saturating_sub(1),
                    dim.saturating_sub(1),
                    0,
                    hv,
                    w_stride.saturating_add(1),
                ])
            }
            5 => {
                q_stride = r.pick(&[
                    q_stride.saturating_sub(1),
                    0,
                    hv,
                    q_stride.saturating_add(3),
                ])
            }
            6 => nq = r.size(nq),
            7 => out_len = r.size(out_len),
            8 => mutate_offsets(r, offs.data_mut()),
            9 if ids.len() > 0 => {
                let j = r.u(ids.len());
                ids.data_mut()[j] = r.pick(&[
                    rows as u32,
                    (rows as u32).wrapping_sub(1),
                    u32::MAX,
                    hv as u32,
                    rows.wrapping_add(1) as u32,
                ]);
            }
            10 => {
                let s = r.special();
                match r.u(4) {
                    0 if q.len() > 0 => {
                        let j = r.u(q.len());
                        q.data_mut()[j] = s
                    }
                    1 => {
                        let j = r.u(wf.len());
                        wf.data_mut()[j] = s;
                        let j = r.u(wh.len());
                        wh.data_mut()[j] = if dt == Dt::F16 {
                            half(s)
                        } else {
                            (s.to_bits() >> 16) as u16
                        };
                    }
                    2 => {
                        let j = r.u(bias.len());
                        bias.data_mut()[j] = s
                    }
                    _ => {
                        let j = r.u(scales.len());
                        scales.data_mut()[j] = s
                    }
                }
            }
            11 => use_bias = !use_bias,
            12 => {
                // Output one element short or long (the buffer really is).
                out_len = if r.one_in(2) {
                    out_len.saturating_sub(1)
                } else {
                    out_len.saturating_add(1)
                };
                out.shrink_to(out_len);
            }
            14 => alias = true,
            15 => match r.u(4) {
                0 => vmode = r.pick(&[1, 2, 3]),
                1 => vsize = r.pick(&[0, 4, view_size - 1]),
                2 => storage = r.pick(&[5, 6, u32::MAX]),
                _ => stray_scales = dt != Dt::I8,
            },
            _ => {
                // Random f16/bf16 bit patterns, i8 extremes.
                let j = r.u(wh.len());
                wh.data_mut()[j] = r.pick(&[
                    0x7c00, 0xfc00, 0x7e00, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8000, 0x7bff,
                ]);
                let j = r.u(wi.len());
                wi.data_mut()[j] = r.pick(&[-128, 127, -127, 0]);
            }
        }
    }
    // Memory claims after the mutations.
    let wclaim = strided(rows, dim, w_stride);
    match dt {
        Dt::F32 => wf.need(wclaim, &mut v, || r.f(-2.0, 2.0)),
        Dt::Bf16 | Dt::F16 => wh.need(wclaim, &mut v, || 0x3f80),
        Dt::I8 => wi.need(wclaim, &mut v, || 3),
    }
    if dt == Dt::I8 {
        scales.need(Some(rows as u128), &mut v, || 0.01);
    }
    if use_bias {
        bias.need(Some(rows as u128), &mut v, || 0.5);
    }
    q.need(strided(nq, dim, q_stride), &mut v, || 1.0);
    offs.need(Some(nq as u128 + 1), &mut v, || 0);
    ids.need(Some(out_len as u128), &mut v, || 0);
    out.need(Some(out_len as u128), &mut v, || f32::from_bits(CANARY));
    if v.skip {
        c.skipped += 1;
        return;
    }
    // Documented rejections the mutations may have caused.
    match vmode {
        1 => v.err("view NULL"),
        2 => v.err("view misaligned"),
        _ => {}
    }
    if vmode != 3 && vsize < view_size {
        v.err("view struct_size too small");
    }
    if storage > LSHK_STORAGE_I8 {
        v.err("view storage not an LSHK_STORAGE_* value");
    }
    if stray_scales {
        v.err("scales without I8 storage");
    }
    if dim == 0 {
        v.err("dim is 0");
    }
    if w_stride < dim || q_stride < dim {
        v.err("a stride is < dim");
    }
    if offs.mode == Mode::Ok && offs.len() > nq && !offsets_valid(&offs.data()[..nq + 1], out_len) {
        v.err("offsets are invalid");
    }
    if ids.mode == Mode::Ok
        && ids.data()[..out_len.min(ids.len())]
            .iter()
            .any(|&i| i as usize >= rows)
    {
        v.err("an id is >= rows");
    }
    // `out` placed over `q` (the buffer holds out_len floats): refused
    // whenever both are non-empty.
    let alias = alias
        && out_len > 0
        && strided(nq, dim, q_stride).is_some_and(|c| c > 0)
        && out_len <= q.len()
        && q.mode == Mode::Ok
        && out.mode == Mode::Ok;
    if alias {
        v.err("out overlaps q");
    }
    c.desc = format!("matmul {dt:?} isa {isa:?} storage {storage} view {vmode}/{vsize}/{stray_scales} rows {rows} dim {dim} ws {w_stride} nq {nq} qs {q_stride} out_len {out_len} bias {use_bias} alias {alias} muts {what:?}");

    let (wf0, wh0, wi0, q0, ids0, offs0, sc0, b0) = (
        bits(wf.data()),
        wh.v.clone(),
        wi.v.clone(),
        bits(q.data()),
        ids.v.clone(),
        offs.v.clone(),
        bits(scales.data()),
        bits(bias.data()),
    );
    let out_before = bits(&out.v);
    let bp = if use_bias { bias.ptr() } else { null() };
    let (func, st) = {
        let (qp, ip, op) = (q.ptr(), ids.ptr(), offs.ptr());
        let wp: *const std::ffi::c_void = match dt {
            Dt::F32 => wf.ptr().cast(),
            Dt::Bf16 | Dt::F16 => wh.ptr().cast(),
            Dt::I8 => wi.ptr().cast(),
        };
        let sp = if dt == Dt::I8 || stray_scales {
            scales.ptr()
        } else {
            null()
        };
        #[repr(C)]
        struct BigView {
            v: lshk_weights_view,
            tail: [u64; 3],
        }
        let big = BigView {
            v: lshk_weights_view {
                struct_size: if vmode == 3 {
                    std::mem::size_of::<BigView>() as u32
                } else {
                    vsize
                },
                storage,
                w: wp,
                scales: sp,
                bias: bp,
                rows,
                dim,
                w_stride,
            },
            tail: [u64::MAX; 3],
        };
        let vp: *const lshk_weights_view = match vmode {
            1 => null(),
            2 => (&big as *const BigView).cast::<u8>().wrapping_add(1).cast(),
            _ => &big.v,
        };
        let outp = if alias { q.v.as_mut_ptr() } else { out.mptr() };
        // SAFETY: every pointer holds what its size arguments claim (or the
        // claim is impossible / the pointer NULL or misaligned, which the
        // library must reject before reading).
        unsafe {
            match isa {
                None => (
                    "lshk_gathered_matmul",
                    c.call("lshk_gathered_matmul", || {
                        lshk_gathered_matmul(vp, qp, nq, q_stride, ip, op, outp, out_len)
                    }),
                ),
                Some(t) => (
                    "lshk_gathered_matmul_isa",
                    c.call("lshk_gathered_matmul_isa", || {
                        lshk_gathered_matmul_isa(t, vp, qp, nq, q_stride, ip, op, outp, out_len)
                    }),
                ),
            }
        }
    };
    if (
        bits(wf.data()),
        &wh.v,
        &wi.v,
        bits(q.data()),
        &ids.v,
        &offs.v,
        bits(scales.data()),
        bits(bias.data()),
    ) != (wf0, &wh0, &wi0, q0, &ids0, &offs0, sc0, b0)
    {
        c.fail(format!("{func} changed an input"));
    }
    if !c.judge(func, st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if bits(&out.v) != out_before {
            c.fail(format!("{func} failed with {st} but wrote its output"));
        }
        return;
    }
    tier_ran(isa);
    if out.v[out_len].to_bits() != CANARY {
        c.fail(format!("{func} wrote past out_len"));
    }
    // Reference in f64 with the documented bound.
    let wval = |i: usize| -> f64 {
        match dt {
            Dt::F32 => wf.v[i] as f64,
            Dt::Bf16 => f32::from_bits((wh.v[i] as u32) << 16) as f64,
            Dt::F16 => f16_to_f64(wh.v[i]),
            Dt::I8 => wi.v[i] as f64,
        }
    };
    let o = &offs.v;
    for qi in 0..nq {
        for j in o[qi]..o[qi + 1] {
            let id = ids.v[j] as usize;
            // The sum, the sum of the magnitudes, and that of the finite
            // terms' magnitudes only.
            let (mut s, mut a, mut fin) = (0f64, 0f64, 0f64);
            for t in 0..dim {
                let p = wval(id * w_stride + t) * q.v[qi * q_stride + t] as f64;
                s += p;
                a += p.abs();
                if p.is_finite() {
                    fin += p.abs();
                }
            }
            // int8 rows are summed unscaled, then scaled (the header's
            // lshk_gathered_matmul, I8 storage): that sum can overflow on
            // its own.
            let unscaled_big = fin >= f32::MAX as f64 / 2.0;
            if dt == Dt::I8 {
                let sc = scales.v[id] as f64;
                s *= sc;
                a *= sc.abs();
                fin *= sc.abs();
            }
            let b = if use_bias { bias.v[id] as f64 } else { 0.0 };
            s += b;
            a += b.abs();
            if b.is_finite() {
                fin += b.abs();
            }
            let got = out.v[j] as f64;
            let bound = gamma(dim + 2) * a + (dim + 2) as f64 * 2f64.powi(-149);
            let good = if s.is_nan() {
                got.is_nan()
            } else if s.is_infinite() && (fin >= f32::MAX as f64 / 2.0 || unscaled_big) {
                // An infinite term beside finite ones that overflow in f32
                // (to either infinity): the f32 sum is that infinity or NaN.
                got == s || got.is_nan()
            } else if s.is_infinite() {
                got == s
            } else if a >= f32::MAX as f64 / 2.0 || unscaled_big {
                // Products or partial sums beyond the f32 range overflow in
                // f32 only (e.g. a bf16 weight of 2^121 times 1e17): the
                // bound does not apply.
                true
            } else {
                (got - s).abs() <= bound
            };
            if !good {
                c.fail(format!(
                    "{func}: out[{j}] = {got:e}, reference {s:e} (bound {bound:e}, query {qi}, id {id})"
                ));
                return;
            }
        }
    }
}

/// f32 -> binary16 bits, round to nearest even (through the library's
/// own documented converter would be circular; this is plain arithmetic).
pub(crate) fn half(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7e00;
    }
    let a = x.abs() as f64;
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f64.powi(-14) {
        // Subnormal: units of 2^-24.
        let m = (a * 2f64.powi(24)).round_ties_even() as u16;
        return sign | m;
    }
    let e = a.log2().floor() as i32;
    let mut e = e.clamp(-14, 15);
    let mut m = (a / 2f64.powi(e) - 1.0) * 1024.0;
    if m < 0.0 {
        e -= 1;
        m = (a / 2f64.powi(e) - 1.0) * 1024.0;
    }
    let mut mi = m.round_ties_even() as u32;
    let mut ee = (e + 15) as u32;
    if mi == 1024 {
        mi = 0;
        ee += 1;
    }
    if ee >= 31 {
        return sign | 0x7c00;
    }
    sign | ((ee << 10) as u16) | mi as u16
}

// ------------------------------------------------------------ conversions

/// lshk_convert: the four pairs (and pairs that are none of them: other
/// storage values, F32 to F32, BF16 to F16), sizes, NULL, misaligned and
/// overlapping buffers, special values; an OK result equals the
/// documented rounding computed here (bf16: round to nearest even by bit
/// arithmetic; binary16: [`half`]; widening: exact), NaN for NaN with its
/// sign, and nothing is written past `n`.
pub(crate) fn fuzz_convert(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let (f32_, bf16, f16) = (LSHK_STORAGE_F32, LSHK_STORAGE_BF16, LSHK_STORAGE_F16);
    let (mut from, mut to) = r.pick(&[(f32_, bf16), (f32_, f16), (bf16, f32_), (f16, f32_)]);
    let mut n = r.u(40);
    let mut sf = Arr::new(
        (0..n)
            .map(|_| {
                if r.one_in(6) {
                    r.special()
                } else {
                    r.f(-7e4, 7e4) * r.f(0.0, 1.0)
                }
            })
            .collect(),
        0.0f32,
    );
    let mut sh = Arr::new(
        (0..n)
            .map(|_| {
                if r.one_in(5) {
                    r.pick(&[
                        0x7c00u16, 0xfc00, 0x7e01, 0x7f80, 0xff81, 0x0001, 0x8000, 0x7bff,
                    ])
                } else {
                    r.u32() as u16
                }
            })
            .collect(),
        0u16,
    );
    let cf = f32::from_bits(CANARY);
    let mut df = Arr::new(vec![cf; n], cf);
    let mut dh = Arr::new(vec![0xA5A5u16; n], 0xA5A5u16);
    let mut alias = false;
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(6);
        what.push(m);
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                if r.one_in(2) {
                    sf.mode = mode;
                    sh.mode = mode;
                } else {
                    df.mode = mode;
                    dh.mode = mode;
                }
            }
            2 => n = r.size(n),
            3 => {
                let bad = r.pick(&[LSHK_STORAGE_BORROWED_F32, LSHK_STORAGE_I8, 5, u32::MAX]);
                match r.u(3) {
                    0 => from = bad,
                    1 => to = bad,
                    _ => {
                        (from, to) = r.pick(&[(f32_, f32_), (bf16, f16), (f16, bf16), (bf16, bf16)])
                    }
                }
            }
            4 => alias = true,
            _ if sf.len() > 0 => {
                let j = r.u(sf.len());
                sf.data_mut()[j] = r.special();
            }
            _ => {}
        }
    }
    let pair_ok = matches!((from, to), (1, 2) | (1, 3) | (2, 1) | (3, 1));
    if !pair_ok {
        v.err("not one of the four pairs");
    }
    let src_f32 = from == f32_;
    let dst_f32 = to == f32_;
    if pair_ok {
        let claim = Some(n as u128);
        if src_f32 {
            sf.need(claim, &mut v, || 1.5);
        } else {
            sh.need(claim, &mut v, || 0x3c00);
        }
        if dst_f32 {
            df.need(claim, &mut v, || cf);
        } else {
            dh.need(claim, &mut v, || 0xA5A5);
        }
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    // The destination placed over the source: refused when both hold
    // something (the source buffer holds n elements of at least 2 bytes).
    let src_ok = if src_f32 { sf.mode } else { sh.mode } == Mode::Ok;
    let dst_ok = if dst_f32 { df.mode } else { dh.mode } == Mode::Ok;
    let alias = alias && pair_ok && n > 0 && src_ok && dst_ok && v.expect_err.is_none();
    if alias {
        v.err("dst overlaps src");
    }
    c.desc = format!("convert {from} -> {to} n {n} alias {alias} muts {what:?}");
    let (sf0, sh0, df0, dh0) = (bits(&sf.v), sh.v.clone(), bits(&df.v), dh.v.clone());
    let sp: *const std::ffi::c_void = if src_f32 {
        sf.ptr().cast()
    } else {
        sh.ptr().cast()
    };
    let dp: *mut std::ffi::c_void = if alias {
        sp.cast_mut()
    } else if dst_f32 {
        df.mptr().cast()
    } else {
        dh.mptr().cast()
    };
    // SAFETY: src and dst hold n elements of their types (or the claim is
    // one the call must refuse before touching them).
    let st = c.call("lshk_convert", || unsafe {
        lshk_convert(from, sp, n, to, dp)
    });
    if bits(&sf.v) != sf0 || sh.v != sh0 {
        c.fail("lshk_convert changed its source".into());
    }
    if !c.judge("lshk_convert", st, &v) {
        if st != LSHK_STATUS_OK && (bits(&df.v) != df0 || dh.v != dh0) {
            c.fail(format!("lshk_convert failed with {st} but wrote dst"));
        }
        return;
    }
    if (dst_f32 && df.v[n].to_bits() != CANARY) || (!dst_f32 && dh.v[n] != 0xA5A5) {
        c.fail("lshk_convert wrote past n".into());
    }
    for j in 0..n {
        let good = match (from, to) {
            (1, 2) => {
                let x = sf.v[j];
                let got = dh.v[j];
                if x.is_nan() {
                    got & 0x7f80 == 0x7f80
                        && got & 0x7f != 0
                        && got >> 15 == (x.to_bits() >> 31) as u16
                } else {
                    let b = x.to_bits();
                    let want = ((b as u64 + 0x7fff + ((b >> 16) & 1) as u64) >> 16) as u16;
                    got == want
                }
            }
            (1, 3) => {
                let x = sf.v[j];
                let got = dh.v[j];
                if x.is_nan() {
                    got & 0x7c00 == 0x7c00
                        && got & 0x3ff != 0
                        && got >> 15 == (x.to_bits() >> 31) as u16
                } else {
                    got == half(x)
                }
            }
            (2, 1) => df.v[j].to_bits() == (sh.v[j] as u32) << 16,
            _ => {
                let want = f16_to_f64(sh.v[j]);
                let got = df.v[j];
                if want.is_nan() {
                    got.is_nan() && got.is_sign_negative() == (sh.v[j] >> 15 == 1)
                } else {
                    got as f64 == want && got.is_sign_negative() == (sh.v[j] >> 15 == 1)
                }
            }
        };
        if !good {
            c.fail(format!(
                "lshk_convert {from} -> {to}: element {j} ({:#x} / {:#06x}) gave {:#x} / {:#06x}",
                sf.v[j].to_bits(),
                sh.v[j],
                df.v[j].to_bits(),
                dh.v[j]
            ));
            return;
        }
    }
}

// ------------------------------------------------------------ top-k

pub(crate) fn fuzz_topk(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut nq = r.u(5);
    let o = csr(r, nq, 15);
    let total = *o.last().unwrap();
    let coarse = r.one_in(2);
    let mut scores = Arr::new(
        (0..total)
            .map(|_| {
                if coarse {
                    r.u(5) as f32
                } else {
                    r.f(-3.0, 3.0)
                }
            })
            .collect(),
        0.0f32,
    );
    let use_ids = !r.one_in(3);
    let mut ids = Arr::new((0..total).map(|_| r.u(50) as u32).collect(), 0u32);
    let mut offs = Arr::new(o, 0usize);
    let mut k = r.u(9) as u32;
    let mut oi = Arr::new(vec![CANARY; nq * k as usize], CANARY);
    let mut os = Arr::new(
        vec![f32::from_bits(CANARY); nq * k as usize],
        f32::from_bits(CANARY),
    );
    let mut alias = false;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                match r.u(5) {
                    0 => scores.mode = mode,
                    1 => offs.mode = mode,
                    2 => oi.mode = mode,
                    3 => os.mode = mode,
                    _ => {
                        if mode == Mode::Mis && use_ids {
                            ids.mode = mode
                        }
                    }
                }
            }
            2 => nq = r.size(nq),
            3 => k = r.pick(&[k.saturating_add(1), k.saturating_sub(1), 0, hv32, 1000]),
            4 => mutate_offsets(r, offs.data_mut()),
            5 if total > 0 => {
                let j = r.u(total);
                r.spoil(scores.data_mut(), j);
            }
            6 if total > 0 => {
                let j = r.u(total);
                ids.data_mut()[j] = r.pick(&[u32::MAX, 0, u32::MAX - 1]);
            }
            7 => alias = true,
            _ => {}
        }
    }
    let ototal = if offs.mode == Mode::Ok && offs.len() > nq {
        Some(offs.data()[nq] as u128)
    } else {
        None
    };
    offs.need(Some(nq as u128 + 1), &mut v, || 0);
    let tclaim = if offs.mode == Mode::Ok && offs.len() > nq {
        Some(offs.data()[nq] as u128)
    } else {
        ototal
    };
    scores.need(tclaim.or(Some(0)), &mut v, || 1.0);
    if use_ids {
        ids.need(tclaim.or(Some(0)), &mut v, || 7);
    }
    let kk = k as usize;
    oi.need(mul(nq, kk), &mut v, || CANARY);
    os.need(mul(nq, kk), &mut v, || f32::from_bits(CANARY));
    if v.skip {
        c.skipped += 1;
        return;
    }
    let total = offs.v[nq.min(offs.len() - 1)];
    if offs.mode == Mode::Ok && offs.len() > nq && !offsets_valid(&offs.data()[..nq + 1], total) {
        v.err("offsets are invalid");
    }
    // Aliasing an output onto the scores (both non-empty) must be refused.
    let alias = alias
        && nq.saturating_mul(kk) > 0
        && total > 0
        && scores.mode == Mode::Ok
        && os.mode == Mode::Ok;
    if alias {
        v.err("out_scores overlaps scores");
    }
    c.desc = format!("topk nq {nq} k {k} total {total} ids {use_ids} alias {alias} muts {what:?}");
    let (s0, i0, o0) = (bits(&scores.v), ids.v.clone(), offs.v.clone());
    let (oi_b, os_b) = (oi.v.clone(), bits(&os.v));
    let (sp, ip, op) = (
        scores.ptr(),
        if use_ids { ids.ptr() } else { null() },
        offs.ptr(),
    );
    let oip = oi.mptr();
    let osp = if alias {
        scores.v.as_mut_ptr()
    } else {
        os.mptr()
    };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_topk", || unsafe {
        lshk_topk(sp, ip, op, nq, k, oip, osp)
    });
    if alias {
        // The aliased scores were the output: compare them as outputs.
        if st == LSHK_STATUS_OK {
            c.fail("lshk_topk accepted out_scores overlapping scores".into());
        }
    }
    if bits(&scores.v) != s0 || ids.v != i0 || offs.v != o0 {
        c.fail("lshk_topk changed an input".into());
    }
    if !c.judge("lshk_topk", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if oi.v != oi_b || bits(&os.v) != os_b {
            c.fail(format!("lshk_topk failed with {st} but wrote an output"));
        }
        return;
    }
    let need = nq * kk;
    if oi.v[need] != CANARY || os.v[need].to_bits() != CANARY {
        c.fail("lshk_topk wrote past nq * k".into());
    }
    for qi in 0..nq {
        let (s, e) = (offs.v[qi], offs.v[qi + 1]);
        let mut cand: Vec<(f32, u32)> = (s..e)
            .filter(|&j| !scores.v[j].is_nan())
            .map(|j| (scores.v[j], if use_ids { ids.v[j] } else { (j - s) as u32 }))
            .collect();
        cand.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        for t in 0..kk {
            let (es, ei) = cand
                .get(t)
                .copied()
                .unwrap_or((f32::NEG_INFINITY, u32::MAX));
            let (gs, gi) = (os.v[qi * kk + t], oi.v[qi * kk + t]);
            // -0 and +0 tie (equal scores); with duplicate ids either may
            // come first, so scores compare as IEEE values.
            if gi != ei || gs != es {
                c.fail(format!(
                    "lshk_topk query {qi} rank {t}: got ({gs}, {gi}), reference ({es}, {ei})"
                ));
                return;
            }
        }
    }
}

// ------------------------------------------------------------ softmax

pub(crate) fn fuzz_softmax(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut nq = r.u(5);
    let o = csr(r, nq, 15);
    let total = *o.last().unwrap();
    let spread = r.pick(&[1.0f32, 30.0, 120.0]);
    let mut scores = Arr::new((0..total).map(|_| r.f(-spread, spread)).collect(), 0.0f32);
    let mut offs = Arr::new(o, 0usize);
    let in_place = r.one_in(4);
    let mut out = Arr::new(vec![f32::from_bits(CANARY); total], f32::from_bits(CANARY));
    let mut use_lse = !r.one_in(3);
    let mut lse = Arr::new(vec![f32::from_bits(CANARY); nq], f32::from_bits(CANARY));
    let mut shifted = false;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(8);
        what.push(m);
        #[allow(unused_variables)]
        let (hv, hv32) = (r.pick(&HUGE), r.pick(&HUGE32));
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                match r.u(4) {
                    0 => scores.mode = mode,
                    1 => offs.mode = mode,
                    2 => out.mode = mode,
                    _ => {
                        if mode == Mode::Mis {
                            use_lse = true;
                            lse.mode = mode
                        }
                    }
                }
            }
            2 => nq = r.size(nq),
            3 => mutate_offsets(r, offs.data_mut()),
            4 | 5 if total > 0 => {
                let j = r.u(total);
                r.spoil(scores.data_mut(), j);
            }
            6 => shifted = true,
            _ => use_lse = !use_lse,
        }
    }
    offs.need(Some(nq as u128 + 1), &mut v, || 0);
    let tclaim = if offs.mode == Mode::Ok && offs.len() > nq {
        offs.data()[nq] as u128
    } else {
        0
    };
    scores.need(Some(tclaim), &mut v, || 0.5);
    if !in_place {
        out.need(Some(tclaim), &mut v, || f32::from_bits(CANARY));
    }
    if use_lse {
        lse.need(Some(nq as u128), &mut v, || f32::from_bits(CANARY));
    }
    if v.skip {
        c.skipped += 1;
        return;
    }
    let total = offs.v[nq.min(offs.len() - 1)];
    if offs.mode == Mode::Ok && offs.len() > nq && !offsets_valid(&offs.data()[..nq + 1], total) {
        v.err("offsets are invalid");
    }
    // In place, `out` one element after `scores` is a partial overlap.
    let shifted = shifted && in_place && total > 1 && scores.mode == Mode::Ok;
    if shifted {
        v.err("out partially overlaps scores");
    }
    c.desc = format!("softmax nq {nq} total {total} in_place {in_place} shifted {shifted} lse {use_lse} muts {what:?}");
    let s0 = bits(&scores.v);
    let (o0, out_b, lse_b) = (offs.v.clone(), bits(&out.v), bits(&lse.v));
    let (sp, op) = (scores.ptr(), offs.ptr());
    let outp = if in_place {
        if shifted {
            scores.v.as_mut_ptr().wrapping_add(1)
        } else if scores.mode == Mode::Ok {
            scores.v.as_mut_ptr()
        } else {
            sp.cast_mut()
        }
    } else {
        out.mptr()
    };
    let lp = if use_lse { lse.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul (in place, `out` is `scores`).
    let st = c.call("lshk_softmax", || unsafe {
        lshk_softmax(sp, op, nq, outp, lp)
    });
    if offs.v != o0 || (!in_place && bits(&scores.v) != s0) {
        c.fail("lshk_softmax changed an input".into());
    }
    if !c.judge("lshk_softmax", st, &v) {
        if st == LSHK_STATUS_OK {
            return; // already reported
        }
        if bits(&out.v) != out_b || bits(&lse.v) != lse_b || (in_place && bits(&scores.v) != s0) {
            c.fail(format!("lshk_softmax failed with {st} but wrote an output"));
        }
        return;
    }
    let res: Vec<f32> = if in_place {
        scores.v.clone()
    } else {
        out.v.clone()
    };
    if res[total].to_bits() != (if in_place { s0[total] } else { CANARY }) {
        c.fail("lshk_softmax wrote past offsets[nq]".into());
    }
    if use_lse && lse.v[nq].to_bits() != CANARY {
        c.fail("lshk_softmax wrote past lse[nq]".into());
    }
    let x: Vec<f32> = s0.iter().map(|&b| f32::from_bits(b)).collect();
    for qi in 0..nq {
        let seg = &x[offs.v[qi]..offs.v[qi + 1]];
        let got = &res[offs.v[qi]..offs.v[qi + 1]];
        let (exp_p, exp_lse): (Vec<f64>, f64) = if seg.is_empty() {
            (vec![], f64::NEG_INFINITY)
        } else if seg.iter().any(|v| v.is_nan()) {
            (vec![f64::NAN; seg.len()], f64::NAN)
        } else {
            let m = seg.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            if m == f64::INFINITY {
                let cnt = seg.iter().filter(|&&v| v == f32::INFINITY).count() as f64;
                (
                    seg.iter()
                        .map(|&v| if v == f32::INFINITY { 1.0 / cnt } else { 0.0 })
                        .collect(),
                    f64::INFINITY,
                )
            } else if m == f64::NEG_INFINITY {
                (vec![f64::NAN; seg.len()], f64::NEG_INFINITY)
            } else {
                let sum: f64 = seg.iter().map(|&v| (v as f64 - m).exp()).sum();
                (
                    seg.iter().map(|&v| (v as f64 - m).exp() / sum).collect(),
                    m + sum.ln(),
                )
            }
        };
        let m = seg.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let mut maxd = 0f64;
        for (j, (&g, &e)) in got.iter().zip(&exp_p).enumerate() {
            let d = (seg[j] as f64 - m).abs();
            if d.is_finite() {
                maxd = maxd.max(d);
            }
            // An infinitely distant score has probability exactly 0.
            let tol = if d.is_finite() {
                (2.0 * d + 8.0) * 2f64.powi(-24) * e.abs() + 2f64.powi(-148)
            } else {
                0.0
            };
            let ok = if e.is_nan() {
                g.is_nan()
            } else if !m.is_finite() {
                (g as f64 - e).abs() <= e * 2f64.powi(-24) // 1/c rounded to f32
            } else {
                (g as f64 - e).abs() <= tol
            };
            if !ok {
                c.fail(format!("lshk_softmax query {qi} item {j}: {g:e}, reference {e:e}; segment {seg:?} got {got:?}"));
                return;
            }
        }
        if use_lse {
            let g = lse.v[qi] as f64;
            let tol = (2.0 * maxd + 8.0) * 2f64.powi(-24)
                + 2f64.powi(-23) * (exp_lse.abs() + (exp_lse - m).abs());
            let ok = if exp_lse.is_nan() {
                g.is_nan()
            } else if exp_lse.is_infinite() {
                g == exp_lse
            } else {
                (g - exp_lse).abs() <= tol
            };
            if !ok {
                c.fail(format!(
                    "lshk_softmax query {qi}: lse {g:e}, reference {exp_lse:e}"
                ));
                return;
            }
        }
    }
}

/// lshk_topk_merge: random shards (k_s 0..5, padding, NaN and tied scores,
/// first rows near the id limit), mutated pointers, reserved words and
/// sizes; a success must be the merge of the shards' entries by (score
/// descending, global id ascending), and a failure writes nothing.
pub(crate) fn fuzz_topk_merge(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let ns = r.u(4);
    let mut nq = r.u(4);
    let mut k = r.u(6);
    let mut ids: Vec<Vec<u32>> = Vec::new();
    let mut scs: Vec<Vec<f32>> = Vec::new();
    let mut sh: Vec<lshk_shard_topk> = Vec::new();
    for _ in 0..ns {
        let ks = r.u(5);
        ids.push(
            (0..nq * ks)
                .map(|_| {
                    if r.one_in(6) {
                        u32::MAX
                    } else {
                        r.u(20) as u32
                    }
                })
                .collect(),
        );
        scs.push(
            (0..nq * ks)
                .map(|_| match r.u(12) {
                    0 => f32::NAN,
                    1 => -0.0,
                    _ => r.u(6) as f32,
                })
                .collect(),
        );
        let first_row = if r.one_in(8) {
            u32::MAX - r.u(30) as u32
        } else {
            100 * r.u(5) as u32
        };
        sh.push(lshk_shard_topk {
            ids: null(),
            scores: null(),
            k: ks,
            first_row,
            reserved: 0,
        });
    }
    for s in 0..ns {
        sh[s].ids = ids[s].as_ptr();
        sh[s].scores = scs[s].as_ptr();
    }
    let (mut null_shards, mut null_oi, mut null_os) = (false, false, false);
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let m = r.u(7);
        what.push(m);
        match m {
            0 => null_shards = true,
            1 if ns > 0 => {
                let s = r.u(ns);
                if r.one_in(2) {
                    sh[s].ids = null()
                } else {
                    sh[s].scores = null()
                }
            }
            2 if ns > 0 => sh[r.u(ns)].reserved = r.pick(&[1, u32::MAX]),
            3 => null_oi = true,
            4 => null_os = true,
            5 => k = r.pick(&[0, k.saturating_add(1), usize::MAX]),
            6 => nq = r.pick(&[0, nq]),
            _ => {}
        }
    }
    // The expected verdict, in the entry point's order of checks.
    let shards_ptr = if null_shards && ns > 0 {
        null()
    } else {
        sh.as_ptr()
    };
    if null_shards && ns > 0 {
        v.err("shards NULL");
    }
    for s in &sh {
        if s.reserved != 0 {
            v.err("a reserved word not 0");
        }
        if nq * s.k > 0 && (s.ids.is_null() || s.scores.is_null()) {
            v.err("a shard's ids or scores NULL");
        }
    }
    let need = nq.checked_mul(k);
    match need {
        None => v.err("nq * k overflows"),
        Some(n) if n > 0 && (null_oi || null_os) => v.err("an output NULL"),
        _ => {}
    }
    for (s, p) in sh.iter().enumerate() {
        if p.ids.is_null() {
            continue;
        }
        if ids[s][..nq * p.k]
            .iter()
            .any(|&id| id != u32::MAX && id as u64 + p.first_row as u64 >= u32::MAX as u64)
        {
            v.err("a global id reaches UINT32_MAX");
        }
    }
    let n = need.unwrap_or(0).min(64);
    let mut oi = vec![CANARY; n + 1];
    let mut os = vec![f32::from_bits(CANARY); n + 1];
    c.desc = format!("topk_merge shards {ns} nq {nq} k {k} muts {what:?}");
    let (oip, osp) = (
        if null_oi { null_mut() } else { oi.as_mut_ptr() },
        if null_os { null_mut() } else { os.as_mut_ptr() },
    );
    if need.is_some_and(|n| n > 64) {
        // A huge k with valid pointers would be read as a huge buffer.
        c.skipped += 1;
        return;
    }
    // SAFETY: every pointer holds the counts the call is given, except the
    // NULLs and the mutated sizes the verdict expects to be refused first.
    let st = c.call("lshk_topk_merge", || unsafe {
        lshk_topk_merge(shards_ptr, ns, nq, k, oip, osp)
    });
    if !c.judge("lshk_topk_merge", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.iter().any(|&x| x != CANARY) || os.iter().any(|x| x.to_bits() != CANARY))
        {
            c.fail(format!(
                "lshk_topk_merge failed with {st} but wrote an output"
            ));
        }
        return;
    }
    if oi[n] != CANARY || os[n].to_bits() != CANARY {
        c.fail("lshk_topk_merge wrote past nq * k".into());
    }
    for qi in 0..nq {
        let mut all: Vec<(f32, u32)> = Vec::new();
        for (s, p) in sh.iter().enumerate() {
            for j in qi * p.k..(qi + 1) * p.k {
                let (id, sc) = (ids[s][j], scs[s][j]);
                if id != u32::MAX && !sc.is_nan() {
                    all.push((sc, p.first_row + id));
                }
            }
        }
        all.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        for t in 0..k {
            let (wi, ws) = all.get(t).copied().unwrap_or((f32::NEG_INFINITY, u32::MAX));
            let (gi, gs) = (oi[qi * k + t], os[qi * k + t]);
            if gi != ws || (gs != wi) {
                c.fail(format!(
                    "lshk_topk_merge query {qi} rank {t}: ({gi}, {gs}) instead of ({ws}, {wi})"
                ));
                return;
            }
        }
    }
}
