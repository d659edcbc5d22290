//! Helpers shared by the tests that compile and run C/C++ programs against
//! the library: tests/c_abi.rs (compilers, Make, CMake, SONAME) and
//! tests/memcheck.rs (valgrind memcheck, AddressSanitizer + UBSan).
//!
//! # Which library is tested (freshness)
//! `cargo test` compiles the library with all its crate types (rlib,
//! staticlib, cdylib) before it runs these tests, but leaves `liblshk.so` and
//! `liblshk.a` in `target/<profile>/deps/`: only `cargo build` copies them up
//! to `target/<profile>/`, where `lshk.pc` points. Running a nested
//! `cargo build` from here would work but makes the `cargo build` and
//! `cargo test` fingerprints of the library invalidate each other, so the
//! library would be rebuilt twice per `cargo test` (measured). Instead
//! [`setup`] finds `target/<profile>/deps/` from the test's own executable
//! path (`target/<profile>/deps/<test>-<hash>`), and places the just-built
//! `liblshk.so` / `liblshk.a` in `target/<profile>/` exactly as `cargo build`
//! would (a hard link, or a copy, renamed into place atomically). The C
//! programs therefore always link the library of this very `cargo test` run
//! and profile (`cargo test --release` tests `target/release`).
//!
//! Build products go to `target/<profile>/c_abi/`.
#![allow(dead_code)] // each test crate uses a different subset

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

pub struct Setup {
    /// The crate root (`CARGO_MANIFEST_DIR`).
    pub root: PathBuf,
    /// `target/<profile>`: liblshk.so, liblshk.so.0, liblshk.a, lshk.pc.
    pub profile_dir: PathBuf,
    /// `target/<profile>/c_abi`: this test's build products.
    pub work: PathBuf,
}

pub fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let exe = std::env::current_exe().expect("path of the test executable");
        let deps = exe.parent().expect("test executable has a parent dir");
        assert_eq!(
            deps.file_name(),
            Some(OsStr::new("deps")),
            "expected the test executable in target/<profile>/deps, found {}",
            exe.display()
        );
        let profile_dir = deps.parent().unwrap().to_path_buf();
        for name in ["liblshk.so", "liblshk.a"] {
            uplift(&deps.join(name), &profile_dir.join(name));
        }
        // build.rs creates this link (the SONAME); recreate it if someone
        // deleted it since build.rs last ran.
        let link = profile_dir.join(env!("LSHK_SONAME"));
        if fs::symlink_metadata(&link).is_err() {
            println!("note: {} was missing; recreating it", link.display());
            std::os::unix::fs::symlink("liblshk.so", &link).unwrap();
        }
        let pc = profile_dir.join("lshk.pc");
        assert!(
            pc.is_file(),
            "{} is missing: build.rs should have written it",
            pc.display()
        );
        let work = profile_dir.join("c_abi");
        fs::create_dir_all(&work).unwrap();
        Setup {
            root,
            profile_dir,
            work,
        }
    })
}

