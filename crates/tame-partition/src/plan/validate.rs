//! Validation: one function per rule. Errors stop the plan before anything is
//! written; warnings go with it. The order of the rules is the order of the
//! messages.

use tame_host::cgroup::{CgroupVersion, Cgroups};
use tame_host::power::{governor_path, pm_qos_path};
use tame_host::{CpuList, HostModel};

use super::power::IdleIneffective;
use super::DIR_PREFIX;
use crate::spec::{PartitionSpec, Role, Spec};

pub const NO_CPUSET: &str = "no cpuset controller: neither cgroup v1 cpuset nor cgroup v2 with cpuset is mounted — mount one (e.g. `mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset`)";

#[derive(Debug, Default)]
pub(super) struct Findings {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// One partition of the spec, checked against the host.
struct Partition<'a> {
    spec: &'a Spec,
    host: &'a HostModel,
    /// Its place in the spec: earlier partitions claim their names and CPUs first.
    index: usize,
    p: &'a PartitionSpec,
    who: String,
}

impl Partition<'_> {
    fn earlier(&self) -> &[PartitionSpec] {
        &self.spec.partitions[..self.index]
    }

    /// Its CPUs that are online (the only ones rules about CPU features look at).
    fn online_cpus(&self) -> CpuList {
        self.p.cpus.intersection(&self.host.cpus.online)
    }
}

type PartitionRule = fn(&Partition, &mut Findings);
type SpecRule = fn(&Spec, &HostModel, &mut Findings);

const PARTITION_RULES: &[PartitionRule] = &[
    name_names_a_cgroup,
    name_is_unique,
    cpus_not_empty,
    cpus_online,
    cpus_not_claimed_twice,
    mems_have_memory,
    irqs_fit_the_role,
    idle_limit_can_be_set,
    governor_available,
    watchdog_can_be_set,
    user_exists,
    group_exists,
    mem_bandwidth_possible,
];

const SPEC_RULES: &[SpecRule] = &[
    no_foreign_v1_cpuset_shares,
    cache_ways_fit,
    rt_runtime_in_range,
];

const WARNINGS: &[SpecRule] = &[
    idle_limit_takes_effect,
    isolated_cpu_0,
    unassigned_cpus,
    smt_siblings_split,
    managed_irqs_on_isolated,
    irqbalance_running,
];

pub(super) fn validate(spec: &Spec, host: &HostModel) -> Findings {
    let mut f = Findings::default();
    if spec.partitions.is_empty() {
        f.errors
            .push("no [[partition]] — add at least a system partition".into());
        return f;
    }
    exactly_one_system(spec, &mut f);
    if Cgroups::for_controller(&host.cgroups, "cpuset").is_none() {
        f.errors.push(NO_CPUSET.into());
    }
    for (index, p) in spec.partitions.iter().enumerate() {
        let check = Partition {
            spec,
            host,
            index,
            p,
            who: format!("partition {:?}", p.name),
        };
        for rule in PARTITION_RULES {
            rule(&check, &mut f);
        }
    }
    for rule in SPEC_RULES.iter().chain(WARNINGS) {
        rule(spec, host, &mut f);
    }
    f
}

/// "CPU 3 is" / "CPUs 3-5 are", for messages.
fn cpus_are(cpus: &CpuList) -> String {
    if cpus.len() == 1 {
        format!("CPU {cpus} is")
    } else {
        format!("CPUs {cpus} are")
    }
}

/// Every partition's CPUs together.
fn claimed(spec: &Spec) -> CpuList {
    spec.partitions
        .iter()
        .fold(CpuList::new(), |a, p| a.union(&p.cpus))
}

fn exactly_one_system(spec: &Spec, f: &mut Findings) {
    let systems = spec
        .partitions
        .iter()
        .filter(|p| p.role == Role::System)
        .count();
    if systems != 1 {
        f.errors.push(format!(
            "{systems} partitions have role = \"system\" — exactly one must, for the tasks, IRQs and kernel threads that are moved off the others"
        ));
    }
}

fn name_names_a_cgroup(c: &Partition, f: &mut Findings) {
    let name = &c.p.name;
    let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if name.is_empty() || !name.bytes().all(valid) {
        f.errors.push(format!(
            "{}: the name may only hold letters, digits, '-' and '_' (it names a cgroup)",
            c.who
        ));
    }
}

