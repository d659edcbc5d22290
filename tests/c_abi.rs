//! The C ABI seen from C and C++: compiles and runs `ffi_tests/*.c` (gcc and
//! clang, `-std=c11 -Wall -Wextra -Werror -pedantic`, against the shared
//! library and once against the static library), `ffi_tests/*.cpp` (g++ and
//! clang++, `-std=c++17`), compiles `include/lshk.h` alone as C99 and as
//! C++17, builds `c_examples/` with its Makefile and with CMake (both through
//! the `lshk.pc` that build.rs writes) using gcc and clang and runs every
//! example, and checks the shared library's SONAME.
//!
//! The shared helpers (which library is linked and why, job runner) are in
//! tests/c_harness/mod.rs; tests/memcheck.rs runs the same programs under
//! valgrind and the sanitizers.
//!
//! # Tools
//! gcc, g++, clang, clang++, make, cmake, pkg-config and readelf are
//! required: a missing one FAILS the test (CI installs them with `.ci/run`).
//!
//! Build products go to `target/<profile>/c_abi/`.

mod c_harness;
mod common;

use c_harness::{
    compile_test, examples, indent, require, run, run_jobs, setup, sources, stem, summary_lines,
    Job, CXX_FLAGS, C_FLAGS,
};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Compiles one test program against the shared library and runs it.
fn compile_and_run_test(
    compiler: &str,
    flags: &[&str],
    src: &Path,
    out_dir: &Path,
) -> Result<String, String> {
    let exe = compile_test(compiler, flags, &[], src, out_dir)?;
    let out = run(Command::new(&exe).env_remove("LSHK_MAX_ISA"))?;
    Ok(summary_lines(&out))
}

#[test]
fn ffi_tests_c_with_gcc_and_clang() {
    let s = setup();
    let srcs = sources(&s.root.join("ffi_tests"), "c");
    assert!(!srcs.is_empty(), "no ffi_tests/*.c found");
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for cc in ["gcc", "clang"] {
        require(cc);
        for src in &srcs {
            let out_dir = s.work.join("ffi").join(cc);
            jobs.push((
                format!("{cc} ffi_tests/{}.c", stem(src)),
                Box::new(move || compile_and_run_test(cc, C_FLAGS, src, &out_dir)),
            ));
        }
    }
    run_jobs(jobs);
}

/// The README's static-linking recipe: `liblshk.a -lpthread -ldl -lm`.
#[test]
fn ffi_tests_c_static_link() {
    let s = setup();
    require("gcc");
    let srcs = sources(&s.root.join("ffi_tests"), "c");
    let out_dir = s.work.join("ffi").join("static");
    fs::create_dir_all(&out_dir).unwrap();
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for src in &srcs {
        let out_dir = &out_dir;
        jobs.push((
            format!("gcc (static liblshk.a) ffi_tests/{}.c", stem(src)),
            Box::new(move || {
                let exe = out_dir.join(stem(src));
                run(Command::new("gcc")
                    .args(C_FLAGS)
                    .arg(format!("-I{}", s.root.join("include").display()))
                    .arg(format!("-I{}", s.root.join("ffi_tests").display()))
                    .arg(src)
                    .arg(s.profile_dir.join("liblshk.a"))
                    .args(["-lpthread", "-ldl", "-lm", "-o"])
                    .arg(&exe))?;
                let dynamic = run(Command::new("readelf").arg("-d").arg(&exe))?;
                if dynamic.contains("liblshk") {
                    return Err(format!(
                        "{} still needs liblshk.so:\n{dynamic}",
                        exe.display()
                    ));
                }
                Ok(summary_lines(&run(
                    Command::new(&exe).env_remove("LSHK_MAX_ISA")
                )?))
            }),
        ));
    }
    run_jobs(jobs);
}

#[test]
fn ffi_tests_cpp_with_gxx_and_clangxx() {
    let s = setup();
    let srcs = sources(&s.root.join("ffi_tests"), "cpp");
    if srcs.is_empty() {
        println!("no ffi_tests/*.cpp yet: nothing to compile");
        return;
    }
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for cxx in ["g++", "clang++"] {
        require(cxx);
        for src in &srcs {
            let out_dir = s.work.join("ffi").join(cxx);
            jobs.push((
                format!("{cxx} ffi_tests/{}.cpp", stem(src)),
                Box::new(move || compile_and_run_test(cxx, CXX_FLAGS, src, &out_dir)),
            ));
        }
    }
    run_jobs(jobs);
}

