//! The deadline backend: SCHED_DEADLINE with runtime = share × period, deadline = period,
//! reset-on-fork (children start as SCHED_OTHER). The kernel does the admission; its
//! refusals are translated into what they mean here.
//!
//! Every thread's policy is changed through the host journal (one journal per reservation,
//! STATE_DIR/reserve/deadline-PID, each thread's previous policy recorded first), so a
//! failure half-way, release, or `tame revert --journal-dir STATE_DIR/reserve/deadline-PID`
//! after a crash gives each thread the policy it had.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::journal::{self, Journal, ThreadPlacement};
use tame_host::Root;
use tame_rt::sched::{Policy, SchedSpec, ThreadSched};

use crate::bandwidth::{deadline_threads, exhausted_message, free_deadline_ppm, Limits};
use crate::error::{failed, invalid, io_failed, lower, refused, Result};
use crate::spec::Request;

/// The journal of `pid`'s deadline reservation, below `state_dir` (beside the cgroup
/// backend's).
pub fn journal_dir(state_dir: &Path, pid: u32) -> PathBuf {
    state_dir.join("reserve").join(format!("deadline-{pid}"))
}

const SCHED_DEADLINE: i32 = 6;
/// The journal note saying whether this reservation made STATE_DIR/reserve.
const MADE_RESERVE_DIR: &str = "made-reserve-dir";

/// The spec a reservation applies.
pub fn spec(req: &Request) -> SchedSpec {
    SchedSpec {
        policy: Policy::Deadline,
        priority: 0,
        dl_runtime_ns: req.runtime_ns(),
        dl_deadline_ns: req.period_ns,
        dl_period_ns: req.period_ns,
    }
}

/// Why `--cpu` does not combine with this backend.
pub fn pinning_refusal(cpu: u32) -> String {
    format!(
        "--cpu {cpu} with the deadline backend: the kernel refuses SCHED_DEADLINE (EPERM) for a thread whose CPU affinity is a strict subset of its root domain — reserve on any CPU (leave out --cpu), place the program in an exclusive tame partition first (tame apply; tame run -p …), or use --backend server, which pins"
    )
}

/// What was applied, per thread, with what it replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub pid: u32,
    pub threads: Vec<(u32, ThreadSched)>,
}

/// Reserve for every thread of `pid`, journaled in `state_dir`. Checks our view of free
/// bandwidth first, so a refusal names numbers; on any failure the threads already changed
/// get their old attributes back (the journal is reverted and removed).
pub fn reserve_pid(root: &Root, state_dir: &Path, pid: u32, req: &Request) -> Result<Applied> {
    if let Some(cpu) = req.cpu {
        return Err(invalid(pinning_refusal(cpu)));
    }
    let info = tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))?;
    let limits = Limits::read(root)?;
    let existing: Vec<_> = deadline_threads(root)
        .into_iter()
        .filter(|t| t.pid != pid)
        .collect();
    let asked = req.share_ppm * info.tids.len() as u64;
    if asked > free_deadline_ppm(&limits, &existing) {
        return Err(refused(exhausted_message(asked, &limits, &existing)));
    }
    let jdir = journal_dir(state_dir, pid);
    if journal::journal_path(&jdir).exists() {
        return Err(invalid(format!(
            "process {pid} already has a deadline reservation — release it first (tame reserve --release {pid})"
        )));
    }
    let made_reserve_dir = !jdir.parent().is_some_and(Path::exists);
    let journaled = (|| {
        let mut j = Journal::open(root, &jdir).map_err(lower)?;
        let made: &[u8] = if made_reserve_dir { b"yes" } else { b"no" };
        j.note(MADE_RESERVE_DIR, made).map_err(lower)?;
        apply(&mut j, pid, &info.tids, req, &limits, &existing)
    })();
    match journaled {
        Ok(applied) if !applied.is_empty() => Ok(Applied {
            pid,
            threads: applied,
        }),
        Ok(_) => {
            release_dir(root, &jdir, made_reserve_dir)?;
            Err(invalid(format!(
                "process {pid} has no threads left — it exited"
            )))
        }
        Err(e) => {
            // The threads already changed get their policy back.
            let _ = release_dir(root, &jdir, made_reserve_dir);
            Err(e)
        }
    }
}

