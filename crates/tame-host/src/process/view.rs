//! Typed access to one process or thread under /proc: `root.process(pid)`,
//! `.task(tid)`. The /proc paths are spelled here and nowhere else.

use std::path::PathBuf;

use crate::cgroup::{parse_proc_cgroup, Membership};
use crate::error::ParseError;
use crate::process::{parse_stat, status_affinity, TaskStat};
use crate::{CpuList, HostError, Root};

/// Where procfs is mounted.
const PROC: &str = "/proc";

impl Root {
    /// Process `pid` under /proc.
    pub fn process(&self, pid: u32) -> ProcessView<'_> {
        ProcessView { root: self, pid }
    }

    /// Every process id under /proc, in order.
    pub fn pids(&self) -> Vec<u32> {
        numeric_entries(self, PROC)
    }

    /// The real directory of procfs below this root, for code that must read it
    /// without the host layer (tame-ipc, which depends on no other tame crate).
    pub fn proc_dir(&self) -> PathBuf {
        self.path(PROC)
    }
}

fn numeric_entries(root: &Root, dir: &str) -> Vec<u32> {
    let mut ids: Vec<u32> = root
        .list_dir(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

fn read_stat(root: &Root, path: &str) -> Result<TaskStat, HostError> {
    let text = root.read(path)?;
    parse_stat(&text).map_err(|e| e.at(path))
}

/// One process.
#[derive(Clone, Copy, Debug)]
pub struct ProcessView<'a> {
    root: &'a Root,
    pid: u32,
}

impl<'a> ProcessView<'a> {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn dir(&self) -> String {
        format!("{PROC}/{}", self.pid)
    }

    /// The process is there (it may be a zombie).
    pub fn exists(&self) -> bool {
        self.root.exists(self.dir())
    }

    /// `/proc/PID/stat`.
    pub fn stat(&self) -> Result<TaskStat, HostError> {
        read_stat(self.root, &format!("{}/stat", self.dir()))
    }

    /// `/proc/PID/stat` as text, for callers that report its path themselves.
    pub fn stat_text(&self) -> Result<(String, String), HostError> {
        let path = format!("{}/stat", self.dir());
        Ok((self.root.read(&path)?, path))
    }

    /// `/proc/PID/status`.
    pub fn status(&self) -> Result<ProcStatus, HostError> {
        self.root
            .read(format!("{}/status", self.dir()))
            .map(ProcStatus::new)
    }

    /// The thread ids, in order; empty when the process is gone.
    pub fn threads(&self) -> Vec<u32> {
        numeric_entries(self.root, &format!("{}/task", self.dir()))
    }

    /// Thread `tid` of this process.
    pub fn task(&self, tid: u32) -> ThreadView<'a> {
        ThreadView {
            root: self.root,
            pid: self.pid,
            tid,
        }
    }

    /// `/proc/PID/cgroup`: the process's group in every hierarchy.
    pub fn cgroups(&self) -> Result<Vec<Membership>, HostError> {
        let path = format!("{}/cgroup", self.dir());
        let text = self.root.read(&path)?;
        parse_proc_cgroup(&text).map_err(|e| e.at(path))
    }
}

/// One thread of a process.
#[derive(Clone, Copy, Debug)]
pub struct ThreadView<'a> {
    root: &'a Root,
    pid: u32,
    tid: u32,
}

impl ThreadView<'_> {
    pub fn tid(&self) -> u32 {
        self.tid
    }

    fn dir(&self) -> String {
        format!("{PROC}/{}/task/{}", self.pid, self.tid)
    }

    pub fn exists(&self) -> bool {
        self.root.exists(self.dir())
    }

    /// `/proc/PID/task/TID/stat`.
    pub fn stat(&self) -> Result<TaskStat, HostError> {
        read_stat(self.root, &format!("{}/stat", self.dir()))
    }

    /// `/proc/PID/task/TID/status`.
    pub fn status(&self) -> Result<ProcStatus, HostError> {
        self.root
            .read(format!("{}/status", self.dir()))
            .map(ProcStatus::new)
    }

    /// `/proc/PID/task/TID/schedstat`.
    pub fn schedstat(&self) -> Result<Schedstat, HostError> {
        let path = format!("{}/schedstat", self.dir());
        let text = self.root.read(&path)?;
        parse_schedstat(&text).ok_or_else(|| {
            ParseError::new(1, "expected three numbers (run ns, wait ns, timeslices)").at(path)
        })
    }
}

/// The text of a `status` file, with accessors for the fields tame uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStatus {
    text: String,
}

impl ProcStatus {
    pub fn new(text: String) -> Self {
        Self { text }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The value of `Name:` (trimmed), if the field is there.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == name).then_some(v.trim())
        })
    }

    /// A numeric field (`voluntary_ctxt_switches`, …).
    pub fn number(&self, name: &str) -> Option<u64> {
        self.field(name)?.parse().ok()
    }

    /// The real user id (first value of `Uid:`).
    pub fn uid(&self) -> Option<u32> {
        self.field("Uid")?.split_whitespace().next()?.parse().ok()
    }

    /// `Cpus_allowed_list`.
    pub fn cpus_allowed(&self) -> Option<CpuList> {
        status_affinity(&self.text).and_then(|l| CpuList::parse(l).ok())
    }
}

/// `/proc/PID/task/TID/schedstat`: time on the CPU, time waiting for it, timeslices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedstat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

pub fn parse_schedstat(text: &str) -> Option<Schedstat> {
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some(Schedstat {
        run_ns: it.next()??,
        wait_ns: it.next()??,
        timeslices: it.next()??,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let s = ProcStatus::new(
            "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nCpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t7\n"
                .into(),
        );
        assert_eq!(s.uid(), Some(1000));
        assert_eq!(s.cpus_allowed().unwrap().to_string(), "0-1");
        assert_eq!(s.number("voluntary_ctxt_switches"), Some(7));
        assert_eq!(s.number("nonvoluntary_ctxt_switches"), None);
        assert_eq!(s.field("Name"), Some("x"));
    }

    #[test]
    fn schedstat_and_cgroups_parse() {
        assert_eq!(
            parse_schedstat("123 45 6\n"),
            Some(Schedstat {
                run_ns: 123,
                wait_ns: 45,
                timeslices: 6
            })
        );
        assert_eq!(parse_schedstat("1 2"), None);
    }
}
