//! The OpenShift Node Tuning Operator's PerformanceProfile (performance.openshift.io/v2)
//! that realises a spec: reserved and isolated CPU sets, huge pages, the real-time
//! kernel, IRQ load balancing, the topology policy and the workload hints.

use serde_norway::{Mapping, Value};
use tame_host::kernel::PreemptModel;
use tame_host::HostModel;
use tame_partition::spec::{Role, Spec};

use crate::document::{Export, Field};
use crate::hugepages;
use crate::layout::Layout;

pub const API_VERSION: &str = "performance.openshift.io/v2";
pub const KIND: &str = "PerformanceProfile";
/// The node label the profile selects; the user labels the nodes (`kubectl label node
/// NODE node-role.kubernetes.io/tame=`). NTO derives the MachineConfigPool role from
/// a `<domain>/<role>: ""` selector, so the placeholder keeps that shape.
pub const NODE_SELECTOR: &str = "node-role.kubernetes.io/tame";

/// A DNS-1123 name from any text (`numa-resctrl.toml` → `tame-numa-resctrl`).
pub fn object_name(stem: &str) -> String {
    let mut name = String::from("tame-");
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        name.push(if c.is_ascii_alphanumeric() { c } else { '-' });
    }
    let mut name: String = name.trim_end_matches('-').chars().take(63).collect();
    while name.ends_with('-') {
        name.pop();
    }
    name
}

/// The comment above the document: where it came from and how to use it.
pub fn header(origin: &str) -> String {
    format!(
        "PerformanceProfile that realises {origin} as this host measured it (tame export performance-profile),\n\
         for the OpenShift Node Tuning Operator: label the nodes its nodeSelector names, then\n\
         kubectl apply -f this file (NTO reboots the nodes of the pool into the new kernel arguments)."
    )
}

pub fn export(spec: &Spec, host: &HostModel, name: &str) -> Export {
    let l = Layout::new(spec, host);
    let mut fields = vec![
        Field::new(
            &["spec", "cpu", "reserved"],
            l.system_cpus.to_string(),
            "the system partition: housekeeping, the kubelet and system daemons run here",
        ),
        Field::new(
            &["spec", "cpu", "isolated"],
            l.exclusive_cpus.to_string(),
            "the isolated and shared partitions: NTO keeps the tick, RCU callbacks and daemons off them, and the kubelet hands them to Guaranteed pods",
        ),
    ];
    let shared = spec.partitions.iter().any(|p| p.role == Role::Shared);
    if !shared && !l.exclusive_cpus.is_empty() {
        fields.push(Field::new(
            &["spec", "cpu", "balanceIsolated"],
            false,
            "isolated partitions have no load balancing (isolcpus domain), and the spec has no shared partition that needs it",
        ));
    }
    let mut not_expressed = l.common_notes();
    // Left out of both sets rather than guessed into one: reserved would run housekeeping
    // and system pods there and isolated would give them to pods, while tame keeps them idle.
    if !l.unassigned.is_empty() {
        not_expressed.push(format!(
            "WARNING: the Node Tuning Operator expects spec.cpu.reserved and spec.cpu.isolated together to be every CPU, and CPUs {} are in neither (no partition has them): put them in a partition of the spec, or add them by hand to reserved, isolated or spec.cpu.offlined (taken offline) before applying this profile",
            l.unassigned
        ));
    }
    if shared {
        not_expressed.push("balanceIsolated stays at its default (true) because a shared partition needs load balancing; isolated partitions lose it only per pod (CRI-O's annotation cpu-load-balancing.crio.io: \"disable\")".into());
    }
    let boot = hugepages::from_cmdline(&host.kernel.cmdline);
    if boot.default_size.is_some() || !boot.pools.is_empty() {
        hugepage_fields(&boot, &mut fields);
    }
    not_expressed.extend(
        boot.unreadable
            .iter()
            .map(|u| format!("huge pages: {u} (left out)")),
    );
    let rt = host.kernel.preemption.model == PreemptModel::Rt;
    fields.push(Field::new(
        &["spec", "realTimeKernel", "enabled"],
        rt,
        format!(
            "this host's kernel is {} (preemption: {}), and tame's measurements were made on it",
            if rt { "PREEMPT_RT" } else { "not PREEMPT_RT" },
            host.kernel.preemption.summary()
        ),
    ));
    let irq_system_only = l.irqs_on_system_only();
    fields.push(Field::new(
        &["spec", "globallyDisableIrqLoadBalancing"],
        irq_system_only,
        if irq_system_only {
            "no partition but the system one takes device IRQs (irqs), so IRQs leave the isolated CPU set on every node"
        } else {
            "a partition besides the system one takes device IRQs (irqs = true), so IRQs stay balanced over all CPUs; pods opt out per pod"
        },
    ));
    let (policy, why) = l.topology_policy();
    fields.push(Field::new(&["spec", "numa", "topologyPolicy"], policy, why));
    workload_hints(&l, &mut fields, &mut not_expressed);
    let mut selector = Mapping::new();
    selector.insert(NODE_SELECTOR.into(), "".into());
    fields.push(Field::new(
        &["spec", "nodeSelector"],
        Value::Mapping(selector),
        format!("a placeholder: label the nodes that get this layout (kubectl label node NODE {NODE_SELECTOR}=) and give them a MachineConfigPool of that role, or change the selector"),
    ));
    Export {
        api_version: API_VERSION,
        kind: KIND,
        name: Some(name.to_string()),
        fields,
        not_expressed,
        plan_warnings: Vec::new(),
    }
}

