//! `tame bench cost` with a partition, for real: shared and partitioned rounds measured, a
//! real-time load in the isolated partition, and the machine left exactly as found — every
//! file the partition writes byte-identical, no tame cgroup, no journal, no workload or load
//! left — after a normal run, after Ctrl-C, and after `kill -9` once the next run (or
//! `tame revert`) has finished the job from the journal. A test binary of its own: applying
//! a partition moves every task on the machine. The lead runs it (root, cgroup v1 cpuset,
//! two CPUs, stress-ng and gcc).

mod common;
use common::{have_program, is_root, require, tame, Killed};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tame_host::cgroup::CgroupVersion;
use tame_host::{HostModel, Root};
use tame_partition::{plan, Spec, Step};

fn machine_fits() -> bool {
    let host = HostModel::read(&Root::system());
    require(is_root(), "root to apply a partition")
        && require(
            host.cgroups.cpuset.as_ref().map(|c| c.version) == Some(CgroupVersion::V1),
            "the cgroup v1 cpuset hierarchy (this machine's)",
        )
        && require(host.cpus.online.len() >= 2, "two online CPUs")
        && require(have_program("stress-ng"), "stress-ng")
        && require(have_program("gcc"), "gcc")
}

/// Every file the partition of `--isolate 1` writes, with its content now.
fn state() -> BTreeMap<String, Vec<u8>> {
    let root = Root::system();
    let host = HostModel::read(&root);
    let layout = tame_assess::layout::choose(&host, 1).unwrap();
    let spec = Spec::parse("cost", &layout.spec_text).unwrap();
    plan(&spec, &host)
        .unwrap()
        .runtime
        .iter()
        .filter_map(|s| match s {
            Step::Write {
                path, old: Some(_), ..
            } => Some(path.clone()),
            _ => None,
        })
        .filter_map(|p| root.read_bytes(&p).ok().map(|b| (p, b)))
        .collect()
}

/// Nothing of tame's is left: no tame cgroup, no journal, no workload, no real-time load.
fn assert_as_found(before: &BTreeMap<String, Vec<u8>>, journal: &Path) {
    let ours = || {
        Command::new("pgrep")
            .args(["-f", "tame-cost\\.|--cyclic-policy fifo"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while ours() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!ours(), "a workload or the real-time load outlived the run");
    assert_eq!(
        &state(),
        before,
        "a value the partition wrote was not restored"
    );
    let cgroups: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/cpuset")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("tame-"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(cgroups, Vec::<String>::new());
    assert!(!journal.join("journal").exists(), "the journal is left");
}

/// Reverts what a test left applied when it ends early.
struct RevertOnDrop<'a>(&'a Path);

impl Drop for RevertOnDrop<'_> {
    fn drop(&mut self) {
        if self.0.join("journal").exists() {
            let _ = tame(&["revert", "--journal-dir", self.0.to_str().unwrap_or("")]);
        }
    }
}

fn cost(journal: &Path, duration: &str, rounds: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tame"));
    c.args([
        "bench",
        "cost",
        "--isolate",
        "1",
        "--rt-load",
        "--workloads",
        "cpu,pipe,build",
        "--duration",
        duration,
        "--rounds",
        rounds,
        "--journal-dir",
    ])
    .arg(journal);
    c
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn both_configurations_are_measured_and_the_machine_is_left_as_found() {
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let o = cost(&journal, "1s", "2")
        .args(["--json", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bench"], "cost");
    let host = HostModel::read(&Root::system());
    let layout = tame_assess::layout::choose(&host, 1).unwrap();
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
    assert_as_found(&before, &journal);
}

#[test]
fn ctrl_c_reverts_and_reports_what_was_measured() {
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let child = cost(&journal, "3s", "3")
        .args(["--json", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !journal.join("journal").exists() {
        assert!(Instant::now() < deadline, "the partition was never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
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
    assert_as_found(&before, &journal);
}

#[test]
fn after_kill_9_the_next_run_reverts_first() {
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let child = Killed(
        cost(&journal, "3s", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !journal.join("journal").exists() {
        assert!(Instant::now() < deadline, "the partition was never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    drop(child); // SIGKILL, reaped
    assert!(
        journal.join("journal").exists(),
        "kill -9 leaves the journal"
    );
    // The next run knows the journal for a killed bench cost's, reverts it and measures.
    let o = cost(&journal, "1s", "1").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_as_found(&before, &journal);
}
