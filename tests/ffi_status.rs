//! The C entry points called from Rust (`lshk::ffi::...`): every status a
//! SimHash entry point can return, each with a canary proving nothing was
//! written, plus the cases C cannot express without undefined behaviour
//! (misaligned pointers) and the per-thread last-error message.
//! `ffi_tests/simhash.c` covers the same ground from C.
//!
//! LSHK_STATUS_PANIC cannot be provoked without a bug; INDEX_OUT_OF_RANGE,
//! IO_ERROR and BAD_FILE_FORMAT are not returned by SimHash.

mod common;

use std::ffi::CStr;
use std::ptr;
use std::sync::{Mutex, MutexGuard};

use lshk::ffi::simhash::*;
use lshk::ffi::*;

/// `lshk_isa_set_max` changes a process-wide cap: tests in this binary run
/// one at a time so none sees another's cap.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

const DIM: u32 = 37;
const K: u32 = 7;
const L: u32 = 5;
const N: usize = 6;
const NP: usize = (K * L) as usize;
const CANARY_U32: u32 = 0xA5A5_A5A5;

fn name(s: lshk_status) -> String {
    // SAFETY: lshk_status_name returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(lshk_status_name(s)) }
        .to_str()
        .unwrap()
        .to_string()
}

fn last_error() -> String {
    // SAFETY: NULL with length 0 is the documented size query.
    let len = unsafe { lshk_last_error_message(ptr::null_mut(), 0) };
    let mut buf = vec![0u8; len + 1];
    // SAFETY: buf holds len + 1 writable bytes.
    let got = unsafe { lshk_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(got, len);
    CStr::from_bytes_until_nul(&buf)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

/// Asserts a status, and for a failure a non-empty message naming `func`.
#[track_caller]
fn expect(got: lshk_status, want: lshk_status, func: &str) {
    assert_eq!(
        name(got),
        name(want),
        "{func}: message {:?}",
        if got != LSHK_STATUS_OK {
            last_error()
        } else {
            String::new()
        }
    );
    if want != LSHK_STATUS_OK {
        let m = last_error();
        assert!(m.starts_with(func), "message {m:?} should name {func}");
    }
}

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut r = lshk::rng::SplitMix64::new(seed);
    (0..len).map(|_| r.next_normal() as f32).collect()
}

fn new_family(sparsity: u32, seed: u64) -> *mut lshk_simhash {
    let mut h = ptr::null_mut();
    expect(
        lshk_simhash_new(DIM, K, L, sparsity, seed, &mut h),
        LSHK_STATUS_OK,
        "lshk_simhash_new",
    );
    assert!(!h.is_null());
    h
}

fn free(h: *mut lshk_simhash) {
    // SAFETY: h came from lshk_simhash_new and is freed once.
    expect(
        unsafe { lshk_simhash_free(h) },
        LSHK_STATUS_OK,
        "lshk_simhash_free",
    );
}

#[test]
fn status_names_and_version() {
    let _g = serial();
    for s in lshk::Status::ALL {
        assert_eq!(name(s as u32), s.name());
    }
    // The last status, then the first value that is none.
    assert_eq!(name(LSHK_STATUS_UNSUPPORTED), "LSHK_STATUS_UNSUPPORTED");
    assert_eq!(LSHK_STATUS_UNSUPPORTED, 13);
    assert_eq!(name(14), "LSHK_STATUS_UNKNOWN");
    assert_eq!(name(u32::MAX), "LSHK_STATUS_UNKNOWN");
    // SAFETY: static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(lshk_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn last_error_message_is_per_thread_and_truncates() {
    let _g = serial();
    // A fresh thread has no message: 0, and an empty string is written.
    std::thread::spawn(|| {
        let mut buf = [b'x'; 4];
        // SAFETY: NULL/0 query; then a 4-byte buffer.
        unsafe {
            assert_eq!(lshk_last_error_message(ptr::null_mut(), 0), 0);
            assert_eq!(lshk_last_error_message(buf.as_mut_ptr().cast(), 4), 0);
        }
        assert_eq!(buf, [0, b'x', b'x', b'x']);
    })
    .join()
    .unwrap();

    let mut h = ptr::null_mut();
    expect(
        lshk_simhash_new(0, K, L, 0, 1, &mut h),
        LSHK_STATUS_INVALID_ARGUMENT,
        "lshk_simhash_new",
    );
    let full = last_error();
    assert!(full.contains("dim"), "{full}");
    let len = full.len();
    for cap in [1usize, 2, 5, len, len + 1, len + 10] {
        let mut buf = vec![b'x'; cap + 3];
        // SAFETY: buf holds cap + 3 >= cap writable bytes.
        let got = unsafe { lshk_last_error_message(buf.as_mut_ptr().cast(), cap) };
        assert_eq!(got, len, "the full length is returned whatever the buffer");
        let n = len.min(cap - 1);
        assert_eq!(&buf[..n], &full.as_bytes()[..n]);
        assert_eq!(buf[n], 0, "NUL-terminated at {n}");
        assert!(
            buf[n + 1..].iter().all(|&b| b == b'x'),
            "nothing after the NUL"
        );
    }
    // Another thread's failure does not touch this thread's message.
    std::thread::spawn(|| {
        let mut h = ptr::null_mut();
        assert_eq!(
            lshk_simhash_new(DIM, 40, L, 0, 1, &mut h),
            LSHK_STATUS_INVALID_ARGUMENT
        );
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), full);
}

#[test]
fn isa_functions() {
    let _g = serial();
    let detected = lshk_isa_detected();
    let active = lshk_isa_active();
    assert!(detected <= LSHK_ISA_AVX512 && active <= detected);
    assert_eq!(detected, lshk::isa::detected() as u32);
    let isa_name = |i| {
        // SAFETY: static NUL-terminated string.
        unsafe { CStr::from_ptr(lshk_isa_name(i)) }
            .to_str()
            .unwrap()
            .to_string()
    };
    for (i, n) in ["scalar", "portable", "avx2", "avx512"].iter().enumerate() {
        assert_eq!(isa_name(i as u32), *n);
    }
    assert_eq!(isa_name(4), "unknown");
    assert_eq!(isa_name(7), "unknown");
    for bad in [4, 7, u32::MAX] {
        expect(
            lshk_isa_set_max(bad),
            LSHK_STATUS_INVALID_ARGUMENT,
            "lshk_isa_set_max",
        );
        assert_eq!(lshk_isa_active(), active);
    }
    for cap in [LSHK_ISA_SCALAR, LSHK_ISA_PORTABLE, LSHK_ISA_AVX2] {
        expect(lshk_isa_set_max(cap), LSHK_STATUS_OK, "lshk_isa_set_max");
        assert_eq!(lshk_isa_active(), cap.min(active));
        assert_eq!(lshk_isa_detected(), detected);
    }
    expect(
        lshk_isa_set_max(LSHK_ISA_AVX512),
        LSHK_STATUS_OK,
        "lshk_isa_set_max",
    );
    assert_eq!(
        lshk_isa_active(),
        active,
        "raising the cap restores the tier"
    );
    println!("{}", common::tiers::machine_line());
}

#[test]
fn new_and_from_planes_errors() {
    let _g = serial();
    let sentinel = 0x1000 as *mut lshk_simhash; // aligned, never written
    let mut h = sentinel;
    let f = "lshk_simhash_new";
    expect(
        lshk_simhash_new(DIM, K, L, 0, 1, ptr::null_mut()),
        LSHK_STATUS_NULL_POINTER,
        f,
    );
    for (d, k, l) in [(0, K, L), (DIM, 0, L), (DIM, 33, L), (DIM, K, 0)] {
        for s in [0, 1, 3] {
            expect(
                lshk_simhash_new(d, k, l, s, 1, &mut h),
                LSHK_STATUS_INVALID_ARGUMENT,
                f,
            );
        }
    }
    expect(
        lshk_simhash_new(u32::MAX, 32, u32::MAX, 0, 1, &mut h),
        LSHK_STATUS_SIZE_OVERFLOW,
        f,
    );
    // 2^50 floats (4 PiB): a valid size no address space can hold.
    expect(
        lshk_simhash_new(1 << 24, 32, 1 << 21, 0, 1, &mut h),
        LSHK_STATUS_ALLOCATION_FAILED,
        f,
    );
    // A misaligned `out`.
    let mut slots = [0u64; 3];
    let mis = (slots.as_mut_ptr() as usize + 1) as *mut *mut lshk_simhash;
    expect(
        lshk_simhash_new(DIM, K, L, 0, 1, mis),
        LSHK_STATUS_INVALID_ARGUMENT,
        f,
    );
    assert_eq!(slots, [0; 3]);
    assert_eq!(h, sentinel);

    let f = "lshk_simhash_from_planes";
    let mut planes = data(NP * DIM as usize, 3);
    // SAFETY (all calls below): `planes` holds K*L*DIM floats; the other
    // pointers are NULL, misaligned or valid as each case says.
    unsafe {
        expect(
            lshk_simhash_from_planes(ptr::null(), DIM, K, L, &mut h),
            LSHK_STATUS_NULL_POINTER,
            f,
        );
        expect(
            lshk_simhash_from_planes(planes.as_ptr(), DIM, K, L, ptr::null_mut()),
            LSHK_STATUS_NULL_POINTER,
            f,
        );
        for (d, k, l) in [(0, K, L), (DIM, 0, L), (DIM, 33, L), (DIM, K, 0)] {
            expect(
                lshk_simhash_from_planes(planes.as_ptr(), d, k, l, &mut h),
                LSHK_STATUS_INVALID_ARGUMENT,
                f,
            );
        }
        expect(
            lshk_simhash_from_planes(planes.as_ptr(), u32::MAX, 32, u32::MAX, &mut h),
            LSHK_STATUS_SIZE_OVERFLOW,
            f,
        );
        let mis_planes = (planes.as_ptr() as usize + 2) as *const f32;
        expect(
            lshk_simhash_from_planes(mis_planes, 1, 1, 1, &mut h),
            LSHK_STATUS_INVALID_ARGUMENT,
            f,
        );
        for (i, bad) in [
            (0, f32::NAN),
            (100, f32::INFINITY),
            (NP * DIM as usize - 1, f32::NEG_INFINITY),
        ] {
            let keep = planes[i];
            planes[i] = bad;
            expect(
                lshk_simhash_from_planes(planes.as_ptr(), DIM, K, L, &mut h),
                LSHK_STATUS_NON_FINITE,
                f,
            );
            planes[i] = keep;
        }
    }
    assert_eq!(h, sentinel);
}

#[derive(Clone, Copy, Debug)]
enum Entry {
    Hash,
    HashIsa(u32),
    Project,
    ProjectIsa(u32),
}

impl Entry {
    fn func(self) -> &'static str {
        match self {
            Entry::Hash => "lshk_simhash_hash",
            Entry::HashIsa(_) => "lshk_simhash_hash_isa",
            Entry::Project => "lshk_simhash_project",
            Entry::ProjectIsa(_) => "lshk_simhash_project_isa",
        }
    }
    fn per_row(self) -> usize {
        match self {
            Entry::Hash | Entry::HashIsa(_) => L as usize,
            _ => NP,
        }
    }
    /// Calls the entry point with an output of u32 or f32 (both 4 bytes) at
    /// `out`.
    ///
    /// # Safety
    /// As the C functions: `x` spans what (n, stride) say, `out` holds
    /// `out_len` writable elements (or the call rejects them first).
    unsafe fn call(
        self,
        h: *const lshk_simhash,
        x: *const f32,
        n: usize,
        stride: usize,
        out: *mut u32,
        out_len: usize,
    ) -> lshk_status {
        // SAFETY: forwarded.
        unsafe {
            match self {
                Entry::Hash => lshk_simhash_hash(h, x, n, stride, out, out_len),
                Entry::HashIsa(t) => lshk_simhash_hash_isa(t, h, x, n, stride, out, out_len),
                Entry::Project => lshk_simhash_project(h, x, n, stride, out.cast(), out_len),
                Entry::ProjectIsa(t) => {
                    lshk_simhash_project_isa(t, h, x, n, stride, out.cast(), out_len)
                }
            }
        }
    }
}

