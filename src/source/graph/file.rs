//! Saving and loading an FGD graph (lshk's container: CRC-checked
//! sections, atomic replace; file kind 3). Sections:
//!
//! | tag | content |
//! |---|---|
//! | `GPARAM` | the parameter record (56 bytes, version 1, below) |
//! | `GROWS` | the transformed rows, `rows * sdim` f32 / bf16 (u16) / int8 |
//! | `GSCALES` | int8 storage only: `rows` f32 scales |
//! | `GLEVELS` | `rows` u8 levels |
//! | `GLINKS0` | level 0: `rows` slots of `1 + 2m` u32 (count, ids) |
//! | `GUPPER` | upper levels: per node in order, `level` slots of `1 + m` u32 |
//!
//! `GPARAM`: u32 version, rows, dim, sdim, m, ef_construction, storage,
//! has_bias, entry, max_level, U (f32 bits), reserved 0, then u64 seed.
//! A loader checks every count and id (`< rows`), the levels (the entry's
//! level is the highest), the shapes and the storage value before use.

use std::path::Path;

use super::*;
use crate::error::{Error, Status};
use crate::format::{self, SectionOut};

const GPARAM_VERSION: u32 = 1;
const GPARAM_LEN: usize = 56;

impl Graph {
    /// Saves the graph (atomic: a crash leaves the old file or the new one).
    pub fn save(&self, path: &Path) -> Result<()> {
        let rec = self.param_record();
        format::write_file(path, format::KIND_GRAPH, &self.file_sections(&rec))
    }

    /// The `GPARAM` record.
    pub(crate) fn param_record(&self) -> Vec<u8> {
        let mut rec = Vec::with_capacity(GPARAM_LEN);
        for v in [
            GPARAM_VERSION,
            self.rows as u32,
            self.dim as u32,
            self.sdim as u32,
            self.params.m,
            self.params.ef_construction,
            file_code(self.params.storage).expect("a graph's storage is F32, Bf16 or I8"),
            u32::from(self.has_bias),
            self.entry,
            self.max_level as u32,
            self.u.to_bits(),
            0,
        ] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        rec.extend_from_slice(&self.params.seed.to_le_bytes());
        rec
    }

    /// The graph's sections (the table of the module documentation), with
    /// `rec` = [`Graph::param_record`]: a graph file's, and a graph-family
    /// index file's beside the index's own.
    pub(crate) fn file_sections<'a>(&'a self, rec: &'a [u8]) -> Vec<SectionOut<'a>> {
        let mut secs = vec![SectionOut::new("GPARAM", vec![rec])];
        match &self.data {
            Data::F32(v) => secs.push(SectionOut::new("GROWS", vec![format::as_bytes(v)])),
            Data::Bf16(v) => secs.push(SectionOut::new("GROWS", vec![format::as_bytes(v)])),
            Data::I8 { w, scales } => {
                secs.push(SectionOut::new("GROWS", vec![format::as_bytes(w)]));
                secs.push(SectionOut::new("GSCALES", vec![format::as_bytes(scales)]));
            }
        }
        secs.push(SectionOut::new("GLEVELS", vec![&self.levels]));
        secs.push(SectionOut::new(
            "GLINKS0",
            vec![format::as_bytes(&self.links0)],
        ));
        secs.push(SectionOut::new(
            "GUPPER",
            vec![format::as_bytes(&self.upper)],
        ));
        secs
    }

    /// Loads a graph saved by [`Graph::save`], checking every structural
    /// invariant the search relies on (`BadFileFormat` otherwise).
    pub fn load(path: &Path) -> Result<Graph> {
        let c = format::Container::open(path, format::KIND_GRAPH)?;
        Self::from_container(&c)
    }

