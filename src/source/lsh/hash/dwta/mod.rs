//! DWTA (densified winner-take-all) bin-max hashing: the hash family object.
//!
//! # Parameters
//! `dim` inputs (1..=2^31-1), `K` bins per table, `L` tables, bins of `B`
//! coordinates (`B` a power of two in 2..=256), with `K * log2(B) <= 32`
//! (a table's key fits in 32 bits) and `K * L <= 2^20` bins (the densification
//! tables take 800 bytes per bin).
//!
//! # Bin map
//! `K*L*B` coordinate indices in `[0, dim)`: bin `j` (`j = l*K + k`) holds
//! coordinates `map[j*B .. j*B + B]`; position `p` of the bin is
//! `map[j*B + p]`. A map may repeat a coordinate, also inside one bin.
//!
//! From a seed the map is built with [`crate::rng::SplitMix64`] (frozen) as
//! `R = ceil(K*L*B / dim)` independent uniform random permutations of
//! `[0, dim)`, concatenated and cut to `K*L*B` entries. Each permutation is
//! drawn, one after the other from the same generator, by the *forward*
//! Fisher–Yates pass over a fresh array `a = [0, 1, ..., dim-1]`:
//! `for i in 0..dim-1 { j = i + below(dim - i); swap(a[i], a[j]) }`
//! (`dim - 1` draws; none for `dim == 1`). Entry `i` is final after step
//! `i`, so the last permutation, of which only `m = K*L*B - (R-1)*dim`
//! entries are kept, stops after step `min(m, dim - 1) - 1`: this leaves its
//! first `m` entries exactly as the full pass would (and nothing is drawn
//! from the generator afterwards). The forward pass is used instead of
//! `SplitMix64::shuffle` (which fixes the *last* entries first) because of
//! this prefix property: a map over a huge `dim` costs `O(K*L*B)` time and
//! memory, not `O(dim)`.
//!
//! # Bin hash
//! The bin hash of bin `j` is the position `p` in `[0, B)` of the largest
//! value among the bin's *present* coordinates; ties go to the smallest `p`
//! (so `-0.0` and `+0.0`, which compare equal, keep the earlier one); NaN
//! never wins. Dense input: every coordinate is present; a bin whose values
//! are all NaN hashes to 0. Sparse input (CSR): only stored entries are
//! present (an explicitly stored `0.0` is present); a bin is *empty* when it
//! holds no present coordinate with a non-NaN value.
//!
//! # Densification (sparse input only)
//! An empty bin `j` takes the hash of the first non-empty bin `t` of the
//! probe sequence `t_a = probe(j, a)` for attempts `a = 1, 2, ..., 100`
//! (donors are judged by their own entries: a densified bin never donates);
//! if none of the 100 probes is non-empty, the bin hash is 0. A row with no
//! entries (or no non-empty bin) therefore gets all-zero codes.
//!
//! `probe(j, a) = ((A * x + C) mod P) mod (K*L)` with `x = 128*j + a`,
//! `P = 2^61 - 1`, `A = 0x1E3779B97F4A7C15`, `C = 0x0B58476D1CE4E5B9`,
//! computed exactly in 128-bit integers: a fixed member of the
//! Carter–Wegman 2-universal family over all `K*L` bins (the final `mod` is
//! a true remainder, so any `K*L`, power of two or not, is covered).
//!
//! # Memory
//! At most about `36*K*L*B + 804*K*L` bytes, independent of `dim`: the map
//! and its transposed copy, the inverse map (distinct coordinates, ranges,
//! slots), a coordinate filter of ~64 bits per distinct coordinate, and the
//! densification probe tables (forward `[bin][attempt]` and inverse, 100
//! entries per bin each).
//!
//! # Key
//! The key of table `l` is `Σ_k hash(l*K + k) << (k * log2(B))`: exactly
//! `K*log2(B)` bits, fields never overlap, higher bits are 0.

