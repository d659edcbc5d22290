//! The kernels as Python objects and functions: the hash families
//! (`SimHash`, `Dwta`), LSH tables (`Tables`), and the stateless kernels
//! (`gathered_matmul`, `topk`, `softmax`, `quantize_rows_i8`, `to_bf16`,
//! `isa_active`).

use std::ffi::{c_void, CStr};
use std::ptr;

use lshk::ffi as c;
use lshk::ffi::dwta::lshk_dwta;
use lshk::ffi::simhash::lshk_simhash;
use lshk::ffi::tables::lshk_tables;
use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays::{
    array_from, check_csr_end, expect_len, last_offset, len_of, mat, need_cols, numpy_mod,
    offsets_or_one, opt_vec1, out_array, out_ptr, out_shape, ptr_or_null, try_vec, vec1, Dt, Mat,
    Nd,
};
use crate::enums::{enum_arg, BUDGET_RULES};
use crate::errors::{check, last_error_message, lshk_error, CResult, Failure, Handle, IntoPy};

/// lshk_gather_params with the given fields changed from the defaults.
fn gather_params(
    min_count: Option<u32>,
    max_candidates: Option<u32>,
    probes: Option<u32>,
    bits_per_table: Option<u32>,
) -> c::tables::lshk_gather_params {
    let mut g = c::tables::lshk_gather_params_default();
    if let Some(v) = min_count {
        g.min_count = v;
    }
    if let Some(v) = max_candidates {
        g.max_candidates = v;
    }
    if let Some(v) = probes {
        g.probes = v;
    }
    if let Some(v) = bits_per_table {
        g.bits_per_table = v;
    }
    g
}

/// Runs a row-wise hash call `f(x, n, x_stride, out, out_len)` over the
/// rows of `x` with the GIL released.
fn hash_into<'py>(
    py: Python<'py>,
    x: &Mat<'py>,
    f: impl FnOnce(usize, usize, usize, usize, usize) -> u32 + Send,
    out: usize,
    out_len: usize,
) -> PyResult<()> {
    let (xp, n, xs) = (x.ptr, x.rows, x.stride);
    py.detach(move || check(f(xp, n, xs, out, out_len)))
        .py_err(py)
}

/// A SimHash family (lshk_simhash_*). From `SimHash(...)`,
/// `SimHash.from_planes(...)` or `Index.simhash()` (a borrowed view).
#[pyclass(module = "lshk")]
pub(crate) struct SimHash {
    pub(crate) h: Handle<lshk_simhash>,
    /// The owning Index of a borrowed handle (never freed here).
    pub(crate) owner: Option<Py<PyAny>>,
}

impl Drop for SimHash {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::simhash::lshk_simhash_free(self.h.0) };
        }
    }
}
#[pymethods]
impl SimHash {
    #[new]
    #[pyo3(signature = (dim, bits_per_table, tables, *, sparsity=0, seed=1))]
    fn new(
        py: Python<'_>,
        dim: u32,
        bits_per_table: u32,
        tables: u32,
        sparsity: u32,
        seed: u64,
    ) -> PyResult<Self> {
        let mut out: *mut lshk_simhash = ptr::null_mut();
        check(c::simhash::lshk_simhash_new(
            dim,
            bits_per_table,
            tables,
            sparsity,
            seed,
            &mut out,
        ))
        .py_err(py)?;
        Ok(SimHash {
            h: Handle(out),
            owner: None,
        })
    }

