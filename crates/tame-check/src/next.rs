//! The one next step a report ends with, chosen from what the findings say: leave a
//! CPU for housekeeping, fix a failure that needs no reboot, isolate the CPUs, or
//! measure where they are already isolated.

use tame_host::{CpuList, HostModel};

use crate::{isolation, Finding, Severity, Target};

/// Findings about work still placed on the checked CPUs that a partition
/// (`tame apply`) moves away.
const MOVED_BY_A_PARTITION: &[&str] = &[
    "cpus.threads",
    "cpus.rt_threads",
    "irqs.on_cpus",
    "irqs.default_affinity",
];

/// The next step for `target`, given the findings of every check.
pub fn step(model: &HostModel, target: &Target, findings: &[Finding]) -> String {
    let bad = |id: &str| {
        findings
            .iter()
            .any(|f| f.id == id && f.severity >= Severity::Warn)
    };
    if target.housekeeping.is_empty() {
        return format!("{} (see cpus.housekeeping)", target.leave_one_out());
    }
    let mut urgent: Vec<&str> = findings
        .iter()
        .filter(|f| f.severity == Severity::Fail && !f.needs_reboot)
        .map(|f| f.id.as_str())
        .collect();
    urgent.sort_unstable();
    urgent.dedup();
    if !urgent.is_empty() {
        return format!(
            "fix {} first (the fix is above, no reboot needed), then run tame check again",
            urgent.join(", ")
        );
    }
    let cpus = &target.cpus;
    let isolated = isolation::boot_domain(model).union(&isolation::run_time_cpus(model));
    let missing = cpus.difference(&isolated);
    if !missing.is_empty() {
        let managed = if bad("irqs.managed") {
            " (CPUs with the kernel-managed IRQs of irqs.managed cannot be freed at run time: choose others, as tame assess does)"
        } else {
            ""
        };
        return format!(
            "isolate {}: write a spec with {} in an isolated partition (see examples/minimal.toml), check it with `tame plan SPEC` and apply it with `tame apply SPEC`{managed} — or `tame assess --cpus {}` chooses CPUs, applies a partition, measures shared against partitioned and reverts",
            missing.named(),
            tame_rt::plural::word(missing.len() as u64, "it", "them"),
            missing.len()
        );
    }
    let names = tame_partitions(model, cpus);
    if !names.is_empty() {
        let measure = names
            .iter()
            .map(|n| format!("`tame bench cycle -p {n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return format!(
            "measure in the applied partition: {measure}, then run the work there with `tame run -p {} -- CMD` (`tame assess` compares with a partition of its own: `tame revert` first)",
            names[0]
        );
    }
    if MOVED_BY_A_PARTITION.iter().any(|id| bad(id)) {
        return format!(
            "move what still runs on {}: a spec with {} in an isolated partition (see examples/minimal.toml), `tame plan SPEC`, `tame apply SPEC` — then measure with `tame bench cycle -p NAME`",
            cpus.named(),
            tame_rt::plural::word(cpus.len() as u64, "it", "them")
        );
    }
    // tame run places work on CPUs the boot line isolated; a foreign cpuset partition it does not know.
    let run = if cpus.is_subset(&crate::target::cmdline_isolated(model)) {
        format!(", then run the work there with `tame run --cpus {cpus} -- CMD`")
    } else {
        String::new()
    };
    format!("measure there: `tame bench cycle --cpus {cpus}`{run}")
}

/// The names of tame's partitions that isolate the checked CPUs, when they
/// cover every one of them.
fn tame_partitions(model: &HostModel, cpus: &CpuList) -> Vec<String> {
    let parts: Vec<_> = isolation::run_time(model)
        .into_iter()
        .filter(|p| p.tame_name.is_some() && !p.cpus.intersection(cpus).is_empty())
        .collect();
    let covered = parts.iter().fold(CpuList::new(), |a, p| a.union(&p.cpus));
    if !cpus.is_subset(&covered) {
        return Vec::new();
    }
    parts.into_iter().filter_map(|p| p.tame_name).collect()
}
