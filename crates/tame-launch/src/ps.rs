//! `tame ps`: every thread of the programs tame placed that still run, with
//! what happened to them since placement (switches, faults, CPU time), and the
//! records of those that are gone, which it removes and names.
//!
//! Records are read as hostile input: a record is only ever removed (never reverted:
//! the thread ids it names may be another program's now), only when its process is
//! known to be gone, and only while the record is still the one judged.

use serde::Serialize;
use tame_host::process::InspectError;
use tame_host::Root;

use crate::detach::{Placed, Store};
use crate::proc::{self, ProcessInfo};

/// One placed thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PsRow {
    pub partition_cpus: String,
    /// "run" or "detach".
    pub kind: String,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub policy: String,
    pub priority: i32,
    /// The CPU it last ran on.
    pub cpu: Option<u32>,
    /// Since placement.
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub cpu_ticks: u64,
}

/// A placed process that is gone: it exited, or its pid names another program now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gone {
    pub pid: u32,
    /// "run" or "detach".
    pub kind: String,
    /// The program that was placed.
    pub comm: String,
    pub cpus: String,
    /// The program that has the pid now, when another one has it.
    pub now: Option<String>,
    /// Why its record is still there, when it could not be removed.
    pub kept: Option<String>,
}

/// What `tame ps` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ps {
    /// Every thread of the placed processes still running.
    pub rows: Vec<PsRow>,
    /// The placed processes that are gone; their records were removed (unless `kept`).
    pub gone: Vec<Gone>,
}

/// What became of a placed process.
enum Seen {
    /// Still the one placed (the same pid and start time).
    Running(ProcessInfo),
    /// Exited (`None`) or replaced by another program under its pid.
    Gone(Option<String>),
    /// Cannot tell (its stat is unreadable, or this root shows no processes at all).
    Unknown,
}

fn see(root: &Root, record: &Placed) -> Seen {
    match tame_host::process::inspect(root, record.pid) {
        Ok(info) if info.start_time == record.start_time => Seen::Running(info),
        Ok(info) => Seen::Gone(Some(info.comm)),
        // A zombie has no threads left to show: exited, whichever program it was.
        Err(InspectError::Zombie { .. }) => Seen::Gone(None),
        Err(InspectError::KernelThread { comm, .. }) => Seen::Gone(Some(comm)),
        // Absent, where processes can be seen at all (pid 1 always is): exited. A /proc
        // that shows nothing (another --root) proves nothing, and nothing is removed.
        Err(InspectError::NoProcess { .. }) if root.process(1).exists() => Seen::Gone(None),
        Err(_) => Seen::Unknown,
    }
}

/// Every placed process: the threads of those still running, oldest pid first, and
/// those gone, whose records are removed here.
pub fn ps(root: &Root, store: &Store) -> Ps {
    let mut ps = Ps::default();
    for record in store.list() {
        match see(root, &record) {
            Seen::Running(info) => ps.rows.extend(thread_rows(root, &record, info)),
            Seen::Gone(now) => {
                let kept = match store.forget_gone(&record) {
                    Ok(true) => None,
                    // Replaced meanwhile by a record of a process now running: not gone.
                    Ok(false) => continue,
                    Err(e) => Some(e.to_string()),
                };
                ps.gone.push(Gone {
                    pid: record.pid,
                    kind: record.kind.clone(),
                    comm: record.comm.clone(),
                    cpus: record.cpus.to_string(),
                    now,
                    kept,
                });
            }
            Seen::Unknown => {}
        }
    }
    ps
}

/// The threads of every placed process still running (the same process:
/// pid and start time), oldest pid first; nothing is removed.
pub fn rows(root: &Root, store: &Store) -> Vec<PsRow> {
    let mut rows = Vec::new();
    for record in store.list() {
        if let Seen::Running(info) = see(root, &record) {
            rows.extend(thread_rows(root, &record, info));
        }
    }
    rows
}

