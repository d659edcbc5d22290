//! DWTA kernels: bin-max hashing of dense rows and of CSR rows (with
//! densification), per tier. Semantics: [`crate::source::lsh::hash::dwta`].
//!
//! Dense tiers have two exact schemes, neither with horizontal work:
//! * rows in lanes (batches, when [`use_row_blocks`]): a block of rows is
//!   converted to order-preserving integer keys ([`ordered_key`]) and
//!   transposed to `dim x rows`; each bin position is then one contiguous
//!   vector load, a strict integer compare, a max and a blend of the
//!   position;
//! * bins in lanes (a single row, or inputs much wider than the bins): for
//!   each group of [`GROUP`] bins the transposed map ([`DwtaView::map_t`]) gives
//!   the p-th coordinate of every bin of the group contiguously; the row's
//!   values there are gathered, compared with the running maximum and
//!   blended into the running maximum and its position.
//!
//! Sparse tiers turn each stored entry into the bins that hold its
//! coordinate through the inverse map ([`DwtaView::slots_of`], a binary search
//! over the map's distinct coordinates), after a cheap one-sided filter
//! ([`DwtaView::filter_hit`], ~64 bits per distinct coordinate): with
//! Amazon-670K's shape (2,400 slots over 135,909 coordinates) only ~2% of
//! entries touch a bin at all, and ~1.5% more pass the filter falsely. The
//! per-bin state is one `u64`, the [`combined`] value
//! `(order-preserving key of the value) << 8 | (255 - p)`, so "largest
//! value, ties to the smallest position" is a plain integer maximum: exact
//! and independent of the order in which entries arrive. Bins never written
//! stay 0 (= empty; NaN entries are skipped). The shared
//! [`finish_sparse_row`] then densifies and packs the keys.

use std::cell::RefCell;

/// Densification attempts per empty bin.
pub const MAX_ATTEMPTS: u32 = 100;
/// Bins per group in the transposed map (one 512-bit vector of i32).
pub const GROUP: usize = 16;
/// The probe hash's prime modulus `2^61 - 1`.
pub const PROBE_P: u64 = (1 << 61) - 1;
/// The probe hash's multiplier (in `[1, P)`).
pub const PROBE_A: u64 = 0x1E37_79B9_7F4A_7C15;
/// The probe hash's offset (in `[0, P)`).
pub const PROBE_C: u64 = 0x0B58_476D_1CE4_E5B9;

const _: () = assert!(PROBE_A > 0 && PROBE_A < PROBE_P && PROBE_C < PROBE_P);

/// The donor bin probed by empty bin `j` at attempt `a` (1..=100) among
/// `nbins` bins (see `crate::source::lsh::hash::dwta`'s module documentation).
#[inline]
pub fn probe(j: u32, a: u32, nbins: u32) -> u32 {
    let x = (j as u128) * 128 + a as u128;
    let h = (PROBE_A as u128 * x + PROBE_C as u128) % PROBE_P as u128;
    (h % nbins as u128) as u32
}

/// Multiplier of the coordinate filter's hash (Knuth's golden ratio).
pub const FILTER_MUL: u32 = 0x9E37_79B1;

/// The filter bit of coordinate `c`: the top bits of `c * FILTER_MUL`
/// (wrapping), `32 - shift` of them.
#[inline(always)]
pub fn filter_bit(c: u32, shift: u32) -> u32 {
    c.wrapping_mul(FILTER_MUL) >> shift
}

/// A DWTA family as the kernels read it: plain slices and shape numbers
/// (the kernels never see `crate::source::lsh::hash::dwta::Dwta`). Constructed only through
/// [`DwtaView::new`], whose contract the SIMD tiers rely on.
#[derive(Clone, Copy, Debug)]
pub struct DwtaView<'a> {
    dim: usize,
    k: u32,
    l: u32,
    b: u32,
    log2b: u32,
    map: &'a [u32],
    map_t: &'a [i32],
    inv_coord: &'a [u32],
    inv_start: &'a [u32],
    inv_slot: &'a [u32],
    filter: &'a [u32],
    filter_shift: u32,
    probe_fwd: &'a [u32],
    probe_inv_start: &'a [u32],
    probe_inv: &'a [u32],
}

