//! C entry points of the gathered matmul and its epilogues
//! (`lshk_gathered_matmul_*`, `lshk_convert_*`, `lshk_quantize_rows_i8`,
//! `lshk_topk`, `lshk_topk_merge`, `lshk_softmax`).

use super::index::lshk_weights_view;
use super::*;
use crate::matmul::{self, WeightMatrix, Weights};

/// Borrows the CSR offsets (`nq + 1` entries) and checks them against
/// `total` (or, with `None`, takes `offsets[nq]` as the total).
///
/// # Safety
/// `offsets` holds nq + 1 readable size_t (caller contract).
unsafe fn offsets_in<'a>(
    offsets: *const usize,
    nq: usize,
    total: Option<usize>,
) -> Result<(&'a [usize], usize)> {
    let n1 = nq
        .checked_add(1)
        .ok_or_else(|| Error::new(Status::SizeOverflow, "nq + 1 overflows"))?;
    // SAFETY: forwarded caller contract.
    let offs = unsafe { slice_in(offsets, n1, "offsets")? };
    let total = total.unwrap_or(offs[nq]);
    matmul::check_offsets(offs, nq, total, "out")?;
    Ok((offs, total))
}

#[derive(Clone, Copy)]
enum Dtype {
    F32,
    Bf16,
    F16,
    I8,
}

#[allow(clippy::too_many_arguments)]
unsafe fn matmul_impl(
    func: &str,
    tier: Option<lshk_isa>,
    dtype: Dtype,
    w: *const libc::c_void,
    scales: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    bias: *const f32,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    ids: *const u32,
    offsets: *const usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    boundary(func, || {
        let tier = match tier {
            Some(t) => isa_from_c(t)?,
            None => crate::isa::active(),
        };
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let wl = strided_len(rows, dim, w_stride, "w")?;
        let ql = strided_len(nq, dim, q_stride, "q")?;
        // SAFETY (all slices below): the documented caller contract says each
        // pointer holds the number of elements computed here; slice_in checks
        // NULL, alignment and overflow first.
        let (weights, wspan): (Weights<'_>, Span<'_>) = unsafe {
            match dtype {
                Dtype::F32 => {
                    let s = slice_in(w.cast::<f32>(), wl, "w")?;
                    (Weights::F32(s), span_of(s, "w"))
                }
                Dtype::Bf16 => {
                    let s = slice_in(w.cast::<u16>(), wl, "w")?;
                    (Weights::Bf16(s), span_of(s, "w"))
                }
                Dtype::F16 => {
                    let s = slice_in(w.cast::<u16>(), wl, "w")?;
                    (Weights::F16(s), span_of(s, "w"))
                }
                Dtype::I8 => {
                    let s = slice_in(w.cast::<i8>(), wl, "w")?;
                    let sc = slice_in(scales, rows, "scales")?;
                    (Weights::I8 { w: s, scales: sc }, span_of(s, "w"))
                }
            }
        };
        let bias = if bias.is_null() {
            None
        } else {
            // SAFETY: as above (non-NULL bias holds `rows` floats).
            Some(unsafe { slice_in(bias, rows, "bias")? })
        };
        // SAFETY: as above.
        let qs = unsafe { slice_in(q, ql, "q")? };
        // SAFETY: as above.
        let (offs, _) = unsafe { offsets_in(offsets, nq, Some(out_len))? };
        // SAFETY: as above; offsets[nq] == out_len was just checked.
        let idss = unsafe { slice_in(ids, out_len, "ids")? };
        // Overlap checks on the raw ranges first, so no `&mut` ever aliases.
        let scales: &[f32] = match weights {
            Weights::I8 { scales, .. } => scales,
            _ => &[],
        };
        check_disjoint(
            &[span(out, out_len, "out")?],
            &[
                wspan,
                span_of(qs, "q"),
                span_of(idss, "ids"),
                span_of(offs, "offsets"),
                span_of(bias.unwrap_or(&[]), "bias"),
                span_of(scales, "scales"),
            ],
        )?;
        // SAFETY: as above; `out` is writable and overlaps no input.
        let outs = unsafe { slice_out(out, out_len, "out")? };
        let mut m = WeightMatrix::new(weights, rows, dim, w_stride)?;
        if let Some(b) = bias {
            m = m.with_bias(b)?;
        }
        m.matmul_isa(tier, qs, nq, q_stride, idss, offs, outs)
    })
}

