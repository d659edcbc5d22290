//! Instruction-set tiers and runtime dispatch.
//!
//! The CPU is inspected once (`is_x86_feature_detected!`, which also checks
//! that the OS saves the wide registers, through XGETBV). The active tier is
//! `min(detected, cap)`, where the cap starts from the environment variable
//! `LSHK_MAX_ISA=scalar|portable|avx2|avx512` and can be lowered further by
//! [`set_max`]; nothing raises the tier above what the CPU supports.
//!
//! Kernel families keep a table of function pointers per tier and index it
//! with [`active`] once per call: there is no feature check inside a loop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use crate::error::{Error, Result, Status};

/// A tier of hand-written kernels. Values are the C `LSHK_ISA_*` constants.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Plain Rust: the oracle every other tier is tested against.
    Scalar = 0,
    /// The `wide` crate at the build's baseline target features (SSE2 on
    /// x86-64, NEON on aarch64): the tier for targets without runtime tiers.
    Portable = 1,
    /// AVX2 + FMA (256-bit), with POPCNT and BMI1.
    Avx2 = 2,
    /// AVX-512 F/BW/DQ/VL (512-bit, mask registers), on top of the AVX2
    /// tier's features.
    Avx512 = 3,
}

impl Isa {
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Portable, Isa::Avx2, Isa::Avx512];

    pub fn from_u32(v: u32) -> Option<Isa> {
        Isa::ALL.get(v as usize).copied()
    }

    /// Lower-case name as accepted by `LSHK_MAX_ISA`.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL
            .iter()
            .copied()
            .find(|i| i.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Every tier this CPU can run, lowest first (ignores the cap).
    pub fn supported() -> impl Iterator<Item = Isa> {
        let d = detected();
        Isa::ALL.into_iter().filter(move |i| *i <= d)
    }
}

/// Extra CPU features on top of the tier: F16C (f16 kernels of the AVX2
/// tier), AVX-512 VNNI (the int8 scoring of `qdot`) and VBMI with VNNI
/// (the 4-bit fast-scan of `pq4`) are used; BF16 and FP16 are detected
/// and reported only (the tier line of the tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras {
    /// AVX-512 VNNI (`vpdpbusd`).
    pub avx512vnni: bool,
    /// AVX-512 VBMI (`vpermb`: 64-entry byte tables).
    pub avx512vbmi: bool,
    /// AVX-512 BF16 (`vdpbf16ps`). Reported only: no kernel uses it (the
    /// bf16 matmul widens to f32 to keep the f32 bound; see
    /// `kernels/matmul/avx512.rs`).
    pub avx512bf16: bool,
    /// AVX-512 FP16. Reported only: no kernel uses it (f16 rows are
    /// widened with `vcvtph2ps`, which every AVX-512 CPU has).
    pub avx512fp16: bool,
    /// F16C (`vcvtph2ps`).
    pub f16c: bool,
}

struct Detected {
    isa: Isa,
    extras: Extras,
}

fn detect() -> Detected {
    #[cfg(target_arch = "x86_64")]
    {
        // POPCNT and BMI1 (`tzcnt`) are part of both x86 tiers: the gather
        // kernels enable them in `#[target_feature]`. Every AVX2 CPU has
        // them, but a hypervisor can hide them, so they are checked too.
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("bmi1");
        let avx512 = avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl");
        let isa = if avx512 {
            Isa::Avx512
        } else if avx2 {
            Isa::Avx2
        } else {
            Isa::Portable
        };
        Detected {
            isa,
            extras: Extras {
                avx512vnni: avx512 && is_x86_feature_detected!("avx512vnni"),
                avx512vbmi: avx512 && is_x86_feature_detected!("avx512vbmi"),
                avx512bf16: avx512 && is_x86_feature_detected!("avx512bf16"),
                avx512fp16: avx512 && is_x86_feature_detected!("avx512fp16"),
                f16c: is_x86_feature_detected!("f16c"),
            },
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Detected {
            isa: Isa::Portable,
            extras: Extras::default(),
        }
    }
}

fn detection() -> &'static Detected {
    static D: OnceLock<Detected> = OnceLock::new();
    D.get_or_init(detect)
}

/// The best tier the CPU (and OS) supports.
pub fn detected() -> Isa {
    detection().isa
}

/// Extra features (VNNI, BF16, ...) of this CPU.
pub fn extras() -> Extras {
    detection().extras
}

const CAP_UNSET: u32 = u32::MAX;
static CAP: AtomicU32 = AtomicU32::new(CAP_UNSET);

/// `LSHK_MAX_ISA`, read once per process (the cap is a start-up setting;
/// `set_max` lowers it further at run time).
fn env_cap() -> u32 {
    static ENV: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ENV.get_or_init(read_env_cap)
}

fn read_env_cap() -> u32 {
    match std::env::var("LSHK_MAX_ISA") {
        Ok(v) => match Isa::parse(&v) {
            Some(i) => i as u32,
            None => Isa::Avx512 as u32, // unknown value: no cap (documented)
        },
        Err(_) => Isa::Avx512 as u32,
    }
}

fn cap() -> u32 {
    let c = CAP.load(Ordering::Relaxed);
    if c != CAP_UNSET {
        return c;
    }
    let e = env_cap();
    // First caller initialises from the environment; a racing set_max wins.
    let _ = CAP.compare_exchange(CAP_UNSET, e, Ordering::Relaxed, Ordering::Relaxed);
    CAP.load(Ordering::Relaxed)
}

/// The tier kernels run on now: `min(detected(), cap)`.
#[inline]
pub fn active() -> Isa {
    let c = cap();
    let d = detected() as u32;
    Isa::from_u32(c.min(d)).unwrap_or(Isa::Scalar)
}

/// Caps the active tier at `max` for the whole process. It can lower the
/// tier below what `LSHK_MAX_ISA` allows, or raise the cap back up to (but
/// never beyond) what the environment variable allows and the CPU has.
pub fn set_max(max: Isa) {
    let env = env_cap();
    CAP.store((max as u32).min(env), Ordering::Relaxed);
}

/// `Ok(())` if this CPU can run `isa`, else `UnsupportedIsa`.
pub fn check_supported(isa: Isa) -> Result<()> {
    if isa <= detected() {
        Ok(())
    } else {
        Err(Error::new(
            Status::UnsupportedIsa,
            format!(
                "the {} tier is not available on this CPU (detected: {})",
                isa.name(),
                detected().name()
            ),
        ))
    }
}
