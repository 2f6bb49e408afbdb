//! `tame detach` / `tame attach`: move a running program's threads onto
//! isolated CPUs and put them back exactly as they were.
//!
//! Before the first change, every selected thread's previous affinity,
//! scheduling attributes and cpuset cgroup are written to a record file and
//! fsynced (file and directory); attach — from any later invocation — restores
//! them from it and removes the record only when every thread is restored.
//! Threads created after detach inherit the detached placement; attach gives
//! them the main thread's previous state.

use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::{CpuList, Root};
use tame_rt::sched::{self, SchedSpec, ThreadSched};

use crate::error::{failed, invalid, LaunchError};
use crate::proc::{self, ProcessInfo, ThreadCounters};

pub const RECORD_VERSION: u32 = 1;
/// Where cgroup v1's cpuset hierarchy is mounted.
pub const CPUSET_MOUNT: &str = "/sys/fs/cgroup/cpuset";

/// Which threads of the process to move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadSelection {
    All,
    Main,
    Tids(Vec<u32>),
}

impl ThreadSelection {
    pub fn parse(text: &str) -> Result<Self, LaunchError> {
        match text {
            "all" => Ok(Self::All),
            "main" => Ok(Self::Main),
            list => list
                .split(',')
                .map(|t| t.trim().parse::<u32>())
                .collect::<Result<Vec<_>, _>>()
                .map(Self::Tids)
                .map_err(|_| {
                    invalid(format!(
                        "--threads {list:?}: use all, main, or thread ids such as 1234,1240"
                    ))
                }),
        }
    }
}

/// What to do to the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetachRequest {
    pub pid: u32,
    pub cpus: CpuList,
    pub threads: ThreadSelection,
    pub sched: Option<SchedSpec>,
    /// cgroup v1 cpuset path (e.g. `/tame/rt`) the threads join, if the target is a partition.
    pub cpuset: Option<String>,
}

/// One thread's state before tame touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub tid: u32,
    pub affinity: CpuList,
    pub sched: ThreadSched,
    pub cpuset: Option<String>,
    /// Counters at placement, so `tame ps` can show what happened since.
    pub counters: ThreadCounters,
}

/// What `tame detach` changed (or `tame run` placed), kept until attach or exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementRecord {
    pub version: u32,
    /// "detach" or "run".
    pub kind: String,
    pub pid: u32,
    /// With the pid, identifies the process across pid reuse.
    pub start_time: u64,
    pub comm: String,
    pub cpus: CpuList,
    pub cpuset: Option<String>,
    pub threads: Vec<ThreadRecord>,
}