/// `include/lshk.h` alone (included twice, one function and one constant
/// used) compiles as C99 and as C++17 with every compiler.
#[test]
fn header_alone_compiles_as_c99_and_cxx17() {
    let s = setup();
    let dir = s.work.join("header");
    fs::create_dir_all(&dir).unwrap();
    let body = "#include \"lshk.h\"\n#include \"lshk.h\"\n\
                int lshk_header_probe(void);\n\
                int lshk_header_probe(void) {\n  \
                  lshk_simhash *h = NULL;\n  \
                  lshk_status st = lshk_simhash_free(h);\n  \
                  return st == LSHK_STATUS_OK && LSHK_ISA_AVX512 == 3 && LSHK_VERSION_MAJOR >= 0;\n}\n";
    let c = dir.join("header_only.c");
    let cpp = dir.join("header_only.cpp");
    fs::write(&c, body).unwrap();
    fs::write(&cpp, body).unwrap();
    let c99: &[&str] = &["-std=c99", "-pedantic", "-Werror", "-Wall", "-Wextra"];
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for (compiler, flags, src) in [
        ("gcc", c99, &c),
        ("clang", c99, &c),
        ("g++", CXX_FLAGS, &cpp),
        ("clang++", CXX_FLAGS, &cpp),
    ] {
        require(compiler);
        let dir = &dir;
        jobs.push((
            format!("{compiler} {} include/lshk.h", flags[0]),
            Box::new(move || {
                let obj = dir.join(format!("{compiler}.o"));
                run(Command::new(compiler)
                    .args(flags)
                    .arg(format!("-I{}", s.root.join("include").display()))
                    .arg("-c")
                    .arg(src)
                    .arg("-o")
                    .arg(&obj))
                .map(|_| String::new())
            }),
        ));
    }
    run_jobs(jobs);
}

/// SONAME `liblshk.so.<abi>` (`liblshk.so.0.2` for 0.2.z; build.rs:
/// `cargo:rustc-cdylib-link-arg=-Wl,-soname`), that name in target/<profile>
/// resolving to the library, and a program linked with `-llshk` needing it
/// and finding it at run time through its rpath.
#[test]
fn soname_is_the_abi_generation() {
    const SONAME: &str = env!("LSHK_SONAME");
    let (major, minor) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
    );
    let want = if major == "0" {
        format!("liblshk.so.0.{minor}")
    } else {
        format!("liblshk.so.{major}")
    };
    assert_eq!(SONAME, want);
    let s = setup();
    require("readelf");
    require("gcc");
    let so = s.profile_dir.join("liblshk.so");
    let d = run(Command::new("readelf").arg("-d").arg(&so)).unwrap();
    let soname = d
        .lines()
        .find(|l| l.contains("(SONAME)"))
        .unwrap_or_else(|| panic!("{} has no SONAME:\n{d}", so.display()));
    println!("{}: {}", so.display(), soname.trim());
    assert!(soname.contains(&format!("[{SONAME}]")), "{soname}");

    let link = s.profile_dir.join(SONAME);
    let resolved = fs::canonicalize(&link)
        .unwrap_or_else(|e| panic!("{} does not resolve: {e}", link.display()));
    assert_eq!(resolved, fs::canonicalize(&so).unwrap());

    let dir = s.work.join("soname");
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("version.c");
    fs::write(
        &src,
        "#include <stdio.h>\n#include <string.h>\n#include \"lshk.h\"\n\
         int main(void) {\n  printf(\"lshk %s\\n\", lshk_version());\n  \
         return strcmp(lshk_version(), LSHK_VERSION_STRING) != 0;\n}\n",
    )
    .unwrap();
    let exe = dir.join("version");
    run(Command::new("gcc")
        .args(C_FLAGS)
        .arg(format!("-I{}", s.root.join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", s.profile_dir.display()))
        .arg(format!("-Wl,-rpath,{}", s.profile_dir.display()))
        .arg("-llshk"))
    .unwrap();
    let d = run(Command::new("readelf").arg("-d").arg(&exe)).unwrap();
    assert!(
        d.lines()
            .any(|l| l.contains("(NEEDED)") && l.contains(&format!("[{SONAME}]"))),
        "the program should need {SONAME}:\n{d}"
    );
    let out = run(&mut Command::new(&exe)).unwrap();
    print!("{out}");
}

/// `lshk.pc` (written by build.rs into target/<profile>) found through
/// PKG_CONFIG_PATH, pointing at this checkout's header and this profile's
/// library.
#[test]
fn pkg_config_file() {
    let s = setup();
    require("pkg-config");
    let pc = fs::read_to_string(s.profile_dir.join("lshk.pc")).unwrap();
    println!("lshk.pc:\n{}", indent(&pc));
    let pkg = |args: &[&str]| {
        run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", &s.profile_dir)
            .args(args)
            .arg("lshk"))
        .unwrap()
        .trim()
        .to_string()
    };
    assert_eq!(pkg(&["--modversion"]), env!("CARGO_PKG_VERSION"));
    let cflags = pkg(&["--cflags"]);
    let libs = pkg(&["--libs"]);
    println!("--cflags: {cflags}\n--libs: {libs}");
    let inc = format!("-I{}", s.root.join("include").display());
    assert!(cflags.split_whitespace().any(|f| f == inc), "{cflags}");
    let libdir = format!("-L{}", s.profile_dir.display());
    assert!(libs.split_whitespace().any(|f| f == libdir), "{libs}");
    assert!(libs.split_whitespace().any(|f| f == "-llshk"), "{libs}");
    let static_libs = pkg(&["--static", "--libs"]);
    for l in ["-lpthread", "-ldl", "-lm"] {
        assert!(static_libs.contains(l), "{static_libs}");
    }
}

