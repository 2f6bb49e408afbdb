//! Rings from Python: `Ring` (the segment), `Producer` and `Consumer` (the roles).
//!
//! Every copy goes through tame-ipc's raw ends, so the checks and lifetimes stay in
//! Rust: a Python producer writes only whole elements into its own slot (sizes are
//! checked, addresses masked), a Python consumer that stops only makes the producer's
//! push report full. `peek` and `reserve` export the slot itself as a memoryview;
//! while one is exported, the end refuses to let the slot go (release, commit, pop,
//! push, close), so Python never holds a view of a slot the other side owns.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};
use tame_ipc::layout::Kind;
use tame_ipc::{ChannelSpec, PopError, PushError, RawConsumer, RawProducer, Segment};

use crate::buffer::with_buffer;
use crate::end::{whole_elements, EndState};
use crate::errors::{corrupted, to_py};
use crate::handle::{dup_fd, fileno, lock, name_of, PeerState};

fn spec(elem_size: u32, capacity: u64, elem_align: u32, type_tag: u64) -> ChannelSpec {
    ChannelSpec::raw(Kind::Ring, elem_size, elem_align, capacity).with_type_tag(type_tag)
}

/// A ring segment: one producer, one consumer, fixed-size elements.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Ring {
    ring: tame_ipc::Ring,
}

#[pymethods]
impl Ring {
    /// Creates /dev/shm/tame.NAME (refused if it exists).
    #[staticmethod]
    #[pyo3(signature = (name, elem_size, capacity, *, elem_align=8, type_tag=0, mode=0o600))]
    fn create(
        name: &str,
        elem_size: u32,
        capacity: u64,
        elem_align: u32,
        type_tag: u64,
        mode: u32,
    ) -> PyResult<Ring> {
        let spec = spec(elem_size, capacity, elem_align, type_tag);
        tame_ipc::Ring::create_with_mode(name, spec, mode)
            .map(|ring| Ring { ring })
            .map_err(to_py)
    }

    /// Opens an existing named ring that must have exactly this shape.
    #[staticmethod]
    #[pyo3(signature = (name, elem_size, capacity, *, elem_align=8, type_tag=0))]
    fn open(
        name: &str,
        elem_size: u32,
        capacity: u64,
        elem_align: u32,
        type_tag: u64,
    ) -> PyResult<Ring> {
        let spec = spec(elem_size, capacity, elem_align, type_tag);
        tame_ipc::Ring::open(name, spec)
            .map(|ring| Ring { ring })
            .map_err(to_py)
    }

    /// Opens an existing named ring of any shape (the segment chooses how much is
    /// mapped: with an untrusted creator, open the exact shape instead).
    #[staticmethod]
    fn open_any(name: &str) -> PyResult<Ring> {
        tame_ipc::Ring::open_any(name)
            .map(|ring| Ring { ring })
            .map_err(to_py)
    }

    /// An anonymous ring (sealed memfd); share it by passing `fileno()`.
    #[staticmethod]
    #[pyo3(signature = (elem_size, capacity, *, elem_align=8, type_tag=0))]
    fn create_anonymous(
        elem_size: u32,
        capacity: u64,
        elem_align: u32,
        type_tag: u64,
    ) -> PyResult<Ring> {
        let spec = spec(elem_size, capacity, elem_align, type_tag);
        tame_ipc::Ring::create_anonymous(spec)
            .map(|ring| Ring { ring })
            .map_err(to_py)
    }

    /// Maps a ring from a descriptor (duplicated; the caller keeps its own). It must
    /// have exactly this shape and be sealed against shrinking, else UntrustedError.
    #[staticmethod]
    #[pyo3(signature = (fd, elem_size, capacity, *, elem_align=8, type_tag=0))]
    fn from_fd(
        fd: i32,
        elem_size: u32,
        capacity: u64,
        elem_align: u32,
        type_tag: u64,
    ) -> PyResult<Ring> {
        let spec = spec(elem_size, capacity, elem_align, type_tag);
        tame_ipc::Ring::from_fd(dup_fd(fd)?, spec)
            .map(|ring| Ring { ring })
            .map_err(to_py)
    }

    /// Attaches the producer role (one per ring; taken over only from a dead holder).
    fn producer(&self) -> PyResult<Producer> {
        let raw = self.ring.raw_producer().map_err(to_py)?;
        Ok(Producer {
            segment: self.ring.segment().clone(),
            state: Mutex::new(EndState::new(raw, "producer")),
        })
    }

    /// Attaches the consumer role (one per ring; taken over only from a dead holder).
    fn consumer(&self) -> PyResult<Consumer> {
        let raw = self.ring.raw_consumer().map_err(to_py)?;
        Ok(Consumer {
            segment: self.ring.segment().clone(),
            state: Mutex::new(EndState::new(raw, "consumer")),
        })
    }

