//! Kernel knobs: the workqueue cpumask, timer migration, RT throttling.

use tame_host::knobs::WORKQUEUE_CPUMASK;
use tame_host::sched::{RT_RUNTIME, TIMER_MIGRATION};
use tame_host::HostModel;

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
    if let Some(rt) = spec.rt_runtime_us {
        b.write(
            RT_RUNTIME.into(),
            rt.to_string(),
            ValueKind::Text,
            "RT throttling as the spec asks",
        );
    }
}
