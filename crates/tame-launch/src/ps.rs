//! `tame ps`: every thread of the programs tame placed that still run, with
//! what happened to them since placement (switches, faults, CPU time).

use serde::Serialize;
use tame_host::Root;

use crate::detach::Store;
use crate::proc;

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

/// The threads of every placed process still running (the same process:
/// pid and start time), oldest pid first.
pub fn rows(root: &Root, store: &Store) -> Vec<PsRow> {
    let mut rows = Vec::new();
    for record in store.list() {
        let Ok(info) = proc::inspect(root, record.pid) else {
            continue;
        };
        if info.start_time != record.start_time {
            continue;
        }
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

    #[test]
    fn policy_names_match_the_policy_flag() {
        assert_eq!(policy_name(libc::SCHED_FIFO), "fifo");
        assert_eq!(policy_name(6), "deadline");
        assert_eq!(policy_name(42), "?");
    }
}
