//! Why a bench could not run: the user's to fix ([`BenchError::Invalid`], nothing was
//! started), or a failure that keeps its cause.

use std::io;

/// The two outcomes callers act on differently (the CLI: exit 2 or 1).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The command must change (what, why, what to do). Nothing was started.
    #[error("{0}")]
    Invalid(String),
    /// Something failed while setting up or running; [`Failure`] keeps what failed underneath.
    #[error(transparent)]
    Failed(#[from] Failure),
}

/// What failed underneath: one type for every layer (see [`tame_host::Failure`]).
pub use tame_host::Failure;

impl BenchError {
    /// True when the command has to change (the CLI exits 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, BenchError::Invalid(_))
    }
}

/// The spawner's refusals keep their class: bad input stays bad input.
impl From<tame_launch::LaunchError> for BenchError {
    fn from(e: tame_launch::LaunchError) -> Self {
        match e {
            tame_launch::LaunchError::Invalid(m) => BenchError::Invalid(m),
            tame_launch::LaunchError::Failed(f) => BenchError::Failed(f),
        }
    }
}

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
        let cause = e.source().expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().kind(),
            io::ErrorKind::NotFound
        );
        assert!(invalid("--cpus names no CPU").is_bad_input());
        assert!(failed("a measuring thread panicked").source().is_none());
    }
}
