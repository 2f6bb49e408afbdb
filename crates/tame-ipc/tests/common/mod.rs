//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::process::{Command, Stdio};

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

/// Runs the test named `test` of this test binary in a child process, with `env`;
/// the child part of such a test checks `TAME_IPC_CHILD` and does its side.
pub fn spawn_child(test: &str, env: &[(&str, String)]) -> std::process::Child {
    spawn_child_as(test, env, None)
}

/// As [`spawn_child`], running the child as user `uid` when given.
pub fn spawn_child_as(test: &str, env: &[(&str, String)], uid: Option<u32>) -> std::process::Child {
    let mut command = child_command(test, env);
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid);
    }
    command.spawn().expect("spawn child test process")
}

/// The command that runs the test named `test` of this test binary as a child (see
/// [`spawn_child`]), for callers that add pipes, a wrapper or a `pre_exec`.
pub fn child_command(test: &str, env: &[(&str, String)]) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary path"));
    command
        .args(child_args(test))
        .env("TAME_IPC_CHILD", "1")
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The arguments that make this test binary run exactly the test `test`.
pub fn child_args(test: &str) -> [&str; 4] {
    [test, "--exact", "--nocapture", "--test-threads=1"]
}

/// Whether this process may do what a privileged test needs (root). Otherwise says
/// the test is skipped — and fails it when CI is set, where a skip must not pass.
pub fn privileged(what: &str) -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(&format!("{what} needs root"));
    false
}

/// Says a test is skipped because `why`; fails it instead when CI is set.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{why}, and CI is set: a skipped test must not pass there"
    );
    println!("skipped: {why}");
}

pub fn in_child() -> bool {
    std::env::var_os("TAME_IPC_CHILD").is_some()
}
