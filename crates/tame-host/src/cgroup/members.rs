//! The tasks in a cgroup's task list, with what decides whether they can move.

use crate::process::{parse_stat, status_affinity, Processes, PF_KTHREAD, PF_NO_SETAFFINITY};
use crate::{CpuList, Root};

/// The ids in a task list (`tasks`, `cgroup.procs`), in the order listed.
pub fn parse_ids(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// The ids in a task list on the host; none when it cannot be read.
pub fn read_ids(root: &Root, list: &str) -> Vec<u32> {
    parse_ids(&root.read(list).unwrap_or_default())
}

/// A listed task (thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub tid: u32,
    /// `None` when the task is gone (or the tree has no /proc for it).
    pub comm: Option<String>,
    pub kthread: bool,
    /// PF_NO_SETAFFINITY: per-CPU kernel threads and workqueue workers.
    pub affinity_locked: bool,
    pub affinity: Option<CpuList>,
}

impl Member {
    /// Whether the kernel keeps it where it is (see [`kernel_places`]).
    pub fn kernel_places(&self) -> bool {
        kernel_places(
            self.kthread,
            self.affinity_locked,
            self.comm.as_deref().unwrap_or_default(),
        )
    }

    fn unknown(tid: u32) -> Self {
        Self {
            tid,
            comm: None,
            kthread: false,
            affinity_locked: false,
            affinity: None,
        }
    }
}

/// Whether the kernel keeps a thread where it is: PF_NO_SETAFFINITY threads
/// (per-CPU threads, workqueue workers) and kthreadd, which cgroup v1 refuses to move.
pub fn kernel_places(kernel_thread: bool, affinity_locked: bool, comm: &str) -> bool {
    affinity_locked || (kernel_thread && comm == "kthreadd")
}

/// The listed tasks as the host model saw them.
pub fn from_model(ids: &[u32], processes: &Processes) -> Vec<Member> {
    let by_tid: std::collections::BTreeMap<u32, &crate::process::Task> =
        processes.tasks.iter().map(|t| (t.tid, t)).collect();
    ids.iter()
        .map(|&tid| match by_tid.get(&tid) {
            Some(t) => Member {
                tid,
                comm: Some(t.comm.clone()),
                kthread: t.kthread,
                affinity_locked: t.affinity_locked,
                affinity: Some(t.affinity.clone()),
            },
            None => Member::unknown(tid),
        })
        .collect()
}

/// The tasks in the task list `list` now (apply reads them again: tasks come and go).
pub fn read(root: &Root, list: &str) -> Vec<Member> {
    read_ids(root, list)
        .into_iter()
        .map(|tid| read_member(root, tid))
        .collect()
}

/// A task by its id alone: /proc/TID/task/TID names any thread of any process.
fn read_member(root: &Root, tid: u32) -> Member {
    let stat = root
        .read(format!("/proc/{tid}/task/{tid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s).ok());
    let affinity = root
        .read(format!("/proc/{tid}/task/{tid}/status"))
        .ok()
        .and_then(|s| status_affinity(&s).and_then(|l| CpuList::parse(l).ok()));
    let flags = stat.as_ref().map_or(0, |s| s.flags);
    Member {
        tid,
        comm: stat.map(|s| s.comm),
        kthread: flags & PF_KTHREAD != 0,
        affinity_locked: flags & PF_NO_SETAFFINITY != 0,
        affinity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_list_order() {
        assert_eq!(parse_ids("3\n1\n\n20 x\n"), vec![3, 1, 20]);
        assert!(parse_ids("").is_empty());
    }

    #[test]
    fn kthreadd_and_locked_threads_stay() {
        assert!(kernel_places(true, false, "kthreadd"));
        assert!(kernel_places(true, true, "ksoftirqd/1"));
        assert!(!kernel_places(true, false, "kworker/u8:0"));
        assert!(!kernel_places(false, false, "kthreadd"));
    }

    #[test]
    fn live_read_and_model_agree_on_the_dev_vm() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/dev-vm");
        let root = Root::new(&dir);
        let m = crate::HostModel::read(&root);
        let ids: Vec<u32> = root
            .list_dir("/proc")
            .unwrap()
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        let model = from_model(&ids, &m.processes);
        let live: Vec<Member> = ids.iter().map(|&t| read_member(&root, t)).collect();
        assert_eq!(model, live);
        assert!(model
            .iter()
            .any(|t| t.comm.as_deref() == Some("ksoftirqd/1") && t.kernel_places()));
        assert!(from_model(&[999_999], &m.processes)[0].comm.is_none());
    }
}
