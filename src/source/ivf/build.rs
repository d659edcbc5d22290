//! Building an IVF index: k-means lists, the rows reordered list by list,
//! their codes and the lists' spreads (module docs of `ivf`).

use super::*;

impl Ivf {
    /// Builds an index that owns an f32 copy of the rows in list order
    /// (plus the int8 codes with [`Codes::I8`]). W is not kept.
    pub fn build(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
    ) -> Result<Ivf> {
        // SAFETY: borrow = false: the index copies W.
        unsafe { Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p, false) }
    }

    /// [`Ivf::build`] that keeps a pointer to `w` for the exact scores
    /// instead of copying it (needs [`Codes::I8`]).
    ///
    /// # Safety
    /// `w` must stay alive and unchanged for as long as the index lives.
    pub unsafe fn build_borrowed(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
    ) -> Result<Ivf> {
        // SAFETY: forwarded: the caller keeps `w` alive and unchanged.
        unsafe { Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p, true) }
    }

    /// [`Ivf::build`] on one chosen tier (tests: the result is the same on
    /// every tier); with `borrow`, [`Ivf::build_borrowed`].
    ///
    /// # Safety
    /// With `borrow = true`, as [`Ivf::build_borrowed`]: `w` must stay
    /// alive and unchanged for as long as the index lives. (Nothing with
    /// `borrow = false`.)
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub unsafe fn build_isa(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
        borrow: bool,
    ) -> Result<Ivf> {
        // SAFETY: forwarded (the caller's promise when `borrow`).
        unsafe { Self::build_with_centroids(tier, w, bias, rows, dim, w_stride, p, borrow) }
            .map(|(ix, _)| ix)
    }

    /// [`Ivf::build_isa`] that also returns the f32 k-means centroids the
    /// rows were assigned to (`nlist * dim`, the `w` part; the bias part is
    /// [`Ivf::centroid_bias`]). The index keeps only their int8 codes
    /// ([`Ivf::centroid_codes`]), which is what a query ranks lists by;
    /// tests and tools use these to check the assignment.
    ///
    /// # Safety
    /// As [`Ivf::build_isa`].
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub unsafe fn build_with_centroids(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IvfParams,
        borrow: bool,
    ) -> Result<(Ivf, Vec<f32>)> {
        // SAFETY: forwarded (the caller's promise when `borrow`).
        unsafe {
            Self::build_weighted_with_centroids(tier, w, bias, rows, dim, w_stride, None, p, borrow)
        }
    }

    /// [`Ivf::build`] with per-row weights steering the k-means: each
    /// centroid is the weighted mean of its training rows (see
    /// `docs/ivf.md`, "Row weights"). `weights` holds `rows` values,
    /// finite and `>= 0`, not all zero; [`row_weights_from_hits`] derives
    /// them from training queries. Every row is still assigned to its
    /// nearest centroid and searchable (a weight of 0 only means the row
    /// does not pull its centroid). Weights all 1 give exactly
    /// [`Ivf::build`]'s index. The weights are not stored in the index
    /// (nor by [`Ivf::save`]): only the lists they shaped are.
    pub fn build_weighted(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        weights: &[f32],
        p: &IvfParams,
    ) -> Result<Ivf> {
        // SAFETY: borrow = false: the index copies W.
        unsafe {
            Self::build_weighted_with_centroids(
                isa::active(),
                w,
                bias,
                rows,
                dim,
                w_stride,
                Some(weights),
                p,
                false,
            )
        }
        .map(|(ix, _)| ix)
    }

    /// [`Ivf::build_weighted`] that borrows `w` as [`Ivf::build_borrowed`].
    ///
    /// # Safety
    /// `w` must stay alive and unchanged for as long as the index lives.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn build_weighted_borrowed(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        weights: &[f32],
        p: &IvfParams,
    ) -> Result<Ivf> {
        // SAFETY: forwarded: the caller keeps `w` alive and unchanged.
        unsafe {
            Self::build_weighted_with_centroids(
                isa::active(),
                w,
                bias,
                rows,
                dim,
                w_stride,
                Some(weights),
                p,
                true,
            )
        }
        .map(|(ix, _)| ix)
    }

    /// [`Ivf::build_with_centroids`] with optional row weights
    /// ([`Ivf::build_weighted`]; `None` = every row weighs 1, the plain
    /// build bit for bit).
    ///
    /// # Safety
    /// As [`Ivf::build_isa`].
    #[allow(clippy::too_many_arguments)]
    #[doc(hidden)]
    pub unsafe fn build_weighted_with_centroids(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        weights: Option<&[f32]>,
        p: &IvfParams,
        borrow: bool,
    ) -> Result<(Ivf, Vec<f32>)> {
        isa::check_supported(tier)?;
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if rows >= u32::MAX as usize {
            bail!(InvalidArgument, "rows is {rows}; at most 2^32 - 2");
        }
        crate::error::check_layer_buffers(w, bias, rows, dim, w_stride)?;
        if p.iters == 0 {
            bail!(InvalidArgument, "iters must be >= 1");
        }
        if borrow && p.codes == Codes::None {
            bail!(
                InvalidArgument,
                "codes None scores the index's own f32 copy: it cannot borrow W"
            );
        }
        let pq_m = match p.codes {
            c if c.has_pq() => pq::resolve_m(dim, p.pq_m)?,
            _ if p.pq_m != 0 => bail!(
                InvalidArgument,
                "pq_m is {}; it applies to codes PQ4 and PQ4_I8 only (0 otherwise)",
                p.pq_m
            ),
            _ => 0,
        };
        if !(p.pq_eta.is_finite() && p.pq_eta >= 1.0) {
            bail!(
                InvalidArgument,
                "pq_eta is {}; it must be finite and >= 1",
                p.pq_eta
            );
        }
        if p.codes.has_pq() && rows < 16 {
            bail!(
                InvalidArgument,
                "codes PQ4 and PQ4_I8 train 16 centroids per sub-space: they need at least 16 rows, not {rows}"
            );
        }
        let nlist = if p.nlist == 0 {
            auto_nlist(rows)
        } else {
            p.nlist as usize
        };
        if nlist > rows {
            bail!(
                InvalidArgument,
                "nlist is {nlist}, more than the {rows} rows"
            );
        }
        let ntrain = if p.train_rows == 0 {
            rows.min(64usize.saturating_mul(nlist))
        } else {
            (p.train_rows as usize).min(rows)
        };
        if ntrain < nlist {
            bail!(
                InvalidArgument,
                "train_rows is {ntrain}, fewer than the {nlist} lists"
            );
        }
        crate::error::check_finite_rows(w, rows, dim, w_stride, "w")?;
        if let Some(wt) = weights {
            check_row_weights(wt, rows)?;
        }
        if let Some(r) = bias.and_then(|b| b[..rows].iter().position(|v| !v.is_finite())) {
            bail!(
                NonFinite,
                "bias[{r}] is {} (finite values needed)",
                bias.unwrap()[r]
            );
        }
        crate::error::check_row_range(w, bias, rows, dim, w_stride)?;
        let copy_bytes = if borrow {
            0
        } else {
            rows as u128 * dim as u128 * 4
        };
        let i8_bytes = rows as u128 * (dim.div_ceil(64) * 64 + 12) as u128;
        // Padded to 32-row blocks per list, plus the unpacked copy of the
        // build and the training residuals.
        let pq_bytes = (rows as u128 + 32 * nlist as u128) * pq_m as u128
            + (pq::TRAIN_ROWS.min(rows) * dim * 4) as u128;
        let code_bytes = match p.codes {
            Codes::I8 => i8_bytes,
            Codes::Pq4 => pq_bytes,
            Codes::Pq4I8 => i8_bytes + pq_bytes,
            Codes::None => 0,
        };
        crate::error::check_fits_memory(
            copy_bytes + code_bytes + rows as u128 * 12 + ntrain as u128 * (dim as u128 + 1) * 4,
            "the IVF index",
        )?;
        let threads = crate::par::threads(p.threads as usize);
        let has_bias = bias.is_some();
        let xdim = dim + usize::from(has_bias);
        let put = |dst: &mut [f32], r: usize| {
            dst[..dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            if let Some(b) = bias {
                dst[dim] = b[r];
            }
        };

        // Seeded sample: a partial Fisher-Yates shuffle of the row ids.
        let mut rng = SplitMix64::new(p.seed);
        let mut perm: Vec<u32> = (0..rows as u32).collect();
        for i in 0..ntrain {
            let j = i + rng.below((rows - i) as u64) as usize;
            perm.swap(i, j);
        }
        let mut xs = vec![0f32; checked_mul(ntrain, xdim, "train_rows * dim")?];
        for (i, &r) in perm[..ntrain].iter().enumerate() {
            put(&mut xs[i * xdim..(i + 1) * xdim], r as usize);
        }
        // The sample's weights, in sample order (the sample itself stays
        // uniform: see docs/ivf.md, "Row weights").
        let sw: Option<Vec<f32>> =
            weights.map(|wt| perm[..ntrain].iter().map(|&r| wt[r as usize]).collect());
        let KMeans {
            cent,
            asg: train_asg,
            tracks: train_bounds,
            last: last_cent,
        } = kmeans(
            tier,
            &Points {
                x: &xs,
                n: ntrain,
                xdim,
            },
            sw.as_deref(),
            nlist,
            p.iters,
            threads,
            &mut rng,
        )?;
        drop((xs, sw));

        // Assign every row, in blocks (bounded memory for the [w, b] copy).
        // A training row starts from its last training assignment and
        // bounds, so it is scored again only if it may have moved.
        let mut sample_of = vec![u32::MAX; rows];
        for (i, &r) in perm[..ntrain].iter().enumerate() {
            sample_of[r as usize] = i as u32;
        }
        drop(perm);
        let cv = CentView::new(&cent, nlist, xdim, p.iters, Some(&last_cent))?;
        drop(last_cent);
        let mut asg = vec![0u32; rows];
        const ABLOCK: usize = 1 << 16;
        let mut xb = vec![0f32; ABLOCK.min(rows) * xdim];
        let mut bb = vec![NO_TRACK; ABLOCK.min(rows)];
        let mut r0 = 0;
        while r0 < rows {
            let n = ABLOCK.min(rows - r0);
            for i in 0..n {
                put(&mut xb[i * xdim..(i + 1) * xdim], r0 + i);
                let t = sample_of[r0 + i];
                (asg[r0 + i], bb[i]) = if t == u32::MAX {
                    (0, NO_TRACK)
                } else {
                    (train_asg[t as usize], train_bounds[t as usize])
                };
            }
            let pts = Points {
                x: &xb[..n * xdim],
                n,
                xdim,
            };
            assign(
                tier,
                &pts,
                &cv,
                threads,
                &mut asg[r0..r0 + n],
                Some(&mut bb[..n]),
            )?;
            r0 += n;
        }
        drop((xb, bb, sample_of, train_asg, train_bounds));

        // Counting sort: lists in order, rows by id inside a list.
        let mut offsets = vec![0u32; nlist + 1];
        for &a in &asg {
            offsets[a as usize + 1] += 1;
        }
        for l in 0..nlist {
            offsets[l + 1] += offsets[l];
        }
        let mut cur = offsets.clone();
        let mut ids = vec![0u32; rows];
        for (r, &a) in asg.iter().enumerate() {
            ids[cur[a as usize] as usize] = r as u32;
            cur[a as usize] += 1;
        }
        let bias_pos: Vec<f32> = match bias {
            Some(b) => ids.iter().map(|&r| b[r as usize]).collect(),
            None => Vec::new(),
        };
        let lr = ListRows {
            w,
            bias,
            dim,
            stride: w_stride,
            cent: &cent,
            xdim,
            offsets: &offsets,
            ids: &ids,
        };
        let Shapes {
            dirs,
            kappa,
            far,
            spread,
        } = list_shapes(&lr, threads);
        let shape = Some(Box::new(Shape {
            dirs: qdot::quantize_rows(&dirs, nlist * LIST_DIRS, dim, dim)?,
            kappa,
            far,
        }));
        let mut centroids = vec![0f32; nlist * dim];
        let mut cbias = vec![0f32; nlist];
        for c in 0..nlist {
            centroids[c * dim..(c + 1) * dim].copy_from_slice(&cent[c * xdim..c * xdim + dim]);
            if has_bias {
                cbias[c] = cent[c * xdim + dim];
            }
        }
        let exact = if borrow {
            let len = strided_len(rows, dim, w_stride, "w")?;
            Exact::Borrowed {
                // SAFETY: `borrow`: the caller keeps W alive and unchanged
                // while the index lives (this function's contract).
                w: unsafe { Buf::borrowed(&w[..len]) },
                stride: w_stride,
            }
        } else {
            let mut v = vec![0f32; rows * dim];
            for (pos, &r) in ids.iter().enumerate() {
                let r = r as usize;
                v[pos * dim..(pos + 1) * dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            }
            Exact::Owned(v)
        };
        let codes = if p.codes.has_i8() {
            Some(qdot::quantize_rows_with(
                w,
                rows,
                dim,
                w_stride,
                Some(&ids),
                threads,
            )?)
        } else {
            None
        };
        let pq = if p.codes.has_pq() {
            let row = |pos: usize| -> &[f32] {
                let r = ids[pos] as usize;
                &w[r * w_stride..r * w_stride + dim]
            };
            Some(Box::new(pq::ListPq::build(
                &pq::Source {
                    row: &row,
                    dim,
                    centroids: &centroids,
                    offsets: &offsets,
                },
                pq_m,
                (p.pq_eta != 1.0).then_some(crate::quant::pq4::Anisotropic {
                    eta: p.pq_eta,
                    sweeps: 4,
                }),
                threads,
                p.seed,
            )?))
        } else {
            None
        };
        let cq = qdot::quantize_rows(&centroids, nlist, dim, dim)?;
        let mut ix = Ivf {
            lpan: ListPanels::new(nlist, codes.is_some()),
            dpan: std::sync::OnceLock::new(),
            cpan: centroid_panels(&cq)?,
            cnib: centroid_nibbles(&cq, &cbias, &spread)?,
            cq,
            pq,
            rows,
            dim,
            nlist,
            params: IvfParams {
                nlist: nlist as u32,
                train_rows: ntrain as u32,
                pq_m: pq_m as u32,
                ..*p
            },
            cbias,
            spread,
            offsets,
            ids,
            bias_pos,
            exact,
            codes,
            shape,
            labels: None,
            vmax: 0.0,
        };
        ix.vmax = ix.value_max();
        Ok((ix, centroids))
    }
}
