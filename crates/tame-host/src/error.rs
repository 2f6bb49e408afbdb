//! Errors of the host layer, and the rules every layer's errors follow.
//!
//! - **Classification.** Every layer's error type implements [`LayerError`]: whether the
//!   caller has to change the command (the CLI exits 2) or something failed underneath
//!   (exit 1). The CLI walks an error's `source()` chain and asks each error it knows, so a
//!   bad input wrapped in another error is still bad input.
//! - **One error type per layer boundary.** A layer that only tells "change the request"
//!   from "it failed" uses [`Error`] (`Invalid(String)` / `Failed(Failure)`) under its own
//!   name (`tame_bench::BenchError`, `tame_launch::LaunchError`); a layer with more outcomes
//!   (a refusal, a wrapped lower layer) keeps its own enum.
//! - **A cause is printed once.** An error inside a layer ([`Failure`]) says only what
//!   failed; its cause is `source()`. [`report`] prints an error chain once, `what: cause:
//!   cause`, joining each error's message with ": " and ending after an error that
//!   [names its cause](LayerError::names_its_cause) itself. Two kinds do: the error a layer
//!   returns ([`Error::Failed`], `ReserveError::Failed`), whose message is the [`report`] of
//!   what failed underneath so that `{e}` of a layer's error reads the same wherever it is
//!   printed; and leaf errors whose message names its OS error mid-sentence, before a
//!   remedy or as the last word the user reads ([`HostError::Read`],
//!   [`JournalError::Io`](crate::journal::JournalError::Io),
//!   [`PlaceError`](crate::placement::PlaceError)). Either way the cause stays reachable
//!   through `source()` for code that acts on it, and nothing is stripped by comparing text.
//!   A printer that meets errors of crates below this one or of libraries whose message
//!   names its source (tame-ipc's, serde_json's I/O error) answers for them through
//!   [`report_with`], as the CLI does.

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;

pub use crate::failure::Failure;
use crate::journal::JournalError;
use crate::placement::PlaceError;

/// What every layer's error says about itself, for the CLI and other printers.
pub trait LayerError: StdError {
    /// True when the caller has to change the command (the CLI exits 2); false when
    /// something failed while doing it (exit 1).
    fn is_bad_input(&self) -> bool;

    /// True when the message already names the cause (a layer's failure, or an OS error
    /// named mid-sentence): [`report`] ends the printed chain here.
    fn names_its_cause(&self) -> bool {
        false
    }
}

/// The outcome of a layer with two answers: the request must change (nothing was
/// changed), or something failed underneath, which [`Failure`] keeps.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request must change (what, why, what to do). Nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// Something failed while doing it; [`Failure`] keeps what failed underneath, and the
    /// message is its [`report`] (what: cause).
    #[error("{}", report(.0))]
    Failed(#[from] Failure),
}

impl Error {
    /// True when the caller has to change the request. Kept beside the [`LayerError`]
    /// impl so callers need not import the trait.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::Invalid(_))
    }

    /// A lower layer's error, keeping its class: its bad input stays bad input (in its
    /// words), any other error is kept as the cause of a failure.
    pub fn from_layer(e: impl LayerError + Send + Sync + 'static) -> Self {
        if e.is_bad_input() {
            Error::Invalid(report(&e))
        } else if e.names_its_cause() {
            Error::Failed(Failure::lower(NamesItsCause(Box::new(e))))
        } else {
            Error::Failed(Failure::lower(e))
        }
    }
}

/// A lower layer's error whose message names its cause, kept where this crate cannot see
/// its type: [`report`] ends the chain at it, its causes still reachable through `source()`.
#[derive(Debug)]
struct NamesItsCause(Box<dyn StdError + Send + Sync>);

impl fmt::Display for NamesItsCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for NamesItsCause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl LayerError for NamesItsCause {
    fn is_bad_input(&self) -> bool {
        false
    }
    fn names_its_cause(&self) -> bool {
        true
    }
}

impl LayerError for Error {
    fn is_bad_input(&self) -> bool {
        Error::is_bad_input(self)
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, Error::Failed(_))
    }
}

impl LayerError for Failure {
    fn is_bad_input(&self) -> bool {
        false
    }
    /// A lower layer's error is shown in its place, so it answers for it.
    fn names_its_cause(&self) -> bool {
        match self {
            Failure::Lower(e) => host_layer(&**e).is_some_and(|l| l.names_its_cause()),
            _ => false,
        }
    }
}

