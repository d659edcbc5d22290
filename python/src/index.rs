//! `lshk.Index`: the one retrieval object of lshk_index_* over the rows of
//! W, whatever its candidate source (LSH tables over SimHash or DWTA codes,
//! IVF lists, the FGD graph, the hashing forest): built with one call
//! (lshk_index_build), queried with one (lshk_index_query), the candidate
//! sets, calibration, rebuild, files and views of the C API.
//!
//! Each source reads its own build and query knobs; a knob of another
//! source given here is a ValueError (the C API would ignore it, which
//! hides a mistake).

use std::ffi::{c_char, c_void};
use std::ptr;

use lshk::ffi as c;
use lshk::ffi::dwta::lshk_dwta;
use lshk::ffi::index::{
    lshk_index, lshk_index_info, lshk_index_params, lshk_query_params, lshk_query_stats,
    LSHK_SOURCE_DWTA as DWTA, LSHK_SOURCE_FOREST as FOREST, LSHK_SOURCE_GRAPH as GRAPH,
    LSHK_SOURCE_IVF as IVF, LSHK_SOURCE_SIMHASH as SIMHASH,
};
use lshk::ffi::simhash::lshk_simhash;
use lshk::ffi::tables::lshk_tables;
use numpy::Element;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::arrays::{
    array_from, expect_len, len_of, lent_array, mat, need_cols, opt_vec1, out_array, out_ptr,
    ptr_or_null, try_vec, vec1, Dt, Mat, Nd,
};
use crate::enums::{
    enum_arg, name_of, CODES, GRAPH_STORAGES, SOURCES, STORAGES, TRANSFORMS, WALKS,
};
use crate::errors::{
    check, last_error_message, lshk_error, Addr, CResult, Failure, Handle, IntoPy,
};
use crate::files::{c_path, check_w_shape};
use crate::kernels::{Dwta, SimHash, Tables};
use crate::training;

// ---------------------------------------------------------------------------
// knobs and the sources they apply to

const LSH: &[u32] = &[SIMHASH, DWTA];

/// The sources a knob applies to, as the message names them.
fn sources_text(srcs: &[u32]) -> String {
    let names: Vec<_> = srcs
        .iter()
        .map(|&s| format!("'{}'", name_of(SOURCES, s)))
        .collect();
    names.join(" or ")
}

/// ValueError for the first knob given that `source` does not read.
/// `knobs`: (name, given, the sources that read it). An unknown source
/// value is left to lshk to refuse.
fn knobs_apply(source: u32, knobs: &[(&str, bool, &[u32])]) -> PyResult<()> {
    if !SOURCES.iter().any(|&(_, s)| s == source) {
        return Ok(());
    }
    for (name, given, srcs) in knobs {
        if *given && !srcs.contains(&source) {
            return Err(PyValueError::new_err(format!(
                "{name} applies to source={} only; this index's source is '{}'",
                sources_text(srcs),
                name_of(SOURCES, source)
            )));
        }
    }
    Ok(())
}

/// Code bits of the C default LSH source (SimHash, K = 12 bits per table).
const DEFAULT_CODE_BITS: u32 = 12;

/// The DWTA default of K (bins per table) for `bin_size` B: a DWTA code is
/// K * log2(B) bits, at most 32, so the C default K = 12 (SimHash's) fails
/// with every B but 2 and 4. K = 12 / log2(B) (at least 1) gives the same
/// 12-bit codes as SimHash's default: 4 bins for the default B = 8. A B that
/// is not a power of two in 2..=256 keeps `k` and lshk_index_build reports
/// the bin size.
fn dwta_default_bins(bin_size: u32, k: u32) -> u32 {
    if bin_size.is_power_of_two() && (2..=256).contains(&bin_size) {
        (DEFAULT_CODE_BITS / bin_size.trailing_zeros()).max(1)
    } else {
        k
    }
}

/// The query knobs of every source, as given (None = the C default).
#[derive(Default)]
struct QueryKnobs<'py> {
    min_count: Option<u32>,
    max_candidates: Option<u32>,
    probes: Option<u32>,
    bits_per_table: Option<u32>,
    nprobe: Option<u32>,
    rerank: Option<u32>,
    reach: Option<f32>,
    refine: Option<u32>,
    ef: Option<u32>,
    walk: Option<Bound<'py, PyAny>>,
    set_size: Option<u32>,
    confidence: Option<f32>,
}

impl QueryKnobs<'_> {
    /// lshk_query_params for an index of `source`: the defaults with the
    /// given knobs set, each checked to be one `source` reads.
    fn params(&self, source: u32) -> PyResult<lshk_query_params> {
        knobs_apply(
            source,
            &[
                ("min_count", self.min_count.is_some(), LSH),
                ("max_candidates", self.max_candidates.is_some(), LSH),
                ("probes", self.probes.is_some(), LSH),
                ("bits_per_table", self.bits_per_table.is_some(), LSH),
                ("nprobe", self.nprobe.is_some(), &[IVF]),
                ("reach", self.reach.is_some(), &[IVF]),
                ("refine", self.refine.is_some(), &[IVF]),
                ("rerank", self.rerank.is_some(), &[IVF, GRAPH]),
                ("ef", self.ef.is_some(), &[GRAPH]),
                ("walk", self.walk.is_some(), &[GRAPH]),
                ("set_size", self.set_size.is_some(), &[FOREST]),
                ("confidence", self.confidence.is_some(), &[FOREST]),
            ],
        )?;
        let mut p = c::index::lshk_query_params_default();
        macro_rules! set {
            ($($k:ident => $($f:ident).+),* $(,)?) => {
                $( if let Some(v) = self.$k { p.$($f).+ = v; } )*
            };
        }
        set!(
            min_count => lsh.min_count,
            max_candidates => lsh.max_candidates,
            probes => lsh.probes,
            bits_per_table => lsh.bits_per_table,
            nprobe => ivf.nprobe,
            reach => ivf.reach,
            refine => ivf.refine,
            ef => graph.ef,
            set_size => forest.set_size,
            confidence => forest.confidence,
        );
        if let Some(v) = self.rerank {
            if source == GRAPH {
                p.graph.rerank = v;
            } else {
                p.ivf.rerank = v;
            }
        }
        if let Some(w) = &self.walk {
            p.graph.walk = enum_arg(w, "walk", WALKS)?;
        }
        Ok(p)
    }
}

