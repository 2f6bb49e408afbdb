//! Putting things back, always through the apply journal, so that `tame revert` afterwards
//! still gives back the machine as it was before apply: the journal's lock is taken for one
//! round of repairs and released at its end (apply, revert and detach wait for nothing longer).
//!
//! - a stray thread: [`Journal::place`] on the system partition's CPUs and (cgroup v1) into
//!   its cpuset, its placement from before recorded first;
//! - a drifted value: [`Journal::rewrite`] of the value apply wrote (no new record: revert
//!   restores the value recorded first, from before apply);
//! - an IRQ apply never wrote (it came later, or fit then): [`Journal::write`], its value
//!   now recorded first, as apply records every IRQ it moves.

use std::path::Path;

use tame_host::cgroup::members::kernel_places;
use tame_host::cgroup::CgroupVersion;
use tame_host::journal::{self, Journal, JournalLock, ThreadPlacement};
use tame_host::{CpuList, Root};
use tame_partition::Applied;

use crate::observe::{Fix, Scope};

/// Make every fix, under one hold of the journal's lock: for each, what was done or why not.
pub fn repair_all(
    root: &Root,
    journal_dir: &Path,
    applied: &Applied,
    scope: &Scope,
    fixes: &[Fix],
) -> Vec<Result<String, String>> {
    if fixes.is_empty() {
        return Vec::new();
    }
    let mut journal = match open_existing(root, journal_dir) {
        Ok(j) => j,
        Err(why) => return fixes.iter().map(|_| Err(why.clone())).collect(),
    };
    fixes
        .iter()
        .map(|f| match f {
            Fix::Task { pid, tid } => place_task(&mut journal, applied, scope, *pid, *tid),
            Fix::Rewrite { path, value } => journal
                .rewrite(path, value.as_bytes())
                .map(|()| format!("wrote {value} again"))
                .map_err(|e| format!("cannot write {value} to {path}: {e}")),
            Fix::Irq { irq } => pin_irq(&mut journal, scope, *irq),
        })
        .collect()
    // The journal (and its lock) is dropped here.
}

/// The apply journal, locked, only while it exists: a revert between the guard's pass and
/// its repair must not leave a new journal of repairs to a partition no longer applied.
fn open_existing(root: &Root, journal_dir: &Path) -> Result<Journal, String> {
    let lock =
        JournalLock::acquire(journal_dir).map_err(|e| format!("cannot lock the journal: {e}"))?;
    match journal::load(journal_dir) {
        Ok(Some(rec)) if !rec.entries.is_empty() => {}
        Ok(_) => return Err("the partitions were reverted meanwhile: nothing to repair".into()),
        Err(e) => return Err(format!("cannot read the journal: {e}")),
    }
    Journal::open_locked(root, lock).map_err(|e| format!("cannot open the journal: {e}"))
}

fn pin_irq(journal: &mut Journal, scope: &Scope, irq: u32) -> Result<String, String> {
    let path = tame_host::irq::affinity_list_path(irq);
    let root = journal.root().clone();
    let current = root
        .read_trimmed(&path)
        .map_err(|e| format!("cannot read {path}: {e}"))
        .and_then(|t| CpuList::parse(&t).map_err(|e| format!("{path}: {e}")))?;
    let new = tame_partition::plan::irq_target(&current, &scope.irq_cpus);
    if new == current {
        return Ok(format!("already {new}"));
    }
    match journal.write(&path, new.to_string().as_bytes(), None) {
        Ok(Ok(())) => Ok(format!("pinned to {new}")),
        Ok(Err(e)) => Err(format!("cannot write {new} to {path}: {e}")),
        Err(e) => Err(format!("cannot journal {path}: {e}")),
    }
}

fn place_task(
    journal: &mut Journal,
    applied: &Applied,
    scope: &Scope,
    pid: u32,
    tid: u32,
) -> Result<String, String> {
    let root = journal.root().clone();
    // Read it again: it may have gone, or be one the guard must never touch.
    let task = tame_host::process::read_one(&root, pid, tid).ok_or("it is gone")?;
    if kernel_places(task.kthread, task.affinity_locked, &task.comm) {
        return Err("the kernel places this thread itself: left alone".into());
    }
    let mut cgroup = None;
    let mut from = None;
    if let Some(sys) = applied.system().and_then(|s| s.cgroup.as_ref()) {
        if sys.version == CgroupVersion::V1 {
            let now = sys
                .hierarchy()
                .group_of_process(&root, pid)
                .map_err(|e| format!("cannot read its cgroup: {e}"))?
                .ok_or("its cpuset cgroup cannot be found")?;
            let own = applied.partitions.iter().find(|p| {
                p.is_isolated()
                    && p.cgroup
                        .as_ref()
                        .is_some_and(|c| c.group().path() == now.path())
            });
            if let Some(p) = own {
                return Err(format!(
                    "it is in partition {}'s cgroup: the partition's own tasks are left alone",
                    p.name
                ));
            }
            if now.path() != sys.group().path() {
                cgroup = Some(sys.group().members());
                from = Some(now.members());
            }
        }
    }
    let new = ThreadPlacement {
        affinity: Some(scope.system_cpus.clone()),
        sched: None,
        cgroup,
    };
    let into = match &new.cgroup {
        Some(c) => format!(" in {c}"),
        None => String::new(),
    };
    match journal.place(pid, tid, &new, from.as_deref()) {
        Ok(Ok(())) => Ok(format!("placed on CPUs {}{into}", scope.system_cpus)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("cannot journal the placement: {e}")),
    }
}
