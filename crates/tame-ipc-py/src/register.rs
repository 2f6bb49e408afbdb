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
use crate::handle::{dup_fd, fileno, lock, name_of, PeerState};

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
        })
    }

    /// A reader (any number); a read gives up after `max_attempts` overlapping writes.
    #[pyo3(signature = (max_attempts=256))]
    fn reader(&self, max_attempts: u32) -> PyResult<Reader> {
        let mut raw = self.register.raw_reader().map_err(to_py)?;
        raw.set_max_attempts(max_attempts);
        Ok(Reader {
            raw: Mutex::new(raw),
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
}

#[pymethods]
impl Writer {
    /// Publishes `data` (any buffer of exactly `elem_size` bytes).
    fn write(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut raw = lock(&self.raw, "writer")?;
        let raw = raw.as_mut().ok_or_else(|| closed("writer"))?;
        with_buffer(data, false, |ptr, len| {
            if len != raw.elem_size() {
                return Err(PyValueError::new_err(format!(
                    "the value is {len} B but the register holds {} B — pass exactly one value",
                    raw.elem_size()
                )));
            }
            // SAFETY: the buffer is readable for `len` bytes while it is held; the
            // slice is only read (copied into the register's words).
            let src = unsafe { std::slice::from_raw_parts(ptr, len) };
            raw.write_bytes(src)
                .map_err(|_| PyValueError::new_err("wrong size"))
        })
    }

    /// Gives the writer role up.
    fn close(&self) -> PyResult<()> {
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
            // SAFETY: the buffer is writable for `len` bytes while it is held and is
            // the caller's memory, not the register's (the register is only read
            // atomically; a view of it is never exported).
            let dst = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            match raw.read_bytes(dst) {
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