    /// From K*L planes of `dim` floats (shape (K*L, dim) or flat), copied.
    #[staticmethod]
    fn from_planes<'py>(
        py: Python<'py>,
        planes: &Bound<'py, PyAny>,
        bits_per_table: u32,
        tables: u32,
    ) -> PyResult<Self> {
        let m = mat(py, planes, "planes", Dt::F32, Nd::Two, true)?;
        let mut out: *mut lshk_simhash = ptr::null_mut();
        let expect = bits_per_table as usize * tables as usize;
        if m.rows != expect {
            return Err(PyValueError::new_err(format!(
                "planes: must have K*L = {expect} rows, got {}",
                m.rows
            )));
        }
        let dim =
            u32::try_from(m.cols).map_err(|_| PyValueError::new_err("planes: dim too large"))?;
        // SAFETY: m holds K*L*dim contiguous floats.
        check(unsafe {
            c::simhash::lshk_simhash_from_planes(
                m.ptr as *const f32,
                dim,
                bits_per_table,
                tables,
                &mut out,
            )
        })
        .py_err(py)?;
        Ok(SimHash {
            h: Handle(out),
            owner: None,
        })
    }

    /// (dim, K, L).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(u32, u32, u32)> {
        let (mut d, mut k, mut l) = (0u32, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::simhash::lshk_simhash_shape(self.h.0, &mut d, &mut k, &mut l) })
            .py_err(py)?;
        Ok((d, k, l))
    }

    /// A copy of the planes, shape (K*L, dim).
    fn planes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (d, k, l) = self.shape(py)?;
        let shape = [k as usize * l as usize, d as usize];
        let out = out_array::<f32>(py, &shape)?;
        // SAFETY: out holds K*L*dim writable floats.
        check(unsafe {
            c::simhash::lshk_simhash_copy_planes(self.h.0, out.data(), shape[0] * shape[1])
        })
        .py_err(py)?;
        Ok(out)
    }

    /// Codes of the rows of x: shape (n, L) uint32 ((L,) for a 1-D x).
    fn hash<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (d, _, l) = self.shape(py)?;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<u32>(py, &out_shape(x.one_d, x.rows, l as usize))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol u32.
                unsafe {
                    c::simhash::lshk_simhash_hash(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut u32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * l as usize,
        )?;
        Ok(out)
    }

    /// Projections of the rows of x on every plane: shape (n, L*K) float32.
    fn project<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let (d, k, l) = self.shape(py)?;
        let width = k as usize * l as usize;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<f32>(py, &out_shape(x.one_d, x.rows, width))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol floats.
                unsafe {
                    c::simhash::lshk_simhash_project(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut f32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * width,
        )?;
        Ok(out)
    }
}

/// A DWTA family (lshk_dwta_*).
#[pyclass(module = "lshk")]
pub(crate) struct Dwta {
    pub(crate) h: Handle<lshk_dwta>,
    /// The owning Index of a borrowed handle (never freed here).
    pub(crate) owner: Option<Py<PyAny>>,
}

impl Drop for Dwta {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::dwta::lshk_dwta_free(self.h.0) };
        }
    }
}

#[pymethods]
impl Dwta {
    #[new]
    #[pyo3(signature = (dim, bins_per_table, tables, *, bin_size=8, seed=1))]
    fn new(
        py: Python<'_>,
        dim: u32,
        bins_per_table: u32,
        tables: u32,
        bin_size: u32,
        seed: u64,
    ) -> PyResult<Self> {
        let mut out: *mut lshk_dwta = ptr::null_mut();
        check(c::dwta::lshk_dwta_new(
            dim,
            bins_per_table,
            tables,
            bin_size,
            seed,
            &mut out,
        ))
        .py_err(py)?;
        Ok(Dwta {
            h: Handle(out),
            owner: None,
        })
    }

