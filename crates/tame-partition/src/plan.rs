//! Validation and the plan: what apply will write, compared with what is there now.

use serde::Serialize;
use tame_host::journal::Ownership;
use tame_host::{CpuList, Root};

use crate::hostview::{self, CgroupVersion, HostView, Task};
use crate::spec::{IdleLimit, Role, Spec};

/// Version of the JSON shape of [`Plan`].
pub const PLAN_SCHEMA: u32 = 1;
/// Prefix of every directory tame creates (cgroups, resctrl groups).
pub const DIR_PREFIX: &str = "tame-";

/// How a value is compared with what the kernel prints, so a second apply sees no change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    Text,
    CpuList,
    CpuMask,
}

/// One step of apply, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    Mkdir {
        path: String,
        /// The cgroup's task list and its parent's (revert hands tasks back before rmdir).
        #[serde(skip)]
        members: Option<(String, String)>,
        why: String,
    },
    Write {
        path: String,
        /// `None`: the file does not exist yet (created with its directory).
        old: Option<String>,
        new: String,
        why: String,
        /// What to write on revert when writing the old value back would not work.
        #[serde(skip)]
        restore_with: Option<String>,
        /// The kernel may refuse this one without failing apply (IRQs it manages).
        #[serde(skip)]
        may_be_refused: bool,
    },
    /// Owner, group and mode of a cgroup's task list: who may put tasks there.
    Owner {
        path: String,
        /// `uid:gid:mode`; `None` when the file comes with a directory apply creates.
        old: Option<String>,
        new: String,
        #[serde(skip)]
        ownership: Ownership,
        why: String,
    },
    /// Attach every movable task listed in `from` to `to` (the list is read again at apply).
    MoveTasks {
        from: String,
        to: String,
        tasks: Vec<Task>,
        why: String,
    },
}

/// A boot parameter to add; only those this kernel supports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BootParameter {
    pub parameter: String,
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub schema: u32,
    pub cgroup: Option<CgroupVersion>,
    pub isolated_cpus: CpuList,
    pub runtime: Vec<Step>,
    pub needs_reboot: Vec<BootParameter>,
    pub warnings: Vec<String>,
    /// Kernel threads whose placement the kernel keeps to itself (per-CPU threads;
    /// unbound workqueue workers, which follow the workqueue cpumask), by name.
    pub stay: Vec<Task>,
}

impl Plan {
    /// True when apply has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.runtime.iter().all(|s| match s {
            Step::MoveTasks { tasks, .. } => tasks.is_empty(),
            _ => false,
        })
    }
}

/// Everything wrong with a spec on this host, found before anything is written.
#[derive(Debug, thiserror::Error)]
#[error("the spec cannot be applied here:\n  - {}", .errors.join("\n  - "))]
pub struct Invalid {
    pub errors: Vec<String>,
}

/// Validate `spec` against the host and work out the steps to apply it.
pub fn plan(spec: &Spec, root: &Root, host: &HostView) -> Result<Plan, Invalid> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    validate(spec, root, host, &mut errors, &mut warnings);
    if !errors.is_empty() {
        return Err(Invalid { errors });
    }
    let mut b = Builder {
        root,
        steps: Vec::new(),
    };
    let mut stay = Vec::new();
    let home = host
        .cpuset
        .clone()
        .expect("validated: a cpuset controller exists");
    match home.version {
        CgroupVersion::V1 => cgroup_v1(spec, host, &home.mount, &mut b, &mut stay),
        CgroupVersion::V2 => cgroup_v2(spec, host, &home, &mut b),
    }
    owners(spec, root, home.version, &home.mount, &mut b);
    irqs(spec, host, &mut b);
    kernel_knobs(spec, host, &mut b);
    power(spec, root, host, &mut b);
    resctrl(spec, host, &mut b);
    Ok(Plan {
        schema: PLAN_SCHEMA,
        cgroup: Some(home.version),
        isolated_cpus: spec.isolated_cpus(),
        runtime: b.steps,
        needs_reboot: boot_parameters(spec, root, host),
        warnings,
        stay,
    })
}

