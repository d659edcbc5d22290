//! The lshk container file: versioned, little-endian, a CRC-32C per
//! section, sections 64-byte aligned so a loader can map the file and use
//! arrays in place (no copy).
//!
//! ```text
//! offset  size  field
//!      0     8  magic  89 'L' 'S' 'H' 'K' 0D 0A 1A  (PNG-style: catches
//!               text-mode and 7-bit transfer damage)
//!      8     4  format version (this library writes and reads 1)
//!     12     4  file kind (1 = index, 2 = IVF, 3 = FGD graph)
//!     16     8  file length in bytes (must equal the file's size)
//!     24     4  section count (<= 4096)
//!     28     4  CRC-32C of bytes 0..28 followed by the section table
//!     32    32  reserved, zero
//!     64  32*n  section table, one entry per section, in file order:
//!                 tag      8 bytes ASCII, NUL-padded ("PARAMS\0\0")
//!                 offset   u64, a multiple of 64, increasing, no overlap
//!                 length   u64 bytes
//!                 crc      u32 CRC-32C of the section's bytes
//!                 reserved u32, zero
//!    ...        section data, each at its offset; gaps are zero
//! ```
//! Every integer is little-endian. A reader rejects, with
//! `BadFileFormat` and a message naming the problem: a short file, a wrong
//! magic, a version newer (or older) than it knows, another file kind, a
//! length that differs from the file's size, a bad header CRC, nonzero
//! reserved fields, a section outside the file or misaligned or
//! overlapping, a duplicate tag, and a section whose CRC does not match.
//!
//! Writing goes to a temporary file in the same directory, which is
//! flushed to disk and renamed over the target, so a crash leaves either
//! the old file or the new one, never a torn one (tests/save_crash.rs
//! kills savers with SIGKILL). A crash mid-write leaves the temporary
//! file `.<name>.tmp-<pid>-<nanos>-<seq>` behind: it is never read, no
//! later save reuses its name, and it may be deleted when no save runs.
//! A save replaces only a regular file (through a symbolic link, the
//! link's regular target); a path naming anything else that exists (a
//! directory, FIFO, socket, device node, dangling link) is refused with
//! `IoError`. A load refuses anything but a regular file, without opening
//! a FIFO or device in a way that blocks.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::crc32c::crc32c;
use crate::error::{Error, Result, Status};

pub const MAGIC: [u8; 8] = [0x89, b'L', b'S', b'H', b'K', 0x0D, 0x0A, 0x1A];
pub const VERSION: u32 = 1;
pub const KIND_INDEX: u32 = 1;
/// An [`crate::source::ivf::Ivf`] file.
pub const KIND_IVF: u32 = 2;
/// A [`crate::source::graph::Graph`] file.
pub const KIND_GRAPH: u32 = 3;
pub const ALIGN: u64 = 64;
const HEADER: usize = 64;
const ENTRY: usize = 32;
const MAX_SECTIONS: u32 = 4096;

fn bad(msg: impl Into<String>) -> Error {
    Error::new(Status::BadFileFormat, msg)
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::new(Status::IoError, format!("{what} {}: {e}", path.display()))
}

/// A tag as stored: ASCII, NUL-padded to 8 bytes.
pub fn tag(name: &str) -> [u8; 8] {
    assert!(name.len() <= 8 && name.is_ascii());
    let mut t = [0u8; 8];
    t[..name.len()].copy_from_slice(name.as_bytes());
    t
}

fn tag_name(t: &[u8; 8]) -> String {
    t.iter()
        .take_while(|&&b| b != 0)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

/// One section to write: its tag and its bytes, possibly in several parts
/// (so a large array need not be concatenated in memory).
pub struct SectionOut<'a> {
    pub tag: [u8; 8],
    pub parts: Vec<&'a [u8]>,
}

impl<'a> SectionOut<'a> {
    pub fn new(name: &str, parts: Vec<&'a [u8]>) -> Self {
        SectionOut {
            tag: tag(name),
            parts,
        }
    }
    fn len(&self) -> u64 {
        self.parts.iter().map(|p| p.len() as u64).sum()
    }
}

fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// Writes a container atomically (temporary file + fsync + rename).
pub fn write_file(path: &Path, kind: u32, sections: &[SectionOut<'_>]) -> Result<()> {
    if sections.len() > MAX_SECTIONS as usize {
        return Err(Error::new(Status::InvalidArgument, "too many sections"));
    }
    // Layout.
    let n = sections.len();
    let mut offset = align_up((HEADER + ENTRY * n) as u64);
    let mut table = Vec::with_capacity(ENTRY * n);
    let mut offsets = Vec::with_capacity(n);
    for s in sections {
        let len = s.len();
        let crc = s.parts.iter().fold(0u32, |c, p| crc32c(c, p));
        table.extend_from_slice(&s.tag);
        table.extend_from_slice(&offset.to_le_bytes());
        table.extend_from_slice(&len.to_le_bytes());
        table.extend_from_slice(&crc.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        offsets.push(offset);
        offset = align_up(offset + len);
    }
    let file_len = match sections.last() {
        Some(s) => offsets[n - 1] + s.len(),
        None => align_up((HEADER + ENTRY * n) as u64),
    };
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&kind.to_le_bytes());
    header.extend_from_slice(&file_len.to_le_bytes());
    header.extend_from_slice(&(n as u32).to_le_bytes());
    let hcrc = crc32c(crc32c(0, &header), &table);
    header.extend_from_slice(&hcrc.to_le_bytes());
    header.resize(HEADER, 0);

    // The file replaced is a regular file, or the regular file a symbolic
    // link names (the link stays and its target is replaced); anything
    // else that exists (a directory, FIFO, socket, device node, a dangling
    // link) is refused, so a save can never put a file where a device
    // node was.
    let resolved;
    let path = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => path,
        Err(e) => return Err(io(path, "cannot stat", e)),
        Ok(m) if m.is_file() => path,
        Ok(m) if m.file_type().is_symlink() => {
            let not_regular = || {
                Error::new(
                    Status::IoError,
                    format!(
                        "{} is a symbolic link to something other than a regular file: not replaced",
                        path.display()
                    ),
                )
            };
            resolved = fs::canonicalize(path).map_err(|_| not_regular())?;
            if !fs::metadata(&resolved).is_ok_and(|m| m.is_file()) {
                return Err(not_regular());
            }
            resolved.as_path()
        }
        Ok(_) => {
            return Err(Error::new(
                Status::IoError,
                format!(
                    "{} exists and is not a regular file: not replaced",
                    path.display()
                ),
            ))
        }
    };
    // Temporary file next to the target.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!("{} is not a file path", path.display()),
        )
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Unique per process (pid), call (seq: threads of one process saving
    // at the same instant, or a clock without nanoseconds) and time (a
    // recycled pid). A crash (SIGKILL) leaves this file behind; nothing
    // reads it, and no later save can pick the same name.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{nanos}-{seq}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io(&tmp, "cannot create", e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let werr = |e| io(&tmp, "cannot write", e);
        w.write_all(&header).map_err(werr)?;
        w.write_all(&table).map_err(werr)?;
        let mut pos = (HEADER + table.len()) as u64;
        let zeros = [0u8; ALIGN as usize];
        for (s, &off) in sections.iter().zip(&offsets) {
            w.write_all(&zeros[..(off - pos) as usize]).map_err(werr)?;
            for p in &s.parts {
                w.write_all(p).map_err(werr)?;
            }
            pos = off + s.len();
        }
        if pos < file_len {
            w.write_all(&zeros[..(file_len - pos) as usize])
                .map_err(werr)?;
        }
        let f = w
            .into_inner()
            .map_err(|e| io(&tmp, "cannot write", e.into_error()))?;
        f.sync_all().map_err(|e| io(&tmp, "cannot flush", e))?;
        drop(f);
        fs::rename(&tmp, path).map_err(|e| io(path, "cannot rename the temporary file onto", e))?;
        // Make the rename durable.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A read-only memory map of a whole file (unmapped on drop).
///
/// The file must not be modified or truncated in place while mapped
/// (lshk's own writer replaces files by rename, which is safe).
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned; sharing &[u8] views across
// threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn open(path: &Path) -> Result<Mapping> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let not_regular = || {
            Error::new(
                Status::IoError,
                format!("{} is not a regular file", path.display()),
            )
        };
        // Refuse a FIFO, device or directory before opening it (opening a
        // FIFO for reading blocks until a writer comes); O_NONBLOCK keeps
        // the open from blocking if the name is swapped for one between
        // this check and the open, and the fstat below decides.
        if !fs::metadata(path)
            .map_err(|e| io(path, "cannot open", e))?
            .is_file()
        {
            return Err(not_regular());
        }
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| io(path, "cannot open", e))?;
        let meta = f.metadata().map_err(|e| io(path, "cannot stat", e))?;
        if !meta.is_file() {
            return Err(not_regular());
        }
        let len =
            usize::try_from(meta.len()).map_err(|_| bad("file larger than the address space"))?;
        if len < HEADER {
            return Err(bad(format!(
                "{}: {len} bytes is too short for an lshk file (header is {HEADER})",
                path.display()
            )));
        }
        // SAFETY: mapping a regular file read-only and private; the fd may
        // be closed afterwards (the mapping keeps the file alive).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io(path, "cannot map", std::io::Error::last_os_error()));
        }
        Ok(Mapping { ptr, len })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live read-only mapping owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in open().
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

