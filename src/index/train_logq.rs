//! The index's inclusion probabilities of LSH sampling
//! ([`crate::source::lsh::train_logq`]).

use super::*;
use crate::source::lsh::train_logq::{dot_norm, probability};

impl Index {
    /// Per-candidate inclusion probabilities of LSH sampling (module
    /// documentation): for each query `i < nq` (row `i` of `q` at
    /// `i * q_stride`, `dim` floats) and each candidate
    /// `ids[offsets[i]..offsets[i + 1]]` (CSR, `nq + 1` offsets),
    /// `out[j] = 1 - (1 - p^K)^l` with `p = 1 - θ/π` for the angle θ
    /// between the transformed query and the transformed stored row, and
    /// `l = tables[i]` (`tables`: `nq` counts `<= L`; `None`: L).
    ///
    /// Errors (nothing written): `Unsupported` (an index without LSH
    /// tables), `InvalidArgument` (a DWTA index, an index
    /// with label-aware buckets, bad offsets, `q_stride < dim`, a table
    /// count `> L`), `BufferTooSmall` (`q`, `tables` or `out` too short),
    /// `IndexOutOfRange` (an id `>= rows`), `NonFinite` (a query value),
    /// `SizeOverflow`. Thread-safe; allocates four one-row scratch vectors
    /// per call. The dot products of rows stored as f32 (transform None or
    /// BiasAug) run on the active tier's kernel ([`crate::kernels::logq`]),
    /// which returns the same bits as the plain code on every tier.
    #[allow(clippy::too_many_arguments)]
    pub fn inclusion_probabilities(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        ids: &[u32],
        offsets: &[usize],
        tables: Option<&[u32]>,
        out: &mut [f64],
    ) -> Result<()> {
        self.lsh("inclusion_prob")?;
        if self.family() != Family::SimHash {
            bail!(
                InvalidArgument,
                "inclusion probabilities need a SimHash index; this index is DWTA"
            );
        }
        if self.labels.is_some() {
            bail!(
                InvalidArgument,
                "the index has label-aware buckets (lshk_index_train_labels): a row may \
                 sit in buckets its code does not give, so the SimHash formula does not apply"
            );
        }
        matmul::check_offsets(offsets, nq, ids.len(), "ids")?;
        self.check_queries(q, nq, q_stride, "q")?;
        let rows = self.rows();
        if let Some(j) = ids.iter().position(|&r| r as usize >= rows) {
            let i = offsets.partition_point(|&o| o <= j) - 1;
            bail!(
                IndexOutOfRange,
                "ids[{j}] (query {i}) is {}, the index has {rows} rows",
                ids[j]
            );
        }
        let l_max = self.num_tables();
        if let Some(t) = tables {
            if t.len() < nq {
                bail!(
                    BufferTooSmall,
                    "`tables` holds {} counts, nq = {nq} needed",
                    t.len()
                );
            }
            if let Some(i) = t[..nq].iter().position(|&v| v > l_max) {
                bail!(
                    InvalidArgument,
                    "tables[{i}] is {}, the index has L = {l_max} tables",
                    t[i]
                );
            }
        }
        if out.len() < ids.len() {
            bail!(
                BufferTooSmall,
                "`out` holds {} values, offsets[nq] = {} needed",
                out.len(),
                ids.len()
            );
        }
        let (dim, hd, k) = (self.dim(), self.hash_dim(), self.bits());
        let transform = self.transform();
        let inv_u = 1.0 / self.mips_u() as f64;
        let bias = self.bias();
        let st = self.weight_stride();
        let w = self.weights();
        // The thread's buffers: the query and a row transformed, in f32 and
        // f64.
        crate::par::with_taken(&LOGQ, |sc| -> Result<()> {
            let LogqScratch { tq, tq64, row, tw } = sc;
            for (v, n) in [(&mut *tq, hd), (&mut *row, dim), (&mut *tw, hd)] {
                v.clear();
                v.resize(n, 0.0);
            }
            tq64.clear();
            tq64.resize(hd, 0.0);
            // The rows read in place (f32 storage, no transform or BiasAug): the
            // dot products of a block of candidates by the tier's kernel, which
            // returns the scalar lanes' bits (crate::kernels::logq).
            let kern = crate::kernels::logq::kernels(crate::isa::active());
            let in_place = match (&w, transform) {
                (Weights::F32(s), Transform::None | Transform::BiasAug) => {
                    Some(crate::kernels::logq::AugRows {
                        w: s,
                        stride: st,
                        dim,
                        aug: transform == Transform::BiasAug,
                        bias,
                    })
                }
                _ => None,
            };
            const BLOCK: usize = 128;
            let (mut dots, mut nrms) = ([0f64; BLOCK], [0f64; BLOCK]);
            for i in 0..nq {
                self.transform_query(&q[i * q_stride..i * q_stride + dim], tq);
                for (d, &s) in tq64.iter_mut().zip(tq.iter()) {
                    *d = s as f64;
                }
                let (_, qn) = dot_norm(tq64, tq);
                let l = tables.map_or(l_max, |t| t[i]);
                if let Some(rows) = &in_place {
                    let mut j0 = offsets[i];
                    while j0 < offsets[i + 1] {
                        let j1 = (j0 + BLOCK).min(offsets[i + 1]);
                        (kern.dot_norms)(tq64, rows, &ids[j0..j1], &mut dots, &mut nrms);
                        for j in j0..j1 {
                            out[j] = probability(dots[j - j0], qn * nrms[j - j0], k, l);
                        }
                        j0 = j1;
                    }
                    continue;
                }
                for j in offsets[i]..offsets[i + 1] {
                    let r = ids[j] as usize;
                    let wr: &[f32] = match &w {
                        Weights::F32(s) => &s[r * st..r * st + dim],
                        Weights::Bf16(s) => {
                            matmul::convert_bf16_to_f32(&s[r * st..r * st + dim], row)?;
                            &row[..]
                        }
                        Weights::F16(s) => {
                            matmul::convert_f16_to_f32(&s[r * st..r * st + dim], row)?;
                            &row[..]
                        }
                        Weights::I8 { w, scales } => {
                            for (o, &x) in row.iter_mut().zip(&w[r * st..r * st + dim]) {
                                *o = x as f32 * scales[r];
                            }
                            &row[..]
                        }
                    };
                    let b = bias.map_or(0.0, |b| b[r]);
                    crate::index::transform_row(transform, wr, b, inv_u, tw);
                    let (dot, wn) = dot_norm(tq64, tw);
                    out[j] = probability(dot, qn * wn, k, l);
                }
            }
            Ok(())
        })
    }
}

/// [`Index::inclusion_probabilities`]' buffers, kept per thread.
#[derive(Default)]
struct LogqScratch {
    tq: Vec<f32>,
    tq64: Vec<f64>,
    row: Vec<f32>,
    tw: Vec<f32>,
}

thread_local! {
    static LOGQ: std::cell::RefCell<LogqScratch> =
        std::cell::RefCell::new(LogqScratch::default());
}
