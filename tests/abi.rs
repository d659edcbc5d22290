//! ABI stability of the C interface (issue 8, item 5).
//!
//! 1. `include/lshk.h` compiles as C99 and C11 (gcc, clang) and as C++11 and
//!    C++17 (g++, clang++) with `-pedantic -Werror -Wall -Wextra`: a
//!    translation unit that only includes it, one that includes it inside an
//!    `extern "C" {}` block (C++), and one that takes the address of every
//!    function it declares and is linked against `liblshk.so` (so every
//!    declaration names an exported function with C linkage). The functions
//!    the header declares are exactly the `lshk_*` functions the library
//!    exports. `include/lshk.hpp` (and `lshk_iul.hpp`) compile as C++17 and
//!    refuse C++11 with their `#error`.
//! 2. `abi-dumper` dumps the ABI of the `liblshk.so` this `cargo test` built
//!    (the functions `include/lshk.h` declares), `abi/normalize.pl` makes
//!    the dump comparable and stable, and `abi-compliance-checker` compares
//!    it with the committed baseline `abi/lshk-<version>.dump` (the highest
//!    version not above Cargo.toml's). Any problem or warning the checker
//!    reports (removed function, changed parameter or return type, changed
//!    struct field, size or order, removed or changed `#define` constant)
//!    fails the test, unless Cargo.toml's major version is higher than the
//!    baseline's (then a new baseline is due: `abi/update.sh`). Added
//!    functions and constants are compatible.
//! 3. A self-test proves the pipeline flags breakage: two tiny Rust cdylibs
//!    built with rustc (v1 and an incompatible v2: a removed function, a
//!    struct field and a parameter that changed type, a changed constant) are
//!    dumped and compared the same way and must be reported incompatible,
//!    while v1 against a v3 that only adds a function and a constant (and
//!    moves the struct to another Rust module) must be compatible.
//!
//! abi-dumper, abi-compliance-checker (and perl, which they run on) are
//! optional locally: without them the dump tests print `skipped: abi-dumper
//! not found` — except when the environment variable `CI` is set, where a
//! missing tool fails the test. The compilers are required (as in
//! tests/c_abi.rs). The dump check needs full DWARF, i.e. the dev profile
//! (`cargo test`); under `cargo test --release` (line tables only) it prints
//! a skip line.
//!
//! Build products go to `target/<profile>/abi/`.

