//! Golden answers of every retrieval structure: the ids and score bits of
//! a fixed set of top-10 queries, hashed, for each source and its main
//! settings (IVF with every code type and a borrowed W; the LSH index with
//! SimHash and DWTA on f32, bf16 and int8 rows and with the graph as its
//! candidate source; the FGD graph; the hashing forest's candidate lists;
//! the index with the IVF lists as its source, which must answer what the
//! standalone lists answer),
//! on a smaller layer of the demo's generator and, where `../shared/data`
//! has it, on the w2v-gutenberg layer.
//!
//! Moving the structures behind one pipeline must keep these bits: a
//! change here is a change of answers. Builds are the same on every tier
//! (each structure's tests check it); queries run on the scalar tier,
//! whose scores are the reference every other tier is held to, so the
//! hashes are the same on every machine.
//!
//! `LSHK_GOLDEN_PRINT=1 cargo test --test golden_sources -- --nocapture`
//! prints the table to paste after an intended change of answers.

use lshk::forest::{Forest, ForestParams, ForestResult};
use lshk::graph::{Graph, GraphParams};
use lshk::index::{Family, Index, IndexParams, QueryParams, Storage};
use lshk::isa::{self, Isa};
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};

const K: usize = 10;

/// FNV-1a over 32-bit words.
fn fnv(words: impl IntoIterator<Item = u32>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

fn answer_hash(ids: &[u32], sc: &[f32]) -> u64 {
    fnv(ids.iter().copied().chain(sc.iter().map(|s| s.to_bits())))
}

struct Layer {
    w: Vec<f32>,
    b: Option<Vec<f32>>,
    q: Vec<f32>,
    rows: usize,
    dim: usize,
    nq: usize,
}

/// Each source's answer hash on `l`, by name, in a fixed order. The
/// structures are built on the active tier (their builds are
/// tier-independent) and queried on the scalar tier.
fn answers(l: &Layer) -> Vec<(String, u64)> {
    let (rows, dim, nq) = (l.rows, l.dim, l.nq);
    let (w, b, q) = (&l.w[..], l.b.as_deref(), &l.q[..]);
    let mut out = Vec::new();
    let mut ivfs = Vec::new();
    for (codes, borrow) in [
        (Codes::None, false),
        (Codes::I8, false),
        (Codes::I8, true),
        (Codes::Pq4, false),
        (Codes::Pq4I8, false),
    ] {
        let p = IvfParams {
            codes,
            ..Default::default()
        };
        // SAFETY: `l.w` outlives the index (dropped in this function).
        let ix = unsafe {
            if borrow {
                Ivf::build_borrowed(w, b, rows, dim, dim, &p)
            } else {
                Ivf::build(w, b, rows, dim, dim, &p)
            }
        }
        .unwrap();
        ivfs.push((format!("ivf {codes:?} borrow {borrow}"), ix));
    }
    let mut idxs = Vec::new();
    for (family, storage, bits, tables) in [
        (Family::SimHash, Storage::F32, 12, 16),
        (Family::SimHash, Storage::Bf16, 12, 16),
        (Family::SimHash, Storage::I8, 12, 16),
        (Family::Dwta, Storage::F32, 4, 16),
        (Family::Graph, Storage::F32, 0, 0),
    ] {
        let mut p = IndexParams {
            family,
            storage,
            ..Default::default()
        };
        if family != Family::Graph {
            p.bits = bits;
            p.tables = tables;
        }
        let ix = Index::build(w, b, rows, dim, dim, &p, None).unwrap();
        idxs.push((format!("index {family:?} {storage:?}"), ix));
    }
    // The scorer's code stage (row codes, a shortlist of 16).
    let mut ix = Index::build(w, b, rows, dim, dim, &idxs_params(), None).unwrap();
    ix.set_codes(Codes::I8, 16).unwrap();
    idxs.push(("index SimHash F32 row codes rerank 16".into(), ix));
    let graph = Graph::build(w, b, rows, dim, dim, &GraphParams::default()).unwrap();
    // Raw-row trees (the default before unit rows) and the default.
    let raw = ForestParams {
        normalize_rows: false,
        ..Default::default()
    };
    let forest_raw = Forest::build(w, rows, dim, dim, &raw).unwrap();
    let forest = Forest::build(w, rows, dim, dim, &ForestParams::default()).unwrap();

    let (mut ids, mut sc) = (vec![0u32; nq * K], vec![0f32; nq * K]);
    let max = isa::active();
    isa::set_max(Isa::Scalar);
    for (name, ix) in &ivfs {
        for (sname, sp) in [
            ("default", SearchParams::default()),
            ("nprobe 4 rerank 32", SearchParams::fixed(4, 32)),
            ("nprobe 4 rerank 0", SearchParams::fixed(4, 0)),
        ] {
            // A batch, and each query alone: the same answers.
            ix.search(q, nq, dim, K, &sp, &mut ids, &mut sc).unwrap();
            let h = answer_hash(&ids, &sc);
            for i in 0..nq {
                let (mut i1, mut s1) = ([0u32; K], [0f32; K]);
                ix.search(&q[i * dim..], 1, dim, K, &sp, &mut i1, &mut s1)
                    .unwrap();
                assert_eq!(
                    (&i1[..], s1.map(f32::to_bits)),
                    (
                        &ids[i * K..(i + 1) * K],
                        std::array::from_fn(|t| sc[i * K + t].to_bits())
                    ),
                    "{name} {sname}: query {i} alone"
                );
            }
            out.push((format!("{name}, {sname}"), h));
        }
    }
    // The IVF lists as the one index's candidate source answer what the
    // standalone lists answer, to the bit (f32 rows and an exact stage).
    let ivf_family: Vec<(Codes, Storage, Index)> = [
        (Codes::I8, Storage::BorrowedF32),
        (Codes::Pq4I8, Storage::F32),
    ]
    .into_iter()
    .map(|(codes, storage)| {
        let p = IndexParams {
            family: Family::Ivf,
            storage,
            ivf: IvfParams {
                codes,
                ..Default::default()
            },
            ..Default::default()
        };
        isa::set_max(max);
        // SAFETY: `l.w` outlives the index (dropped in this function).
        let ix = unsafe { Index::build_borrowed(w, b, rows, dim, dim, &p, None) }.unwrap();
        isa::set_max(Isa::Scalar);
        (codes, storage, ix)
    })
    .collect();
    for (codes, storage, ix) in &ivf_family {
        for (sname, sp) in [
            ("default", SearchParams::default()),
            ("nprobe 4 rerank 32", SearchParams::fixed(4, 32)),
        ] {
            let qp = QueryParams {
                ivf: sp,
                ..Default::default()
            };
            ix.query_with(q, nq, dim, K as u32, &qp, &mut ids, &mut sc, None)
                .unwrap();
            let want = format!(
                "ivf {codes:?} borrow {}, {sname}",
                *storage == Storage::BorrowedF32
            );
            let h = out.iter().find(|(n, _)| *n == want).unwrap().1;
            assert_eq!(answer_hash(&ids, &sc), h, "index Ivf {storage:?}: {want}");
        }
    }
    for (name, ix) in &idxs {
        let qp = Default::default();
        ix.query(q, nq, dim, K as u32, &qp, &mut ids, &mut sc, None)
            .unwrap();
        out.push((name.clone(), answer_hash(&ids, &sc)));
    }
    for ef in [K, 64] {
        graph.search(q, nq, dim, K, ef, &mut ids, &mut sc).unwrap();
        out.push((format!("graph ef {ef}"), answer_hash(&ids, &sc)));
    }
    let mut fr = ForestResult::default();
    let sets_hash = |fr: &ForestResult| {
        fnv(fr
            .ids
            .iter()
            .copied()
            .chain(fr.offsets.iter().map(|&o| o as u32)))
    };
    forest_raw.query(w, dim, q, nq, dim, 32, &mut fr).unwrap();
    out.push(("forest q 32".into(), sets_hash(&fr)));
    forest.query(w, dim, q, nq, dim, 32, &mut fr).unwrap();
    out.push(("forest unit rows q 32".into(), sets_hash(&fr)));
    // The forest as the one index's source hands the scorer the same sets.
    let fp = IndexParams {
        family: Family::Forest,
        storage: Storage::BorrowedF32,
        ..Default::default()
    };
    isa::set_max(max);
    // SAFETY: `l.w` outlives the index (dropped in this function).
    let fx = unsafe { Index::build_borrowed(w, b, rows, dim, dim, &fp, None) }.unwrap();
    isa::set_max(Isa::Scalar);
    let mut sets = lshk::tables::GatherResult::default();
    let qp = QueryParams {
        forest: lshk::forest::ForestQuery {
            set_size: 32,
            ..Default::default()
        },
        ..Default::default()
    };
    fx.candidate_sets(q, nq, dim, 0, &qp, &mut sets).unwrap();
    assert_eq!(
        (&sets.ids, &sets.offsets),
        (&fr.ids, &fr.offsets),
        "index Forest: the sets of the standalone forest"
    );
    isa::set_max(max);
    out
}

/// The SimHash F32 index of the golden table, as built above.
fn idxs_params() -> IndexParams {
    IndexParams {
        family: Family::SimHash,
        storage: Storage::F32,
        bits: 12,
        tables: 16,
        ..Default::default()
    }
}

/// Compares with the golden table, or prints it (`LSHK_GOLDEN_PRINT`).
fn check(what: &str, got: &[(String, u64)], golden: &[(&str, u64)]) {
    if std::env::var_os("LSHK_GOLDEN_PRINT").is_some() {
        println!("const {what}: &[(&str, u64)] = &[");
        for (n, h) in got {
            println!("    ({n:?}, {h:#018x}),");
        }
        println!("];");
        return;
    }
    let bad: Vec<String> = got
        .iter()
        .zip(golden)
        .filter(|((n, h), (gn, gh))| n != gn || h != gh)
        .map(|((n, h), (_, gh))| format!("{n}: {h:#018x}, golden {gh:#018x}"))
        .collect();
    assert_eq!(
        got.len(),
        golden.len(),
        "{what}: the table's length changed"
    );
    assert!(
        bad.is_empty(),
        "{what}: answers changed:\n{}",
        bad.join("\n")
    );
}

const DEMO_LAYER: &[(&str, u64)] = &[
    ("ivf None borrow false, default", 0x47974bc6c7ba2c82),
    (
        "ivf None borrow false, nprobe 4 rerank 32",
        0x0e3f113a5dc54714,
    ),
    (
        "ivf None borrow false, nprobe 4 rerank 0",
        0x0e3f113a5dc54714,
    ),
    ("ivf I8 borrow false, default", 0xbf7bc035002ed9d8),
    (
        "ivf I8 borrow false, nprobe 4 rerank 32",
        0x03ed2b5a739f7655,
    ),
    ("ivf I8 borrow false, nprobe 4 rerank 0", 0x0c4b93d77bfe0c4f),
    ("ivf I8 borrow true, default", 0xbf7bc035002ed9d8),
    ("ivf I8 borrow true, nprobe 4 rerank 32", 0x03ed2b5a739f7655),
    ("ivf I8 borrow true, nprobe 4 rerank 0", 0x0c4b93d77bfe0c4f),
    ("ivf Pq4 borrow false, default", 0xbf7bc035002ed9d8),
    (
        "ivf Pq4 borrow false, nprobe 4 rerank 32",
        0x478aa15cbac6c28a,
    ),
    (
        "ivf Pq4 borrow false, nprobe 4 rerank 0",
        0x1e3576efcbcd65e2,
    ),
    ("ivf Pq4I8 borrow false, default", 0xbf7bc035002ed9d8),
    (
        "ivf Pq4I8 borrow false, nprobe 4 rerank 32",
        0x03ed2b5a739f7655,
    ),
    (
        "ivf Pq4I8 borrow false, nprobe 4 rerank 0",
        0x0c4b93d77bfe0c4f,
    ),
    ("index SimHash F32", 0xd7956e4eb8e8b282),
    ("index SimHash Bf16", 0xc344e38d415d07d9),
    ("index SimHash I8", 0x5b68057c7cc00474),
    ("index Dwta F32", 0xba0e0488d059130f),
    ("index Graph F32", 0xd88432984b4d7c28),
    ("index SimHash F32 row codes rerank 16", 0xd7956e4eb8e8b282),
    ("graph ef 10", 0x4c556323dcf43473),
    ("graph ef 64", 0x0baba41161b78dd1),
    ("forest q 32", 0xdcda09dfdd8bd170),
    ("forest unit rows q 32", 0x4421f6aa9af79a45),
];
const W2V_GUTENBERG: &[(&str, u64)] = &[
    ("ivf None borrow false, default", 0xab24309a6e94131b),
    (
        "ivf None borrow false, nprobe 4 rerank 32",
        0xc46676635c6cfb64,
    ),
    (
        "ivf None borrow false, nprobe 4 rerank 0",
        0xc46676635c6cfb64,
    ),
    ("ivf I8 borrow false, default", 0xe1418185424e9d27),
    (
        "ivf I8 borrow false, nprobe 4 rerank 32",
        0xfb6f62054809782b,
    ),
    ("ivf I8 borrow false, nprobe 4 rerank 0", 0xec82471e12741eea),
    ("ivf I8 borrow true, default", 0xe1418185424e9d27),
    ("ivf I8 borrow true, nprobe 4 rerank 32", 0xfb6f62054809782b),
    ("ivf I8 borrow true, nprobe 4 rerank 0", 0xec82471e12741eea),
    ("ivf Pq4 borrow false, default", 0xf5cddeb0f8ccb6e2),
    (
        "ivf Pq4 borrow false, nprobe 4 rerank 32",
        0xc1d88f682dfbcfc9,
    ),
    (
        "ivf Pq4 borrow false, nprobe 4 rerank 0",
        0x45086c28979be111,
    ),
    ("ivf Pq4I8 borrow false, default", 0xe1418185424e9d27),
    (
        "ivf Pq4I8 borrow false, nprobe 4 rerank 32",
        0xfb6f62054809782b,
    ),
    (
        "ivf Pq4I8 borrow false, nprobe 4 rerank 0",
        0xec82471e12741eea,
    ),
    ("index SimHash F32", 0xeda7b666f180fdd8),
    ("index SimHash Bf16", 0xe3726c71927cde38),
    ("index SimHash I8", 0x1f6462739aee7bec),
    ("index Dwta F32", 0xfbd2b44973d7272c),
    ("index Graph F32", 0xf49764674c1b5fda),
    ("index SimHash F32 row codes rerank 16", 0xeda7b666f180fdd8),
    ("graph ef 10", 0x68ead6624d7ab63d),
    ("graph ef 64", 0x020c8653afedceb0),
    ("forest q 32", 0x575ac886d41c18ad),
    ("forest unit rows q 32", 0x63b4144719f9a712),
];

/// The demo's generator at 20,000 rows (the demo runs 670,091), its
/// queries near labels (seed 7), and, where present, w2v-gutenberg with
/// 64 held-out centre words as queries. One test, because the tier cap is
/// process-wide.
#[test]
fn every_source_keeps_its_answers() {
    let (rows, dim, nq) = (20_000, 128, 64);
    let g = lshk::data::structured_layer(rows, dim, 4096, 20240601);
    let (q, _) = lshk::data::queries_near_labels(&g.w, rows, dim, nq, 7);
    let demo = Layer {
        w: g.w,
        b: Some(g.bias),
        q,
        rows,
        dim,
        nq,
    };
    check("DEMO_LAYER", &answers(&demo), DEMO_LAYER);

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/w2v-gutenberg");
    if !dir.join("output_layer.f32").exists() {
        println!("skipped: ../shared/data not found (the w2v-gutenberg goldens)");
        return;
    }
    let (w, rows) = lshk::data::read_raw_f32(&dir.join("output_layer.f32"), dim).unwrap();
    let (emb, _) = lshk::data::read_raw_f32(&dir.join("input_embeddings.f32"), dim).unwrap();
    let pairs = lshk::data::read_raw_i32(&dir.join("heldout_pairs.i32")).unwrap();
    let q: Vec<f32> = pairs
        .chunks_exact(2)
        .step_by(997)
        .take(nq)
        .flat_map(|p| emb[p[0] as usize * dim..(p[0] as usize + 1) * dim].to_vec())
        .collect();
    let w2v = Layer {
        w,
        b: None,
        q,
        rows,
        dim,
        nq,
    };
    check("W2V_GUTENBERG", &answers(&w2v), W2V_GUTENBERG);
}
