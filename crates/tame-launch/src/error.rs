//! Why a launch, detach or attach did not happen: the caller's to fix
//! ([`LaunchError::Invalid`], nothing was changed), or a failure that keeps its cause.

use std::io;

/// The two outcomes callers act on differently (the CLI: exit 2 or 1).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The request must change (what, why, what to do). Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// Something failed while doing it; [`Failure`] keeps what failed underneath.
    #[error(transparent)]
    Failed(#[from] Failure),
}

/// What failed underneath: one type for every layer (see [`tame_host::Failure`]).
pub use tame_host::Failure;

impl LaunchError {
    /// True when the caller has to change the request (the CLI exits 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, LaunchError::Invalid(_))
    }
}

/// The caller's mistake, in words: what, why, what to do.
pub(crate) fn invalid(message: impl Into<String>) -> LaunchError {
    LaunchError::Invalid(message.into())
}

/// A failure with nothing underneath.
pub(crate) fn failed(message: impl Into<String>) -> LaunchError {
    LaunchError::Failed(Failure::Message(message.into()))
}

/// `what` failed with the OS error `source`.
pub(crate) fn io_failed(what: impl Into<String>, source: io::Error) -> LaunchError {
    LaunchError::Failed(Failure::io(what, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_failure_keeps_its_cause_and_says_what_failed() {
        let e = io_failed(
            "cannot wait for the program",
            io::Error::from_raw_os_error(libc::ECHILD),
        );
        assert!(!e.is_bad_input());
        assert!(
            e.to_string().starts_with("cannot wait for the program: "),
            "{e}"
        );
        let cause = e.source().expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().raw_os_error(),
            Some(libc::ECHILD)
        );
        assert!(invalid("no program given").is_bad_input());
        assert!(failed("it broke").source().is_none());
    }
}
