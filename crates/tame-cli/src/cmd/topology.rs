//! `tame topology`: the machine at a glance.
use std::fmt::Write as _;

use tame_host::{CpuList, HostModel};
use tame_rt::plural;

use crate::output::print_json;
// `tame ipc` prints through this path.
pub(crate) use crate::output::print_out;
use crate::Context;

#[derive(clap::Args)]
pub struct TopologyArgs {
    /// Print the whole host model as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: TopologyArgs) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    let model = HostModel::read(&ctx.root);
    if args.json {
        print_json(&model)?;
    } else {
        print_out(&summary(&model))?;
    }
    Ok(0)
}

/// Rows of per-core output before the summary is cut short.
const MAX_ROWS: usize = 64;

/// The human view of the model: one section after another.
pub fn summary(m: &HostModel) -> String {
    let mut s = String::new();
    machine(&mut s, m);
    numa_nodes(&mut s, m);
    cores(&mut s, m);
    caches(&mut s, m);
    irqs(&mut s, m);
    cgroups(&mut s, m);
    if let Some(r) = &m.tracing.resctrl {
        let names: Vec<&str> = r.resources.iter().map(|r| r.name.as_str()).collect();
        let _ = writeln!(s, "\nresctrl   {} ({})", r.mount, names.join(", "));
    }
    if !m.problems.is_empty() {
        let _ = writeln!(
            s,
            "\n{} could not be read:",
            plural::count(m.problems.len() as u64, "file", "files")
        );
        for p in m.problems.iter().take(10) {
            let _ = writeln!(s, "  {p}");
        }
    }
    s
}

/// CPU model and counts, kernel, hypervisor.
fn machine(s: &mut String, m: &HostModel) {
    let c = &m.cpus;
    let _ = writeln!(
        s,
        "machine   {}  ({}, {}, {} online of {} possible)",
        c.model_name.as_deref().unwrap_or("unknown CPU"),
        plural::count(c.packages().len() as u64, "package", "packages"),
        plural::count(c.core_count() as u64, "core", "cores"),
        plural::count(c.online.len() as u64, "CPU", "CPUs"),
        c.possible.len()
    );
    let _ = writeln!(
        s,
        "kernel    {}  preemption {}  HZ {}",
        m.kernel.release,
        m.kernel.preemption.summary(),
        m.kernel.hz.map_or("?".into(), |h| h.to_string())
    );
    if let Some(v) = &m.virt.vendor {
        let _ = writeln!(
            s,
            "hypervisor {v}  steal {:.2}%",
            m.virt.total_steal_ppm() as f64 / 10_000.0
        );
    } else if m.virt.hypervisor {
        let _ = writeln!(s, "hypervisor (unknown vendor)");
    }
}

fn numa_nodes(s: &mut String, m: &HostModel) {
    let _ = writeln!(s, "\nNUMA nodes");
    for n in &m.cpus.nodes {
        let _ = writeln!(
            s,
            "  node{:<3} cpus {:<16} memory {} MiB",
            n.id,
            n.cpus.to_string(),
            n.mem_total_kib
                .map_or("?".into(), |k| (k / 1024).to_string())
        );
    }
}

/// One line per core (its SMT siblings), at most [`MAX_ROWS`].
fn cores(s: &mut String, m: &HostModel) {
    let _ = writeln!(s, "\nCores (SMT siblings)");
    let mut seen = CpuList::new();
    let mut shown = 0;
    for cpu in &m.cpus.cpus {
        if seen.contains(cpu.id) {
            continue;
        }
        seen = seen.union(&cpu.thread_siblings);
        shown += 1;
        if shown > MAX_ROWS {
            continue;
        }
        let _ = writeln!(
            s,
            "  package {} core {:<3} cpus {:<10} node {}",
            cpu.package.map_or("?".into(), |p| p.to_string()),
            cpu.core.map_or("?".into(), |p| p.to_string()),
            cpu.thread_siblings.to_string(),
            cpu.node.map_or("?".into(), |p| p.to_string()),
        );
    }
    if shown > MAX_ROWS {
        let _ = writeln!(s, "  … {} more cores (see --json)", shown - MAX_ROWS);
    }
}

/// One line per kind of cache: how many there are and how many CPUs share each.
fn caches(s: &mut String, m: &HostModel) {
    let _ = writeln!(s, "\nCaches");
    // Key: level, kind, size, ways, CPUs sharing each; value: how many such caches.
    let mut kinds = std::collections::BTreeMap::new();
    for cache in &m.cpus.caches {
        let key = (
            cache.level,
            cache.kind.as_str(),
            cache.size_kib,
            cache.ways,
            cache.cpus.len(),
        );
        *kinds.entry(key).or_insert(0usize) += 1;
    }
    for ((level, kind, size, ways, share), count) in kinds {
        let _ = writeln!(
            s,
            "  L{level} {kind:<11} {:>7} KiB  {:>2} ways  ×{count}, each shared by {}",
            size.unwrap_or(0),
            ways.unwrap_or(0),
            plural::count(share as u64, "CPU", "CPUs"),
        );
    }
}

/// Device IRQs, and where the kernel-managed ones fire.
fn irqs(s: &mut String, m: &HostModel) {
    let managed = m.irqs.irqs.iter().filter(|i| i.managed).count();
    let _ = writeln!(
        s,
        "\nIRQs      {} device IRQs ({} managed by the kernel), default affinity {}",
        m.irqs.irqs.len(),
        managed,
        m.irqs
            .default_affinity
            .as_ref()
            .map_or("?".into(), |a| a.to_string())
    );
    for irq in m.irqs.irqs.iter().filter(|i| i.managed).take(8) {
        let _ = writeln!(
            s,
            "  managed IRQ {:<5} {:<20} fires on {}",
            irq.number,
            irq.name,
            irq.fires_on().map_or("?".into(), |a| a.to_string())
        );
    }
}

/// The cpuset controller and the cpuset partitions.
fn cgroups(s: &mut String, m: &HostModel) {
    let _ = writeln!(s, "\ncgroups");
    match &m.cgroups.cpuset {
        Some(h) => {
            let _ = writeln!(s, "  cpuset controller: {:?} at {}", h.version, h.mount);
        }
        None => {
            let _ = writeln!(s, "  no cpuset controller mounted");
        }
    }
    for p in m.cgroups.partitions() {
        let st = p
            .partition
            .as_ref()
            .map(|p| format!("{:?}{}", p.kind, if p.valid { "" } else { " (invalid)" }));
        let _ = writeln!(
            s,
            "  partition {:<16} {:<18} cpus {}",
            p.path,
            st.unwrap_or_default(),
            p.cpus.as_ref().map_or("?".into(), |c| c.to_string())
        );
    }
}
