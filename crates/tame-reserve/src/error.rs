//! Why a reservation could not be made or released.

/// `Invalid` and `Refused` mean the user must change the request (exit 2); nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// The request is malformed or names something that is not there (what, why, what to do).
    #[error("{0}")]
    Invalid(String),
    /// Well-formed, but admission control (ours or the kernel's) said no.
    #[error("{0}")]
    Refused(String),
    /// Something failed while applying or releasing.
    #[error("{0}")]
    Failed(String),
}

impl ReserveError {
    /// True when the user has to change the request: the CLI exits 2.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ReserveError::Invalid(_) | ReserveError::Refused(_))
    }
}

pub type Result<T, E = ReserveError> = std::result::Result<T, E>;

pub(crate) fn invalid(message: impl Into<String>) -> ReserveError {
    ReserveError::Invalid(message.into())
}

pub(crate) fn refused(message: impl Into<String>) -> ReserveError {
    ReserveError::Refused(message.into())
}

pub(crate) fn failed(message: impl Into<String>) -> ReserveError {
    ReserveError::Failed(message.into())
}
