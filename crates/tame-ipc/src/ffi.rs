//! The C ABI. `include/tame_ipc.h` is generated from this file by cbindgen (a test
//! checks that the checked-in header is current). Conventions are in the README:
//! every call returns a `tame_ipc_result`; handles come from `_open`/`_create`
//! functions and are released by the matching `_close` exactly once; no panic
//! crosses the boundary (it becomes `TAME_IPC_ERR_PANIC`).

// The safety contract of every function is the C API convention in the README: valid
// handles from this library, buffers of the element size, NUL-terminated names.
#![allow(clippy::missing_safety_doc)]
// Until this file is split per handle type with a `# Safety` section per function
// and a SAFETY comment per unsafe block (next commit).
#![allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::error::Error;
use crate::layout::{ChannelSpec, HeaderError, Kind, LAYOUT_MAJOR, LAYOUT_MINOR};
use crate::ring::{PopError, PushError};
use crate::segment::{PeerState, SegmentName};
use crate::{
    Event, Listener, RawConsumer, RawProducer, RawReader, RawWriter, ReadError, Register, Ring,
    Signaller,
};

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

/// Layout version this library writes; segments with the same major are compatible.
pub const TAME_IPC_LAYOUT_MAJOR: u32 = 1;
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

/// A ring segment.
pub struct tame_ipc_ring {
    ring: Ring,
}
/// The producer end of a ring (one thread at a time).
pub struct tame_ipc_producer {
    raw: RawProducer,
}
/// The consumer end of a ring (one thread at a time).
pub struct tame_ipc_consumer {
    raw: RawConsumer,
}
/// A latest-value register segment.
pub struct tame_ipc_register {
    register: Register,
}
/// The writer of a register (one thread at a time).
pub struct tame_ipc_writer {
    raw: RawWriter,
}
/// A reader of a register (one thread at a time; open one per thread).
pub struct tame_ipc_reader {
    raw: RawReader,
}
/// An event counter segment (signalling is thread-safe).
pub struct tame_ipc_event {
    event: Event,
    signaller: Signaller,
}
/// A listener on an event (one thread at a time).
pub struct tame_ipc_listener {
    listener: Listener,
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

fn error_code(error: &Error) -> tame_ipc_result {
    match error {
        Error::InvalidName { .. } | Error::InvalidSpec(_) | Error::TypeMismatch { .. } => {
            TAME_IPC_ERR_INVALID_ARGUMENT
        }
        Error::NotFound { .. } => TAME_IPC_ERR_NOT_FOUND,
        Error::AlreadyExists { .. } => TAME_IPC_ERR_EXISTS,
        Error::PermissionDenied { .. } => TAME_IPC_ERR_PERMISSION,
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
fn guard(
    body: impl FnOnce() -> Result<tame_ipc_result, (tame_ipc_result, String)>,
) -> tame_ipc_result {
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

type FfiResult<T> = Result<T, (tame_ipc_result, String)>;

fn fail(error: Error) -> (tame_ipc_result, String) {
    (error_code(&error), error.to_string())
}

fn invalid(message: &str) -> (tame_ipc_result, String) {
    (TAME_IPC_ERR_INVALID_ARGUMENT, message.to_string())
}

unsafe fn name_arg(name: *const c_char) -> FfiResult<String> {
    if name.is_null() {
        return Err(invalid("name is NULL"));
    }
    let name = CStr::from_ptr(name)
        .to_str()
        .map_err(|_| invalid("name is not valid UTF-8"))?;
    SegmentName::new(name).map_err(fail)?;
    Ok(name.to_string())
}

unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> FfiResult<&'a T> {
    ptr.as_ref()
        .ok_or_else(|| invalid(&format!("{what} is NULL")))
}

unsafe fn handle_mut<'a, T>(ptr: *mut T, what: &str) -> FfiResult<&'a mut T> {
    ptr.as_mut()
        .ok_or_else(|| invalid(&format!("{what} is NULL")))
}

unsafe fn give<T>(out: *mut *mut T, value: T) -> FfiResult<tame_ipc_result> {
    *out = Box::into_raw(Box::new(value));
    Ok(TAME_IPC_OK)
}

fn check_out<T>(out: *mut *mut T) -> FfiResult<()> {
    if out.is_null() {
        return Err(invalid("output pointer is NULL"));
    }
    Ok(())
}

unsafe fn close<T>(ptr: *mut T) -> tame_ipc_result {
    guard(|| {
        if !ptr.is_null() {
            drop(Box::from_raw(ptr));
        }
        Ok(TAME_IPC_OK)
    })
}

/// Duplicates a caller's descriptor so the caller keeps ownership of its own.
fn dup_fd(fd: c_int) -> FfiResult<OwnedFd> {
    if fd < 0 {
        return Err(invalid("fd is negative"));
    }
    // SAFETY: only borrowed for the duration of the dup.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    borrowed
        .try_clone_to_owned()
        .map_err(|e| (TAME_IPC_ERR_OS, format!("cannot duplicate fd {fd}: {e}")))
}

fn peer_code(state: PeerState, pid: *mut u32) -> c_int {
    if !pid.is_null() {
        // SAFETY: caller passes a valid pointer or NULL.
        unsafe { *pid = state.pid().unwrap_or(0) };
    }
    match state {
        PeerState::Absent => TAME_IPC_PEER_ABSENT,
        PeerState::Alive { .. } => TAME_IPC_PEER_ALIVE,
        PeerState::Dead { .. } => TAME_IPC_PEER_DEAD,
        PeerState::Unknown { .. } => TAME_IPC_PEER_UNKNOWN,
    }
}

// ---- library -------------------------------------------------------------------

/// The layout version this library writes: major << 16 | minor.
#[no_mangle]
pub extern "C" fn tame_ipc_layout_version() -> u32 {
    (u32::from(LAYOUT_MAJOR) << 16) | u32::from(LAYOUT_MINOR)
}

/// The symbolic name of a result code ("TAME_IPC_OK", ...); a static string.
#[no_mangle]
pub extern "C" fn tame_ipc_result_name(result: tame_ipc_result) -> *const c_char {
    let name: &'static CStr = match result {
        TAME_IPC_OK => c"TAME_IPC_OK",
        TAME_IPC_FULL => c"TAME_IPC_FULL",
        TAME_IPC_EMPTY => c"TAME_IPC_EMPTY",
        TAME_IPC_CONTENDED => c"TAME_IPC_CONTENDED",
        TAME_IPC_TIMEOUT => c"TAME_IPC_TIMEOUT",
        TAME_IPC_ERR_INVALID_ARGUMENT => c"TAME_IPC_ERR_INVALID_ARGUMENT",
        TAME_IPC_ERR_NOT_FOUND => c"TAME_IPC_ERR_NOT_FOUND",
        TAME_IPC_ERR_EXISTS => c"TAME_IPC_ERR_EXISTS",
        TAME_IPC_ERR_PERMISSION => c"TAME_IPC_ERR_PERMISSION",
        TAME_IPC_ERR_LAYOUT_MISMATCH => c"TAME_IPC_ERR_LAYOUT_MISMATCH",
        TAME_IPC_ERR_INCOMPATIBLE_VERSION => c"TAME_IPC_ERR_INCOMPATIBLE_VERSION",
        TAME_IPC_ERR_NOT_A_SEGMENT => c"TAME_IPC_ERR_NOT_A_SEGMENT",
        TAME_IPC_ERR_NOT_READY => c"TAME_IPC_ERR_NOT_READY",
        TAME_IPC_ERR_ROLE_TAKEN => c"TAME_IPC_ERR_ROLE_TAKEN",
        TAME_IPC_ERR_CORRUPTED => c"TAME_IPC_ERR_CORRUPTED",
        TAME_IPC_ERR_OS => c"TAME_IPC_ERR_OS",
        TAME_IPC_ERR_PANIC => c"TAME_IPC_ERR_PANIC",
        _ => c"TAME_IPC_UNKNOWN_RESULT",
    };
    name.as_ptr()
}

/// Copies the message of this thread's last failed call into `buf` (NUL-terminated,
/// truncated to `len`); returns the message length without the NUL. `buf` may be
/// NULL to ask for the length.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_last_error(buf: *mut c_char, len: usize) -> usize {
    catch_unwind(|| {
        LAST_ERROR.with(|last| {
            let message = last.borrow();
            if !buf.is_null() && len > 0 {
                let n = message.len().min(len - 1);
                std::ptr::copy_nonoverlapping(message.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
            message.len()
        })
    })
    .unwrap_or(0)
}

/// Removes the named segment `/dev/shm/tame.NAME` (open handles stay valid).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_unlink(name: *const c_char) -> tame_ipc_result {
    guard(|| {
        let name = SegmentName::new(&name_arg(name)?).map_err(fail)?;
        crate::segment::unlink(&name).map_err(fail)?;
        Ok(TAME_IPC_OK)
    })
}

// ---- ring ------------------------------------------------------------------------

/// Creates the named ring `/dev/shm/tame.NAME` with `mode` (0 means 0600); fails with
/// TAME_IPC_ERR_EXISTS if it exists.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_create(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    mode: u32,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let spec = ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity);
        let ring = Ring::create_with_mode(&name, spec, mode_or_default(mode)).map_err(fail)?;
        give(out, tame_ipc_ring { ring })
    })
}

