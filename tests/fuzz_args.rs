//! Seeded mutation fuzzing of the gather / matmul / training / HRR / IUL argument space through
//! the C ABI (issue 8, item 2). Every call goes through the
//! `pub extern "C"` functions of `lshk::ffi` exactly as a C caller makes
//! it: raw pointers, sizes, strides, ids, k, enum values and parameter
//! structs. Each execution starts from a valid call and mutates one to
//! three arguments: NULL or misaligned pointers, sizes and strides off by
//! one, zero or huge (so that products overflow), ids at and beyond the
//! number of rows, bad CSR offsets, bad enum / ISA values, `struct_size`
//! too small or larger than known, freed, foreign and borrowed handles,
//! NaN / infinity / -0 / subnormal data.
//!
//! The test stays inside the documented memory contract of the caller:
//! whenever a mutated size claims more memory than the buffer holds, the
//! buffer is grown (up to 2^22 elements) or, when the claim exceeds what
//! any process could own (`> isize::MAX` bytes, or the product
//! overflows), the call is made with the small buffer and MUST fail: the
//! library cannot have such memory to read. Claims in between are skipped
//! (counted). Every buffer has one element of slack after its claimed
//! length, which must never be written.
//!
//! Oracle, per execution:
//! * no crash, no panic (`LSHK_STATUS_PANIC` is a failure), no hang (a
//!   watchdog aborts after 120 s without progress), every call < 10 s;
//! * mutations that make a call invalid by the documented rules (NULL with
//!   a nonzero length, misaligned pointers, impossible sizes, bad enum
//!   values, struct_size too small, dead or foreign handles, ids >= rows,
//!   bad offsets, NaN projections, buffers one element short) must give a
//!   non-OK status;
//! * non-OK: a message starting with the function's name is set, and no
//!   output byte changed (canaries; gather may write `*needed` on
//!   BUFFER_TOO_SMALL, as documented); objects are unchanged
//!   (update / add_labels);
//! * OK: results equal an independent reference computed here (ids, CSR
//!   offsets, counts exact; matmul within the documented bound
//!   `gamma(dim+2) * (sum|w q| + |bias|)` plus `(dim+2) * 2^-149` for
//!   underflow, NaN/inf classes equal; softmax within
//!   `(2|x-m| + 8) * 2^-24` relative; top-k bit-exact), or, where the
//!   reference is the safe Rust API (multi-probe gather, index query,
//!   label-aware tables, IVF build and query), equal to it bit for bit;
//!   a full IVF search (every list, every candidate re-ranked) is also
//!   the brute-force top-k up to ties within the f32 bound; inputs are
//!   unchanged and no byte after the documented output length is written.
//!
//! `LSHK_FUZZ_ITERS` sets the number of executions (default 50,000,
//! ~15 s in the debug profile on the 2-core CI machine);
//! `LSHK_FUZZ_SEED` the seed (default 0x5eed_a695). Run long with e.g.
//! `LSHK_FUZZ_ITERS=2000000 LSHK_FUZZ_SEED=$RANDOM cargo test --release
//! --test fuzz_args -- --nocapture`. A failure prints the seed and the
//! execution number; `LSHK_FUZZ_TRACE=1` prints every execution.

#![allow(clippy::too_many_arguments)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_char;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;

use lshk::ffi::graph::*;
use lshk::ffi::hrr::*;
use lshk::ffi::index::*;
use lshk::ffi::iul::*;
use lshk::ffi::ivf::*;
use lshk::ffi::labels::*;
use lshk::ffi::matmul::*;
use lshk::ffi::tables::*;
use lshk::ffi::train::*;
use lshk::ffi::*;
use lshk::hrr::{Hrr, Inverse, Scratch as HrrScratch};
use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::isa::Isa;
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams, SearchStats};
use lshk::labels::{LabelParams, LabelPolicy};
use lshk::rng::SplitMix64;
use lshk::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};

// ------------------------------------------------------------ infrastructure

const CAP: u128 = 1 << 22;
const HUGE: [usize; 7] = [
    usize::MAX,
    usize::MAX - 1,
    1 << 63,
    1 << 62,
    (1 << 61) + 1,
    isize::MAX as usize,
    (isize::MAX as usize) / 4 + 1,
];
const HUGE32: [u32; 4] = [u32::MAX, u32::MAX - 1, 1 << 31, 1 << 24];
const CANARY: u32 = 0xA5A5_A5A5;

struct R(SplitMix64);
impl R {
    fn u(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.u(n) == 0
    }
    fn f(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.0.next_f64_open() as f32
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.u(v.len())]
    }
    fn u32(&mut self) -> u32 {
        self.0.next_u64() as u32
    }
    /// A size mutated: off by one either way, zero, or huge.
    fn size(&mut self, v: usize) -> usize {
        match self.u(5) {
            0 => v.wrapping_add(1),
            1 => v.saturating_sub(1),
            2 => 0,
            3 => self.pick(&HUGE),
            _ => v.saturating_add(1 + self.u(8)),
        }
    }
    fn special(&mut self) -> f32 {
        self.pick(&[
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e17,
            -1e17,
            f32::MIN_POSITIVE / 8.0,
            f32::from_bits(1),
        ])
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Ok,
    Null,
    Mis,
}

/// A caller's buffer: `len()` usable elements plus one slack element.
#[derive(Clone)]
struct Arr<T: Copy> {
    v: Vec<T>,
    mode: Mode,
    slack: T,
}

impl<T: Copy> Arr<T> {
    fn new(mut data: Vec<T>, slack: T) -> Self {
        data.push(slack);
        Arr {
            v: data,
            mode: Mode::Ok,
            slack,
        }
    }
    fn len(&self) -> usize {
        self.v.len() - 1
    }
    fn data(&self) -> &[T] {
        &self.v[..self.len()]
    }
    fn data_mut(&mut self) -> &mut [T] {
        let n = self.len();
        &mut self.v[..n]
    }
    fn ptr(&self) -> *const T {
        match self.mode {
            Mode::Ok => self.v.as_ptr(),
            Mode::Null => null(),
            Mode::Mis => self.v.as_ptr().cast::<u8>().wrapping_add(1).cast(),
        }
    }
    fn mptr(&mut self) -> *mut T {
        match self.mode {
            Mode::Ok => self.v.as_mut_ptr(),
            Mode::Null => null_mut(),
            Mode::Mis => self.v.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
        }
    }
    fn shrink_to(&mut self, n: usize) {
        self.v.truncate(n);
        self.v.push(self.slack);
    }
    /// Makes the buffer honour a claimed element count (see module docs).
    fn need(&mut self, claim: Option<u128>, v: &mut Verdict, fill: impl FnMut() -> T) {
        match self.mode {
            Mode::Null => {
                if claim != Some(0) {
                    v.err("NULL with a nonzero length");
                }
            }
            Mode::Mis => v.err("misaligned pointer"),
            Mode::Ok => {
                let Some(c) = claim else {
                    v.err("claimed size overflows");
                    return;
                };
                if c.saturating_mul(std::mem::size_of::<T>() as u128) > isize::MAX as u128 {
                    v.err("claimed size exceeds isize::MAX bytes");
                } else if c > self.len() as u128 {
                    if c <= CAP {
                        self.v.pop();
                        self.v.resize_with(c as usize, fill);
                        self.v.push(self.slack);
                    } else {
                        v.skip = true;
                    }
                }
            }
        }
    }
}

/// The first `n` elements (none for a NULL pointer, whose length is 0
/// whenever the call is expected to succeed).
fn view<T: Copy>(a: &Arr<T>, n: usize) -> &[T] {
    if a.mode == Mode::Ok {
        &a.data()[..n]
    } else {
        &[]
    }
}

fn strided(n: usize, dim: usize, stride: usize) -> Option<u128> {
    if n == 0 {
        Some(0)
    } else {
        Some((n as u128 - 1) * stride as u128 + dim as u128)
    }
}
fn mul(a: usize, b: usize) -> Option<u128> {
    Some(a as u128 * b as u128)
}

#[derive(Default)]
struct Verdict {
    expect_err: Option<&'static str>,
    skip: bool,
}
impl Verdict {
    fn err(&mut self, why: &'static str) {
        self.expect_err.get_or_insert(why);
    }
}

struct Ctx {
    r: R,
    seed: u64,
    execs: usize,
    skipped: usize,
    ok: usize,
    failures: Vec<String>,
    exec_no: usize,
    desc: String,
    per_fn: BTreeMap<&'static str, (usize, usize, Duration)>,
    per_target: BTreeMap<&'static str, Duration>,
}

static PROGRESS: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicBool = AtomicBool::new(false);
static CURRENT: Mutex<String> = Mutex::new(String::new());

impl Ctx {
    fn fail(&mut self, msg: String) {
        let m = format!(
            "seed {:#x} exec {} [{}]: {msg}",
            self.seed, self.exec_no, self.desc
        );
        eprintln!("FAIL {m}");
        self.failures.push(m);
    }
    /// Runs one C call: resets the last-error message, times the call.
    fn call(&mut self, func: &'static str, f: impl FnOnce() -> lshk_status) -> lshk_status {
        reset_msg();
        *CURRENT.lock().unwrap() = format!(
            "seed {:#x} exec {} {func} [{}]",
            self.seed, self.exec_no, self.desc
        );
        if std::env::var_os("LSHK_FUZZ_TRACE").is_some() {
            eprintln!("exec {} {func} [{}]", self.exec_no, self.desc);
        }
        let t0 = Instant::now();
        let st = f();
        let dt = t0.elapsed();
        PROGRESS.fetch_add(1, Ordering::Relaxed);
        self.execs += 1;
        let e = self.per_fn.entry(func).or_default();
        e.0 += 1;
        e.2 += dt;
        if st == LSHK_STATUS_OK {
            self.ok += 1;
            e.1 += 1;
        }
        if dt > Duration::from_secs(10) {
            self.fail(format!("{func} took {dt:?}"));
        }
        if st == LSHK_STATUS_PANIC {
            let m = last_msg();
            self.fail(format!("{func} panicked: {m}"));
        }
        st
    }
    /// Status checks common to every call; returns true on OK.
    fn judge(&mut self, func: &str, st: lshk_status, v: &Verdict) -> bool {
        if st == LSHK_STATUS_OK {
            if let Some(why) = v.expect_err {
                self.fail(format!("{func} returned OK although {why}"));
                return false;
            }
            return true;
        }
        let m = last_msg();
        let prefix = format!("{func}: ");
        if !m.starts_with(&prefix) || m.len() <= prefix.len() {
            self.fail(format!(
                "{func} returned {st} without its own message (last message: {m:?})"
            ));
        }
        false
    }
}

fn reset_msg() {
    // An invalid tier: fails without changing anything and leaves a
    // message that is not any fuzzed function's.
    assert_ne!(lshk_isa_set_max(0xDEAD), LSHK_STATUS_OK);
}