    /// From a bin map of K*L*bin_size coordinates (< dim), copied.
    #[staticmethod]
    fn from_map<'py>(
        py: Python<'py>,
        map: &Bound<'py, PyAny>,
        dim: u32,
        bins_per_table: u32,
        tables: u32,
        bin_size: u32,
    ) -> PyResult<Self> {
        let m = mat(py, map, "map", Dt::U32, Nd::OneOrTwo, true)?;
        let mut out: *mut lshk_dwta = ptr::null_mut();
        // SAFETY: m holds m.len() contiguous u32.
        check(unsafe {
            c::dwta::lshk_dwta_from_map(
                m.ptr as *const u32,
                m.len(),
                dim,
                bins_per_table,
                tables,
                bin_size,
                &mut out,
            )
        })
        .py_err(py)?;
        Ok(Dwta {
            h: Handle(out),
            owner: None,
        })
    }

    /// (dim, K, L, bin_size).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(u32, u32, u32, u32)> {
        let (mut d, mut k, mut l, mut b) = (0u32, 0u32, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::dwta::lshk_dwta_shape(self.h.0, &mut d, &mut k, &mut l, &mut b) })
            .py_err(py)?;
        Ok((d, k, l, b))
    }

    /// A copy of the bin map (K*L*bin_size uint32).
    fn map<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (_, k, l, b) = self.shape(py)?;
        let n = k as usize * l as usize * b as usize;
        let out = out_array::<u32>(py, &[n])?;
        // SAFETY: out holds n writable u32.
        check(unsafe { c::dwta::lshk_dwta_copy_map(self.h.0, out.data(), n) }).py_err(py)?;
        Ok(out)
    }

    /// Codes of dense rows: shape (n, L) uint32 ((L,) for a 1-D x).
    fn hash<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (d, _, l, _) = self.shape(py)?;
        let x = mat(py, x, "x", Dt::F32, Nd::OneOrTwo, false)?;
        need_cols(&x, "x", d as usize)?;
        let out = out_array::<u32>(py, &out_shape(x.one_d, x.rows, l as usize))?;
        let h = self.h.0 as usize;
        hash_into(
            py,
            &x,
            move |xp, n, xs, op, ol| {
                // SAFETY: x holds n rows at stride xs; out holds ol u32.
                unsafe {
                    c::dwta::lshk_dwta_hash_dense(
                        h as *const _,
                        xp as *const f32,
                        n,
                        xs,
                        op as *mut u32,
                        ol,
                    )
                }
            },
            out_ptr(&out),
            x.rows * l as usize,
        )?;
        Ok(out)
    }

    /// Codes of CSR sparse rows (indptr n+1, indices, values): (n, L).
    fn hash_sparse<'py>(
        &self,
        py: Python<'py>,
        indptr: &Bound<'py, PyAny>,
        indices: &Bound<'py, PyAny>,
        values: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<u32>>> {
        let (_, _, l, _) = self.shape(py)?;
        let ip = vec1(py, indptr, "indptr", Dt::U64)?;
        let ix = vec1(py, indices, "indices", Dt::U32)?;
        let vs = vec1(py, values, "values", Dt::F32)?;
        if ip.len() == 0 {
            return Err(PyValueError::new_err("indptr: must hold n + 1 >= 1 values"));
        }
        if ix.len() != vs.len() {
            return Err(PyValueError::new_err(format!(
                "indices and values: must have the same length, got {} and {}",
                ix.len(),
                vs.len()
            )));
        }
        check_csr_end(&ip, &ix)?;
        let n = ip.len() - 1;
        let out = out_array::<u32>(py, &[n, l as usize])?;
        let (h, a, b, cc, op, ol) = (
            self.h.0 as usize,
            ip.ptr,
            ix.ptr,
            vs.ptr,
            out_ptr(&out),
            n * l as usize,
        );
        py.detach(move || {
            // SAFETY: indptr n + 1 values, indices/values >= indptr[n]
            // entries (checked); out holds ol u32.
            check(unsafe {
                c::dwta::lshk_dwta_hash_sparse(
                    h as *const _,
                    a as *const usize,
                    b as *const u32,
                    cc as *const f32,
                    n,
                    op as *mut u32,
                    ol,
                )
            })
        })
        .py_err(py)?;
        Ok(out)
    }
}

/// LSH tables built from per-table codes (lshk_tables_*).
#[pyclass(module = "lshk")]
pub(crate) struct Tables {
    pub(crate) h: Handle<lshk_tables>,
    /// The owning Index of a borrowed handle (never freed here).
    pub(crate) owner: Option<Py<PyAny>>,
}

impl Drop for Tables {
    fn drop(&mut self) {
        if self.owner.is_none() && !self.h.0.is_null() {
            // SAFETY: an owned live handle, freed once.
            unsafe { c::tables::lshk_tables_free(self.h.0) };
        }
    }
}

