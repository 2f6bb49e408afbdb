//! Helpers shared by the integration tests: segment names cleaned up however a test
//! ends, child-helper tests, and what a test needs from the machine.
//!
//! tame-ipc depends on no other tame crate, so the rules of tame-testing's `require`
//! and `child` modules are repeated here: a test that cannot run here prints a skip
//! line, and fails under `CI=true`; a child side is an `#[ignore]`d test run with
//! `--ignored --exact`, and its parent fails when the filter matched no test.
#![allow(dead_code)]

use std::fmt::Display;
use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

/// A unique segment name; the segment is unlinked when the guard drops, even when
/// the test fails.
pub struct NameGuard(pub String);

impl NameGuard {
    pub fn new(tag: &str) -> NameGuard {
        NameGuard(format!("test-{}-{tag}", std::process::id()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn path(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/dev/shm/tame.{}", self.0))
    }
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
    }
}

// ---- what a test needs ------------------------------------------------------------

/// Whether this run is CI's (`CI=true`): there a test that cannot run fails.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// This test cannot run here, because `why`: under CI a panic, else a skip line.
/// The caller returns right after.
#[track_caller]
pub fn skip(why: impl Display) {
    if in_ci() {
        panic!("{why} (CI=true: this test must run here)");
    }
    eprintln!("skipped: {why}");
}

/// `condition`, or [`skip`] with "needs `what`" and `false`.
#[must_use]
#[track_caller]
pub fn require(condition: bool, what: impl Display) -> bool {
    if !condition {
        skip(format_args!("needs {what}"));
    }
    condition
}

pub fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `program` is an executable file in `PATH`.
pub fn have_program(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        dir.join(program)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

// ---- child-helper tests -----------------------------------------------------------

/// Set in a child test's environment by [`spawn_child`].
pub const CHILD_ENV: &str = "TAME_IPC_CHILD";

/// Runs the `#[ignore]`d test named `test` of this test binary in a child process,
/// with `env`; the child side reads its instructions with [`child_arg`].
pub fn spawn_child(test: &str, env: &[(&str, String)]) -> ChildTest {
    spawn_child_as(test, env, None)
}

/// As [`spawn_child`], running the child as user `uid` when given.
pub fn spawn_child_as(test: &str, env: &[(&str, String)], uid: Option<u32>) -> ChildTest {
    let mut command = Command::new(std::env::current_exe().expect("test binary path"));
    command
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid);
    }
    let mut child = command.spawn().expect("spawn child test process");
    // Read on the side, so that a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().expect("piped stdout");
    let stdout = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    ChildTest {
        name: test.to_string(),
        child,
        stdout: Some(stdout),
    }
}

/// A child test process; killed and reaped on drop unless waited for.
pub struct ChildTest {
    name: String,
    child: std::process::Child,
    stdout: Option<JoinHandle<Vec<u8>>>,
}

impl ChildTest {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the child and shows its output; panics unless its harness ran
    /// exactly the one test (a filter that matched nothing exits successfully).
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait()?;
        let out = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default();
        let out = String::from_utf8_lossy(&out);
        print!("{out}");
        assert!(
            out.contains("running 1 test"),
            "the child test {} did not run (no #[ignore]d test of that exact name): {out}",
            self.name
        );
        Ok(status)
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        if self.stdout.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether this process is a child test started by [`spawn_child`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The child side's instruction `var`; panics, naming `parent`, outside a child
/// started by [`spawn_child`] (e.g. under `--include-ignored`).
#[track_caller]
pub fn child_arg(var: &str, parent: &str) -> String {
    assert!(
        in_child(),
        "child side of {parent}: runs only as its child process"
    );
    std::env::var(var).unwrap_or_else(|_| panic!("child side of {parent}: {var} unset"))
}
