//! How each CPU ranks for isolation: boot isolation, the planner's penalties, and the
//! sampled rates, each only where it differs meaningfully.

use super::*;

/// The kernel-managed IRQs that fire on `cpu`: they cannot leave it at run time.
pub(super) fn managed_irqs(model: &HostModel, cpu: u32) -> Vec<String> {
    model
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed && i.fires_on().is_some_and(|c| c.contains(cpu)))
        .map(|i| format!("IRQ {} ({})", i.number, i.name))
        .collect()
}

/// How poor a choice `cpu` is to isolate: a kernel-managed IRQ there would keep
/// interrupting the work (worst), CPU 0 carries housekeeping the kernel cannot move.
pub(super) fn penalty(model: &HostModel, cpu: u32) -> u32 {
    let managed = if managed_irqs(model, cpu).is_empty() {
        0
    } else {
        4
    };
    managed + if cpu == 0 { 2 } else { 0 }
}

/// Rates under this are never held against a CPU (per second; steal in per mille).
pub(super) const DEVICE_FLOOR: u64 = 50;
pub(super) const TIMER_FLOOR: u64 = 50;
pub(super) const STEAL_FLOOR: u64 = 10;

/// How much busier `rate` is than `base` (the quietest CPU's rate, at least the floor):
/// 0 up to twice `base`, then 1 for up to 4×, 2 for up to 8×, … A 1 s sample's noise
/// (a rate within 2× of the quietest, or under twice the floor) changes nothing.
pub(super) fn band(rate: u64, base: u64) -> u32 {
    let base = base.max(1);
    if rate <= base.saturating_mul(2) {
        0
    } else {
        (rate / base).ilog2()
    }
}

/// How one CPU ranks, compared field by field (lower is better); a domain's cost is the
/// field-wise sum over the CPUs the work would run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Score {
    /// 0: isolated at boot from the scheduler (isolcpus) and the tick (nohz_full); 1: one
    /// of them; 2: neither.
    pub(super) boot: u32,
    /// A kernel-managed IRQ fires there (4), it is CPU 0 (2).
    pub(super) penalty: u32,
    /// The bands ([`band`]) of its sampled steal, device IRQ and timer rates.
    pub(super) steal: u32,
    pub(super) device: u32,
    pub(super) timer: u32,
}

impl Score {
    pub(super) fn add(self, o: Score) -> Score {
        Score {
            boot: self.boot + o.boot,
            penalty: self.penalty + o.penalty,
            steal: self.steal + o.steal,
            device: self.device + o.device,
            timer: self.timer + o.timer,
        }
    }

    /// What was read (not measured).
    pub(super) fn structural(&self) -> (u32, u32) {
        (self.boot, self.penalty)
    }

    pub(super) fn measured(&self) -> (u32, u32, u32) {
        (self.steal, self.device, self.timer)
    }
}

/// The CPUs isolated at boot: from the scheduler (`isolcpus=` with domain, as the kernel
/// lists in /sys/devices/system/cpu/isolated) and from the tick (`nohz_full=`).
pub(super) fn boot_isolated(model: &HostModel) -> (CpuList, CpuList) {
    let boot = &model.kernel.boot;
    let domain = boot
        .isolcpus
        .as_ref()
        .filter(|i| i.has("domain"))
        .map(|i| i.cpus.clone())
        .unwrap_or_default()
        .union(&model.cpus.isolated);
    let nohz = model
        .cpus
        .nohz_full
        .clone()
        .unwrap_or_default()
        .union(&boot.nohz_full.clone().unwrap_or_default());
    let online = &model.cpus.online;
    (domain.intersection(online), nohz.intersection(online))
}

/// Everything the choice compares, worked out once.
pub(super) struct Ranker<'a> {
    pub(super) model: &'a HostModel,
    pub(super) scores: BTreeMap<u32, Score>,
    /// The CPU the system keeps for housekeeping: CPU 0 (the first online one if it is not).
    pub(super) keeper: u32,
}

impl<'a> Ranker<'a> {
    pub(super) fn new(model: &'a HostModel, activity: Option<&CpuActivity>) -> Self {
        let online = &model.cpus.online;
        let (domain, nohz) = boot_isolated(model);
        let rates = |cpu: u32| activity.and_then(|a| a.cpu(cpu));
        let quietest = |f: &dyn Fn(&CpuRates) -> u64| {
            online
                .iter()
                .filter_map(|c| rates(c).map(f))
                .min()
                .unwrap_or(0)
        };
        let steal = |r: &CpuRates| r.steal_permille.unwrap_or(0);
        let device = |r: &CpuRates| r.device_irqs;
        let timer = |r: &CpuRates| r.timer();
        let bases = (
            quietest(&steal).max(STEAL_FLOOR),
            quietest(&device).max(DEVICE_FLOOR),
            quietest(&timer).max(TIMER_FLOOR),
        );
        let scores = online
            .iter()
            .map(|cpu| {
                let measured = rates(cpu).map_or((0, 0, 0), |r| {
                    (
                        band(steal(r), bases.0),
                        band(device(r), bases.1),
                        band(timer(r), bases.2),
                    )
                });
                let score = Score {
                    boot: 2 - u32::from(domain.contains(cpu)) - u32::from(nohz.contains(cpu)),
                    penalty: penalty(model, cpu),
                    steal: measured.0,
                    device: measured.1,
                    timer: measured.2,
                };
                (cpu, score)
            })
            .collect();
        let keeper = if online.contains(0) {
            0
        } else {
            online.first().unwrap_or(0)
        };
        Ranker {
            model,
            scores,
            keeper,
        }
    }

    pub(super) fn score(&self, cpu: u32) -> Score {
        self.scores.get(&cpu).copied().unwrap_or_default()
    }

    pub(super) fn cost(&self, cpus: &CpuList) -> Score {
        cpus.iter()
            .fold(Score::default(), |s, c| s.add(self.score(c)))
    }

    /// `pool`'s CPUs, best first.
    pub(super) fn ranked(&self, pool: &CpuList) -> Vec<u32> {
        let mut cpus: Vec<u32> = pool.iter().collect();
        cpus.sort_by_key(|&c| (self.score(c), Reverse(c)));
        cpus
    }

    /// The online CPUs of `cpu`'s core, itself included.
    pub(super) fn core(&self, cpu: u32) -> CpuList {
        self.model
            .cpus
            .online_siblings(cpu)
            .union(&CpuList::from_cpus([cpu]))
    }
}
