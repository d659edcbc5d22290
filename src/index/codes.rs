//! The scorer's code stage: int8 codes of the index's rows that score
//! every candidate first, so that only the best `rerank` of each query are
//! scored exactly from the stored rows ([`Index::set_codes`]).
//!
//! A candidate's code score is the gathered matmul's int8 kernel on the
//! row quantised per row (the rows of [`Storage::I8`]: codes `|c| <= 127`
//! and a scale), with the bias; the shortlist is the top `max(rerank, k)`
//! by that score (ties to the smaller id) and the answer the top `k` of the
//! shortlist by the exact logits of the index's rows, as without codes.
//! Gathered rows are read one by one, so the stage pays where a row's
//! bytes cost more than its visit: f32 rows of 128 and more columns read
//! a quarter of the bytes (benches/sources.md). The IVF lists keep codes of
//! their own, in list order, and refuse these.

use super::weights::{WBuf, WStore};
use super::*;
use crate::source::ivf::Codes;

/// The row codes of an index and the re-rank length its queries use.
pub(super) struct RowCodes {
    /// int8 rows (stride `dim`) and their scales.
    pub(super) w: WStore,
    /// Candidates per query scored exactly (at least k is used).
    pub(super) rerank: u32,
}

impl Index {
    /// Gives the scorer a code stage (module documentation): with
    /// [`Codes::I8`], every candidate is scored first from int8 codes of
    /// the rows and the best `max(rerank, k)` of each query exactly from
    /// the stored rows; [`Codes::None`] (an index's state after a build)
    /// scores every candidate exactly. The codes are built from the rows
    /// as stored now, follow [`Index::update_rows`], the rehashes and the
    /// forest's rebuild, and are saved in the index's file. Calling it
    /// again with I8 only changes `rerank` (the codes are kept).
    ///
    /// Errors: `Unsupported` for the IVF source (its lists hold their own
    /// codes, [`crate::source::ivf::IvfParams::codes`]); `InvalidArgument`
    /// for 4-bit codes (they score lists), for `rerank` 0 with I8, and for
    /// [`Storage::I8`] (the rows are int8 codes already);
    /// `AllocationFailed`. On error the index is unchanged.
    pub fn set_codes(&mut self, codes: Codes, rerank: u32) -> Result<()> {
        if self.p.family == Family::Ivf {
            return Err(self.unsupported(
                "row codes",
                "the LSH, graph or forest source (the IVF lists score from their own codes)",
            ));
        }
        match codes {
            Codes::None => {
                self.codes = None;
                return Ok(());
            }
            Codes::I8 => {}
            Codes::Pq4 | Codes::Pq4I8 => bail!(
                InvalidArgument,
                "row codes are NONE or I8: 4-bit codes score lists (the IVF source)"
            ),
        }
        if rerank == 0 {
            bail!(
                InvalidArgument,
                "rerank must be >= 1 with I8 row codes (the candidates scored exactly)"
            );
        }
        if self.p.storage == Storage::I8 {
            bail!(
                InvalidArgument,
                "the index stores W as int8 already: its exact scores are the codes' scores"
            );
        }
        if let Some(c) = self.codes.as_mut() {
            c.rerank = rerank;
            return Ok(());
        }
        let n = checked_mul(self.rows, self.dim, "rows * dim")?;
        let v = try_vec::<i8>(n, "row codes")?;
        let s = try_vec::<f32>(self.rows, "row code scales")?;
        let mut w = WStore::from_vec_i8(v, s, self.dim);
        self.code_rows(&mut w, None)?;
        self.codes = Some(RowCodes { w, rerank });
        // Queries are now summed as int8 codes (up to 127) times q.
        Ok(())
    }

    /// The row codes' setting: `(Codes::I8, rerank)`, or `(Codes::None, 0)`.
    pub fn codes(&self) -> (Codes, u32) {
        match &self.codes {
            Some(c) => (Codes::I8, c.rerank),
            None => (Codes::None, 0),
        }
    }