impl<'a> DwtaView<'a> {
    /// # Safety
    /// The parts are those of a family built by `crate::source::lsh::hash::dwta::Dwta` (its
    /// only constructor of this type): `K*L*B` map coordinates, each
    /// `< dim`; `map_t` its transpose `[group][p][GROUP]` padded with
    /// coordinate 0; the inverse map (`inv_coord` ascending and non-empty,
    /// `inv_start` of `inv_coord.len() + 1` offsets into `inv_slot`, slots
    /// `< K*L*B`); the filter words of `filter_bit(c, filter_shift)`; the
    /// probe tables with entries `< K*L` (forward `[bin][attempt - 1]`,
    /// `MAX_ATTEMPTS` per bin; inverse CSR over `K*L` donor bins). The SIMD
    /// tiers gather and index with these values unchecked.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        dim: usize,
        (k, l, b, log2b): (u32, u32, u32, u32),
        map: &'a [u32],
        map_t: &'a [i32],
        (inv_coord, inv_start, inv_slot): (&'a [u32], &'a [u32], &'a [u32]),
        (filter, filter_shift): (&'a [u32], u32),
        probe_fwd: &'a [u32],
        (probe_inv_start, probe_inv): (&'a [u32], &'a [u32]),
    ) -> Self {
        debug_assert_eq!(map.len(), (k * l * b) as usize);
        debug_assert!(!inv_coord.is_empty() && inv_start.len() == inv_coord.len() + 1);
        DwtaView {
            dim,
            k,
            l,
            b,
            log2b,
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
        }
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
    pub fn map(&self) -> &'a [u32] {
        self.map
    }
    /// Transposed map `[group][p][GROUP]` (see [`GROUP`]).
    pub fn map_t(&self) -> &'a [i32] {
        self.map_t
    }
    /// Groups of [`GROUP`] bins in [`DwtaView::map_t`].
    pub fn num_groups(&self) -> usize {
        self.num_bins().div_ceil(GROUP)
    }
    /// The slots `j*B + p` that hold coordinate `c` (empty if none).
    #[inline]
    pub fn slots_of(&self, c: u32) -> &'a [u32] {
        // Branch-free binary search (a fixed number of halvings with
        // conditional moves): the lookups are unpredictable.
        let coords = self.inv_coord; // never empty
        let (mut base, mut n) = (0usize, coords.len());
        while n > 1 {
            let half = n / 2;
            base = if coords[base + half] <= c {
                base + half
            } else {
                base
            };
            n -= half;
        }
        if coords[base] == c {
            &self.inv_slot[self.inv_start[base] as usize..self.inv_start[base + 1] as usize]
        } else {
            &[]
        }
    }
    /// The coordinate filter's words (see [`filter_bit`]).
    pub fn filter(&self) -> &'a [u32] {
        self.filter
    }
    /// The shift of [`filter_bit`] for this family.
    pub fn filter_shift(&self) -> u32 {
        self.filter_shift
    }
    /// Whether `c` may be in the map (false: it is certainly not).
    #[inline]
    pub fn filter_hit(&self, c: u32) -> bool {
        let b = filter_bit(c, self.filter_shift);
        (self.filter[b as usize / 32] >> (b % 32)) & 1 == 1
    }
    /// Forward probe table `[bin][attempt - 1]`.
    pub fn probe_fwd(&self) -> &'a [u32] {
        self.probe_fwd
    }
    /// Inverse probe table `(start, entries)`, entries `(j << 7) | a`.
    pub fn probe_inv(&self) -> (&'a [u32], &'a [u32]) {
        (self.probe_inv_start, self.probe_inv)
    }
}

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod drive;
pub mod portable;
pub mod scalar;

