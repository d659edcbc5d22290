//! Coverage of the bad-input matrix (issue 8): every function declared in
//! `include/lshk.h` must be exercised by `ffi_tests/bad_input_*.c`.
//!
//! Two checks:
//! * static: every public function name occurs in the code (comments
//!   stripped) of some `ffi_tests/bad_input_*.c`;
//! * dynamic: the programs are compiled (gcc, against the `liblshk.so` this
//!   `cargo test` built in `target/<profile>/deps/`) and run with
//!   `BAD_INPUT_VERBOSE=1`, which prints one line per case starting with the
//!   function's name; every public function must have at least one case
//!   that ran. The total number of cases is printed (the figure reported
//!   for issue 8).
//!
//! tests/c_abi.rs also compiles and runs these programs (gcc, clang, static);
//! this test only adds the coverage check and the count. gcc is required (a
//! missing gcc fails, as in tests/c_abi.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Names of the functions declared in the header (`lshk_xxx(`).
fn header_functions() -> BTreeSet<String> {
    let h = fs::read_to_string(root().join("include/lshk.h")).expect("read include/lshk.h");
    let mut out = BTreeSet::new();
    let b = h.as_bytes();
    let mut i = 0;
    while let Some(p) = h[i..].find("lshk_") {
        let s = i + p;
        let mut e = s;
        while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_') {
            e += 1;
        }
        let starts_word = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_');
        if starts_word && e < b.len() && b[e] == b'(' {
            out.insert(h[s..e].to_string());
        }
        i = e.max(s + 1);
    }
    out
}

/// The bad-input programs, sorted.
fn sources() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(root().join("ffi_tests"))
        .expect("read ffi_tests/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("bad_input_") && n.ends_with(".c")
        })
        .collect();
    v.sort();
    v
}

/// C source without its comments (string literals are kept as they are).
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let s = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out.push_str(&src[s..i]);
        } else if src[i..].starts_with("/*") {
            i = src[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
            out.push(' ');
        } else if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |p| i + p);
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn has_identifier(code: &str, name: &str) -> bool {
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(p) = code[from..].find(name) {
        let s = from + p;
        let e = s + name.len();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if (s == 0 || !word(b[s - 1])) && (e >= b.len() || !word(b[e])) {
            return true;
        }
        from = s + 1;
    }
    false
}

#[test]
fn every_public_function_is_named_in_the_matrix() {
    let funcs = header_functions();
    assert!(funcs.len() > 50, "found only {} functions", funcs.len());
    let srcs = sources();
    assert!(!srcs.is_empty(), "no ffi_tests/bad_input_*.c");
    let code: Vec<String> = srcs
        .iter()
        .map(|p| strip_comments(&fs::read_to_string(p).unwrap()))
        .collect();
    let missing: Vec<&String> = funcs
        .iter()
        .filter(|f| !code.iter().any(|c| has_identifier(c, f)))
        .collect();
    assert!(
        missing.is_empty(),
        "public functions of include/lshk.h that no ffi_tests/bad_input_*.c \
         exercises (add bi_args_/bi_init_/bi_call_ and BI_CASE lines, see \
         ffi_tests/bad_input.h): {missing:?}"
    );
}

#[test]
fn every_public_function_has_cases_that_run() {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let lib = deps.join("liblshk.so");
    assert!(
        lib.is_file(),
        "{} missing: crate-type must include cdylib",
        lib.display()
    );
    // The programs need the SONAME (build.rs) at run time: give deps/ its
    // own link, as tests/abi.rs does, so this test also runs alone.
    let soname = deps.join(env!("LSHK_SONAME"));
    if fs::symlink_metadata(&soname).is_err() {
        let _ = std::os::unix::fs::symlink("liblshk.so", &soname);
    }
    let work = deps.parent().unwrap().join("bad_input_coverage");
    fs::create_dir_all(&work).unwrap();
    let funcs = header_functions();
    let mut cases: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0usize;
    for src in sources() {
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        let bin = work.join(&stem);
        let out = Command::new("gcc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g"])
            .arg(format!("-I{}", root().join("include").display()))
            .arg(format!("-I{}", root().join("ffi_tests").display()))
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .arg(format!("-L{}", deps.display()))
            .arg(format!("-Wl,-rpath,{}", deps.display()))
            .arg("-llshk")
            .output()
            .expect("gcc is required (install it, e.g. with .ci/run)");
        assert!(
            out.status.success(),
            "gcc {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        // deps/ first: cargo's LD_LIBRARY_PATH would otherwise beat the
        // rpath with a liblshk.so an earlier run uplifted to target/<profile>.
        let out = Command::new(&bin)
            .env("LD_LIBRARY_PATH", &deps)
            .env("BAD_INPUT_VERBOSE", "1")
            .env_remove("LSHK_MAX_ISA")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stem} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut n = 0;
        for line in stdout.lines() {
            if let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
            {
                if name.starts_with("lshk_") {
                    *cases.entry(name.to_string()).or_default() += 1;
                    n += 1;
                }
            }
        }
        println!("{stem}: {n} cases");
        total += n;
    }
    let missing: Vec<&String> = funcs.iter().filter(|f| !cases.contains_key(*f)).collect();
    for (f, n) in &cases {
        println!("  {f}: {n}");
    }
    println!(
        "bad_input: {total} cases over {} functions ({} in include/lshk.h)",
        cases.len(),
        funcs.len()
    );
    assert!(
        missing.is_empty(),
        "public functions without a single bad-input case that ran: {missing:?}"
    );
    // The figures the documents quote are the ones counted here (they went
    // stale twice when entry points were added on parallel branches).
    let thousands = |n: usize| {
        let s = n.to_string();
        let mut o = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                o.push(',');
            }
            o.push(c);
        }
        o
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (doc, want) in [
        (
            "docs/hardening.md",
            format!(
                "There are {} cases over the {} functions.",
                thousands(total),
                cases.len()
            ),
        ),
        (
            "README.md",
            format!(
                "{} bad-input cases over the {} functions",
                thousands(total),
                cases.len()
            ),
        ),
    ] {
        let text = std::fs::read_to_string(root.join(doc)).expect("read doc");
        assert!(
            text.contains(&want),
            "{doc} must quote the counted figure: \"{want}\""
        );
    }
}
