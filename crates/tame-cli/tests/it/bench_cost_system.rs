//! `tame bench cost` with a partition, for real: shared and partitioned rounds measured, a
//! real-time load in the isolated partition, and the machine left exactly as found — every
//! file the partition writes byte-identical, no tame cgroup, no journal, no workload or load
//! left — after a normal run, after Ctrl-C, and after `kill -9` once the next run (or
//! `tame revert`) has finished the job from the journal. A test binary of its own: applying
//! a partition moves every task on the machine. The lead runs it (root, cgroup v1 cpuset,
//! two CPUs, stress-ng and gcc).

use crate::common::partitioned::{
    assert_restored, exclusive, machine_fits, state, wait_for_journal, RevertOnDrop,
};
use crate::common::{have_program, require, Killed};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tame_host::{HostModel, Root};

/// What the partition tests need, and the workloads' tools.
fn fits() -> bool {
    machine_fits()
        && require(have_program("stress-ng"), "stress-ng")
        && require(have_program("gcc"), "gcc")
}

/// Nothing of tame's is left: no tame cgroup, no journal, no workload, no real-time load.
fn assert_as_found(before: &BTreeMap<String, Vec<u8>>, journal: &Path) {
    let ours = || {
        Command::new("pgrep")
            .args(["-f", "tame-cost\\.|--cyclic-policy fifo"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert_restored(
        before,
        journal,
        &ours,
        "a workload or the real-time load outlived the run",
    );
}

fn cost(journal: &Path, duration: &str, rounds: &str) -> Command {
    cost_of(journal, "cpu,pipe,build", duration, rounds)
}

fn cost_of(journal: &Path, workloads: &str, duration: &str, rounds: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tame"));
    c.args([
        "bench",
        "cost",
        "--isolate",
        "1",
        "--rt-load",
        "--workloads",
        workloads,
        "--duration",
        duration,
        "--rounds",
        rounds,
        "--journal-dir",
    ])
    .arg(journal);
    c
}

/// What each test holds: one test at a time, a journal directory of its own, and the
/// partition's state before.
struct Setup {
    _one: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    journal: std::path::PathBuf,
    before: BTreeMap<String, Vec<u8>>,
}

/// `None` (skipped) on a machine that does not fit.
fn setup() -> Option<Setup> {
    let one = exclusive();
    if !fits() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    Some(Setup {
        _one: one,
        _dir: dir,
        journal,
        before: state(),
    })
}

#[test]
fn both_configurations_are_measured_and_the_machine_is_left_as_found() {
    let _machine = tame_testing::serial::module(module_path!());
    let Some(setup) = setup() else { return };
    let (journal, before) = (setup.journal.clone(), &setup.before);
    let _revert = RevertOnDrop(&journal);
    let o = cost(&journal, "1s", "2")
        .args(["--json", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bench"], "cost");
    let host = HostModel::read(&Root::system());
    let layout = tame_assess::layout::choose(
        &host,
        &tame_assess::layout::Choice {
            count: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let configs = &v["settings"]["configurations"];
    assert_eq!(configs[0]["cpus"], host.cpus.online.to_string());
    assert_eq!(configs[1]["kind"], "partitioned");
    assert_eq!(configs[1]["cpus"], layout.system.to_string());
    let p = &v["settings"]["partition"];
    assert_eq!(p["isolated_cpus"], layout.isolated.to_string());
    assert!(p["rt_load"]
        .as_str()
        .unwrap()
        .starts_with("setpriv --pdeathsig TERM stress-ng --cyclic 1"));
    for w in ["cpu", "pipe", "build"] {
        for c in ["shared", "partitioned"] {
            let g = v["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["label"] == format!("{c}/{w}"))
                .unwrap_or_else(|| panic!("no group {c}/{w}"));
            assert_eq!(g["counters"]["rounds"], 2, "{c}/{w}");
            assert!(
                g["derived"]["throughput"].as_f64().unwrap() > 0.0,
                "{c}/{w}"
            );
        }
        assert!(
            v["merged"]["derived"][format!("cost_percent_{w}")].is_number(),
            "{w}"
        );
    }
    // Applied and reverted each round.
    assert_eq!(
        stderr.matches("round 2/2 partitioned").count(),
        3,
        "{stderr}"
    );
    assert_as_found(before, &journal);
}

/// Start a run of three rounds (its output piped, or dropped); return once it is inside its
/// first partitioned round.
fn start_then_wait_until_partitioned(journal: &Path, piped: bool) -> std::process::Child {
    let out = || if piped { Stdio::piped() } else { Stdio::null() };
    // Rounds of 1 s per workload: the first partitioned round starts 3 s in and lasts 3 s.
    let child = cost(journal, "1s", "3")
        .args(["--json", "-"])
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap();
    wait_for_journal(journal, Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(1000));
    child
}

#[test]
fn ctrl_c_reverts_and_reports_what_was_measured() {
    let _machine = tame_testing::serial::module(module_path!());
    let Some(setup) = setup() else { return };
    let (journal, before) = (setup.journal.clone(), &setup.before);
    let _revert = RevertOnDrop(&journal);
    let child = start_then_wait_until_partitioned(&journal, true);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_as_found(before, &journal);
}

#[test]
fn after_kill_9_the_next_run_reverts_first() {
    let _machine = tame_testing::serial::module(module_path!());
    let Some(setup) = setup() else { return };
    let (journal, before) = (setup.journal.clone(), &setup.before);
    let _revert = RevertOnDrop(&journal);
    let child = Killed(start_then_wait_until_partitioned(&journal, false));
    drop(child); // SIGKILL, reaped
    assert!(
        journal.join("journal").exists(),
        "kill -9 leaves the journal"
    );
    // The next run knows the journal for a killed bench cost's, reverts it and measures
    // (one workload is enough to show it measures).
    let o = cost_of(&journal, "cpu", "1s", "1").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_as_found(before, &journal);
}