/// Opens an existing named ring, which must have exactly this shape.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_open(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let spec = ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity);
        let ring = Ring::open(&name, spec).map_err(fail)?;
        give(out, tame_ipc_ring { ring })
    })
}

/// Creates an anonymous ring (memfd); share it with `tame_ipc_ring_fd`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_create_anonymous(
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let spec = ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity);
        let ring = Ring::create_anonymous(spec).map_err(fail)?;
        give(out, tame_ipc_ring { ring })
    })
}

/// Maps a ring from a descriptor (duplicated; the caller keeps and closes its own).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_open_fd(
    fd: c_int,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let spec = ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity);
        let ring = Ring::from_fd(dup_fd(fd)?, spec).map_err(fail)?;
        give(out, tame_ipc_ring { ring })
    })
}

/// The ring's descriptor, owned by the handle (valid until `tame_ipc_ring_close`); -1
/// for NULL.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_fd(ring: *const tame_ipc_ring) -> c_int {
    ring.as_ref()
        .map_or(-1, |r| r.ring.segment().fd().as_raw_fd())
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_close(ring: *mut tame_ipc_ring) -> tame_ipc_result {
    close(ring)
}

/// Attaches the producer role.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_open(
    ring: *const tame_ipc_ring,
    out: *mut *mut tame_ipc_producer,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let raw = handle(ring, "ring")?.ring.raw_producer().map_err(fail)?;
        give(out, tame_ipc_producer { raw })
    })
}

