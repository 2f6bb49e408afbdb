//! Exit codes, decided here and nowhere else: 0 success, 1 a failure while running, 2 bad
//! input (nothing was changed), 130 a run cut short by Ctrl-C (what was measured is still
//! reported). Commands return their own code for outcomes such as `check --strict` finding
//! a failure; errors are classified by [`exit_code`].

use std::fmt;

use tame_bench::BenchError;
use tame_launch::LaunchError;
use tame_partition::ApplyError;
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

pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
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

/// Whether the user has to change the command: the CLI's own argument errors and the
/// libraries' refusals of bad input.
pub fn is_bad_input(e: &anyhow::Error) -> bool {
    e.downcast_ref::<BadInput>().is_some()
        || e.downcast_ref::<BenchError>()
            .is_some_and(BenchError::is_bad_input)
        || e.downcast_ref::<LaunchError>()
            .is_some_and(LaunchError::is_bad_input)
        || e.downcast_ref::<ReserveError>()
            .is_some_and(ReserveError::is_bad_input)
        || e.downcast_ref::<ApplyError>()
            .is_some_and(ApplyError::is_bad_input)
        || e.downcast_ref::<tame_assess::AssessError>()
            .is_some_and(tame_assess::AssessError::is_bad_input)
        || e.downcast_ref::<tame_partition::Invalid>().is_some()
        || e.downcast_ref::<tame_host::journal::JournalError>()
            .is_some_and(tame_host::journal::JournalError::is_bad_input)
}

/// The error and, after ": ", each cause beneath it that it does not already name (the
/// layers' messages say what failed and usually name the OS error themselves).
pub fn message(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
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

    #[test]
    fn every_layers_bad_input_exits_2_and_failures_exit_1() {
        let bad: Vec<anyhow::Error> = vec![
            bad_input("--cpus names no CPU"),
            BenchError::Invalid("interval out of range".into()).into(),
            LaunchError::Invalid("no such program".into()).into(),
            ReserveError::Invalid("share must be above 0 %".into()).into(),
            ReserveError::Refused("CPU bandwidth exhausted".into()).into(),
            ApplyError::NotRoot.into(),
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
            BenchError::Failed(tame_bench::error::Failure::Message(
                "a thread panicked".into(),
            ))
            .into(),
            LaunchError::Failed(tame_launch::error::Failure::Message("cannot fork".into())).into(),
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
    }
}
