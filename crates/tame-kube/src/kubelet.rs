//! The KubeletConfiguration fields (kubelet.config.k8s.io/v1beta1) that realise a spec's
//! CPU and memory layout on a node: the static CPU manager with the system partition
//! reserved, the topology manager, and the static memory manager where the spec sets mems.

use serde_norway::{Mapping, Value};
use tame_host::HostModel;
use tame_partition::{Plan, Spec};

use crate::document::{Check, Export, Field};
use crate::layout::Layout;

pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
pub const KIND: &str = "KubeletConfiguration";

/// Memory tame proposes to reserve for the kubelet and the system daemons each, and the
/// kubelet's default hard eviction threshold: the memory manager requires reservedMemory
/// to add up to their sum. Sizing to adjust per node, not something the spec decides.
const KUBE_RESERVED_MI: u64 = 512;
const SYSTEM_RESERVED_MI: u64 = 512;
pub const DEFAULT_EVICTION_MI: u64 = 100;

/// The comment above the document: where it came from and how to use it.
pub fn header(origin: &str) -> String {
    format!(
        "KubeletConfiguration fields that realise {origin} on this host (tame export kubelet).\n\
         Merge them into the node's kubelet config file (often /var/lib/kubelet/config.yaml), then drain\n\
         the node, remove /var/lib/kubelet/cpu_manager_state and memory_manager_state, and restart the\n\
         kubelet: it refuses a changed CPU or memory manager policy over the old state.\n\
         Check a node later with: tame plan {origin} --from-kubelet FILE"
    )
}

/// The export for a spec `plan` validated on this host (the plan's boot parameters are
/// what the kubelet cannot set).
pub fn export(spec: &Spec, host: &HostModel, plan: &Plan) -> Export {
    let l = Layout::new(spec, host);
    let mut fields = vec![
        Field::new(
            &["cpuManagerPolicy"],
            "static",
            "Guaranteed pods with integer CPU requests get exclusive CPUs outside reservedSystemCPUs, as tame's isolated partitions are exclusive",
        ),
        Field::new(
            &["reservedSystemCPUs"],
            l.system_cpus.to_string(),
            format!(
                "the system partition{}: the kubelet, the runtime and system daemons stay there and no pod gets them exclusively; it is also the non-zero CPU reservation the static policy requires",
                l.system.map(|s| format!(" {:?}", s.name)).unwrap_or_default()
            ),
        )
        .checked(Check::CpuList),
    ];
    if l.whole_cores() == Some(true) {
        fields.push(Field::new(
            &["cpuManagerPolicyOptions", "full-pcpus-only"],
            "true",
            "every partition takes whole cores (both SMT siblings): the kubelet then hands out whole cores only, so no two pods share one",
        ));
    }
    let (policy, why) = l.topology_policy();
    fields.push(Field::new(&["topologyManagerPolicy"], policy, why));
    let mut not_expressed = l.common_notes();
    if l.whole_cores() == Some(false) {
        not_expressed.push(
            "a partition splits SMT siblings: full-pcpus-only (whole cores per pod) would not match it, so the kubelet may give two pods the two threads of one core".into(),
        );
    }
    if l.sets_mems() {
        memory_fields(&l, &mut fields);
    }
    if !plan.needs_reboot.is_empty() {
        let params: Vec<&str> = plan
            .needs_reboot
            .iter()
            .map(|p| p.parameter.as_str())
            .collect();
        not_expressed.push(format!(
            "the kernel side is not the kubelet's: boot with {} and move IRQs, kernel threads and workqueues off the exclusive CPUs (a PerformanceProfile, or tame apply on the node, does)",
            params.join(" ")
        ));
    }
    Export {
        api_version: API_VERSION,
        kind: KIND,
        name: None,
        fields,
        not_expressed,
        plan_warnings: Vec::new(),
    }
}

/// The static memory manager, with the system's reservation on the system partition's
/// memory nodes, and the reservations it must add up to.
fn memory_fields(l: &Layout, fields: &mut Vec<Field>) {
    fields.push(Field::new(
        &["memoryManagerPolicy"],
        "Static",
        "the spec binds partitions to memory nodes (mems): the static memory manager gives Guaranteed pods memory from the NUMA nodes of their CPUs",
    ));
    let nodes: Vec<u32> = l.system_memory_nodes().iter().collect();
    let total = KUBE_RESERVED_MI + SYSTEM_RESERVED_MI + DEFAULT_EVICTION_MI;
    let share = total / nodes.len().max(1) as u64;
    let entries: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            // The remainder goes to the first node, so the total is exact.
            let mi = if i == 0 {
                total - share * (nodes.len() as u64 - 1)
            } else {
                share
            };
            let mut limits = Mapping::new();
            limits.insert("memory".into(), format!("{mi}Mi").into());
            let mut entry = Mapping::new();
            entry.insert("numaNode".into(), Value::from(*node));
            entry.insert("limits".into(), Value::Mapping(limits));
            Value::Mapping(entry)
        })
        .collect();
    let node_list: Vec<String> = nodes.iter().map(u32::to_string).collect();
    fields.push(
        Field::new(
            &["reservedMemory"],
            Value::Sequence(entries),
            format!(
                "the system's memory stays on NUMA node{} {} (where the system partition runs), {total}Mi in all = kubeReserved + systemReserved + the hard eviction threshold for memory.available (default {DEFAULT_EVICTION_MI}Mi), which the static memory manager requires",
                if nodes.len() == 1 { "" } else { "s" },
                node_list.join(", ")
            ),
        )
        .checked(Check::NumaNodes),
    );
    for (path, mi, who) in [
        (
            "kubeReserved",
            KUBE_RESERVED_MI,
            "the kubelet and the runtime",
        ),
        ("systemReserved", SYSTEM_RESERVED_MI, "the system daemons"),
    ] {
        fields.push(
            Field::new(
                &[path, "memory"],
                format!("{mi}Mi"),
                format!("memory for {who}: a starting size to adjust per node (reservedMemory must add up with it)"),
            )
            .checked(Check::Sizing),
        );
    }
}
