//! `tame detach` / `tame attach`: move a running program's threads onto
//! isolated CPUs and put them back exactly as they were.
//!
//! Every placed process has a host journal of its own (`<state dir>/placed/PID/`):
//! a note says what was placed (what `tame ps` shows), and each thread's move is a
//! placement record holding its previous affinity and scheduling attributes,
//! synced before the thread is touched. Joining a partition's cgroup comes first
//! (joining a cpuset resets the affinity), through the cgroup interface and the
//! journal: on cgroup v1 thread by thread into `tasks`, on v2 the whole process
//! into `cgroup.procs`. `attach` — from any later invocation — is a revert of
//! that journal, which is removed only when every thread is restored. Threads
//! created after detach inherit the detached placement; attach first journals
//! them with the main thread's previous placement, so the revert gives it to them too.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::cgroup::{CgroupVersion, Cgroups, Group};
use tame_host::journal::{self, Change, Journal, PlaceStep, ThreadPlacement};
use tame_host::{CpuList, Root};
use tame_rt::sched::{SchedSpec, ThreadSched};

use crate::error::{failed, failed_by, invalid, Failure, LaunchError};
use crate::proc::{self, ProcessInfo, ThreadCounters};
use crate::target::PartitionCgroup;

/// Version of the placement note's JSON.
pub const RECORD_VERSION: u32 = 2;
/// The journal note that says what was placed.
const NOTE: &str = "placement";

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
    /// The partition cgroup the threads join, if the target is a partition.
    pub cgroup: Option<PartitionCgroup>,
}

/// One thread's state before tame touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub tid: u32,
    pub affinity: CpuList,
    pub sched: ThreadSched,
    /// The cpuset group it was in (relative to the cpuset hierarchy), when it
    /// joins a partition's: v1 the thread's own, v2 its process's.
    pub cpuset: Option<String>,
    /// Counters at placement, so `tame ps` can show what happened since.
    pub counters: ThreadCounters,
}

/// What `tame detach` did: the placement as the journal notes it, and each selected
/// thread's previous state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementRecord {
    pub placed: Placed,
    pub threads: Vec<ThreadRecord>,
}

/// A placed process as `tame ps` lists it (the note of its journal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub version: u32,
    /// "detach" or "run".
    pub kind: String,
    pub pid: u32,
    /// With the pid, identifies the process across pid reuse.
    pub start_time: u64,
    pub comm: String,
    pub cpus: CpuList,
    pub cpuset: Option<String>,
    /// Each thread's counters at placement.
    pub counters: Vec<(u32, ThreadCounters)>,
}

impl Placed {
    /// The counters of `tid` at placement (zero for a thread born since).
    pub fn counters_of(&self, tid: u32) -> ThreadCounters {
        self.counters
            .iter()
            .find(|(t, _)| *t == tid)
            .map(|(_, c)| *c)
            .unwrap_or_default()
    }
}

/// The journals of placed processes: `<state dir>/placed/PID/`.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

fn journal_failed(e: journal::JournalError) -> LaunchError {
    // Another tame holding this journal, an unsafe journal directory: the caller's to fix.
    if e.is_bad_input() {
        return invalid(e.to_string());
    }
    failed_by(e)
}

