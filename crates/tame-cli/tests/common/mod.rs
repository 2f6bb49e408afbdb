//! What the CLI test binaries share: running the built `tame`, what a test needs
//! from the machine (skipped outside CI, failed under `CI=true`: tame-testing's
//! `require`), and a child process that is killed however a test ends.
// Each test binary uses a different subset.
#![allow(dead_code, unused_imports)]

pub mod cgroup_v2;
pub mod partitioned;

use std::process::{Child, Command, Output};

/// Run the `tame` binary under test and collect its output.
pub fn tame(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tame"))
        .args(args)
        .output()
        .expect("tame runs")
}

pub use tame_testing::require::{have_program, is_root, require, skip};

/// The highest online CPU, as text.
pub fn last_cpu() -> String {
    let n = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    n.trim().rsplit(['-', ',']).next().unwrap().to_string()
}

/// The JSON document a successful `tame … --json -` printed.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "tame failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON result")
}

/// `tame ARGS` is refused as bad input (exit 2) with `needle` in its message, and prints no
/// result.
pub fn expect_bad_input(args: &[&str], needle: &str) {
    let out = tame(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} should be bad input; stderr: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing may run or print a result: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Reverts the partitions applied with journal directory `.0` however the test ends.
pub struct Applied<'a>(pub &'a str);

impl Drop for Applied<'_> {
    fn drop(&mut self) {
        let o = tame(&["revert", "--journal-dir", self.0]);
        assert!(
            o.status.success(),
            "revert failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A child process killed and reaped when the test ends, pass or fail.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