mod common;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>/deps`, where this test executable and the freshly built
/// `liblshk.so` live.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test executable");
    let deps = exe.parent().expect("test executable has a parent dir");
    assert_eq!(
        deps.file_name(),
        Some(OsStr::new("deps")),
        "expected the test executable in target/<profile>/deps, found {}",
        exe.display()
    );
    deps.to_path_buf()
}

/// The `liblshk.so` built by this `cargo test` (crate-type cdylib).
fn built_library() -> PathBuf {
    let so = deps_dir().join("liblshk.so");
    assert!(
        so.is_file(),
        "{} was not built by this cargo invocation; crate-type must include cdylib",
        so.display()
    );
    so
}

/// `target/<profile>/abi/<sub>`, created empty-or-existing.
fn work_dir(sub: &str) -> PathBuf {
    let d = deps_dir().parent().unwrap().join("abi").join(sub);
    fs::create_dir_all(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
    d
}

/// Runs a command; Ok(stdout) on exit 0, Err(description) otherwise.
fn run(cmd: &mut Command) -> Result<String, String> {
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

fn must(r: Result<String, String>) -> String {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn tool_works(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True when the ABI tools are usable. Otherwise prints the skip line, or
/// panics when `CI` is set (CI must not skip the check silently).
fn abi_tools_present() -> bool {
    for (tool, arg) in [
        ("abi-dumper", "-dumpversion"),
        ("abi-compliance-checker", "-dumpversion"),
        ("perl", "-v"),
    ] {
        if !tool_works(tool, arg) {
            assert!(
                !common::tiers::ci(),
                "`{tool}` not found but CI is set: the ABI check must run in CI \
                 (.ci/run installs abi-dumper and abi-compliance-checker with apt-get)"
            );
            println!("skipped: {tool} not found");
            return false;
        }
    }
    true
}

/// Compilers are required, as in tests/c_abi.rs.
fn require_compiler(tool: &str) {
    assert!(
        tool_works(tool, "--version"),
        "`{tool}` is required by the ABI tests but was not found on PATH \
         (.ci/run installs gcc, g++ and clang with apt-get)"
    );
}

// ------------------------------------------------------------------ header

/// Names of the functions `include/lshk.h` declares, in order: cbindgen
/// writes each declaration starting in column 0 (`<type> lshk_x(`).
fn header_functions(header: &str) -> Vec<String> {
    let mut v = Vec::new();
    for line in header.lines() {
        let first = line.chars().next();
        if !matches!(first, Some(c) if c.is_ascii_alphabetic() || c == '_') {
            continue;
        }
        if line.starts_with("typedef") || line.starts_with("extern") {
            continue;
        }
        let Some(paren) = line.find('(') else {
            continue;
        };
        let before = &line[..paren];
        let name = before
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        if name.starts_with("lshk_") {
            v.push(name.to_string());
        }
    }
    v
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The functions `liblshk.so` exports whose names start with `lshk_`.
fn exported_functions(so: &Path) -> BTreeSet<String> {
    let out = must(run(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(so)));
    out.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_addr, kind, name) = (it.next()?, it.next()?, it.next()?);
            (kind == "T" && name.starts_with("lshk_")).then(|| name.to_string())
        })
        .collect()
}

/// A translation unit that takes the address of every declared function.
/// A cast to `void (*)(void)` is allowed in ISO C and C++ (function pointer
/// to function pointer) and exempt from -Wcast-function-type.
fn address_tu(fns: &[String], cxx: bool) -> String {
    let mut s = String::from("#include \"lshk.h\"\n#include <stdio.h>\n\n");
    s.push_str("typedef void (*lshk_any_fn)(void);\n");
    s.push_str("static const lshk_any_fn lshk_all_functions[] = {\n");
    for f in fns {
        if cxx {
            s.push_str(&format!("    reinterpret_cast<lshk_any_fn>(&{f}),\n"));
        } else {
            s.push_str(&format!("    (lshk_any_fn)&{f},\n"));
        }
    }
    s.push_str("};\n\nint main(void) {\n");
    s.push_str("    size_t i, n = sizeof lshk_all_functions / sizeof lshk_all_functions[0];\n");
    s.push_str("    for (i = 0; i < n; i++) {\n");
    s.push_str("        if (lshk_all_functions[i] == NULL) return 1;\n    }\n");
    s.push_str("    printf(\"%u functions, library %s\\n\", (unsigned)n, lshk_version());\n");
    s.push_str("    return 0;\n}\n");
    s
}

#[test]
fn header_compiles_as_c99_c11_cxx11_cxx17_and_declares_every_export() {
    let t0 = Instant::now();
    let root = root();
    let include = root.join("include");
    let header = read(&include.join("lshk.h"));
    let fns = header_functions(&header);
    assert!(
        fns.len() > 10,
        "found only {} functions in lshk.h",
        fns.len()
    );

    // Declared functions == exported lshk_* functions.
    let so = built_library();
    require_compiler("nm");
    let declared: BTreeSet<String> = fns.iter().cloned().collect();
    assert_eq!(declared.len(), fns.len(), "a function is declared twice");
    let exported = exported_functions(&so);
    let missing: Vec<_> = declared.difference(&exported).collect();
    let undeclared: Vec<_> = exported.difference(&declared).collect();
    assert!(
        missing.is_empty() && undeclared.is_empty(),
        "declared in lshk.h but not exported by liblshk.so: {missing:?}; \
         exported but not declared in lshk.h: {undeclared:?}"
    );

    let dir = work_dir("header");
    let c_tu = dir.join("include_only.c");
    fs::write(&c_tu, "#include \"lshk.h\"\nint main(void) { return 0; }\n").unwrap();
    let cxx_tu = dir.join("include_only.cpp");
    fs::write(&cxx_tu, "#include \"lshk.h\"\nint main() { return 0; }\n").unwrap();
    let cxx_extern_tu = dir.join("include_in_extern_c.cpp");
    fs::write(
        &cxx_extern_tu,
        "extern \"C\" {\n#include \"lshk.h\"\n}\n\
         #include \"lshk.h\" /* again: the include guard */\n\
         int main() { return lshk_version() == nullptr; }\n",
    )
    .unwrap();
    let c_addr = dir.join("address_of_every_function.c");
    fs::write(&c_addr, address_tu(&fns, false)).unwrap();
    let cxx_addr = dir.join("address_of_every_function.cpp");
    fs::write(&cxx_addr, address_tu(&fns, true)).unwrap();
    let hpp_tu = dir.join("hpp.cpp");
    fs::write(
        &hpp_tu,
        "#include \"lshk.hpp\"\n#include \"lshk_iul.hpp\"\nint main() { return 0; }\n",
    )
    .unwrap();

    const WARN: &[&str] = &["-pedantic", "-Werror", "-Wall", "-Wextra"];
    let lib_dir = so.parent().unwrap().to_path_buf();
    // Programs linked with -llshk need the SONAME (build.rs) at run
    // time. `cargo test` (unlike `cargo build`) does not copy liblshk.so out
    // of deps/, so build.rs's link in target/<profile> may dangle in a fresh
    // checkout: give deps/ its own link, next to the library the rpath names.
    let soname = lib_dir.join(env!("LSHK_SONAME"));
    if fs::symlink_metadata(&soname).is_err() {
        std::os::unix::fs::symlink("liblshk.so", &soname).unwrap();
    }
    let mut jobs: Vec<(String, Command)> = Vec::new();
    let mut count = 0;
    for (cc, std, tus, lang) in [
        ("gcc", "c99", vec![&c_tu, &c_addr], "c"),
        ("gcc", "c11", vec![&c_tu, &c_addr], "c"),
        ("clang", "c99", vec![&c_tu, &c_addr], "c"),
        ("clang", "c11", vec![&c_tu, &c_addr], "c"),
        (
            "g++",
            "c++11",
            vec![&cxx_tu, &cxx_extern_tu, &cxx_addr],
            "c++",
        ),
        (
            "g++",
            "c++17",
            vec![&cxx_tu, &cxx_extern_tu, &cxx_addr, &hpp_tu],
            "c++",
        ),
        (
            "clang++",
            "c++11",
            vec![&cxx_tu, &cxx_extern_tu, &cxx_addr],
            "c++",
        ),
        (
            "clang++",
            "c++17",
            vec![&cxx_tu, &cxx_extern_tu, &cxx_addr, &hpp_tu],
            "c++",
        ),
    ] {
        require_compiler(cc);
        for tu in tus {
            let exe = dir.join(format!(
                "{}-{cc}-{std}",
                tu.file_stem().unwrap().to_string_lossy()
            ));
            let mut cmd = Command::new(cc);
            cmd.arg(format!("-std={std}"))
                .args(WARN)
                .arg("-x")
                .arg(lang)
                .arg(format!("-I{}", include.display()))
                .arg(tu)
                .arg("-x")
                .arg("none");
            let link = tu == &c_addr || tu == &cxx_addr || tu == &cxx_extern_tu;
            if link {
                // Link: every declaration must resolve to an export of the
                // library (with C linkage, for C++).
                cmd.arg(format!("-L{}", lib_dir.display()))
                    .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
                    .arg("-llshk");
            }
            cmd.arg("-o").arg(&exe);
            jobs.push((format!("{cc} -std={std} {}", tu.display()), cmd));
            count += 1;
            if link {
                // cargo puts target/<profile> first on LD_LIBRARY_PATH, which
                // beats the rpath: a liblshk.so uplifted there by an earlier
                // run (tests/c_harness) would be loaded instead of this one.
                let mut run = Command::new(&exe);
                run.env("LD_LIBRARY_PATH", &lib_dir);
                jobs.push((format!("run {}", exe.display()), run));
            }
        }
    }
    for (what, mut cmd) in jobs {
        let out = run(&mut cmd).unwrap_or_else(|e| panic!("{what}: {e}"));
        if what.starts_with("run ") && what.contains("address_of") {
            assert!(
                out.contains(&format!("{} functions", fns.len())),
                "{what}: unexpected output {out:?}"
            );
        }
    }

    // lshk.hpp is C++17 only and says so.
    for cxx in ["g++", "clang++"] {
        let out = Command::new(cxx)
            .args(["-std=c++11", "-fsyntax-only"])
            .args(WARN)
            .arg(format!("-I{}", include.display()))
            .arg(&hpp_tu)
            .output()
            .expect("run the C++ compiler");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("lshk.hpp needs C++17"),
            "{cxx} -std=c++11 on lshk.hpp should stop at its #error \
             \"lshk.hpp needs C++17\"; status {}, stderr:\n{err}",
            out.status
        );
        count += 1;
    }
    println!(
        "lshk.h: {} functions declared = exported; {count} compilations \
         (C99/C11 gcc+clang, C++11/C++17 g++/clang++, lshk.hpp C++17 ok and \
         C++11 refused) in {:.1} s",
        fns.len(),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------- ABI dump

/// The ABI generation of a version: the major version, or for 0.y.z the
/// minor (Cargo's semver rule: in 0.y.z, y is the breaking number). An
/// incompatible ABI is allowed only when this is raised (the SONAME carries
/// it, build.rs).
fn abi_generation(v: (u64, u64, u64)) -> (u64, u64) {
    if v.0 == 0 {
        (0, v.1)
    } else {
        (v.0, 0)
    }
}

/// `x.y.z` -> (x, y, z).
fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split(['.', '-', '+']).map(|p| p.parse::<u64>());
    let r = (it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?);
    Some(r)
}

/// Dumps `so` (the functions `header` declares) and normalizes the dump
/// with abi/normalize.pl into `out`.
fn dump_abi(so: &Path, header: &Path, version: &str, work: &Path, out: &Path) {
    let normalize = root().join("abi/normalize.pl");
    // The symbol list for abi-dumper (not -public-headers, which needs
    // ctags), from the same parser normalize.pl uses.
    let functions = must(run(Command::new("perl")
        .arg(&normalize)
        .arg("--functions")
        .arg(header)));
    let list = work.join("functions");
    fs::write(&list, functions).unwrap();
    let raw = work.join("raw.dump");
    let _ = fs::remove_file(&raw);
    must(run(Command::new("abi-dumper")
        .arg(so)
        .arg("-o")
        .arg(&raw)
        .args(["-lver", version, "-symbols-list"])
        .arg(&list)
        .arg("-quiet")));
    must(run(Command::new("perl")
        .arg(&normalize)
        .arg(&raw)
        .arg(header)
        .arg(version)
        .arg(out)));
}

/// abi-compliance-checker's verdict on old -> new.
struct Verdict {
    binary_problems: u64,
    binary_warnings: u64,
    source_problems: u64,
    source_warnings: u64,
    /// The report as text (tags stripped).
    text: String,
    report: PathBuf,
}

impl Verdict {
    fn compatible(&self) -> bool {
        self.binary_problems + self.source_problems + self.source_warnings == 0
            && self.binary_warnings == self.reserved_field_uses()
    }
    /// Binary warnings that only say a field named `reserved...` was given
    /// a name and a use ("Reserved field reserved has been replaced by X").
    /// lshk's reserved fields had to be 0 (anything else was refused with
    /// INVALID_ARGUMENT), and a field that takes one over keeps 0 as the
    /// old behaviour (abi/README.md): an old client that set 0 gets what it
    /// got before, so such a change is compatible.
    fn reserved_field_uses(&self) -> u64 {
        self.text
            .matches("Reserved field reserved")
            .zip(
                self.text
                    .matches("This field will not be initialized by old clients"),
            )
            .count() as u64
    }
    fn summary(&self) -> String {
        format!(
            "binary: {} problems, {} warnings; source: {} problems, {} warnings",
            self.binary_problems, self.binary_warnings, self.source_problems, self.source_warnings
        )
    }
}

fn html_to_text(html: &str) -> String {
    let body = html.find("<body").map_or(html, |i| &html[i..]);
    let mut out = String::with_capacity(body.len() / 2);
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&#160;", " ")
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// "Total binary compatibility problems: 3, warnings: 1" -> (3, 1).
fn totals(stdout: &str, kind: &str) -> (u64, u64) {
    let key = format!("Total {kind} compatibility problems: ");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .unwrap_or_else(|| panic!("no `{key}` line in the checker's output:\n{stdout}"));
    let mut it = line.split(", warnings: ");
    let p = it.next().unwrap().trim().parse().unwrap();
    let w = it.next().unwrap().trim().parse().unwrap();
    (p, w)
}

fn compare(lib: &str, old: &Path, new: &Path, report: &Path) -> Verdict {
    let out = Command::new("abi-compliance-checker")
        .args(["-l", lib, "-old"])
        .arg(old)
        .arg("-new")
        .arg(new)
        .arg("-report-path")
        .arg(report)
        .output()
        .expect("run abi-compliance-checker");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // Exit code: 0 compatible, 1 incompatible, anything else an error.
    let code = out.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "abi-compliance-checker failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (binary_problems, binary_warnings) = totals(&stdout, "binary");
    let (source_problems, source_warnings) = totals(&stdout, "source");
    let v = Verdict {
        binary_problems,
        binary_warnings,
        source_problems,
        source_warnings,
        text: html_to_text(&read(report)),
        report: report.to_path_buf(),
    };
    assert_eq!(
        code == Some(0),
        v.binary_problems + v.source_problems == 0,
        "exit code {code:?} disagrees with {}",
        v.summary()
    );
    v
}

/// The committed baselines: (version, path), sorted by version.
fn baselines() -> Vec<((u64, u64, u64), PathBuf)> {
    let dir = root().join("abi");
    let mut v: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let ver = name.strip_prefix("lshk-")?.strip_suffix(".dump")?;
            Some((parse_version(ver)?, p))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn library_abi_is_compatible_with_committed_dump() {
    if !abi_tools_present() {
        return;
    }
    let t0 = Instant::now();
    let version = env!("CARGO_PKG_VERSION");
    let current = parse_version(version).expect("Cargo.toml version is x.y.z");
    let profile = deps_dir()
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    if profile != "debug" {
        println!(
            "skipped: ABI dump check needs the full DWARF of the dev profile \
             (this is target/{profile}); `cargo test` runs it"
        );
        return;
    }
    let Some((base_ver, base)) = baselines().into_iter().rev().find(|(v, _)| *v <= current) else {
        panic!(
            "no committed ABI baseline abi/lshk-<version>.dump with a version <= {version}: \
             run abi/update.sh and commit the dump"
        );
    };

    let work = work_dir("lib");
    let fresh = work.join(format!("lshk-{version}.dump"));
    dump_abi(
        &built_library(),
        &root().join("include/lshk.h"),
        version,
        &work,
        &fresh,
    );
    let t_dump = t0.elapsed().as_secs_f64();
    let dump_text = read(&fresh);
    // The dump must carry real type information (full DWARF): a public
    // struct with its fields. Without it the comparison would be vacuous.
    for needle in [
        "'Name' => 'struct lshk_index_params'",
        "'name' => 'struct_size'",
        "'ShortName' => 'lshk_index_build'",
    ] {
        assert!(
            dump_text.contains(needle),
            "the fresh ABI dump {} lacks {needle}: liblshk.so has no usable DWARF \
             type information (is the dev profile's debuginfo still on?)",
            fresh.display()
        );
    }
    // And it must not depend on where the checkout is.
    let checkout = root();
    assert!(
        !dump_text.contains(checkout.to_str().unwrap()),
        "the normalized dump contains the checkout path {}",
        checkout.display()
    );

    let v = compare("lshk", &base, &fresh, &work.join("report.html"));
    let added = v
        .text
        .split("Added Symbols - ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("?")
        .to_string();
    let base_name = base.file_name().unwrap().to_string_lossy().into_owned();
    if v.compatible() {
        // Informational: the dump is deterministic, so an unchanged ABI
        // gives the committed file byte for byte (from any checkout path).
        let identical = base_ver == current && read(&base) == dump_text;
        println!(
            "ABI of liblshk.so {version} is compatible with {base_name} \
             ({added} added functions; {}; fresh dump identical to the baseline: \
             {identical}); dump {:.1} s, total {:.1} s",
            v.summary(),
            t_dump,
            t0.elapsed().as_secs_f64()
        );
        return;
    }
    if abi_generation(current) > abi_generation(base_ver) {
        println!(
            "ABI changes against {base_name} are allowed: the major version was \
             raised to {version} ({}). Record the new baseline with abi/update.sh. \
             Report: {}",
            v.summary(),
            v.report.display()
        );
        return;
    }
    let detail: String = v.text.chars().take(6000).collect();
    panic!(
        "incompatible ABI change against the committed baseline {base_name} ({}). \
         Either keep the old ABI (add a new function instead of changing one; \
         never reorder, retype or remove fields, functions or #define values), \
         or raise the major version in Cargo.toml and run abi/update.sh. \
         Full report: {}\n\n{detail}",
        v.summary(),
        v.report.display()
    );
}

// ---------------------------------------------------------------- self-test

/// v1 of a tiny library with the same shape as lshk's C ABI: a parameter
/// struct returned by value, a function taking it by pointer, an opaque
/// handle, a removable function, and constants.
const TINY_V1_RS: &str = r#"
pub mod ffi {
    #[repr(C)]
    pub struct tiny_params { pub struct_size: u32, pub a: u32, pub b: f32 }
    #[repr(C)]
    pub struct tiny_obj { _private: [u8; 0] }
    #[no_mangle]
    pub extern "C" fn tiny_params_default() -> tiny_params {
        tiny_params { struct_size: 12, a: 1, b: 2.0 }
    }
    #[no_mangle]
    pub unsafe extern "C" fn tiny_run(o: *const tiny_obj, p: *const tiny_params, n: usize) -> u32 {
        if o.is_null() { return 0; }
        // SAFETY: the caller passes a valid tiny_params.
        unsafe { (*p).a + n as u32 }
    }
    #[no_mangle]
    pub extern "C" fn tiny_gone() -> u32 { 7 }
}
"#;
const TINY_V1_H: &str = "#include <stddef.h>\n#include <stdint.h>\n\
#define TINY_MODE_A 0\n#define TINY_MODE_B 1\n\
typedef struct tiny_obj tiny_obj;\n\
typedef struct tiny_params { uint32_t struct_size; uint32_t a; float b; } tiny_params;\n\
tiny_params tiny_params_default(void);\n\
uint32_t tiny_run(const tiny_obj *o, const tiny_params *p, size_t n);\n\
uint32_t tiny_gone(void);\n";

/// v2: tiny_gone removed, field `a` u32 -> u64, parameter `n` usize -> u32,
/// TINY_MODE_B 1 -> 2. Every one of these breaks old callers.
const TINY_V2_RS: &str = r#"
pub mod ffi {
    #[repr(C)]
    pub struct tiny_params { pub struct_size: u32, pub a: u64, pub b: f32 }
    #[repr(C)]
    pub struct tiny_obj { _private: [u8; 0] }
    #[no_mangle]
    pub extern "C" fn tiny_params_default() -> tiny_params {
        tiny_params { struct_size: 24, a: 1, b: 2.0 }
    }
    #[no_mangle]
    pub unsafe extern "C" fn tiny_run(o: *const tiny_obj, p: *const tiny_params, n: u32) -> u32 {
        if o.is_null() { return 0; }
        // SAFETY: the caller passes a valid tiny_params.
        unsafe { (*p).a as u32 + n }
    }
}
"#;
const TINY_V2_H: &str = "#include <stddef.h>\n#include <stdint.h>\n\
#define TINY_MODE_A 0\n#define TINY_MODE_B 2\n\
typedef struct tiny_obj tiny_obj;\n\
typedef struct tiny_params { uint32_t struct_size; uint64_t a; float b; } tiny_params;\n\
tiny_params tiny_params_default(void);\n\
uint32_t tiny_run(const tiny_obj *o, const tiny_params *p, uint32_t n);\n";

/// v3: v1 plus a function and a constant, with the struct moved to another
/// Rust module (a Rust path is not part of the C ABI). Compatible.
const TINY_V3_RS: &str = r#"
pub mod types {
    #[repr(C)]
    pub struct tiny_params { pub struct_size: u32, pub a: u32, pub b: f32 }
}
pub mod ffi {
    pub use crate::types::tiny_params;
    #[repr(C)]
    pub struct tiny_obj { _private: [u8; 0] }
    #[no_mangle]
    pub extern "C" fn tiny_params_default() -> tiny_params {
        tiny_params { struct_size: 12, a: 1, b: 2.0 }
    }
    #[no_mangle]
    pub unsafe extern "C" fn tiny_run(o: *const tiny_obj, p: *const tiny_params, n: usize) -> u32 {
        if o.is_null() { return 0; }
        // SAFETY: the caller passes a valid tiny_params.
        unsafe { (*p).a + n as u32 }
    }
    #[no_mangle]
    pub extern "C" fn tiny_gone() -> u32 { 7 }
    #[no_mangle]
    pub extern "C" fn tiny_new_feature(x: u32) -> u32 { x + 1 }
}
"#;
const TINY_V3_H: &str = "#include <stddef.h>\n#include <stdint.h>\n\
#define TINY_MODE_A 0\n#define TINY_MODE_B 1\n#define TINY_MODE_C 2\n\
typedef struct tiny_obj tiny_obj;\n\
typedef struct tiny_params { uint32_t struct_size; uint32_t a; float b; } tiny_params;\n\
tiny_params tiny_params_default(void);\n\
uint32_t tiny_run(const tiny_obj *o, const tiny_params *p, size_t n);\n\
uint32_t tiny_gone(void);\n\
uint32_t tiny_new_feature(uint32_t x);\n";

/// Builds and dumps one tiny version; returns the normalized dump's path.
fn tiny_dump(name: &str, rs: &str, h: &str) -> PathBuf {
    let work = work_dir(&format!("selftest/{name}"));
    let src = work.join("tiny.rs");
    fs::write(&src, rs).unwrap();
    let header = work.join("tiny.h");
    fs::write(&header, h).unwrap();
    let so = work.join("libtiny.so");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    must(run(Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "cdylib",
            "--crate-name",
            "tiny",
            "-C",
            "debuginfo=2",
            "-C",
            "opt-level=0",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&so)));
    let out = work.join("tiny.dump");
    dump_abi(&so, &header, "1.0.0", &work, &out);
    out
}

#[test]
fn checker_flags_an_incompatible_library_and_accepts_additions() {
    if !abi_tools_present() {
        return;
    }
    let t0 = Instant::now();
    let (v1, (v2, v3)) = std::thread::scope(|s| {
        let a = s.spawn(|| tiny_dump("v1", TINY_V1_RS, TINY_V1_H));
        let b = s.spawn(|| {
            (
                tiny_dump("v2", TINY_V2_RS, TINY_V2_H),
                tiny_dump("v3", TINY_V3_RS, TINY_V3_H),
            )
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let dir = work_dir("selftest");

    let same = compare("tiny", &v1, &v1, &dir.join("v1_v1.html"));
    assert!(same.compatible(), "v1 vs itself: {}", same.summary());

    let added = compare("tiny", &v1, &v3, &dir.join("v1_v3.html"));
    assert!(
        added.compatible(),
        "adding a function and a constant (and moving a struct to another Rust \
         module) must be compatible, got {}; report {}:\n{}",
        added.summary(),
        added.report.display(),
        added.text
    );
    assert!(
        added.text.contains("tiny_new_feature"),
        "the v1 -> v3 report does not list the added function"
    );

    let broken = compare("tiny", &v1, &v2, &dir.join("v1_v2.html"));
    assert!(
        !broken.compatible() && broken.binary_problems > 0,
        "v1 -> v2 must be incompatible, got {}",
        broken.summary()
    );
    // Each breaking change is named in the report.
    let expect = [
        ("removed function", "Removed Symbols 1"),
        ("removed function name", "tiny_gone"),
        ("struct field type", "Type of field a has been changed"),
        ("parameter type", "Type of 3rd parameter n has been changed"),
        (
            "constant value",
            "The value of constant TINY_MODE_B has been changed",
        ),
    ];
    let missing: Vec<_> = expect
        .iter()
        .filter(|(_, needle)| !broken.text.contains(needle))
        .map(|(what, needle)| format!("{what} ({needle:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "the checker's report for v1 -> v2 does not mention: {missing:?}\nreport {}:\n{}",
        broken.report.display(),
        broken.text
    );
    println!(
        "self-test: v1->v1 compatible, v1->v3 (additions) compatible, v1->v2 \
         incompatible ({}: removed function, field type, parameter type, constant \
         all reported) in {:.1} s",
        broken.summary(),
        t0.elapsed().as_secs_f64()
    );
}
