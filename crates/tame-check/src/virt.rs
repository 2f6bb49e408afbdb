//! Virtualisation checks: hypervisor and steal time.
use tame_host::HostModel;

use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Virtualisation;

pub fn hypervisor(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "virt.hypervisor";
    let why = "The hypervisor can stop a vCPU at any moment (host interrupts, other guests, VM exits), noise that no setting inside the guest can remove.";
    if !m.virt.hypervisor {
        return Finding::new(id, C, Severity::Ok, "bare metal (no hypervisor flag)", why).as_vec();
    }
    let who = match (&m.virt.vendor, &m.virt.vendor_source) {
        (Some(v), Some(s)) => format!("{v} (from {s})"),
        (Some(v), None) => v.clone(),
        _ => "unknown vendor".into(),
    };
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("running under a hypervisor: {who}"),
        why,
    )
    .fix("run on bare metal, or have the host pin each vCPU to a dedicated, isolated physical CPU")
    .as_vec()
}

pub fn steal(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "virt.steal";
    let why = "Steal time is time the hypervisor ran something else while this vCPU wanted to run.";
    if !m.virt.hypervisor || m.virt.steal.is_empty() {
        return Vec::new();
    }
    let worst = m
        .virt
        .steal
        .iter()
        .filter(|c| t.cpus.contains(c.cpu))
        .max_by_key(|c| c.steal_ppm());
    let Some(w) = worst else { return Vec::new() };
    let pct = |ppm: u64| format!("{}.{:02}%", ppm / 10_000, (ppm % 10_000) / 100);
    let sev = if w.steal_ppm() >= 10_000 {
        Severity::Warn
    } else {
        Severity::Info
    };
    Finding::new(
        id,
        C,
        sev,
        format!(
            "steal since boot: {} on CPU {} (all CPUs {})",
            pct(w.steal_ppm()),
            w.cpu,
            pct(m.virt.total_steal_ppm())
        ),
        why,
    )
    .as_vec()
}
