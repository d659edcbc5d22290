//! Seeded mutation fuzzing of `Index::load` (short version). A valid
//! index file is mutated *inside* its sections and the section and header
//! CRCs are then recomputed, so every mutant passes the
//! container checks of src/format.rs and reaches the semantic parser of
//! the index: sizes, counts, enum values, offsets and ids that disagree.
//! Every mutant must either load with an error status (never a panic, an
//! abort or a huge allocation) or load into an index whose queries succeed
//! and return ids < rows (or the padding id).
//!
//! `LSHK_FUZZ_ITERS` sets the number of mutants per seed file (default 600;
//! run e.g. `LSHK_FUZZ_ITERS=200000 cargo test --release --test
//! fuzz_index_load -- --nocapture` for a long run).

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use lshk::crc32c::crc32c;
use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;

#[path = "common/container.rs"]
mod container;
use container::{fix_crcs, sections, Section, ENTRY, HEADER};

fn mutate(good: &[u8], r: &mut SplitMix64) -> Vec<u8> {
    let mut b = good.to_vec();
    let secs = sections(&b);
    let nonempty: Vec<&Section> = secs.iter().filter(|s| s.len > 0).collect();
    let rounds = 1 + r.below(3);
    for _ in 0..rounds {
        let s = nonempty[r.below(nonempty.len() as u64) as usize];
        // Small sections (params, shapes) are where sizes live: weight them.
        let at = if r.below(2) == 0 {
            s.off + r.below(s.len.min(64) as u64) as usize
        } else {
            s.off + r.below(s.len as u64) as usize
        };
        match r.below(6) {
            0 => b[at] ^= 1 << r.below(8),
            1 => b[at] = r.next_u64() as u8,
            2 | 3 => {
                // An aligned 4- or 8-byte field set to a boundary value.
                let width = if r.below(2) == 0 { 4 } else { 8 };
                let at = s.off + ((at - s.off) / width) * width;
                if at + width <= s.off + s.len {
                    let vals: [u64; 8] =
                        [0, 1, 2, 0xFF, 0x7FFF_FFFF, 0xFFFF_FFFF, u64::MAX, 1 << 40];
                    let v = vals[r.below(8) as usize];
                    b[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
                }
            }
            4 => {
                // Swap two bytes of the section.
                let j = s.off + r.below(s.len as u64) as usize;
                b.swap(at, j);
            }
            _ => {
                // f32 specials into float data.
                let at = s.off + ((at - s.off) / 4) * 4;
                if at + 4 <= s.off + s.len {
                    let vals = [f32::NAN, f32::INFINITY, -0.0, 1e38];
                    b[at..at + 4].copy_from_slice(&vals[r.below(4) as usize].to_le_bytes());
                }
            }
        }
    }
    fix_crcs(&mut b);
    b
}

fn seed_index(
    family: Family,
    storage: Storage,
    transform: Transform,
    labels: bool,
    codes: bool,
) -> (Index, usize, usize) {
    let (rows, dim) = (400usize, 12usize);
    let layer = lshk::data::structured_layer(rows, dim, 9, 5);
    let p = IndexParams {
        family,
        bits: if family == Family::SimHash { 6 } else { 2 },
        tables: 5,
        bin_size: 4,
        storage,
        transform,
        threads: 1,
        graph: lshk::graph::GraphParams {
            m: 6,
            ef_construction: 20,
            threads: 1,
            storage: if storage == Storage::I8 {
                lshk::graph::Storage::I8
            } else {
                lshk::graph::Storage::F32
            },
            seed: 3,
        },
        ..Default::default()
    };
    let mut idx = Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &p, None).unwrap();
    if labels {
        let (q, y) = lshk::data::queries_near_labels(&layer.w, rows, dim, 50, 3);
        let offs: Vec<usize> = (0..=50).collect();
        idx.train_labels(&q, 50, dim, &offs, &y, &Default::default())
            .unwrap();
    }
    if codes {
        idx.set_codes(lshk::ivf::Codes::I8, 9).unwrap();
    }
    (idx, rows, dim)
}

/// The seed files of the two mutation fuzzers below: (family, storage,
/// transform, label-trained, row codes).
const SEEDS: &[(Family, Storage, Transform, bool, bool)] = &[
    (Family::SimHash, Storage::F32, Transform::None, false, false),
    (Family::SimHash, Storage::Bf16, Transform::Mips, true, false),
    (Family::Dwta, Storage::I8, Transform::BiasAug, false, false),
    (Family::SimHash, Storage::F16, Transform::None, true, false),
    // The graph family: its GPARAM / GROWS / GLEVELS / GLINKS0 / GUPPER
    // sections beside the index's.
    (Family::Graph, Storage::F32, Transform::None, false, false),
    (Family::Graph, Storage::I8, Transform::None, false, false),
    // The IVF and forest families: their sections beside the index's
    // (built from Rust; lshk_index_load reads them too).
    (Family::Ivf, Storage::F32, Transform::None, false, false),
    (Family::Forest, Storage::F32, Transform::None, false, false),
    // Row codes (CODES / CSCALES, the rerank in PARAMS) on an LSH and a
    // forest index.
    (
        Family::SimHash,
        Storage::F32,
        Transform::BiasAug,
        false,
        true,
    ),
    (Family::Forest, Storage::F32, Transform::None, false, true),
];

