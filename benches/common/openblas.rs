//! OpenBLAS loaded at run time with `dlopen` (no build dependency): the
//! peer a user would pick for dense layers and "sgemm + sign" SimHash.
//! Absent library -> `None` and the benchmark prints a skipped line.
#![allow(dead_code)]

use std::ffi::CStr;

type Sgemm = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
    *const f32,
    i32,
    *const f32,
    i32,
    f32,
    *mut f32,
    i32,
);
type Sgemv = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    i32,
    f32,
    *const f32,
    i32,
    *const f32,
    i32,
    f32,
    *mut f32,
    i32,
);
type SetThreads = unsafe extern "C" fn(i32);

pub struct OpenBlas {
    sgemm: Sgemm,
    sgemv: Sgemv,
    pub coretype: String,
}

const ROW_MAJOR: i32 = 101;
const NO_TRANS: i32 = 111;
const TRANS: i32 = 112;

impl OpenBlas {
    /// Loads Debian's OpenBLAS, single-threaded. Its kernel is chosen from
    /// `OPENBLAS_CORETYPE` (set here from the CPU when the caller did not:
    /// OpenBLAS 0.3.21 does not recognise recent CPUs and would fall back
    /// to SSE3 code).
    pub fn load() -> Option<OpenBlas> {
        if std::env::var_os("OPENBLAS_CORETYPE").is_none() {
            let ct = if lshk::isa::detected() >= lshk::Isa::Avx512 {
                "SkylakeX"
            } else {
                "Haswell"
            };
            // SAFETY: set before any thread of this benchmark reads the
            // environment and before OpenBLAS is loaded.
            unsafe { std::env::set_var("OPENBLAS_CORETYPE", ct) };
        }
        std::env::set_var("OPENBLAS_NUM_THREADS", "1");
        let names: [&CStr; 3] = [c"libopenblas.so.0", c"libopenblas.so", c"libblas.so.3"];
        for name in names {
            // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols
            // have the CBLAS signatures declared above.
            unsafe {
                let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
                if h.is_null() {
                    continue;
                }
                let g = libc::dlsym(h, c"cblas_sgemm".as_ptr());
                let v = libc::dlsym(h, c"cblas_sgemv".as_ptr());
                if g.is_null() || v.is_null() {
                    continue;
                }
                let t = libc::dlsym(h, c"openblas_set_num_threads".as_ptr());
                if !t.is_null() {
                    std::mem::transmute::<*mut libc::c_void, SetThreads>(t)(1);
                }
                return Some(OpenBlas {
                    sgemm: std::mem::transmute::<*mut libc::c_void, Sgemm>(g),
                    sgemv: std::mem::transmute::<*mut libc::c_void, Sgemv>(v),
                    coretype: std::env::var("OPENBLAS_CORETYPE").unwrap_or_default(),
                });
            }
        }
        None
    }

    /// C (m x n) = A (m x k) · B(n x k)^T, row-major.
    pub fn sgemm_nt(&self, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
        // SAFETY: lengths checked above.
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                NO_TRANS,
                TRANS,
                m as i32,
                n as i32,
                k as i32,
                1.0,
                a.as_ptr(),
                k as i32,
                b.as_ptr(),
                k as i32,
                0.0,
                c.as_mut_ptr(),
                n as i32,
            )
        }
    }

    /// y (m) = A (m x k) · x (k), row-major.
    pub fn sgemv(&self, m: usize, k: usize, a: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(a.len() >= m * k && x.len() >= k && y.len() >= m);
        // SAFETY: lengths checked above.
        unsafe {
            (self.sgemv)(
                ROW_MAJOR,
                NO_TRANS,
                m as i32,
                k as i32,
                1.0,
                a.as_ptr(),
                k as i32,
                x.as_ptr(),
                1,
                0.0,
                y.as_mut_ptr(),
                1,
            )
        }
    }

    /// Single-thread sgemm peak in GFLOP/s: best of a few 1024^3 products.
    pub fn peak_gflops(&self) -> f64 {
        let n = 1024;
        let a = vec![1.0f32; n * n];
        let b = vec![0.5f32; n * n];
        let mut c = vec![0.0f32; n * n];
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            self.sgemm_nt(n, n, n, &a, &b, &mut c);
            best = best.min(t.elapsed().as_secs_f64());
        }
        2.0 * (n * n * n) as f64 / best / 1e9
    }
}
