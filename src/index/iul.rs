//! IUL training of the index's SimHash planes
//! ([`crate::source::lsh::iul`]).

use super::*;
use crate::source::lsh::iul::*;

impl Index {
    /// Trains the index's SimHash planes with IUL ([`train`]) on `n`
    /// queries (`queries` row i at `i * q_stride`, `dim` floats, finite)
    /// and their labels (CSR, see [`IulData`]), then swaps the planes in
    /// and rebuilds the tables (same range_bits, bucket_cap, seed). Pairs
    /// use the rows and queries in the hashed space (after the index's
    /// transform; rows decoded from the stored weights), so `t1`/`t2`
    /// apply to those dot products (the logit minus bias for
    /// `Transform::None`, the logit for `BiasAug`).
    ///
    /// Errors: `InvalidArgument` (DWTA or graph index, bad parameters or labels),
    /// `BufferTooSmall`, `NonFinite`; on error the index is unchanged.
    /// `rounds = 0` validates and changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn train_iul(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &IulParams,
    ) -> Result<Vec<IulReport>> {
        self.train_iul_with(
            queries,
            n,
            q_stride,
            label_offsets,
            labels,
            p,
            &mut IulOptions::default(),
        )
    }

    /// [`Index::train_iul`] with the options of [`IulOptions`] (loss form,
    /// training to convergence, a per-epoch hook; [`train_with`]).
    #[allow(clippy::too_many_arguments)]
    pub fn train_iul_with(
        &mut self,
        queries: &[f32],
        n: usize,
        q_stride: usize,
        label_offsets: &[usize],
        labels: &[u32],
        p: &IulParams,
        opts: &mut IulOptions<'_>,
    ) -> Result<Vec<IulReport>> {
        // The one LSH-only check first, so a graph-family index is named
        // as such (not reported as DWTA).
        self.lsh("train_iul")?;
        let Some(fam) = self.simhash() else {
            bail!(
                InvalidArgument,
                "IUL trains SimHash planes; this index is DWTA"
            );
        };
        let hd = self.hash_dim();
        self.check_queries(queries, n, q_stride, "queries")?;
        let mut tq = try_vec::<f32>(checked_mul(n, hd, "n * dim'")?, "transformed queries")?;
        self.transform_queries(queries, n, q_stride, &mut tq);
        let rows = self.hashed_rows()?;
        let shape = IulShape {
            dim: hd,
            bits: self.bits(),
            tables: self.num_tables(),
            range_bits: self.range_bits(),
            bucket_cap: self.tables().bucket_cap(),
            table_seed: self.tables().seed(),
        };
        let data = IulData {
            rows: &rows,
            n_rows: self.rows(),
            row_stride: hd,
            queries: &tq,
            n_queries: n,
            q_stride: hd,
            label_offsets,
            labels,
        };
        let (planes, reports) = train_with(fam.planes(), &shape, &data, p, opts)?;
        if p.rounds > 0 {
            self.set_simhash_planes(&planes, &rows)?;
        }
        Ok(reports)
    }
}
