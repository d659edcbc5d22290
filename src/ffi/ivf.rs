//! C entry points of the IVF index (`lshk_ivf_*`): a k-means partition
//! index with int8 or 4-bit PQ codes and exact re-ranking (see
//! `crate::ivf`).
//!
//! Over ~900 lines on purpose: it is one C type's whole surface (the
//! parameter structs and their defaults, build, weighted build, query,
//! save/load, shape, memory, calibration, label training, free), and
//! cbindgen writes the header in this file's order, which a split would
//! have to preserve by declaring submodules in that order (as `ffi/index/`
//! does); split it that way when it grows further.

use std::cell::RefCell;
use std::path::Path;

use super::labels::{lshk_label_params, read_label_params, training_pairs, write_label_info};
use super::*;
use crate::error::checked_mul;
use crate::format;
use crate::ivf::{Calibration, Codes, Ivf, IvfParams, SearchParams, SearchStats};

/// An IVF index: k-means lists over the rows of W stored contiguously
/// (int8 codes and, unless W is borrowed, an f32 copy in list order),
/// queried by visiting the `nprobe` best lists, scoring their rows from
/// the codes and re-scoring the `rerank` best exactly. Every function
/// taking `const lshk_ivf *` (queries included) is safe to call from many
/// threads at once, without locks; an index changes only in
/// lshk_ivf_train_labels, which, like lshk_ivf_free, needs exclusive
/// access.
pub struct lshk_ivf {
    _private: [u8; 0],
}

/// IVF codes: none; every row of a visited list is scored exactly from the
/// index's own f32 copy (FAISS's IVFFlat). Needs `borrow = 0`.
pub const LSHK_IVF_CODES_NONE: u32 = 0;
/// IVF codes: int8 per row (one f32 scale per row), the query quantised to
/// 7 bits, then the `rerank` best re-scored exactly in f32.
pub const LSHK_IVF_CODES_I8: u32 = 1;
/// IVF codes: 4-bit product quantisation of each row's residual to its
/// list centroid (`pq_m` codes a row, `dim / 2` by default: a quarter of
/// a byte per coordinate), scored from byte tables built once per query,
/// then the `rerank` best re-scored exactly in f32. Needs a larger
/// `rerank` than CODES_I8 for the same recall (docs/ivf.md), and at least
/// 16 rows.
pub const LSHK_IVF_CODES_PQ4: u32 = 2;
/// IVF codes: both of the above, in three stages. The 4-bit codes scan the
/// visited lists (as CODES_PQ4); the best 256 candidates are re-scored
/// from their int8 codes (as CODES_I8 scores them; rows gathered); then
/// the `rerank` best of those are re-scored exactly (with `rerank` 0, the
/// top k by the int8 scores are returned). For wide rows (d >= 256), where
/// the int8 pass costs more per row than the 4-bit one: int8's recall at
/// close to the 4-bit pass's cost (docs/ivf.md, "Two-stage codes"). Holds
/// both codes; at least 16 rows; `pq_m` as for CODES_PQ4. (The 256 is
/// `refine` in the Rust API; lshk_ivf_search has no field for it in this
/// ABI generation.)
pub const LSHK_IVF_CODES_PQ4_I8: u32 = 3;

const _: () = {
    assert!(LSHK_IVF_CODES_NONE == Codes::None as u32);
    assert!(LSHK_IVF_CODES_I8 == Codes::I8 as u32);
    assert!(LSHK_IVF_CODES_PQ4 == Codes::Pq4 as u32);
    assert!(LSHK_IVF_CODES_PQ4_I8 == Codes::Pq4I8 as u32);
    assert!(crate::ivf::DEFAULT_REFINE == 256);
};

/// Build parameters of lshk_ivf_build. Obtain defaults from
/// lshk_ivf_params_default(), then change fields; `struct_size` lets later
/// versions add fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_ivf_params {
    /// sizeof(lshk_ivf_params) as the caller knows it.
    pub struct_size: u32,
    /// Lists (k-means clusters), 1..=rows; 0 = round(4 sqrt(rows))
    /// (default 0).
    pub nlist: u32,
    /// Lloyd iterations of k-means, >= 1 (default 10). The build time
    /// grows linearly with it.
    pub iters: u32,
    /// Rows sampled (seeded) to train k-means, >= nlist after clamping to
    /// rows; 0 = min(rows, 64 * nlist) (default 0).
    pub train_rows: u32,
    /// LSHK_IVF_CODES_* (default I8).
    pub codes: u32,
    /// 1 (default): keep a pointer to the caller's W for the exact
    /// re-ranking instead of copying it (W must stay alive and unchanged
    /// until lshk_ivf_free; needs codes other than CODES_NONE). 0: copy W
    /// (in list order).
    pub borrow: u32,
    /// Build threads (0 = all cores, default). The index does not depend
    /// on it.
    pub threads: u32,
    /// Sub-quantisers of CODES_PQ4 and CODES_PQ4_I8 (4 bits each; must
    /// divide dim, at most 16,384); 0 = dim / 2 (default; for an odd dim
    /// the largest divisor not above dim / 2). Must be 0 with other codes. (This field was
    /// `reserved`, which had to be 0, in 0.2.0: same offset and size.)
    pub pq_m: u32,
    /// Seed of the training sample and of k-means' empty-list splits.
    pub seed: u64,
}

