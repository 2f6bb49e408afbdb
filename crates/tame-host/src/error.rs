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

/// A malformed line in a file, found by a parser that only sees text; the
/// caller names the file with [`ParseError::at`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl ParseError {
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }

    /// Attach the path the text came from.
    pub fn at(self, path: impl Into<PathBuf>) -> HostError {
        HostError::Parse {
            path: path.into(),
            line: self.line,
            message: self.message,
        }
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`: where a parser of a
/// user's file (a spec, a policy) stopped, for its error message.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    // A span inside a multi-byte character counts from that character's start.
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The kernel's name for an OS error number (`EACCES`), falling back to the number.
pub fn errno_name(code: i32) -> String {
    let errno = nix::errno::Errno::from_raw(code);
    if errno == nix::errno::Errno::UnknownErrno {
        format!("errno {code}")
    } else {
        format!("{errno:?}")
    }
}

/// A host file the model could not use: missing where it was expected,
/// unreadable, or malformed. Recorded in the model (and shown by `tame check`)
/// instead of failing the whole read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unreadable {
    /// The host path (`/proc/interrupts`), not the fixture path.
    pub path: String,
    /// `EACCES (Permission denied)`, `ENOENT (No such file or directory)` or `line 3: …`.
    pub error: String,
}

impl Unreadable {
    pub fn from_error(host_path: &std::path::Path, e: &HostError) -> Self {
        let error = match e {
            HostError::Read { source, .. } => match source.raw_os_error() {
                Some(code) => format!(
                    "{} ({})",
                    errno_name(code),
                    nix::errno::Errno::from_raw(code).desc()
                ),
                None => source.to_string(),
            },
            HostError::Parse { line, message, .. } => format!("line {line}: {message}"),
        };
        Self {
            path: host_path.display().to_string(),
            error,
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot read {}: {}", self.path, self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one_and_stays_on_character_boundaries() {
        let text = "a = 1\nbé = x\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, 10), (2, 4));
        // Inside "é" (bytes 7..9): its start.
        assert_eq!(line_column(text, 8), (2, 2));
        assert_eq!(line_column(text, 999), (3, 1));
    }

    #[test]
    fn unreadable_names_the_errno_and_the_host_path() {
        let e = HostError::Read {
            path: PathBuf::from("/fixture/proc/interrupts"),
            source: std::io::Error::from_raw_os_error(13),
        };
        let u = Unreadable::from_error(std::path::Path::new("/proc/interrupts"), &e);
        assert_eq!(u.error, "EACCES (Permission denied)");
        assert_eq!(
            u.to_string(),
            "cannot read /proc/interrupts: EACCES (Permission denied)"
        );
        let p = ParseError::new(3, "bad label").at("/fixture/proc/interrupts");
        assert_eq!(p.to_string(), "/fixture/proc/interrupts:3: bad label");
        let u = Unreadable::from_error(std::path::Path::new("/proc/interrupts"), &p);
        assert_eq!(u.error, "line 3: bad label");
        assert_eq!(errno_name(2), "ENOENT");
    }
}
