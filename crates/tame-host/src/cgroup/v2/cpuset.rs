//! The v2 cpuset controller's files.

use crate::cgroup::{CgroupWrite, CpusetConfig, Group, Setting};

pub const CPUS: &str = "cpuset.cpus";
pub const MEMS: &str = "cpuset.mems";
pub const EFFECTIVE_CPUS: &str = "cpuset.cpus.effective";
/// `member`, `root` (exclusive CPUs, balanced) or `isolated` (exclusive, no
/// balancing; Linux 6.2+), with ` invalid (reason)` when the kernel refused it.
pub const PARTITION: &str = "cpuset.cpus.partition";

/// CPUs, memory nodes, then the partition type: a valid partition takes its
/// CPUs away from every other group.
pub(crate) fn configure(g: &Group, c: &CpusetConfig) -> Vec<CgroupWrite> {
    vec![
        CgroupWrite::new(g.file(CPUS), c.cpus.to_string(), Setting::Cpus),
        CgroupWrite::new(g.file(MEMS), c.mems.to_string(), Setting::Mems),
        CgroupWrite::new(
            g.file(PARTITION),
            if c.isolated { "isolated" } else { "root" },
            Setting::Partition,
        ),
    ]
}