/// One row per thread of the running process `info` that `record` placed.
fn thread_rows(root: &Root, record: &Placed, info: ProcessInfo) -> Vec<PsRow> {
    let mut rows = Vec::new();
    for tid in info.tids {
        let now = proc::counters(root, record.pid, tid).unwrap_or_default();
        let base = record.counters_of(tid);
        let sched = root.thread_sched(tid).ok();
        let stat = root.process(record.pid).task(tid).stat().ok();
        rows.push(PsRow {
            partition_cpus: record.cpus.to_string(),
            kind: record.kind.clone(),
            pid: record.pid,
            tid,
            comm: stat
                .as_ref()
                .map_or_else(|| record.comm.clone(), |s| s.comm.clone()),
            policy: sched.map_or("?", |s| policy_name(s.policy)).to_string(),
            priority: sched.map_or(0, |s| s.priority),
            cpu: stat.map(|s| s.last_cpu),
            voluntary_switches: now
                .voluntary_switches
                .saturating_sub(base.voluntary_switches),
            involuntary_switches: now
                .involuntary_switches
                .saturating_sub(base.involuntary_switches),
            minor_faults: now.minor_faults.saturating_sub(base.minor_faults),
            major_faults: now.major_faults.saturating_sub(base.major_faults),
            cpu_ticks: now.cpu_ticks.saturating_sub(base.cpu_ticks),
        });
    }
    rows
}

