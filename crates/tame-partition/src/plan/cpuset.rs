//! What cgroup v1 and v2 plan alike: a partition's group with its CPUs, memory
//! nodes and exclusivity (the version picks the files), and who owns its task list.

use tame_host::cgroup::{CgroupVersion, Cgroups, CpusetConfig, Group, Setting};
use tame_host::journal::Ownership;
use tame_host::HostModel;

use super::{group_name, Builder};
use crate::spec::{PartitionSpec, Role, Spec};

/// The partition's group below `root` (`tame-NAME`).
pub(super) fn group_of(root: &Group, p: &PartitionSpec) -> Group {
    root.child(&group_name(&p.name))
}

/// Create the partition's group and make it an exclusive cpuset; `isolated`
/// turns load balancing off (v1) or asks for an isolated partition (v2).
pub(super) fn partition_group(
    b: &mut Builder,
    host: &HostModel,
    root: &Group,
    p: &PartitionSpec,
    isolated: bool,
    why_dir: &str,
) {
    let g = group_of(root, p);
    b.create(g.create(root), why_dir);
    let config = CpusetConfig {
        cpus: p.cpus.clone(),
        mems: p.mems.clone().unwrap_or_else(|| host.nodes_with_memory()),
        isolated,
    };
    for w in g.configure_cpuset(&config) {
        let why = why(w.setting, isolated);
        b.cgroup(w, why);
    }
}

fn why(setting: Setting, isolated: bool) -> &'static str {
    match setting {
        Setting::Cpus => "the partition's CPUs",
        Setting::Mems => "the partition's memory nodes",
        Setting::CpuExclusive => "no other cpuset shares these CPUs",
        Setting::SchedLoadBalance if isolated => {
            "no scheduler domain: nothing is pulled onto isolated CPUs"
        }
        Setting::SchedLoadBalance => "load balancing within the partition",
        // A valid partition takes its CPUs away from every other cgroup: no task moves needed.
        Setting::Partition => "a partition: exclusive CPUs (isolated: no load balancing)",
        _ => "a cpuset setting",
    }
}

/// Who may put tasks into a partition: its cgroup task list gets the spec's user
/// and group, group-writable.
pub(super) fn owners(spec: &Spec, host: &HostModel, cpuset: &Cgroups, b: &mut Builder) {
    for p in &spec.partitions {
        if p.user.is_none() && p.group.is_none() {
            continue;
        }
        // The v2 system partition is the root cgroup, which tame leaves alone.
        if cpuset.version() == CgroupVersion::V2 && p.role == Role::System {
            continue;
        }
        let uid = p.user.as_deref().and_then(|u| host.accounts.uid_of(u));
        let gid = p.group.as_deref().and_then(|g| host.accounts.gid_of(g));
        b.owner(
            group_of(&cpuset.root(), p).members(),
            Ownership {
                uid: uid.unwrap_or(0),
                gid: gid.unwrap_or(0),
                mode: 0o664,
            },
            "who may put their tasks into the partition",
        );
    }
}
