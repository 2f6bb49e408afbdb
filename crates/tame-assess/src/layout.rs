//! Which CPUs to isolate, and the partition spec that does it. The choice ranks each CPU
//! by what tame reads and measures, in this order (lower first; see [`Score`]):
//!
//! 1. isolated at boot (`isolcpus=` domain, `nohz_full=`): the kernel already keeps its own
//!    work and the tick off those CPUs;
//! 2. the planner's structural penalties: a kernel-managed IRQ cannot leave its CPU at run
//!    time (it would keep interrupting the work), CPU 0 carries housekeeping the kernel
//!    cannot move;
//! 3. what a short sample measured ([`CpuActivity`]): stolen time, device IRQs, timer
//!    events — each counted only where it is over twice the quietest CPU's rate and over a
//!    floor, so the noise of a 1 s sample does not reorder CPUs;
//! 4. the highest CPU number (low CPUs stay for housekeeping).
//!
//! Then placement: one NUMA node where the CPUs fit, one last-level cache within it, and
//! whole SMT cores: the work runs on one thread of each core, its siblings join the
//! partition idle (unless `share_core`).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tame_host::activity::{CpuActivity, CpuRates};
use tame_host::{CpuList, HostModel};
use tame_partition::{PartitionSpec, Role, Spec};

use crate::error::{invalid, AssessError};

/// The name of the isolated partition assess generates.
pub const PARTITION: &str = "rt";
/// First line of every spec text assess applies: `tame status` shows it, and the next
/// assess knows a journal it finds is its own (left by a killed run) and reverts it.
pub const MARKER: &str = "# applied by tame assess";

/// The partitions to measure in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// The isolated partition measured in, and its CPUs (all of them, idle SMT siblings too).
    pub partition: String,
    pub isolated: CpuList,
    /// The CPUs of the partition the work and the measurement run on: `isolated` less the
    /// SMT siblings left idle. Empty in reports written before it existed: read it with
    /// [`Layout::work`].
    #[serde(default)]
    pub work_cpus: CpuList,
    /// Where the system (and the load) runs.
    pub system: CpuList,
    /// Why these CPUs, one line each.
    pub reasons: Vec<String>,
    /// The spec text (without the marker line).
    pub spec_text: String,
    /// What the planner warns about this spec.
    pub warnings: Vec<String>,
    /// The spec itself, typed: what is applied (`spec_text` is its text).
    #[serde(skip)]
    pub spec: Spec,
}

impl Layout {
    /// Where the work runs (`isolated` where a report predates `work_cpus`).
    pub fn work(&self) -> &CpuList {
        if self.work_cpus.is_empty() {
            &self.isolated
        } else {
            &self.work_cpus
        }
    }
}

/// What `choose` is asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Choice<'a> {
    /// How many CPUs the work runs on (`--cpus`).
    pub count: u32,
    /// Let the work's CPUs share cores: SMT siblings may be split between the partitions
    /// or both used by the work (`--share-core`). Without it the partition takes whole
    /// cores and leaves the siblings of the work's CPUs idle.
    pub share_core: bool,
    /// Per-CPU rates sampled just before (assess samples 1 s); None: not sampled.
    pub activity: Option<&'a CpuActivity>,
}

/// The cpuidle driver, if there is one (the kernel prints `none` when there is not): without
/// one, idle is the architecture's halt and `idle = "poll"` changes nothing.
pub fn cpuidle_driver(model: &HostModel) -> Option<String> {
    model
        .power
        .cpuidle_driver
        .clone()
        .filter(|d| !d.is_empty() && d != "none")
}