impl Store {
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("placed"),
        }
    }

    /// The journal directory of process `pid`.
    pub fn journal_dir(&self, pid: u32) -> PathBuf {
        self.dir.join(pid.to_string())
    }

    /// What was placed for `pid`; `None` when nothing (or when the journal was
    /// torn before its note was written: then nothing was changed either).
    pub fn load(&self, pid: u32) -> Result<Option<Placed>, LaunchError> {
        let Some(rec) = journal::load(&self.journal_dir(pid)).map_err(journal_failed)? else {
            return Ok(None);
        };
        let Some(note) = rec.note(NOTE) else {
            return Ok(None);
        };
        serde_json::from_slice(note).map(Some).map_err(|e| {
            failed(format!(
                "the placement note in {} is unreadable: {e} — restore the threads by hand, then delete the directory",
                self.journal_dir(pid).display()
            ))
        })
    }

    /// Drop the journal of an earlier process with `pid` (or one torn before its note),
    /// keeping its directory and the lock the caller holds on it.
    fn discard(&self, pid: u32) {
        let _ = std::fs::remove_file(journal::journal_path(&self.journal_dir(pid)));
    }

    /// Forget `pid` without restoring anything (its process is gone).
    pub fn remove(&self, pid: u32) {
        let _ = std::fs::remove_dir_all(self.journal_dir(pid));
        // The parent goes when it is empty (remove_dir refuses otherwise).
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// Remove the record of `placed`, whose process is gone (it exited, or its pid names
    /// another program now). Nothing is reverted: the threads the record names are gone and
    /// their ids may be another program's. Done under the journal's lock, and only while
    /// the record is still that one: a detach of a new process with this pid replaces it,
    /// and is left alone (`Ok(false)`).
    pub fn forget_gone(&self, placed: &Placed) -> Result<bool, LaunchError> {
        let dir = self.journal_dir(placed.pid);
        let lock = journal::JournalLock::acquire(&dir).map_err(journal_failed)?;
        match self.load(placed.pid)? {
            Some(now) if now == *placed => {}
            _ => return Ok(false),
        }
        let removed = std::fs::remove_dir_all(&dir).map_err(|e| {
            failed(format!(
                "cannot remove {}: {e} — remove it by hand (nothing in it needs restoring: the process is gone)",
                dir.display()
            ))
        });
        drop(lock);
        removed?;
        // The parent goes when it is empty (remove_dir refuses otherwise).
        let _ = std::fs::remove_dir(&self.dir);
        Ok(true)
    }

    /// Every placed process, oldest pid first. A note that names another pid than its
    /// directory is not one tame wrote there, and is left out.
    pub fn list(&self) -> Vec<Placed> {
        let mut pids: Vec<u32> = std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        pids.sort_unstable();
        pids.into_iter()
            .filter_map(|p| self.load(p).ok().flatten().filter(|placed| placed.pid == p))
            .collect()
    }

    /// Open a fresh journal for `record.pid` and note what is placed (synced).
    fn start(&self, root: &Root, placed: &Placed) -> Result<Journal, LaunchError> {
        let mut j = Journal::open(root, &self.journal_dir(placed.pid)).map_err(|e| {
            failed(format!(
                "{e} (the placement journal; pass --journal-dir to keep it elsewhere)"
            ))
        })?;
        let note = serde_json::to_vec(placed).expect("placement notes serialise");
        j.note(NOTE, &note).map_err(journal_failed)?;
        Ok(j)
    }

    /// Like [`Store::start`], on a journal directory the caller has locked already.
    fn start_locked(
        &self,
        root: &Root,
        lock: journal::JournalLock,
        placed: &Placed,
    ) -> Result<Journal, LaunchError> {
        let mut j = Journal::open_locked(root, lock).map_err(journal_failed)?;
        let note = serde_json::to_vec(placed).expect("placement notes serialise");
        j.note(NOTE, &note).map_err(journal_failed)?;
        Ok(j)
    }

    /// Note a program `tame run` placed (before exec, so nothing to restore): for `tame ps`.
    pub fn record_run(&self, root: &Root, placed: &Placed) -> Result<(), LaunchError> {
        self.start(root, placed).map(drop)
    }
}

/// Read a thread's current state; with `cpuset`, also the group it is in there.
pub fn thread_state(
    root: &Root,
    pid: u32,
    tid: u32,
    cpuset: Option<&Cgroups>,
) -> Result<ThreadRecord, LaunchError> {
    let gone =
        |e: std::io::Error| failed(format!("cannot read thread {tid} of process {pid}: {e}"));
    let group = match cpuset {
        Some(cgroups) => Some(group_of(root, cgroups, pid, tid)?.rel().to_string()),
        None => None,
    };
    Ok(ThreadRecord {
        tid,
        affinity: root.affinity(tid).map_err(gone)?,
        sched: root.thread_sched(tid).map_err(gone)?,
        cpuset: group,
        counters: proc::counters(root, pid, tid).unwrap_or_default(),
    })
}