/// (what, h, x, n, x_stride, out, out_len, expected status).
type Case = (
    &'static str,
    *const lshk_simhash,
    *const f32,
    usize,
    usize,
    *mut u32,
    usize,
    lshk_status,
);

#[test]
fn hash_and_project_errors_write_nothing() {
    let _g = serial();
    let h = new_family(0, 5);
    let dim = DIM as usize;
    let x = data(N * dim + 8, 6);
    let entries = [
        Entry::Hash,
        Entry::HashIsa(LSHK_ISA_SCALAR),
        Entry::HashIsa(lshk_isa_detected()),
        Entry::Project,
        Entry::ProjectIsa(LSHK_ISA_SCALAR),
        Entry::ProjectIsa(lshk_isa_detected()),
    ];
    for e in entries {
        let f = e.func();
        let need = N * e.per_row();
        let mut out = vec![CANARY_U32; need + 8];
        let o = out.as_mut_ptr();
        let xp = x.as_ptr();
        let huge = usize::MAX / 2;
        let mis_x = (xp as usize + 1) as *const f32;
        let mis_o = (o as usize + 2) as *mut u32;
        let cases: Vec<Case> = vec![
            (
                "h NULL",
                ptr::null(),
                xp,
                N,
                dim,
                o,
                need,
                LSHK_STATUS_NULL_POINTER,
            ),
            (
                "x NULL",
                h,
                ptr::null(),
                N,
                dim,
                o,
                need,
                LSHK_STATUS_NULL_POINTER,
            ),
            (
                "out NULL",
                h,
                xp,
                N,
                dim,
                ptr::null_mut(),
                need,
                LSHK_STATUS_NULL_POINTER,
            ),
            (
                "stride < dim",
                h,
                xp,
                N,
                dim - 1,
                o,
                need,
                LSHK_STATUS_INVALID_ARGUMENT,
            ),
            (
                "stride 0",
                h,
                xp,
                N,
                0,
                o,
                need,
                LSHK_STATUS_INVALID_ARGUMENT,
            ),
            (
                "x misaligned",
                h,
                mis_x,
                N,
                dim,
                o,
                need,
                LSHK_STATUS_INVALID_ARGUMENT,
            ),
            (
                "out misaligned",
                h,
                xp,
                N,
                dim,
                mis_o,
                need,
                LSHK_STATUS_INVALID_ARGUMENT,
            ),
            (
                "out_len short",
                h,
                xp,
                N,
                dim,
                o,
                need - 1,
                LSHK_STATUS_BUFFER_TOO_SMALL,
            ),
            (
                "out_len 0",
                h,
                xp,
                N,
                dim,
                o,
                0,
                LSHK_STATUS_BUFFER_TOO_SMALL,
            ),
            (
                "out NULL, len 0",
                h,
                xp,
                N,
                dim,
                ptr::null_mut(),
                0,
                LSHK_STATUS_BUFFER_TOO_SMALL,
            ),
            (
                "n*stride overflows",
                h,
                xp,
                huge,
                dim,
                o,
                need,
                LSHK_STATUS_SIZE_OVERFLOW,
            ),
            (
                "stride overflows",
                h,
                xp,
                2,
                huge,
                o,
                need,
                LSHK_STATUS_SIZE_OVERFLOW,
            ),
            (
                "x span > isize::MAX bytes",
                h,
                xp,
                usize::MAX / 4 / dim,
                dim,
                o,
                usize::MAX,
                LSHK_STATUS_SIZE_OVERFLOW,
            ),
        ];
        for (what, hh, xx, n, stride, oo, len, want) in cases {
            // SAFETY: every case is rejected before any memory is read or
            // written; the valid pointers are large enough anyway.
            let got = unsafe { e.call(hh, xx, n, stride, oo, len) };
            assert_eq!(name(got), name(want), "{e:?} {what}: {}", last_error());
            assert!(last_error().starts_with(f));
            assert!(
                out.iter().all(|&v| v == CANARY_U32),
                "{e:?} {what} wrote output"
            );
        }
        // n = 0: a no-op, NULL buffers allowed, nothing written.
        // SAFETY: n = 0 reads and writes nothing.
        unsafe {
            expect(
                e.call(h, ptr::null(), 0, dim, ptr::null_mut(), 0),
                LSHK_STATUS_OK,
                f,
            );
            expect(e.call(h, xp, 0, dim, o, need), LSHK_STATUS_OK, f);
        }
        assert!(out.iter().all(|&v| v == CANARY_U32));
    }

    // Tier values from C are validated; a tier the CPU lacks is refused.
    let mut out = vec![CANARY_U32; N * NP];
    for t in [4, 7, u32::MAX] {
        for e in [Entry::HashIsa(t), Entry::ProjectIsa(t)] {
            // SAFETY: rejected before reading/writing.
            let got = unsafe { e.call(h, x.as_ptr(), N, dim, out.as_mut_ptr(), N * NP) };
            expect(got, LSHK_STATUS_INVALID_ARGUMENT, e.func());
        }
    }
    if lshk_isa_detected() < LSHK_ISA_AVX512 {
        for e in [
            Entry::HashIsa(LSHK_ISA_AVX512),
            Entry::ProjectIsa(LSHK_ISA_AVX512),
        ] {
            // SAFETY: rejected before reading/writing.
            let got = unsafe { e.call(h, x.as_ptr(), N, dim, out.as_mut_ptr(), N * NP) };
            expect(got, LSHK_STATUS_UNSUPPORTED_ISA, e.func());
        }
    } else {
        println!("skipped: UNSUPPORTED_ISA case (this CPU has every tier)");
    }
    assert!(out.iter().all(|&v| v == CANARY_U32));

    // copy_planes and shape.
    let mut planes = vec![f32::from_bits(CANARY_U32); NP * dim + 4];
    let f = "lshk_simhash_copy_planes";
    // SAFETY: planes holds NP*dim + 4 floats; rejected calls write nothing.
    unsafe {
        expect(
            lshk_simhash_copy_planes(ptr::null(), planes.as_mut_ptr(), NP * dim),
            LSHK_STATUS_NULL_POINTER,
            f,
        );
        expect(
            lshk_simhash_copy_planes(h, ptr::null_mut(), NP * dim),
            LSHK_STATUS_NULL_POINTER,
            f,
        );
        expect(
            lshk_simhash_copy_planes(h, planes.as_mut_ptr(), NP * dim - 1),
            LSHK_STATUS_BUFFER_TOO_SMALL,
            f,
        );
        expect(
            lshk_simhash_copy_planes(h, ptr::null_mut(), 0),
            LSHK_STATUS_BUFFER_TOO_SMALL,
            f,
        );
        let mis = (planes.as_mut_ptr() as usize + 1) as *mut f32;
        expect(
            lshk_simhash_copy_planes(h, mis, NP * dim),
            LSHK_STATUS_INVALID_ARGUMENT,
            f,
        );
    }
    assert!(planes.iter().all(|v| v.to_bits() == CANARY_U32));
    let mut d = CANARY_U32;
    // SAFETY: NULL handle is rejected; d is writable.
    unsafe {
        expect(
            lshk_simhash_shape(ptr::null(), &mut d, ptr::null_mut(), ptr::null_mut()),
            LSHK_STATUS_NULL_POINTER,
            "lshk_simhash_shape",
        );
    }
    assert_eq!(d, CANARY_U32);
    free(h);
}

