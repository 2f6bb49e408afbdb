//! The host facts partitions need, taken from the host layer's model
//! ([`tame_host::HostModel`]) and shaped for plan and apply, plus the few
//! per-task and per-file reads apply repeats while it works.

use std::collections::BTreeMap;

use tame_host::cgroup::CgroupVersion as HostCgroupVersion;
use tame_host::process::{PF_KTHREAD, PF_NO_SETAFFINITY};
use tame_host::{CpuList, HostModel, Root};

pub const SYS_CPU: &str = tame_host::cpu::SYS_CPU;
pub const PROC_IRQ: &str = "/proc/irq";
pub const DEFAULT_SMP_AFFINITY: &str = tame_host::irq::DEFAULT_AFFINITY;
pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";
pub const SCHED_RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
pub const SCHED_RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
pub const TIMER_MIGRATION: &str = "/proc/sys/kernel/timer_migration";
pub const RESCTRL: &str = "/sys/fs/resctrl";

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Where the cpuset controller can be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpusetHome {
    pub version: CgroupVersion,
    pub mount: String,
    /// v2: the root's cgroup.subtree_control already enables cpuset.
    pub subtree_has_cpuset: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqInfo {
    pub number: u32,
    pub name: String,
    pub affinity: Option<CpuList>,
    pub effective: Option<CpuList>,
    pub managed: bool,
}

pub use tame_host::power::IdleState;

/// One task (thread) as far as moving it matters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Task {
    pub tid: u32,
    pub comm: String,
    pub kernel_thread: bool,
    /// The kernel places it itself: per-CPU kernel threads and workqueue workers
    /// (PF_NO_SETAFFINITY), and kthreadd, which cgroup v1 refuses to move.
    pub pinned_by_kernel: bool,
    pub cpus_allowed: Option<CpuList>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resctrl {
    /// Bits in the L3 capacity bitmask (the number of cache ways), if L3 CAT exists.
    pub l3_ways: Option<u32>,
    /// L3 cache domain ids from the default group's schemata.
    pub l3_domains: Vec<u32>,
    pub mb_domains: Vec<u32>,
    pub has_mb: bool,
}

/// Everything plan and apply look at.
#[derive(Clone, Debug)]
pub struct HostView {
    pub online: CpuList,
    pub possible: CpuList,
    pub thread_siblings: BTreeMap<u32, CpuList>,
    pub nodes_with_memory: CpuList,
    pub cpuset: Option<CpusetHome>,
    pub kernel_release: String,
    pub kernel_config: Option<tame_host::kernel::KernelConfig>,
    pub irqs: Vec<IrqInfo>,
    pub irqbalance_running: bool,
    pub resctrl: Option<Resctrl>,
    /// cpuidle states per CPU (none without cpuidle).
    pub idle_states: BTreeMap<u32, Vec<IdleState>>,
    /// Cgroup v1 cpusets directly below the root that tame did not make, with their CPUs.
    pub other_v1_cpusets: Vec<(String, CpuList)>,
}

impl HostView {
    pub fn read(root: &Root) -> Self {
        Self::from_model(&HostModel::read(root))
    }

    pub fn from_model(m: &HostModel) -> Self {
        let online = m.cpus.online.clone();
        let possible = if m.cpus.possible.is_empty() {
            online.clone()
        } else {
            m.cpus.possible.clone()
        };
        let mut nodes_with_memory: CpuList = m
            .cpus
            .nodes
            .iter()
            .filter(|n| n.mem_total_kib.unwrap_or(0) > 0)
            .map(|n| n.id)
            .collect();
        if m.cpus.nodes.is_empty() {
            // A kernel without NUMA has node 0 only.
            nodes_with_memory.insert(0);
        }
        let cpuset = m.cgroups.cpuset.as_ref().map(|home| {
            let v2 = home.version == HostCgroupVersion::V2;
            CpusetHome {
                version: if v2 {
                    CgroupVersion::V2
                } else {
                    CgroupVersion::V1
                },
                mount: home.mount.clone(),
                subtree_has_cpuset: v2
                    && m.cgroups
                        .v2
                        .as_ref()
                        .is_some_and(|h| h.subtree_control.iter().any(|c| c == "cpuset")),
            }
        });
        Self {
            thread_siblings: m
                .cpus
                .cpus
                .iter()
                .map(|c| (c.id, c.thread_siblings.clone()))
                .collect(),
            nodes_with_memory,
            cpuset,
            kernel_release: m.kernel.release.clone(),
            kernel_config: m.kernel.config.clone(),
            irqs: m
                .irqs
                .irqs
                .iter()
                .map(|i| IrqInfo {
                    number: i.number,
                    name: i.name.clone(),
                    affinity: i.affinity.clone(),
                    effective: i.effective_affinity.clone(),
                    managed: i.managed,
                })
                .collect(),
            irqbalance_running: m.processes.irqbalance.running(),
            resctrl: m.tracing.resctrl.as_ref().map(resctrl_view),
            other_v1_cpusets: m
                .cgroups
                .cpusets
                .iter()
                .filter(|c| c.version == HostCgroupVersion::V1)
                .filter(|c| c.path.matches('/').count() == 1 && c.path != "/")
                .filter(|c| !c.path.starts_with(&format!("/{}", crate::plan::DIR_PREFIX)))
                .map(|c| (c.path.clone(), c.cpus.clone().unwrap_or_default()))
                .collect(),
            idle_states: m
                .power
                .idle
                .iter()
                .map(|c| (c.cpu, c.states.clone()))
                .collect(),
            online,
            possible,
        }
    }

    /// Highest possible CPU + 1: the width of the kernel's CPU masks.
    pub fn nr_cpu_ids(&self) -> u32 {
        self.possible.iter().last().map_or(1, |c| c + 1)
    }

    /// Whether the kernel config enables an option; `None` when the config is unreadable.
    pub fn config_enabled(&self, option: &str) -> Option<bool> {
        self.kernel_config.as_ref().map(|c| c.enabled(option))
    }

    pub fn idle_states(&self, cpu: u32) -> &[IdleState] {
        self.idle_states.get(&cpu).map_or(&[], Vec::as_slice)
    }

    /// cgroup v2 `cpuset.cpus.partition = isolated` exists since Linux 6.2.
    pub fn v2_isolated_partitions(&self) -> bool {
        tame_host::kernel::parse_release(&self.kernel_release)
            .is_some_and(|r| (r.major, r.minor) >= (6, 2))
    }
}

fn resctrl_view(r: &tame_host::resctrl::Resctrl) -> Resctrl {
    let l3 = r.resources.iter().find(|x| x.name == "L3");
    let schemata = r.schemata.clone().unwrap_or_default();
    Resctrl {
        l3_ways: l3
            .and_then(|x| x.cbm_mask.as_deref())
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .map(|m| m.count_ones()),
        l3_domains: schemata_domains(&schemata, "L3"),
        mb_domains: schemata_domains(&schemata, "MB"),
        has_mb: r.resources.iter().any(|x| x.name == "MB"),
    }
}

pub fn pm_qos_path(cpu: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us")
}

pub fn idle_disable_path(cpu: u32, state: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/cpuidle/state{state}/disable")
}

pub fn governor_path(cpu: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/cpufreq/scaling_governor")
}

pub fn available_governors(root: &Root, cpu: u32) -> Option<Vec<String>> {
    root.read(format!(
        "{SYS_CPU}/cpu{cpu}/cpufreq/scaling_available_governors"
    ))
    .ok()
    .map(|t| t.split_whitespace().map(str::to_string).collect())
}

/// What /proc says about one task; a task that is gone (or a fixture without /proc)
/// reads as an ordinary user task.
pub fn read_task(root: &Root, tid: u32) -> Task {
    let (comm, flags) = root
        .read(format!("/proc/{tid}/task/{tid}/stat"))
        .ok()
        .and_then(|s| tame_host::process::parse_stat(&s).ok())
        .map_or_else(|| ("?".to_string(), 0), |st| (st.comm, st.flags));
    let kernel_thread = flags & PF_KTHREAD != 0;
    Task {
        tid,
        pinned_by_kernel: kernel_places(kernel_thread, flags & PF_NO_SETAFFINITY != 0, &comm),
        comm,
        kernel_thread,
        cpus_allowed: root
            .read(format!("/proc/{tid}/task/{tid}/status"))
            .ok()
            .and_then(|s| {
                tame_host::process::status_affinity(&s).and_then(|l| CpuList::parse(l).ok())
            }),
    }
}

/// Whether the kernel keeps a thread where it is: PF_NO_SETAFFINITY threads
/// (per-CPU threads, workqueue workers) and kthreadd, which cgroup v1 refuses to move.
pub fn kernel_places(kernel_thread: bool, affinity_locked: bool, comm: &str) -> bool {
    affinity_locked || (kernel_thread && comm == "kthreadd")
}

/// The uid of a user name, from passwd text (`name:x:uid:gid:…`).
pub fn user_id(passwd: &str, name: &str) -> Option<u32> {
    id_of(passwd, name)
}

/// The gid of a group name, from group text (`name:x:gid:members`).
pub fn group_id(group: &str, name: &str) -> Option<u32> {
    id_of(group, name)
}

fn id_of(table: &str, name: &str) -> Option<u32> {
    table.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.trim().parse().ok()
    })
}

/// The task ids listed in a cgroup file (`tasks`, `cgroup.procs`).
pub fn read_ids(root: &Root, path: &str) -> Vec<u32> {
    root.read(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Domain ids of one resource line of a resctrl schemata (`L3:0=fff;1=fff`).
pub fn schemata_domains(schemata: &str, resource: &str) -> Vec<u32> {
    schemata
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter(|(r, _)| r.trim() == resource)
        .flat_map(|(_, doms)| {
            doms.split(';')
                .filter_map(|d| d.split_once('=')?.0.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemata_domains_per_resource() {
        let s = "    L3:0=fff;1=fff\n    MB:0=100;1=100\n";
        assert_eq!(schemata_domains(s, "L3"), vec![0, 1]);
        assert_eq!(schemata_domains(s, "MB"), vec![0, 1]);
        assert!(schemata_domains(s, "L2").is_empty());
    }
}