/// The cpuset group a thread is in now, from /proc (see [`Cgroups::group_of_thread`]).
fn group_of(root: &Root, cgroups: &Cgroups, pid: u32, tid: u32) -> Result<Group, LaunchError> {
    cgroups
        .group_of_thread(root, pid, tid)
        .map_err(|source| {
            LaunchError::Failed(Failure::Host {
                what: format!("cannot read the cgroup of thread {tid} of process {pid}"),
                source,
            })
        })?
        .ok_or_else(|| {
            failed(format!(
                "thread {tid} of process {pid} is in no group of the cpuset hierarchy at {} — it could not be put back, so it is not moved",
                cgroups.mount()
            ))
        })
}

/// A partition's cgroup to join: refused before anything is written when it
/// does not exist, or when v2 would have to move only some of the threads.
fn partition_group(
    root: &Root,
    cgroups: &Cgroups,
    rel: &str,
    threads: &ThreadSelection,
) -> Result<Group, LaunchError> {
    let to = cgroups.group(rel);
    if cgroups.version() == CgroupVersion::V2 && *threads != ThreadSelection::All {
        return Err(invalid(format!(
            "a part of the threads cannot join partition cgroup {}: cgroup v2 moves whole processes — use --threads all, or --cpus without -p",
            to.path()
        )));
    }
    if !root.exists(to.path()) {
        return Err(invalid(format!(
            "partition cgroup {} does not exist — is the spec still applied? (tame status)",
            to.path()
        )));
    }
    Ok(to)
}

