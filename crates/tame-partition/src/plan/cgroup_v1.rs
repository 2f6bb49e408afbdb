//! cgroup v1: a cpuset per partition (the system one too), every movable task
//! into the system partition, and no load balancing across the root.

use tame_host::cgroup::members::{from_model, parse_ids};
use tame_host::cgroup::Cgroups;
use tame_host::HostModel;

use super::cpuset::{group_of, partition_group};
use super::{split_movable, Builder, Step, Task};
use crate::spec::{Role, Spec};

/// The processes `tasks` belong to (a thread the model does not know counts as one).
fn processes_of(tasks: &[Task], host: &HostModel) -> usize {
    let pid_of: std::collections::BTreeMap<u32, u32> = host
        .processes
        .tasks
        .iter()
        .map(|t| (t.tid, t.pid))
        .collect();
    tasks
        .iter()
        .map(|t| pid_of.get(&t.tid).copied().unwrap_or(t.tid))
        .collect::<std::collections::BTreeSet<u32>>()
        .len()
}

pub(super) fn steps(
    spec: &Spec,
    host: &HostModel,
    cpuset: &Cgroups,
    b: &mut Builder,
    stay: &mut Vec<Task>,
) {
    let root = cpuset.root();
    for p in &spec.partitions {
        let isolated = p.role == Role::Isolated;
        partition_group(b, host, &root, p, isolated, "a cpuset for the partition");
    }
    if let Some(system) = spec.system() {
        let ids = parse_ids(b.current(&root.members()).unwrap_or_default());
        let (movable, pinned) = split_movable(&from_model(&ids, &host.processes));
        stay.extend(pinned);
        if !movable.is_empty() {
            b.push(Step::MoveTasks {
                from: root.members(),
                to: group_of(&root, system).members(),
                processes: processes_of(&movable, host),
                tasks: movable,
                why: "every movable task and kernel thread goes to the system partition; apply lists them again and moves the threads there then".into(),
            });
        }
    }
    if let Some(w) = root.load_balance(false) {
        b.cgroup(w, "the root must not balance across partitions");
    }
}