fn name_is_unique(c: &Partition, f: &mut Findings) {
    if c.earlier().iter().any(|q| q.name == c.p.name) {
        f.errors.push(format!(
            "{}: the name is used twice — give each partition its own",
            c.who
        ));
    }
}

fn cpus_not_empty(c: &Partition, f: &mut Findings) {
    if c.p.cpus.is_empty() {
        f.errors.push(format!(
            "{}: cpus is empty — give it at least one CPU",
            c.who
        ));
    }
}

fn cpus_online(c: &Partition, f: &mut Findings) {
    let online = &c.host.cpus.online;
    let offline = c.p.cpus.difference(online);
    if !offline.is_empty() {
        f.errors.push(format!(
            "{}: {} not online (online: {online}) — use online CPUs",
            c.who,
            cpus_are(&offline)
        ));
    }
}

fn cpus_not_claimed_twice(c: &Partition, f: &mut Findings) {
    let before = c
        .earlier()
        .iter()
        .fold(CpuList::new(), |a, q| a.union(&q.cpus));
    let overlap = c.p.cpus.intersection(&before);
    if !overlap.is_empty() {
        f.errors.push(format!(
            "{}: {} already in another partition — partitions must not overlap",
            c.who,
            cpus_are(&overlap)
        ));
    }
}

fn mems_have_memory(c: &Partition, f: &mut Findings) {
    let Some(mems) = &c.p.mems else {
        return;
    };
    let with_memory = c.host.nodes_with_memory();
    let missing = mems.difference(&with_memory);
    if !missing.is_empty() {
        f.errors.push(format!(
            "{}: memory node {missing} has no memory (nodes with memory: {with_memory}) — drop it from mems",
            c.who
        ));
    }
    if mems.is_empty() {
        f.errors.push(format!(
            "{}: mems is empty — name at least one memory node, or leave mems out",
            c.who
        ));
    }
}

fn irqs_fit_the_role(c: &Partition, f: &mut Findings) {
    match (c.p.role, c.p.irqs) {
        (Role::Isolated, Some(true)) => f.errors.push(format!(
            "{}: an isolated partition takes no device IRQs — remove `irqs = true` or use role = \"shared\"",
            c.who
        )),
        (Role::System, Some(false)) => f.errors.push(format!(
            "{}: the system partition must take the movable IRQs — remove `irqs = false`",
            c.who
        )),
        _ => {}
    }
}

/// An idle limit needs pm_qos_resume_latency_us or cpuidle states on every CPU.
fn idle_limit_can_be_set(c: &Partition, f: &mut Findings) {
    match c.p.idle_limit() {
        Err(e) => f.errors.push(format!("{}: {e}", c.who)),
        Ok(None) => {}
        Ok(Some(_)) => {
            let lacking = c.online_cpus().iter().find(|&cpu| {
                !c.host.knobs.exists(&pm_qos_path(cpu)) && c.host.power.idle_states(cpu).is_empty()
            });
            if let Some(cpu) = lacking {
                f.errors.push(format!(
                    "{}: CPU {cpu} has neither pm_qos_resume_latency_us nor cpuidle states — an idle limit cannot be set here; remove `idle`",
                    c.who
                ));
            }
        }
    }
}

fn governor_available(c: &Partition, f: &mut Findings) {
    let Some(g) = &c.p.governor else {
        return;
    };
    let knobs = &c.host.knobs;
    for cpu in c.online_cpus().iter() {
        match knobs.available_governors(cpu) {
            // A driver that does not list its governors: the write will tell.
            None if knobs.exists(&governor_path(cpu)) => {}
            None => {
                f.errors.push(format!(
                    "{}: CPU {cpu} has no cpufreq (no frequency scaling on this machine) — remove `governor`",
                    c.who
                ));
                return;
            }
            Some(av) if !av.contains(g) => {
                f.errors.push(format!(
                    "{}: governor {g:?} is not available on CPU {cpu} (available: {}) — pick one of those",
                    c.who,
                    av.join(", ")
                ));
                return;
            }
            Some(_) => {}
        }
    }
}

