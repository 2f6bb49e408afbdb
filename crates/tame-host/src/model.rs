//! The whole machine as one serialisable model: what every later capability
//! (check, partitions, bench) starts from.

use serde::{Deserialize, Serialize};

use crate::accounts::Accounts;
use crate::cgroup::CgroupModel;
use crate::cpu::CpuTopology;
use crate::error::Unreadable;
use crate::irq::IrqModel;
use crate::kernel::KernelInfo;
use crate::knobs::Knobs;
use crate::memory::Memory;
use crate::mounts::{mounts_of_type, read_mounts, Mount};
use crate::power::Power;
use crate::process::Processes;
use crate::reader::Reader;
use crate::sched::SchedTimers;
use crate::tracing::Tracing;
use crate::virt::Virtualisation;
use crate::{CpuList, Root};

/// Bumped when a field changes meaning or is removed.
pub const HOST_MODEL_SCHEMA: u32 = 1;

/// Everything the host layer knows about the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub schema: u32,
    pub cpus: CpuTopology,
    pub irqs: IrqModel,
    pub cgroups: CgroupModel,
    pub kernel: KernelInfo,
    pub sched: SchedTimers,
    pub memory: Memory,
    pub power: Power,
    pub tracing: Tracing,
    pub processes: Processes,
    pub virt: Virtualisation,
    /// The mount table (cgroups, tracefs, resctrl and debugfs are found here).
    pub mounts: Vec<Mount>,
    /// User and group ids by name.
    #[serde(default)]
    pub accounts: Accounts,
    /// The files tame may write, as they read now (a plan's old values).
    #[serde(default)]
    pub knobs: Knobs,
    /// Files that were expected but could not be read or understood.
    pub problems: Vec<Unreadable>,
}

impl HostModel {
    /// Read the machine below `root`. Never fails: what cannot be read is in `problems`.
    pub fn read(root: &Root) -> Self {
        let mut r = Reader::new(root);
        let mounts = read_mounts(&mut r);
        let debugfs_mounted = mounts_of_type(&mounts, "debugfs").next().is_some();
        let cpus = CpuTopology::read(&mut r);
        let last_cpu = cpus.possible.iter().last();
        let cpu_ids: Vec<u32> = cpus.cpus.iter().map(|c| c.id).collect();
        let kernel = KernelInfo::read(&mut r, last_cpu, debugfs_mounted);
        let sched = SchedTimers::read(&mut r, debugfs_mounted);
        let virt = Virtualisation::read(&mut r, &cpus.flags, &sched.clocksources_available);
        let irqs = IrqModel::read(&mut r);
        let cgroups = CgroupModel::from_mounts(&mut r, &mounts);
        let memory = Memory::read(&mut r);
        let power = Power::read(&mut r, &cpu_ids);
        let tracing = Tracing::read(&mut r, &mounts, &cpus.flags);
        let processes = Processes::read(&mut r);
        let accounts = Accounts::read(&mut r);
        crate::knobs::read_extra(&mut r, power.cpufreq.iter().map(|c| c.cpu));
        HostModel {
            schema: HOST_MODEL_SCHEMA,
            cpus,
            irqs,
            cgroups,
            kernel,
            sched,
            memory,
            power,
            tracing,
            processes,
            virt,
            mounts,
            accounts,
            knobs: std::mem::take(&mut r.knobs),
            problems: r.problems,
        }
    }

    /// Highest possible CPU + 1: the width of the kernel's CPU masks.
    pub fn nr_cpu_ids(&self) -> u32 {
        let possible = if self.cpus.possible.is_empty() {
            &self.cpus.online
        } else {
            &self.cpus.possible
        };
        possible.iter().last().map_or(1, |c| c + 1)
    }

    /// NUMA nodes that have memory; node 0 on a kernel without NUMA.
    pub fn nodes_with_memory(&self) -> CpuList {
        if self.cpus.nodes.is_empty() {
            return CpuList::from_cpus([0]);
        }
        self.cpus
            .nodes
            .iter()
            .filter(|n| n.mem_total_kib.unwrap_or(0) > 0)
            .map(|n| n.id)
            .collect()
    }
}