#[derive(Clone, Debug)]
pub struct SectionInfo {
    tag: [u8; 8],
    offset: usize,
    len: usize,
}

/// A validated container: every check in the module documentation passed.
pub struct Container {
    map: Mapping,
    sections: Vec<SectionInfo>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl Container {
    /// Maps and validates `path`, which must be of file kind `kind`.
    pub fn open(path: &Path, kind: u32) -> Result<Container> {
        let map = Mapping::open(path)?;
        let sections = validate(map.bytes(), kind)
            .map_err(|e| Error::new(e.status, format!("{}: {}", path.display(), e.message)))?;
        Ok(Container { map, sections })
    }

    /// Maps and validates `path`, which must be of one of the file kinds
    /// `kinds` (the first is named in the error for any other); returns
    /// the container and its kind.
    pub fn open_any(path: &Path, kinds: &[u32]) -> Result<(Container, u32)> {
        let map = Mapping::open(path)?;
        let b = map.bytes();
        let found = if b.len() >= HEADER && b[..8] == MAGIC {
            u32_at(b, 12)
        } else {
            kinds[0]
        };
        let kind = if kinds.contains(&found) {
            found
        } else {
            kinds[0]
        };
        let sections = validate(b, kind)
            .map_err(|e| Error::new(e.status, format!("{}: {}", path.display(), e.message)))?;
        Ok((Container { map, sections }, kind))
    }

    /// The bytes of section `name`; `BadFileFormat` if it is absent.
    pub fn section(&self, name: &str) -> Result<&[u8]> {
        self.optional(name)
            .ok_or_else(|| bad(format!("the file has no {name} section")))
    }

    /// The bytes of section `name`, if present.
    pub fn optional(&self, name: &str) -> Option<&[u8]> {
        let t = tag(name);
        self.sections
            .iter()
            .find(|s| s.tag == t)
            .map(|s| &self.map.bytes()[s.offset..s.offset + s.len])
    }

    /// Tags in file order.
    pub fn tags(&self) -> Vec<String> {
        self.sections.iter().map(|s| tag_name(&s.tag)).collect()
    }
}

/// Every structural check of the format on the whole file image.
pub fn validate(b: &[u8], kind: u32) -> Result<Vec<SectionInfo>> {
    if b.len() < HEADER {
        return Err(bad(format!(
            "{} bytes is too short for an lshk file",
            b.len()
        )));
    }
    if b[..8] != MAGIC {
        return Err(bad("not an lshk file (wrong magic bytes)"));
    }
    let version = u32_at(b, 8);
    if version > VERSION {
        return Err(bad(format!(
            "file format version {version} is newer than this library's ({VERSION}): upgrade lshk"
        )));
    }
    if version != VERSION {
        return Err(bad(format!("unknown file format version {version}")));
    }
    let k = u32_at(b, 12);
    if k != kind {
        return Err(bad(format!("file kind {k}, expected {kind}")));
    }
    let file_len = u64_at(b, 16);
    if file_len != b.len() as u64 {
        return Err(bad(format!(
            "the header says {file_len} bytes but the file has {} (truncated or appended to)",
            b.len()
        )));
    }
    let count = u32_at(b, 24);
    if count > MAX_SECTIONS {
        return Err(bad(format!(
            "{count} sections is more than the {MAX_SECTIONS} allowed"
        )));
    }
    if b[32..HEADER].iter().any(|&v| v != 0) {
        return Err(bad("reserved header bytes are not zero"));
    }
    let table_end = HEADER + ENTRY * count as usize;
    if table_end > b.len() {
        return Err(bad("the section table runs past the end of the file"));
    }
    let hcrc = crc32c(crc32c(0, &b[..28]), &b[HEADER..table_end]);
    if hcrc != u32_at(b, 28) {
        return Err(bad(
            "header checksum mismatch (the header or section table is corrupt)",
        ));
    }
    let mut out: Vec<SectionInfo> = Vec::with_capacity(count as usize);
    let mut prev_end = table_end as u64;
    for i in 0..count as usize {
        let e = &b[HEADER + ENTRY * i..HEADER + ENTRY * (i + 1)];
        let t: [u8; 8] = e[..8].try_into().unwrap();
        let name = tag_name(&t);
        let off = u64_at(e, 8);
        let len = u64_at(e, 16);
        let crc = u32_at(e, 24);
        if u32_at(e, 28) != 0 {
            return Err(bad(format!("section {name}: reserved field is not zero")));
        }
        if !off.is_multiple_of(ALIGN) {
            return Err(bad(format!(
                "section {name}: offset {off} is not 64-byte aligned"
            )));
        }
        let end = off
            .checked_add(len)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                bad(format!(
                    "section {name}: bytes {off}..+{len} lie outside the file"
                ))
            })?;
        if off < prev_end {
            return Err(bad(format!(
                "section {name} overlaps the previous section or the table"
            )));
        }
        if out.iter().any(|s| s.tag == t) {
            return Err(bad(format!("duplicate section {name}")));
        }
        let data = &b[off as usize..end as usize];
        if crc32c(0, data) != crc {
            return Err(bad(format!(
                "section {name}: checksum mismatch (corrupt data)"
            )));
        }
        out.push(SectionInfo {
            tag: t,
            offset: off as usize,
            len: len as usize,
        });
        prev_end = end;
    }
    Ok(out)
}