/// Copies one element (the ring's element size) from `elem`. TAME_IPC_OK,
/// TAME_IPC_FULL or TAME_IPC_ERR_CORRUPTED. Wait-free, no system call.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_push(
    producer: *mut tame_ipc_producer,
    elem: *const c_void,
) -> tame_ipc_result {
    guard(|| {
        let producer = handle_mut(producer, "producer")?;
        if elem.is_null() {
            return Err(invalid("elem is NULL"));
        }
        match producer.raw.push_ptr(elem as *const u8) {
            Ok(()) => Ok(TAME_IPC_OK),
            Err(PushError::Full) => Ok(TAME_IPC_FULL),
            Err(PushError::Corrupted) => Err((
                TAME_IPC_ERR_CORRUPTED,
                "the consumer's index is impossible".into(),
            )),
            Err(PushError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Pushes up to `count` elements stored back to back at `elems`; `*pushed` receives
/// how many (0 when full).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_push_many(
    producer: *mut tame_ipc_producer,
    elems: *const c_void,
    count: usize,
    pushed: *mut usize,
) -> tame_ipc_result {
    guard(|| {
        let producer = handle_mut(producer, "producer")?;
        if (elems.is_null() && count > 0) || pushed.is_null() {
            return Err(invalid("elems or pushed is NULL"));
        }
        let n = producer
            .raw
            .push_many_ptr(elems as *const u8, count)
            .map_err(|_| {
                (
                    TAME_IPC_ERR_CORRUPTED,
                    "the consumer's index is impossible".to_string(),
                )
            })?;
        *pushed = n;
        Ok(TAME_IPC_OK)
    })
}

/// The consumer's state (TAME_IPC_PEER_*), checked on demand; `pid` (may be NULL)
/// receives its pid.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_peer_state(
    producer: *const tame_ipc_producer,
    pid: *mut u32,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| match producer.as_ref() {
        Some(p) => peer_code(p.raw.consumer_state(), pid),
        None => TAME_IPC_PEER_UNKNOWN,
    }))
    .unwrap_or(TAME_IPC_PEER_UNKNOWN)
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_close(
    producer: *mut tame_ipc_producer,
) -> tame_ipc_result {
    close(producer)
}

/// Attaches the consumer role.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_open(
    ring: *const tame_ipc_ring,
    out: *mut *mut tame_ipc_consumer,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let raw = handle(ring, "ring")?.ring.raw_consumer().map_err(fail)?;
        give(out, tame_ipc_consumer { raw })
    })
}