/// Reads a caller's weights view into the matmul's arguments.
///
/// # Safety
/// `w` is NULL or a readable lshk_weights_view of its struct_size.
unsafe fn read_view(w: *const lshk_weights_view) -> Result<(Dtype, lshk_weights_view)> {
    if w.is_null() {
        bail!(NullPointer, "`w` is NULL");
    }
    if !w.is_aligned() {
        bail!(InvalidArgument, "`w` is misaligned");
    }
    // SAFETY: non-NULL, aligned; struct_size is the first field.
    let size = unsafe { *w.cast::<u32>() } as usize;
    if size < std::mem::size_of::<lshk_weights_view>() {
        bail!(
            InvalidArgument,
            "w->struct_size is {size}, less than sizeof(lshk_weights_view) = {}",
            std::mem::size_of::<lshk_weights_view>()
        );
    }
    // SAFETY: as above; the struct holds at least our fields.
    let v = unsafe { *w };
    let dtype = match v.storage {
        super::index::LSHK_STORAGE_BORROWED_F32 | super::index::LSHK_STORAGE_F32 => Dtype::F32,
        super::index::LSHK_STORAGE_BF16 => Dtype::Bf16,
        super::index::LSHK_STORAGE_F16 => Dtype::F16,
        super::index::LSHK_STORAGE_I8 => Dtype::I8,
        s => bail!(
            InvalidArgument,
            "w->storage {s} is not an LSHK_STORAGE_* value (0..=4)"
        ),
    };
    if !matches!(dtype, Dtype::I8) && !v.scales.is_null() {
        bail!(
            InvalidArgument,
            "w->scales is set but w->storage is not LSHK_STORAGE_I8"
        );
    }
    Ok((dtype, v))
}

/// Gathered matmul: for every query `i < nq` and every `j` in its segment
/// `offsets[i] .. offsets[i+1]`,
/// `out[j] = dot(W[ids[j]], q[i]) + (bias ? bias[ids[j]] : 0)`.
///
/// * `w`: W and the bias as an lshk_weights_view (an index's, or the
///   caller's own matrix described the same way).
/// * `q`: `nq` rows of `dim` floats at stride `q_stride >= dim`.
/// * `ids`, `offsets`: CSR candidates (the bucket gather's output):
///   `offsets` has `nq + 1` entries, `offsets[0] == 0`, non-decreasing,
///   `offsets[nq] == out_len`; `ids` has `out_len` entries, each `< rows`
///   (duplicates allowed).
/// * `out`: `out_len` floats; must not overlap any input.
///
/// The 16-bit and int8 rows are widened to f32 exactly (int8: times its
/// scale, rounded once) and accumulated in f32 (FMA on the SIMD tiers);
/// NaN and infinity propagate. Error bound per output, with u = 2^-24 and
/// W the widened rows: `gamma(dim+2) * (sum_t |W_t q_t| + |bias|)`,
/// `gamma(n) = n u/(1 - n u)` (int8: gamma(dim+3)). Runs on the active
/// tier; stateless and thread-safe.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (dim 0, stride < dim, struct_size
/// too small, a bad storage value, scales without I8, bad offsets,
/// misaligned pointer, `out` overlapping an input), INDEX_OUT_OF_RANGE (the
/// first offending position: `index out of range: ids[p] = v (query i)`),
/// SIZE_OVERFLOW.
///
/// # Safety
/// `w` NULL or a readable lshk_weights_view whose pointers hold the
/// elements stated above; every other pointer likewise (or NULL with 0
/// elements); `out` is writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_gathered_matmul(
    w: *const lshk_weights_view,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    ids: *const u32,
    offsets: *const usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        view_matmul(
            "lshk_gathered_matmul",
            None,
            w,
            q,
            nq,
            q_stride,
            ids,
            offsets,
            out,
            out_len,
        )
    }
}

