//! Event counters from Python: `Event` (the segment), `Signaller` and `Listener`.
//! `Listener.wait` sleeps without holding the GIL.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tame_ipc::{ChannelSpec, Expect, Segment};

use crate::errors::to_py;
use crate::handle::{dup_fd, fileno, lock, name_of};

fn wrap(event: tame_ipc::Result<tame_ipc::Event>) -> PyResult<Event> {
    event.map(|event| Event { event }).map_err(to_py)
}

/// An event counter segment.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Event {
    event: tame_ipc::Event,
}

#[pymethods]
impl Event {
    /// Creates /dev/shm/tame.NAME (refused if it exists).
    #[staticmethod]
    #[pyo3(signature = (name, *, mode=0o600))]
    fn create(name: &str, mode: u32) -> PyResult<Event> {
        wrap(tame_ipc::Event::create_with_mode(name, mode))
    }

    /// Opens an existing named event counter (read-only: listeners only).
    #[staticmethod]
    #[pyo3(signature = (name, *, read_only=false))]
    fn open(name: &str, read_only: bool) -> PyResult<Event> {
        wrap(if read_only {
            tame_ipc::Event::open_read_only(name)
        } else {
            tame_ipc::Event::open(name)
        })
    }

    /// An anonymous event counter (sealed memfd); share it by passing `fileno()`.
    #[staticmethod]
    fn create_anonymous() -> PyResult<Event> {
        wrap(tame_ipc::Event::create_anonymous())
    }

    /// Maps an event counter from a descriptor (duplicated; sealed against
    /// shrinking, else UntrustedError).
    #[staticmethod]
    #[pyo3(signature = (fd, *, read_only=false))]
    fn from_fd(fd: i32, read_only: bool) -> PyResult<Event> {
        let (fd, expect) = (dup_fd(fd)?, Expect::Exact(ChannelSpec::event()));
        let segment = if read_only {
            Segment::from_fd_read_only(fd, expect)
        } else {
            Segment::from_fd(fd, expect)
        };
        wrap(segment.and_then(tame_ipc::Event::from_segment))
    }

    /// A signaller (refused for an event opened read-only).
    fn signaller(&self) -> PyResult<Signaller> {
        let signaller = self.event.signaller().map_err(to_py)?;
        Ok(Signaller { signaller })
    }

    /// A listener that counts events from now on.
    fn listener(&self) -> Listener {
        Listener {
            listener: Mutex::new(self.event.listener()),
        }
    }

    fn fileno(&self) -> i32 {
        fileno(self.event.segment())
    }

    #[getter]
    fn name(&self) -> Option<String> {
        name_of(self.event.segment())
    }

    #[getter]
    fn read_only(&self) -> bool {
        self.event.segment().is_read_only()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.event.segment().is_lost()
    }

    fn unlink(&self) -> PyResult<()> {
        self.event.segment().unlink().map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("<tame_ipc.Event {}>", self.event.segment().describe())
    }
}

/// Raises events.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Signaller {
    signaller: tame_ipc::Signaller,
}

#[pymethods]
impl Signaller {
    /// Counts one event (one atomic; wakes nobody: sleeping listeners notice at
    /// their timeout).
    fn signal(&self) {
        self.signaller.signal();
    }

    /// Counts one event and wakes sleeping listeners (a futex call when one sleeps).
    fn signal_and_wake(&self) {
        self.signaller.signal_and_wake();
    }
}

/// Observes events.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Listener {
    listener: Mutex<tame_ipc::Listener>,
}

#[pymethods]
impl Listener {
    /// Events since the previous poll or wait (never waits).
    fn poll(&self) -> PyResult<u32> {
        Ok(lock(&self.listener, "listener")?.poll())
    }

    /// Sleeps (without the GIL) until an event arrives or `timeout` seconds pass
    /// (any non-negative number, `math.inf` included: a huge one waits until an event);
    /// returns the number of new events, 0 on timeout. Ctrl-C (any signal handler that
    /// raises) interrupts it within a slice.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<u32> {
        if timeout.is_nan() || timeout < 0.0 {
            return Err(PyValueError::new_err(format!(
                "timeout {timeout} s is not a non-negative number of seconds"
            )));
        }
        // Saturates: tame-ipc adds each slice to Instant::now(), never the whole timeout.
        let timeout = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::MAX);
        let mut guard = lock(&self.listener, "listener")?;
        // The guard stays here; the sleep borrows the listener it holds (Send).
        let listener: &mut tame_ipc::Listener = &mut guard;
        let start = Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            let slice = left.min(WAIT_SLICE);
            let events = py.detach(|| listener.wait(slice));
            if events > 0 {
                return Ok(events);
            }
            // Runs Python's signal handlers; KeyboardInterrupt ends the wait.
            py.check_signals()?;
            if left <= WAIT_SLICE {
                return Ok(0);
            }
        }
    }
}

/// The longest sleep between two checks for signals in `Listener.wait`: Ctrl-C is
/// seen within this, and a wait costs at most 10 wake-ups a second.
const WAIT_SLICE: Duration = Duration::from_millis(100);
