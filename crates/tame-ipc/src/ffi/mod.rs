//! The C ABI, one module per handle family (as rustls-ffi does): `library` for the
//! calls that take no handle, `ring` (ring, producer, consumer), `register`
//! (register, writer, reader) and `event` (event, listener). This module holds what
//! they share: result codes, the panic boundary, argument checks and handle plumbing.
//!
//! `include/tame_ipc.h` is generated from these files by cbindgen (a test checks that
//! the checked-in header is current). Conventions are in the README: every call
//! returns a `tame_ipc_result`; handles come from `_open`/`_create` functions and are
//! released by the matching `_close` exactly once; no panic crosses the boundary (it
//! becomes `TAME_IPC_ERR_PANIC`).
//!
//! Every function checks what it can (NULL pointers, names, shapes, element sizes);
//! its `# Safety` section states the rest, which only the C caller can guarantee: a
//! handle is NULL or one this library returned and that is not yet closed, an end
//! handle is used by one thread at a time, buffers hold the element size.

#![allow(non_camel_case_types)]

// cbindgen writes the functions in this order: keep it (library, ring, register,
// event) so the header reads as before. Blank lines stop rustfmt from sorting.
mod library;

mod ring;

mod register;

mod event;

pub use event::*;
pub use library::*;
pub use register::*;
pub use ring::*;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Error;
use crate::layout::{HeaderError, LAYOUT_MAJOR, LAYOUT_MINOR};
use crate::segment::{PeerState, Segment, SegmentName};

/// Result of every call: 0 success, > 0 an expected non-error outcome, < 0 an error
/// (details from `tame_ipc_last_error`). Values never change meaning.
pub type tame_ipc_result = i32;

/// Success.
pub const TAME_IPC_OK: tame_ipc_result = 0;
/// Ring full: nothing pushed; retry later.
pub const TAME_IPC_FULL: tame_ipc_result = 1;
/// Ring empty or register never written: nothing read.
pub const TAME_IPC_EMPTY: tame_ipc_result = 2;
/// Register read overlapped writes on every attempt; retry.
pub const TAME_IPC_CONTENDED: tame_ipc_result = 3;
/// A wait ended without an event.
pub const TAME_IPC_TIMEOUT: tame_ipc_result = 4;
/// A NULL pointer, bad name, bad shape (capacity not a power of two, size 0 or too large).
pub const TAME_IPC_ERR_INVALID_ARGUMENT: tame_ipc_result = -1;
/// No segment of that name.
pub const TAME_IPC_ERR_NOT_FOUND: tame_ipc_result = -2;
/// A segment of that name already exists (nothing was changed).
pub const TAME_IPC_ERR_EXISTS: tame_ipc_result = -3;
/// Permission denied.
pub const TAME_IPC_ERR_PERMISSION: tame_ipc_result = -4;
/// The segment has another kind, element size, alignment, capacity or type tag.
pub const TAME_IPC_ERR_LAYOUT_MISMATCH: tame_ipc_result = -5;
/// The segment has an incompatible layout major version.
pub const TAME_IPC_ERR_INCOMPATIBLE_VERSION: tame_ipc_result = -6;
/// Not a tame-ipc segment (wrong magic).
pub const TAME_IPC_ERR_NOT_A_SEGMENT: tame_ipc_result = -7;
/// The creator has not finished initialising the segment; retry.
pub const TAME_IPC_ERR_NOT_READY: tame_ipc_result = -8;
/// The role (producer, consumer, writer) is held by a live process.
pub const TAME_IPC_ERR_ROLE_TAKEN: tame_ipc_result = -9;
/// Shared state is inconsistent (a peer wrote garbage); recreate the segment.
pub const TAME_IPC_ERR_CORRUPTED: tame_ipc_result = -10;
/// A system call failed.
pub const TAME_IPC_ERR_OS: tame_ipc_result = -11;
/// An internal error (a caught panic); the handle should be closed.
pub const TAME_IPC_ERR_PANIC: tame_ipc_result = -12;
/// Refused as unsafe to adopt: a named segment that is no regular file (a FIFO, a
/// symbolic link), owned by another user (not root) or writable by others, or a
/// descriptor not sealed against shrinking.
pub const TAME_IPC_ERR_UNTRUSTED: tame_ipc_result = -13;

/// Layout version this library writes; segments with the same major are compatible.
pub const TAME_IPC_LAYOUT_MAJOR: u32 = 2;
pub const TAME_IPC_LAYOUT_MINOR: u32 = 0;
/// Longest segment name, in bytes, without the `tame.` prefix.
pub const TAME_IPC_MAX_NAME_LEN: u32 = 200;
/// Largest element size, in bytes.
pub const TAME_IPC_MAX_ELEM_SIZE: u32 = 1048576;

