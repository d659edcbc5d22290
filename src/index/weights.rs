//! The weight store of an index: owned, mapped or borrowed (split out of
//! index/mod.rs, code unchanged).

use super::*;

/// Who keeps the weight memory alive.
pub(super) enum Owner {
    /// The caller (BorrowedF32).
    Caller,
    F32(#[allow(dead_code)] Vec<f32>),
    U16(#[allow(dead_code)] Vec<u16>),
    I8(#[allow(dead_code)] Vec<i8>, #[allow(dead_code)] Vec<f32>),
    /// The mapped file.
    Mapped(#[allow(dead_code)] Arc<Container>),
}

/// The weights: raw views valid as long as `owner` (or, for borrowed
/// weights, the caller's promise).
pub(super) struct WStore {
    pub(super) storage: Storage,
    pub(super) ptr: *const u8,
    /// Elements (not bytes).
    pub(super) len: usize,
    pub(super) scales: *const f32,
    pub(super) stride: usize,
    pub(super) owner: Owner,
}

impl WStore {
    pub(super) fn from_vec_f32(v: Vec<f32>, stride: usize) -> Self {
        WStore {
            storage: Storage::F32,
            ptr: v.as_ptr().cast(),
            len: v.len(),
            scales: std::ptr::null(),
            stride,
            owner: Owner::F32(v),
        }
    }
    pub(super) fn from_vec_u16(v: Vec<u16>, storage: Storage, stride: usize) -> Self {
        WStore {
            storage,
            ptr: v.as_ptr().cast(),
            len: v.len(),
            scales: std::ptr::null(),
            stride,
            owner: Owner::U16(v),
        }
    }
    pub(super) fn from_vec_i8(v: Vec<i8>, s: Vec<f32>, stride: usize) -> Self {
        WStore {
            storage: Storage::I8,
            ptr: v.as_ptr().cast(),
            len: v.len(),
            scales: s.as_ptr(),
            stride,
            owner: Owner::I8(v, s),
        }
    }
    pub(super) fn weights(&self, rows: usize) -> Weights<'_> {
        // SAFETY: ptr/len (and scales/rows for int8) describe memory kept
        // alive by `owner` (moving a Vec does not move its heap buffer; the
        // mapping is never unmapped while the Arc lives) or, for borrowed
        // weights, by the caller's documented promise; the element type
        // matches `storage`, alignment holds (Vec buffers, 64-byte aligned
        // sections, caller pointers checked at the boundary).
        unsafe {
            match self.storage {
                Storage::BorrowedF32 | Storage::F32 => {
                    Weights::F32(std::slice::from_raw_parts(self.ptr.cast::<f32>(), self.len))
                }
                Storage::Bf16 => {
                    Weights::Bf16(std::slice::from_raw_parts(self.ptr.cast::<u16>(), self.len))
                }
                Storage::F16 => {
                    Weights::F16(std::slice::from_raw_parts(self.ptr.cast::<u16>(), self.len))
                }
                Storage::I8 => Weights::I8 {
                    w: std::slice::from_raw_parts(self.ptr.cast::<i8>(), self.len),
                    scales: std::slice::from_raw_parts(self.scales, rows),
                },
            }
        }
    }
    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: as in weights(): `len` elements of `elem_bytes` each.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len * self.storage.elem_bytes()) }
    }
    pub(super) fn owned_bytes(&self, rows: usize) -> usize {
        match &self.owner {
            Owner::Caller => 0,
            Owner::I8(..) => self.len + rows * 4,
            _ => {
                self.len * self.storage.elem_bytes()
                    + if self.scales.is_null() { 0 } else { rows * 4 }
            }
        }
    }
}
