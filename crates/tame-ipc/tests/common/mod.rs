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
    let mut command = Command::new(std::env::current_exe().expect("test binary path"));
    command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("TAME_IPC_CHILD", "1")
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid);
    }
    command.spawn().expect("spawn child test process")
}

pub fn in_child() -> bool {
    std::env::var_os("TAME_IPC_CHILD").is_some()
}
