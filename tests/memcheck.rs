//! Memory checkers over the C side of the ABI (issue 8, item 3).
//!
//! 1. **valgrind memcheck** runs every C test (`ffi_tests/*.c`, built with
//!    gcc), every C++ test (`ffi_tests/*.cpp`, g++) and every example in
//!    `c_examples/` (`*.c` and `*.cpp`, built by `c_examples/Makefile` with
//!    gcc/g++), all linked to this profile's `liblshk.so`, with
//!    `LSHK_MAX_ISA=avx2` (valgrind cannot decode AVX-512) and
//!    `LSHK_EXAMPLE_SMALL=1` (the examples that take seconds natively shrink
//!    their workload; valgrind is 20-50x slower, and ~500x on the AVX2+FMA
//!    kernels, whose FMAs it emulates in software). Options:
//!    `--leak-check=full --errors-for-leak-kinds=definite,indirect,possible
//!    --track-origins=yes --error-exitcode=99 --suppressions=ffi_tests/valgrind.supp`.
//!    Requirement: exit 0, zero errors, zero bytes definitely / indirectly /
//!    possibly lost (after the suppression file, whose two entries are
//!    blocks Rust's std and glibc leave at exit by design: see the file).
//!    A negative control (a program that leaks an lshk handle and reads
//!    uninitialised memory) must be caught, so a broken valgrind invocation
//!    cannot pass silently. Prints one line per program and a summary line
//!    `memcheck: N programs, E errors, D bytes definitely lost, ...`.
//! 2. **AddressSanitizer + UBSan**: every `ffi_tests/*.c` (gcc and clang)
//!    and `ffi_tests/*.cpp` (g++ and clang++) built with
//!    `-fsanitize=address,undefined -fno-omit-frame-pointer
//!    -fno-sanitize-recover=all` and run (LeakSanitizer on, the default on
//!    x86-64 Linux). Any sanitizer report fails. Only the C/C++ side is
//!    instrumented: liblshk.so itself is the ordinary Rust build (its heap
//!    blocks still come from the intercepted malloc, so ASan checks their
//!    bounds when C code touches them, and LeakSanitizer sees leaked
//!    handles). A negative control (heap overflow, signed overflow) must be
//!    caught.
//!
//! valgrind missing -> `skipped: valgrind not found`, unless the environment
//! variable `CI` is set (`.ci/run` sets CI=true and installs valgrind): then
//! the test fails. The same for a compiler whose sanitizer runtime cannot
//! link. Logs: `target/<profile>/c_abi/memcheck/logs/<program>.log`.
//!
//! By hand (from the crate root, after `cargo build`):
//! ```text
//! LSHK_MAX_ISA=avx2 LSHK_EXAMPLE_SMALL=1 valgrind --leak-check=full \
//!   --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes \
//!   --error-exitcode=99 --suppressions=ffi_tests/valgrind.supp ./program
//! ```

mod c_harness;
mod common;

use c_harness::{
    available, compile_test, examples, in_ci, indent, require, run, run_jobs, setup, sources, stem,
    summary_lines, Job, CXX_FLAGS, C_FLAGS,
};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// Exit code valgrind returns when it found errors (`--error-exitcode`).
const VALGRIND_ERROR_EXIT: i32 = 99;
/// A program that runs longer than this under valgrind (or a sanitizer)
/// fails instead of hanging `cargo test` (coreutils `timeout`).
const TIMEOUT_SECS: &str = "600";

fn valgrind_args(log: &Path) -> Vec<String> {
    let supp = setup().root.join("ffi_tests").join("valgrind.supp");
    vec![
        format!("--error-exitcode={VALGRIND_ERROR_EXIT}"),
        "--leak-check=full".into(),
        "--show-leak-kinds=definite,indirect,possible".into(),
        "--errors-for-leak-kinds=definite,indirect,possible".into(),
        "--track-origins=yes".into(),
        "--num-callers=40".into(),
        "--gen-suppressions=all".into(),
        format!("--suppressions={}", supp.display()),
        format!("--log-file={}", log.display()),
    ]
}

/// What one valgrind log says.
#[derive(Default, Clone, Copy, Debug)]
struct Report {
    errors: u64,
    definite: u64,
    indirect: u64,
    possible: u64,
    /// Bytes in leaked blocks matched by ffi_tests/valgrind.supp.
    suppressed: u64,
}

/// First number after `key` on the line containing it ("1,024" -> 1024).
fn number_after(log: &str, key: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains(key))?;
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    digits.parse().ok()
}