use crate::error::{checked_mul, try_vec, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::dwta as kern;
use crate::rng::SplitMix64;

mod family;
pub use crate::kernels::dwta::{
    filter_bit, probe, FILTER_MUL, GROUP, MAX_ATTEMPTS, PROBE_A, PROBE_C, PROBE_P,
};
pub use family::REGISTRATION;
/// Largest `K * L`.
pub const MAX_BINS: usize = 1 << 20;
/// Largest `dim` (gathers index with signed 32-bit lanes).
pub const MAX_DIM: usize = i32::MAX as usize;

/// A DWTA family: `L` tables of `K` bins of `B` coordinates over `dim` inputs.
#[derive(Clone, Debug)]
pub struct Dwta {
    dim: usize,
    k: u32,
    l: u32,
    b: u32,
    log2b: u32,
    /// `K*L*B` coordinates, bin-major.
    map: Vec<u32>,
    /// Transposed map `[group][p][GROUP]`: lane `u` of group `g` is bin
    /// `g*GROUP + u`; bins past `K*L` are padded with coordinate 0.
    map_t: Vec<i32>,
    /// Inverse map, `O(K*L*B)` whatever `dim`: the distinct coordinates of
    /// the map, ascending, and for the `u`-th of them the slots `j*B + p`
    /// holding it, `inv_slot[inv_start[u] .. inv_start[u+1]]` (ascending).
    inv_coord: Vec<u32>,
    inv_start: Vec<u32>,
    inv_slot: Vec<u32>,
    /// A one-sided filter of the map's coordinates: bit [`filter_bit`]
    /// of `c` is set for every `c` in the map (other coordinates may share
    /// a bit; they are then rejected by the binary search).
    filter: Vec<u32>,
    filter_shift: u32,
    /// Forward probe table `[bin][attempt - 1]`.
    probe_fwd: Vec<u32>,
    /// Inverse probe table (CSR over donor bins): entries `(j << 7) | a` with
    /// `probe(j, a) == t` are `probe_inv[probe_inv_start[t] ..
    /// probe_inv_start[t+1]]`.
    probe_inv_start: Vec<u32>,
    probe_inv: Vec<u32>,
}

/// Validates a shape; returns `K*L*B`.
pub fn check_params(dim: usize, k: u32, l: u32, b: u32) -> Result<usize> {
    if dim == 0 || dim > MAX_DIM {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("dim is {dim}; it must be in 1..={MAX_DIM}"),
        ));
    }
    if !(2..=256).contains(&b) || !b.is_power_of_two() {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("bin_size is {b}; it must be a power of two in 2..=256"),
        ));
    }
    let log2b = b.trailing_zeros();
    if k == 0 || (k as u64) * (log2b as u64) > 32 {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "bins_per_table is {k}; it must be >= 1 with K*log2(bin_size) = {}*{log2b} <= 32",
                k
            ),
        ));
    }
    if l == 0 {
        return Err(Error::new(Status::InvalidArgument, "tables must be >= 1"));
    }
    let nbins = (k as u64) * (l as u64);
    if nbins > MAX_BINS as u64 {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("K*L = {nbins} bins exceeds the maximum {MAX_BINS}"),
        ));
    }
    checked_mul(nbins as usize, b as usize, "K*L*bin_size")
}

impl Dwta {
    /// A family from a seed (bin map as in the module documentation).
    pub fn new(dim: usize, k: u32, l: u32, bin_size: u32, seed: u64) -> Result<Self> {
        let len = check_params(dim, k, l, bin_size)?;
        let mut map = try_vec::<u32>(len, "DWTA bin map")?;
        let mut rng = SplitMix64::new(seed);
        let mut filled = 0;
        if dim <= len {
            // Whole permutations: the array has dim <= K*L*B entries.
            let mut a = try_vec::<u32>(dim, "DWTA permutation")?;
            while filled < len {
                for (i, v) in a.iter_mut().enumerate() {
                    *v = i as u32;
                }
                let m = (len - filled).min(dim);
                forward_fisher_yates(&mut rng, &mut a, m);
                map[filled..filled + m].copy_from_slice(&a[..m]);
                filled += m;
            }
        } else {
            // One partial permutation of a huge range: a virtual array
            // (identity except where a swap moved something).
            let mut moved = std::collections::HashMap::<u32, u32>::new();
            let get = |m: &std::collections::HashMap<u32, u32>, i: u32| *m.get(&i).unwrap_or(&i);
            for (i, m) in map.iter_mut().enumerate().take(dim - 1) {
                let j = i + rng.below((dim - i) as u64) as usize;
                let (vi, vj) = (get(&moved, i as u32), get(&moved, j as u32));
                moved.insert(i as u32, vj);
                moved.insert(j as u32, vi);
                *m = vj;
            }
            // len < dim, so the loop above covered every kept entry.
        }
        Self::assemble(dim, k, l, bin_size, map)
    }