impl LayerError for HostError {
    fn is_bad_input(&self) -> bool {
        false
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, HostError::Read { .. })
    }
}

impl LayerError for JournalError {
    fn is_bad_input(&self) -> bool {
        JournalError::is_bad_input(self)
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, JournalError::Io { .. })
    }
}

impl LayerError for PlaceError {
    fn is_bad_input(&self) -> bool {
        false
    }
    fn names_its_cause(&self) -> bool {
        true
    }
}

/// The error types of this crate, as [`LayerError`]s; callers that know more types
/// (the CLI) try these too.
pub fn host_layer<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a dyn LayerError> {
    if let Some(e) = e.downcast_ref::<Error>() {
        return Some(e);
    }
    if let Some(e) = e.downcast_ref::<Failure>() {
        return Some(e);
    }
    if let Some(e) = e.downcast_ref::<HostError>() {
        return Some(e);
    }
    if let Some(e) = e.downcast_ref::<JournalError>() {
        return Some(e);
    }
    if let Some(e) = e.downcast_ref::<NamesItsCause>() {
        return Some(e);
    }
    e.downcast_ref::<PlaceError>().map(|e| e as &dyn LayerError)
}

/// `e` and its causes, each once: `what: cause: cause`, ending after an error that names
/// its cause itself.
pub fn report(e: &(dyn StdError + 'static)) -> String {
    report_with(e, &host_layer)
}

/// [`report`], asking `known` which errors name their cause (for callers that know more
/// layers than this crate).
pub fn report_with(
    e: &(dyn StdError + 'static),
    known: &dyn for<'a> Fn(&'a (dyn StdError + 'static)) -> Option<&'a dyn LayerError>,
) -> String {
    let mut text = String::new();
    let mut next = Some(e);
    while let Some(e) = next {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&e.to_string());
        if known(e).is_some_and(|l| l.names_its_cause()) {
            break;
        }
        next = e.source();
    }
    text
}

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

#[cfg(test)]
mod layer_tests {
    use super::*;
    use std::io;

    /// A lower layer's error this crate does not know, whose message names its cause.
    #[derive(Debug, thiserror::Error)]
    #[error(transparent)]
    struct Above(#[from] JournalError);

    impl LayerError for Above {
        fn is_bad_input(&self) -> bool {
            self.0.is_bad_input()
        }
        fn names_its_cause(&self) -> bool {
            LayerError::names_its_cause(&self.0)
        }
    }

    #[test]
    fn a_lower_layers_error_keeps_its_class_and_is_printed_once() {
        let io_error = || JournalError::Io {
            action: "read",
            path: "/var/lib/tame/journal".into(),
            source: io::Error::from_raw_os_error(5),
        };
        let e = Error::from_layer(Above(io_error()));
        assert!(!e.is_bad_input());
        assert_eq!(report(&e), io_error().to_string());
        assert_eq!(e.to_string(), io_error().to_string());
        let unsafe_dir = JournalError::UnsafeLocation {
            path: "/tmp/j".into(),
            reason: "writable by others".into(),
        };
        let e = Error::from_layer(Above(unsafe_dir));
        assert!(e.is_bad_input(), "{e}");
    }

    #[test]
    fn a_chain_is_printed_once_and_ends_where_a_message_names_its_cause() {
        let enoent = || io::Error::from_raw_os_error(2);
        // An inner failure says what; its cause follows once.
        let f = Failure::io("cannot start stress-ng", enoent());
        assert_eq!(f.to_string(), "cannot start stress-ng");
        assert_eq!(report(&f), format!("cannot start stress-ng: {}", enoent()));
        // A layer's error reads the same printed alone or as a chain.
        let e = Error::from(Failure::io("cannot start stress-ng", enoent()));
        assert_eq!(e.to_string(), report(&f));
        assert_eq!(report(&e), report(&f));
        assert!(e.source().is_some_and(|s| s.is::<Failure>()));
        assert!(!LayerError::is_bad_input(&e));
        assert!(Error::Invalid("--cpus names no CPU".into()).is_bad_input());
        // A leaf naming its OS error ends the chain: the OS error is not repeated.
        let read = HostError::Read {
            path: "/proc/interrupts".into(),
            source: enoent(),
        };
        let f = Failure::Host {
            what: "cannot list the IRQs".into(),
            source: read,
        };
        assert_eq!(
            report(&f),
            format!(
                "cannot list the IRQs: cannot read /proc/interrupts: {}",
                enoent()
            )
        );
    }
}
