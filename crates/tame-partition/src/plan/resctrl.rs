//! resctrl: L3 cache ways and memory bandwidth per partition; the default group
//! (the system) keeps the ways no partition reserved.

use tame_host::resctrl::Resctrl;
use tame_host::HostModel;

use super::{group_name, Builder, ValueKind};
use crate::spec::{PartitionSpec, Spec};

/// A capacity bitmask of `count` ways from way `low` up.
fn ways_mask(low: u32, count: u32) -> u64 {
    if count == 0 {
        return 0;
    }
    ((1u64 << count) - 1) << low
}

/// One schemata line: the same value in every domain.
fn line(resource: &str, domains: &[u32], value: &str) -> String {
    let parts: Vec<String> = domains.iter().map(|d| format!("{d}={value}")).collect();
    format!("{resource}:{}\n", parts.join(";"))
}

pub(super) fn steps(spec: &Spec, host: &HostModel, b: &mut Builder) {
    let Some(rc) = &host.tracing.resctrl else {
        return;
    };
    let wants: Vec<&PartitionSpec> = spec
        .partitions
        .iter()
        .filter(|p| p.cache_ways.is_some() || p.mem_bandwidth.is_some())
        .collect();
    if wants.is_empty() {
        return;
    }
    let hw = rc.l3_ways().unwrap_or(0);
    let reserved: u32 = wants.iter().filter_map(|p| p.cache_ways).sum();
    if reserved > 0 {
        b.write(
            rc.default_group().schemata(),
            line(
                "L3",
                &rc.domains("L3"),
                &format!("{:x}", ways_mask(0, hw - reserved)),
            ),
            ValueKind::Text,
            "the system keeps the cache ways no partition reserved",
        );
    }
    // Partitions take ways from the top down.
    let mut top = hw;
    for p in wants {
        top -= p.cache_ways.unwrap_or(0);
        partition_group(rc, p, top, b);
    }
}

/// The partition's group: its ways (from way `low` up), its bandwidth, its CPUs.
fn partition_group(rc: &Resctrl, p: &PartitionSpec, low: u32, b: &mut Builder) {
    let g = rc.group(&group_name(&p.name));
    b.mkdir(
        g.dir.clone(),
        Some((g.tasks(), rc.default_group().tasks())),
        "a resctrl group for the partition",
    );
    let mut schemata = String::new();
    if let Some(w) = p.cache_ways {
        schemata += &line("L3", &rc.domains("L3"), &format!("{:x}", ways_mask(low, w)));
    }
    if let Some(percent) = p.mem_bandwidth {
        schemata += &line("MB", &rc.domains("MB"), &percent.to_string());
    }
    b.write(
        g.schemata(),
        schemata,
        ValueKind::Text,
        "the partition's cache ways and memory bandwidth",
    );
    b.write(
        g.cpus_list(),
        p.cpus.to_string(),
        ValueKind::CpuList,
        "the partition's CPUs use its group",
    );
}
