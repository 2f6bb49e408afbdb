//! Status: the applied spec, drift from what apply wrote, and an audit of what
//! still runs on isolated CPUs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;
use tame_host::journal::{self, Change, JournalError, Outcome};
use tame_host::{CpuList, Root};

use crate::apply::SPEC_NOTE;
use crate::hostview::{self, HostView};
use crate::spec::Spec;

/// Version of the JSON shape of [`Status`].
pub const STATUS_SCHEMA: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub path: String,
    pub applied: String,
    /// `None`: the file is gone.
    pub now: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditTask {
    pub tid: u32,
    pub comm: String,
    pub kernel_thread: bool,
    /// A kernel thread the kernel places itself (see [`hostview::kernel_places`]): it cannot move.
    pub bound_by_kernel: bool,
    pub cpus_allowed: CpuList,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditIrq {
    pub irq: u32,
    pub name: String,
    pub fires_on: CpuList,
    pub managed: bool,
    /// Its affinity already excludes the isolated CPUs; the kernel moves it
    /// when it next fires.
    pub moving: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    pub isolated_cpus: CpuList,
    /// Tasks allowed on isolated CPUs that are not the partitions' own.
    pub tasks: Vec<AuditTask>,
    pub irqs: Vec<AuditIrq>,
    /// Local timer interrupts per isolated CPU so far (/proc/interrupts LOC).
    pub timer_interrupts: BTreeMap<u32, u64>,
    /// Armed hrtimers per isolated CPU by callback, with how many (/proc/timer_list;
    /// empty when it is unreadable, e.g. not root).
    pub timers: BTreeMap<u32, BTreeMap<String, u32>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub schema: u32,
    pub applied: bool,
    pub journal: String,
    pub spec: Option<String>,
    pub changes: usize,
    /// Changes journaled with no outcome: apply was interrupted; run revert.
    pub interrupted: usize,
    pub drift: Vec<Drift>,
    pub audit: Audit,
}

/// Read the state of the journal in `dir` and audit the host against it.
pub fn status(root: &Root, dir: &Path) -> Result<Status, JournalError> {
    let path = journal::journal_path(dir).display().to_string();
    let Some(rec) = journal::load(dir)? else {
        return Ok(Status {
            schema: STATUS_SCHEMA,
            applied: false,
            journal: path,
            spec: None,
            changes: 0,
            interrupted: 0,
            drift: Vec::new(),
            audit: Audit::default(),
        });
    };
    let spec_text = rec
        .note(SPEC_NOTE)
        .map(|t| String::from_utf8_lossy(t).into_owned());
    let spec = spec_text
        .as_deref()
        .and_then(|t| Spec::parse("journal", t).ok());
    // The last value apply wrote to each path.
    let mut last: BTreeMap<&str, &[u8]> = BTreeMap::new();
    let mut members = Vec::new();
    for e in &rec.entries {
        match (&e.change, &e.outcome) {
            (Change::Write { path, new, .. }, Outcome::Done) => {
                last.insert(path, new);
            }
            (
                Change::CreateDir {
                    members: Some((m, _)),
                    ..
                },
                _,
            ) => members.push(m.clone()),
            _ => {}
        }
    }
    let drift = last
        .into_iter()
        .filter_map(|(path, new)| {
            let applied = String::from_utf8_lossy(new).trim().to_string();
            let now = root.read(path).ok().map(|t| t.trim().to_string());
            let same = now.as_deref().is_some_and(|n| {
                n == applied
                    || matches!((CpuList::parse(n), CpuList::parse(&applied)), (Ok(a), Ok(b)) if a == b)
            });
            (!same).then(|| Drift {
                path: path.to_string(),
                applied,
                now,
            })
        })
        .collect();
    let isolated = spec.as_ref().map(Spec::isolated_cpus).unwrap_or_default();
    let own: BTreeSet<u32> = spec
        .iter()
        .flat_map(|s| s.partitions.iter())
        .filter(|p| p.role != crate::spec::Role::System)
        .flat_map(|p| {
            members
                .iter()
                .filter(|m| m.contains(&format!("{}{}/", crate::plan::DIR_PREFIX, p.name)))
                .flat_map(|m| hostview::read_ids(root, m))
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(Status {
        schema: STATUS_SCHEMA,
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
        audit: audit(root, &isolated, &own),
    })
}

/// What runs or fires on `isolated` that should not: every task allowed there
/// (except `own`, the partitions' tasks) and every IRQ firing there.
pub fn audit(root: &Root, isolated: &CpuList, own: &BTreeSet<u32>) -> Audit {
    if isolated.is_empty() {
        return Audit::default();
    }
    let model = tame_host::HostModel::read(root);
    let tasks = model
        .processes
        .tasks
        .iter()
        .filter(|t| !own.contains(&t.tid) && !t.affinity.intersection(isolated).is_empty())
        .map(|t| AuditTask {
            tid: t.tid,
            comm: t.comm.clone(),
            kernel_thread: t.kthread,
            bound_by_kernel: hostview::kernel_places(t.kthread, t.affinity_locked, &t.comm),
            cpus_allowed: t.affinity.clone(),
        })
        .collect();
    let host = HostView::from_model(&model);
    let irqs = host
        .irqs
        .iter()
        .filter_map(|i| {
            let on = i.effective.clone().or(i.affinity.clone())?;
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
        timer_interrupts: local_timer_counts(
            &root.read("/proc/interrupts").unwrap_or_default(),
            isolated,
        ),
        timers: hrtimers(&root.read("/proc/timer_list").unwrap_or_default(), isolated),
    }
}

/// The callbacks of the hrtimers armed on `cpus`, from /proc/timer_list
/// (` #0: <ptr>, tick_nohz_handler, S:01` lines under `cpu: N`).
pub fn hrtimers(timer_list: &str, cpus: &CpuList) -> BTreeMap<u32, BTreeMap<String, u32>> {
    let mut out: BTreeMap<u32, BTreeMap<String, u32>> = BTreeMap::new();
    let mut cpu = None;
    for line in timer_list.lines() {
        if let Some(n) = line.strip_prefix("cpu: ") {
            cpu = n.trim().parse::<u32>().ok().filter(|c| cpus.contains(*c));
            continue;
        }
        if line.starts_with("Tick Device") {
            cpu = None;
        }
        let Some(c) = cpu else { continue };
        let t = line.trim_start();
        if !t.starts_with('#') || !t.contains(": <") {
            continue;
        }
        if let Some(func) = t.split(", ").nth(1) {
            *out.entry(c)
                .or_default()
                .entry(func.to_string())
                .or_default() += 1;
        }
    }
    out
}

/// LOC counts per CPU from /proc/interrupts, for the CPUs asked about.
pub fn local_timer_counts(interrupts: &str, cpus: &CpuList) -> BTreeMap<u32, u64> {
    let mut lines = interrupts.lines();
    let columns: Vec<u32> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let Some(loc) = lines.find_map(|l| l.trim_start().strip_prefix("LOC:")) else {
        return BTreeMap::new();
    };
    columns
        .iter()
        .zip(
            loc.split_whitespace()
                .map(|n| n.parse::<u64>().unwrap_or(0)),
        )
        .filter(|(c, _)| cpus.contains(**c))
        .map(|(c, n)| (*c, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrtimers_of_the_asked_cpus_by_callback() {
        let text = "now at 1 nsecs\n\ncpu: 0\n clock 0:\nactive timers:\n #0: <00>, tick_nohz_handler, S:01\n\
                    cpu: 1\n clock 0:\nactive timers:\n #0: <0a>, tick_nohz_handler, S:01\n # expires at 1-2 nsecs [in 1 to 2 nsecs]\n\
                    \x20#1: <0b>, hrtimer_wakeup, S:01\n #2: <0c>, hrtimer_wakeup, S:01\n\
                    Tick Device: mode:     1\n #9: <0d>, nothing, S:01\n";
        let got = hrtimers(text, &CpuList::parse("1").unwrap());
        assert_eq!(got.len(), 1);
        assert_eq!(got[&1]["tick_nohz_handler"], 1);
        assert_eq!(got[&1]["hrtimer_wakeup"], 2);
        assert!(!got[&1].contains_key("nothing"));
    }

    #[test]
    fn local_timer_counts_by_column() {
        let text = "           CPU0       CPU1\n 24:  1  0  IO-APIC  ACPI\nLOC:      17147      20101   Local timer interrupts\n";
        let got = local_timer_counts(text, &CpuList::parse("1").unwrap());
        assert_eq!(got, [(1, 20101)].into_iter().collect());
    }
}
