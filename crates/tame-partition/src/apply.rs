//! Apply a plan through the journal; roll back when a step fails.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;
use tame_host::cgroup::{members, Attach};
use tame_host::error::LayerError;
use tame_host::journal::{
    self, Journal, JournalError, JournalLock, RevertReport, Stage, WriteRequest,
};
use tame_host::{HostModel, Root};

use crate::applied::Applied;
use crate::plan::{self, split_movable, Invalid, KeptBecause, Plan, Step, Task};
use crate::spec::Spec;

/// Version of the JSON shape of [`ApplyReport`] (2: threads the kernel keeps are in
/// `kept`, no longer in `refused`).
impl tame_host::Document for ApplyReport {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Number "tame.apply", 2);
}
/// The journal note holding the applied spec.
pub const SPEC_NOTE: &str = "spec";
/// The journal note holding the absolute path of the spec file last applied (for the
/// command `tame status` gives to repair drift).
pub const SPEC_PATH_NOTE: &str = "spec-path";
/// How often apply looks again for tasks forked while it moved the others.
const MOVE_PASSES: usize = 3;

/// Something the kernel refused that apply does not treat as a failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub what: String,
    pub reason: String,
}

/// A thread left where it is because the kernel places it itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub tid: u32,
    pub comm: String,
    pub because: KeptBecause,
}

