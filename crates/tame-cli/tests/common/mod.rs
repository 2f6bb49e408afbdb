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

/// A child process killed and reaped when the test ends, pass or fail.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