/// Copies the oldest element into `elem`. TAME_IPC_OK, TAME_IPC_EMPTY or
/// TAME_IPC_ERR_CORRUPTED. Wait-free, no system call.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_pop(
    consumer: *mut tame_ipc_consumer,
    elem: *mut c_void,
) -> tame_ipc_result {
    guard(|| {
        let consumer = handle_mut(consumer, "consumer")?;
        if elem.is_null() {
            return Err(invalid("elem is NULL"));
        }
        match consumer.raw.pop_ptr(elem as *mut u8) {
            Ok(()) => Ok(TAME_IPC_OK),
            Err(PopError::Empty) => Ok(TAME_IPC_EMPTY),
            Err(PopError::Corrupted) => Err((
                TAME_IPC_ERR_CORRUPTED,
                "the producer's index is impossible".into(),
            )),
            Err(PopError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Pops up to `count` elements into `elems` back to back; `*popped` receives how many.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_pop_many(
    consumer: *mut tame_ipc_consumer,
    elems: *mut c_void,
    count: usize,
    popped: *mut usize,
) -> tame_ipc_result {
    guard(|| {
        let consumer = handle_mut(consumer, "consumer")?;
        if (elems.is_null() && count > 0) || popped.is_null() {
            return Err(invalid("elems or popped is NULL"));
        }
        let n = consumer
            .raw
            .pop_many_ptr(elems as *mut u8, count)
            .map_err(|_| {
                (
                    TAME_IPC_ERR_CORRUPTED,
                    "the producer's index is impossible".to_string(),
                )
            })?;
        *popped = n;
        Ok(TAME_IPC_OK)
    })
}

/// The producer's state (TAME_IPC_PEER_*), checked on demand.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_peer_state(
    consumer: *const tame_ipc_consumer,
    pid: *mut u32,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| match consumer.as_ref() {
        Some(c) => peer_code(c.raw.producer_state(), pid),
        None => TAME_IPC_PEER_UNKNOWN,
    }))
    .unwrap_or(TAME_IPC_PEER_UNKNOWN)
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_close(
    consumer: *mut tame_ipc_consumer,
) -> tame_ipc_result {
    close(consumer)
}

// ---- register --------------------------------------------------------------------

/// Creates the named register `/dev/shm/tame.NAME` (mode 0 means 0600).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_create(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    mode: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let spec = ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1);
        let register =
            Register::create_with_mode(&name, spec, mode_or_default(mode)).map_err(fail)?;
        give(out, tame_ipc_register { register })
    })
}