fn parse_log(log: &str) -> Result<Report, String> {
    let errors = number_after(log, "ERROR SUMMARY:")
        .ok_or("no \"ERROR SUMMARY\" in the valgrind log (did valgrind run?)")?;
    let mut r = Report {
        errors,
        ..Report::default()
    };
    if log.contains("LEAK SUMMARY:") {
        let get =
            |k: &str| number_after(log, k).ok_or_else(|| format!("no \"{k}\" in the LEAK SUMMARY"));
        r.definite = get("definitely lost:")?;
        r.indirect = get("indirectly lost:")?;
        r.possible = get("possibly lost:")?;
        // "suppressed: N bytes in M blocks" (the ERROR SUMMARY line has a
        // "suppressed:" too, counting errors: skip it).
        r.suppressed = log
            .lines()
            .filter(|l| l.contains("bytes in"))
            .find_map(|l| number_after(l, "suppressed:"))
            .ok_or("no \"suppressed: N bytes\" in the LEAK SUMMARY")?;
    } else if !log.contains("All heap blocks were freed") {
        return Err("neither a LEAK SUMMARY nor \"All heap blocks were freed\" in the log".into());
    }
    Ok(r)
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Runs `exe` under valgrind (cwd = its directory); the parsed report, the
/// exit code, the program's stdout and the log.
fn valgrind(name: &str, exe: &Path, logs: &Path) -> Result<(Report, i32, String, String), String> {
    let log = logs.join(format!("{name}.log"));
    let _ = fs::remove_file(&log);
    let out = Command::new("timeout")
        .args(["--kill-after=10", TIMEOUT_SECS, "valgrind"])
        .args(valgrind_args(&log))
        .arg(exe)
        .current_dir(exe.parent().unwrap())
        .env("LSHK_MAX_ISA", "avx2")
        .env("LSHK_EXAMPLE_SMALL", "1")
        .output()
        .map_err(|e| format!("could not start valgrind: {e}"))?;
    let code = out.status.code().unwrap_or(-1);
    let text = fs::read_to_string(&log).unwrap_or_default();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = parse_log(&text).map_err(|e| {
        format!(
            "{e}\nexit code {code}\n--- stderr ---\n{}\n--- log {} (tail) ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            log.display(),
            tail(&text, 40)
        )
    })?;
    Ok((report, code, stdout, text))
}

/// A program that must fail memcheck: it loses an lshk handle (definitely
/// lost, allocated inside the library), loses a malloc block, and branches
/// on uninitialised memory.
const VALGRIND_PROBE: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include "lshk.h"
int main(void) {
  lshk_simhash *h = NULL;
  if (lshk_simhash_new(16, 8, 2, 0, 1, &h) != LSHK_STATUS_OK) return 2;
  h = NULL; /* the handle is lost */
  int *p = malloc(4 * sizeof(int));
  volatile int x = p[1]; /* uninitialised */
  if (x == 42) printf("42\n");
  p = NULL; /* lost */
  return h != NULL;
}
"#;

#[test]
fn valgrind_memcheck_c_tests_and_examples() {
    let s = setup();
    if !available("valgrind") {
        assert!(
            !in_ci(),
            "valgrind not found and CI is set: install valgrind (.ci/run does)"
        );
        println!("skipped: valgrind not found");
        return;
    }
    for t in ["timeout", "gcc", "g++", "make", "pkg-config"] {
        require(t);
    }
    let t0 = Instant::now();
    let dir = s.work.join("memcheck");
    let logs = dir.join("logs");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&logs).unwrap();

    // Build: the examples with their Makefile (default -O2 -g) now; the
    // tests with gcc/g++ (as c_abi.rs does, plus -O1) inside their jobs.
    type Build = Box<dyn FnOnce() -> Result<PathBuf, String> + Send>;
    let mut programs: Vec<(String, Build)> = Vec::new();
    let ffi = s.root.join("ffi_tests");
    for (ext, cc, flags) in [("c", "gcc", C_FLAGS), ("cpp", "g++", CXX_FLAGS)] {
        for src in sources(&ffi, ext) {
            let out_dir = dir.join(format!("ffi-{ext}"));
            programs.push((
                format!("ffi_tests/{}.{ext}", stem(&src)),
                Box::new(move || compile_test(cc, flags, &["-O1"], &src, &out_dir)),
            ));
        }
    }
    let ex_dir = dir.join("examples");
    run(Command::new("make")
        .arg("-C")
        .arg(s.root.join("c_examples"))
        .arg(format!("BUILD={}", ex_dir.display()))
        .args(["-j2", "CC=gcc", "CXX=g++"])
        .env("PKG_CONFIG_PATH", &s.profile_dir)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS"))
    .unwrap_or_else(|e| panic!("{e}"));
    for e in examples() {
        let exe = ex_dir.join(&e);
        programs.push((format!("c_examples/{e}"), Box::new(move || Ok(exe))));
    }
    let n_programs = programs.len();
    let probe_src = dir.join("memcheck_probe.c");
    fs::write(&probe_src, VALGRIND_PROBE).unwrap();
    let probe = compile_test(
        "gcc",
        &["-std=c11"],
        &["-O0"],
        &probe_src,
        &dir.join("probe"),
    )
    .unwrap_or_else(|e| panic!("{e}"));

    // Run (the probe first: it is the quickest).
    let results: Mutex<Vec<(String, Report, f64)>> = Mutex::new(Vec::new());
    let mut jobs: Vec<(String, Job)> = Vec::new();
    {
        let (logs, probe) = (&logs, &probe);
        jobs.push((
            "negative control: a leaked handle, a leaked block and an uninitialised read are caught"
                .to_string(),
            Box::new(move || {
                let (r, code, _, text) = valgrind("memcheck_probe", probe, logs)?;
                if code == VALGRIND_ERROR_EXIT && r.errors >= 3 && r.definite > 16 {
                    Ok(format!(
                        "exit {code}, {} errors, {} bytes definitely lost (as expected)",
                        r.errors, r.definite
                    ))
                } else {
                    Err(format!(
                        "valgrind did not catch the probe's bugs: exit {code}, {r:?}\n{}",
                        tail(&text, 60)
                    ))
                }
            }),
        ));
    }
    for (name, build) in programs {
        let (logs, results) = (&logs, &results);
        jobs.push((
            format!("valgrind {name}"),
            Box::new(move || {
                let exe = build()?;
                let t = Instant::now();
                let log_name = name.replace(['/', '.'], "_");
                let (r, code, stdout, text) = valgrind(&log_name, &exe, logs)?;
                let secs = t.elapsed().as_secs_f64();
                results.lock().unwrap().push((name, r, secs));
                let line = format!(
                    "{} errors; lost: {} definitely, {} indirectly, {} possibly; \
                     {} suppressed; {secs:.1} s",
                    r.errors, r.definite, r.indirect, r.possible, r.suppressed
                );
                if code == 0
                    && r.errors == 0
                    && r.definite == 0
                    && r.indirect == 0
                    && r.possible == 0
                {
                    let sum = summary_lines(&stdout);
                    let sum = if sum.starts_with("(no ") { "" } else { &sum };
                    Ok(format!("{line}\n{sum}"))
                } else {
                    Err(format!(
                        "{line}; exit code {code} ({})\n--- stdout (tail) ---\n{}\n--- log {} ---\n{}",
                        if code == VALGRIND_ERROR_EXIT {
                            "valgrind found errors"
                        } else if code == 0 {
                            "leaks"
                        } else {
                            "the program failed"
                        },
                        tail(&stdout, 20),
                        logs.join(format!("{log_name}.log")).display(),
                        tail(&text, 150)
                    ))
                }
            }),
        ));
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_jobs(jobs)));

    let results = results.into_inner().unwrap();
    let mut total = Report::default();
    for (_, r, _) in &results {
        total.errors += r.errors;
        total.definite += r.definite;
        total.indirect += r.indirect;
        total.possible += r.possible;
        total.suppressed += r.suppressed;
    }
    println!(
        "memcheck: {} programs, {} errors, {} bytes definitely lost, {} indirectly, {} possibly \
         ({} bytes suppressed by ffi_tests/valgrind.supp); LSHK_MAX_ISA=avx2; {:.0} s",
        results.len(),
        total.errors,
        total.definite,
        total.indirect,
        total.possible,
        total.suppressed,
        t0.elapsed().as_secs_f64()
    );
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
    assert_eq!(results.len(), n_programs);
}