/// The directory of placement records (`<state dir>/placed/PID.json`).
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("placed"),
        }
    }

    fn path(&self, pid: u32) -> PathBuf {
        self.dir.join(format!("{pid}.json"))
    }

    /// Write durably: temp file, fsync, rename, fsync the directory.
    pub fn save(&self, record: &PlacementRecord) -> Result<(), LaunchError> {
        let io = |what: &str, e: std::io::Error| {
            failed(format!(
                "cannot {what} the placement record in {}: {e} — check the directory is writable (or pass --state-dir)",
                self.dir.display()
            ))
        };
        fs::create_dir_all(&self.dir).map_err(|e| io("create", e))?;
        let tmp = self.dir.join(format!(".{}.json.tmp", record.pid));
        let mut f = File::create(&tmp).map_err(|e| io("write", e))?;
        let json = serde_json::to_vec_pretty(record).expect("records serialise");
        f.write_all(&json)
            .and_then(|_| f.sync_all())
            .map_err(|e| io("write", e))?;
        fs::rename(&tmp, self.path(record.pid)).map_err(|e| io("commit", e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync", e))
    }

    pub fn load(&self, pid: u32) -> Result<Option<PlacementRecord>, LaunchError> {
        match fs::read(self.path(pid)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                failed(format!(
                    "placement record {} is unreadable: {e} — restore the threads by hand, then delete it",
                    self.path(pid).display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(failed(format!("cannot read {}: {e}", self.path(pid).display()))),
        }
    }

    pub fn remove(&self, pid: u32) {
        let _ = fs::remove_file(self.path(pid));
    }

    /// Every record, oldest pid first.
    pub fn list(&self) -> Vec<PlacementRecord> {
        let mut pids: Vec<u32> = fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json")?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        pids.sort_unstable();
        pids.into_iter()
            .filter_map(|p| self.load(p).ok().flatten())
            .collect()
    }
}

/// Read a thread's current state.
pub fn thread_state(root: &Root, pid: u32, tid: u32) -> Result<ThreadRecord, LaunchError> {
    let gone =
        |e: std::io::Error| failed(format!("cannot read thread {tid} of process {pid}: {e}"));
    Ok(ThreadRecord {
        tid,
        affinity: CpuList::from_cpus(sched::get_affinity(tid as i32).map_err(gone)?),
        sched: sched::get_thread_sched(tid as i32).map_err(gone)?,
        cpuset: proc::cpuset_of(root, pid, tid),
        counters: proc::counters(root, pid, tid).unwrap_or_default(),
    })
}

fn join_cpuset(root: &Root, cpuset: &str, tid: u32) -> std::io::Result<()> {
    let tasks = format!(
        "{CPUSET_MOUNT}{}/tasks",
        if cpuset == "/" { "" } else { cpuset }
    );
    fs::write(root.path(tasks), tid.to_string())
}

/// The caller may touch this process: root may move any; others only their own.
pub fn check_owner(info: &ProcessInfo, caller_uid: u32) -> Result<(), LaunchError> {
    if caller_uid != 0 && info.uid != caller_uid {
        return Err(invalid(format!(
            "process {} ({}) belongs to uid {}, and you are uid {caller_uid} — rule: a caller that is not root may move only its own processes; run as that user or as root",
            info.pid, info.comm, info.uid
        )));
    }
    Ok(())
}

/// Record, then move the selected threads. On any failure the threads moved so
/// far are put back and the record removed: nothing is left half-done.
pub fn detach(
    root: &Root,
    store: &Store,
    req: &DetachRequest,
    caller_uid: u32,
) -> Result<PlacementRecord, LaunchError> {
    let info = proc::inspect(root, req.pid)?;
    check_owner(&info, caller_uid)?;
    if let Some(existing) = store.load(req.pid)? {
        if existing.start_time == info.start_time {
            return Err(invalid(format!(
                "process {} is already placed by tame ({}) on CPUs {} — tame attach {} first",
                req.pid, existing.kind, existing.cpus, req.pid
            )));
        }
        store.remove(req.pid); // left by an earlier process with the same pid
    }
    let tids: Vec<u32> = match &req.threads {
        ThreadSelection::All => info.tids.clone(),
        ThreadSelection::Main => vec![req.pid],
        ThreadSelection::Tids(t) => {
            if let Some(bad) = t.iter().find(|t| !info.tids.contains(t)) {
                return Err(invalid(format!(
                    "thread {bad} is not a thread of process {} (its threads: {:?})",
                    req.pid, info.tids
                )));
            }
            t.clone()
        }
    };
    let threads = tids
        .iter()
        .map(|&tid| thread_state(root, req.pid, tid))
        .collect::<Result<Vec<_>, _>>()?;
    let record = PlacementRecord {
        version: RECORD_VERSION,
        kind: "detach".into(),
        pid: req.pid,
        start_time: info.start_time,
        comm: info.comm.clone(),
        cpus: req.cpus.clone(),
        cpuset: req.cpuset.clone(),
        threads,
    };
    store.save(&record)?;
    for (done, t) in record.threads.iter().enumerate() {
        if let Err(e) = place_thread(root, req, t.tid) {
            // Undo what was done, newest first, then forget the record.
            for prev in record.threads[..=done].iter().rev() {
                let _ = restore_thread(root, prev.tid, prev);
            }
            store.remove(req.pid);
            return Err(e);
        }
    }
    Ok(record)
}

fn place_thread(root: &Root, req: &DetachRequest, tid: u32) -> Result<(), LaunchError> {
    let why = |what: &str, e: std::io::Error| failed(format!("cannot {what} thread {tid}: {e}"));
    if let Some(cpuset) = &req.cpuset {
        join_cpuset(root, cpuset, tid).map_err(|e| why("move into the partition's cpuset", e))?;
    }
    sched::set_affinity(tid as i32, req.cpus.iter()).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            failed(format!(
                "cannot set the affinity of thread {tid} to CPUs {}: its cpuset does not include them — use -p PARTITION to move it into a cpuset that does",
                req.cpus
            ))
        } else {
            why("set the affinity of", e)
        }
    })?;
    if let Some(spec) = &req.sched {
        match sched::apply_raw(tid as i32, spec, false) {
            0 => {}
            errno => {
                return Err(why(
                    "set the policy of",
                    std::io::Error::from_raw_os_error(errno),
                ))
            }
        }
    }
    Ok(())
}