#[test]
fn freed_foreign_and_misaligned_handles() {
    let _g = serial();
    let dim = DIM as usize;
    let x = data(N * dim, 8);
    let freed = new_family(0, 9);
    free(freed);
    let foreign_mem = Box::new([0u64; 4]);
    let foreign = foreign_mem.as_ptr() as *mut lshk_simhash;
    let misaligned = (foreign_mem.as_ptr() as usize + 4) as *mut lshk_simhash;
    // No lshk_simhash_new until the end: the freed slot is not reused.
    for (what, bad) in [
        ("freed", freed),
        ("foreign", foreign),
        ("misaligned", misaligned),
    ] {
        let mut out = vec![CANARY_U32; N * NP + 4];
        for e in [
            Entry::Hash,
            Entry::HashIsa(LSHK_ISA_SCALAR),
            Entry::Project,
            Entry::ProjectIsa(LSHK_ISA_SCALAR),
        ] {
            // SAFETY: the handle is rejected before anything else.
            let got = unsafe { e.call(bad, x.as_ptr(), N, dim, out.as_mut_ptr(), out.len()) };
            assert_eq!(name(got), name(LSHK_STATUS_INVALID_HANDLE), "{what} {e:?}");
        }
        let mut d = CANARY_U32;
        // SAFETY: rejected handle; valid output buffers.
        unsafe {
            expect(
                lshk_simhash_copy_planes(bad, out.as_mut_ptr().cast(), out.len()),
                LSHK_STATUS_INVALID_HANDLE,
                "lshk_simhash_copy_planes",
            );
            expect(
                lshk_simhash_shape(bad, &mut d, ptr::null_mut(), ptr::null_mut()),
                LSHK_STATUS_INVALID_HANDLE,
                "lshk_simhash_shape",
            );
            expect(
                lshk_simhash_free(bad),
                LSHK_STATUS_INVALID_HANDLE,
                "lshk_simhash_free",
            );
        }
        assert!(out.iter().all(|&v| v == CANARY_U32), "{what}");
        assert_eq!(d, CANARY_U32);
    }
    assert_eq!(*foreign_mem, [0; 4], "a foreign handle is never written");
    // SAFETY: NULL is a no-op.
    expect(
        unsafe { lshk_simhash_free(ptr::null_mut()) },
        LSHK_STATUS_OK,
        "lshk_simhash_free",
    );
}

