//! C entry points of the LSH tables and the gather (`lshk_tables_*`).

use std::cell::RefCell;

use super::*;
use crate::source::lsh::tables::{BudgetRule, GatherInput, GatherParams, GatherResult, Tables};

/// L LSH tables over n rows (flat CSR per table, ids ascending per bucket).
/// The functions taking a non-const `lshk_tables *` (lshk_tables_update,
/// _add_labels, _free) need EXCLUSIVE access, e.g. by a reader-writer
/// lock (so queries see the old or the new tables, never a mix).
pub struct lshk_tables {
    _private: [u8; 0],
}

impl HandleKind for Tables {
    const MAGIC: u64 = 0x5342_4154_4b48_534c; // "LSHKTABS"
    const NAME: &'static str = "lshk_tables";
}

unsafe fn tables_ref<'a>(t: *const lshk_tables) -> Result<&'a Tables> {
    // SAFETY: forwarded caller contract (t is NULL or from lshk).
    unsafe { handle_ref::<Tables>(slot(t), "t") }
}

/// Statistics of one table (lshk_tables_stats).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lshk_table_stats {
    /// Buckets holding at least one id.
    pub nonempty_buckets: u64,
    /// Ids stored in the table (n, unless bucket_cap dropped some).
    pub stored_ids: u64,
    /// Ids in the largest bucket.
    pub largest_bucket: u32,
    /// Padding, written as 0.
    pub reserved: u32,
    /// Mean size of the non-empty buckets (stored_ids / nonempty_buckets;
    /// 0 for an empty table).
    pub mean_bucket_size: f64,
}

/// Options of lshk_tables_gather (see lshk_gather_params_default).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_gather_params {
    /// sizeof(lshk_gather_params).
    pub struct_size: u32,
    /// Keep the ids found in at least this many tables (default 1; 0 acts
    /// as 1; a value above L leaves only the forced ids).
    pub min_count: u32,
    /// Budget of distinct ids per query, forced ids included (default 0 =
    /// no limit); the exact rule is at lshk_tables_gather.
    pub max_candidates: u32,
    /// Extra buckets visited per table by query-directed multi-probing
    /// (default 0). Needs SimHash codes, `bits_per_table` and the query
    /// projections. At most min(2^K - 1, 4096).
    pub probes: u32,
    /// K, the SimHash codes' bits per table (for probes > 0; default 0).
    pub bits_per_table: u32,
}

/// The defaults documented at each field of lshk_gather_params;
/// struct_size = sizeof(lshk_gather_params).
#[no_mangle]
pub extern "C" fn lshk_gather_params_default() -> lshk_gather_params {
    let d = GatherParams::default();
    lshk_gather_params {
        struct_size: std::mem::size_of::<lshk_gather_params>() as u32,
        min_count: d.min_count,
        max_candidates: d.max_candidates,
        probes: d.probes,
        bits_per_table: d.bits_per_table,
    }
}

/// Builds L = `tables` LSH tables over `n` rows from their codes
/// (`codes[i * L + t]` = row i's code in table t, e.g. from
/// lshk_simhash_hash). Free them with lshk_tables_free.
///
/// Each table has 2^range_bits buckets (1 <= range_bits <= 24): a code
/// `c < 2^range_bits` is its own bucket, others are folded by the lowbias32
/// hash; `bucket_cap` > 0 keeps a seeded uniform sample of that many ids of
/// a larger bucket (both fixed for ever: docs/c-api.md, "Tables"). Ids are
/// ascending within a bucket.
///
/// `threads`: 0 = all cores; the result is the same for every count.
/// Memory: about 4 * (L * (2^range_bits + 1) + 2 * n * L) bytes (bucket
/// offsets, ids, and each row's bucket per table, kept for updates).
///
/// Errors: NULL_POINTER, INVALID_ARGUMENT (tables 0, range_bits outside
/// 1..=24, n >= 2^31), SIZE_OVERFLOW, ALLOCATION_FAILED (also, up front,
/// when that memory would exceed the machine's physical memory).
///
/// # Safety
/// `codes` must hold n*L readable u32 (or be NULL with n = 0); `out` must be
/// writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_tables_build(
    codes: *const u32,
    n: usize,
    tables: u32,
    range_bits: u32,
    bucket_cap: u32,
    seed: u64,
    threads: u32,
    out: *mut *mut lshk_tables,
) -> lshk_status {
    boundary("lshk_tables_build", || {
        if out.is_null() {
            bail!(NullPointer, "`out` is NULL");
        }
        if !(out as usize).is_multiple_of(std::mem::align_of::<*mut lshk_tables>()) {
            bail!(InvalidArgument, "`out` is misaligned");
        }
        if tables == 0 {
            bail!(InvalidArgument, "tables must be >= 1");
        }
        let len = crate::error::checked_mul(n, tables as usize, "n*L")?;
        // SAFETY: caller contract: codes holds n*L u32.
        let c = unsafe { slice_in(codes, len, "codes")? };
        let t = Tables::build(c, n, tables, range_bits, bucket_cap, seed, threads)?;
        // SAFETY: `out` checked non-NULL and aligned above.
        unsafe { *out = handle_new(t).cast() };
        Ok(())
    })
}