    /// A family from a caller-given bin map (`K*L*B` entries, each `< dim`).
    pub fn from_map(map: &[u32], dim: usize, k: u32, l: u32, bin_size: u32) -> Result<Self> {
        let len = check_params(dim, k, l, bin_size)?;
        if map.len() != len {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "map holds {} entries, expected K*L*bin_size = {len}",
                    map.len()
                ),
            ));
        }
        if let Some(i) = map.iter().position(|&c| c as usize >= dim) {
            return Err(Error::new(
                Status::IndexOutOfRange,
                format!(
                    "map[{i}] (bin {}, position {}) is {}, not below dim {dim}",
                    i / bin_size as usize,
                    i % bin_size as usize,
                    map[i]
                ),
            ));
        }
        let mut v = try_vec::<u32>(len, "DWTA bin map")?;
        v.copy_from_slice(map);
        Self::assemble(dim, k, l, bin_size, v)
    }

    fn assemble(dim: usize, k: u32, l: u32, b: u32, map: Vec<u32>) -> Result<Self> {
        let bs = b as usize;
        let nbins = (k * l) as usize;
        let groups = nbins.div_ceil(GROUP);

        let mut map_t = try_vec::<i32>(groups * bs * GROUP, "DWTA transposed map")?;
        for j in 0..nbins {
            let (g, u) = (j / GROUP, j % GROUP);
            for p in 0..bs {
                map_t[(g * bs + p) * GROUP + u] = map[j * bs + p] as i32;
            }
        }

        // Inverse map: (coordinate, slot) pairs sorted, then grouped.
        let mut pairs = try_vec::<u64>(map.len(), "DWTA inverse map")?;
        for (s, &c) in map.iter().enumerate() {
            pairs[s] = ((c as u64) << 32) | s as u64;
        }
        pairs.sort_unstable();
        let mut inv_slot = try_vec::<u32>(map.len(), "DWTA inverse map")?;
        let mut inv_coord = Vec::new();
        let mut inv_start = Vec::new();
        for (u, &pc) in pairs.iter().enumerate() {
            let c = (pc >> 32) as u32;
            if inv_coord.last() != Some(&c) {
                inv_coord.push(c);
                inv_start.push(u as u32);
            }
            inv_slot[u] = pc as u32;
        }
        inv_start.push(map.len() as u32);
        drop(pairs);
        // Filter: about 64 bits per distinct coordinate (~1.5% of the bits
        // set), at least 1024 bits.
        let bits = (inv_coord.len() * 64)
            .next_power_of_two()
            .clamp(1024, 1 << 30);
        let filter_shift = 32 - bits.trailing_zeros();
        let mut filter = try_vec::<u32>(bits / 32, "DWTA coordinate filter")?;
        for &c in &inv_coord {
            let b = filter_bit(c, filter_shift);
            filter[b as usize / 32] |= 1 << (b % 32);
        }

        let att = MAX_ATTEMPTS as usize;
        let mut probe_fwd = try_vec::<u32>(nbins * att, "DWTA probe table")?;
        let mut probe_inv_start = try_vec::<u32>(nbins + 1, "DWTA probe table")?;
        for j in 0..nbins {
            for a in 1..=MAX_ATTEMPTS {
                let t = probe(j as u32, a, nbins as u32);
                probe_fwd[j * att + a as usize - 1] = t;
                probe_inv_start[t as usize + 1] += 1;
            }
        }
        for t in 0..nbins {
            probe_inv_start[t + 1] += probe_inv_start[t];
        }
        let mut probe_inv = try_vec::<u32>(nbins * att, "DWTA probe table")?;
        {
            let mut fill = try_vec::<u32>(nbins, "DWTA probe table")?;
            fill.copy_from_slice(&probe_inv_start[..nbins]);
            for j in 0..nbins {
                for a in 1..=MAX_ATTEMPTS {
                    let t = probe_fwd[j * att + a as usize - 1] as usize;
                    probe_inv[fill[t] as usize] = ((j as u32) << 7) | a;
                    fill[t] += 1;
                }
            }
        }

        Ok(Dwta {
            dim,
            k,
            l,
            b,
            log2b: b.trailing_zeros(),
            map,
            map_t,
            inv_coord,
            inv_start,
            inv_slot,
            filter,
            filter_shift,
            probe_fwd,
            probe_inv_start,
            probe_inv,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    /// `K`.
    pub fn bins_per_table(&self) -> u32 {
        self.k
    }
    /// `L`.
    pub fn tables(&self) -> u32 {
        self.l
    }
    /// `B`.
    pub fn bin_size(&self) -> u32 {
        self.b
    }
    /// `log2(B)`: bits per bin in a key.
    pub fn log2_bin_size(&self) -> u32 {
        self.log2b
    }
    /// `K * L`.
    pub fn num_bins(&self) -> usize {
        (self.k * self.l) as usize
    }
    /// The bin map, `K*L*B` coordinates.
    pub fn map(&self) -> &[u32] {
        &self.map
    }
    /// Transposed map `[group][p][GROUP]` (see [`GROUP`]).
    pub fn map_t(&self) -> &[i32] {
        &self.map_t
    }
    /// Groups of [`GROUP`] bins in [`Dwta::map_t`].
    pub fn num_groups(&self) -> usize {
        self.num_bins().div_ceil(GROUP)
    }
    /// The slots `j*B + p` that hold coordinate `c` (empty if none).
    #[inline]
    pub fn slots_of(&self, c: u32) -> &[u32] {
        self.view().slots_of(c)
    }
    /// The coordinate filter's words (see [`filter_bit`]).
    pub fn filter(&self) -> &[u32] {
        &self.filter
    }
    /// The shift of [`filter_bit`] for this family.
    pub fn filter_shift(&self) -> u32 {
        self.filter_shift
    }
    /// Whether `c` may be in the map (false: it is certainly not).
    #[inline]
    pub fn filter_hit(&self, c: u32) -> bool {
        self.view().filter_hit(c)
    }
    /// Forward probe table `[bin][attempt - 1]`.
    pub fn probe_fwd(&self) -> &[u32] {
        &self.probe_fwd
    }
    /// Inverse probe table `(start, entries)`, entries `(j << 7) | a`.
    pub fn probe_inv(&self) -> (&[u32], &[u32]) {
        (&self.probe_inv_start, &self.probe_inv)
    }

    /// The kernels' view of this family (`lshk::kernels::dwta`).
    pub fn view(&self) -> kern::DwtaView<'_> {
        // SAFETY: `assemble` (behind `new` and `from_map`, the only
        // constructors) built every part as DwtaView::new requires, and the
        // fields are private and never changed afterwards.
        unsafe {
            kern::DwtaView::new(
                self.dim,
                (self.k, self.l, self.b, self.log2b),
                &self.map,
                &self.map_t,
                (&self.inv_coord, &self.inv_start, &self.inv_slot),
                (&self.filter, self.filter_shift),
                &self.probe_fwd,
                (&self.probe_inv_start, &self.probe_inv),
            )
        }
    }

    /// Codes of `n` dense rows of `x` (row stride `stride` elements) into
    /// `codes[i*L + l]`, on the active tier.
    pub fn hash_dense(&self, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) -> Result<()> {
        self.hash_dense_isa(isa::active(), x, n, stride, codes)
    }

    /// [`Dwta::hash_dense`] on one chosen tier.
    pub fn hash_dense_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        let need_x = crate::error::strided_len(n, self.dim, stride, "x")?;
        if x.len() < need_x {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!(
                    "x holds {} values, {n} rows of stride {stride} need {need_x}",
                    x.len()
                ),
            ));
        }
        self.check_codes(n, codes.len())?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the tier is supported and every length was checked above
        // (the DenseFn contract).
        unsafe { (kern::kernels(tier).dense)(&self.view(), x, n, stride, codes) };
        Ok(())
    }

    fn check_codes(&self, n: usize, len: usize) -> Result<()> {
        let need = checked_mul(n, self.l as usize, "n*L")?;
        if len < need {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!("codes holds {len} values, {n} rows need n*L = {need}"),
            ));
        }
        Ok(())
    }

    /// Checks a CSR batch: `indptr` has `n + 1` entries, starts at 0, never
    /// decreases and ends at `indices.len() == values.len()`; each row's
    /// indices strictly increase and are `< dim`. Returns `n`.
    pub fn check_csr(&self, indptr: &[usize], indices: &[u32], values: &[f32]) -> Result<usize> {
        if indptr.is_empty() {
            return Err(Error::new(
                Status::InvalidArgument,
                "indptr must hold n + 1 >= 1 entries",
            ));
        }
        let n = indptr.len() - 1;
        if indptr[0] != 0 {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("indptr[0] is {}, it must be 0", indptr[0]),
            ));
        }
        for i in 0..n {
            if indptr[i + 1] < indptr[i] {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "indptr decreases at row {i}: indptr[{i}] = {} > indptr[{}] = {}",
                        indptr[i],
                        i + 1,
                        indptr[i + 1]
                    ),
                ));
            }
        }
        let nnz = indptr[n];
        if indices.len() != nnz || values.len() != nnz {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "indptr[n] = {nnz} but indices holds {} and values {} entries",
                    indices.len(),
                    values.len()
                ),
            ));
        }
        for i in 0..n {
            let row = &indices[indptr[i]..indptr[i + 1]];
            // Fast path: strictly increasing (branch-free fold) and, then,
            // all below dim iff the last one is. The slow loop below only
            // runs to describe an error.
            let increasing = row.windows(2).fold(true, |ok, w| ok & (w[0] < w[1]));
            if increasing && row.last().is_none_or(|&c| (c as usize) < self.dim) {
                continue;
            }
            for (u, &c) in row.iter().enumerate() {
                if c as usize >= self.dim {
                    return Err(Error::new(
                        Status::IndexOutOfRange,
                        format!(
                            "row {i}: index {c} (entry {}) is not below dim {}",
                            indptr[i] + u,
                            self.dim
                        ),
                    ));
                }
                if u > 0 && row[u - 1] >= c {
                    let what = if row[u - 1] == c {
                        "duplicate"
                    } else {
                        "unsorted"
                    };
                    return Err(Error::new(
                        Status::InvalidArgument,
                        format!(
                            "row {i}: {what} column indices {} then {c} (entry {}); indices must strictly increase",
                            row[u - 1],
                            indptr[i] + u
                        ),
                    ));
                }
            }
        }
        Ok(n)
    }

    /// Codes of the `n = indptr.len() - 1` CSR rows into `codes[i*L + l]`,
    /// on the active tier (see [`Dwta::check_csr`] for the rules).
    pub fn hash_sparse(
        &self,
        indptr: &[usize],
        indices: &[u32],
        values: &[f32],
        codes: &mut [u32],
    ) -> Result<()> {
        self.hash_sparse_isa(isa::active(), indptr, indices, values, codes)
    }

    /// [`Dwta::hash_sparse`] on one chosen tier.
    pub fn hash_sparse_isa(
        &self,
        tier: Isa,
        indptr: &[usize],
        indices: &[u32],
        values: &[f32],
        codes: &mut [u32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        let n = self.check_csr(indptr, indices, values)?;
        self.check_codes(n, codes.len())?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the tier is supported, the CSR was validated and codes
        // checked above (the SparseFn contract).
        unsafe { (kern::kernels(tier).sparse)(&self.view(), indptr, indices, values, codes) };
        Ok(())
    }
}

