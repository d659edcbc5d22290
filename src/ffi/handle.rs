//! Opaque handles with a magic tag.
//!
//! A C handle (`lshk_simhash *`, ...) points to a [`Slot`]: a magic word that
//! names the handle's type and a pointer to the boxed Rust object. Slots are
//! never returned to the allocator: a freed slot gets the magic `FREED` and
//! goes to a free list, so a call with a freed handle reads valid memory,
//! sees the wrong magic and fails with `LSHK_STATUS_INVALID_HANDLE` instead
//! of touching freed memory (memory checkers stay quiet too). Detection is
//! best effort: once a slot is reused by a newer handle of the same type, a
//! stale pointer to it is indistinguishable from the new handle.
//!
//! Freeing a handle while another thread uses it is the caller's error.
//!
//! # Borrowed handles
//! An object that owns sub-objects (an `lshk_index` owns its hash family
//! and tables) can hand out *borrowed* handles to them
//! ([`handle_new_borrowed`]): a slot with the sub-object's usual magic, so
//! every read-only entry point (`lshk_simhash_hash`, `lshk_tables_gather`,
//! ...) accepts it, but flagged `borrowed`: [`handle_free`] and
//! [`handle_mut`] refuse it with `INVALID_ARGUMENT` (no double free, no
//! mutation of an object other threads query), and the owner retires the
//! slot with [`handle_retire_borrowed`] before the sub-object is dropped, so
//! a borrowed handle used after its owner was freed is reported as a freed
//! handle.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result, Status};

const FREED: u64 = 0x4445_4144_4c53_484b; // "KHSLDAED"

/// A kind of object that C code holds through a handle.
pub(crate) trait HandleKind: Send + Sync + 'static {
    /// Unique per type, never `FREED` or 0.
    const MAGIC: u64;
    /// The C type name, for messages.
    const NAME: &'static str;
}

#[repr(C)]
pub(crate) struct Slot {
    magic: AtomicU64,
    obj: AtomicPtr<u8>,
    /// The object is owned elsewhere (see "Borrowed handles").
    borrowed: AtomicBool,
}

static FREE_SLOTS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Boxes `obj` and returns its handle.
pub(crate) fn handle_new<T: HandleKind>(obj: T) -> *mut Slot {
    let obj = Box::into_raw(Box::new(obj)).cast::<u8>();
    new_slot::<T>(obj, false)
}

/// A borrowed handle to `obj`, which stays owned by someone else: read-only
/// calls accept it, [`handle_free`] and [`handle_mut`] refuse it. The owner
/// must call [`handle_retire_borrowed`] before `obj` moves or is dropped.
pub(crate) fn handle_new_borrowed<T: HandleKind>(obj: *const T) -> *mut Slot {
    new_slot::<T>(obj.cast_mut().cast::<u8>(), true)
}

/// Retires a borrowed handle (the object itself is not touched): later uses
/// of the handle see a freed slot.
///
/// # Safety
/// `p` came from [`handle_new_borrowed`] and is retired exactly once.
pub(crate) unsafe fn handle_retire_borrowed(p: *mut Slot) {
    // SAFETY: slots are never deallocated; `p` is a live borrowed slot.
    let s = unsafe { &*p };
    debug_assert!(s.borrowed.load(Ordering::Acquire));
    s.magic.store(FREED, Ordering::Release);
    s.obj.store(std::ptr::null_mut(), Ordering::Release);
    s.borrowed.store(false, Ordering::Release);
    FREE_SLOTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(p as usize);
}

fn new_slot<T: HandleKind>(obj: *mut u8, borrowed: bool) -> *mut Slot {
    let reused = FREE_SLOTS.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let slot = match reused {
        Some(addr) => addr as *mut Slot,
        None => Box::into_raw(Box::new(Slot {
            magic: AtomicU64::new(0),
            obj: AtomicPtr::new(std::ptr::null_mut()),
            borrowed: AtomicBool::new(false),
        })),
    };
    // SAFETY: `slot` is a live Slot: either fresh from Box::into_raw or taken
    // from the free list (slots are never deallocated).
    let s = unsafe { &*slot };
    s.obj.store(obj, Ordering::Release);
    s.borrowed.store(borrowed, Ordering::Release);
    s.magic.store(T::MAGIC, Ordering::Release);
    slot
}

