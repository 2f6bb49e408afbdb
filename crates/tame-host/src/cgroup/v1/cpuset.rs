//! The v1 cpuset controller's files.

use crate::cgroup::{CgroupWrite, CpusetConfig, Group, Setting};

pub const CPUS: &str = "cpuset.cpus";
pub const MEMS: &str = "cpuset.mems";
pub const EFFECTIVE_CPUS: &str = "cpuset.effective_cpus";
/// `1`: no sibling cpuset may share these CPUs.
pub const CPU_EXCLUSIVE: &str = "cpuset.cpu_exclusive";
/// `0`: no scheduler domain spans these CPUs (nothing is pulled onto them).
pub const SCHED_LOAD_BALANCE: &str = "cpuset.sched_load_balance";

/// CPUs, memory nodes, exclusive, and load balancing unless isolated.
pub(crate) fn configure(g: &Group, c: &CpusetConfig) -> Vec<CgroupWrite> {
    vec![
        CgroupWrite::new(g.file(CPUS), c.cpus.to_string(), Setting::Cpus),
        CgroupWrite::new(g.file(MEMS), c.mems.to_string(), Setting::Mems),
        CgroupWrite::new(g.file(CPU_EXCLUSIVE), "1", Setting::CpuExclusive),
        load_balance(g, !c.isolated),
    ]
}

pub(crate) fn load_balance(g: &Group, on: bool) -> CgroupWrite {
    CgroupWrite::new(
        g.file(SCHED_LOAD_BALANCE),
        if on { "1" } else { "0" },
        Setting::SchedLoadBalance,
    )
}
