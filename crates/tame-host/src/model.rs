//! The whole machine as one serialisable model: what every later capability
//! (check, partitions, bench) starts from.

use serde::{Deserialize, Serialize};

use crate::cgroup::{mounts_of_type, parse_mounts, CgroupModel, Mount, PROC_MOUNTS};
use crate::cpu::CpuTopology;
use crate::error::Unreadable;
use crate::irq::IrqModel;
use crate::kernel::KernelInfo;
use crate::memory::Memory;
use crate::power::Power;
use crate::process::Processes;
use crate::reader::Reader;
use crate::sched::SchedTimers;
use crate::tracing::Tracing;
use crate::virt::Virtualisation;
use crate::Root;

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
    /// Files that were expected but could not be read or understood.
    pub problems: Vec<Unreadable>,
}

impl HostModel {
    /// Read the machine below `root`. Never fails: what cannot be read is in `problems`.
    pub fn read(root: &Root) -> Self {
        let mut r = Reader::new(root);
        let mounts = match r.required(PROC_MOUNTS).map(|t| parse_mounts(&t)) {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                r.parse_problem(PROC_MOUNTS, e);
                Vec::new()
            }
            None => Vec::new(),
        };
        let debugfs_mounted = mounts_of_type(&mounts, "debugfs").next().is_some();
        let cpus = CpuTopology::read(&mut r);
        let last_cpu = cpus.possible.iter().last();
        let cpu_ids: Vec<u32> = cpus.cpus.iter().map(|c| c.id).collect();
        let kernel = KernelInfo::read(&mut r, last_cpu, debugfs_mounted);
        let sched = SchedTimers::read(&mut r, debugfs_mounted);
        let virt = Virtualisation::read(&mut r, &cpus.flags, &sched.clocksources_available);
        HostModel {
            schema: HOST_MODEL_SCHEMA,
            irqs: IrqModel::read(&mut r),
            cgroups: CgroupModel::from_mounts(&mut r, &mounts),
            memory: Memory::read(&mut r),
            power: Power::read(&mut r, &cpu_ids),
            tracing: Tracing::read(&mut r, &mounts, &cpus.flags),
            processes: Processes::read(&mut r),
            cpus,
            kernel,
            sched,
            virt,
            mounts,
            problems: r.problems,
        }
    }
}