    /// The descriptor to pass to another process (valid while this ring lives).
    fn fileno(&self) -> i32 {
        fileno(self.ring.segment())
    }

    /// The name without the `tame.` prefix; None for an anonymous ring.
    #[getter]
    fn name(&self) -> Option<String> {
        name_of(self.ring.segment())
    }

    #[getter]
    fn elem_size(&self) -> u32 {
        self.ring.spec().elem_size
    }

    #[getter]
    fn elem_align(&self) -> u32 {
        self.ring.spec().elem_align
    }

    #[getter]
    fn capacity(&self) -> u64 {
        self.ring.spec().capacity
    }

    #[getter]
    fn type_tag(&self) -> u64 {
        self.ring.spec().type_tag
    }

    /// True once someone shrank this named segment and this side was cut off.
    #[getter]
    fn lost(&self) -> bool {
        self.ring.segment().is_lost()
    }

    /// Removes the name (mappings stay valid until closed); no-op when anonymous.
    fn unlink(&self) -> PyResult<()> {
        self.ring.segment().unlink().map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("<tame_ipc.Ring {}>", self.ring.segment().describe())
    }
}

/// The producer end of a ring. Never waits: a full ring is reported, not waited on.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Producer {
    segment: Segment,
    state: Mutex<EndState<RawProducer>>,
}

fn push_error(error: PushError, elem_size: usize, len: usize) -> PyErr {
    match error {
        PushError::WrongSize => PyValueError::new_err(format!(
            "the message is {len} B but the ring's elements are {elem_size} B — pass exactly one element"
        )),
        PushError::Corrupted | PushError::Full => corrupted("push"),
    }
}

#[pymethods]
impl Producer {
    /// Copies one element (any buffer of exactly `elem_size` bytes) into the ring.
    /// True if pushed, False if the ring is full (nothing was written).
    fn push(&self, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        let segment = &self.segment;
        // A push after reserve uses the reserved slot: the reservation is then over.
        lock(&self.state, "producer")?.moving(
            "push",
            |pushed| *pushed,
            |state| {
                let raw = state.raw()?;
                let elem_size = raw.elem_size();
                with_buffer(data, false, |ptr, len| {
                    if len != elem_size {
                        return Err(push_error(PushError::WrongSize, elem_size, len));
                    }
                    whole_elements(segment, ptr, len, elem_size)?;
                    // SAFETY: `ptr` is readable for `len` = elem_size bytes while the buffer
                    // is held, and lies outside this handle's mapping of the ring (checked
                    // above). Another mapping of the same segment would alias it; the
                    // protocol keeps them apart: a slot Python holds (peeked or reserved)
                    // is closed to new buffers before this call (`moving`), and any other
                    // slot is the peer's.
                    match unsafe { raw.push_ptr(ptr) } {
                        Ok(()) => Ok(true),
                        Err(PushError::Full) => Ok(false),
                        Err(e) => Err(push_error(e, elem_size, len)),
                    }
                })
            },
        )
    }

    /// Pushes as many whole elements of `data` (a multiple of `elem_size` bytes,
    /// e.g. a numpy array of records) as fit; returns how many.
    fn push_many(&self, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut state = lock(&self.state, "producer")?;
        state.copy_elements(
            &self.segment,
            data,
            false,
            "push_many",
            |raw, ptr, count| {
                // SAFETY: `ptr` is readable for count × elem_size bytes while the buffer
                // is held and lies outside this handle's mapping (copy_elements); another
                // mapping of the segment would alias, but Python's slot is closed to new
                // buffers first (`moving`) and the slots pushed into are ours alone.
                unsafe { raw.push_many_ptr(ptr, count) }
            },
        )
    }

    /// Reserves the next free slot and returns it as a writable memoryview of
    /// `elem_size` bytes (None when full): build the message in place, release the
    /// view, then `commit()`. Again before commit: the same slot.
    fn reserve<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyMemoryView>>> {
        let me = slf.get();
        let len = me.segment.spec().elem_size as usize;
        let mut state = lock(&me.state, "producer")?;
        // The raw reservation stays ours (and the address valid) until commit, a push
        // or the end's drop — the end outlives every view, which holds it.
        state.held_or_take(slf.as_any(), &me.segment, (len, false), |raw| {
            match raw.reserve_raw() {
                Ok(ptr) => Ok(Some(ptr)),
                Err(PushError::Full) => Ok(None),
                Err(e) => Err(push_error(e, len, 0)),
            }
        })
    }

