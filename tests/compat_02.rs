//! Every kind of file lshk 0.2 wrote loads in 0.3 through the C ABI
//! (`lshk_index_load`) and answers as 0.2 did.
//!
//! The files and 0.2's answers are in tests/data/compat02 (README.md there
//! says how they were made): lshk_index files of every family and storage,
//! IVF files (`lshk_ivf_save`) on a borrowed W (at two strides) and with
//! their own rows, standalone graph files (`lshk_graph_save`) and a forest
//! file (`lshk_forest_save`). The layer is rebuilt here from the
//! generator's formula and checked against the hashes 0.2 recorded.
//!
//! What must hold (docs/migration-0.3.md, "Files"):
//! * lshk_index and IVF files: the top-10 ids and score bits of 0.2;
//! * the f32 graph with a bias: 0.2's ids; the scores are now the exact
//!   logits of W, equal to 0.2's walk scores within rounding;
//! * the bf16 graph without a bias loads and returns exact logits of W;
//!   with a bias it is refused (its bias was rounded);
//! * the forest: 0.2's candidate sets;
//! * misuse of `borrowed_w` / `w_stride` is INVALID_ARGUMENT;
//! * lshk_index_describe reports each file's source, storage and shape,
//!   and lshk_index_weights the bias the file holds.
//!
//! Queries run on the scalar tier, as when the answers were recorded: its
//! scores are the reference every tier is held to, so the bits do not
//! depend on the machine.

use lshk::ffi::index::*;
use lshk::ffi::*;
use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

const ROWS: usize = 300;
const DIM: usize = 16;
const NQ: usize = 8;
const K: usize = 10;
/// Row stride of the padded W that `ivf_borrow_stride20.lshk` borrowed.
const PAD_STRIDE: usize = 20;
/// The forest's set size the sets were recorded with.
const SET_SIZE: u32 = 32;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compat02")
}

// ---- the layer (the generator's formula, gen02.rs.txt)

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A value in [-1, 1) with 24 significant bits of stream `s`, element `i`.
fn unit(s: u64, i: u64) -> f32 {
    let top = (splitmix64((s << 40) ^ i) >> 40) as i64;
    (top - (1 << 23)) as f32 / (1u32 << 23) as f32
}

