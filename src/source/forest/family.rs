//! The hashing forest as a candidate source of [`crate::Index`]
//! ([`Family::Forest`]), registered with one line in
//! the index's registry (`index::SOURCES`): the forest's candidate sets, scored
//! by the index (exact logits of its W and bias) and cut to the top `k`.
//!
//! * Build: the forest over the index's rows with
//!   [`crate::index::IndexParams`]'s `forest` ([`super::ForestParams`]):
//!   the same trees as [`Forest::build`] (the forest ignores the bias; the
//!   index's logits include it). The forest ranks its pools by cosine with
//!   the f32 rows, so the index keeps W as f32 or borrows it
//!   ([`Storage::F32`], [`Storage::BorrowedF32`]; other storages are
//!   refused).
//! * Query ([`crate::index::QueryParams::forest`], [`ForestQuery`]): the
//!   candidates of a sample are its set `S(x)` of `max(set_size, k)`
//!   classes (module documentation of [`super`]), trimmed by
//!   `confidence` (HF-A's `τcp`; the logits include the index's bias, and
//!   at least `k` classes stay); the index scores them and keeps the top
//!   `k`.
//! * File: the forest's sections (`FPARAMS`, `FCOUNTS`, `FNODES`, `FPERM`,
//!   `FPLANEOF`, `FPLANES`, `FOFFS`) beside the index's `PARAMS`, `BIAS`
//!   and `WEIGHTS`, checked as in a forest file and against `PARAMS`.
//! * Refused: a transform other than NONE, caller-given planes or maps,
//!   label training, row updates (as for the graph and the IVF).

use std::cell::RefCell;

use super::{Forest, ForestResult};
use crate::error::Result;
use crate::format::SectionOut;
use crate::matmul::Weights;
use crate::source::GatherResult;
use crate::source::{
    non_lsh_build, non_lsh_load, BuildInput, CandidateSource, IndexView, LoadInput, QueryParams,
    SourceRegistration,
};
use crate::source::{Family, QueryStats, Resolved, Storage};

/// The forest family's registration.
pub(crate) static REGISTRATION: SourceRegistration = SourceRegistration {
    name: "forest",
    accepts: |f| f == Family::Forest,
    build,
    load,
};

thread_local! {
    /// A block's candidate sets (buffers reused per thread).
    static SETS: RefCell<ForestResult> = RefCell::new(ForestResult::default());
}

impl CandidateSource for Forest {
    fn check_query(&self, _ix: &IndexView<'_>, qp: &QueryParams) -> Result<()> {
        super::check_confidence(qp.forest.confidence, "forest.confidence")
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
        _scores: &mut Vec<f32>,
        _st: &mut QueryStats,
    ) -> Result<()> {
        let Weights::F32(w) = ix.weights else {
            unreachable!("a forest-family index keeps W as f32 (checked at build and load)")
        };
        let set = (qp.forest.set_size as usize).max(k).max(1);
        let set = u32::try_from(set).unwrap_or(u32::MAX);
        SETS.with(|cell| -> Result<()> {
            let r = &mut *cell.borrow_mut();
            let min_keep = u32::try_from(k.max(1)).unwrap_or(u32::MAX);
            self.query_finite_w(
                w,
                ix.weight_stride,
                ix.bias,
                q,
                n,
                q_stride,
                set,
                qp.forest.confidence,
                min_keep,
                r,
            )?;
            // The sets are the CSR candidates: swap the buffers (each side
            // keeps a buffer to reuse) instead of copying.
            std::mem::swap(&mut out.ids, &mut r.ids);
            std::mem::swap(&mut out.offsets, &mut r.offsets);
            out.counts.clear();
            Ok(())
        })
    }

    fn sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        self.file_sections(keep)
    }

    fn memory_bytes(&self) -> usize {
        Forest::memory_bytes(self)
    }
}

/// The storages whose rows the forest ranks by (f32).
fn f32_rows(s: Storage) -> bool {
    matches!(s, Storage::F32 | Storage::BorrowedF32)
}

fn build(b: &BuildInput<'_>, r: &mut Resolved) -> Result<Box<dyn CandidateSource>> {
    let p = b.p;
    non_lsh_build(
        "forest",
        "splits the rows themselves",
        p,
        r,
        p.forest.seed,
        p.forest.threads,
    )?;
    if !f32_rows(p.storage) {
        crate::bail!(
            InvalidArgument,
            "the forest ranks its candidates by cosine with f32 rows: storage must be F32 or \
             BORROWED_F32, not {:?}",
            p.storage
        );
    }
    Ok(Box::new(Forest::build(
        b.w, b.rows, b.dim, b.w_stride, &p.forest,
    )?))
}

fn load(l: &LoadInput<'_>) -> Result<Box<dyn CandidateSource>> {
    let bad = l.bad;
    non_lsh_load("forest", l)?;
    if !f32_rows(l.p.storage) {
        return Err(bad(format!(
            "params: storage {:?} in a forest-family index (F32 or BORROWED_F32 expected)",
            l.p.storage
        )));
    }
    let f = Forest::from_container(l.c).map_err(|e| match e.status {
        crate::error::Status::BadFileFormat => bad(e.message),
        _ => e,
    })?;
    if f.rows() != l.rows || f.dim() != l.dim {
        return Err(bad(format!(
            "FPARAMS: a forest of {} x {} in an index of {} x {}",
            f.rows(),
            f.dim(),
            l.rows,
            l.dim
        )));
    }
    Ok(Box::new(f))
}
