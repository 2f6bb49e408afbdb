//! IRQ checks: irqbalance, movable and kernel-managed IRQs on the checked CPUs, the default affinity.
use tame_host::irq::Irq;
use tame_host::{CpuList, HostModel};
use tame_rt::plural::count;

use crate::target::cmdline_isolated;
use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Irqs;

fn describe(irqs: &[&Irq]) -> String {
    let mut s = irqs
        .iter()
        .take(8)
        .map(|i| {
            format!(
                "{} ({}) on {}",
                i.number,
                if i.name.is_empty() { "?" } else { &i.name },
                i.fires_on().map_or("?".into(), |c| c.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    if irqs.len() > 8 {
        s.push_str(&format!(", … ({} more)", irqs.len() - 8));
    }
    s
}

pub fn irqbalance(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "irqs.irqbalance";
    let why = "irqbalance rewrites IRQ affinities every few seconds and puts interrupts back on real-time CPUs unless they are banned.";
    let ib = &m.processes.irqbalance;
    if !ib.running() {
        return Finding::new(id, C, Severity::Ok, "irqbalance is not running", why).as_vec();
    }
    let banned = ib.banned_cpus.clone().unwrap_or_default();
    // irqbalance 1.8+ leaves isolcpus/nohz_full CPUs alone by itself.
    let auto = cmdline_isolated(m);
    let exposed = t.cpus.difference(&banned.union(&auto));
    if exposed.is_empty() {
        let src = ib
            .banned_source
            .clone()
            .unwrap_or_else(|| "isolcpus/nohz_full".into());
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!(
                "irqbalance runs and leaves {} alone ({src})",
                t.cpus.named()
            ),
            why,
        )
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Fail,
        format!(
            "irqbalance (pid {}) runs without banning {}{}",
            ib.pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(","),
            exposed.named(),
            if banned.is_empty() { String::new() } else { format!(" (banned: {banned})") }
        ),
        why,
    )
    .housekeeping_fix(t, false, |_| format!(
        "set IRQBALANCE_BANNED_CPULIST={} in /etc/default/irqbalance (or /etc/sysconfig/irqbalance) and systemctl restart irqbalance; or systemctl disable --now irqbalance",
        banned.union(&t.cpus)
    ))
    .as_vec()
}

pub fn movable_irqs(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "irqs.on_cpus";
    let why = "Every interrupt that fires on a real-time CPU stops the running thread for its handler (and often a softirq after it).";
    let on: Vec<&Irq> = m.irqs.firing_on(&t.cpus).filter(|i| i.can_move()).collect();
    if on.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("no movable device IRQ fires on {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("{} on {}: {}", count(on.len() as u64, "movable IRQ fires", "movable IRQs fire"), t.cpus.named(), describe(&on)),
        why,
    )
    .housekeeping_fix(t, false, |hk| format!(
        "for each: echo {hk} > /proc/irq/N/smp_affinity_list (tame apply does this and journals it); at boot: irqaffinity={hk}"
    ))
    .as_vec()
}

pub fn managed_irqs(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "irqs.managed";
    let why = "The kernel manages these IRQs' affinity (multi-queue devices), so writing smp_affinity fails and only isolcpus=managed_irq at boot keeps them off a CPU.";
    let on: Vec<&Irq> = m.irqs.firing_on(&t.cpus).filter(|i| i.managed).collect();
    if on.is_empty() {
        let n = m.irqs.irqs.iter().filter(|i| i.managed).count();
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!(
                "none of the {} fires on {}",
                count(n as u64, "kernel-managed IRQ", "kernel-managed IRQs"),
                t.cpus.named()
            ),
            why,
        )
        .as_vec();
    }
    let has_flag = m
        .kernel
        .boot
        .isolcpus
        .as_ref()
        .is_some_and(|i| i.has("managed_irq") && t.cpus.is_subset(&i.cpus));
    let cpus_hit = on
        .iter()
        .filter_map(|i| i.fires_on())
        .fold(CpuList::new(), |a, b| a.union(b))
        .intersection(&t.cpus);
    let source = if on
        .iter()
        .all(|i| i.managed_source == tame_host::irq::ManagedSource::Debugfs)
    {
        ""
    } else {
        " (managed inferred from the queue name; debugfs irq/ not readable)"
    };
    let finding = Finding::new(
        id,
        C,
        Severity::Fail,
        format!(
            "{} on {}: {}{source}",
            count(
                on.len() as u64,
                "kernel-managed IRQ fires",
                "kernel-managed IRQs fire"
            ),
            cpus_hit.named(),
            describe(&on)
        ),
        why,
    );
    if has_flag {
        // The kernel could not avoid these CPUs (e.g. one queue per CPU).
        return finding
            .fix(format!(
                "isolcpus=managed_irq is set but the device has a queue for every CPU; keep I/O off {} or pick other CPUs", cpus_hit.named()
            ))
            .as_vec();
    }
    let free = t.cpus.difference(&cpus_hit);
    let alt = if free.is_empty() {
        String::new()
    } else {
        format!(", or check only {}", free.named())
    };
    finding
        .housekeeping_fix(t, true, |_| {
            format!("boot with isolcpus=managed_irq,domain,{}{alt}", t.cpus)
        })
        .as_vec()
}

pub fn default_affinity(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "irqs.default_affinity";
    let why = "New IRQs (a hot-plugged device, a restarted driver) start with the default affinity, so it decides where future interrupts land.";
    let Some(def) = &m.irqs.default_affinity else {
        return Vec::new();
    };
    let overlap = def.intersection(&t.cpus);
    if overlap.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("default IRQ affinity {def} avoids {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("default IRQ affinity {def} includes {}", overlap.named()),
        why,
    )
    .housekeeping_fix(t, false, |hk| {
        format!(
            "echo {} > /proc/irq/default_smp_affinity; at boot: irqaffinity={hk}",
            hk.to_mask(m.cpus.possible.len() as u32)
        )
    })
    .as_vec()
}
