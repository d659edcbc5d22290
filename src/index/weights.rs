//! The weight store of an index: owned, mapped or borrowed, each array a
//! [`Buf`] (no raw pointers here: `Send`/`Sync` come from `Buf`).

use super::*;
use crate::buf::{Buf, KeepAlive};

/// The weight arrays by element type.
pub(super) enum WBuf {
    /// f32 (BorrowedF32 or F32 storage).
    F32(Buf<f32>),
    /// bf16 or binary16 bits.
    U16(Buf<u16>),
    /// int8 with one f32 scale per row.
    I8 { w: Buf<i8>, scales: Buf<f32> },
}

/// The weights: their storage, arrays and row stride (elements).
pub(super) struct WStore {
    pub(super) storage: Storage,
    pub(super) buf: WBuf,
    pub(super) stride: usize,
}

impl WStore {
    pub(super) fn from_vec_f32(v: Vec<f32>, stride: usize) -> Self {
        WStore {
            storage: Storage::F32,
            buf: WBuf::F32(v.into()),
            stride,
        }
    }
    pub(super) fn from_vec_u16(v: Vec<u16>, storage: Storage, stride: usize) -> Self {
        WStore {
            storage,
            buf: WBuf::U16(v.into()),
            stride,
        }
    }
    pub(super) fn from_vec_i8(v: Vec<i8>, s: Vec<f32>, stride: usize) -> Self {
        WStore {
            storage: Storage::I8,
            buf: WBuf::I8 {
                w: v.into(),
                scales: s.into(),
            },
            stride,
        }
    }

    /// The caller's f32 W (BorrowedF32 storage).
    ///
    /// # Safety
    /// `w` stays alive and unchanged while the store lives, except for rows
    /// changed while no call uses the index (the contract of borrowed
    /// weights, documented at LSHK_STORAGE_BORROWED_F32).
    pub(super) unsafe fn borrowed_f32(w: &[f32], stride: usize) -> Self {
        WStore {
            storage: Storage::BorrowedF32,
            // SAFETY: forwarded caller contract.
            buf: WBuf::F32(unsafe { Buf::borrowed(w) }),
            stride,
        }
    }

    /// Weights in a mapped file: `raw` (of `storage`'s element type) and,
    /// for int8, the `scales`, both owned by `keep`.
    ///
    /// # Safety
    /// `raw` and `scales` are owned by `keep` and never written.
    pub(super) unsafe fn mapped(
        storage: Storage,
        raw: &[u8],
        scales: &[f32],
        stride: usize,
        keep: &KeepAlive,
    ) -> Result<Self> {
        // SAFETY (each Buf::mapped): forwarded caller contract; cast_slice
        // returns views of `raw` itself.
        let buf = unsafe {
            match storage {
                Storage::F32 | Storage::BorrowedF32 => {
                    WBuf::F32(Buf::mapped(cast_slice(raw, "WEIGHTS")?, keep))
                }
                Storage::Bf16 | Storage::F16 => {
                    WBuf::U16(Buf::mapped(cast_slice(raw, "WEIGHTS")?, keep))
                }
                Storage::I8 => WBuf::I8 {
                    w: Buf::mapped(cast_slice(raw, "WEIGHTS")?, keep),
                    scales: Buf::mapped(scales, keep),
                },
            }
        };
        Ok(WStore {
            storage,
            buf,
            stride,
        })
    }

    pub(super) fn weights(&self, _rows: usize) -> Weights<'_> {
        match (&self.buf, self.storage) {
            (WBuf::F32(b), _) => Weights::F32(b),
            (WBuf::U16(b), Storage::Bf16) => Weights::Bf16(b),
            (WBuf::U16(b), _) => Weights::F16(b),
            (WBuf::I8 { w, scales }, _) => Weights::I8 { w, scales },
        }
    }

    /// The largest |value| the stored rows stand for (int8: `127 * scale`;
    /// borrowed: the caller's W as it is now).
    pub(super) fn value_max(&self, rows: usize, dim: usize) -> f32 {
        use crate::error::max_abs_rows;
        let (st, n) = (self.stride, rows);
        match (&self.buf, self.storage) {
            (WBuf::F32(b), _) => max_abs_rows(b, n, dim, st),
            (WBuf::U16(b), s) => {
                let dec: fn(u16) -> f32 = if s == Storage::Bf16 {
                    crate::kernels::matmul::bf16_to_f32
                } else {
                    crate::kernels::matmul::f16_to_f32
                };
                (0..n).fold(0.0f32, |m, r| {
                    b[r * st..r * st + dim]
                        .iter()
                        .fold(m, |m, &h| m.max(dec(h).abs()))
                })
            }
            (WBuf::I8 { scales, .. }, _) => {
                127.0 * max_abs_rows(scales, 1, scales.len(), scales.len())
            }
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match &self.buf {
            WBuf::F32(b) => format::as_bytes(b),
            WBuf::U16(b) => format::as_bytes(b),
            WBuf::I8 { w, .. } => format::as_bytes(w),
        }
    }

    /// The int8 scales (empty for other storages).
    pub(super) fn scales(&self) -> &[f32] {
        match &self.buf {
            WBuf::I8 { scales, .. } => scales,
            _ => &[],
        }
    }

    /// Bytes the index holds for its weights (owned or mapped; the
    /// caller's borrowed W is not counted).
    pub(super) fn owned_bytes(&self, _rows: usize) -> usize {
        match &self.buf {
            WBuf::F32(b) => b.held_bytes(),
            WBuf::U16(b) => b.held_bytes(),
            WBuf::I8 { w, scales } => w.held_bytes() + scales.held_bytes(),
        }
    }

    /// True for weights viewed in a mapped file.
    pub(super) fn is_mapped(&self) -> bool {
        match &self.buf {
            WBuf::F32(b) => b.is_mapped(),
            WBuf::U16(b) => b.is_mapped(),
            WBuf::I8 { w, .. } => w.is_mapped(),
        }
    }
}