// ---------------------------------------------------------------------------
// progress callback

struct Progress {
    cb: Py<PyAny>,
    err: Option<PyErr>,
}

unsafe extern "C" fn progress_trampoline(user: *mut c_void, done: u64, total: u64) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `user` is the &mut Progress passed by Index.__new__, alive
        // for the whole build call, and used only on the building thread.
        let p = unsafe { &mut *(user as *mut Progress) };
        if p.err.is_some() {
            return;
        }
        Python::attach(|py| {
            if let Err(e) = p.cb.call1(py, (done, total)) {
                p.err = Some(e);
            }
        });
    }));
    let _ = r;
}

// ---------------------------------------------------------------------------
// Index

/// The retrieval index over the rows of W (C API lshk_index_*), of any
/// candidate source.
#[pyclass(module = "lshk")]
pub(crate) struct Index {
    h: Handle<lshk_index>,
    /// Columns of W (queries must have as many).
    dim: usize,
    /// LSHK_SOURCE_* (fixed for the index's life).
    source: u32,
    /// The caller's W of a BORROWED_F32 index (kept alive with the index).
    #[allow(dead_code)] // only held: keeps a borrowed W alive
    w_owner: Option<Py<PyAny>>,
}

impl Drop for Index {
    fn drop(&mut self) {
        if !self.h.0.is_null() {
            // SAFETY: a live handle owned by this object, freed once.
            unsafe { c::index::lshk_index_free(self.h.0) };
        }
    }
}

/// A W the index will use in place must be the caller's array itself: a
/// copy (another layout, a sequence) would be borrowed instead, and the
/// caller's later changes (e.g. before `rebuild`) would not be seen.
fn need_in_place(m: &Mat<'_>, obj: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    if m.arr.as_any().is(obj) {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "{name}: a borrowed W is used in place, but this one is not a float32 numpy array \
         whose rows are contiguous (it would have to be copied): pass such an array, or \
         storage='f32' for a copy held by the index"
    )))
}

impl Index {
    /// The index of a handle just built or loaded (its source and dim read
    /// back from lshk_index_describe).
    fn from_handle(
        py: Python<'_>,
        h: *mut lshk_index,
        w_owner: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let mut idx = Index {
            h: Handle(h),
            dim: 0,
            source: 0,
            w_owner,
        };
        let info = idx.info(py)?;
        idx.dim = info.dim;
        idx.source = info.source;
        Ok(idx)
    }

    fn info(&self, py: Python<'_>) -> PyResult<lshk_index_info> {
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut v: lshk_index_info = unsafe { std::mem::zeroed() };
        v.struct_size = std::mem::size_of::<lshk_index_info>() as u32;
        // SAFETY: live handle, writable output whose struct_size is set.
        check(unsafe { c::index::lshk_index_describe(self.h.0, &mut v) }).py_err(py)?;
        Ok(v)
    }

