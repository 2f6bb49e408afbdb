//! Exit codes, decided here and nowhere else: 0 success, 1 a failure while running, 2 bad
//! input (nothing was changed), 130 a run cut short by Ctrl-C (what was measured is still
//! reported). Commands return their own code for outcomes such as `check --strict` finding
//! a failure; errors are classified by [`exit_code`], which asks each layer's error in the
//! chain through [`LayerError`] (see [`tame_host::error`] for the rules).

use std::error::Error as StdError;
use std::fmt;

use tame_assess::AssessError;
use tame_host::error::LayerError;
use tame_partition::ApplyError;
use tame_report::ReportError;
use tame_reserve::ReserveError;

/// Input the user must correct: the message says what, why and what to do.
/// Returned before anything is started or written; maps to exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

impl LayerError for BadInput {
    fn is_bad_input(&self) -> bool {
        true
    }
}

pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
}

/// Bad input caused by `source` (a file the user named cannot be listed): printed
/// `message: source`, the source kept.
pub fn bad_input_from(
    message: impl Into<String>,
    source: impl StdError + Send + Sync + 'static,
) -> anyhow::Error {
    anyhow::Error::new(source).context(BadInput(message.into()))
}

pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

/// The code of a run that finished: 130 when Ctrl-C cut it short, else 0.
pub fn finished(interrupted: bool) -> i32 {
    if interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    }
}

/// The answer for errors of crates that cannot implement [`LayerError`] (tame-ipc sits
/// below tame-host) and of libraries whose message names their source (serde_json's I/O
/// error): a failure (exit 1) whose message already names its cause.
#[derive(Debug)]
struct NamesItsCause;

impl fmt::Display for NamesItsCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a failure whose message names its cause")
    }
}

impl StdError for NamesItsCause {}

impl LayerError for NamesItsCause {
    fn is_bad_input(&self) -> bool {
        false
    }
    fn names_its_cause(&self) -> bool {
        true
    }
}

/// `e` as one of the layers' errors the CLI knows (tame-host's, which include the bench
/// and launch layers' [`tame_host::error::Error`], and those with their own type).
fn layer<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a dyn LayerError> {
    if let Some(l) = tame_host::error::host_layer(e) {
        return Some(l);
    }
    if e.is::<tame_ipc::Error>() || e.is::<serde_json::Error>() {
        return Some(&NamesItsCause);
    }
    fn is<'a, T: LayerError + 'static>(
        e: &'a (dyn StdError + 'static),
    ) -> Option<&'a dyn LayerError> {
        e.downcast_ref::<T>().map(|t| t as &dyn LayerError)
    }
    is::<BadInput>(e)
        .or_else(|| is::<ReserveError>(e))
        .or_else(|| is::<ApplyError>(e))
        .or_else(|| is::<tame_partition::enable::EnableError>(e))
        .or_else(|| is::<tame_partition::Invalid>(e))
        .or_else(|| is::<tame_partition::applied::AppliedSpecError>(e))
        .or_else(|| is::<AssessError>(e))
        .or_else(|| is::<ReportError>(e))
        .or_else(|| is::<tame_prometheus::Error>(e))
}

/// Whether the user has to change the command: the CLI's own argument errors and the
/// libraries' refusals of bad input. The outermost layer's error in the chain decides (a
/// layer classifies what it wraps), found beneath any context added on the way up.
pub fn is_bad_input(e: &anyhow::Error) -> bool {
    // A `BadInput` given as context ([`bad_input_from`]) is found by anyhow, not the chain.
    if e.downcast_ref::<BadInput>().is_some() {
        return true;
    }
    e.chain().find_map(layer).is_some_and(|l| l.is_bad_input())
}

/// The error and each cause beneath it, once: `what: cause: cause` (see
/// [`tame_host::error::report`]).
pub fn message(e: &anyhow::Error) -> String {
    tame_host::error::report_with(e.as_ref(), &layer)
}

