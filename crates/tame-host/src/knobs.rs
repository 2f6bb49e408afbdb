//! Knobs: the files tame may write (IRQ affinities, cpuset files, sysctls, idle
//! and frequency settings, resctrl schemata), as they read now. A plan compares
//! with these and shows them as the old values, so planning reads nothing itself.
//!
//! The readers that already read a writable file keep its text through
//! [`Reader::knob`](crate::reader::Reader::knob); [`read_extra`] reads the few that no
//! other model needs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::reader::Reader;

/// The CPUs unbound workqueue work may run on.
pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// Owner, group and permission bits of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
}

/// The writable files of the machine as they are now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knobs {
    /// The exact text of each writable file that was read, by host path.
    pub values: BTreeMap<String, String>,
    /// Directories tame makes (its cgroups, its resctrl groups) that exist already.
    pub dirs: BTreeSet<String>,
    /// Owner and mode of the task lists of tame's cgroups, by host path.
    pub owners: BTreeMap<String, FileOwner>,
    /// The cpufreq governors each CPU offers (`scaling_available_governors`);
    /// absent for a CPU whose driver does not list them.
    pub available_governors: BTreeMap<u32, Vec<String>>,
}

impl Knobs {
    pub(crate) fn keep(&mut self, host_path: &str, text: &str) {
        self.values.insert(host_path.to_string(), text.to_string());
    }

    /// Take in what was read after this (by another reader): as if one reader had read
    /// both, the later reading of a file wins.
    pub(crate) fn take_later(&mut self, mut later: Knobs) {
        // `append` keeps the value of `later` for a path in both (and moves in bulk).
        self.values.append(&mut later.values);
        self.dirs.append(&mut later.dirs);
        self.owners.append(&mut later.owners);
        self.available_governors
            .append(&mut later.available_governors);
    }

    /// The text of a writable file; `None` when it does not exist (or was not read).
    pub fn text(&self, host_path: &str) -> Option<&str> {
        self.values.get(host_path).map(String::as_str)
    }

    /// Whether a writable file exists.
    pub fn exists(&self, host_path: &str) -> bool {
        self.values.contains_key(host_path)
    }

    /// Whether a directory tame makes exists already.
    pub fn has_dir(&self, host_path: &str) -> bool {
        self.dirs.contains(host_path)
    }

    pub fn owner(&self, host_path: &str) -> Option<FileOwner> {
        self.owners.get(host_path).copied()
    }

    pub fn available_governors(&self, cpu: u32) -> Option<&[String]> {
        self.available_governors.get(&cpu).map(Vec::as_slice)
    }
}

/// Record an existing directory tame makes, with the owner and mode of its task list.
pub(crate) fn keep_dir(r: &mut Reader, dir: &str, task_list: Option<&str>) {
    r.knobs.dirs.insert(dir.to_string());
    if let Some(list) = task_list {
        if let Some(owner) = owner_of(r, list) {
            r.knobs.owners.insert(list.to_string(), owner);
        }
    }
}

/// Owner and mode of a file below the root; `None` when it does not exist.
/// (`Root` reads contents only; this is the one metadata read of the model.)
fn owner_of(r: &Reader, host_path: &str) -> Option<FileOwner> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(r.root().path(host_path)).ok()?;
    Some(FileOwner {
        uid: m.uid(),
        gid: m.gid(),
        mode: m.mode() & 0o7777,
    })
}

/// The writable files no other model reads: the workqueue cpumask, and the
/// governors of each CPU with cpufreq.
pub fn read_extra(r: &mut Reader, cpufreq_cpus: impl IntoIterator<Item = u32>) {
    r.knob(WORKQUEUE_CPUMASK);
    for cpu in cpufreq_cpus {
        let path = crate::power::available_governors_path(cpu);
        if let Some(text) = r.optional(&path) {
            let list = text.split_whitespace().map(str::to_string).collect();
            r.knobs.available_governors.insert(cpu, list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_read_later_wins() {
        let mut first = Knobs::default();
        first.keep("/a", "1\n");
        first.keep("/b", "1\n");
        first.dirs.insert("/d".into());
        let mut later = Knobs::default();
        later.keep("/b", "2\n");
        later.keep("/c", "2\n");
        first.take_later(later);
        assert_eq!(first.text("/a"), Some("1\n"));
        assert_eq!(first.text("/b"), Some("2\n"));
        assert_eq!(first.text("/c"), Some("2\n"));
        assert!(first.has_dir("/d"));
    }

    #[test]
    fn extra_knobs_and_directories_on_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let put = |p: &str, s: &str| {
            let path = dir.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        put(WORKQUEUE_CPUMASK, "ff\n");
        put(
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_available_governors",
            "performance powersave\n",
        );
        put("/sys/fs/cgroup/cpuset/tame-rt/tasks", "");
        let root = crate::Root::new(dir.path());
        let mut r = Reader::new(&root);
        read_extra(&mut r, [0, 1]);
        keep_dir(
            &mut r,
            "/sys/fs/cgroup/cpuset/tame-rt",
            Some("/sys/fs/cgroup/cpuset/tame-rt/tasks"),
        );
        let k = r.knobs;
        assert_eq!(k.text(WORKQUEUE_CPUMASK), Some("ff\n"));
        assert_eq!(k.available_governors(0), None);
        assert_eq!(
            k.available_governors(1).unwrap(),
            ["performance", "powersave"]
        );
        assert!(k.has_dir("/sys/fs/cgroup/cpuset/tame-rt"));
        let own = k.owner("/sys/fs/cgroup/cpuset/tame-rt/tasks").unwrap();
        assert_eq!(own.uid, nix::unistd::geteuid().as_raw());
        assert!(!k.exists("/sys/fs/cgroup/cpuset/tame-rt/tasks"));
        assert!(r.problems.is_empty());
    }
}