/// Policy first (so a real-time thread never runs on the system CPUs at its
/// real-time priority), then cgroup and affinity.
fn restore_thread(root: &Root, tid: u32, prev: &ThreadRecord) -> Result<(), String> {
    let mut problems = Vec::new();
    if let Err(e) = sched::set_thread_sched(tid as i32, &prev.sched) {
        problems.push(format!("policy: {e}"));
    }
    if let Some(cpuset) = &prev.cpuset {
        if let Err(e) = join_cpuset(root, cpuset, tid) {
            problems.push(format!("cpuset {cpuset}: {e}"));
        }
    }
    if let Err(e) = sched::set_affinity(tid as i32, prev.affinity.iter()) {
        problems.push(format!("affinity {}: {e}", prev.affinity));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// What attach did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachReport {
    pub pid: u32,
    /// Threads put back to their recorded state.
    pub restored: Vec<u32>,
    /// Threads created after detach, given the main thread's previous state.
    pub adopted: Vec<u32>,
    /// Threads that could not be restored, with why; the record is kept.
    pub failed: Vec<(u32, String)>,
    /// The process had exited: nothing to restore, the record was removed.
    pub exited: bool,
}

pub fn attach(
    root: &Root,
    store: &Store,
    pid: u32,
    caller_uid: u32,
) -> Result<AttachReport, LaunchError> {
    let record = store.load(pid)?.ok_or_else(|| {
        invalid(format!(
            "process {pid} was not detached by tame (no record in {}) — nothing to attach",
            store.dir.display()
        ))
    })?;
    let mut report = AttachReport {
        pid,
        ..Default::default()
    };
    let info = match proc::inspect(root, pid) {
        Ok(info) if info.start_time == record.start_time => info,
        _ => {
            store.remove(pid);
            report.exited = true;
            return Ok(report);
        }
    };
    check_owner(&info, caller_uid)?;
    let main = record
        .threads
        .iter()
        .find(|t| t.tid == pid)
        .or_else(|| record.threads.first())
        .cloned();
    for tid in info.tids {
        let (prev, adopted) = match record.threads.iter().find(|t| t.tid == tid) {
            Some(t) => (t.clone(), false),
            None => match (&record.cpuset, &main) {
                // Only threads the detach could have affected (they inherit from a moved thread).
                (_, Some(m)) => (m.clone(), true),
                _ => continue,
            },
        };
        match restore_thread(root, tid, &prev) {
            Ok(()) if adopted => report.adopted.push(tid),
            Ok(()) => report.restored.push(tid),
            Err(e) => report.failed.push((tid, e)),
        }
    }
    if report.failed.is_empty() {
        store.remove(pid);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_selection_parses() {
        assert_eq!(ThreadSelection::parse("all").unwrap(), ThreadSelection::All);
        assert_eq!(
            ThreadSelection::parse("12,13").unwrap(),
            ThreadSelection::Tids(vec![12, 13])
        );
        assert!(ThreadSelection::parse("12,x").is_err());
    }

    #[test]
    fn records_survive_a_round_trip_and_list_in_pid_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let rec = |pid| PlacementRecord {
            version: RECORD_VERSION,
            kind: "detach".into(),
            pid,
            start_time: 5,
            comm: "x".into(),
            cpus: CpuList::parse("1").unwrap(),
            cpuset: None,
            threads: vec![],
        };
        store.save(&rec(20)).unwrap();
        store.save(&rec(3)).unwrap();
        assert_eq!(store.load(20).unwrap(), Some(rec(20)));
        assert_eq!(
            store.list().iter().map(|r| r.pid).collect::<Vec<_>>(),
            vec![3, 20]
        );
        store.remove(3);
        assert_eq!(store.load(3).unwrap(), None);
    }

    #[test]
    fn other_users_processes_are_refused_for_non_root() {
        let info = ProcessInfo {
            pid: 1,
            comm: "init".into(),
            uid: 0,
            start_time: 1,
            tids: vec![1],
        };
        let err = check_owner(&info, 1000).unwrap_err().to_string();
        assert!(err.contains("may move only its own processes"), "{err}");
        assert!(check_owner(&info, 0).is_ok());
    }
}
