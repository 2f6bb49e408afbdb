//! What the system tests that apply a partition share (`assess_system`, `bench_cost_system`):
//! whether the machine fits them, the state the partition of `--cpus 1` / `--isolate 1`
//! writes, tame's cgroups, one test at a time, a revert when a test ends early, and the
//! wait for a run's partition to be applied.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use tame_host::cgroup::CgroupVersion;
use tame_host::{HostModel, Root};
use tame_partition::{plan, Spec, Step};

use super::{is_root, require, tame};

/// Root, a v1 cpuset hierarchy and two CPUs; else skipped (failed under CI=true).
pub fn machine_fits() -> bool {
    let host = HostModel::read(&Root::system());
    require(is_root(), "root to apply a partition")
        && require(
            host.cgroups.cpuset.as_ref().map(|c| c.version) == Some(CgroupVersion::V1),
            "the cgroup v1 cpuset hierarchy (this machine's)",
        )
        && require(host.cpus.online.len() >= 2, "two online CPUs")
}

/// Every file the partition of the layout isolating one CPU would write, with its content now.
pub fn state() -> BTreeMap<String, Vec<u8>> {
    let root = Root::system();
    let host = HostModel::read(&root);
    let mut layout = tame_assess::layout::choose(
        &host,
        &tame_assess::layout::Choice {
            count: 1,
            ..Default::default()
        },
    )
    .unwrap();
    // With the knobs assess adds (the watchdog mask among them).
    tame_assess::knobs::strengthen(&host, &mut layout, false).unwrap();
    let spec = Spec::parse("assess", &layout.spec_text).unwrap();
    let touched: Vec<String> = plan(&spec, &host)
        .unwrap()
        .runtime
        .iter()
        .filter_map(|s| match s {
            Step::Write {
                path, old: Some(_), ..
            } => Some(path.clone()),
            _ => None,
        })
        .collect();
    assert!(touched.len() > 3, "{touched:?}");
    touched
        .iter()
        .filter_map(|p| root.read_bytes(p).ok().map(|b| (p.clone(), b)))
        .collect()
}

pub fn tame_cgroups() -> Vec<String> {
    std::fs::read_dir("/sys/fs/cgroup/cpuset")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("tame-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The tests apply partitions: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reverts the partition a test applied when the test ends early (a failed assertion
/// between a kill and its revert): declared after the temporary directory, it drops
/// first, while the journal is still there.
pub struct RevertOnDrop<'a>(pub &'a Path);

impl Drop for RevertOnDrop<'_> {
    fn drop(&mut self) {
        if self.0.join("journal").exists() {
            let _ = tame(&["revert", "--journal-dir", self.0.to_str().unwrap_or("")]);
        }
    }
}

/// Wait (at most `limit`) until a run has applied its partition: its journal exists.
pub fn wait_for_journal(journal: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !journal.join("journal").exists() {
        assert!(Instant::now() < deadline, "the partition was never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The machine is as `before`: what `leftovers` finds of a run ended (its processes get a
/// moment to end after their parent died), the partition's values restored, no tame cgroup,
/// no journal.
pub fn assert_restored(
    before: &BTreeMap<String, Vec<u8>>,
    journal: &Path,
    leftovers: &dyn Fn() -> bool,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftovers() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!leftovers(), "{what}");
    assert_eq!(
        &state(),
        before,
        "a value the partition wrote was not restored"
    );
    assert_eq!(tame_cgroups(), Vec::<String>::new());
    assert!(!journal.join("journal").exists(), "the journal is left");
}