/// Query parameters of lshk_ivf_query. Obtain defaults from
/// lshk_ivf_search_default().
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_ivf_search {
    /// sizeof(lshk_ivf_search) as the caller knows it.
    pub struct_size: u32,
    /// Lists visited per query, >= 1 (values above nlist act as nlist):
    /// exactly this many when `reach` is 0, at most this many otherwise
    /// (default UINT32_MAX: no cap).
    pub nprobe: u32,
    /// Approximate candidates re-scored exactly per query (at least k are
    /// when it is not 0; values above rows act as rows). 0 = no re-ranking:
    /// the approximations are returned as scores (int8 with CODES_I8 and
    /// CODES_PQ4_I8, 4-bit with CODES_PQ4; with CODES_NONE every score is
    /// exact anyway). Default 32.
    pub rerank: u32,
    /// Adaptive list selection (default 3.0; finite, >= 0; 0 = visit
    /// exactly the `nprobe` best lists). The best list by its estimate
    /// `<[q, 1], c> + |q| spread` is scanned first, then every list whose
    /// `<[q, 1], c> + reach |q| spread` is at least the k-th best score
    /// found so far, best estimate first, up to `nprobe` lists: easy
    /// queries stop after a list or two, hard ones visit more, with no
    /// per-layer tuning (docs/ivf.md has the measurements).
    pub reach: f32,
}

/// Counts of one lshk_ivf_query call, summed over its queries.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_ivf_stats {
    /// sizeof(lshk_ivf_stats) as the caller knows it (set it before the
    /// call; lshk does not change it).
    pub struct_size: u32,
    /// Not written by lshk.
    pub reserved: u32,
    /// Rows scored in the visited lists (from their codes, or exactly with
    /// CODES_NONE).
    pub scanned: u64,
    /// Rows re-scored exactly.
    pub reranked: u64,
    /// Lists visited.
    pub lists: u64,
}

impl HandleKind for Ivf {
    const MAGIC: u64 = 0x5f46_5649_4b48_534c; // "LSHKIVF_"
    const NAME: &'static str = "lshk_ivf";
}

unsafe fn ivf_ref<'a>(h: *const lshk_ivf) -> Result<&'a Ivf> {
    // SAFETY: forwarded caller contract (h is NULL or from lshk).
    unsafe { handle_ref::<Ivf>(slot(h), "ivf") }
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_ivf_params {
    const DEFAULT_FN: &'static str = "lshk_ivf_params_default";
    fn defaults() -> Self {
        lshk_ivf_params_default()
    }
}

// SAFETY: #[repr(C)], struct_size first, plain integer and float fields
// (every bit pattern is a valid value; the float is validated before use).
unsafe impl ParamStruct for lshk_ivf_search {
    const DEFAULT_FN: &'static str = "lshk_ivf_search_default";
    fn defaults() -> Self {
        lshk_ivf_search_default()
    }
}

/// Default build parameters: nlist 0 (round(4 sqrt(rows))), 10 k-means
/// iterations, train_rows 0 (min(rows, 64 nlist)), CODES_I8, borrow 1, all
/// cores, pq_m 0, a fixed seed; struct_size = sizeof(lshk_ivf_params).
#[no_mangle]
pub extern "C" fn lshk_ivf_params_default() -> lshk_ivf_params {
    let d = IvfParams::default();
    lshk_ivf_params {
        struct_size: std::mem::size_of::<lshk_ivf_params>() as u32,
        nlist: d.nlist,
        iters: d.iters,
        train_rows: d.train_rows,
        codes: d.codes as u32,
        borrow: 1,
        threads: d.threads,
        pq_m: 0,
        seed: d.seed,
    }
}

/// Default query parameters: adaptive lists (reach 3.0, nprobe UINT32_MAX
/// = no cap), rerank 32; struct_size = sizeof(lshk_ivf_search).
#[no_mangle]
pub extern "C" fn lshk_ivf_search_default() -> lshk_ivf_search {
    let d = SearchParams::default();
    lshk_ivf_search {
        struct_size: std::mem::size_of::<lshk_ivf_search>() as u32,
        nprobe: d.nprobe,
        rerank: d.rerank,
        reach: d.reach,
    }
}

/// Builds an IVF index over `rows` rows of `dim` floats (row r at
/// `w + r * w_stride`, `w_stride >= dim`, in elements) with an optional
/// `bias` (`rows` floats, NULL = none; the scores are `w_r . q + b_r`):
/// k-means on a seeded sample of the rows [w_r, b_r], every row assigned
/// to its nearest centroid, the lists stored contiguously with their int8
/// codes. With `p->borrow = 1` (the default) W itself is used for the
/// exact re-ranking: it must stay alive and unchanged until lshk_ivf_free
/// (and lshk_ivf_save does not store it: lshk_ivf_load takes it again);
/// with 0 an f32 copy is kept. `p` NULL = lshk_ivf_params_default(). The
/// index is a pure function of W, the bias and the parameters: the same on
/// every ISA tier and for every thread count.
///
/// On success `*out` receives a new handle (free it with lshk_ivf_free);
/// on failure `*out` is not written.
///
/// Errors: NULL_POINTER (`out`, `w` with rows > 0), INVALID_ARGUMENT (rows
/// 0, rows >= 2^32 - 1, dim 0, stride < dim, struct_size too small,
/// a bad `codes` value, `borrow` not 0 or 1, borrow with CODES_NONE, pq_m
/// not 0 without CODES_PQ4 or CODES_PQ4_I8, pq_m not dividing dim or above
/// 16,384, fewer than 16 rows with CODES_PQ4 or CODES_PQ4_I8, iters 0,
/// nlist > rows, train_rows < nlist, a misaligned pointer), NON_FINITE (NaN
/// or infinity in W or the bias, the message naming the row; a |value|
/// above sqrt(FLT_MAX / (16 (dim + 2))), whose squared distances would
/// overflow f32), SIZE_OVERFLOW, ALLOCATION_FAILED (the index would not
/// fit in physical memory).
///
/// # Safety
/// `w` must hold (rows-1)*w_stride + dim readable floats, `bias` (if not
/// NULL) `rows` floats; `p` NULL or a valid params struct.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_build(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    p: *const lshk_ivf_params,
    out: *mut *mut lshk_ivf,
) -> lshk_status {
    boundary("lshk_ivf_build", || {
        // SAFETY: forwarded caller contract (no weights).
        unsafe { ivf_build(w, bias, rows, dim, w_stride, None, p, out) }
    })
}