/// The name of a raw scheduling policy number, as `--policy` spells it.
pub fn policy_name(raw: i32) -> &'static str {
    match raw {
        libc::SCHED_OTHER => "other",
        libc::SCHED_FIFO => "fifo",
        libc::SCHED_RR => "rr",
        libc::SCHED_BATCH => "batch",
        libc::SCHED_IDLE => "idle",
        6 => "deadline", // SCHED_DEADLINE, which libc does not name
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use tame_host::CpuList;
    use tame_testing::FixtureBackend;

    use crate::detach::{Placed, RECORD_VERSION};
    use crate::proc::ThreadCounters;

    /// A /proc stat line: fields 3 to 41 of proc(5), the ones named set.
    fn stat(tid: u32, start: u64, minflt: u64, cpu: u32) -> String {
        let mut f = vec!["0".to_string(); 39];
        let mut set = |field: usize, v: String| f[field - 3] = v;
        set(3, "S".into());
        set(10, minflt.to_string());
        set(14, "5".into());
        set(15, "2".into());
        set(22, start.to_string());
        set(39, cpu.to_string());
        format!("{tid} (worker) {}\n", f.join(" "))
    }

    #[test]
    fn rows_show_each_live_thread_with_counters_since_placement() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(FixtureBackend::new());
        let root = backend.root(dir.path().join("root"));
        let put = |p: &str, t: &str| {
            let f = root.path(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        put("/proc/40/stat", &stat(40, 777, 10, 3));
        put("/proc/40/status", "Uid:\t0\t0\t0\t0\n");
        for (tid, minflt) in [(40, 10), (41, 25)] {
            put(
                &format!("/proc/40/task/{tid}/stat"),
                &stat(tid, 777, minflt, 3),
            );
            put(
                &format!("/proc/40/task/{tid}/status"),
                "voluntary_ctxt_switches:\t9\nnonvoluntary_ctxt_switches:\t1\n",
            );
        }
        backend.add_thread(40, CpuList::parse("3").unwrap());
        let store = Store::new(&dir.path().join("state"));
        let placed = |pid: u32, start_time: u64| Placed {
            version: RECORD_VERSION,
            kind: "run".into(),
            pid,
            start_time,
            comm: "worker".into(),
            cpus: CpuList::parse("3").unwrap(),
            cpuset: None,
            counters: vec![(
                40,
                ThreadCounters {
                    voluntary_switches: 4,
                    minor_faults: 8,
                    ..Default::default()
                },
            )],
        };
        store.record_run(&root, &placed(40, 777)).unwrap();
        // Gone, and a pid reused by another process: neither is listed.
        store.record_run(&root, &placed(50, 1)).unwrap();
        put("/proc/60/stat", &stat(60, 999, 0, 0));
        put("/proc/60/status", "Uid:\t0\t0\t0\t0\n");
        store.record_run(&root, &placed(60, 1)).unwrap();

        let rows = rows(&root, &store);
        assert_eq!(rows.len(), 2, "{rows:?}");
        let main = &rows[0];
        assert_eq!((main.pid, main.tid, main.kind.as_str()), (40, 40, "run"));
        assert_eq!((main.policy.as_str(), main.priority), ("other", 0));
        assert_eq!(main.cpu, Some(3));
        assert_eq!(main.voluntary_switches, 5);
        assert_eq!(main.minor_faults, 2);
        assert_eq!(main.cpu_ticks, 7);
        // A thread born since placement counts from zero; its policy is unknown here.
        let born = &rows[1];
        assert_eq!((born.tid, born.minor_faults), (41, 25));
        assert_eq!(born.policy, "?");
    }

    /// A fixture host whose /proc shows `procs` (pid, comm, start time), and a store.
    struct Host {
        dir: tempfile::TempDir,
        root: Root,
        store: Store,
    }

    impl Host {
        fn new(procs: &[(u32, &str, u64)]) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let backend = Arc::new(FixtureBackend::new());
            let root = backend.root(dir.path().join("root"));
            for &(pid, comm, start) in procs {
                let line = stat(pid, start, 0, 0).replace("(worker)", &format!("({comm})"));
                for p in [
                    format!("/proc/{pid}/stat"),
                    format!("/proc/{pid}/task/{pid}/stat"),
                ] {
                    let f = root.path(&p);
                    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                    std::fs::write(f, &line).unwrap();
                }
                std::fs::write(
                    root.path(format!("/proc/{pid}/status")),
                    "Uid:\t0\t0\t0\t0\n",
                )
                .unwrap();
            }
            let store = Store::new(&dir.path().join("state"));
            Host { dir, root, store }
        }

        fn record(&self, pid: u32, start_time: u64) -> Placed {
            let placed = Placed {
                version: RECORD_VERSION,
                kind: "detach".into(),
                pid,
                start_time,
                comm: "worker".into(),
                cpus: CpuList::parse("1").unwrap(),
                cpuset: None,
                counters: Vec::new(),
            };
            self.store.record_run(&self.root, &placed).unwrap();
            placed
        }

        fn recorded(&self, pid: u32) -> bool {
            self.store.journal_dir(pid).exists()
        }
    }

    #[test]
    fn records_of_processes_gone_are_shown_as_gone_and_removed() {
        let host = Host::new(&[(1, "init", 1), (40, "worker", 777), (60, "bash", 999)]);
        host.record(40, 777);
        // Exited, and a pid reused by another program.
        host.record(50, 5);
        host.record(60, 6);
        let found = ps(&host.root, &host.store);
        assert_eq!(found.rows.len(), 1, "{found:?}");
        assert_eq!(found.rows[0].pid, 40);
        let gone = |pid, now: Option<&str>| Gone {
            pid,
            kind: "detach".into(),
            comm: "worker".into(),
            cpus: "1".into(),
            now: now.map(str::to_string),
            kept: None,
        };
        assert_eq!(found.gone, vec![gone(50, None), gone(60, Some("bash"))]);
        assert!(host.recorded(40));
        assert!(!host.recorded(50) && !host.recorded(60));
        // Said once: the next look finds only the running one.
        let again = ps(&host.root, &host.store);
        assert_eq!((again.rows.len(), again.gone.len()), (1, 0));
        // The last record gone takes the directory of records with it.
        std::fs::remove_file(host.root.path("/proc/40/stat")).unwrap();
        let last = ps(&host.root, &host.store);
        assert_eq!(last.gone, vec![gone(40, None)]);
        assert!(!host.dir.path().join("state/placed").exists());
    }

    #[test]
    fn nothing_is_removed_where_no_process_can_be_seen_or_the_record_is_not_its_own() {
        // No /proc at all (another --root): absent proves nothing.
        let host = Host::new(&[]);
        host.record(50, 5);
        let found = ps(&host.root, &host.store);
        assert_eq!(found, Ps::default());
        assert!(host.recorded(50));

        // A note that names another pid than its directory is not listed, nor removed.
        let host = Host::new(&[(1, "init", 1)]);
        host.record(50, 5);
        std::fs::rename(host.store.journal_dir(50), host.store.journal_dir(70)).unwrap();
        assert_eq!(ps(&host.root, &host.store), Ps::default());
        assert!(host.recorded(70));
    }

    #[test]
    fn a_record_replaced_since_it_was_judged_is_left_alone() {
        let host = Host::new(&[(1, "init", 1), (50, "new", 9)]);
        let old = host.record(50, 5);
        // A detach of the new process with that pid wrote its own record meanwhile.
        host.store.remove(50);
        let new = host.record(50, 9);
        assert!(!host.store.forget_gone(&old).unwrap());
        assert_eq!(host.store.load(50).unwrap(), Some(new.clone()));
        assert!(host.store.forget_gone(&new).unwrap());
        assert!(!host.recorded(50));
    }

    #[test]
    fn policy_names_match_the_policy_flag() {
        assert_eq!(policy_name(libc::SCHED_FIFO), "fifo");
        assert_eq!(policy_name(6), "deadline");
        assert_eq!(policy_name(42), "?");
    }
}
