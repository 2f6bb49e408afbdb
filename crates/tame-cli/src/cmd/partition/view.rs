//! The human views of plan, apply, status and revert: text made from the libraries'
//! results alone (nothing is read or written here), one function per section.

use std::fmt::Write as _;
use std::path::Path;

use tame_host::journal::RevertReport;
use tame_partition::plan::describe;
use tame_partition::status::{Audit, Drift};
use tame_partition::{ApplyReport, Plan, Status, Step};

/// Add a line to the text (writing to a `String` cannot fail).
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

pub fn plan(spec: &Path, plan: &Plan) -> String {
    let mut o = String::new();
    line!(
        o,
        "Plan for {} — isolated CPUs: {}",
        spec.display(),
        if plan.isolated_cpus.is_empty() {
            "none".to_string()
        } else {
            plan.isolated_cpus.to_string()
        }
    );
    plan_runtime(&mut o, plan);
    line!(o, "\nNeeds a reboot (add to the kernel command line):");
    if plan.needs_reboot.is_empty() {
        line!(o, "  nothing");
    }
    for p in &plan.needs_reboot {
        line!(o, "  {}    # {}", p.parameter, p.why);
    }
    if !plan.warnings.is_empty() {
        line!(o, "\nWarnings:");
        for w in &plan.warnings {
            line!(o, "  - {w}");
        }
    }
    o
}

fn plan_runtime(o: &mut String, plan: &Plan) {
    line!(o, "\nAt run time (tame apply; no reboot):");
    if plan.is_empty() {
        line!(o, "  nothing to change: the spec is applied");
    }
    for step in &plan.runtime {
        let why = match step {
            Step::Mkdir { why, .. }
            | Step::Write { why, .. }
            | Step::Owner { why, .. }
            | Step::MoveTasks { why, .. } => why,
        };
        line!(o, "  {}    # {why}", describe(step));
    }
    if !plan.stay.is_empty() {
        let names: Vec<&str> = plan.stay.iter().map(|t| t.comm.as_str()).collect();
        line!(
            o,
            "  kernel threads the kernel places itself (per-CPU, or workqueue workers following the cpumask): {}",
            names.join(", ")
        );
    }
}

pub fn apply(spec: &Path, report: &ApplyReport) -> String {
    let mut o = String::new();
    if report.unchanged {
        line!(o, "Nothing changed: {} is already applied.", spec.display());
    } else {
        line!(
            o,
            "Applied {}: {} writes, {} directories, {} tasks moved. Journal: {} (undo with `tame revert`).",
            spec.display(),
            report.writes,
            report.directories,
            report.tasks_moved,
            report.journal
        );
    }
    if !report.refused.is_empty() {
        line!(o, "The kernel kept these where they are:");
        // One line per reason: there are dozens of per-CPU kernel threads.
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &report.refused {
            match by_reason.iter_mut().find(|(reason, _)| *reason == r.reason) {
                Some((_, whats)) => whats.push(&r.what),
                None => by_reason.push((&r.reason, vec![&r.what])),
            }
        }
        for (reason, whats) in by_reason {
            line!(o, "  - {}: {reason}", whats.join(", "));
        }
    }
    for w in &report.warnings {
        line!(o, "warning: {w}");
    }
    o
}

pub fn status(status: &Status) -> String {
    let mut o = String::new();
    if !status.applied {
        line!(
            o,
            "No partitions applied (no journal at {}).",
            status.journal
        );
        return o;
    }
    line!(
        o,
        "Applied ({} changes journaled in {}):",
        status.changes,
        status.journal
    );
    if let Some(spec) = &status.spec {
        for l in spec.lines() {
            line!(o, "  | {l}");
        }
    }
    if status.interrupted > 0 {
        line!(
            o,
            "\n{} changes have no recorded outcome: apply was interrupted — run `tame revert`.",
            status.interrupted
        );
    }
    drift(&mut o, &status.drift);
    audit_tasks(&mut o, &status.audit);
    audit_irqs_and_timers(&mut o, &status.audit);
    o
}

