//! Which ISA tiers a per-tier test runs, and the rule that no tier is
//! skipped silently (issue 12). One copy, used by every test file that
//! loops over tiers (`mod common;` then `common::tiers::...`).
//!
//! * A per-tier test runs every tier the CPU supports ([`Isa::supported`],
//!   which ignores the library's cap), lowered to `LSHK_MAX_ISA` when a
//!   developer sets it (to skip slow or suspect tiers locally).
//! * It prints one line naming the tiers it ran and, for each other tier,
//!   why not (the CPU lacks it, or `LSHK_MAX_ISA`).
//! * Under CI (the environment variable `CI` set, non-empty, not `0` or
//!   `false`; `.ci/run` sets `CI=true`), a tier the CPU supports that did
//!   not run FAILS the test: a capped `LSHK_MAX_ISA`, or a test whose own
//!   tier list left one out, cannot pass as green.

use lshk::Isa;

/// Whether CI is on: `CI` set, non-empty, and not `0` / `false`.
pub fn ci() -> bool {
    match std::env::var("CI") {
        Ok(v) => {
            let v = v.trim();
            !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
        }
        Err(_) => false,
    }
}

/// The developer's `LSHK_MAX_ISA` cap, parsed as the library does (an
/// unrecognised value means no cap). `None` when unset or unrecognised.
pub fn env_cap() -> Option<(Isa, String)> {
    let v = std::env::var("LSHK_MAX_ISA").ok()?;
    Isa::parse(&v).map(|t| (t, v))
}

/// The CPU features a tier needs, for "CPU lacks ..." messages.
pub fn needs(t: Isa) -> &'static str {
    match t {
        Isa::Scalar | Isa::Portable => "nothing",
        Isa::Avx2 => "avx2/fma/popcnt/bmi1",
        Isa::Avx512 => "avx512f/bw/dq/vl",
    }
}

/// Why tier `t` would not run on this machine (None: it would).
fn reason_not_run(t: Isa) -> Option<String> {
    if !Isa::supported().any(|s| s == t) {
        return Some(format!("CPU lacks {}", needs(t)));
    }
    match env_cap() {
        Some((cap, v)) if t > cap => Some(format!("LSHK_MAX_ISA={v}")),
        _ => None,
    }
}

/// The tiers a per-tier test should run, without printing (see
/// [`under_test`] for the usual entry).
pub fn selected() -> Vec<Isa> {
    Isa::ALL
        .into_iter()
        .filter(|&t| reason_not_run(t).is_none())
        .collect()
}

/// The tiers a per-tier test runs; prints them and checks them with
/// [`report`] (so, under CI, fails at once if `LSHK_MAX_ISA` hides one).
/// `test` names the test in the printed line.
pub fn under_test(test: &str) -> Vec<Isa> {
    let v = selected();
    report(test, &v);
    v
}

/// The tiers the calling test runs: [`selected`], printed with [`report`]
/// (under the test's name, which libtest gives to the thread it runs the
/// test on) the first time a test calls it, and checked on every call.
/// Call it from the test's own thread (compute the list before spawning
/// threads).
pub fn for_this_test() -> Vec<Isa> {
    thread_local! {
        static REPORTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    let v = selected();
    if !REPORTED.with(|r| r.replace(true)) {
        let t = std::thread::current();
        report(t.name().unwrap_or("(unnamed thread)"), &v);
    }
    v
}

/// Prints `tiers <test>: ran scalar portable avx2; not run: avx512 (CPU
/// lacks avx512f/bw/dq/vl)`. Under CI, panics if a tier the CPU supports
/// (ignoring `LSHK_MAX_ISA`) is not in `ran`.
pub fn report(test: &str, ran: &[Isa]) {
    let mut line = format!("tiers {test}: ran");
    for t in Isa::ALL.into_iter().filter(|t| ran.contains(t)) {
        line.push(' ');
        line.push_str(t.name());
    }
    let mut missing = Vec::new();
    let not_run: Vec<String> = Isa::ALL
        .into_iter()
        .filter(|t| !ran.contains(t))
        .map(|t| {
            let cpu_has = Isa::supported().any(|s| s == t);
            let why = if !cpu_has {
                format!("CPU lacks {}", needs(t))
            } else {
                missing.push(t);
                reason_not_run(t).unwrap_or_else(|| "left out by the test".to_string())
            };
            format!("{} ({why})", t.name())
        })
        .collect();
    if !not_run.is_empty() {
        line.push_str("; not run: ");
        line.push_str(&not_run.join(", "));
    }
    println!("{line}");
    if ci() && !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|t| t.name()).collect();
        panic!(
            "CI is set and this CPU supports the {} tier(s), but {test} did not run \
             them ({line}). A tier must never be skipped silently in CI: unset \
             LSHK_MAX_ISA, or make the test loop over every supported tier.",
            names.join(", ")
        );
    }
}

/// One line describing this machine's tiers and extra features, e.g.
/// `tiers on this CPU: scalar portable avx2 (avx512: absent, CPU lacks
/// avx512f/bw/dq/vl); active: avx2; extras: f16c yes, avx512vnni no, ...`.
pub fn machine_line() -> String {
    let names: Vec<&str> = Isa::supported().map(|t| t.name()).collect();
    let mut s = format!("tiers on this CPU: {}", names.join(" "));
    for t in Isa::ALL {
        if !Isa::supported().any(|s| s == t) {
            s.push_str(&format!(" ({}: absent, CPU lacks {})", t.name(), needs(t)));
        }
    }
    s.push_str(&format!("; active: {}", lshk::isa::active().name()));
    if let Some((_, v)) = env_cap() {
        s.push_str(&format!(" (LSHK_MAX_ISA={v})"));
    }
    let e = lshk::isa::extras();
    s.push_str(&format!(
        "; extras: f16c {}, avx512vnni {}, avx512vbmi {}, avx512bf16 {} (not used by any kernel), avx512fp16 {} (not used by any kernel)",
        yes(e.f16c),
        yes(e.avx512vnni),
        yes(e.avx512vbmi),
        yes(e.avx512bf16),
        yes(e.avx512fp16)
    ));
    s
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
