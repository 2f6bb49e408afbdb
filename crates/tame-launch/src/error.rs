//! Why a launch, detach or attach did not happen: the caller's to fix
//! ([`LaunchError::Invalid`], nothing was changed), or a failure that keeps its cause.

use std::io;

/// The two outcomes callers act on differently (the CLI: exit 2 or 1): the one error type
/// of every two-answer layer ([`tame_host::error::Error`]), under this layer's name.
pub type LaunchError = tame_host::error::Error;

/// What failed underneath: one type for every layer (see [`tame_host::Failure`]).
pub use tame_host::Failure;

/// The caller's mistake, in words: what, why, what to do.
pub(crate) fn invalid(message: impl Into<String>) -> LaunchError {
    LaunchError::Invalid(message.into())
}

/// A failure with nothing underneath.
pub(crate) fn failed(message: impl Into<String>) -> LaunchError {
    LaunchError::Failed(Failure::Message(message.into()))
}

/// A lower layer's error that says by itself what failed, kept as the cause.
pub(crate) fn failed_by(source: impl std::error::Error + Send + Sync + 'static) -> LaunchError {
    LaunchError::Failed(Failure::lower(source))
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
        // The layer's error keeps the failure, and the failure its OS error.
        let cause = e
            .source()
            .and_then(|f| f.source())
            .expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().raw_os_error(),
            Some(libc::ECHILD)
        );
        assert!(invalid("no program given").is_bad_input());
        assert!(failed("it broke")
            .source()
            .and_then(|f| f.source())
            .is_none());
    }
}