/// The kernel-managed IRQs that fire on `cpu`: they cannot leave it at run time.
fn managed_irqs(model: &HostModel, cpu: u32) -> Vec<String> {
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
fn penalty(model: &HostModel, cpu: u32) -> u32 {
    let managed = if managed_irqs(model, cpu).is_empty() {
        0
    } else {
        4
    };
    managed + if cpu == 0 { 2 } else { 0 }
}

/// Rates under this are never held against a CPU (per second; steal in per mille).
const DEVICE_FLOOR: u64 = 50;
const TIMER_FLOOR: u64 = 50;
const STEAL_FLOOR: u64 = 10;

/// How much busier `rate` is than `base` (the quietest CPU's rate, at least the floor):
/// 0 up to twice `base`, then 1 for up to 4×, 2 for up to 8×, … A 1 s sample's noise
/// (a rate within 2× of the quietest, or under twice the floor) changes nothing.
fn band(rate: u64, base: u64) -> u32 {
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
struct Score {
    /// 0: isolated at boot from the scheduler (isolcpus) and the tick (nohz_full); 1: one
    /// of them; 2: neither.
    boot: u32,
    /// A kernel-managed IRQ fires there (4), it is CPU 0 (2).
    penalty: u32,
    /// The bands ([`band`]) of its sampled steal, device IRQ and timer rates.
    steal: u32,
    device: u32,
    timer: u32,
}

impl Score {
    fn add(self, o: Score) -> Score {
        Score {
            boot: self.boot + o.boot,
            penalty: self.penalty + o.penalty,
            steal: self.steal + o.steal,
            device: self.device + o.device,
            timer: self.timer + o.timer,
        }
    }

    /// What was read (not measured).
    fn structural(&self) -> (u32, u32) {
        (self.boot, self.penalty)
    }

    fn measured(&self) -> (u32, u32, u32) {
        (self.steal, self.device, self.timer)
    }
}

/// The CPUs isolated at boot: from the scheduler (`isolcpus=` with domain, as the kernel
/// lists in /sys/devices/system/cpu/isolated) and from the tick (`nohz_full=`).
fn boot_isolated(model: &HostModel) -> (CpuList, CpuList) {
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
struct Ranker<'a> {
    model: &'a HostModel,
    scores: BTreeMap<u32, Score>,
    /// The CPU the system keeps for housekeeping: CPU 0 (the first online one if it is not).
    keeper: u32,
}

impl<'a> Ranker<'a> {
    fn new(model: &'a HostModel, activity: Option<&CpuActivity>) -> Self {
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

    fn score(&self, cpu: u32) -> Score {
        self.scores.get(&cpu).copied().unwrap_or_default()
    }

    fn cost(&self, cpus: &CpuList) -> Score {
        cpus.iter()
            .fold(Score::default(), |s, c| s.add(self.score(c)))
    }

    /// `pool`'s CPUs, best first.
    fn ranked(&self, pool: &CpuList) -> Vec<u32> {
        let mut cpus: Vec<u32> = pool.iter().collect();
        cpus.sort_by_key(|&c| (self.score(c), Reverse(c)));
        cpus
    }

    /// The online CPUs of `cpu`'s core, itself included.
    fn core(&self, cpu: u32) -> CpuList {
        self.model
            .cpus
            .online_siblings(cpu)
            .union(&CpuList::from_cpus([cpu]))
    }
}

/// How the partition treats SMT cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A whole core per work CPU, its siblings idle in the partition.
    WholeCores,
    /// CPUs as asked; siblings may be split or both used (`--share-core`).
    Share,
}

/// CPUs picked for the partition.
#[derive(Clone, Debug, Default, PartialEq)]
struct Picked {
    isolated: CpuList,
    work: CpuList,
}

/// How many work CPUs `pool` can give: its whole cores, or its CPUs.
fn room(r: &Ranker, pool: &CpuList, mode: Mode) -> usize {
    match mode {
        Mode::Share => pool.len(),
        Mode::WholeCores => {
            let mut seen = CpuList::new();
            let mut n = 0;
            for cpu in pool.iter() {
                if seen.contains(cpu) {
                    continue;
                }
                let core = r.core(cpu);
                seen = seen.union(&core);
                n += usize::from(core.is_subset(pool));
            }
            n
        }
    }
}

/// The `count` best work CPUs of `pool`, the least disturbed first (then the highest), at
/// most `limit` CPUs in the partition. Whole cores: each work CPU brings its core, which
/// must lie in `pool`. Share: a CPU's whole core where it still fits the count, and the
/// work runs on all of them. None: `pool` has not room enough.
fn pick(r: &Ranker, pool: &CpuList, count: usize, mode: Mode, limit: usize) -> Option<Picked> {
    let mut p = Picked::default();
    for cpu in r.ranked(pool) {
        if p.work.len() >= count {
            break;
        }
        if p.isolated.contains(cpu) {
            continue;
        }
        let core = r.core(cpu).intersection(pool);
        match mode {
            Mode::WholeCores => {
                if core != r.core(cpu) || p.isolated.len() + core.len() > limit {
                    continue;
                }
                p.isolated = p.isolated.union(&core);
                p.work.insert(cpu);
            }
            Mode::Share => {
                let with_core = p.isolated.union(&core);
                p.isolated = if with_core.len() <= count {
                    with_core
                } else {
                    p.isolated.union(&CpuList::from_cpus([cpu]))
                };
                p.work = p.isolated.clone();
            }
        }
    }
    (p.work.len() == count && p.isolated.len() <= limit).then_some(p)
}

/// Pick in one last-level cache of `pool` where the machine has several there and one has
/// room (the partition's CPUs then share it and no other), preferring one the housekeeping
/// CPU does not use; with why. Else pick in all of `pool`.
fn pick_in_cache(
    r: &Ranker,
    pool: &CpuList,
    count: usize,
    mode: Mode,
    limit: usize,
) -> Option<(Picked, Vec<String>)> {
    let mut caches: Vec<(u8, CpuList)> = Vec::new();
    for cpu in pool.iter() {
        let Some(llc) = r.model.cpus.last_level_cache(cpu) else {
            return pick(r, pool, count, mode, limit).map(|p| (p, Vec::new()));
        };
        if !caches.iter().any(|(_, c)| *c == llc.cpus) {
            caches.push((llc.level, llc.cpus.clone()));
        }
    }
    if caches.len() < 2 {
        return pick(r, pool, count, mode, limit).map(|p| (p, Vec::new()));
    }
    let keeper = r.keeper;
    let best = caches
        .iter()
        .filter_map(|(level, cpus)| {
            let spare = cpus.intersection(pool);
            let p = pick(r, &spare, count, mode, limit)?;
            Some((*level, cpus, r.cost(&p.work), p))
        })
        .min_by_key(|(_, cpus, cost, p)| {
            (
                *cost,
                cpus.contains(keeper),
                Reverse(room(r, &cpus.intersection(pool), mode)),
                p.work.first(),
            )
        });
    let Some((level, cpus, cost, p)) = best else {
        let p = pick(r, pool, count, mode, limit)?;
        let most = caches
            .iter()
            .map(|(_, c)| room(r, &c.intersection(pool), mode))
            .max()
            .unwrap_or(0);
        return Some((p, vec![format!(
            "LLC: --cpus {count} does not fit one last-level cache (the roomiest has room for {most}): the partition spans {} caches, so the work competes with the other caches' traffic for memory bandwidth and sees another cache's lines only through the slower interconnect — ask for at most {most} to keep it in one",
            caches.len()
        )]));
    };
    let keeper_cache = caches.iter().find(|(_, c)| c.contains(keeper));
    let why = match keeper_cache {
        Some((_, k)) if !cpus.contains(keeper) => {
            format!("the one of CPU {keeper} (CPUs {k}) stays with the housekeeping")
        }
        Some(_) => {
            let others_fit = caches
                .iter()
                .filter(|(_, c)| !c.contains(keeper))
                .filter_map(|(_, c)| pick(r, &c.intersection(pool), count, mode, limit))
                .map(|p| r.cost(&p.work))
                .min();
            match others_fit {
                Some(other) if other > cost => format!(
                    "the one of CPU {keeper}, {}",
                    better_because(other, cost, "caches")
                ),
                _ => format!("the one of CPU {keeper}, as no other has room"),
            }
        }
        None => String::new(),
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!("; {why}")
    };
    Some((
        p.clone(),
        vec![format!(
            "LLC: the partition's {} CPU(s) share one L{level} cache (CPUs {cpus}) of the {} here, so no other cache's traffic evicts the work's lines{why}",
            p.isolated.len(),
            caches.len()
        )],
    ))
}

/// Why the housekeeping CPU's domain (cost `better`) was preferred to the others' (the
/// best of them cost `worse`), in words: `whose CPUs … than the other {others}'`.
fn better_because(worse: Score, better: Score, others: &str) -> String {
    if worse.boot != better.boot {
        format!("whose CPUs were isolated at boot, more of them than the other {others}'")
    } else if worse.penalty != better.penalty {
        format!("whose CPUs carry fewer kernel-managed IRQs than the other {others}'")
    } else {
        format!("whose CPUs were measured less disturbed than the other {others}'")
    }
}

/// A NUMA node the partition fits: its CPUs, how many work CPUs it has room for, what
/// would be picked there, with why (its caches) and at what cost.
struct NodeFit<'a> {
    id: u32,
    cpus: &'a CpuList,
    room: usize,
    picked: Picked,
    llc: Vec<String>,
    cost: Score,
}

/// Where the isolated CPUs go, with why when the machine has more than one NUMA node:
/// all on one node where they fit (memory and last-level cache shared, nothing remote),
/// preferring a node other than the housekeeping CPU's; else spread, most room first.
/// None: the CPUs do not fit the machine in this mode.
fn place(r: &Ranker, count: usize, mode: Mode) -> Option<(Picked, Vec<String>)> {
    let model = r.model;
    let online = &model.cpus.online;
    let limit = online.len().saturating_sub(1);
    let nodes = nodes(model);
    if nodes.len() < 2 {
        return pick_in_cache(r, online, count, mode, limit);
    }
    let keeper = r.keeper;
    let keep = CpuList::from_cpus([keeper]);
    let home = nodes
        .iter()
        .find(|(_, cpus)| cpus.contains(keeper))
        .map(|(id, _)| *id);
    // Each node: its id, its online CPUs, and those it can give (the keeper stays).
    let free: Vec<(u32, &CpuList, CpuList)> = nodes
        .iter()
        .map(|(id, cpus)| (*id, cpus, cpus.difference(&keep)))
        .collect();
    let fits: Vec<NodeFit> = free
        .iter()
        .filter_map(|(id, cpus, spare)| {
            let (picked, llc) = pick_in_cache(r, spare, count, mode, limit)?;
            Some(NodeFit {
                id: *id,
                cpus,
                room: room(r, spare, mode),
                cost: r.cost(&picked.work),
                picked,
                llc,
            })
        })
        .collect();
    let best = fits
        .iter()
        .min_by_key(|f| (f.cost, Some(f.id) == home, Reverse(f.room), f.id));
    if let Some(NodeFit {
        id,
        cpus: node_cpus,
        picked: chosen,
        llc,
        cost,
        ..
    }) = best
    {
        let why = if Some(*id) != home {
            match home {
                Some(h) => format!("node {h} keeps CPU {keeper} and the housekeeping"),
                None => format!("CPU {keeper} stays with the system for housekeeping"),
            }
        } else {
            let other = fits
                .iter()
                .filter(|f| Some(f.id) != home)
                .map(|f| f.cost)
                .min();
            match other {
                Some(other) if other > *cost => format!(
                    "the node of CPU {keeper}, {}",
                    better_because(other, *cost, "nodes")
                ),
                _ => format!("the node of CPU {keeper}, as no other node has {count} CPU(s)"),
            }
        };
        let shared = if llc.is_empty() {
            "they share its last-level cache and "
        } else {
            ""
        };
        let mut reasons = vec![format!(
            "NUMA: all {} isolated CPU(s) on node {id} (CPUs {node_cpus}), so {shared}the partition's memory is bound to it (mems); {why}",
            chosen.isolated.len()
        )];
        reasons.extend(llc.iter().cloned());
        return Some((chosen.clone(), reasons));
    }
    // No node holds them all: spread over the nodes with the most room, and say so.
    let mut order: Vec<(u32, CpuList, usize)> = free
        .into_iter()
        .map(|(id, _, spare)| {
            let n = room(r, &spare, mode);
            (id, spare, n)
        })
        .collect();
    order.sort_by_key(|(id, _, n)| (Reverse(*n), Some(*id) == home, *id));
    let mut chosen = Picked::default();
    let mut used = Vec::new();
    for (id, spare, n) in &order {
        let left = count.saturating_sub(chosen.work.len());
        if left == 0 {
            break;
        }
        let room_left = limit.saturating_sub(chosen.isolated.len());
        if let Some(p) = pick(r, spare, left.min(*n), mode, room_left) {
            chosen.isolated = chosen.isolated.union(&p.isolated);
            chosen.work = chosen.work.union(&p.work);
            used.push(id.to_string());
        }
    }
    // CPUs the nodes do not list (a partial topology) make up the rest.
    if chosen.work.len() < count {
        let rest = online.difference(&chosen.isolated).difference(&keep);
        let room_left = limit.saturating_sub(chosen.isolated.len());
        let p = pick(r, &rest, count - chosen.work.len(), mode, room_left)?;
        chosen.isolated = chosen.isolated.union(&p.isolated);
        chosen.work = chosen.work.union(&p.work);
    }
    let most_free = order.first().map_or(0, |(_, _, n)| *n);
    let most = order.first().map_or(0, |(id, _, _)| *id);
    let what = match mode {
        Mode::Share => "CPUs",
        Mode::WholeCores => "whole cores",
    };
    let reason = format!(
        "NUMA: --cpus {count} does not fit one node (node {most} has the most {what} to spare, {most_free}): the partition spans nodes {}, so the work may reach memory and caches on another node, which is slower — ask for at most {most_free} to keep it on one",
        used.join(",")
    );
    Some((chosen, vec![reason]))
}

/// Why the CPUs the penalties speak against went where they went.
fn penalty_reasons(model: &HostModel, chosen: &CpuList, system: &CpuList) -> Vec<String> {
    let with_managed = |cpus: &CpuList| {
        CpuList::from_cpus(cpus.iter().filter(|&c| !managed_irqs(model, c).is_empty()))
    };
    let (kept, isolated) = (with_managed(system), with_managed(chosen));
    let mut reasons = Vec::new();
    // Kept back for its managed IRQs only when the isolated CPUs have none.
    if isolated.is_empty() && !kept.is_empty() {
        reasons.push(if kept.len() == 1 {
            format!(
                "CPU {kept} stays with the system: kernel-managed {} fire(s) there and cannot move at run time",
                managed_irqs(model, kept.first().unwrap_or(0)).join(", ")
            )
        } else {
            format!("CPUs {kept} stay with the system: kernel-managed IRQs fire there and cannot move at run time")
        });
    }
    if system.contains(0) {
        reasons.push("CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string());
    }
    if !isolated.is_empty() {
        let which = if isolated.len() == 1 {
            format!(
                "CPU {isolated} is isolated although kernel-managed {} fire(s) there",
                managed_irqs(model, isolated.first().unwrap_or(0)).join(", ")
            )
        } else {
            format!("CPUs {isolated} are isolated although kernel-managed IRQs fire there")
        };
        reasons.push(format!(
            "{which}: no CPU without one was left, so they will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)"
        ));
    }
    if chosen.contains(0) {
        reasons.push("CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string());
    }
    reasons
}

/// What boot isolation did to the choice: said only where the kernel was booted with it.
fn boot_reasons(model: &HostModel, work: &CpuList, count: u32) -> Vec<String> {
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
        format!("/sys/devices/system/cpu/isolated lists {domain}")
    } else {
        params.join(" ")
    };
    let outside = work.difference(&boot);
    if outside.is_empty() {
        vec![format!(
            "Boot: the work runs on CPU(s) {work}, isolated at boot ({params}): the kernel keeps its own tasks{} off them, which a partition made at run time cannot",
            if nohz.is_empty() { "" } else { " and, while one task runs, the tick" }
        )]
    } else {
        vec![format!(
            "Boot: CPU(s) {boot} were isolated at boot ({params}), but --cpus {count} needs more: the work also runs on {outside}, where kernel tasks and the tick still come"
        )]
    }
}

/// What isolating the partition does to SMT cores.
fn smt_reasons(
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
                "SMT: the sibling(s) {left} of isolated CPU(s) {split} stay with the system: whole cores for --cpus {count} (siblings left idle) would leave the system no CPU, so system work on {left} shares the core (execution units, L1/L2 caches) with the work"
            )
        } else {
            format!(
                "SMT: the sibling(s) {left} of isolated CPU(s) {split} stay with the system (--share-core): system work on {left} shares the core (execution units, L1/L2 caches) with the work — without --share-core the partition takes whole cores and leaves the siblings idle"
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
fn percent(permille: u64) -> String {
    format!("{}.{} %", permille / 10, permille % 10)
}

/// What the sample measured, and which CPUs it alone kept out (the strongest alternatives:
/// as good as the chosen by what was read, worse by what was measured).
fn rate_reasons(r: &Ranker, activity: Option<&CpuActivity>, p: &Picked) -> Vec<String> {
    let Some(a) = activity else {
        return vec!["Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string()];
    };
    let work: Vec<&CpuRates> = p.work.iter().filter_map(|c| a.cpu(c)).collect();
    let max = |f: &dyn Fn(&CpuRates) -> u64| work.iter().map(|c| f(c)).max().unwrap_or(0);
    let mut reasons = vec![format!(
        "Rates over {} ms on the work CPU(s) {}: at most {} device IRQs/s, {} timer events/s (local timer and timer softirqs), {} of the time stolen",
        a.interval_ms,
        p.work,
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

/// Choose the CPUs to isolate for `choice.count` CPUs of work: on one NUMA node and one
/// last-level cache where they fit, the best ranked first (see the module's order), whole
/// cores with the work's siblings idle unless `choice.share_core`.
pub fn choose(model: &HostModel, choice: &Choice) -> Result<Layout, AssessError> {
    let count = choice.count;
    let online = &model.cpus.online;
    let available = online.len().saturating_sub(1);
    if count as usize > available {
        return Err(invalid(format!(
            "--cpus {count}: this machine has {} online CPU(s) and the system partition needs at least one, so at most {available} can be isolated — ask for fewer",
            online.len()
        )));
    }
    let r = Ranker::new(model, choice.activity);
    let whole = if choice.share_core {
        None
    } else {
        place(&r, count as usize, Mode::WholeCores)
    };
    let (mode, fell_back) = match whole {
        Some(_) => (Mode::WholeCores, false),
        None => (Mode::Share, !choice.share_core),
    };
    let (picked, placement) = match whole {
        Some(w) => w,
        None => place(&r, count as usize, Mode::Share).ok_or_else(|| {
            invalid(format!(
                "--cpus {count}: the CPUs of this machine's topology do not make room for {count} — ask for fewer"
            ))
        })?,
    };
    let chosen = picked.isolated.clone();
    let system = online.difference(&chosen);
    let mut reasons = boot_reasons(model, &picked.work, count);
    reasons.extend(penalty_reasons(model, &chosen, &system));
    reasons.extend(placement);
    reasons.extend(smt_reasons(model, &picked, count, mode, fell_back));
    reasons.extend(rate_reasons(&r, choice.activity, &picked));
    let mut rt = PartitionSpec::new(PARTITION, chosen.clone(), Role::Isolated);
    if let Some(node) = local_memory(model, &chosen) {
        rt = rt.with_mems(CpuList::from_cpus([node]));
    }
    if cpuidle_driver(model).is_some() {
        rt = rt.with_idle("poll");
    }
    let spec = Spec::builder()
        .partition(PartitionSpec::new("system", system.clone(), Role::System))
        .partition(rt)
        .build();
    Ok(Layout {
        partition: PARTITION.to_string(),
        spec_text: generated_text(&spec, count, &picked),
        isolated: chosen,
        work_cpus: picked.work,
        system,
        reasons,
        warnings: planned_warnings(model, &spec, "the generated spec")?,
        spec,
    })
}

/// The text of a generated spec, as the user sees it (saved as spec.toml) and the journal
/// notes it: a comment saying what it is for, then the spec.
fn generated_text(spec: &Spec, count: u32, p: &Picked) -> String {
    let idle = p.isolated.difference(&p.work);
    let what = if idle.is_empty() {
        format!(
            "# {count} isolated CPU(s) for the time-critical work, the rest for everything else."
        )
    } else {
        format!(
            "# {} isolated CPU(s): the time-critical work on {}, their SMT siblings {idle} left idle; the rest for everything else.",
            p.isolated.len(),
            p.work
        )
    };
    format!("{what}\n{}", spec.to_toml())
}

/// The one node all of `cpus` are on, when the machine has several and that node has
/// memory: the partition's memory is then bound to it.
fn local_memory(model: &HostModel, cpus: &CpuList) -> Option<u32> {
    let nodes = nodes(model);
    if nodes.len() < 2 {
        return None;
    }
    let (id, _) = nodes
        .iter()
        .find(|(_, node_cpus)| cpus.difference(node_cpus).is_empty())?;
    model.nodes_with_memory().contains(*id).then_some(*id)
}

/// The online CPUs of each NUMA node that has any.
fn nodes(model: &HostModel) -> Vec<(u32, CpuList)> {
    model
        .cpus
        .nodes
        .iter()
        .map(|n| (n.id, n.cpus.intersection(&model.cpus.online)))
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect()
}

/// The user's own spec (`--spec FILE`): its first isolated partition is measured.
pub fn from_spec(model: &HostModel, name: &str, text: &str) -> Result<Layout, AssessError> {
    let spec = Spec::parse(name, text)
        .map_err(|e| invalid(format!("{e} — correct the spec and run again")))?;
    let rt = spec
        .partitions
        .iter()
        .find(|p| p.role == Role::Isolated)
        .ok_or_else(|| {
            invalid(format!(
                "{name} has no isolated partition — assess measures the work on one; add a partition with role = \"isolated\""
            ))
        })?;
    Ok(Layout {
        partition: rt.name.clone(),
        isolated: rt.cpus.clone(),
        work_cpus: rt.cpus.clone(),
        system: spec.cpus_of(Role::System),
        reasons: vec![format!("the CPUs of partition {:?} in {name}", rt.name)],
        spec_text: text.to_string(),
        warnings: planned_warnings(model, &spec, name)?,
        spec,
    })
}

/// Plan the spec (which validates it against the host; nothing is written) for its warnings.
fn planned_warnings(
    model: &HostModel,
    spec: &Spec,
    name: &str,
) -> Result<Vec<String>, AssessError> {
    let plan = tame_partition::plan(spec, model)
        .map_err(|e| invalid(format!("{name} cannot be applied here: {e}")))?;
    Ok(plan.warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` CPUs, whole cores, nothing sampled.
    fn just(count: u32) -> Choice<'static> {
        Choice {
            count,
            ..Default::default()
        }
    }

    fn model(fixture: &str) -> HostModel {
        HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            fixture,
        )))
    }

    #[test]
    fn a_cpu_with_a_managed_irq_stays_with_the_system() {
        // dev-vm: a 2-CPU VM whose disk queue IRQ is kernel-managed on CPU 1.
        let m = model("dev-vm");
        let l = choose(&m, &just(1)).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.system.to_string()),
            ("0".into(), "1".into())
        );
        assert!(
            l.reasons[0].starts_with("CPU 1 stays with the system: kernel-managed IRQ"),
            "{:?}",
            l.reasons
        );
        assert!(
            l.spec_text.contains("cpus = \"0\"\nrole = \"isolated\""),
            "{}",
            l.spec_text
        );
        assert!(
            l.warnings.iter().any(|w| w.contains("isolates CPU 0")),
            "{:?}",
            l.warnings
        );
    }

    #[test]
    fn cpu_0_and_low_cpus_stay_with_the_system_on_a_quiet_host() {
        let m = model("rt-8cpu");
        let l = choose(&m, &just(2)).unwrap();
        assert!(!l.isolated.contains(0), "{}", l.isolated);
        assert_eq!(l.isolated.len(), 2);
        assert_eq!(l.system.len() + 2, m.cpus.online.len());
    }

    /// The text assess wrote with `format!` before the spec was built typed: the view of
    /// the typed spec must read the same, byte for byte (saved as spec.toml, noted in the
    /// journal).
    fn text_as_formatted_before(l: &Layout, count: u32) -> String {
        let rt = &l.spec.partitions[1];
        let mems = rt
            .mems
            .as_ref()
            .map_or(String::new(), |n| format!("mems = \"{n}\"\n"));
        let idle = rt
            .idle
            .as_ref()
            .map_or(String::new(), |i| format!("idle = \"{i}\"\n"));
        // Whole cores with idle siblings say so in the comment; the spec body is unchanged.
        let comment = if l.work_cpus == l.isolated {
            format!("# {count} isolated CPU(s) for the time-critical work, the rest for everything else.")
        } else {
            format!(
                "# {} isolated CPU(s): the time-critical work on {}, their SMT siblings {} left idle; the rest for everything else.",
                l.isolated.len(),
                l.work_cpus,
                l.isolated.difference(&l.work_cpus)
            )
        };
        format!(
            "{comment}\n[[partition]]\nname = \"system\"\ncpus = \"{}\"\nrole = \"system\"\n\n[[partition]]\nname = \"{PARTITION}\"\ncpus = \"{}\"\nrole = \"isolated\"\n{mems}{idle}",
            l.system, l.isolated
        )
    }

    #[test]
    fn the_generated_spec_text_is_a_view_of_the_typed_spec() {
        let (_dir, numa) = two_sockets();
        for (m, count) in [(model("rt-8cpu"), 2), (model("dev-vm"), 1), (numa, 2)] {
            let l = choose(&m, &just(count)).unwrap();
            assert_eq!(l.spec_text, text_as_formatted_before(&l, count));
            assert_eq!(Spec::parse("t", &l.spec_text).unwrap(), l.spec);
        }
    }

    #[test]
    fn more_cpus_than_can_be_isolated_is_bad_input() {
        let e = choose(&model("dev-vm"), &just(2)).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains("at most 1 can be isolated"), "{e}");
    }

    #[test]
    fn a_users_spec_must_validate_and_have_an_isolated_partition() {
        let m = model("dev-vm");
        let e = from_spec(
            &m,
            "s.toml",
            "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n",
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("no isolated partition"),
            "{e}"
        );
        let e = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0-7\"\nrole = \"system\"\n[[partition]]\nname = \"x\"\ncpus = \"9\"\nrole = \"isolated\"\n").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("cannot be applied here"),
            "{e}"
        );
        let l = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n[[partition]]\nname = \"loop\"\ncpus = \"1\"\nrole = \"isolated\"\n").unwrap();
        assert_eq!(
            (l.partition.as_str(), l.isolated.to_string()),
            ("loop", "1".into())
        );
    }

    /// The synthetic two-socket server (2 nodes × 12 cores × 2 threads) without its
    /// cgroup partitions.
    fn two_sockets() -> (tempfile::TempDir, HostModel) {
        let dir = tame_testing::scratch_dir("layout-");
        let mut h = tame_testing::synthetic::SyntheticHost::two_socket_smt();
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        h.write(dir.path()).unwrap();
        let m = HostModel::read(&tame_host::Root::new(dir.path()));
        (dir, m)
    }

    fn reason<'a>(l: &'a Layout, start: &str) -> &'a str {
        l.reasons
            .iter()
            .find(|r| r.starts_with(start))
            .unwrap_or_else(|| panic!("no reason {start:?} in {:#?}", l.reasons))
    }

    #[test]
    fn numa_the_isolated_cpus_share_a_node_away_from_cpu_0() {
        let (_dir, m) = two_sockets();
        // Node 0 holds CPUs 0-11,24-35, node 1 12-23,36-47.
        // Whole cores: each work CPU brings its sibling (CPU n's is n±24). 24 whole cores
        // do not fit beside CPU 0, so --cpus 24 shares cores.
        for (count, isolated, work) in [
            (1, "23,47", "47"),
            (2, "22-23,46-47", "46-47"),
            (24, "12-23,36-47", "12-23,36-47"),
        ] {
            let l = choose(&m, &just(count)).unwrap();
            assert_eq!(
                (l.isolated.to_string(), l.work_cpus.to_string()),
                (isolated.to_string(), work.to_string())
            );
            let n = l.isolated.len();
            assert_eq!(
                reason(&l, "NUMA:"),
                format!("NUMA: all {n} isolated CPU(s) on node 1 (CPUs 12-23,36-47), so they share its last-level cache and the partition's memory is bound to it (mems); node 0 keeps CPU 0 and the housekeeping")
            );
            // The memory goes with them, and the spec still plans.
            assert!(
                l.spec_text.contains("role = \"isolated\"\nmems = \"1\"\n"),
                "{}",
                l.spec_text
            );
        }
    }

    #[test]
    fn numa_the_housekeeping_node_when_no_other_has_room() {
        let (_dir, mut m) = two_sockets();
        // Only CPUs 12 and 36 of node 1 online: 4 CPUs fit node 0 alone.
        let gone = CpuList::parse("13-23,37-47").unwrap();
        m.cpus.online = m.cpus.online.difference(&gone);
        // Node 1's one core cannot give 4 work CPUs; on node 0 each brings its sibling.
        let l = choose(&m, &just(4)).unwrap();
        assert_eq!(l.isolated.to_string(), "8-11,32-35");
        // The work runs on the highest thread of each core, as it takes the highest CPUs.
        assert_eq!(l.work_cpus.to_string(), "32-35");
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: all 8 isolated CPU(s) on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, as no other node has 4 CPU(s)"
        );
        assert!(!l.isolated.contains(0));
    }

    #[test]
    fn numa_a_count_no_node_holds_spans_nodes_and_says_so() {
        let (_dir, m) = two_sockets();
        let l = choose(&m, &just(25)).unwrap();
        assert_eq!(l.isolated.len(), 25);
        assert!(CpuList::parse("12-23,36-47")
            .unwrap()
            .is_subset(&l.isolated));
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: --cpus 25 does not fit one node (node 1 has the most CPUs to spare, 24): the partition spans nodes 1,0, so the work may reach memory and caches on another node, which is slower — ask for at most 24 to keep it on one"
        );
    }

    #[test]
    fn smt_the_work_cpus_sibling_joins_the_partition_idle() {
        let (_dir, m) = two_sockets();
        let l = choose(&m, &just(1)).unwrap();
        // The sibling is isolated (no load on the core) but the work does not run on it.
        assert_eq!(
            (l.isolated.to_string(), l.work_cpus.to_string()),
            ("23,47".into(), "47".into())
        );
        assert_eq!(l.work().to_string(), "47");
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: sibling 23 of CPU 47 is in the partition and left idle, so no load shares the core (--share-core gives it back to the system)"
        );
        let l = choose(&m, &just(2)).unwrap();
        // Every CPU of this server has a kernel-managed NVMe queue: said once, not per CPU.
        assert_eq!(
            l.reasons,
            vec![
                "CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string(),
                "CPUs 22-23,46-47 are isolated although kernel-managed IRQs fire there: no CPU without one was left, so they will interrupt the work (booting with isolcpus=managed_irq moves those whose affinity also names a housekeeping CPU; a queue that serves only an isolated CPU stays)".to_string(),
                reason(&l, "NUMA:").to_string(),
                "SMT: siblings 22-23 of CPUs 46-47 are in the partition and left idle, so no load shares their cores (--share-core gives them back to the system)".to_string(),
                "Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string(),
            ]
        );
    }

    #[test]
    fn smt_share_core_splits_and_uses_cores_as_before() {
        let (_dir, m) = two_sockets();
        let share = |count| Choice {
            count,
            share_core: true,
            activity: None,
        };
        let l = choose(&m, &share(1)).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.work_cpus.to_string()),
            ("47".into(), "47".into())
        );
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: the sibling(s) 23 of isolated CPU(s) 47 stay with the system (--share-core): system work on 23 shares the core (execution units, L1/L2 caches) with the work — without --share-core the partition takes whole cores and leaves the siblings idle"
        );
        // Two CPUs take one whole core, and the work runs on both threads.
        let l = choose(&m, &share(2)).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.work_cpus.to_string()),
            ("23,47".into(), "23,47".into())
        );
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: CPUs 23,47 are whole cores (siblings isolated together), so no system work shares their cores; siblings still compete with each other — one real-time thread per core, its sibling left idle, interferes least"
        );
    }

    #[test]
    fn smt_on_two_vcpus_that_are_siblings() {
        let dir = tame_testing::scratch_dir("layout-2smt-");
        let mut h = tame_testing::synthetic::SyntheticHost::two_socket_smt();
        (h.sockets, h.cores_per_socket, h.threads_per_core) = (1, 1, 2);
        h.managed_irqs = 0;
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        h.write(dir.path()).unwrap();
        let m = HostModel::read(&tame_host::Root::new(dir.path()));
        // The one core would leave the system no CPU: the work shares it, and says why.
        let l = choose(&m, &just(1)).unwrap();
        assert_eq!(l.isolated.to_string(), "1");
        assert_eq!(l.work_cpus.to_string(), "1");
        assert!(
            !l.reasons.iter().any(|r| r.starts_with("NUMA:")),
            "{:?}",
            l.reasons
        );
        assert_eq!(
            reason(&l, "SMT:"),
            "SMT: the sibling(s) 0 of isolated CPU(s) 1 stay with the system: whole cores for --cpus 1 (siblings left idle) would leave the system no CPU, so system work on 0 shares the core (execution units, L1/L2 caches) with the work"
        );
    }

    #[test]
    fn this_2_vcpu_vm_has_no_numa_or_smt_reason() {
        let l = choose(&model("dev-vm"), &just(1)).unwrap();
        assert_eq!(
            l.reasons,
            vec![
                "CPU 1 stays with the system: kernel-managed IRQ 36 (virtio1-req.0) fire(s) there and cannot move at run time".to_string(),
                "CPU 0 is isolated although it carries housekeeping the kernel cannot move: every other CPU was a worse choice".to_string(),
                "Rates: per-CPU interrupt, timer and steal rates were not sampled: the CPUs were chosen from what was read alone".to_string(),
            ]
        );
        assert_eq!(l.work_cpus, l.isolated);
    }

    #[test]
    fn numa_the_housekeeping_node_when_its_cpus_are_less_disturbed() {
        let (_dir, mut m) = two_sockets();
        // Node 0's NVMe queues are not kernel-managed here; node 1's are.
        let node0 = CpuList::parse("0-11,24-35").unwrap();
        for irq in m.irqs.irqs.iter_mut() {
            if irq.fires_on().is_some_and(|c| c.is_subset(&node0)) {
                irq.managed = false;
            }
        }
        let l = choose(&m, &just(2)).unwrap();
        assert_eq!(l.isolated.to_string(), "10-11,34-35");
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: all 4 isolated CPU(s) on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, whose CPUs carry fewer kernel-managed IRQs than the other nodes'"
        );
        assert_eq!(
            l.reasons[0],
            "CPUs 12-23,36-47 stay with the system: kernel-managed IRQs fire there and cannot move at run time"
        );
    }

    /// A synthetic host written to a fixture tree and read back.
    fn written(h: &tame_testing::synthetic::SyntheticHost) -> (tempfile::TempDir, HostModel) {
        let dir = tame_testing::scratch_dir("layout-");
        h.write(dir.path()).unwrap();
        let m = HostModel::read(&tame_host::Root::new(dir.path()));
        (dir, m)
    }

    #[test]
    fn cpus_isolated_at_boot_are_chosen() {
        // rt-8cpu booted with isolcpus/nohz_full on 2-3 only: without the boot rule the
        // highest CPUs (6-7) would be taken.
        let mut h = tame_testing::synthetic::SyntheticHost::rt_8cpu();
        h.cmdline = h.cmdline.replace("2-7", "2-3");
        h.isolated = CpuList::parse("2-3").unwrap();
        h.nohz_full = Some(h.isolated.clone());
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        let (_dir, m) = written(&h);
        let l = choose(&m, &just(2)).unwrap();
        assert_eq!(l.isolated.to_string(), "2-3");
        assert_eq!(
            l.reasons[0],
            "Boot: the work runs on CPU(s) 2-3, isolated at boot (isolcpus=managed_irq,domain,2-3 nohz_full=2-3): the kernel keeps its own tasks and, while one task runs, the tick off them, which a partition made at run time cannot"
        );
        // More than were isolated: the rest come from the others, and it says so.
        let l = choose(&m, &just(3)).unwrap();
        assert_eq!(l.isolated.to_string(), "2-3,7");
        assert!(l.reasons[0].starts_with("Boot: CPU(s) 2-3 were isolated at boot (isolcpus=managed_irq,domain,2-3 nohz_full=2-3), but --cpus 3 needs more: the work also runs on 7,"), "{:?}", l.reasons);
    }

    #[test]
    fn cpus_isolated_at_boot_pull_the_partition_to_their_node() {
        // The SMT server booted with isolcpus on two cores of node 0 (CPU 0's node).
        let mut h = tame_testing::synthetic::SyntheticHost::two_socket_smt();
        h.cmdline.push_str(" isolcpus=4-5,28-29");
        h.isolated = CpuList::parse("4-5,28-29").unwrap();
        h.cgroups = tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        let (_dir, m) = written(&h);
        let l = choose(&m, &just(2)).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.work_cpus.to_string()),
            ("4-5,28-29".into(), "28-29".into())
        );
        assert_eq!(
            reason(&l, "NUMA:"),
            "NUMA: all 4 isolated CPU(s) on node 0 (CPUs 0-11,24-35), so they share its last-level cache and the partition's memory is bound to it (mems); the node of CPU 0, whose CPUs were isolated at boot, more of them than the other nodes'"
        );
    }

    #[test]
    fn one_last_level_cache_and_not_the_housekeeping_cpus() {
        // rt-8cpu (boot-isolated 2-7) with two L3 caches: 0-1,6-7 (CPU 0's) and 2-5.
        let mut m = model("rt-8cpu");
        let l3 = |cpus: &str| tame_host::cpu::Cache {
            level: 3,
            kind: "Unified".into(),
            size_kib: Some(16384),
            ways: Some(16),
            id: None,
            cpus: CpuList::parse(cpus).unwrap(),
        };
        m.cpus.caches.retain(|c| c.level < 3);
        m.cpus.caches.extend([l3("0-1,6-7"), l3("2-5")]);
        // 6-7 rank as 4-5 do; only the cache tells them apart.
        let l = choose(&m, &just(2)).unwrap();
        assert_eq!(l.isolated.to_string(), "4-5");
        assert_eq!(
            reason(&l, "LLC:"),
            "LLC: the partition's 2 CPU(s) share one L3 cache (CPUs 2-5) of the 2 here, so no other cache's traffic evicts the work's lines; the one of CPU 0 (CPUs 0-1,6-7) stays with the housekeeping"
        );
        // Five fit no cache: spread, and the most one cache holds is named.
        let l = choose(&m, &just(5)).unwrap();
        assert_eq!(l.isolated.to_string(), "3-7");
        assert!(
            reason(&l, "LLC:").starts_with(
                "LLC: --cpus 5 does not fit one last-level cache (the roomiest has room for 4)"
            ),
            "{:?}",
            l.reasons
        );
    }

    fn quiet(cpu: u32) -> tame_host::activity::CpuRates {
        tame_host::activity::CpuRates {
            cpu,
            device_irqs: 10,
            local_timer: 250,
            steal_permille: Some(0),
            ..Default::default()
        }
    }

    #[test]
    fn measured_rates_count_only_when_well_above_the_quietest() {
        use tame_host::activity::{BusyIrq, CpuActivity};
        // rt-8cpu: CPUs 2-7 are alike by what is read; the sample tells them apart.
        let m = model("rt-8cpu");
        let mut cpus: Vec<_> = (0..8).map(quiet).collect();
        cpus[7].device_irqs = 2000;
        cpus[7].busiest_irq = Some(BusyIrq {
            number: 40,
            name: "eth0-rx-0".into(),
            per_s: 1900,
        });
        cpus[5].steal_permille = Some(100);
        // Noise: 30 device IRQs/s is under the floor, 400 timer events/s within 2× of 250.
        cpus[6].device_irqs = 30;
        cpus[6].local_timer = 400;
        let activity = CpuActivity {
            interval_ms: 1000,
            cpus,
        };
        let l = choose(
            &m,
            &Choice {
                count: 2,
                share_core: false,
                activity: Some(&activity),
            },
        )
        .unwrap();
        assert_eq!(l.isolated.to_string(), "4,6");
        let rates: Vec<&String> = l
            .reasons
            .iter()
            .filter(|r| r.starts_with("Rates"))
            .collect();
        assert_eq!(
            rates,
            vec![
                "Rates over 1000 ms on the work CPU(s) 4,6: at most 30 device IRQs/s, 400 timer events/s (local timer and timer softirqs), 0.0 % of the time stolen",
                "Rates: CPU 7 was passed over for 2000 device IRQs/s (most from IRQ 40 eth0-rx-0, 1900/s), over twice the quietest CPU's",
                "Rates: CPU 5 was passed over for 10.0 % of its time stolen, over twice the quietest CPU's",
            ]
        );
        // Without the sample, the highest CPUs.
        assert_eq!(choose(&m, &just(2)).unwrap().isolated.to_string(), "6-7");
    }

    #[test]
    fn bands_ignore_noise_and_grow_by_doubling() {
        assert_eq!(band(100, 50), 0);
        assert_eq!(band(101, 50), 1);
        assert_eq!(band(199, 50), 1);
        assert_eq!(band(200, 50), 2);
        assert_eq!(band(u64::MAX, 0), 63);
    }
}