    /// Quantises the rows `ids` (every row when `None`) as stored now into
    /// `codes`; nothing changes when the row scratch cannot be allocated.
    fn code_rows(&self, codes: &mut WStore, ids: Option<&[u32]>) -> Result<()> {
        let mut row = try_vec::<f32>(self.dim, "row")?;
        match ids {
            Some(ids) => {
                for &r in ids {
                    self.code_row(codes, r as usize, &mut row);
                }
            }
            None => {
                for r in 0..self.rows {
                    self.code_row(codes, r, &mut row);
                }
            }
        }
        Ok(())
    }

    /// Quantises row `r` as stored now into `codes` (owned; `row`: `dim`
    /// floats of scratch).
    fn code_row(&self, codes: &mut WStore, r: usize, row: &mut [f32]) {
        let dim = self.dim;
        self.decode_row(&self.weights(), r, row);
        let WBuf::I8 { w, scales } = &mut codes.buf else {
            unreachable!("row codes are int8")
        };
        let (w, s) = (w.to_mut(), scales.to_mut());
        let (cw, cs) = (&mut w[r * dim..(r + 1) * dim], &mut s[r..r + 1]);
        if matmul::quantize_rows_i8(row, 1, dim, dim, cw, dim, cs).is_err() {
            // Only a borrowed row changed in place to a value that is not
            // finite fails; its rehash refuses it, and it codes as zero
            // (scale 0) until then.
            cw.fill(0);
            cs[0] = 0.0;
        }
    }

    /// Quantises the rows `ids` again after they changed (all rows when
    /// `ids` is `None`); nothing without codes. Codes mapped from a file
    /// are copied into memory the index owns first.
    pub(super) fn refresh_codes(&mut self, ids: Option<&[u32]>) -> Result<()> {
        let Some(mut rc) = self.codes.take() else {
            return Ok(());
        };
        let done = self.code_rows(&mut rc.w, ids);
        self.codes = Some(rc);
        done
    }

    /// The code matrix (with the bias) of the code stage.
    pub(super) fn code_matrix<'a>(&'a self, rc: &'a RowCodes) -> WeightMatrix<'a> {
        let m = WeightMatrix::new(rc.w.weights(self.rows), self.rows, self.dim, self.dim)
            .expect("row codes sized at set_codes or load");
        match &self.bias {
            Some(b) => m.with_bias(b).expect("bias validated"),
            None => m,
        }
    }
}

/// The code stage's scratch (per thread, inside the query scratch).
#[derive(Default)]
pub(super) struct CodeScratch {
    ids: Vec<u32>,
    scores: Vec<f32>,
    offsets: Vec<usize>,
}

impl Index {
    /// The code stage for a block of `b` queries: `approx` holds the code
    /// scores of the candidates `ids` (CSR `offsets`); the shortlists (the
    /// best `r` of each query, `r >= k`) are scored exactly and their top
    /// `k` written to `out_ids` / `out_scores` (`b * k` each) by `exact`
    /// (the index's rows). Returns the candidates scored exactly.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn code_stage(
        &self,
        q: &[f32],
        b: usize,
        q_stride: usize,
        k: usize,
        r: usize,
        ids: &[u32],
        offsets: &[usize],
        approx: &[f32],
        exact: &dyn Scorer,
        s: &mut CodeScratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<u64> {
        // No shortlist is longer than its query's candidates.
        let most = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let r = r.min(most).max(1);
        s.ids.resize(b * r, 0);
        s.scores.resize(b * r, 0.0);
        matmul::topk(approx, Some(ids), offsets, r, &mut s.ids, &mut s.scores)?;
        // Each shortlist is best first, padded at its end: keep the ids.
        s.offsets.clear();
        s.offsets.push(0);
        let mut m = 0;
        for i in 0..b {
            for j in i * r..(i + 1) * r {
                let id = s.ids[j];
                if id == matmul::TOPK_PAD_ID {
                    break;
                }
                s.ids[m] = id;
                m += 1;
            }
            s.offsets.push(m);
        }
        exact.score(q, b, q_stride, &s.ids[..m], &s.offsets, &mut s.scores[..m])?;
        matmul::topk(
            &s.scores[..m],
            Some(&s.ids[..m]),
            &s.offsets,
            k,
            out_ids,
            out_scores,
        )?;
        Ok(m as u64)
    }
}