/// Releases tables.
///
/// # Safety
/// `t` is NULL or a handle from lshk_tables_build that no other thread is
/// using.
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_free(t: *mut lshk_tables) -> lshk_status {
    boundary("lshk_tables_free", || {
        // SAFETY: forwarded caller contract.
        unsafe { handle_free::<Tables>(slot_mut(t), "t") }
    })
}

/// Shape of the tables: writes n, L and range_bits into the non-NULL
/// pointers among `n`, `tables`, `range_bits`.
///
/// Errors: NULL_POINTER (`t`), INVALID_HANDLE, INVALID_ARGUMENT (misaligned).
///
/// # Safety
/// Non-NULL output pointers must be writable.
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_shape(
    t: *const lshk_tables,
    n: *mut usize,
    tables: *mut u32,
    range_bits: *mut u32,
) -> lshk_status {
    boundary("lshk_tables_shape", || {
        // SAFETY: forwarded caller contract.
        let t = unsafe { tables_ref(t)? };
        // Every output is checked before any is written: a misaligned
        // pointer must never be dereferenced (UB, an abort in debug builds).
        if !(n as usize).is_multiple_of(std::mem::align_of::<usize>()) {
            bail!(InvalidArgument, "`n` is misaligned");
        }
        // SAFETY: non-NULL outputs are writable (caller contract).
        unsafe {
            write_u32_outs(&[
                (tables, t.tables() as u32, "tables"),
                (range_bits, t.range_bits(), "range_bits"),
            ])?
        };
        if !n.is_null() {
            // SAFETY: non-NULL, aligned (checked), writable (caller).
            unsafe { *n = t.rows() };
        }
        Ok(())
    })
}

/// Bytes held by the tables (CSR offsets and ids, the row-to-bucket map,
/// bookkeeping) into `*out`.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (misaligned).
///
/// # Safety
/// `t` is NULL or a handle from lshk; `out` a writable size_t.
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_memory_bytes(
    t: *const lshk_tables,
    out: *mut usize,
) -> lshk_status {
    boundary("lshk_tables_memory_bytes", || {
        super::check_out(out)?;
        // SAFETY: forwarded caller contract.
        let t = unsafe { tables_ref(t)? };
        // SAFETY: checked non-NULL and aligned.
        unsafe { *out = t.memory_bytes() };
        Ok(())
    })
}

/// Per-table statistics into `out[0 .. L]` (`out_len` >= L).
///
/// Errors: NULL_POINTER, INVALID_HANDLE, BUFFER_TOO_SMALL (out_len < L).
///
/// # Safety
/// `out` must hold `out_len` writable lshk_table_stats.
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_stats(
    t: *const lshk_tables,
    out: *mut lshk_table_stats,
    out_len: usize,
) -> lshk_status {
    boundary("lshk_tables_stats", || {
        // SAFETY: forwarded caller contract.
        let t = unsafe { tables_ref(t)? };
        let l = t.tables();
        if out_len < l {
            bail!(BufferTooSmall, "out_len is {out_len}, L = {l} tables");
        }
        // SAFETY: caller contract for `out`.
        let o = unsafe { slice_out(out, l, "out")? };
        for (d, s) in o.iter_mut().zip(t.stats()) {
            *d = lshk_table_stats {
                nonempty_buckets: s.nonempty_buckets,
                stored_ids: s.stored_ids,
                largest_bucket: s.largest_bucket,
                reserved: 0,
                mean_bucket_size: s.mean_bucket_size,
            };
        }
        Ok(())
    })
}