/// Runs every example binary in `bin_dir`; also checks the binary's rpath
/// names this profile's library directory (i.e. lshk.pc of this profile was
/// used, not another one).
fn run_examples(bin_dir: &Path) -> Result<String, String> {
    let s = setup();
    let mut report = String::new();
    for e in examples() {
        let exe = bin_dir.join(&e);
        if !exe.is_file() {
            return Err(format!("{} was not built", exe.display()));
        }
        let d = run(Command::new("readelf").arg("-d").arg(&exe))?;
        let libdir = s.profile_dir.to_string_lossy();
        if !d
            .lines()
            .any(|l| (l.contains("(RUNPATH)") || l.contains("(RPATH)")) && l.contains(&*libdir))
        {
            return Err(format!("{e}: rpath does not name {libdir}:\n{d}"));
        }
        let out = run(Command::new(&exe)
            .current_dir(bin_dir)
            .env_remove("LSHK_MAX_ISA"))?;
        report.push_str(&format!("$ {e}\n{out}"));
    }
    Ok(report)
}

#[test]
fn c_examples_with_make() {
    let s = setup();
    for t in [
        "make",
        "pkg-config",
        "readelf",
        "gcc",
        "g++",
        "clang",
        "clang++",
    ] {
        require(t);
    }
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for (cc, cxx) in [("gcc", "g++"), ("clang", "clang++")] {
        jobs.push((
            format!("make CC={cc} CXX={cxx} (c_examples/Makefile)"),
            Box::new(move || {
                let build = s.work.join(format!("make-{cc}"));
                let _ = fs::remove_dir_all(&build);
                run(Command::new("make")
                    .arg("-C")
                    .arg(s.root.join("c_examples"))
                    .arg(format!("BUILD={}", build.display()))
                    .arg(format!("CC={cc}"))
                    .arg(format!("CXX={cxx}"))
                    .env("PKG_CONFIG_PATH", &s.profile_dir)
                    .env_remove("MAKEFLAGS")
                    .env_remove("MFLAGS"))?;
                run_examples(&build)
            }),
        ));
    }
    run_jobs(jobs);
}

#[test]
fn c_examples_with_cmake() {
    let s = setup();
    for t in [
        "cmake",
        "make",
        "pkg-config",
        "readelf",
        "gcc",
        "g++",
        "clang",
        "clang++",
    ] {
        require(t);
    }
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for (cc, cxx) in [("gcc", "g++"), ("clang", "clang++")] {
        jobs.push((
            format!("cmake -DCMAKE_C_COMPILER={cc} -DCMAKE_CXX_COMPILER={cxx} (c_examples/CMakeLists.txt)"),
            Box::new(move || {
                let build = s.work.join(format!("cmake-{cc}"));
                let _ = fs::remove_dir_all(&build);
                run(Command::new("cmake")
                    .arg("-S")
                    .arg(s.root.join("c_examples"))
                    .arg("-B")
                    .arg(&build)
                    .arg(format!("-DCMAKE_C_COMPILER={cc}"))
                    .arg(format!("-DCMAKE_CXX_COMPILER={cxx}"))
                    .env("PKG_CONFIG_PATH", &s.profile_dir)
                    .env_remove("CC")
                    .env_remove("CXX"))?;
                run(Command::new("cmake")
                    .arg("--build")
                    .arg(&build)
                    .args(["--parallel", "2"])
                    .env_remove("MAKEFLAGS")
                    .env_remove("MFLAGS"))?;
                run_examples(&build)
            }),
        ));
    }
    run_jobs(jobs);
}
