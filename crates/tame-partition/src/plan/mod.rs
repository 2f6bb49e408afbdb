//! The plan: what apply will write, compared with what is there now. Pure: it
//! works on the host model alone (every current value it compares with is in
//! [`tame_host::knobs::Knobs`]), so the same model always gives the same plan.
//!
//! [`validate`] checks the spec against the host, one function per rule; the
//! steps come from one module per subsystem, in the order apply runs them:
//! cgroups ([`cgroup_v1`] or [`cgroup_v2`], then the task-list owners), IRQs,
//! kernel knobs, power, resctrl; [`boot`] lists the boot parameters to add.

pub mod boot;
mod builder;
mod cgroup_v1;
mod cgroup_v2;
mod cpuset;
mod irq;
mod kernel;
mod power;
pub mod recommend;
mod resctrl;
mod validate;

use serde::Serialize;
use tame_host::cgroup::members::Member;
use tame_host::cgroup::{CgroupVersion, Cgroups, Setting};
use tame_host::journal::Ownership;
use tame_host::{CpuList, HostModel};

use crate::spec::Spec;
use builder::Builder;

pub use recommend::Recommendation;
pub use validate::NO_CPUSET;

/// Version of the JSON shape of [`Plan`].
impl tame_host::Document for Plan {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Number "tame.plan", 1);
}
/// Prefix of every directory tame creates (cgroups, resctrl groups).
pub const DIR_PREFIX: &str = tame_host::cgroup::TAME_PREFIX;

/// The directory a partition's groups get (its cgroup, its resctrl group): `tame-NAME`.
pub fn group_name(partition: &str) -> String {
    format!("{DIR_PREFIX}{partition}")
}

/// How a value is compared with what the kernel prints, so a second apply sees no
/// change (plan) and a value apply wrote is no drift (status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    Text,
    /// A CPU list; compared as text where either side is not one.
    CpuList,
    CpuMask,
    /// Controller changes (`+cpuset -io`) to a file that prints the enabled set
    /// (`cpuset cpu io`), as v2 `cgroup.subtree_control`.
    ControllerSet,
}

impl ValueKind {
    /// How to compare a value apply wrote, known from the value alone (the journal keeps
    /// no kind): controller changes as [`ValueKind::ControllerSet`]; anything else as a
    /// CPU list, which compares masks in the kernel's spelling and other values as text.
    pub fn of_written(value: &str) -> Self {
        if controller_changes(value).is_some() {
            ValueKind::ControllerSet
        } else {
            ValueKind::CpuList
        }
    }
}

impl From<Setting> for ValueKind {
    fn from(setting: Setting) -> Self {
        if setting.is_cpu_list() {
            ValueKind::CpuList
        } else if setting == Setting::SubtreeControl {
            ValueKind::ControllerSet
        } else {
            ValueKind::Text
        }
    }
}

