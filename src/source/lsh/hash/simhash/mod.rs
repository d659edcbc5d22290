//! SimHash (signed random projections): the hash family object.
//!
//! A family has `L` tables of `K` bits; plane `l*K + k` decides bit `k` of
//! table `l`'s code: the bit is 1 exactly when `dot(x, plane) > 0` (a NaN
//! projection gives 0; bits above K are 0).
//!
//! Planes come from a seed (see [`crate::rng`] for the frozen generator):
//! * `sparsity == 0`: dense Gaussian. Plane values are drawn row-major
//!   (plane 0's coordinates 0..dim, then plane 1, ...), each
//!   `next_normal() as f32`.
//! * `sparsity == 1`: dense ±1, row-major, each `-1` if the top bit of
//!   `next_u64()` is set, else `+1`.
//! * `sparsity == s >= 2`: each plane has exactly `nnz = ceil(dim / s)`
//!   nonzero coordinates. For each plane in order: a fresh array `0..dim`
//!   gets a partial Fisher–Yates pass (`for i in 0..nnz { j = i +
//!   below(dim - i); swap(a[i], a[j]) }`), the chosen coordinates are
//!   `a[0..nnz]`, then one `next_u64()` per chosen coordinate, in that
//!   order, gives its sign (top bit set: -1). Sparse planes are evaluated
//!   with adds and subtracts from index lists, never as a dense multiply.