fn drift(o: &mut String, drift: &[Drift]) {
    line!(o, "\nDrift (changed by someone else since apply):");
    if drift.is_empty() {
        line!(o, "  none");
    }
    for d in drift {
        line!(
            o,
            "  {}: applied {} → now {}",
            d.path,
            d.applied,
            d.now.as_deref().unwrap_or("(gone)")
        );
    }
}

fn audit_tasks(o: &mut String, a: &Audit) {
    line!(o, "\nOn isolated CPUs {}:", a.isolated_cpus);
    let (bound, others): (Vec<_>, Vec<_>) = a.tasks.iter().partition(|t| t.bound_by_kernel);
    if others.is_empty() {
        line!(o, "  no movable task");
    }
    for t in &others {
        line!(
            o,
            "  task {} ({}{}) may run on {}",
            t.tid,
            t.comm,
            if t.kernel_thread {
                ", kernel thread"
            } else {
                ""
            },
            t.cpus_allowed
        );
    }
    if !bound.is_empty() {
        let names: Vec<&str> = bound.iter().map(|t| t.comm.as_str()).collect();
        line!(
            o,
            "  kernel threads the kernel places itself (cannot move): {}",
            names.join(", ")
        );
    }
}

fn audit_irqs_and_timers(o: &mut String, a: &Audit) {
    if a.irqs.is_empty() {
        line!(o, "  no device IRQ");
    }
    for i in &a.irqs {
        line!(
            o,
            "  IRQ {} ({}) fires on {}{}",
            i.irq,
            i.name,
            i.fires_on,
            if i.managed {
                " — kernel-managed, cannot move"
            } else if i.moving {
                " — routed away; moves when it next fires"
            } else {
                ""
            }
        );
    }
    for (cpu, timers) in &a.timers {
        let list: Vec<String> = timers.iter().map(|(f, n)| format!("{f} ×{n}")).collect();
        line!(o, "  CPU {cpu} hrtimers: {}", list.join(", "));
    }
    for (cpu, n) in &a.timer_interrupts {
        line!(o, "  CPU {cpu}: {n} local timer interrupts since boot");
    }
}

pub fn revert(dir: &Path, report: &RevertReport) -> String {
    let mut o = String::new();
    if report.nothing_to_revert {
        line!(o, "Nothing to revert (no journal in {}).", dir.display());
    } else if report.not_restored.is_empty() {
        line!(
            o,
            "Reverted: {} journaled changes, {} values written back; the journal is removed.",
            report.entries,
            report.restored
        );
    } else {
        line!(
            o,
            "Could not restore everything; the journal stays so `tame revert` can be run again:"
        );
        for n in &report.not_restored {
            line!(o, "  - {}: {}", n.what, n.reason);
        }
    }
    o
}