#[pymethods]
impl Tables {
    /// From codes of shape (n, L) (e.g. SimHash.hash of the rows).
    #[new]
    #[pyo3(signature = (codes, range_bits, *, bucket_cap=0, seed=1, threads=0))]
    fn new<'py>(
        py: Python<'py>,
        codes: &Bound<'py, PyAny>,
        range_bits: u32,
        bucket_cap: u32,
        seed: u64,
        threads: u32,
    ) -> PyResult<Self> {
        let m = mat(py, codes, "codes", Dt::U32, Nd::Two, true)?;
        let l =
            u32::try_from(m.cols).map_err(|_| PyValueError::new_err("codes: too many tables"))?;
        let (cp, n) = (m.ptr, m.rows);
        let h = py
            .detach(move || -> CResult<usize> {
                let mut out: *mut lshk_tables = ptr::null_mut();
                // SAFETY: codes holds n*L contiguous u32.
                check(unsafe {
                    c::tables::lshk_tables_build(
                        cp as *const u32,
                        n,
                        l,
                        range_bits,
                        bucket_cap,
                        seed,
                        threads,
                        &mut out,
                    )
                })?;
                Ok(out as usize)
            })
            .py_err(py)?;
        Ok(Tables {
            h: Handle(h as *mut _),
            owner: None,
        })
    }

    /// (n, L, range_bits).
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, u32, u32)> {
        let (mut n, mut l, mut r) = (0usize, 0u32, 0u32);
        // SAFETY: live handle, writable outputs.
        check(unsafe { c::tables::lshk_tables_shape(self.h.0, &mut n, &mut l, &mut r) })
            .py_err(py)?;
        Ok((n, l, r))
    }

    /// Bytes held by the tables (lshk_tables_memory_bytes).
    fn memory_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        let mut n = 0usize;
        // SAFETY: live handle, writable output.
        check(unsafe { c::tables::lshk_tables_memory_bytes(self.h.0, &mut n) }).py_err(py)?;
        Ok(n)
    }

    /// Candidates (CSR) of queries given by their codes (q, L):
    /// returns (ids, offsets) or (ids, offsets, counts).
    #[pyo3(signature = (codes, *, min_count=None, max_candidates=None, probes=None,
        bits_per_table=None, projections=None, forced_offsets=None, forced_ids=None, counts=false,
        rule=None, budget_seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        codes: &Bound<'py, PyAny>,
        min_count: Option<u32>,
        max_candidates: Option<u32>,
        probes: Option<u32>,
        bits_per_table: Option<u32>,
        projections: Option<&Bound<'py, PyAny>>,
        forced_offsets: Option<&Bound<'py, PyAny>>,
        forced_ids: Option<&Bound<'py, PyAny>>,
        counts: bool,
        rule: Option<&Bound<'py, PyAny>>,
        budget_seed: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // None: lshk_tables_gather itself; a rule: lshk_tables_gather_budget.
        let budget = match rule {
            Some(r) if !r.is_none() => {
                let mut b = c::tables::lshk_budget_params_default();
                b.rule = enum_arg(r, "rule", BUDGET_RULES)?;
                b.seed = budget_seed;
                Some(b)
            }
            _ => None,
        };
        let (n, l, _) = self.shape(py)?;
        let cm = mat(py, codes, "codes", Dt::U32, Nd::OneOrTwo, true)?;
        if cm.cols != l as usize {
            return Err(PyValueError::new_err(format!(
                "codes: must have L = {l} columns, got {}",
                cm.cols
            )));
        }
        let q = cm.rows;
        let proj = match projections {
            Some(o) if !o.is_none() => {
                Some(mat(py, o, "projections", Dt::F32, Nd::OneOrTwo, true)?)
            }
            _ => None,
        };
        let fo = opt_vec1(py, forced_offsets, "forced_offsets", Dt::U64)?;
        let fi = opt_vec1(py, forced_ids, "forced_ids", Dt::U32)?;
        if fo.is_some() != fi.is_some() {
            return Err(PyValueError::new_err(
                "forced_offsets and forced_ids: give both or neither",
            ));
        }
        if let Some(f) = &fo {
            expect_len(f, "forced_offsets", q + 1, "queries + 1")?;
        }
        let g = gather_params(min_count, max_candidates, probes, bits_per_table);
        let mut cap = q.saturating_mul(256).min(q.saturating_mul(n)).max(1);
        let offsets = out_array::<u64>(py, &[q + 1])?;
        let (h, cp, pp, pl, fop, fip, fil, op) = (
            self.h.0 as usize,
            cm.ptr,
            ptr_or_null(&proj),
            len_of(&proj),
            ptr_or_null(&fo),
            ptr_or_null(&fi),
            len_of(&fi),
            out_ptr(&offsets),
        );
        let gp = &g as *const _ as usize;
        let bp = budget.as_ref().map_or(0, |b| b as *const _ as usize);
        loop {
            let mut ids = try_vec::<u32>(cap, "candidate ids")?;
            let mut cnt = try_vec::<u32>(if counts { cap } else { 0 }, "candidate counts")?;
            let (ip, cntp) = (
                ids.as_mut_ptr() as usize,
                if counts { cnt.as_mut_ptr() as usize } else { 0 },
            );
            let r = py.detach(move || -> (u32, usize, String) {
                let mut needed = 0usize;
                let s = if bp == 0 {
                    // SAFETY: codes q*L u32, projections pl floats, forced
                    // arrays as checked; ids/counts hold `cap`, offsets
                    // q + 1; g lives on the caller's frame.
                    unsafe {
                        c::tables::lshk_tables_gather(
                            h as *const _,
                            cp as *const u32,
                            q,
                            gp as *const c::tables::lshk_gather_params,
                            pp as *const f32,
                            pl,
                            fop as *const usize,
                            fip as *const u32,
                            fil,
                            ip as *mut u32,
                            cap,
                            op as *mut usize,
                            cntp as *mut u32,
                            &mut needed,
                        )
                    }
                } else {
                    // SAFETY: as above; the budget parameters live on the
                    // caller's frame too.
                    unsafe {
                        c::tables::lshk_tables_gather_budget(
                            h as *const _,
                            cp as *const u32,
                            q,
                            gp as *const c::tables::lshk_gather_params,
                            bp as *const c::tables::lshk_budget_params,
                            pp as *const f32,
                            pl,
                            fop as *const usize,
                            fip as *const u32,
                            fil,
                            ip as *mut u32,
                            cap,
                            op as *mut usize,
                            cntp as *mut u32,
                            &mut needed,
                        )
                    }
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
                    let needed = needed.min(cap);
                    let ids = array_from(py, &ids[..needed])?;
                    let offsets = offsets.into_any();
                    return if counts {
                        let cnt = array_from(py, &cnt[..needed])?;
                        PyTuple::new(py, [ids, offsets, cnt])
                    } else {
                        PyTuple::new(py, [ids, offsets])
                    };
                }
                (c::LSHK_STATUS_BUFFER_TOO_SMALL, needed, _) if needed > cap => cap = needed,
                (status, _, message) => return Err(lshk_error(py, Failure { status, message })),
            }
        }
    }
}

