/// Why a launch, detach or attach did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The request must change (what, why, what to do). Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// Something failed while doing it.
    #[error("{0}")]
    Failed(String),
}

pub(crate) fn invalid(message: impl Into<String>) -> LaunchError {
    LaunchError::Invalid(message.into())
}

pub(crate) fn failed(message: impl Into<String>) -> LaunchError {
    LaunchError::Failed(message.into())
}
