//! Kernel knobs: the workqueue cpumask, timer migration, RT throttling, the CPUs the
//! lockup watchdogs run on.

use tame_host::knobs::WORKQUEUE_CPUMASK;
use tame_host::sched::{RT_RUNTIME, TIMER_MIGRATION, WATCHDOG_CPUMASK};
use tame_host::{CpuList, HostModel};

use super::{Builder, ValueKind};
use crate::spec::{Role, Spec};

pub(super) fn steps(spec: &Spec, host: &HostModel, b: &mut Builder) {
    if b.exists(WORKQUEUE_CPUMASK) {
        b.write(
            WORKQUEUE_CPUMASK.into(),
            spec.cpus_of(Role::System).to_mask(host.nr_cpu_ids()),
            ValueKind::CpuMask,
            "unbound workqueue work runs on the system partition",
        );
    }
    // Off by default once a CPU is isolated.
    let has_isolated = !spec.isolated_cpus().is_empty();
    let migration = spec.timer_migration.or(has_isolated.then_some(false));
    if let Some(on) = migration {
        if b.exists(TIMER_MIGRATION) {
            b.write(
                TIMER_MIGRATION.into(),
                if on { "1" } else { "0" }.into(),
                ValueKind::Text,
                "timers are not pulled onto busy isolated CPUs",
            );
        }
    }
    if let Some(cpus) = watchdog_cpus(spec, host) {
        if b.exists(WATCHDOG_CPUMASK) {
            b.write(
                WATCHDOG_CPUMASK.into(),
                cpus.to_string(),
                ValueKind::CpuList,
                "the lockup watchdogs (soft and hard/NMI) run only where the spec allows them",
            );
        }
    }
    if let Some(rt) = spec.rt_runtime_us {
        b.write(
            RT_RUNTIME.into(),
            rt.to_string(),
            ValueKind::Text,
            "RT throttling as the spec asks",
        );
    }
}

/// kernel.watchdog_cpumask after the spec: the CPUs it has now, less those of partitions
/// with `watchdog = false`, plus those with `watchdog = true`; `None` when no partition
/// says. The watchdog's hrtimer fires every watchdog_thresh × 2/5 s on each CPU in it and
/// wakes a stop-class thread there: noise an isolated CPU does without.
fn watchdog_cpus(spec: &Spec, host: &HostModel) -> Option<CpuList> {
    let mut said = false;
    let mut cpus = host
        .sched
        .watchdog_cpus
        .clone()
        .unwrap_or_else(|| host.cpus.online.clone());
    for p in &spec.partitions {
        match p.watchdog {
            Some(false) => cpus = cpus.difference(&p.cpus),
            Some(true) => cpus = cpus.union(&p.cpus),
            None => continue,
        }
        said = true;
    }
    said.then_some(cpus)
}
