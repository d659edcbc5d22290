//! The IVF lists as a candidate source of [`crate::Index`]
//! ([`Family::Ivf`]), registered with one line in the index's source
//! registry. This file is all the index knows of them.
//!
//! * Build: the lists over the index's rows and bias with
//!   [`crate::index::IndexParams`]'s `ivf` ([`super::IvfParams`]): the same lists
//!   as [`Ivf::build`]. With codes other than NONE they re-rank from the
//!   index's own rows in every storage: the borrowed W
//!   ([`Storage::BorrowedF32`]), the index's f32 copy, or its bf16, f16 or
//!   int8 rows (with the gathered matmul's kernel of that storage, the
//!   index scorer's), so W is held once, in the index's storage. Without
//!   codes the lists scan exact f32 rows: the index's f32 or borrowed W, or
//!   on a narrower storage a copy of their own.
//! * Query ([`crate::index::QueryParams::ivf`], [`super::SearchParams`]): the
//!   candidates of a top-`k` query are the lists' own top-`k` (their codes
//!   stage, the exact re-rank of the best `rerank`, the adaptive stop).
//!   With an exact stage (`rerank > 0` with codes, in any storage; no
//!   codes on f32 or borrowed storage) their scores are the exact logits
//!   of the index's own rows and are kept as they are
//!   ([`CandidateSource::final_scores`]): the index answers exactly what
//!   the lists answer, ids and score bits (tests/index_ivf.rs). Otherwise
//!   (`rerank = 0`, or no codes on a narrower storage) the index's scorer
//!   scores the candidates from its own rows, so the returned scores are
//!   always logits of the stored W.
//! * File: the IVF sections (`IVFPARAM`, `CENTROID`, `CENTQ`, `CENTQS`,
//!   `CBIAS`, `LSPREAD`, `LOFFS`, `LIDS`, `PBIAS`, `PROWS`, `QCODES`,
//!   `QSCALES`, `PQCENT`, `PQCODES`; the IVF file's module) beside the
//!   index's `PARAMS`, `BIAS` and `WEIGHTS`, checked as in an IVF file and
//!   against the index's `PARAMS` (rows, dim, bias, borrowed W).
//! * Label-aware lists ([`Ivf::train_labels`], through
//!   [`Index::train_labels`]): the lists keep their `LABELS` section.
//! * Refused: a transform other than NONE, caller-given planes or maps,
//!   row updates (as for the graph family).

use super::{Codes, Ivf, RowsIn};
use crate::error::{Result, Status};
use crate::format::SectionOut;
use crate::matmul::{Weights, TOPK_PAD_ID};
use crate::par::{Spare, Warm};
use crate::source::GatherResult;
use crate::source::{
    non_lsh_build, BuildInput, CandidateSource, IndexView, LoadInput, QueryParams,
    SourceRegistration,
};
use crate::source::{Family, QueryStats, Resolved, Storage};

/// The IVF family's registration.
pub(crate) static REGISTRATION: SourceRegistration = SourceRegistration {
    name: "ivf",
    accepts: |f| f == Family::Ivf,
    build,
    load,
};

thread_local! {
    /// A block's top-k ids and scores from the lists (reused per thread).
    static TOPK: Warm<(Vec<u32>, Vec<f32>)> = Warm::new(&SPARE_TOPK);
}

static SPARE_TOPK: Spare<(Vec<u32>, Vec<f32>)> = Spare::new();

impl CandidateSource for Ivf {
    fn check_query(&self, _ix: &IndexView<'_>, qp: &QueryParams) -> Result<()> {
        qp.ivf.check()
    }

    fn candidates(
        &self,
        ix: &IndexView<'_>,
        q: &[f32],
        n: usize,
        q_stride: usize,
        k: usize,
        qp: &QueryParams,
        out: &mut GatherResult,
        scores: &mut Vec<f32>,
        st: &mut QueryStats,
    ) -> Result<()> {
        out.ids.clear();
        out.counts.clear();
        out.offsets.clear();
        out.offsets.push(0);
        TOPK.with(|cell| -> Result<()> {
            let (ids, sc) = &mut *cell.borrow_mut();
            let need = n * k;
            ids.resize(need, 0);
            sc.resize(need, 0.0);
            let mut ss = super::SearchStats::default();
            self.search_split(
                ix.split,
                crate::isa::active(),
                q,
                n,
                q_stride,
                k,
                &qp.ivf,
                ids,
                sc,
                Some(&mut ss),
            )?;
            st.lists += ss.lists;
            st.scanned += ss.scanned;
            st.reranked += ss.reranked;
            scores.clear();
            for (row, rs) in ids
                .chunks_exact(k.max(1))
                .zip(sc.chunks_exact(k.max(1)))
                .take(n)
            {
                for (&i, &s) in row.iter().zip(rs) {
                    if i != TOPK_PAD_ID {
                        out.ids.push(i);
                        scores.push(s);
                    }
                }
                out.offsets.push(out.ids.len());
            }
            if k == 0 {
                out.offsets.resize(n + 1, 0);
            }
            Ok(())
        })
    }