/// Moves rows `ids[j]` (j < count) to the buckets of their new codes
/// `new_codes[j * L .. (j + 1) * L]` (layout as lshk_tables_build); an id
/// listed twice takes its last codes. Afterwards the tables equal tables
/// built from the updated codes (bucket_cap sampling included). In each
/// table where a row changes bucket, only the buckets losing or gaining
/// rows are recomputed and spliced into a fresh copy of its ids (~n ids
/// plus O(2^range_bits) offsets; with bucket_cap > 0 also a scan of its n
/// row-to-bucket entries), tables spread over the build's threads: batch
/// the changed rows into one call. EXCLUSIVE access; nothing is changed
/// on error.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INDEX_OUT_OF_RANGE (an id >= n),
/// SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// `ids` holds `count` u32, `new_codes` count*L u32 (NULL with count 0).
#[no_mangle]
pub unsafe extern "C" fn lshk_tables_update(
    t: *mut lshk_tables,
    ids: *const u32,
    new_codes: *const u32,
    count: usize,
) -> lshk_status {
    boundary("lshk_tables_update", || {
        // SAFETY: forwarded caller contract (exclusive access).
        let t = unsafe { handle_mut::<Tables>(slot_mut(t), "t")? };
        let len = crate::error::checked_mul(count, t.tables(), "count*L")?;
        // SAFETY: caller contract.
        let i = unsafe { slice_in(ids, count, "ids")? };
        let c = unsafe { slice_in(new_codes, len, "new_codes")? };
        t.update(i, c)
    })
}

