//! Hash families behind one seam.
//!
//! An [`Index`](crate::index::Index) knows its family only through the
//! [`HashFamily`] trait (hash a batch, hash + project fused for probe
//! ordering, its file section, its memory) and the family's
//! [`Registration`] (the constructors the index's build and load call, the
//! file section's name and expected size, the code width for the default
//! `range_bits`). Query, save, load and memory accounting never `match` on
//! the family; they look the registration up once ([`registration`]) and
//! call the trait object.
//!
//! # Why a trait object
//! The index holds a `Box<dyn HashFamily>` and calls it once per batch (a
//! block of up to [`crate::index::QUERY_BLOCK`] queries, or a build unit
//! of 16,384 rows). The virtual call costs a few nanoseconds against a
//! hash of `K * L` projections of `dim` floats per query, and the per-tier
//! dispatch behind it stays inside the family (one `isa` table look-up per
//! call, as before). A generic `Index<H: HashFamily>` would monomorphise
//! the whole index (and the C API's handle, which must pick the family at
//! run time from a file or a parameter) for no measurable gain; see
//! docs/architecture.md for the query figures before and after.
//!
//! # Adding a family
//! A new folder `src/hash/<name>/` with the family object, its scalar
//! oracle and kernels (under `src/kernels/<name>/`), an `impl HashFamily`
//! and a `pub static REGISTRATION: Registration`; then one line in
//! [`FAMILIES`] and one variant in [`Family`] (its id in files and in the
//! C API). docs/architecture.md lists the steps.

use crate::error::{Error, Result};
use crate::source::IndexParams;
pub use crate::source::{AsAny, Family};

pub mod dwta;
pub mod simhash;

impl Family {
    /// Whether it is a hash family (SimHash, DWTA: LSH tables).
    pub fn is_hash(self) -> bool {
        FAMILIES.iter().any(|r| r.family == self)
    }
}

/// The registered families (one line per family).
pub static FAMILIES: &[&Registration] = &[&simhash::REGISTRATION, &dwta::REGISTRATION];

/// The registration of `f`.
pub fn registration(f: Family) -> &'static Registration {
    FAMILIES
        .iter()
        .find(|r| r.family == f)
        .expect("every Family variant is registered")
}

/// A family's shape as the index resolves it (from [`IndexParams`] at
/// build, from the `PARAMS` record at load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyShape {
    /// The dimension hashed (after the index's transform).
    pub hash_dim: usize,
    /// K (bits per table for SimHash, bins per table for DWTA).
    pub bits: u32,
    /// L.
    pub tables: u32,
    pub sparsity: u32,
    pub bin_size: u32,
    pub seed: u64,
}

/// What the index needs of a hash family (module documentation). Every
/// method is called once per batch, never per element.
pub trait HashFamily: AsAny + Send + Sync {
    /// Which registered family this is.
    fn family(&self) -> Family;
    /// The codes (`n x L`, row-major, unfolded) of `n` vectors (`x` row `i`
    /// at `i * stride`, `dim` floats).
    fn hash(&self, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) -> Result<()>;
    /// Whether the family has a probe order: [`HashFamily::hash_project`]
    /// gives, beside the codes, the `n x K*L` projections whose magnitudes
    /// rank the multi-probe flips ([`crate::source::lsh::tables::Tables::gather`]).
    fn has_probe_order(&self) -> bool {
        false
    }
    /// Codes and projections in one pass (fused); only when
    /// [`HashFamily::has_probe_order`] (callers check it first: the index's
    /// one probe check, `resolve_gather`).
    fn hash_project(
        &self,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
        proj: &mut [f32],
    ) -> Result<()> {
        let _ = (x, n, stride, codes, proj);
        crate::bail!(
            InvalidArgument,
            "multi-probing (probes > 0) needs a SimHash index"
        )
    }
    /// The bytes of the family's file section (named by its
    /// [`Registration::section`]).
    fn section_bytes(&self) -> &[u8];
    /// Bytes the family holds (its parameters and derived tables).
    fn memory_bytes(&self) -> usize;
}