use crate::error::{try_vec, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::simhash as k;
use crate::rng::SplitMix64;

mod family;
pub use crate::kernels::simhash::PANEL;
pub use family::REGISTRATION;

/// A f32 buffer whose data starts on a 64-byte boundary.
#[derive(Debug, Default)]
pub struct AlignedF32 {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

// Not derived: a derived clone copies `off` into a fresh allocation whose
// address differs modulo 64, so the copy's data would be misaligned and the
// SIMD tiers' aligned panel loads (`_mm256_load_ps`, `_mm512_load_ps`) would
// fault on a cloned `SimHash`.
impl Clone for AlignedF32 {
    fn clone(&self) -> Self {
        let mut c = AlignedF32::zeroed(self.len, "SimHash packed planes")
            .unwrap_or_else(|e| panic!("cloning AlignedF32: {}", e.message));
        c.as_mut_slice().copy_from_slice(self.as_slice());
        c
    }
}

impl AlignedF32 {
    pub fn zeroed(len: usize, what: &str) -> Result<Self> {
        let buf = try_vec::<f32>(len + 16, what)?;
        let addr = buf.as_ptr() as usize;
        let off = ((64 - addr % 64) % 64) / 4;
        Ok(AlignedF32 { buf, off, len })
    }
    #[inline]
    pub fn as_slice(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Sparse ±1 planes as index lists: plane `p`'s positive coordinates are
/// `idx[start[p]..mid[p]]`, its negative ones `idx[mid[p]..start[p + 1]]`,
/// each run ascending.
#[derive(Clone, Debug, Default)]
pub struct SparsePlanes {
    pub start: Vec<u32>,
    pub mid: Vec<u32>,
    pub idx: Vec<u32>,
}

/// A SimHash family: `tables` tables of `bits` bits over `dim` inputs.
#[derive(Clone, Debug)]
pub struct SimHash {
    dim: usize,
    bits: u32,
    tables: u32,
    sparsity: u32,
    /// `K*L x dim`, row-major (dense values; ±1/0 for sparse families).
    planes: Vec<f32>,
    /// Panels of 16 planes, `[panel][dim][16]`, zero-padded to whole panels.
    packed: AlignedF32,
    sparse: Option<SparsePlanes>,
}

fn check_shape(dim: usize, bits: u32, tables: u32) -> Result<usize> {
    if dim == 0 {
        return Err(Error::new(Status::InvalidArgument, "dim must be >= 1"));
    }
    if bits == 0 || bits > 32 {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("bits_per_table is {bits}; it must be in 1..=32"),
        ));
    }
    if tables == 0 {
        return Err(Error::new(Status::InvalidArgument, "tables must be >= 1"));
    }
    let planes = (bits as usize) * (tables as usize);
    crate::error::checked_mul(planes, dim, "planes x dim")?;
    // The planes and their packed copy, f32 each.
    crate::error::check_fits_memory(8 * planes as u128 * dim as u128, "the SimHash planes")?;
    Ok(planes)
}

impl SimHash {
    /// A family from a seed (see the module documentation for `sparsity`).
    pub fn new(dim: usize, bits: u32, tables: u32, sparsity: u32, seed: u64) -> Result<Self> {
        let np = check_shape(dim, bits, tables)?;
        let mut planes = try_vec::<f32>(np * dim, "SimHash planes")?;
        let mut rng = SplitMix64::new(seed);
        match sparsity {
            0 => planes
                .iter_mut()
                .for_each(|v| *v = rng.next_normal() as f32),
            1 => planes
                .iter_mut()
                .for_each(|v| *v = if rng.next_u64() >> 63 == 1 { -1.0 } else { 1.0 }),
            s => {
                let nnz = dim.div_ceil(s as usize);
                let mut a: Vec<u32> = Vec::with_capacity(dim);
                for p in 0..np {
                    a.clear();
                    a.extend(0..dim as u32);
                    for i in 0..nnz {
                        let j = i + rng.below((dim - i) as u64) as usize;
                        a.swap(i, j);
                    }
                    let row = &mut planes[p * dim..(p + 1) * dim];
                    for &c in &a[..nnz] {
                        row[c as usize] = if rng.next_u64() >> 63 == 1 { -1.0 } else { 1.0 };
                    }
                }
            }
        }
        Self::assemble(dim, bits, tables, sparsity, planes)
    }

    /// A dense family from caller-given planes (`K*L x dim`, row-major).
    /// Planes must be finite.
    pub fn from_planes(planes: &[f32], dim: usize, bits: u32, tables: u32) -> Result<Self> {
        let np = check_shape(dim, bits, tables)?;
        if planes.len() != np * dim {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "planes holds {} values, expected K*L*dim = {}",
                    planes.len(),
                    np * dim
                ),
            ));
        }
        if let Some(i) = planes.iter().position(|v| !v.is_finite()) {
            return Err(Error::new(
                Status::NonFinite,
                format!("plane {} coordinate {} is {}", i / dim, i % dim, planes[i]),
            ));
        }
        let mut v = try_vec::<f32>(planes.len(), "SimHash planes")?;
        v.copy_from_slice(planes);
        Self::assemble(dim, bits, tables, 0, v)
    }

    fn assemble(
        dim: usize,
        bits: u32,
        tables: u32,
        sparsity: u32,
        planes: Vec<f32>,
    ) -> Result<Self> {
        let np = planes.len() / dim;
        let npanels = np.div_ceil(PANEL);
        let mut packed = AlignedF32::zeroed(npanels * dim * PANEL, "SimHash packed planes")?;
        {
            let pk = packed.as_mut_slice();
            for p in 0..np {
                let (panel, lane) = (p / PANEL, p % PANEL);
                for j in 0..dim {
                    pk[(panel * dim + j) * PANEL + lane] = planes[p * dim + j];
                }
            }
        }
        let sparse = if sparsity >= 2 {
            let mut sp = SparsePlanes::default();
            for p in 0..np {
                let row = &planes[p * dim..(p + 1) * dim];
                sp.start.push(sp.idx.len() as u32);
                sp.idx
                    .extend((0..dim as u32).filter(|&j| row[j as usize] > 0.0));
                sp.mid.push(sp.idx.len() as u32);
                sp.idx
                    .extend((0..dim as u32).filter(|&j| row[j as usize] < 0.0));
            }
            sp.start.push(sp.idx.len() as u32);
            Some(sp)
        } else {
            None
        };
        Ok(SimHash {
            dim,
            bits,
            tables,
            sparsity,
            planes,
            packed,
            sparse,
        })
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
    pub fn sparsity(&self) -> u32 {
        self.sparsity
    }
    /// `K * L`.
    pub fn num_planes(&self) -> usize {
        self.bits as usize * self.tables as usize
    }
    /// The planes, `K*L x dim` row-major.
    pub fn planes(&self) -> &[f32] {
        &self.planes
    }
    /// Packed panels `[panel][dim][16]` (see [`PANEL`]).
    pub fn packed(&self) -> &[f32] {
        self.packed.as_slice()
    }
    pub fn num_panels(&self) -> usize {
        self.num_planes().div_ceil(PANEL)
    }
    /// Index lists, for sparse families (`sparsity >= 2`).
    pub fn sparse(&self) -> Option<&SparsePlanes> {
        self.sparse.as_ref()
    }

    /// The kernels' view of this family.
    fn view(&self) -> k::Planes<'_> {
        let sparse = self.sparse.as_ref().map(|s| k::SparseView {
            start: &s.start,
            mid: &s.mid,
            idx: &s.idx,
        });
        // SAFETY: `new`/`from_planes` (through `assemble`) checked the shape (dim >= 1, bits in
        // 1..=32, tables >= 1), sized `planes` K*L*dim and `packed` whole
        // panels in a 64-byte-aligned buffer, and built the sparse lists with
        // every index < dim and start/mid consistent (the only constructors;
        // the fields are private and never changed afterwards).
        unsafe {
            k::Planes::new(
                self.dim,
                self.bits,
                self.tables,
                &self.planes,
                self.packed.as_slice(),
                sparse,
            )
        }
    }

    fn check_io(
        &self,
        x: &[f32],
        n: usize,
        stride: usize,
        out_len: usize,
        per_row: usize,
    ) -> Result<()> {
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
        let need = crate::error::checked_mul(n, per_row, "output size")?;
        if out_len < need {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!("output holds {out_len} values, {n} rows need {need}"),
            ));
        }
        Ok(())
    }

    /// Codes of `n` rows of `x` (row stride `stride` elements) into
    /// `codes[i*L + l]`, on the active tier.
    pub fn hash(&self, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) -> Result<()> {
        self.hash_isa(isa::active(), x, n, stride, codes)
    }

    /// [`SimHash::hash`] on one chosen tier (`UnsupportedIsa` if the CPU
    /// lacks it).
    pub fn hash_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_io(x, n, stride, codes.len(), self.tables as usize)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the tier is supported and every length was checked above
        // (the HashFn contract).
        unsafe { (k::kernels(tier).hash)(&self.view(), x, n, stride, codes) };
        Ok(())
    }

    /// Codes and raw projections of the same rows in one pass over the
    /// planes: the projections as [`SimHash::project`], the codes from their
    /// signs (`> 0`, NaN gives 0). Bit-identical to [`SimHash::hash`] plus
    /// [`SimHash::project`] on every tier: each tier's hash and project
    /// share one accumulation and take the code bit as `value > 0` of it.
    pub fn hash_project(
        &self,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
        proj: &mut [f32],
    ) -> Result<()> {
        self.hash_project_isa(isa::active(), x, n, stride, codes, proj)
    }

    /// [`SimHash::hash_project`] on one chosen tier.
    pub fn hash_project_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
        proj: &mut [f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_io(x, n, stride, codes.len(), self.tables as usize)?;
        self.check_io(x, n, stride, proj.len(), self.num_planes())?;
        if n == 0 {
            return Ok(());
        }
        let np = self.num_planes();
        // SAFETY: as in `hash_isa` (the ProjectFn contract).
        unsafe { (k::kernels(tier).project)(&self.view(), x, n, stride, proj) };
        let (kb, l) = (self.bits as usize, self.tables as usize);
        for (pr, cr) in proj[..n * np]
            .chunks_exact(np)
            .zip(codes.chunks_exact_mut(l))
        {
            for (c, pt) in cr.iter_mut().zip(pr.chunks_exact(kb)) {
                *c = pt
                    .iter()
                    .enumerate()
                    .fold(0u32, |acc, (b, &v)| acc | (u32::from(v > 0.0) << b));
            }
        }
        Ok(())
    }

    /// Raw projections `out[i*K*L + p] = dot(x_i, plane_p)` on the active tier.
    pub fn project(&self, x: &[f32], n: usize, stride: usize, out: &mut [f32]) -> Result<()> {
        self.project_isa(isa::active(), x, n, stride, out)
    }

    /// [`SimHash::project`] on one chosen tier.
    pub fn project_isa(
        &self,
        tier: Isa,
        x: &[f32],
        n: usize,
        stride: usize,
        out: &mut [f32],
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_io(x, n, stride, out.len(), self.num_planes())?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: as in `hash_isa` (the ProjectFn contract).
        unsafe { (k::kernels(tier).project)(&self.view(), x, n, stride, out) };
        Ok(())
    }
}