/// out[j] = W[ids[j]] . q[i] + bias[ids[j]] for j in query i's segment.
#[pyfunction]
#[pyo3(signature = (w, q, ids, offsets=None, *, bias=None, scales=None, bf16=false))]
#[allow(clippy::too_many_arguments)]
fn gathered_matmul<'py>(
    py: Python<'py>,
    w: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    offsets: Option<&Bound<'py, PyAny>>,
    bias: Option<&Bound<'py, PyAny>>,
    scales: Option<&Bound<'py, PyAny>>,
    bf16: bool,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let wa = w
        .cast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err("w: must be a numpy array"))?;
    let d = wa.dtype();
    let dt = match (d.kind(), d.itemsize()) {
        (b'f', 4) => Dt::F32,
        (b'f', 2) => Dt::F16,
        (b'u', 2) if bf16 => Dt::U16,
        (b'i', 1) => Dt::I8,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "w: must be float32, float16, int8 (with scales) or uint16 bf16 bits (with bf16=True), got {}",
                d.str()?
            )))
        }
    };
    if bf16 && dt != Dt::U16 {
        return Err(PyTypeError::new_err(
            "w: bf16=True needs a uint16 array of bf16 bits",
        ));
    }
    let wm = mat(py, w, "w", dt, Nd::Two, false)?;
    let qm = mat(py, q, "q", Dt::F32, Nd::OneOrTwo, false)?;
    need_cols(&qm, "q", wm.cols)?;
    let idm = vec1(py, ids, "ids", Dt::U32)?;
    let off = offsets_or_one(py, offsets, idm.len())?;
    expect_len(&off, "offsets", qm.rows + 1, "queries + 1")?;
    if last_offset(&off) != idm.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset must equal len(ids) = {}",
            idm.len()
        )));
    }
    let bm = opt_vec1(py, bias, "bias", Dt::F32)?;
    if let Some(b) = &bm {
        expect_len(b, "bias", wm.rows, "one per row of w")?;
    }
    let sm = opt_vec1(py, scales, "scales", Dt::F32)?;
    match (&sm, dt) {
        (Some(s), Dt::I8) => expect_len(s, "scales", wm.rows, "one per row of w")?,
        (None, Dt::I8) => return Err(PyValueError::new_err("scales: needed with int8 w")),
        (Some(_), _) => return Err(PyValueError::new_err("scales: only with int8 w")),
        _ => {}
    }
    let n = idm.len();
    let out = out_array::<f32>(py, &[n])?;
    let storage = match dt {
        Dt::F32 => c::index::LSHK_STORAGE_F32,
        Dt::U16 => c::index::LSHK_STORAGE_BF16,
        Dt::F16 => c::index::LSHK_STORAGE_F16,
        _ => c::index::LSHK_STORAGE_I8,
    };
    let (wp, rows, dim, ws, bp, sp) = (
        wm.ptr,
        wm.rows,
        wm.cols,
        wm.stride,
        ptr_or_null(&bm),
        ptr_or_null(&sm),
    );
    let (qp, nq, qs, ip, op, outp) = (qm.ptr, qm.rows, qm.stride, idm.ptr, off.ptr, out_ptr(&out));
    py.detach(move || {
        let v = c::index::lshk_weights_view {
            struct_size: std::mem::size_of::<c::index::lshk_weights_view>() as u32,
            storage,
            w: wp as *const c_void,
            scales: sp as *const f32,
            bias: bp as *const f32,
            rows,
            dim,
            w_stride: ws,
        };
        // SAFETY: every array holds the elements its shape says (checked
        // above: w rows x dim at stride ws of the view's element type,
        // scales and bias rows floats, q nq rows, ids/offsets CSR with
        // offsets[nq] == len(ids), out len(ids)), held by wm, sm, bm, qm,
        // idm, off and out until after the call.
        check(unsafe {
            c::matmul::lshk_gathered_matmul(
                &v,
                qp as *const f32,
                nq,
                qs,
                ip as *const u32,
                op as *const usize,
                outp as *mut f32,
                n,
            )
        })
    })
    .py_err(py)?;
    Ok(out)
}