fn watchdog_can_be_set(c: &Partition, f: &mut Findings) {
    if c.p.watchdog.is_some() && !c.host.knobs.exists(tame_host::sched::WATCHDOG_CPUMASK) {
        f.errors.push(format!(
            "{}: this kernel has no kernel.watchdog_cpumask (built without the lockup detectors, so none runs here) — remove `watchdog`",
            c.who
        ));
    }
}

fn user_exists(c: &Partition, f: &mut Findings) {
    if let Some(user) = &c.p.user {
        if c.host.accounts.uid_of(user).is_none() {
            f.errors.push(format!(
                "{}: user {user:?} does not exist (not in /etc/passwd) — name an existing user",
                c.who
            ));
        }
    }
}

fn group_exists(c: &Partition, f: &mut Findings) {
    if let Some(group) = &c.p.group {
        if c.host.accounts.gid_of(group).is_none() {
            f.errors.push(format!(
                "{}: group {group:?} does not exist (not in /etc/group) — name an existing group",
                c.who
            ));
        }
    }
}

fn mem_bandwidth_possible(c: &Partition, f: &mut Findings) {
    let Some(mb) = c.p.mem_bandwidth else {
        return;
    };
    if !(1..=100).contains(&mb) {
        f.errors.push(format!(
            "{}: mem_bandwidth = {mb} is not a percentage from 1 to 100",
            c.who
        ));
    }
    let mb_resource = c
        .host
        .tracing
        .resctrl
        .as_ref()
        .and_then(|r| r.resource("MB"));
    if mb_resource.is_none() {
        f.errors.push(format!(
            "{}: mem_bandwidth needs resctrl with memory bandwidth allocation (MB), which this machine does not offer — remove it",
            c.who
        ));
    }
}

/// v1 refuses cpu_exclusive next to a sibling cpuset that shares CPUs.
fn no_foreign_v1_cpuset_shares(spec: &Spec, host: &HostModel, f: &mut Findings) {
    let cpuset = Cgroups::for_controller(&host.cgroups, "cpuset");
    if cpuset.map(|c| c.version()) != Some(CgroupVersion::V1) {
        return;
    }
    let claimed = claimed(spec);
    let foreign = host.cgroups.cpusets.iter().filter(|c| {
        c.version == CgroupVersion::V1
            && c.path.matches('/').count() == 1
            && c.path != "/"
            && !c.path.starts_with(&format!("/{DIR_PREFIX}"))
    });
    for cpuset in foreign {
        let path = &cpuset.path;
        let shared = cpuset
            .cpus
            .clone()
            .unwrap_or_default()
            .intersection(&claimed);
        if !shared.is_empty() {
            f.errors.push(format!(
                "cpuset {path} (made by someone else) uses CPU {shared}, which tame's exclusive cpusets need — shrink or remove {path}, or leave those CPUs out of the spec"
            ));
        }
    }
}

fn cache_ways_fit(spec: &Spec, host: &HostModel, f: &mut Findings) {
    // Checked: huge counts would wrap to a small sum and pass.
    let Some(ways) = spec
        .partitions
        .iter()
        .filter_map(|p| p.cache_ways)
        .try_fold(0u32, u32::checked_add)
    else {
        f.errors.push(
            "cache_ways add up to more than 4294967295 — give each partition a count of L3 ways below the hardware's".into(),
        );
        return;
    };
    if ways == 0 {
        return;
    }
    match host.tracing.resctrl.as_ref().and_then(|r| r.l3_ways()) {
        None => f.errors.push(
            "cache_ways needs resctrl with L3 cache allocation, which this machine does not offer (is /sys/fs/resctrl mounted?) — remove cache_ways".into(),
        ),
        Some(hw) if ways >= hw => f.errors.push(format!(
            "cache_ways add up to {ways}, beyond the hardware: the L3 has {hw} ways and the system keeps at least one — ask for at most {} in all",
            hw - 1
        )),
        Some(_) => {}
    }
}

fn rt_runtime_in_range(spec: &Spec, host: &HostModel, f: &mut Findings) {
    let Some(rt) = spec.rt_runtime_us else {
        return;
    };
    let period = host
        .sched
        .rt_period_us
        .and_then(|p| i64::try_from(p).ok())
        .unwrap_or(1_000_000);
    if rt == 0 {
        // The kernel accepts 0 and then runs no real-time thread at all.
        f.errors.push(format!(
            "rt_runtime_us = 0 gives real-time threads no CPU time: it stops every real-time thread, your own loop included — write -1 for no RT throttling, or a positive runtime up to the period ({period})"
        ));
    } else if rt != -1 && !(1..=period).contains(&rt) {
        f.errors.push(format!(
            "rt_runtime_us = {rt} must be -1 (no RT throttling) or from 1 to the period ({period})"
        ));
    }
}