/// Opens an existing named register, which must have exactly this shape.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_open(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let spec = ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1);
        let register = Register::open(&name, spec).map_err(fail)?;
        give(out, tame_ipc_register { register })
    })
}

/// Creates an anonymous register (memfd).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_create_anonymous(
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let spec = ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1);
        let register = Register::create_anonymous(spec).map_err(fail)?;
        give(out, tame_ipc_register { register })
    })
}

/// Maps a register from a descriptor (duplicated; the caller keeps its own).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_open_fd(
    fd: c_int,
    elem_size: u32,
    elem_align: u32,
    out: *mut *mut tame_ipc_register,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let spec = ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1);
        let register = Register::from_fd(dup_fd(fd)?, spec).map_err(fail)?;
        give(out, tame_ipc_register { register })
    })
}

/// The register's descriptor, owned by the handle; -1 for NULL.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_fd(register: *const tame_ipc_register) -> c_int {
    register
        .as_ref()
        .map_or(-1, |r| r.register.segment().fd().as_raw_fd())
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_register_close(
    register: *mut tame_ipc_register,
) -> tame_ipc_result {
    close(register)
}

/// Attaches the writer role.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_open(
    register: *const tame_ipc_register,
    out: *mut *mut tame_ipc_writer,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let raw = handle(register, "register")?
            .register
            .raw_writer()
            .map_err(fail)?;
        give(out, tame_ipc_writer { raw })
    })
}

/// Publishes one value (the register's element size) from `value`. Never waits.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_write(
    writer: *mut tame_ipc_writer,
    value: *const c_void,
) -> tame_ipc_result {
    guard(|| {
        let writer = handle_mut(writer, "writer")?;
        if value.is_null() {
            return Err(invalid("value is NULL"));
        }
        let bytes = std::slice::from_raw_parts(value as *const u8, writer.raw.elem_size());
        writer
            .raw
            .write_bytes(bytes)
            .map_err(|_| invalid("wrong element size"))?;
        Ok(TAME_IPC_OK)
    })
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_writer_close(writer: *mut tame_ipc_writer) -> tame_ipc_result {
    close(writer)
}

/// Opens a reader (any number per register).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_open(
    register: *const tame_ipc_register,
    out: *mut *mut tame_ipc_reader,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let raw = handle(register, "register")?
            .register
            .raw_reader()
            .map_err(fail)?;
        give(out, tame_ipc_reader { raw })
    })
}

/// Copies the latest value into `value`. TAME_IPC_OK, TAME_IPC_EMPTY (never
/// written) or TAME_IPC_CONTENDED. `fresh` (may be NULL) receives 1 if the value is
/// new since this reader's previous read; `version` (may be NULL) the write count.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_read(
    reader: *mut tame_ipc_reader,
    value: *mut c_void,
    fresh: *mut c_int,
    version: *mut u64,
) -> tame_ipc_result {
    guard(|| {
        let reader = handle_mut(reader, "reader")?;
        if value.is_null() {
            return Err(invalid("value is NULL"));
        }
        let bytes = std::slice::from_raw_parts_mut(value as *mut u8, reader.raw.elem_size());
        match reader.raw.read_bytes(bytes) {
            Ok((is_fresh, count)) => {
                if !fresh.is_null() {
                    *fresh = c_int::from(is_fresh);
                }
                if !version.is_null() {
                    *version = count;
                }
                Ok(TAME_IPC_OK)
            }
            Err(ReadError::Empty) => Ok(TAME_IPC_EMPTY),
            Err(ReadError::Contended) => Ok(TAME_IPC_CONTENDED),
            Err(ReadError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// The writer's state (TAME_IPC_PEER_*), checked on demand.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_peer_state(
    reader: *const tame_ipc_reader,
    pid: *mut u32,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| match reader.as_ref() {
        Some(r) => peer_code(r.raw.writer_state(), pid),
        None => TAME_IPC_PEER_UNKNOWN,
    }))
    .unwrap_or(TAME_IPC_PEER_UNKNOWN)
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_reader_close(reader: *mut tame_ipc_reader) -> tame_ipc_result {
    close(reader)
}

// ---- event -----------------------------------------------------------------------

/// Creates the named event counter `/dev/shm/tame.NAME` (mode 0 means 0600).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_create(
    name: *const c_char,
    mode: u32,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let event = Event::create_with_mode(&name, mode_or_default(mode)).map_err(fail)?;
        let signaller = event.signaller();
        give(out, tame_ipc_event { event, signaller })
    })
}

