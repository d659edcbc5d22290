//! AFL++ target: the gather / matmul / top-k / softmax argument space of
//! the C ABI, decoded from the input bytes. Byte 0 picks the function;
//! later bytes give shapes, strides, ids, offsets, parameters, tiers and
//! data (NaN, infinities, -0 and subnormals included), and may perturb a
//! declared size (off by one, zero, or impossibly huge). Buffers always
//! hold what the declared sizes claim (sizes claiming more than
//! isize::MAX bytes are passed with small buffers: the library must refuse
//! them; claims between 2^22 elements and that are skipped), so any crash
//! is a library bug. Oracle: no LSHK_STATUS_PANIC, nothing written on
//! error, and matmul results within the documented bound of an f64
//! reference; a violation aborts (an AFL++ crash).

use std::ptr::{null, null_mut};

use lshk::ffi::matmul::*;
use lshk::ffi::tables::*;
use lshk::ffi::{LSHK_STATUS_OK, LSHK_STATUS_PANIC};

const CAP: u128 = 1 << 22;

struct In<'a> {
    d: &'a [u8],
    i: usize,
}

impl In<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.d.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        b
    }
    fn small(&mut self, n: usize) -> usize {
        self.byte() as usize % (n + 1)
    }
    fn f(&mut self) -> f32 {
        match self.byte() {
            250 => f32::NAN,
            251 => f32::INFINITY,
            252 => f32::NEG_INFINITY,
            253 => -0.0,
            254 => f32::from_bits(1),
            255 => 1e17,
            b => (b as f32 - 125.0) / 32.0,
        }
    }
    /// A declared size: usually `v`, sometimes off by one, zero or huge.
    fn size(&mut self, v: usize) -> usize {
        match self.byte() {
            0..=199 => v,
            200..=214 => v + 1,
            215..=229 => v.saturating_sub(1),
            230..=239 => 0,
            240..=245 => usize::MAX - (self.byte() as usize),
            _ => (1usize << 61) + 1,
        }
    }
    fn tier(&mut self) -> Option<u32> {
        match self.byte() {
            0..=127 => None,
            b => Some((b as u32 - 128) % 6),
        }
    }
}

/// Claim check: Some(n) allocates n elements (plus 1 slack), None skips
/// the call, Err(()) means "impossible: call with a 1-element buffer and
/// expect a refusal".
enum Claim {
    Fits(usize),
    Impossible,
    Skip,
}
fn claim(c: u128, size: usize) -> Claim {
    if c.saturating_mul(size as u128) > isize::MAX as u128 {
        Claim::Impossible
    } else if c > CAP {
        Claim::Skip
    } else {
        Claim::Fits(c as usize)
    }
}

fn alloc<T: Copy>(c: u128, fill: T, impossible: &mut bool) -> Option<Vec<T>> {
    match claim(c, std::mem::size_of::<T>()) {
        Claim::Fits(n) => Some(vec![fill; n + 1]),
        Claim::Impossible => {
            *impossible = true;
            Some(vec![fill; 1])
        }
        Claim::Skip => None,
    }
}

fn strided(n: usize, dim: usize, stride: usize) -> u128 {
    if n == 0 {
        0
    } else {
        (n as u128 - 1) * stride as u128 + dim as u128
    }
}

fn die(why: &str) -> ! {
    eprintln!("lshk-afl args: {why}");
    std::process::abort();
}

fn check(st: u32, impossible: bool) {
    if st == LSHK_STATUS_PANIC {
        die("LSHK_STATUS_PANIC");
    }
    if impossible && st == LSHK_STATUS_OK {
        die("OK for a size no buffer can have");
    }
}

