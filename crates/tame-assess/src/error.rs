//! Why an assessment could not run or finish: bad input (nothing was changed) or a
//! failure underneath, which keeps its cause.

use tame_bench::BenchError;
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

impl AssessError {
    /// True when the command has to change (the CLI exits 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            AssessError::Invalid(_) => true,
            AssessError::Bench(e) => e.is_bad_input(),
            AssessError::Apply(e) => e.is_bad_input(),
            AssessError::Io { .. } | AssessError::Failed(_) => false,
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