    /// A batch's rounds of adaptive selection are shared by its threads
    /// where that pays ([`Ivf::split_pays`], [`Ivf::search_split`]).
    fn splits_batches(&self, _ix: &IndexView<'_>, qp: &QueryParams) -> bool {
        self.split_pays(&qp.ivf)
    }

    /// The lists' scores are the index's exact logits when they re-rank
    /// from the index's rows (`rerank > 0` with codes, any storage), or
    /// scan without codes the f32 rows the index keeps or borrows.
    fn final_scores(&self, ix: &IndexView<'_>, qp: &QueryParams) -> bool {
        let f32_rows = matches!(ix.storage, Storage::F32 | Storage::BorrowedF32);
        match self.params().codes {
            Codes::None => f32_rows,
            _ => qp.ivf.rerank > 0,
        }
    }

    fn sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        self.file_sections(keep)
    }

    fn memory_bytes(&self) -> usize {
        Ivf::memory_bytes(self)
    }
}

fn build(b: &BuildInput<'_>, r: &mut Resolved) -> Result<Box<dyn CandidateSource>> {
    let p = b.p;
    non_lsh_build(
        "IVF",
        "scores [w, b] itself",
        p,
        r,
        p.ivf.seed,
        p.ivf.threads,
    )?;
    // The lists re-rank from the index's rows (the caller's W, or the
    // index's own rows in its storage), so W is held once. Lists without
    // codes scan exact f32 rows: on a narrower storage they keep their own.
    let codes = p.ivf.codes != Codes::None;
    let (narrow, rerank_rows) = match (p.storage, b.own_rows) {
        (Storage::BorrowedF32, _) => (None, Some((b.w, b.w_stride))),
        (_, Some((Weights::F32(v), s))) => (None, Some((v, s))),
        (_, Some((other, s))) if codes => (Some((other, s)), None),
        _ => (None, None),
    };
    // With narrow rows the lists are built on the caller's W (alive for
    // this call) and then re-rank from the index's rows (use_rows below).
    let borrow = codes && (rerank_rows.is_some() || narrow.is_some());
    let (w, st) = rerank_rows.unwrap_or((b.w, b.w_stride));
    let (bias, rows, dim) = (b.bias, b.rows, b.dim);
    let mut ivf = match (borrow, p.ivf_row_weights.as_deref()) {
        // SAFETY: the index borrows the same W under the same contract
        // (Storage::BorrowedF32): the caller keeps it alive and unchanged
        // while the index, and with it these lists, live.
        (true, None) => unsafe { Ivf::build_borrowed(w, bias, rows, dim, st, &p.ivf)? },
        // SAFETY: as above.
        (true, Some(rw)) => unsafe {
            Ivf::build_weighted_borrowed(w, bias, rows, dim, st, rw, &p.ivf)?
        },
        (false, None) => Ivf::build(w, bias, rows, dim, st, &p.ivf)?,
        (false, Some(rw)) => Ivf::build_weighted(w, bias, rows, dim, st, rw, &p.ivf)?,
    };
    if let Some((nw, ns)) = narrow {
        // SAFETY: the index keeps its rows alive and unchanged while its
        // source lives, and drops the source first.
        unsafe { ivf.use_rows(RowsIn::Narrow(nw, ns)) }?;
    }
    Ok(Box::new(ivf))
}

fn load(l: &LoadInput<'_>) -> Result<Box<dyn CandidateSource>> {
    let bad = l.bad;
    if l.p.transform != crate::source::Transform::None {
        return Err(bad(format!(
            "params: transform {:?} in an IVF-source index (NONE expected)",
            l.p.transform
        )));
    }
    let bad_file = |e: crate::error::Error| match e.status {
        Status::BadFileFormat => bad(e.message),
        _ => e,
    };
    // Lists built on the borrowed W take it again; the others hold their
    // rows (a mismatch is refused by the IVF loader: "this index was built
    // on a borrowed W" / "holds its own rows").
    let borrowed = Ivf::borrows_w_in(l.c).map_err(bad_file)?;
    let w = match (borrowed, l.w) {
        (false, _) => None,
        (true, Some((Weights::F32(v), s))) => Some(RowsIn::F32(v, s)),
        (true, Some((other, s))) => Some(RowsIn::Narrow(other, s)),
        (true, None) => {
            return Err(bad(
                "IVFPARAM: lists on the index's rows in an index without rows".into(),
            ))
        }
    };
    // SAFETY: a given `w` is the index's borrowed W, kept alive and
    // unchanged by the caller while the index lives (its load contract).
    let ivf = unsafe { Ivf::from_container(l.c, w) }.map_err(bad_file)?;
    if ivf.rows() != l.rows || ivf.dim() != l.dim || ivf.has_bias() != l.has_bias {
        return Err(bad(format!(
            "IVFPARAM: lists of {} x {} (bias {}) in an index of {} x {} (bias {})",
            ivf.rows(),
            ivf.dim(),
            ivf.has_bias(),
            l.rows,
            l.dim,
            l.has_bias
        )));
    }
    Ok(Box::new(ivf))
}