/// The k best candidates per CSR segment: (ids (nq, k), scores (nq, k)).
#[pyfunction]
#[pyo3(signature = (scores, k, offsets=None, ids=None))]
fn topk<'py>(
    py: Python<'py>,
    scores: &Bound<'py, PyAny>,
    k: u32,
    offsets: Option<&Bound<'py, PyAny>>,
    ids: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let sc = vec1(py, scores, "scores", Dt::F32)?;
    let one = offsets.is_none_or(|o| o.is_none());
    let off = offsets_or_one(py, offsets, sc.len())?;
    if off.len() == 0 {
        return Err(PyValueError::new_err(
            "offsets: must hold nq + 1 >= 1 values",
        ));
    }
    if last_offset(&off) > sc.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset exceeds len(scores) = {}",
            sc.len()
        )));
    }
    let idm = opt_vec1(py, ids, "ids", Dt::U32)?;
    if let Some(i) = &idm {
        expect_len(i, "ids", sc.len(), "one per score")?;
    }
    let nq = off.len() - 1;
    let shape = out_shape(one, nq, k as usize);
    let oi = out_array::<u32>(py, &shape)?;
    let os = out_array::<f32>(py, &shape)?;
    let a = (
        sc.ptr,
        ptr_or_null(&idm),
        off.ptr,
        out_ptr(&oi),
        out_ptr(&os),
    );
    py.detach(move || {
        // SAFETY: scores/ids hold >= offsets[nq] entries, offsets nq + 1,
        // outputs nq*k each.
        check(unsafe {
            c::matmul::lshk_topk(
                a.0 as *const f32,
                a.1 as *const u32,
                a.2 as *const usize,
                nq,
                k,
                a.3 as *mut u32,
                a.4 as *mut f32,
            )
        })
    })
    .py_err(py)?;
    PyTuple::new(py, [oi.into_any(), os.into_any()])
}