/// Makes `dst` the same file as the freshly built `src` (what `cargo build`
/// does when it "uplifts" an artifact out of deps/).
pub fn uplift(src: &Path, dst: &Path) {
    use std::os::unix::fs::MetadataExt;
    let sm = fs::metadata(src).unwrap_or_else(|e| {
        panic!(
            "{} was not built by this cargo invocation ({e}); crate-type must \
             include cdylib and staticlib",
            src.display()
        )
    });
    if let Ok(dm) = fs::metadata(dst) {
        if dm.dev() == sm.dev() && dm.ino() == sm.ino() {
            return; // already the same file (cargo build hard-links too)
        }
    }
    let tmp = dst.with_extension(format!("c_abi_tmp{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    if fs::hard_link(src, &tmp).is_err() {
        fs::copy(src, &tmp).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    }
    fs::rename(&tmp, dst).unwrap_or_else(|e| panic!("rename to {}: {e}", dst.display()));
}

/// Fails (never skips) when a tool is missing.
pub fn require(tool: &str) {
    static CHECKED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut c = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if c.iter().any(|t| t == tool) {
        return;
    }
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{tool}` is required by the C ABI tests but was not found on PATH. \
         Run `.ci/run` (it installs gcc, g++, clang, make, cmake, pkg-config and \
         binutils with apt-get) or install it yourself."
    );
    c.push(tool.to_string());
}

/// Runs a command; Ok(stdout) on exit 0, Err(description) otherwise.
pub fn run(cmd: &mut Command) -> Result<String, String> {
    let desc = format!("{cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("could not start {desc}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{desc} failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub type Job<'a> = Box<dyn FnOnce() -> Result<String, String> + Send + 'a>;
/// A job's name and its outcome (report or failure description).
pub type Outcome = (String, Result<String, String>);

/// Runs jobs on a few threads; prints each job's report in order, then
/// panics listing every failed job.
pub fn run_jobs(jobs: Vec<(String, Job<'_>)>) {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 4);
    let n = jobs.len();
    let queue: Vec<Mutex<Option<(String, Job<'_>)>>> =
        jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let results: Vec<Mutex<Option<Outcome>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers.min(n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let (name, job) = queue[i].lock().unwrap().take().unwrap();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                    .unwrap_or_else(|_| Err("the job panicked".to_string()));
                *results[i].lock().unwrap() = Some((name, r));
            });
        }
    });
    let mut failures = Vec::new();
    for r in results {
        let (name, r) = r.into_inner().unwrap().unwrap();
        match r {
            Ok(report) => println!("ok: {name}\n{}", indent(&report)),
            Err(e) => {
                println!("FAILED: {name}\n{}", indent(&e));
                failures.push(name);
            }
        }
    }
    assert!(failures.is_empty(), "failed: {failures:?}");
}

pub fn indent(s: &str) -> String {
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("    {l}\n"))
        .collect()
}

/// Sorted files of `dir` with extension `ext`.
pub fn sources(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension() == Some(OsStr::new(ext)) && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The lines a test program prints that look like "N passed, M failed".
pub fn summary_lines(stdout: &str) -> String {
    let s: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" passed, ") && l.contains(" failed"))
        .collect();
    if s.is_empty() {
        "(no \"N passed, M failed\" line)".to_string()
    } else {
        s.join("\n")
    }
}

pub const C_FLAGS: &[&str] = &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];
pub const CXX_FLAGS: &[&str] = &["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Whether `tool --version` runs (for optional tools; see [`require`] for
/// mandatory ones).
pub fn available(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True when the environment variable `CI` is set (`.ci/run` sets CI=true):
/// then a missing optional tool is a failure, not a skip.
pub fn in_ci() -> bool {
    // One rule for every test (CI set, non-empty, not 0/false); a test crate
    // that includes c_harness also declares `mod common;`.
    crate::common::tiers::ci()
}

/// Compiles one test program (`ffi_tests/*.c` / `*.cpp`, which include
/// `lshk_test.h`) against the shared library of this profile; `extra` comes
/// after `flags` (e.g. sanitizer flags). Returns the executable's path.
pub fn compile_test(
    compiler: &str,
    flags: &[&str],
    extra: &[&str],
    src: &Path,
    out_dir: &Path,
) -> Result<PathBuf, String> {
    let s = setup();
    fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let exe = out_dir.join(stem(src));
    run(Command::new(compiler)
        .args(flags)
        .arg("-g")
        .args(extra)
        .arg(format!("-I{}", s.root.join("include").display()))
        .arg(format!("-I{}", s.root.join("ffi_tests").display()))
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", s.profile_dir.display()))
        .arg(format!("-Wl,-rpath,{}", s.profile_dir.display()))
        .arg("-llshk"))?;
    Ok(exe)
}

/// Example sources and the binaries the Makefile and CMake make of them:
/// `x.c` -> `x`, `x.cpp` -> `x_cpp`.
pub fn examples() -> Vec<String> {
    let dir = setup().root.join("c_examples");
    let mut v: Vec<String> = sources(&dir, "c").iter().map(|p| stem(p)).collect();
    v.extend(
        sources(&dir, "cpp")
            .iter()
            .map(|p| format!("{}_cpp", stem(p))),
    );
    assert!(
        v.iter().any(|e| e == "simhash") && v.iter().any(|e| e == "simhash_cpp"),
        "c_examples/simhash.c and simhash.cpp are expected, found {v:?}"
    );
    v
}
