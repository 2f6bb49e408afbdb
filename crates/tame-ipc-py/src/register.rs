//! Latest-value registers from Python: `Register` (the segment), `Writer` (one per
//! register; never waits) and `Reader` (any number; never returns a torn value).

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tame_ipc::layout::Kind;
use tame_ipc::{ChannelSpec, Expect, RawReader, RawWriter, ReadError, Segment};

use crate::buffer::with_buffer;
use crate::errors::{closed, to_py, ContendedError};
use crate::handle::{dup_fd, fileno, lock, name_of, Attached, PeerState};

fn spec(elem_size: u32, elem_align: u32, type_tag: u64) -> ChannelSpec {
    ChannelSpec::raw(Kind::Register, elem_size, elem_align, 1).with_type_tag(type_tag)
}

fn wrap(register: tame_ipc::Result<tame_ipc::Register>) -> PyResult<Register> {
    register
        .map(|register| Register { register })
        .map_err(to_py)
}

/// A latest-value register segment.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Register {
    register: tame_ipc::Register,
}

#[pymethods]
impl Register {
    /// Creates /dev/shm/tame.NAME (refused if it exists).
    #[staticmethod]
    #[pyo3(signature = (name, elem_size, *, elem_align=8, type_tag=0, mode=0o600))]
    fn create(
        name: &str,
        elem_size: u32,
        elem_align: u32,
        type_tag: u64,
        mode: u32,
    ) -> PyResult<Register> {
        wrap(tame_ipc::Register::create_with_mode(
            name,
            spec(elem_size, elem_align, type_tag),
            mode,
        ))
    }

    /// Opens an existing named register that must have exactly this shape.
    #[staticmethod]
    #[pyo3(signature = (name, elem_size, *, elem_align=8, type_tag=0, read_only=false))]
    fn open(
        name: &str,
        elem_size: u32,
        elem_align: u32,
        type_tag: u64,
        read_only: bool,
    ) -> PyResult<Register> {
        let spec = spec(elem_size, elem_align, type_tag);
        wrap(if read_only {
            tame_ipc::Register::open_read_only(name, spec)
        } else {
            tame_ipc::Register::open(name, spec)
        })
    }

    /// An anonymous register (sealed memfd); share it by passing `fileno()`.
    #[staticmethod]
    #[pyo3(signature = (elem_size, *, elem_align=8, type_tag=0))]
    fn create_anonymous(elem_size: u32, elem_align: u32, type_tag: u64) -> PyResult<Register> {
        wrap(tame_ipc::Register::create_anonymous(spec(
            elem_size, elem_align, type_tag,
        )))
    }

    /// Maps a register from a descriptor (duplicated); it must have exactly this
    /// shape and be sealed against shrinking, else UntrustedError.
    #[staticmethod]
    #[pyo3(signature = (fd, elem_size, *, elem_align=8, type_tag=0, read_only=false))]
    fn from_fd(
        fd: i32,
        elem_size: u32,
        elem_align: u32,
        type_tag: u64,
        read_only: bool,
    ) -> PyResult<Register> {
        let (fd, expect) = (
            dup_fd(fd)?,
            Expect::Exact(spec(elem_size, elem_align, type_tag)),
        );
        let segment = if read_only {
            Segment::from_fd_read_only(fd, expect)
        } else {
            Segment::from_fd(fd, expect)
        };
        wrap(segment.and_then(tame_ipc::Register::from_segment))
    }

    /// Attaches the writer role (one per register; taken over only from a dead holder).
    fn writer(&self) -> PyResult<Writer> {
        let raw = self.register.raw_writer().map_err(to_py)?;
        Ok(Writer {
            raw: Mutex::new(Some(raw)),
            segment: self.register.segment().clone(),
            attached: Attached::now(),
        })
    }

    /// A reader (any number); a read gives up after `max_attempts` overlapping writes.
    #[pyo3(signature = (max_attempts=256))]
    fn reader(&self, max_attempts: u32) -> PyResult<Reader> {
        let mut raw = self.register.raw_reader().map_err(to_py)?;
        raw.set_max_attempts(max_attempts);
        Ok(Reader {
            raw: Mutex::new(raw),
            segment: self.register.segment().clone(),
        })
    }

    fn fileno(&self) -> i32 {
        fileno(self.register.segment())
    }

    #[getter]
    fn name(&self) -> Option<String> {
        name_of(self.register.segment())
    }

    #[getter]
    fn elem_size(&self) -> u32 {
        self.register.spec().elem_size
    }

    #[getter]
    fn read_only(&self) -> bool {
        self.register.segment().is_read_only()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.register.segment().is_lost()
    }

    fn unlink(&self) -> PyResult<()> {
        self.register.segment().unlink().map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("<tame_ipc.Register {}>", self.register.segment().describe())
    }
}

