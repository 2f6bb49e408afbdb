//! `tame status --json` as series: whether a partition is applied, how many of the values
//! apply wrote drifted since (and how many re-applying fixes), and the audit of what still
//! runs on the isolated CPUs (tasks, IRQs, local timer interrupts).

use tame_partition::Status;

use crate::writer::{labels, Exposition, Kind, Labels, WriteError};

pub fn add(e: &mut Exposition, s: &Status) -> Result<(), WriteError> {
    let none = Labels::new();
    let gauge = |e: &mut Exposition, name: &str, help: &str, l: &Labels, v: f64| {
        e.declare(name, Kind::Gauge, help)?;
        e.sample(name, l, v)
    };
    let flag = |b: bool| f64::from(u8::from(b));
    gauge(
        e,
        "tame_partition_applied",
        "1 when a partition is applied (tame apply's journal exists), else 0.",
        &none,
        flag(s.applied),
    )?;
    gauge(
        e,
        "tame_partition_changes",
        "Values the applied partition changed (journaled).",
        &none,
        s.changes as f64,
    )?;
    gauge(
        e,
        "tame_partition_interrupted_changes",
        "Journaled changes without an outcome: apply was interrupted (run tame revert).",
        &none,
        s.interrupted as f64,
    )?;
    gauge(
        e,
        "tame_partition_drift",
        "Values apply wrote that something else has changed since (0 when the partition is as applied).",
        &none,
        s.drift.len() as f64,
    )?;
    gauge(
        e,
        "tame_partition_drift_fixable",
        "Drifted values that re-applying the spec writes back.",
        &none,
        s.drift.iter().filter(|d| d.reapply_fixes).count() as f64,
    )?;
    gauge(
        e,
        "tame_partition_spec_file_matches",
        "1 when the spec file apply was given still holds the applied spec, else 0.",
        &none,
        flag(s.spec_file_matches),
    )?;
    gauge(
        e,
        "tame_partition_isolated_cpus",
        "How many CPUs the applied partition isolates.",
        &none,
        s.audit.isolated_cpus.len() as f64,
    )?;
    e.declare(
        "tame_partition_foreign_tasks",
        Kind::Gauge,
        "Tasks allowed on the isolated CPUs that are not the partitions' own, by kind (user, kernel, kernel_bound: kernel threads the kernel places itself and that cannot move).",
    )?;
    let tasks = &s.audit.tasks;
    for (kind, n) in [
        ("user", tasks.iter().filter(|t| !t.kernel_thread).count()),
        (
            "kernel",
            tasks
                .iter()
                .filter(|t| t.kernel_thread && !t.bound_by_kernel)
                .count(),
        ),
        (
            "kernel_bound",
            tasks.iter().filter(|t| t.bound_by_kernel).count(),
        ),
    ] {
        e.sample(
            "tame_partition_foreign_tasks",
            &labels(&[("kind", kind)]),
            n as f64,
        )?;
    }
    e.declare(
        "tame_partition_foreign_irqs",
        Kind::Gauge,
        "IRQs that fire on the isolated CPUs, by kind (managed: the kernel places them; moving: routed away, moves when it next fires; other).",
    )?;
    let irqs = &s.audit.irqs;
    for (kind, n) in [
        ("managed", irqs.iter().filter(|i| i.managed).count()),
        (
            "moving",
            irqs.iter().filter(|i| !i.managed && i.moving).count(),
        ),
        (
            "other",
            irqs.iter().filter(|i| !i.managed && !i.moving).count(),
        ),
    ] {
        e.sample(
            "tame_partition_foreign_irqs",
            &labels(&[("kind", kind)]),
            n as f64,
        )?;
    }
    e.declare(
        "tame_partition_timer_interrupts_total",
        Kind::Counter,
        "Local timer interrupts per isolated CPU since boot (/proc/interrupts LOC).",
    )?;
    for (cpu, n) in &s.audit.timer_interrupts {
        e.sample(
            "tame_partition_timer_interrupts_total",
            &labels(&[("cpu", &cpu.to_string())]),
            *n as f64,
        )?;
    }
    Ok(())
}