fn hugepage_fields(boot: &hugepages::BootHugepages, fields: &mut Vec<Field>) {
    if let Some(size) = &boot.default_size {
        fields.push(Field::new(
            &["spec", "hugepages", "defaultHugepagesSize"],
            size.as_str(),
            "this host boots with default_hugepagesz of that size",
        ));
    }
    if boot.pools.is_empty() {
        return;
    }
    let pages: Vec<Value> = boot
        .pools
        .iter()
        .map(|p| {
            let mut m = Mapping::new();
            m.insert("size".into(), p.size.as_str().into());
            m.insert("count".into(), Value::from(p.count));
            if let Some(node) = p.node {
                m.insert("node".into(), Value::from(node));
            }
            Value::Mapping(m)
        })
        .collect();
    fields.push(Field::new(
        &["spec", "hugepages", "pages"],
        Value::Sequence(pages),
        "the huge page pools this host reserves at boot (hugepagesz/hugepages on its command line)",
    ));
}

/// realTime always (there is a spec to realise); highPowerConsumption where every
/// isolated partition polls (NTO then keeps every CPU out of deep idle states); else
/// per-pod power management where a partition limits idle states or sets a governor.
fn workload_hints(l: &Layout, fields: &mut Vec<Field>, notes: &mut Vec<String>) {
    fields.push(Field::new(
        &["spec", "workloadHints", "realTime"],
        true,
        "the spec isolates CPUs for real-time work: NTO applies its low-latency tuning",
    ));
    let poll = l.all_isolated_poll();
    fields.push(Field::new(
        &["spec", "workloadHints", "highPowerConsumption"],
        poll,
        if poll {
            "every isolated partition polls when idle (idle = \"poll\")"
        } else {
            "not every isolated partition polls when idle"
        },
    ));
    if poll {
        notes.push("highPowerConsumption keeps every CPU of the node out of deep idle states, the system partition's too; tame limits idle states per partition".into());
        return;
    }
    let per_pod = l
        .spec
        .partitions
        .iter()
        .any(|p| p.role != Role::System && (p.idle.is_some() || p.governor.is_some()));
    if per_pod {
        fields.push(Field::new(
            &["spec", "workloadHints", "perPodPowerManagement"],
            true,
            "a partition limits idle states or sets a governor: CRI-O's pod annotations cpu-c-states.crio.io and cpu-freq-governor.crio.io do that per pod",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_labels() {
        assert_eq!(object_name("numa-resctrl"), "tame-numa-resctrl");
        assert_eq!(object_name("My Spec_1."), "tame-my-spec-1");
        assert!(object_name(&"x".repeat(100)).len() <= 63);
    }
}