/// The top k over shards' answers (lshk_topk_merge): `parts` is a sequence
/// of (ids, scores, first_row), ids uint32 and scores float32 of shape
/// (nq, k_s) (or (k_s,) for one query) as Index.query returns them, with
/// the shard's own row ids; returns (ids, scores) of shape (nq, k) with
/// global ids.
#[pyfunction]
#[pyo3(signature = (parts, k))]
fn merge_topk<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyAny>,
    k: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut mats: Vec<(Mat<'py>, Mat<'py>, u32)> = Vec::new();
    for item in parts.try_iter()? {
        let (ids, sc, first): (Bound<'py, PyAny>, Bound<'py, PyAny>, u32) =
            item?.extract().map_err(|_| {
                PyTypeError::new_err("parts: each item must be (ids, scores, first_row)")
            })?;
        let im = mat(py, &ids, "ids", Dt::U32, Nd::OneOrTwo, true)?;
        let sm = mat(py, &sc, "scores", Dt::F32, Nd::OneOrTwo, true)?;
        if (im.rows, im.cols, im.one_d) != (sm.rows, sm.cols, sm.one_d) {
            return Err(PyValueError::new_err(format!(
                "parts[{}]: ids of shape ({}, {}) and scores of shape ({}, {})",
                mats.len(),
                im.rows,
                im.cols,
                sm.rows,
                sm.cols
            )));
        }
        if let Some((p, _, _)) = mats.first() {
            if (p.rows, p.one_d) != (im.rows, im.one_d) {
                return Err(PyValueError::new_err(format!(
                    "parts[{}]: {} queries, parts[0] has {}",
                    mats.len(),
                    im.rows,
                    p.rows
                )));
            }
        }
        mats.push((im, sm, first));
    }
    let Some((p0, _, _)) = mats.first() else {
        return Err(PyValueError::new_err("parts: at least one shard"));
    };
    let (nq, one) = (p0.rows, p0.one_d);
    let shape = out_shape(one, nq, k);
    let oi = out_array::<u32>(py, &shape)?;
    let os = out_array::<f32>(py, &shape)?;
    let raw: Vec<(usize, usize, usize, u32)> = mats
        .iter()
        .map(|(i, s, f)| (i.ptr, s.ptr, i.cols, *f))
        .collect();
    let (oip, osp) = (out_ptr(&oi), out_ptr(&os));
    py.detach(move || {
        let sh: Vec<lshk::ffi::matmul::lshk_shard_topk> = raw
            .iter()
            .map(|&(i, s, ks, f)| lshk::ffi::matmul::lshk_shard_topk {
                ids: i as *const u32,
                scores: s as *const f32,
                k: ks,
                first_row: f,
                reserved: 0,
            })
            .collect();
        // SAFETY: each shard's arrays hold nq * k_s dense values (held by
        // `mats`), the outputs nq * k.
        check(unsafe {
            c::matmul::lshk_topk_merge(
                sh.as_ptr(),
                sh.len(),
                nq,
                k,
                oip as *mut u32,
                osp as *mut f32,
            )
        })
    })
    .py_err(py)?;
    drop(mats);
    PyTuple::new(py, [oi.into_any(), os.into_any()])
}