/// lshk_ivf_build with per-row weights steering the k-means:
/// `row_weights` holds `n_weights` floats, one per row (`n_weights ==
/// rows`), finite and >= 0, not all zero. Each centroid is the weighted
/// mean of its training rows, so lists are finer where the weight is
/// (e.g. rows that training queries hit often: docs/ivf.md, "Row
/// weights"). Every row is still assigned to its nearest centroid and
/// searchable; weights all 1 give exactly lshk_ivf_build's index. The
/// weights are read during the call only and not kept: lshk_ivf_save
/// stores the lists they shaped, not the weights. Everything else
/// (parameters, borrowing, outputs) as lshk_ivf_build.
///
/// Errors: those of lshk_ivf_build, and NULL_POINTER (`row_weights` NULL
/// with `n_weights` > 0), INVALID_ARGUMENT (`n_weights` != rows, a
/// negative weight, every weight 0, `row_weights` misaligned), NON_FINITE
/// (a NaN or infinite weight; the message names the row). `*out` is not
/// written on failure.
///
/// # Safety
/// As lshk_ivf_build; `row_weights` NULL or `n_weights` readable floats.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_ivf_build_weighted(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    row_weights: *const f32,
    n_weights: usize,
    p: *const lshk_ivf_params,
    out: *mut *mut lshk_ivf,
) -> lshk_status {
    boundary("lshk_ivf_build_weighted", || {
        check_out(out)?;
        // SAFETY: caller contract for row_weights.
        let wt = unsafe { slice_in(row_weights, n_weights, "row_weights")? };
        if n_weights != rows {
            bail!(
                InvalidArgument,
                "n_weights is {n_weights}; it must equal rows ({rows})"
            );
        }
        // SAFETY: forwarded caller contract.
        unsafe { ivf_build(w, bias, rows, dim, w_stride, Some(wt), p, out) }
    })
}

