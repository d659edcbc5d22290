//! Support for the training paths (IUL, full rehash): tables from codes,
//! hashed rows, replacing SimHash planes.

use super::*;

impl Index {
    /// Tables over the codes (`rows x L`) of `rows` rows with the index's
    /// range_bits, bucket_cap, seed and build threads (the one rebuild of
    /// IUL and of a full rehash).
    pub(crate) fn tables_from_codes(&self, codes: &[u32], rows: usize) -> Result<Tables> {
        Tables::build(
            codes,
            rows,
            self.p.tables,
            self.p.range_bits,
            self.p.bucket_cap,
            self.p.seed,
            self.p.threads,
        )
    }
}

// ------------------------------------------------------------ IUL support
// (additive: used by `crate::source::lsh::iul`)
impl Index {
    /// The rows as the family hashes them: W decoded to f32 from its
    /// storage (bf16 / f16 / int8 as stored, i.e. dequantised) and
    /// transformed, `rows x hash_dim`, contiguous.
    pub(crate) fn hashed_rows(&self) -> Result<Vec<f32>> {
        let (rows, dim, hd) = (self.rows, self.dim, self.hash_dim);
        let mut out = try_vec::<f32>(checked_mul(rows, hd, "rows * dim'")?, "hashed rows")?;
        let mut row = try_vec::<f32>(dim, "row scratch")?;
        let st = self.w.stride;
        let inv_u = 1.0 / self.mips_u as f64;
        let w = self.weights();
        for r in 0..rows {
            match &w {
                Weights::F32(s) => row.copy_from_slice(&s[r * st..r * st + dim]),
                Weights::Bf16(s) => {
                    matmul::convert_bf16_to_f32(&s[r * st..r * st + dim], &mut row)?
                }
                Weights::F16(s) => matmul::convert_f16_to_f32(&s[r * st..r * st + dim], &mut row)?,
                Weights::I8 { w, scales } => {
                    for (o, &x) in row.iter_mut().zip(&w[r * st..r * st + dim]) {
                        *o = x as f32 * scales[r];
                    }
                }
            }
            let b = self.bias.as_ref().map_or(0.0, |b| b[r]);
            transform_row(
                self.p.transform,
                &row,
                b,
                inv_u,
                &mut out[r * hd..(r + 1) * hd],
            );
        }
        Ok(out)
    }

    /// Replaces the SimHash planes (`K*L x dim'`) and rebuilds the tables
    /// from `hashed` (= [`Index::hashed_rows`]) with the same range_bits,
    /// bucket_cap and seed. Everything is computed before anything changes;
    /// the family and tables are replaced IN PLACE (their boxes keep their
    /// addresses, so borrowed C handles stay valid). The index then counts
    /// as built from caller-given planes (saved in the file as such).
    pub(crate) fn set_simhash_planes(&mut self, planes: &[f32], hashed: &[f32]) -> Result<()> {
        if self.p.family != Family::SimHash {
            bail!(
                InvalidArgument,
                "the index's family is {}, not SimHash",
                self.source_name()
            );
        }
        let new = SimHash::from_planes(planes, self.hash_dim, self.p.bits, self.p.tables)?;
        let l = self.p.tables as usize;
        let mut codes = try_vec::<u32>(checked_mul(self.rows, l, "rows * L")?, "row codes")?;
        new.hash(hashed, self.rows, self.hash_dim, &mut codes)?;
        let mut t = self.tables_from_codes(&codes, self.rows)?;
        t.freeze();
        // In place: the box keeps its address (a borrowed C handle).
        // (Through `&mut dyn HashFamily`: the box itself is also `Any`.)
        let lsh = self.lsh_mut("SimHash planes")?;
        let fam: &mut dyn HashFamily = &mut *lsh.fam;
        let h: &mut SimHash = fam.as_any_mut().downcast_mut().expect("checked SimHash");
        *h = new;
        *lsh.tables = t;
        self.p.given = true;
        self.p.sparsity = 0;
        Ok(())
    }
}
