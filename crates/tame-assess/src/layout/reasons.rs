//! Why the chosen CPUs were chosen and the others passed over, one line each.

use super::*;
use tame_rt::plural::word;

/// Why the housekeeping CPU's domain (cost `better`) was preferred to the others' (the
/// best of them cost `worse`), in words: `whose CPUs … than the other {others}'`.
pub(super) fn better_because(worse: Score, better: Score, others: &str) -> String {
    if worse.boot != better.boot {
        format!("whose CPUs were isolated at boot, more of them than the other {others}'")
    } else if worse.penalty != better.penalty {
        format!("whose CPUs carry fewer kernel-managed IRQs than the other {others}'")
    } else {
        format!("whose CPUs were measured less disturbed than the other {others}'")
    }
}

/// Why the CPUs the penalties speak against went where they went.
pub(super) fn penalty_reasons(
    model: &HostModel,
    chosen: &CpuList,
    system: &CpuList,
) -> Vec<String> {
    let with_managed = |cpus: &CpuList| {
        CpuList::from_cpus(cpus.iter().filter(|&c| !managed_irqs(model, c).is_empty()))
    };
    let (kept, isolated) = (with_managed(system), with_managed(chosen));
    let mut reasons = Vec::new();
    // Kept back for its managed IRQs only when the isolated CPUs have none.
    if isolated.is_empty() && !kept.is_empty() {
        reasons.push(if kept.len() == 1 {
            let irqs = managed_irqs(model, kept.first().unwrap_or(0));
            format!(
                "CPU {kept} stays with the system: kernel-managed {} {} there and cannot move at run time",
                irqs.join(", "),
                word(irqs.len() as u64, "fires", "fire")
            )
        } else {
            format!("CPUs {kept} stay with the system: kernel-managed IRQs fire there and cannot move at run time")
        });
    }
    if system.contains(0) {
        reasons.push("CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string());
    }
    if !isolated.is_empty() {
        let irqs = managed_irqs(model, isolated.first().unwrap_or(0));
        let (which, they) = if isolated.len() == 1 {
            (
                format!(
                    "CPU {isolated} is isolated although kernel-managed {} {} there",
                    irqs.join(", "),
                    word(irqs.len() as u64, "fires", "fire")
                ),
                word(irqs.len() as u64, "it", "they"),
            )
        } else {
            (
                format!("CPUs {isolated} are isolated although kernel-managed IRQs fire there"),
                "they",
            )
        };
        reasons.push(format!(
            "{which}: no CPU without one was left, so {they} will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)"
        ));
    }
    if chosen.contains(0) {
        reasons.push("CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string());
    }
    reasons
}

/// What boot isolation did to the choice: said only where the kernel was booted with it.
pub(super) fn boot_reasons(model: &HostModel, work: &CpuList, count: u32) -> Vec<String> {
    let (domain, nohz) = boot_isolated(model);
    let boot = domain.union(&nohz);
    if boot.is_empty() {
        return Vec::new();
    }
    let params: Vec<String> = ["isolcpus", "nohz_full"]
        .iter()
        .filter_map(|k| model.kernel.cmdline.get(k).map(|v| format!("{k}={v}")))
        .collect();
    let params = if params.is_empty() {
        format!("{} lists {domain}", tame_host::cpu::ISOLATED_CPUS)
    } else {
        params.join(" ")
    };
    let outside = work.difference(&boot);
    if outside.is_empty() {
        vec![format!(
            "Boot: the work runs on {}, isolated at boot ({params}): the kernel keeps its own tasks{} off them, which a partition made at run time cannot",
            work.named(),
            if nohz.is_empty() { "" } else { " and, while one task runs, the tick" }
        )]
    } else {
        vec![format!(
            "Boot: {} {} isolated at boot ({params}), but --cpus {count} needs more: the work also runs on {outside}, where kernel tasks and the tick still come",
            boot.named(),
            word(boot.len() as u64, "was", "were")
        )]
    }
}

/// What isolating the partition does to SMT cores.
pub(super) fn smt_reasons(
    model: &HostModel,
    p: &Picked,
    count: u32,
    mode: Mode,
    fell_back: bool,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if mode == Mode::WholeCores {
        let idle = p.isolated.difference(&p.work);
        if idle.is_empty() {
            return reasons;
        }
        let holders = CpuList::from_cpus(
            p.work
                .iter()
                .filter(|&c| !model.cpus.online_siblings(c).is_empty()),
        );
        reasons.push(if idle.len() == 1 && holders.len() == 1 {
            format!("SMT: sibling {idle} of CPU {holders} is in the partition and left idle, so no load shares the core (--share-core gives it back to the system)")
        } else {
            format!("SMT: siblings {idle} of CPUs {holders} are in the partition and left idle, so no load shares their cores (--share-core gives them back to the system)")
        });
        return reasons;
    }
    let chosen = &p.isolated;
    let mut split = CpuList::new();
    let mut left = CpuList::new();
    let mut whole = CpuList::new();
    for cpu in chosen.iter() {
        let siblings = model.cpus.online_siblings(cpu);
        if siblings.is_empty() {
            continue;
        }
        let outside = siblings.difference(chosen);
        if outside.is_empty() {
            whole.insert(cpu);
        } else {
            split.insert(cpu);
            left = left.union(&outside);
        }
    }
    if !split.is_empty() {
        reasons.push(if fell_back {
            format!(
                "SMT: the {} {left} of isolated {} {} with the system: whole cores for --cpus {count} (siblings left idle) would leave the system no CPU, so system work on {left} shares the core (execution units, L1/L2 caches) with the work",
                word(left.len() as u64, "sibling", "siblings"),
                split.named(),
                word(left.len() as u64, "stays", "stay")
            )
        } else {
            format!(
                "SMT: the {} {left} of isolated {} {} with the system (--share-core): system work on {left} shares the core (execution units, L1/L2 caches) with the work — without --share-core the partition takes whole cores and leaves the siblings idle",
                word(left.len() as u64, "sibling", "siblings"),
                split.named(),
                word(left.len() as u64, "stays", "stay")
            )
        });
    }
    if !whole.is_empty() {
        let why = if fell_back {
            format!(
                " (whole cores with idle siblings for --cpus {count} would leave the system no CPU)"
            )
        } else {
            String::new()
        };
        reasons.push(format!(
            "SMT: CPUs {whole} are whole cores (siblings isolated together), so no system work shares their cores; siblings still compete with each other{why} — one real-time thread per core, its sibling left idle, interferes least"
        ));
    }
    reasons
}

/// A steal share in per mille, as a percentage with one decimal.
pub(super) fn percent(permille: u64) -> String {
    format!("{}.{} %", permille / 10, permille % 10)
}

/// What the sample measured, and which CPUs it alone kept out (the strongest alternatives:
/// as good as the chosen by what was read, worse by what was measured).
pub(super) fn rate_reasons(r: &Ranker, activity: Option<&CpuActivity>, p: &Picked) -> Vec<String> {
    let Some(a) = activity else {
        return vec!["Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string()];
    };
    let work: Vec<&CpuRates> = p.work.iter().filter_map(|c| a.cpu(c)).collect();
    let max = |f: &dyn Fn(&CpuRates) -> u64| work.iter().map(|c| f(c)).max().unwrap_or(0);
    let mut reasons = vec![format!(
        "Rates over {} ms on the work's {}: at most {} device IRQs/s, {} timer events/s (local timer and timer softirqs), {} of the time stolen",
        a.interval_ms,
        p.work.named(),
        max(&|c| c.device_irqs),
        max(&|c| c.timer()),
        percent(max(&|c| c.steal_permille.unwrap_or(0))),
    )];
    let worst = p.work.iter().map(|c| r.score(c)).max().unwrap_or_default();
    let online = &r.model.cpus.online;
    let passed: Vec<u32> = r
        .ranked(&online.difference(&p.isolated))
        .into_iter()
        .filter(|&c| {
            let s = r.score(c);
            s.structural() <= worst.structural() && s.measured() > worst.measured()
        })
        .take(3)
        .collect();
    for cpu in passed {
        let (Some(rates), s) = (a.cpu(cpu), r.score(cpu)) else {
            continue;
        };
        let mut what = Vec::new();
        if s.steal > 0 {
            what.push(format!(
                "{} of its time stolen",
                percent(rates.steal_permille.unwrap_or(0))
            ));
        }
        if s.device > 0 {
            let busiest = rates
                .busiest_irq
                .as_ref()
                .map(|b| format!(" (most from IRQ {} {}, {}/s)", b.number, b.name, b.per_s))
                .unwrap_or_default();
            what.push(format!("{} device IRQs/s{busiest}", rates.device_irqs));
        }
        if s.timer > 0 {
            what.push(format!("{} timer events/s", rates.timer()));
        }
        reasons.push(format!(
            "Rates: CPU {cpu} was passed over for {}, over twice the quietest CPU's",
            what.join(" and ")
        ));
    }
    reasons
}