/// `+name` / `-name` words as (enable, name); `None` unless every word is one (a
/// negative number such as `-1` is not).
fn controller_changes(value: &str) -> Option<Vec<(bool, &str)>> {
    let words: Vec<(bool, &str)> = value
        .split_whitespace()
        .map(|w| match w.split_at_checked(1) {
            Some(("+", name)) => Some((true, name)),
            Some(("-", name)) => Some((false, name)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let is_name = |n: &str| {
        n.starts_with(|c: char| c.is_ascii_lowercase())
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    (!words.is_empty() && words.iter().all(|(_, n)| is_name(n))).then_some(words)
}

/// One task (thread) as far as moving it matters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Task {
    pub tid: u32,
    pub comm: String,
    pub kernel_thread: bool,
    /// The kernel places it itself: per-CPU kernel threads and workqueue workers
    /// (PF_NO_SETAFFINITY), and kthreadd, which cgroup v1 refuses to move.
    pub pinned_by_kernel: bool,
    pub cpus_allowed: Option<CpuList>,
}

impl Task {
    pub fn from_member(m: &Member) -> Self {
        Self {
            tid: m.tid,
            // A task that is gone (or a fixture without /proc for it).
            comm: m.comm.clone().unwrap_or_else(|| "?".to_string()),
            kernel_thread: m.kthread,
            pinned_by_kernel: m.kernel_places(),
            cpus_allowed: m.affinity.clone(),
        }
    }
}

impl Task {
    /// Why the kernel keeps it where it is; `None` for a task apply moves.
    pub fn kept_because(&self) -> Option<KeptBecause> {
        if !self.pinned_by_kernel {
            return None;
        }
        Some(if !self.kernel_thread {
            KeptBecause::Other
        } else if self.comm == "kthreadd" {
            KeptBecause::Kthreadd
        } else if self.comm.starts_with("kworker/u") || self.comm.starts_with("kworker/R-") {
            // Unbound workers and rescuers: kworker/N:M is a per-CPU worker.
            KeptBecause::Workqueue
        } else {
            KeptBecause::PerCpu
        })
    }
}

/// Why a thread stays where the kernel put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptBecause {
    /// A per-CPU kernel thread (ksoftirqd/N, migration/N, kworker/N:M, …).
    PerCpu,
    /// A workqueue worker or rescuer: it follows the workqueue cpumask.
    Workqueue,
    /// kthreadd, which cgroup v1 refuses to move.
    Kthreadd,
    /// Any other thread whose affinity the kernel keeps (PF_NO_SETAFFINITY).
    Other,
}

impl KeptBecause {
    /// `count` threads of this kind, and why they stay.
    pub fn describe(self, count: usize) -> String {
        let one = count == 1;
        match self {
            KeptBecause::PerCpu => format!(
                "{count} per-CPU kernel thread{} (bound to {} CPU by the kernel)",
                if one { "" } else { "s" },
                if one { "its" } else { "their" }
            ),
            KeptBecause::Workqueue => format!(
                "{count} workqueue worker{} ({} the workqueue cpumask, which apply sets to the system CPUs)",
                if one { "" } else { "s" },
                if one { "it follows" } else { "they follow" }
            ),
            KeptBecause::Kthreadd => "kthreadd (cgroup v1 never moves it)".to_string(),
            KeptBecause::Other => format!(
                "{count} other thread{} whose placement the kernel keeps (PF_NO_SETAFFINITY)",
                if one { "" } else { "s" }
            ),
        }
    }
}

/// How many threads of each kind stay, as one phrase: "40 kernel threads stayed where the
/// kernel keeps them: 16 per-CPU kernel threads (…), …" (`past`: "stayed", else "stay").
/// `None` when there are none.
pub fn kept_summary(kinds: impl IntoIterator<Item = KeptBecause>, past: bool) -> Option<String> {
    let mut counts: std::collections::BTreeMap<KeptBecause, usize> = Default::default();
    for k in kinds {
        *counts.entry(k).or_default() += 1;
    }
    let total: usize = counts.values().sum();
    if total == 0 {
        return None;
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| k.describe(*n)).collect();
    let what = if counts.contains_key(&KeptBecause::Other) {
        "thread"
    } else {
        "kernel thread"
    };
    let verb = match (past, total) {
        (true, _) => "stayed",
        (false, 1) => "stays",
        (false, _) => "stay",
    };
    Some(format!(
        "{total} {what}{} {verb} where the kernel keeps {}: {}",
        if total == 1 { "" } else { "s" },
        if total == 1 { "it" } else { "them" },
        parts.join(", ")
    ))
}

/// Listed tasks split into movable ones and those the kernel keeps where they are.
pub fn split_movable(members: &[Member]) -> (Vec<Task>, Vec<Task>) {
    members
        .iter()
        .map(Task::from_member)
        .partition(|t| !t.pinned_by_kernel)
}

/// One step of apply, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    Mkdir {
        path: String,
        /// The cgroup's task list and its parent's (revert hands tasks back before rmdir).
        #[serde(skip)]
        members: Option<(String, String)>,
        why: String,
    },
    Write {
        path: String,
        /// `None`: the file does not exist yet (created with its directory).
        old: Option<String>,
        new: String,
        why: String,
        /// What to write on revert when writing the old value back would not work.
        #[serde(skip)]
        restore_with: Option<String>,
        /// The kernel may refuse this one without failing apply (IRQs it manages).
        #[serde(skip)]
        may_be_refused: bool,
        /// Why this write changes nothing on this host (apply still makes it: journaled,
        /// harmless), e.g. an idle limit without a cpuidle driver.
        #[serde(skip_serializing_if = "Option::is_none")]
        ineffective: Option<String>,
    },
    /// Owner, group and mode of a cgroup's task list: who may put tasks there.
    Owner {
        path: String,
        /// `uid:gid:mode`; `None` when the file comes with a directory apply creates.
        old: Option<String>,
        new: String,
        #[serde(skip)]
        ownership: Ownership,
        why: String,
    },
    /// Attach every movable task listed in `from` to `to` (the list is read again at apply).
    MoveTasks {
        from: String,
        to: String,
        /// The movable threads listed when the host was read.
        tasks: Vec<Task>,
        /// How many processes those threads belong to (a kernel thread is one of its own).
        processes: usize,
        why: String,
    },
}

