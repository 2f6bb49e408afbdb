use std::path::PathBuf;

/// A failure to read or understand a host file. Always names the path.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl HostError {
    /// The raw OS error (e.g. ENOENT, EACCES) behind a read failure, if any.
    pub fn os_error(&self) -> Option<i32> {
        match self {
            HostError::Read { source, .. } => source.raw_os_error(),
            HostError::Parse { .. } => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, HostError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}
