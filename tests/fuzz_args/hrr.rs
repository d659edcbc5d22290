//! HRR label vectors.

use super::*;

/// A live `lshk_hrr` handle and its Rust mirror (same d; every tier gives
/// the same bits, so the mirror is the reference whatever the tier).
pub(crate) struct HrrX {
    pub(crate) h: *mut lshk_hrr,
    pub(crate) d: usize,
    pub(crate) mirror: Hrr,
    pub(crate) scratch: HrrScratch,
}

impl Drop for HrrX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_hrr_new[_isa].
        unsafe { lshk_hrr_free(self.h) };
    }
}

/// Handles of d = 1, 6, 17 (Rader/Bluestein-free odd), 64, one pinned to
/// each supported tier in turn, and one freed handle (last, `h` only).
pub(crate) fn build_hrrs() -> (Vec<HrrX>, *mut lshk_hrr) {
    let mut v = Vec::new();
    for (i, d) in [1usize, 6, 17, 64, 97].into_iter().enumerate() {
        let mut h = null_mut();
        let tiers: Vec<Isa> = Isa::supported().collect();
        let t = tiers[i % tiers.len()];
        let st = if i % 2 == 0 {
            lshk_hrr_new(d, &mut h)
        } else {
            lshk_hrr_new_isa(d, t as u32, &mut h)
        };
        assert_eq!(st, LSHK_STATUS_OK);
        let mirror = Hrr::new(d).unwrap();
        let scratch = mirror.scratch().unwrap();
        v.push(HrrX {
            h,
            d,
            mirror,
            scratch,
        });
    }
    let mut dead = null_mut();
    // SAFETY: writable out; the handle is freed at once (a dead handle).
    unsafe {
        assert_eq!(lshk_hrr_new(8, &mut dead), LSHK_STATUS_OK);
        assert_eq!(lshk_hrr_free(dead), LSHK_STATUS_OK);
    }
    (v, dead)
}

pub(crate) fn fuzz_hrr(c: &mut Ctx, hs: &mut [HrrX], dead: *mut lshk_hrr) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let op = r.u(4); // 0 bind, 1 unbind, 2 project, 3 class_vectors
    if op == 3 {
        return fuzz_hrr_class(c);
    }
    let hi = r.u(hs.len());
    let d = hs[hi].d;
    let mut n = r.u(5);
    let mut key_rows = if r.one_in(2) { 1 } else { n };
    let mut inverse = r.u(2) as u32;
    let mk = |r: &mut R, len: usize| -> Vec<f32> { (0..len).map(|_| r.f(-1.0, 1.0)).collect() };
    let mut x = Arr::new(mk(r, key_rows * d), 0.25f32);
    let mut y = Arr::new(mk(r, n * d), 0.5f32);
    let mut out = Arr::new(vec![f32::from_bits(CANARY); n * d], f32::from_bits(CANARY));
    let mut handle = hs[hi].h;
    let mut overlap = false;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(9);
        what.push(m);
        match m {
            0 | 1 => {
                let mode = if m == 0 { Mode::Null } else { Mode::Mis };
                match r.u(3) {
                    0 => x.mode = mode,
                    1 => y.mode = mode,
                    _ => out.mode = mode,
                }
            }
            2 => n = r.size(n),
            3 => key_rows = r.size(key_rows),
            4 if !x.data().is_empty() => {
                let j = r.u(x.len());
                r.spoil(x.data_mut(), j);
            }
            5 if !y.data().is_empty() => {
                let j = r.u(y.len());
                r.spoil(y.data_mut(), j);
            }
            6 => {
                handle = match r.u(4) {
                    0 => null_mut(),
                    1 => dead,
                    2 => handle.cast::<u8>().wrapping_add(1).cast(),
                    _ => hs[(hi + 1) % hs.len()].h, // another live handle: other d
                };
            }
            7 => inverse = r.pick(&[2u32, 3, u32::MAX]),
            _ => overlap = true,
        }
    }
    // Another live handle has another d: the call is judged with that d.
    let hj = hs.iter().position(|e| e.h == handle);
    if hj.is_none() {
        v.err("bad handle");
    }
    let d = hj.map_or(d, |j| hs[j].d);
    if op == 2 {
        key_rows = 0; // project has no key
    }
    if op == 1 && inverse > 1 {
        v.err("bad inverse");
    }
    if op != 2 && key_rows != 1 && key_rows != n {
        v.err("key_rows is neither 1 nor n");
    }
    if op == 2 {
        // project: x is the input, out the output; y unused
        x.need(mul(n, d), &mut v, || 0.25);
    } else {
        x.need(mul(key_rows, d), &mut v, || 0.25);
        y.need(mul(n, d), &mut v, || 0.5);
    }
    out.need(mul(n, d), &mut v, || f32::from_bits(CANARY));
    if v.skip {
        c.skipped += 1;
        return;
    }
    let inp = if op == 2 { &x } else { &y };
    let overlap = overlap
        && inp.mode == Mode::Ok
        && out.mode == Mode::Ok
        && n.checked_mul(d).is_some_and(|t| t > 0)
        && v.expect_err.is_none();
    if overlap {
        v.err("out overlaps an input");
    }
    if v.expect_err.is_none() {
        let xl = if op == 2 { n * d } else { key_rows * d };
        let nonfinite = view(&x, xl).iter().any(|f| !f.is_finite())
            || (op != 2 && view(&y, n * d).iter().any(|f| !f.is_finite()));
        if nonfinite && n > 0 {
            v.err("NaN or infinity in an input");
        }
    }
    c.desc = format!("hrr op {op} d {d} n {n} key_rows {key_rows} inverse {inverse} overlap {overlap} muts {what:?}");
    let (x0, y0, out0) = (bits(&x.v), bits(&y.v), bits(&out.v));
    let (xp, yp) = (x.ptr(), y.ptr());
    let op_ = if overlap {
        if op == 2 {
            x.v.as_mut_ptr()
        } else {
            y.v.as_mut_ptr()
        }
    } else {
        out.mptr()
    };
    let name = ["lshk_hrr_bind", "lshk_hrr_unbind", "lshk_hrr_project"][op];
    // SAFETY: every buffer holds what its claimed length says (Arr::need)
    // or the call must refuse it before reading; the handle is live or one
    // the call must refuse.
    let st = c.call(name, || unsafe {
        match op {
            0 => lshk_hrr_bind(handle, xp, key_rows, yp, n, op_),
            1 => lshk_hrr_unbind(handle, inverse, xp, key_rows, yp, n, op_),
            _ => lshk_hrr_project(handle, xp, n, op_),
        }
    });
    if bits(&x.v) != x0 || bits(&y.v) != y0 {
        c.fail(format!("{name} changed an input"));
    }
    if !c.judge(name, st, &v) {
        if st != LSHK_STATUS_OK && bits(&out.v) != out0 {
            c.fail(format!("{name} failed with {st} but wrote the output"));
        }
        return;
    }
    if out.v[n * d].to_bits() != CANARY {
        c.fail(format!("{name} wrote past n * d"));
    }
    let Some(j) = hj else {
        c.fail(format!("{name} accepted a bad handle"));
        return;
    };
    let e = &mut hs[j];
    let mut want = vec![0.0f32; n * d];
    let res = match op {
        0 => e.mirror.bind(
            view(&x, key_rows * d),
            view(&y, n * d),
            &mut want,
            &mut e.scratch,
        ),
        1 => e.mirror.unbind(
            Inverse::from_u32(inverse).unwrap(),
            view(&x, key_rows * d),
            view(&y, n * d),
            &mut want,
            &mut e.scratch,
        ),
        _ => e.mirror.project(view(&x, n * d), &mut want, &mut e.scratch),
    };
    if n > 0 {
        if let Err(err) = res {
            c.fail(format!(
                "{name}: OK through C, the Rust API refused: {}",
                err.message
            ));
            return;
        }
    }
    if bits(&want) != bits(&out.v[..n * d]) {
        c.fail(format!("{name}: the output differs from the Rust API's"));
    }
}

