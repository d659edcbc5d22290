//! Label-aware lists: lshk's label-aware buckets on the k-means lists.
//!
//! [`Ivf::train_labels`] takes (query, labels) training pairs, finds the
//! list each training query visits first (the best estimate `e_l`, exactly
//! as a search does), counts the labels that land in each list and keeps a
//! list's `label_cap` most frequent ones (ties to the smaller id; the
//! counting is [`crate::source::labels::count_labels`], shared with the LSH
//! index). Each list then holds
//!
//! * [`LabelPolicy::Beside`]: its rows and its top labels (a union, each id
//!   once per list);
//! * [`LabelPolicy::Instead`]: only its top labels when it has any, its
//!   rows otherwise (unlike an LSH bucket, an IVF list that no training
//!   query chose keeps its rows, so that a query landing there is still
//!   answered).
//!
//! A row may now stand in several lists: its codes (and, with an owned
//! copy, its f32 row) are stored once per list, and a search counts it once
//! (the re-rank and the returned top-k are deduplicated by id). The
//! centroids and the lists' spreads do not change, so every query ranks
//! the lists as before: a training query still visits its list first.

use super::*;
use crate::source::labels::{check_finite, check_labels, count_labels, LabelParams, LabelPolicy};

impl Ivf {
    /// Label-aware lists from `n` training queries (`queries` row `i` at
    /// `i * q_stride`, finite) and their labels (CSR: query `i`'s labels are
    /// `labels[label_offsets[i] .. label_offsets[i + 1]]`, each `< rows`;
    /// repeats count). See the module documentation. Only once per index,
    /// and not with [`Codes::Pq4`] or [`Codes::Pq4I8`] (their 4-bit codes
    /// are residuals to one list's centroid). The result does not depend on
    /// the tier or the threads.
    pub fn train_labels(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &LabelParams,
    ) -> Result<()> {
        self.train_labels_isa(
            isa::active(),
            queries,
            n,
            q_stride,
            label_offsets,
            labels,
            p,
        )
    }

