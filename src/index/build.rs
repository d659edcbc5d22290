//! Building an index: the rows checked, the candidate source built by its
//! family's registration (`source.rs`; LSH: the rows transformed, hashed
//! in blocks with progress, the tables built), W stored or borrowed.

use super::*;

impl Index {
    pub(super) fn build_impl(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &IndexParams,
        progress: Option<&(dyn Fn(u64, u64) + Sync)>,
    ) -> Result<Index> {
        // ---- validation (nothing is computed before it all passes)
        if p.ivf_row_weights.is_some() && p.family != Family::Ivf {
            bail!(
                InvalidArgument,
                "row weights steer the IVF source's k-means; this index is the {:?} source",
                p.family
            );
        }
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if rows > MAX_ROWS {
            bail!(InvalidArgument, "rows is {rows}; at most {MAX_ROWS}");
        }
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        let need = crate::error::check_layer_buffers(w, bias, rows, dim, w_stride)?;
        if let Some(b) = bias {
            if let Some(i) = b[..rows].iter().position(|v| !v.is_finite()) {
                bail!(NonFinite, "bias[{i}] (row {i}) is {}", b[i]);
            }
        }
        if let Some((r, j)) = first_non_finite(w, rows, dim, w_stride) {
            bail!(
                NonFinite,
                "w row {r} column {j} is {} (finite weights needed)",
                w[r * w_stride + j]
            );
        }
        // Even a query of |q_j| <= 1 could overflow f32 against such rows.
        let a = crate::error::max_abs_rows(w, rows, dim, w_stride)
            .max(bias.map_or(0.0, |b| crate::error::max_abs_rows(b, 1, rows, rows)));
        crate::error::check_scorable(a, dim, "the rows' values")?;
        if p.storage == Storage::F16 {
            for r in 0..rows {
                let row = &w[r * w_stride..r * w_stride + dim];
                if let Some(j) = row.iter().position(|v| v.abs() > 65504.0) {
                    bail!(
                        InvalidArgument,
                        "w row {r} column {j} is {}, beyond the f16 range (65504): use f32 or bf16 storage",
                        row[j]
                    );
                }
            }
        }
        let hash_dim = dim + (p.transform != Transform::None) as usize;
        let mut resolved = Resolved {
            family: p.family,
            bits: p.bits,
            tables: p.tables,
            sparsity: p.sparsity,
            bin_size: p.bin_size,
            seed: p.seed,
            range_bits: 0,
            bucket_cap: p.bucket_cap,
            storage: p.storage,
            transform: p.transform,
            threads: p.threads,
            given: false,
        };

        // ---- MIPS scale
        let mut mips_u = 1f32;
        if p.transform == Transform::Mips {
            let mut u = 0f64;
            for r in 0..rows {
                u = u.max(norm(&w[r * w_stride..r * w_stride + dim]));
            }
            if u > 0.0 && (u as f32).is_finite() {
                mips_u = u as f32;
            }
        }

        // ---- weights and bias
        let cnt = checked_mul(rows, dim, "rows * dim")?;
        let compact = |out: &mut dyn FnMut(usize, &[f32])| {
            for r in 0..rows {
                out(r, &w[r * w_stride..r * w_stride + dim]);
            }
        };
        let wstore = match p.storage {
            // SAFETY: the contract of borrowed weights (documented at
            // Storage::BorrowedF32 and LSHK_STORAGE_BORROWED_F32): the
            // caller keeps W alive and unchanged while the index lives.
            Storage::BorrowedF32 => unsafe { WStore::borrowed_f32(&w[..need], w_stride) },
            Storage::F32 => {
                let mut v = try_vec::<f32>(cnt, "f32 weights")?;
                compact(&mut |r, row| v[r * dim..(r + 1) * dim].copy_from_slice(row));
                WStore::from_vec_f32(v, dim)
            }
            Storage::Bf16 | Storage::F16 => {
                let mut v = try_vec::<u16>(cnt, "16-bit weights")?;
                let bf = p.storage == Storage::Bf16;
                compact(&mut |r, row| {
                    let o = &mut v[r * dim..(r + 1) * dim];
                    if bf {
                        matmul::convert_f32_to_bf16(row, o).expect("same length");
                    } else {
                        matmul::convert_f32_to_f16(row, o).expect("same length");
                    }
                });
                WStore::from_vec_u16(v, p.storage, dim)
            }
            Storage::I8 => {
                let mut v = try_vec::<i8>(cnt, "int8 weights")?;
                let mut s = try_vec::<f32>(rows, "int8 scales")?;
                matmul::quantize_rows_i8(w, rows, dim, w_stride, &mut v, dim, &mut s)?;
                WStore::from_vec_i8(v, s, dim)
            }
        };
        let bias = match bias {
            Some(b) => {
                let mut v = try_vec::<f32>(rows, "bias")?;
                v.copy_from_slice(&b[..rows]);
                Some(v)
            }
            None => None,
        };
        // ---- the candidate source (its family's registration: hashes the
        // rows into tables, or builds the graph)
        let total = rows as u64;
        let src = (source_registration(p.family).build)(
            &crate::source::BuildInput {
                w,
                bias: bias.as_deref(),
                rows,
                dim,
                w_stride,
                hash_dim,
                transform: p.transform,
                mips_u,
                p,
                progress,
                own_rows: match p.storage {
                    Storage::BorrowedF32 => None,
                    _ => Some((wstore.weights(rows), wstore.stride)),
                },
            },
            &mut resolved,
        )?;

        let mut idx = Index {
            rows,
            dim,
            hash_dim,
            mips_u,
            p: resolved,
            src,
            bias,
            w: wstore,
            codes: None,
            labels: None,
            dirty: Default::default(),
            vmax: 0.0,
            pool: Default::default(),
        };
        idx.vmax = idx.value_max();
        if let Some(cb) = progress {
            cb(total, total);
        }
        Ok(idx)
    }
}
