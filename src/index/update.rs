//! A mutable index for training: rows of W change in
//! place and only those rows are rehashed into every table, on a schedule
//! the caller sets ([`RehashSchedule`], with LNS's decaying schedule ready
//! as [`RehashSchedule::lns`]).
//!
//! # The calls
//! * [`Index::update_rows`] writes new values of given rows into the stored
//!   W (converted per [`Storage`]) and optionally their bias, and marks the
//!   rows *dirty*. With [`Storage::BorrowedF32`] the caller changes its own
//!   W in place and calls `update_rows` without rows (only marks them, and
//!   optionally sets their bias, which the index owns).
//! * [`Index::rehash_rows`] rehashes given rows now; [`Index::rehash_dirty`]
//!   rehashes every dirty row. Between an update and a rehash, queries score
//!   with the NEW weights and retrieve with the OLD buckets (what LNS does
//!   between rehashes).
//!
//! # What a rehash does
//! Each rehashed row is read from the stored W (decoded to f32 for bf16 /
//! f16 / int8, as [`Index::hashed_rows`] does), transformed, hashed with
//! the index's family, and moved to its new bucket in every table by
//! [`Tables::update`], which recomputes only the buckets that lose or gain
//! a row. Afterwards every query equals one on a fresh build with the same
//! parameters over the updated W, bit for bit, for F32 and BorrowedF32
//! storage (`tests/index_update.rs`, every tier and several thread
//! counts). For bf16 / f16 / int8 a fresh build hashes the caller's f32
//! rows BEFORE rounding, the rehash the stored (rounded) rows, so a code
//! whose projection is within rounding of zero can differ.
//!
//! The first update of a built or loaded index, whose tables are frozen
//! (no row-to-bucket map), restores the map: from the CSR when every row
//! sits in one bucket per table (`bucket_cap` 0: an O(n L) pass), else by
//! rehashing every row once. The map costs `4 n L` bytes from then on.
//!
//! **MIPS.** The transform divides by U, the largest row norm. A rehash
//! recomputes U over all rows (decoded, as the build does, in f64); when
//! its bits change, every row is rehashed (a full rehash), since every
//! transformed row changes.
//!
//! **Indexes with label-aware buckets** ([`Index::train_labels`]) cannot
//! be updated (`InvalidArgument`).
//!
//! # Concurrency
//! `update_rows` and the rehashes take `&mut self`: no query may run
//! during them (Rust enforces it; in C the functions take a non-const
//! `lshk_index *` and need exclusive access, like
//! `lshk_index_train_labels`). No snapshot is kept. For borrowed weights
//! the caller may change W only while no call uses the index.
//!
//! # Schedule
//! See [`RehashSchedule`].

use super::*;

/// LNS's initial rehash period: every 50 iterations at first.
pub const LNS_REHASH_PERIOD: f64 = 50.0;
/// The default decay rate λ of LNS's rehash frequency, per iteration: the
/// period grows e-fold every 10,000 iterations (doubles every 6,931).
pub const LNS_REHASH_LAMBDA: f64 = 1e-4;

/// When to rehash: at iteration `t` (counted from 0) the period is
/// `period(t) = max(1, floor(P0 * e^(λ t)))`, and the rehash iterations
/// are `t_1 = period(0)`, `t_{k+1} = t_k + period(t_k)`, i.e. each rehash
/// schedules the next one ([`RehashSchedule::next_after`]). λ = 0 gives a
/// fixed period; λ > 0 an exponentially decaying frequency. LNS
/// ([`RehashSchedule::lns`]): P0 = 50, λ = 1e-4, i.e. rehashes at 50, 100,
/// 150, 200, then 51 apart (251, 302, 353, 404), 52 apart from 456, ...;
/// the period is 55 at t = 1,000, 61 at 2,000, 82 at 5,000, 135 at
/// 10,000, 238 at 15,625 and 1,004 at 30,000 (tested golden values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RehashSchedule {
    /// P0, iterations; finite and >= 1.
    pub initial_period: f64,
    /// λ per iteration; finite and >= 0.
    pub lambda: f64,
}

impl Default for RehashSchedule {
    fn default() -> Self {
        Self::lns()
    }
}

impl RehashSchedule {
    /// LNS's schedule: P0 = [`LNS_REHASH_PERIOD`], λ = [`LNS_REHASH_LAMBDA`].
    pub fn lns() -> Self {
        RehashSchedule {
            initial_period: LNS_REHASH_PERIOD,
            lambda: LNS_REHASH_LAMBDA,
        }
    }