impl Kept {
    fn of(t: &Task) -> Option<Self> {
        Some(Kept {
            tid: t.tid,
            comm: t.comm.clone(),
            because: t.kept_because()?,
        })
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ApplyReport {
    pub schema: u32,
    /// Nothing needed to change (the spec was already applied).
    pub unchanged: bool,
    pub writes: usize,
    pub directories: usize,
    /// Threads moved into the system partition: `tasks_listed - tasks_gone` of those the
    /// plan listed, plus `tasks_started`.
    pub tasks_moved: usize,
    /// Movable threads listed when apply read the host (its plan).
    pub tasks_listed: usize,
    /// Threads moved that were not listed then: started while apply ran.
    pub tasks_started: usize,
    /// Threads listed then that exited before they could be moved.
    pub tasks_gone: usize,
    /// Threads the kernel keeps where they are (per-CPU kernel threads, workqueue
    /// workers, kthreadd): not moved, and not a failure.
    pub kept: Vec<Kept>,
    /// IRQs and tasks the kernel refused to move, by name, with its reason.
    pub refused: Vec<Refused>,
    pub warnings: Vec<String>,
    pub journal: String,
    /// The partitions now applied, typed (not part of the JSON report).
    #[serde(skip)]
    pub applied: Applied,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The command (apply, revert) that needs root.
    #[error("{0} changes the live system and needs root — run it as root (or with --root on a fixture tree)")]
    NotRoot(&'static str),
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("another spec is applied (journal {journal}) — run `tame revert` first, then apply this one")]
    OtherSpecApplied { journal: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("nothing to revert in {dir}, yet tame's partition groups are on this host ({}): a partition is applied whose journal is not there — give the --journal-dir it was applied with (`tame status` names it while the journal is found), or, if that journal is gone, reboot to undo it (nothing tame applies outlives a reboot)", .groups.join(", "))]
    AppliedWithoutJournal { dir: String, groups: Vec<String> },
    #[error("{step} failed: {reason}; {}", rollback_summary(.rollback))]
    Failed {
        step: String,
        reason: String,
        rollback: RevertReport,
    },
}

impl LayerError for ApplyError {
    /// True when the caller has to change the command or wait (the CLI exits 2): not
    /// root, an invalid spec, another spec applied, another run holding the journal, an
    /// unsafe journal location.
    fn is_bad_input(&self) -> bool {
        match self {
            ApplyError::NotRoot(_)
            | ApplyError::Invalid(_)
            | ApplyError::OtherSpecApplied { .. }
            | ApplyError::AppliedWithoutJournal { .. } => true,
            ApplyError::Journal(e) => e.is_bad_input(),
            ApplyError::Failed { .. } => false,
        }
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, ApplyError::Journal(e) if e.names_its_cause())
    }
}

/// A spec that does not fit the host is the user's to change.
impl LayerError for Invalid {
    fn is_bad_input(&self) -> bool {
        true
    }
}

fn rollback_summary(r: &RevertReport) -> String {
    if r.not_restored.is_empty() {
        "every change made so far was undone".to_string()
    } else {
        let items: Vec<String> = r
            .not_restored
            .iter()
            .map(|n| format!("{}: {}", n.what, n.reason))
            .collect();
        format!(
            "rolling back left these unrestored (the journal is kept; fix the cause and run `tame revert`): {}",
            items.join("; ")
        )
    }
}

/// Hooks for tests: see every journaled change (e.g. to kill the process there).
pub type StageHook = Box<dyn FnMut(Stage) -> std::io::Result<()>>;

/// Apply `spec` (whose text was `spec_text`) on `root`, journaling in `journal_dir`; the
/// report carries the typed [`Applied`] partition set.
pub fn apply(
    root: &Root,
    spec: &Spec,
    spec_text: &str,
    journal_dir: &Path,
    hook: Option<StageHook>,
) -> Result<ApplyReport, ApplyError> {
    apply_file(root, spec, spec_text, None, journal_dir, hook)
}

/// [`apply`] a spec read from the file `spec_path` (absolute), which the journal notes so
/// `tame status` can name the command that repairs drift.
pub fn apply_file(
    root: &Root,
    spec: &Spec,
    spec_text: &str,
    spec_path: Option<&Path>,
    journal_dir: &Path,
    hook: Option<StageHook>,
) -> Result<ApplyReport, ApplyError> {
    if !tame_host::privilege::may_change(root) {
        return Err(ApplyError::NotRoot("apply"));
    }
    // Locked before the host is read: another apply or revert must not change it between
    // our plan and our changes, nor append to our journal.
    let lock = JournalLock::acquire(journal_dir)?;
    let plan = plan::plan(spec, &HostModel::read(root))?;
    let previous_boot = clear_previous_boot(root, journal_dir)?;
    no_other_spec_applied(root, journal_dir, spec)?;
    let mut report = ApplyReport {
        schema: <ApplyReport as tame_host::Document>::SCHEMA.version,
        warnings: previous_boot
            .into_iter()
            .chain(plan.warnings.iter().cloned())
            .collect(),
        journal: journal::journal_path(journal_dir).display().to_string(),
        kept: plan.stay.iter().filter_map(Kept::of).collect(),
        applied: Applied::new(root, spec.clone(), spec_text, journal_dir),
        ..Default::default()
    };
    if plan.is_empty() {
        report.unchanged = true;
        // Nothing to write, but a re-apply from another file still notes that file, so
        // status names it. With nothing applied yet no journal is created.
        let path = spec_path.map(|p| p.as_os_str().as_encoded_bytes());
        if journal::load(journal_dir)?.is_some_and(|r| path.is_some_and(|p| new_path(&r, p))) {
            let mut journal = Journal::open_locked(root, lock)?;
            note_spec(&mut journal, journal_dir, spec_text, spec_path)?;
        }
        return Ok(report);
    }
    let mut journal = Journal::open_locked(root, lock)?;
    note_spec(&mut journal, journal_dir, spec_text, spec_path)?;
    if let Some(hook) = hook {
        journal.set_stage_hook(hook);
    }
    match run_steps(&mut journal, &plan, &mut report) {
        Ok(()) => Ok(report),
        Err(Failure::Journal(e)) => Err(rollback(journal, "the journal".into(), e.to_string())),
        Err(Failure::Step { step, reason }) => Err(rollback(journal, step, reason)),
    }
}

/// Note in `journal` the spec text (once) and the path of its file (when it is not the
/// one noted last).
fn note_spec(
    journal: &mut Journal,
    journal_dir: &Path,
    spec_text: &str,
    spec_path: Option<&Path>,
) -> Result<(), JournalError> {
    // Read after opening: a journal torn in its header starts afresh there.
    let Some(recorded) = journal::load(journal_dir)? else {
        return Ok(());
    };
    if recorded.note(SPEC_NOTE).is_none() {
        journal.note(SPEC_NOTE, spec_text.as_bytes())?;
        // Users a partition names must read which partitions exist; the journal is root's.
        publish_spec(journal_dir, spec_text).map_err(|source| JournalError::Io {
            action: "publish the applied spec beside",
            path: journal_dir.join(PUBLIC_SPEC),
            source,
        })?;
    }
    if let Some(path) = spec_path {
        let path = path.as_os_str().as_encoded_bytes();
        if new_path(&recorded, path) {
            journal.note(SPEC_PATH_NOTE, path)?;
        }
    }
    Ok(())
}

/// `path` is not the spec file the journal noted last.
fn new_path(recorded: &journal::Recorded, path: &[u8]) -> bool {
    recorded.note(SPEC_PATH_NOTE) != Some(path)
}

/// A journal begun before the last reboot holds nothing in effect (the reboot undid it,
/// and its task ids name other tasks now): removed without acting on it, under the lock
/// the caller holds. Returns what to tell the user.
fn clear_previous_boot(root: &Root, journal_dir: &Path) -> Result<Option<String>, ApplyError> {
    if !journal::load(journal_dir)?.is_some_and(|r| r.from_previous_boot(root)) {
        return Ok(None);
    }
    let report = journal::revert(root, journal_dir)?;
    unpublish_spec(journal_dir, &report);
    Ok(Some(format!(
        "the journal in {} was from before the last reboot (nothing of it was in effect): set aside without acting on it",
        journal_dir.display()
    )))
}

/// Apply may run again with the spec it applied (to repair drift), not with another.
fn no_other_spec_applied(root: &Root, journal_dir: &Path, spec: &Spec) -> Result<(), ApplyError> {
    // A journal killed before its first change holds nothing applied.
    if let Some(rec) = journal::load(journal_dir)?.filter(|r| !r.entries.is_empty()) {
        let applied = Applied::of_record(root, &rec, journal_dir).and_then(Result::ok);
        if applied.map(|a| a.spec).as_ref() != Some(spec) {
            return Err(ApplyError::OtherSpecApplied {
                journal: journal::journal_path(journal_dir).display().to_string(),
            });
        }
    }
    Ok(())
}

/// Undo what this apply did, under the lock its journal holds.
/// The applied spec, readable by everybody (0644, root's), in the journal directory
/// (0711): what `tame run -p` of a user a partition names reads. Removed with the journal.
pub const PUBLIC_SPEC: &str = "applied-spec.toml";

fn publish_spec(dir: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dir.join(PUBLIC_SPEC))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

fn unpublish_spec(dir: &Path, report: &RevertReport) {
    if report.journal_removed {
        let _ = std::fs::remove_file(dir.join(PUBLIC_SPEC));
    }
}

fn rollback(journal: Journal, step: String, reason: String) -> ApplyError {
    let dir = journal.path().parent().map(Path::to_path_buf);
    let reverted = journal.revert();
    if let (Some(dir), Ok(r)) = (&dir, &reverted) {
        unpublish_spec(dir, r);
    }
    match reverted {
        Ok(rollback) => ApplyError::Failed {
            step,
            reason,
            rollback,
        },
        Err(e) => ApplyError::Failed {
            step,
            reason: format!("{reason}; rolling back failed too: {e}"),
            rollback: RevertReport::default(),
        },
    }
}

enum Failure {
    Journal(JournalError),
    Step { step: String, reason: String },
}

impl From<JournalError> for Failure {
    fn from(e: JournalError) -> Self {
        Failure::Journal(e)
    }
}

fn task_name(t: &Task) -> String {
    format!("task {} ({})", t.tid, t.comm)
}

fn run_steps(journal: &mut Journal, plan: &Plan, report: &mut ApplyReport) -> Result<(), Failure> {
    let mut i = 0;
    while i < plan.runtime.len() {
        match &plan.runtime[i] {
            Step::Mkdir { path, members, .. } => {
                let m = members.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
                journal.create_dir(path, m)?.map_err(|e| Failure::Step {
                    step: format!("mkdir {path}"),
                    reason: e.to_string(),
                })?;
                report.directories += 1;
                i += 1;
            }
            Step::Write { .. } => {
                // Consecutive writes share one sync of the journal.
                let end = plan.runtime[i..]
                    .iter()
                    .position(|s| !matches!(s, Step::Write { .. }))
                    .map_or(plan.runtime.len(), |n| i + n);
                write_group(journal, &plan.runtime[i..end], report)?;
                i = end;
            }
            Step::Owner {
                path, ownership, ..
            } => {
                journal
                    .set_owner(path, *ownership)?
                    .map_err(|e| Failure::Step {
                        step: format!("setting the owner of {path}"),
                        reason: e.to_string(),
                    })?;
                report.writes += 1;
                i += 1;
            }
            Step::MoveTasks {
                from, to, tasks, ..
            } => {
                let stay = plan.stay.iter().map(|t| t.tid).collect();
                let listed = tasks.iter().map(|t| t.tid).collect();
                move_tasks(journal, from, to, report, &listed, &stay)?;
                i += 1;
            }
        }
    }
    Ok(())
}

fn write_group(
    journal: &mut Journal,
    steps: &[Step],
    report: &mut ApplyReport,
) -> Result<(), Failure> {
    let requests: Vec<WriteRequest> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Write {
                path,
                new,
                restore_with,
                ..
            } => Some(WriteRequest {
                path: path.clone(),
                new: new.clone().into_bytes(),
                restore_with: restore_with.clone().map(String::into_bytes),
            }),
            _ => None,
        })
        .collect();
    let results = journal.write_batch(&requests)?;
    for (step, result) in steps.iter().zip(results) {
        let Step::Write {
            path,
            may_be_refused,
            why,
            ..
        } = step
        else {
            continue;
        };
        match result {
            Ok(()) => report.writes += 1,
            Err(e) if *may_be_refused => report.refused.push(Refused {
                what: why.clone(),
                reason: refusal_reason(path, &e),
            }),
            Err(e) => {
                return Err(Failure::Step {
                    step: format!("writing {path}"),
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(())
}

fn refusal_reason(path: &str, e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::EIO) && path.starts_with(tame_host::irq::PROC_IRQ) {
        "EIO: the kernel manages this IRQ's affinity (managed_irq); only isolcpus=managed_irq at boot keeps it off isolated CPUs".into()
    } else {
        e.to_string()
    }
}

/// Move every movable thread listed in `from` to `to`, reading the list again
/// [`MOVE_PASSES`] times for threads started meanwhile. `listed`: the threads the plan
/// listed (to count those started since and those gone); `kept`: the threads already
/// reported as kept by the kernel.
fn move_tasks(
    journal: &mut Journal,
    from: &str,
    to: &str,
    report: &mut ApplyReport,
    listed: &BTreeSet<u32>,
    kept: &BTreeSet<u32>,
) -> Result<(), Failure> {
    let root = journal.root().clone();
    // Reported once each: kept by the kernel, or refused.
    let mut reported: BTreeSet<u32> = kept.clone();
    let mut moved: BTreeSet<u32> = BTreeSet::new();
    for _ in 0..MOVE_PASSES {
        // Read again: tasks fork and exit while apply runs.
        let (movable, pinned) = split_movable(&members::read(&root, from));
        let candidates: Vec<Task> = movable
            .into_iter()
            .filter(|t| !reported.contains(&t.tid))
            .collect();
        for t in pinned {
            if reported.insert(t.tid) {
                report.kept.extend(Kept::of(&t));
            }
        }
        if candidates.is_empty() {
            break;
        }
        let attach = Attach {
            tids: candidates.iter().map(|t| t.tid).collect(),
            from: from.to_string(),
            to: to.to_string(),
        };
        let results = attach.run(journal)?;
        for (t, result) in candidates.iter().zip(results) {
            match result {
                Ok(()) => {
                    moved.insert(t.tid);
                }
                // It exited meanwhile.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    reported.insert(t.tid);
                    report.refused.push(Refused {
                        what: task_name(t),
                        reason: move_refusal_reason(&e),
                    });
                }
            }
        }
    }
    report.tasks_moved += moved.len();
    report.tasks_listed += listed.len();
    report.tasks_started += moved.difference(listed).count();
    report.tasks_gone += listed
        .iter()
        .filter(|t| !moved.contains(t) && !reported.contains(t))
        .count();
    Ok(())
}

fn move_refusal_reason(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::EINVAL) {
        "EINVAL: the kernel keeps it on its CPU (a bound kernel thread)".into()
    } else {
        e.to_string()
    }
}

/// Revert whatever the journal in `dir` holds.
pub fn revert(root: &Root, dir: &Path) -> Result<RevertReport, ApplyError> {
    if !tame_host::privilege::may_change(root) {
        return Err(ApplyError::NotRoot("revert"));
    }
    let report = journal::revert(root, dir)?;
    unpublish_spec(dir, &report);
    // No journal, yet tame's groups are there: the journal was moved away or another
    // --journal-dir applied it. "Nothing to revert" would leave the partition applied.
    if report.nothing_to_revert {
        let groups = partition_groups(root);
        if !groups.is_empty() {
            return Err(ApplyError::AppliedWithoutJournal {
                dir: dir.display().to_string(),
                groups,
            });
        }
    }
    Ok(report)
}

/// Groups below the cpuset root that name no partition although they start with
/// tame's prefix: `tame reserve`'s cgroup backend (`tame_reserve::cgroup::GROUP_PREFIX`,
/// which a test there keeps in this list) makes them for its reservations.
pub const NOT_PARTITION_GROUPS: &[&str] = &["tame-reserve-"];

/// tame's partition groups present on the host (cpuset hierarchy), as paths.
fn partition_groups(root: &Root) -> Vec<String> {
    use tame_host::cgroup::{CgroupModel, Cgroups};
    let model = CgroupModel::read(&mut tame_host::reader::Reader::new(root));
    let Some(cpuset) = Cgroups::for_controller(&model, "cpuset") else {
        return Vec::new();
    };
    let top = cpuset.root();
    let mut names = root.list_dir(top.path()).unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .filter(|n| {
            n.starts_with(plan::DIR_PREFIX)
                && !NOT_PARTITION_GROUPS.iter().any(|p| n.starts_with(p))
        })
        .map(|n| top.child(&n).path())
        .filter(|p| root.is_dir(p))
        .collect()
}
