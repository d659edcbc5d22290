//! SimHash through the hash-family seam ([`crate::source::lsh::hash::HashFamily`]):
//! its registration (build, file section `PLANES`, load) and its probe
//! order (the fused [`SimHash::hash_project`]).

use super::SimHash;
use crate::error::{Error, Result};
use crate::format::{self, cast_slice};
use crate::source::lsh::hash::{
    load_given_or_seeded, Family, FamilyShape, HashFamily, Registration,
};
use crate::source::IndexParams;

/// SimHash's registration (one line in [`crate::source::lsh::hash::FAMILIES`]).
pub static REGISTRATION: Registration = Registration {
    family: Family::SimHash,
    name: "SimHash",
    section: "PLANES",
    code_bits: |bits, _| bits,
    given: |p| p.planes.is_some(),
    build,
    section_len: |s| {
        (
            s.bits as u128 * s.tables as u128 * s.hash_dim as u128 * 4,
            "dim",
        )
    },
    load,
};

fn build(s: &FamilyShape, p: &IndexParams) -> Result<Box<dyn HashFamily>> {
    Ok(Box::new(match &p.planes {
        Some(pl) => SimHash::from_planes(pl, s.hash_dim, s.bits, s.tables)?,
        None => SimHash::new(s.hash_dim, s.bits, s.tables, s.sparsity, s.seed)?,
    }))
}

fn load(
    s: &FamilyShape,
    section: &[u8],
    given: bool,
    bad: &dyn Fn(String) -> Error,
) -> Result<Box<dyn HashFamily>> {
    let pl: &[f32] = cast_slice(section, "PLANES")?;
    if given && s.sparsity != 0 {
        return Err(bad("params: caller-given planes with sparsity != 0".into()));
    }
    load_given_or_seeded(
        given,
        "PLANES",
        || SimHash::from_planes(pl, s.hash_dim, s.bits, s.tables),
        || SimHash::new(s.hash_dim, s.bits, s.tables, s.sparsity, s.seed),
        |h: &SimHash| {
            h.planes().len() == pl.len()
                && h.planes()
                    .iter()
                    .zip(pl)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        },
        bad,
    )
}

impl HashFamily for SimHash {
    fn family(&self) -> Family {
        Family::SimHash
    }
    fn hash(&self, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) -> Result<()> {
        SimHash::hash(self, x, n, stride, codes)
    }
    fn has_probe_order(&self) -> bool {
        true
    }
    fn hash_project(
        &self,
        x: &[f32],
        n: usize,
        stride: usize,
        codes: &mut [u32],
        proj: &mut [f32],
    ) -> Result<()> {
        SimHash::hash_project(self, x, n, stride, codes, proj)
    }
    fn section_bytes(&self) -> &[u8] {
        format::as_bytes(self.planes())
    }
    fn memory_bytes(&self) -> usize {
        self.planes().len() * 4
            + self.packed().len() * 4
            + self
                .sparse()
                .map_or(0, |s| (s.start.len() + s.mid.len() + s.idx.len()) * 4)
    }
}
