//! Seeded mutation fuzzing of `Index::load` (issue 8, item 2, short
//! version). A valid index file is mutated *inside* its sections and the
//! section and header CRCs are then recomputed, so every mutant passes the
//! container checks of src/format.rs and reaches the semantic parser of
//! the index: sizes, counts, enum values, offsets and ids that disagree.
//! Every mutant must either load with an error status (never a panic, an
//! abort or a huge allocation) or load into an index whose queries succeed
//! and return ids < rows (or the padding id).
//!
//! `LSHK_FUZZ_ITERS` sets the number of mutants per seed file (default 600;
//! run e.g. `LSHK_FUZZ_ITERS=200000 cargo test --release --test
//! fuzz_index_load -- --nocapture` for a long run).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use lshk::crc32c::crc32c;
use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::rng::SplitMix64;
use lshk::tables::GatherParams;

const HEADER: usize = 64;
const ENTRY: usize = 32;

struct Section {
    entry: usize,
    off: usize,
    len: usize,
}

fn sections(b: &[u8]) -> Vec<Section> {
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    (0..n)
        .map(|i| {
            let e = HEADER + ENTRY * i;
            Section {
                entry: e,
                off: u64::from_le_bytes(b[e + 8..e + 16].try_into().unwrap()) as usize,
                len: u64::from_le_bytes(b[e + 16..e + 24].try_into().unwrap()) as usize,
            }
        })
        .collect()
}

/// Recomputes every section CRC and the header CRC (layout in src/format.rs).
fn fix_crcs(b: &mut [u8]) {
    let secs = sections(b);
    for s in &secs {
        let c = crc32c(0, &b[s.off..s.off + s.len]);
        b[s.entry + 24..s.entry + 28].copy_from_slice(&c.to_le_bytes());
    }
    let table_end = HEADER + ENTRY * secs.len();
    let h = crc32c(crc32c(0, &b[..28]), &b[HEADER..table_end]);
    b[28..32].copy_from_slice(&h.to_le_bytes());
}

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
        ..Default::default()
    };
    let mut idx = Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &p, None).unwrap();
    if labels {
        let (q, y) = lshk::data::queries_near_labels(&layer.w, rows, dim, 50, 3);
        let offs: Vec<usize> = (0..=50).collect();
        idx.train_labels(&q, 50, dim, &offs, &y, &Default::default())
            .unwrap();
    }
    (idx, rows, dim)
}

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
    let seeds = [
        (Family::SimHash, Storage::F32, Transform::None, false),
        (Family::SimHash, Storage::Bf16, Transform::Mips, true),
        (Family::Dwta, Storage::I8, Transform::BiasAug, false),
        (Family::SimHash, Storage::F16, Transform::None, true),
    ];
    let (mut total, mut loaded, mut rejected) = (0usize, 0usize, 0usize);
    let mut r = SplitMix64::new(0x5eed);
    for (si, &(f, s, t, lab)) in seeds.iter().enumerate() {
        let (idx, rows, dim) = seed_index(f, s, t, lab);
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