/// Sanitizer flags (the same for C and C++).
const SANITIZE: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-omit-frame-pointer",
    "-fno-sanitize-recover=all",
    "-O1",
];

/// A program that must fail under the sanitizers: `heap` writes past a
/// heap block (gcc's UBSan object-size check may report it before ASan),
/// `uaf` reads a freed block, `ub` overflows a signed int.
const SANITIZER_PROBE: &str = r#"#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "lshk.h"
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "heap") == 0) {
    char *p = malloc(4);
    volatile int i = 4;
    p[i] = 1;
    free(p);
  } else if (argc > 1 && strcmp(argv[1], "uaf") == 0) {
    char *p = malloc(4);
    free(p);
    volatile char c = p[0];
    return c;
  } else if (argc > 1 && strcmp(argv[1], "ub") == 0) {
    volatile int big = INT_MAX;
    int y = big + 1;
    return y == 0;
  }
  return lshk_version() == NULL;
}
"#;

const SANITIZER_REPORTS: &[&str] = &[
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "SUMMARY: UndefinedBehaviorSanitizer",
    "SUMMARY: AddressSanitizer",
];

/// Runs a sanitized program: Ok(stdout) when it exits 0 and printed no
/// sanitizer report; Err(description) otherwise.
fn run_sanitized(exe: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .args(["--kill-after=10", TIMEOUT_SECS])
        .arg(exe)
        .args(args)
        .current_dir(exe.parent().unwrap())
        // allocator_may_return_null=1: ffi_tests make the library attempt
        // impossible allocations on purpose (it must answer
        // LSHK_STATUS_ALLOCATION_FAILED); by default ASan aborts on them
        // ("allocation-size-too-big") instead of returning NULL as glibc does.
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:\
             detect_stack_use_after_return=1",
        )
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        .output()
        .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = SANITIZER_REPORTS.iter().find(|r| stderr.contains(**r));
    if out.status.success() && report.is_none() {
        Ok(stdout)
    } else {
        Err(format!(
            "{} {args:?}: {} ({})\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            exe.display(),
            out.status,
            report.map_or("no sanitizer report", |r| r),
            tail(&stdout, 20),
            tail(&stderr, 80)
        ))
    }
}

