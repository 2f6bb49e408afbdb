//! `tame check`: is this machine fit for real-time work on the CPUs asked
//! about, what will disturb them, what to change, and what needs a reboot.
//!
//! Every check is a pure function of a [`HostModel`] and the [`Target`] CPUs,
//! so the whole audit runs on fixture trees in tests. Each check emits at
//! least one [`Finding`] (an `ok` one when nothing is wrong), so the report
//! shows what was looked at, not only what failed.

mod cpus;
mod finding;
mod irqs;
pub mod isolation;
mod kernel;
mod memory;
mod next;
mod power;
mod report;
mod target;
mod timers;
mod virt;

pub use finding::{Category, Finding, Severity};
pub use report::{score, CategoryScore, CheckReport, EnabledAtBoot};
pub use target::Target;

use tame_host::HostModel;

/// Every check, in report order.
pub const CHECKS: &[fn(&HostModel, &Target) -> Vec<Finding>] = &[
    kernel::preempt_rt,
    kernel::nohz_full_support,
    kernel::lockdown,
    kernel::cmdline_errors,
    kernel::tracing,
    kernel::unreadable_files,
    cpus::housekeeping,
    cpus::smt_siblings,
    cpus::isolcpus,
    cpus::nohz_full,
    cpus::rcu_nocbs,
    cpus::threads,
    irqs::irqbalance,
    irqs::movable_irqs,
    irqs::managed_irqs,
    irqs::default_affinity,
    power::governor,
    power::boost,
    power::idle_states,
    power::cpuidle,
    memory::thp,
    memory::swap,
    memory::numa_balancing,
    timers::rt_throttling,
    timers::fair_server,
    timers::nmi_watchdog,
    timers::soft_watchdog,
    timers::timer_migration,
    timers::clocksource,
    virt::hypervisor,
    virt::steal,
];

/// Run every check for `target`.
pub fn check(model: &HostModel, target: &Target) -> CheckReport {
    let findings: Vec<Finding> = CHECKS.iter().flat_map(|c| c(model, target)).collect();
    let next = next::step(model, target, &findings);
    CheckReport::new(target, findings, next)
}