thread_local! {
    static RESULT: RefCell<GatherResult> = RefCell::new(GatherResult::default());
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_gather_params {
    const DEFAULT_FN: &'static str = "lshk_gather_params_default";
    fn defaults() -> Self {
        lshk_gather_params_default()
    }
}

/// Reads a caller's params struct (NULL = defaults).
pub(crate) unsafe fn read_params(p: *const lshk_gather_params) -> Result<GatherParams> {
    // SAFETY: forwarded caller contract.
    let p = unsafe { read_param_struct(p, "params")? };
    Ok(GatherParams {
        min_count: p.min_count,
        max_candidates: p.max_candidates,
        probes: p.probes,
        bits_per_table: p.bits_per_table,
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn gather_impl(
    func: &str,
    tier: Option<lshk_isa>,
    t: *const lshk_tables,
    codes: *const u32,
    q: usize,
    params: *const lshk_gather_params,
    budget: Option<*const lshk_budget_params>,
    projections: *const f32,
    projections_len: usize,
    forced_offsets: *const usize,
    forced_ids: *const u32,
    forced_ids_len: usize,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    counts: *mut u32,
    needed: *mut usize,
) -> lshk_status {
    boundary(func, || {
        let tier = match tier {
            Some(v) => isa_from_c(v)?,
            None => crate::isa::active(),
        };
        // SAFETY: forwarded caller contract.
        let t = unsafe { tables_ref(t)? };
        // SAFETY: forwarded caller contract.
        let p = unsafe { read_params(params)? };
        let rule = match budget {
            // SAFETY: forwarded caller contract.
            Some(b) => unsafe { read_budget(b)? },
            None => BudgetRule::MidBucket,
        };
        let l = t.tables();
        let cl = crate::error::checked_mul(q, l, "q*L")?;
        let q1 = q
            .checked_add(1)
            .ok_or_else(|| Error::new(Status::SizeOverflow, "q + 1 overflows"))?;
        // SAFETY: caller contract for every input buffer.
        let codes = unsafe { slice_in(codes, cl, "codes")? };
        let projections = unsafe { slice_in(projections, projections_len, "projections")? };
        let forced_ids = unsafe { slice_in(forced_ids, forced_ids_len, "forced_ids")? };
        let forced_offsets = if forced_offsets.is_null() {
            if forced_ids_len > 0 {
                bail!(
                    NullPointer,
                    "`forced_offsets` is NULL but forced ids are given"
                );
            }
            None
        } else {
            // SAFETY: caller contract: q + 1 offsets.
            Some(unsafe { slice_in(forced_offsets, q1, "forced_offsets")? })
        };
        if offsets.is_null() {
            bail!(NullPointer, "`offsets` is NULL (it needs q + 1 entries)");
        }
        if needed.is_null() {
            bail!(NullPointer, "`needed` is NULL");
        }
        // SAFETY: checked the output pointers' NULL-ness and alignment here.
        unsafe {
            check_out(offsets, q1, "offsets")?;
            check_out(needed, 1, "needed")?;
            check_out(ids, ids_len, "ids")?;
            if !counts.is_null() {
                check_out(counts, ids_len, "counts")?;
            }
        }
        let input = GatherInput {
            codes,
            q,
            projections: (p.probes > 0).then_some(projections),
            forced_offsets,
            forced_ids,
        };
        RESULT.with(|r| {
            let mut r = r.borrow_mut();
            t.gather_budget_isa(tier, &p, rule, &input, !counts.is_null(), &mut r)?;
            let need = r.ids.len();
            // Overlaps are checked on what would be written (the gathered
            // ids, or none when ids_len is too small), before `*needed`.
            let w = if ids_len < need { 0 } else { need };
            check_disjoint(
                &[
                    span(ids, w, "ids")?,
                    span(offsets, q1, "offsets")?,
                    span(counts, if counts.is_null() { 0 } else { w }, "counts")?,
                    span(needed, 1, "needed")?,
                ],
                &[
                    span_of(codes, "codes"),
                    span_of(projections, "projections"),
                    span_of(forced_ids, "forced_ids"),
                    span_of(forced_offsets.unwrap_or(&[]), "forced_offsets"),
                ],
            )?;
            // SAFETY: `needed` checked non-NULL and aligned.
            unsafe { *needed = need };
            if ids_len < need {
                bail!(
                    BufferTooSmall,
                    "ids_len is {ids_len}, the {q} queries gathered {need} ids \
                     (reported in *needed)"
                );
            }
            // SAFETY: caller contract for the outputs (lengths checked).
            unsafe {
                slice_out(ids, need, "ids")?.copy_from_slice(&r.ids);
                slice_out(offsets, q1, "offsets")?.copy_from_slice(&r.offsets);
                if !counts.is_null() {
                    slice_out(counts, need, "counts")?.copy_from_slice(&r.counts);
                }
            }
            Ok(())
        })
    })
}

/// Checks an output pointer (NULL only with len 0, alignment, size).
unsafe fn check_out<T>(p: *mut T, len: usize, name: &str) -> Result<()> {
    // SAFETY: slice_out only checks here; the slice is dropped unused.
    unsafe { slice_out(p, 0, name)? };
    if p.is_null() && len > 0 {
        bail!(NullPointer, "`{name}` is NULL but its length is {len}");
    }
    // Same limit as slice_in/slice_out: no object exceeds isize::MAX bytes.
    match len.checked_mul(std::mem::size_of::<T>()) {
        Some(b) if b <= isize::MAX as usize => Ok(()),
        _ => bail!(
            SizeOverflow,
            "`{name}`: {len} elements overflow the address space"
        ),
    }
}

/// Candidate rows for `q` queries. Query i's codes are
/// `codes[i * L .. (i + 1) * L]` (same hash family and layout as the build).
///
/// For each query:
/// 1. its forced ids `forced_ids[forced_offsets[i] .. forced_offsets[i+1]]`
///    (duplicates allowed) are always in the result;
/// 2. tables t = 0 .. L-1 are visited in order; in each, the query's bucket,
///    then `params->probes` multi-probe buckets: the K = bits_per_table bits
///    are ranked by |projection| ascending (ties: lower bit first, the
///    projections being `projections[(i * L + t) * K + k]` as written by
///    lshk_simhash_project), a probe flips a non-empty set of ranks, sets are
///    taken in ascending order of the sum of their |projections| (summed in
///    f64 in rank order; ties: the set with the smaller bitmask of ranks
///    first); a probe landing in a bucket already visited in this table is
///    skipped. A bucket's ids are visited ascending.
/// 3. with `max_candidates` > 0: before each visited id, if the number of
///    distinct ids seen so far (forced ids included) has reached
///    max_candidates, the visit of this query stops. So the result holds the
///    forced ids plus the first max_candidates - (distinct forced ids)
///    distinct ids in visiting order, filtered by min_count.
/// 4. output: the ids seen in at least `min_count` visited tables, plus the
///    forced ids, ascending and without duplicates.
///
/// Output (CSR): query i's ids are `ids[offsets[i] .. offsets[i+1]]` (q + 1
/// offsets from 0); `*needed` receives the total (offsets[q]). `counts`
/// (NULL = not wanted; ids_len u32) receives, parallel to ids, the number
/// of tables each id was found in (at most L; a forced id may have 0).
/// When `ids_len` < *needed the call returns BUFFER_TOO_SMALL and writes
/// only `*needed` (retry with ids_len >= *needed). `params` NULL =
/// defaults. `projections` (projections_len >= q*K*L, finite) is needed
/// only when probes > 0; `forced_offsets` NULL (with forced_ids_len 0)
/// means no forced ids. Runs on the active tier; its scratch (n bits, plus
/// a u32 per row when min_count > 1 or with counts) is per thread, reused.
///
/// Errors: NULL_POINTER, INVALID_HANDLE, INVALID_ARGUMENT (struct_size too
/// small, forced_offsets not starting at 0 / decreasing / beyond
/// forced_ids_len, probes without bits_per_table in 1..=32 or beyond
/// min(2^K - 1, 4096), misaligned pointers, an output (the written part
/// of `ids` / `counts`, `offsets`, `needed`) overlapping an input or
/// another output), INDEX_OUT_OF_RANGE (a forced id >= n),
/// BUFFER_TOO_SMALL (ids_len, projections_len), NON_FINITE (a NaN or
/// infinite projection), SIZE_OVERFLOW, ALLOCATION_FAILED.
///
/// # Safety
/// Every pointer holds the number of elements stated above (or is NULL where
/// allowed); outputs must not overlap inputs.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_tables_gather(
    t: *const lshk_tables,
    codes: *const u32,
    q: usize,
    params: *const lshk_gather_params,
    projections: *const f32,
    projections_len: usize,
    forced_offsets: *const usize,
    forced_ids: *const u32,
    forced_ids_len: usize,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    counts: *mut u32,
    needed: *mut usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        gather_impl(
            "lshk_tables_gather",
            None,
            t,
            codes,
            q,
            params,
            None,
            projections,
            projections_len,
            forced_offsets,
            forced_ids,
            forced_ids_len,
            ids,
            ids_len,
            offsets,
            counts,
            needed,
        )
    }
}

/// lshk_tables_gather on one chosen tier `isa` (for tests and benchmarks).
/// Every tier returns identical results.
///
/// Errors: as lshk_tables_gather, plus INVALID_ARGUMENT (bad `isa`) and
/// UNSUPPORTED_ISA.
///
/// # Safety
/// As lshk_tables_gather.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_tables_gather_isa(
    isa: lshk_isa,
    t: *const lshk_tables,
    codes: *const u32,
    q: usize,
    params: *const lshk_gather_params,
    projections: *const f32,
    projections_len: usize,
    forced_offsets: *const usize,
    forced_ids: *const u32,
    forced_ids_len: usize,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    counts: *mut u32,
    needed: *mut usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        gather_impl(
            "lshk_tables_gather_isa",
            Some(isa),
            t,
            codes,
            q,
            params,
            None,
            projections,
            projections_len,
            forced_offsets,
            forced_ids,
            forced_ids_len,
            ids,
            ids_len,
            offsets,
            counts,
            needed,
        )
    }
}