    /// The graph of a container's sections ([`Graph::file_sections`]),
    /// every invariant checked (`BadFileFormat`).
    pub(crate) fn from_container(c: &format::Container) -> Result<Graph> {
        let rec = c.section("GPARAM")?;
        if rec.len() != GPARAM_LEN {
            bail!(
                BadFileFormat,
                "GPARAM is {} bytes, {GPARAM_LEN} expected",
                rec.len()
            );
        }
        let u = |i: usize| u32::from_le_bytes(rec[4 * i..4 * i + 4].try_into().unwrap());
        if u(0) != GPARAM_VERSION {
            bail!(BadFileFormat, "graph parameter record version {}", u(0));
        }
        let (rows, dim, sdim, m, efc) = (u(1) as usize, u(2) as usize, u(3) as usize, u(4), u(5));
        let storage = storage_of_code(u(6))
            .ok_or_else(|| Error::new(Status::BadFileFormat, format!("storage value {}", u(6))))?;
        let (has_bias, entry, max_level) = (u(7), u(8), u(9) as usize);
        let unorm = f32::from_bits(u(10));
        if rows == 0
            || rows >= u32::MAX as usize
            || dim == 0
            || dim.checked_add(2).map(|d| d.div_ceil(LANES) * LANES) != Some(sdim)
            || !(2..=MAX_M).contains(&m)
            || efc == 0
            || has_bias > 1
            || entry as usize >= rows
            || max_level > MAX_LEVEL
            || !(unorm.is_finite() && unorm >= 0.0)
            || u(11) != 0
        {
            bail!(BadFileFormat, "GPARAM holds an impossible shape or flag");
        }
        let seed = u64::from_le_bytes(rec[48..56].try_into().unwrap());
        let mm = m as usize;
        let total = checked_mul(rows, sdim, "rows * sdim")?;
        let sized = |name: &str, n: usize, size: usize| -> Result<&[u8]> {
            let b = c.section(name)?;
            if n.checked_mul(size) != Some(b.len()) {
                bail!(
                    BadFileFormat,
                    "{name} is {} bytes, {n} values of {size} bytes expected",
                    b.len()
                );
            }
            Ok(b)
        };
        let u32s = |name: &str, n: usize| -> Result<Vec<u32>> {
            Ok(sized(name, n, 4)?
                .chunks_exact(4)
                .map(|x| u32::from_le_bytes(x.try_into().unwrap()))
                .collect())
        };
        let f32s = |name: &str, n: usize| -> Result<Vec<f32>> {
            Ok(sized(name, n, 4)?
                .chunks_exact(4)
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect())
        };
        let data = match storage {
            Storage::F32 => Data::F32(f32s("GROWS", total)?),
            Storage::Bf16 => Data::Bf16(
                sized("GROWS", total, 2)?
                    .chunks_exact(2)
                    .map(|x| u16::from_le_bytes(x.try_into().unwrap()))
                    .collect(),
            ),
            Storage::BorrowedF32 | Storage::F16 => unreachable!("not a file code"),
            Storage::I8 => Data::I8 {
                w: sized("GROWS", total, 1)?.iter().map(|&b| b as i8).collect(),
                scales: f32s("GSCALES", rows)?,
            },
        };
        // Every stored coordinate of a transformed row is at most U (its
        // norm), up to bf16 rounding; a build refuses a U whose square
        // overflows f32. A CRC proves integrity, not this.
        let lim = f64::from(unorm) * (1.0 + 1.0 / 128.0);
        if f64::from(unorm) * f64::from(unorm) > f64::from(f32::MAX) {
            bail!(BadFileFormat, "GPARAM: U = {unorm:e} squared overflows f32");
        }
        let check = |name: &str, v: &mut dyn Iterator<Item = f32>| -> Result<()> {
            if let Some((i, x)) = v
                .enumerate()
                .find(|&(_, x)| !x.is_finite() || f64::from(x.abs()) > lim)
            {
                bail!(
                    BadFileFormat,
                    "{name}[{i}] is {x:e}: stored values lie within +-U = {unorm:e}"
                );
            }
            Ok(())
        };
        match &data {
            Data::F32(v) => check("GROWS", &mut v.iter().copied())?,
            Data::Bf16(v) => check(
                "GROWS",
                &mut v.iter().map(|&h| crate::kernels::matmul::bf16_to_f32(h)),
            )?,
            Data::I8 { scales, .. } => check("GSCALES", &mut scales.iter().map(|&s| 127.0 * s))?,
        }
        let levels = sized("GLEVELS", rows, 1)?.to_vec();
        if levels.iter().any(|&l| l as usize > max_level)
            || levels[entry as usize] as usize != max_level
        {
            bail!(
                BadFileFormat,
                "GLEVELS: a level above the entry point's ({max_level})"
            );
        }
        let mut upper_off = Vec::with_capacity(rows);
        let mut acc = 0usize;
        for &l in &levels {
            upper_off.push(
                u32::try_from(acc).map_err(|_| {
                    Error::new(Status::BadFileFormat, "GUPPER exceeds 2^32 entries")
                })?,
            );
            acc += l as usize * (1 + mm);
        }
        let links0 = u32s("GLINKS0", checked_mul(rows, 1 + 2 * mm, "rows * (1 + 2m)")?)?;
        let upper = u32s("GUPPER", acc)?;
        let check = |slots: &[u32], cap: usize, what: &str| -> Result<()> {
            for (i, s) in slots.chunks_exact(1 + cap).enumerate() {
                let n = s[0] as usize;
                if n > cap || s[1..1 + n].iter().any(|&id| id as usize >= rows) {
                    bail!(
                        BadFileFormat,
                        "{what}: slot {i} holds a count above {cap} or an id >= {rows}"
                    );
                }
            }
            Ok(())
        };
        check(&links0, 2 * mm, "GLINKS0")?;
        check(&upper, mm, "GUPPER")?;
        // An upper-level link must lead to a node that has that level.
        for (node, &l) in levels.iter().enumerate() {
            for lev in 1..=l as usize {
                let st = upper_off[node] as usize + (lev - 1) * (1 + mm);
                let s = &upper[st..st + 1 + mm];
                if s[1..1 + s[0] as usize]
                    .iter()
                    .any(|&id| (levels[id as usize] as usize) < lev)
                {
                    bail!(
                        BadFileFormat,
                        "GUPPER: node {node} links on level {lev} to a node below it"
                    );
                }
            }
        }
        let mut g = Graph {
            rows,
            dim,
            sdim,
            u: unorm,
            has_bias: has_bias == 1,
            params: GraphParams {
                m,
                ef_construction: efc,
                threads: 0,
                storage,
                seed,
            },
            data,
            links0,
            levels,
            upper_off,
            upper,
            entry,
            max_level,
            walk: None,
        };
        g.build_walk()?;
        Ok(g)
    }
}
