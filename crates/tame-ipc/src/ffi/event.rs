//! Event counters: the segment handle `tame_ipc_event` (which also signals) and its
//! `tame_ipc_listener`s.

use std::ffi::{c_char, c_int};
use std::time::Duration;

use super::*;
use crate::{Event, Listener, Signaller};

/// An event counter segment (signalling is thread-safe).
pub struct tame_ipc_event {
    event: Event,
    /// None when opened read-only.
    signaller: Option<Signaller>,
}
/// A listener on an event (one thread at a time).
pub struct tame_ipc_listener {
    listener: Listener,
}

impl tame_ipc_event {
    fn new(event: Event) -> tame_ipc_event {
        let signaller = event.signaller().ok();
        tame_ipc_event { event, signaller }
    }

    fn signaller(&self) -> FfiResult<&Signaller> {
        self.signaller.as_ref().ok_or_else(|| {
            (
                TAME_IPC_ERR_PERMISSION,
                format!(
                    "{} was opened read-only and cannot be signalled — open it with tame_ipc_event_open to signal",
                    self.event.segment().describe()
                ),
            )
        })
    }
}

impl SegmentHandle for tame_ipc_event {
    fn segment(&self) -> &Segment {
        self.event.segment()
    }
}

// ---- event -----------------------------------------------------------------------

/// Creates the named event counter `/dev/shm/tame.NAME` (mode 0 means 0600).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_event *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_create(
    name: *const c_char,
    mode: u32,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let event = Event::create_with_mode(name.as_str(), mode_or_default(mode)).map_err(fail)?;
        Ok(tame_ipc_event::new(event))
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Opens an existing named event counter.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_event *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_open(
    name: *const c_char,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let event = Event::open(name.as_str()).map_err(fail)?;
        Ok(tame_ipc_event::new(event))
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Opens an existing named event counter read-only (mapped `PROT_READ`; the caller
/// needs only read permission). Listeners work (a read-only listener's wait re-checks
/// the counter every millisecond instead of being woken); signalling fails with
/// `TAME_IPC_ERR_PERMISSION`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a
/// `tame_ipc_event *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_open_read_only(
    name: *const c_char,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { name_arg(name) }?;
        let event = Event::open_read_only(name.as_str()).map_err(fail)?;
        Ok(tame_ipc_event::new(event))
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Creates an anonymous event counter (memfd).
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_event *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_create_anonymous(
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    let open = || {
        Ok(tame_ipc_event::new(
            Event::create_anonymous().map_err(fail)?,
        ))
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// Maps an event counter from a descriptor (duplicated; the caller keeps its own).
///
/// # Safety
/// `out` is NULL or valid for writing a `tame_ipc_event *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_open_fd(
    fd: c_int,
    out: *mut *mut tame_ipc_event,
) -> tame_ipc_result {
    let open = || {
        Ok(tame_ipc_event::new(
            Event::from_fd(dup_fd(fd)?).map_err(fail)?,
        ))
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// The event's descriptor, owned by the handle; -1 for NULL.
///
/// # Safety
/// `event` is NULL or a live event handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_fd(event: *const tame_ipc_event) -> c_int {
    // SAFETY: `event` is NULL or live (this function's contract).
    unsafe { segment_fd(event) }
}

/// 1 when someone shrank this named event and the SIGBUS guard replaced its mapping
/// by private memory: this side no longer shares anything with its peers (recreate
/// the channel). 0 otherwise, always for anonymous segments, and for NULL.
///
/// # Safety
/// `event` is NULL or a live event handle (not yet closed).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_lost(event: *const tame_ipc_event) -> c_int {
    // SAFETY: `event` is NULL or live (this function's contract).
    unsafe { segment_lost(event) }
}

/// Counts one event. Wait-free, no system call; thread-safe.
///
/// # Safety
/// `event` is NULL or a live event handle (any number of threads may signal it).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_signal(event: *const tame_ipc_event) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `event` is NULL or live (this function's contract); signalling
        // only touches an atomic, so shared use between threads is fine.
        unsafe { handle(event, "event") }?.signaller()?.signal();
        Ok(TAME_IPC_OK)
    })
}