// ------------------------------------------------ budget rules

/// lshk_budget_params::rule: today's rule (lshk_tables_gather): tables in
/// order, ids ascending in a bucket, the bucket that reaches the budget cut
/// mid-bucket keeping its SMALLEST ids (a preference for small ids).
pub const LSHK_BUDGET_MID_BUCKET: u32 = 0;
/// lshk_budget_params::rule: the same cut without the small-id preference:
/// tables visited cyclically from a per-query start table, the cut bucket
/// read cyclically from a per-query position (see lshk_tables_gather_budget).
pub const LSHK_BUDGET_MID_BUCKET_ROTATED: u32 = 1;
/// lshk_budget_params::rule: the LNS seed's rule: whole buckets, table by
/// table from the per-query start table, stopping BETWEEN tables before the
/// first table that would take the set past max_candidates.
pub const LSHK_BUDGET_WHOLE_BUCKETS: u32 = 2;

const _: () = {
    assert!(std::mem::size_of::<lshk_budget_params>() == 16);
};

/// How lshk_tables_gather_budget applies `max_candidates`, from
/// lshk_budget_params_default(); a larger struct_size (newer header) is OK.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lshk_budget_params {
    /// sizeof(lshk_budget_params).
    pub struct_size: u32,
    /// LSHK_BUDGET_* (default LSHK_BUDGET_MID_BUCKET); another value is
    /// INVALID_ARGUMENT.
    pub rule: u32,
    /// Seed of the per-query stream of the rotated rules (default 0); pass
    /// a new one (e.g. the training step) for a fresh sample.
    pub seed: u64,
}

