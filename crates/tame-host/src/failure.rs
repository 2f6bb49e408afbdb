//! What failed underneath a layer's error. The layers say "the caller must change the
//! request" (exit 2) in [`crate::error::Error`] or their own type, but what fails while
//! doing the work is the same few things: an OS call, a host file, the journal, a
//! thread's scheduling, a lower layer's error. One type keeps that cause, for every layer;
//! its message says only what failed (the rules: [`crate::error`]).

use std::io;

use crate::journal::JournalError;
use crate::HostError;

/// What failed, with the error underneath where there is one. The message names only what
/// was being done; the cause is `source()`, printed after it by
/// [`report`](crate::error::report) (see [`crate::error`]).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Described in words alone: there is no error underneath (e.g. a thread panicked).
    #[error("{0}")]
    Message(String),
    /// A system call or file operation failed.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// A host file could not be read or understood.
    #[error("{what}")]
    Host {
        what: String,
        #[source]
        source: HostError,
    },
    /// The journal that makes a change reversible failed.
    #[error("{what}")]
    Journal {
        what: String,
        #[source]
        source: JournalError,
    },
    /// A lower layer's error that says by itself what failed (a journal refusal, an encoding
    /// error): printed as it is, then its causes.
    #[error(transparent)]
    Lower(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A thread could not be placed or scheduled as planned.
    #[error("{what}")]
    Sched {
        what: String,
        #[source]
        source: tame_rt::sched::SchedError,
    },
}

impl Failure {
    /// A lower layer's error that says by itself what failed.
    pub fn lower(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Failure::Lower(Box::new(source))
    }

    /// `what` failed with the OS error `source`.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Failure::Io {
            what: what.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc_echild() -> i32 {
        nix::errno::Errno::ECHILD as i32
    }
    use std::error::Error as _;

    #[test]
    fn the_cause_is_kept_and_named_once() {
        let e = Failure::io(
            "cannot wait",
            io::Error::from_raw_os_error(nix::errno::Errno::ECHILD as i32),
        );
        assert_eq!(e.to_string(), "cannot wait");
        assert_eq!(
            crate::error::report(&e),
            format!(
                "cannot wait: {}",
                io::Error::from_raw_os_error(libc_echild())
            )
        );
        let cause = e.source().expect("the OS error is kept");
        assert_eq!(
            cause.downcast_ref::<io::Error>().unwrap().raw_os_error(),
            Some(nix::errno::Errno::ECHILD as i32)
        );
        assert!(Failure::Message("it broke".into()).source().is_none());
    }
}
