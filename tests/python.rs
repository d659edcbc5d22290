//! The Python package (`python/`, issue 18) under `cargo test`.
//!
//! When `python3` is present this test makes (or reuses) a virtual
//! environment in `target/python-venv`, installs maturin, numpy and pytest
//! into it from the package index, builds and installs the package from
//! `python/` (`pip install --no-build-isolation ./python`: maturin runs cargo
//! on `python/Cargo.toml`, its own workspace, with its own target directory
//! `python/target`) and runs `pytest python/tests` against the `liblshk.so`
//! this `cargo test` built (`LSHK_LIB_DIR`, `target/<profile>`): the package
//! must give the C API's results bit for bit, raise on bad inputs without
//! changing anything, agree across threads, and share index files with a
//! C++ program built on `include/lshk.hpp`. It also installs Ray (when pip
//! can; otherwise it prints `skipped:` for it, in CI too) for the sharded
//! serving test on a local Ray cluster (`python/tests/test_sharded.py`),
//! and PyTorch the same way for `lshk.torch` (`python/tests/test_torch.py`).
//!
//! Without python3, its `venv` module (Debian: python3-venv) or the network
//! (pip, crates.io) the test prints `skipped: <why>`; with the environment
//! variable `CI` set (as `.ci/run` does) each of these is a failure instead.
//! A build error of the package or a failing pytest always fails.
//!
//! `LSHK_PYTHON` names another interpreter than `python3`.

mod c_harness;
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn skip_or_fail(why: &str) {
    if c_harness::in_ci() {
        panic!("{why} (CI is set, so this is a failure, not a skip)");
    }
    println!("skipped: {why}");
}

fn run(cmd: &mut Command) -> Result<Output, String> {
    let shown = format!("{cmd:?}");
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(o),
        Ok(o) => Err(format!(
            "{shown} failed ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("{shown} could not start: {e}")),
    }
}

/// PATH with the venv's bin first (maturin's PEP 517 hook runs `maturin`).
fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut parts = vec![bin.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        parts.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(parts).expect("PATH entries are joinable")
}

#[test]
fn python_package() {
    let s = c_harness::setup(); // liblshk.so of this run in target/<profile>
    let python = std::env::var("LSHK_PYTHON").unwrap_or_else(|_| "python3".to_string());
    if run(Command::new(&python).arg("--version")).is_err() {
        return skip_or_fail(&format!(
            "{python} not found (the Python package is not tested)"
        ));
    }
    let target = s
        .profile_dir
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf();
    let venv = target.join("python-venv");
    let bin = venv.join("bin");
    let vpy: PathBuf = bin.join("python");
    if !vpy.exists() {
        if let Err(e) = run(Command::new(&python).args(["-m", "venv"]).arg(&venv)) {
            let _ = std::fs::remove_dir_all(&venv);
            return skip_or_fail(&format!(
                "`{python} -m venv` failed (Debian: apt-get install python3-venv): {e}"
            ));
        }
    }
    let have_tools = run(Command::new(&vpy).args(["-c", "import numpy, pytest, maturin"])).is_ok()
        && bin.join("maturin").exists();
    if !have_tools {
        if let Err(e) = run(Command::new(&vpy)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "maturin>=1.9,<2",
                "numpy",
                "pytest",
            ])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"))
        {
            return skip_or_fail(&format!(
                "pip could not install maturin, numpy and pytest (no network?): {e}"
            ));
        }
    }
    // Ray for the sharded-serving test (python/tests/test_sharded.py); where
    // pip cannot install it, that test is skipped (pytest.importorskip) and
    // this says so.
    if run(Command::new(&vpy).args(["-c", "import ray"])).is_err() {
        if let Err(e) = run(Command::new(&vpy)
            .args(["-m", "pip", "install", "-q", "ray"])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"))
        {
            println!("skipped: the Ray test (pip could not install ray: {e})");
        }
    }
    // PyTorch for lshk.torch (python/tests/test_torch.py), an optional
    // dependency of the package; where pip cannot install it, those tests
    // are skipped (pytest.importorskip) and this says so.
    if run(Command::new(&vpy).args(["-c", "import torch"])).is_err() {
        if let Err(e) = run(Command::new(&vpy)
            .args(["-m", "pip", "install", "-q", "torch"])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"))
        {
            println!("skipped: the torch tests (pip could not install torch: {e})");
        }
    }
    let manifest = s.root.join("python").join("Cargo.toml");
    if let Err(e) = run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["fetch", "--manifest-path"])
            .arg(&manifest),
    ) {
        return skip_or_fail(&format!(
            "cargo could not fetch the Python package's crates (no network?): {e}"
        ));
    }
    // Build and install: a build error is a real failure.
    let t = std::time::Instant::now();
    run(Command::new(&vpy)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            "--force-reinstall",
        ])
        .arg(s.root.join("python"))
        .current_dir(&s.root)
        .env("PATH", path_with(&bin))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"))
    .unwrap_or_else(|e| panic!("building the Python package failed: {e}"));
    println!(
        "built and installed python/ into {} in {:.1} s",
        venv.display(),
        t.elapsed().as_secs_f64()
    );
    // pytest from the repository root (not python/, whose lshk/ source
    // directory would shadow the installed package).
    let out = Command::new(&vpy)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(&s.root)
        .env("LSHK_LIB_DIR", &s.profile_dir)
        .env("PATH", path_with(&bin))
        .output()
        .expect("pytest starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "pytest failed ({}):\n{text}",
        out.status
    );
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
