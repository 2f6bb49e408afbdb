//! What one pass sees, as things keyed so that two passes compare: the stray tasks, the
//! IRQs on isolated CPUs, the drifted values (all from [`tame_partition::status`]) and the
//! isolated CPUs whose interrupt rate is over the threshold. Pure: built from a `Status`
//! and the rates, so fixture trees and literal values test it.

use std::collections::{BTreeMap, BTreeSet};

use tame_host::irq::InterruptsTable;
use tame_host::CpuList;
use tame_partition::status::{AuditIrq, AuditTask, Drift};
use tame_partition::{Applied, Role, Status};

use crate::event::{Event, Kind};

/// What the guard watches: the isolated partitions asked for (all by default), and where
/// strays and IRQs go back to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// Each watched isolated partition and its CPUs.
    pub partitions: Vec<(String, CpuList)>,
    /// The system partition's CPUs (a stray task's new affinity).
    pub system_cpus: CpuList,
    /// Where movable IRQs may go (the system partition and those with `irqs = true`).
    pub irq_cpus: CpuList,
}

impl Scope {
    /// The isolated partitions named in `wanted` (all of them when it is empty); an
    /// unknown or non-isolated name is the error, naming the ones there are.
    pub fn of(applied: &Applied, wanted: &[String]) -> Result<Scope, String> {
        let isolated: Vec<(String, CpuList)> = applied
            .partitions
            .iter()
            .filter(|p| p.is_isolated())
            .map(|p| (p.name.clone(), p.cpus.clone()))
            .collect();
        for w in wanted {
            if !isolated.iter().any(|(n, _)| n == w) {
                let names: Vec<&str> = isolated.iter().map(|(n, _)| n.as_str()).collect();
                return Err(match applied.partition(w) {
                    Some(_) => format!(
                        "-p {w}: partition {w} is not isolated — tame guard watches isolated partitions ({})",
                        names.join(", ")
                    ),
                    None => format!(
                        "-p {w}: no partition {w} is applied — the applied isolated partitions are: {}",
                        names.join(", ")
                    ),
                });
            }
        }
        let partitions: Vec<_> = isolated
            .into_iter()
            .filter(|(n, _)| wanted.is_empty() || wanted.contains(n))
            .collect();
        if partitions.is_empty() {
            return Err(
                "the applied spec has no isolated partition: there is nothing for tame guard to watch — apply a spec with a partition of role = \"isolated\""
                    .into(),
            );
        }
        Ok(Scope {
            partitions,
            system_cpus: applied.cpus_of(Role::System),
            irq_cpus: tame_partition::plan::irq_cpus(&applied.spec),
        })
    }

    /// Every watched isolated CPU.
    pub fn isolated_cpus(&self) -> CpuList {
        self.partitions
            .iter()
            .fold(CpuList::new(), |a, (_, c)| a.union(c))
    }

    /// The watched partitions `cpus` reaches, and those CPUs of theirs.
    pub fn reached(&self, cpus: &CpuList) -> Option<(String, CpuList)> {
        let hit: Vec<_> = self
            .partitions
            .iter()
            .filter(|(_, c)| !c.intersection(cpus).is_empty())
            .collect();
        if hit.is_empty() {
            return None;
        }
        let names: Vec<&str> = hit.iter().map(|(n, _)| n.as_str()).collect();
        let on = hit
            .iter()
            .fold(CpuList::new(), |a, (_, c)| a.union(&c.intersection(cpus)));
        Some((names.join(","), on))
    }
}

/// One thing the guard follows from pass to pass.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Task(u32),
    Irq(u32),
    Drift(String),
    Rate(u32),
}

/// How a thing would be put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fix {
    /// Place thread `tid` of `pid` on the system partition (its CPUs, its cgroup).
    Task { pid: u32, tid: u32 },
    /// Write the value apply wrote again (the journal already holds the value from before).
    Rewrite { path: String, value: String },
    /// Pin an IRQ apply never wrote to the IRQ CPUs (a new record, its value now first).
    Irq { irq: u32 },
}

/// A thing seen: the event that reports it, and its fix where one is allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub event: Event,
    pub fix: Option<Fix>,
}

/// What a pass saw.
pub type Observation = BTreeMap<Key, Item>;

/// The stray task `t` as a thing, or `None` when it is not the guard's business: not on a
/// watched CPU, or placed by the kernel itself (per-CPU kernel threads, workqueue
/// workers, kthreadd: never touched).
pub fn task_item(t: &AuditTask, scope: &Scope, source: &str) -> Option<(Key, Item)> {
    if t.bound_by_kernel {
        return None;
    }
    let (partition, on) = scope.reached(&t.cpus_allowed)?;
    let mut e = Event::new(Kind::TaskOnIsolated);
    e.cpu = Some(on);
    e.partition = Some(partition);
    e.pid = Some(t.pid);
    e.tid = Some(t.tid);
    e.comm = Some(t.comm.clone());
    e.cpus_allowed = Some(t.cpus_allowed.clone());
    e.source = Some(source.to_string());
    Some((
        Key::Task(t.tid),
        Item {
            event: e,
            fix: (t.pid != 0).then_some(Fix::Task {
                pid: t.pid,
                tid: t.tid,
            }),
        },
    ))
}