// Literals above so cbindgen can write them; kept equal to the library's values.
const _: () = assert!(
    TAME_IPC_LAYOUT_MAJOR == LAYOUT_MAJOR as u32 && TAME_IPC_LAYOUT_MINOR == LAYOUT_MINOR as u32
);
const _: () = assert!(TAME_IPC_MAX_NAME_LEN as usize == crate::segment::MAX_NAME_LEN);
const _: () = assert!(TAME_IPC_MAX_ELEM_SIZE == crate::layout::MAX_ELEM_SIZE);

/// Peer states returned by the `_state` functions.
pub const TAME_IPC_PEER_ABSENT: c_int = 0;
pub const TAME_IPC_PEER_ALIVE: c_int = 1;
pub const TAME_IPC_PEER_DEAD: c_int = 2;
pub const TAME_IPC_PEER_UNKNOWN: c_int = 3;

// ---- errors and the panic boundary -----------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// A failed call: its code and the message `tame_ipc_last_error` will return.
type Failure = (tame_ipc_result, String);
type FfiResult<T> = Result<T, Failure>;

fn error_code(error: &Error) -> tame_ipc_result {
    match error {
        Error::InvalidName { .. } | Error::InvalidSpec(_) | Error::TypeMismatch { .. } => {
            TAME_IPC_ERR_INVALID_ARGUMENT
        }
        Error::NotFound { .. } => TAME_IPC_ERR_NOT_FOUND,
        Error::AlreadyExists { .. } => TAME_IPC_ERR_EXISTS,
        Error::PermissionDenied { .. } | Error::ReadOnly { .. } => TAME_IPC_ERR_PERMISSION,
        Error::Untrusted { .. } => TAME_IPC_ERR_UNTRUSTED,
        Error::LayoutMismatch { .. } => TAME_IPC_ERR_LAYOUT_MISMATCH,
        Error::Header { source, .. } => match source {
            HeaderError::NotReady => TAME_IPC_ERR_NOT_READY,
            HeaderError::BadMagic(_) => TAME_IPC_ERR_NOT_A_SEGMENT,
            HeaderError::IncompatibleVersion { .. } => TAME_IPC_ERR_INCOMPATIBLE_VERSION,
            HeaderError::Corrupted(_) => TAME_IPC_ERR_CORRUPTED,
        },
        Error::RoleTaken { .. } => TAME_IPC_ERR_ROLE_TAKEN,
        Error::Corrupted { .. } => TAME_IPC_ERR_CORRUPTED,
        Error::Os { .. } | Error::Proc(_) => TAME_IPC_ERR_OS,
    }
}

/// Runs `body`, turning errors into codes (with a message) and panics into
/// `TAME_IPC_ERR_PANIC`.
fn guard(body: impl FnOnce() -> FfiResult<tame_ipc_result>) -> tame_ipc_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) => code,
        Ok(Err((code, message))) => {
            set_last_error(message);
            code
        }
        Err(_) => {
            set_last_error("internal error (panic caught at the C boundary)".into());
            TAME_IPC_ERR_PANIC
        }
    }
}

fn fail(error: Error) -> Failure {
    (error_code(&error), error.to_string())
}

fn invalid(message: &str) -> Failure {
    (TAME_IPC_ERR_INVALID_ARGUMENT, message.to_string())
}

/// A peer's published index is impossible (`whose` names the peer).
fn corrupted(whose: &str) -> Failure {
    (
        TAME_IPC_ERR_CORRUPTED,
        format!("the {whose}'s index is impossible"),
    )
}

// ---- arguments -------------------------------------------------------------------

/// Reads and validates a segment name.
///
/// # Safety
/// `name` is NULL or points to a NUL-terminated string that stays unchanged during
/// the call.
unsafe fn name_arg(name: *const c_char) -> FfiResult<SegmentName> {
    if name.is_null() {
        return Err(invalid("name is NULL"));
    }
    // SAFETY: non-NULL (checked above) and NUL-terminated (the caller's contract).
    let name = unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| invalid("name is not valid UTF-8"))?;
    SegmentName::new(name).map_err(fail)
}

/// Duplicates a caller's descriptor so the caller keeps ownership of its own.
fn dup_fd(fd: c_int) -> FfiResult<OwnedFd> {
    if fd < 0 {
        return Err(invalid("fd is negative"));
    }
    // SAFETY: the borrow lives only for the dup below, during which the caller's
    // descriptor stays open (it is theirs and this call does not close it); a closed
    // or invalid fd makes the dup fail with EBADF, which is reported.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed
        .try_clone_to_owned()
        .map_err(|e| (TAME_IPC_ERR_OS, format!("cannot duplicate fd {fd}: {e}")))
}

fn mode_or_default(mode: u32) -> u32 {
    if mode == 0 {
        crate::segment::DEFAULT_MODE
    } else {
        mode
    }
}

