//! One buffer type for the large read-mostly arrays of an index (weights,
//! int8 scales, table offsets and ids): owned, a view into a mapped file,
//! or the caller's memory.
//!
//! `Buf<T>` reads as a `&[T]` in all three cases. Its `Send`/`Sync` impls
//! are the only ones the index needs: `Index`, `Tables`, the weight store
//! and `ivf::Ivf` derive theirs from it instead of asserting them by hand.

use std::any::Any;
use std::sync::Arc;

/// What keeps viewed memory alive: e.g. the mapping of an index file
/// ([`crate::index::Index::load`] opens weights and tables without copying
/// them).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// An array that is owned, mapped or borrowed. Reads see a slice either
/// way; changing a view copies it first ([`Buf::to_mut`]).
pub(crate) enum Buf<T> {
    /// Memory the buffer owns.
    Owned(Vec<T>),
    /// A read-only view of memory that `_keep` owns (a mapped file).
    Mapped {
        ptr: *const T,
        len: usize,
        _keep: KeepAlive,
    },
    /// A read-only view of the caller's memory (the C API's borrowed
    /// weights): alive and unchanged while the buffer lives, by the
    /// caller's documented promise.
    Borrowed { ptr: *const T, len: usize },
}

// SAFETY: an Owned buffer is a Vec<T> (Send when T is). The two views hold
// a pointer to memory that nobody writes while the buffer lives (Mapped:
// owned by `_keep`, itself Send + Sync, and never written through;
// Borrowed: the caller's promise, documented at every entry point taking
// borrowed memory) and that is not tied to a thread, so moving the view
// to another thread only moves shared read access to T's: sound when T is
// Sync.
unsafe impl<T: Send + Sync> Send for Buf<T> {}
// SAFETY: `&Buf<T>` gives only `&[T]` (no interior mutability; changes take
// `&mut self`), so sharing it is sound when T is Sync; the views' memory is
// read-only as above.
unsafe impl<T: Sync> Sync for Buf<T> {}

impl<T> Buf<T> {
    /// A view of `s`, which `keep` keeps alive.
    ///
    /// # Safety
    /// `s` is owned (directly or not) by `keep` and never written while
    /// `keep` lives.
    pub(crate) unsafe fn mapped(s: &[T], keep: &KeepAlive) -> Buf<T> {
        Buf::Mapped {
            ptr: s.as_ptr(),
            len: s.len(),
            _keep: Arc::clone(keep),
        }
    }

    /// A view of the caller's `s`.
    ///
    /// # Safety
    /// `s` stays valid and unchanged (except where the owner of the buffer
    /// documents otherwise, e.g. rows passed to `update_rows` while no call
    /// uses the index) for as long as the buffer lives, on any thread.
    pub(crate) unsafe fn borrowed(s: &[T]) -> Buf<T> {
        Buf::Borrowed {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The owned Vec, `None` for a view.
    pub(crate) fn owned_mut(&mut self) -> Option<&mut Vec<T>> {
        match self {
            Buf::Owned(v) => Some(v),
            _ => None,
        }
    }

    /// Bytes the buffer holds: an owned array's capacity, a mapped one's
    /// length (the mapped pages it occupies), 0 for the caller's memory.
    pub(crate) fn held_bytes(&self) -> usize {
        std::mem::size_of::<T>()
            * match self {
                Buf::Owned(v) => v.capacity(),
                Buf::Mapped { len, .. } => *len,
                Buf::Borrowed { .. } => 0,
            }
    }

    /// True for a view (mapped or borrowed).
    pub(crate) fn is_view(&self) -> bool {
        !matches!(self, Buf::Owned(_))
    }

    /// True for a view into a mapped file.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Buf::Mapped { .. })
    }
}

impl<T: Clone> Buf<T> {
    /// The array as a Vec to change, copying a view first.
    pub(crate) fn to_mut(&mut self) -> &mut Vec<T> {
        if self.is_view() {
            *self = Buf::Owned(self.to_vec());
        }
        match self {
            Buf::Owned(v) => v,
            _ => unreachable!("converted above"),
        }
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf::Owned(Vec::new())
    }
}

impl<T: Clone> Clone for Buf<T> {
    fn clone(&self) -> Self {
        match self {
            Buf::Owned(v) => Buf::Owned(v.clone()),
            Buf::Mapped { ptr, len, _keep } => Buf::Mapped {
                ptr: *ptr,
                len: *len,
                _keep: Arc::clone(_keep),
            },
            Buf::Borrowed { ptr, len } => Buf::Borrowed {
                ptr: *ptr,
                len: *len,
            },
        }
    }
}

impl<T> std::ops::Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Buf::Owned(v) => v,
            // SAFETY: ptr/len were taken from a slice (non-NULL, aligned,
            // `len` initialised T's) whose memory outlives the buffer and is
            // not written while it lives: the contracts of Buf::mapped (kept
            // alive by `_keep`) and Buf::borrowed (the caller's promise).
            Buf::Mapped { ptr, len, .. } | Buf::Borrowed { ptr, len } => unsafe {
                std::slice::from_raw_parts(*ptr, *len)
            },
        }
    }
}

impl<T> std::fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Buf::Owned(_) => "owned",
            Buf::Mapped { .. } => "mapped",
            Buf::Borrowed { .. } => "borrowed",
        };
        write!(f, "Buf({kind}, {} values)", self.len())
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Buf::Owned(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_read_as_slices_and_copy_on_write() {
        let keep: KeepAlive = Arc::new(vec![1u32, 2, 3]);
        let src: &Vec<u32> = keep.downcast_ref().unwrap();
        // SAFETY: `src` is owned by `keep` and never written.
        let mut m = unsafe { Buf::mapped(&src[..], &keep) };
        assert_eq!(&*m, &[1, 2, 3]);
        assert!(m.is_mapped() && m.is_view() && m.owned_mut().is_none());
        assert_eq!(m.held_bytes(), 12);
        m.to_mut()[0] = 9;
        assert_eq!((&*m, &src[..]), (&[9u32, 2, 3][..], &[1u32, 2, 3][..]));
        let caller = [4.0f32, 5.0];
        // SAFETY: `caller` outlives `b` and is not written.
        let b = unsafe { Buf::borrowed(&caller[..]) };
        assert_eq!(
            (&*b, b.held_bytes(), b.is_mapped()),
            (&caller[..], 0, false)
        );
        let o: Buf<i8> = vec![1, 2].into();
        assert_eq!((&*o, o.is_view()), (&[1i8, 2][..], false));
    }

    #[test]
    fn send_sync_follow_from_the_buffer() {
        fn both<T: Send + Sync>() {}
        both::<Buf<u32>>();
        both::<crate::index::Index>();
        both::<crate::source::lsh::tables::Tables>();
    }
}