/// lshk_gathered_matmul on tier `isa` (UNSUPPORTED_ISA when this CPU lacks
/// it), for tests and benchmarks. Same bound on every tier.
///
/// # Safety
/// As lshk_gathered_matmul.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_gathered_matmul_isa(
    isa: lshk_isa,
    w: *const lshk_weights_view,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    ids: *const u32,
    offsets: *const usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        view_matmul(
            "lshk_gathered_matmul_isa",
            Some(isa),
            w,
            q,
            nq,
            q_stride,
            ids,
            offsets,
            out,
            out_len,
        )
    }
}

/// The body of lshk_gathered_matmul / _isa.
///
/// # Safety
/// Their contracts.
#[allow(clippy::too_many_arguments)]
unsafe fn view_matmul(
    func: &str,
    tier: Option<lshk_isa>,
    w: *const lshk_weights_view,
    q: *const f32,
    nq: usize,
    q_stride: usize,
    ids: *const u32,
    offsets: *const usize,
    out: *mut f32,
    out_len: usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    let v = match unsafe { read_view(w) } {
        Ok(v) => v,
        Err(e) => return boundary(func, || Err(e)),
    };
    let (dtype, v) = v;
    // SAFETY: forwarded caller contract (the view's pointers).
    unsafe {
        matmul_impl(
            func, tier, dtype, v.w, v.scales, v.rows, v.dim, v.w_stride, v.bias, q, nq, q_stride,
            ids, offsets, out, out_len,
        )
    }
}

/// # Safety
/// `src` holds n readable `S`, `dst` n writable `D`.
unsafe fn convert_impl<S, D>(
    src: *const S,
    n: usize,
    dst: *mut D,
    f: fn(&[S], &mut [D]) -> Result<()>,
) -> Result<()> {
    // SAFETY: caller contract (n elements each); checked by slice_*.
    let s = unsafe { slice_in(src, n, "src")? };
    check_disjoint(&[span(dst, n, "dst")?], &[span_of(s, "src")])?;
    // SAFETY: as above; no overlap with `src`.
    let d = unsafe { slice_out(dst, n, "dst")? };
    f(s, d)
}

