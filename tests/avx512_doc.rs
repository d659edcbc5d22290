//! docs/avx512.md lists every function in `src/` compiled with an AVX-512
//! `#[target_feature]` (issue 12): which tests reach it and whether it has
//! run on AVX-512 hardware. This test keeps that list complete and exact:
//! each such function must appear as `` `src/<file>:<function>` `` on a
//! line that also holds its feature list in backticks, and every listed
//! `src/...:fn` in the table must still exist with AVX-512 features. Entry
//! points made by `crate::kernels::simd::entries! { "features"; fn name(..)
//! => ..; }` count as functions with those features, and so do those of a
//! family's `simd_entries!` list (written once in its `mod.rs`) where an
//! ISA file calls `super::simd_entries!("features", Type);`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/<file>:<fn>` -> feature list, for every `#[target_feature(enable =
/// "...")]` naming an avx512 feature; the function is the first `fn` within
/// the next few lines (other attributes and doc comments may come between).
fn avx512_functions() -> BTreeMap<String, String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut found = BTreeMap::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let lines: Vec<&str> = text.lines().collect();
        // A family's list of entry points, instantiated here.
        for l in &lines {
            let Some(rest) = l.trim().strip_prefix("super::simd_entries!(") else {
                continue;
            };
            let feats = rest.split('"').nth(1).expect("simd_entries! features");
            if !feats.contains("avx512") {
                continue;
            }
            let module = f.parent().unwrap().join("mod.rs");
            let m = fs::read_to_string(&module).unwrap();
            let body = m
                .split("macro_rules! simd_entries {")
                .nth(1)
                .unwrap_or_else(|| panic!("{rel}: no simd_entries! in {module:?}"));
            let body = &body[..body.find("\n}\n").expect("end of simd_entries!")];
            let mut n = 0;
            for b in body.lines() {
                if let Some(rest) = b.trim().strip_prefix("fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let key = format!("{rel}:{name}");
                    assert!(
                        found.insert(key.clone(), feats.to_string()).is_none(),
                        "{key} appears twice"
                    );
                    n += 1;
                }
            }
            assert!(n > 0, "{rel}: simd_entries! lists no fn");
        }
        // Entry points made by `crate::kernels::simd::entries!`: the
        // features are the block's leading string, and each `fn name(` at
        // the start of a line inside the block is one function.
        let mut block: Option<String> = None;
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            // (A family's own `entries!`, whose calls carry one literal
            // `#[target_feature]` line per function, is read by the
            // attribute scan below.)
            if let Some(rest) = t.strip_prefix("entries! {") {
                if let Some(feats) = rest.split('"').nth(1) {
                    block = Some(feats.to_string());
                    continue;
                }
            }
            if let Some(feats) = &block {
                if t == "}" {
                    block = None;
                } else if let Some(rest) = t.strip_prefix("fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if feats.contains("avx512") {
                        let key = format!("{rel}:{name}");
                        assert!(
                            found.insert(key.clone(), feats.clone()).is_none(),
                            "{key} appears twice (two functions with one name in one file?)"
                        );
                    }
                }
                continue;
            }
            let Some(rest) = t.strip_prefix("#[target_feature(enable") else {
                continue;
            };
            if rest.trim_start().starts_with("= $") {
                // The attribute inside a macro's definition (`entries!`).
                continue;
            }
            let feats = rest
                .split('"')
                .nth(1)
                .unwrap_or_else(|| panic!("{rel}:{}: unparsed target_feature: {t}", i + 1));
            if !feats.contains("avx512") {
                continue;
            }
            let name = lines[i + 1..(i + 8).min(lines.len())]
                .iter()
                .find_map(|l| {
                    let l = l.trim();
                    if l.starts_with("//") || l.starts_with("#[") {
                        return None;
                    }
                    let at = l.find("fn ")?;
                    let name: String = l[at + 3..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    (!name.is_empty()).then_some(name)
                })
                .unwrap_or_else(|| panic!("{rel}:{}: no fn after {t}", i + 1));
            let key = format!("{rel}:{name}");
            assert!(
                found.insert(key.clone(), feats.to_string()).is_none(),
                "{key} appears twice (two functions with one name in one file?)"
            );
        }
    }
    found
}

#[test]
fn every_avx512_function_is_in_docs_avx512_md() {
    let found = avx512_functions();
    assert!(
        found.len() >= 10,
        "the scan found only {} AVX-512 functions: is the parser broken? {found:?}",
        found.len()
    );
    let doc = fs::read_to_string(root().join("docs/avx512.md")).expect("docs/avx512.md");
    let table: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `src/")).collect();
    let mut problems = Vec::new();
    for (key, feats) in &found {
        let tok = format!("`{key}`");
        match table.iter().find(|l| l.contains(&tok)) {
            None => problems.push(format!("missing: {key} ({feats})")),
            Some(l) if !l.contains(&format!("`{feats}`")) => problems.push(format!(
                "{key}: features in src are `{feats}`; the doc says: {l}"
            )),
            Some(_) => {}
        }
    }
    for l in &table {
        let key = l.trim_start_matches("| `").split('`').next().unwrap();
        if !found.contains_key(key) {
            problems.push(format!(
                "stale: {key} is listed but src/ has no such AVX-512 function"
            ));
        }
    }
    println!(
        "docs/avx512.md: {} AVX-512 target_feature functions in src/, {} table rows",
        found.len(),
        table.len()
    );
    assert!(
        problems.is_empty(),
        "docs/avx512.md is out of date with src/:\n{}",
        problems.join("\n")
    );
}