/// Happy paths: hash agrees with the sign of project on every tier (up to
/// bits within rounding of zero), and from_planes(copy_planes(h)) gives the
/// same planes and, for dense families, the same codes.
#[test]
fn hash_project_and_plane_round_trip() {
    let _g = serial();
    let tiers = common::tiers::for_this_test();
    let dim = DIM as usize;
    let stride = dim + 5;
    let mut x = vec![f32::NAN; N * stride]; // NaN padding is never read
    let vals = data(N * dim, 10);
    for i in 0..N {
        x[i * stride..i * stride + dim].copy_from_slice(&vals[i * dim..(i + 1) * dim]);
    }
    for sparsity in [0, 1, 3] {
        let h = new_family(sparsity, 11);
        let mut planes = vec![0f32; NP * dim];
        // SAFETY: buffers sized as the calls require.
        unsafe {
            expect(
                lshk_simhash_copy_planes(h, planes.as_mut_ptr(), planes.len()),
                LSHK_STATUS_OK,
                "copy",
            );
        }
        for t in tiers.iter().map(|&t| t as u32) {
            let mut codes = vec![0u32; N * L as usize];
            let mut proj = vec![0f32; N * NP];
            // SAFETY: x spans N rows of `stride`; outputs sized exactly.
            unsafe {
                expect(
                    lshk_simhash_hash_isa(
                        t,
                        h,
                        x.as_ptr(),
                        N,
                        stride,
                        codes.as_mut_ptr(),
                        codes.len(),
                    ),
                    LSHK_STATUS_OK,
                    "hash",
                );
                expect(
                    lshk_simhash_project_isa(
                        t,
                        h,
                        x.as_ptr(),
                        N,
                        stride,
                        proj.as_mut_ptr(),
                        proj.len(),
                    ),
                    LSHK_STATUS_OK,
                    "project",
                );
            }
            let mut excused = 0;
            for i in 0..N {
                for p in 0..NP {
                    let (l, k) = (p / K as usize, p % K as usize);
                    let bit = (codes[i * L as usize + l] >> k) & 1;
                    let v = proj[i * NP + p];
                    if (v > 0.0) as u32 != bit {
                        // Two independently rounded sums of dim products.
                        let scale: f32 = (0..dim)
                            .map(|j| (x[i * stride + j] * planes[p * dim + j]).abs())
                            .sum();
                        let bound = 2.0 * dim as f32 * f32::EPSILON / 2.0 * scale;
                        assert!(
                            v.abs() <= bound,
                            "tier {t} s {sparsity} row {i} plane {p}: {v} vs bit {bit}"
                        );
                        excused += 1;
                    }
                }
                for l in 0..L as usize {
                    assert_eq!(codes[i * L as usize + l] >> K, 0, "bits above K are 0");
                }
            }
            println!("sparsity {sparsity} tier {t}: hash == sign(project), {excused} near-zero bits excused");
        }
        // Round trip through from_planes.
        let mut r = ptr::null_mut();
        let mut again = vec![0f32; NP * dim];
        // SAFETY: planes holds K*L*dim floats; again is as large.
        unsafe {
            expect(
                lshk_simhash_from_planes(planes.as_ptr(), DIM, K, L, &mut r),
                LSHK_STATUS_OK,
                "from_planes",
            );
            expect(
                lshk_simhash_copy_planes(r, again.as_mut_ptr(), again.len()),
                LSHK_STATUS_OK,
                "copy",
            );
        }
        assert_eq!(
            planes.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            again.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        if sparsity == 0 {
            for &t in &tiers {
                let mut a = vec![0u32; N * L as usize];
                let mut b = vec![1u32; N * L as usize];
                // SAFETY: as above.
                unsafe {
                    lshk_simhash_hash_isa(
                        t as u32,
                        h,
                        x.as_ptr(),
                        N,
                        stride,
                        a.as_mut_ptr(),
                        a.len(),
                    );
                    lshk_simhash_hash_isa(
                        t as u32,
                        r,
                        x.as_ptr(),
                        N,
                        stride,
                        b.as_mut_ptr(),
                        b.len(),
                    );
                }
                assert_eq!(
                    a, b,
                    "tier {t:?}: from_planes(copy_planes(h)) hashes like h"
                );
            }
        }
        free(r);
        free(h);
    }
}