/// Converts `n` values from the element type `from` to `to`, each an
/// LSHK_STORAGE_* value naming an element type (F32 float, BF16 and F16
/// uint16_t bit patterns); one side must be F32:
/// * F32 -> BF16: round to nearest, ties to even; overflow rounds to
///   infinity; a NaN stays a NaN (made quiet, sign and upper payload kept).
/// * F32 -> F16: round to nearest, ties to even (as F16C `vcvtps2ph` with
///   RNE); magnitudes from 65520 up become infinity, small values
///   subnormals or signed zero; NaN stays NaN (quiet).
/// * BF16 -> F32, F16 -> F32: exact (subnormals, infinities, NaN included).
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (a pair other than the four
/// above, misaligned, `src` and `dst` overlapping), SIZE_OVERFLOW.
/// Thread-safe.
///
/// # Safety
/// `src` holds n readable elements of `from`, `dst` n writable of `to`.
#[no_mangle]
pub unsafe extern "C" fn lshk_convert(
    from: u32,
    src: *const libc::c_void,
    n: usize,
    to: u32,
    dst: *mut libc::c_void,
) -> lshk_status {
    use super::index::{
        LSHK_STORAGE_BF16 as BF16, LSHK_STORAGE_F16 as F16, LSHK_STORAGE_F32 as F32,
    };
    boundary("lshk_convert", || {
        // SAFETY (each arm): forwarded caller contract for `from` / `to`.
        unsafe {
            match (from, to) {
                (F32, BF16) => convert_impl(src.cast(), n, dst.cast(), matmul::convert_f32_to_bf16),
                (F32, F16) => convert_impl(src.cast(), n, dst.cast(), matmul::convert_f32_to_f16),
                (BF16, F32) => convert_impl(src.cast(), n, dst.cast(), matmul::convert_bf16_to_f32),
                (F16, F32) => convert_impl(src.cast(), n, dst.cast(), matmul::convert_f16_to_f32),
                _ => bail!(
                    InvalidArgument,
                    "lshk_convert converts F32 to BF16 or F16 and back (LSHK_STORAGE_F32 = 1, \
                     _BF16 = 2, _F16 = 3), not {from} to {to}"
                ),
            }
        }
    })
}

/// Symmetric per-row int8 quantisation (LSHK_STORAGE_I8's rows): for
/// each of `rows` rows (row r at `w + r * w_stride`, `dim` floats),
/// `scales[r] = max_t |w_t| / 127` (0 for an all-zero row) and
/// `out[r * out_stride + t] = round_ties_even(w_t / scales[r])`, clamped to
/// -127..=127, so `|w_t - scales[r] * out_t| <= scales[r] * (1/2 + 2^-17)`.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (stride < dim, misaligned,
/// overlap), NON_FINITE (a NaN or infinite weight, named), SIZE_OVERFLOW.
/// Thread-safe.
///
/// # Safety
/// `w` holds (rows-1)*w_stride + dim floats, `out` (rows-1)*out_stride + dim
/// writable bytes, `scales` rows writable floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_quantize_rows_i8(
    w: *const f32,
    rows: usize,
    dim: usize,
    w_stride: usize,
    out: *mut i8,
    out_stride: usize,
    scales: *mut f32,
) -> lshk_status {
    boundary("lshk_quantize_rows_i8", || {
        let wl = strided_len(rows, dim, w_stride, "w")?;
        let ol = strided_len(rows, dim, out_stride, "out")?;
        // SAFETY: caller contract; pointers checked by slice_*.
        let ws = unsafe { slice_in(w, wl, "w")? };
        // Overlap checks on the raw ranges before any `&mut` exists.
        check_disjoint(
            &[span(out, ol, "out")?, span(scales, rows, "scales")?],
            &[span_of(ws, "w")],
        )?;
        // SAFETY: as above; the outputs overlap nothing.
        let os = unsafe { slice_out(out, ol, "out")? };
        // SAFETY: as above.
        let ss = unsafe { slice_out(scales, rows, "scales")? };
        matmul::quantize_rows_i8(ws, rows, dim, w_stride, os, out_stride, ss)
    })
}

/// Per query `i < nq`, the `k` best of its candidates
/// `scores[offsets[i] .. offsets[i+1]]` (ids from `ids` at the same
/// positions, or, if `ids` is NULL, the position inside the segment) into
/// `out_ids[i*k .. i*k + k]` and `out_scores[i*k ..]`: largest score first,
/// equal scores by smaller id, NaN never selected; when fewer than k
/// non-NaN candidates exist the rest is padded with id UINT32_MAX and score
/// -INFINITY. Duplicate ids are separate candidates. `offsets` has nq + 1
/// entries (0 first, non-decreasing); `scores` and `ids` have `offsets[nq]`
/// entries; each output `nq * k`. k = 0 writes nothing. Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (bad offsets, misaligned, outputs
/// overlapping inputs), SIZE_OVERFLOW (nq * k).
///
/// # Safety
/// The pointers hold the element counts above.
#[no_mangle]
pub unsafe extern "C" fn lshk_topk(
    scores: *const f32,
    ids: *const u32,
    offsets: *const usize,
    nq: usize,
    k: u32,
    out_ids: *mut u32,
    out_scores: *mut f32,
) -> lshk_status {
    boundary("lshk_topk", || {
        // SAFETY: caller contract; every pointer checked by slice_*.
        let (offs, total) = unsafe { offsets_in(offsets, nq, None)? };
        // SAFETY: as above.
        let s = unsafe { slice_in(scores, total, "scores")? };
        let idv = if ids.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { slice_in(ids, total, "ids")? })
        };
        let need = crate::error::checked_mul(nq, k as usize, "nq * k")?;
        // Overlap checks on the raw ranges before any `&mut` exists.
        check_disjoint(
            &[
                span(out_ids, need, "out_ids")?,
                span(out_scores, need, "out_scores")?,
            ],
            &[
                span_of(s, "scores"),
                span_of(offs, "offsets"),
                span_of(idv.unwrap_or(&[]), "ids"),
            ],
        )?;
        // SAFETY: as above; the outputs overlap nothing.
        let oi = unsafe { slice_out(out_ids, need, "out_ids")? };
        // SAFETY: as above.
        let os = unsafe { slice_out(out_scores, need, "out_scores")? };
        matmul::topk(s, idv, offs, k as usize, oi, os)
    })
}