/// `dense(h, x, n, stride, codes)`: codes of n rows into `codes[i*L + l]`.
///
/// # Safety
/// The lengths were checked as by `Dwta::hash_dense_isa`: `n >= 1`,
/// `stride >= dim`, `x` holds `(n - 1) * stride + dim` values, `codes`
/// `n * L`; the CPU supports the tier the function belongs to. (The x86
/// tiers read through raw pointers and run `#[target_feature]` code; the
/// scalar and portable tiers are safe functions that coerce to this type.)
pub type DenseFn = unsafe fn(&DwtaView<'_>, &[f32], usize, usize, &mut [u32]);
/// `sparse(h, indptr, indices, values, codes)`: codes of the
/// `indptr.len() - 1` CSR rows.
///
/// # Safety
/// The CSR was validated by `Dwta::check_csr` (every index < dim);
/// `codes` holds `n*L` values; the CPU supports the tier.
pub type SparseFn = unsafe fn(&DwtaView<'_>, &[usize], &[u32], &[f32], &mut [u32]);

pub struct Kernels {
    pub dense: DenseFn,
    pub sparse: SparseFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier. The caller has checked that the CPU supports
    /// `tier` (the x86 tiers' functions rely on it).
    Kernels { dense: dense, sparse: sparse }
}

/// Whether the dense vector tiers transpose blocks of rows into a
/// `dim x rows` block of keys (rows in lanes, no gathers) rather than load
/// per row (bins in lanes). The block costs `O(dim)` per row to build and
/// `4 * dim * 32` bytes of scratch, so only when every coordinate is used
/// about once or more (`dim <= K*L*B`) and the block stays in L2
/// (`dim <= 2048`, 256 KiB): beyond that, blocks lose to one row per call
/// on Zen 3 (`benches/dwta.md`, "Dense schemes measured").
#[inline]
pub fn use_row_blocks(h: &DwtaView<'_>) -> bool {
    h.dim() <= h.map().len() && h.dim() <= 2048
}

/// Writes the L keys of one row from its K*L bin hashes:
/// `out[l] = Σ_k hash[l*K + k] << (k * log2 B)`.
#[inline]
pub fn pack_keys(h: &DwtaView<'_>, hash: &[u32], out: &mut [u32]) {
    let (k, lb) = (h.bins_per_table() as usize, h.log2_bin_size());
    for (l, o) in out[..h.tables() as usize].iter_mut().enumerate() {
        let mut code = 0u32;
        for (kk, &v) in hash[l * k..(l + 1) * k].iter().enumerate() {
            code |= v << (kk as u32 * lb);
        }
        *o = code;
    }
}

/// An `i32` that orders like the float `v` for non-NaN values, with
/// `-0.0` and `+0.0` equal (sign-magnitude to two's complement); NaN maps
/// to `i32::MIN`, below every other value (`-inf` is `-0x7F80_0000`).
#[inline(always)]
pub fn ordered_key(v: f32) -> i32 {
    let bits = v.to_bits();
    let abs = (bits & 0x7FFF_FFFF) as i32;
    if abs > 0x7F80_0000 {
        i32::MIN
    } else if bits >> 31 == 1 {
        -abs
    } else {
        abs
    }
}

/// The per-bin state value of a non-NaN `v` at position `p` (< 256):
/// `((ordered_key(v) as u32 ^ 0x8000_0000) << 8) | (255 - p)`. Its integer
/// order is "larger value first, then smaller position", and it is never 0
/// (the key of `-inf` biased is `0x0080_0000`).
#[inline(always)]
pub fn combined(v: f32, p: u32) -> u64 {
    ((((ordered_key(v) as u32) ^ 0x8000_0000) as u64) << 8) | (255 - p) as u64
}

/// Per-bin state of one sparse row: `best[j]` is 0 (empty) or the largest
/// [`combined`] value folded into bin `j`; `occupied` lists the bins that
/// are not 0, in the order they were first written. Between rows every
/// `best` entry is 0 again (only the occupied ones are reset).
#[derive(Default)]
pub struct BinState {
    pub best: Vec<u64>,
    pub occupied: Vec<u32>,
}

/// Folds stored entry `(c, v)` (v not NaN) into the
/// bins holding `c`: sequential read-modify-write of `best`, so bins that
/// occur several times in `c`'s slot list are handled exactly.
#[inline(always)]
pub fn fold_entry(h: &DwtaView<'_>, c: u32, v: f32, st: &mut BinState) {
    let (lb, mask) = (h.log2_bin_size(), h.bin_size() - 1);
    let hi = combined(v, 255); // low byte 0
    for &slot in h.slots_of(c) {
        let j = (slot >> lb) as usize;
        let cand = hi | (255 - (slot & mask)) as u64;
        let old = st.best[j];
        if cand > old {
            if old == 0 {
                st.occupied.push(j as u32);
            }
            st.best[j] = cand;
        }
    }
}

/// Folds entries one at a time (the portable tier, and the tails of the
/// vector tiers): skips NaN values and coordinates in no bin.
#[inline]
pub fn fold_entries(h: &DwtaView<'_>, idx: &[u32], val: &[f32], st: &mut BinState) {
    for (&c, &v) in idx.iter().zip(val) {
        if h.filter_hit(c) && !v.is_nan() {
            fold_entry(h, c, v, st);
        }
    }
}

/// Per-thread scratch of the sparse tiers (sized to `K*L` on first use).
#[derive(Default)]
pub struct SparseScratch {
    bins: BinState,
    hash: Vec<u32>,
    first: Vec<u8>,
}

thread_local! {
    static SPARSE: RefCell<SparseScratch> = RefCell::new(SparseScratch::default());
}

/// Runs the sparse pipeline of a tier: per row, `fold(h, indices, values,
/// bins)` fills the bin state from the row's entries, then
/// [`finish_sparse_row`] densifies, writes the keys and resets the state.
#[inline]
pub fn sparse_rows<F: FnMut(&DwtaView<'_>, &[u32], &[f32], &mut BinState)>(
    h: &DwtaView<'_>,
    indptr: &[usize],
    indices: &[u32],
    values: &[f32],
    codes: &mut [u32],
    mut fold: F,
) {
    let nb = h.num_bins();
    let l = h.tables() as usize;
    SPARSE.with(|s| {
        let mut s = s.borrow_mut();
        let s = &mut *s;
        if s.bins.best.len() < nb {
            s.bins.best.clear();
            s.bins.best.resize(nb, 0);
            s.hash.resize(nb, 0);
            s.first.resize(nb, 0);
        }
        // Bins left set by an interrupted call (a panic) are reset here.
        for &t in &s.bins.occupied {
            s.bins.best[t as usize] = 0;
        }
        s.bins.occupied.clear();
        s.bins.occupied.reserve(nb);
        for i in 0..indptr.len() - 1 {
            let (a, b) = (indptr[i], indptr[i + 1]);
            let out = &mut codes[i * l..(i + 1) * l];
            if a == b {
                out.fill(0);
                continue;
            }
            fold(h, &indices[a..b], &values[a..b], &mut s.bins);
            finish_sparse_row(h, s, out);
        }
    });
}

/// Densifies the bins of one row from `s.bins`, packs its keys and resets
/// the bin state.
///
/// Two exact ways to find, for each empty bin `j`, the first attempt `a`
/// whose donor `probe(j, a)` is non-empty; the cheaper one is used:
/// * forward: walk `j`'s probe sequence (about `K*L / occupied` probes);
/// * inverse: for each non-empty donor `t`, visit the `(j, a)` pairs that
///   probe `t` (100 per donor on average) keeping the smallest `a` per `j`
///   (branch-free selects; occupied bins start at `a = 0`, so they are
///   never overwritten).
pub fn finish_sparse_row(h: &DwtaView<'_>, s: &mut SparseScratch, out: &mut [u32]) {
    let nb = h.num_bins();
    let occ = s.bins.occupied.len();
    if occ == 0 {
        out[..h.tables() as usize].fill(0);
        return;
    }
    let best = &mut s.bins.best[..nb];
    let hash = &mut s.hash[..nb];
    let first = &mut s.first[..nb];
    hash.fill(0);
    first.fill(u8::MAX);
    for &t in &s.bins.occupied {
        hash[t as usize] = 255 - (best[t as usize] & 0xFF) as u32;
        first[t as usize] = 0;
    }
    let empty = nb - occ;
    if empty > 0 {
        let att = MAX_ATTEMPTS as usize;
        let forward_cost = empty * (nb / occ + 1).min(att);
        let inverse_cost = occ * att;
        if inverse_cost < forward_cost {
            let (st, ent) = h.probe_inv();
            for &t in &s.bins.occupied {
                let t = t as usize;
                let ht = hash[t];
                for &e in &ent[st[t] as usize..st[t + 1] as usize] {
                    let (j, a) = ((e >> 7) as usize, e & 127);
                    // Branch-free select (the comparison is unpredictable):
                    // m is all ones when attempt a beats j's best so far.
                    let f = first[j] as u32;
                    let m = 0u32.wrapping_sub((a < f) as u32);
                    first[j] = (f ^ ((f ^ a) & m)) as u8;
                    hash[j] ^= (hash[j] ^ ht) & m;
                }
            }
        } else {
            let fwd = h.probe_fwd();
            for j in 0..nb {
                if first[j] != 0 {
                    for &t in &fwd[j * att..(j + 1) * att] {
                        if first[t as usize] == 0 {
                            hash[j] = hash[t as usize];
                            break;
                        }
                    }
                }
            }
        }
    }
    pack_keys(h, hash, out);
    for &t in &s.bins.occupied {
        best[t as usize] = 0;
    }
    s.bins.occupied.clear();
}