fn check<T: HandleKind>(p: *const Slot, name: &str) -> Result<*mut T> {
    if p.is_null() {
        return Err(Error::new(
            Status::NullPointer,
            format!("`{name}` ({} *) is NULL", T::NAME),
        ));
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<Slot>()) {
        return Err(Error::new(
            Status::InvalidHandle,
            format!("`{name}` is not a {} handle (misaligned)", T::NAME),
        ));
    }
    // SAFETY: a non-NULL, aligned pointer the caller claims is a handle we
    // issued; slots are never deallocated, so if it ever was one, it is
    // readable. A foreign pointer is the caller's contract violation; the
    // magic check catches the common cases.
    let s = unsafe { &*p };
    let m = s.magic.load(Ordering::Acquire);
    if m != T::MAGIC {
        let what = if m == FREED {
            "a freed handle"
        } else {
            "not a live handle of this type"
        };
        return Err(Error::new(
            Status::InvalidHandle,
            format!("`{name}` is {what} (expected {} *)", T::NAME),
        ));
    }
    Ok(s.obj.load(Ordering::Acquire).cast::<T>())
}

/// Borrows the object behind a handle after checking its magic.
///
/// # Safety
/// `p` is NULL or a pointer the caller obtained from lshk; the object must
/// not be freed during `'a` (documented caller obligation).
pub(crate) unsafe fn handle_ref<'a, T: HandleKind>(p: *const Slot, name: &str) -> Result<&'a T> {
    let obj = check::<T>(p, name)?;
    // SAFETY: the magic says the slot holds a live Box<T>.
    Ok(unsafe { &*obj })
}

/// Mutable access (for calls documented as needing exclusive access).
///
/// # Safety
/// As [`handle_ref`], and no other thread may use the handle meanwhile.
pub(crate) unsafe fn handle_mut<'a, T: HandleKind>(p: *mut Slot, name: &str) -> Result<&'a mut T> {
    let obj = check::<T>(p, name)?;
    refuse_borrowed::<T>(p, name, "modified")?;
    // SAFETY: live Box<T> (magic); exclusivity is the caller's duty.
    Ok(unsafe { &mut *obj })
}

/// Frees the object behind a handle. NULL is a no-op; a freed or foreign
/// handle is reported (and otherwise ignored).
///
/// # Safety
/// As [`handle_mut`].
pub(crate) unsafe fn handle_free<T: HandleKind>(p: *mut Slot, name: &str) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    let obj = check::<T>(p, name)?;
    refuse_borrowed::<T>(p, name, "freed")?;
    // SAFETY: check() proved `p` is a live slot of type T.
    let s = unsafe { &*p };
    if s.magic
        .compare_exchange(T::MAGIC, FREED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(Error::new(
            Status::InvalidHandle,
            format!("`{name}` was freed concurrently"),
        ));
    }
    s.obj.store(std::ptr::null_mut(), Ordering::Release);
    // SAFETY: obj came from Box::into_raw in handle_new and the CAS above
    // guarantees it is released exactly once.
    drop(unsafe { Box::from_raw(obj) });
    FREE_SLOTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(p as usize);
    Ok(())
}

/// `InvalidArgument` for a borrowed handle (checked after [`check`]).
fn refuse_borrowed<T: HandleKind>(p: *const Slot, name: &str, what: &str) -> Result<()> {
    // SAFETY: check() already proved `p` is a live slot.
    let s = unsafe { &*p };
    if s.borrowed.load(Ordering::Acquire) {
        return Err(Error::new(
            Status::InvalidArgument,
            format!(
                "`{name}` is a {} borrowed from an lshk_index and cannot be {what} \
                 (free the index instead)",
                T::NAME
            ),
        ));
    }
    Ok(())
}

/// Casts a typed opaque C handle pointer to its slot.
#[inline]
pub(crate) fn slot<H>(p: *const H) -> *const Slot {
    p.cast()
}

/// Mutable variant of [`slot`].
#[inline]
pub(crate) fn slot_mut<H>(p: *mut H) -> *mut Slot {
    p.cast()
}