/// Default budget parameters: LSHK_BUDGET_MID_BUCKET, seed 0,
/// struct_size = sizeof(lshk_budget_params).
#[no_mangle]
pub extern "C" fn lshk_budget_params_default() -> lshk_budget_params {
    lshk_budget_params {
        struct_size: std::mem::size_of::<lshk_budget_params>() as u32,
        rule: LSHK_BUDGET_MID_BUCKET,
        seed: 0,
    }
}

// SAFETY: #[repr(C)], struct_size first, plain integer fields.
unsafe impl ParamStruct for lshk_budget_params {
    const DEFAULT_FN: &'static str = "lshk_budget_params_default";
    fn defaults() -> Self {
        lshk_budget_params_default()
    }
}

/// Reads a caller's budget params (NULL = defaults).
unsafe fn read_budget(p: *const lshk_budget_params) -> Result<BudgetRule> {
    // SAFETY: forwarded caller contract.
    let b = unsafe { read_param_struct(p, "budget")? };
    Ok(match b.rule {
        LSHK_BUDGET_MID_BUCKET => BudgetRule::MidBucket,
        LSHK_BUDGET_MID_BUCKET_ROTATED => BudgetRule::MidBucketRotated { seed: b.seed },
        LSHK_BUDGET_WHOLE_BUCKETS => BudgetRule::WholeBuckets { seed: b.seed },
        r => bail!(
            InvalidArgument,
            "budget->rule is {r}, not an LSHK_BUDGET_* value (0..=2)"
        ),
    })
}

/// lshk_tables_gather with a budget rule (`budget` NULL = defaults, i.e.
/// exactly lshk_tables_gather). The rule decides how `max_candidates`
/// (forced ids included; 0 = no budget) cuts the union of a query's
/// buckets (the query's bucket, then its probes, per table):
///
/// * LSHK_BUDGET_MID_BUCKET: as lshk_tables_gather.
/// * LSHK_BUDGET_MID_BUCKET_ROTATED: a per-query stream r: h = seed, then
///   for each of the query's L codes c in table order h =
///   next(splitmix64(h ^ c)) (SplitMix64 seeded with h ^ c, its first
///   output), r = SplitMix64(h). Tables are visited cyclically from s =
///   below(r, L) (s, s+1, ..., L-1, 0, ..., s-1); when a bucket of c ids
///   would pass the budget, it is read cyclically from position o =
///   below(r, c) until the budget is reached. (below: Lemire's
///   multiply-shift with rejection, as in lshk_simhash_new.) Over seeds,
///   each id of the cut bucket is kept with the same probability.
/// * LSHK_BUDGET_WHOLE_BUCKETS: tables from the same start s; a table's
///   buckets join the set together if the set then holds at most
///   max_candidates ids, else the visit stops (later tables are not
///   tried). No bucket is cut.
///
/// min_count, counts and the output as in lshk_tables_gather. The result
/// depends only on the tables, codes, forced ids, params and seed.
///
/// Errors: as lshk_tables_gather, plus INVALID_ARGUMENT (budget struct_size
/// too small, unknown rule, misaligned `budget`).
///
/// # Safety
/// As lshk_tables_gather; `budget` NULL or a readable lshk_budget_params.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lshk_tables_gather_budget(
    t: *const lshk_tables,
    codes: *const u32,
    q: usize,
    params: *const lshk_gather_params,
    budget: *const lshk_budget_params,
    projections: *const f32,
    projections_len: usize,
    forced_offsets: *const usize,
    forced_ids: *const u32,
    forced_ids_len: usize,
    ids: *mut u32,
    ids_len: usize,
    offsets: *mut usize,
    counts: *mut u32,
    needed: *mut usize,
) -> lshk_status {
    // SAFETY: forwarded caller contract.
    unsafe {
        gather_impl(
            "lshk_tables_gather_budget",
            None,
            t,
            codes,
            q,
            params,
            Some(budget),
            projections,
            projections_len,
            forced_offsets,
            forced_ids,
            forced_ids_len,
            ids,
            ids_len,
            offsets,
            counts,
            needed,
        )
    }
}
