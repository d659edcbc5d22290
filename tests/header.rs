//! The committed header is the contract:
//! * the header cbindgen generated in this build (build.rs exports its path as
//!   `LSHK_GENERATED_HEADER`) equals `include/lshk.h` on disk and the
//!   `include/lshk.h` committed at HEAD (when run inside a git checkout), so
//!   a change to the C ABI cannot go unnoticed or uncommitted;
//! * the header's version macros equal Cargo.toml's version and
//!   `lshk_version()`.

use std::ffi::CStr;
use std::path::Path;
use std::process::Command;

const GENERATED: &str = env!("LSHK_GENERATED_HEADER");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The first line where two texts differ, for the failure message.
fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  one:   {x}\n  other: {y}", i + 1);
        }
    }
    format!(
        "one text is a prefix of the other ({} vs {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn generated_header_equals_include_lshk_h() {
    let generated = read(Path::new(GENERATED));
    let on_disk = read(&root().join("include/lshk.h"));
    assert!(
        generated == on_disk,
        "include/lshk.h differs from the header cbindgen generated in this \
         build ({GENERATED}); build.rs rewrites it on a build, so rebuild and \
         commit it. First difference: {}",
        first_difference(&generated, &on_disk)
    );
}

#[test]
fn generated_header_equals_committed_header() {
    let git = Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["show", "HEAD:include/lshk.h"])
        .output();
    let out = match git {
        Err(e) => {
            println!("skipped: committed-header check (cannot run git: {e})");
            return;
        }
        Ok(o) => o,
    };
    if !out.status.success() {
        // Distinguish "not a git checkout / no HEAD" (skip) from "HEAD has no
        // include/lshk.h" (a failure: the header must be committed).
        let head = Command::new("git")
            .arg("-C")
            .arg(root())
            .args(["rev-parse", "--verify", "-q", "HEAD"])
            .output();
        match head {
            Ok(h) if h.status.success() => panic!(
                "include/lshk.h is not committed at HEAD ({}): commit it",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            _ => {
                println!(
                    "skipped: committed-header check (not a git checkout with a HEAD: {})",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                return;
            }
        }
    }
    let committed = String::from_utf8(out.stdout).expect("committed header is UTF-8");
    let generated = read(Path::new(GENERATED));
    assert!(
        generated == committed,
        "the C ABI changed but include/lshk.h at HEAD is the old header: \
         commit the regenerated include/lshk.h together with the Rust change. \
         First difference: {}",
        first_difference(&generated, &committed)
    );
}

/// `version = "x.y.z"` of the [package] table, read from Cargo.toml's text
/// (not from the environment cargo sets, which comes from the same file but
/// would not catch a build that used another manifest).
fn cargo_toml_version() -> (u64, u64, u64, String) {
    let toml = read(&root().join("Cargo.toml"));
    let mut in_package = false;
    for line in toml.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_package = l == "[package]";
            continue;
        }
        if !in_package {
            continue;
        }
        if let Some(rest) = l.strip_prefix("version") {
            let rest = rest.trim_start();
            if let Some(v) = rest.strip_prefix('=') {
                let v = v.trim().trim_matches('"').to_string();
                let parts: Vec<u64> = v
                    .split(['.', '-', '+'])
                    .take(3)
                    .map(|p| p.parse().expect("numeric version component"))
                    .collect();
                assert_eq!(parts.len(), 3, "version {v:?} is not x.y.z");
                return (parts[0], parts[1], parts[2], v);
            }
        }
    }
    panic!("no version in [package] of Cargo.toml");
}

fn header_define(header: &str, name: &str) -> String {
    header
        .lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("#define") && it.next() == Some(name))
                .then(|| it.collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| panic!("include/lshk.h has no #define {name}"))
}

#[test]
fn header_version_macros_match_cargo_toml_and_library() {
    let (major, minor, patch, version) = cargo_toml_version();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    for header in [
        read(&root().join("include/lshk.h")),
        read(Path::new(GENERATED)),
    ] {
        assert_eq!(
            header_define(&header, "LSHK_VERSION_MAJOR"),
            major.to_string()
        );
        assert_eq!(
            header_define(&header, "LSHK_VERSION_MINOR"),
            minor.to_string()
        );
        assert_eq!(
            header_define(&header, "LSHK_VERSION_PATCH"),
            patch.to_string()
        );
        assert_eq!(
            header_define(&header, "LSHK_VERSION_STRING"),
            format!("\"{version}\"")
        );
    }
    // SAFETY: lshk_version returns a static NUL-terminated string.
    let lib = unsafe { CStr::from_ptr(lshk::ffi::lshk_version()) };
    assert_eq!(lib.to_str().unwrap(), version);
    println!("version {version}: Cargo.toml, include/lshk.h and lshk_version() agree");
}
