//! IRQs: every movable IRQ off the isolated CPUs, and new ones start there too.

use tame_host::irq::{affinity_list_path, DEFAULT_AFFINITY};
use tame_host::HostModel;

use super::{irq_cpus, irq_target, Builder, ValueKind};
use crate::spec::Spec;

pub(super) fn steps(spec: &Spec, host: &HostModel, b: &mut Builder) {
    let target = irq_cpus(spec);
    for irq in &host.irqs.irqs {
        // The kernel refuses these (EIO); the plan warned about them.
        if irq.managed {
            continue;
        }
        let Some(current) = &irq.affinity else {
            continue;
        };
        // Keep a deliberate narrower pin when it already fits.
        let new = irq_target(current, &target);
        if &new == current {
            continue;
        }
        b.write_full(
            affinity_list_path(irq.number),
            new.to_string(),
            ValueKind::CpuList,
            &format!("IRQ {} ({}) off isolated CPUs", irq.number, irq.name),
            None,
            true,
        );
    }
    if b.exists(DEFAULT_AFFINITY) {
        b.write(
            DEFAULT_AFFINITY.into(),
            target.to_mask(host.nr_cpu_ids()),
            ValueKind::CpuMask,
            "new IRQs start off isolated CPUs",
        );
    }
}
