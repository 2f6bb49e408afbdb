//! CPU checks: housekeeping left, SMT siblings, boot isolation (isolcpus, nohz_full, rcu_nocbs), threads allowed on the CPUs.
use tame_host::{CpuList, HostModel};
use tame_rt::plural::{count, word};

use crate::isolation;
use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Cpus;

pub fn housekeeping(_m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.housekeeping";
    let why = "IRQs, unbound kernel threads, timers and every other process need a CPU outside the real-time ones, or they run on them.";
    if t.housekeeping.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Warn,
            format!(
                "the checked {} {} every online CPU: no CPU is left for housekeeping",
                t.cpus.named(),
                are(&t.cpus)
            ),
            why,
        )
        .fix(t.leave_one_out())
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Ok,
        format!("housekeeping {}", t.housekeeping.named()),
        why,
    )
    .as_vec()
}

pub fn smt_siblings(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.smt_siblings";
    let why = "SMT siblings share a core's execution units and L1/L2 caches, so whatever runs on a sibling slows the real-time thread by an unpredictable amount.";
    let mut outside = CpuList::new();
    let mut inside = CpuList::new();
    for cpu in t.cpus.iter() {
        let sib = m.cpus.online_siblings(cpu);
        outside = outside.union(&sib.difference(&t.cpus));
        inside = inside.union(&sib.intersection(&t.cpus));
    }
    if !outside.is_empty() {
        let all = t.cpus.union(&outside);
        return Finding::new(
            id,
            C,
            Severity::Warn,
            format!("SMT {} {outside} of {} {} online and not among the checked CPUs", word(outside.len() as u64, "sibling", "siblings"), t.cpus.named(), are(&outside)),
            why,
        )
        .fix(format!(
            "echo off > /sys/devices/system/cpu/smt/control (boot: nosmt), or keep the siblings idle by isolating them too: --cpus {all}"
        ))
        .as_vec();
    }
    if !inside.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Info,
            format!("CPUs {} include SMT siblings of each other ({inside})", t.cpus),
            why,
        )
        .fix("run one real-time thread per core and leave its sibling idle, or echo off > /sys/devices/system/cpu/smt/control")
        .as_vec();
    }
    let smt = m.cpus.smt.control.as_deref().unwrap_or("unknown");
    Finding::new(
        id,
        C,
        Severity::Ok,
        format!("no online SMT siblings (smt control: {smt})"),
        why,
    )
    .as_vec()
}

pub fn isolcpus(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.isolcpus";
    let why = "CPUs outside isolcpus=domain (or an isolated cpuset partition) stay in the scheduler's load balancing, so other threads are moved onto them.";
    let boot = isolation::boot_domain(m);
    let partitions = isolation::run_time(m);
    let run_time = partitions
        .iter()
        .fold(CpuList::new(), |a, p| a.union(&p.cpus));
    let missing = t.cpus.difference(&boot.union(&run_time));
    // How each isolated checked CPU is isolated: boot first, then each partition.
    let mut how = Vec::new();
    let at_boot = t.cpus.intersection(&boot);
    if !at_boot.is_empty() {
        how.push(format!("{} at boot (isolcpus=domain)", at_boot.named()));
    }
    let only_run_time = t.cpus.intersection(&run_time).difference(&boot);
    for p in &partitions {
        let here = only_run_time.intersection(&p.cpus);
        if !here.is_empty() {
            how.push(format!("{} at run time by {}", here.named(), p.describe()));
        }
    }
    if missing.is_empty() {
        let mut found = format!(
            "{} {} isolated: {}",
            t.cpus.named(),
            are(&t.cpus),
            how.join("; ")
        );
        if !only_run_time.is_empty() {
            found.push_str(&format!("; {}", boot_only_rest(m, &only_run_time)));
        }
        return Finding::new(id, C, Severity::Ok, found, why).as_vec();
    }
    let partition_hint = if m
        .cgroups
        .cpuset
        .as_ref()
        .is_some_and(|h| h.version == tame_host::cgroup::CgroupVersion::V2)
    {
        " or, at run time, an isolated cgroup v2 cpuset partition (tame apply)"
    } else {
        " or, at run time, an exclusive cpuset (tame apply)"
    };
    let mut found = format!(
        "{} {} not isolated from the scheduler",
        missing.named(),
        are(&missing)
    );
    if !how.is_empty() {
        found.push_str(&format!(" (isolated: {})", how.join("; ")));
    }
    Finding::new(id, C, Severity::Warn, found, why)
        .housekeeping_fix(t, true, |_| {
            format!(
                "boot with isolcpus=managed_irq,domain,{}{partition_hint}",
                t.cpus
            )
        })
        .as_vec()
}

