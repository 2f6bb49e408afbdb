//! One recommended layout when the spec's isolated CPUs carry what the planner warns
//! about (a kernel-managed IRQ, CPU 0's housekeeping). Isolated CPUs are swapped for
//! system CPUs that carry less; when no swap helps, the spec's own layout is said to be
//! the least bad. So a user whose every choice warns gets one answer, with why, instead
//! of a warning for each choice.
//!
//! Only CPUs of the system and isolated partitions are swapped (a shared pool keeps its
//! CPUs), in units of the SMT siblings a partition holds together, so a swap never
//! splits a core the spec kept whole.

use std::collections::BTreeMap;

use serde::Serialize;
use tame_host::{CpuList, HostModel};

use crate::spec::{Role, Spec};

/// What a CPU carries that disturbs work isolated on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Burden {
    /// Kernel-managed IRQs fire there; they cannot leave at run time.
    ManagedIrqs { irqs: Vec<String> },
    /// CPU 0: housekeeping the kernel cannot move.
    BootCpu,
}

impl Burden {
    /// How bad it is for isolated work. A managed IRQ fires whenever its device is busy,
    /// whatever apply does; CPU 0's housekeeping is lighter (most of its IRQs move, and
    /// timekeeping passes to another CPU under nohz).
    pub fn weight(&self) -> u32 {
        match self {
            Burden::ManagedIrqs { .. } => 4,
            Burden::BootCpu => 2,
        }
    }

    fn describe(&self) -> String {
        match self {
            Burden::ManagedIrqs { irqs } => format!(
                "kernel-managed {} {} there and cannot leave at run time: {} would keep interrupting isolated work",
                list_some(irqs, 4),
                if irqs.len() == 1 { "fires" } else { "fire" },
                if irqs.len() == 1 { "it" } else { "they" },
            ),
            Burden::BootCpu => {
                "housekeeping the kernel cannot move (boot CPU timers, some IRQs)".to_string()
            }
        }
    }
}

/// The first `n` names, then how many more.
fn list_some(names: &[String], n: usize) -> String {
    if names.len() <= n {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..n].join(", "), names.len() - n)
    }
}

/// What `cpu` carries, worst first.
pub fn burdens(host: &HostModel, cpu: u32) -> Vec<Burden> {
    burdens_of(host, &CpuList::from_cpus([cpu]))
        .remove(&cpu)
        .unwrap_or_default()
}

/// What each of `cpus` carries (those that carry nothing are left out), reading the
/// IRQs once.
fn burdens_of(host: &HostModel, cpus: &CpuList) -> BTreeMap<u32, Vec<Burden>> {
    let mut managed: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in host.irqs.irqs.iter().filter(|i| i.managed) {
        for cpu in i
            .fires_on()
            .map(|c| c.intersection(cpus))
            .unwrap_or_default()
            .iter()
        {
            managed
                .entry(cpu)
                .or_default()
                .push(format!("IRQ {} ({})", i.number, i.name));
        }
    }
    let mut out: BTreeMap<u32, Vec<Burden>> = managed
        .into_iter()
        .map(|(cpu, irqs)| (cpu, vec![Burden::ManagedIrqs { irqs }]))
        .collect();
    if cpus.contains(0) {
        out.entry(0).or_default().push(Burden::BootCpu);
    }
    out
}

/// The kernel-managed IRQs that fire on `isolated` and that `isolcpus=managed_irq` would
/// leave there: the kernel steers a managed IRQ only onto an online housekeeping CPU of
/// its own affinity, so one whose affinity holds none (a per-CPU queue) stays. An
/// unreadable affinity counts as staying: nothing shows it would leave.
fn managed_irqs_that_stay(host: &HostModel, isolated: &CpuList) -> Vec<String> {
    host.irqs
        .irqs
        .iter()
        .filter(|i| i.managed)
        .filter(|i| {
            i.fires_on()
                .is_some_and(|c| !c.intersection(isolated).is_empty())
        })
        .filter(|i| {
            i.affinity.as_ref().is_none_or(|a| {
                a.difference(isolated)
                    .intersection(&host.cpus.online)
                    .is_empty()
            })
        })
        .map(|i| format!("IRQ {} ({})", i.number, i.name))
        .collect()
}

/// A partition whose CPUs the recommendation changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub partition: String,
    pub cpus: CpuList,
    /// What the spec gives it.
    pub spec_cpus: CpuList,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    /// The spec's own layout is the least bad: keep it.
    pub keep: bool,
    /// Every choice of as many isolated CPUs (among the system and isolated
    /// partitions' CPUs) warns on this host.
    pub every_choice_warns: bool,
    /// How many CPUs are isolated.
    pub isolated: usize,
    /// The partitions whose CPUs change (empty when `keep`).
    pub changes: Vec<Change>,
    /// Why, one line per kind of burden and where its CPUs go.
    pub why: Vec<String>,
    /// What a layout without these warnings takes (a reboot), when anything can.
    pub without_warnings: Option<String>,
}

