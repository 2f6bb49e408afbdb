//! Python exceptions for tame-ipc errors: one class per outcome a caller may handle
//! differently, all below `TameIpcError`, each carrying the library's message (what
//! failed, why, what to do). Bad arguments (a name, a shape, a buffer of the wrong
//! size) are `ValueError`s, as in any Python API.

use pyo3::create_exception;
use pyo3::exceptions::{PyBufferError, PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tame_ipc::layout::HeaderError;
use tame_ipc::Error;

create_exception!(
    _native,
    TameIpcError,
    PyException,
    "Base class of every tame-ipc error."
);
create_exception!(
    _native,
    NotFoundError,
    TameIpcError,
    "No segment of that name."
);
create_exception!(
    _native,
    AlreadyExistsError,
    TameIpcError,
    "A segment of that name exists; nothing was changed."
);
create_exception!(
    _native,
    PermissionDeniedError,
    TameIpcError,
    "Permission denied, or a writing role asked of a read-only handle."
);
create_exception!(
    _native,
    LayoutMismatchError,
    TameIpcError,
    "The segment has another kind, element size, alignment, capacity or type tag."
);
create_exception!(
    _native,
    IncompatibleVersionError,
    TameIpcError,
    "The segment has another layout major version."
);
create_exception!(
    _native,
    NotASegmentError,
    TameIpcError,
    "The file is not a tame-ipc segment (wrong magic)."
);
create_exception!(
    _native,
    NotReadyError,
    TameIpcError,
    "The creator is still initialising the segment; retry."
);
create_exception!(
    _native,
    RoleTakenError,
    TameIpcError,
    "The producer, consumer or writer role is held by a live (or undecidable) process."
);
create_exception!(
    _native,
    CorruptedError,
    TameIpcError,
    "The header or an index is impossible: a peer wrote garbage; recreate the channel."
);
create_exception!(
    _native,
    UntrustedError,
    TameIpcError,
    "Refused as unsafe to adopt (planted, world-writable, symlink, unsealed descriptor)."
);
create_exception!(
    _native,
    ContendedError,
    TameIpcError,
    "A register read overlapped writes on every attempt; retry."
);
create_exception!(_native, OsError, TameIpcError, "A system call failed.");
create_exception!(
    _native,
    InheritedError,
    TameIpcError,
    "A producer, consumer or writer used in a process it was not attached in (inherited through fork())."
);

/// The Python exception for a setup error.
pub fn to_py(error: Error) -> PyErr {
    let message = error.to_string();
    match &error {
        Error::InvalidName { .. } | Error::InvalidSpec(_) | Error::TypeMismatch { .. } => {
            PyValueError::new_err(message)
        }
        Error::NotFound { .. } => NotFoundError::new_err(message),
        Error::AlreadyExists { .. } => AlreadyExistsError::new_err(message),
        Error::PermissionDenied { .. } | Error::ReadOnly { .. } => {
            PermissionDeniedError::new_err(message)
        }
        Error::Untrusted { .. } => UntrustedError::new_err(message),
        Error::LayoutMismatch { .. } => LayoutMismatchError::new_err(message),
        Error::Header { source, .. } => match source {
            HeaderError::NotReady => NotReadyError::new_err(message),
            HeaderError::BadMagic(_) => NotASegmentError::new_err(message),
            HeaderError::IncompatibleVersion { .. } => IncompatibleVersionError::new_err(message),
            HeaderError::Corrupted(_) => CorruptedError::new_err(message),
        },
        Error::RoleTaken { .. } => RoleTakenError::new_err(message),
        Error::Corrupted { .. } => CorruptedError::new_err(message),
        Error::Os { .. } | Error::Proc(_) => OsError::new_err(message),
    }
}

/// A peer published an impossible index while this side used the channel.
pub fn corrupted(what: &str) -> PyErr {
    CorruptedError::new_err(format!(
        "{what}: the peer published an impossible index or sequence word — a peer wrote garbage; recreate the channel"
    ))
}

/// A handle used after `close()`.
pub fn closed(what: &str) -> PyErr {
    PyValueError::new_err(format!("this {what} was closed — open or attach a new one"))
}

/// An end handle used from two threads at once (end handles are for one thread at a time).
pub fn busy(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "this {what} is in use by another thread — end handles are used by one thread at a time; attach one per thread where the role allows it"
    ))
}

/// An operation that would move a slot still exported as a memoryview.
pub fn exported(what: &str, exports: usize) -> PyErr {
    PyBufferError::new_err(format!(
        "{what}: the slot's memoryview is still in use ({exports} export(s)) — release it first (`view.release()`, or `with ... as view:`) and drop numpy arrays made from it"
    ))
}

/// Registers the exception classes in the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("TameIpcError", py.get_type::<TameIpcError>())?;
    module.add("NotFoundError", py.get_type::<NotFoundError>())?;
    module.add("AlreadyExistsError", py.get_type::<AlreadyExistsError>())?;
    module.add(
        "PermissionDeniedError",
        py.get_type::<PermissionDeniedError>(),
    )?;
    module.add("LayoutMismatchError", py.get_type::<LayoutMismatchError>())?;
    module.add(
        "IncompatibleVersionError",
        py.get_type::<IncompatibleVersionError>(),
    )?;
    module.add("NotASegmentError", py.get_type::<NotASegmentError>())?;
    module.add("NotReadyError", py.get_type::<NotReadyError>())?;
    module.add("RoleTakenError", py.get_type::<RoleTakenError>())?;
    module.add("CorruptedError", py.get_type::<CorruptedError>())?;
    module.add("UntrustedError", py.get_type::<UntrustedError>())?;
    module.add("ContendedError", py.get_type::<ContendedError>())?;
    module.add("OsError", py.get_type::<OsError>())?;
    module.add("InheritedError", py.get_type::<InheritedError>())?;
    Ok(())
}
