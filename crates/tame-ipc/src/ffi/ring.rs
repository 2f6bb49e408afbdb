//! Rings: the segment handle `tame_ipc_ring` and its two ends, `tame_ipc_producer`
//! and `tame_ipc_consumer`.

use std::ffi::{c_char, c_int, c_void};

use super::*;
use crate::layout::{ChannelSpec, Kind};
use crate::ring::{PopError, PushError};
use crate::{RawConsumer, RawProducer, Ring};

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

impl SegmentHandle for tame_ipc_ring {
    fn segment(&self) -> &Segment {
        self.ring.segment()
    }
}

fn ring_spec(elem_size: u32, elem_align: u32, capacity: u64) -> ChannelSpec {
    ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity)
}

// ---- ring ------------------------------------------------------------------------

/// Creates the named ring `/dev/shm/tame.NAME` with `mode` (0 means 0600); fails with
/// TAME_IPC_ERR_EXISTS if it exists.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_ring *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_create(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    mode: u32,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let spec = ring_spec(elem_size, elem_align, capacity);
        let ring =
            Ring::create_with_mode(name.as_str(), spec, mode_or_default(mode)).map_err(fail)?;
        Ok(tame_ipc_ring { ring })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Opens an existing named ring, which must have exactly this shape.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_ring *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_open(
    name: *const c_char,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let spec = ring_spec(elem_size, elem_align, capacity);
        let ring = Ring::open(name.as_str(), spec).map_err(fail)?;
        Ok(tame_ipc_ring { ring })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Creates an anonymous ring (memfd); share it with `tame_ipc_ring_fd`.
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_ring *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_create_anonymous(
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    let open = || {
        let spec = ring_spec(elem_size, elem_align, capacity);
        let ring = Ring::create_anonymous(spec).map_err(fail)?;
        Ok(tame_ipc_ring { ring })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Maps a ring from a descriptor (duplicated; the caller keeps and closes its own).
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_ring *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_open_fd(
    fd: c_int,
    elem_size: u32,
    elem_align: u32,
    capacity: u64,
    out: *mut *mut tame_ipc_ring,
) -> tame_ipc_result {
    let open = || {
        let spec = ring_spec(elem_size, elem_align, capacity);
        let ring = Ring::from_fd(dup_fd(fd)?, spec).map_err(fail)?;
        Ok(tame_ipc_ring { ring })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// The ring's descriptor, owned by the handle (valid until `tame_ipc_ring_close`); -1
/// for NULL.
///
/// # Safety
/// `ring` is NULL or a live ring handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_fd(ring: *const tame_ipc_ring) -> c_int {
    // SAFETY: `ring` is NULL or live (this function's contract).
    unsafe { segment_fd(ring) }
}

/// 1 when someone shrank this named ring and the SIGBUS guard replaced its mapping
/// by private memory: this side no longer shares anything with its peers (recreate
/// the channel). 0 otherwise, always for anonymous segments, and for NULL.
///
/// # Safety
/// `ring` is NULL or a live ring handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_lost(ring: *const tame_ipc_ring) -> c_int {
    // SAFETY: `ring` is NULL or live (this function's contract).
    unsafe { segment_lost(ring) }
}

/// Releases a ring handle; NULL is a no-op. Its ends keep the mapping alive.
///
/// # Safety
/// `ring` is NULL or a live ring handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_ring_close(ring: *mut tame_ipc_ring) -> tame_ipc_result {
    // SAFETY: `ring` is NULL or live and not used again (this function's contract).
    unsafe { close(ring) }
}

// ---- producer --------------------------------------------------------------------

/// Attaches the producer role.
///
/// # Safety
/// `ring` is NULL or a live ring handle; `out` is NULL or valid for writing a
/// `tame_ipc_producer *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_open(
    ring: *const tame_ipc_ring,
    out: *mut *mut tame_ipc_producer,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `ring` is NULL or live (this function's contract); segment
        // handles are only read, so sharing them between threads is fine.
        let ring = unsafe { handle(ring, "ring") }?;
        let raw = ring.ring.raw_producer().map_err(fail)?;
        Ok(tame_ipc_producer { raw })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Copies one element (the ring's element size) from `elem`. TAME_IPC_OK,
/// TAME_IPC_FULL or TAME_IPC_ERR_CORRUPTED. Wait-free, no system call.
///
/// # Safety
/// `producer` is NULL or a live producer handle that no other thread uses during the
/// call; `elem` is NULL or valid for reading the ring's element size.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_push(
    producer: *mut tame_ipc_producer,
    elem: *const c_void,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `producer` is NULL or live and used by this thread only (this
        // function's contract).
        let producer = unsafe { handle_mut(producer, "producer") }?;
        if elem.is_null() {
            return Err(invalid("elem is NULL"));
        }
        // SAFETY: `elem` is non-NULL (checked above) and readable for the element
        // size (this function's contract); it is the caller's buffer, not a slot.
        match unsafe { producer.raw.push_ptr(elem.cast()) } {
            Ok(()) => Ok(TAME_IPC_OK),
            Err(PushError::Full) => Ok(TAME_IPC_FULL),
            Err(PushError::Corrupted) => Err(corrupted("consumer")),
            Err(PushError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Pushes up to `count` elements stored back to back at `elems`; `*pushed` receives
/// how many (0 when full).
///
/// # Safety
/// `producer` is NULL or a live producer handle that no other thread uses during the
/// call; `elems` is NULL or valid for reading `count` × the element size; `pushed`
/// is NULL or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_push_many(
    producer: *mut tame_ipc_producer,
    elems: *const c_void,
    count: usize,
    pushed: *mut usize,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `producer` is NULL or live and used by this thread only (this
        // function's contract).
        let producer = unsafe { handle_mut(producer, "producer") }?;
        if (elems.is_null() && count > 0) || pushed.is_null() {
            return Err(invalid("elems or pushed is NULL"));
        }
        // SAFETY: `elems` is readable for `count` elements (this function's
        // contract; with count 0 nothing is read, so NULL is allowed then).
        let n = unsafe { producer.raw.push_many_ptr(elems.cast(), count) }
            .map_err(|_| corrupted("consumer"))?;
        // SAFETY: `pushed` is non-NULL (checked above) and writable (the contract).
        unsafe { pushed.write(n) };
        Ok(TAME_IPC_OK)
    })
}

/// Reserves the next free slot to build one element in place: `*slot` receives its
/// address (aligned to the ring's element alignment, valid for the element size) and
/// the consumer sees nothing until `tame_ipc_producer_commit`. TAME_IPC_OK,
/// TAME_IPC_FULL (`*slot` untouched) or TAME_IPC_ERR_CORRUPTED. Reserving again
/// before committing returns the same slot. Wait-free, no system call.
///
/// # Safety
/// `producer` is NULL or a live producer handle that no other thread uses during the
/// call; `slot` is NULL or valid for writing a `void *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_reserve(
    producer: *mut tame_ipc_producer,
    slot: *mut *mut c_void,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `producer` is NULL or live and used by this thread only (this
        // function's contract).
        let producer = unsafe { handle_mut(producer, "producer") }?;
        if slot.is_null() {
            return Err(invalid("slot is NULL"));
        }
        match producer.raw.reserve_raw() {
            Ok(address) => {
                // SAFETY: `slot` is non-NULL (checked above) and writable (the contract).
                unsafe { slot.write(address.cast()) };
                Ok(TAME_IPC_OK)
            }
            Err(PushError::Full) => Ok(TAME_IPC_FULL),
            Err(PushError::Corrupted) => Err(corrupted("consumer")),
            Err(PushError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Publishes the slot `tame_ipc_producer_reserve` returned. TAME_IPC_OK, or
/// TAME_IPC_ERR_INVALID_ARGUMENT when no slot is reserved. Wait-free, no system call.
///
/// # Safety
/// `producer` is NULL or a live producer handle that no other thread uses during the
/// call.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_commit(
    producer: *mut tame_ipc_producer,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `producer` is NULL or live and used by this thread only (this
        // function's contract).
        let producer = unsafe { handle_mut(producer, "producer") }?;
        if producer.raw.commit_reserved() {
            Ok(TAME_IPC_OK)
        } else {
            Err(invalid(
                "no slot is reserved — call tame_ipc_producer_reserve first",
            ))
        }
    })
}

/// The consumer's state (TAME_IPC_PEER_*), checked on demand; `pid` (may be NULL)
/// receives its pid.
///
/// # Safety
/// `producer` is NULL or a live producer handle; `pid` is NULL or valid for writing a
/// `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_peer_state(
    producer: *const tame_ipc_producer,
    pid: *mut u32,
) -> c_int {
    // SAFETY: `producer` is NULL or live and `pid` NULL or writable (this function's
    // contract).
    unsafe { peer_state(producer, pid, |p| p.raw.consumer_state()) }
}

/// Releases the producer role and its handle; NULL is a no-op.
///
/// # Safety
/// `producer` is NULL or a live producer handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_producer_close(
    producer: *mut tame_ipc_producer,
) -> tame_ipc_result {
    // SAFETY: `producer` is NULL or live and not used again (this function's contract).
    unsafe { close(producer) }
}

// ---- consumer --------------------------------------------------------------------

/// Attaches the consumer role.
///
/// # Safety
/// `ring` is NULL or a live ring handle; `out` is NULL or valid for writing a
/// `tame_ipc_consumer *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_open(
    ring: *const tame_ipc_ring,
    out: *mut *mut tame_ipc_consumer,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `ring` is NULL or live (this function's contract); segment
        // handles are only read, so sharing them between threads is fine.
        let ring = unsafe { handle(ring, "ring") }?;
        let raw = ring.ring.raw_consumer().map_err(fail)?;
        Ok(tame_ipc_consumer { raw })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Copies the oldest element into `elem`. TAME_IPC_OK, TAME_IPC_EMPTY or
/// TAME_IPC_ERR_CORRUPTED. Wait-free, no system call.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle that no other thread uses during the
/// call; `elem` is NULL or valid for writing the ring's element size.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_pop(
    consumer: *mut tame_ipc_consumer,
    elem: *mut c_void,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `consumer` is NULL or live and used by this thread only (this
        // function's contract).
        let consumer = unsafe { handle_mut(consumer, "consumer") }?;
        if elem.is_null() {
            return Err(invalid("elem is NULL"));
        }
        // SAFETY: `elem` is non-NULL (checked above) and writable for the element
        // size (this function's contract); it is the caller's buffer, not a slot.
        match unsafe { consumer.raw.pop_ptr(elem.cast()) } {
            Ok(()) => Ok(TAME_IPC_OK),
            Err(PopError::Empty) => Ok(TAME_IPC_EMPTY),
            Err(PopError::Corrupted) => Err(corrupted("producer")),
            Err(PopError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Pops up to `count` elements into `elems` back to back; `*popped` receives how many.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle that no other thread uses during the
/// call; `elems` is NULL or valid for writing `count` × the element size; `popped`
/// is NULL or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_pop_many(
    consumer: *mut tame_ipc_consumer,
    elems: *mut c_void,
    count: usize,
    popped: *mut usize,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `consumer` is NULL or live and used by this thread only (this
        // function's contract).
        let consumer = unsafe { handle_mut(consumer, "consumer") }?;
        if (elems.is_null() && count > 0) || popped.is_null() {
            return Err(invalid("elems or popped is NULL"));
        }
        // SAFETY: `elems` is writable for `count` elements (this function's
        // contract; with count 0 nothing is written, so NULL is allowed then).
        let n = unsafe { consumer.raw.pop_many_ptr(elems.cast(), count) }
            .map_err(|_| corrupted("producer"))?;
        // SAFETY: `popped` is non-NULL (checked above) and writable (the contract).
        unsafe { popped.write(n) };
        Ok(TAME_IPC_OK)
    })
}

/// Looks at the oldest element in place: `*slot` receives its address (valid for
/// reading the element size) until `tame_ipc_consumer_release`, which frees it for the
/// producer. TAME_IPC_OK, TAME_IPC_EMPTY (`*slot` untouched) or
/// TAME_IPC_ERR_CORRUPTED. Peeking again before releasing returns the same element.
/// Wait-free, no system call.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle that no other thread uses during the
/// call; `slot` is NULL or valid for writing a `const void *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_peek(
    consumer: *mut tame_ipc_consumer,
    slot: *mut *const c_void,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `consumer` is NULL or live and used by this thread only (this
        // function's contract).
        let consumer = unsafe { handle_mut(consumer, "consumer") }?;
        if slot.is_null() {
            return Err(invalid("slot is NULL"));
        }
        match consumer.raw.peek_raw() {
            Ok(address) => {
                // SAFETY: `slot` is non-NULL (checked above) and writable (the contract).
                unsafe { slot.write(address.cast()) };
                Ok(TAME_IPC_OK)
            }
            Err(PopError::Empty) => Ok(TAME_IPC_EMPTY),
            Err(PopError::Corrupted) => Err(corrupted("producer")),
            Err(PopError::WrongSize) => Err(invalid("wrong element size")),
        }
    })
}

/// Frees the element `tame_ipc_consumer_peek` returned. TAME_IPC_OK, or
/// TAME_IPC_ERR_INVALID_ARGUMENT when none is held. Wait-free, no system call.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle that no other thread uses during the
/// call.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_release(
    consumer: *mut tame_ipc_consumer,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `consumer` is NULL or live and used by this thread only (this
        // function's contract).
        let consumer = unsafe { handle_mut(consumer, "consumer") }?;
        if consumer.raw.release_peeked() {
            Ok(TAME_IPC_OK)
        } else {
            Err(invalid(
                "no element is held — call tame_ipc_consumer_peek first",
            ))
        }
    })
}

/// The producer's state (TAME_IPC_PEER_*), checked on demand.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle; `pid` is NULL or valid for writing a
/// `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_peer_state(
    consumer: *const tame_ipc_consumer,
    pid: *mut u32,
) -> c_int {
    // SAFETY: `consumer` is NULL or live and `pid` NULL or writable (this function's
    // contract).
    unsafe { peer_state(consumer, pid, |c| c.raw.producer_state()) }
}

/// Releases the consumer role and its handle; NULL is a no-op.
///
/// # Safety
/// `consumer` is NULL or a live consumer handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_consumer_close(
    consumer: *mut tame_ipc_consumer,
) -> tame_ipc_result {
    // SAFETY: `consumer` is NULL or live and not used again (this function's contract).
    unsafe { close(consumer) }
}
