//! Inputs that must get a clear status, never a panic, a silent partial
//! answer or a hang: finite values whose arithmetic overflows f32, files
//! whose float sections hold NaN or values no build produces (with valid
//! CRCs), FIFOs given to a loader, and device nodes, FIFOs and directories
//! given to a save (src/error.rs "Value ranges", src/format.rs).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::container::{sections, with_f32};
use lshk::error::{row_value_limit, score_limit, Status};
use lshk::ffi::index::{
    lshk_index, lshk_index_build, lshk_index_free, lshk_index_params_default, LSHK_SOURCE_IVF,
    LSHK_STORAGE_BORROWED_F32,
};
use lshk::ffi::LSHK_STATUS_NON_FINITE;
use lshk::forest::{Forest, ForestParams};
use lshk::graph::{Graph, GraphParams};
use lshk::index::{Family, Index, IndexParams};
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};
use lshk::matmul::TOPK_PAD_ID;

const ROWS: usize = 600;
const DIM: usize = 24;
const CODES: [Codes; 4] = [Codes::None, Codes::I8, Codes::Pq4, Codes::Pq4I8];

fn layer() -> lshk::data::Layer {
    lshk::data::structured_layer(ROWS, DIM, 9, 5)
}

fn scaled(v: &[f32], f: f32) -> Vec<f32> {
    v.iter().map(|x| x * f).collect()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-ranges-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ivf_params(codes: Codes) -> IvfParams {
    IvfParams {
        codes,
        nlist: 20,
        threads: 1,
        ..Default::default()
    }
}

fn index_params(family: Family) -> IndexParams {
    IndexParams {
        family,
        bits: if family == Family::SimHash { 6 } else { 2 },
        tables: 5,
        threads: 1,
        ..Default::default()
    }
}

fn graph_params() -> GraphParams {
    GraphParams {
        m: 6,
        ef_construction: 20,
        threads: 1,
        ..Default::default()
    }
}

fn status<T>(r: lshk::Result<T>) -> Status {
    match r {
        Ok(_) => Status::Ok,
        Err(e) => e.status,
    }
}

/// Every answer complete: no padding id, every score finite.
fn complete(ids: &[u32], sc: &[f32], what: &str) {
    assert!(
        ids.iter().all(|&i| i != TOPK_PAD_ID && (i as usize) < ROWS),
        "{what}: padding or bad ids {ids:?}"
    );
    assert!(
        sc.iter().all(|s| s.is_finite()),
        "{what}: non-finite scores {sc:?}"
    );
}

#[test]
fn ivf_build_refuses_rows_whose_squared_distances_overflow() {
    let l = layer();
    let lim = row_value_limit(DIM);
    for codes in CODES {
        for f in [1e18f32, 3e37] {
            let (w, b) = (scaled(&l.w, f), scaled(&l.bias, f));
            assert_eq!(
                status(Ivf::build(&w, Some(&b), ROWS, DIM, DIM, &ivf_params(codes))),
                Status::NonFinite,
                "{codes:?} W x {f:e}"
            );
        }
        // A bias alone beyond the limit, and rows just inside it.
        let mut b = l.bias.clone();
        b[3] = (2.0 * lim) as f32;
        assert_eq!(
            status(Ivf::build(
                &l.w,
                Some(&b),
                ROWS,
                DIM,
                DIM,
                &ivf_params(codes)
            )),
            Status::NonFinite
        );
        let m = l.w.iter().fold(0f32, |m, x| m.max(x.abs()));
        let f = (0.5 * lim) as f32 / m;
        let w = scaled(&l.w, f);
        Ivf::build(&w, None, ROWS, DIM, DIM, &ivf_params(codes)).unwrap();
    }
    // Through the C ABI: a status, not LSHK_STATUS_PANIC.
    let w = scaled(&l.w, 3e37);
    let mut p = lshk_index_params_default();
    p.source = LSHK_SOURCE_IVF;
    p.storage = LSHK_STORAGE_BORROWED_F32;
    p.ivf.codes = Codes::Pq4I8 as u32;
    let mut out: *mut lshk_index = std::ptr::null_mut();
    // SAFETY: W holds ROWS rows of DIM floats; out is writable.
    let st =
        unsafe { lshk_index_build(w.as_ptr(), std::ptr::null(), ROWS, DIM, DIM, &p, &mut out) };
    assert_eq!(st, LSHK_STATUS_NON_FINITE);
    assert!(out.is_null());
    // SAFETY: NULL is a no-op.
    unsafe { lshk_index_free(out) };
}

#[test]
fn index_and_graph_refuse_rows_no_query_could_be_scored_against() {
    let l = layer();
    let (w, b) = (scaled(&l.w, 3e37), scaled(&l.bias, 3e37));
    for family in [Family::SimHash, Family::Dwta, Family::Graph] {
        assert_eq!(
            status(Index::build(
                &w,
                Some(&b),
                ROWS,
                DIM,
                DIM,
                &index_params(family),
                None
            )),
            Status::NonFinite,
            "{family:?}"
        );
    }
    assert_eq!(
        status(Graph::build(&w, Some(&b), ROWS, DIM, DIM, &graph_params())),
        Status::NonFinite
    );
    // Updates follow the build's rule.
    let mut idx = Index::build(
        &l.w,
        Some(&l.bias),
        ROWS,
        DIM,
        DIM,
        &index_params(Family::SimHash),
        None,
    )
    .unwrap();
    let huge = scaled(&l.w[..DIM], 3e37);
    assert_eq!(
        status(idx.update_rows(&[5], Some((&huge, DIM)), None)),
        Status::NonFinite
    );
    assert_eq!(idx.dirty_rows(), 0);
}

/// Queries whose scores could overflow f32 get NON_FINITE from every
/// index; queries just inside the bound get complete, finite answers.
#[test]
fn queries_are_refused_exactly_when_their_scores_could_overflow() {
    let l = layer();
    // Rows at 1e15: within every build limit at DIM.
    let (w, b) = (scaled(&l.w, 1e15), scaled(&l.bias, 1e15));
    let a = w.iter().chain(&b).fold(0f32, |m, x| m.max(x.abs()));
    let q0 = &l.w[..DIM];
    let qmax = q0.iter().fold(0f32, |m, x| m.max(x.abs()));
    // max|q_j| * A at half the bound, and beyond it.
    let inside = scaled(
        q0,
        (0.5 * score_limit(DIM) / f64::from(a) / f64::from(qmax)) as f32,
    );
    let outside = scaled(q0, 1e22);
    let k = 10;
    let (mut ids, mut sc) = (vec![0u32; k], vec![0f32; k]);
    for codes in CODES {
        let ix = Ivf::build(&w, Some(&b), ROWS, DIM, DIM, &ivf_params(codes)).unwrap();
        let all = SearchParams::fixed(ix.nlist() as u32, ROWS as u32);
        for sp in [SearchParams::default(), all] {
            assert_eq!(
                status(ix.search(&outside, 1, DIM, k, &sp, &mut ids, &mut sc)),
                Status::NonFinite,
                "ivf {codes:?}"
            );
            ix.search(&inside, 1, DIM, k, &sp, &mut ids, &mut sc)
                .unwrap();
            assert!(sc.iter().all(|s| s.is_finite()), "ivf {codes:?}: {sc:?}");
        }
        ix.search(&inside, 1, DIM, k, &all, &mut ids, &mut sc)
            .unwrap();
        complete(&ids, &sc, &format!("ivf {codes:?}, every list"));
    }
    for family in [Family::SimHash, Family::Dwta, Family::Graph] {
        let idx = Index::build(&w, Some(&b), ROWS, DIM, DIM, &index_params(family), None).unwrap();
        let g = Default::default();
        assert_eq!(
            status(idx.query(&outside, 1, DIM, k as u32, &g, &mut ids, &mut sc, None)),
            Status::NonFinite,
            "index {family:?}"
        );
        idx.query(&inside, 1, DIM, k as u32, &g, &mut ids, &mut sc, None)
            .unwrap();
        assert!(
            sc.iter()
                .zip(&ids)
                .all(|(s, &i)| s.is_finite() || i == TOPK_PAD_ID),
            "index {family:?}: {sc:?}"
        );
    }
    let gr = Graph::build(&w, Some(&b), ROWS, DIM, DIM, &graph_params()).unwrap();
    assert_eq!(
        status(gr.search(&outside, 1, DIM, k, ROWS, &mut ids, &mut sc)),
        Status::NonFinite
    );
    // The graph's bound is on U, its rows' largest norm, so a query at the
    // rows' own scale is well inside it.
    let q = scaled(q0, 1e10);
    gr.search(&q, 1, DIM, k, ROWS, &mut ids, &mut sc).unwrap();
    complete(&ids, &sc, "graph, ef = rows");
}

/// Saves `save` into a fresh file and returns its bytes.
fn saved(d: &Path, name: &str, save: impl FnOnce(&Path) -> lshk::Result<()>) -> Vec<u8> {
    let p = d.join(name);
    save(&p).unwrap();
    std::fs::read(p).unwrap()
}

/// `file` with every 4-byte value of section `tag` set to `v` (CRCs
/// recomputed).
fn all_set(file: &[u8], tag: &str, v: f32) -> Vec<u8> {
    let s = sections(file)
        .into_iter()
        .find(|s| s.tag == tag)
        .unwrap_or_else(|| panic!("no section {tag}"));
    let mut b = file.to_vec();
    for i in 0..s.len / 4 {
        b = with_f32(&b, tag, i, v).unwrap();
    }
    b
}

#[test]
fn ivf_load_refuses_non_finite_and_impossible_float_sections() {
    let d = dir("ivf-load");
    let l = layer();
    let p = d.join("m.ivf");
    for codes in [Codes::I8, Codes::Pq4] {
        let ix = Ivf::build(&l.w, Some(&l.bias), ROWS, DIM, DIM, &ivf_params(codes)).unwrap();
        let good = saved(&d, "good.ivf", |p| ix.save(p));
        let mut tags = vec!["CBIAS", "PBIAS", "LSPREAD", "PROWS"];
        if codes == Codes::Pq4 {
            tags.push("PQCENT");
        }
        for tag in tags {
            for v in [f32::NAN, f32::INFINITY, 3e38] {
                std::fs::write(&p, all_set(&good, tag, v)).unwrap();
                let e = Ivf::load(&p)
                    .err()
                    .unwrap_or_else(|| panic!("{codes:?}: {tag} = {v:e} loaded"));
                assert_eq!(e.status, Status::BadFileFormat, "{codes:?} {tag}: {e}");
                assert!(e.message.contains(tag), "{tag}: {}", e.message);
            }
        }
        // The unmutated file still loads.
        std::fs::write(&p, &good).unwrap();
        Ivf::load(&p).unwrap();
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn graph_load_refuses_non_finite_and_out_of_range_rows() {
    let d = dir("graph-load");
    let l = layer();
    let p = d.join("m.graph");
    for (storage, tag) in [
        (lshk::graph::Storage::F32, "GROWS"),
        (lshk::graph::Storage::I8, "GSCALES"),
    ] {
        let gp = GraphParams {
            storage,
            ..graph_params()
        };
        let g = Graph::build(&l.w, Some(&l.bias), ROWS, DIM, DIM, &gp).unwrap();
        let good = saved(&d, "good.graph", |p| g.save(p));
        for v in [f32::NAN, f32::INFINITY, 3e38] {
            std::fs::write(&p, with_f32(&good, tag, 5, v).unwrap()).unwrap();
            let e = Graph::load(&p).err().expect("must be refused");
            assert_eq!(e.status, Status::BadFileFormat, "{tag} = {v:e}: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `f` on another thread: its status, or a failure after 10 s (a load
/// that opens a FIFO for reading blocks until a writer comes).
fn within_10s(what: &str, f: impl FnOnce() -> Status + Send + 'static) -> Status {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what}: no answer in 10 s (blocked)"))
}

#[test]
fn loading_a_fifo_is_refused_without_blocking() {
    let d = dir("fifo-load");
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    type Load = fn(&Path) -> Status;
    let loads: [(&str, Load); 4] = [
        ("Ivf::load", |p| status(Ivf::load(p))),
        ("Index::load", |p| status(Index::load(p))),
        ("Graph::load", |p| status(Graph::load(p))),
        ("Forest::load", |p| status(Forest::load(p))),
    ];
    for (what, load) in loads {
        let p = fifo.clone();
        assert_eq!(
            within_10s(what, move || load(&p)),
            Status::IoError,
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn save_replaces_only_regular_files() {
    use std::os::unix::fs::{symlink, FileTypeExt};
    let d = dir("save");
    let l = layer();
    let ix = Ivf::build(&l.w, None, ROWS, DIM, DIM, &ivf_params(Codes::I8)).unwrap();
    let g = Graph::build(&l.w, None, ROWS, DIM, DIM, &graph_params()).unwrap();
    let idx = Index::build(
        &l.w,
        None,
        ROWS,
        DIM,
        DIM,
        &index_params(Family::SimHash),
        None,
    )
    .unwrap();
    let fp = ForestParams {
        trees: 2,
        leaf_size: 32,
        threads: 1,
        ..Default::default()
    };
    let f = Forest::build(&l.w, ROWS, DIM, DIM, &fp).unwrap();
    type Save<'a> = &'a dyn Fn(&Path) -> lshk::Result<()>;
    let saves: [(&str, Save); 4] = [
        ("ivf", &|p| ix.save(p)),
        ("graph", &|p| g.save(p)),
        ("index", &|p| idx.save(p)),
        ("forest", &|p| f.save(p)),
    ];

    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let sub = d.join("dir");
    std::fs::create_dir(&sub).unwrap();
    let dangling = d.join("dangling");
    symlink(d.join("nowhere"), &dangling).unwrap();
    let to_fifo = d.join("to-fifo");
    symlink(&fifo, &to_fifo).unwrap();
    // A character device node (the null device's numbers) in our own
    // directory; root only, and never the system's /dev.
    let dev = d.join("null-dev");
    let cdev = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path in a directory this test owns.
    let have_dev =
        unsafe { libc::mknod(cdev.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } == 0;
    let mut refused: Vec<&Path> = vec![&fifo, &sub, &dangling, &to_fifo];
    if have_dev {
        refused.push(&dev);
    } else {
        println!("skipped: the device-node case (mknod needs root)");
    }
    for (what, save) in saves {
        for &p in &refused {
            let before = std::fs::symlink_metadata(p).ok().map(|m| m.file_type());
            let e = save(p)
                .err()
                .unwrap_or_else(|| panic!("{what}: saved over {p:?}"));
            assert_eq!(e.status, Status::IoError, "{what} over {p:?}: {e}");
            let after = std::fs::symlink_metadata(p).ok().map(|m| m.file_type());
            assert_eq!(before, after, "{what}: {p:?} changed");
        }
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        if have_dev {
            assert!(std::fs::metadata(&dev)
                .unwrap()
                .file_type()
                .is_char_device());
        }
        // Through a link to a regular file: the target is replaced, the
        // link stays a link.
        let target = d.join(format!("{what}.target"));
        std::fs::write(&target, b"old").unwrap();
        let link = d.join(format!("{what}.link"));
        symlink(&target, &link).unwrap();
        save(&link).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_ne!(std::fs::read(&target).unwrap(), b"old");
    }
    Ivf::load(&d.join("ivf.target")).unwrap();
    Graph::load(&d.join("graph.target")).unwrap();
    Index::load(&d.join("index.target")).unwrap();
    Forest::load(&d.join("forest.target")).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