/// Each thread to SCHED_DEADLINE through the journal; the threads changed, with what
/// they had.
fn apply(
    j: &mut Journal,
    pid: u32,
    tids: &[u32],
    req: &Request,
    limits: &Limits,
    existing: &[crate::bandwidth::DeadlineThread],
) -> Result<Vec<(u32, ThreadSched)>> {
    let root = j.root().clone();
    let spec = spec(req);
    let new = ThreadPlacement {
        sched: Some(ThreadSched {
            policy: spec.policy.raw(),
            priority: 0,
            nice: 0,
            reset_on_fork: true,
            dl_runtime_ns: spec.dl_runtime_ns,
            dl_deadline_ns: spec.dl_deadline_ns,
            dl_period_ns: spec.dl_period_ns,
        }),
        ..ThreadPlacement::default()
    };
    let mut applied = Vec::new();
    for &tid in tids {
        let before = match root.thread_sched(tid) {
            Ok(b) => b,
            // The thread ended since we listed it: nothing to reserve for it.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) => return Err(io_failed(format!("cannot read thread {tid}'s policy"), e)),
        };
        match j.place(pid, tid, &new, None).map_err(lower)? {
            Ok(()) => applied.push((tid, before)),
            Err(e) => match e.source.raw_os_error() {
                Some(libc::ESRCH) => continue,
                Some(errno) => return Err(translate(&root, errno, tid, req, limits, existing)),
                None => return Err(lower(e)),
            },
        }
    }
    Ok(applied)
}

/// Undo a reservation through its journal (each thread's policy back, journal removed);
/// with `made_reserve_dir` the directory of reservations too once nothing else is in it.
fn release_dir(root: &Root, jdir: &Path, made_reserve_dir: bool) -> Result<()> {
    let report = journal::revert(root, jdir).map_err(lower)?;
    if !report.not_restored.is_empty() {
        return Err(failed(format!(
            "could not undo everything (journal kept in {}): {}",
            jdir.display(),
            report.not_restored_lines().join("; ")
        )));
    }
    let _ = std::fs::remove_dir(jdir);
    if made_reserve_dir {
        // remove_dir refuses a directory that is not empty: other reservations' stay.
        if let Some(parent) = jdir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

fn translate(
    root: &Root,
    errno: i32,
    tid: u32,
    req: &Request,
    limits: &Limits,
    existing: &[crate::bandwidth::DeadlineThread],
) -> crate::ReserveError {
    match errno {
        libc::EBUSY => refused(exhausted_message(req.share_ppm, limits, existing)),
        libc::EPERM => {
            let affinity: Vec<u32> = root
                .affinity(tid)
                .map(|c| c.iter().collect())
                .unwrap_or_default();
            if !affinity.is_empty() && affinity.len() < limits.online.len() {
                invalid(format!(
                    "SCHED_DEADLINE refused for thread {tid}: its affinity (CPUs {}) is a strict subset of its root domain — unpin it (taskset -p -c {} {tid}) or place it in an exclusive tame partition, or use --backend server",
                    crate::spec::join(&affinity),
                    crate::spec::join(&limits.online)
                ))
            } else {
                invalid(format!(
                    "SCHED_DEADLINE refused for thread {tid}: permission denied — run as root (or with CAP_SYS_NICE) and check the process is yours"
                ))
            }
        }
        libc::EINVAL => invalid(format!(
            "SCHED_DEADLINE refused {} of {} for thread {tid} as invalid — the kernel's limits (sched_deadline_period_min_us/max_us) exclude this period",
            tame_rt::duration::format_ns(req.runtime_ns()),
            tame_rt::duration::format_ns(req.period_ns)
        )),
        e => io_failed(
            format!("cannot set SCHED_DEADLINE on thread {tid}"),
            std::io::Error::from_raw_os_error(e),
        ),
    }
}

/// Give every thread of `pid` that the reservation journaled its previous policy back
/// (through the journal, which is then removed); how many of its threads were under
/// SCHED_DEADLINE and are no more. `Ok(0)` when tame holds no journal for `pid`.
pub fn release_pid(root: &Root, state_dir: &Path, pid: u32) -> Result<usize> {
    let jdir = journal_dir(state_dir, pid);
    if !journal::journal_path(&jdir).exists() {
        return Ok(0);
    }
    let under_deadline = |root: &Root| -> Vec<u32> {
        tame_host::process::inspect(root, pid)
            .map(|i| i.tids)
            .unwrap_or_default()
            .into_iter()
            .filter(|&t| {
                root.thread_sched(t)
                    .is_ok_and(|s| s.policy == SCHED_DEADLINE)
            })
            .collect()
    };
    let before = under_deadline(root);
    let made_reserve_dir = journal::load(&jdir)
        .ok()
        .flatten()
        .is_some_and(|r| r.note(MADE_RESERVE_DIR) == Some(b"yes".as_slice()));
    release_dir(root, &jdir, made_reserve_dir)?;
    let after = under_deadline(root);
    Ok(before.iter().filter(|t| !after.contains(t)).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Backend;

    #[test]
    fn spec_is_share_times_period_with_implicit_deadline() {
        let req = Request {
            share_ppm: 250_000,
            period_ns: 40_000_000,
            cpu: None,
            backend: Backend::Deadline,
        };
        let s = spec(&req);
        assert_eq!(
            (s.dl_runtime_ns, s.dl_deadline_ns, s.dl_period_ns),
            (10_000_000, 40_000_000, 40_000_000)
        );
        assert!(pinning_refusal(1).contains("strict subset"));
    }
}
