//! What tame needs to know about a process before touching it (run, detach,
//! reserve): it exists, is not a zombie or a kernel thread; its owner, start
//! time and threads; per-thread counters for `tame ps`.

use serde::{Deserialize, Serialize};

use crate::process::{parse_stat, PF_KTHREAD};
use crate::Root;

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

/// Why a process cannot be placed. Every variant is bad input (a wrong PID).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InspectError {
    #[error("no process {pid} — check the PID (ps -e), it may have exited")]
    NoProcess { pid: u32 },
    #[error("{path}: {reason}")]
    Malformed { path: String, reason: String },
    #[error("process {pid} ({comm}) is a zombie: it has exited and only waits for its parent to reap it — nothing to move")]
    Zombie { pid: u32, comm: String },
    #[error("process {pid} ({comm}) is a kernel thread: tame moves user programs only; kernel threads follow the partition's kthread rules (tame apply)")]
    KernelThread { pid: u32, comm: String },
}

/// Read and vet a process: it must exist, not be a zombie, not be a kernel thread.
pub fn inspect(root: &Root, pid: u32) -> Result<ProcessInfo, InspectError> {
    let process = root.process(pid);
    let (stat_text, stat_path) = process
        .stat_text()
        .map_err(|_| InspectError::NoProcess { pid })?;
    let stat = parse_stat(&stat_text).map_err(|e| InspectError::Malformed {
        path: stat_path,
        reason: e.to_string(),
    })?;
    if stat.state == 'Z' || stat.state == 'X' {
        return Err(InspectError::Zombie {
            pid,
            comm: stat.comm,
        });
    }
    if stat.flags & PF_KTHREAD != 0 {
        return Err(InspectError::KernelThread {
            pid,
            comm: stat.comm,
        });
    }
    let uid = process
        .status()
        .ok()
        .and_then(|s| s.uid())
        .unwrap_or(u32::MAX);
    Ok(ProcessInfo {
        pid,
        comm: stat.comm,
        uid,
        start_time: stat.start_time,
        tids: process.threads(),
    })
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
    let task = root.process(pid).task(tid);
    let status = task.status().ok()?;
    let stat = task.stat().ok()?;
    let field = |name: &str| status.number(name).unwrap_or(0);
    Some(ThreadCounters {
        voluntary_switches: field("voluntary_ctxt_switches"),
        involuntary_switches: field("nonvoluntary_ctxt_switches"),
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
        assert_eq!(info.uid, nix::unistd::getuid().as_raw());
        assert!(counters(&Root::system(), me, me).is_some());
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

    #[test]
    fn vets_a_fixture_process() {
        let dir = tempfile::tempdir().unwrap();
        let put = |p: &str, t: &str| {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        let stat = |state: &str| {
            format!("42 (w x) {state} 1 42 42 0 -1 4194304 3 0 1 0 5 6 0 0 20 0 1 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
        };
        put("proc/42/stat", &stat("S"));
        put(
            "proc/42/status",
            "Uid:\t7\t7\t7\t7\nvoluntary_ctxt_switches:\t9\n",
        );
        put("proc/42/task/42/stat", &stat("S"));
        put("proc/42/task/42/status", "voluntary_ctxt_switches:\t9\n");
        put("proc/42/task/43/stat", &stat("S"));
        let root = Root::new(dir.path());
        let info = inspect(&root, 42).unwrap();
        assert_eq!(
            (info.uid, info.start_time, info.comm.as_str()),
            (7, 777, "w x")
        );
        assert_eq!(info.tids, vec![42, 43]);
        let c = counters(&root, 42, 42).unwrap();
        assert_eq!(
            (c.voluntary_switches, c.minor_faults, c.cpu_ticks),
            (9, 3, 11)
        );
        put("proc/42/stat", &stat("Z"));
        assert!(matches!(
            inspect(&root, 42),
            Err(InspectError::Zombie { .. })
        ));
        put("proc/42/stat", "42 (w) S 1\n");
        let err = inspect(&root, 42).unwrap_err().to_string();
        assert!(err.starts_with("/proc/42/stat: line 1:"), "{err}");
    }
}