/// Counts one event and wakes sleeping listeners (a system call when one sleeps).
///
/// # Safety
/// `event` is NULL or a live event handle (any number of threads may signal it).
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_signal_and_wake(
    event: *const tame_ipc_event,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `event` is NULL or live (this function's contract); signalling
        // only touches an atomic and the futex, so shared use is fine.
        unsafe { handle(event, "event") }?
            .signaller()?
            .signal_and_wake();
        Ok(TAME_IPC_OK)
    })
}

/// Releases an event handle; NULL is a no-op. Its listeners keep the mapping alive.
///
/// # Safety
/// `event` is NULL or a live event handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_event_close(event: *mut tame_ipc_event) -> tame_ipc_result {
    // SAFETY: `event` is NULL or live and not used again (this function's contract).
    unsafe { close(event) }
}

// ---- listener --------------------------------------------------------------------

/// A listener counting events from now on.
///
/// # Safety
/// `event` is NULL or a live event handle; `out` is NULL or valid for writing a
/// `tame_ipc_listener *`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_open(
    event: *const tame_ipc_event,
    out: *mut *mut tame_ipc_listener,
) -> tame_ipc_result {
    let open = || {
        // SAFETY: `event` is NULL or live (this function's contract); segment
        // handles are only read, so sharing them between threads is fine.
        let listener = unsafe { handle(event, "event") }?.event.listener();
        Ok(tame_ipc_listener { listener })
    };
    // SAFETY: `out` is NULL or writable (this function's contract).
    unsafe { open_handle(out, open) }
}

/// `*count` receives the number of events since the previous poll or wait.
/// Wait-free, no system call.
///
/// # Safety
/// `listener` is NULL or a live listener handle that no other thread uses during the
/// call; `count` is NULL or valid for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_poll(
    listener: *mut tame_ipc_listener,
    count: *mut u32,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `listener` is NULL or live and used by this thread only (this
        // function's contract).
        let listener = unsafe { handle_mut(listener, "listener") }?;
        if count.is_null() {
            return Err(invalid("count is NULL"));
        }
        let n = listener.listener.poll();
        // SAFETY: `count` is non-NULL (checked above) and writable (the contract).
        unsafe { count.write(n) };
        Ok(TAME_IPC_OK)
    })
}

/// Sleeps until an event arrives or `timeout_ns` passes. TAME_IPC_OK with `*count`
/// new events, or TAME_IPC_TIMEOUT. Makes system calls: not for real-time code.
///
/// # Safety
/// `listener` is NULL or a live listener handle that no other thread uses during the
/// call; `count` is NULL or valid for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_wait(
    listener: *mut tame_ipc_listener,
    timeout_ns: u64,
    count: *mut u32,
) -> tame_ipc_result {
    guard(|| {
        // SAFETY: `listener` is NULL or live and used by this thread only (this
        // function's contract).
        let listener = unsafe { handle_mut(listener, "listener") }?;
        if count.is_null() {
            return Err(invalid("count is NULL"));
        }
        let n = listener.listener.wait(Duration::from_nanos(timeout_ns));
        // SAFETY: `count` is non-NULL (checked above) and writable (the contract).
        unsafe { count.write(n) };
        Ok(if n == 0 {
            TAME_IPC_TIMEOUT
        } else {
            TAME_IPC_OK
        })
    })
}

/// Releases a listener handle; NULL is a no-op.
///
/// # Safety
/// `listener` is NULL or a live listener handle that no other call uses now or later.
#[no_mangle]
pub unsafe extern "C" fn tame_ipc_listener_close(
    listener: *mut tame_ipc_listener,
) -> tame_ipc_result {
    // SAFETY: `listener` is NULL or live and not used again (this function's contract).
    unsafe { close(listener) }
}
