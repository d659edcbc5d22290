//! Kernel families, one folder each, one file per instruction set
//! (`scalar.rs` is the oracle; `portable.rs`, `avx2.rs`, `avx512.rs` are
//! tested against it). Each family's `mod.rs` holds the per-tier function
//! table that the dispatcher indexes once per call.

/// A family's per-tier kernel tables and its `kernels(tier)` lookup, from
/// one field list (the tier -> function table was written out
/// by hand in every family). `Kernels [name] { field: function, .. }`
/// makes the statics `SCALAR`, `PORTABLE`, `AVX2` and `AVX512`, each taking
/// `function` from the module of its tier (`scalar::function`, ...; a tier
/// that shares another's function re-exports it under that name), plus the
/// `name` field set to the tier's name when `[name]` is given. The optional
/// `avx2 => f;` / `avx512 => f;` lines pick a variant of that tier at call
/// time (`f(&AVX2)` returns the table to use, e.g. by an extra CPU feature
/// such as F16C or VNNI: looked up once per call, never per element).
///
/// The fallback chain is the tier order itself: the dispatcher only asks
/// for tiers the CPU supports (`crate::isa::check_supported`), and a
/// non-x86 build has the scalar and portable tables only, every other tier
/// answering with the portable one.
macro_rules! tier_table {
    (
        $(#[$doc:meta])*
        $K:ident $([$name:ident])? { $($field:ident: $f:ident),* $(,)? }
        $(avx2 => $a2:expr;)?
        $(avx512 => $a5:expr;)?
    ) => {
        static SCALAR: $K = $K { $($name: "scalar",)? $($field: scalar::$f),* };
        static PORTABLE: $K = $K { $($name: "portable",)? $($field: portable::$f),* };
        #[cfg(target_arch = "x86_64")]
        static AVX2: $K = $K { $($name: "avx2",)? $($field: avx2::$f),* };
        #[cfg(target_arch = "x86_64")]
        static AVX512: $K = $K { $($name: "avx512",)? $($field: avx512::$f),* };

        $(#[$doc])*
        pub fn kernels(tier: $crate::isa::Isa) -> &'static $K {
            use $crate::isa::Isa;
            match tier {
                Isa::Scalar => &SCALAR,
                Isa::Portable => &PORTABLE,
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => {
                    let t: &'static $K = &AVX2;
                    $(let t = ($a2)(t);)?
                    t
                }
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => {
                    let t: &'static $K = &AVX512;
                    $(let t = ($a5)(t);)?
                    t
                }
                #[cfg(not(target_arch = "x86_64"))]
                _ => &PORTABLE,
            }
        }
    };
}
pub(crate) use tier_table;

/// Every kernel variant this CPU can run, lowest tier first: each
/// supported tier's table as `kernels` dispatches it, and before the
/// AVX-512 one the plain AVX-512 table `plain` when the tier dispatches to
/// an extra flavour on this CPU (so tests and benches reach both). A
/// family's `supported_variants` passes its own tables.
pub(crate) fn variants_of<K>(
    kernels: fn(crate::isa::Isa) -> &'static K,
    plain: Option<&'static K>,
) -> Vec<(crate::isa::Isa, &'static K)> {
    let mut v = Vec::new();
    for t in crate::isa::Isa::supported() {
        if let (crate::isa::Isa::Avx512, Some(p)) = (t, plain) {
            v.push((t, p));
        }
        v.push((t, kernels(t)));
    }
    v
}

/// Hints that `bytes` bytes at `p` are needed soon (`prefetcht0` of each
/// 64-byte line on x86-64; nothing elsewhere). Never faults.
#[inline(always)]
pub fn prefetch(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    simd::prefetch_lines(p, bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// The calling thread's `key` cell, reached without a closure: code
/// inlined into a closure is compiled without the target features of the
/// function around it, so a driver inlined into a tier's
/// `#[target_feature]` function must not run inside `LocalKey::with` (the
/// SimHash and DWTA drivers take their scratch through this).
///
/// # Safety
/// The reference is used only during the current call (on this thread,
/// which it cannot leave: `&RefCell` is not `Send`).
#[inline(always)]
pub(crate) unsafe fn tls_cell<'a, T>(
    key: &'static std::thread::LocalKey<std::cell::RefCell<T>>,
) -> &'a std::cell::RefCell<T> {
    let p: *const std::cell::RefCell<T> = key.with(|c| c as *const _);
    // SAFETY: a thread-local lives until its thread exits, after every
    // call that reached it (caller).
    unsafe { &*p }
}

pub mod centroid;
pub mod dense;
pub mod dwta;
pub mod gather;
pub mod graph;
pub mod hrr;
pub mod logq;
pub mod matmul;
pub mod pq4;
pub mod qdot;
pub mod select;
#[cfg(target_arch = "x86_64")]
pub(crate) mod simd;
pub mod simhash;
pub mod train;