/// Softmax per CSR segment; with return_lse=True also the log-sum-exps.
#[pyfunction]
#[pyo3(signature = (scores, offsets=None, *, return_lse=false))]
fn softmax<'py>(
    py: Python<'py>,
    scores: &Bound<'py, PyAny>,
    offsets: Option<&Bound<'py, PyAny>>,
    return_lse: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let sc = vec1(py, scores, "scores", Dt::F32)?;
    let off = offsets_or_one(py, offsets, sc.len())?;
    if off.len() == 0 {
        return Err(PyValueError::new_err(
            "offsets: must hold nq + 1 >= 1 values",
        ));
    }
    if last_offset(&off) > sc.len() as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets: the last offset exceeds len(scores) = {}",
            sc.len()
        )));
    }
    let nq = off.len() - 1;
    let out = out_array::<f32>(py, &[sc.len()])?;
    // positions past offsets[nq] are not written by lshk: zero them
    let outp = out_ptr(&out);
    // SAFETY: out holds sc.len() floats.
    unsafe { ptr::write_bytes(outp as *mut f32, 0, sc.len()) };
    let lse = out_array::<f32>(py, &[nq])?;
    let lp = if return_lse { out_ptr(&lse) } else { 0 };
    let (sp, op) = (sc.ptr, off.ptr);
    py.detach(move || {
        // SAFETY: scores/out hold >= offsets[nq] floats, offsets nq + 1, lse nq.
        check(unsafe {
            c::matmul::lshk_softmax(
                sp as *const f32,
                op as *const usize,
                nq,
                outp as *mut f32,
                lp as *mut f32,
            )
        })
    })
    .py_err(py)?;
    if return_lse {
        Ok(PyTuple::new(py, [out.into_any(), lse.into_any()])?.into_any())
    } else {
        Ok(out.into_any())
    }
}

/// Per-row symmetric int8 quantization: (codes int8 (rows, dim), scales).
#[pyfunction]
fn quantize_rows_i8<'py>(py: Python<'py>, w: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let wm = mat(py, w, "w", Dt::F32, Nd::Two, false)?;
    let out = out_array::<i8>(py, &[wm.rows, wm.cols])?;
    let sc = out_array::<f32>(py, &[wm.rows])?;
    // SAFETY: w rows x dim at stride; out rows x dim dense; scales rows.
    check(unsafe {
        c::matmul::lshk_quantize_rows_i8(
            wm.ptr as *const f32,
            wm.rows,
            wm.cols,
            wm.stride,
            out.data(),
            wm.cols,
            sc.data(),
        )
    })
    .py_err(py)?;
    PyTuple::new(py, [out.into_any(), sc.into_any()])
}

/// f32 -> bf16 bits (uint16), round to nearest even.
#[pyfunction]
fn to_bf16<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let a = numpy_mod(py)?.call_method1("ascontiguousarray", (x,))?;
    let m = mat(py, &a, "x", Dt::F32, Nd::OneOrTwo, true)?;
    let out = out_array::<u16>(py, &out_shape(m.one_d, m.rows, m.cols))?;
    // SAFETY: m holds len floats; out len u16.
    check(unsafe {
        c::matmul::lshk_convert(
            c::index::LSHK_STORAGE_F32,
            m.ptr as *const c_void,
            m.len(),
            c::index::LSHK_STORAGE_BF16,
            out.data() as *mut c_void,
        )
    })
    .py_err(py)?;
    Ok(out.into_any())
}

/// The active ISA tier name ("scalar", "portable", "avx2", "avx512").
#[pyfunction]
fn isa_active() -> String {
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(c::lshk_isa_name(c::lshk_isa_active())) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SimHash>()?;
    m.add_class::<Dwta>()?;
    m.add_class::<Tables>()?;
    m.add_function(wrap_pyfunction!(gathered_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(topk, m)?)?;
    m.add_function(wrap_pyfunction!(merge_topk, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(quantize_rows_i8, m)?)?;
    m.add_function(wrap_pyfunction!(to_bf16, m)?)?;
    m.add_function(wrap_pyfunction!(isa_active, m)?)?;
    Ok(())
}