/// A boot parameter to add; only those this kernel supports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BootParameter {
    pub parameter: String,
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub schema: u32,
    pub cgroup: Option<CgroupVersion>,
    pub isolated_cpus: CpuList,
    pub runtime: Vec<Step>,
    pub needs_reboot: Vec<BootParameter>,
    pub warnings: Vec<String>,
    /// One layout to take when the isolated CPUs carry what a warning names (the least
    /// bad one where every choice warns); `None` when they carry nothing.
    pub recommendation: Option<Recommendation>,
    /// Kernel threads whose placement the kernel keeps to itself (per-CPU threads;
    /// unbound workqueue workers, which follow the workqueue cpumask), by name.
    pub stay: Vec<Task>,
}

impl Plan {
    /// True when apply has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.runtime.iter().all(|s| match s {
            Step::MoveTasks { tasks, .. } => tasks.is_empty(),
            _ => false,
        })
    }
}

/// Everything wrong with a spec on this host, found before anything is written.
#[derive(Debug, thiserror::Error)]
#[error("the spec cannot be applied here:\n  - {}", .errors.join("\n  - "))]
pub struct Invalid {
    pub errors: Vec<String>,
}

/// Validate `spec` against the host and work out the steps to apply it.
pub fn plan(spec: &Spec, host: &HostModel) -> Result<Plan, Invalid> {
    let findings = validate::validate(spec, host);
    if !findings.errors.is_empty() {
        return Err(Invalid {
            errors: findings.errors,
        });
    }
    let Some(cpuset) = Cgroups::for_controller(&host.cgroups, "cpuset") else {
        return Err(Invalid {
            errors: vec![NO_CPUSET.to_string()],
        });
    };
    let mut b = Builder::new(&host.knobs);
    let mut stay = Vec::new();
    match cpuset.version() {
        CgroupVersion::V1 => cgroup_v1::steps(spec, host, &cpuset, &mut b, &mut stay),
        CgroupVersion::V2 => cgroup_v2::steps(spec, host, &cpuset, &mut b),
    }
    cpuset::owners(spec, host, &cpuset, &mut b);
    irq::steps(spec, host, &mut b);
    kernel::steps(spec, host, &mut b);
    power::steps(spec, host, &mut b);
    resctrl::steps(spec, host, &mut b);
    Ok(Plan {
        schema: <Plan as tame_host::Document>::SCHEMA.version,
        cgroup: Some(cpuset.version()),
        isolated_cpus: spec.isolated_cpus(),
        runtime: b.into_steps(),
        needs_reboot: boot::parameters(spec, host),
        warnings: findings.warnings,
        recommendation: recommend::recommend(spec, host),
        stay,
    })
}

/// Where movable IRQs may go.
pub fn irq_cpus(spec: &Spec) -> CpuList {
    spec.partitions
        .iter()
        .filter(|p| p.accepts_irqs())
        .fold(CpuList::new(), |a, p| a.union(&p.cpus))
}

