//! Fuzz tests: arbitrary input to a parser (spec, plan, journal) must give a value or
//! an error, never a panic. [`run`] runs one with [`cases`] cases: `TAME_FUZZ_CASES`,
//! else [`DEFAULT_CASES`] — a small share in `make test`, at least a million each in
//! `make fuzz` (docs/testing.md).

use std::cell::Cell;
use std::time::Instant;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The variable that sets the case count.
pub const CASES_VAR: &str = "TAME_FUZZ_CASES";

/// Cases per fuzz test in an ordinary test run: a few seconds in all.
pub const DEFAULT_CASES: u32 = 2000;

/// The case count for a fuzz test: `TAME_FUZZ_CASES` (a positive integer; anything
/// else fails the test, so a typo in `make fuzz` cannot turn it into a short run), else
/// [`DEFAULT_CASES`].
#[track_caller]
pub fn cases() -> u32 {
    match std::env::var(CASES_VAR) {
        Err(_) => DEFAULT_CASES,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => panic!("{CASES_VAR}={v:?}: expected a positive number of cases"),
        },
    }
}

/// Strings matching `pattern`, the regex parsed once (a `&str` strategy parses it
/// again for every case, which dominates a fuzz run).
#[track_caller]
pub fn regex(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("a valid regex")
}

/// Whether a case's input was accepted (parsed, planned) or refused with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Refused,
}

/// Runs `test` on [`cases`] values of `strategy` from a fresh random seed; panics
/// with the smallest failing input proptest finds (a panic inside `test` counts as
/// a failure). At least `min_accepted` (a share, 0.0-1.0) of the cases must be
/// accepted once there are 1000 or more, so that a generator that stops producing
/// valid input (and so tests only the first check) fails instead of passing.
#[track_caller]
pub fn run<S: Strategy>(
    name: &str,
    min_accepted: f64,
    strategy: S,
    test: impl Fn(S::Value) -> Result<Verdict, TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        // The smallest failing input is in the panic message; no files are written.
        failure_persistence: None,
        ..Config::default()
    });
    let (accepted, total) = (Cell::new(0u64), Cell::new(0u64));
    let start = Instant::now();
    let result = runner.run(&strategy, |value| {
        total.set(total.get() + 1);
        if test(value)? == Verdict::Accepted {
            accepted.set(accepted.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    let (accepted, total) = (accepted.get(), total.get());
    let share = accepted as f64 / total.max(1) as f64;
    eprintln!(
        "{name}: {cases} cases in {:.1?}, {:.1} % accepted",
        start.elapsed(),
        share * 100.0
    );
    if cases >= 1000 {
        assert!(
            share >= min_accepted,
            "{name}: only {accepted} of {total} inputs were accepted (want {:.1} %): the generator no longer reaches past the first checks",
            min_accepted * 100.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_case_fails_the_run_and_a_panic_is_a_failure() {
        let failed = std::panic::catch_unwind(|| {
            run("probe", 0.0, 0u32..100, |n| {
                proptest::prop_assert!(n < 50);
                Ok(Verdict::Accepted)
            })
        });
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(|| {
            run("probe", 0.0, 0u32..100, |n| {
                assert!(n < 50);
                Ok(Verdict::Accepted)
            })
        });
        assert!(panicked.is_err());
    }

    #[test]
    fn too_few_accepted_inputs_fail_the_run() {
        let r = std::panic::catch_unwind(|| {
            run("probe", 0.5, 0u32..100, |n| {
                Ok(if n < 10 {
                    Verdict::Accepted
                } else {
                    Verdict::Refused
                })
            })
        });
        // Under a TAME_FUZZ_CASES below 1000 the share is not checked.
        assert_eq!(r.is_err(), cases() >= 1000);
    }
}