/// Reads a little-endian encoded section as a typed slice in place.
/// Sections start 64-byte aligned in a page-aligned mapping, so the cast
/// is aligned; the length must be a whole number of elements.
#[cfg(target_endian = "little")]
pub fn cast_slice<'a, T: Pod>(bytes: &'a [u8], what: &str) -> Result<&'a [T]> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(bad(format!(
            "{what}: {} bytes is not a whole number of {size}-byte values",
            bytes.len()
        )));
    }
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(bad(format!("{what}: misaligned section")));
    }
    // SAFETY: T is plain old data (any bit pattern valid), alignment and
    // length checked above, the bytes outlive the returned slice.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

/// Types any bit pattern of which is a valid value.
///
/// # Safety
/// Implementors must be plain old data with no padding.
pub unsafe trait Pod: Copy {}
// SAFETY: primitive integers and floats: every bit pattern is valid.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for i8 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for f32 {}

/// The bytes of a typed slice, for writing (little-endian hosts).
#[cfg(target_endian = "little")]
pub fn as_bytes<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: Pod has no padding; the byte view covers exactly the slice.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "lshk-format-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn sample(path: &Path) -> Vec<u8> {
        let a: Vec<u32> = (0..1000).collect();
        let w: Vec<f32> = (0..777).map(|i| i as f32 * 0.5).collect();
        write_file(
            path,
            KIND_INDEX,
            &[
                SectionOut::new("PARAMS", vec![b"hello"]),
                SectionOut::new("IDS", vec![as_bytes(&a[..500]), as_bytes(&a[500..])]),
                SectionOut::new("EMPTY", vec![]),
                SectionOut::new("WEIGHTS", vec![as_bytes(&w)]),
            ],
        )
        .unwrap();
        fs::read(path).unwrap()
    }

    #[test]
    fn round_trip_in_place() {
        let d = tmpdir();
        let p = d.join("a.lshk");
        sample(&p);
        let c = Container::open(&p, KIND_INDEX).unwrap();
        assert_eq!(c.tags(), ["PARAMS", "IDS", "EMPTY", "WEIGHTS"]);
        assert_eq!(c.section("PARAMS").unwrap(), b"hello");
        let ids: &[u32] = cast_slice(c.section("IDS").unwrap(), "ids").unwrap();
        assert_eq!(ids, (0..1000).collect::<Vec<u32>>());
        let w: &[f32] = cast_slice(c.section("WEIGHTS").unwrap(), "w").unwrap();
        assert_eq!(w[776], 388.0);
        assert!(c.section("EMPTY").unwrap().is_empty());
        assert_eq!(c.section("NOPE").unwrap_err().status, Status::BadFileFormat);
        assert_eq!(
            Container::open(&p, 2).err().unwrap().status,
            Status::BadFileFormat
        );
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn every_truncation_and_every_bit_flip_is_rejected() {
        let d = tmpdir();
        let p = d.join("b.lshk");
        let good = sample(&p);
        let q = d.join("bad.lshk");
        // Truncation at every length (including every section boundary).
        for len in 0..good.len() {
            fs::write(&q, &good[..len]).unwrap();
            let e = Container::open(&q, KIND_INDEX)
                .err()
                .expect("truncated file accepted");
            assert_eq!(e.status, Status::BadFileFormat, "len {len}: {}", e.message);
        }
        // Appended bytes.
        let mut longer = good.clone();
        longer.push(0);
        fs::write(&q, &longer).unwrap();
        assert_eq!(
            Container::open(&q, KIND_INDEX).err().unwrap().status,
            Status::BadFileFormat
        );
        // A flip of any single bit anywhere, except in the zero padding
        // between sections (not covered by a checksum and never read).
        let image = validate(&good, KIND_INDEX).unwrap();
        let covered = |i: usize| {
            i < HEADER + ENTRY * image.len()
                || image.iter().any(|s| i >= s.offset && i < s.offset + s.len)
        };
        let mut flips = 0;
        for i in (0..good.len()).filter(|&i| covered(i)) {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                let e = validate(&b, KIND_INDEX).expect_err("bit flip accepted");
                assert_eq!(e.status, Status::BadFileFormat);
                flips += 1;
            }
        }
        assert!(flips > 8 * 4000);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn messages_name_the_problem() {
        let d = tmpdir();
        let p = d.join("c.lshk");
        let good = sample(&p);
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(validate(&newer, KIND_INDEX)
            .unwrap_err()
            .message
            .contains("newer"));
        let mut foreign = good.clone();
        foreign[0] = b'P';
        assert!(validate(&foreign, KIND_INDEX)
            .unwrap_err()
            .message
            .contains("magic"));
        let mut huge = good.clone();
        huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(validate(&huge, KIND_INDEX)
            .unwrap_err()
            .message
            .contains("truncated"));
        assert!(validate(&good[..good.len() - 1], KIND_INDEX)
            .unwrap_err()
            .message
            .contains("truncated"));
        let last = good.len() - 1;
        let mut data = good.clone();
        data[last] ^= 1;
        assert!(validate(&data, KIND_INDEX)
            .unwrap_err()
            .message
            .contains("WEIGHTS"));
        assert_eq!(
            Container::open(&d.join("missing"), KIND_INDEX)
                .err()
                .unwrap()
                .status,
            Status::IoError
        );
        assert_eq!(
            Container::open(&d, KIND_INDEX).err().unwrap().status,
            Status::IoError
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn write_failure_leaves_no_file() {
        let e = write_file(Path::new("/nonexistent-dir/x.lshk"), KIND_INDEX, &[]).unwrap_err();
        assert_eq!(e.status, Status::IoError);
    }
}
