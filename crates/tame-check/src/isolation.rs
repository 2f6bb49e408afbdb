//! What takes CPUs out of the scheduler's load balancing: the boot line
//! (`isolcpus=domain`) and, at run time, cpuset partitions — tame's own (what
//! `tame apply` made, on cgroup v1 or v2) and any valid isolated v2 partition.
//! `check` and `tame status` agree on what is isolated because both follow what
//! apply made; this reads the result from the host model, so a partition that
//! drifted (someone turned load balancing back on) no longer counts.

use tame_host::cgroup::{CgroupVersion, Cgroups, PartitionKind, TAME_PREFIX};
use tame_host::{CpuList, HostModel};

/// A cpuset that isolates its CPUs at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunTimePartition {
    /// Its cgroup below the cpuset hierarchy (`/tame-rt`, `/rt0`).
    pub cgroup: String,
    /// The partition's name in the spec when `tame apply` made it (`rt` for `/tame-rt`).
    pub tame_name: Option<String>,
    pub version: CgroupVersion,
    pub cpus: CpuList,
}

impl RunTimePartition {
    /// How it isolates, for a finding: `partition "rt" (tame apply: cgroup v1 cpuset …)`.
    pub fn describe(&self) -> String {
        let how = match self.version {
            CgroupVersion::V1 => {
                "cgroup v1 cpuset with cpu_exclusive on and sched_load_balance off"
            }
            CgroupVersion::V2 => "isolated cgroup v2 cpuset partition",
        };
        match &self.tame_name {
            Some(name) => format!("partition {name:?} (tame apply: {how})"),
            None => format!("cgroup {} ({how})", self.cgroup),
        }
    }
}

/// CPUs the boot line took out of the scheduler domains: `isolcpus=` with the
/// `domain` flag, and what the kernel reports as isolated.
pub fn boot_domain(model: &HostModel) -> CpuList {
    let boot = model
        .kernel
        .boot
        .isolcpus
        .as_ref()
        .filter(|i| i.has("domain"))
        .map(|i| i.cpus.clone())
        .unwrap_or_default();
    // /sys/devices/system/cpu/isolated is what the kernel actually took out of its domains.
    boot.union(&model.cpus.isolated)
}

/// The cpusets that isolate CPUs now: tame's v1 cpusets configured as apply configures
/// an isolated partition, and every valid isolated v2 partition.
pub fn run_time(model: &HostModel) -> Vec<RunTimePartition> {
    let Some(cpuset) = Cgroups::for_controller(&model.cgroups, "cpuset") else {
        return Vec::new();
    };
    match cpuset.version() {
        CgroupVersion::V1 => v1_partitions(model, &cpuset),
        CgroupVersion::V2 => v2_partitions(model),
    }
}

/// The CPUs of every [`run_time`] partition.
pub fn run_time_cpus(model: &HostModel) -> CpuList {
    run_time(model)
        .iter()
        .fold(CpuList::new(), |a, p| a.union(&p.cpus))
}

/// On v1 a cpuset's CPUs leave the scheduler domains when neither it nor any
/// cpuset above it balances load: apply turns it off in the root and in the
/// isolated partition's cpuset, which is exclusive so no sibling shares its CPUs.
fn v1_partitions(model: &HostModel, cpuset: &Cgroups) -> Vec<RunTimePartition> {
    let root = cpuset.root();
    let off = |file: Option<String>| {
        file.and_then(|f| model.knobs.text(&f).map(|t| t.trim() == "0"))
            .unwrap_or(false)
    };
    if !off(root.sched_load_balance_file()) {
        return Vec::new();
    }
    model
        .cgroups
        .cpusets
        .iter()
        .filter(|c| c.version == CgroupVersion::V1 && c.cpu_exclusive == Some(true))
        .filter_map(|c| {
            // tame makes its groups directly below the root.
            let name = c.path.strip_prefix('/')?;
            let spec_name = name.strip_prefix(TAME_PREFIX)?;
            if name.contains('/') || !off(root.child(name).sched_load_balance_file()) {
                return None;
            }
            let cpus = c.effective_cpus.clone().or_else(|| c.cpus.clone())?;
            Some(RunTimePartition {
                cgroup: c.path.clone(),
                tame_name: Some(spec_name.to_string()),
                version: CgroupVersion::V1,
                cpus,
            })
        })
        .filter(|p| !p.cpus.is_empty())
        .collect()
}

fn v2_partitions(model: &HostModel) -> Vec<RunTimePartition> {
    model
        .cgroups
        .partitions()
        .filter(|c| {
            c.partition
                .as_ref()
                .is_some_and(|p| p.valid && p.kind == PartitionKind::Isolated)
        })
        .filter_map(|c| {
            let cpus = c.effective_cpus.clone().or_else(|| c.cpus.clone())?;
            let tame_name = c
                .path
                .strip_prefix('/')
                .and_then(|n| n.strip_prefix(TAME_PREFIX))
                .filter(|n| !n.contains('/'))
                .map(str::to_string);
            Some(RunTimePartition {
                cgroup: c.path.clone(),
                tame_name,
                version: CgroupVersion::V2,
                cpus,
            })
        })
        .filter(|p| !p.cpus.is_empty())
        .collect()
}
