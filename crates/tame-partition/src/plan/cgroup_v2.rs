//! cgroup v2: the system partition is the root cgroup; every other partition is
//! a cpuset partition below it, which takes its CPUs from all other cgroups (no
//! task moves needed).

use tame_host::cgroup::Cgroups;
use tame_host::HostModel;

use super::cpuset::partition_group;
use super::Builder;
use crate::spec::{Role, Spec};

pub(super) fn steps(spec: &Spec, host: &HostModel, cpuset: &Cgroups, b: &mut Builder) {
    let root = cpuset.root();
    let others: Vec<_> = spec
        .partitions
        .iter()
        .filter(|p| p.role != Role::System)
        .collect();
    // Left out by the builder when cgroup.subtree_control already lists cpuset.
    if !others.is_empty() {
        if let Some(w) = root.enable("cpuset") {
            b.cgroup(w, "enable cpusets for child cgroups");
        }
    }
    for p in others {
        let isolated = p.role == Role::Isolated && isolated_partitions(host);
        partition_group(b, host, &root, p, isolated, "a cgroup for the partition");
    }
}

/// `cpuset.cpus.partition = isolated` exists since Linux 6.2 (before: `root`).
fn isolated_partitions(host: &HostModel) -> bool {
    host.kernel
        .release_number()
        .is_some_and(|r| (r.major, r.minor) >= (6, 2))
}