/// How the index builds, sizes and loads a family (module documentation).
pub struct Registration {
    pub family: Family,
    /// The family's name in messages ("SimHash", "DWTA").
    pub name: &'static str,
    /// Its file section ("PLANES", "DWTAMAP").
    pub section: &'static str,
    /// Bits of information in one table's code (for the default
    /// `range_bits`), from K and B.
    pub code_bits: fn(bits: u32, bin_size: u32) -> u32,
    /// Whether `p` carries caller-given family data (planes, map).
    pub given: fn(p: &IndexParams) -> bool,
    /// A family built from `p` (caller-given data or the seed).
    pub build: fn(s: &FamilyShape, p: &IndexParams) -> Result<Box<dyn HashFamily>>,
    /// The section's expected size in bytes from the params, and how the
    /// message names the per-K*L factor (`"dim"`, `"bin_size"`); checked
    /// before anything is allocated from the params.
    pub section_len: fn(s: &FamilyShape) -> (u128, &'static str),
    /// The family of a file: from the section (caller-given, `given`) or
    /// regenerated from the seed and compared with the section bit for
    /// bit. `bad` words a `BadFileFormat` error.
    pub load: LoadFn,
}

/// [`Registration::load`]: `(shape, section, given, bad)`.
pub type LoadFn = fn(
    s: &FamilyShape,
    section: &[u8],
    given: bool,
    bad: &dyn Fn(String) -> Error,
) -> Result<Box<dyn HashFamily>>;

/// The load rule every seeded family follows: a caller-given family is
/// rebuilt from its `section` (`from_section`); a seeded one is regenerated
/// (`from_seed`) and must equal the section bit for bit (`same`), else
/// `BadFileFormat` ("`section` differs from what the seed generates").
/// A constructor's refusal is `BadFileFormat` too ("params describe an
/// invalid family").
pub(crate) fn load_given_or_seeded<T: HashFamily>(
    given: bool,
    section: &str,
    from_section: impl FnOnce() -> Result<T>,
    from_seed: impl FnOnce() -> Result<T>,
    same: impl FnOnce(&T) -> bool,
    bad: &dyn Fn(String) -> Error,
) -> Result<Box<dyn HashFamily>> {
    let invalid = |e: Error| bad(format!("params describe an invalid family: {}", e.message));
    let h = if given {
        from_section().map_err(invalid)?
    } else {
        let h = from_seed().map_err(invalid)?;
        if !same(&h) {
            return Err(bad(format!(
                "{section} differs from what the seed generates (inconsistent file)"
            )));
        }
        h
    };
    Ok(Box::new(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_registered_once_with_its_own_id_and_section() {
        for (i, r) in FAMILIES.iter().enumerate() {
            assert_eq!(Family::from_u32(r.family as u32), Some(r.family));
            assert!(std::ptr::eq(registration(r.family), *r));
            for q in &FAMILIES[i + 1..] {
                assert_ne!(r.family, q.family);
                assert_ne!(r.section, q.section);
            }
        }
        assert_eq!(Family::from_u32(Family::ALL.len() as u32), None);
        for (i, f) in Family::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i);
            assert_eq!(Family::from_u32(i as u32), Some(*f));
        }
    }

    #[test]
    fn a_built_family_reports_its_registration() {
        for r in FAMILIES {
            let p = IndexParams {
                family: r.family,
                bits: 4,
                tables: 2,
                bin_size: 4,
                ..Default::default()
            };
            let s = FamilyShape {
                hash_dim: 8,
                bits: 4,
                tables: 2,
                sparsity: 0,
                bin_size: 4,
                seed: 7,
            };
            let h = (r.build)(&s, &p).unwrap();
            assert_eq!(h.family(), r.family);
            // The section round-trips through the registration's load.
            assert_eq!(h.section_bytes().len() as u128, (r.section_len)(&s).0);
            let bad = |m: String| Error::new(crate::error::Status::BadFileFormat, m);
            let back = (r.load)(&s, h.section_bytes(), false, &bad).unwrap();
            assert_eq!(back.section_bytes(), h.section_bytes());
            // A changed section is refused for a seeded family.
            let mut other = h.section_bytes().to_vec();
            other[0] ^= 1;
            let e = (r.load)(&s, &other, false, &bad).err().unwrap();
            assert_eq!(e.status, crate::error::Status::BadFileFormat);
        }
    }
}
