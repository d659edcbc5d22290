//! `make install` (the top-level Makefile) as a packager runs it, and
//! programs built against the installed prefix alone.
//!
//! 1. `make install NO_BUILD=1 PROFILE=<profile> PREFIX=<tmp>/prefix
//!    CARGO=false` installs this `cargo test` run's own library (found and
//!    placed in `target/<profile>/` by tests/c_harness's `setup`, as
//!    tests/c_abi.rs does; `CARGO=false` makes any attempt to run cargo
//!    fail). Checked: every file, the two symlinks (`liblshk.so.<abi>` ->
//!    `liblshk.so.X.Y.Z`, `liblshk.so` -> `liblshk.so.<abi>`), the SONAME
//!    (readelf), `lshk.pc`'s prefix and flags (no rpath, nothing in the
//!    source tree), and the CMake version rule (the ABI generation is
//!    found, the next and the previous one are not).
//! 2. `c_examples/simhash.c`, copied out of the source tree, built with
//!    `pkg-config --cflags --libs lshk` (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig)
//!    and run with LD_LIBRARY_PATH=<prefix>/lib only.
//! 3. A generated CMake project (`find_package(lshk <abi> REQUIRED)`;
//!    simhash.c on `lshk::lshk` and on `lshk::lshk_static`, serve.cpp on
//!    `lshk::lshk`), CMAKE_PREFIX_PATH=<prefix>, run with no
//!    LD_LIBRARY_PATH (CMake's build rpath to <prefix>/lib).
//! 4. The prefix moved elsewhere (renamed, so nothing can still reach the
//!    old path): the CMake build works from the new place (the package
//!    files are relative). Then `make uninstall` leaves no file behind.
//! 5. A staged install (`DESTDIR`, `PREFIX=/usr/local`, `LIBDIR` =
//!    `/usr/local/lib/x86_64-linux-gnu`): files under DESTDIR only,
//!    `/usr/local` recorded in lshk.pc, the staged CMake package points into
//!    the staged tree; then uninstalled.
//!
//! # Tools
//! make, cmake, pkg-config, cc, c++ and readelf. A missing one prints
//! `skipped: <tool> not found`, unless the environment variable `CI` is set
//! (`.ci/run` sets it): then the test fails.
//!
//! Works in `target/<profile>/install-test-<pid>/`, removed when the test
//! passes; after a failure it is kept for inspection and removed by the
//! next run.

mod c_harness;
mod common;

use c_harness::{available, in_ci, indent, run, setup, Setup};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOLS: &[&str] = &["make", "cmake", "pkg-config", "cc", "c++", "readelf"];

/// The version in the installed file names: X.Y.Z without a pre-release or
/// build suffix (the Makefile's LSHK_VERSION_NUM).
fn version_num() -> &'static str {
    env!("CARGO_PKG_VERSION").split(['-', '+']).next().unwrap()
}

/// The ABI generation, the SONAME's number ("0.3").
fn abi() -> &'static str {
    env!("LSHK_SONAME").strip_prefix("liblshk.so.").unwrap()
}