/// The process `pid` as `tame detach` may move it: it exists, is a user program
/// (not a zombie, not a kernel thread) and, unless the caller is root, the
/// caller's own. Checked before the target, so a wrong PID is said first.
pub fn vet(root: &Root, pid: u32, caller_uid: u32) -> Result<ProcessInfo, LaunchError> {
    let info = proc::inspect(root, pid)?;
    check_owner(&info, caller_uid)?;
    Ok(info)
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

/// The scheduling attributes `spec` gives a thread that now has `now`
/// (what sched_setscheduler does: nice kept, reset-on-fork cleared).
fn sched_after(spec: &SchedSpec, now: &ThreadSched) -> ThreadSched {
    ThreadSched {
        policy: spec.policy.raw(),
        priority: spec.priority,
        nice: now.nice,
        reset_on_fork: false,
        dl_runtime_ns: spec.dl_runtime_ns,
        dl_deadline_ns: spec.dl_deadline_ns,
        dl_period_ns: spec.dl_period_ns,
    }
}

/// Journal, then move the selected threads. On any failure the threads moved so
/// far are put back and the journal removed: nothing is left half-done.
pub fn detach(
    root: &Root,
    store: &Store,
    req: &DetachRequest,
    caller_uid: u32,
) -> Result<PlacementRecord, LaunchError> {
    // The process first: a wrong PID is the first thing to say.
    let info = vet(root, req.pid, caller_uid)?;
    let cpuset = req.cgroup.as_ref().map(PartitionCgroup::hierarchy);
    let to = match (&cpuset, &req.cgroup) {
        (Some(cgroups), Some(c)) => Some(partition_group(root, cgroups, &c.path, &req.threads)?),
        _ => None,
    };
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
        .map(|&tid| thread_state(root, req.pid, tid, cpuset.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    // Everything is checked. Held from the first look at the journal to the last change: a second detach (or
    // attach) of this process waits for nothing and is refused, naming this one.
    let lock =
        journal::JournalLock::acquire(&store.journal_dir(req.pid)).map_err(journal_failed)?;
    match store.load(req.pid)? {
        Some(existing) if existing.start_time == info.start_time => {
            return Err(invalid(format!(
                "process {} is already placed by tame ({}) on CPUs {} — tame attach {} first",
                req.pid, existing.kind, existing.cpus, req.pid
            )));
        }
        // Left by an earlier process with the same pid, or torn before its note.
        _ => store.discard(req.pid),
    }
    let record = PlacementRecord {
        placed: Placed {
            version: RECORD_VERSION,
            kind: "detach".into(),
            pid: req.pid,
            start_time: info.start_time,
            comm: info.comm.clone(),
            cpus: req.cpus.clone(),
            cpuset: req.cgroup.as_ref().map(|c| c.path.clone()),
            counters: threads.iter().map(|t| (t.tid, t.counters)).collect(),
        },
        threads,
    };
    let mut journal = store.start_locked(root, lock, &record.placed)?;
    let placed = match (&cpuset, &to) {
        (Some(cgroups), Some(to)) => join(&mut journal, cgroups, to, &record, req),
        _ => Ok(Ok(())),
    }
    .and_then(|joined| match joined {
        Ok(()) => place_threads(&mut journal, &record, req),
        Err(e) => Ok(Err(e)),
    })
    .map_err(journal_failed)?;
    if let Err(e) = placed {
        // Undo what was done, newest first, then forget the journal.
        let _ = journal.revert();
        store.remove(req.pid);
        return Err(e);
    }
    Ok(record)
}

/// Move the threads into the partition's group `to`. Journaled first: every
/// thread's placement as it is now, since joining a cpuset changes the affinity
/// of every thread that moves (on v2 of the whole process) before its own
/// placement record reads it; revert, newest first, then puts the threads back
/// into their groups and only then gives them this affinity.
fn join(
    journal: &mut Journal,
    cgroups: &Cgroups,
    to: &Group,
    record: &PlacementRecord,
    req: &DetachRequest,
) -> Result<Result<(), LaunchError>, journal::JournalError> {
    let pid = record.placed.pid;
    let from = |t: &ThreadRecord| cgroups.group(t.cpuset.as_deref().unwrap_or("/"));
    for t in &record.threads {
        let before = ThreadPlacement {
            affinity: Some(t.affinity.clone()),
            sched: req.sched.map(|_| t.sched),
            // v1: a thread born since follows the main thread's group back; on
            // v2 it moves back with its process.
            cgroup: (cgroups.version() == CgroupVersion::V1).then(|| from(t).members()),
        };
        journal.adopt(pid, t.tid, &before)?;
    }
    let attaches = match cgroups.version() {
        CgroupVersion::V1 => record
            .threads
            .iter()
            .map(|t| to.attach_thread(&from(t), pid, t.tid))
            .collect(),
        // Every thread's group is its process's.
        CgroupVersion::V2 => match record.threads.first() {
            Some(first) => {
                let tids: Vec<u32> = record.threads.iter().map(|t| t.tid).collect();
                vec![to.attach_process(&from(first), pid, &tids)]
            }
            None => Vec::new(),
        },
    };
    for attach in attaches {
        for (id, res) in attach.tids.iter().zip(attach.run(journal)?) {
            if let Err(e) = res {
                return Ok(Err(failed(match cgroups.version() {
                    CgroupVersion::V1 => format!(
                        "cannot move thread {id} into the partition's cpuset {}: {e}",
                        to.path()
                    ),
                    CgroupVersion::V2 => format!(
                        "cannot move process {id} into the partition's cgroup {}: {e}",
                        to.path()
                    ),
                })));
            }
        }
    }
    Ok(Ok(()))
}

/// Give every selected thread the CPUs and policy, each journaled first.
fn place_threads(
    journal: &mut Journal,
    record: &PlacementRecord,
    req: &DetachRequest,
) -> Result<Result<(), LaunchError>, journal::JournalError> {
    for t in &record.threads {
        let new = ThreadPlacement {
            affinity: Some(req.cpus.clone()),
            sched: req.sched.as_ref().map(|s| sched_after(s, &t.sched)),
            cgroup: None,
        };
        if let Err(e) = journal.place(record.placed.pid, t.tid, &new, None)? {
            return Ok(Err(place_failure(&e, &req.cpus)));
        }
    }
    Ok(Ok(()))
}

fn place_failure(e: &journal::PlaceError, cpus: &CpuList) -> LaunchError {
    let tid = e.tid;
    match e.step {
        PlaceStep::Affinity if e.raw_os_error() == Some(libc::EINVAL) => failed(format!(
            "cannot set the affinity of thread {tid} to CPUs {cpus}: its cpuset does not include them — use -p PARTITION to move it into a cpuset that does"
        )),
        _ => failed(e.to_string()),
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
    /// Threads that could not be restored, with why; the journal is kept.
    pub failed: Vec<(u32, String)>,
    /// The process had exited: nothing to restore, the journal was removed.
    pub exited: bool,
}

pub fn attach(
    root: &Root,
    store: &Store,
    pid: u32,
    caller_uid: u32,
) -> Result<AttachReport, LaunchError> {
    let dir = store.journal_dir(pid);
    let placed = store.load(pid)?.ok_or_else(|| {
        invalid(format!(
            "process {pid} was not detached by tame (no journal in {}) — nothing to attach",
            dir.display()
        ))
    })?;
    let mut report = AttachReport {
        pid,
        ..Default::default()
    };
    let info = match proc::inspect(root, pid) {
        Ok(info) if info.start_time == placed.start_time => info,
        _ => {
            store.remove(pid);
            report.exited = true;
            return Ok(report);
        }
    };
    check_owner(&info, caller_uid)?;
    let entries = journal::load(&dir)
        .map_err(journal_failed)?
        .map(|rec| rec.entries)
        .unwrap_or_default();
    // (sequence number, thread, its previous placement) of every placement record.
    let placements: Vec<(u64, u32, ThreadPlacement)> = entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Placement { tid, old, .. } => Some((e.seq, *tid, old.clone())),
            _ => None,
        })
        .collect();
    let main = placements
        .iter()
        .find(|(_, tid, _)| *tid == pid)
        .or_else(|| placements.first())
        .map(|(_, _, old)| old.clone());
    let born: Vec<u32> = info
        .tids
        .iter()
        .copied()
        .filter(|t| !placements.iter().any(|(_, tid, _)| tid == t))
        .collect();
    if let (Some(main), false) = (&main, born.is_empty()) {
        let mut j = Journal::open(root, &dir).map_err(journal_failed)?;
        for &tid in &born {
            j.adopt(pid, tid, main).map_err(journal_failed)?;
        }
    }
    let reverted = journal::revert(root, &dir).map_err(journal_failed)?;
    let entries = journal::load(&dir)
        .map_err(journal_failed)?
        .map(|rec| rec.entries)
        .unwrap_or_default();
    for n in &reverted.not_restored {
        let tid = entries
            .iter()
            .find(|e| e.seq == n.seq)
            .and_then(|e| match &e.change {
                Change::Placement { tid, .. } | Change::MoveTask { tid, .. } => Some(*tid),
                _ => None,
            });
        report
            .failed
            .push((tid.unwrap_or(0), format!("{}: {}", n.what, n.reason)));
    }
    let failed = |t: &u32| report.failed.iter().any(|(f, _)| f == t);
    // A thread joining a partition has two records (as it was, then as placed): listed once.
    let mut restored: Vec<u32> = Vec::new();
    for (_, tid, _) in &placements {
        if info.tids.contains(tid) && !failed(tid) && !restored.contains(tid) {
            restored.push(*tid);
        }
    }
    report.restored = restored;
    if main.is_some() {
        report.adopted = born.iter().copied().filter(|t| !failed(t)).collect();
    }
    if reverted.journal_removed {
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
