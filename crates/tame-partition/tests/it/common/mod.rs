//! Fixture trees for partition tests: the host layer's synthetic machines, plus
//! what a cgroup v1 cpuset root holds on a live system (its task list); what a test
//! needs from the machine (skipped outside CI, failed under `CI=true`).
#![allow(dead_code, unused_imports)]

use std::path::PathBuf;

pub use tame_testing::require::{is_root, require, skip};

use tame_host::{CpuList, Root};
use tame_testing::synthetic::{CgroupLayout, SyntheticHost};

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: Root,
    pub journal: PathBuf,
}

/// Write `host` below a fresh temporary directory.
pub fn fixture(host: &SyntheticHost) -> Fixture {
    let dir = tame_testing::scratch_dir("partfx");
    let base = dir.path().join("root");
    host.write(&base).unwrap();
    Fixture {
        root: tame_testing::fixture_root(&base),
        journal: dir.path().join("journal"),
        _dir: dir,
    }
}

/// An 8-CPU box shaped like this development VM: cgroup v1 cpuset, no boot-time isolation.
pub fn v1_host() -> SyntheticHost {
    let mut h = SyntheticHost::rt_8cpu();
    h.cgroups = CgroupLayout::V1;
    h.isolated = CpuList::new();
    h.nohz_full = None;
    h.irq_cpus = None;
    h.managed_avoid = None;
    h.irqbalance = None;
    h.cmdline = "root=/dev/vda quiet".into();
    h.timer_migration = true;
    h.rt_runtime_us = 950_000;
    h
}

/// Add the files a live v1 cpuset root has that the synthetic tree leaves out.
pub fn add_v1_cpuset_files(root: &Root) {
    // Kept in numeric order, as the fixture backend keeps task lists (as the kernel shows them).
    let mut tids: Vec<u32> = root
        .list_dir("/proc")
        .unwrap()
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect();
    tids.sort_unstable();
    let list: String = tids.iter().map(|t| format!("{t}\n")).collect();
    put(root, "/sys/fs/cgroup/cpuset/tasks", &list);
    put(
        root,
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        "1\n",
    );
    put(root, "/sys/devices/virtual/workqueue/cpumask", "ff\n");
}

pub fn v1_fixture() -> Fixture {
    let f = fixture(&v1_host());
    add_v1_cpuset_files(&f.root);
    f
}

/// cpufreq drivers list their governors; the synthetic hosts leave the list out.
pub fn add_available_governors(root: &Root, governors: &str) {
    for cpu in root.list_dir("/sys/devices/system/cpu").unwrap() {
        let dir = format!("/sys/devices/system/cpu/{cpu}/cpufreq");
        if root.exists(&dir) {
            put(
                root,
                &format!("{dir}/scaling_available_governors"),
                &format!("{governors}\n"),
            );
        }
    }
}

pub fn put(root: &Root, path: &str, text: &str) {
    let p = root.path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub use tame_testing::tree_differences as differences;

/// Every directory and file below the root with its bytes.
pub fn snapshot(root: &Root) -> tame_testing::TreeSnapshot {
    tame_testing::snapshot_tree(root.base())
}

pub const MINIMAL_8: &str = r#"
[[partition]]
name = "system"
cpus = "0-1"
role = "system"

[[partition]]
name = "rt"
cpus = "2-7"
role = "isolated"
idle = "poll"
"#;

/// How many changes a full apply of `text` journals on `f` (then reverted).
pub fn count_steps(f: &Fixture, text: &str) -> u64 {
    use tame_host::journal::Stage;
    let count = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let c = count.clone();
    let hook = move |st: Stage| {
        if matches!(st, Stage::Journaled(_)) {
            c.set(c.get() + 1);
        }
        Ok(())
    };
    let spec = tame_partition::Spec::parse("test.toml", text).unwrap();
    tame_partition::apply(&f.root, &spec, text, &f.journal, Some(Box::new(hook))).unwrap();
    assert!(
        tame_partition::revert(&f.root, &f.journal)
            .unwrap()
            .journal_removed
    );
    count.get()
}