    /// A fixed period (λ = 0).
    pub fn every(period: u64) -> Self {
        RehashSchedule {
            initial_period: period.max(1) as f64,
            lambda: 0.0,
        }
    }

    /// `InvalidArgument` unless P0 is finite and >= 1 and λ finite and >= 0.
    pub fn check(&self) -> Result<()> {
        if !(self.initial_period.is_finite() && self.initial_period >= 1.0) {
            bail!(
                InvalidArgument,
                "initial_period is {}; it must be finite and >= 1",
                self.initial_period
            );
        }
        if !(self.lambda.is_finite() && self.lambda >= 0.0) {
            bail!(
                InvalidArgument,
                "lambda is {}; it must be finite and >= 0",
                self.lambda
            );
        }
        Ok(())
    }

    /// `max(1, floor(P0 e^(λ t)))`, saturating at 2^62 (an unchecked
    /// schedule gives 1 for NaN values).
    pub fn period_at(&self, t: u64) -> u64 {
        let p = (self.initial_period * (self.lambda * t as f64).exp()).floor();
        const CAP: u64 = 1 << 62;
        if p >= CAP as f64 {
            CAP
        } else if p >= 1.0 {
            p as u64
        } else {
            1
        }
    }

    /// The next rehash iteration after one at `t` (or after the start,
    /// `t = 0`): `t + period(t)`, saturating.
    pub fn next_after(&self, t: u64) -> u64 {
        t.saturating_add(self.period_at(t))
    }
}

/// A [`RehashSchedule`] with its next due iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RehashClock {
    schedule: RehashSchedule,
    next: u64,
}

impl RehashClock {
    /// The first rehash is due at `schedule.next_after(0)`.
    pub fn new(schedule: RehashSchedule) -> Result<Self> {
        schedule.check()?;
        Ok(RehashClock {
            schedule,
            next: schedule.next_after(0),
        })
    }

    /// The next due iteration.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Whether a rehash is due at iteration `t` (`t >= next`); if so the
    /// next one becomes `schedule.next_after(t)`.
    pub fn due(&mut self, t: u64) -> bool {
        if t >= self.next {
            self.next = self.schedule.next_after(t);
            true
        } else {
            false
        }
    }
}

/// The rows updated since their last rehash.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dirty {
    /// One bit per row (empty until the first update).
    bits: Vec<u64>,
    count: usize,
}

impl Index {
    fn check_updatable(&self, func: &str) -> Result<()> {
        self.lsh(func)?;
        if self.labels.is_some() {
            bail!(
                InvalidArgument,
                "{func}: the index has label-aware buckets (train_labels); it cannot be updated"
            );
        }
        Ok(())
    }

    fn check_ids(&self, ids: &[u32]) -> Result<()> {
        if let Some(j) = ids.iter().position(|&i| i as usize >= self.rows) {
            bail!(
                IndexOutOfRange,
                "ids[{j}] = {} but the index has {} rows",
                ids[j],
                self.rows
            );
        }
        Ok(())
    }