/// The body of lshk_ivf_build and lshk_ivf_build_weighted.
///
/// # Safety
/// As lshk_ivf_build.
#[allow(clippy::too_many_arguments)]
unsafe fn ivf_build(
    w: *const f32,
    bias: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    weights: Option<&[f32]>,
    p: *const lshk_ivf_params,
    out: *mut *mut lshk_ivf,
) -> Result<()> {
    {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let cp = unsafe { read_param_struct(p, "p")? };
        let codes = Codes::from_u32(cp.codes).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "codes {} is not an LSHK_IVF_CODES_* value (0..=3)",
                    cp.codes
                ),
            )
        })?;
        let borrow = match cp.borrow {
            0 => false,
            1 => true,
            v => bail!(InvalidArgument, "p->borrow is {v}; it must be 0 or 1"),
        };
        if borrow && codes == Codes::None {
            bail!(
                InvalidArgument,
                "p->borrow is 1 but codes is LSHK_IVF_CODES_NONE, which scores the \
                 index's own f32 copy: set borrow = 0"
            );
        }
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let need = strided_len(rows, dim, w_stride, "w")?;
        // SAFETY: caller contract for w and bias.
        let ws = unsafe { slice_in(w, need, "w")? };
        let bs = if bias.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { slice_in(bias, rows, "bias")? })
        };
        let ip = IvfParams {
            nlist: cp.nlist,
            iters: cp.iters,
            train_rows: cp.train_rows,
            codes,
            pq_m: cp.pq_m,
            pq_eta: 1.0,
            threads: cp.threads,
            seed: cp.seed,
        };
        let ivf = match (borrow, weights) {
            // SAFETY: with borrow = 1 the C caller keeps W alive and
            // unchanged until lshk_ivf_free (documented contract).
            (true, None) => unsafe { Ivf::build_borrowed(ws, bs, rows, dim, w_stride, &ip)? },
            // SAFETY: as above.
            (true, Some(wt)) => unsafe {
                Ivf::build_weighted_borrowed(ws, bs, rows, dim, w_stride, wt, &ip)?
            },
            (false, None) => Ivf::build(ws, bs, rows, dim, w_stride, &ip)?,
            (false, Some(wt)) => Ivf::build_weighted(ws, bs, rows, dim, w_stride, wt, &ip)?,
        };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(ivf).cast() };
        Ok(())
    }
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_ivf_stats {
    const C_NAME: &'static str = "lshk_ivf_stats";
}

// SAFETY: #[repr(C)], first field `struct_size: u32`.
unsafe impl OutStruct for lshk_ivf_calibration {
    const C_NAME: &'static str = "lshk_ivf_calibration";
}

thread_local! {
    /// Scores of a query whose caller passed `out_scores = NULL`.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The top `k` rows of `W q + b` for each of `nq` queries (query i at
/// `q + i * q_stride`, `q_stride >= dim` elements): the centroids are
/// scored, the lists chosen by `s` visited (adaptively by default, see
/// lshk_ivf_search::reach), their rows scored from the
/// int8 codes, the `s->rerank` best re-scored exactly (see
/// lshk_ivf_search). Writes `out_ids[i*k .. i*k + k]` (and `out_scores`,
/// when not NULL) per query: descending by score, equal scores by smaller
/// id, padded with UINT32_MAX / -INFINITY when the visited lists hold
/// fewer than k rows. Both outputs hold at least nq*k elements. `k = 0`
/// or `nq = 0` writes no ids or scores (stats are still written). With
/// `reach = 0`, `nprobe >= nlist` and `rerank >= rows` (or CODES_NONE) the
/// result is the
/// exact top-k (scores within the f32 dot-product bound of
/// lshk_gathered_matmul_f32). `s` NULL = lshk_ivf_search_default();
/// `stats` (NULL = none; set its struct_size) receives the batch's counts.
/// Thread-safe: many threads may query one index at once; each thread
/// reuses its own scratch, so after a warm-up call of the same size a
/// query allocates nothing.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (stride < dim,
/// struct_size of `s` or `stats` too small, nprobe 0, reach negative,
/// NaN or infinite, misaligned or
/// overlapping buffers), NON_FINITE (a NaN or infinite query value, or a query whose scores could overflow f32),
/// SIZE_OVERFLOW. Nothing is written on error.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out_ids` nq*k
/// writable u32; `out_scores` NULL or nq*k writable floats; `stats` NULL or
/// a writable lshk_ivf_stats; `s` NULL or a valid lshk_ivf_search.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_query(
    ivf: *const lshk_ivf,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    s: *const lshk_ivf_search,
    out_ids: *mut u32,
    out_scores: *mut f32,
    stats: *mut lshk_ivf_stats,
) -> lshk_status {
    boundary("lshk_ivf_query", || {
        // SAFETY: forwarded caller contracts.
        let ix = unsafe { ivf_ref(ivf)? };
        let cs = unsafe { read_param_struct(s, "s")? };
        unsafe { check_stats(stats)? };
        let dim = ix.dim();
        let ql = strided_len(nq, dim, q_stride, "q")?;
        let need = checked_mul(nq, k as usize, "nq * k")?;
        // SAFETY: caller contract for q.
        let qs = unsafe { slice_in(q, ql, "q")? };
        // The outputs may not overlap each other, `q` or the search params
        // (checked on the raw ranges, before mutable slices exist).
        check_disjoint(
            &[
                span(out_ids, need, "out_ids")?,
                span(
                    out_scores,
                    if out_scores.is_null() { 0 } else { need },
                    "out_scores",
                )?,
                span(stats, usize::from(!stats.is_null()), "stats")?,
            ],
            &[span(q, ql, "q")?, span(s, usize::from(!s.is_null()), "s")?],
        )?;
        // SAFETY: caller contract (nq * k writable values each), disjoint
        // from each other and from q (checked).
        let ids = unsafe { slice_out(out_ids, need, "out_ids")? };
        // nprobe 0, a negative or non-finite reach (INVALID_ARGUMENT), NaN/inf
        // queries (NON_FINITE) and a rerank above the candidates are handled
        // by Ivf::search_stats itself, before it writes anything (also for
        // nq = 0).
        let sp = SearchParams {
            nprobe: cs.nprobe,
            rerank: cs.rerank,
            reach: cs.reach,
            refine: crate::ivf::DEFAULT_REFINE,
        };
        let mut st = SearchStats::default();
        let tier = isa::active();
        if out_scores.is_null() {
            SCORES.with(|v| -> Result<()> {
                let mut v = v.borrow_mut();
                if v.len() < need {
                    v.resize(need, 0.0);
                }
                ix.search_stats(
                    tier,
                    qs,
                    nq,
                    q_stride,
                    k as usize,
                    &sp,
                    ids,
                    &mut v[..need],
                    Some(&mut st),
                )
            })?;
        } else {
            // SAFETY: as for out_ids.
            let sc = unsafe { slice_out(out_scores, need, "out_scores")? };
            ix.search_stats(
                tier,
                qs,
                nq,
                q_stride,
                k as usize,
                &sp,
                ids,
                sc,
                Some(&mut st),
            )?;
        }
        if !stats.is_null() {
            // SAFETY: checked non-NULL, aligned and large enough above.
            unsafe {
                (*stats).scanned = st.scanned;
                (*stats).reranked = st.reranked;
                (*stats).lists = st.lists;
            }
        }
        Ok(())
    })
}