fn validate(
    spec: &Spec,
    root: &Root,
    host: &HostView,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    if spec.partitions.is_empty() {
        errors.push("no [[partition]] — add at least a system partition".into());
        return;
    }
    let systems = spec
        .partitions
        .iter()
        .filter(|p| p.role == Role::System)
        .count();
    if systems != 1 {
        errors.push(format!(
            "{systems} partitions have role = \"system\" — exactly one must, for the tasks, IRQs and kernel threads that are moved off the others"
        ));
    }
    if host.cpuset.is_none() {
        errors.push("no cpuset controller: neither cgroup v1 cpuset nor cgroup v2 with cpuset is mounted — mount one (e.g. `mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset`)".into());
    }
    let mut seen_names = Vec::new();
    let mut claimed = CpuList::new();
    for p in &spec.partitions {
        let who = format!("partition {:?}", p.name);
        if p.name.is_empty()
            || !p
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            errors.push(format!(
                "{who}: the name may only hold letters, digits, '-' and '_' (it names a cgroup)"
            ));
        }
        if seen_names.contains(&&p.name) {
            errors.push(format!(
                "{who}: the name is used twice — give each partition its own"
            ));
        }
        seen_names.push(&p.name);
        if p.cpus.is_empty() {
            errors.push(format!("{who}: cpus is empty — give it at least one CPU"));
        }
        let offline = p.cpus.difference(&host.online);
        if !offline.is_empty() {
            errors.push(format!(
                "{who}: {} not online (online: {}) — use online CPUs",
                cpus_are(&offline),
                host.online
            ));
        }
        let overlap = p.cpus.intersection(&claimed);
        if !overlap.is_empty() {
            errors.push(format!(
                "{who}: {} already in another partition — partitions must not overlap",
                cpus_are(&overlap)
            ));
        }
        claimed = claimed.union(&p.cpus);
        if let Some(mems) = &p.mems {
            let missing = mems.difference(&host.nodes_with_memory);
            if !missing.is_empty() {
                errors.push(format!(
                    "{who}: memory node {missing} has no memory (nodes with memory: {}) — drop it from mems",
                    host.nodes_with_memory
                ));
            }
            if mems.is_empty() {
                errors.push(format!(
                    "{who}: mems is empty — name at least one memory node, or leave mems out"
                ));
            }
        }
        match (p.role, p.irqs) {
            (Role::Isolated, Some(true)) => errors.push(format!(
                "{who}: an isolated partition takes no device IRQs — remove `irqs = true` or use role = \"shared\""
            )),
            (Role::System, Some(false)) => errors.push(format!(
                "{who}: the system partition must take the movable IRQs — remove `irqs = false`"
            )),
            _ => {}
        }
        match p.idle_limit() {
            Err(e) => errors.push(format!("{who}: {e}")),
            Ok(Some(_)) => {
                for cpu in p.cpus.intersection(&host.online).iter() {
                    if !root.exists(hostview::pm_qos_path(cpu)) && host.idle_states(cpu).is_empty()
                    {
                        errors.push(format!(
                            "{who}: CPU {cpu} has neither pm_qos_resume_latency_us nor cpuidle states — an idle limit cannot be set here; remove `idle`"
                        ));
                        break;
                    }
                }
            }
            Ok(None) => {}
        }
        if let Some(g) = &p.governor {
            for cpu in p.cpus.intersection(&host.online).iter() {
                match hostview::available_governors(root, cpu) {
                    // A driver that does not list its governors: the write will tell.
                    None if root.exists(hostview::governor_path(cpu)) => {}
                    None => {
                        errors.push(format!(
                            "{who}: CPU {cpu} has no cpufreq (no frequency scaling on this machine) — remove `governor`"
                        ));
                        break;
                    }
                    Some(av) if !av.contains(g) => {
                        errors.push(format!(
                            "{who}: governor {g:?} is not available on CPU {cpu} (available: {}) — pick one of those",
                            av.join(", ")
                        ));
                        break;
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(user) = &p.user {
            let passwd = root.read("/etc/passwd").unwrap_or_default();
            if hostview::user_id(&passwd, user).is_none() {
                errors.push(format!("{who}: user {user:?} does not exist (not in /etc/passwd) — name an existing user"));
            }
        }
        if let Some(group) = &p.group {
            let groups = root.read("/etc/group").unwrap_or_default();
            if hostview::group_id(&groups, group).is_none() {
                errors.push(format!("{who}: group {group:?} does not exist (not in /etc/group) — name an existing group"));
            }
        }
        if let Some(mb) = p.mem_bandwidth {
            if !(1..=100).contains(&mb) {
                errors.push(format!(
                    "{who}: mem_bandwidth = {mb} is not a percentage from 1 to 100"
                ));
            }
            if !host.resctrl.as_ref().is_some_and(|r| r.has_mb) {
                errors.push(format!(
                    "{who}: mem_bandwidth needs resctrl with memory bandwidth allocation (MB), which this machine does not offer — remove it"
                ));
            }
        }
        if p.role == Role::Isolated && p.cpus.contains(0) {
            warnings.push(format!(
                "{who} isolates CPU 0, which often carries housekeeping the kernel cannot move (boot CPU timers, some IRQs)"
            ));
        }
    }
    if host.cpuset.as_ref().map(|c| c.version) == Some(CgroupVersion::V1) {
        // v1 refuses cpu_exclusive next to a sibling cpuset that shares CPUs.
        for (path, cpus) in &host.other_v1_cpusets {
            let shared = cpus.intersection(&claimed);
            if !shared.is_empty() {
                errors.push(format!(
                    "cpuset {path} (made by someone else) uses CPU {shared}, which tame's exclusive cpusets need — shrink or remove {path}, or leave those CPUs out of the spec"
                ));
            }
        }
    }
    let ways: u32 = spec.partitions.iter().filter_map(|p| p.cache_ways).sum();
    if ways > 0 {
        match host.resctrl.as_ref().and_then(|r| r.l3_ways) {
            None => errors.push(
                "cache_ways needs resctrl with L3 cache allocation, which this machine does not offer (is /sys/fs/resctrl mounted?) — remove cache_ways".into(),
            ),
            Some(hw) if ways >= hw => errors.push(format!(
                "cache_ways add up to {ways}, beyond the hardware: the L3 has {hw} ways and the system keeps at least one — ask for at most {} in all",
                hw - 1
            )),
            Some(_) => {}
        }
    }
    if let Some(rt) = spec.rt_runtime_us {
        let period = root
            .read_trimmed(hostview::SCHED_RT_PERIOD)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or(1_000_000);
        if rt != -1 && !(0..=period).contains(&rt) {
            errors.push(format!(
                "rt_runtime_us = {rt} must be -1 (no RT throttling) or from 0 to the period ({period})"
            ));
        }
    }
    let unassigned = host.online.difference(&claimed);
    if !unassigned.is_empty() && errors.is_empty() {
        warnings.push(format!(
            "CPU {unassigned} belongs to no partition: ordinary tasks leave it, so it will mostly idle"
        ));
    }
    smt_warnings(spec, host, warnings);
    managed_irq_warnings(spec, host, warnings);
    if host.irqbalance_running {
        warnings.push(format!(
            "irqbalance is running and may move IRQs back onto CPU {} — set IRQBALANCE_BANNED_CPULIST={} in its configuration and restart it, or stop it",
            spec.isolated_cpus(),
            spec.isolated_cpus()
        ));
    }
}

/// "CPU 3 is" / "CPUs 3-5 are", for messages.
fn cpus_are(cpus: &CpuList) -> String {
    if cpus.len() == 1 {
        format!("CPU {cpus} is")
    } else {
        format!("CPUs {cpus} are")
    }
}

fn smt_warnings(spec: &Spec, host: &HostView, warnings: &mut Vec<String>) {
    for p in &spec.partitions {
        for cpu in p.cpus.iter() {
            let Some(sib) = host.thread_siblings.get(&cpu) else {
                continue;
            };
            let outside = sib.difference(&p.cpus);
            if !outside.is_empty() && cpu == sib.first().unwrap_or(cpu) {
                warnings.push(format!(
                    "partition {:?}: CPU {cpu} shares a core with CPU {outside} outside it (SMT siblings split: they compete for the core)",
                    p.name
                ));
            }
        }
    }
}

fn managed_irq_warnings(spec: &Spec, host: &HostView, warnings: &mut Vec<String>) {
    let isolated = spec.isolated_cpus();
    let stuck: Vec<&hostview::IrqInfo> = host
        .irqs
        .iter()
        .filter(|i| i.managed)
        .filter(|i| {
            i.effective
                .as_ref()
                .or(i.affinity.as_ref())
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
        .iter()
        .filter(|i| i.managed)
        .filter_map(|i| i.effective.as_ref().or(i.affinity.as_ref()))
        .fold(CpuList::new(), |a, c| a.union(c));
    let free = host.online.difference(&busy);
    let advice = if free.len() >= isolated.len() && !free.is_empty() {
        // Prefer high CPUs: CPU 0 carries the most housekeeping.
        let mut candidates: Vec<u32> = free.iter().collect();
        candidates.reverse();
        let pick: CpuList = candidates.into_iter().take(isolated.len()).collect();
        format!("isolate CPU {pick} instead (no kernel-managed IRQ fires there), or")
    } else {
        "there is no CPU without them;".to_string()
    };
    warnings.push(format!(
        "{} {} kernel-managed and cannot leave isolated CPU {isolated} at run time — {advice} boot with isolcpus=managed_irq,domain,{isolated}",
        names.join(", "),
        if names.len() == 1 { "is" } else { "are" },
    ));
}

struct Builder<'a> {
    root: &'a Root,
    steps: Vec<Step>,
}

impl Builder<'_> {
    fn current(&self, path: &str) -> Option<String> {
        self.root.read(path).ok()
    }

    /// Add a write unless the file already holds the value.
    fn write(&mut self, path: String, new: String, kind: ValueKind, why: &str) {
        self.write_full(path, new, kind, why, None, false);
    }

    fn write_full(
        &mut self,
        path: String,
        new: String,
        kind: ValueKind,
        why: &str,
        restore_with: Option<String>,
        may_be_refused: bool,
    ) {
        let old = self.current(&path);
        if old.as_deref().is_some_and(|o| same_value(o, &new, kind)) {
            return;
        }
        self.steps.push(Step::Write {
            path,
            old,
            new,
            why: why.to_string(),
            restore_with,
            may_be_refused,
        });
    }

    /// Give `path` this owner and mode unless it has them (a file in a directory apply
    /// creates is compared with nothing: it is new).
    fn owner(&mut self, path: String, new: Ownership, why: &str) {
        let old = Ownership::of(&self.root.path(&path)).ok();
        if old == Some(new) {
            return;
        }
        let field = |o: &Ownership| format!("{}:{}:{:o}", o.uid, o.gid, o.mode);
        self.steps.push(Step::Owner {
            path,
            old: old.as_ref().map(field),
            new: field(&new),
            ownership: new,
            why: why.to_string(),
        });
    }

    fn mkdir(&mut self, path: String, members: Option<(String, String)>, why: &str) {
        if self.root.exists(&path) {
            return;
        }
        self.steps.push(Step::Mkdir {
            path,
            members,
            why: why.to_string(),
        });
    }
}

/// Whether the kernel's printed value `current` already is `wanted`.
pub fn same_value(current: &str, wanted: &str, kind: ValueKind) -> bool {
    let (c, w) = (current.trim(), wanted.trim());
    match kind {
        ValueKind::Text => c == w,
        ValueKind::CpuList => match (CpuList::parse(c), CpuList::parse(w)) {
            (Ok(a), Ok(b)) => a == b,
            _ => c == w,
        },
        ValueKind::CpuMask => match (CpuList::parse_mask(c), CpuList::parse_mask(w)) {
            (Ok(a), Ok(b)) => a == b,
            _ => c == w,
        },
    }
}

fn mems_of(p: &crate::spec::PartitionSpec, host: &HostView) -> CpuList {
    p.mems
        .clone()
        .unwrap_or_else(|| host.nodes_with_memory.clone())
}

fn cgroup_v1(spec: &Spec, host: &HostView, mount: &str, b: &mut Builder, stay: &mut Vec<Task>) {
    let root_tasks = format!("{mount}/tasks");
    for p in &spec.partitions {
        let dir = format!("{mount}/{DIR_PREFIX}{}", p.name);
        let tasks = format!("{dir}/tasks");
        b.mkdir(
            dir.clone(),
            Some((tasks, root_tasks.clone())),
            "a cpuset for the partition",
        );
        b.write(
            format!("{dir}/cpuset.cpus"),
            p.cpus.to_string(),
            ValueKind::CpuList,
            "the partition's CPUs",
        );
        b.write(
            format!("{dir}/cpuset.mems"),
            mems_of(p, host).to_string(),
            ValueKind::CpuList,
            "the partition's memory nodes",
        );
        b.write(
            format!("{dir}/cpuset.cpu_exclusive"),
            "1".into(),
            ValueKind::Text,
            "no other cpuset shares these CPUs",
        );
        let (balance, why) = if p.role == Role::Isolated {
            (
                "0",
                "no scheduler domain: nothing is pulled onto isolated CPUs",
            )
        } else {
            ("1", "load balancing within the partition")
        };
        b.write(
            format!("{dir}/cpuset.sched_load_balance"),
            balance.into(),
            ValueKind::Text,
            why,
        );
    }
    if let Some(system) = spec.system() {
        let to = format!("{mount}/{DIR_PREFIX}{}/tasks", system.name);
        let (movable, pinned) = tasks_in(b.root, &root_tasks);
        stay.extend(pinned);
        if !movable.is_empty() {
            b.steps.push(Step::MoveTasks {
                from: root_tasks.clone(),
                to,
                tasks: movable,
                why: "every movable task and kernel thread goes to the system partition".into(),
            });
        }
    }
    b.write(
        format!("{mount}/cpuset.sched_load_balance"),
        "0".into(),
        ValueKind::Text,
        "the root must not balance across partitions",
    );
}

/// The tasks in a cgroup task list, split into movable ones and those the kernel keeps.
pub fn tasks_in(root: &Root, list: &str) -> (Vec<Task>, Vec<Task>) {
    hostview::read_ids(root, list)
        .into_iter()
        .map(|tid| hostview::read_task(root, tid))
        .partition(|t| !t.pinned_by_kernel)
}

fn cgroup_v2(spec: &Spec, host: &HostView, home: &hostview::CpusetHome, b: &mut Builder) {
    let mount = &home.mount;
    if !home.subtree_has_cpuset && spec.partitions.iter().any(|p| p.role != Role::System) {
        b.write_full(
            format!("{mount}/cgroup.subtree_control"),
            "+cpuset".into(),
            ValueKind::Text,
            "enable cpusets for child cgroups",
            Some("-cpuset".into()),
            false,
        );
    }
    for p in spec.partitions.iter().filter(|p| p.role != Role::System) {
        let dir = format!("{mount}/{DIR_PREFIX}{}", p.name);
        b.mkdir(
            dir.clone(),
            Some((
                format!("{dir}/cgroup.procs"),
                format!("{mount}/cgroup.procs"),
            )),
            "a cgroup for the partition",
        );
        b.write(
            format!("{dir}/cpuset.cpus"),
            p.cpus.to_string(),
            ValueKind::CpuList,
            "the partition's CPUs",
        );
        b.write(
            format!("{dir}/cpuset.mems"),
            mems_of(p, host).to_string(),
            ValueKind::CpuList,
            "the partition's memory nodes",
        );
        // A valid partition takes its CPUs away from every other cgroup: no task moves needed.
        let kind = if p.role == Role::Isolated && host.v2_isolated_partitions() {
            "isolated"
        } else {
            "root"
        };
        b.write(
            format!("{dir}/cpuset.cpus.partition"),
            kind.into(),
            ValueKind::Text,
            "a partition: exclusive CPUs (isolated: no load balancing)",
        );
    }
}

/// Who may put tasks into a partition: its cgroup task list gets the spec's user
/// and group, group-writable.
fn owners(spec: &Spec, root: &Root, version: CgroupVersion, mount: &str, b: &mut Builder) {
    let passwd = root.read("/etc/passwd").unwrap_or_default();
    let groups = root.read("/etc/group").unwrap_or_default();
    for p in &spec.partitions {
        if p.user.is_none() && p.group.is_none() {
            continue;
        }
        // The v2 system partition is the root cgroup, which tame leaves alone.
        if version == CgroupVersion::V2 && p.role == Role::System {
            continue;
        }
        let list = match version {
            CgroupVersion::V1 => "tasks",
            CgroupVersion::V2 => "cgroup.procs",
        };
        let uid = p
            .user
            .as_deref()
            .and_then(|u| hostview::user_id(&passwd, u));
        let gid = p
            .group
            .as_deref()
            .and_then(|g| hostview::group_id(&groups, g));
        b.owner(
            format!("{mount}/{DIR_PREFIX}{}/{list}", p.name),
            Ownership {
                uid: uid.unwrap_or(0),
                gid: gid.unwrap_or(0),
                mode: 0o664,
            },
            "who may put their tasks into the partition",
        );
    }
}

/// Where movable IRQs may go.
pub fn irq_cpus(spec: &Spec) -> CpuList {
    spec.partitions
        .iter()
        .filter(|p| p.accepts_irqs())
        .fold(CpuList::new(), |a, p| a.union(&p.cpus))
}

fn irqs(spec: &Spec, host: &HostView, b: &mut Builder) {
    let target = irq_cpus(spec);
    for irq in &host.irqs {
        // The kernel refuses these (EIO); the plan warned about them.
        if irq.managed {
            continue;
        }
        let Some(current) = &irq.affinity else {
            continue;
        };
        // Keep a deliberate narrower pin when it already fits.
        let kept = current.intersection(&target);
        let new = if kept.is_empty() {
            target.clone()
        } else {
            kept
        };
        if &new == current {
            continue;
        }
        b.write_full(
            format!("{}/{}/smp_affinity_list", hostview::PROC_IRQ, irq.number),
            new.to_string(),
            ValueKind::CpuList,
            &format!("IRQ {} ({}) off isolated CPUs", irq.number, irq.name),
            None,
            true,
        );
    }
    if b.root.exists(hostview::DEFAULT_SMP_AFFINITY) {
        b.write(
            hostview::DEFAULT_SMP_AFFINITY.into(),
            target.to_mask(host.nr_cpu_ids()),
            ValueKind::CpuMask,
            "new IRQs start off isolated CPUs",
        );
    }
}

fn kernel_knobs(spec: &Spec, host: &HostView, b: &mut Builder) {
    let system = spec.cpus_of(Role::System);
    if b.root.exists(hostview::WORKQUEUE_CPUMASK) {
        b.write(
            hostview::WORKQUEUE_CPUMASK.into(),
            system.to_mask(host.nr_cpu_ids()),
            ValueKind::CpuMask,
            "unbound workqueue work runs on the system partition",
        );
    }
    let has_isolated = !spec.isolated_cpus().is_empty();
    let migration = spec.timer_migration.or((has_isolated).then_some(false));
    if let Some(on) = migration {
        if b.root.exists(hostview::TIMER_MIGRATION) {
            b.write(
                hostview::TIMER_MIGRATION.into(),
                if on { "1" } else { "0" }.into(),
                ValueKind::Text,
                "timers are not pulled onto busy isolated CPUs",
            );
        }
    }
    if let Some(rt) = spec.rt_runtime_us {
        b.write(
            hostview::SCHED_RT_RUNTIME.into(),
            rt.to_string(),
            ValueKind::Text,
            "RT throttling as the spec asks",
        );
    }
}

fn power(spec: &Spec, root: &Root, host: &HostView, b: &mut Builder) {
    for p in &spec.partitions {
        let limit = p.idle_limit().ok().flatten();
        for cpu in p.cpus.iter() {
            if let Some(limit) = limit {
                let qos = hostview::pm_qos_path(cpu);
                if root.exists(&qos) {
                    // "n/a" is the kernel's spelling of a zero latency limit: poll only.
                    let value = match limit {
                        IdleLimit::Poll => "n/a".to_string(),
                        IdleLimit::MaxLatencyUs(us) => us.to_string(),
                    };
                    b.write(qos, value, ValueKind::Text, "limit idle exit latency");
                } else {
                    let max = match limit {
                        IdleLimit::Poll => 0,
                        IdleLimit::MaxLatencyUs(us) => u64::from(us),
                    };
                    for state in host.idle_states(cpu) {
                        if state.latency_us > max && state.name != "POLL" {
                            b.write(
                                hostview::idle_disable_path(cpu, state.index),
                                "1".into(),
                                ValueKind::Text,
                                "disable idle states deeper than the limit",
                            );
                        }
                    }
                }
            }
            if let Some(g) = &p.governor {
                b.write(
                    hostview::governor_path(cpu),
                    g.clone(),
                    ValueKind::Text,
                    "cpufreq governor",
                );
            }
        }
    }
}

fn ways_mask(low: u32, count: u32) -> u64 {
    if count == 0 {
        return 0;
    }
    ((1u64 << count) - 1) << low
}

fn resctrl(spec: &Spec, host: &HostView, b: &mut Builder) {
    let Some(rc) = &host.resctrl else {
        return;
    };
    let wants: Vec<_> = spec
        .partitions
        .iter()
        .filter(|p| p.cache_ways.is_some() || p.mem_bandwidth.is_some())
        .collect();
    if wants.is_empty() {
        return;
    }
    let hw = rc.l3_ways.unwrap_or(0);
    let reserved: u32 = wants.iter().filter_map(|p| p.cache_ways).sum();
    let line = |res: &str, doms: &[u32], value: &str| {
        let parts: Vec<String> = doms.iter().map(|d| format!("{d}={value}")).collect();
        format!("{res}:{}\n", parts.join(";"))
    };
    if reserved > 0 {
        b.write(
            format!("{}/schemata", hostview::RESCTRL),
            line(
                "L3",
                &rc.l3_domains,
                &format!("{:x}", ways_mask(0, hw - reserved)),
            ),
            ValueKind::Text,
            "the system keeps the cache ways no partition reserved",
        );
    }
    let mut top = hw;
    for p in wants {
        let dir = format!("{}/{DIR_PREFIX}{}", hostview::RESCTRL, p.name);
        b.mkdir(
            dir.clone(),
            Some((
                format!("{dir}/tasks"),
                format!("{}/tasks", hostview::RESCTRL),
            )),
            "a resctrl group for the partition",
        );
        let mut schemata = String::new();
        if let Some(w) = p.cache_ways {
            top -= w;
            schemata += &line("L3", &rc.l3_domains, &format!("{:x}", ways_mask(top, w)));
        }
        if let Some(mb) = p.mem_bandwidth {
            schemata += &line("MB", &rc.mb_domains, &mb.to_string());
        }
        b.write(
            format!("{dir}/schemata"),
            schemata,
            ValueKind::Text,
            "the partition's cache ways and memory bandwidth",
        );
        b.write(
            format!("{dir}/cpus_list"),
            p.cpus.to_string(),
            ValueKind::CpuList,
            "the partition's CPUs use its group",
        );
    }
}

fn boot_parameters(spec: &Spec, root: &Root, host: &HostView) -> Vec<BootParameter> {
    let isolated = spec.isolated_cpus();
    if isolated.is_empty() {
        return Vec::new();
    }
    let cmdline = root.read("/proc/cmdline").unwrap_or_default();
    let has = |p: &str| cmdline.split_whitespace().any(|w| w == p);
    let mut out = Vec::new();
    // `None`: every kernel has the parameter.
    let mut add = |option: Option<&str>, param: String, why: &str| {
        let supported = option.is_none_or(|o| host.config_enabled(o) != Some(false));
        if supported && !has(&param) {
            out.push(BootParameter {
                parameter: param,
                why: why.to_string(),
            });
        }
    };
    add(
        Some("CONFIG_CPU_ISOLATION"),
        format!("isolcpus=managed_irq,domain,{isolated}"),
        "keeps kernel-managed IRQs and scheduler domains off the isolated CPUs from boot",
    );
    add(
        Some("CONFIG_NO_HZ_FULL"),
        format!("nohz_full={isolated}"),
        "stops the tick on an isolated CPU running one task",
    );
    add(
        Some("CONFIG_RCU_NOCB_CPU"),
        format!("rcu_nocbs={isolated}"),
        "moves RCU callbacks off the isolated CPUs",
    );
    add(
        None,
        format!("irqaffinity={}", irq_cpus(spec)),
        "IRQs start on the system partition from boot",
    );
    out
}

/// `path: old → new`, the human view of a step.
pub fn describe(step: &Step) -> String {
    match step {
        Step::Mkdir { path, .. } => format!("{path}: (absent) → directory"),
        Step::Write { path, old, new, .. } => format!(
            "{path}: {} → {}",
            old.as_deref()
                .map_or("(new)".to_string(), |o| o.trim().to_string()),
            new.trim()
        ),
        Step::Owner { path, old, new, .. } => format!(
            "{path}: owner {} → {new} (uid:gid:mode)",
            old.as_deref().unwrap_or("(new)")
        ),
        Step::MoveTasks {
            from, to, tasks, ..
        } => {
            format!("{} tasks: {from} → {to}", tasks.len())
        }
    }
}
