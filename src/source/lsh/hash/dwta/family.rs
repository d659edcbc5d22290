//! DWTA through the hash-family seam ([`crate::source::lsh::hash::HashFamily`]): its
//! registration (build, file section `DWTAMAP`, load). DWTA has no probe
//! order (the trait's default refuses probes).

use super::Dwta;
use crate::error::{Error, Result};
use crate::format::{self, cast_slice};
use crate::source::lsh::hash::{
    load_given_or_seeded, Family, FamilyShape, HashFamily, Registration,
};
use crate::source::IndexParams;

/// DWTA's registration (one line in [`crate::source::lsh::hash::FAMILIES`]).
pub static REGISTRATION: Registration = Registration {
    family: Family::Dwta,
    name: "DWTA",
    section: "DWTAMAP",
    code_bits: |bits, bin_size| bits.saturating_mul(bin_size.max(2).trailing_zeros()),
    given: |p| p.dwta_map.is_some(),
    build,
    section_len: |s| {
        (
            s.bits as u128 * s.tables as u128 * s.bin_size as u128 * 4,
            "bin_size",
        )
    },
    load,
};

fn build(s: &FamilyShape, p: &IndexParams) -> Result<Box<dyn HashFamily>> {
    Ok(Box::new(match &p.dwta_map {
        Some(m) => Dwta::from_map(m, s.hash_dim, s.bits, s.tables, s.bin_size)?,
        None => Dwta::new(s.hash_dim, s.bits, s.tables, s.bin_size, s.seed)?,
    }))
}

fn load(
    s: &FamilyShape,
    section: &[u8],
    given: bool,
    bad: &dyn Fn(String) -> Error,
) -> Result<Box<dyn HashFamily>> {
    let m: &[u32] = cast_slice(section, "DWTAMAP")?;
    load_given_or_seeded(
        given,
        "DWTAMAP",
        || Dwta::from_map(m, s.hash_dim, s.bits, s.tables, s.bin_size),
        || Dwta::new(s.hash_dim, s.bits, s.tables, s.bin_size, s.seed),
        |h: &Dwta| h.map() == m,
        bad,
    )
}

impl HashFamily for Dwta {
    fn family(&self) -> Family {
        Family::Dwta
    }
    fn hash(&self, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) -> Result<()> {
        self.hash_dense(x, n, stride, codes)
    }
    fn section_bytes(&self) -> &[u8] {
        format::as_bytes(self.map())
    }
    fn memory_bytes(&self) -> usize {
        // Map, transposed map, inverse map, filter, probe tables.
        self.map().len() * 4
            + self.map_t().len() * 4
            + self.filter().len() * 4
            + self.probe_fwd().len() * 4
            + self.probe_inv().0.len() * 4
            + self.probe_inv().1.len() * 4
            + self.map().len() * 8
    }
}