/// Saves the index to `path` (a NUL-terminated file name): an lshk
/// container of file kind 2 with a CRC-32C per section (parameters,
/// centroids, lists, codes, bias, and the f32 rows unless W is borrowed),
/// written to a temporary file in the same directory, flushed and renamed
/// over `path` as lshk_index_save does (a crash never leaves a torn file at
/// `path`; see lshk_index_save for the temporary file's name and what
/// `path` may name). Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (empty path),
/// IO_ERROR (including a `path` that is not a regular file).
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_save(
    ivf: *const lshk_ivf,
    path: *const libc::c_char,
) -> lshk_status {
    boundary("lshk_ivf_save", || {
        // SAFETY: forwarded caller contracts.
        let ix = unsafe { ivf_ref(ivf)? };
        let p = unsafe { c_path(path)? };
        ix.save(p)
    })
}

/// rows, dim and the borrow flag of an IVF file, when its parameter record
/// is well formed (otherwise the loader reports the problem). rows (list
/// positions, with label-aware lists), dim and
/// nlist must agree with the sizes of the LIDS and CENTROID sections (and
/// for a file that borrows W, of QCODES with int8 codes or PQCENT with PQ4
/// codes), so that sizes computed from them
/// cannot overflow and the W the caller passes is never read beyond the
/// shape the file really holds.
fn peek(path: &Path) -> Result<Option<(usize, usize, bool)>> {
    let c = format::Container::open(path, format::KIND_IVF)?;
    let rec = c.section("IVFPARAM")?;
    // Version 1 (48 bytes) or the PQ4 record, version 2 (56 bytes).
    if rec.len() != 48 && rec.len() != 56 {
        return Ok(None);
    }
    let u = |i: usize| u32::from_le_bytes(rec[4 * i..4 * i + 4].try_into().unwrap());
    let pq4 = u(6) == Codes::Pq4 as u32;
    let (rows, dim, nlist) = (u(1) as usize, u(2) as usize, u(3) as usize);
    let borrowed = match u(8) {
        0 => false,
        1 => true,
        _ => return Ok(None),
    };
    let lids = c.section("LIDS")?.len();
    let cent = c.section("CENTROID")?.len();
    // One id per list position: the rows, or (label-aware lists, with a
    // LABELS section) any whole number of positions, the rows then being
    // LHOME's length.
    let labels = c.optional("LABELS").is_some();
    let npos = if labels { lids / 4 } else { rows };
    // Label-aware files hold the row count in LHOME's size instead.
    let home_ok = !labels || c.section("LHOME")?.len() as u128 == rows as u128 * 4;
    let (qcodes, want_q) = match (borrowed, pq4) {
        (false, _) => (0, 0),
        (true, false) => (
            c.section("QCODES")?.len() as u128,
            npos as u128 * dim.div_ceil(64) as u128 * 64,
        ),
        (true, true) => (c.section("PQCENT")?.len() as u128, 64 * dim as u128),
    };
    if rows == 0
        || dim == 0
        || nlist == 0
        || lids as u128 != npos as u128 * 4
        || !home_ok
        || cent as u128 != nlist as u128 * dim as u128 * 4
        || qcodes != want_q
    {
        bail!(
            BadFileFormat,
            "{}: IVFPARAM's {rows} rows of dim {dim} in {nlist} lists disagree with \
             the sizes of the LIDS ({lids} bytes), CENTROID ({cent} bytes) or QCODES \
             / PQCENT sections",
            path.display()
        );
    }
    Ok(Some((rows, dim, borrowed)))
}