/// The process exit code of a command's outcome; errors are reported on stderr.
pub fn exit_code(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tame: {}", message(&e));
            if is_bad_input(&e) {
                EXIT_BAD_INPUT
            } else {
                EXIT_FAILED
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    fn unsafe_journal() -> tame_host::journal::JournalError {
        tame_host::journal::JournalError::UnsafeLocation {
            path: "/tmp/j".into(),
            reason: "writable by others".into(),
        }
    }

    #[test]
    fn every_layers_bad_input_exits_2_and_failures_exit_1() {
        let bad: Vec<anyhow::Error> = vec![
            bad_input("--cpus names no CPU"),
            tame_bench::BenchError::Invalid("interval out of range".into()).into(),
            tame_launch::LaunchError::Invalid("no such program".into()).into(),
            ReserveError::Invalid("share must be above 0 %".into()).into(),
            ReserveError::Refused("CPU bandwidth exhausted".into()).into(),
            ApplyError::NotRoot("apply").into(),
            // An unsafe journal location, met while reading the applied partitions: directly
            // and through a layer that keeps the class.
            tame_partition::AppliedSpecError::from(unsafe_journal()).into(),
            tame_launch::LaunchError::from_layer(tame_partition::AppliedSpecError::from(
                unsafe_journal(),
            ))
            .into(),
            ApplyError::OtherSpecApplied {
                journal: "/var/lib/tame/journal".into(),
            }
            .into(),
            ApplyError::from(tame_partition::Invalid {
                errors: vec!["CPU 9 is not online".into()],
            })
            .into(),
            tame_partition::Invalid {
                errors: vec!["CPU 9 is not online".into()],
            }
            .into(),
        ];
        for e in bad {
            assert_eq!(exit_code(Err(e)), EXIT_BAD_INPUT);
        }
        let failed: Vec<anyhow::Error> = vec![
            anyhow::anyhow!("cannot write the histogram"),
            tame_bench::BenchError::Failed(tame_bench::error::Failure::Message(
                "a thread panicked".into(),
            ))
            .into(),
            tame_launch::LaunchError::Failed(tame_launch::error::Failure::Message(
                "cannot fork".into(),
            ))
            .into(),
            ReserveError::Failed(tame_reserve::error::Failure::Message("no server".into())).into(),
            ApplyError::Failed {
                step: "write /proc/irq/24/smp_affinity_list".into(),
                reason: "EIO".into(),
                rollback: Default::default(),
            }
            .into(),
            ApplyError::Journal(tame_host::journal::JournalError::Corrupt {
                path: "/var/lib/tame/journal".into(),
                line: 3,
                reason: "truncated".into(),
            })
            .into(),
        ];
        for e in failed {
            assert_eq!(exit_code(Err(e)), EXIT_FAILED);
        }
        assert_eq!(exit_code(Ok(3)), 3);
        assert_eq!(finished(true), EXIT_INTERRUPTED);
        assert_eq!(finished(false), 0);
    }

    #[test]
    fn causes_are_named_once() {
        let io = || std::io::Error::from_raw_os_error(libc::ENOENT);
        // A context names what failed; the cause follows.
        let e = Err::<(), _>(io())
            .context("cannot install the Ctrl-C handler")
            .unwrap_err();
        assert_eq!(
            message(&e),
            format!("cannot install the Ctrl-C handler: {}", io())
        );
        // A layer's message already names its cause: not repeated.
        let e: anyhow::Error =
            tame_bench::error::BenchError::Failed(tame_bench::error::Failure::Io {
                what: "cannot start stress-ng".into(),
                source: io(),
            })
            .into();
        assert_eq!(message(&e), format!("cannot start stress-ng: {}", io()));
        // A journal failure under a layer's failure: each named once, the remedy last.
        let e: anyhow::Error = ReserveError::Failed(tame_host::Failure::Journal {
            what: "cannot record the reservation".into(),
            source: tame_host::journal::JournalError::Io {
                action: "open",
                path: "/var/lib/tame/journal".into(),
                source: io(),
            },
        })
        .into();
        let e = e.context("reserve");
        assert_eq!(
            message(&e),
            format!(
                "reserve: cannot record the reservation: cannot open journal /var/lib/tame/journal: {} — check that the directory is writable (or choose another with --journal-dir)",
                io()
            )
        );
    }

    #[test]
    fn a_bad_input_is_found_beneath_context_and_the_outer_layer_decides() {
        let e = anyhow::Error::from(tame_bench::BenchError::Invalid("--cpus: no CPU".into()))
            .context("while planning the bench");
        assert!(is_bad_input(&e));
        assert_eq!(exit_code(Err(e)), EXIT_BAD_INPUT);
        let e =
            anyhow::Error::from(AssessError::Apply(ApplyError::NotRoot("apply"))).context("assess");
        assert!(is_bad_input(&e));
        let e = anyhow::Error::from(tame_report::ReportError::Invalid("no results".into()))
            .context("report");
        assert!(is_bad_input(&e));
        // A journal held by another run is bad input on its own, but a layer that reports
        // it as its failure decides: exit 1, as before.
        let locked = tame_host::journal::JournalError::UnsafeLocation {
            path: "/tmp/j".into(),
            reason: "writable by others".into(),
        };
        assert!(is_bad_input(&anyhow::Error::from(
            tame_host::journal::JournalError::UnsafeLocation {
                path: "/tmp/j".into(),
                reason: "writable by others".into(),
            }
        )));
        let e: anyhow::Error = tame_launch::LaunchError::Failed(tame_host::Failure::Journal {
            what: "cannot journal the placement".into(),
            source: locked,
        })
        .into();
        assert!(!is_bad_input(&e));
        assert!(!is_bad_input(&anyhow::anyhow!(
            "cannot write the histogram"
        )));
        // tame-ipc's errors name their cause: printed once.
        let eacces = || std::io::Error::from_raw_os_error(libc::EACCES);
        let e: anyhow::Error = tame_ipc::Error::Proc(eacces()).into();
        assert!(!is_bad_input(&e));
        assert_eq!(
            message(&e),
            format!("cannot read /proc to identify this process: {}", eacces())
        );
        // Bad input with a cause: printed once, still bad input.
        let enoent = || std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = bad_input_from("cannot list results/", enoent());
        assert!(is_bad_input(&e));
        assert_eq!(message(&e), format!("cannot list results/: {}", enoent()));
    }
}
