//! Why an assessment could not run or finish: bad input (nothing was changed) or a
//! failure underneath, which keeps its cause.

use tame_bench::BenchError;
use tame_host::error::LayerError;
use tame_partition::ApplyError;

#[derive(Debug, thiserror::Error)]
pub enum AssessError {
    /// The command must change (what, why, what to do). Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Failed(String),
}

/// Wraps the bench and apply layers' errors (keeping their class) beside its own, so this
/// layer keeps its own type rather than [`tame_host::error::Error`].
impl AssessError {
    /// True when the command has to change (the CLI exits 2). Kept beside the
    /// [`LayerError`] impl so callers need not import the trait.
    pub fn is_bad_input(&self) -> bool {
        match self {
            AssessError::Invalid(_) => true,
            AssessError::Bench(e) => e.is_bad_input(),
            AssessError::Apply(e) => LayerError::is_bad_input(e),
            AssessError::Io { .. } | AssessError::Failed(_) => false,
        }
    }
}

impl LayerError for AssessError {
    fn is_bad_input(&self) -> bool {
        AssessError::is_bad_input(self)
    }
    /// A wrapped layer's message is complete; an I/O failure names its OS error.
    fn names_its_cause(&self) -> bool {
        match self {
            AssessError::Bench(e) => e.names_its_cause(),
            AssessError::Apply(e) => e.names_its_cause(),
            AssessError::Io { .. } => true,
            AssessError::Invalid(_) | AssessError::Failed(_) => false,
        }
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> AssessError {
    AssessError::Invalid(message.into())
}

pub(crate) fn io_failed(what: impl Into<String>, source: std::io::Error) -> AssessError {
    AssessError::Io {
        what: what.into(),
        source,
    }
}