/// The writer end. `write` never waits.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Writer {
    raw: Mutex<Option<RawWriter>>,
    segment: Segment,
    attached: Attached,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(|p| p.into_inner());
        self.attached.forget_if_inherited(raw);
    }
}

/// Checks a caller's buffer of `len` bytes at `ptr` against a register of `elem_size`
/// bytes, before anything is read or written through it: exactly one value (so a
/// zero-length buffer, whose address may be NULL, is refused here), outside the
/// register's own mapping.
fn one_value(segment: &Segment, ptr: *const u8, len: usize, elem_size: usize) -> PyResult<()> {
    if len != elem_size {
        return Err(PyValueError::new_err(format!(
            "the buffer is {len} B but the register holds {elem_size} B — pass exactly one value"
        )));
    }
    if segment.overlaps(ptr, len) {
        return Err(PyValueError::new_err(
            "the buffer lies inside this register's own shared memory — pass a buffer of your own",
        ));
    }
    Ok(())
}

#[pymethods]
impl Writer {
    /// Publishes `data` (any buffer of exactly `elem_size` bytes).
    fn write(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.attached.check("writer")?;
        let mut raw = lock(&self.raw, "writer")?;
        let raw = raw.as_mut().ok_or_else(|| closed("writer"))?;
        with_buffer(data, false, |ptr, len| {
            one_value(&self.segment, ptr, len, raw.elem_size())?;
            // SAFETY: the buffer is readable for `len` = elem_size bytes while it is
            // held and lies outside the register (checked above). It is read through
            // the raw pointer, never as a slice: it may be shared memory that other
            // processes change meanwhile (a value torn that way is the caller's).
            unsafe { raw.write_ptr(ptr) };
            Ok(())
        })
    }

    /// Gives the writer role up.
    fn close(&self) -> PyResult<()> {
        self.attached.check("writer")?;
        *lock(&self.raw, "writer")? = None;
        Ok(())
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

/// A value read from a register.
#[pyclass(frozen, module = "tame_ipc._native", get_all)]
pub struct Sample {
    /// The value's bytes.
    value: Py<PyBytes>,
    /// Written since this reader's previous successful read.
    fresh: bool,
    /// Number of writes so far.
    version: u64,
}

#[pymethods]
impl Sample {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Sample(value={}, fresh={}, version={})",
            self.value
                .bind(py)
                .as_any()
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            if self.fresh { "True" } else { "False" },
            self.version
        )
    }
}

/// A reader. `read` never returns a torn value.
#[pyclass(frozen, module = "tame_ipc._native")]
pub struct Reader {
    raw: Mutex<RawReader>,
    segment: Segment,
}

fn read_error(error: ReadError) -> PyErr {
    match error {
        ReadError::Contended => ContendedError::new_err(
            "every read attempt overlapped a write — retry (or raise max_attempts)",
        ),
        ReadError::WrongSize | ReadError::Empty => {
            PyValueError::new_err("the buffer must hold exactly one value")
        }
    }
}

#[pymethods]
impl Reader {
    /// The latest value, or None if nothing was written yet; ContendedError when
    /// every attempt overlapped a write.
    fn read(&self, py: Python<'_>) -> PyResult<Option<Sample>> {
        let mut raw = lock(&self.raw, "reader")?;
        let mut outcome = Ok((false, 0));
        let bytes = PyBytes::new_with(py, raw.elem_size(), |dst| {
            outcome = raw.read_bytes(dst);
            Ok(())
        })?;
        match outcome {
            Ok((fresh, version)) => Ok(Some(Sample {
                value: bytes.unbind(),
                fresh,
                version,
            })),
            Err(ReadError::Empty) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }

    /// Reads the latest value into `out` (a writable buffer of exactly `elem_size`
    /// bytes, e.g. a one-record numpy array) without allocating; returns
    /// (fresh, version), or None if nothing was written yet.
    fn read_into(&self, out: &Bound<'_, PyAny>) -> PyResult<Option<(bool, u64)>> {
        let mut raw = lock(&self.raw, "reader")?;
        with_buffer(out, true, |ptr, len| {
            one_value(&self.segment, ptr, len, raw.elem_size())?;
            // SAFETY: the buffer is writable for `len` = elem_size bytes while it is
            // held and lies outside the register (checked above); it is written through
            // the raw pointer, never as a slice, since other processes may share it.
            match unsafe { raw.read_ptr(ptr) } {
                Ok(read) => Ok(Some(read)),
                Err(ReadError::Empty) => Ok(None),
                Err(e) => Err(read_error(e)),
            }
        })
    }

    /// The writer's liveness, checked now against /proc.
    fn writer_state(&self) -> PyResult<PeerState> {
        Ok(lock(&self.raw, "reader")?.writer_state().into())
    }
}