/// One shard's answers to the queries of lshk_topk_merge: `k` entries per
/// query (query i's at `i * k`) with the shard's own row ids (UINT32_MAX =
/// padding, skipped) and scores, as lshk_index_query writes them, and the
/// shard's first row in the whole layer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_shard_topk {
    pub ids: *const u32,
    pub scores: *const f32,
    pub k: usize,
    pub first_row: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// A layer split into shards of consecutive rows: per query `i < nq`, the
/// `k` best entries over every shard's list into `out_ids[i*k ..]` and
/// `out_scores[i*k ..]`, ids made global (`first_row + id`): largest
/// score first, equal scores by the smaller global id, NaN never
/// selected, padded with UINT32_MAX / -INFINITY. Ranked as one index over
/// all rows ranks: with each shard's exact top-k_s (k_s >= k), the exact
/// top-k of the layer. Shards hold disjoint rows. Thread-safe.
///
/// Errors: NULL_POINTER (`shards` with n_shards > 0, a shard's ids or
/// scores with nq * k_s > 0, an output with nq * k > 0), INVALID_ARGUMENT
/// (a reserved field not 0, misaligned, outputs overlapping inputs),
/// INDEX_OUT_OF_RANGE (first_row + id reaches UINT32_MAX), SIZE_OVERFLOW.
///
/// # Safety
/// `shards` holds n_shards entries, each shard's ids and scores nq * k_s
/// readable values (k_s its own `k`); the outputs hold nq * k.
#[no_mangle]
pub unsafe extern "C" fn lshk_topk_merge(
    shards: *const lshk_shard_topk,
    n_shards: usize,
    nq: usize,
    k: usize,
    out_ids: *mut u32,
    out_scores: *mut f32,
) -> lshk_status {
    boundary("lshk_topk_merge", || {
        // SAFETY: caller contract; the pointer is checked by slice_in.
        let cs = unsafe { slice_in(shards, n_shards, "shards")? };
        // The shards' slices on the stack (a heap buffer only for more than
        // MERGE_STACK_SHARDS shards): a per-batch call allocates nothing.
        let mut on_stack = [matmul::ShardTopK::default(); MERGE_STACK_SHARDS];
        let mut on_heap: Vec<matmul::ShardTopK<'_>>;
        let parts: &mut [matmul::ShardTopK<'_>] = if cs.len() <= MERGE_STACK_SHARDS {
            &mut on_stack[..cs.len()]
        } else {
            on_heap = crate::error::try_vec(cs.len(), "shards")?;
            &mut on_heap[..]
        };
        for (s, c) in cs.iter().enumerate() {
            if c.reserved != 0 {
                crate::bail!(
                    InvalidArgument,
                    "shards[{s}].reserved is {}; it must be 0",
                    c.reserved
                );
            }
            let n = crate::error::checked_mul(nq, c.k, "nq * shard k")?;
            // SAFETY: caller contract; every pointer checked by slice_in.
            let ids = unsafe { slice_in(c.ids, n, "shards[].ids")? };
            // SAFETY: as above.
            let scores = unsafe { slice_in(c.scores, n, "shards[].scores")? };
            parts[s] = matmul::ShardTopK {
                ids,
                scores,
                k: c.k,
                first_row: c.first_row,
            };
        }
        let need = crate::error::checked_mul(nq, k, "nq * k")?;
        // Overlap checks on the raw ranges before any `&mut` exists: the
        // outputs against each other and `shards`, then against each
        // shard's lists.
        let outs = [
            span(out_ids, need, "out_ids")?,
            span(out_scores, need, "out_scores")?,
        ];
        check_disjoint(&outs, &[span_of(cs, "shards")])?;
        for p in parts.iter() {
            check_disjoint(
                &outs,
                &[
                    span_of(p.ids, "shards[].ids"),
                    span_of(p.scores, "shards[].scores"),
                ],
            )?;
        }
        // SAFETY: as above; the outputs overlap nothing.
        let oi = unsafe { slice_out(out_ids, need, "out_ids")? };
        // SAFETY: as above.
        let os = unsafe { slice_out(out_scores, need, "out_scores")? };
        matmul::topk_merge(parts, nq, k, oi, os)
    })
}

