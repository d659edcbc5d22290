//! SimHash kernels: sign bits of `x · plane` for K*L planes, fused (the
//! n x K*L projection matrix is never materialised when only codes are
//! asked for), plus the raw projections.
//!
//! The kernels see a family through a [`Planes`] view (plain slices, like
//! matmul's `Rows`), never through `crate::source::lsh::hash::simhash::SimHash`: nothing here
//! imports the API above it. Dense families use the packed panels
//! (`[panel][dim][16]`); sparse ±1 families use the index lists of a
//! [`SparseView`] and only add and subtract.

use std::cell::RefCell;

/// Planes per panel in the packed layout (one 512-bit vector of f32).
pub const PANEL: usize = 16;

/// The index lists of a sparse ±1 family: plane `p` adds `x[idx[j]]` for
/// `j` in `start[p]..mid[p]` and subtracts it for `mid[p]..start[p + 1]`.
#[derive(Clone, Copy, Debug)]
pub struct SparseView<'a> {
    pub start: &'a [u32],
    pub mid: &'a [u32],
    pub idx: &'a [u32],
}

/// A SimHash family as the kernels read it. Constructed only through
/// [`Planes::new`], whose contract the SIMD tiers rely on (they index
/// without bounds checks and use aligned loads).
#[derive(Clone, Copy, Debug)]
pub struct Planes<'a> {
    dim: usize,
    bits: u32,
    tables: u32,
    planes: &'a [f32],
    packed: &'a [f32],
    sparse: Option<SparseView<'a>>,
}

impl<'a> Planes<'a> {
    /// # Safety
    /// `dim >= 1`, `1 <= bits <= 32`, `tables >= 1`; with `np = bits *
    /// tables`: `planes` holds `np * dim` values, `packed` holds
    /// `np.div_ceil(PANEL) * dim * PANEL` values and starts on a 64-byte
    /// boundary; `sparse`, when present, has `start` and `mid` of `np + 1`
    /// and `np` entries with `mid[p]` in `start[p]..=start[p + 1]`,
    /// `start[np] <= idx.len()`, and every index `< dim`. (`SimHash` builds
    /// exactly this.)
    pub unsafe fn new(
        dim: usize,
        bits: u32,
        tables: u32,
        planes: &'a [f32],
        packed: &'a [f32],
        sparse: Option<SparseView<'a>>,
    ) -> Self {
        debug_assert!(dim >= 1 && (1..=32).contains(&bits) && tables >= 1);
        debug_assert_eq!(planes.len(), bits as usize * tables as usize * dim);
        debug_assert_eq!(packed.as_ptr() as usize % 64, 0);
        Planes {
            dim,
            bits,
            tables,
            planes,
            packed,
            sparse,
        }
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn tables(&self) -> u32 {
        self.tables
    }
    /// `K * L`.
    pub fn num_planes(&self) -> usize {
        self.bits as usize * self.tables as usize
    }
    pub fn num_panels(&self) -> usize {
        self.num_planes().div_ceil(PANEL)
    }
    /// The planes, `K*L x dim` row-major.
    pub fn planes(&self) -> &'a [f32] {
        self.planes
    }
    /// Packed panels `[panel][dim][16]`, 64-byte aligned.
    pub fn packed(&self) -> &'a [f32] {
        self.packed
    }
    /// Index lists, for sparse families.
    pub fn sparse(&self) -> Option<&SparseView<'a>> {
        self.sparse.as_ref()
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

