//! Tests that need something a machine may lack (root, a program such as gcc,
//! setpriv or stress-ng, a second CPU, a kernel feature).
//!
//! Outside CI such a test prints `skipped: …` and returns; under CI (`CI=true`, as
//! GitHub Actions and most runners set it) it fails instead, so a test CI cannot run
//! is never counted as passed there. Every skip of the workspace's tests goes through
//! [`skip`] or [`require`], and every section of a test left out for the same reasons
//! through [`part`] (tame-ipc, which depends on no other tame crate, keeps a
//! copy of the same rule in its `tests/common`).
//!
//! ```no_run
//! use tame_testing::require::{is_root, require};
//! if !require(is_root(), "root (tracefs)") {
//!     return;
//! }
//! ```

use std::fmt::Display;
use std::path::PathBuf;

/// The variable CI runners set to `true`.
pub const CI_VAR: &str = "CI";

/// Whether this run is CI's (`CI=true`): there a test that cannot run fails.
pub fn in_ci() -> bool {
    std::env::var(CI_VAR).is_ok_and(|v| v == "true")
}

/// This test cannot run here, because `why`: under CI a panic (the test fails),
/// else a `skipped: why` line. The caller returns right after.
#[track_caller]
pub fn skip(why: impl Display) {
    if in_ci() {
        panic!("{why} ({CI_VAR}=true: this test must run here)");
    }
    eprintln!("skipped: {why}");
}

/// This test cannot run on this machine because the platform itself forbids what it
/// tests, as a probe at run time established — not for want of root, a program, a
/// package or a setting the project could install or make (those go through [`skip`]).
/// Outside CI it prints `unsupported here: why`; under CI it fails like [`skip`]: a CI
/// run that passes has run every test, so CI must run on a machine that allows it
/// (e.g. not one whose init holds a cgroup v1 hierarchy open, so that no switch to
/// cgroup v2 can happen). The caller returns right after. Use it only with the probe's
/// evidence in `why`.
#[track_caller]
pub fn unsupported(why: impl Display) {
    if in_ci() {
        panic!("unsupported here: {why} ({CI_VAR}=true: this test must run here — run CI on a machine that allows it)");
    }
    eprintln!("unsupported here: {why}");
}

/// `condition`, or [`skip`] with "needs `what`" and `false`:
/// `if !require(have_program("gcc"), "gcc") { return; }`.
#[must_use]
#[track_caller]
pub fn require(condition: bool, what: impl Display) -> bool {
    if !condition {
        skip(format_args!("needs {what}"));
    }
    condition
}

/// Whether a part of a test that needs `what` runs: `condition`, or else a
/// `skipped part: needs what` line and `false` — and under CI a failure, as for a
/// whole test ([`skip`]), so no section is left out silently where every test must run:
/// `if part(is_root(), "root (chown to another user)") { … }`.
#[must_use]
#[track_caller]
pub fn part(condition: bool, what: impl Display) -> bool {
    if !condition {
        if in_ci() {
            panic!(
                "a part of this test needs {what} ({CI_VAR}=true: this test must run whole here)"
            );
        }
        eprintln!("skipped part: needs {what}");
    }
    condition
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Where `program` is found in `PATH` as an executable file, as `Command::new` would find it.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether `program` is in `PATH`.
pub fn have_program(program: &str) -> bool {
    find_program(program).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = "require::tests::skip_probe";
    const PROBE_ENV: &str = "TAME_TESTING_SKIP_PROBE";

    #[test]
    fn a_met_requirement_passes_silently_and_a_missing_program_is_not_found() {
        assert!(require(true, "nothing"));
        assert!(have_program("sh"), "sh is in PATH on every test machine");
        assert!(!have_program("tame-no-such-program-anywhere"));
    }

    /// Runs the child-side test `probe` once outside CI, where it must pass with each of
    /// `outside` on stderr, and once under `CI=true`, where it must fail with `under_ci`:
    /// a child process each, so the parent's `CI` does not matter.
    fn check_probe(probe: &str, outside: &[&str], under_ci: &str) {
        for (ci, passes) in [("", true), ("true", false)] {
            let out = crate::child::child_test(probe)
                .env(CI_VAR, ci)
                .env(PROBE_ENV, "1")
                .output()
                .unwrap();
            crate::child::assert_ran_one(probe, &out.stdout);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.success(), passes, "CI={ci:?}: {stdout}{stderr}");
            if passes {
                assert!(outside.iter().all(|s| stderr.contains(s)), "{stderr}");
                assert!(!stderr.contains("CI=true"), "{stderr}");
            } else {
                assert!(stderr.contains(under_ci), "{stderr}");
            }
        }
    }

    #[test]
    fn a_skip_fails_under_ci_and_returns_outside() {
        check_probe(
            PROBE,
            &["skipped: needs a unicorn"],
            "needs a unicorn (CI=true: this test must run here)",
        );
    }

    const PART_PROBE: &str = "require::tests::part_probe";

    /// A test whose root-only (or tool-only) section cannot run fails under CI too;
    /// outside CI the rest of it runs and the section is named as left out.
    #[test]
    fn a_left_out_part_fails_under_ci_and_is_named_outside() {
        assert!(part(true, "nothing"));
        check_probe(
            PART_PROBE,
            &["skipped part: needs a unicorn", "the rest ran"],
            "needs a unicorn (CI=true: this test must run whole here)",
        );
    }

    /// Child side of `a_left_out_part_fails_under_ci_and_is_named_outside`, run by it.
    #[test]
    #[ignore = "child of a_left_out_part_fails_under_ci_and_is_named_outside, run by it"]
    fn part_probe() {
        crate::child::child_arg(
            PROBE_ENV,
            "a_left_out_part_fails_under_ci_and_is_named_outside",
        );
        if part(false, "a unicorn") {
            unreachable!("part(false) is false");
        }
        eprintln!("the rest ran");
    }

    const UNSUPPORTED_PROBE: &str = "require::tests::unsupported_probe";

    /// The platform-forbids variant keeps the same rule: only outside CI does it pass.
    #[test]
    fn unsupported_fails_under_ci_and_returns_outside() {
        check_probe(
            UNSUPPORTED_PROBE,
            &["unsupported here: the kernel forbids unicorns"],
            "the kernel forbids unicorns (CI=true: this test must run here",
        );
    }

    /// Child side of `unsupported_fails_under_ci_and_returns_outside`, run by it.
    #[test]
    #[ignore = "child of unsupported_fails_under_ci_and_returns_outside, run by it"]
    fn unsupported_probe() {
        crate::child::child_arg(PROBE_ENV, "unsupported_fails_under_ci_and_returns_outside");
        unsupported("the kernel forbids unicorns");
    }

    /// Child side of `a_skip_fails_under_ci_and_returns_outside`, run by it.
    #[test]
    #[ignore = "child of a_skip_fails_under_ci_and_returns_outside, run by it"]
    fn skip_probe() {
        crate::child::child_arg(PROBE_ENV, "a_skip_fails_under_ci_and_returns_outside");
        if !require(false, "a unicorn") {
            return;
        }
        unreachable!("require(false) is false");
    }
}
