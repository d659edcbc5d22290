//! `LSHK_MAX_ISA` is read once per process, so each case runs this test
//! binary again as a child process with the variable set.

mod common;

use lshk::Isa;

/// Prints this machine's tier list and extra features, e.g.
/// `tiers on this CPU: scalar portable avx2 (avx512: absent, CPU lacks
/// avx512f/bw/dq/vl); active: avx2; extras: f16c yes, ...` (read it with
/// `cargo test --test isa_env -- --nocapture machine`). Under CI the
/// active tier must be the best one the CPU has: an `LSHK_MAX_ISA` cap would
/// make every test that uses the default dispatch (index, IUL, labels,
/// concurrency, ...) run a lower tier silently.
#[test]
fn machine_tiers() {
    let line = common::tiers::machine_line();
    println!("{line}");
    // A tier list and its absent tiers cover every tier exactly once.
    for t in Isa::ALL {
        assert!(line.contains(t.name()), "{line}");
    }
    if common::tiers::ci() {
        assert_eq!(
            lshk::isa::active(),
            lshk::isa::detected(),
            "CI is set but the active tier is below what the CPU supports \
             (LSHK_MAX_ISA caps it?): {line}"
        );
    }
}

const CHILD: &str = "LSHK_ISA_ENV_CHILD";

/// In a child process: prints the tier the library chose. Ignored in a
/// plain run (it checks nothing by itself, so it must not count as a
/// passing test); `env_var_caps_the_tier` runs it with `--ignored` in a
/// child process and checks what it prints.
#[test]
#[ignore = "run by env_var_caps_the_tier as a child process"]
fn child_reports_active_tier() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "child_reports_active_tier only runs as a child of env_var_caps_the_tier"
    );
    println!("ACTIVE={}", lshk::isa::active().name());
    // set_max can lower the tier further and raise it back, but never above
    // the environment's cap.
    lshk::isa::set_max(Isa::Scalar);
    println!("AFTER_LOWER={}", lshk::isa::active().name());
    lshk::isa::set_max(Isa::Avx512);
    println!("AFTER_RAISE={}", lshk::isa::active().name());
}

fn run_child(value: Option<&str>) -> (String, String, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_reports_active_tier",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1");
    match value {
        Some(v) => cmd.env("LSHK_MAX_ISA", v),
        None => cmd.env_remove("LSHK_MAX_ISA"),
    };
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let get = |key: &str| {
        // The harness may print "test name ... " on the same line first.
        text.lines()
            .find_map(|l| l.find(key).map(|at| l[at + key.len()..].trim().to_string()))
            .unwrap_or_else(|| panic!("child printed no {key}: {text}"))
    };
    (get("ACTIVE="), get("AFTER_LOWER="), get("AFTER_RAISE="))
}

#[test]
fn env_var_caps_the_tier() {
    let detected = lshk::isa::detected();
    for (value, cap) in [
        (None, Isa::Avx512),
        (Some("scalar"), Isa::Scalar),
        (Some("portable"), Isa::Portable),
        (Some("AVX2"), Isa::Avx2),
        (Some("avx512"), Isa::Avx512),
        (Some("not-a-tier"), Isa::Avx512), // unknown values are ignored
    ] {
        let want = cap.min(detected).name();
        let (active, lowered, raised) = run_child(value);
        assert_eq!(active, want, "LSHK_MAX_ISA={value:?}");
        assert_eq!(lowered, "scalar");
        assert_eq!(
            raised, want,
            "set_max must not raise above LSHK_MAX_ISA={value:?}"
        );
    }
}