    /// Writes new values of rows `ids[j]` into the stored W and marks them
    /// dirty (module documentation). `rows`: `(w, stride)` with row `j` of
    /// the new values at `w[j * stride ..]` (`stride >= dim`, finite; for
    /// f16 storage `|w| <= 65504`); must be `None` for
    /// [`Storage::BorrowedF32`] (the caller changed its W itself). `bias`:
    /// `ids.len()` new bias values (finite), only for an index with a bias.
    /// A repeated id takes its last values. Everything is checked before
    /// anything changes; on error the index is unchanged. Weights mapped
    /// from a file are first copied into memory the index owns.
    pub fn update_rows(
        &mut self,
        ids: &[u32],
        rows: Option<(&[f32], usize)>,
        bias: Option<&[f32]>,
    ) -> Result<()> {
        self.check_updatable("update_rows")?;
        self.check_ids(ids)?;
        let (n, dim) = (ids.len(), self.dim);
        // The largest |value| of the new rows and biases (0 without them).
        let (mut wmax, mut bmax) = (0.0f32, 0.0f32);
        if let Some((w, stride)) = rows {
            if self.p.storage == Storage::BorrowedF32 {
                bail!(
                    InvalidArgument,
                    "the index borrows W: change the rows in place and pass no rows"
                );
            }
            let need = strided_len(n, dim, stride, "rows")?;
            if w.len() < need {
                bail!(
                    BufferTooSmall,
                    "`rows` holds {} floats, {n} rows of stride {stride} need {need}",
                    w.len()
                );
            }
            if let Some((r, j)) = first_non_finite(w, n, dim, stride) {
                bail!(
                    NonFinite,
                    "rows row {r} column {j} is {} (finite weights needed)",
                    w[r * stride + j]
                );
            }
            wmax = crate::error::max_abs_rows(w, n, dim, stride);
            crate::error::check_scorable(wmax, dim, "rows")?;
            if self.p.storage == Storage::F16 {
                for r in 0..n {
                    let row = &w[r * stride..r * stride + dim];
                    if let Some(j) = row.iter().position(|v| v.abs() > 65504.0) {
                        bail!(
                            InvalidArgument,
                            "rows row {r} column {j} is {}, beyond the f16 range (65504)",
                            row[j]
                        );
                    }
                }
            }
        }
        if let Some(b) = bias {
            if self.bias.is_none() {
                bail!(InvalidArgument, "a bias was given but the index has none");
            }
            if b.len() < n {
                bail!(
                    BufferTooSmall,
                    "`bias` holds {} values, {n} ids need {n}",
                    b.len()
                );
            }
            if let Some(i) = b[..n].iter().position(|v| !v.is_finite()) {
                bail!(NonFinite, "bias[{i}] is {}", b[i]);
            }
            bmax = crate::error::max_abs_rows(&b[..n], 1, n, n);
            crate::error::check_scorable(bmax, dim, "bias")?;
        }
        if self.dirty.bits.is_empty() && n > 0 {
            self.dirty.bits = try_vec::<u64>(self.rows.div_ceil(64), "dirty-row bitmap")?;
        }
        if let Some((w, stride)) = rows {
            self.own_weights()?;
            for (j, &id) in ids.iter().enumerate() {
                self.write_row(id as usize, &w[j * stride..j * stride + dim]);
            }
            // Stored as bf16 / f16 a value grows by at most 2^-8 of itself
            // (int8: 127 * scale is the row's largest |value|).
            self.vmax = self.vmax.max(wmax * (1.0 + 1.0 / 128.0));
        }
        if rows.is_some() || self.p.storage == Storage::BorrowedF32 {
            // The row codes follow the rows (a borrowed W changed in place).
            self.refresh_codes(Some(ids))?;
        }
        if let (Some(b), Some(mine)) = (bias, self.bias.as_mut()) {
            for (j, &id) in ids.iter().enumerate() {
                mine[id as usize] = b[j];
            }
            self.vmax = self.vmax.max(bmax);
        }
        for &id in ids {
            let (w, bit) = (id as usize >> 6, 1u64 << (id & 63));
            if self.dirty.bits[w] & bit == 0 {
                self.dirty.bits[w] |= bit;
                self.dirty.count += 1;
            }
        }
        Ok(())
    }

    /// Rows updated (or marked) since their last rehash.
    pub fn dirty_rows(&self) -> usize {
        self.dirty.count
    }