    /// [`Ivf::train_labels`] on one tier (tests: the same on every tier).
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub fn train_labels_isa(
        &mut self,
        tier: Isa,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &LabelParams,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        if let Some(s) = &self.labels {
            bail!(
                InvalidArgument,
                "the index is already trained with labels ({} pairs, label_cap {}, {:?}); \
                 build or load an untrained index to train again",
                s.pairs,
                s.params.label_cap,
                s.params.policy
            );
        }
        if self.pq.is_some() {
            bail!(
                InvalidArgument,
                "label training needs codes I8 or None: PQ4 (and PQ4_I8) codes are \
                 residuals to one list's centroid (not supported yet)"
            );
        }
        let dim = self.dim;
        let need = strided_len(n, dim, q_stride, "queries")?;
        if queries.len() < need {
            bail!(
                BufferTooSmall,
                "queries hold {} floats, {n} queries of stride {q_stride} need {need}",
                queries.len()
            );
        }
        check_labels(n, self.rows, label_offsets, labels)?;
        check_finite(queries, n, dim, q_stride)?;
        crate::error::check_query_range(queries, n, dim, q_stride, self.vmax, "queries")?;
        let nlist = self.nlist;
        // Lists are the "buckets" of one table: codes < 2^range_bits are
        // not folded.
        let range_bits = (usize::BITS - (nlist.max(2) - 1).leading_zeros()).max(1);
        if range_bits > crate::source::MAX_RANGE_BITS {
            bail!(
                InvalidArgument,
                "label training counts at most 2^24 lists; the index has {nlist}"
            );
        }

        // The list each training query visits first.
        let mut first = crate::error::try_vec::<u32>(n, "training queries' lists")?;
        let v = Variant::of(tier)?;
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            for (i, f) in first.iter_mut().enumerate() {
                let q = &queries[i * q_stride..i * q_stride + dim];
                self.list_estimates(v, q, &mut s);
                *f = argmax_first(crate::kernels::select::kernels(tier), &s.cscore[..nlist]) as u32;
            }
        });
        let lab = count_labels(
            &first,
            n,
            1,
            range_bits,
            label_offsets,
            labels,
            p.label_cap,
            0,
        )?;
        let bl = &lab[0];

        // The new lists (ids ascending within a list, as built).
        let mut offsets = Vec::with_capacity(nlist + 1);
        let mut ids: Vec<u32> = Vec::with_capacity(self.ids.len() + bl.labels.len());
        offsets.push(0u32);
        for l in 0..nlist {
            let rs = &self.ids[self.offsets[l] as usize..self.offsets[l + 1] as usize];
            let (ys, _) = bl.bucket(l);
            match p.policy {
                LabelPolicy::Instead if !ys.is_empty() => ids.extend_from_slice(ys),
                LabelPolicy::Instead => ids.extend_from_slice(rs),
                LabelPolicy::Beside => {
                    let (mut i, mut j) = (0, 0);
                    while i < rs.len() && j < ys.len() {
                        let (a, c) = (rs[i], ys[j]);
                        ids.push(a.min(c));
                        i += usize::from(a <= c);
                        j += usize::from(c <= a);
                    }
                    ids.extend_from_slice(&rs[i..]);
                    ids.extend_from_slice(&ys[j..]);
                }
            }
            if ids.len() >= u32::MAX as usize {
                bail!(
                    SizeOverflow,
                    "the label-aware lists would hold {} positions, more than 2^32 - 2",
                    ids.len()
                );
            }
            offsets.push(ids.len() as u32);
        }
        let npos = ids.len();
        let owned = matches!(self.exact, Exact::Owned(_));
        crate::error::check_fits_memory(
            npos as u128
                * (12
                    + if owned { dim as u128 * 4 } else { 0 }
                    + if self.codes.is_some() {
                        dim.div_ceil(64) as u128 * 64 + 8
                    } else {
                        0
                    }),
            "the label-aware IVF lists",
        )?;

        // Where each new position's row is now: its old position (the old
        // ids are a permutation: the index is untrained).
        let pos_of = super::file::home_of(&self.ids, self.rows);
        let src: Vec<u32> = ids.iter().map(|&r| pos_of[r as usize]).collect();
        let has_bias = !self.bias_pos.is_empty();
        let bias_pos: Vec<f32> = if has_bias {
            src.iter().map(|&s| self.bias_pos[s as usize]).collect()
        } else {
            Vec::new()
        };
        // The rows the codes and spreads are computed from, and which row
        // of them each new position is: the owned copy by old position, or
        // the borrowed W by id.
        let (rows_src, wstride, by_id) = self.f32_rows()?;
        let (wsrc, wrows) = (&rows_src[..], rows_src.len());
        let which: &[u32] = if by_id { &ids } else { &src };
        let wn = if by_id { self.rows } else { self.ids.len() };
        debug_assert!(wrows >= (wn - 1) * wstride + dim);
        let codes = match &self.codes {
            Some(_) => Some(qdot::quantize_rows_with(
                wsrc,
                wn,
                dim,
                wstride,
                Some(which),
                0,
            )?),
            None => None,
        };
        let exact = match &self.exact {
            Exact::Owned(v) => {
                let mut nv = vec![0f32; checked_mul(npos, dim, "positions * dim")?];
                for (d, &s) in nv.chunks_exact_mut(dim).zip(&src) {
                    let s = s as usize;
                    d.copy_from_slice(&v[s * dim..(s + 1) * dim]);
                }
                Exact::Owned(nv)
            }
            Exact::Borrowed { w, stride } => Exact::Borrowed {
                w: w.clone(),
                stride: *stride,
            },
            Exact::Narrow { w, stride } => Exact::Narrow {
                w: w.clone(),
                stride: *stride,
            },
        };
        self.offsets = offsets;
        // The lists changed: none of the kept panels holds one of them.
        self.lpan = ListPanels::new(self.nlist, codes.is_some());
        self.ids = ids;
        self.bias_pos = bias_pos;
        self.codes = codes;
        self.exact = exact;
        self.vmax = self.value_max();
        self.labels = Some(Box::new(LabelState {
            params: *p,
            queries: n as u64,
            pairs: (label_offsets[n] - label_offsets[0]) as u64,
        }));
        Ok(())
    }

    /// The label training of the index, if any ([`Ivf::train_labels`]).
    pub fn label_state(&self) -> Option<LabelState> {
        self.labels.as_deref().copied()
    }

    /// Positions in the lists: `rows`, or more after label training (a row
    /// may stand in several lists).
    pub fn positions(&self) -> usize {
        self.ids.len()
    }
}