pub(crate) fn fuzz_hrr_class(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut d = 1 + r.u(40);
    let mut m = r.u(6);
    let mut first = r.0.next_u64() >> r.u(64);
    let seed = r.0.next_u64();
    let threads = r.pick(&[0u32, 1, 2, 7]);
    let mut out = Arr::new(vec![f32::from_bits(CANARY); m * d], f32::from_bits(CANARY));
    let mut what = Vec::new();
    for _ in 0..r.u(3) {
        let k = r.u(5);
        what.push(k);
        match k {
            0 => out.mode = if r.one_in(2) { Mode::Null } else { Mode::Mis },
            1 => m = r.size(m),
            2 => d = r.pick(&[0usize, (1 << 24) + 1, usize::MAX]),
            3 => first = u64::MAX - r.u(4) as u64,
            _ => {}
        }
    }
    if d == 0 || d > 1 << 24 {
        v.err("d outside 1..=2^24");
    }
    if first.checked_add(m as u64).is_none() {
        v.err("first + m overflows");
    }
    let claim = if v.expect_err.is_some() {
        Some(0)
    } else {
        mul(m, d)
    };
    out.need(claim, &mut v, || f32::from_bits(CANARY));
    if v.skip || (v.expect_err.is_none() && m * d > 1 << 16) {
        c.skipped += 1;
        return;
    }
    c.desc = format!("hrr class_vectors d {d} m {m} first {first} threads {threads} muts {what:?}");
    let out0 = bits(&out.v);
    let p = out.mptr();
    // SAFETY: out holds m * d floats (Arr::need) or the call must refuse.
    let st = c.call("lshk_hrr_class_vectors", || unsafe {
        lshk_hrr_class_vectors(seed, d, first, m, threads, p)
    });
    if !c.judge("lshk_hrr_class_vectors", st, &v) {
        if st != LSHK_STATUS_OK && bits(&out.v) != out0 {
            c.fail(format!(
                "lshk_hrr_class_vectors failed with {st} but wrote the output"
            ));
        }
        return;
    }
    if out.v[m * d].to_bits() != CANARY {
        c.fail("lshk_hrr_class_vectors wrote past m * d".into());
    }
    let mut want = vec![0.0f32; m * d];
    if m > 0 {
        lshk::hrr::class_vectors(seed, d, first, &mut want, 1).unwrap();
    }
    if bits(&want) != bits(&out.v[..m * d]) {
        c.fail("lshk_hrr_class_vectors differs from the Rust API".into());
    }
}
