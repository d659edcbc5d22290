//! The shared machinery: the seeded mutator (`R`, `Arr`), the verdict of one execution, the run context, status/message helpers and the tier bookkeeping.

use super::*;

pub(crate) const CAP: u128 = 1 << 22;
pub(crate) const HUGE: [usize; 7] = [
    usize::MAX,
    usize::MAX - 1,
    1 << 63,
    1 << 62,
    (1 << 61) + 1,
    isize::MAX as usize,
    (isize::MAX as usize) / 4 + 1,
];
pub(crate) const HUGE32: [u32; 4] = [u32::MAX, u32::MAX - 1, 1 << 31, 1 << 24];
pub(crate) const CANARY: u32 = 0xA5A5_A5A5;

pub(crate) struct R(pub(crate) SplitMix64);
impl R {
    pub(crate) fn u(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.u(n) == 0
    }
    pub(crate) fn f(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.0.next_f64_open() as f32
    }
    pub(crate) fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.u(v.len())]
    }
    pub(crate) fn u32(&mut self) -> u32 {
        self.0.next_u64() as u32
    }
    /// A size mutated: off by one either way, zero, or huge.
    pub(crate) fn size(&mut self, v: usize) -> usize {
        match self.u(5) {
            0 => v.wrapping_add(1),
            1 => v.saturating_sub(1),
            2 => 0,
            3 => self.pick(&HUGE),
            _ => v.saturating_add(1 + self.u(8)),
        }
    }
    pub(crate) fn special(&mut self) -> f32 {
        self.pick(&[
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e17,
            -1e17,
            f32::MIN_POSITIVE / 8.0,
            f32::from_bits(1),
            // Finite, but products and sums of them overflow f32.
            1e19,
            -1e30,
            3e38,
            f32::MAX,
        ])
    }
    /// Spoils float data: one element set to a [`R::special`] value (three
    /// times in four), or every element scaled by a factor of 1e18 to 3e38
    /// (clamped to the finite range), so that finite inputs overflow f32
    /// in the call's arithmetic.
    pub(crate) fn spoil(&mut self, v: &mut [f32], j: usize) {
        if self.u(4) != 0 {
            v[j] = self.special();
        } else {
            let f = self.pick(&[1e18f32, 1e20, 1e30, 3e37, 3e38]);
            for x in v.iter_mut() {
                *x = (*x * f).clamp(-f32::MAX, f32::MAX);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Mode {
    Ok,
    Null,
    Mis,
}

/// A caller's buffer: `len()` usable elements plus one slack element.
#[derive(Clone)]
pub(crate) struct Arr<T: Copy> {
    pub(crate) v: Vec<T>,
    pub(crate) mode: Mode,
    pub(crate) slack: T,
}

impl<T: Copy> Arr<T> {
    pub(crate) fn new(mut data: Vec<T>, slack: T) -> Self {
        data.push(slack);
        Arr {
            v: data,
            mode: Mode::Ok,
            slack,
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.v.len() - 1
    }
    pub(crate) fn data(&self) -> &[T] {
        &self.v[..self.len()]
    }
    pub(crate) fn data_mut(&mut self) -> &mut [T] {
        let n = self.len();
        &mut self.v[..n]
    }
    pub(crate) fn ptr(&self) -> *const T {
        match self.mode {
            Mode::Ok => self.v.as_ptr(),
            Mode::Null => null(),
            Mode::Mis => self.v.as_ptr().cast::<u8>().wrapping_add(1).cast(),
        }
    }
    pub(crate) fn mptr(&mut self) -> *mut T {
        match self.mode {
            Mode::Ok => self.v.as_mut_ptr(),
            Mode::Null => null_mut(),
            Mode::Mis => self.v.as_mut_ptr().cast::<u8>().wrapping_add(1).cast(),
        }
    }
    pub(crate) fn shrink_to(&mut self, n: usize) {
        self.v.truncate(n);
        self.v.push(self.slack);
    }
    /// Makes the buffer honour a claimed element count (see module docs).
    pub(crate) fn need(&mut self, claim: Option<u128>, v: &mut Verdict, fill: impl FnMut() -> T) {
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
pub(crate) fn view<T: Copy>(a: &Arr<T>, n: usize) -> &[T] {
    if a.mode == Mode::Ok {
        &a.data()[..n]
    } else {
        &[]
    }
}

pub(crate) fn strided(n: usize, dim: usize, stride: usize) -> Option<u128> {
    if n == 0 {
        Some(0)
    } else {
        Some((n as u128 - 1) * stride as u128 + dim as u128)
    }
}
pub(crate) fn mul(a: usize, b: usize) -> Option<u128> {
    Some(a as u128 * b as u128)
}

#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) expect_err: Option<&'static str>,
    pub(crate) skip: bool,
}
impl Verdict {
    pub(crate) fn err(&mut self, why: &'static str) {
        self.expect_err.get_or_insert(why);
    }
}

pub(crate) struct Ctx {
    pub(crate) r: R,
    pub(crate) seed: u64,
    pub(crate) execs: usize,
    pub(crate) skipped: usize,
    pub(crate) ok: usize,
    pub(crate) failures: Vec<String>,
    pub(crate) exec_no: usize,
    pub(crate) desc: String,
    pub(crate) per_fn: BTreeMap<&'static str, (usize, usize, Duration)>,
    pub(crate) per_target: BTreeMap<&'static str, Duration>,
}

pub(crate) static PROGRESS: AtomicU64 = AtomicU64::new(0);
pub(crate) static DONE: AtomicBool = AtomicBool::new(false);
pub(crate) static CURRENT: Mutex<String> = Mutex::new(String::new());

impl Ctx {
    pub(crate) fn fail(&mut self, msg: String) {
        let m = format!(
            "seed {:#x} exec {} [{}]: {msg}",
            self.seed, self.exec_no, self.desc
        );
        eprintln!("FAIL {m}");
        self.failures.push(m);
    }
    /// Runs one C call: resets the last-error message, times the call.
    pub(crate) fn call(
        &mut self,
        func: &'static str,
        f: impl FnOnce() -> lshk_status,
    ) -> lshk_status {
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
    pub(crate) fn judge(&mut self, func: &str, st: lshk_status, v: &Verdict) -> bool {
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

pub(crate) fn reset_msg() {
    // An invalid tier: fails without changing anything and leaves a
    // message that is not any fuzzed function's.
    assert_ne!(lshk_isa_set_max(0xDEAD), LSHK_STATUS_OK);
}

pub(crate) fn last_msg() -> String {
    // SAFETY: NULL with length 0 asks for the size; then a buffer of n + 1.
    unsafe {
        let n = lshk_last_error_message(null_mut(), 0);
        let mut b = vec![0u8; n + 1];
        lshk_last_error_message(b.as_mut_ptr().cast::<c_char>(), n + 1);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }
}

pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Bit `t` set: an `_isa` call on tier `t` returned OK (tier `t` ran).
pub(crate) static TIERS_RAN: AtomicU32 = AtomicU32::new(0);

pub(crate) fn tier_ran(isa: Option<u32>) {
    if let Some(t) = isa {
        TIERS_RAN.fetch_or(1 << t.min(31), Ordering::Relaxed);
    }
}

/// A tier value: usually a supported one (at most `LSHK_MAX_ISA`, see
/// tests/common/tiers.rs), sometimes unsupported or bad.
pub(crate) fn tier(r: &mut R, v: &mut Verdict) -> u32 {
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

pub(crate) fn f16_to_f64(h: u16) -> f64 {
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

pub(crate) fn gamma(n: usize) -> f64 {
    let u = 2f64.powi(-24);
    n as f64 * u / (1.0 - n as f64 * u)
}

/// Random CSR offsets of `nq` segments of 0..=maxlen entries.
pub(crate) fn csr(r: &mut R, nq: usize, maxlen: usize) -> Vec<usize> {
    let mut o = vec![0usize];
    for _ in 0..nq {
        let l = r.u(maxlen + 1);
        o.push(o.last().unwrap() + l);
    }
    o
}

pub(crate) fn offsets_valid(o: &[usize], total: usize) -> bool {
    !o.is_empty() && o[0] == 0 && o.windows(2).all(|w| w[0] <= w[1]) && *o.last().unwrap() == total
}

/// Mutates one CSR offset (breaking the rules or not).
pub(crate) fn mutate_offsets(r: &mut R, o: &mut [usize]) {
    let j = r.u(o.len());
    o[j] = match r.u(5) {
        0 => o[j].wrapping_add(1),
        1 => o[j].wrapping_sub(1),
        2 => r.pick(&HUGE),
        3 => 0,
        _ => r.u(40),
    };
}

/// Expects NON_FINITE when a query row of a readable `q` (`nq` rows of
/// `dim` at `q_stride`) holds a NaN or infinity (the stride gaps are not
/// looked at).
pub(crate) fn nonfinite_queries(
    v: &mut Verdict,
    q: &Arr<f32>,
    nq: usize,
    dim: usize,
    q_stride: usize,
) {
    if q.mode == Mode::Ok
        && q.data()[..strided(nq, dim, q_stride).unwrap_or(0).min(q.len() as u128) as usize]
            .chunks(q_stride.max(1))
            .any(|row| row[..dim.min(row.len())].iter().any(|x| !x.is_finite()))
    {
        v.err("non-finite query");
    }
}
