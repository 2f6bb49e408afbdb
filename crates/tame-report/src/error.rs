//! Why a report could not be made: the input is the user's to fix ([`ReportError::Invalid`],
//! nothing was written), or writing the report failed.

use std::io;
use std::path::PathBuf;

use tame_host::error::LayerError;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The inputs must change (what, why, what to do). Nothing was written.
    #[error("{0}")]
    Invalid(String),
    /// A figure could not be drawn (a plotting error: a fault of tame's, not the input's).
    #[error("cannot draw a figure: {0}")]
    Draw(String),
    /// The output directory cannot be written: the user picks another (`-o DIR`).
    #[error("cannot write {path}: {source} — choose a directory you can write with -o DIR")]
    Write { path: PathBuf, source: io::Error },
}

impl LayerError for ReportError {
    /// True when the command has to change (the CLI exits 2): an input, or an output
    /// directory that cannot be written (as for every other output file of tame).
    fn is_bad_input(&self) -> bool {
        matches!(self, ReportError::Invalid(_) | ReportError::Write { .. })
    }
    /// The write failure names its OS error before the remedy.
    fn names_its_cause(&self) -> bool {
        matches!(self, ReportError::Write { .. })
    }
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

pub(crate) fn invalid(message: impl Into<String>) -> ReportError {
    ReportError::Invalid(message.into())
}