/// Loads an index saved by lshk_ivf_save (every section is checked and
/// read into memory; the file is not kept open). `w`: for a file saved
/// from an index built with `borrow = 1` (whose rows are not stored) it
/// must point to the same W as at build time, `w_stride` its stride in
/// elements (>= dim): it is used in place and must stay alive and
/// unchanged until lshk_ivf_free; NULL there is INVALID_ARGUMENT. For a
/// file that stores its rows `w` must be NULL (non-NULL is
/// INVALID_ARGUMENT, so a caller never believes its own W is used when the
/// file's is) and `w_stride` is ignored.
///
/// Errors: NULL_POINTER (`path`, `out`), IO_ERROR (cannot open or read, or
/// not a regular file), BAD_FILE_FORMAT (truncated, corrupt, not an IVF
/// file (e.g. an lshk_index file), newer version, content inconsistent
/// with its parameters, or a float section holding NaN, infinity or a
/// value outside what a build of that dim produces; the message names the
/// problem), INVALID_ARGUMENT (empty path, misaligned `out` or `w`, `w`
/// misuse as above, w_stride < dim), NON_FINITE (the borrowed W holds
/// NaN/inf or a value beyond lshk_ivf_build's limit), SIZE_OVERFLOW. On failure
/// `*out` is not written.
///
/// # Safety
/// `path` must be a NUL-terminated string; a non-NULL `w` must hold
/// (rows-1)*w_stride + dim readable floats of the saved shape.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_load(
    path: *const libc::c_char,
    w: *const f32,
    w_stride: usize,
    out: *mut *mut lshk_ivf,
) -> lshk_status {
    boundary("lshk_ivf_load", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let p = unsafe { c_path(path)? };
        let shape = peek(p)?;
        let ivf = match (shape, w.is_null()) {
            (Some((_, _, true)), true) => bail!(
                InvalidArgument,
                "the file was saved from an index that borrows W (borrow = 1): \
                 pass that W as `w`"
            ),
            (Some((_, _, false)), false) => bail!(
                InvalidArgument,
                "the file stores its own rows: `w` must be NULL"
            ),
            (Some((rows, dim, true)), false) => {
                let need = strided_len(rows, dim, w_stride, "w")?;
                // SAFETY: caller contract: w holds the saved shape.
                let ws = unsafe { slice_in(w, need, "w")? };
                crate::error::check_finite_rows(ws, rows, dim, w_stride, "w")?;
                // SAFETY: the C caller keeps W alive and unchanged until
                // lshk_ivf_free (documented contract). The loader checks
                // the file's rows and dim against ws again.
                unsafe { Ivf::load_borrowed(p, ws, w_stride)? }
            }
            // A malformed parameter record: the loader names the problem.
            _ => Ivf::load(p)?,
        };
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(ivf).cast() };
        Ok(())
    })
}

/// Shape of the index: writes rows, dim and nlist (the number of lists)
/// into the non-NULL pointers among `rows`, `dim`, `nlist`.
///
/// Errors: NULL_POINTER (`ivf`), INVALID_HANDLE, INVALID_ARGUMENT (a
/// misaligned output). Nothing is written on error.
///
/// # Safety
/// Non-NULL outputs must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_shape(
    ivf: *const lshk_ivf,
    rows: *mut usize,
    dim: *mut usize,
    nlist: *mut u32,
) -> lshk_status {
    boundary("lshk_ivf_shape", || {
        // SAFETY: forwarded caller contract.
        let ix = unsafe { ivf_ref(ivf)? };
        for (ok, name) in [
            (rows.is_aligned(), "rows"),
            (dim.is_aligned(), "dim"),
            (nlist.is_aligned(), "nlist"),
        ] {
            if !ok {
                bail!(InvalidArgument, "`{name}` is misaligned");
            }
        }
        // SAFETY: non-NULL outputs are aligned (checked) and writable.
        unsafe {
            if !rows.is_null() {
                *rows = ix.rows();
            }
            if !dim.is_null() {
                *dim = ix.dim();
            }
            if !nlist.is_null() {
                *nlist = ix.nlist() as u32;
            }
        }
        Ok(())
    })
}

