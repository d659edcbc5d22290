//! The lshk container's section table (layout in src/format.rs), for tests
//! that change bytes inside sections and recompute the CRCs so that the
//! change reaches the parser behind the container checks.

use lshk::crc32c::crc32c;

pub const HEADER: usize = 64;
pub const ENTRY: usize = 32;

pub struct Section {
    /// Offset of the section's table entry.
    pub entry: usize,
    pub tag: String,
    pub off: usize,
    pub len: usize,
}

pub fn sections(b: &[u8]) -> Vec<Section> {
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    (0..n)
        .map(|i| {
            let e = HEADER + ENTRY * i;
            Section {
                entry: e,
                tag: String::from_utf8_lossy(&b[e..e + 8])
                    .trim_end_matches('\0')
                    .to_string(),
                off: u64::from_le_bytes(b[e + 8..e + 16].try_into().unwrap()) as usize,
                len: u64::from_le_bytes(b[e + 16..e + 24].try_into().unwrap()) as usize,
            }
        })
        .collect()
}

/// Recomputes every section CRC and the header CRC.
pub fn fix_crcs(b: &mut [u8]) {
    let secs = sections(b);
    for s in &secs {
        let c = crc32c(0, &b[s.off..s.off + s.len]);
        b[s.entry + 24..s.entry + 28].copy_from_slice(&c.to_le_bytes());
    }
    let table_end = HEADER + ENTRY * secs.len();
    let h = crc32c(crc32c(0, &b[..28]), &b[HEADER..table_end]);
    b[28..32].copy_from_slice(&h.to_le_bytes());
}

/// A copy of `file` with the `i`-th 4-byte value of section `tag` set to
/// `v` and every CRC recomputed; `None` when the section is absent or
/// shorter.
pub fn with_f32(file: &[u8], tag: &str, i: usize, v: f32) -> Option<Vec<u8>> {
    with_bytes(file, tag, 4 * i, &v.to_le_bytes())
}

/// As [`with_f32`] for the `i`-th 2-byte value (bf16 / f16 bits).
pub fn with_u16(file: &[u8], tag: &str, i: usize, v: u16) -> Option<Vec<u8>> {
    with_bytes(file, tag, 2 * i, &v.to_le_bytes())
}

fn with_bytes(file: &[u8], tag: &str, at: usize, v: &[u8]) -> Option<Vec<u8>> {
    let s = sections(file).into_iter().find(|s| s.tag == tag)?;
    if at + v.len() > s.len {
        return None;
    }
    let mut b = file.to_vec();
    b[s.off + at..s.off + at + v.len()].copy_from_slice(v);
    fix_crcs(&mut b);
    Some(b)
}