/// Partition CPUs under consideration, and the weight function used.
struct Layout<'a> {
    host: &'a HostModel,
    /// Each partition's CPUs, in spec order.
    cpus: Vec<CpuList>,
    isolated: Vec<usize>,
    system: usize,
}

impl Layout<'_> {
    /// The CPUs of `cpus` that share a core with `cpu` (itself included).
    fn unit(&self, cpu: u32, cpus: &CpuList) -> CpuList {
        let core = self
            .host
            .cpus
            .cpu(cpu)
            .map(|c| c.thread_siblings.intersection(cpus))
            .unwrap_or_default();
        if core.contains(cpu) {
            core
        } else {
            CpuList::from_cpus([cpu])
        }
    }

    /// Each partition's units (cores, or single CPUs), once each.
    fn units(&self, part: usize) -> Vec<CpuList> {
        let cpus = &self.cpus[part];
        let mut units: Vec<CpuList> = Vec::new();
        // The CPUs of the units so far (one lookup per CPU, not one per unit).
        let mut covered = CpuList::new();
        for cpu in cpus.iter() {
            if !covered.contains(cpu) {
                let unit = self.unit(cpu, cpus);
                covered = covered.union(&unit);
                units.push(unit);
            }
        }
        units
    }

    /// One swap that lowers the isolated weight most (ties: the highest system CPUs,
    /// keeping low CPUs for housekeeping); false when none does.
    fn improve(&mut self, weight: &dyn Fn(u32) -> u32) -> bool {
        let w = |u: &CpuList| u.iter().map(weight).sum::<u32>();
        let mut best: Option<(u32, u32, usize, CpuList, CpuList)> = None;
        // Each system unit weighed once, not once for every isolated unit.
        let system_units: Vec<(CpuList, u32)> = self
            .units(self.system)
            .into_iter()
            .map(|v| {
                let wv = w(&v);
                (v, wv)
            })
            .collect();
        for &part in &self.isolated {
            for u in self.units(part) {
                let wu = w(&u);
                for (v, wv) in system_units.iter().filter(|(v, _)| v.len() == u.len()) {
                    let wv = *wv;
                    if wv >= wu {
                        continue;
                    }
                    let key = (wu - wv, v.first().unwrap_or(0));
                    if best.as_ref().is_none_or(|b| key > (b.0, b.1)) {
                        best = Some((key.0, key.1, part, u.clone(), v.clone()));
                    }
                }
            }
        }
        let Some((_, _, part, u, v)) = best else {
            return false;
        };
        self.cpus[part] = self.cpus[part].difference(&u).union(&v);
        self.cpus[self.system] = self.cpus[self.system].difference(&v).union(&u);
        true
    }

    fn isolated_cpus(&self) -> CpuList {
        self.isolated
            .iter()
            .fold(CpuList::new(), |a, &i| a.union(&self.cpus[i]))
    }

    /// Swap until no swap helps.
    fn settle(&mut self, weight: &dyn Fn(u32) -> u32) {
        // Each swap lowers the isolated weight by at least one, so this ends; the bound
        // only guards the reasoning.
        let total: u32 = self.isolated_cpus().iter().map(weight).sum();
        for _ in 0..=total {
            if !self.improve(weight) {
                break;
            }
        }
    }
}

