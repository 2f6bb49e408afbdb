//! Status: the applied spec, drift from what apply wrote, and an audit of what
//! still runs on isolated CPUs.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tame_host::cgroup::members::{kernel_places, read_ids};
use tame_host::irq::IrqModel;
use tame_host::journal::{self, Change, JournalError, Outcome, Recorded};
use tame_host::timer_list::{read_armed, ArmedTimers};
use tame_host::{CpuList, HostModel, Root};

use crate::applied::{noted_text, Applied};
use crate::apply::SPEC_PATH_NOTE;
use crate::enable::Enabled;
use crate::plan::{same_value, Step, ValueKind};
use crate::spec::{Role, Spec};
use crate::spec_file::read_spec_file;

/// Version of the JSON shape of [`Status`].
impl tame_host::Document for Status {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Number "tame.status", 1);
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub path: String,
    pub applied: String,
    /// `None`: the file is gone.
    pub now: Option<String>,
    /// What the value is for (the plan's reason for writing it), when re-applying the
    /// spec would write it again.
    pub what: Option<String>,
    /// Re-applying the spec writes it back (false: the value found still fits the spec,
    /// as an IRQ pinned narrower, or the spec cannot be planned here now).
    pub reapply_fixes: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditTask {
    /// The process the thread belongs to (0 in documents written before it was kept).
    #[serde(default)]
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub kernel_thread: bool,
    /// A kernel thread the kernel places itself (see [`kernel_places`]): it cannot move.
    pub bound_by_kernel: bool,
    pub cpus_allowed: CpuList,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditIrq {
    pub irq: u32,
    pub name: String,
    pub fires_on: CpuList,
    pub managed: bool,
    /// Its affinity already excludes the isolated CPUs; the kernel moves it
    /// when it next fires.
    pub moving: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audit {
    pub isolated_cpus: CpuList,
    /// Tasks allowed on isolated CPUs that are not the partitions' own.
    pub tasks: Vec<AuditTask>,
    pub irqs: Vec<AuditIrq>,
    /// Local timer interrupts per isolated CPU so far (/proc/interrupts LOC).
    pub timer_interrupts: BTreeMap<u32, u64>,
    /// Armed hrtimers per isolated CPU by callback, with how many (/proc/timer_list;
    /// empty when it is unreadable, e.g. not root).
    pub timers: ArmedTimers,
}

// Deserialize: `tame export prometheus` reads `tame status --json` back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    pub schema: u32,
    pub applied: bool,
    pub journal: String,
    pub spec: Option<String>,
    pub changes: usize,
    /// Changes journaled with no outcome: apply was interrupted; run revert.
    pub interrupted: usize,
    pub drift: Vec<Drift>,
    /// The spec file apply was given (absolute), as the journal notes it.
    pub spec_file: Option<String>,
    /// That file still holds the applied spec, so `tame apply FILE` re-applies it.
    pub spec_file_matches: bool,
    /// Why that file was not read, a phrase that follows its path ("is a FIFO, not a
    /// regular file", "is larger than 1024 KiB"): it then does not match.
    pub spec_file_unread: Option<String>,
    /// Why the applied spec cannot be planned on this host now (re-applying would be
    /// refused), when there is drift and it cannot.
    pub reapply_refused: Option<String>,
    pub audit: Audit,
    /// The partition `tame enable` keeps at boot, when there is one.
    #[serde(default)]
    pub enabled: Option<Enabled>,
    /// The journal found is from before the last reboot: nothing of it is in effect
    /// (`tame apply` or `tame revert` clears it).
    #[serde(default)]
    pub previous_boot: bool,
    /// Read by a user who may not read the journal (root's alone): what this status shows
    /// instead — the spec `tame apply` published beside it — and what it leaves out.
    /// `None`: read in full.
    #[serde(default)]
    pub partial: Option<String>,
}

/// Read the state of the journal in `dir` and audit the host against it.
pub fn status(root: &Root, dir: &Path) -> Result<Status, JournalError> {
    let path = journal::journal_path(dir).display().to_string();
    let running = tame_host::kernel::parse_cmdline(
        &root.read(tame_host::kernel::CMDLINE).unwrap_or_default(),
    );
    let loaded = match journal::load(dir) {
        Err(JournalError::Io { source, .. }) if denied(&source) => {
            return Ok(published_status(root, dir, path));
        }
        other => other?,
    };
    let enabled = crate::enable::enabled(root, dir, &running)?;
    let previous_boot = loaded.as_ref().is_some_and(|r| r.from_previous_boot(root));
    let Some(rec) = loaded.filter(|_| !previous_boot) else {
        return Ok(Status {
            previous_boot,
            enabled,
            ..Status::nothing_applied(path)
        });
    };
    let applied = Applied::of_record(root, &rec, dir);
    let spec_text = noted_text(&rec);
    let spec = applied.and_then(Result::ok).map(|a| a.spec);
    let isolated = spec.as_ref().map(Spec::isolated_cpus).unwrap_or_default();
    let own = spec
        .as_ref()
        .map(|s| own_tasks(root, s, &rec))
        .unwrap_or_default();
    let model = HostModel::read(root);
    let mut drift = drift(root, &rec);
    let reapply_refused = match &spec {
        _ if drift.is_empty() => None,
        Some(s) => explain_drift(s, &model, &mut drift),
        None => Some("the applied spec cannot be read from the journal".to_string()),
    };
    let spec_file = rec
        .note(SPEC_PATH_NOTE)
        .map(|p| String::from_utf8_lossy(p).into_owned());
    // The noted file is often the user's own: read it as untrusted (no symlink, no FIFO
    // or device, a bounded size).
    let read = rec
        .note(SPEC_PATH_NOTE)
        .map(|p| read_spec_file(Path::new(std::ffi::OsStr::from_bytes(p))));
    let spec_file_matches = match (&read, &spec, &spec_file) {
        (Some(Ok(text)), Some(applied), Some(path)) => {
            Spec::parse(path, text).is_ok_and(|s| &s == applied)
        }
        _ => false,
    };
    let spec_file_unread = read.and_then(Result::err);
    Ok(Status {
        schema: <Status as tame_host::Document>::SCHEMA.version,
        applied: true,
        journal: path,
        spec: spec_text,
        changes: rec.entries.len(),
        interrupted: rec
            .entries
            .iter()
            .filter(|e| e.outcome == Outcome::Pending)
            .count(),
        drift,
        spec_file,
        spec_file_matches,
        spec_file_unread,
        reapply_refused,
        audit: audit_model(&model, root, &isolated, &own),
        enabled,
        previous_boot: false,
        partial: None,
    })
}

impl Status {
    /// What a journal at `journal` that holds nothing applied says.
    pub fn nothing_applied(journal: String) -> Self {
        Status {
            schema: <Status as tame_host::Document>::SCHEMA.version,
            applied: false,
            journal,
            spec: None,
            changes: 0,
            interrupted: 0,
            drift: Vec::new(),
            spec_file: None,
            spec_file_matches: false,
            spec_file_unread: None,
            reapply_refused: None,
            audit: Audit::default(),
            enabled: None,
            previous_boot: false,
            partial: None,
        }
    }
}

fn denied(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied
}

/// Status for a user who may not read the journal in `dir`: the spec apply published there
/// (trusted only when root's), the audit of what runs on its isolated CPUs (the partitions'
/// own tasks read from their cgroups); the journal's changes, drift and the boot partition
/// are root's to see. Never a reason to make root's journal directory readable.
fn published_status(root: &Root, dir: &Path, journal: String) -> Status {
    let applied = Applied::read(root, dir).ok().flatten();
    let (spec, audit) = match &applied {
        Some(a) => (
            Some(a.text.clone()),
            audit_model(
                &HostModel::read(root),
                root,
                &a.spec.isolated_cpus(),
                &cgroup_members(root, a),
            ),
        ),
        None => (None, Audit::default()),
    };
    Status {
        applied: applied.is_some(),
        spec,
        audit,
        partial: Some(format!(
            "read without root: the journal in {} is root's alone, {} {}; its changes, drift and the partition kept at boot are shown to root (sudo tame status)",
            dir.display(),
            if applied.is_some() { "so this is the spec tame apply published there," } else { "and tame apply published no spec there" },
            crate::apply::PUBLIC_SPEC
        )),
        ..Status::nothing_applied(journal)
    }
}

/// The tasks in the cgroups of `applied`'s partitions other than the system one.
fn cgroup_members(root: &Root, applied: &Applied) -> BTreeSet<u32> {
    applied
        .partitions
        .iter()
        .filter(|p| p.role != Role::System)
        .filter_map(|p| p.cgroup.as_ref())
        .flat_map(|c| read_ids(root, &c.group().members()))
        .collect()
}

/// Say what each drifted value is for and whether re-applying `spec` writes it back: the
/// plan of the applied spec on the host as it is now writes exactly what drifted (and
/// what no longer fits). Returns why re-applying would be refused, if it would.
fn explain_drift(spec: &Spec, model: &HostModel, drift: &mut [Drift]) -> Option<String> {
    let plan = match crate::plan::plan(spec, model) {
        Ok(p) => p,
        Err(e) => return Some(e.errors.join("; ")),
    };
    for d in drift.iter_mut() {
        let write = plan.runtime.iter().find_map(|s| match s {
            Step::Write { path, why, .. } if *path == d.path => Some(why),
            _ => None,
        });
        d.reapply_fixes = write.is_some();
        d.what = write.cloned();
    }
    None
}

/// The files whose value is no longer the last one apply wrote, compared as the
/// planner compares them ([`same_value`]) so a file plan leaves alone is no drift.
fn drift(root: &Root, rec: &Recorded) -> Vec<Drift> {
    let mut last: BTreeMap<&str, &[u8]> = BTreeMap::new();
    for e in &rec.entries {
        if let (Change::Write { path, new, .. }, Outcome::Done) = (&e.change, &e.outcome) {
            last.insert(path, new);
        }
    }
    last.into_iter()
        .filter_map(|(path, new)| {
            let applied = String::from_utf8_lossy(new).trim().to_string();
            let now = root.read(path).ok().map(|t| t.trim().to_string());
            let kind = ValueKind::of_written(&applied);
            let same = now
                .as_deref()
                .is_some_and(|n| same_value(n, &applied, kind));
            (!same).then(|| Drift {
                path: path.to_string(),
                applied,
                now,
                what: None,
                reapply_fixes: false,
            })
        })
        .collect()
}

/// The tasks in the groups apply created for the non-system partitions.
fn own_tasks(root: &Root, spec: &Spec, rec: &Recorded) -> BTreeSet<u32> {
    let lists: Vec<&str> = rec
        .entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::CreateDir {
                members: Some((m, _)),
                ..
            } => Some(m.as_str()),
            _ => None,
        })
        .collect();
    spec.partitions
        .iter()
        .filter(|p| p.role != Role::System)
        .flat_map(|p| {
            let dir = format!("{}/", crate::plan::group_name(&p.name));
            lists
                .iter()
                .filter(|m| m.contains(&dir))
                .flat_map(|m| read_ids(root, m))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What runs or fires on `isolated` that should not: every task allowed there
/// (except `own`, the partitions' tasks) and every IRQ firing there.
pub fn audit(root: &Root, isolated: &CpuList, own: &BTreeSet<u32>) -> Audit {
    if isolated.is_empty() {
        return Audit::default();
    }
    audit_model(&HostModel::read(root), root, isolated, own)
}

/// [`audit`] on a model already read (`root` for the armed timers, read apart).
fn audit_model(model: &HostModel, root: &Root, isolated: &CpuList, own: &BTreeSet<u32>) -> Audit {
    if isolated.is_empty() {
        return Audit::default();
    }
    let tasks = model
        .processes
        .tasks
        .iter()
        .filter(|t| !own.contains(&t.tid) && !t.affinity.intersection(isolated).is_empty())
        .map(|t| AuditTask {
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.clone(),
            kernel_thread: t.kthread,
            bound_by_kernel: kernel_places(t.kthread, t.affinity_locked, &t.comm),
            cpus_allowed: t.affinity.clone(),
        })
        .collect();
    let irqs = model
        .irqs
        .irqs
        .iter()
        .filter_map(|i| {
            let on = i.fires_on()?.clone();
            let moving = i
                .affinity
                .as_ref()
                .is_some_and(|a| a.intersection(isolated).is_empty());
            (!on.intersection(isolated).is_empty()).then(|| AuditIrq {
                irq: i.number,
                name: i.name.clone(),
                fires_on: on,
                managed: i.managed,
                moving,
            })
        })
        .collect();
    Audit {
        isolated_cpus: isolated.clone(),
        tasks,
        irqs,
        timer_interrupts: local_timer_counts(&model.irqs, isolated),
        timers: read_armed(root, isolated),
    }
}

/// Local timer interrupts (the LOC vector of /proc/interrupts) per CPU, for the CPUs asked about.
pub fn local_timer_counts(irqs: &IrqModel, cpus: &CpuList) -> BTreeMap<u32, u64> {
    let Some(loc) = irqs.vector("LOC") else {
        return BTreeMap::new();
    };
    irqs.cpus
        .iter()
        .zip(&loc.counts)
        .filter(|(c, _)| cpus.contains(**c))
        .map(|(c, n)| (*c, *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_timer_counts_by_column() {
        let text = "           CPU0       CPU1\n 24:  1  0  IO-APIC  ACPI\nLOC:      17147      20101   Local timer interrupts\n";
        let table = tame_host::irq::parse_interrupts(text).unwrap();
        let loc = table.lines.iter().find(|l| l.label == "LOC").unwrap();
        let irqs = IrqModel {
            cpus: table.cpus.clone(),
            vectors: vec![tame_host::irq::CpuVector {
                name: loc.label.clone(),
                description: loc.text.clone(),
                counts: loc.counts.clone(),
            }],
            ..Default::default()
        };
        let got = local_timer_counts(&irqs, &CpuList::parse("1").unwrap());
        assert_eq!(got, [(1, 20101)].into_iter().collect());
        assert!(local_timer_counts(&IrqModel::default(), &CpuList::parse("1").unwrap()).is_empty());
    }
}
