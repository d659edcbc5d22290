//! Packed PQ4 rows ([`Pq4Rows`]): 64-byte aligned blocks of nibbles.

use crate::bail;
use crate::error::Result;
use crate::isa::Isa;

use super::*;

/// One cache line of packed codes: the unit of [`Pq4Rows`]' aligned buffer.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

impl Default for Line {
    fn default() -> Self {
        Line([0; 64])
    }
}

fn lines_as_bytes(l: &[Line]) -> &[u8] {
    // SAFETY: Line is repr(C) over [u8; 64] with size 64 and no padding, so
    // a slice of lines is `64 * len` initialised, contiguous bytes.
    unsafe { std::slice::from_raw_parts(l.as_ptr().cast::<u8>(), l.len() * 64) }
}

fn lines_as_bytes_mut(l: &mut [Line]) -> &mut [u8] {
    // SAFETY: as lines_as_bytes; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(l.as_mut_ptr().cast::<u8>(), l.len() * 64) }
}

/// Rows encoded as `M` 4-bit codes each, packed in the fast-scan layout in
/// one 64-byte-aligned buffer (whole blocks of 32 rows; a block starts on a
/// cache line when `m_pad` is a multiple of 4).
#[derive(Clone)]
pub struct Pq4Rows {
    lines: Vec<Line>,
    nrows: usize,
    m: usize,
    m_pad: usize,
}

impl std::fmt::Debug for Pq4Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pq4Rows")
            .field("nrows", &self.nrows)
            .field("m", &self.m)
            .finish_non_exhaustive()
    }
}

