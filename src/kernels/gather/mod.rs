//! Gather kernels: mark a bucket's ids in a bitmap over the rows (plus a
//! summary bitmap with one bit per bitmap word), optionally counting table
//! hits per row, then extract the marked ids in ascending order while
//! clearing the scratch.
//!
//! Layout shared by every tier: row `id` is bit `id % 64` of `bits[id / 64]`;
//! word `w` of `bits` is bit `w % 64` of `summary[w / 64]`. Extraction walks
//! the set bits of `summary` (ascending), then of each such word (ascending),
//! so its output is sorted without a sort, and it costs
//! `O(n / 4096 + marked ids)`. In counting mode `cnt[id]` holds the number of
//! table hits, with bit 31 ([`crate::source::lsh::tables`]'s forced flag) set for forced
//! ids; an id is kept when `cnt[id] >= min` as unsigned (so forced ids always
//! pass since `min <= 2^31`) and its reported count is `cnt & 0x7fffffff`.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
pub mod portable;
pub mod scalar;

/// `mark(bits, summary, ids) -> new`: marks `ids`, returns how many were
/// not marked before.
///
/// # Safety
/// Every id is `< 64 * bits.len()` and `(id / 64) / 64 < summary.len()`;
/// the ids are distinct (one bucket).
pub type MarkFn = unsafe fn(&mut [u64], &mut [u64], &[u32]) -> usize;
/// `mark_count(bits, summary, cnt, ids) -> new`: as [`MarkFn`], and
/// `cnt[id] += 1` for each id.
///
/// # Safety
/// As [`MarkFn`], and every id `< cnt.len()`.
pub type MarkCountFn = unsafe fn(&mut [u64], &mut [u64], &mut [u32], &[u32]) -> usize;
/// `extract(bits, summary, out)`: appends the marked ids ascending and
/// clears `bits` and `summary`.
///
/// # Safety
/// Every set summary bit names a word inside `bits`.
pub type ExtractFn = unsafe fn(&mut [u64], &mut [u64], &mut Vec<u32>);
/// `extract_count(bits, summary, cnt, min, out_ids, out_counts)`: appends the
/// marked ids with `cnt[id] >= min` (unsigned) ascending, and their
/// `cnt & 0x7fffffff` to `out_counts` if given; clears bits, summary and the
/// counters of every marked id.
///
/// # Safety
/// As [`ExtractFn`], every marked id `< cnt.len()`, and `min >= 1`.
pub type ExtractCountFn =
    unsafe fn(&mut [u64], &mut [u64], &mut [u32], u32, &mut Vec<u32>, Option<&mut Vec<u32>>);

pub struct Kernels {
    pub mark: MarkFn,
    pub mark_count: MarkCountFn,
    pub extract: ExtractFn,
    pub extract_count: ExtractCountFn,
}

crate::kernels::tier_table! {
    /// The kernel table of a tier. The caller has checked that the CPU supports
    /// `tier`.
    Kernels {
        mark: mark,
        mark_count: mark_count,
        extract: extract,
        extract_count: extract_count,
    }
}

/// Marks bit `m` of word `w` (and the word's summary bit); returns 1 if
/// it was not marked before (the read-modify-write of the SIMD tiers'
/// `mark`: AVX2 has no scatter, and distinct ids can share a word).
///
/// # Safety
/// `bp` points at `bits`, `sp` at `summary`, and `w` is within them as in
/// [`MarkFn`].
#[inline(always)]
pub(crate) unsafe fn mark_one(bp: *mut u64, sp: *mut u64, w: usize, m: u64) -> usize {
    // SAFETY: w < bits.len(), w / 64 < summary.len() (caller).
    unsafe {
        let old = *bp.add(w);
        let new = (old & m == 0) as usize;
        *bp.add(w) = old | m;
        *sp.add(w >> 6) |= 1u64 << (w & 63);
        new
    }
}

/// The first step of the SIMD tiers' word decoders: the word's popcount,
/// and its four lowest set bits (row base `base`) written at `dst` by four
/// branch-free `tzcnt`/`blsr` steps (slots past the popcount get junk,
/// `base + 64`, that the caller overwrites or never exposes). Sparse words
/// (at most 4 bits: the common case) are then done; a loop over the set
/// bits mispredicts its exit on about every other word at W1's density
/// (popcounts 1, 2, 3 in random order) and measured slower end to end.
///
/// # Safety
/// `dst` has room for 4 u32; inlined into a tier with popcnt and bmi1.
#[inline(always)]
pub(crate) unsafe fn decode_sparse4(x: u64, base: u32, dst: *mut u32) -> usize {
    let pc = x.count_ones() as usize;
    let mut y = x;
    for k in 0..4 {
        // SAFETY: k < 4, within the caller's room.
        unsafe { *dst.add(k) = base + y.trailing_zeros() };
        y &= y.wrapping_sub(1);
    }
    pc
}

/// `POS8[b]`: the positions of the set bits of byte `b`, ascending, padded
/// with zeros (used by the byte-at-a-time decoders).
pub static POS8: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        let mut j = 0;
        while j < 8 {
            if b & (1 << j) != 0 {
                t[b][k] = j as u8;
                k += 1;
            }
            j += 1;
        }
        b += 1;
    }
    t
};

/// `COMPRESS8[m]`: lane indices of the set bits of the 8-bit mask `m`,
/// ascending, padded with 0 (a `vpermd` table that packs kept lanes left).
pub static COMPRESS8: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let mut k = 0;
        let mut j = 0;
        while j < 8 {
            if m & (1 << j) != 0 {
                t[m][k] = j as u32;
                k += 1;
            }
            j += 1;
        }
        m += 1;
    }
    t
};