// ---- handles ---------------------------------------------------------------------

/// Borrows a handle for the duration of a call.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library, and nothing mutates
/// it while the returned reference lives.
unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> FfiResult<&'a T> {
    // SAFETY: NULL is handled by `as_ref`; anything else is a live `T` that nothing
    // mutates meanwhile (the caller's contract).
    unsafe { ptr.as_ref() }.ok_or_else(|| invalid(&format!("{what} is NULL")))
}

/// Borrows an end handle mutably for the duration of a call.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library that nothing else
/// uses while the returned reference lives (end handles: one thread at a time).
unsafe fn handle_mut<'a, T>(ptr: *mut T, what: &str) -> FfiResult<&'a mut T> {
    // SAFETY: NULL is handled by `as_mut`; anything else is a live `T` used by no
    // one else meanwhile (the caller's contract).
    unsafe { ptr.as_mut() }.ok_or_else(|| invalid(&format!("{what} is NULL")))
}

/// The shared shape of every `_open`/`_create` call: checks `out`, runs `open` behind
/// the panic boundary and, only on success, stores the new handle in `*out`.
///
/// # Safety
/// `out` is NULL or valid for writing one pointer.
unsafe fn open_handle<T>(out: *mut *mut T, open: impl FnOnce() -> FfiResult<T>) -> tame_ipc_result {
    guard(|| {
        if out.is_null() {
            return Err(invalid("output pointer is NULL"));
        }
        let value = open()?;
        // SAFETY: `out` is non-NULL (checked above) and writable (the caller's
        // contract); ownership of the box passes to the caller until `_close`.
        unsafe { out.write(Box::into_raw(Box::new(value))) };
        Ok(TAME_IPC_OK)
    })
}

/// Frees a handle made by [`open_handle`]; NULL is a no-op.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library that no other call
/// uses now or later.
unsafe fn close<T>(ptr: *mut T) -> tame_ipc_result {
    guard(|| {
        if !ptr.is_null() {
            // SAFETY: `ptr` came from `Box::into_raw` in `open_handle` and is not
            // used again (the caller's contract), so the box is dropped exactly once.
            drop(unsafe { Box::from_raw(ptr) });
        }
        Ok(TAME_IPC_OK)
    })
}

/// A segment handle (ring, register, event): its descriptor can be shared.
trait SegmentHandle {
    fn segment(&self) -> &Segment;
}

/// The handle's descriptor (owned by the handle), or -1 for NULL.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library.
unsafe fn segment_fd<T: SegmentHandle>(ptr: *const T) -> c_int {
    // SAFETY: NULL is handled by `as_ref`; anything else is a live `T` (the
    // caller's contract), only read here.
    unsafe { ptr.as_ref() }.map_or(-1, |h| h.segment().fd().as_raw_fd())
}

/// 1 when someone shrank the handle's named segment and the SIGBUS guard replaced its
/// mapping by private memory (this side is cut off from its peers), else 0 (and for
/// NULL).
///
/// # Safety
/// `ptr` is NULL or a live handle of type `T` from this library.
unsafe fn segment_lost<T: SegmentHandle>(ptr: *const T) -> c_int {
    // SAFETY: NULL is handled by `as_ref`; anything else is a live `T` (the
    // caller's contract), only read here.
    unsafe { ptr.as_ref() }.map_or(0, |h| c_int::from(h.segment().is_lost()))
}

/// Reports a peer's state (`TAME_IPC_PEER_*`) behind the panic boundary; `*pid`
/// (when `pid` is not NULL) receives its pid, or 0.
///
/// # Safety
/// `end` is NULL or a live handle of type `T` from this library; `pid` is NULL or
/// valid for writing a `u32`.
unsafe fn peer_state<T>(
    end: *const T,
    pid: *mut u32,
    state: impl FnOnce(&T) -> PeerState,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NULL is handled by `as_ref`; anything else is a live `T` (the
        // caller's contract), only read here.
        let Some(end) = (unsafe { end.as_ref() }) else {
            return TAME_IPC_PEER_UNKNOWN;
        };
        let state = state(end);
        if !pid.is_null() {
            // SAFETY: non-NULL (checked above) and writable (the caller's contract).
            unsafe { pid.write(state.pid().unwrap_or(0)) };
        }
        match state {
            PeerState::Absent => TAME_IPC_PEER_ABSENT,
            PeerState::Alive { .. } => TAME_IPC_PEER_ALIVE,
            PeerState::Dead { .. } => TAME_IPC_PEER_DEAD,
            PeerState::Unknown { .. } => TAME_IPC_PEER_UNKNOWN,
        }
    }))
    .unwrap_or(TAME_IPC_PEER_UNKNOWN)
}
