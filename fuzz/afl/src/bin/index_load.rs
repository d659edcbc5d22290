//! AFL++ target: `lshk_index_load` on a mutated index file.
//!
//! Input: one mode byte, then the file. Mode bit 0 set: the harness
//! recomputes every section CRC and the header CRC first (so mutations
//! reach the index parser instead of dying at the checksums); clear: the
//! bytes are loaded as they are. A loaded index is queried (8 queries,
//! k = 5) and freed. A panic stopped at the C boundary (LSHK_STATUS_PANIC)
//! or a returned id out of range aborts, which AFL++ records as a crash.

use std::ffi::CString;
use std::ptr::{null, null_mut};

use lshk::crc32c::crc32c;
use lshk::ffi::index::*;
use lshk::ffi::{LSHK_STATUS_OK, LSHK_STATUS_PANIC};

const HEADER: usize = 64;
const ENTRY: usize = 32;

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn fix_crcs(b: &mut [u8]) {
    if b.len() < HEADER {
        return;
    }
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    let n = n.min((b.len() - HEADER) / ENTRY);
    for i in 0..n {
        let e = HEADER + ENTRY * i;
        let (off, len) = (u64_at(b, e + 8), u64_at(b, e + 16));
        if let Some(end) = off.checked_add(len) {
            if end <= b.len() as u64 {
                let c = crc32c(0, &b[off as usize..end as usize]);
                b[e + 24..e + 28].copy_from_slice(&c.to_le_bytes());
            }
        }
    }
    let h = crc32c(crc32c(0, &b[..28]), &b[HEADER..HEADER + ENTRY * n]);
    b[28..32].copy_from_slice(&h.to_le_bytes());
}

fn die(why: &str) -> ! {
    eprintln!("lshk-afl index_load: {why}");
    std::process::abort();
}

fn main() {
    let path = std::env::temp_dir().join(format!("lshk-afl-load-{}.lshk", std::process::id()));
    let cpath = CString::new(path.to_str().unwrap()).unwrap();
    let q: Vec<f32> = (0..8 * 64)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 8.0)
        .collect();
    afl::fuzz!(|data: &[u8]| {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        let mut b = rest.to_vec();
        if mode & 1 == 1 {
            fix_crcs(&mut b);
        }
        std::fs::write(&path, &b).unwrap();
        let mut h = null_mut();
        // SAFETY: NUL-terminated path, no borrowed W, writable out.
        let st = unsafe { lshk_index_load(cpath.as_ptr(), null(), &mut h) };
        if st == LSHK_STATUS_PANIC {
            die("lshk_index_load: LSHK_STATUS_PANIC");
        }
        if st != LSHK_STATUS_OK {
            return;
        }
        let (mut rows, mut dim) = (0usize, 0usize);
        // SAFETY: live handle, writable outputs.
        unsafe { lshk_index_shape(h, &mut rows, &mut dim, null_mut(), null_mut()) };
        if dim <= 64 {
            let mut ids = [0u32; 40];
            let mut sc = [0f32; 40];
            // SAFETY: 8 queries of dim floats at stride 64; outputs of 8 * 5.
            let s = unsafe {
                lshk_index_query(
                    h,
                    q.as_ptr(),
                    8,
                    64,
                    5,
                    null(),
                    ids.as_mut_ptr(),
                    sc.as_mut_ptr(),
                    null_mut(),
                )
            };
            if s == LSHK_STATUS_PANIC {
                die("lshk_index_query: LSHK_STATUS_PANIC");
            }
            if s == LSHK_STATUS_OK && ids.iter().any(|&i| i != u32::MAX && i as usize >= rows) {
                die("lshk_index_query: an id out of range");
            }
        }
        // SAFETY: live handle, freed once.
        unsafe { lshk_index_free(h) };
    });
}