fn iters() -> usize {
    std::env::var("LSHK_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600)
}

#[test]
fn mutated_index_files_never_crash_the_loader() {
    let dir = std::env::temp_dir().join(format!("lshk-fuzz-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = SEEDS;
    let (mut total, mut loaded, mut rejected) = (0usize, 0usize, 0usize);
    let mut r = SplitMix64::new(0x5eed);
    for (si, &(f, s, t, lab, codes)) in seeds.iter().enumerate() {
        let (idx, rows, dim) = seed_index(f, s, t, lab, codes);
        let path = dir.join(format!("seed{si}.lshk"));
        idx.save(&path).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mutant = dir.join("mutant.lshk");
        let q = lshk::data::structured_layer(8, dim, 2, 11).w;
        for it in 0..iters() {
            let b = mutate(&good, &mut r);
            std::fs::write(&mutant, &b).unwrap();
            if std::env::var_os("LSHK_FUZZ_TRACE").is_some() {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "seed {si} mutant {it}");
                let _ = std::fs::write(dir.join("last.lshk"), &b);
            }
            let outcome =
                catch_unwind(AssertUnwindSafe(|| match Index::load(Path::new(&mutant)) {
                    Err(e) => Err(e),
                    Ok(ix) => {
                        // A loaded mutant must be usable and stay in range.
                        let k = 7u32;
                        let mut ids = vec![0u32; 8 * k as usize];
                        let mut sc = vec![0f32; 8 * k as usize];
                        if ix.rows() == rows && ix.dim() == dim {
                            if let Ok(()) = ix.query(
                                &q,
                                8,
                                dim,
                                k,
                                &GatherParams::default(),
                                &mut ids,
                                &mut sc,
                                None,
                            ) {
                                for &id in &ids {
                                    assert!(
                                        id == u32::MAX || (id as usize) < ix.rows(),
                                        "id {id} out of range"
                                    );
                                }
                            }
                        }
                        Ok(())
                    }
                }));
            match outcome {
                Err(_) => panic!("seed {si} mutant {it}: the loader or a query on the loaded index panicked (file kept at {})", mutant.display()),
                Ok(Ok(())) => loaded += 1,
                Ok(Err(e)) => {
                    // Sizes read from a file must be checked against the
                    // file before anything is allocated from them: under
                    // overcommit a huge reservation "succeeds" and the
                    // process is killed when it is touched.
                    assert_ne!(
                        e.status,
                        lshk::Status::AllocationFailed,
                        "seed {si} mutant {it}: the loader tried a huge allocation: {}",
                        e.message
                    );
                    rejected += 1
                }
            }
            total += 1;
        }
    }
    println!("fuzz_index_load: {total} mutants, {rejected} rejected with a status, {loaded} loaded and queried");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------------------
// Structural mutations through the C ABI (lshk_index_load): truncation at
// every section boundary (with the header's length left alone and with it
// rewritten to match), every header field (version, kind, length, section
// count, magic, reserved) and every section-table field (offset, length
// set huge / off by one / zero, tag, reserved) set to boundary values,
// with and without the checksums recomputed, the PARAMS record's own
// version changed, and random single-bit flips without checksum repair.
// Every case either must be refused (the ones the format documents as
// invalid) or, where a mutant can legitimately load (a renamed optional
// section, bit flips in zero padding), must give a usable index. A
// refusal must set a message and leave `*out` untouched.

use lshk::ffi::index::{
    lshk_index, lshk_index_build, lshk_index_describe, lshk_index_free, lshk_index_info,
    lshk_index_load, lshk_index_load_borrowed, lshk_index_params_default, lshk_index_query,
    lshk_index_save, lshk_query_params_default, LSHK_IVF_CODES_I8, LSHK_IVF_CODES_NONE,
    LSHK_IVF_CODES_PQ4, LSHK_IVF_CODES_PQ4_I8, LSHK_SOURCE_IVF, LSHK_STORAGE_BORROWED_F32,
    LSHK_STORAGE_F32,
};
use lshk::ffi::labels::lshk_index_train_labels;
use lshk::ffi::{lshk_isa_set_max, lshk_last_error_message, LSHK_STATUS_OK, LSHK_STATUS_PANIC};

/// Only the header CRC (bytes 0..28 + section table).
fn fix_header_crc(b: &mut [u8]) {
    if b.len() < HEADER {
        return;
    }
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    let table_end = (HEADER + ENTRY * n).min(b.len());
    let h = crc32c(crc32c(0, &b[..28]), &b[HEADER..table_end]);
    b[28..32].copy_from_slice(&h.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn c_last_msg() -> String {
    // SAFETY: size query with NULL/0, then a buffer of n + 1 bytes.
    unsafe {
        let n = lshk_last_error_message(std::ptr::null_mut(), 0);
        let mut b = vec![0u8; n + 1];
        lshk_last_error_message(b.as_mut_ptr().cast(), n + 1);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    Refused,
    Either,
}

struct Outcome {
    refused: usize,
    loaded: usize,
    /// Mutants not loaded: they claim a borrowed W larger than the test
    /// provides (see [`w_claim`]).
    skipped: usize,
}

/// What lshk_index_describe reports of a live index.
fn describe(idx: *const lshk_index) -> lshk_index_info {
    // SAFETY: the info struct is plain data (integers); all zero is valid.
    let mut info: lshk_index_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<lshk_index_info>() as u32;
    // SAFETY: a live handle; a writable info whose struct_size is set.
    let st = unsafe { lshk_index_describe(idx, &mut info) };
    assert_eq!(st, LSHK_STATUS_OK, "lshk_index_describe: {}", c_last_msg());
    info
}

/// Loads `bytes` through lshk_index_load and applies the oracle.
fn load_via_c(dir: &Path, bytes: &[u8], expect: Expect, what: &str, q: &[f32], o: &mut Outcome) {
    let path = dir.join("c-mutant.lshk");
    std::fs::write(&path, bytes).unwrap();
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_index;
    let mut out = canary;
    assert_ne!(lshk_isa_set_max(0xDEAD), LSHK_STATUS_OK); // a foreign message
    let t0 = std::time::Instant::now();
    // SAFETY: a NUL-terminated path, no borrowed W (stride 0: the
    // recorded one), a writable out.
    let st = unsafe { lshk_index_load(cpath.as_ptr(), std::ptr::null(), 0, &mut out) };
    assert!(
        t0.elapsed().as_secs() < 10,
        "{what}: the load took {:?}",
        t0.elapsed()
    );
    assert_ne!(st, LSHK_STATUS_PANIC, "{what}: panic: {}", c_last_msg());
    if st != LSHK_STATUS_OK {
        assert_eq!(out, canary, "{what}: failed with {st} but wrote *out");
        let m = c_last_msg();
        assert!(
            m.starts_with("lshk_index_load: ") && m.len() > 17,
            "{what}: status {st} without a message ({m:?})"
        );
        o.refused += 1;
        return;
    }
    assert_eq!(expect, Expect::Either, "{what}: the mutant loaded");
    o.loaded += 1;
    // A loaded mutant must answer queries with ids in range.
    let info = describe(out);
    let (rows, dim) = (info.rows, info.dim);
    if dim * 8 <= q.len() {
        let mut ids = vec![0u32; 8 * 5];
        let mut sc = vec![0f32; 8 * 5];
        // SAFETY: 8 queries of `dim` floats; outputs of 8 * k.
        let s = unsafe {
            lshk_index_query(
                out,
                q.as_ptr(),
                8,
                dim,
                5,
                std::ptr::null(),
                ids.as_mut_ptr(),
                sc.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_ne!(
            s,
            LSHK_STATUS_PANIC,
            "{what}: query panicked: {}",
            c_last_msg()
        );
        if s == LSHK_STATUS_OK {
            assert!(
                ids.iter().all(|&i| i == u32::MAX || (i as usize) < rows),
                "{what}: id out of range"
            );
        }
    }
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { lshk_index_free(out) }, LSHK_STATUS_OK);
}

#[test]
fn structural_mutations_through_the_c_abi() {
    let dir = std::env::temp_dir().join(format!("lshk-fuzz-load-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = SEEDS;
    let flips = (iters() / 2).max(50);
    let mut o = Outcome {
        refused: 0,
        loaded: 0,
        skipped: 0,
    };
    let mut r = SplitMix64::new(0xf11e);
    for (si, &(f, s, t, lab, codes)) in seeds.iter().enumerate() {
        let (idx, _rows, dim) = seed_index(f, s, t, lab, codes);
        let path = dir.join(format!("seed{si}.lshk"));
        idx.save(&path).unwrap();
        let good = std::fs::read(&path).unwrap();
        let q = lshk::data::structured_layer(8, dim, 2, 11).w;
        let before = o.loaded;
        load_via_c(
            &dir,
            &good,
            Expect::Either,
            "the unmodified file",
            &q,
            &mut o,
        );
        assert_eq!(
            o.loaded,
            before + 1,
            "seed {si}: the unmodified file did not load"
        );
        let secs = sections(&good);
        let n = secs.len();
        let table_end = HEADER + ENTRY * n;
        let len = good.len();

        // Truncation at every boundary (and one byte either side).
        let mut cuts: BTreeSet<usize> = [
            0,
            1,
            8,
            27,
            28,
            63,
            HEADER,
            table_end - 1,
            table_end,
            len - 1,
        ]
        .into_iter()
        .collect();
        for i in 0..n {
            cuts.insert(HEADER + ENTRY * i);
        }
        for sec in &secs {
            for c in [sec.off, sec.off + sec.len] {
                cuts.extend([c.saturating_sub(1), c, c + 1]);
            }
        }
        for &cut in cuts.iter().filter(|&&c| c < len) {
            let b = &good[..cut];
            load_via_c(
                &dir,
                b,
                Expect::Refused,
                &format!("seed {si}: truncated to {cut}"),
                &q,
                &mut o,
            );
            if cut >= 32 {
                // The header's length rewritten to match: the section
                // bounds must catch it.
                let mut b = b.to_vec();
                put64(&mut b, 16, cut as u64);
                fix_header_crc(&mut b);
                load_via_c(
                    &dir,
                    &b,
                    Expect::Refused,
                    &format!("seed {si}: truncated to {cut}, length fixed"),
                    &q,
                    &mut o,
                );
            }
        }

        // Header fields, with and without the header CRC recomputed.
        let mut header_cases: Vec<(String, Vec<u8>, Expect)> = Vec::new();
        for v in [0u32, 2, 3, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, 8, v);
            header_cases.push((format!("format version {v}"), b, Expect::Refused));
        }
        for v in [0u32, 2, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, 12, v);
            header_cases.push((format!("file kind {v}"), b, Expect::Refused));
        }
        for v in [0u64, len as u64 - 1, len as u64 + 1, u64::MAX, 1 << 40] {
            let mut b = good.clone();
            put64(&mut b, 16, v);
            header_cases.push((format!("file length {v}"), b, Expect::Refused));
        }
        for v in [0u32, n as u32 + 1, 4096, 4097, u32::MAX, 1 << 28] {
            let mut b = good.clone();
            put32(&mut b, 24, v);
            header_cases.push((format!("section count {v}"), b, Expect::Refused));
        }
        {
            // Dropping the last section can leave a loadable file if that
            // section is optional.
            let mut b = good.clone();
            put32(&mut b, 24, n as u32 - 1);
            header_cases.push(("section count n - 1".into(), b, Expect::Either));
        }
        for at in [0usize, 7, 32, 63] {
            let mut b = good.clone();
            b[at] ^= 0x10;
            header_cases.push((format!("header byte {at} flipped"), b, Expect::Refused));
        }
        // Section table entries.
        for (i, sec) in secs.iter().enumerate() {
            let e = sec.entry;
            for v in [
                u64::MAX,
                u64::MAX - 63,
                1 << 40,
                len as u64,
                (len - sec.off) as u64 + 1,
                sec.len as u64 + 1,
            ] {
                let mut b = good.clone();
                put64(&mut b, e + 16, v);
                header_cases.push((format!("section {i} length {v}"), b, Expect::Refused));
            }
            if sec.len > 0 {
                // Shorter: the section CRC no longer matches.
                for v in [0u64, sec.len as u64 - 1] {
                    let mut b = good.clone();
                    put64(&mut b, e + 16, v);
                    header_cases.push((
                        format!("section {i} length {v} (was {})", sec.len),
                        b,
                        Expect::Refused,
                    ));
                }
            }
            for v in [
                u64::MAX,
                u64::MAX - 63,
                sec.off as u64 + 1,
                sec.off as u64 + 64,
                sec.off as u64 - 64,
                0,
                len as u64,
            ] {
                let mut b = good.clone();
                put64(&mut b, e + 8, v);
                header_cases.push((format!("section {i} offset {v}"), b, Expect::Refused));
            }
            let mut b = good.clone();
            put32(&mut b, e + 28, 1);
            header_cases.push((format!("section {i} reserved 1"), b, Expect::Refused));
            let mut b = good.clone();
            b[e + 24] ^= 1;
            header_cases.push((format!("section {i} crc flipped"), b, Expect::Refused));
            // A duplicate tag.
            let other = &secs[(i + 1) % n];
            if n > 1 {
                let mut b = good.clone();
                let tag: [u8; 8] = good[other.entry..other.entry + 8].try_into().unwrap();
                b[e..e + 8].copy_from_slice(&tag);
                header_cases.push((format!("section {i} tag duplicated"), b, Expect::Refused));
            }
            // An unknown tag: refused if the section is required,
            // ignored if it is optional.
            let mut b = good.clone();
            b[e..e + 8].copy_from_slice(b"ZZZZZZZZ");
            header_cases.push((format!("section {i} renamed"), b, Expect::Either));
        }
        for (what, b, expect) in header_cases {
            load_via_c(
                &dir,
                &b,
                expect,
                &format!("seed {si}: {what}, header CRC stale"),
                &q,
                &mut o,
            );
            let mut b = b;
            fix_header_crc(&mut b);
            load_via_c(
                &dir,
                &b,
                expect,
                &format!("seed {si}: {what}, header CRC fixed"),
                &q,
                &mut o,
            );
        }

        // Section lengths changed with every CRC recomputed: the index
        // parser must refuse sizes that disagree with its params, or the
        // mutant must be usable.
        for (i, sec) in secs.iter().enumerate() {
            for v in [
                0usize,
                sec.len.saturating_sub(1),
                sec.len.saturating_sub(4),
                sec.len.saturating_sub(8),
            ] {
                if v == sec.len {
                    continue;
                }
                let mut b = good.clone();
                put64(&mut b, sec.entry + 16, v as u64);
                fix_crcs(&mut b);
                load_via_c(
                    &dir,
                    &b,
                    Expect::Either,
                    &format!("seed {si}: section {i} length {v}, CRCs fixed"),
                    &q,
                    &mut o,
                );
            }
        }

        // The PARAMS record's own version (first u32 of PARAMS).
        let params = secs
            .iter()
            .find(|s| &good[s.entry..s.entry + 8] == b"PARAMS\0\0")
            .expect("a PARAMS section");
        for v in [0u32, 2, 3, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, params.off, v);
            fix_crcs(&mut b);
            load_via_c(
                &dir,
                &b,
                Expect::Refused,
                &format!("seed {si}: PARAMS version {v}"),
                &q,
                &mut o,
            );
        }

        // Random single-bit flips, checksums left alone: every byte the
        // format checks (header, table, section data) is covered by a CRC
        // or must be zero; zero padding between sections is not checked.
        let mut checked = vec![false; len];
        checked[..table_end].iter_mut().for_each(|c| *c = true);
        for sec in &secs {
            checked[sec.off..sec.off + sec.len]
                .iter_mut()
                .for_each(|c| *c = true);
        }
        for _ in 0..flips {
            let at = r.below(len as u64) as usize;
            let mut b = good.clone();
            b[at] ^= 1 << r.below(8);
            let expect = if checked[at] {
                Expect::Refused
            } else {
                Expect::Either
            };
            load_via_c(
                &dir,
                &b,
                expect,
                &format!("seed {si}: bit flip at byte {at}"),
                &q,
                &mut o,
            );
        }
    }
    println!(
        "fuzz_index_load (C ABI, structural): {} files, {} refused with a status and message, {} loaded and queried",
        o.refused + o.loaded,
        o.refused,
        o.loaded
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------------------
// IVF through lshk_index_load: the same structural mutations on the files
// of the IVF source, both the index files lshk_index_save writes
// (lshk_index_build with LSHK_SOURCE_IVF; W copied or borrowed, with and
// without codes, label-aware lists from lshk_index_train_labels) and the
// 0.2 IVF files (written by `Ivf::save`, the format of 0.2's
// lshk_ivf_save), which lshk_index_load reads as IVF-source indexes; plus
// every IVFPARAM field set to boundary values and the LOFFS / LIDS
// contents broken, all with the checksums recomputed so the IVF parser
// itself is reached. A refusal must set a message and leave `*out`
// untouched; a loaded mutant must answer queries with ids < rows (or the
// padding id) without a panic.

/// Loads `bytes` through lshk_index_load (with `w` and its stride for the
/// files that need W) and applies the oracle above.
fn ivf_load_via_c(
    dir: &Path,
    bytes: &[u8],
    w: Option<(&[f32], usize)>,
    expect: Expect,
    what: &str,
    q: &[f32],
    o: &mut Outcome,
) {
    ivf_load_via_c_with(dir, bytes, w, false, expect, what, q, o)
}

/// [`ivf_load_via_c`], through lshk_index_load_borrowed (W's length given)
/// when `checked`.
#[allow(clippy::too_many_arguments)]
fn ivf_load_via_c_with(
    dir: &Path,
    bytes: &[u8],
    w: Option<(&[f32], usize)>,
    checked: bool,
    expect: Expect,
    what: &str,
    q: &[f32],
    o: &mut Outcome,
) {
    let path = dir.join("c-mutant.ivf");
    std::fs::write(&path, bytes).unwrap();
    if std::env::var_os("LSHK_FUZZ_TRACE").is_some() {
        eprintln!("{what}");
    }
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let canary = 0xA5A5_A5A5_A5A5_A5A5usize as *mut lshk_index;
    let mut out = canary;
    assert_ne!(lshk_isa_set_max(0xDEAD), LSHK_STATUS_OK); // a foreign message
    let (wp, wl, ws) = w.map_or((std::ptr::null(), 0, 0), |(w, s)| (w.as_ptr(), w.len(), s));
    let t0 = std::time::Instant::now();
    // SAFETY: a NUL-terminated path; a W of the seed's shape or NULL (with
    // lshk_index_load_borrowed: `wl` readable floats); a writable out.
    let (st, name) = unsafe {
        if checked {
            (
                lshk_index_load_borrowed(cpath.as_ptr(), wp, wl, ws, &mut out),
                "lshk_index_load_borrowed: ",
            )
        } else {
            (
                lshk_index_load(cpath.as_ptr(), wp, ws, &mut out),
                "lshk_index_load: ",
            )
        }
    };
    assert!(
        t0.elapsed().as_secs() < 10,
        "{what}: the load took {:?}",
        t0.elapsed()
    );
    assert_ne!(st, LSHK_STATUS_PANIC, "{what}: panic: {}", c_last_msg());
    if st != LSHK_STATUS_OK {
        assert_eq!(out, canary, "{what}: failed with {st} but wrote *out");
        let m = c_last_msg();
        assert!(
            m.starts_with(name) && m.len() > name.len(),
            "{what}: status {st} without a message ({m:?})"
        );
        o.refused += 1;
        return;
    }
    assert_eq!(expect, Expect::Either, "{what}: the mutant loaded");
    o.loaded += 1;
    let info = describe(out);
    let (rows, dim, nlist) = (info.rows, info.dim, info.nlist);
    if dim * 8 <= q.len() {
        for (nprobe, rerank) in [(1u32, 0u32), (nlist, u32::MAX), (3, 20)] {
            let mut qp = lshk_query_params_default();
            qp.ivf.nprobe = nprobe.max(1);
            qp.ivf.rerank = rerank;
            let mut ids = vec![0u32; 8 * 5];
            let mut sc = vec![0f32; 8 * 5];
            // SAFETY: 8 queries of `dim` floats; outputs of 8 * k.
            let r = unsafe {
                lshk_index_query(
                    out,
                    q.as_ptr(),
                    8,
                    dim,
                    5,
                    &qp,
                    ids.as_mut_ptr(),
                    sc.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            assert_ne!(
                r,
                LSHK_STATUS_PANIC,
                "{what}: query panicked: {}",
                c_last_msg()
            );
            if r == LSHK_STATUS_OK {
                assert!(
                    ids.iter().all(|&i| i == u32::MAX || (i as usize) < rows),
                    "{what}: id out of range"
                );
            }
        }
    }
    // SAFETY: a live handle, freed once.
    assert_eq!(unsafe { lshk_index_free(out) }, LSHK_STATUS_OK);
}

/// How much of a borrowed W lshk_index_load may read for an index file:
/// `(rows - 1) * stride + dim` floats of the shape its PARAMS record
/// (rows, dim, stride: u64 words at bytes 48, 56, 64), which the loader
/// takes from the file (the caller cannot know the shape of a damaged
/// file). `None`: no PARAMS record of full length, or a table that does
/// not fit the file (the container checks refuse those before W is read).
/// `Some(None)`: a claim no memory can hold (the load must fail).
fn w_claim(b: &[u8]) -> Option<Option<usize>> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let n = u32::from_le_bytes(b.get(24..28)?.try_into().ok()?) as usize;
    let params = (0..n.min(4096)).find_map(|i| {
        let e = HEADER + ENTRY * i;
        (b.get(e..e + 8)? == b"PARAMS\0\0").then_some(e)
    })?;
    let (off, len) = (word(params + 8)? as usize, word(params + 16)?);
    if len < 96 {
        return None;
    }
    let at = |k: usize| word(off.checked_add(k)?);
    let (rows, dim, stride) = (at(48)?, at(56)?, at(64)?);
    let need = rows
        .checked_sub(1)
        .and_then(|r| r.checked_mul(stride))
        .and_then(|x| x.checked_add(dim))
        .filter(|&x| x <= isize::MAX as u64 / 4);
    Some(need.map(|x| x as usize))
}

/// The bytes of an IVF-source index file built and saved through the C
/// ABI (lshk_index_build, lshk_index_train_labels, lshk_index_save).
fn ivf_index_file(
    path: &Path,
    layer: &lshk::data::Layer,
    (rows, dim): (usize, usize),
    (codes, borrow, bias, labels): (u32, bool, bool, bool),
) -> Vec<u8> {
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_IVF;
    p.storage = if borrow {
        LSHK_STORAGE_BORROWED_F32
    } else {
        LSHK_STORAGE_F32
    };
    p.ivf.nlist = 12;
    p.ivf.codes = codes;
    p.build_threads = 1;
    let mut h = std::ptr::null_mut();
    let bp = if bias {
        layer.bias.as_ptr()
    } else {
        std::ptr::null()
    };
    // SAFETY: W and bias of the stated shape outlive the handle.
    let st = unsafe { lshk_index_build(layer.w.as_ptr(), bp, rows, dim, dim, &p, &mut h) };
    assert_eq!(st, LSHK_STATUS_OK, "{}", c_last_msg());
    if labels {
        // Label-aware lists: rows in several lists (positions > rows).
        let tq = lshk::data::structured_layer(40, dim, 3, 17).w;
        let off: Vec<usize> = (0..=40).map(|i| 3 * i).collect();
        let ys: Vec<u32> = (0..120).map(|i| (i * 37 % rows) as u32).collect();
        // SAFETY: 40 queries of dim floats, 41 offsets, 120 labels.
        let st = unsafe {
            lshk_index_train_labels(
                h,
                tq.as_ptr(),
                40,
                dim,
                off.as_ptr(),
                ys.as_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(st, LSHK_STATUS_OK, "{}", c_last_msg());
    }
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a live handle, a NUL-terminated path; freed once.
    unsafe {
        assert_eq!(lshk_index_save(h, cpath.as_ptr()), LSHK_STATUS_OK);
        assert_eq!(lshk_index_free(h), LSHK_STATUS_OK);
    }
    std::fs::read(path).unwrap()
}

/// The bytes of a 0.2 IVF file (the standalone IVF's own format).
fn ivf_v02_file(
    path: &Path,
    layer: &lshk::data::Layer,
    (rows, dim): (usize, usize),
    (codes, borrow, bias, labels): (u32, bool, bool, bool),
) -> Vec<u8> {
    use lshk::ivf::{Codes, Ivf, IvfParams};
    let p = IvfParams {
        nlist: 12,
        codes: Codes::from_u32(codes).unwrap(),
        threads: 1,
        ..Default::default()
    };
    let b = bias.then_some(&layer.bias[..]);
    // SAFETY: `layer.w` outlives the lists (dropped in this function).
    let mut ix = unsafe {
        if borrow {
            Ivf::build_borrowed(&layer.w, b, rows, dim, dim, &p)
        } else {
            Ivf::build(&layer.w, b, rows, dim, dim, &p)
        }
    }
    .unwrap();
    if labels {
        let tq = lshk::data::structured_layer(40, dim, 3, 17).w;
        let off: Vec<usize> = (0..=40).map(|i| 3 * i).collect();
        let ys: Vec<u32> = (0..120).map(|i| (i * 37 % rows) as u32).collect();
        ix.train_labels(&tq, 40, dim, &off, &ys, &Default::default())
            .unwrap();
    }
    ix.save(path).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn ivf_structural_mutations_through_the_c_abi() {
    let dir = std::env::temp_dir().join(format!("lshk-fuzz-ivf-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, dim) = (300usize, 10usize);
    let layer = lshk::data::structured_layer(rows, dim, 9, 5);
    let q = lshk::data::structured_layer(8, dim, 2, 11).w;
    // W's rows at stride dim + 1 (a W the loader may read at that stride).
    let mut padded = vec![0f32; (rows - 1) * (dim + 1) + dim];
    for (i, row) in layer.w.chunks(dim).enumerate() {
        padded[i * (dim + 1)..i * (dim + 1) + dim].copy_from_slice(row);
    }
    let flips = (iters() / 2).max(50);
    let mut o = Outcome {
        refused: 0,
        loaded: 0,
        skipped: 0,
    };
    let mut r = SplitMix64::new(0x1f5e);
    // (codes, W borrowed, bias, label-aware lists)
    let kinds = [
        (LSHK_IVF_CODES_I8, false, true, false),
        (LSHK_IVF_CODES_NONE, false, false, false),
        (LSHK_IVF_CODES_I8, true, true, false),
        (LSHK_IVF_CODES_PQ4, true, true, false),
        (LSHK_IVF_CODES_PQ4, false, false, false),
        (LSHK_IVF_CODES_PQ4_I8, true, true, false),
        (LSHK_IVF_CODES_I8, true, true, true),
        (LSHK_IVF_CODES_NONE, false, true, true),
    ];
    // Each kind as an index file, then as a 0.2 IVF file.
    let seeds = kinds
        .iter()
        .map(|&k| (true, k))
        .chain(kinds.iter().map(|&k| (false, k)));
    for (si, (index_file, kind)) in seeds.enumerate() {
        let borrow = kind.1;
        let path = dir.join(format!("seed{si}.ivf"));
        let good = if index_file {
            ivf_index_file(&path, &layer, (rows, dim), kind)
        } else {
            ivf_v02_file(&path, &layer, (rows, dim), kind)
        };
        // The caller's W at its stride (an index file records it too).
        let w = borrow.then_some((&layer.w[..], dim));
        let name = if index_file { "index" } else { "0.2 ivf" };
        let load = |b: &[u8], expect: Expect, what: String, o: &mut Outcome| {
            let what = format!("ivf seed {si} ({name}): {what}");
            if !(index_file && borrow) {
                return ivf_load_via_c(&dir, b, w, expect, &what, &q, o);
            }
            // With W's length given, a file claiming more than W holds
            // is refused before W is read, whatever the mutation.
            let claim = w_claim(b);
            let over = matches!(claim, Some(None))
                || matches!(claim, Some(Some(need)) if need > layer.w.len());
            let e = if over { Expect::Refused } else { expect };
            let checked = format!("{what} (W's length checked)");
            ivf_load_via_c_with(&dir, b, w, true, e, &checked, &q, o);
            // A borrowed W is read in the shape the file's PARAMS claim:
            // the test keeps to the caller's side of that contract.
            match claim {
                Some(None) => ivf_load_via_c(&dir, b, w, Expect::Refused, &what, &q, o),
                Some(Some(need)) if need > layer.w.len() => {
                    if need > 1 << 22 {
                        o.skipped += 1;
                        return;
                    }
                    let mut big = vec![0f32; need];
                    big[..layer.w.len()].copy_from_slice(&layer.w);
                    ivf_load_via_c(&dir, b, Some((&big, dim)), expect, &what, &q, o)
                }
                _ => ivf_load_via_c(&dir, b, w, expect, &what, &q, o),
            }
        };
        if index_file && borrow {
            // w_stride 0: the stride the file records.
            let before = o.loaded;
            let zero = Some((&layer.w[..], 0));
            let what = format!("ivf seed {si}: w_stride 0");
            ivf_load_via_c(&dir, &good, zero, Expect::Either, &what, &q, &mut o);
            assert_eq!(o.loaded, before + 1, "ivf seed {si}: w_stride 0");
        }
        let before = o.loaded;
        load(&good, Expect::Either, "the unmodified file".into(), &mut o);
        // Twice for a borrowed-W index file: with and without W's length.
        let loads = if index_file && borrow { 2 } else { 1 };
        assert_eq!(
            o.loaded,
            before + loads,
            "ivf seed {si} ({name}): the unmodified file did not load"
        );
        // The wrong W argument for the file, and a wrong stride for W (an
        // index file records dim; a 0.2 file takes any stride >= dim).
        let wrong = [
            (
                if borrow {
                    None
                } else {
                    Some((&layer.w[..], dim))
                },
                "wrong w",
            ),
            (
                Some(if index_file {
                    (&padded[..], dim + 1)
                } else {
                    (&layer.w[..], dim - 1)
                }),
                "wrong w_stride",
            ),
        ];
        for (wrong, what) in wrong {
            let before = o.refused;
            let what = format!("ivf seed {si} ({name}): {what}");
            ivf_load_via_c(&dir, &good, wrong, Expect::Refused, &what, &q, &mut o);
            assert_eq!(o.refused, before + 1, "ivf seed {si} ({name}): {what}");
        }
        let secs = sections(&good);
        let n = secs.len();
        let table_end = HEADER + ENTRY * n;
        let len = good.len();

        // Truncation at every boundary (and one byte either side), with the
        // header's length left alone and rewritten to match.
        let mut cuts: BTreeSet<usize> = [
            0,
            1,
            8,
            27,
            28,
            63,
            HEADER,
            table_end - 1,
            table_end,
            len - 1,
        ]
        .into_iter()
        .collect();
        for i in 0..n {
            cuts.insert(HEADER + ENTRY * i);
        }
        for sec in &secs {
            for c in [sec.off, sec.off + sec.len] {
                cuts.extend([c.saturating_sub(1), c, c + 1]);
            }
        }
        for &cut in cuts.iter().filter(|&&c| c < len) {
            load(
                &good[..cut],
                Expect::Refused,
                format!("truncated to {cut}"),
                &mut o,
            );
            if cut >= 32 {
                let mut b = good[..cut].to_vec();
                put64(&mut b, 16, cut as u64);
                fix_header_crc(&mut b);
                load(
                    &b,
                    Expect::Refused,
                    format!("truncated to {cut}, length fixed"),
                    &mut o,
                );
            }
        }

        // Header and section-table fields (header CRC stale and fixed).
        let mut cases: Vec<(String, Vec<u8>, Expect)> = Vec::new();
        // Another kind: refused, except an index file read as a 0.2 IVF
        // file, whose IVF sections it holds (legitimate where its lists
        // hold their own rows).
        let (own_kind, other) = if index_file { (1, 2) } else { (2, 1) };
        for v in [0u32, other, 3, 14, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, 12, v);
            let expect = if index_file && v == 2 {
                Expect::Either
            } else {
                Expect::Refused
            };
            cases.push((format!("file kind {v} (was {own_kind})"), b, expect));
        }
        for v in [0u32, 2, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, 8, v);
            cases.push((format!("format version {v}"), b, Expect::Refused));
        }
        for v in [0u64, len as u64 - 1, len as u64 + 1, u64::MAX] {
            let mut b = good.clone();
            put64(&mut b, 16, v);
            cases.push((format!("file length {v}"), b, Expect::Refused));
        }
        for v in [0u32, n as u32 + 1, u32::MAX] {
            let mut b = good.clone();
            put32(&mut b, 24, v);
            cases.push((format!("section count {v}"), b, Expect::Refused));
        }
        for (i, sec) in secs.iter().enumerate() {
            for v in [u64::MAX, 1 << 40, len as u64, sec.len as u64 + 1] {
                let mut b = good.clone();
                put64(&mut b, sec.entry + 16, v);
                cases.push((format!("section {i} length {v}"), b, Expect::Refused));
            }
            for v in [u64::MAX, sec.off as u64 + 1, 0, len as u64] {
                let mut b = good.clone();
                put64(&mut b, sec.entry + 8, v);
                cases.push((format!("section {i} offset {v}"), b, Expect::Refused));
            }
            let mut b = good.clone();
            b[sec.entry..sec.entry + 8].copy_from_slice(b"ZZZZZZZZ");
            cases.push((format!("section {i} renamed"), b, Expect::Either));
        }
        for (what, b, expect) in cases {
            load(&b, expect, format!("{what}, header CRC stale"), &mut o);
            let mut b = b;
            fix_header_crc(&mut b);
            load(&b, expect, format!("{what}, header CRC fixed"), &mut o);
        }

        // Section lengths changed with every CRC recomputed.
        for (i, sec) in secs.iter().enumerate() {
            for v in [0usize, sec.len.saturating_sub(4), sec.len.saturating_sub(8)] {
                if v == sec.len {
                    continue;
                }
                let mut b = good.clone();
                put64(&mut b, sec.entry + 16, v as u64);
                fix_crcs(&mut b);
                load(
                    &b,
                    Expect::Either,
                    format!("section {i} length {v}, CRCs fixed"),
                    &mut o,
                );
            }
        }

        // Every IVFPARAM field (12 u32 slots: version, rows, dim, nlist,
        // iters, train_rows, codes, has_bias, borrowed, reserved, seed lo/hi)
        // set to boundary values, CRCs recomputed.
        let par = secs
            .iter()
            .find(|s| &good[s.entry..s.entry + 8] == b"IVFPARAM")
            .expect("an IVFPARAM section");
        for field in 0..12usize {
            let at = par.off + 4 * field;
            let orig = u32::from_le_bytes(good[at..at + 4].try_into().unwrap());
            for v in [
                0u32,
                1,
                2,
                orig.wrapping_add(1),
                orig.wrapping_sub(1),
                rows as u32 + 1,
                0x7FFF_FFFF,
                u32::MAX - 1,
                u32::MAX,
            ] {
                if v == orig {
                    continue;
                }
                let mut b = good.clone();
                put32(&mut b, at, v);
                fix_crcs(&mut b);
                // iters, train_rows and the seed are only recorded; codes
                // and has_bias may drop a section the file still holds.
                let expect = if matches!(field, 4 | 5 | 6 | 7 | 10 | 11) {
                    Expect::Either
                } else {
                    Expect::Refused
                };
                load(
                    &b,
                    expect,
                    format!("IVFPARAM field {field} = {v} (was {orig})"),
                    &mut o,
                );
            }
        }
        // rows = nlist = dim huge at once (sizes computed from them must not
        // overflow).
        for v in [u32::MAX - 1, 0x8000_0001, 0x4000_0001] {
            let mut b = good.clone();
            for field in [1usize, 2, 3] {
                put32(&mut b, par.off + 4 * field, v);
            }
            fix_crcs(&mut b);
            load(
                &b,
                Expect::Refused,
                format!("IVFPARAM rows = dim = nlist = {v}"),
                &mut o,
            );
        }

        // LOFFS / LIDS contents: not a partition, not a permutation.
        let find = |tag: &[u8; 8]| {
            secs.iter()
                .find(|s| &good[s.entry..s.entry + 8] == tag)
                .unwrap_or_else(|| panic!("a {} section", String::from_utf8_lossy(tag)))
        };
        let loffs = find(b"LOFFS\0\0\0");
        let lids = find(b"LIDS\0\0\0\0");
        let nl = loffs.len / 4 - 1;
        let mut broken: Vec<(String, Vec<u8>)> = Vec::new();
        for (j, v) in [
            (0usize, 1u32),
            (nl, rows as u32 - 1),
            (nl, rows as u32 + 1),
            (nl, u32::MAX),
            (1, u32::MAX),
            (nl / 2, u32::MAX),
        ] {
            let mut b = good.clone();
            put32(&mut b, loffs.off + 4 * j, v);
            broken.push((format!("LOFFS[{j}] = {v}"), b));
        }
        {
            // Two offsets swapped (decreasing).
            let mut b = good.clone();
            let (a0, a1) = (loffs.off + 4, loffs.off + 4 * (nl - 1));
            let (x, y) = (
                u32::from_le_bytes(good[a0..a0 + 4].try_into().unwrap()),
                u32::from_le_bytes(good[a1..a1 + 4].try_into().unwrap()),
            );
            if x != y {
                put32(&mut b, a0, y);
                put32(&mut b, a1, x);
                broken.push(("LOFFS[1] and LOFFS[nl-1] swapped".into(), b));
            }
        }
        for (j, v) in [
            (0usize, rows as u32),
            (rows - 1, u32::MAX),
            (
                5,
                u32::from_le_bytes(good[lids.off..lids.off + 4].try_into().unwrap()),
            ),
        ] {
            let mut b = good.clone();
            put32(&mut b, lids.off + 4 * j, v);
            broken.push((format!("LIDS[{j}] = {v}"), b));
        }
        for (what, mut b) in broken {
            fix_crcs(&mut b);
            load(&b, Expect::Refused, what, &mut o);
        }

        // Random mutations inside the sections with every CRC recomputed:
        // refused with a status, or a usable index.
        for it in 0..iters() {
            let b = mutate(&good, &mut r);
            load(&b, Expect::Either, format!("mutant {it}"), &mut o);
        }

        // Random single-bit flips, checksums left alone.
        let mut checked = vec![false; len];
        checked[..table_end].iter_mut().for_each(|c| *c = true);
        for sec in &secs {
            checked[sec.off..sec.off + sec.len]
                .iter_mut()
                .for_each(|c| *c = true);
        }
        for _ in 0..flips {
            let at = r.below(len as u64) as usize;
            let mut b = good.clone();
            b[at] ^= 1 << r.below(8);
            let expect = if checked[at] {
                Expect::Refused
            } else {
                Expect::Either
            };
            load(&b, expect, format!("bit flip at byte {at}"), &mut o);
        }
    }
    println!(
        "fuzz_index_load (IVF files through lshk_index_load, structural + mutants): {} files, {} refused with a status and message, {} loaded and queried, {} skipped (a borrowed W over 2^22 floats claimed)",
        o.refused + o.loaded,
        o.refused,
        o.loaded,
        o.skipped
    );
    assert!(
        o.skipped * 100 < o.refused + o.loaded,
        "{} of {} mutants skipped: the borrowed seeds are barely tested",
        o.skipped,
        o.refused + o.loaded
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------ float sections

/// How a section's values are stored.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Elem {
    F32,
    /// bf16 or binary16 bits.
    U16,
}

/// Loads a file and queries it (see [`FloatSeed::run`]).
type LoadAndQuery = Box<dyn Fn(&Path, f32) -> Result<bool, String>>;

/// One seed file: its kind, bytes, the float sections (tag, element) and
/// float fields of its parameter record (tag, 4-byte word), and how to
/// load and query it.
struct FloatSeed {
    what: String,
    bytes: Vec<u8>,
    sections: Vec<(&'static str, Elem)>,
    fields: Vec<(&'static str, usize)>,
    /// Loads `path` and queries it with 8 of its rows scaled by the given
    /// factor; `Err` text for a failed check, `Ok(true)` when it loaded.
    run: LoadAndQuery,
}

const F32_SPECIALS: [f32; 10] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1e19,
    -1e30,
    3e38,
    f32::MAX,
    -f32::MAX,
    1e-45,
    -0.0,
];
/// bf16 NaN, +inf, -inf, bf16 max, ~1.8e19; binary16 inf and NaN.
const U16_SPECIALS: [u16; 7] = [0x7FC0, 0x7F80, 0xFF80, 0x7F7F, 0x5F80, 0x7C00, 0x7E00];

/// The checks on a query's answer: every id a row or the padding id (none
/// when `exhaustive`), no NaN score.
fn check_answer(ids: &[u32], sc: &[f32], rows: usize, exhaustive: bool) -> Result<(), String> {
    if let Some(i) = ids
        .iter()
        .position(|&i| (i as usize) >= rows && (exhaustive || i != u32::MAX))
    {
        return Err(format!("id {} at {i} (rows {rows})", ids[i]));
    }
    if let Some(i) = sc.iter().position(|s| s.is_nan()) {
        return Err(format!("score {i} is NaN"));
    }
    Ok(())
}

fn float_seeds(dir: &Path) -> Vec<FloatSeed> {
    use lshk::forest::{Forest, ForestParams, ForestResult};
    use lshk::graph::{Graph, GraphParams};
    use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};
    let (rows, dim) = (300usize, 10usize);
    let layer = lshk::data::structured_layer(rows, dim, 9, 5);
    let (w, b) = (layer.w.clone(), layer.bias.clone());
    let mut seeds = Vec::new();
    let queries = |w: &[f32], dim: usize, f: f32| -> Vec<f32> {
        w[..8 * dim].iter().map(|x| x * f).collect()
    };
    let save = |name: &str, f: &dyn Fn(&Path) -> lshk::error::Result<()>| -> Vec<u8> {
        let p = dir.join(name);
        f(&p).unwrap();
        std::fs::read(&p).unwrap()
    };

    // IVF: every code type, borrowed W, label-aware lists.
    let ivf_sections = vec![
        ("CBIAS", Elem::F32),
        ("LSPREAD", Elem::F32),
        ("PBIAS", Elem::F32),
        ("PROWS", Elem::F32),
        ("QSCALES", Elem::F32),
        ("CENTQS", Elem::F32),
        ("CENTROID", Elem::F32),
        ("PQCENT", Elem::F32),
    ];
    for (codes, borrow, labels) in [
        (Codes::None, false, false),
        (Codes::I8, false, false),
        (Codes::I8, true, false),
        (Codes::Pq4, false, false),
        (Codes::Pq4I8, false, false),
        (Codes::I8, false, true),
    ] {
        let p = IvfParams {
            nlist: 12,
            codes,
            threads: 1,
            ..Default::default()
        };
        // SAFETY: `w` outlives every index built or loaded over it here
        // (a clone is moved into the loader below).
        let mut ix = unsafe {
            if borrow {
                Ivf::build_borrowed(&w, Some(&b), rows, dim, dim, &p)
            } else {
                Ivf::build(&w, Some(&b), rows, dim, dim, &p)
            }
        }
        .unwrap();
        if labels {
            let (q, y) = lshk::data::queries_near_labels(&w, rows, dim, 60, 3);
            let offs: Vec<usize> = (0..=60).collect();
            ix.train_labels(&q, 60, dim, &offs, &y, &Default::default())
                .unwrap();
        }
        let bytes = save("seed.ivf", &|p| ix.save(p));
        drop(ix);
        let wl = w.clone();
        seeds.push(FloatSeed {
            what: format!("ivf {codes:?} borrow {borrow} labels {labels}"),
            bytes,
            sections: ivf_sections.clone(),
            fields: vec![("IVFPARAM", 12)],
            run: Box::new(move |path, f| {
                let q = &queries(&wl, dim, f);
                // SAFETY: `wl` lives in this closure, longer than the index.
                let ix = match unsafe {
                    if borrow {
                        Ivf::load_borrowed(path, &wl, dim)
                    } else {
                        Ivf::load(path)
                    }
                } {
                    Ok(ix) => ix,
                    Err(_) => return Ok(false),
                };
                let nlist = ix.nlist() as u32;
                // One query (the single-query path) and a batch.
                for (sp, nq) in [SearchParams::default(), SearchParams::fixed(nlist, 1000)]
                    .into_iter()
                    .flat_map(|sp| [(sp, 1), (sp, 8)])
                {
                    let exhaustive = sp.nprobe == nlist && !labels;
                    let (mut ids, mut sc) = (vec![0u32; nq * 5], vec![0f32; nq * 5]);
                    if ix.search(q, nq, dim, 5, &sp, &mut ids, &mut sc).is_ok() {
                        check_answer(&ids, &sc, rows, exhaustive)?;
                    }
                }
                Ok(true)
            }),
        });
    }

    // Index: LSH families on every storage, the graph family, labels.
    for (family, storage, transform, labels, codes) in [
        (Family::SimHash, Storage::F32, Transform::None, false, false),
        (
            Family::SimHash,
            Storage::Bf16,
            Transform::Mips,
            false,
            false,
        ),
        (Family::Dwta, Storage::F16, Transform::None, false, false),
        (Family::SimHash, Storage::I8, Transform::None, true, false),
        (Family::Graph, Storage::F32, Transform::None, false, false),
        (Family::Graph, Storage::I8, Transform::None, false, false),
        (Family::Ivf, Storage::F32, Transform::None, false, false),
        (Family::Ivf, Storage::Bf16, Transform::None, false, false),
        (Family::Forest, Storage::F32, Transform::None, false, false),
        // Row codes (CODES / CSCALES, the rerank in PARAMS) on an LSH and
        // a forest index.
        (
            Family::SimHash,
            Storage::F32,
            Transform::BiasAug,
            false,
            true,
        ),
        (Family::Forest, Storage::F32, Transform::None, false, true),
    ] {
        let (idx, rows, dim) = seed_index(family, storage, transform, labels, codes);
        let wi = lshk::data::structured_layer(rows, dim, 9, 5).w;
        let bytes = save("seed.lshk", &|p| idx.save(p));
        drop(idx);
        let welem = match storage {
            Storage::Bf16 | Storage::F16 => Some(Elem::U16),
            Storage::F32 => Some(Elem::F32),
            _ => None,
        };
        let mut sections = vec![
            ("BIAS", Elem::F32),
            ("WSCALES", Elem::F32),
            ("PLANES", Elem::F32),
        ];
        sections.extend(welem.map(|e| ("WEIGHTS", e)));
        if family == Family::Ivf {
            sections.extend(ivf_sections.iter().copied());
        }
        if family == Family::Forest {
            sections.push(("FPLANES", Elem::F32));
        }
        seeds.push(FloatSeed {
            what: format!("index {family:?} {storage:?} {transform:?} labels {labels}"),
            bytes,
            sections,
            fields: vec![("PARAMS", 20)],
            run: Box::new(move |path, f| {
                let q = &queries(&wi, dim, f);
                let idx = match Index::load(path) {
                    Ok(i) => i,
                    Err(_) => return Ok(false),
                };
                let (mut ids, mut sc) = (vec![0u32; 8 * 5], vec![0f32; 8 * 5]);
                if idx
                    .query(
                        q,
                        8,
                        dim,
                        5,
                        &GatherParams::default(),
                        &mut ids,
                        &mut sc,
                        None,
                    )
                    .is_ok()
                {
                    check_answer(&ids, &sc, rows, false)?;
                }
                Ok(true)
            }),
        });
    }

    // Graph on every storage.
    for storage in [
        lshk::graph::Storage::F32,
        lshk::graph::Storage::Bf16,
        lshk::graph::Storage::I8,
    ] {
        let gp = GraphParams {
            m: 6,
            ef_construction: 20,
            threads: 1,
            storage,
            seed: 3,
        };
        let g = Graph::build(&w, Some(&b), rows, dim, dim, &gp).unwrap();
        let bytes = save("seed.graph", &|p| g.save(p));
        drop(g);
        let wg = w.clone();
        let grows = if storage == lshk::graph::Storage::Bf16 {
            Elem::U16
        } else {
            Elem::F32
        };
        let mut sections = vec![("GSCALES", Elem::F32)];
        if storage != lshk::graph::Storage::I8 {
            sections.push(("GROWS", grows));
        }
        seeds.push(FloatSeed {
            what: format!("graph {storage:?}"),
            bytes,
            sections,
            fields: vec![("GPARAM", 10)],
            run: Box::new(move |path, f| {
                let q = &queries(&wg, dim, f);
                let g = match Graph::load(path) {
                    Ok(g) => g,
                    Err(_) => return Ok(false),
                };
                let (mut ids, mut sc) = (vec![0u32; 8 * 5], vec![0f32; 8 * 5]);
                // ef >= rows: every row is scored, so no padding.
                if g.search(q, 8, dim, 5, rows, &mut ids, &mut sc).is_ok() {
                    check_answer(&ids, &sc, rows, true)?;
                }
                Ok(true)
            }),
        });
    }

    // Forest.
    let fp = ForestParams {
        trees: 3,
        leaf_size: 16,
        threads: 1,
        ..Default::default()
    };
    let f = Forest::build(&w, rows, dim, dim, &fp).unwrap();
    let bytes = save("seed.forest", &|p| f.save(p));
    drop(f);
    let wf = w.clone();
    seeds.push(FloatSeed {
        what: "forest".into(),
        bytes,
        sections: vec![("FPLANES", Elem::F32)],
        fields: vec![],
        run: Box::new(move |path, s| {
            let q = &queries(&wf, dim, s);
            let f = match Forest::load(path) {
                Ok(f) => f,
                Err(_) => return Ok(false),
            };
            let mut out = ForestResult::default();
            if f.query(&wf, dim, q, 8, dim, 20, &mut out).is_ok() {
                if let Some(i) = out.ids.iter().position(|&i| i as usize >= rows) {
                    return Err(format!("forest id {} at {i}", out.ids[i]));
                }
            }
            Ok(true)
        }),
    });
    seeds
}

/// Every float section (and float parameter field) of every file kind —
/// IVF on every code type, borrowed and label-aware; the LSH index on
/// every storage and the graph family; the graph on every storage; the
/// forest — set to NaN, infinities, finite values a build never produces
/// (1e19 to f32::MAX), a subnormal and -0, at the first, the last and two
/// seeded positions, with every CRC recomputed. A mutant must be refused,
/// or load into an object whose queries (ordinary, and scaled by 1e20 and
/// 3e37, magnitudes whose scores overflow f32) either fail with a status
/// or answer completely: no panic, no NaN score, no id out of range, no
/// padding where the search visits every row.
#[test]
fn float_sections_of_every_file_kind() {
    let dir = std::env::temp_dir().join(format!("lshk-fuzz-floats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = float_seeds(&dir);
    let mut r = SplitMix64::new(0xf10a_75ec);
    let (mut tried, mut loaded) = (0usize, 0usize);
    let mut failures = Vec::new();
    let path = dir.join("mutant");
    for s in &seeds {
        let secs = sections(&s.bytes);
        let mut mutants: Vec<(String, Vec<u8>)> = Vec::new();
        for &(tag, elem) in &s.sections {
            let Some(sec) = secs.iter().find(|x| x.tag == tag) else {
                continue;
            };
            let n = sec.len / if elem == Elem::F32 { 4 } else { 2 };
            if n == 0 {
                continue;
            }
            let mut at = vec![
                0,
                n - 1,
                r.below(n as u64) as usize,
                r.below(n as u64) as usize,
            ];
            at.dedup();
            for &i in &at {
                match elem {
                    Elem::F32 => {
                        for v in F32_SPECIALS {
                            let m = container::with_f32(&s.bytes, tag, i, v).unwrap();
                            mutants.push((format!("{tag}[{i}] = {v:e}"), m));
                        }
                    }
                    Elem::U16 => {
                        for v in U16_SPECIALS {
                            let m = container::with_u16(&s.bytes, tag, i, v).unwrap();
                            mutants.push((format!("{tag}[{i}] = {v:#06x}"), m));
                        }
                    }
                }
            }
        }
        for &(tag, word) in &s.fields {
            for v in F32_SPECIALS {
                if let Some(m) = container::with_f32(&s.bytes, tag, word, v) {
                    mutants.push((format!("{tag} word {word} = {v:e}"), m));
                }
            }
        }
        assert!(!mutants.is_empty(), "{}: no float section found", s.what);
        for (what, bytes) in mutants {
            tried += 1;
            std::fs::write(&path, &bytes).unwrap();
            for f in [1.0f32, 1e20, 3e37] {
                match catch_unwind(AssertUnwindSafe(|| (s.run)(&path, f))) {
                    Err(_) => failures.push(format!("{}: {what}: panic", s.what)),
                    Ok(Err(e)) => failures.push(format!("{}: {what}: {e}", s.what)),
                    Ok(Ok(l)) => loaded += usize::from(l && f == 1.0),
                }
            }
        }
    }
    println!(
        "float sections: {tried} mutants of {} seed files, {loaded} loaded, {} refused, {} failures",
        seeds.len(),
        tried - loaded,
        failures.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
