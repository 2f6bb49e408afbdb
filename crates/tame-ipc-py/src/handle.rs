//! What every handle shares: one-thread-at-a-time locking of end handles, taking a
//! caller's descriptor, peer states, and segment facts.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tame_ipc::Segment;

use crate::errors;

/// Locks an end handle's state without waiting: a second thread gets an error instead
/// of blocking while holding the GIL (which the first may need to return).
pub fn lock<'a, T>(state: &'a Mutex<T>, what: &str) -> PyResult<MutexGuard<'a, T>> {
    match state.try_lock() {
        Ok(guard) => Ok(guard),
        Err(TryLockError::WouldBlock) => Err(errors::busy(what)),
        // Nothing panics while the lock is held; if something did, the state is still
        // consistent (every update is a single assignment).
        Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
    }
}

/// A duplicate (close-on-exec) of the caller's descriptor: the caller keeps and
/// closes its own, as with the C ABI's `_open_fd`.
pub fn dup_fd(fd: i32) -> PyResult<OwnedFd> {
    if fd < 0 {
        return Err(PyValueError::new_err(format!(
            "descriptor {fd} is negative — pass an open descriptor (e.g. received with socket.recv_fds)"
        )));
    }
    // SAFETY: F_DUPFD_CLOEXEC reads no memory; on a descriptor that is not open it
    // fails with EBADF, which is reported below.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if copy < 0 {
        let err = std::io::Error::last_os_error();
        return Err(PyValueError::new_err(format!(
            "cannot use descriptor {fd}: {err} — pass an open descriptor of a tame-ipc segment"
        )));
    }
    // SAFETY: `copy` is a descriptor fcntl just created for us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Who holds a role of a channel, as seen now (checked against /proc on demand).
#[pyclass(frozen, module = "tame_ipc._native")]
#[derive(Clone, Copy, Debug)]
pub struct PeerState {
    state: &'static str,
    pid: Option<u32>,
}

impl From<tame_ipc::PeerState> for PeerState {
    fn from(peer: tame_ipc::PeerState) -> PeerState {
        let state = match peer {
            tame_ipc::PeerState::Absent => "absent",
            tame_ipc::PeerState::Alive { .. } => "alive",
            tame_ipc::PeerState::Dead { .. } => "dead",
            tame_ipc::PeerState::Unknown { .. } => "unknown",
        };
        PeerState {
            state,
            pid: peer.pid(),
        }
    }
}

#[pymethods]
impl PeerState {
    /// "absent" (nobody holds the role), "alive", "dead" (certainly gone) or
    /// "unknown" (cannot be decided: another pid namespace, hidepid; never dead).
    #[getter]
    fn state(&self) -> &'static str {
        self.state
    }

    /// The holder's pid, None when absent.
    #[getter]
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.cast::<PeerState>() {
            Ok(other) => {
                let other = other.get();
                other.state == self.state && other.pid == self.pid
            }
            Err(_) => other.extract::<&str>().is_ok_and(|s| s == self.state),
        }
    }

    /// The hash of the state's name: equal objects (a PeerState and its name among
    /// them) must hash alike.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        pyo3::types::PyString::new(py, self.state).hash()
    }

    fn __repr__(&self) -> String {
        match self.pid {
            Some(pid) => format!("PeerState('{}', pid={pid})", self.state),
            None => format!("PeerState('{}')", self.state),
        }
    }
}

/// The segment's name without the `tame.` prefix, None when anonymous.
pub fn name_of(segment: &Segment) -> Option<String> {
    segment.name().map(|name| name.as_str().to_string())
}

/// The descriptor of the segment (valid while the handle lives).
pub fn fileno(segment: &Segment) -> i32 {
    use std::os::fd::AsRawFd;
    segment.fd().as_raw_fd()
}

/// The process that attached a role (producer, consumer, writer). A fork()ed child
/// (multiprocessing's default start method on Linux) inherits the Python handle, but
/// a ring has one producer and one consumer and a register one writer: the child
/// using it would be a second one racing the parent on the same indices. So every
/// operation is refused in another process, and the child's copy of the role is
/// forgotten rather than given up when dropped (giving it up would clear the parent's
/// claim, which the child's copy shares).
#[derive(Clone, Copy, Debug)]
pub struct Attached {
    pid: u32,
}

impl Attached {
    pub fn now() -> Attached {
        Attached {
            pid: std::process::id(),
        }
    }

    /// Refuses `what` in a process other than the one that attached it.
    pub fn check(&self, what: &str) -> PyResult<()> {
        let here = std::process::id();
        if here == self.pid {
            return Ok(());
        }
        Err(errors::InheritedError::new_err(format!(
            "this {what} was attached by process {} and inherited by process {here} through fork(): \
             the role has one holder, so it cannot be used here — attach the role in this process \
             (after the parent closed it) or pass the channel by name or descriptor instead",
            self.pid
        )))
    }

    /// Drops `raw` (giving the role up) in the attaching process; leaks it in an
    /// inherited copy, whose role claim is the parent's.
    pub fn forget_if_inherited<R>(&self, raw: &mut Option<R>) {
        if std::process::id() != self.pid {
            std::mem::forget(raw.take());
        }
    }
}
