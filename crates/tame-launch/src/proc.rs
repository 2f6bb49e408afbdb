//! What tame needs to know about a process before touching it, read through the host layer.

use serde::{Deserialize, Serialize};
use tame_host::process::parse_stat;
use tame_host::Root;

use crate::error::{invalid, LaunchError};

/// PF_KTHREAD in /proc/PID/stat's flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// A process as far as placing it is concerned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub comm: String,
    /// Real user id.
    pub uid: u32,
    /// Start time in clock ticks since boot: with the pid, it names the process uniquely.
    pub start_time: u64,
    pub tids: Vec<u32>,
}

/// Read and vet a process: it must exist, not be a zombie, not be a kernel thread.
pub fn inspect(root: &Root, pid: u32) -> Result<ProcessInfo, LaunchError> {
    let stat_path = format!("/proc/{pid}/stat");
    let stat_text = root.read(&stat_path).map_err(|_| {
        invalid(format!(
            "no process {pid} — check the PID (ps -e), it may have exited"
        ))
    })?;
    let stat = parse_stat(&stat_text).map_err(|e| invalid(format!("{stat_path}: {e}")))?;
    if stat.state == 'Z' || stat.state == 'X' {
        return Err(invalid(format!(
            "process {pid} ({}) is a zombie: it has exited and only waits for its parent to reap it — nothing to move",
            stat.comm
        )));
    }
    if stat.flags & PF_KTHREAD != 0 {
        return Err(invalid(format!(
            "process {pid} ({}) is a kernel thread: tame moves user programs only; kernel threads follow the partition's kthread rules (tame apply)",
            stat.comm
        )));
    }
    let status = root.read(format!("/proc/{pid}/status")).unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u32::MAX);
    let tids = root
        .list_dir(format!("/proc/{pid}/task"))
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect();
    Ok(ProcessInfo {
        pid,
        comm: stat.comm,
        uid,
        start_time: stat.start_time,
        tids,
    })
}

/// The cpuset cgroup a thread belongs to (cgroup v1 path, e.g. `/` or `/tame/rt`).
pub fn cpuset_of(root: &Root, pid: u32, tid: u32) -> Option<String> {
    root.read_trimmed(format!("/proc/{pid}/task/{tid}/cpuset"))
        .ok()
}

/// Per-thread counters that show whether a real-time thread still makes system
/// calls or takes faults: context switches, page faults, CPU time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCounters {
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

pub fn counters(root: &Root, pid: u32, tid: u32) -> Option<ThreadCounters> {
    let status = root.read(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let stat = parse_stat(&root.read(format!("/proc/{pid}/task/{tid}/stat")).ok()?).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Some(ThreadCounters {
        voluntary_switches: field("voluntary_ctxt_switches:"),
        involuntary_switches: field("nonvoluntary_ctxt_switches:"),
        minor_faults: stat.minor_faults,
        major_faults: stat.major_faults,
        cpu_ticks: stat.utime_ticks + stat.stime_ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspects_this_process() {
        let me = std::process::id();
        let info = inspect(&Root::system(), me).unwrap();
        assert_eq!(info.pid, me);
        assert!(info.tids.contains(&me));
        assert!(info.start_time > 0);
        // SAFETY: no arguments.
        assert_eq!(info.uid, unsafe { libc::getuid() });
    }

    #[test]
    fn refuses_kernel_threads_and_missing_processes() {
        let err = inspect(&Root::system(), 2).unwrap_err().to_string();
        assert!(err.contains("kernel thread"), "{err}");
        let err = inspect(&Root::system(), 999_999_999)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no process"), "{err}");
    }
}