/// Bytes held by the index: centroids, lists, codes, bias and its f32 copy
/// of the rows (a borrowed W is the caller's and not counted).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (misaligned
/// `out`).
///
/// # Safety
/// `out` must be a writable size_t.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_memory_bytes(
    ivf: *const lshk_ivf,
    out: *mut usize,
) -> lshk_status {
    boundary("lshk_ivf_memory_bytes", || {
        check_out(out)?;
        // SAFETY: forwarded caller contract.
        let ix = unsafe { ivf_ref(ivf)? };
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = ix.memory_bytes() };
        Ok(())
    })
}

/// What lshk_ivf_calibrate measured on the sample queries. The caller sets
/// `struct_size` to sizeof(lshk_ivf_calibration); the library writes every
/// other field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_ivf_calibration {
    /// sizeof(lshk_ivf_calibration) as the caller knows it.
    pub struct_size: u32,
    /// 1 when `search` met the target recall on the sample, else 0 (then
    /// `search` is the best point measured).
    pub met: u32,
    /// The parameters to pass to lshk_ivf_query (its struct_size set):
    /// the cheaper of the fixed and the adaptive point, by rows scanned.
    pub search: lshk_ivf_search,
    /// Recall@k of `search` on the sample.
    pub recall: f32,
    /// The smallest fixed nprobe that met the target (or the best
    /// measured), with its recall.
    pub fixed_nprobe: u32,
    pub fixed_recall: f32,
    /// The smallest adaptive reach (steps of 1/16, at most 16) that met
    /// the target (or the best measured), with its recall.
    pub adaptive_reach: f32,
    pub adaptive_recall: f32,
    /// The 95 % lower confidence bound of `recall` (over the per-query
    /// recalls), which is what must reach the target.
    pub recall_lower: f32,
    /// Mean rows scanned per sample query: `search`'s, the fixed point's
    /// and the adaptive point's.
    pub scanned: f64,
    pub fixed_scanned: f64,
    pub adaptive_scanned: f64,
}

/// Chooses the search parameters for a recall target from sample queries:
/// computes the exact top-k of the `nq` sample queries (row i at
/// `q + i * q_stride`, `q_stride >= dim` floats; held-out queries of the
/// real workload, a few hundred), then the smallest fixed nprobe and the
/// smallest adaptive reach whose recall@k on them reaches `target_recall`
/// (in (0, 1]) with `rerank` exact re-scores, by its 95 % lower confidence
/// bound (`out->recall_lower`), and returns the one that scans fewer rows
/// (docs/ivf.md, "Calibration"). Only measured points are returned, so
/// `out->recall_lower >= target_recall` when `out->met` is 1. Deterministic (the
/// same on every tier and thread count; rows scanned, not time, decide).
/// `threads` runs the sample's searches in parallel (0 = all cores).
/// Thread-safe on a shared index (it only searches).
///
/// Errors: NULL_POINTER (`ivf`, `out`, `q` with nq > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (nq or k 0, target_recall not in (0, 1], q_stride <
/// dim, `out` misaligned or its struct_size too small, `out` overlapping
/// `q`), NON_FINITE (a NaN or infinite query value, or a query whose scores could overflow f32), SIZE_OVERFLOW.
/// Nothing is written on error.
///
/// # Safety
/// `q` must hold (nq-1)*q_stride + dim readable floats; `out` must be a
/// writable lshk_ivf_calibration whose struct_size the caller set.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_ivf_calibrate(
    ivf: *const lshk_ivf,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    k: u32,
    target_recall: f32,
    rerank: u32,
    threads: u32,
    out: *mut lshk_ivf_calibration,
) -> lshk_status {
    boundary("lshk_ivf_calibrate", || {
        // SAFETY: forwarded caller contract.
        let ix = unsafe { ivf_ref(ivf)? };
        // SAFETY: forwarded caller contract.
        let Some(size) = (unsafe { check_out_struct(out, "out")? }) else {
            bail!(NullPointer, "`out` is NULL");
        };
        let dim = ix.dim();
        let ql = strided_len(nq, dim, q_stride, "q")?;
        check_disjoint(&[span(out, 1, "out")?], &[span(q, ql, "q")?])?;
        // SAFETY: caller contract for q.
        let qs = unsafe { slice_in(q, ql, "q")? };
        let c: Calibration = ix.calibrate(
            qs,
            nq,
            q_stride,
            k as usize,
            target_recall,
            rerank,
            threads as usize,
        )?;
        let r = lshk_ivf_calibration {
            struct_size: size,
            met: u32::from(c.met),
            search: lshk_ivf_search {
                struct_size: std::mem::size_of::<lshk_ivf_search>() as u32,
                nprobe: c.params.nprobe,
                rerank: c.params.rerank,
                reach: c.params.reach,
            },
            recall: c.recall,
            fixed_nprobe: c.fixed.0,
            fixed_recall: c.fixed.1,
            adaptive_reach: c.adaptive.0,
            adaptive_recall: c.adaptive.1,
            recall_lower: c.recall_lower,
            scanned: c.scanned,
            fixed_scanned: c.fixed.2,
            adaptive_scanned: c.adaptive.2,
        };
        // SAFETY: checked non-NULL, aligned and large enough above; written
        // only on success.
        unsafe { *out = r };
        Ok(())
    })
}