/// `hash(h, x, n, stride, codes)`: codes of n rows into `codes[i*L + l]`.
///
/// # Safety
/// The lengths were checked as by `SimHash::hash_isa`: `n >= 1`,
/// `stride >= dim`, `x` holds `(n - 1) * stride + dim` values and `codes`
/// `n * L`; the CPU supports the tier the function belongs to. (The x86
/// tiers read through raw pointers and run `#[target_feature]` code, so
/// these pointers are `unsafe fn`: the scalar and portable tiers are safe
/// functions that coerce to them.)
pub type HashFn = unsafe fn(&Planes<'_>, &[f32], usize, usize, &mut [u32]);
/// `project(h, x, n, stride, out)`: `out[i*K*L + p] = x_i · plane_p`.
///
/// # Safety
/// As [`HashFn`], with `out` holding `n * K*L` values.
pub type ProjectFn = unsafe fn(&Planes<'_>, &[f32], usize, usize, &mut [f32]);

pub struct Kernels {
    pub hash: HashFn,
    pub project: ProjectFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier. The caller has checked that the CPU supports
    /// `tier` (the x86 tiers' functions rely on it).
    Kernels { hash: hash, project: project }
}

/// Bits `start .. start + k` of a little-endian bit string held in u64
/// words (bit 0 = least significant bit of word 0); `k <= 32`.
#[inline(always)]
pub fn extract_bits(words: &[u64], start: usize, k: u32) -> u32 {
    let (w, off) = (start / 64, start % 64);
    let mut v = words[w] >> off;
    if off + k as usize > 64 {
        v |= words[w + 1] << (64 - off);
    }
    (v & ((1u64 << k) - 1)) as u32
}

/// Writes the L codes of one row from its plane-sign bit string.
#[inline(always)]
pub fn emit_codes(words: &[u64], bits: u32, tables: u32, out: &mut [u32]) {
    for (l, c) in out[..tables as usize].iter_mut().enumerate() {
        *c = extract_bits(words, l * bits as usize, bits);
    }
}

/// Words of the per-row sign-bit string, for `panels` panels of 16 planes.
#[inline]
pub fn words_per_row(panels: usize) -> usize {
    (panels * 16).div_ceil(64)
}

thread_local! {
    static ROW_BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Sparse planes one row at a time, for the SIMD tiers' remainders of 1-3
/// rows: per plane, four partial sums of scalar loads `x[idx]` (a block
/// transpose would cost more than it saves for so few rows).
///
/// Crate-internal: it indexes rows with `sp`'s indices unchecked, which is
/// sound only for the sparse view of `h` itself ([`Planes::new`]'s
/// contract), while `SparseView` has public fields.
pub(crate) fn sparse_rows<const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let (dim, np) = (h.dim(), h.num_planes());
    let words = np.div_ceil(64);
    let (k, l) = (h.bits(), h.tables() as usize);
    ROW_BITS.with(|b| {
        let mut bits = b.borrow_mut();
        if bits.len() < words {
            bits.resize(words, 0);
        }
        for i in 0..n {
            let row = &x[i * stride..i * stride + dim];
            bits[..words].fill(0);
            for p in 0..np {
                let (s, m, e) = (
                    sp.start[p] as usize,
                    sp.mid[p] as usize,
                    sp.start[p + 1] as usize,
                );
                // SAFETY: every index is < dim = row.len() (Planes::new's contract).
                let v = unsafe { gather_sum(row, &sp.idx[s..m]) - gather_sum(row, &sp.idx[m..e]) };
                if PROJ {
                    out[i * np + p] = v;
                } else {
                    bits[p / 64] |= ((v > 0.0) as u64) << (p % 64);
                }
            }
            if !PROJ {
                emit_codes(&bits[..words], k, l as u32, &mut codes[i * l..]);
            }
        }
    });
}

/// `Σ row[idx]` with four independent partial sums.
///
/// # Safety
/// Every index must be < `row.len()`.
#[inline(always)]
unsafe fn gather_sum(row: &[f32], idx: &[u32]) -> f32 {
    let (mut a0, mut a1, mut a2, mut a3) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    let mut c = idx.chunks_exact(4);
    // SAFETY: indices < row.len() (caller).
    unsafe {
        for q in &mut c {
            a0 += *row.get_unchecked(q[0] as usize);
            a1 += *row.get_unchecked(q[1] as usize);
            a2 += *row.get_unchecked(q[2] as usize);
            a3 += *row.get_unchecked(q[3] as usize);
        }
        for &j in c.remainder() {
            a0 += *row.get_unchecked(j as usize);
        }
    }
    (a0 + a1) + (a2 + a3)
}