/// The recommendation for `spec` on `host`: `None` when its isolated CPUs carry nothing
/// the planner warns about (or it has no system or isolated partition).
pub fn recommend(spec: &Spec, host: &HostModel) -> Option<Recommendation> {
    let system = spec
        .partitions
        .iter()
        .position(|p| p.role == Role::System)?;
    let isolated: Vec<usize> = (0..spec.partitions.len())
        .filter(|&i| spec.partitions[i].role == Role::Isolated)
        .collect();
    let all = spec
        .partitions
        .iter()
        .fold(CpuList::new(), |a, p| a.union(&p.cpus));
    let burdens = burdens_of(host, &all);
    let sum = |cpu: u32, keep: fn(&Burden) -> bool| {
        burdens.get(&cpu).map_or(0, |b| {
            b.iter()
                .filter(|b| keep(b))
                .map(Burden::weight)
                .sum::<u32>()
        })
    };
    let weight = |cpu: u32| sum(cpu, |_| true);
    let spec_isolated = spec.isolated_cpus();
    if spec_isolated.iter().all(|c| weight(c) == 0) {
        return None;
    }
    let mut best = Layout {
        host,
        cpus: spec.partitions.iter().map(|p| p.cpus.clone()).collect(),
        isolated,
        system,
    };
    best.settle(&weight);
    let chosen = best.isolated_cpus();
    let every_choice_warns = chosen.iter().any(|c| weight(c) > 0);
    let changes: Vec<Change> = spec
        .partitions
        .iter()
        .zip(&best.cpus)
        .filter(|(p, cpus)| &p.cpus != *cpus)
        .map(|(p, cpus)| Change {
            partition: p.name.clone(),
            cpus: cpus.clone(),
            spec_cpus: p.cpus.clone(),
        })
        .collect();
    // Without the managed IRQs (what isolcpus=managed_irq at boot takes away), which CPUs
    // would be best: the ones to name at boot.
    let without_managed = |cpu: u32| sum(cpu, |b| !matches!(b, Burden::ManagedIrqs { .. }));
    let mut rebooted = Layout {
        cpus: spec.partitions.iter().map(|p| p.cpus.clone()).collect(),
        isolated: best.isolated.clone(),
        host,
        system,
    };
    rebooted.settle(&without_managed);
    let clean = rebooted.isolated_cpus();
    let needs_boot = clean.iter().any(|c| weight(c) > without_managed(c));
    let without_warnings = (every_choice_warns
        && needs_boot
        && clean.iter().all(|c| without_managed(c) == 0))
    .then(|| {
        let stay = managed_irqs_that_stay(host, &clean);
        let keeps = if stay.is_empty() {
            format!("it keeps kernel-managed IRQs off CPU {clean}")
        } else {
            format!(
                "it keeps kernel-managed IRQs off CPU {clean} unless a queue serves only CPUs there: {} would stay",
                list_some(&stay, 4)
            )
        };
        format!("boot with isolcpus=managed_irq,domain,{clean} ({keeps}), then isolate CPU {clean}")
    });
    Some(Recommendation {
        keep: changes.is_empty(),
        every_choice_warns,
        isolated: chosen.len(),
        changes,
        why: why(
            &burdens,
            &chosen,
            &spec.isolated_cpus().union(&spec.cpus_of(Role::System)),
        ),
        without_warnings,
    })
}

/// One line per kind of burden and where its CPUs go, worst first.
fn why(burdens: &BTreeMap<u32, Vec<Burden>>, isolated: &CpuList, pool: &CpuList) -> Vec<String> {
    // (weight, isolated?, kind) → CPUs and the burden of the first one (its IRQ names).
    let mut groups: Vec<(u32, bool, CpuList, Vec<Burden>)> = Vec::new();
    for cpu in pool.iter() {
        let Some(b) = burdens.get(&cpu).cloned() else {
            continue;
        };
        let weight = b.iter().map(Burden::weight).sum();
        let here = isolated.contains(cpu);
        let kinds = |x: &[Burden]| x.iter().map(Burden::weight).collect::<Vec<_>>();
        match groups
            .iter_mut()
            .find(|g| g.0 == weight && g.1 == here && kinds(&g.3) == kinds(&b))
        {
            Some(g) => {
                g.2.insert(cpu);
                // Gather every IRQ name of the group.
                for (mine, theirs) in g.3.iter_mut().zip(&b) {
                    if let (
                        Burden::ManagedIrqs { irqs: mine },
                        Burden::ManagedIrqs { irqs: theirs },
                    ) = (mine, theirs)
                    {
                        for i in theirs {
                            if !mine.contains(i) {
                                mine.push(i.clone());
                            }
                        }
                    }
                }
            }
            None => groups.push((weight, here, CpuList::from_cpus([cpu]), b)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.0));
    let has = |f: fn(&Burden) -> bool| groups.iter().any(|g| g.3.iter().any(f));
    let ranking = (has(|b| matches!(b, Burden::ManagedIrqs { .. })) && has(|b| *b == Burden::BootCpu))
        .then(|| {
            "a kernel-managed IRQ weighs more than CPU 0's housekeeping: it fires whenever its device is busy, while most of CPU 0's IRQs move and its timekeeping can pass to another CPU".to_string()
        });
    groups
        .into_iter()
        .map(|(_, here, cpus, burdens)| {
            let what: Vec<String> = burdens.iter().map(Burden::describe).collect();
            format!(
                "CPU {cpus} → {}: {}",
                if here { "isolated" } else { "system" },
                what.join("; and ")
            )
        })
        .chain(ranking)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_names_in_full_many_counted() {
        let names: Vec<String> = (1..=6).map(|i| format!("IRQ {i}")).collect();
        assert_eq!(list_some(&names[..2], 4), "IRQ 1, IRQ 2");
        assert_eq!(
            list_some(&names, 4),
            "IRQ 1, IRQ 2, IRQ 3, IRQ 4 and 2 more"
        );
    }
}
