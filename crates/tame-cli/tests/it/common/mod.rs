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

pub use tame_testing::require::{have_program, is_root, part, require, skip};

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
pub struct Applied(pub String);

impl Drop for Applied {
    fn drop(&mut self) {
        let o = tame(&["revert", "--journal-dir", &self.0]);
        assert!(
            o.status.success(),
            "revert failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A spec applied for real that isolates the last online CPU as one partition (the other CPUs
/// are the system partition), with its journal in a temporary directory; reverted when dropped.
pub struct Isolated {
    /// First, so that the revert runs while the journal still exists.
    _applied: Applied,
    pub dir: tempfile::TempDir,
    pub journal: String,
    /// The isolated CPU.
    pub cpu: String,
}

/// [`Isolated`] as partition `name`; `None` (skipped outside CI, failed under it) without
/// root, a cgroup v1 cpuset hierarchy or two CPUs.
pub fn isolate_last_cpu(name: &str) -> Option<Isolated> {
    if !partitioned::machine_fits() {
        return None;
    }
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal").to_str().unwrap().to_string();
    let spec = dir.path().join("spec.toml");
    let system_last = cpu.parse::<u32>().unwrap() - 1;
    std::fs::write(
        &spec,
        format!("[[partition]]\nname = \"system\"\ncpus = \"0-{system_last}\"\nrole = \"system\"\n\n[[partition]]\nname = \"{name}\"\ncpus = \"{cpu}\"\nrole = \"isolated\"\n"),
    )
    .unwrap();
    let o = tame(&["apply", spec.to_str().unwrap(), "--journal-dir", &journal]);
    assert!(
        o.status.success(),
        "apply: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(Isolated {
        _applied: Applied(journal.clone()),
        dir,
        journal,
        cpu,
    })
}

/// A child process killed and reaped when the test ends, pass or fail.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