impl Pq4Rows {
    /// Packs unpacked codes (`codes[r * m + j]` in `0..=15`, see
    /// [`pack_codes`]).
    pub fn from_codes(codes: &[u8], nrows: usize, m: usize) -> Result<Pq4Rows> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        let m_pad = m_pad_of(m);
        let bytes = run_bytes(m_pad, nrows)?;
        let mut lines: Vec<Line> = try_vec(bytes.div_ceil(64), "codes")?;
        pack_codes(codes, nrows, m, lines_as_bytes_mut(&mut lines))?;
        Ok(Pq4Rows {
            lines,
            nrows,
            m,
            m_pad,
        })
    }

    /// Takes already packed codes (as [`Self::packed`] returns them, e.g.
    /// read back from a file): `packed` must hold exactly
    /// [`run_bytes`]`(m_pad_of(m), nrows)` bytes. Every byte value is a
    /// valid pair of codes, so nothing else is checked.
    pub fn from_packed(packed: &[u8], nrows: usize, m: usize) -> Result<Pq4Rows> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        let m_pad = m_pad_of(m);
        let bytes = run_bytes(m_pad, nrows)?;
        if packed.len() != bytes {
            bail!(
                InvalidArgument,
                "{} packed bytes; {nrows} rows of {m} codes take {bytes}",
                packed.len()
            );
        }
        let mut lines: Vec<Line> = try_vec(bytes.div_ceil(64), "codes")?;
        lines_as_bytes_mut(&mut lines)[..bytes].copy_from_slice(packed);
        Ok(Pq4Rows {
            lines,
            nrows,
            m,
            m_pad,
        })
    }

    pub fn rows(&self) -> usize {
        self.nrows
    }
    /// Sub-quantisers per row.
    pub fn m(&self) -> usize {
        self.m
    }
    /// `m` rounded up to even: what the kernels run.
    pub fn m_pad(&self) -> usize {
        self.m_pad
    }
    /// The packed codes: `ceil(rows / 32)` blocks of `16 * m_pad` bytes
    /// (the buffer may hold up to 63 bytes more, zero).
    pub fn packed(&self) -> &[u8] {
        lines_as_bytes(&self.lines)
    }
    /// The code of row `r` for sub-quantiser `j < m` (panics out of range).
    pub fn code(&self, r: usize, j: usize) -> u8 {
        assert!(r < self.nrows && j < self.m, "code({r}, {j}) out of range");
        nibble_at(self.packed(), self.m_pad, r, j)
    }
    /// Row `r`'s `m` codes into `out[..m]`.
    pub fn row_codes(&self, r: usize, out: &mut [u8]) {
        for (j, o) in out[..self.m].iter_mut().enumerate() {
            *o = self.code(r, j);
        }
    }
    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.lines.len() * 64
    }

    fn check_run(&self, first: usize, n: usize, lut: &Pq4Lut, out: usize) -> Result<()> {
        match first.checked_add(n) {
            Some(end) if end <= self.nrows => {}
            _ => bail!(
                IndexOutOfRange,
                "rows {first} .. {first} + {n} are not within the {} rows",
                self.nrows
            ),
        }
        if !first.is_multiple_of(BLOCK) {
            bail!(
                InvalidArgument,
                "a run starts on a block boundary (a multiple of {BLOCK}); first is {first}"
            );
        }
        if lut.m() != self.m {
            bail!(
                InvalidArgument,
                "the table has {} sub-quantisers, the rows {}",
                lut.m(),
                self.m
            );
        }
        check_len(out, n, "out")
    }

    /// The accumulators of rows `first..first + n` (`first` a multiple of
    /// 32): `out[i] = sum_m L[m][code(first + i, m)]`. On the active tier.
    pub fn acc_run(&self, first: usize, n: usize, lut: &Pq4Lut, out: &mut [u32]) -> Result<()> {
        self.acc_run_isa(isa::active(), first, n, lut, out)
    }

    /// [`Self::acc_run`] on one chosen tier.
    pub fn acc_run_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        out: &mut [u32],
    ) -> Result<()> {
        let k = kernels_of(tier)?;
        self.check_run(first, n, lut, out.len())?;
        let codes = &self.packed()[(first / BLOCK) * block_bytes(self.m_pad)..];
        // SAFETY: the run lies within the rows and starts on a block
        // (checked), so codes holds its whole blocks; the table has
        // 16 * m_pad bytes (Pq4Lut's invariant, same m); out holds n; the
        // tier is supported.
        unsafe { (k.acc)(codes, self.m_pad, n, lut.bytes(), out) };
        Ok(())
    }

    /// The approximate scores of rows `first..first + n` (`first` a
    /// multiple of 32): `out[i] = f32(acc) * Delta + O (+ bias[i])`;
    /// `bias`, if any, holds at least `n` values (index 0 is row `first`).
    /// On the active tier.
    pub fn score_run(
        &self,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.score_run_isa(isa::active(), first, n, lut, bias, out)
    }

    /// [`Self::score_run`] on one chosen tier.
    pub fn score_run_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        self.score_run_shifted_isa(tier, first, n, lut, 0.0, bias, out)
    }

    /// [`Self::score_run_isa`] with `shift` added to the table's offset
    /// sum: `out[i] = f32(acc) * Delta + f32(O + shift) (+ bias[i])`, e.g.
    /// the inner product of the query with the centroid the run's rows are
    /// residuals of. `shift = 0` gives [`Self::score_run_isa`]'s bits.
    #[allow(clippy::too_many_arguments)]
    pub fn score_run_shifted_isa(
        &self,
        tier: Isa,
        first: usize,
        n: usize,
        lut: &Pq4Lut,
        shift: f32,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        let k = kernels_of(tier)?;
        self.check_run(first, n, lut, out.len())?;
        if let Some(b) = bias {
            check_len(b.len(), n, "bias")?;
        }
        let epi = Epilogue {
            delta: lut.delta(),
            offset: lut.offset() + shift,
            bias,
        };
        let codes = &self.packed()[(first / BLOCK) * block_bytes(self.m_pad)..];
        // SAFETY: as acc_run_isa; bias holds n values (checked).
        unsafe { (k.score)(codes, self.m_pad, n, lut.bytes(), &epi, out) };
        Ok(())
    }
}