fn fnv(v: &[f32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in v {
        for b in x.to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

struct Layer {
    w: Vec<f32>,
    /// W at PAD_STRIDE, the padding NaN (no loader may read it).
    wpad: Vec<f32>,
    b: Vec<f32>,
    q: Vec<f32>,
}

fn layer() -> Layer {
    let w: Vec<f32> = (0..ROWS * DIM).map(|i| unit(1, i as u64)).collect();
    let b: Vec<f32> = (0..ROWS).map(|r| 0.5 * unit(2, r as u64)).collect();
    let mut q = vec![0f32; NQ * DIM];
    for i in 0..NQ {
        let r = (97 * i + 13) % ROWS;
        for j in 0..DIM {
            let n = unit(3, (i * DIM + j) as u64);
            q[i * DIM + j] = if i < 6 {
                0.75 * w[r * DIM + j] + 0.25 * n
            } else {
                n
            };
        }
    }
    let mut wpad = vec![f32::NAN; ROWS * PAD_STRIDE];
    for r in 0..ROWS {
        wpad[r * PAD_STRIDE..r * PAD_STRIDE + DIM].copy_from_slice(&w[r * DIM..(r + 1) * DIM]);
    }
    Layer { w, wpad, b, q }
}

// ---- 0.2's answers (expected.txt)

/// A top-k: per query, `(id, score bits)`.
type TopK = Vec<Vec<(u32, u32)>>;

struct Expected {
    topk: HashMap<String, TopK>,
    sets: HashMap<String, Vec<Vec<u32>>>,
}

fn expected(l: &Layer) -> Expected {
    let text = std::fs::read_to_string(dir().join("expected.txt")).unwrap();
    let mut e = Expected {
        topk: HashMap::new(),
        sets: HashMap::new(),
    };
    let mut saw_layer = false;
    for line in text.lines().filter(|s| !s.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[0] {
            "layer" => {
                let n = |i: usize| f[i].parse::<u64>().unwrap();
                let shape = [ROWS, DIM, NQ, K, PAD_STRIDE, SET_SIZE as usize].map(|v| v as u64);
                assert_eq!(
                    [n(1), n(2), n(3), n(4), n(5), n(6)],
                    shape,
                    "expected.txt: shape"
                );
                let h = |i: usize| u64::from_str_radix(f[i], 16).unwrap();
                assert_eq!(
                    [h(8), h(10), h(12)],
                    [fnv(&l.w), fnv(&l.b), fnv(&l.q)],
                    "the rebuilt W, bias or queries differ from the generator's"
                );
                saw_layer = true;
            }
            "topk" => {
                let qi: usize = f[2].parse().unwrap();
                let row: Vec<(u32, u32)> = f[3..]
                    .iter()
                    .map(|p| {
                        let (id, bits) = p.split_once(':').unwrap();
                        (id.parse().unwrap(), u32::from_str_radix(bits, 16).unwrap())
                    })
                    .collect();
                assert_eq!(row.len(), K, "{line}");
                let v = e.topk.entry(f[1].to_string()).or_default();
                assert_eq!(v.len(), qi, "{line}: queries out of order");
                v.push(row);
            }
            "sets" => {
                let qi: usize = f[2].parse().unwrap();
                let v = e.sets.entry(f[1].to_string()).or_default();
                assert_eq!(v.len(), qi, "{line}: queries out of order");
                v.push(f[3..].iter().map(|s| s.parse().unwrap()).collect());
            }
            other => panic!("expected.txt: unknown line kind {other:?}"),
        }
    }
    assert!(saw_layer, "expected.txt has no layer line");
    for v in e.topk.values() {
        assert_eq!(v.len(), NQ);
    }
    for v in e.sets.values() {
        assert_eq!(v.len(), NQ);
    }
    e
}

// ---- the C calls

fn last_msg() -> String {
    // SAFETY: a size query with NULL/0, then a buffer of n + 1 bytes.
    unsafe {
        let n = lshk_last_error_message(std::ptr::null_mut(), 0);
        let mut b = vec![0u8; n + 1];
        lshk_last_error_message(b.as_mut_ptr().cast(), n + 1);
        String::from_utf8_lossy(&b[..n]).into_owned()
    }
}

fn scalar_tier() {
    assert_eq!(lshk_isa_set_max(LSHK_ISA_SCALAR), LSHK_STATUS_OK);
}

/// A loaded index, freed on drop.
struct Loaded(*mut lshk_index);

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: a live handle from lshk_index_load, used by this thread only.
        assert_eq!(unsafe { lshk_index_free(self.0) }, LSHK_STATUS_OK);
    }
}

/// lshk_index_load of `name` with `w` (NULL when None) at `w_stride`: the
/// index, or the status and message of the refusal.
fn load(name: &str, w: Option<&[f32]>, w_stride: usize) -> Result<Loaded, (lshk_status, String)> {
    let path = CString::new(dir().join(name).to_str().unwrap()).unwrap();
    let mut out: *mut lshk_index = std::ptr::null_mut();
    let wp = w.map_or(std::ptr::null(), |w| w.as_ptr());
    // SAFETY: a NUL-terminated path; a given W holds the file's rows at
    // w_stride (the callers pass W or its padded copy with their strides,
    // or a stride the loader must refuse before reading W); every W lives
    // in the test's Layer, which outlives the index.
    let st = unsafe { lshk_index_load(path.as_ptr(), wp, w_stride, &mut out) };
    if st == LSHK_STATUS_OK {
        assert!(!out.is_null());
        Ok(Loaded(out))
    } else {
        assert!(out.is_null(), "{name}: failed with {st} but wrote *out");
        Err((st, last_msg()))
    }
}

fn describe(ix: &Loaded) -> lshk_index_info {
    // SAFETY: plain integers; all zero is a valid value.
    let mut info: lshk_index_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<lshk_index_info>() as u32;
    // SAFETY: a live handle; a writable info with its struct_size set.
    let st = unsafe { lshk_index_describe(ix.0, &mut info) };
    assert_eq!(st, LSHK_STATUS_OK, "lshk_index_describe: {}", last_msg());
    info
}

fn weights(ix: &Loaded) -> lshk_weights_view {
    // SAFETY: integers and raw pointers; all zero is a valid value.
    let mut v: lshk_weights_view = unsafe { std::mem::zeroed() };
    v.struct_size = std::mem::size_of::<lshk_weights_view>() as u32;
    // SAFETY: a live handle; a writable view with its struct_size set.
    let st = unsafe { lshk_index_weights(ix.0, &mut v) };
    assert_eq!(st, LSHK_STATUS_OK, "lshk_index_weights: {}", last_msg());
    v
}

/// The top-K of the queries with lshk_query_params_default() (0.2's
/// defaults for every source), per query `(id, score)`.
fn query(ix: &Loaded, q: &[f32]) -> Vec<Vec<(u32, f32)>> {
    let qp = lshk_query_params_default();
    let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
    // SAFETY: a live handle; q holds NQ rows of DIM; the outputs NQ * K.
    let st = unsafe {
        lshk_index_query(
            ix.0,
            q.as_ptr(),
            NQ,
            DIM,
            K as u32,
            &qp,
            ids.as_mut_ptr(),
            sc.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(st, LSHK_STATUS_OK, "lshk_index_query: {}", last_msg());
    (0..NQ)
        .map(|i| (i * K..(i + 1) * K).map(|t| (ids[t], sc[t])).collect())
        .collect()
}

/// The candidate sets of the queries at SET_SIZE (k = 0).
fn candidates(ix: &Loaded, q: &[f32]) -> Vec<Vec<u32>> {
    let mut qp = lshk_query_params_default();
    qp.forest.set_size = SET_SIZE;
    let mut ids = vec![0u32; NQ * ROWS];
    let mut offsets = vec![0usize; NQ + 1];
    let mut needed = 0usize;
    // SAFETY: a live handle; q holds NQ rows of DIM; ids holds its length,
    // offsets NQ + 1.
    let st = unsafe {
        lshk_index_candidates(
            ix.0,
            q.as_ptr(),
            NQ,
            DIM,
            0,
            &qp,
            ids.as_mut_ptr(),
            ids.len(),
            offsets.as_mut_ptr(),
            &mut needed,
        )
    };
    assert_eq!(st, LSHK_STATUS_OK, "lshk_index_candidates: {}", last_msg());
    assert_eq!(offsets[NQ], needed);
    (0..NQ)
        .map(|i| ids[offsets[i]..offsets[i + 1]].to_vec())
        .collect()
}

// ---- the files

#[derive(Clone, Copy, PartialEq, Debug)]
enum Wgiven {
    None,
    /// W at stride DIM.
    W,
    /// W at PAD_STRIDE.
    Pad,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Check {
    /// Ids and score bits of 0.2's top-K.
    Bits,
    /// 0.2's ids; scores within rounding (the index rescores from W).
    Ids,
    /// Loads; exact logits of W (0.2 ranked by its rounded rows).
    Logits,
    /// 0.2's candidate sets at SET_SIZE.
    Sets,
}

struct Case {
    file: &'static str,
    w: Wgiven,
    source: u32,
    storage: u32,
    transform: u32,
    /// LSH K (0 for other sources).
    bits: u32,
    /// LSH L, or the forest's trees.
    tables: u32,
    /// IVF: whether it has lists (nlist and codes I8 are checked).
    ivf: bool,
    bias: bool,
    check: Check,
}

fn cases() -> Vec<Case> {
    let c = |file, w, source, storage, check| Case {
        file,
        w,
        source,
        storage,
        transform: 0,
        bits: 0,
        tables: 0,
        ivf: source == LSHK_SOURCE_IVF,
        bias: true,
        check,
    };
    let lsh = |file, w, source, storage, bits| Case {
        bits,
        tables: 8,
        ..c(file, w, source, storage, Check::Bits)
    };
    use Check::*;
    use Wgiven as G;
    vec![
        lsh(
            "index_simhash.lshk",
            G::None,
            LSHK_SOURCE_SIMHASH,
            LSHK_STORAGE_F32,
            8,
        ),
        lsh(
            "index_dwta.lshk",
            G::None,
            LSHK_SOURCE_DWTA,
            LSHK_STORAGE_F32,
            2,
        ),
        Case {
            transform: LSHK_TRANSFORM_BIAS_AUG,
            ..lsh(
                "index_simhash_borrowed.lshk",
                G::W,
                LSHK_SOURCE_SIMHASH,
                LSHK_STORAGE_BORROWED_F32,
                8,
            )
        },
        lsh(
            "index_simhash_bf16.lshk",
            G::None,
            LSHK_SOURCE_SIMHASH,
            LSHK_STORAGE_BF16,
            8,
        ),
        lsh(
            "index_simhash_f16.lshk",
            G::None,
            LSHK_SOURCE_SIMHASH,
            LSHK_STORAGE_F16,
            8,
        ),
        lsh(
            "index_dwta_i8.lshk",
            G::None,
            LSHK_SOURCE_DWTA,
            LSHK_STORAGE_I8,
            2,
        ),
        c(
            "index_graph.lshk",
            G::None,
            LSHK_SOURCE_GRAPH,
            LSHK_STORAGE_F32,
            Bits,
        ),
        c(
            "index_ivf_borrowed.lshk",
            G::W,
            LSHK_SOURCE_IVF,
            LSHK_STORAGE_BORROWED_F32,
            Bits,
        ),
        Case {
            tables: 8,
            ..c(
                "index_forest_borrowed.lshk",
                G::W,
                LSHK_SOURCE_FOREST,
                LSHK_STORAGE_BORROWED_F32,
                Bits,
            )
        },
        c(
            "ivf_borrow.lshk",
            G::W,
            LSHK_SOURCE_IVF,
            LSHK_STORAGE_BORROWED_F32,
            Bits,
        ),
        c(
            "ivf_borrow_stride20.lshk",
            G::Pad,
            LSHK_SOURCE_IVF,
            LSHK_STORAGE_BORROWED_F32,
            Bits,
        ),
        c(
            "ivf_own.lshk",
            G::None,
            LSHK_SOURCE_IVF,
            LSHK_STORAGE_F32,
            Bits,
        ),
        c(
            "graph_f32_bias.lshk",
            G::W,
            LSHK_SOURCE_GRAPH,
            LSHK_STORAGE_BORROWED_F32,
            Ids,
        ),
        Case {
            bias: false,
            ..c(
                "graph_bf16.lshk",
                G::W,
                LSHK_SOURCE_GRAPH,
                LSHK_STORAGE_BORROWED_F32,
                Logits,
            )
        },
        Case {
            bias: false,
            tables: 8,
            ..c(
                "forest.lshk",
                G::W,
                LSHK_SOURCE_FOREST,
                LSHK_STORAGE_BORROWED_F32,
                Sets,
            )
        },
    ]
}

/// Files 0.3 refuses by design (`misuse_of_w_and_w_stride_is_refused`): a
/// bf16 graph's bias was rounded.
const REFUSED: [&str; 1] = ["graph_bf16_bias.lshk"];

fn load_case(l: &Layer, c: &Case) -> Loaded {
    let r = match c.w {
        Wgiven::None => load(c.file, None, 0),
        Wgiven::W => load(c.file, Some(&l.w), DIM),
        Wgiven::Pad => load(c.file, Some(&l.wpad), PAD_STRIDE),
    };
    r.unwrap_or_else(|(st, m)| panic!("{}: lshk_index_load: status {st}: {m}", c.file))
}

/// `q . w_r + b_r` in f64.
fn logit(l: &Layer, bias: bool, qi: usize, r: usize) -> f64 {
    let q = &l.q[qi * DIM..(qi + 1) * DIM];
    let w = &l.w[r * DIM..(r + 1) * DIM];
    let dot: f64 = q.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum();
    dot + if bias { l.b[r] as f64 } else { 0.0 }
}

#[test]
fn every_02_file_answers_as_02() {
    scalar_tier();
    let l = layer();
    let e = expected(&l);
    let cases = cases();
    // Every recorded file has a case or is refused by design, and every
    // case has a record.
    let mut recorded: Vec<&String> = e.topk.keys().chain(e.sets.keys()).collect();
    recorded.sort();
    let mut named: Vec<&str> = cases.iter().map(|c| c.file).chain(REFUSED).collect();
    named.sort();
    assert_eq!(
        recorded, named,
        "expected.txt and the cases name different files"
    );
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".lshk"))
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, named, "the .lshk files and the cases differ");

    for c in &cases {
        let f = c.file;
        let ix = load_case(&l, c);
        let info = describe(&ix);
        assert_eq!(
            (info.source, info.storage, info.transform),
            (c.source, c.storage, c.transform),
            "{f}: source, storage, transform"
        );
        assert_eq!((info.rows, info.dim), (ROWS, DIM), "{f}: shape");
        assert_eq!(
            (info.bits_per_table, info.tables),
            (c.bits, c.tables),
            "{f}: K and L (trees)"
        );
        let (nlist, codes) = if c.ivf {
            (lshk::ivf::auto_nlist(ROWS) as u32, LSHK_IVF_CODES_I8)
        } else {
            (0, 0)
        };
        assert_eq!(
            (info.nlist, info.codes, info.labelled),
            (nlist, codes, 0),
            "{f}: IVF"
        );

        // The bias comes back exactly (0.2 kept it in f32 everywhere but in
        // rounded graph rows); a borrowed W is the caller's, in place.
        let v = weights(&ix);
        assert_eq!(v.storage, c.storage, "{f}: view storage");
        if c.bias {
            assert!(!v.bias.is_null(), "{f}: no bias");
            // SAFETY: the view's bias holds `rows` floats while ix lives.
            let vb = unsafe { std::slice::from_raw_parts(v.bias, ROWS) };
            assert_eq!(fnv(vb), fnv(&l.b), "{f}: the bias differs from 0.2's");
        } else {
            assert!(v.bias.is_null(), "{f}: a bias where 0.2 had none");
        }
        match c.w {
            Wgiven::W => assert_eq!((v.w.cast(), v.w_stride), (l.w.as_ptr(), DIM), "{f}: W"),
            Wgiven::Pad => {
                assert_eq!(
                    (v.w.cast(), v.w_stride),
                    (l.wpad.as_ptr(), PAD_STRIDE),
                    "{f}: W"
                )
            }
            Wgiven::None if c.storage == LSHK_STORAGE_F32 => {
                assert_eq!(v.w_stride, DIM, "{f}: stored W's stride");
                // SAFETY: an F32 view holds rows * w_stride floats while ix lives.
                let vw = unsafe { std::slice::from_raw_parts(v.w.cast::<f32>(), ROWS * DIM) };
                assert_eq!(fnv(vw), fnv(&l.w), "{f}: the stored W differs from 0.2's");
            }
            Wgiven::None => {}
        }

        match c.check {
            Check::Sets => {
                assert_eq!(
                    candidates(&ix, &l.q),
                    e.sets[f],
                    "{f}: candidate sets differ from 0.2's"
                );
                continue;
            }
            Check::Bits | Check::Ids | Check::Logits => {}
        }
        let got = query(&ix, &l.q);
        let want = &e.topk[f];
        for (qi, (g, w)) in got.iter().zip(want).enumerate() {
            let gids: Vec<u32> = g.iter().map(|p| p.0).collect();
            let wids: Vec<u32> = w.iter().map(|p| p.0).collect();
            match c.check {
                Check::Bits => {
                    let gb: Vec<(u32, u32)> = g.iter().map(|&(i, s)| (i, s.to_bits())).collect();
                    assert_eq!(
                        &gb, w,
                        "{f}: query {qi}: (id, score bits) differ from 0.2's"
                    );
                }
                Check::Ids => {
                    assert_eq!(gids, wids, "{f}: query {qi}: ids differ from 0.2's");
                    for (&(id, s), &(_, wb)) in g.iter().zip(w) {
                        let s0 = f32::from_bits(wb);
                        let tol = 1e-5 * s0.abs().max(1.0);
                        assert!(
                            (s - s0).abs() <= tol,
                            "{f}: query {qi} id {id}: score {s} vs 0.2's {s0}"
                        );
                    }
                }
                Check::Logits => {
                    for t in 0..K {
                        let (id, s) = g[t];
                        assert!((id as usize) < ROWS, "{f}: query {qi}: id {id}");
                        if t > 0 {
                            assert!(g[t - 1].1 >= s, "{f}: query {qi}: not descending");
                        }
                        let x = logit(&l, c.bias, qi, id as usize);
                        assert!(
                            (s as f64 - x).abs() <= 1e-5 * x.abs().max(1.0),
                            "{f}: query {qi} id {id}: score {s}, exact logit {x}"
                        );
                    }
                }
                Check::Sets => unreachable!(),
            }
        }
    }
}

#[test]
fn misuse_of_w_and_w_stride_is_refused() {
    scalar_tier();
    let l = layer();
    // W at stride DIM + 4, finite (only the stride is wrong).
    let st = DIM + 4;
    let mut wz = vec![0f32; ROWS * st];
    for r in 0..ROWS {
        wz[r * st..r * st + DIM].copy_from_slice(&l.w[r * DIM..(r + 1) * DIM]);
    }
    let refused = |what: &str, r: Result<Loaded, (lshk_status, String)>| -> String {
        match r {
            Ok(_) => panic!("{what}: loaded"),
            Err((s, m)) => {
                assert_eq!(s, LSHK_STATUS_INVALID_ARGUMENT, "{what}: {m}");
                m
            }
        }
    };
    // An IVF file built on a borrowed W needs it, at a stride >= dim.
    let m = refused("ivf_borrow without W", load("ivf_borrow.lshk", None, 0));
    assert!(m.contains("borrowed_w"), "{m}");
    refused(
        "ivf_borrow with stride 0",
        load("ivf_borrow.lshk", Some(&l.w), 0),
    );
    // An IVF file that holds its rows takes no W.
    refused("ivf_own with W", load("ivf_own.lshk", Some(&l.w), DIM));
    // Graph and forest files hold no W: it must be given.
    for f in ["graph_f32_bias.lshk", "graph_bf16.lshk", "forest.lshk"] {
        let m = refused(&format!("{f} without W"), load(f, None, 0));
        assert!(m.contains("borrowed_w"), "{f}: {m}");
    }
    // A bf16 graph rounded its bias: refused, with the remedy named.
    let m = refused(
        "graph_bf16_bias",
        load("graph_bf16_bias.lshk", Some(&l.w), DIM),
    );
    assert!(
        m.contains("Bf16") && m.contains("rounded") && m.contains("build the index again"),
        "graph_bf16_bias: {m}"
    );
    // An index file takes 0 or its recorded stride (DIM) and nothing else.
    refused(
        "index_simhash with w_stride DIM + 4",
        load("index_simhash.lshk", None, st),
    );
    assert!(load("index_simhash.lshk", None, DIM).is_ok());
    assert!(load("index_simhash.lshk", None, 0).is_ok());
    refused(
        "index_simhash_borrowed with w_stride DIM + 4",
        load("index_simhash_borrowed.lshk", Some(&wz), st),
    );
    // A file that stores W refuses a W; one that borrowed it needs it.
    refused(
        "index_simhash with W",
        load("index_simhash.lshk", Some(&l.w), 0),
    );
    refused(
        "index_simhash_borrowed without W",
        load("index_simhash_borrowed.lshk", None, 0),
    );
}