/// An idle limit the host ignores (no cpuidle driver, or `idle=` at boot): said once per
/// partition, with what works instead.
fn idle_limit_takes_effect(spec: &Spec, host: &HostModel, f: &mut Findings) {
    let Some(why) = IdleIneffective::on(host) else {
        return;
    };
    for p in &spec.partitions {
        if let (Ok(Some(_)), Some(idle)) = (p.idle_limit(), p.idle.as_deref()) {
            f.warnings.push(why.warning(&p.name, idle.trim()));
        }
    }
}

fn isolated_cpu_0(spec: &Spec, _host: &HostModel, f: &mut Findings) {
    for p in &spec.partitions {
        if p.role == Role::Isolated && p.cpus.contains(0) {
            f.warnings.push(format!(
                "partition {:?} isolates CPU 0, which often carries housekeeping the kernel cannot move (boot CPU timers, some IRQs)",
                p.name
            ));
        }
    }
}

/// Only with no errors: an error often is the reason a CPU is left out.
fn unassigned_cpus(spec: &Spec, host: &HostModel, f: &mut Findings) {
    let unassigned = host.cpus.online.difference(&claimed(spec));
    if !unassigned.is_empty() && f.errors.is_empty() {
        f.warnings.push(format!(
            "CPU {unassigned} belongs to no partition: ordinary tasks leave it, so it will mostly idle"
        ));
    }
}

fn smt_siblings_split(spec: &Spec, host: &HostModel, f: &mut Findings) {
    for p in &spec.partitions {
        for cpu in p.cpus.iter() {
            let Some(sib) = host.cpus.cpu(cpu).map(|c| &c.thread_siblings) else {
                continue;
            };
            let outside = sib.difference(&p.cpus);
            if !outside.is_empty() && cpu == sib.first().unwrap_or(cpu) {
                f.warnings.push(format!(
                    "partition {:?}: CPU {cpu} shares a core with CPU {outside} outside it (SMT siblings split: they compete for the core)",
                    p.name
                ));
            }
        }
    }
}

fn managed_irqs_on_isolated(spec: &Spec, host: &HostModel, f: &mut Findings) {
    let isolated = spec.isolated_cpus();
    let stuck: Vec<_> = host
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed)
        .filter(|i| {
            i.fires_on()
                .is_some_and(|c| !c.intersection(&isolated).is_empty())
        })
        .collect();
    if stuck.is_empty() {
        return;
    }
    let names: Vec<String> = stuck
        .iter()
        .map(|i| format!("IRQ {} ({})", i.number, i.name))
        .collect();
    let busy = host
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed)
        .filter_map(|i| i.fires_on())
        .fold(CpuList::new(), |a, c| a.union(c));
    let free = host.cpus.online.difference(&busy);
    let advice = if free.len() >= isolated.len() && !free.is_empty() {
        // Prefer high CPUs: CPU 0 carries the most housekeeping.
        let mut candidates: Vec<u32> = free.iter().collect();
        candidates.reverse();
        let pick: CpuList = candidates.into_iter().take(isolated.len()).collect();
        format!("isolate CPU {pick} instead (no kernel-managed IRQ fires there), or")
    } else {
        "there is no CPU without them;".to_string()
    };
    f.warnings.push(format!(
        "{} {} kernel-managed and cannot leave isolated CPU {isolated} at run time — {advice} boot with isolcpus=managed_irq,domain,{isolated}",
        names.join(", "),
        if names.len() == 1 { "is" } else { "are" },
    ));
}

fn irqbalance_running(spec: &Spec, host: &HostModel, f: &mut Findings) {
    if host.processes.irqbalance.running() {
        let isolated = spec.isolated_cpus();
        f.warnings.push(format!(
            "irqbalance is running and may move IRQs back onto CPU {isolated} — set IRQBALANCE_BANNED_CPULIST={isolated} in its configuration and restart it, or stop it"
        ));
    }
}
