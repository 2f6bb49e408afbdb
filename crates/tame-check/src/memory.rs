//! Memory checks: transparent huge pages, swap, automatic NUMA balancing.
use tame_host::HostModel;

use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Memory;

pub fn thp(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "memory.thp";
    let why = "With THP always, page faults may compact memory and khugepaged collapses pages in the background, both causing unpredictable stalls.";
    match m.memory.thp_enabled.as_deref() {
        Some("always") => Finding::new(id, C, Severity::Warn, "transparent huge pages: always", why)
            .fix("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (boot: transparent_hugepage=madvise)")
            .as_vec(),
        Some(mode) => Finding::new(id, C, Severity::Ok, format!("transparent huge pages: {mode}"), why).as_vec(),
        None => Vec::new(),
    }
}

pub fn swap(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "memory.swap";
    let why = "A real-time thread that touches a swapped-out page waits for disk I/O, milliseconds at least.";
    if m.memory.swaps.is_empty() {
        return Finding::new(id, C, Severity::Ok, "no swap in use", why).as_vec();
    }
    let names = m
        .memory
        .swaps
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let kib: u64 = m.memory.swaps.iter().map(|s| s.size_kib).sum();
    Finding::new(id, C, Severity::Warn, format!("swap active: {names} ({} MiB)", kib / 1024), why)
        .fix("swapoff -a (and remove it from /etc/fstab), or lock the real-time program's memory (mlockall; tame run does)")
        .as_vec()
}

pub fn numa_balancing(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "memory.numa_balancing";
    let why = "Automatic NUMA balancing unmaps pages periodically to sample accesses, adding page faults and migrations to running threads.";
    let nodes = m.cpus.nodes.len();
    match m.memory.numa_balancing {
        Some(n) if n > 0 && nodes > 1 => Finding::new(
            id,
            C,
            Severity::Warn,
            format!("NUMA balancing on ({nodes} nodes)"),
            why,
        )
        .fix("sysctl -w kernel.numa_balancing=0")
        .as_vec(),
        Some(n) if n > 0 => Finding::new(
            id,
            C,
            Severity::Info,
            "NUMA balancing on, but there is a single node",
            why,
        )
        .fix("sysctl -w kernel.numa_balancing=0")
        .as_vec(),
        Some(_) => Finding::new(id, C, Severity::Ok, "NUMA balancing off", why).as_vec(),
        None => Vec::new(),
    }
}
