//! Building an index: the rows transformed, hashed in blocks (with
//! progress), the tables built, W stored or borrowed.

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
        let reg = crate::hash::registration(p.family);
        if let Some(other) = crate::hash::FAMILIES
            .iter()
            .find(|r| r.family != p.family && (r.given)(p))
        {
            bail!(
                InvalidArgument,
                "caller-given {} data ({}) but the family is {}",
                other.name,
                other.section,
                reg.name
            );
        }
        let hash_dim = dim + (p.transform != Transform::None) as usize;
        let given = (reg.given)(p);
        let resolved = Resolved {
            family: p.family,
            bits: p.bits,
            tables: p.tables,
            sparsity: if p.planes.is_some() { 0 } else { p.sparsity },
            bin_size: p.bin_size,
            seed: p.seed,
            range_bits: 0,
            bucket_cap: p.bucket_cap,
            storage: p.storage,
            transform: p.transform,
            threads: p.threads,
            given,
        };
        let fam = (reg.build)(&resolved.shape(hash_dim), p)?;
        let range_bits = if p.range_bits == 0 {
            default_range_bits(p.family, p.bits, p.bin_size, rows)
        } else {
            p.range_bits
        };
        if range_bits > crate::tables::MAX_RANGE_BITS {
            bail!(
                InvalidArgument,
                "range_bits is {range_bits}; it must be in 1..={}",
                crate::tables::MAX_RANGE_BITS
            );
        }
        let l = p.tables as usize;
        let ncodes = checked_mul(rows, l, "rows * L")?;

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
        let inv_u = 1.0 / mips_u as f64;

        // ---- hash every row
        let mut codes = try_vec::<u32>(ncodes, "row codes")?;
        let nthreads = crate::par::threads(p.threads as usize);
        let units: Vec<(usize, &mut [u32])> = codes
            .chunks_mut(BUILD_UNIT * l)
            .enumerate()
            .map(|(u, c)| (u * BUILD_UNIT, c))
            .collect();
        let nthreads = nthreads.clamp(1, units.len().max(1));
        let mut per_thread: Vec<Vec<(usize, &mut [u32])>> =
            (0..nthreads).map(|_| Vec::new()).collect();
        for (i, u) in units.into_iter().enumerate() {
            per_thread[i % nthreads].push(u);
        }
        let done = AtomicU64::new(0);
        let total = rows as u64;
        let transform = p.transform;
        let bias_of = |r: usize| bias.map_or(0.0, |b| b[r]);
        let caller = std::thread::current();
        let worker = |jobs: Vec<(usize, &mut [u32])>, report: bool| -> Result<()> {
            let mut buf: Vec<f32> = if transform == Transform::None {
                Vec::new()
            } else {
                try_vec::<f32>(BUILD_UNIT * hash_dim, "transform scratch")?
            };
            for (r0, c) in jobs {
                let n = c.len() / l;
                if transform == Transform::None {
                    fam.hash(&w[r0 * w_stride..], n, w_stride, c)?;
                } else {
                    for i in 0..n {
                        let r = r0 + i;
                        transform_row(
                            transform,
                            &w[r * w_stride..r * w_stride + dim],
                            bias_of(r),
                            inv_u,
                            &mut buf[i * hash_dim..(i + 1) * hash_dim],
                        );
                    }
                    fam.hash(&buf[..n * hash_dim], n, hash_dim, c)?;
                }
                let d = done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                if report {
                    if let Some(cb) = progress {
                        if d < total {
                            cb(d, total);
                        }
                    }
                } else {
                    // Wake the calling thread so it reports this unit.
                    caller.unpark();
                }
            }
            Ok(())
        };
        if nthreads == 1 {
            // One thread: the caller hashes and reports after every unit.
            let jobs = per_thread.pop().unwrap_or_default();
            worker(jobs, true)?;
        } else {
            // Workers hash; the calling thread only reports progress (woken
            // after every unit, so reports come every BUILD_UNIT rows
            // whatever the thread count) and joins.
            std::thread::scope(|s| -> Result<()> {
                let worker = &worker;
                let handles: Vec<_> = per_thread
                    .into_iter()
                    .map(|j| s.spawn(move || worker(j, false)))
                    .collect();
                let mut last = 0u64;
                while handles.iter().any(|h| !h.is_finished()) {
                    std::thread::park_timeout(std::time::Duration::from_millis(50));
                    let d = done.load(Ordering::Relaxed);
                    if let Some(cb) = progress {
                        if d != last && d < total {
                            cb(d, total);
                        }
                    }
                    last = d;
                }
                let mut res = Ok(());
                for h in handles {
                    let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                    if res.is_ok() {
                        res = r;
                    }
                }
                res
            })?;
        }

        // ---- tables
        let mut tables = Box::new(Tables::build(
            &codes,
            rows,
            p.tables,
            range_bits,
            p.bucket_cap,
            p.seed,
            p.threads,
        )?);
        drop(codes);
        // The index never updates its tables: drop the row-to-bucket map
        // (as large as the ids).
        tables.freeze();

        // ---- weights and bias
        let cnt = checked_mul(rows, dim, "rows * dim")?;
        let compact = |out: &mut dyn FnMut(usize, &[f32])| {
            for r in 0..rows {
                out(r, &w[r * w_stride..r * w_stride + dim]);
            }
        };
        let wstore = match p.storage {
            Storage::BorrowedF32 => WStore {
                storage: Storage::BorrowedF32,
                ptr: w.as_ptr().cast(),
                len: need,
                scales: std::ptr::null(),
                stride: w_stride,
                owner: Owner::Caller,
            },
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
        let idx = Index {
            rows,
            dim,
            hash_dim,
            mips_u,
            p: Resolved {
                range_bits,
                ..resolved
            },
            fam,
            tables,
            bias,
            w: wstore,
            labels: None,
            dirty: Default::default(),
        };
        if let Some(cb) = progress {
            cb(total, total);
        }
        Ok(idx)
    }
}