    /// Rehashes every dirty row (see [`Index::rehash_rows`]); returns the
    /// number of rows rehashed.
    pub fn rehash_dirty(&mut self) -> Result<usize> {
        self.check_updatable("rehash_dirty")?;
        let mut ids = try_vec::<u32>(self.dirty.count, "dirty ids")?;
        let mut k = 0;
        for (w, &word) in self.dirty.bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                ids[k] = (w * 64) as u32 + m.trailing_zeros();
                k += 1;
                m &= m - 1;
            }
        }
        debug_assert_eq!(k, ids.len());
        self.rehash_sorted(ids)
    }

    /// Rehashes rows `ids` (any order, repeats allowed) from the stored W
    /// into every table and clears their dirty marks (module
    /// documentation); returns the number of rows rehashed (more than the
    /// distinct ids when the MIPS scale changed or a frozen capped table
    /// had to be rebuilt: then every row). For borrowed weights the rows
    /// must be finite and within the build's value limit (`NonFinite`). On
    /// error the index is unchanged.
    pub fn rehash_rows(&mut self, ids: &[u32]) -> Result<usize> {
        self.check_updatable("rehash_rows")?;
        self.check_ids(ids)?;
        let mut v = try_vec::<u32>(ids.len(), "rehash ids")?;
        v.copy_from_slice(ids);
        v.sort_unstable();
        v.dedup();
        self.rehash_sorted(v)
    }

    /// Rehashes the sorted, distinct `ids`.
    fn rehash_sorted(&mut self, mut ids: Vec<u32>) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let rows = self.rows;
        let new_u = if self.p.transform == Transform::Mips {
            self.mips_scale()?
        } else {
            self.mips_u
        };
        let full = ids.len() == rows
            || new_u.to_bits() != self.mips_u.to_bits()
            || (self.lsh("rehash_rows")?.tables.is_frozen() && self.p.bucket_cap != 0);
        if full && ids.len() != rows {
            ids = try_vec::<u32>(rows, "row ids")?;
            for (i, v) in ids.iter_mut().enumerate() {
                *v = i as u32;
            }
        }
        if self.p.storage == Storage::BorrowedF32 {
            let w = self.weights();
            let (st, dim) = (self.w.stride, self.dim);
            let mut m = 0.0f32;
            if let Weights::F32(s) = w {
                for &r in &ids {
                    let row = &s[r as usize * st..r as usize * st + dim];
                    if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                        bail!(
                            NonFinite,
                            "w row {r} column {j} is {} (finite weights needed)",
                            row[j]
                        );
                    }
                    m = crate::error::max_abs_rows(row, 1, dim, dim).max(m);
                }
            }
            // The caller changed these rows in place: the range and the row
            // codes follow.
            crate::error::check_scorable(m, dim, "w rows")?;
            self.vmax = self.vmax.max(m);
            self.refresh_codes(Some(&ids))?;
        }
        let codes = self.codes_of_rows(&ids, new_u)?;
        if full {
            let t = self.tables_from_codes(&codes, rows)?;
            // In place: the box keeps its address (borrowed C handles).
            *self.lsh_mut("rehash_rows")?.tables = t;
        } else {
            let tables = &mut self.lsh_mut("rehash_rows")?.tables;
            tables.unfreeze_from_csr()?;
            tables.update(&ids, &codes)?;
        }
        self.mips_u = new_u;
        if !self.dirty.bits.is_empty() {
            for &id in &ids {
                let (w, bit) = (id as usize >> 6, 1u64 << (id & 63));
                if self.dirty.bits[w] & bit != 0 {
                    self.dirty.bits[w] &= !bit;
                    self.dirty.count -= 1;
                }
            }
        }
        Ok(ids.len())
    }

    /// Row `r` of the stored W decoded to f32 into `out` (`dim` long).
    pub(super) fn decode_row(&self, w: &Weights<'_>, r: usize, out: &mut [f32]) {
        let (st, dim) = (self.w.stride, self.dim);
        let src = r * st..r * st + dim;
        match w {
            Weights::F32(s) => out.copy_from_slice(&s[src]),
            Weights::Bf16(s) => matmul::convert_bf16_to_f32(&s[src], out).expect("same length"),
            Weights::F16(s) => matmul::convert_f16_to_f32(&s[src], out).expect("same length"),
            Weights::I8 { w, scales } => {
                for (o, &x) in out.iter_mut().zip(&w[src]) {
                    *o = x as f32 * scales[r];
                }
            }
        }
    }

    /// U of the MIPS transform over the current rows (the build's rule: the
    /// largest f64 row norm as f32 when positive and finite, else 1).
    fn mips_scale(&self) -> Result<f32> {
        let w = self.weights();
        let mut row = try_vec::<f32>(self.dim, "row scratch")?;
        let mut u = 0f64;
        for r in 0..self.rows {
            self.decode_row(&w, r, &mut row);
            u = u.max(norm(&row));
        }
        Ok(if u > 0.0 && (u as f32).is_finite() {
            u as f32
        } else {
            1.0
        })
    }

    /// The codes (`ids.len() x L`) of rows `ids` as stored, transformed
    /// with MIPS scale `u`; hashed in units of [`BUILD_UNIT`] rows spread
    /// over the build's thread count (each row's code does not depend on
    /// the unit or thread).
    fn codes_of_rows(&self, ids: &[u32], u: f32) -> Result<Vec<u32>> {
        let (l, hd, dim) = (self.p.tables as usize, self.hash_dim, self.dim);
        let mut codes = try_vec::<u32>(checked_mul(ids.len(), l, "rows * L")?, "row codes")?;
        let units = ids.len().div_ceil(BUILD_UNIT);
        let nthreads = crate::par::threads_for(self.p.threads as usize, units);
        let per = units.div_ceil(nthreads) * BUILD_UNIT;
        let mut bufs = Vec::with_capacity(nthreads);
        for _ in 0..nthreads {
            bufs.push((
                try_vec::<f32>(BUILD_UNIT.min(ids.len()) * hd, "rehash scratch")?,
                try_vec::<f32>(dim, "row scratch")?,
            ));
        }
        let inv_u = 1.0 / u as f64;
        let w = self.weights();
        let fam = &self.lsh("rehash_rows")?.fam;
        let work = |ids: &[u32], codes: &mut [u32], buf: &mut (Vec<f32>, Vec<f32>)| -> Result<()> {
            let (tb, row) = buf;
            for (uids, uc) in ids.chunks(BUILD_UNIT).zip(codes.chunks_mut(BUILD_UNIT * l)) {
                for (i, &r) in uids.iter().enumerate() {
                    let r = r as usize;
                    self.decode_row(&w, r, row);
                    let b = self.bias.as_ref().map_or(0.0, |b| b[r]);
                    transform_row(
                        self.p.transform,
                        row,
                        b,
                        inv_u,
                        &mut tb[i * hd..(i + 1) * hd],
                    );
                }
                fam.hash(&tb[..uids.len() * hd], uids.len(), hd, uc)?;
            }
            Ok(())
        };
        if nthreads == 1 {
            work(ids, &mut codes, &mut bufs[0])?;
        } else {
            std::thread::scope(|s| -> Result<()> {
                let work = &work;
                let hs: Vec<_> = ids
                    .chunks(per)
                    .zip(codes.chunks_mut(per * l))
                    .zip(bufs.iter_mut())
                    .map(|((i, c), b)| s.spawn(move || work(i, c, b)))
                    .collect();
                let mut res = Ok(());
                for h in hs {
                    let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                    if res.is_ok() {
                        res = r;
                    }
                }
                res
            })?;
        }
        Ok(codes)
    }

    /// Copies weights mapped from a file into memory the index owns (same
    /// storage and stride); other storages are left as they are.
    fn own_weights(&mut self) -> Result<()> {
        if !self.w.is_mapped() {
            return Ok(());
        }
        let (st, storage) = (self.w.stride, self.w.storage);
        let new = match self.weights() {
            Weights::F32(s) => {
                let mut v = try_vec::<f32>(s.len(), "f32 weights")?;
                v.copy_from_slice(s);
                WStore::from_vec_f32(v, st)
            }
            Weights::Bf16(s) | Weights::F16(s) => {
                let mut v = try_vec::<u16>(s.len(), "16-bit weights")?;
                v.copy_from_slice(s);
                WStore::from_vec_u16(v, storage, st)
            }
            Weights::I8 { w, scales } => {
                let mut v = try_vec::<i8>(w.len(), "int8 weights")?;
                v.copy_from_slice(w);
                let mut sc = try_vec::<f32>(scales.len(), "int8 scales")?;
                sc.copy_from_slice(scales);
                WStore::from_vec_i8(v, sc, st)
            }
        };
        self.w = new;
        Ok(())
    }

    /// Writes one f32 row into owned storage (checked by the caller).
    fn write_row(&mut self, r: usize, row: &[f32]) {
        let (st, dim, storage) = (self.w.stride, self.dim, self.w.storage);
        let dst = r * st..r * st + dim;
        const OWNED: &str = "own_weights ran first";
        match &mut self.w.buf {
            WBuf::F32(v) => v.owned_mut().expect(OWNED)[dst].copy_from_slice(row),
            WBuf::U16(v) => {
                let v = v.owned_mut().expect(OWNED);
                if storage == Storage::Bf16 {
                    matmul::convert_f32_to_bf16(row, &mut v[dst]).expect("same length");
                } else {
                    matmul::convert_f32_to_f16(row, &mut v[dst]).expect("same length");
                }
            }
            WBuf::I8 { w: v, scales: s } => {
                let (v, s) = (v.owned_mut().expect(OWNED), s.owned_mut().expect(OWNED));
                matmul::quantize_rows_i8(row, 1, dim, dim, &mut v[dst], dim, &mut s[r..r + 1])
                    .expect("checked finite, sized");
            }
        }
    }
}

impl Index {
    /// The candidate sets of `nq` queries under a budget rule: as [`Index::candidates`], with `g.max_candidates` applied
    /// by `rule` (see [`crate::source::lsh::tables::BudgetRule`]), and optional forced
    /// ids per query (`forced = Some((offsets, ids))`, CSR of `nq + 1`
    /// offsets; e.g. the true labels in LSH negative sampling), which are
    /// always in the result and count toward the budget. Thread-safe.
    #[allow(clippy::too_many_arguments)]
    pub fn candidates_budget(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        g: &GatherParams,
        rule: crate::source::lsh::tables::BudgetRule,
        forced: Option<(&[usize], &[u32])>,
        out: &mut GatherResult,
    ) -> Result<()> {
        self.gather_queries(q, nq, q_stride, g, Some((rule, forced)), out)
    }
}
