/// Why a bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The command must change (what, why, what to do). Nothing was started.
    #[error("{0}")]
    Invalid(String),
    /// Something failed while setting up or running.
    #[error("{0}")]
    Failed(String),
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

pub(crate) fn invalid(message: impl Into<String>) -> BenchError {
    BenchError::Invalid(message.into())
}
