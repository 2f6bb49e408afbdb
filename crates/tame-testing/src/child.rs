//! Child-helper tests: a test binary runs one of its own tests in a child process
//! (to be killed at a chosen point, to run as another user, to be a peer process).
//!
//! The child side is an `#[ignore]`d test, so run alone or with the rest it is never
//! counted as a passing test; [`child_test`] runs it with `--ignored --exact`, and
//! [`assert_ran_one`] fails the parent when the filter matched no test (a renamed
//! child would otherwise leave an empty, successful run). The child side reads its
//! instructions with [`child_arg`], which fails when they are missing.

use std::process::Command;

/// The command that runs exactly the ignored test `name` of this test binary, its
/// output uncaptured (on the child's stdout).
pub fn child_test(name: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary path"));
    command.args([
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    command
}

/// Panics unless the child's `stdout` shows that the harness ran exactly one test,
/// `name`: else the filter matched nothing and the child did nothing.
#[track_caller]
pub fn assert_ran_one(name: &str, stdout: &[u8]) {
    let stdout = String::from_utf8_lossy(stdout);
    assert!(
        stdout.contains("running 1 test"),
        "the child test {name} did not run (no test matched `{name} --exact --ignored`; is it #[ignore]d and named so?): {stdout}"
    );
}

/// The child side's instructions from `var`; panics, naming `parent`, when unset: the
/// child side runs only as the child of `parent` (e.g. under `--include-ignored`).
#[track_caller]
pub fn child_arg(var: &str, parent: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("child side of {parent}: runs only as its child process ({var} unset)")
    })
}