fn irq_item(i: &AuditIrq, scope: &Scope, drifted: &BTreeSet<&str>) -> Option<(Key, Item)> {
    // An IRQ whose affinity apply wrote and someone changed is reported (and fixed) as drift;
    // one whose affinity already excludes the isolated CPUs moves when it next fires.
    if i.moving || drifted.contains(tame_host::irq::affinity_list_path(i.irq).as_str()) {
        return None;
    }
    let (partition, on) = scope.reached(&i.fires_on)?;
    let mut e = Event::new(Kind::IrqOnIsolated);
    e.cpu = Some(on);
    e.partition = Some(partition);
    e.irq = Some(i.irq);
    e.name = Some(i.name.clone());
    e.managed = Some(i.managed);
    e.source = Some("scan".into());
    if i.managed {
        e.detail = Some("kernel-managed: it cannot leave at run time".into());
    }
    Some((
        Key::Irq(i.irq),
        Item {
            event: e,
            // The kernel refuses a managed IRQ.
            fix: (!i.managed).then_some(Fix::Irq { irq: i.irq }),
        },
    ))
}

fn drift_item(d: &Drift) -> (Key, Item) {
    let mut e = Event::new(Kind::Drift);
    e.path = Some(d.path.clone());
    e.applied = Some(d.applied.clone());
    e.now = Some(d.now.clone().unwrap_or_else(|| "(gone)".into()));
    e.source = Some("scan".into());
    e.detail = match (&d.what, d.reapply_fixes) {
        (Some(what), _) => Some(what.clone()),
        (None, false) if d.now.is_some() => {
            Some("still fits the spec: re-applying leaves it".into())
        }
        _ => None,
    };
    (
        Key::Drift(d.path.clone()),
        Item {
            event: e,
            // Only what re-applying would write back, and only a file that is there.
            fix: (d.reapply_fixes && d.now.is_some()).then(|| Fix::Rewrite {
                path: d.path.clone(),
                value: d.applied.clone(),
            }),
        },
    )
}

/// Interrupts per second on each CPU between two readings of /proc/interrupts `elapsed_ns`
/// apart (every line with a column per CPU summed: device IRQs and per-CPU vectors).
pub fn irq_rates(
    before: &InterruptsTable,
    after: &InterruptsTable,
    elapsed_ns: u64,
) -> BTreeMap<u32, u64> {
    if elapsed_ns == 0 {
        return BTreeMap::new();
    }
    let sums = |t: &InterruptsTable| -> BTreeMap<u32, u64> {
        let mut m = BTreeMap::new();
        for l in t.lines.iter().filter(|l| l.counts.len() == t.cpus.len()) {
            for (cpu, n) in t.cpus.iter().zip(&l.counts) {
                *m.entry(*cpu).or_insert(0u64) += n;
            }
        }
        m
    };
    let (b, a) = (sums(before), sums(after));
    a.iter()
        .filter_map(|(cpu, n)| {
            let d = n.checked_sub(*b.get(cpu)?)?;
            Some((
                *cpu,
                (u128::from(d) * 1_000_000_000 / u128::from(elapsed_ns)) as u64,
            ))
        })
        .collect()
}

/// Everything `status` and the `rates` show on the watched CPUs.
pub fn observe(
    status: &Status,
    scope: &Scope,
    rates: &BTreeMap<u32, u64>,
    max_rate: u64,
) -> Observation {
    let drifted: BTreeSet<&str> = status.drift.iter().map(|d| d.path.as_str()).collect();
    let mut out = Observation::new();
    out.extend(
        status
            .audit
            .tasks
            .iter()
            .filter_map(|t| task_item(t, scope, "scan")),
    );
    out.extend(
        status
            .audit
            .irqs
            .iter()
            .filter_map(|i| irq_item(i, scope, &drifted)),
    );
    out.extend(status.drift.iter().map(drift_item));
    for (cpu, rate) in rates {
        let one = CpuList::from_cpus([*cpu]);
        let Some((partition, _)) = scope.reached(&one) else {
            continue;
        };
        if *rate > max_rate {
            let mut e = Event::new(Kind::IrqRateHigh);
            e.cpu = Some(one);
            e.partition = Some(partition);
            e.rate = Some(*rate);
            e.threshold = Some(max_rate);
            e.source = Some("scan".into());
            out.insert(
                Key::Rate(*cpu),
                Item {
                    event: e,
                    fix: None,
                },
            );
        }
    }
    out
}
