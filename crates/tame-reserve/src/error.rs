//! Why a reservation could not be made or released: the user's to change (`Invalid`,
//! `Refused`: nothing was changed), or a failure that keeps its cause.

use std::io;

use tame_host::error::LayerError;

/// `Invalid` and `Refused` mean the user must change the request (exit 2); nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    /// The request is malformed or names something that is not there (what, why, what to do).
    #[error("{0}")]
    Invalid(String),
    /// Well-formed, but admission control (ours or the kernel's) said no.
    #[error("{0}")]
    Refused(String),
    /// Something failed while applying or releasing; [`Failure`] keeps what failed underneath,
    /// and the message is its report (what: cause; see [`tame_host::error`]).
    #[error("{}", tame_host::error::report(.0))]
    Failed(#[from] Failure),
}

/// What failed underneath: one type for every layer (see [`tame_host::Failure`]).
pub use tame_host::Failure;

/// A third answer beside the two of [`tame_host::error::Error`] (a refusal by admission
/// control, which the user answers differently from a malformed request), so this layer
/// keeps its own type; a launch error converts into it keeping its class.
impl ReserveError {
    /// True when the user has to change the request: the CLI exits 2. Kept beside the
    /// [`LayerError`] impl so callers need not import the trait.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ReserveError::Invalid(_) | ReserveError::Refused(_))
    }
}

impl LayerError for ReserveError {
    fn is_bad_input(&self) -> bool {
        ReserveError::is_bad_input(self)
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, ReserveError::Failed(_))
    }
}

/// A launch refused as bad input stays bad input; a launch failure is kept as the cause.
impl From<tame_launch::LaunchError> for ReserveError {
    fn from(e: tame_launch::LaunchError) -> Self {
        match e {
            tame_launch::LaunchError::Invalid(m) => ReserveError::Invalid(m),
            tame_launch::LaunchError::Failed(f) => ReserveError::Failed(f),
        }
    }
}

pub type Result<T, E = ReserveError> = std::result::Result<T, E>;

/// The user's mistake, in words: what, why, what to do.
pub(crate) fn invalid(message: impl Into<String>) -> ReserveError {
    ReserveError::Invalid(message.into())
}

/// Admission control said no: how much was asked, how much is free, what to do.
pub(crate) fn refused(message: impl Into<String>) -> ReserveError {
    ReserveError::Refused(message.into())
}

/// A failure with nothing underneath.
pub(crate) fn failed(message: impl Into<String>) -> ReserveError {
    ReserveError::Failed(Failure::Message(message.into()))
}

/// A lower layer's error that says by itself what failed, kept as the cause.
pub(crate) fn failed_by(source: impl std::error::Error + Send + Sync + 'static) -> ReserveError {
    ReserveError::Failed(Failure::lower(source))
}

/// A lower layer's error, keeping its class (a journal in an unsafe place stays bad input)
/// and its cause.
pub(crate) fn lower(e: impl tame_host::error::LayerError + Send + Sync + 'static) -> ReserveError {
    tame_host::error::Error::from_layer(e).into()
}

/// `what` failed with the OS error `source`.
pub(crate) fn io_failed(what: impl Into<String>, source: io::Error) -> ReserveError {
    ReserveError::Failed(Failure::io(what, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn failures_keep_their_cause_and_refusals_are_bad_input() {
        let e = io_failed(
            "cannot listen on /run/tame/serve.sock",
            io::Error::from_raw_os_error(libc::EADDRINUSE),
        );
        assert!(!e.is_bad_input());
        assert!(
            e.to_string()
                .starts_with("cannot listen on /run/tame/serve.sock: "),
            "{e}"
        );
        // The layer's error keeps the failure, and the failure its OS error.
        let cause = e
            .source()
            .and_then(|f| f.source())
            .expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().raw_os_error(),
            Some(libc::EADDRINUSE)
        );
        assert!(refused("CPU bandwidth exhausted").is_bad_input());
        assert!(invalid("share must be above 0 %").is_bad_input());
        assert!(failed("no server running")
            .source()
            .and_then(|f| f.source())
            .is_none());
    }

    #[test]
    fn launch_errors_keep_their_class() {
        let bad: ReserveError = tame_launch::LaunchError::Invalid("no such program".into()).into();
        assert!(matches!(bad, ReserveError::Invalid(ref m) if m == "no such program"));
        let failed: ReserveError = tame_launch::LaunchError::Failed(
            tame_launch::error::Failure::Message("cannot fork".into()),
        )
        .into();
        assert!(!failed.is_bad_input());
        assert_eq!(failed.to_string(), "cannot fork");
    }
}
