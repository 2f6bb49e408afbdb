//! Errors of setup calls (create, open, attach). Hot-path operations have their own
//! small result types in the channel modules.

use nix::errno::Errno;

use crate::layout::{HeaderError, SpecError};

/// A setup error: says what failed, why, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid segment name {name:?}: {reason} — use 1 to {max} characters from A-Z a-z 0-9 . _ - (not starting with '.')", max = crate::segment::MAX_NAME_LEN)]
    InvalidName { name: String, reason: &'static str },
    #[error("invalid channel: {0}")]
    InvalidSpec(#[from] SpecError),
    #[error("{what} does not exist — create it first, or check the name")]
    NotFound { what: String },
    #[error(
        "{what} already exists — open it instead, or remove it (`tame ipc rm`) if it is left over"
    )]
    AlreadyExists { what: String },
    #[error("permission denied on {what}{detail} — run as its owner, or have the creator use a wider mode")]
    PermissionDenied { what: String, detail: String },
    #[error("{what} holds a {found}, but a {expected} was asked for — nothing was changed; open it with the same shape or remove it")]
    LayoutMismatch {
        what: String,
        found: String,
        expected: String,
    },
    #[error("{what}: {source}")]
    Header { what: String, source: HeaderError },
    #[error(
        "the {role} role of {what} is held by live process {pid} — only one {role} may be attached"
    )]
    RoleTaken {
        what: String,
        role: &'static str,
        pid: u32,
    },
    #[error("refusing {what}: {reason} — {remedy}")]
    Untrusted {
        what: String,
        reason: String,
        remedy: &'static str,
    },
    #[error("{what} was opened read-only, so the {op} role cannot be attached — open it read-write for that")]
    ReadOnly { what: String, op: &'static str },
    #[error("{what}: shared state is inconsistent ({detail}) — a peer wrote garbage; recreate the segment")]
    Corrupted { what: String, detail: String },
    #[error(
        "element type of {size} B (align {align}) does not match the segment's {spec_size} B (align {spec_align})"
    )]
    TypeMismatch {
        size: usize,
        align: usize,
        spec_size: u32,
        spec_align: u32,
    },
    #[error("{op} failed for {what}: {errno}")]
    Os {
        op: &'static str,
        what: String,
        errno: Errno,
    },
    #[error("cannot read /proc to identify this process: {0}")]
    Proc(#[from] std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn os(op: &'static str, what: &str, errno: Errno) -> Error {
        Error::Os {
            op,
            what: what.to_string(),
            errno,
        }
    }
}
