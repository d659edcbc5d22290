//! The module graph of `src/` has no cycle: no module imports a module that
//! imports it back.
//!
//! Nodes are the crate's top-level modules (`kernels`, `quant`, `matmul`,
//! `index`, ...), except `source`, whose candidate sources are nodes of
//! their own (`source::ivf`, `source::lsh`, `source::graph`,
//! `source::forest`, `source::labels`) beside the seam they share
//! (`source`: `source/mod.rs` and `source/params.rs`). An edge is a
//! `crate::...` or `super::...` path in code (comments, strings and
//! `#[cfg(test)]` modules do not count) that leaves its node; lib.rs's
//! re-exports (`crate::ivf` is `crate::source::ivf`) and `#[macro_export]`
//! macros (`crate::bail`) resolve to the module that defines them.
//!
//! The layering this keeps, bottom up: `isa`/`error`/`rng`/...;
//! `kernels`; `quant`, `matmul`, `dense`, `centroid`, `train`, `hrr`;
//! `format`; the `source` seam; the sources; `index`; `ffi`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level modules whose children are nodes of their own.
const SPLIT: &[&str] = &["source"];
/// Children of a split module that belong to its own node (the seam).
const SEAM_FILES: &[&str] = &["params"];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and char literals blanked out.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) {
            // Raw string r#"..."#: skip to the quote followed by as many #.
            let mut j = i + 1;
            while j < b.len() && b[j] == b'#' {
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let hashes = j - i - 1;
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let mut k = j + 1;
                while k < b.len() && !b[k..].starts_with(&close) {
                    k += 1;
                }
                out.push_str("\"\"");
                i = k + close.len();
            } else {
                out.push('r');
                i += 1;
            }
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if i + 1 < b.len() && b[i + 1] == b'\\' {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if i + 2 < b.len() && b[i + 2] == b'\'' {
                out.push_str("' '");
                i += 3;
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            // Multi-byte UTF-8 is copied whole (only ASCII matters here).
            let len = match c {
                0..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            out.push_str(&src[i..i + len]);
            i += len;
        }
    }
    // `#[cfg(test)] mod name { ... }`: test-only code may import anything.
    while let Some(a) = out.find("#[cfg(test)]") {
        let rest = &out[a..];
        let brace = rest.find('{');
        let semi = rest.find(';');
        let end = match (brace, semi) {
            (Some(br), s) if s.is_none_or(|s| br < s) => {
                let mut depth = 0;
                let mut end = rest.len();
                for (k, ch) in rest[br..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = br + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(s)) => s + 1,
            _ => rest.len(),
        };
        out.replace_range(a..a + end, "");
    }
    out
}

fn ident_at(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The `a::b::c` path starting at `s` (after a `crate::` or `super::`).
fn path_at(s: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut rest = s;
    while let Some(id) = ident_at(rest) {
        segs.push(id.to_string());
        rest = &rest[id.len()..];
        match rest.strip_prefix("::") {
            Some(r) if ident_at(r).is_some() => rest = r,
            _ => break,
        }
    }
    segs
}

/// The names of a `{a, b::c, d as e}` group at `s` (first segments).
fn group_at(s: &str) -> Vec<String> {
    let mut depth = 0;
    let mut names = Vec::new();
    let mut at_item = true;
    for (k, ch) in s.char_indices() {
        match ch {
            '{' => {
                depth += 1;
                at_item = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => at_item = true,
            c if at_item && depth == 1 && (c.is_ascii_alphabetic() || c == '_') => {
                names.push(ident_at(&s[k..]).unwrap().to_string());
                at_item = false;
            }
            _ => {}
        }
    }
    names
}

struct Crate {
    /// Module paths (`["source", "ivf", "family"]`) of every file.
    modules: BTreeSet<Vec<String>>,
    /// lib.rs's `pub use` re-exports: name -> the path it stands for.
    alias: BTreeMap<String, Vec<String>>,
    /// `#[macro_export]` macro -> the module that defines it.
    macros: BTreeMap<String, Vec<String>>,
}

impl Crate {
    /// The node of the crate-root path `p`.
    fn node(&self, p: &[String]) -> Option<String> {
        let first = p.first()?;
        let top = [first.clone()];
        if !self.modules.iter().any(|m| m[..1] == top) {
            if let Some(a) = self.alias.get(first) {
                let mut q = a.clone();
                q.extend_from_slice(&p[1..]);
                return self.node(&q);
            }
            if let Some(m) = self.macros.get(first) {
                return self.node(m);
            }
            panic!("crate::{} resolves to no module of src/", p.join("::"));
        }
        if SPLIT.contains(&first.as_str()) && p.len() > 1 {
            let child = [first.clone(), p[1].clone()];
            let is_child = self.modules.iter().any(|m| m.len() >= 2 && m[..2] == child);
            if is_child && !SEAM_FILES.contains(&p[1].as_str()) {
                return Some(format!("{first}::{}", p[1]));
            }
        }
        Some(first.clone())
    }
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segs: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let texts: Vec<(PathBuf, Vec<String>, String)> = files
        .iter()
        .map(|f| {
            let text = fs::read_to_string(f).unwrap();
            (f.clone(), module_path(&src, f), strip(&text))
        })
        .collect();

    let mut krate = Crate {
        modules: texts.iter().map(|t| t.1.clone()).collect(),
        alias: BTreeMap::new(),
        macros: BTreeMap::new(),
    };
    for (_, m, s) in &texts {
        let mut rest = s.as_str();
        while let Some(a) = rest.find("#[macro_export]") {
            rest = &rest[a..];
            let k = rest.find("macro_rules!").unwrap() + "macro_rules!".len();
            let name = ident_at(rest[k..].trim_start()).unwrap();
            krate.macros.insert(name.to_string(), m.clone());
            rest = &rest[k..];
        }
    }
    let lib = &texts.iter().find(|t| t.1 == ["lib"]).unwrap().2;
    for stmt in lib.split(';') {
        let Some(u) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (prefix, names): (Vec<String>, Vec<String>) = match u.find('{') {
            Some(b) => (
                u[..b]
                    .trim_end_matches("::")
                    .split("::")
                    .map(String::from)
                    .collect(),
                group_at(&u[b..]),
            ),
            None => {
                let p: Vec<String> = u.split("::").map(|s| s.trim().to_string()).collect();
                (p[..p.len() - 1].to_vec(), vec![p[p.len() - 1].clone()])
            }
        };
        for n in names {
            let mut p = prefix.clone();
            p.push(n.clone());
            krate.alias.insert(n, p);
        }
    }

    // node -> node -> files with such an edge
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (file, m, s) in &texts {
        if m[..] == ["lib"] {
            continue;
        }
        let me = krate.node(m).unwrap();
        let mut targets: Vec<Vec<String>> = Vec::new();
        for (k, _) in s.match_indices("crate::") {
            if k > 0 && {
                let c = s.as_bytes()[k - 1];
                c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
            } {
                continue;
            }
            let after = &s[k + "crate::".len()..];
            if after.starts_with('{') {
                targets.extend(group_at(after).into_iter().map(|n| vec![n]));
            } else {
                targets.push(path_at(after));
            }
        }
        for (k, _) in s.match_indices("super::") {
            if k > 0 && {
                let c = s.as_bytes()[k - 1];
                c.is_ascii_alphanumeric() || c == b'_' || c == b':'
            } {
                continue;
            }
            let mut after = &s[k..];
            let mut up = 0;
            while let Some(r) = after.strip_prefix("super::") {
                up += 1;
                after = r;
            }
            let mut p = m[..m.len().saturating_sub(up)].to_vec();
            if after.starts_with('{') {
                for n in group_at(after) {
                    let mut q = p.clone();
                    q.push(n);
                    targets.push(q);
                }
            } else {
                p.extend(path_at(after));
                targets.push(p);
            }
        }
        for t in targets {
            if t.is_empty() || t[0] == "self" {
                continue;
            }
            let to = krate.node(&t).unwrap();
            if to != me {
                edges
                    .entry(me.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(file.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }

    // The layering's two ends, so that a broken parse cannot pass quietly.
    let out = |n: &str| -> BTreeSet<String> {
        edges
            .get(n)
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert!(out("index").contains("source::ivf"), "{:?}", out("index"));
    assert!(out("source::ivf").contains("source"));
    assert!(
        out("kernels").iter().all(|n| n == "isa"),
        "kernels -> {:?}",
        out("kernels")
    );

    // Tarjan's strongly connected components.
    let nodes: Vec<String> = edges
        .keys()
        .cloned()
        .chain(edges.values().flat_map(|e| e.keys().cloned()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let id = |n: &str| nodes.iter().position(|x| x == n).unwrap();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| out(n).iter().map(|t| id(t)).collect())
        .collect();
    struct Tarjan<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        comps: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on[v] = true;
            for &w in &self.adj[v] {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on[w] => self.low[v] = self.low[v].min(iw),
                    _ => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                self.comps.push(comp);
            }
        }
    }
    let n = nodes.len();
    let mut t = Tarjan {
        adj: &adj,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        comps: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut report = String::new();
    for comp in t.comps.iter().filter(|c| c.len() > 1) {
        let names: BTreeSet<&str> = comp.iter().map(|&v| nodes[v].as_str()).collect();
        report += &format!("cycle among {names:?}:\n");
        for a in &names {
            for (b, files) in &edges[*a] {
                if names.contains(b.as_str()) {
                    report += &format!("  {a} -> {b} ({files:?})\n");
                }
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}