fn half_to_f64(h: u16) -> f64 {
    let s = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    match e {
        0 => s * m * 2f64.powi(-24),
        31 if m == 0.0 => s * f64::INFINITY,
        31 => f64::NAN,
        _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

fn matmul(inp: &mut In, dt: u8) -> Option<()> {
    let isa = inp.tier();
    let rows = 1 + inp.small(40);
    let dim = 1 + inp.small(40);
    let w_stride = dim + inp.small(3);
    let nq = inp.small(4);
    let q_stride = dim + inp.small(2);
    let mut offs = vec![0usize];
    let mut ids = Vec::new();
    for _ in 0..nq {
        for _ in 0..inp.small(8) {
            ids.push((inp.byte() as usize % (rows + 1)) as u32);
        }
        offs.push(ids.len());
    }
    let use_bias = inp.byte() & 1 == 1;
    // Declared sizes (perturbed).
    let (rows_d, nq_d, out_len_d) = (inp.size(rows), inp.size(nq), inp.size(ids.len()));
    let mut imp = false;
    let wl = strided(rows_d, dim, w_stride);
    let mut wf: Vec<f32> = alloc(wl, 0.0, &mut imp)?;
    wf.iter_mut().for_each(|x| *x = inp.f());
    let mut wh: Vec<u16> = alloc(wl, 0, &mut imp)?;
    wh.iter_mut()
        .for_each(|x| *x = (inp.byte() as u16) << 8 | inp.byte() as u16);
    let mut wi: Vec<i8> = alloc(wl, 0, &mut imp)?;
    wi.iter_mut().for_each(|x| *x = inp.byte() as i8);
    let mut sc: Vec<f32> = alloc(rows_d as u128, 0.0, &mut imp)?;
    sc.iter_mut().for_each(|x| *x = inp.f() / 64.0);
    let mut bias: Vec<f32> = alloc(rows_d as u128, 0.0, &mut imp)?;
    bias.iter_mut().for_each(|x| *x = inp.f());
    let mut q: Vec<f32> = alloc(strided(nq_d, dim, q_stride), 0.0, &mut imp)?;
    q.iter_mut().for_each(|x| *x = inp.f());
    let mut o: Vec<usize> = alloc(nq_d as u128 + 1, 0, &mut imp)?;
    for (j, v) in o.iter_mut().enumerate() {
        *v = offs.get(j).copied().unwrap_or(ids.len());
    }
    let mut idv: Vec<u32> = alloc(out_len_d as u128, 0, &mut imp)?;
    for (j, v) in idv.iter_mut().enumerate() {
        *v = ids.get(j).copied().unwrap_or(0);
    }
    let canary = f32::from_bits(0xA5A5_A5A5);
    let mut out: Vec<f32> = alloc(out_len_d as u128, canary, &mut imp)?;
    let bp = if use_bias { bias.as_ptr() } else { null() };
    let (r, d, ws, qs) = (rows_d, dim, w_stride, q_stride);
    let (qp, ip, op, outp) = (q.as_ptr(), idv.as_ptr(), o.as_ptr(), out.as_mut_ptr());
    // SAFETY: every buffer holds what the declared sizes claim (or the
    // claim is impossible, which the library must refuse before reading).
    let st = unsafe {
        match (dt, isa) {
            (0, None) => lshk_gathered_matmul_f32(
                wf.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (0, Some(t)) => lshk_gathered_matmul_f32_isa(
                t,
                wf.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (1, None) => lshk_gathered_matmul_bf16(
                wh.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (1, Some(t)) => lshk_gathered_matmul_bf16_isa(
                t,
                wh.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (2, None) => lshk_gathered_matmul_f16(
                wh.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (2, Some(t)) => lshk_gathered_matmul_f16_isa(
                t,
                wh.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (_, None) => lshk_gathered_matmul_i8(
                wi.as_ptr(),
                sc.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
            (_, Some(t)) => lshk_gathered_matmul_i8_isa(
                t,
                wi.as_ptr(),
                sc.as_ptr(),
                r,
                d,
                ws,
                bp,
                qp,
                nq_d,
                qs,
                ip,
                op,
                outp,
                out_len_d,
            ),
        }
    };
    check(st, imp);
    if st != LSHK_STATUS_OK {
        if out.iter().any(|x| x.to_bits() != canary.to_bits()) {
            die("an output was written on error, or an OK result is out of range");
        }
        return Some(());
    }
    // Reference within gamma(dim + 2) * (sum |w q| + |b|).
    let u = 2f64.powi(-24);
    let gamma = (d + 2) as f64 * u / (1.0 - (d + 2) as f64 * u);
    for qi in 0..nq_d {
        for j in o[qi]..o[qi + 1] {
            let id = idv[j] as usize;
            let (mut s, mut a) = (0f64, 0f64);
            for t in 0..d {
                let wv = match dt {
                    0 => wf[id * ws + t] as f64,
                    1 => f32::from_bits((wh[id * ws + t] as u32) << 16) as f64,
                    2 => half_to_f64(wh[id * ws + t]),
                    _ => wi[id * ws + t] as f64,
                };
                let p = wv * q[qi * qs + t] as f64;
                s += p;
                a += p.abs();
            }
            if dt >= 3 {
                s *= sc[id] as f64;
                a *= (sc[id] as f64).abs();
            }
            if use_bias {
                s += bias[id] as f64;
                a += (bias[id] as f64).abs();
            }
            let g = out[j] as f64;
            let ok = if s.is_nan() {
                g.is_nan()
            } else if s.is_infinite() {
                g == s
            } else if a > 1e36 {
                true // products near the f32 range may overflow in f32 only
            } else {
                (g - s).abs() <= gamma * a + (d + 2) as f64 * 2f64.powi(-149)
            };
            if !ok {
                die("matmul result outside the documented bound");
            }
        }
    }
    Some(())
}

fn topk_softmax(inp: &mut In, which: u8) -> Option<()> {
    let nq = inp.small(4);
    let mut offs = vec![0usize];
    for _ in 0..nq {
        offs.push(offs.last().unwrap() + inp.small(10));
    }
    if inp.byte() > 230 {
        // Break the offsets.
        let j = inp.small(nq);
        offs[j] = offs[j].wrapping_add(inp.byte() as usize).wrapping_sub(128);
    }
    let nq_d = inp.size(nq);
    let mut imp = false;
    let mut o: Vec<usize> = alloc(nq_d as u128 + 1, 0, &mut imp)?;
    for (j, v) in o.iter_mut().enumerate() {
        *v = offs.get(j).copied().unwrap_or(*offs.last().unwrap());
    }
    let total = if o.len() > nq_d { o[nq_d] } else { 0 };
    let mut s: Vec<f32> = alloc(total as u128, 0.0, &mut imp)?;
    s.iter_mut().for_each(|x| *x = inp.f());
    let canary = 0xA5A5_A5A5u32;
    if which == 4 {
        let k = inp.small(9) as u32;
        let ids: Vec<u32> = (0..s.len()).map(|_| inp.small(20) as u32).collect();
        let use_ids = inp.byte() & 1 == 1;
        let mut oi: Vec<u32> = alloc(nq_d as u128 * k as u128, canary, &mut imp)?;
        let mut os: Vec<f32> = alloc(nq_d as u128 * k as u128, f32::from_bits(canary), &mut imp)?;
        // SAFETY: as in matmul.
        let st = unsafe {
            lshk_topk(
                s.as_ptr(),
                if use_ids { ids.as_ptr() } else { null() },
                o.as_ptr(),
                nq_d,
                k,
                oi.as_mut_ptr(),
                os.as_mut_ptr(),
            )
        };
        check(st, imp);
        if st != LSHK_STATUS_OK
            && (oi.iter().any(|&x| x != canary) || os.iter().any(|x| x.to_bits() != canary))
        {
            die("an output was written on error, or an OK result is out of range");
        }
    } else {
        let in_place = inp.byte() & 1 == 1;
        let mut out: Vec<f32> = alloc(total as u128, f32::from_bits(canary), &mut imp)?;
        let mut lse: Vec<f32> = alloc(nq_d as u128, f32::from_bits(canary), &mut imp)?;
        let before = s.clone();
        let outp = if in_place {
            s.as_mut_ptr()
        } else {
            out.as_mut_ptr()
        };
        // SAFETY: as in matmul (in place, out is scores).
        let st = unsafe { lshk_softmax(s.as_ptr(), o.as_ptr(), nq_d, outp, lse.as_mut_ptr()) };
        check(st, imp);
        if st != LSHK_STATUS_OK
            && (out.iter().any(|x| x.to_bits() != canary)
                || lse.iter().any(|x| x.to_bits() != canary)
                || s.iter()
                    .zip(&before)
                    .any(|(a, b)| a.to_bits() != b.to_bits()))
        {
            die("an output was written on error, or an OK result is out of range");
        }
    }
    Some(())
}

fn gather(inp: &mut In) -> Option<()> {
    let n = 1 + inp.small(100);
    let l = 1 + inp.small(5);
    let rb = 1 + inp.small(10) as u32;
    let cap = inp.small(3) as u32;
    let codes: Vec<u32> = (0..n * l).map(|_| inp.byte() as u32 % 32).collect();
    let mut t = null_mut();
    // SAFETY: n*L codes; writable out.
    let st = unsafe { lshk_tables_build(codes.as_ptr(), n, l as u32, rb, cap, 7, 1, &mut t) };
    check(st, false);
    if st != LSHK_STATUS_OK {
        die("a valid lshk_tables_build failed");
    }
    let isa = inp.tier();
    let q = inp.small(4);
    let mut p = lshk_gather_params_default();
    p.min_count = inp.small(3) as u32;
    p.max_candidates = inp.small(20) as u32;
    if inp.byte() > 180 {
        p.probes = inp.small(5) as u32;
        p.bits_per_table = inp.small(6) as u32;
    }
    if inp.byte() > 245 {
        p.struct_size = inp.small(24) as u32;
    }
    let q_d = inp.size(q);
    let mut imp = false;
    let mut qc: Vec<u32> = alloc(q_d as u128 * l as u128, 0, &mut imp)?;
    qc.iter_mut().for_each(|x| *x = inp.byte() as u32 % 40);
    let proj_len = inp.size(q * p.bits_per_table as usize * l);
    let mut proj: Vec<f32> = alloc(proj_len as u128, 0.0, &mut imp)?;
    proj.iter_mut().for_each(|x| *x = inp.f());
    let forced = inp.byte() & 1 == 1;
    // Forced ids are passed only when `forced`: only then do their claims
    // count.
    let mut fimp = false;
    let mut fo: Vec<usize> = alloc(q_d as u128 + 1, 0, &mut fimp)?;
    let mut acc = 0usize;
    for v in fo.iter_mut().skip(1) {
        acc += inp.small(3);
        *v = acc;
    }
    let fi_len = inp.size(acc);
    let mut fi: Vec<u32> = alloc(fi_len as u128, 0, &mut fimp)?;
    imp |= forced && fimp;
    fi.iter_mut()
        .for_each(|x| *x = (inp.byte() as usize % (n + 1)) as u32);
    let ids_len = inp.size(q * n + acc);
    let canary = 0xA5A5_A5A5u32;
    let mut ids: Vec<u32> = alloc(ids_len as u128, canary, &mut imp)?;
    let mut cnt: Vec<u32> = alloc(ids_len as u128, canary, &mut imp)?;
    let mut offs: Vec<usize> = alloc(q_d as u128 + 1, usize::MAX, &mut imp)?;
    let mut needed = usize::MAX;
    // SAFETY: as in matmul.
    let st = unsafe {
        let (fop, fip, fl) = if forced {
            (fo.as_ptr(), fi.as_ptr(), fi_len)
        } else {
            (null(), null(), 0)
        };
        match isa {
            None => lshk_tables_gather(
                t,
                qc.as_ptr(),
                q_d,
                &p,
                proj.as_ptr(),
                proj_len,
                fop,
                fip,
                fl,
                ids.as_mut_ptr(),
                ids_len,
                offs.as_mut_ptr(),
                cnt.as_mut_ptr(),
                &mut needed,
            ),
            Some(i) => lshk_tables_gather_isa(
                i,
                t,
                qc.as_ptr(),
                q_d,
                &p,
                proj.as_ptr(),
                proj_len,
                fop,
                fip,
                fl,
                ids.as_mut_ptr(),
                ids_len,
                offs.as_mut_ptr(),
                cnt.as_mut_ptr(),
                &mut needed,
            ),
        }
    };
    check(st, imp);
    if st != LSHK_STATUS_OK
        && (ids.iter().chain(&cnt).any(|&x| x != canary) || offs.iter().any(|&x| x != usize::MAX))
    {
        die("an output was written on error, or an OK result is out of range");
    }
    if st == LSHK_STATUS_OK
        && (ids[..needed].iter().any(|&i| i as usize >= n) || offs[q_d] != needed)
    {
        die("an output was written on error, or an OK result is out of range");
    }
    // SAFETY: live handle, freed once.
    unsafe { lshk_tables_free(t) };
    Some(())
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let mut inp = In { d: data, i: 0 };
        let sel = inp.byte() % 8;
        let _ = match sel {
            0..=3 => matmul(&mut inp, sel),
            4 | 5 => topk_softmax(&mut inp, sel),
            _ => gather(&mut inp),
        };
    });
}