    /// A top-k call: `q` (1-D or 2-D, `dim` columns) parsed, (ids, scores)
    /// shaped like it ((k,) or (nq, k)), lshk_index_query run with the GIL
    /// released; then (ids, scores) or, with `stats`, (ids, scores, dict).
    fn topk<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        qp: &lshk_query_params,
        stats: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let q = mat(py, q, "q", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&q, "q", self.dim)?;
        let nq = q.rows;
        let shape: &[usize] = if q.one_d {
            &[k as usize]
        } else {
            &[nq, k as usize]
        };
        let ids = out_array::<u32>(py, shape)?;
        let scores = out_array::<f32>(py, shape)?;
        let mut st = lshk_query_stats {
            struct_size: std::mem::size_of::<lshk_query_stats>() as u32,
            ..Default::default()
        };
        let (h, qptr, qs, ip, sp) = (
            self.h.0 as usize,
            q.ptr,
            q.stride,
            out_ptr(&ids),
            out_ptr(&scores),
        );
        let (pp, stp) = (Addr::of(qp), stats.then(|| Addr::of_mut(&mut st)));
        py.detach(move || {
            // SAFETY: q holds nq rows at stride qs (checked by `mat`, held by
            // `q`); the outputs hold nq*k elements each; qp and st live on
            // this frame.
            check(unsafe {
                c::index::lshk_index_query(
                    h as *const lshk_index,
                    qptr as *const f32,
                    nq,
                    qs,
                    k,
                    pp.get(),
                    ip as *mut u32,
                    sp as *mut f32,
                    stp.map_or(ptr::null_mut(), |a| a.get_mut()),
                )
            })
        })
        .py_err(py)?;
        drop(q);
        if !stats {
            return PyTuple::new(py, [ids.into_any(), scores.into_any()]);
        }
        let d = PyDict::new(py);
        d.set_item("queries", st.queries)?;
        d.set_item("candidates_total", st.candidates_total)?;
        d.set_item("candidates_min", st.candidates_min)?;
        d.set_item("candidates_max", st.candidates_max)?;
        d.set_item("lists", st.lists)?;
        d.set_item("scanned", st.scanned)?;
        d.set_item("reranked", st.reranked)?;
        PyTuple::new(py, [ids.into_any(), scores.into_any(), d.into_any()])
    }
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (w, b=None, *, source=None, storage=None, transform=None, seed=None,
        build_threads=None, progress=None,
        bits_per_table=None, tables=None, sparsity=None, bin_size=None, range_bits=None,
        bucket_cap=None, planes=None, dwta_map=None,
        nlist=None, iters=None, train_rows=None, codes=None, pq_m=None, row_weights=None,
        m=None, ef_construction=None, graph_storage=None,
        trees=None, leaf_size=None, normalize_rows=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        w: &Bound<'py, PyAny>,
        b: Option<&Bound<'py, PyAny>>,
        source: Option<&Bound<'py, PyAny>>,
        storage: Option<&Bound<'py, PyAny>>,
        transform: Option<&Bound<'py, PyAny>>,
        seed: Option<u64>,
        build_threads: Option<u32>,
        progress: Option<Py<PyAny>>,
        bits_per_table: Option<u32>,
        tables: Option<u32>,
        sparsity: Option<u32>,
        bin_size: Option<u32>,
        range_bits: Option<u32>,
        bucket_cap: Option<u32>,
        planes: Option<&Bound<'py, PyAny>>,
        dwta_map: Option<&Bound<'py, PyAny>>,
        nlist: Option<u32>,
        iters: Option<u32>,
        train_rows: Option<u32>,
        codes: Option<&Bound<'py, PyAny>>,
        pq_m: Option<u32>,
        row_weights: Option<&Bound<'py, PyAny>>,
        m: Option<u32>,
        ef_construction: Option<u32>,
        graph_storage: Option<&Bound<'py, PyAny>>,
        trees: Option<u32>,
        leaf_size: Option<u32>,
        normalize_rows: Option<bool>,
    ) -> PyResult<Self> {
        let mut p: lshk_index_params = c::index::lshk_index_params_default();
        if let Some(s) = source {
            p.source = enum_arg(s, "source", SOURCES)?;
        }
        let given = |o: Option<&Bound<'py, PyAny>>| o.is_some_and(|v| !v.is_none());
        knobs_apply(
            p.source,
            &[
                ("bits_per_table", bits_per_table.is_some(), LSH),
                ("tables", tables.is_some(), LSH),
                ("sparsity", sparsity.is_some(), LSH),
                ("bin_size", bin_size.is_some(), LSH),
                ("range_bits", range_bits.is_some(), LSH),
                ("bucket_cap", bucket_cap.is_some(), LSH),
                ("planes", given(planes), LSH),
                ("dwta_map", given(dwta_map), LSH),
                ("nlist", nlist.is_some(), &[IVF]),
                ("iters", iters.is_some(), &[IVF]),
                ("train_rows", train_rows.is_some(), &[IVF]),
                ("codes", codes.is_some(), &[IVF]),
                ("pq_m", pq_m.is_some(), &[IVF]),
                ("row_weights", given(row_weights), &[IVF]),
                ("m", m.is_some(), &[GRAPH]),
                ("ef_construction", ef_construction.is_some(), &[GRAPH]),
                ("graph_storage", graph_storage.is_some(), &[GRAPH]),
                ("trees", trees.is_some(), &[FOREST]),
                ("leaf_size", leaf_size.is_some(), &[FOREST]),
                ("normalize_rows", normalize_rows.is_some(), &[FOREST]),
            ],
        )?;
        if let Some(s) = storage {
            p.storage = enum_arg(s, "storage", STORAGES)?;
        }
        if let Some(t) = transform {
            p.transform = enum_arg(t, "transform", TRANSFORMS)?;
        }
        if let Some(v) = build_threads {
            p.build_threads = v;
        }
        macro_rules! set {
            ($($k:ident => $($f:ident).+),* $(,)?) => {
                $( if let Some(v) = $k { p.$($f).+ = v; } )*
            };
        }
        set!(
            bits_per_table => lsh.bits_per_table,
            tables => lsh.tables,
            sparsity => lsh.sparsity,
            bin_size => lsh.bin_size,
            range_bits => lsh.range_bits,
            bucket_cap => lsh.bucket_cap,
            nlist => ivf.nlist,
            iters => ivf.iters,
            train_rows => ivf.train_rows,
            pq_m => ivf.pq_m,
            m => graph.m,
            ef_construction => graph.ef_construction,
            trees => forest.trees,
            leaf_size => forest.leaf_size,
        );
        if let Some(v) = normalize_rows {
            p.forest.normalize_rows = u32::from(v);
        }
        if let Some(v) = codes {
            p.ivf.codes = enum_arg(v, "codes", CODES)?;
        }
        if let Some(v) = graph_storage {
            p.graph.storage = enum_arg(v, "graph_storage", GRAPH_STORAGES)?;
        }
        if let Some(v) = seed {
            match p.source {
                IVF => p.ivf.seed = v,
                GRAPH => p.graph.seed = v,
                FOREST => p.forest.seed = v,
                _ => p.lsh.seed = v,
            }
        }
        if bits_per_table.is_none() && p.source == DWTA {
            p.lsh.bits_per_table = dwta_default_bins(p.lsh.bin_size, p.lsh.bits_per_table);
        }
        let borrowed = p.storage == c::index::LSHK_STORAGE_BORROWED_F32;
        let wm = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
        if borrowed {
            need_in_place(&wm, w, "w")?;
        }
        let bias = opt_vec1(py, b, "b", Dt::F32)?;
        if let Some(bv) = &bias {
            expect_len(bv, "b", wm.rows, "one per row of w")?;
        }
        let planes = match planes {
            Some(o) if !o.is_none() => Some(mat(py, o, "planes", Dt::F32, Nd::OneOrTwo, true)?),
            _ => None,
        };
        let dwta_map = match dwta_map {
            Some(o) if !o.is_none() => Some(mat(py, o, "dwta_map", Dt::U32, Nd::OneOrTwo, true)?),
            _ => None,
        };
        let row_weights = opt_vec1(py, row_weights, "row_weights", Dt::F32)?;
        if let Some(rw) = &row_weights {
            expect_len(rw, "row_weights", wm.rows, "one per row of w")?;
        }
        p.lsh.planes = ptr_or_null(&planes) as *const f32;
        p.lsh.planes_len = len_of(&planes);
        p.lsh.dwta_map = ptr_or_null(&dwta_map) as *const u32;
        p.lsh.dwta_map_len = len_of(&dwta_map);
        p.ivf.row_weights = ptr_or_null(&row_weights) as *const f32;
        p.ivf.n_weights = len_of(&row_weights);
        let mut prog = progress
            .filter(|cb| !cb.is_none(py))
            .map(|cb| Progress { cb, err: None });
        if let Some(pr) = prog.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user = (pr as *mut Progress).cast();
        }
        let (wp, bp, rows, dim, stride) = (wm.ptr, ptr_or_null(&bias), wm.rows, wm.cols, wm.stride);
        let pp = Addr::of(&p);
        let r = py.detach(move || -> CResult<usize> {
            let mut out: *mut lshk_index = ptr::null_mut();
            // SAFETY: w/bias/planes/map/weights point to live arrays of the
            // checked shapes (held by `wm`, `bias`, `planes`, `dwta_map`,
            // `row_weights` until after this call); `p` lives on this frame.
            check(unsafe {
                c::index::lshk_index_build(
                    wp as *const f32,
                    bp as *const f32,
                    rows,
                    dim,
                    stride,
                    pp.get(),
                    &mut out,
                )
            })?;
            Ok(out as usize)
        });
        let h = r.py_err(py)?;
        let w_owner = borrowed.then(|| wm.arr.clone().into_any().unbind());
        let idx = Index::from_handle(py, h as *mut lshk_index, w_owner)?;
        if let Some(Progress { err: Some(e), .. }) = prog {
            drop(idx);
            return Err(e);
        }
        drop((planes, dwta_map, row_weights));
        Ok(idx)
    }

    /// Loads an index file: one saved by `save` (lshk_index_save, C++
    /// lshk::Index::save), or a file of lshk 0.2's IVF, graph or forest.
    #[staticmethod]
    #[pyo3(signature = (path, w=None, w_stride=0))]
    fn load<'py>(
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        w: Option<&Bound<'py, PyAny>>,
        w_stride: usize,
    ) -> PyResult<Self> {
        let cpath = c_path(path)?;
        let wm = match w {
            Some(o) if !o.is_none() => {
                let m = mat(py, o, "w", Dt::F32, Nd::Two, false)?;
                need_in_place(&m, o, "w")?;
                Some(m)
            }
            _ => None,
        };
        // The stride told to the loader: for an lshk_index file 0 (the
        // recorded one, which W's was checked against), for a 0.2 file W's.
        let mut stride = w_stride;
        if let Some(m) = &wm {
            if w_stride != 0 && w_stride != m.stride && m.rows > 1 {
                return Err(PyValueError::new_err(format!(
                    "w_stride: is {w_stride} but w's row stride is {} (0 = w's own)",
                    m.stride
                )));
            }
            let shape = check_w_shape(py, m, "w", &cpath)?;
            stride = if shape.kind == lshk::format::KIND_INDEX {
                0
            } else {
                m.stride
            };
        }
        let wp = ptr_or_null(&wm);
        // The floats W's array holds from its first element: the library
        // checks the file's shape against it too.
        let wlen = wm
            .as_ref()
            .map_or(0, |m| m.rows.saturating_sub(1) * m.stride + m.cols);
        let pp = cpath.as_ptr() as usize;
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_index = ptr::null_mut();
                // SAFETY: a NUL-terminated path alive in `cpath`; the W (if
                // any) has the file's shape (check_w_shape), holds `wlen`
                // floats and is held by `wm`.
                check(unsafe {
                    if wp == 0 {
                        c::index::lshk_index_load(
                            pp as *const c_char,
                            ptr::null(),
                            stride,
                            &mut out,
                        )
                    } else {
                        c::index::lshk_index_load_borrowed(
                            pp as *const c_char,
                            wp as *const f32,
                            wlen,
                            stride,
                            &mut out,
                        )
                    }
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        let w_owner = wm.map(|m| m.arr.into_any().unbind());
        Index::from_handle(py, h as *mut lshk_index, w_owner)
    }

    /// Saves the index (the C API's file format, crash-safe rename).
    fn save(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let cpath = c_path(path)?;
        let (h, pp) = (self.h.0 as usize, cpath.as_ptr() as usize);
        py.detach(move || {
            // SAFETY: live handle; NUL-terminated path held by `cpath`.
            check(unsafe { c::index::lshk_index_save(h as *const lshk_index, pp as *const c_char) })
        })
        .py_err(py)
    }

    /// Top-k rows per query. See lshk/__init__.pyi.
    #[pyo3(signature = (q, k=10, *, stats=false, min_count=None, max_candidates=None,
        probes=None, bits_per_table=None, nprobe=None, rerank=None, reach=None, refine=None,
        ef=None, walk=None, set_size=None, confidence=None, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn query<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        stats: bool,
        min_count: Option<u32>,
        max_candidates: Option<u32>,
        probes: Option<u32>,
        bits_per_table: Option<u32>,
        nprobe: Option<u32>,
        rerank: Option<u32>,
        reach: Option<f32>,
        refine: Option<u32>,
        ef: Option<u32>,
        walk: Option<Bound<'py, PyAny>>,
        set_size: Option<u32>,
        confidence: Option<f32>,
        threads: u32,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut qp = QueryKnobs {
            min_count,
            max_candidates,
            probes,
            bits_per_table,
            nprobe,
            rerank,
            reach,
            refine,
            ef,
            walk,
            set_size,
            confidence,
        }
        .params(self.source)?;
        qp.threads = threads;
        self.topk(py, q, k, &qp, stats)
    }

    /// The candidate sets the source hands the scorer, as CSR
    /// (lshk_index_candidates). See lshk/__init__.pyi.
    #[pyo3(signature = (q, k=0, *, min_count=None, max_candidates=None, probes=None,
        bits_per_table=None, nprobe=None, rerank=None, reach=None, refine=None, ef=None,
        walk=None, set_size=None, confidence=None))]
    #[allow(clippy::too_many_arguments)]
    fn candidates<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        min_count: Option<u32>,
        max_candidates: Option<u32>,
        probes: Option<u32>,
        bits_per_table: Option<u32>,
        nprobe: Option<u32>,
        rerank: Option<u32>,
        reach: Option<f32>,
        refine: Option<u32>,
        ef: Option<u32>,
        walk: Option<Bound<'py, PyAny>>,
        set_size: Option<u32>,
        confidence: Option<f32>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let qp = QueryKnobs {
            min_count,
            max_candidates,
            probes,
            bits_per_table,
            nprobe,
            rerank,
            reach,
            refine,
            ef,
            walk,
            set_size,
            confidence,
        }
        .params(self.source)?;
        let qm = mat(py, q, "q", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&qm, "q", self.dim)?;
        let nq = qm.rows;
        let rows = self.info(py)?.rows;
        let offsets = out_array::<u64>(py, &[nq + 1])?;
        let (h, qptr, qs, op, pp) = (
            self.h.0 as usize,
            qm.ptr,
            qm.stride,
            out_ptr(&offsets),
            Addr::of(&qp),
        );
        // A first guess of the total (at most every row per query); a call
        // that needs more reports it with BUFFER_TOO_SMALL and is repeated.
        let per = (k as usize).max(qp.forest.set_size as usize).max(256);
        let mut cap = nq.saturating_mul(per.min(rows)).max(1);
        loop {
            let mut ids = try_vec::<u32>(cap, "candidate ids")?;
            let ip = ids.as_mut_ptr() as usize;
            let r = py.detach(move || -> (u32, usize, String) {
                let mut needed = 0usize;
                // SAFETY: q holds nq rows at stride qs (held by `qm`); ids
                // holds `cap` u32, offsets nq + 1; qp lives on this frame.
                let s = unsafe {
                    c::index::lshk_index_candidates(
                        h as *const lshk_index,
                        qptr as *const f32,
                        nq,
                        qs,
                        k,
                        pp.get(),
                        ip as *mut u32,
                        cap,
                        op as *mut usize,
                        &mut needed,
                    )
                };
                let msg = if s == c::LSHK_STATUS_OK {
                    String::new()
                } else {
                    last_error_message()
                };
                (s, needed, msg)
            });
            match r {
                (c::LSHK_STATUS_OK, needed, _) => {
                    // lshk reports success only with needed <= cap
                    let ids = array_from(py, &ids[..needed.min(cap)])?;
                    return PyTuple::new(py, [ids, offsets.into_any()]);
                }
                (c::LSHK_STATUS_BUFFER_TOO_SMALL, needed, _) if needed > cap => cap = needed,
                (status, _, message) => return Err(lshk_error(py, Failure { status, message })),
            }
        }
    }

    /// S(X), the union of class ids with their counts, capped by a
    /// weighted draw (lshk_index_union). See lshk/__init__.pyi.
    #[pyo3(signature = (ids, *, cap=0, seed=0, counts=false))]
    fn union<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        cap: usize,
        seed: u64,
        counts: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let im = vec1(py, ids, "ids", Dt::U32)?;
        let rows = self.info(py)?.rows;
        let (h, ip, n) = (self.h.0 as usize, im.ptr, im.len());
        let mut len = n.min(rows).max(1);
        loop {
            let mut out = try_vec::<u32>(len, "union ids")?;
            let mut cnt = try_vec::<u32>(if counts { len } else { 0 }, "union counts")?;
            let (op, cp) = (
                out.as_mut_ptr() as usize,
                if counts { cnt.as_mut_ptr() as usize } else { 0 },
            );
            let r = py.detach(move || -> (u32, usize, String) {
                let mut needed = 0usize;
                // SAFETY: ids holds n u32 (held by `im`); out and cnt (when
                // wanted) hold `len` u32.
                let s = unsafe {
                    c::index::lshk_index_union(
                        h as *const lshk_index,
                        ip as *const u32,
                        n,
                        cap,
                        seed,
                        op as *mut u32,
                        cp as *mut u32,
                        len,
                        &mut needed,
                    )
                };
                let msg = if s == c::LSHK_STATUS_OK {
                    String::new()
                } else {
                    last_error_message()
                };
                (s, needed, msg)
            });
            match r {
                (c::LSHK_STATUS_OK, needed, _) => {
                    let needed = needed.min(len);
                    let ids = array_from(py, &out[..needed])?;
                    return if counts {
                        let c = array_from(py, &cnt[..needed])?;
                        Ok(PyTuple::new(py, [ids, c])?.into_any())
                    } else {
                        Ok(ids)
                    };
                }
                (c::LSHK_STATUS_BUFFER_TOO_SMALL, needed, _) if needed > len => len = needed,
                (status, _, message) => return Err(lshk_error(py, Failure { status, message })),
            }
        }
    }

    /// IVF source: the query knobs that reach `target` recall@k on the
    /// sample queries (lshk_index_calibrate). See lshk/__init__.pyi.
    #[pyo3(signature = (q, k=10, target=0.99, *, rerank=32, threads=0))]
    fn calibrate<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: u32,
        target: f32,
        rerank: u32,
        threads: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let m = mat(py, q, "q", Dt::F32, Nd::Two, false)?;
        need_cols(&m, "q", self.dim)?;
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut cal: c::index::lshk_calibration = unsafe { std::mem::zeroed() };
        cal.struct_size = std::mem::size_of::<c::index::lshk_calibration>() as u32;
        let (h, qp, nq, qs) = (self.h.0 as usize, m.ptr, m.rows, m.stride);
        let cp = Addr::of_mut(&mut cal);
        py.detach(move || {
            // SAFETY: q holds nq rows at stride qs (mat, held by `m`); cal
            // lives on this frame and is written only by this call.
            check(unsafe {
                c::index::lshk_index_calibrate(
                    h as *const lshk_index,
                    qp as *const f32,
                    nq,
                    qs,
                    k,
                    target,
                    rerank,
                    threads,
                    cp.get_mut(),
                )
            })
        })
        .py_err(py)?;
        drop(m);
        let knobs = PyDict::new(py);
        knobs.set_item("nprobe", cal.query.ivf.nprobe)?;
        knobs.set_item("rerank", cal.query.ivf.rerank)?;
        knobs.set_item("reach", cal.query.ivf.reach)?;
        knobs.set_item("refine", cal.query.ivf.refine)?;
        let d = PyDict::new(py);
        d.set_item("query", knobs)?;
        d.set_item("recall", cal.recall)?;
        d.set_item("recall_lower", cal.recall_lower)?;
        d.set_item("scanned", cal.scanned)?;
        d.set_item("met", cal.met != 0)?;
        d.set_item(
            "fixed",
            (cal.fixed_nprobe, cal.fixed_recall, cal.fixed_scanned),
        )?;
        d.set_item(
            "adaptive",
            (
                cal.adaptive_reach,
                cal.adaptive_recall,
                cal.adaptive_scanned,
            ),
        )?;
        Ok(d)
    }

    /// Forest source: builds the trees again from the index's current W
    /// (lshk_index_rebuild), with a new seed when given.
    #[pyo3(signature = (seed=None))]
    fn rebuild(&mut self, py: Python<'_>, seed: Option<u64>) -> PyResult<()> {
        let h = self.h.0 as usize;
        py.detach(move || {
            // SAFETY: a live handle, held exclusively through &mut self;
            // the seed (if any) lives in this closure.
            check(unsafe {
                c::index::lshk_index_rebuild(
                    h as *mut lshk_index,
                    seed.as_ref().map_or(ptr::null(), |v| v as *const u64),
                )
            })
        })
        .py_err(py)
    }

    /// LSH, graph and forest sources: the scorer's row codes
    /// (lshk_index_set_codes). "i8" (the default) scores every candidate
    /// from int8 codes of the rows, then the best max(rerank, k) of each
    /// query exactly from W; "none" scores every candidate exactly.
    #[pyo3(signature = (codes=None, rerank=32))]
    fn set_codes(
        &mut self,
        py: Python<'_>,
        codes: Option<&Bound<'_, PyAny>>,
        rerank: u32,
    ) -> PyResult<()> {
        let codes = match codes {
            Some(v) => enum_arg(v, "codes", CODES)?,
            None => c::index::LSHK_IVF_CODES_I8,
        };
        let h = self.h.0 as usize;
        py.detach(move || {
            // SAFETY: a live handle, held exclusively through &mut self.
            check(unsafe { c::index::lshk_index_set_codes(h as *mut lshk_index, codes, rerank) })
        })
        .py_err(py)
    }

    /// Bytes held by the index (lshk_index_memory_bytes).
    fn memory_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        let mut n = 0usize;
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_memory_bytes(self.h.0, &mut n) }).py_err(py)?;
        Ok(n)
    }

    /// What the index is (lshk_index_describe), as a dict.
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let v = self.info(py)?;
        let d = PyDict::new(py);
        d.set_item("source", name_of(SOURCES, v.source))?;
        d.set_item("storage", name_of(STORAGES, v.storage))?;
        d.set_item("transform", name_of(TRANSFORMS, v.transform))?;
        d.set_item("rows", v.rows)?;
        d.set_item("dim", v.dim)?;
        d.set_item("bits_per_table", v.bits_per_table)?;
        d.set_item("tables", v.tables)?;
        d.set_item("nlist", v.nlist)?;
        // IVF: its lists' codes; other sources: their row codes, None
        // without (as before row codes existed).
        let coded = v.source == IVF || v.codes != c::index::LSHK_IVF_CODES_NONE;
        d.set_item("codes", coded.then(|| name_of(CODES, v.codes)))?;
        d.set_item("labelled", v.labelled != 0)?;
        Ok(d)
    }

    /// "simhash", "dwta", "graph", "ivf" or "forest".
    #[getter]
    fn source(&self) -> String {
        name_of(SOURCES, self.source)
    }

    /// "borrowed", "f32", "bf16", "f16" or "i8".
    #[getter]
    fn storage(&self, py: Python<'_>) -> PyResult<String> {
        Ok(name_of(STORAGES, self.info(py)?.storage))
    }

    #[getter]
    fn rows(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.info(py)?.rows)
    }

    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// The weights the index scores with, as read-only numpy views.
    fn weights<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let me = slf.borrow();
        // SAFETY: all-zero is a valid bit pattern of this POD struct.
        let mut v: c::index::lshk_weights_view = unsafe { std::mem::zeroed() };
        v.struct_size = std::mem::size_of::<c::index::lshk_weights_view>() as u32;
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_weights(me.h.0, &mut v) }).py_err(py)?;
        let d = PyDict::new(py);
        let owner = slf.clone().into_any();
        let (rows, dim, stride) = (v.rows, v.dim, v.w_stride);
        fn view2<'py, T: Element>(
            p: *const c_void,
            rows: usize,
            dim: usize,
            stride: usize,
            owner: &Bound<'py, PyAny>,
        ) -> PyResult<Bound<'py, PyAny>> {
            let item = std::mem::size_of::<T>();
            let row_bytes = stride
                .checked_mul(item)
                .ok_or_else(|| PyValueError::new_err("the weights' row stride overflows"))?;
            // SAFETY: the index lends `rows` rows of `dim` elements at
            // `stride`, valid until lshk_index_free; the view's base is the
            // Index object, which keeps the handle alive.
            unsafe { lent_array::<T>(owner.py(), p, &[rows, dim], &[row_bytes, item], owner) }
        }
        let w = match v.storage {
            c::index::LSHK_STORAGE_BF16 => view2::<u16>(v.w, rows, dim, stride, &owner)?,
            c::index::LSHK_STORAGE_F16 => {
                view2::<u16>(v.w, rows, dim, stride, &owner)?.call_method1("view", ("float16",))?
            }
            c::index::LSHK_STORAGE_I8 => view2::<i8>(v.w, rows, dim, stride, &owner)?,
            _ => view2::<f32>(v.w, rows, dim, stride, &owner)?,
        };
        let vec = |p: *const f32| -> PyResult<Option<Bound<'py, PyAny>>> {
            if p.is_null() {
                return Ok(None);
            }
            // SAFETY: `rows` floats lent by the index (see view2).
            let a = unsafe { lent_array::<f32>(py, p.cast(), &[rows], &[4], &owner)? };
            Ok(Some(a))
        };
        d.set_item("storage", name_of(STORAGES, v.storage))?;
        d.set_item("w", w)?;
        d.set_item("scales", vec(v.scales)?)?;
        d.set_item("bias", vec(v.bias)?)?;
        d.set_item("rows", rows)?;
        d.set_item("dim", dim)?;
        d.set_item("w_stride", stride)?;
        Ok(d)
    }

    /// Label-aware buckets (LSH) or lists (IVF) from labelled queries
    /// (lshk_index_train_labels).
    #[pyo3(signature = (queries, label_offsets, labels, *, label_cap=None, policy=None))]
    fn train_labels<'py>(
        &mut self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        label_cap: Option<u32>,
        policy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        training::train_labels(
            py,
            &self.h,
            self.dim,
            queries,
            label_offsets,
            labels,
            label_cap,
            policy,
        )
    }

    /// None when the index was not trained with labels, else
    /// {"label_cap": int, "policy": str}.
    fn label_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        training::label_info(py, &self.h)
    }

    /// IUL plane learning (lshk_index_train_iul); returns one dict per round.
    #[pyo3(signature = (queries, label_offsets, labels, *, rounds=None, epochs=None, batch=None,
        t1=None, t2=None, learning_rate=None, validation_fraction=None, max_pairs=None,
        rank_thresholds=false, keep_best=false, to_convergence=false, collision_loss=false,
        seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn train_iul<'py>(
        &mut self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        label_offsets: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
        rounds: Option<u32>,
        epochs: Option<u32>,
        batch: Option<u32>,
        t1: Option<f32>,
        t2: Option<f32>,
        learning_rate: Option<f32>,
        validation_fraction: Option<f32>,
        max_pairs: Option<u32>,
        rank_thresholds: bool,
        keep_best: bool,
        to_convergence: bool,
        collision_loss: bool,
        seed: Option<u64>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut p = c::iul::lshk_iul_params_default();
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = $f { p.$f = v; } )* };
        }
        set!(
            rounds,
            epochs,
            batch,
            t1,
            t2,
            learning_rate,
            validation_fraction,
            max_pairs,
            seed
        );
        if rank_thresholds {
            p.flags |= c::iul::LSHK_IUL_RANK_THRESHOLDS;
        }
        if keep_best {
            p.flags |= c::iul::LSHK_IUL_KEEP_BEST;
        }
        if to_convergence {
            p.flags |= c::iul::LSHK_IUL_TO_CONVERGENCE;
        }
        if collision_loss {
            p.flags |= c::iul::LSHK_IUL_COLLISION_LOSS;
        }
        training::train_iul(py, &self.h, self.dim, queries, label_offsets, labels, &p)
    }

    /// The index's SimHash family (a borrowed view; None for another
    /// source).
    fn simhash(slf: &Bound<'_, Self>) -> PyResult<Option<SimHash>> {
        let me = slf.borrow();
        if me.source != SIMHASH {
            return Ok(None);
        }
        let mut out: *const lshk_simhash = ptr::null();
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_simhash(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Some(SimHash {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        }))
    }

    /// The index's DWTA family (a borrowed view; None for another source).
    fn dwta(slf: &Bound<'_, Self>) -> PyResult<Option<Dwta>> {
        let me = slf.borrow();
        if me.source != DWTA {
            return Ok(None);
        }
        let mut out: *const lshk_dwta = ptr::null();
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_dwta(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Some(Dwta {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        }))
    }

    /// The index's LSH tables (a borrowed view; UnsupportedError for a
    /// source without tables).
    fn tables(slf: &Bound<'_, Self>) -> PyResult<Tables> {
        let me = slf.borrow();
        let mut out: *const lshk_tables = ptr::null();
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_tables(me.h.0, &mut out) }).py_err(slf.py())?;
        Ok(Tables {
            h: Handle(out as *mut _),
            owner: Some(slf.clone().into_any().unbind()),
        })
    }

    /// LSH sources: new values of rows `ids` of W (and of their bias),
    /// marked dirty for `rehash_dirty` (lshk_index_update_rows). `rows`
    /// None only marks the ids (a borrowed W the caller changed in place).
    #[pyo3(signature = (ids, rows=None, bias=None))]
    fn update_rows<'py>(
        &mut self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        rows: Option<&Bound<'py, PyAny>>,
        bias: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let im = vec1(py, ids, "ids", Dt::U32)?;
        let n = im.len();
        let rm = match rows {
            Some(o) if !o.is_none() => {
                let m = mat(py, o, "rows", Dt::F32, Nd::OneOrTwo, false)?;
                need_cols(&m, "rows", self.dim)?;
                if m.rows != n {
                    return Err(PyValueError::new_err(format!(
                        "rows: must have one row per id ({n}), got {}",
                        m.rows
                    )));
                }
                Some(m)
            }
            _ => None,
        };
        let bm = opt_vec1(py, bias, "bias", Dt::F32)?;
        if let Some(b) = &bm {
            expect_len(b, "bias", n, "one per id")?;
        }
        let (h, ip, rp, rs, bp) = (
            self.h.0 as usize,
            im.ptr,
            ptr_or_null(&rm),
            rm.as_ref().map_or(self.dim, |m| m.stride),
            ptr_or_null(&bm),
        );
        py.detach(move || {
            // SAFETY: ids holds n u32, rows (when given) n rows of dim
            // floats at stride rs, bias (when given) n floats, all checked
            // above and held by im, rm, bm; the index is borrowed
            // exclusively through &mut self.
            check(unsafe {
                c::index::lshk_index_update_rows(
                    h as *mut lshk_index,
                    ip as *const u32,
                    n,
                    rp as *const f32,
                    rs,
                    bp as *const f32,
                )
            })
        })
        .py_err(py)?;
        drop((im, rm, bm));
        Ok(())
    }

    /// LSH sources: rehashes rows `ids` from the current W into every
    /// table (lshk_index_rehash_rows); returns the number rehashed.
    fn rehash_rows<'py>(&mut self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<usize> {
        let im = vec1(py, ids, "ids", Dt::U32)?;
        let (h, ip, n) = (self.h.0 as usize, im.ptr, im.len());
        let done = py
            .detach(move || -> CResult<usize> {
                let mut out = 0usize;
                // SAFETY: ids holds n u32 (held by im); the index is
                // borrowed exclusively through &mut self.
                check(unsafe {
                    c::index::lshk_index_rehash_rows(
                        h as *mut lshk_index,
                        ip as *const u32,
                        n,
                        &mut out,
                    )
                })?;
                Ok(out)
            })
            .py_err(py)?;
        drop(im);
        Ok(done)
    }

    /// LSH sources: rehashes every row marked by `update_rows` since its
    /// last rehash (lshk_index_rehash_dirty); returns the number rehashed.
    fn rehash_dirty(&mut self, py: Python<'_>) -> PyResult<usize> {
        let h = self.h.0 as usize;
        py.detach(move || -> CResult<usize> {
            let mut out = 0usize;
            // SAFETY: a live handle borrowed exclusively through &mut self;
            // `out` lives in this closure.
            check(unsafe { c::index::lshk_index_rehash_dirty(h as *mut lshk_index, &mut out) })?;
            Ok(out)
        })
        .py_err(py)
    }

    /// The number of rows updated since their last rehash
    /// (lshk_index_dirty_rows).
    fn dirty_rows(&self, py: Python<'_>) -> PyResult<usize> {
        let mut n = 0usize;
        // SAFETY: live handle, writable output.
        check(unsafe { c::index::lshk_index_dirty_rows(self.h.0, &mut n) }).py_err(py)?;
        Ok(n)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let v = self.info(py)?;
        let what = match v.source {
            SIMHASH | DWTA => format!(", K={}, L={}", v.bits_per_table, v.tables),
            IVF => format!(", nlist={}, codes='{}'", v.nlist, name_of(CODES, v.codes)),
            FOREST => format!(", trees={}", v.tables),
            _ => String::new(),
        };
        Ok(format!(
            "lshk.Index(source='{}', rows={}, dim={}, storage='{}'{what})",
            name_of(SOURCES, v.source),
            v.rows,
            v.dim,
            name_of(STORAGES, v.storage)
        ))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Index>()
}