fn ok(r: Result<String, String>) -> String {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// The test's directory; removed on drop unless the test is failing.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            println!("kept {} for inspection", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Removes the `install-test-<pid>` directories of processes that are gone.
fn remove_stale_work_dirs(profile_dir: &Path) {
    let Ok(rd) = fs::read_dir(profile_dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("install-test-") {
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// `make -C <root> <args> NO_BUILD=1 PROFILE=<profile> CARGO=false`.
fn make(s: &Setup, args: &[String]) -> String {
    let profile = s.profile_dir.file_name().unwrap().to_str().unwrap();
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(&s.root)
        .arg("--no-print-directory")
        .args(args)
        .arg("NO_BUILD=1")
        .arg(format!("PROFILE={profile}"))
        .arg("CARGO=false")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    if s.profile_dir == s.root.join("target").join(profile) {
        cmd.env_remove("CARGO_TARGET_DIR");
    } else {
        // A custom target directory: name the artifacts' directory outright.
        cmd.arg(format!("LSHK_BUILD_DIR={}", s.profile_dir.display()));
    }
    println!("$ {cmd:?}");
    ok(run(&mut cmd))
}

/// Asserts that `path` is a regular file (not a link).
fn assert_file(path: &Path) {
    let m = fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{} was not installed: {e}", path.display()));
    assert!(m.is_file(), "{} is not a regular file", path.display());
}

/// Asserts that `path` is a symlink whose text is `target`.
fn assert_link(path: &Path, target: &str) {
    let t =
        fs::read_link(path).unwrap_or_else(|e| panic!("{} is not a symlink: {e}", path.display()));
    assert_eq!(t, Path::new(target), "{}", path.display());
}

/// Every file and symlink below `dir`.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Checks an installed tree: headers, library files and links, SONAME,
/// lshk.pc (recording `recorded_prefix` and `libdir_line`), CMake files.
fn check_layout(s: &Setup, inc: &Path, lib: &Path, recorded_prefix: &str, libdir_line: &str) {
    let soname = env!("LSHK_SONAME");
    let real = format!("liblshk.so.{}", version_num());
    for h in ["lshk.h", "lshk.hpp", "lshk_iul.hpp"] {
        assert_file(&inc.join(h));
        assert_eq!(
            fs::read(inc.join(h)).unwrap(),
            fs::read(s.root.join("include").join(h)).unwrap(),
            "installed {h} differs from include/{h}"
        );
    }
    assert_file(&lib.join(&real));
    assert_link(&lib.join(soname), &real);
    assert_link(&lib.join("liblshk.so"), soname);
    assert_eq!(
        fs::canonicalize(lib.join("liblshk.so")).unwrap(),
        fs::canonicalize(lib.join(&real)).unwrap()
    );
    assert_file(&lib.join("liblshk.a"));
    for (installed, built) in [(&real[..], "liblshk.so"), ("liblshk.a", "liblshk.a")] {
        assert_eq!(
            fs::metadata(lib.join(installed)).unwrap().len(),
            fs::metadata(s.profile_dir.join(built)).unwrap().len(),
            "{installed} is not this profile's {built}"
        );
    }
    let d = ok(run(Command::new("readelf").arg("-d").arg(lib.join(&real))));
    let so_line = d
        .lines()
        .find(|l| l.contains("(SONAME)"))
        .unwrap_or_else(|| panic!("{real} has no SONAME:\n{d}"));
    assert!(so_line.contains(&format!("[{soname}]")), "{so_line}");
    assert!(
        !d.lines()
            .any(|l| l.contains("RPATH") || l.contains("RUNPATH")),
        "the library itself carries an rpath:\n{d}"
    );

    let pc = fs::read_to_string(lib.join("pkgconfig/lshk.pc")).unwrap();
    println!("lshk.pc:\n{}", indent(&pc));
    assert_eq!(
        pc.lines().next(),
        Some(&format!("prefix={recorded_prefix}")[..]),
        "lshk.pc's first line"
    );
    assert!(pc.lines().any(|l| l == libdir_line), "no `{libdir_line}`");
    assert!(
        pc.lines()
            .any(|l| l == format!("Version: {}", env!("CARGO_PKG_VERSION"))),
        "lshk.pc's Version"
    );
    assert!(!pc.contains("rpath"), "lshk.pc sets an rpath");
    let src_inc = s.root.join("include").display().to_string();
    for f in ["lshkConfig.cmake", "lshkConfigVersion.cmake"] {
        let p = lib.join("cmake/lshk").join(f);
        assert_file(&p);
        let text = fs::read_to_string(&p).unwrap();
        assert!(!text.contains('@'), "{f}: an unsubstituted @VAR@");
        assert!(!text.contains(&src_inc), "{f} names {src_inc}");
    }
    assert!(!pc.contains(&src_inc), "lshk.pc names {src_inc}");
}

/// Checks through the dynamic loader (glibc's LD_TRACE_LOADED_OBJECTS: it
/// lists the libraries and exits) that `exe` loads liblshk from `libdir`.
fn assert_loads_from(exe: &Path, ld_library_path: Option<&Path>, libdir: &Path) {
    let mut cmd = Command::new(exe);
    cmd.env("LD_TRACE_LOADED_OBJECTS", "1");
    match ld_library_path {
        Some(p) => cmd.env("LD_LIBRARY_PATH", p),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let out = ok(run(&mut cmd));
    if !out.contains("=>") {
        println!("(not glibc's loader: which liblshk is loaded is not checked)");
        return;
    }
    let line = out
        .lines()
        .find(|l| l.contains(env!("LSHK_SONAME")))
        .unwrap_or_else(|| panic!("{} does not load liblshk:\n{out}", exe.display()));
    let want = format!("=> {}/", libdir.display());
    assert!(
        line.contains(&want),
        "{} loads liblshk from elsewhere than {}: {}",
        exe.display(),
        libdir.display(),
        line.trim()
    );
}

/// Runs `exe` (exit status 0 required) in `dir` and returns its stdout.
fn run_program(exe: &Path, dir: &Path, ld_library_path: Option<&Path>) -> String {
    let mut cmd = Command::new(exe);
    cmd.current_dir(dir)
        .env_remove("LSHK_MAX_ISA")
        .env("LSHK_EXAMPLE_SMALL", "1");
    match ld_library_path {
        Some(p) => cmd.env("LD_LIBRARY_PATH", p),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let out = ok(run(&mut cmd));
    println!(
        "$ {}\n{}",
        exe.file_name().unwrap().to_string_lossy(),
        indent(&out)
    );
    out
}

/// Copies the named `c_examples/` sources into `dir`.
fn copy_examples(s: &Setup, dir: &Path, names: &[&str]) {
    fs::create_dir_all(dir).unwrap();
    for n in names {
        fs::copy(s.root.join("c_examples").join(n), dir.join(n)).unwrap();
    }
}

/// `cmake -S src -B build -DCMAKE_PREFIX_PATH=prefix` (and `-Dlshk_DIR`
/// when given), with nothing else that could lead find_package to another
/// lshk.
fn cmake_configure(src: &Path, build: &Path, prefix: &Path, lshk_dir: Option<&Path>) -> String {
    let _ = fs::remove_dir_all(build);
    let mut cmd = Command::new("cmake");
    if let Some(d) = lshk_dir {
        cmd.arg(format!("-Dlshk_DIR={}", d.display()));
    }
    ok(run(cmd
        .arg("-S")
        .arg(src)
        .arg("-B")
        .arg(build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg("-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
        .arg("-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF")
        .env_remove("CMAKE_PREFIX_PATH")
        .env_remove("lshk_DIR")
        .env_remove("lshk_ROOT")
        .env_remove("LSHK_ROOT")))
}

fn cmake_build(build: &Path, target: Option<&str>) {
    let mut cmd = Command::new("cmake");
    cmd.arg("--build")
        .arg(build)
        .args(["--parallel", "2"])
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    if let Some(t) = target {
        cmd.args(["--target", t]);
    }
    ok(run(&mut cmd));
}

/// The `lshk_DIR` find_package chose, from the build's CMakeCache.txt.
fn cached_lshk_dir(build: &Path) -> PathBuf {
    let cache = fs::read_to_string(build.join("CMakeCache.txt")).unwrap();
    let v = cache
        .lines()
        .find_map(|l| l.strip_prefix("lshk_DIR:PATH="))
        .expect("lshk_DIR in CMakeCache.txt");
    PathBuf::from(v)
}

/// A project without compilers (configures in a fraction of a second) that
/// asks for each of `versions` and prints `lshk-probe <v>: <found>`, then the
/// shared target's file and include directory.
fn cmake_probe(dir: &Path, prefix: &Path, lshk_dir: Option<&Path>, versions: &[&str]) -> String {
    let src = dir.join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(
        src.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.16)\n\
             project(lshk_probe LANGUAGES NONE)\n\
             foreach(v IN ITEMS {})\n  \
               unset(lshk_FOUND)\n  \
               find_package(lshk ${{v}} QUIET)\n  \
               message(STATUS \"lshk-probe ${{v}}: ${{lshk_FOUND}}\")\n\
             endforeach()\n\
             find_package(lshk REQUIRED)\n\
             get_target_property(loc lshk::lshk IMPORTED_LOCATION)\n\
             get_target_property(inc lshk::lshk INTERFACE_INCLUDE_DIRECTORIES)\n\
             get_target_property(sloc lshk::lshk_static IMPORTED_LOCATION)\n\
             message(STATUS \"lshk-probe location: ${{loc}}\")\n\
             message(STATUS \"lshk-probe static: ${{sloc}}\")\n\
             message(STATUS \"lshk-probe include: ${{inc}}\")\n",
            versions.join(" ")
        ),
    )
    .unwrap();
    cmake_configure(&src, &dir.join("build"), prefix, lshk_dir)
}

fn probe_value<'a>(out: &'a str, key: &str) -> &'a str {
    let tag = format!("lshk-probe {key}: ");
    out.lines()
        .find_map(|l| l.split_once(&tag).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no `{tag}` line in:\n{out}"))
}

fn write_cmake_app(s: &Setup, dir: &Path) {
    copy_examples(s, dir, &["simhash.c", "serve.cpp"]);
    fs::write(
        dir.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.16)\n\
             project(lshk_install_test LANGUAGES C CXX)\n\
             set(CMAKE_C_STANDARD 11)\n\
             set(CMAKE_CXX_STANDARD 17)\n\
             find_package(Threads REQUIRED)\n\
             find_package(lshk {abi} REQUIRED)\n\
             message(STATUS \"lshk ${{lshk_VERSION}} from ${{lshk_DIR}}\")\n\
             add_executable(app simhash.c)\n\
             target_compile_options(app PRIVATE -Wall -Wextra -Werror -pedantic)\n\
             target_link_libraries(app PRIVATE lshk::lshk m)\n\
             add_executable(app_static simhash.c)\n\
             target_link_libraries(app_static PRIVATE lshk::lshk_static m)\n\
             add_executable(app_cpp serve.cpp)\n\
             target_compile_options(app_cpp PRIVATE -Wall -Wextra -Werror -pedantic)\n\
             target_link_libraries(app_cpp PRIVATE lshk::lshk Threads::Threads)\n",
            abi = abi()
        ),
    )
    .unwrap();
}

/// The RUNPATH/RPATH entries of `exe`.
fn runpath(exe: &Path) -> Vec<String> {
    let d = ok(run(Command::new("readelf").arg("-d").arg(exe)));
    d.lines()
        .filter(|l| l.contains("(RUNPATH)") || l.contains("(RPATH)"))
        .filter_map(|l| {
            l.split_once('[')
                .map(|(_, r)| r.trim().trim_end_matches(']'))
        })
        .flat_map(|r| r.split(':').map(str::to_string))
        .collect()
}

/// Builds the CMake project against `prefix` (all targets, or only `app`),
/// checks that it used `prefix` and nothing in the source tree, and runs
/// the programs without LD_LIBRARY_PATH.
fn cmake_app_against(s: &Setup, app_src: &Path, build: &Path, prefix: &Path, all: bool) {
    println!(
        "cmake: find_package(lshk {}) with CMAKE_PREFIX_PATH={}",
        abi(),
        prefix.display()
    );
    cmake_configure(app_src, build, prefix, None);
    assert_eq!(
        cached_lshk_dir(build),
        prefix.join("lib/cmake/lshk"),
        "find_package(lshk) found another installation"
    );
    cmake_build(build, if all { None } else { Some("app") });
    let cc = fs::read_to_string(build.join("compile_commands.json")).unwrap();
    for forbidden in [s.root.join("include"), s.root.join("c_examples")] {
        let f = forbidden.display().to_string();
        assert!(!cc.contains(&f), "the build used {f}:\n{cc}");
    }
    assert!(
        cc.contains(&format!("-I{}", prefix.join("include").display()))
            || cc.contains(&format!("-isystem {}", prefix.join("include").display())),
        "the build does not use {}/include:\n{cc}",
        prefix.display()
    );
    let libdir = prefix.join("lib");
    let rp = runpath(&build.join("app"));
    assert!(
        rp.iter().any(|e| Path::new(e) == libdir),
        "app's rpath {rp:?} does not name {}",
        libdir.display()
    );
    let deps = s.profile_dir.join("deps");
    assert!(
        !rp.iter()
            .any(|e| Path::new(e) == s.profile_dir || Path::new(e) == deps),
        "app's rpath {rp:?} names the build tree"
    );
    assert_loads_from(&build.join("app"), None, &libdir);
    let run_dir = build.join("run");
    fs::create_dir_all(&run_dir).unwrap();
    run_program(&build.join("app"), &run_dir, None);
    if all {
        let d = ok(run(Command::new("readelf")
            .arg("-d")
            .arg(build.join("app_static"))));
        assert!(
            !d.contains("liblshk"),
            "app_static (lshk::lshk_static) needs liblshk.so:\n{d}"
        );
        run_program(&build.join("app_static"), &run_dir, None);
        run_program(&build.join("app_cpp"), &run_dir, None);
    }
}

#[test]
fn make_install_then_build_against_the_prefix() {
    for t in TOOLS {
        if !available(t) {
            assert!(
                !in_ci(),
                "`{t}` not found on PATH (CI is set, so this is a failure, not a skip)"
            );
            println!("skipped: {t} not found");
            return;
        }
    }
    let s = setup();
    remove_stale_work_dirs(&s.profile_dir);
    let work = WorkDir(
        s.profile_dir
            .join(format!("install-test-{}", std::process::id())),
    );
    let _ = fs::remove_dir_all(&work.0);
    fs::create_dir_all(&work.0).unwrap();
    let tmp = &work.0;
    let soname = env!("LSHK_SONAME");

    // ---- 1. install into a prefix ----
    let prefix = tmp.join("prefix");
    make(
        s,
        &["install".into(), format!("PREFIX={}", prefix.display())],
    );
    let lib = prefix.join("lib");
    check_layout(
        s,
        &prefix.join("include"),
        &lib,
        &prefix.display().to_string(),
        "libdir=${exec_prefix}/lib",
    );
    let pkg = |args: &[&str]| -> String {
        ok(run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .env_remove("PKG_CONFIG_SYSROOT_DIR")
            .args(args)
            .arg("lshk")))
        .trim()
        .to_string()
    };
    assert_eq!(pkg(&["--modversion"]), env!("CARGO_PKG_VERSION"));
    let cflags = pkg(&["--cflags"]);
    let libs = pkg(&["--libs"]);
    println!("pkg-config --cflags: {cflags}\npkg-config --libs: {libs}");
    assert_eq!(cflags, format!("-I{}", prefix.join("include").display()));
    assert_eq!(libs, format!("-L{} -llshk", lib.display()));
    let static_libs = pkg(&["--static", "--libs"]);
    for l in ["-lpthread", "-ldl", "-lm"] {
        assert!(static_libs.contains(l), "--static --libs: {static_libs}");
    }

    // The version rule: this ABI generation (and this exact version) is
    // found; the previous and the next generation are not.
    let (major, minor): (u32, u32) = (
        env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap(),
        env!("CARGO_PKG_VERSION_MINOR").parse().unwrap(),
    );
    let (next, prev) = if major == 0 {
        (
            format!("0.{}", minor + 1),
            (minor > 0).then(|| format!("0.{}", minor - 1)),
        )
    } else {
        (format!("{}.0", major + 1), Some(format!("{}.0", major - 1)))
    };
    let mut asked = vec![abi(), version_num(), next.as_str()];
    if let Some(p) = &prev {
        asked.push(p);
    }
    let probe = cmake_probe(&tmp.join("probe"), &prefix, None, &asked);
    for (v, want) in [(abi(), "1"), (version_num(), "1"), (&next[..], "0")]
        .into_iter()
        .chain(prev.as_deref().map(|p| (p, "0")))
    {
        assert_eq!(
            probe_value(&probe, v),
            want,
            "find_package(lshk {v}) found = {}",
            probe_value(&probe, v)
        );
    }
    assert_eq!(
        probe_value(&probe, "location"),
        lib.join(format!("liblshk.so.{}", version_num()))
            .display()
            .to_string()
    );
    assert_eq!(
        probe_value(&probe, "include"),
        prefix.join("include").display().to_string()
    );
    // Reached through a link into another tree (as /lib -> /usr/lib), the
    // package still names the installed prefix.
    let linked = tmp.join("linked");
    fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&lib, linked.join("lib")).unwrap();
    let probe = cmake_probe(&tmp.join("probe-linked"), &linked, None, &[abi()]);
    assert_eq!(probe_value(&probe, abi()), "1");
    assert_eq!(
        probe_value(&probe, "include"),
        prefix.join("include").display().to_string()
    );

    // ---- 2. pkg-config build of a copied example ----
    let src = tmp.join("pkg-config-app");
    copy_examples(s, &src, &["simhash.c"]);
    let exe = src.join("simhash");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(src.join("simhash.c"))
        .args(cflags.split_whitespace())
        .args(libs.split_whitespace())
        .arg("-lm")
        .arg("-o")
        .arg(&exe);
    println!("$ {cc:?}");
    ok(run(&mut cc));
    assert!(
        runpath(&exe).is_empty(),
        "lshk.pc gave the program an rpath"
    );
    assert_loads_from(&exe, Some(&lib), &lib);
    run_program(&exe, &src, Some(&lib));

    // ---- 3. CMake build: find_package(lshk) + lshk::lshk ----
    let app = tmp.join("cmake-app");
    write_cmake_app(s, &app);
    cmake_app_against(s, &app, &tmp.join("cmake-build"), &prefix, true);

    // ---- 4. the prefix moved: the CMake package is relocatable ----
    let moved = tmp.join("moved/opt/lshk");
    fs::create_dir_all(moved.parent().unwrap()).unwrap();
    fs::rename(&prefix, &moved).unwrap();
    println!("moved {} to {}", prefix.display(), moved.display());
    cmake_app_against(s, &app, &tmp.join("cmake-build-moved"), &moved, false);
    make(
        s,
        &["uninstall".into(), format!("PREFIX={}", moved.display())],
    );
    let left = files_below(&moved);
    assert!(left.is_empty(), "make uninstall left {left:?}");
    assert!(
        !moved.join("lib/cmake/lshk").exists(),
        "make uninstall left lib/cmake/lshk"
    );

    // ---- 5. staged install for a package: DESTDIR, PREFIX, LIBDIR ----
    // (a Debian-style LIBDIR two levels below PREFIX: the CMake file climbs
    // four levels)
    const LIBDIR: &str = "lib/x86_64-linux-gnu";
    let stage = tmp.join("stage");
    let staged_args = [
        format!("DESTDIR={}", stage.display()),
        "PREFIX=/usr/local".to_string(),
        format!("LIBDIR=/usr/local/{LIBDIR}"),
    ];
    let mut args = vec!["install".to_string()];
    args.extend(staged_args.iter().cloned());
    make(s, &args);
    let staged = stage.join("usr/local");
    check_layout(
        s,
        &staged.join("include"),
        &staged.join(LIBDIR),
        "/usr/local",
        &format!("libdir=${{exec_prefix}}/{LIBDIR}"),
    );
    let top: Vec<_> = fs::read_dir(&stage)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(top, ["usr"], "DESTDIR holds more than usr/: {top:?}");
    // CMake searches <prefix>/lib/<multiarch> only with a language enabled
    // on a multiarch system, so the probe names the directory.
    let cmake_dir = staged.join(LIBDIR).join("cmake/lshk");
    let probe = cmake_probe(
        &tmp.join("probe-staged"),
        &staged,
        Some(&cmake_dir),
        &[abi()],
    );
    assert_eq!(probe_value(&probe, abi()), "1");
    assert_eq!(
        probe_value(&probe, "location"),
        staged
            .join(format!("{LIBDIR}/liblshk.so.{}", version_num()))
            .display()
            .to_string()
    );
    assert_eq!(
        probe_value(&probe, "static"),
        staged.join(LIBDIR).join("liblshk.a").display().to_string()
    );
    let mut args = vec!["uninstall".to_string()];
    args.extend(staged_args.iter().cloned());
    make(s, &args);
    let left = files_below(&stage);
    assert!(left.is_empty(), "make uninstall DESTDIR=... left {left:?}");
    println!("installed, used (pkg-config, CMake, moved prefix, DESTDIR) and uninstalled {soname}");
}