/// What run-time isolation leaves to the boot line for `cpus`: the partition keeps
/// other work off them, but only boot parameters stop the tick, offload RCU
/// callbacks and keep kernel-managed IRQs away (apply cannot move those).
fn boot_only_rest(m: &HostModel, cpus: &CpuList) -> String {
    let b = &m.kernel.boot;
    let nohz = b.nohz_full.clone().unwrap_or_default();
    let rcu = match &b.rcu_nocbs {
        Some(None) => m.cpus.online.clone(),
        Some(Some(l)) => nohz.union(l),
        None => nohz.clone(),
    };
    let managed = b
        .isolcpus
        .as_ref()
        .filter(|i| i.has("managed_irq"))
        .map(|i| i.cpus.clone())
        .unwrap_or_default();
    let mut left = Vec::new();
    if !cpus.is_subset(&nohz) {
        left.push("stop the tick (nohz_full=, see cpus.nohz_full)");
    }
    if !cpus.is_subset(&rcu) {
        left.push("offload RCU callbacks (rcu_nocbs=, see cpus.rcu_nocbs)");
    }
    if !cpus.is_subset(&managed) {
        left.push("keep kernel-managed IRQs off (isolcpus=managed_irq, see irqs.managed)");
    }
    if left.is_empty() {
        return "the boot line does what run-time isolation cannot (nohz_full, rcu_nocbs, isolcpus=managed_irq)".to_string();
    }
    format!(
        "run-time isolation keeps other tasks off them, but only boot parameters {}",
        join_and(&left)
    )
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

pub fn nohz_full(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.nohz_full";
    let why = "Without nohz_full the scheduler tick interrupts a CPU running a single task every 1/HZ seconds.";
    let have = m.kernel.boot.nohz_full.clone().unwrap_or_default();
    let missing = t.cpus.difference(&have);
    if missing.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("nohz_full covers {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    if m.kernel.supports_nohz_full() == Some(false) {
        return Finding::new(
            id,
            C,
            Severity::Info,
            format!("{} {} periodically; nohz_full= would have no effect on this kernel (see kernel.nohz_full)", missing.named(), word(missing.len() as u64, "ticks", "tick")),
            why,
        )
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("nohz_full= does not cover {}", missing.named()),
        why,
    )
    .housekeeping_fix(t, true, |_| format!("boot with nohz_full={}", t.cpus))
    .as_vec()
}

pub fn rcu_nocbs(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.rcu_nocbs";
    let why = "RCU callbacks run in softirq on the CPU that queued them unless rcu_nocbs offloads them to kthreads on housekeeping CPUs.";
    let b = &m.kernel.boot;
    let mut covered = b.nohz_full.clone().unwrap_or_default(); // nohz_full implies rcu_nocbs
    match &b.rcu_nocbs {
        Some(None) => covered = m.cpus.online.clone(),
        Some(Some(l)) => covered = covered.union(l),
        None => {}
    }
    let missing = t.cpus.difference(&covered);
    if missing.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("RCU callbacks offloaded from {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    if m.kernel
        .config
        .as_ref()
        .is_some_and(|c| !c.enabled("RCU_NOCB_CPU"))
    {
        return Finding::new(
            id,
            C,
            Severity::Warn,
            format!(
                "{} {} RCU callbacks and this kernel lacks CONFIG_RCU_NOCB_CPU",
                missing.named(),
                word(missing.len() as u64, "runs", "run")
            ),
            why,
        )
        .boot_fix("boot a kernel built with CONFIG_RCU_NOCB_CPU=y")
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("rcu_nocbs= does not cover {}", missing.named()),
        why,
    )
    .housekeeping_fix(t, true, |_| format!("boot with rcu_nocbs={}", t.cpus))
    .as_vec()
}

pub fn threads(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "cpus.threads";
    let why = "Every thread allowed on a real-time CPU can be scheduled there and preempt or delay the real-time work.";
    let p = &m.processes;
    // Per-CPU kernel threads (affinity locked) belong to their CPU; they are reported separately.
    let movable: Vec<_> = p
        .tasks
        .iter()
        .filter(|task| !task.affinity_locked && !task.affinity.intersection(&t.cpus).is_empty())
        .filter(|task| !task.affinity.is_subset(&t.cpus))
        .collect();
    let mut out = Vec::new();
    if movable.is_empty() {
        out.push(Finding::new(
            id,
            C,
            Severity::Ok,
            format!("no thread outside the checked CPUs may run on {}", t.cpus),
            why,
        ));
    } else {
        let kernel = movable.iter().filter(|t| t.kthread).count();
        out.push(
            Finding::new(
                id,
                C,
                Severity::Warn,
                format!(
                    "{} ({} user, {kernel} unbound kernel) may run on {}: {}",
                    count(movable.len() as u64, "thread", "threads"),
                    movable.len() - kernel,
                    t.cpus.named(),
                    thread_names(&movable)
                ),
                why,
            )
            .housekeeping_fix(t, false, |hk| format!(
                "move them to the housekeeping CPUs {hk} with a cpuset (tame apply) or taskset -a -p -c {hk} PID; at boot: isolcpus=domain,{}",
                t.cpus
            )),
        );
    }
    let rt: Vec<_> = p
        .realtime()
        .filter(|task| !task.affinity_locked && !task.affinity.intersection(&t.cpus).is_empty())
        .filter(|task| !task.affinity.is_subset(&t.cpus))
        .collect();
    if !rt.is_empty() {
        let sample = rt
            .iter()
            .take(6)
            .map(|t| format!("{} ({:?} {})", t.comm, t.policy, t.rt_priority))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(
            Finding::new(
                "cpus.rt_threads",
                C,
                Severity::Warn,
                format!("{} not confined to the checked CPUs may preempt work there: {sample}", count(rt.len() as u64, "real-time thread", "real-time threads")),
                "A real-time thread from elsewhere preempts any SCHED_OTHER work and competes with real-time work of equal priority.",
            )
            .housekeeping_fix(t, false, |hk| format!("confine them to the housekeeping CPUs: taskset -p -c {hk} PID (or tame apply)")),
        );
    }
    let bound = p.kthreads_bound_within(&t.cpus).count();
    out.push(Finding::new(
        "cpus.per_cpu_kthreads",
        C,
        Severity::Info,
        format!("{} bound to {} (ksoftirqd, migration, kworker, …)", count(bound as u64, "per-CPU kernel thread is", "per-CPU kernel threads are"), t.cpus.named()),
        "Per-CPU kernel threads cannot be moved; they run only when their CPU has work for them, which the other settings here reduce.",
    ));
    out
}

/// Up to six of the threads' names, user threads first, kernel threads in brackets as
/// `ps` shows them (`bash, sshd, [kworker/u4:2], …`): so the list is never empty.
fn thread_names(threads: &[&tame_host::process::Task]) -> String {
    let mut names: Vec<String> = Vec::new();
    for kernel in [false, true] {
        let mut these: Vec<String> = threads
            .iter()
            .filter(|t| t.kthread == kernel)
            .map(|t| {
                if kernel {
                    format!("[{}]", t.comm)
                } else {
                    t.comm.clone()
                }
            })
            .collect();
        these.sort_unstable();
        these.dedup();
        names.extend(these);
    }
    let more = if names.len() > 6 { ", …" } else { "" };
    names.truncate(6);
    format!("{}{more}", names.join(", "))
}

/// `is` for one CPU, `are` for more: the verb after [`CpuList::named`].
pub(crate) fn are(cpus: &CpuList) -> &'static str {
    word(cpus.len() as u64, "is", "are")
}