/// Shards whose slices lshk_topk_merge keeps on the stack.
const MERGE_STACK_SHARDS: usize = 32;

/// Per query `i < nq`, the softmax of its candidate scores
/// `scores[offsets[i] .. offsets[i+1]]` into the same positions of `out`:
/// `exp(x_j - m) / sum_t exp(x_t - m)` with `m` the segment maximum (no
/// overflow for any finite input), the sum taken in double. If `lse` is not
/// NULL, `lse[i]` (nq floats) receives the log-sum-exp `m + log(sum)`.
/// `out == scores` (in place) is allowed; any other overlap is not.
/// Special cases: a NaN score makes its segment NaN (lse NaN); +INFINITY
/// scores share the mass equally (the others get 0, lse +INFINITY); an
/// all -INFINITY segment gives NaN (lse -INFINITY); an empty segment writes
/// nothing (lse -INFINITY). Each probability is within
/// `(2|x_j - m| + 8) * 2^-24` relative of the exact value. Thread-safe.
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (bad offsets, misaligned, partial
/// overlap), SIZE_OVERFLOW.
///
/// # Safety
/// `offsets` holds nq + 1 entries, `scores` and `out` offsets[nq] floats,
/// `lse` NULL or nq floats.
#[no_mangle]
pub unsafe extern "C" fn lshk_softmax(
    scores: *const f32,
    offsets: *const usize,
    nq: usize,
    out: *mut f32,
    lse: *mut f32,
) -> lshk_status {
    boundary("lshk_softmax", || {
        // SAFETY: caller contract; pointers checked by slice_* / span.
        // Overlap checks use the raw ranges before any `&mut` is formed.
        let (offs, total) = unsafe { offsets_in(offsets, nq, None)? };
        let in_place = std::ptr::eq(scores, out) && total > 0;
        // SAFETY: as above.
        let s = unsafe { slice_in(scores, total, "scores")? };
        // In place, `out` is `scores`: the lse-vs-out check covers both.
        check_disjoint(
            &[
                span(out, total, "out")?,
                span(lse, if lse.is_null() { 0 } else { nq }, "lse")?,
            ],
            &[
                span_of(if in_place { &[] } else { s }, "scores"),
                span_of(offs, "offsets"),
            ],
        )?;
        let lse = if lse.is_null() {
            None
        } else {
            // SAFETY: as above; overlaps nothing.
            Some(unsafe { slice_out(lse, nq, "lse")? })
        };
        if in_place {
            // SAFETY: as above; `scores` is `out`, no other view is used.
            let o = unsafe { slice_out(out, total, "out")? };
            return matmul::softmax_in_place(o, offs, lse);
        }
        // SAFETY: as above; `out` overlaps no input.
        let o = unsafe { slice_out(out, total, "out")? };
        matmul::softmax(s, offs, o, lse)
    })
}