#[test]
fn asan_ubsan_c_tests() {
    let s = setup();
    require("timeout");
    let dir = s.work.join("asan");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let probe_src = dir.join("sanitizer_probe.c");
    fs::write(&probe_src, SANITIZER_PROBE).unwrap();
    let ffi = s.root.join("ffi_tests");
    let t0 = Instant::now();

    let mut jobs: Vec<(String, Job)> = Vec::new();
    let mut compilers = Vec::new();
    for (cc, cxx) in [("gcc", "g++"), ("clang", "clang++")] {
        require(cc);
        require(cxx);
        // Can this compiler link a sanitized program (is its runtime there)?
        let probe = compile_test(cc, &["-std=c11"], SANITIZE, &probe_src, &dir.join(cc));
        let probe = match probe {
            Ok(p) => p,
            Err(e) => {
                assert!(
                    !in_ci(),
                    "{cc} cannot build with -fsanitize=address,undefined and CI is set:\n{e}"
                );
                println!("skipped: {cc} sanitizer runtime not found ({cc} -fsanitize=address,undefined failed):\n{}", indent(&e));
                continue;
            }
        };
        compilers.push(cc);
        jobs.push((
            format!(
                "{cc}: negative control (heap overflow, use after free, signed overflow) is caught"
            ),
            Box::new(move || {
                run_sanitized(&probe, &[])?;
                let mut report = String::new();
                for (mode, want) in [
                    ("heap", ""),
                    ("uaf", "heap-use-after-free"),
                    ("ub", "signed integer overflow"),
                ] {
                    match run_sanitized(&probe, &[mode]) {
                        Ok(_) => return Err(format!("the {mode} probe passed unnoticed")),
                        Err(e) if e.contains(want) && !e.contains("(no sanitizer report)") => {
                            let first = e.lines().find(|l| {
                                l.contains("ERROR: AddressSanitizer:")
                                    || l.contains(": runtime error:")
                            });
                            report.push_str(&format!("{mode}: {}\n", first.unwrap_or(want).trim()));
                        }
                        Err(e) => return Err(format!("the {mode} probe failed differently:\n{e}")),
                    }
                }
                Ok(report)
            }),
        ));
        for (ext, compiler, flags) in [("c", cc, C_FLAGS), ("cpp", cxx, CXX_FLAGS)] {
            for src in sources(&ffi, ext) {
                let out_dir = dir.join(compiler);
                jobs.push((
                    format!(
                        "{compiler} -fsanitize=address,undefined ffi_tests/{}.{ext}",
                        stem(&src)
                    ),
                    Box::new(move || {
                        let exe = compile_test(compiler, flags, SANITIZE, &src, &out_dir)?;
                        Ok(summary_lines(&run_sanitized(&exe, &[])?))
                    }),
                ));
            }
        }
    }
    let n = jobs.len() - compilers.len();
    run_jobs(jobs);
    println!(
        "asan+ubsan: {n} builds of ffi_tests ({}), 0 reports; {:.0} s",
        compilers.join(", "),
        t0.elapsed().as_secs_f64()
    );
    println!(
        "{}",
        indent("liblshk.so itself is not instrumented (ordinary Rust build)")
    );
}