    /// Publishes the reserved slot. Refused while its memoryview is still held.
    fn commit(&self) -> PyResult<()> {
        lock(&self.state, "producer")?.let_go(
            "commit",
            "nothing is reserved — call reserve() first",
            RawProducer::commit_reserved,
        )
    }

    /// Free slots now (reads the consumer's index).
    fn free_slots(&self) -> PyResult<u64> {
        let mut state = lock(&self.state, "producer")?;
        state
            .raw()?
            .free_slots()
            .map_err(|_| corrupted("free_slots"))
    }

    #[getter]
    fn capacity(&self) -> u64 {
        self.segment.spec().capacity
    }

    #[getter]
    fn elem_size(&self) -> u32 {
        self.segment.spec().elem_size
    }

    /// The consumer's liveness, checked now against /proc.
    fn consumer_state(&self) -> PeerState {
        self.segment
            .peer_state(tame_ipc::ring::CONSUMER_SLOT)
            .into()
    }

    /// Gives the producer role up (refused while a reserved slot's view is held).
    fn close(&self) -> PyResult<()> {
        lock(&self.state, "producer")?.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }
}

/// The consumer end of a ring. Never waits: an empty ring is reported.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Consumer {
    segment: Segment,
    state: Mutex<EndState<RawConsumer>>,
}

#[pymethods]
impl Consumer {
    /// The oldest element as bytes, or None when the ring is empty.
    fn pop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        // A pop after peek takes the peeked element: the peek is then over.
        lock(&self.state, "consumer")?.moving("pop", Option::is_some, |state| {
            let raw = state.raw()?;
            let mut outcome = Ok(());
            let bytes = PyBytes::new_with(py, raw.elem_size(), |dst| {
                outcome = raw.pop_bytes(dst);
                Ok(())
            })?;
            match outcome {
                Ok(()) => Ok(Some(bytes)),
                Err(PopError::Empty) => Ok(None),
                Err(_) => Err(corrupted("pop")),
            }
        })
    }

    /// Pops as many elements as are waiting into `out` (a writable, C-contiguous
    /// buffer of a whole number of elements, e.g. a numpy array of records), up to
    /// its length; returns how many. Allocates nothing.
    fn pop_into(&self, out: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut state = lock(&self.state, "consumer")?;
        state.copy_elements(&self.segment, out, true, "pop_into", |raw, ptr, count| {
            // SAFETY: `ptr` is writable for count × elem_size bytes while the buffer
            // is held and lies outside this handle's mapping (copy_elements); another
            // mapping of the segment would alias, but Python's peeked slot is closed to
            // new buffers first (`moving`) and the slots popped from are ours alone.
            unsafe { raw.pop_many_ptr(ptr, count) }
        })
    }

    /// The oldest element in place, as a read-only memoryview of `elem_size` bytes
    /// (None when empty), valid until `release()`, which frees the slot and is refused
    /// while the view (or anything made from it) is held. Again before release: the
    /// same slot. The producer is the peer: copy what you validate.
    fn peek<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyMemoryView>>> {
        let me = slf.get();
        let len = me.segment.spec().elem_size as usize;
        let mut state = lock(&me.state, "consumer")?;
        // The raw peek holds the slot (and the address stays valid) until release, a
        // pop or the end's drop — the end outlives every view, which holds it.
        state.held_or_take(slf.as_any(), &me.segment, (len, true), |raw| {
            match raw.peek_raw() {
                Ok(ptr) => Ok(Some(ptr.cast_mut())),
                Err(PopError::Empty) => Ok(None),
                Err(_) => Err(corrupted("peek")),
            }
        })
    }

    /// Frees the peeked slot for the producer. Refused while its view is held.
    fn release(&self) -> PyResult<()> {
        lock(&self.state, "consumer")?.let_go(
            "release",
            "nothing is peeked — call peek() first",
            RawConsumer::release_peeked,
        )
    }

    /// Elements waiting now.
    fn __len__(&self) -> PyResult<usize> {
        let mut state = lock(&self.state, "consumer")?;
        let waiting = state.raw()?.len().map_err(|_| corrupted("len"))?;
        Ok(waiting as usize)
    }

    #[getter]
    fn capacity(&self) -> u64 {
        self.segment.spec().capacity
    }

    #[getter]
    fn elem_size(&self) -> u32 {
        self.segment.spec().elem_size
    }

    /// The producer's liveness, checked now against /proc.
    fn producer_state(&self) -> PeerState {
        self.segment
            .peer_state(tame_ipc::ring::PRODUCER_SLOT)
            .into()
    }

    /// Gives the consumer role up (refused while a peeked slot's view is held).
    fn close(&self) -> PyResult<()> {
        lock(&self.state, "consumer")?.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }
}