/// Where an IRQ allowed on `current` goes: the part of it on the IRQ CPUs `target` (a
/// deliberate narrower pin that fits is kept), else all of `target`.
pub fn irq_target(current: &CpuList, target: &CpuList) -> CpuList {
    let kept = current.intersection(target);
    if kept.is_empty() {
        target.clone()
    } else {
        kept
    }
}

/// Whether the kernel's printed value `current` already is `wanted`.
pub fn same_value(current: &str, wanted: &str, kind: ValueKind) -> bool {
    let (c, w) = (current.trim(), wanted.trim());
    match kind {
        ValueKind::Text => c == w,
        ValueKind::CpuList => match (CpuList::parse(c), CpuList::parse(w)) {
            (Ok(a), Ok(b)) => a == b,
            _ => c == w,
        },
        ValueKind::CpuMask => match (CpuList::parse_mask(c), CpuList::parse_mask(w)) {
            (Ok(a), Ok(b)) => a == b,
            _ => c == w,
        },
        // Every controller to enable is enabled, none to disable is.
        ValueKind::ControllerSet => match controller_changes(w) {
            Some(changes) => {
                let enabled: Vec<&str> = c.split_whitespace().collect();
                changes
                    .iter()
                    .all(|(on, name)| enabled.contains(name) == *on)
            }
            None => c == w,
        },
    }
}

/// `path: old → new`, the human view of a step.
pub fn describe(step: &Step) -> String {
    match step {
        Step::Mkdir { path, .. } => format!("{path}: (absent) → directory"),
        Step::Write { path, old, new, .. } => format!(
            "{path}: {} → {}",
            old.as_deref()
                .map_or("(new)".to_string(), |o| o.trim().to_string()),
            new.trim()
        ),
        Step::Owner { path, old, new, .. } => format!(
            "{path}: owner {} → {new} (uid:gid:mode)",
            old.as_deref().unwrap_or("(new)")
        ),
        Step::MoveTasks {
            from,
            to,
            tasks,
            processes,
            ..
        } => {
            let kernel = tasks.iter().filter(|t| t.kernel_thread).count();
            format!(
                "{} thread{} of {processes} process{} ({kernel} of them kernel threads) listed now: {from} → {to}",
                tasks.len(),
                if tasks.len() == 1 { "" } else { "s" },
                if *processes == 1 { "" } else { "es" },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_changes_compare_with_the_enabled_set() {
        let kind = ValueKind::of_written("+cpuset");
        assert_eq!(kind, ValueKind::ControllerSet);
        assert!(same_value("cpuset cpu io\n", "+cpuset", kind));
        assert!(!same_value("cpu io", "+cpuset", kind));
        assert!(same_value("cpu io", "-cpuset +io", kind));
        assert!(!same_value("cpuset io", "-cpuset +io", kind));
        assert!(!same_value("", "+cpuset", kind));
        assert_eq!(
            ValueKind::from(Setting::SubtreeControl),
            ValueKind::ControllerSet
        );
        assert_eq!(ValueKind::from(Setting::Cpus), ValueKind::CpuList);
        assert_eq!(ValueKind::from(Setting::Partition), ValueKind::Text);
    }

    #[test]
    fn other_written_values_compare_as_lists_or_text() {
        // A negative number (sched_rt_runtime_us = -1) is no controller change.
        for v in ["-1", "0-3", "03", "isolated", "+", "+Cpu", "+1"] {
            assert_eq!(ValueKind::of_written(v), ValueKind::CpuList, "{v}");
        }
        let kind = ValueKind::of_written("-1");
        assert!(same_value("-1\n", "-1", kind));
        assert!(!same_value("950000", "-1", kind));
        assert!(same_value("0-1,2", "0-2", ValueKind::of_written("0-2")));
        assert!(!same_value(
            "root",
            "isolated",
            ValueKind::of_written("isolated")
        ));
    }
}