/// Steps `0 .. min(m, a.len() - 1)` of the forward Fisher–Yates pass.
fn forward_fisher_yates(rng: &mut SplitMix64, a: &mut [u32], m: usize) {
    let n = a.len();
    for i in 0..m.min(n.saturating_sub(1)) {
        let j = i + rng.below((n - i) as u64) as usize;
        a.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_dim_prefix_matches_full_pass() {
        // The virtual-array path (dim > K*L*B) must give the same entries as
        // the full array with the pass cut after len steps.
        let (dim, k, l, b) = (1000usize, 2u32, 3u32, 8u32);
        let h = Dwta::new(dim, k, l, b, 9).unwrap();
        let mut rng = SplitMix64::new(9);
        let mut a: Vec<u32> = (0..dim as u32).collect();
        forward_fisher_yates(&mut rng, &mut a, 48);
        assert_eq!(h.map(), &a[..48]);
    }

    #[test]
    fn probe_tables_agree_with_probe() {
        let h = Dwta::new(50, 3, 7, 4, 1).unwrap();
        let nb = h.num_bins() as u32;
        let (st, e) = h.probe_inv();
        for j in 0..nb {
            for a in 1..=MAX_ATTEMPTS {
                let t = probe(j, a, nb);
                assert!(t < nb);
                assert_eq!(h.probe_fwd()[(j * 100 + a - 1) as usize], t);
                assert!(e[st[t as usize] as usize..st[t as usize + 1] as usize]
                    .contains(&((j << 7) | a)));
            }
        }
    }
}