fn last_msg() -> String {
    // SAFETY: NULL with length 0 asks for the size; then a buffer of n + 1.
    unsafe {
        let n = lshk_last_error_message(null_mut(), 0);
        let mut b = vec![0u8; n + 1];
        lshk_last_error_message(b.as_mut_ptr().cast::<c_char>(), n + 1);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Bit `t` set: an `_isa` call on tier `t` returned OK (tier `t` ran).
static TIERS_RAN: AtomicU32 = AtomicU32::new(0);

fn tier_ran(isa: Option<u32>) {
    if let Some(t) = isa {
        TIERS_RAN.fetch_or(1 << t.min(31), Ordering::Relaxed);
    }
}

/// A tier value: usually a supported one (at most `LSHK_MAX_ISA`, see
/// tests/common/tiers.rs), sometimes unsupported or bad.
fn tier(r: &mut R, v: &mut Verdict) -> u32 {
    // What the CPU has decides the expected status; the developer's cap
    // only narrows which supported tiers are picked.
    let cpu_has_avx512 = Isa::supported().any(|t| t == Isa::Avx512);
    let run: Vec<Isa> = common::tiers::selected();
    match r.u(8) {
        0 => {
            v.err("not an lshk_isa value");
            r.pick(&[4, 5, 0xFFFF_FFFF, 1 << 31])
        }
        1 if !cpu_has_avx512 => {
            v.err("the CPU lacks the tier");
            LSHK_ISA_AVX512
        }
        _ => r.pick(&run) as u32,
    }
}

fn f16_to_f64(h: u16) -> f64 {
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

fn gamma(n: usize) -> f64 {
    let u = 2f64.powi(-24);
    n as f64 * u / (1.0 - n as f64 * u)
}

/// Random CSR offsets of `nq` segments of 0..=maxlen entries.
fn csr(r: &mut R, nq: usize, maxlen: usize) -> Vec<usize> {
    let mut o = vec![0usize];
    for _ in 0..nq {
        let l = r.u(maxlen + 1);
        o.push(o.last().unwrap() + l);
    }
    o
}

fn offsets_valid(o: &[usize], total: usize) -> bool {
    !o.is_empty() && o[0] == 0 && o.windows(2).all(|w| w[0] <= w[1]) && *o.last().unwrap() == total
}

/// Mutates one CSR offset (breaking the rules or not).
fn mutate_offsets(r: &mut R, o: &mut [usize]) {
    let j = r.u(o.len());
    o[j] = match r.u(5) {
        0 => o[j].wrapping_add(1),
        1 => o[j].wrapping_sub(1),
        2 => r.pick(&HUGE),
        3 => 0,
        _ => r.u(40),
    };
}

// ------------------------------------------------------------ matmul

#[derive(Clone, Copy, PartialEq, Debug)]
enum Dt {
    F32,
    Bf16,
    F16,
    I8,
}

fn fuzz_matmul(c: &mut Ctx) {
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

    let nmut = r.u(4);
    let mut alias = false;
    let mut what = Vec::new();
    for _ in 0..nmut {
        let k = r.u(15);
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
    c.desc = format!("matmul {dt:?} isa {isa:?} rows {rows} dim {dim} ws {w_stride} nq {nq} qs {q_stride} out_len {out_len} bias {use_bias} alias {alias} muts {what:?}");

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
        let (wfp, whp, wip, sp, qp, ip, op) = (
            wf.ptr(),
            wh.ptr(),
            wi.ptr(),
            scales.ptr(),
            q.ptr(),
            ids.ptr(),
            offs.ptr(),
        );
        let outp = if alias { q.v.as_mut_ptr() } else { out.mptr() };
        // SAFETY: every pointer holds what its size arguments claim (or the
        // claim is impossible / the pointer NULL or misaligned, which the
        // library must reject before reading).
        unsafe {
            match (dt, isa) {
                (Dt::F32, None) => (
                    "lshk_gathered_matmul_f32",
                    c.call("lshk_gathered_matmul_f32", || {
                        lshk_gathered_matmul_f32(
                            wfp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp, out_len,
                        )
                    }),
                ),
                (Dt::F32, Some(t)) => (
                    "lshk_gathered_matmul_f32_isa",
                    c.call("lshk_gathered_matmul_f32_isa", || {
                        lshk_gathered_matmul_f32_isa(
                            t, wfp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp,
                            out_len,
                        )
                    }),
                ),
                (Dt::Bf16, None) => (
                    "lshk_gathered_matmul_bf16",
                    c.call("lshk_gathered_matmul_bf16", || {
                        lshk_gathered_matmul_bf16(
                            whp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp, out_len,
                        )
                    }),
                ),
                (Dt::Bf16, Some(t)) => (
                    "lshk_gathered_matmul_bf16_isa",
                    c.call("lshk_gathered_matmul_bf16_isa", || {
                        lshk_gathered_matmul_bf16_isa(
                            t, whp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp,
                            out_len,
                        )
                    }),
                ),
                (Dt::F16, None) => (
                    "lshk_gathered_matmul_f16",
                    c.call("lshk_gathered_matmul_f16", || {
                        lshk_gathered_matmul_f16(
                            whp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp, out_len,
                        )
                    }),
                ),
                (Dt::F16, Some(t)) => (
                    "lshk_gathered_matmul_f16_isa",
                    c.call("lshk_gathered_matmul_f16_isa", || {
                        lshk_gathered_matmul_f16_isa(
                            t, whp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp,
                            out_len,
                        )
                    }),
                ),
                (Dt::I8, None) => (
                    "lshk_gathered_matmul_i8",
                    c.call("lshk_gathered_matmul_i8", || {
                        lshk_gathered_matmul_i8(
                            wip, sp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp,
                            out_len,
                        )
                    }),
                ),
                (Dt::I8, Some(t)) => (
                    "lshk_gathered_matmul_i8_isa",
                    c.call("lshk_gathered_matmul_i8_isa", || {
                        lshk_gathered_matmul_i8_isa(
                            t, wip, sp, rows, dim, w_stride, bp, qp, nq, q_stride, ip, op, outp,
                            out_len,
                        )
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
            let (mut s, mut a) = (0f64, 0f64);
            for t in 0..dim {
                let p = wval(id * w_stride + t) * q.v[qi * q_stride + t] as f64;
                s += p;
                a += p.abs();
            }
            if dt == Dt::I8 {
                let sc = scales.v[id] as f64;
                s *= sc;
                a *= sc.abs();
            }
            let b = if use_bias { bias.v[id] as f64 } else { 0.0 };
            s += b;
            a += b.abs();
            let got = out.v[j] as f64;
            let bound = gamma(dim + 2) * a + (dim + 2) as f64 * 2f64.powi(-149);
            let good = if s.is_nan() {
                got.is_nan()
            } else if s.is_infinite() {
                got == s
            } else if a >= f32::MAX as f64 / 2.0 {
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
fn half(x: f32) -> u16 {
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

// ------------------------------------------------------------ top-k

fn fuzz_topk(c: &mut Ctx) {
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
                scores.data_mut()[j] = r.special();
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

fn fuzz_softmax(c: &mut Ctx) {
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
                scores.data_mut()[j] = r.special();
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

// ------------------------------------------------------------ training

/// `lshk_softmax_xent_csr[_isa]`: OK results equal the safe Rust API bit
/// for bit (every tier returns the same bits, so the scalar tier is the
/// reference), failures write nothing.
fn fuzz_xent(c: &mut Ctx) {
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
                z.data_mut()[j] = r.special();
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

/// `lshk_gather_dq_f32[_isa]` and `lshk_rows_update_sgd[_isa]`: the same
/// argument block (W, ids, offsets, grad; q and lr for the update, dq for
/// the product). OK results equal the Rust API (scalar tier, one thread)
/// bit for bit; failures write nothing.
fn fuzz_backward(c: &mut Ctx) {
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
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(12);
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
                    g.data_mut()[j] = r.special();
                }
                1 if q.len() > 0 => {
                    let j = r.u(q.len());
                    q.data_mut()[j] = r.special();
                }
                _ => lr = r.special(),
            },
            _ => {}
        }
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
        "{} isa {isa:?} rows {rows} dim {dim} w_stride {w_stride} nb {nb} n {n} threads {threads} muts {what:?}",
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
        (false, true) => "lshk_gather_dq_f32_isa",
        (false, false) => "lshk_gather_dq_f32",
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
            (false, Some(t)) => lshk_gather_dq_f32_isa(
                t, wp, rows, dim, w_stride, gp, ip, op, nb, threads, dp, dq_stride,
            ),
            (false, None) => lshk_gather_dq_f32(
                wp, rows, dim, w_stride, gp, ip, op, nb, threads, dp, dq_stride,
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

// ------------------------------------------------------------ tables

/// A tables handle and its Rust mirror (built from the same arguments).
struct Tab {
    h: *mut lshk_tables,
    mirror: Tables,
    codes: Vec<u32>,
    n: usize,
    l: usize,
    rb: u32,
    cap: u32,
    k: u32,
}

impl Drop for Tab {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_tables_build (or NULL).
        unsafe { lshk_tables_free(self.h) };
    }
}

fn new_codes(r: &mut R, n: usize, l: usize, k: u32) -> Vec<u32> {
    let mask = if k >= 32 { u32::MAX } else { (1u32 << k) - 1 };
    // Few distinct codes per table so buckets share rows.
    let distinct = 1 + r.u(8);
    let pool: Vec<u32> = (0..distinct * l).map(|_| r.u32() & mask).collect();
    (0..n * l)
        .map(|i| pool[(r.u(distinct)) * l + i % l])
        .collect()
}

fn build_tab(c: &mut Ctx) -> Tab {
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
fn ref_gather(
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
struct BigGather {
    p: lshk_gather_params,
    tail: [u64; 4],
}

fn fuzz_gather(c: &mut Ctx, idx: &[Idx]) {
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

fn fuzz_build(c: &mut Ctx) {
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
fn same_tables(h: *const lshk_tables, t: &Tables, probe_codes: &[u32]) -> bool {
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

fn fuzz_update(c: &mut Ctx, idx: &[Idx]) {
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
struct BigLabel {
    p: lshk_label_params,
    tail: [u64; 2],
}

fn fuzz_add_labels(c: &mut Ctx, idx: &[Idx]) {
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
    let want = lshk::labels::tables_with_labels(
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
            c.fail("lshk_tables_add_labels: tables differ from labels::tables_with_labels".into())
        }
        Err(e) => c.fail(format!(
            "lshk_tables_add_labels returned OK, the Rust API refused: {e}"
        )),
    }
}

// ------------------------------------------------------------ index query

struct Idx {
    h: *mut lshk_index,
    mirror: Index,
    dim: usize,
    k: u32,
    family: Family,
    w: Vec<f32>,
    bias: Vec<f32>,
    rows: usize,
    storage: Storage,
}

impl Drop for Idx {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_build.
        unsafe { lshk_index_free(self.h) };
    }
}

fn build_indexes() -> Vec<Idx> {
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
            p.family = family as u32;
            p.storage = storage as u32;
            p.transform = transform as u32;
            p.bits_per_table = bits;
            p.tables = 6;
            p.bin_size = 4;
            p.seed = 77 + i as u64;
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
struct BigStats {
    s: lshk_query_stats,
    tail: [u64; 2],
}

fn fuzz_query(c: &mut Ctx, idx: &[Idx]) {
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
    let mut gp = lshk_gather_params_default();
    let mut gmode = r.pick(&[0, 0, 1]); // 0 struct, 1 NULL, 2 big
    if ix.family == Family::SimHash && r.one_in(3) {
        gp.probes = 1 + r.u(3) as u32;
        gp.bits_per_table = r.pick(&[0, ix.k]);
    }
    gp.min_count = r.pick(&[1, 1, 2]);
    gp.max_candidates = if r.one_in(4) { 1 + r.u(30) as u32 } else { 0 };
    let mut use_scores = !r.one_in(4);
    let mut smode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_query_stats>() as u32;
    let mut handle: *const lshk_index = ix.h;
    let mut foreign = [0u64; 8];
    let mut oi_mode = Mode::Ok;
    let mut os_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(12);
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
                q.data_mut()[j] = r.special();
            }
            6 => {
                gmode = 0;
                let full = std::mem::size_of::<lshk_gather_params>() as u32;
                gp.struct_size = r.pick(&[0, 8, full - 1]);
            }
            7 => gmode = 2,
            8 => {
                gp.probes = r.pick(&[1, 4097, u32::MAX]);
                gp.bits_per_table = r.pick(&[0, ix.k, ix.k + 1, 33]);
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
                    gp.min_count = r.pick(&[u32::MAX, 7, 0]);
                    gp.max_candidates = r.pick(&[1, u32::MAX]);
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
    if q.mode == Mode::Ok
        && q.data()[..strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize]
            .chunks(q_stride.max(1))
            .any(|row| row[..dim.min(row.len())].iter().any(|x| !x.is_finite()))
    {
        v.err("non-finite query");
    }
    let eff = if gmode == 1 {
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
        && (ix.family == Family::Dwta
            || (eff.bits_per_table != 0 && eff.bits_per_table != ix.k)
            || eff.probes > 4096
            || eff.probes >= 1 << ix.k)
    {
        v.err("bad probes");
    }
    let mut big = BigGather {
        p: gp,
        tail: [0; 4],
    };
    if gmode == 2 && gp.struct_size as usize == std::mem::size_of::<lshk_gather_params>() {
        big.p.struct_size = std::mem::size_of::<BigGather>() as u32;
    }
    if gmode != 1 && (big.p.struct_size as usize) < std::mem::size_of::<lshk_gather_params>() {
        v.err("struct_size too small");
    }
    let gpp: *const lshk_gather_params = match gmode {
        1 => null(),
        2 => (&big as *const BigGather).cast(),
        _ => &gp,
    };
    let canary_stats = lshk_query_stats {
        struct_size: st_size,
        queries: 0xA5A5,
        candidates_total: 0xA5A5,
        candidates_min: 0xA5A5,
        candidates_max: 0xA5A5,
    };
    let mut bs = BigStats {
        s: canary_stats,
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
    let stats_same = |b: &BigStats| {
        (
            b.s.queries,
            b.s.candidates_total,
            b.s.candidates_min,
            b.s.candidates_max,
        ) == (0xA5A5, 0xA5A5, 0xA5A5, 0xA5A5)
            && b.tail == [7, 7]
    };
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
    if oi.v[nk] != CANARY || (use_scores && os.v[nk].to_bits() != CANARY) || bs.tail != [7, 7] {
        c.fail("lshk_index_query wrote past its outputs".into());
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
            if smode != 0
                && (
                    bs.s.queries,
                    bs.s.candidates_total,
                    bs.s.candidates_min,
                    bs.s.candidates_max,
                ) != (
                    rst.queries,
                    rst.candidates_total,
                    rst.candidates_min,
                    rst.candidates_max,
                )
            {
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

// ------------------------------------------------------------ IVF index

struct IvfX {
    h: *mut lshk_ivf,
    mirror: Ivf,
    dim: usize,
    rows: usize,
    nlist: usize,
    w: Vec<f32>,
    bias: Vec<f32>,
    codes: Codes,
}

impl Drop for IvfX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_ivf_build.
        unsafe { lshk_ivf_free(self.h) };
    }
}

/// Searches of a C handle and of its Rust mirror (every list re-ranked, one
/// list without re-ranking, the defaults), bit for bit.
fn ivf_same_answers(h: *mut lshk_ivf, mirror: &Ivf, qs: &[f32], nq: usize, dim: usize) -> bool {
    let kk = 4;
    [
        (u32::MAX, u32::MAX, 0.0f32),
        (1, 0, 0.0),
        (u32::MAX, 32, 3.0),
    ]
    .iter()
    .all(|&(nprobe, rerank, reach)| {
        let sp = lshk_ivf_search {
            struct_size: std::mem::size_of::<lshk_ivf_search>() as u32,
            nprobe,
            rerank,
            reach,
        };
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let st = unsafe {
            lshk_ivf_query(
                h,
                qs.as_ptr(),
                nq,
                dim,
                kk as u32,
                &sp,
                ci.as_mut_ptr(),
                cs.as_mut_ptr(),
                null_mut(),
            )
        };
        let rsp = SearchParams {
            nprobe,
            rerank: rerank.min(mirror.positions() as u32),
            reach,
        };
        let ok = mirror
            .search(qs, nq, dim, kk, &rsp, &mut ri, &mut rs)
            .is_ok();
        st == LSHK_STATUS_OK && ok && ci == ri && bits(&cs) == bits(&rs)
    })
}

/// lshk_ivf_train_labels on a fresh small index (int8 borrowing or
/// copying W, exact, or PQ4, which must refuse): mutated queries, stride,
/// CSR labels, parameters, a second training. OK must give the lists that
/// `Ivf::train_labels` gives the Rust mirror (the same searches afterwards,
/// bit for bit, and the same lshk_ivf_label_info); a refusal must leave the
/// index answering as before; inputs never change.
fn fuzz_ivf_labels(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let rows = 16 + r.u(40);
    let dim = 1 + r.u(10);
    let codes = r.pick(&[LSHK_IVF_CODES_I8, LSHK_IVF_CODES_NONE, LSHK_IVF_CODES_PQ4]);
    let borrow = if codes == LSHK_IVF_CODES_NONE {
        0
    } else {
        r.pick(&[0, 1])
    };
    let w: Vec<f32> = (0..rows * dim).map(|_| r.f(-1.0, 1.0)).collect();
    let bias: Vec<f32> = (0..rows).map(|_| r.f(-0.5, 0.5)).collect();
    let mut p = lshk_ivf_params_default();
    p.nlist = 1 + r.u(6) as u32;
    p.iters = 2;
    p.codes = codes;
    p.borrow = borrow;
    p.threads = 1;
    p.seed = r.0.next_u64();
    let mut h: *mut lshk_ivf = null_mut();
    // SAFETY: valid W, bias and params; a writable out.
    let s0 = unsafe { lshk_ivf_build(w.as_ptr(), bias.as_ptr(), rows, dim, dim, &p, &mut h) };
    assert_eq!(s0, LSHK_STATUS_OK, "{}", last_msg());
    let ip = IvfParams {
        nlist: p.nlist,
        iters: p.iters,
        codes: Codes::from_u32(codes).unwrap(),
        threads: 1,
        seed: p.seed,
        ..Default::default()
    };
    let mut mirror = Ivf::build_isa(
        lshk::isa::active(),
        &w,
        Some(&bias),
        rows,
        dim,
        dim,
        &ip,
        borrow == 1,
    )
    .unwrap();
    if codes == LSHK_IVF_CODES_PQ4 {
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
        unsafe { lshk_ivf_free(h) };
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
    if twice && codes != LSHK_IVF_CODES_PQ4 {
        // First a valid training with no queries (the lists stay as they
        // are, but the index counts as trained).
        let z = [0usize];
        // SAFETY: n = 0: one offset, no queries, no labels.
        let s = unsafe { lshk_ivf_train_labels(h, null(), 0, dim, z.as_ptr(), null(), null()) };
        assert_eq!(s, LSHK_STATUS_OK, "{}", last_msg());
        mirror
            .train_labels(&[], 0, dim, &z, &[], &LabelParams::default())
            .unwrap();
        v.err("the index is already trained");
    }
    c.desc = format!(
        "ivf train_labels rows {rows} dim {dim} codes {codes} borrow {borrow} nlist {} nt {nt} qs {q_stride} params {eff:?} pmode {pmode} twice {twice} muts {what:?}",
        p.nlist
    );
    let probe: Vec<f32> = (0..3 * dim).map(|i| w[i % (rows * dim)] + 0.25).collect();
    let (qp, op, yp) = (q.ptr(), lo.ptr(), labels.ptr());
    let i0 = (bits(&q.v), lo.v.clone(), labels.v.clone());
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_ivf_train_labels", || unsafe {
        lshk_ivf_train_labels(h, qp, nt, q_stride, op, yp, pp)
    });
    if (bits(&q.v), lo.v.clone(), labels.v.clone()) != i0 {
        c.fail("lshk_ivf_train_labels changed an input".into());
    }
    if c.judge("lshk_ivf_train_labels", st, &v) {
        let ql = strided(nt, dim, q_stride).unwrap() as usize;
        let rr = mirror.train_labels(
            view(&q, ql),
            nt,
            q_stride,
            view(&lo, nt + 1),
            view(&labels, total as usize),
            &eff,
        );
        let (mut tr, mut lpo) = (9u32, lshk_label_params_default());
        // SAFETY: a live handle; writable outputs.
        let si = unsafe { lshk_ivf_label_info(h, &mut tr, &mut lpo) };
        if rr.is_err()
            || si != LSHK_STATUS_OK
            || tr != 1
            || lpo.label_cap != eff.label_cap
            || lpo.policy != eff.policy as u32
            || !ivf_same_answers(h, &mirror, &probe, 3, dim)
        {
            c.fail(
                "lshk_ivf_train_labels: lists or label info differ from Ivf::train_labels's".into(),
            );
        }
    } else if st != LSHK_STATUS_OK && !ivf_same_answers(h, &mirror, &probe, 3, dim) {
        c.fail(format!(
            "lshk_ivf_train_labels failed with {st} but changed the index"
        ));
    }
    // SAFETY: a live handle.
    unsafe { lshk_ivf_free(h) };
}

fn build_ivfs() -> Vec<IvfX> {
    // (codes, borrow, nlist)
    let cfgs = [
        (Codes::I8, 1u32, 9u32),
        (Codes::I8, 0, 1),
        (Codes::None, 0, 14),
        (Codes::Pq4, 1, 5),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(codes, borrow, nlist))| {
            let (rows, dim) = (180 + 50 * i, 7 + 5 * i);
            let layer = lshk::data::structured_layer(rows, dim, 6, 21 + i as u64);
            let mut p = lshk_ivf_params_default();
            p.nlist = nlist;
            p.codes = codes as u32;
            p.borrow = borrow;
            p.iters = 4;
            p.threads = 1;
            p.seed = 5 + i as u64;
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes (kept alive in IvfX:
            // the Vec's heap buffer does not move); writable out.
            let st = unsafe {
                lshk_ivf_build(
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
            let ip = IvfParams {
                nlist,
                iters: 4,
                codes,
                threads: 1,
                seed: 5 + i as u64,
                ..Default::default()
            };
            let mirror = Ivf::build(&layer.w, Some(&layer.bias), rows, dim, dim, &ip).unwrap();
            IvfX {
                h,
                mirror,
                dim,
                rows,
                nlist: nlist as usize,
                w: layer.w,
                bias: layer.bias,
                codes,
            }
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BigIvfSearch {
    s: lshk_ivf_search,
    tail: [u32; 5],
}
#[repr(C)]
#[derive(Clone, Copy)]
struct BigIvfStats {
    s: lshk_ivf_stats,
    tail: [u64; 2],
}

/// The exact top-k of query `qv` (f64 logits), for the brute-force oracle.
fn ivf_brute(ix: &IvfX, qv: &[f32], k: usize) -> Vec<(f64, f64)> {
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

fn fuzz_ivf_query(c: &mut Ctx, ivfs: &[IvfX]) {
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
    let mut sp = lshk_ivf_search_default();
    // A full search (every list, every candidate re-ranked) a third of the
    // time: then the brute force is the oracle too.
    if r.one_in(3) {
        sp.nprobe = r.pick(&[ix.nlist as u32, u32::MAX]);
        sp.rerank = r.pick(&[ix.rows as u32, u32::MAX]);
        sp.reach = 0.0;
    } else {
        sp.nprobe = 1 + r.u(ix.nlist + 2) as u32;
        sp.rerank = r.pick(&[0, 1, 5, 64, 1000]);
        sp.reach = r.pick(&[0.0, 0.5, 2.0, 50.0]);
    }
    let mut smode = r.pick(&[0, 0, 1]); // 0 struct, 1 NULL, 2 big
    let mut use_scores = !r.one_in(4);
    let mut tmode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_ivf_stats>() as u32;
    let mut handle: *const lshk_ivf = ix.h;
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
                q.data_mut()[j] = r.special();
            }
            6 => {
                smode = 0;
                let full = std::mem::size_of::<lshk_ivf_search>() as u32;
                sp.struct_size = r.pick(&[0, 4, full - 1]);
            }
            7 => smode = 2,
            8 => {
                sp.nprobe = r.pick(&[0, 1, u32::MAX]);
                sp.rerank = r.pick(&[0, u32::MAX, hv32]);
                sp.reach = r.pick(&[0.0, 2.0, -1.0, -1e-30, f32::NAN, f32::INFINITY, 1e30]);
            }
            9 => {
                tmode = r.pick(&[1, 2]);
                if r.one_in(2) {
                    let full = std::mem::size_of::<lshk_ivf_stats>() as u32;
                    st_size = r.pick(&[0, 8, full - 1]);
                }
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = r.pick(&[foreign.as_ptr().cast(), ivfs[0].h.cast_const()]);
            }
        }
    }
    if handle.is_null() {
        v.err("NULL handle");
    } else if handle == foreign.as_ptr().cast() {
        v.err("foreign handle");
    } else if handle != ix.h.cast_const() {
        // Another live IVF handle: valid, but of another shape; keep the
        // oracle simple by skipping.
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
    if q.mode == Mode::Ok
        && q.data()[..strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize]
            .chunks(q_stride.max(1))
            .any(|row| row[..dim.min(row.len())].iter().any(|x| !x.is_finite()))
    {
        v.err("non-finite query");
    }
    let mut big = BigIvfSearch {
        s: sp,
        tail: [0x5a5a_5a5a; 5],
    };
    if smode == 2 && sp.struct_size as usize == std::mem::size_of::<lshk_ivf_search>() {
        big.s.struct_size = std::mem::size_of::<BigIvfSearch>() as u32;
    }
    if smode != 1 && (big.s.struct_size as usize) < std::mem::size_of::<lshk_ivf_search>() {
        v.err("search struct_size too small");
    }
    let eff = if smode == 1 {
        lshk_ivf_search_default()
    } else {
        sp
    };
    if eff.nprobe == 0 {
        v.err("nprobe 0");
    }
    if !(eff.reach.is_finite() && eff.reach >= 0.0) {
        v.err("reach negative or not finite");
    }
    let spp: *const lshk_ivf_search = match smode {
        1 => null(),
        2 => (&big as *const BigIvfSearch).cast(),
        _ => &sp,
    };
    let mut bs = BigIvfStats {
        s: lshk_ivf_stats {
            struct_size: st_size,
            reserved: 0xA5A5,
            scanned: 0xA5A5,
            reranked: 0xA5A5,
            lists: 0xA5A5,
        },
        tail: [7, 7],
    };
    if tmode == 2 && st_size as usize == std::mem::size_of::<lshk_ivf_stats>() {
        bs.s.struct_size = std::mem::size_of::<BigIvfStats>() as u32;
    }
    if tmode != 0 && (bs.s.struct_size as usize) < std::mem::size_of::<lshk_ivf_stats>() {
        v.err("stats struct_size too small");
    }
    let stp: *mut lshk_ivf_stats = if tmode == 0 {
        null_mut()
    } else {
        (&mut bs as *mut BigIvfStats).cast()
    };
    c.desc = format!(
        "ivf query {:?} nlist {} nq {nq} qs {q_stride} k {k} nprobe {} rerank {} smode {smode} scores {use_scores} tmode {tmode} muts {what:?}",
        ix.codes, ix.nlist, eff.nprobe, eff.rerank
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_ivf_query", || unsafe {
        lshk_ivf_query(handle, qp, nq, q_stride, k, spp, oip, osp, stp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_ivf_query changed an input".into());
    }
    if !c.judge("lshk_ivf_query", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.v != oi0
                || bits(&os.v) != os0
                || (bs.s.reserved, bs.s.scanned, bs.s.reranked, bs.s.lists)
                    != (0xA5A5, 0xA5A5, 0xA5A5, 0xA5A5)
                || bs.tail != [7, 7])
        {
            c.fail(format!(
                "lshk_ivf_query failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let kk = k as usize;
    let nk = nq * kk;
    if oi.v[nk] != CANARY
        || (use_scores && os.v[nk].to_bits() != CANARY)
        || bs.tail != [7, 7]
        || bs.s.reserved != 0xA5A5
        || (smode == 2 && big.tail != [0x5a5a_5a5a; 5])
    {
        c.fail("lshk_ivf_query wrote past its outputs".into());
    }
    // Reference 1: the safe Rust API on an identically built index (rerank
    // above rows acts as rows, as documented).
    let rsp = SearchParams {
        nprobe: eff.nprobe,
        rerank: eff.rerank.min(ix.rows as u32),
        reach: eff.reach,
    };
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = SearchStats::default();
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    if let Err(e) = ix.mirror.search_stats(
        lshk::isa::active(),
        qd,
        nq,
        q_stride,
        kk,
        &rsp,
        &mut ri,
        &mut rs,
        Some(&mut rst),
    ) {
        c.fail(format!(
            "lshk_ivf_query returned OK, Ivf::search refused: {e}"
        ));
        return;
    }
    if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
        c.fail(format!(
            "lshk_ivf_query: ids {:?} vs Rust {:?}",
            &oi.data()[..nk],
            ri
        ));
    }
    if tmode != 0
        && (bs.s.scanned, bs.s.reranked, bs.s.lists) != (rst.scanned, rst.reranked, rst.lists)
    {
        c.fail("lshk_ivf_query: stats differ from Ivf::search_stats".into());
    }
    // Reference 2 (independent): a full search is the exact top-k up to
    // ties within the f32 bound.
    let full = eff.nprobe as usize >= ix.nlist
        && eff.reach == 0.0
        && (ix.codes == Codes::None || eff.rerank as usize >= ix.rows);
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

fn fuzz_ivf_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut rows = 1 + r.u(60);
    let mut dim = 1 + r.u(12);
    let mut w_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut p = lshk_ivf_params_default();
    p.nlist = r.pick(&[0, 1, 2, 5]);
    p.iters = 1 + r.u(3) as u32;
    p.train_rows = r.pick(&[0, 0, 7, 30]);
    p.codes = r.pick(&[LSHK_IVF_CODES_I8, LSHK_IVF_CODES_NONE, LSHK_IVF_CODES_PQ4]);
    p.borrow = if p.codes == LSHK_IVF_CODES_NONE {
        0
    } else {
        r.pick(&[0, 1])
    };
    if p.codes == LSHK_IVF_CODES_PQ4 {
        // A divisor of dim (checked below), or 0 = dim / 2.
        p.pq_m = r.pick(&[0, 0, 1, 2, 3]);
        rows = rows.max(16);
    }
    p.threads = r.pick(&[0, 1, 2]);
    p.seed = r.0.next_u64();
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut bias = Arr::new((0..rows).map(|_| r.f(-0.5, 0.5)).collect(), 0.0f32);
    let mut use_bias = !r.one_in(3);
    let mut pmode = r.pick(&[0, 0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(12);
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
            5 => p.nlist = r.pick(&[rows as u32, (rows as u32).wrapping_add(1), u32::MAX, hv32]),
            6 => p.train_rows = r.pick(&[1, p.nlist.saturating_sub(1), u32::MAX]),
            7 => match r.u(4) {
                0 => p.codes = r.pick(&[2, u32::MAX]),
                1 => p.borrow = r.pick(&[2, u32::MAX, 1]),
                2 => p.pq_m = r.pick(&[1, 5, 13, u32::MAX]),
                _ => p.iters = 0,
            },
            8 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_ivf_params>() as u32;
                p.struct_size = r.pick(&[0, 8, full - 1]);
            }
            9 if w.len() > 0 => {
                let j = r.u(w.len());
                w.data_mut()[j] = r.special();
            }
            10 => {
                use_bias = true;
                let j = r.u(bias.len());
                bias.data_mut()[j] = r.special();
            }
            _ => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
        }
    }
    if pmode == 2 {
        p.struct_size = std::mem::size_of::<BigIvfParams>() as u32;
    }
    let eff = if pmode == 1 {
        lshk_ivf_params_default()
    } else {
        p
    };
    // Order of the documented checks: out, params, rows/dim, buffers.
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    if pmode != 1 && (p.struct_size as usize) < std::mem::size_of::<lshk_ivf_params>() {
        v.err("struct_size too small");
    }
    if eff.codes > 2 || eff.borrow > 1 || (eff.borrow == 1 && eff.codes == 0) {
        v.err("bad codes / borrow");
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
    if eff.iters == 0 {
        v.err("iters 0");
    }
    if eff.codes == LSHK_IVF_CODES_PQ4 {
        let m = if eff.pq_m == 0 {
            lshk::ivf::default_pq_m(dim)
        } else {
            eff.pq_m as usize
        };
        if m > dim || !dim.is_multiple_of(m) {
            v.err("pq_m does not divide dim");
        }
        if rows < 16 {
            v.err("PQ4 needs 16 rows");
        }
    } else if eff.codes <= 2 && eff.pq_m != 0 {
        v.err("pq_m without PQ4");
    }
    if v.expect_err.is_none() {
        let nlist = if eff.nlist == 0 {
            lshk::ivf::auto_nlist(rows)
        } else {
            eff.nlist as usize
        };
        let ntrain = if eff.train_rows == 0 {
            rows.min(64 * nlist)
        } else {
            (eff.train_rows as usize).min(rows)
        };
        if nlist > rows || ntrain < nlist {
            v.err("nlist > rows or train_rows < nlist");
        }
        let wd = w.data();
        let bad_w = (0..rows).any(|rr| {
            wd[rr * w_stride..rr * w_stride + dim]
                .iter()
                .any(|x| !x.is_finite())
        });
        let bad_b = use_bias && bias.data()[..rows].iter().any(|x| !x.is_finite());
        if bad_w || bad_b {
            v.err("non-finite W or bias");
        }
    }
    c.desc = format!(
        "ivf build rows {rows} dim {dim} stride {w_stride} nlist {} iters {} train {} codes {} pq_m {} borrow {} pmode {pmode} bias {use_bias} muts {what:?}",
        eff.nlist, eff.iters, eff.train_rows, eff.codes, eff.pq_m, eff.borrow
    );
    let big = BigIvfParams {
        p,
        tail: [0xEE; 24],
    };
    let pp: *const lshk_ivf_params = match pmode {
        1 => null(),
        2 => (&big as *const BigIvfParams).cast(),
        _ => &p,
    };
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_ivf;
    let mut outv: [*mut lshk_ivf; 2] = [canary, canary];
    let outp: *mut *mut lshk_ivf = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let (wp, bp) = (w.ptr(), if use_bias { bias.ptr() } else { null() });
    let (w0, b0) = (bits(&w.v), bits(&bias.v));
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_ivf_build", || unsafe {
        lshk_ivf_build(wp, bp, rows, dim, w_stride, pp, outp)
    });
    if bits(&w.v) != w0 || bits(&bias.v) != b0 {
        c.fail("lshk_ivf_build changed an input".into());
    }
    if !c.judge("lshk_ivf_build", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_ivf_build failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_ivf_build wrote past *out".into());
    }
    // Reference: the Rust build with the same parameters gives the same
    // index, compared through its saved file (every section).
    let ip = IvfParams {
        nlist: eff.nlist,
        iters: eff.iters,
        train_rows: eff.train_rows,
        codes: Codes::from_u32(eff.codes).unwrap(),
        pq_m: eff.pq_m,
        threads: 1,
        seed: eff.seed,
        ..Default::default()
    };
    let bs = use_bias.then(|| &bias.data()[..rows]);
    let wd = &w.data()[..strided(rows, dim, w_stride).unwrap() as usize];
    let mirror = Ivf::build_isa(
        lshk::isa::active(),
        wd,
        bs,
        rows,
        dim,
        w_stride,
        &ip,
        eff.borrow == 1,
    )
    .unwrap();
    // Through queries (every 16th build also through the saved files,
    // which compare every section; a save syncs to disk, so not always):
    // memory, shape, a full search and a one-list search without re-ranking
    // (its scores come from the lists and codes), bit for bit.
    let (mut sr, mut sd, mut sn, mut mem) = (0usize, 0usize, 0u32, 0usize);
    // SAFETY: a live handle; writable outputs.
    let s2 = unsafe {
        lshk_ivf_shape(h, &mut sr, &mut sd, &mut sn) | lshk_ivf_memory_bytes(h, &mut mem)
    };
    if s2 != LSHK_STATUS_OK
        || (sr, sd, sn as usize) != (rows, dim, mirror.nlist())
        || mem != mirror.memory_bytes()
    {
        c.fail("lshk_ivf_build: shape or memory differ from Ivf::build's".into());
    }
    let nq = 3;
    let qs: Vec<f32> = (0..nq * dim)
        .map(|i| wd[(i % dim) + (i / dim % rows) * w_stride] + 0.125)
        .collect();
    let kk = 4;
    for (nprobe, rerank, reach) in [(u32::MAX, u32::MAX, 0.0), (1, 0, 0.0), (u32::MAX, 40, 2.0)] {
        let sp = lshk_ivf_search {
            struct_size: std::mem::size_of::<lshk_ivf_search>() as u32,
            nprobe,
            rerank,
            reach,
        };
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let s3 = unsafe {
            lshk_ivf_query(
                h,
                qs.as_ptr(),
                nq,
                dim,
                kk as u32,
                &sp,
                ci.as_mut_ptr(),
                cs.as_mut_ptr(),
                null_mut(),
            )
        };
        let rsp = SearchParams {
            nprobe,
            rerank: rerank.min(rows as u32),
            reach,
        };
        let ok = mirror
            .search(&qs, nq, dim, kk, &rsp, &mut ri, &mut rs)
            .is_ok();
        if s3 != LSHK_STATUS_OK || !ok || ci != ri || bits(&cs) != bits(&rs) {
            c.fail(format!(
                "lshk_ivf_build: search (nprobe {nprobe}, rerank {rerank}) differs from Ivf::build's: {ci:?} vs {ri:?}"
            ));
        }
    }
    if c.r.one_in(16) {
        let dir = std::env::temp_dir();
        let (pa, pb) = (
            dir.join(format!("lshk-fuzz-ivf-{}-a", std::process::id())),
            dir.join(format!("lshk-fuzz-ivf-{}-b", std::process::id())),
        );
        let cpa = std::ffi::CString::new(pa.to_str().unwrap()).unwrap();
        // SAFETY: a live handle and a NUL-terminated path.
        let s1 = unsafe { lshk_ivf_save(h, cpa.as_ptr()) };
        mirror.save(&pb).unwrap();
        let (fa, fb) = (
            std::fs::read(&pa).unwrap_or_default(),
            std::fs::read(&pb).unwrap(),
        );
        let _ = (std::fs::remove_file(&pa), std::fs::remove_file(&pb));
        if s1 != LSHK_STATUS_OK || fa != fb {
            c.fail("lshk_ivf_build: the saved index differs from Ivf::build's".into());
        }
    }
    // SAFETY: a live handle, freed once.
    unsafe { lshk_ivf_free(h) };
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BigIvfParams {
    p: lshk_ivf_params,
    tail: [u8; 24],
}

// ------------------------------------------------------------ driver

fn env_usize(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(default)
}

/// Regression cases of bugs the fuzzer found (run inside the one test so
/// no concurrent test can reuse a freed handle slot meanwhile).
fn regressions() {
    // lshk_tables_gather accepted an output length whose byte size exceeds
    // isize::MAX (it only checked that len * 4 fits in usize), unlike every
    // slice_in/slice_out check: such a buffer cannot exist. Found by
    // fuzz_args (seed 0x5eeda695, exec 1315); fixed in check_out of
    // src/ffi/tables.rs.
    let codes = [1u32, 2, 3, 1];
    let mut t = null_mut();
    // SAFETY: 4 codes = n*L; writable out.
    assert_eq!(
        unsafe { lshk_tables_build(codes.as_ptr(), 4, 1, 4, 0, 1, 1, &mut t) },
        LSHK_STATUS_OK
    );
    for len in [(1usize << 61) + 1, isize::MAX as usize, usize::MAX / 4] {
        let mut ids = [CANARY; 8];
        let mut cnt = [CANARY; 8];
        let mut offs = [usize::MAX; 2];
        let mut needed = usize::MAX;
        // SAFETY: the claimed length is impossible; the call must refuse it
        // before writing anything.
        let st = unsafe {
            lshk_tables_gather(
                t,
                codes.as_ptr(),
                1,
                null(),
                null(),
                0,
                null(),
                null(),
                0,
                ids.as_mut_ptr(),
                len,
                offs.as_mut_ptr(),
                cnt.as_mut_ptr(),
                &mut needed,
            )
        };
        assert_eq!(
            st,
            LSHK_STATUS_SIZE_OVERFLOW,
            "ids_len {len}: {}",
            last_msg()
        );
        assert!(
            ids.iter().chain(&cnt).all(|&x| x == CANARY)
                && offs == [usize::MAX; 2]
                && needed == usize::MAX
        );
    }
    // SAFETY: live handle, freed once.
    unsafe { lshk_tables_free(t) };
}

// ------------------------------------------------------------ IUL

/// lshk_simhash_train_iul (learned planes, stateless): shapes, parameters
/// (flags, rank / score thresholds), CSR labels, buffers; on OK the planes
/// and reports equal `iul::train`'s bit for bit.
fn fuzz_iul(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut dim = 1 + r.u(6);
    let mut kb = 1 + r.u(4) as u32;
    let mut tl = 1 + r.u(3) as u32;
    let mut range_bits = kb.min(6);
    let mut n_rows = 1 + r.u(30);
    let mut row_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut n = 1 + r.u(10);
    let mut q_stride = dim + if r.one_in(3) { r.u(2) } else { 0 };
    let mut p = lshk_iul_params_default();
    p.rounds = r.u(3) as u32;
    p.epochs = 1 + r.u(2) as u32;
    p.batch = r.pick(&[1, 4, 256]);
    p.flags = r.pick(&[0, LSHK_IUL_RANK_THRESHOLDS, LSHK_IUL_KEEP_BEST, 3]);
    if p.flags & LSHK_IUL_RANK_THRESHOLDS != 0 {
        p.t1 = r.u(12) as f32;
        p.t2 = r.u(40) as f32;
    } else {
        p.t1 = r.f(-1.0, 1.0);
        p.t2 = r.f(-1.0, 1.0);
    }
    p.validation_fraction = r.pick(&[0.0, 0.25, 0.5]);
    p.max_pairs = r.pick(&[0, 0, 5]);
    p.seed = r.0.next_u64();
    let np = (kb * tl) as usize * dim;
    let mut planes_len = np;
    let mut planes = Arr::new((0..np).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut rows = Arr::new(
        (0..(n_rows - 1) * row_stride + dim)
            .map(|_| r.f(-1.0, 1.0))
            .collect(),
        0.0f32,
    );
    let mut queries = Arr::new(
        (0..(n - 1) * q_stride + dim)
            .map(|_| r.f(-1.0, 1.0))
            .collect(),
        0.0f32,
    );
    let lo0 = csr(r, n, 3);
    let mut labels = Arr::new(
        (0..*lo0.last().unwrap())
            .map(|_| r.u(n_rows) as u32)
            .collect(),
        0u32,
    );
    let mut lo = Arr::new(lo0, 0usize);
    let mut out_len = np + r.u(2);
    let mut out = Arr::new(vec![0.0f32; out_len], 0.0f32);
    let mut reports_len = p.rounds as usize + r.u(2);
    let mut reps_null = r.one_in(6);
    let mut pmode = r.pick(&[0, 0, 0, 1]); // 0 struct, 1 NULL (defaults)
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(16);
        what.push(m);
        match m {
            0 => match r.u(6) {
                0 => planes.mode = r.pick(&[Mode::Null, Mode::Mis]),
                1 => rows.mode = r.pick(&[Mode::Null, Mode::Mis]),
                2 => queries.mode = r.pick(&[Mode::Null, Mode::Mis]),
                3 => lo.mode = r.pick(&[Mode::Null, Mode::Mis]),
                4 => labels.mode = r.pick(&[Mode::Null, Mode::Mis]),
                _ => out.mode = r.pick(&[Mode::Null, Mode::Mis]),
            },
            1 => planes_len = r.size(planes_len),
            2 => dim = r.pick(&[0, dim + 1]),
            3 => kb = r.pick(&[0, 33, kb + 1]),
            4 => tl = r.pick(&[0, tl + 1]),
            5 => range_bits = r.pick(&[0, 25, 24, 1]),
            6 => n_rows = r.pick(&[0, n_rows.saturating_sub(1), n_rows + 1]),
            7 => row_stride = r.pick(&[dim.saturating_sub(1), 0]),
            8 => n = r.pick(&[0, n.saturating_sub(1), n + 1]),
            9 => q_stride = r.pick(&[dim.saturating_sub(1), 0]),
            10 => mutate_offsets(r, lo.data_mut()),
            11 if labels.len() > 0 => {
                let j = r.u(labels.len());
                labels.data_mut()[j] = r.pick(&[n_rows as u32, u32::MAX]);
            }
            12 => match r.u(7) {
                0 => p.flags = r.pick(&[4, 8, u32::MAX]),
                1 => p.t1 = r.special(),
                2 => {
                    p.flags |= LSHK_IUL_RANK_THRESHOLDS;
                    p.t2 = r.pick(&[0.5, -1.0, 1.0e9]);
                }
                3 => p.learning_rate = r.pick(&[0.0, -0.01, f32::NAN]),
                4 => p.batch = 0,
                5 => p.validation_fraction = r.pick(&[1.0, -0.1, f32::NAN]),
                _ => {
                    pmode = 0;
                    let full = std::mem::size_of::<lshk_iul_params>() as u32;
                    p.struct_size = r.pick(&[0, 8, full - 1]);
                }
            },
            13 => out_len = out_len.saturating_sub(1 + r.u(2)),
            14 => reports_len = reports_len.saturating_sub(1 + r.u(2)),
            15 if planes.len() > 0 => {
                let j = r.u(planes.len());
                planes.data_mut()[j] = r.special();
            }
            _ => reps_null = !reps_null,
        }
    }
    let eff = if pmode == 1 {
        lshk_iul_params_default()
    } else {
        p
    };
    if pmode == 0 && (p.struct_size as usize) < std::mem::size_of::<lshk_iul_params>() {
        v.err("struct_size too small");
    }
    if eff.flags & !3 != 0 {
        v.err("unknown flags");
    }
    planes.need(Some(planes_len as u128), &mut v, || 0.5);
    rows.need(strided(n_rows, dim, row_stride), &mut v, || 0.25);
    queries.need(strided(n, dim, q_stride), &mut v, || 0.25);
    lo.need(Some(n as u128 + 1), &mut v, || 0);
    let total = if lo.mode == Mode::Ok && lo.len() > n {
        lo.data()[n] as u128
    } else {
        0
    };
    labels.need(Some(total), &mut v, || 0);
    out.need(Some(out_len as u128), &mut v, || 0.0);
    if v.skip {
        c.skipped += 1;
        return;
    }
    if dim == 0 || kb == 0 || kb > 32 || tl == 0 {
        v.err("bad shape");
    }
    if planes_len != (kb * tl) as usize * dim {
        v.err("planes_len != K L dim");
    }
    if !(1..=24).contains(&range_bits) {
        v.err("range_bits");
    }
    if planes.mode == Mode::Ok
        && planes.data()[..planes_len.min(planes.len())]
            .iter()
            .any(|x| !x.is_finite())
    {
        v.err("non-finite plane");
    }
    if !(eff.t1.is_finite() && eff.t2.is_finite()) {
        v.err("non-finite threshold");
    }
    if eff.flags & LSHK_IUL_RANK_THRESHOLDS != 0
        && [eff.t1, eff.t2]
            .iter()
            .any(|&t| !(t >= 0.0 && t.fract() == 0.0 && t <= 16_777_216.0))
    {
        v.err("rank cut-off not a whole number in range");
    }
    if !(eff.learning_rate.is_finite() && eff.learning_rate > 0.0) || eff.batch == 0 {
        v.err("learning rate or batch");
    }
    if !(eff.validation_fraction >= 0.0 && eff.validation_fraction < 1.0) {
        v.err("validation fraction");
    }
    if n_rows == 0 || n == 0 || row_stride < dim || q_stride < dim {
        v.err("sizes or strides");
    }
    if lo.mode == Mode::Ok && lo.len() > n {
        let o = &lo.data()[..n + 1];
        if o[0] != 0 || o.windows(2).any(|w| w[1] < w[0]) {
            v.err("bad label offsets");
        } else if labels.mode == Mode::Ok
            && labels.len() >= o[n]
            && labels.data()[..o[n]].iter().any(|&y| y as usize >= n_rows)
        {
            v.err("label >= n_rows");
        }
    }
    if out_len < planes_len {
        v.err("planes_out_len < planes_len");
    }
    let rounds = eff.rounds as usize;
    let (rp, rl) = if reps_null {
        (true, 0)
    } else {
        (false, reports_len)
    };
    if !(rp && rl == 0) && rl < rounds {
        v.err("reports_len < rounds");
    }
    c.desc = format!(
        "iul dim {dim} K {kb} L {tl} rb {range_bits} rows {n_rows}/{row_stride} n {n}/{q_stride} \
         rounds {} flags {} t {} {} pmode {pmode} out {out_len} reps {rl} null {reps_null} muts {what:?}",
        eff.rounds, eff.flags, eff.t1, eff.t2
    );
    let canary = lshk_iul_report {
        round: CANARY,
        ..Default::default()
    };
    let mut reps = vec![canary; rl + 1];
    let repp = if reps_null {
        null_mut()
    } else {
        reps.as_mut_ptr()
    };
    let outp = out.mptr();
    let pp: *const lshk_iul_params = if pmode == 1 { null() } else { &p };
    let (pl0, r0, q0) = (bits(&planes.v), bits(&rows.v), bits(&queries.v));
    let out0 = bits(&out.v);
    // SAFETY: every buffer holds what its length argument claims (Arr::need)
    // or the call is expected to refuse it first.
    let st = c.call("lshk_simhash_train_iul", || unsafe {
        lshk_simhash_train_iul(
            planes.ptr(),
            planes_len,
            dim,
            kb,
            tl,
            range_bits,
            rows.ptr(),
            n_rows,
            row_stride,
            queries.ptr(),
            n,
            q_stride,
            lo.ptr(),
            labels.ptr(),
            pp,
            outp,
            out_len,
            repp,
            rl,
        )
    });
    if bits(&planes.v) != pl0 || bits(&rows.v) != r0 || bits(&queries.v) != q0 {
        c.fail("lshk_simhash_train_iul changed an input".into());
    }
    if !c.judge("lshk_simhash_train_iul", st, &v) {
        if st != LSHK_STATUS_OK && (bits(&out.v) != out0 || reps.iter().any(|x| x.round != CANARY))
        {
            c.fail("lshk_simhash_train_iul failed but wrote an output".into());
        }
        if st != LSHK_STATUS_OK && v.expect_err.is_none() {
            c.fail(format!(
                "lshk_simhash_train_iul refused a valid call: {}",
                last_msg()
            ));
        }
        return;
    }
    if reps[rl].round != CANARY || (rl > rounds && reps[rounds].round != CANARY) {
        c.fail("lshk_simhash_train_iul wrote past the reports it owes".into());
    }
    // Reference: the Rust trainer with the same inputs.
    let ip = lshk::iul::IulParams {
        t1: eff.t1,
        t2: eff.t2,
        thresholds: if eff.flags & LSHK_IUL_RANK_THRESHOLDS != 0 {
            lshk::iul::Thresholds::Rank
        } else {
            lshk::iul::Thresholds::Score
        },
        keep_best: eff.flags & LSHK_IUL_KEEP_BEST != 0,
        learning_rate: eff.learning_rate,
        rounds: eff.rounds,
        epochs: eff.epochs,
        batch: eff.batch,
        max_pairs: eff.max_pairs,
        validation_fraction: eff.validation_fraction,
        seed: eff.seed,
    };
    let shape = lshk::iul::IulShape {
        dim,
        bits: kb,
        tables: tl,
        range_bits,
        bucket_cap: 0,
        table_seed: 0,
    };
    let data = lshk::iul::IulData {
        rows: rows.data(),
        n_rows,
        row_stride,
        queries: queries.data(),
        n_queries: n,
        q_stride,
        label_offsets: &lo.data()[..n + 1],
        labels: labels.data(),
    };
    match lshk::iul::train(&planes.data()[..planes_len], &shape, &data, &ip) {
        Err(e) => c.fail(format!(
            "iul::train refused what the C call took: {}",
            e.message
        )),
        Ok((want, wr)) => {
            if bits(&out.data()[..planes_len]) != bits(&want) {
                c.fail("lshk_simhash_train_iul: planes differ from iul::train's".into());
            }
            if out.data()[planes_len..].iter().any(|&x| x != 0.0) {
                c.fail("lshk_simhash_train_iul wrote past planes_len".into());
            }
            if !reps_null {
                for (g, w) in reps.iter().zip(&wr) {
                    let same = g.round == w.round
                        && g.kept == u32::from(w.kept)
                        && (g.positives, g.negatives) == (w.positives, w.negatives)
                        && g.label_recall_after.to_bits() == w.label_recall_after.to_bits()
                        && g.loss_after.to_bits() == w.loss_after.to_bits();
                    if !same {
                        c.fail(format!(
                            "lshk_simhash_train_iul: report {} differs",
                            w.round
                        ));
                    }
                }
            }
        }
    }
}

// ------------------------------------------------------------ hrr

/// A live `lshk_hrr` handle and its Rust mirror (same d; every tier gives
/// the same bits, so the mirror is the reference whatever the tier).
struct HrrX {
    h: *mut lshk_hrr,
    d: usize,
    mirror: Hrr,
    scratch: HrrScratch,
}

impl Drop for HrrX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_hrr_new[_isa].
        unsafe { lshk_hrr_free(self.h) };
    }
}

/// Handles of d = 1, 6, 17 (Rader/Bluestein-free odd), 64, one pinned to
/// each supported tier in turn, and one freed handle (last, `h` only).
fn build_hrrs() -> (Vec<HrrX>, *mut lshk_hrr) {
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

fn fuzz_hrr(c: &mut Ctx, hs: &mut [HrrX], dead: *mut lshk_hrr) {
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
                x.data_mut()[j] = r.special();
            }
            5 if !y.data().is_empty() => {
                let j = r.u(y.len());
                y.data_mut()[j] = r.special();
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

fn fuzz_hrr_class(c: &mut Ctx) {
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

#[test]
fn fuzz_c_abi_arguments() {
    regressions();
    let iters = env_usize("LSHK_FUZZ_ITERS", 50_000) as usize;
    let seed = env_usize("LSHK_FUZZ_SEED", 0x5eed_a695);
    // Watchdog: no progress for 120 s is a hang.
    let wd = std::thread::spawn(|| {
        let mut last = (PROGRESS.load(Ordering::Relaxed), Instant::now());
        while !DONE.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let p = PROGRESS.load(Ordering::Relaxed);
            if p != last.0 {
                last = (p, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(120) {
                eprintln!(
                    "fuzz_args: HANG (no progress for 120 s) in {}",
                    CURRENT.lock().unwrap()
                );
                std::process::abort();
            }
        }
    });
    let idx = build_indexes();
    let ivfs = build_ivfs();
    let (mut hrrs, hrr_dead) = build_hrrs();
    let graphs = build_graphs();
    let mut c = Ctx {
        r: R(SplitMix64::new(seed)),
        seed,
        execs: 0,
        skipped: 0,
        ok: 0,
        failures: Vec::new(),
        exec_no: 0,
        desc: String::new(),
        per_fn: BTreeMap::new(),
        per_target: BTreeMap::new(),
    };
    let t0 = Instant::now();
    while c.execs < iters {
        c.exec_no += 1;
        c.desc.clear();
        let t1 = Instant::now();
        let mut which = c.r.u(31);
        match which {
            20 => fuzz_ivf_query(&mut c, &ivfs),
            21 => fuzz_ivf_build(&mut c),
            // IUL trains (ms a call): a quarter of its share, else topk.
            22 if c.r.one_in(4) => fuzz_iul(&mut c),
            22 => {
                which = 10;
                fuzz_topk(&mut c)
            }
            23 => fuzz_hrr(&mut c, &mut hrrs, hrr_dead),
            24 => fuzz_xent(&mut c),
            25 => fuzz_backward(&mut c),
            26 => fuzz_ivf_labels(&mut c),
            27 => fuzz_index_update(&mut c),
            28 => fuzz_gather_budget(&mut c),
            29 => fuzz_forest(&mut c),
            30 if c.r.one_in(4) => fuzz_graph_build(&mut c),
            30 => fuzz_graph_query(&mut c, &graphs),
            0..=5 => fuzz_matmul(&mut c),
            6..=9 => fuzz_gather(&mut c, &idx),
            10 | 11 => fuzz_topk(&mut c),
            12 | 13 => fuzz_softmax(&mut c),
            14 | 15 => fuzz_query(&mut c, &idx),
            16 => fuzz_build(&mut c),
            17 | 18 => fuzz_update(&mut c, &idx),
            _ => fuzz_add_labels(&mut c, &idx),
        }
        let name = [
            "matmul",
            "gather",
            "topk",
            "softmax",
            "query",
            "build",
            "update",
            "labels",
            "ivf query",
            "ivf build",
            "iul",
            "hrr",
            "xent",
            "dq / sgd",
            "ivf labels",
            "index update / rehash",
            "gather budget",
            "forest",
            "graph",
        ][[
            0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 6, 7, 8, 9, 10, 11, 12, 13, 14,
            15, 16, 17, 18,
        ][which]];
        *c.per_target.entry(name).or_default() += t1.elapsed();
        if c.failures.len() >= 20 {
            break;
        }
    }
    DONE.store(true, Ordering::Relaxed);
    wd.join().unwrap();
    for (f, (n, ok, dt)) in &c.per_fn {
        println!(
            "  {f}: {n} calls, {ok} OK, {:.2} s in the calls",
            dt.as_secs_f64()
        );
    }
    for (t, dt) in &c.per_target {
        println!("  {t}: {:.2} s in total", dt.as_secs_f64());
    }
    println!(
        "fuzz_args: {} executions ({} OK, {} rejected), {} skipped mutants, {} failures, seed {:#x}, {:.1} s",
        c.execs,
        c.ok,
        c.execs - c.ok,
        c.skipped,
        c.failures.len(),
        seed,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        c.failures.is_empty(),
        "{} failures:\n{}",
        c.failures.len(),
        c.failures.join("\n")
    );
    // Which tiers the `_isa` calls ran (an OK call on that tier); under CI a
    // supported tier none of them ran fails (at the default 50,000
    // executions every tier is picked hundreds of times).
    let ran_bits = TIERS_RAN.load(Ordering::Relaxed);
    let ran: Vec<Isa> = Isa::ALL
        .into_iter()
        .filter(|&t| ran_bits & (1 << t as u32) != 0)
        .collect();
    common::tiers::report(
        "fuzz_c_abi_arguments (the _isa calls that returned OK)",
        &ran,
    );
}

// ------------------------------------------- mutable index (issue 14, item 2)

/// Top-10 ids and score bits of a few fixed queries, through the C API.
fn index_results(h: *const lshk_index, dim: usize) -> (Vec<u32>, Vec<u32>) {
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
    assert_eq!(st, LSHK_STATUS_OK, "{}", last_msg());
    (ids, bits(&sc))
}

fn rust_results(idx: &Index) -> (Vec<u32>, Vec<u32>) {
    let dim = idx.dim();
    let q: Vec<f32> = (0..4 * dim).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let (mut ids, mut sc) = (vec![0u32; 40], vec![0f32; 40]);
    idx.query(
        &q,
        4,
        dim,
        10,
        &GatherParams::default(),
        &mut ids,
        &mut sc,
        None,
    )
    .unwrap();
    (ids, bits(&sc))
}

/// lshk_index_update_rows (then lshk_index_rehash_dirty / _rehash_rows) on
/// a fresh small index, against the Rust API on a twin index; and
/// lshk_rehash_next against RehashSchedule.
fn fuzz_index_update(c: &mut Ctx) {
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
    p.bits_per_table = 4;
    p.tables = 3;
    p.storage = storage as u32;
    p.transform = transform as u32;
    p.bucket_cap = cap;
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
                vals.data_mut()[j] = r.special();
            }
            6 if nb.len() > 0 => {
                let j = r.u(nb.len());
                nb.data_mut()[j] = r.special();
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

// ------------------------------------------------ budget rules (issue 14, item 3)

/// lshk_tables_gather_budget against Tables::gather_budget (bit for bit),
/// with the budget params mutated (NULL, struct_size, rule, misaligned).
fn fuzz_gather_budget(c: &mut Ctx) {
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

// ------------------------------------------------ hashing forest (issue 14, item 4)

/// lshk_forest_query and lshk_forest_union on a small forest built through
/// C, against the Rust API on a twin built the same way.
fn fuzz_forest(c: &mut Ctx) {
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
                x.data_mut()[j] = r.special();
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

// ------------------------------------------------------------ FGD graph

struct GraphX {
    h: *mut lshk_graph,
    mirror: lshk::graph::Graph,
    dim: usize,
    rows: usize,
    w: Vec<f32>,
    bias: Vec<f32>,
    storage: u32,
}

impl Drop for GraphX {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_graph_build.
        unsafe { lshk_graph_free(self.h) };
    }
}

fn graph_params(m: u32, efc: u32, storage: u32, seed: u64) -> lshk::graph::GraphParams {
    lshk::graph::GraphParams {
        m,
        ef_construction: efc,
        threads: 1,
        storage: lshk::graph::Storage::from_u32(storage).unwrap(),
        seed,
    }
}

fn build_graphs() -> Vec<GraphX> {
    // (storage, m)
    let cfgs = [
        (LSHK_GRAPH_STORAGE_F32, 4u32),
        (LSHK_GRAPH_STORAGE_BF16, 6),
        (LSHK_GRAPH_STORAGE_I8, 3),
    ];
    cfgs.iter()
        .enumerate()
        .map(|(i, &(storage, m))| {
            let (rows, dim) = (150 + 40 * i, 5 + 6 * i);
            let layer = lshk::data::structured_layer(rows, dim, 5, 31 + i as u64);
            let mut p = lshk_graph_params_default();
            p.m = m;
            p.ef_construction = 24;
            p.storage = storage;
            p.threads = 2;
            p.seed = 9 + i as u64;
            let mut h = null_mut();
            // SAFETY: W and bias of the stated sizes; writable out.
            let st = unsafe {
                lshk_graph_build(
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
            let mirror = lshk::graph::Graph::build(
                &layer.w,
                Some(&layer.bias),
                rows,
                dim,
                dim,
                &graph_params(m, 24, storage, 9 + i as u64),
            )
            .unwrap();
            GraphX {
                h,
                mirror,
                dim,
                rows,
                w: layer.w,
                bias: layer.bias,
                storage,
            }
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BigGraphStats {
    s: lshk_graph_stats,
    tail: [u64; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BigGraphParams {
    p: lshk_graph_params,
    tail: [u8; 24],
}

fn fuzz_graph_query(c: &mut Ctx, gs: &[GraphX]) {
    let gx = &gs[c.r.u(gs.len())];
    let r = &mut c.r;
    let mut v = Verdict::default();
    let dim = gx.dim;
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
                let row = (i / q_stride * 37) % gx.rows;
                gx.w[row * dim + (i % q_stride).min(dim - 1)] + r.f(-0.2, 0.2)
            })
            .collect(),
        0.0f32,
    );
    let mut k = r.u(12) as u32;
    // A pool of every row a third of the time: the exact top-k then.
    let mut ef: u32 = if r.one_in(3) {
        r.pick(&[gx.rows as u32, u32::MAX])
    } else {
        r.pick(&[1, 2, 8, 30])
    };
    let mut use_scores = !r.one_in(4);
    let mut tmode = r.pick(&[0, 1, 1]); // 0 none, 1 stats, 2 big stats
    let mut st_size = std::mem::size_of::<lshk_graph_stats>() as u32;
    let mut handle: *const lshk_graph = gx.h;
    let mut foreign = [0u64; 8];
    let (mut oi_mode, mut os_mode) = (Mode::Ok, Mode::Ok);
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(10);
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
            4 => k = r.pick(&[k.saturating_add(1), 0, hv32, 100_000, gx.rows as u32 + 3]),
            5 if q.len() > 0 => {
                let j = r.u(q.len());
                q.data_mut()[j] = r.special();
            }
            6 => ef = r.pick(&[0, 1, u32::MAX, hv32]),
            7 => {
                tmode = r.pick(&[1, 2]);
                if r.one_in(2) {
                    let full = std::mem::size_of::<lshk_graph_stats>() as u32;
                    st_size = r.pick(&[0, 8, full - 1]);
                }
            }
            _ => {
                foreign[0] = r.0.next_u64();
                handle = r.pick(&[foreign.as_ptr().cast(), gs[0].h.cast_const()]);
            }
        }
    }
    if handle.is_null() {
        v.err("NULL handle");
    } else if handle == foreign.as_ptr().cast() {
        v.err("foreign handle");
    } else if handle != gx.h.cast_const() {
        c.skipped += 1; // another live graph: valid, another shape
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
    // The pool is max(ef, k): keep huge pools on small graphs only.
    if v.skip || (k as usize > 4096 && v.expect_err.is_none()) {
        c.skipped += 1;
        return;
    }
    if q_stride < dim {
        v.err("q_stride < dim");
    }
    if ef == 0 {
        v.err("ef 0");
    }
    if q.mode == Mode::Ok
        && q.data()[..strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize]
            .chunks(q_stride.max(1))
            .any(|row| row[..dim.min(row.len())].iter().any(|x| !x.is_finite()))
    {
        v.err("non-finite query");
    }
    let mut bs = BigGraphStats {
        s: lshk_graph_stats {
            struct_size: st_size,
            reserved: 0xA5A5,
            distances: 0xA5A5,
        },
        tail: [7, 7],
    };
    if tmode == 2 && st_size as usize == std::mem::size_of::<lshk_graph_stats>() {
        bs.s.struct_size = std::mem::size_of::<BigGraphStats>() as u32;
    }
    if tmode != 0 && (bs.s.struct_size as usize) < std::mem::size_of::<lshk_graph_stats>() {
        v.err("stats struct_size too small");
    }
    let stp: *mut lshk_graph_stats = if tmode == 0 {
        null_mut()
    } else {
        (&mut bs as *mut BigGraphStats).cast()
    };
    c.desc = format!(
        "graph query storage {} rows {} nq {nq} qs {q_stride} k {k} ef {ef} scores {use_scores} tmode {tmode} muts {what:?}",
        gx.storage, gx.rows
    );
    let q0 = bits(&q.v);
    let (oi0, os0) = (oi.v.clone(), bits(&os.v));
    let (qp, oip) = (q.ptr(), oi.mptr());
    let osp = if use_scores { os.mptr() } else { null_mut() };
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_graph_query", || unsafe {
        lshk_graph_query(handle, qp, nq, q_stride, k, ef, oip, osp, stp)
    });
    if bits(&q.v) != q0 {
        c.fail("lshk_graph_query changed an input".into());
    }
    if !c.judge("lshk_graph_query", st, &v) {
        if st != LSHK_STATUS_OK
            && (oi.v != oi0
                || bits(&os.v) != os0
                || (bs.s.reserved, bs.s.distances) != (0xA5A5, 0xA5A5)
                || bs.tail != [7, 7])
        {
            c.fail(format!(
                "lshk_graph_query failed with {st} but wrote an output"
            ));
        }
        return;
    }
    let kk = k as usize;
    let nk = nq * kk;
    if oi.v[nk] != CANARY
        || (use_scores && os.v[nk].to_bits() != CANARY)
        || bs.tail != [7, 7]
        || bs.s.reserved != 0xA5A5
    {
        c.fail("lshk_graph_query wrote past its outputs".into());
    }
    // Reference 1: the Rust API on an identically built graph.
    let mut ri = vec![0u32; nk];
    let mut rs = vec![0f32; nk];
    let mut rst = lshk::graph::GraphStats::default();
    let qd = &q.data()[..strided(nq, dim, q_stride).unwrap() as usize];
    if let Err(e) = gx.mirror.search_stats(
        lshk::isa::active(),
        qd,
        nq,
        q_stride,
        kk,
        ef as usize,
        &mut ri,
        &mut rs,
        Some(&mut rst),
    ) {
        c.fail(format!(
            "lshk_graph_query returned OK, Graph::search refused: {e}"
        ));
        return;
    }
    if oi.data()[..nk] != ri[..] || (use_scores && bits(&os.data()[..nk]) != bits(&rs)) {
        c.fail(format!(
            "lshk_graph_query: ids {:?} vs Rust {:?}",
            &oi.data()[..nk],
            ri
        ));
    }
    if tmode != 0 && bs.s.distances != rst.distances {
        c.fail("lshk_graph_query: stats differ from Graph::search_stats".into());
    }
    // Reference 2 (independent): a pool of every row on f32 storage is
    // the exact top-k up to ties within the f32 bound.
    if ef as usize >= gx.rows && gx.storage == LSHK_GRAPH_STORAGE_F32 {
        for qi in 0..nq {
            let qv = &qd[qi * q_stride..qi * q_stride + dim];
            let mut all: Vec<(f64, f64)> = (0..gx.rows)
                .map(|rr| {
                    let (mut e, mut a) = (gx.bias[rr] as f64, gx.bias[rr].abs() as f64);
                    for (&x, &y) in gx.w[rr * dim..(rr + 1) * dim].iter().zip(qv) {
                        let p = x as f64 * y as f64;
                        e += p;
                        a += p.abs();
                    }
                    (e, a)
                })
                .collect();
            all.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap());
            let maxb = all.iter().fold(0f64, |m, x| m.max(x.1)) * gamma(dim + 2) * 2.0;
            for t in 0..kk {
                let (id, s) = (ri[qi * kk + t], rs[qi * kk + t]);
                if t >= gx.rows {
                    if id != u32::MAX || s != f32::NEG_INFINITY {
                        c.fail("a full graph search beyond rows is not padded".into());
                    }
                    continue;
                }
                if id as usize >= gx.rows {
                    c.fail(format!("full graph search: id {id} out of range"));
                    break;
                }
                let (mut e, mut a) = (
                    gx.bias[id as usize] as f64,
                    gx.bias[id as usize].abs() as f64,
                );
                for (&x, &y) in gx.w[id as usize * dim..(id as usize + 1) * dim]
                    .iter()
                    .zip(qv)
                {
                    let p = x as f64 * y as f64;
                    e += p;
                    a += p.abs();
                }
                if (s as f64 - e).abs() > gamma(dim + 2) * a + 1e-40
                    || (e - all[t].0).abs() > maxb + 1e-40
                {
                    c.fail(format!(
                        "full graph search: rank {t} id {id} score {s} exact {e}, brute force {}",
                        all[t].0
                    ));
                }
            }
        }
    }
}

fn fuzz_graph_build(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut rows = 1 + r.u(60);
    let mut dim = 1 + r.u(12);
    let mut w_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut p = lshk_graph_params_default();
    p.m = r.pick(&[2, 3, 4, 8]);
    p.ef_construction = r.pick(&[1, 4, 16]);
    p.storage = r.pick(&[
        LSHK_GRAPH_STORAGE_F32,
        LSHK_GRAPH_STORAGE_BF16,
        LSHK_GRAPH_STORAGE_I8,
    ]);
    p.threads = r.pick(&[0, 1, 2]);
    p.seed = r.0.next_u64();
    let wl = (rows - 1) * w_stride + dim;
    let mut w = Arr::new((0..wl).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut bias = Arr::new((0..rows).map(|_| r.f(-0.5, 0.5)).collect(), 0.0f32);
    let mut use_bias = !r.one_in(3);
    let mut pmode = r.pick(&[0, 0, 0, 1, 2]); // 0 struct, 1 NULL, 2 big
    let mut out_mode = Mode::Ok;
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(11);
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
            5 => p.m = r.pick(&[0, 1, 257, hv32, 256]),
            6 => match r.u(3) {
                0 => p.storage = r.pick(&[3, u32::MAX]),
                1 => p.reserved = r.pick(&[1, u32::MAX]),
                _ => p.ef_construction = 0,
            },
            7 => {
                pmode = 0;
                let full = std::mem::size_of::<lshk_graph_params>() as u32;
                p.struct_size = r.pick(&[0, 8, full - 1]);
            }
            8 if w.len() > 0 => {
                let j = r.u(w.len());
                w.data_mut()[j] = r.special();
            }
            9 => {
                use_bias = true;
                let j = r.u(bias.len());
                bias.data_mut()[j] = r.special();
            }
            _ => out_mode = r.pick(&[Mode::Null, Mode::Mis]),
        }
    }
    if pmode == 2 {
        p.struct_size = std::mem::size_of::<BigGraphParams>() as u32;
    }
    let eff = if pmode == 1 {
        lshk_graph_params_default()
    } else {
        p
    };
    if out_mode != Mode::Ok {
        v.err("bad out");
    }
    if pmode != 1 && (p.struct_size as usize) < std::mem::size_of::<lshk_graph_params>() {
        v.err("struct_size too small");
    }
    if eff.storage > 2 || eff.reserved != 0 {
        v.err("bad storage / reserved");
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
    if !(2..=256).contains(&eff.m) || eff.ef_construction == 0 {
        v.err("m or ef_construction out of range");
    }
    let mut overflow = false;
    if v.expect_err.is_none() {
        let wd = w.data();
        let bad_w = (0..rows).any(|rr| {
            wd[rr * w_stride..rr * w_stride + dim]
                .iter()
                .any(|x| !x.is_finite())
        });
        let bad_b = use_bias && bias.data()[..rows].iter().any(|x| !x.is_finite());
        if bad_w || bad_b {
            v.err("non-finite W or bias");
        } else {
            // |[w; b]|^2 overflowing f32 (a special value 3e38 or f32::MAX).
            let n2 = (0..rows)
                .map(|rr| {
                    let b = if use_bias {
                        bias.data()[rr] as f64
                    } else {
                        0.0
                    };
                    wd[rr * w_stride..rr * w_stride + dim]
                        .iter()
                        .map(|&x| x as f64 * x as f64)
                        .sum::<f64>()
                        + b * b
                })
                .fold(0f64, f64::max);
            if n2 > 1e37 {
                overflow = true;
            }
        }
    }
    c.desc = format!(
        "graph build rows {rows} dim {dim} stride {w_stride} m {} efc {} storage {} reserved {} pmode {pmode} bias {use_bias} muts {what:?}",
        eff.m, eff.ef_construction, eff.storage, eff.reserved
    );
    let big = BigGraphParams {
        p,
        tail: [0xEE; 24],
    };
    let pp: *const lshk_graph_params = match pmode {
        1 => null(),
        2 => (&big as *const BigGraphParams).cast(),
        _ => &p,
    };
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_graph;
    let mut outv: [*mut lshk_graph; 2] = [canary, canary];
    let outp: *mut *mut lshk_graph = match out_mode {
        Mode::Ok => outv.as_mut_ptr(),
        Mode::Null => null_mut(),
        Mode::Mis => outv.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
    };
    let (wp, bp) = (w.ptr(), if use_bias { bias.ptr() } else { null() });
    let (w0, b0) = (bits(&w.v), bits(&bias.v));
    // SAFETY: as in fuzz_matmul.
    let st = c.call("lshk_graph_build", || unsafe {
        lshk_graph_build(wp, bp, rows, dim, w_stride, pp, outp)
    });
    if bits(&w.v) != w0 || bits(&bias.v) != b0 {
        c.fail("lshk_graph_build changed an input".into());
    }
    if overflow {
        // Near f32::MAX the overflow check decides: either outcome is
        // documented (INVALID_ARGUMENT when U^2 overflows f32).
        if st == LSHK_STATUS_OK {
            // SAFETY: a live handle from the call above.
            unsafe { lshk_graph_free(outv[0]) };
        } else if st != LSHK_STATUS_INVALID_ARGUMENT || outv != [canary, canary] {
            c.fail(format!("lshk_graph_build: {st} on a huge row"));
        }
        return;
    }
    if !c.judge("lshk_graph_build", st, &v) {
        if st != LSHK_STATUS_OK && outv != [canary, canary] {
            c.fail("lshk_graph_build failed but wrote *out".into());
        }
        return;
    }
    let h = outv[0];
    if outv[1] != canary {
        c.fail("lshk_graph_build wrote past *out".into());
    }
    // Reference: the Rust build (one thread: the graph does not depend on
    // it) answers the same queries bit for bit, with the same shape and
    // memory.
    let bs = use_bias.then(|| &bias.data()[..rows]);
    let wd = &w.data()[..strided(rows, dim, w_stride).unwrap() as usize];
    let mirror = lshk::graph::Graph::build(
        wd,
        bs,
        rows,
        dim,
        w_stride,
        &graph_params(eff.m, eff.ef_construction, eff.storage, eff.seed),
    )
    .unwrap();
    let (mut sr, mut sd, mut mem) = (0usize, 0usize, 0usize);
    // SAFETY: a live handle; writable outputs.
    let s2 =
        unsafe { lshk_graph_shape(h, &mut sr, &mut sd) | lshk_graph_memory_bytes(h, &mut mem) };
    if s2 != LSHK_STATUS_OK || (sr, sd) != (rows, dim) || mem != mirror.memory_bytes() {
        c.fail("lshk_graph_build: shape or memory differ from Graph::build's".into());
    }
    let nq = 3;
    let qs: Vec<f32> = (0..nq * dim)
        .map(|i| wd[(i % dim) + (i / dim % rows) * w_stride] + 0.125)
        .collect();
    let kk = 4;
    for ef in [1u32, 8, u32::MAX] {
        let (mut ci, mut cs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        let (mut ri, mut rs) = (vec![0u32; nq * kk], vec![0f32; nq * kk]);
        // SAFETY: nq queries of dim floats; outputs of nq * k.
        let s3 = unsafe {
            lshk_graph_query(
                h,
                qs.as_ptr(),
                nq,
                dim,
                kk as u32,
                ef,
                ci.as_mut_ptr(),
                cs.as_mut_ptr(),
                null_mut(),
            )
        };
        mirror
            .search(&qs, nq, dim, kk, ef as usize, &mut ri, &mut rs)
            .unwrap();
        if s3 != LSHK_STATUS_OK || ci != ri || bits(&cs) != bits(&rs) {
            c.fail(format!(
                "lshk_graph_build: ef {ef} query {ci:?} differs from the Rust graph's {ri:?}"
            ));
        }
    }
    // SAFETY: a live handle from lshk_graph_build.
    unsafe { lshk_graph_free(h) };
}