/// The revert report as JSON (the host layer's report is not `Serialize`).
pub fn revert_json(report: &RevertReport) -> serde_json::Value {
    let items: Vec<serde_json::Value> = report
        .not_restored
        .iter()
        .map(|n| serde_json::json!({"what": n.what, "reason": n.reason}))
        .collect();
    serde_json::json!({
        "schema": 1,
        "entries": report.entries,
        "restored": report.restored,
        "not_restored": items,
        "journal_removed": report.journal_removed,
        "nothing_to_revert": report.nothing_to_revert,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::journal::NotRestored;
    use tame_host::CpuList;
    use tame_partition::status::{AuditIrq, AuditTask};

    fn cpus(s: &str) -> CpuList {
        CpuList::parse(s).unwrap()
    }

    #[test]
    fn status_shows_the_spec_drift_and_what_runs_on_isolated_cpus() {
        let task = |tid, comm: &str, kernel_thread, bound_by_kernel| AuditTask {
            tid,
            comm: comm.into(),
            kernel_thread,
            bound_by_kernel,
            cpus_allowed: cpus("0-3"),
        };
        let irq = |irq, managed, moving| AuditIrq {
            irq,
            name: format!("dev{irq}"),
            fires_on: cpus("2"),
            managed,
            moving,
        };
        let s = Status {
            schema: 1,
            applied: true,
            journal: "/var/lib/tame/journal".into(),
            spec: Some("[[partition]]\nname = \"rt\"".into()),
            changes: 7,
            interrupted: 1,
            drift: vec![
                Drift {
                    path: "/proc/sys/kernel/timer_migration".into(),
                    applied: "0".into(),
                    now: Some("1".into()),
                },
                Drift {
                    path: "/sys/devices/virtual/workqueue/cpumask".into(),
                    applied: "03".into(),
                    now: None,
                },
            ],
            audit: Audit {
                isolated_cpus: cpus("2-3"),
                tasks: vec![
                    task(1, "systemd", false, false),
                    task(3, "rcu_preempt", true, false),
                    task(20, "ksoftirqd/2", true, true),
                ],
                irqs: vec![
                    irq(24, true, false),
                    irq(25, false, true),
                    irq(26, false, false),
                ],
                timer_interrupts: [(2, 17)].into_iter().collect(),
                timers: [(
                    2,
                    [("tick_nohz_handler".to_string(), 1)].into_iter().collect(),
                )]
                .into_iter()
                .collect(),
            },
        };
        assert_eq!(
            status(&s),
            "Applied (7 changes journaled in /var/lib/tame/journal):
  | [[partition]]
  | name = \"rt\"

1 changes have no recorded outcome: apply was interrupted — run `tame revert`.

Drift (changed by someone else since apply):
  /proc/sys/kernel/timer_migration: applied 0 → now 1
  /sys/devices/virtual/workqueue/cpumask: applied 03 → now (gone)

On isolated CPUs 2-3:
  task 1 (systemd) may run on 0-3
  task 3 (rcu_preempt, kernel thread) may run on 0-3
  kernel threads the kernel places itself (cannot move): ksoftirqd/2
  IRQ 24 (dev24) fires on 2 — kernel-managed, cannot move
  IRQ 25 (dev25) fires on 2 — routed away; moves when it next fires
  IRQ 26 (dev26) fires on 2
  CPU 2 hrtimers: tick_nohz_handler ×1
  CPU 2: 17 local timer interrupts since boot
"
        );
    }

    #[test]
    fn nothing_applied_and_a_clean_audit_say_so() {
        let mut s = Status {
            schema: 1,
            applied: false,
            journal: "/j/journal".into(),
            spec: None,
            changes: 0,
            interrupted: 0,
            drift: vec![],
            audit: Audit::default(),
        };
        assert_eq!(
            status(&s),
            "No partitions applied (no journal at /j/journal).\n"
        );
        s.applied = true;
        assert_eq!(
            status(&s),
            "Applied (0 changes journaled in /j/journal):\n\nDrift (changed by someone else since apply):\n  none\n\nOn isolated CPUs :\n  no movable task\n  no device IRQ\n"
        );
    }

    #[test]
    fn revert_names_what_it_could_not_restore() {
        let dir = Path::new("/j");
        let mut r = RevertReport {
            nothing_to_revert: true,
            ..Default::default()
        };
        assert_eq!(revert(dir, &r), "Nothing to revert (no journal in /j).\n");
        r.nothing_to_revert = false;
        r.entries = 3;
        r.restored = 2;
        assert_eq!(
            revert(dir, &r),
            "Reverted: 3 journaled changes, 2 values written back; the journal is removed.\n"
        );
        r.not_restored.push(NotRestored {
            seq: 2,
            what: "/proc/irq/24/smp_affinity_list".into(),
            reason: "EIO".into(),
        });
        assert_eq!(
            revert(dir, &r),
            "Could not restore everything; the journal stays so `tame revert` can be run again:\n  - /proc/irq/24/smp_affinity_list: EIO\n"
        );
        assert_eq!(revert_json(&r)["not_restored"][0]["reason"], "EIO");
    }
}