/// Opens an existing named event counter.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_open(
    name: *const c_char,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let name = name_arg(name)?;
        let event = Event::open(&name).map_err(fail)?;
        let signaller = event.signaller();
        give(out, tame_ipc_event { event, signaller })
    })
}

/// Creates an anonymous event counter (memfd).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_create_anonymous(
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let event = Event::create_anonymous().map_err(fail)?;
        let signaller = event.signaller();
        give(out, tame_ipc_event { event, signaller })
    })
}

/// Maps an event counter from a descriptor (duplicated; the caller keeps its own).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_open_fd(
    fd: c_int,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let event = Event::from_fd(dup_fd(fd)?).map_err(fail)?;
        let signaller = event.signaller();
        give(out, tame_ipc_event { event, signaller })
    })
}

/// The event's descriptor, owned by the handle; -1 for NULL.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_fd(event: *const tame_ipc_event) -> c_int {
    event
        .as_ref()
        .map_or(-1, |e| e.event.segment().fd().as_raw_fd())
}

/// Counts one event. Wait-free, no system call; thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_signal(event: *const tame_ipc_event) -> tame_ipc_result {
    guard(|| {
        handle(event, "event")?.signaller.signal();
        Ok(TAME_IPC_OK)
    })
}

/// Counts one event and wakes sleeping listeners (a system call when one sleeps).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_signal_and_wake(
    event: *const tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        handle(event, "event")?.signaller.signal_and_wake();
        Ok(TAME_IPC_OK)
    })
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_close(event: *mut tame_ipc_event) -> tame_ipc_result {
    close(event)
}

/// A listener counting events from now on.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_open(
    event: *const tame_ipc_event,
    out: *mut *mut tame_ipc_listener,
) -> tame_ipc_result {
    guard(|| {
        check_out(out)?;
        let listener = handle(event, "event")?.event.listener();
        give(out, tame_ipc_listener { listener })
    })
}

/// `*count` receives the number of events since the previous poll or wait.
/// Wait-free, no system call.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_poll(
    listener: *mut tame_ipc_listener,
    count: *mut u32,
) -> tame_ipc_result {
    guard(|| {
        let listener = handle_mut(listener, "listener")?;
        if count.is_null() {
            return Err(invalid("count is NULL"));
        }
        *count = listener.listener.poll();
        Ok(TAME_IPC_OK)
    })
}

/// Sleeps until an event arrives or `timeout_ns` passes. TAME_IPC_OK with `*count`
/// new events, or TAME_IPC_TIMEOUT. Makes system calls: not for real-time code.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_wait(
    listener: *mut tame_ipc_listener,
    timeout_ns: u64,
    count: *mut u32,
) -> tame_ipc_result {
    guard(|| {
        let listener = handle_mut(listener, "listener")?;
        if count.is_null() {
            return Err(invalid("count is NULL"));
        }
        let n = listener.listener.wait(Duration::from_nanos(timeout_ns));
        *count = n;
        Ok(if n == 0 {
            TAME_IPC_TIMEOUT
        } else {
            TAME_IPC_OK
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_close(
    listener: *mut tame_ipc_listener,
) -> tame_ipc_result {
    close(listener)
}

fn mode_or_default(mode: u32) -> u32 {
    if mode == 0 {
        crate::segment::DEFAULT_MODE
    } else {
        mode
    }
}