/// Label-aware lists (HALOS's label-aware buckets on the IVF lists):
/// finds the list each of `n` training queries visits first (row i at
/// `queries + i * q_stride`, `q_stride >= dim`, in floats; the best list by
/// the same estimate a search uses), counts per list how often each label
/// occurs with the queries that land there, and gives every list its
/// `label_cap` most frequent labels (ties to the smaller id; 0 keeps all)
/// beside its rows (policy BESIDE) or instead of them (policy INSTEAD; a
/// list that received no label keeps its rows). Labels are CSR, as in
/// lshk_index_train_labels (`label_offsets` n + 1 non-decreasing entries,
/// the first need not be 0; labels are row ids < rows). `p` NULL =
/// defaults. Centroids and list estimates do not change, so a query ranks
/// the lists as before. A row may then stand in several lists: searches
/// re-rank and return each id once. Deterministic (any tier or thread
/// count). Saved with the index and reported by lshk_ivf_label_info after
/// a load. Not available with CODES_PQ4 (INVALID_ARGUMENT).
///
/// EXCLUSIVE ACCESS: unlike every other lshk_ivf function this one changes
/// the index; no other call on `ivf` (searches included) may run
/// concurrently. An index is trained at most once.
///
/// Everything is validated before the index changes; on error it is
/// unchanged. Errors: NULL_POINTER (`ivf`, `queries` with n > 0,
/// `label_offsets`, `labels` with label_offsets[n] > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (q_stride < dim, struct_size too small, a bad policy,
/// label_offsets decreasing (the message names the position), an index
/// already trained, PQ4 codes), INDEX_OUT_OF_RANGE (a label >= rows; the
/// message names its position), NON_FINITE (NaN/infinity in a query, or a query whose scores could
/// overflow f32),
/// BUFFER_TOO_SMALL, SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `ivf` NULL or from lshk_ivf_build/_load, not in use by another thread;
/// `queries` must hold (n-1)*q_stride + dim readable floats (n > 0),
/// `label_offsets` n + 1 values, `labels` label_offsets[n] values; `p`
/// NULL or a valid params struct.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_train_labels(
    ivf: *mut lshk_ivf,
    queries: *const f32,
    n: usize,
    q_stride: usize,
    label_offsets: *const usize,
    labels: *const u32,
    p: *const lshk_label_params,
) -> lshk_status {
    boundary("lshk_ivf_train_labels", || {
        // SAFETY: forwarded caller contract (ivf NULL or from lshk, and
        // not shared during the call).
        let ix = unsafe { handle_mut::<Ivf>(slot_mut(ivf), "ivf")? };
        // SAFETY: forwarded caller contract.
        let lp = unsafe { read_label_params(p)? };
        // SAFETY: forwarded caller contract.
        let (q, off, ys) =
            unsafe { training_pairs(queries, n, q_stride, ix.dim(), label_offsets, labels)? };
        ix.train_labels(q, n, q_stride, off, ys, &lp)
    })
}

/// Whether the index was trained with labels (also after a load):
/// `*trained` = 1 or 0; when trained and `params` is not NULL, `*params`
/// receives the training parameters (the caller sets
/// `params->struct_size`; lshk writes the other fields only). Outputs are
/// written only on success. Thread-safe (read-only).
///
/// Errors: NULL_POINTER (`ivf`, `trained`), INVALID_HANDLE,
/// INVALID_ARGUMENT (misaligned output, struct_size too small).
///
/// # Safety
/// `trained` writable; `params` NULL or a writable params struct holding
/// its struct_size.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_label_info(
    ivf: *const lshk_ivf,
    trained: *mut u32,
    params: *mut lshk_label_params,
) -> lshk_status {
    boundary("lshk_ivf_label_info", || {
        // SAFETY: forwarded caller contract.
        let ix = unsafe { ivf_ref(ivf)? };
        // SAFETY: forwarded caller contract.
        unsafe { write_label_info(ix.label_state(), trained, params) }
    })
}

/// Releases an IVF index (a borrowed W is not touched). NULL is a no-op; a
/// freed or foreign handle is INVALID_HANDLE.
///
/// # Safety
/// `ivf` is NULL or a handle from lshk_ivf_build/_load that no other
/// thread is using.
#[no_mangle]
pub unsafe extern "C" fn lshk_ivf_free(ivf: *mut lshk_ivf) -> lshk_status {
    boundary("lshk_ivf_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Ivf>(slot_mut(ivf), "ivf") }
    })
}
