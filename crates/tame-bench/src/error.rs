//! Why a bench could not run: the user's to fix ([`BenchError::Invalid`], nothing was
//! started), or a failure that keeps its cause.

use std::io;

/// The two outcomes callers act on differently (the CLI: exit 2 or 1): the one error type
/// of every two-answer layer ([`tame_host::error::Error`]), under this layer's name.
pub type BenchError = tame_host::error::Error;

/// What failed underneath: one type for every layer (see [`tame_host::Failure`]).
pub use tame_host::Failure;

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// The user's mistake, in words: what, why, what to do.
pub(crate) fn invalid(message: impl Into<String>) -> BenchError {
    BenchError::Invalid(message.into())
}

/// A failure with nothing underneath.
pub(crate) fn failed(message: impl Into<String>) -> BenchError {
    BenchError::Failed(Failure::Message(message.into()))
}

/// `what` failed with the OS error `source`.
pub(crate) fn io_failed(what: impl Into<String>, source: io::Error) -> BenchError {
    BenchError::Failed(Failure::io(what, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_failure_keeps_its_cause_and_says_what_failed() {
        let e = io_failed(
            "cannot start stress-ng",
            io::Error::from(io::ErrorKind::NotFound),
        );
        assert!(!e.is_bad_input());
        assert!(e.to_string().starts_with("cannot start stress-ng: "), "{e}");
        // The layer's error keeps the failure, and the failure its OS error.
        let cause = e
            .source()
            .and_then(|f| f.source())
            .expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().kind(),
            io::ErrorKind::NotFound
        );
        assert!(invalid("--cpus names no CPU").is_bad_input());
        assert!(failed("a measuring thread panicked")
            .source()
            .and_then(|f| f.source())
            .is_none());
    }
}
