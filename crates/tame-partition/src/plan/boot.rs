//! Boot parameters: isolation the kernel only offers from boot, each listed only
//! when this kernel supports it.

use tame_host::kernel::Cmdline;
use tame_host::HostModel;

use super::{irq_cpus, BootParameter};
use crate::spec::{IdleLimit, Spec};

/// What the plan says needs a reboot: the parameters the running command line lacks
/// (idle=poll aside: a machine-wide choice only enable makes, see [`wanted`]).
pub(super) fn parameters(spec: &Spec, host: &HostModel) -> Vec<BootParameter> {
    let cmdline = &host.kernel.cmdline;
    wanted(spec, host)
        .into_iter()
        .filter(|p| !p.parameter.starts_with("idle="))
        .filter(|p| !carries(cmdline, &p.parameter))
        .collect()
}

/// Whether `cmdline` carries `param` (`key=value` or a bare flag) as the kernel reads it:
/// it honours a parameter's last value.
pub fn carries(cmdline: &Cmdline, param: &str) -> bool {
    match param.split_once('=') {
        Some((key, value)) => cmdline.get(key) == Some(value),
        None => cmdline.has(param),
    }
}

/// Every boot parameter that makes `spec`'s isolation hold from boot on this kernel,
/// whether or not the running command line has it (what `tame enable` writes).
pub fn wanted(spec: &Spec, host: &HostModel) -> Vec<BootParameter> {
    let isolated = spec.isolated_cpus();
    if isolated.is_empty() {
        return Vec::new();
    }
    let config = host.kernel.config.as_ref();
    let mut out = Vec::new();
    // `None`: every kernel has the parameter; an unreadable config counts as supporting it.
    let mut add = |option: Option<&str>, param: String, why: &str| {
        if option.is_none_or(|o| config.is_none_or(|c| c.enabled(o))) {
            out.push(BootParameter {
                parameter: param,
                why: why.to_string(),
            });
        }
    };
    add(
        Some("CONFIG_CPU_ISOLATION"),
        format!("isolcpus=managed_irq,domain,{isolated}"),
        "keeps kernel-managed IRQs and scheduler domains off the isolated CPUs from boot",
    );
    add(
        Some("CONFIG_NO_HZ_FULL"),
        format!("nohz_full={isolated}"),
        "stops the tick on an isolated CPU running one task",
    );
    add(
        Some("CONFIG_RCU_NOCB_CPU"),
        format!("rcu_nocbs={isolated}"),
        "moves RCU callbacks off the isolated CPUs",
    );
    add(
        None,
        format!("irqaffinity={}", irq_cpus(spec)),
        "IRQs start on the system partition from boot",
    );
    // Where a cpuidle driver runs, apply limits idle states per CPU at run time; where none
    // does (a VM halting through the hypervisor) only the boot parameter keeps a CPU polling,
    // and it has no per-CPU form.
    let polls = spec
        .partitions
        .iter()
        .any(|p| matches!(p.idle_limit(), Ok(Some(IdleLimit::Poll))));
    let no_cpuidle = host
        .power
        .cpuidle_driver
        .as_deref()
        .is_none_or(|d| d == "none");
    if polls && no_cpuidle {
        add(
            None,
            "idle=poll".to_string(),
            "a partition asks for idle = \"poll\" and no cpuidle driver runs, so nothing limits idle states at run time; the kernel has no per-CPU form: every CPU polls instead of halting (more power, less wake-up latency)",
        );
    }
    out
}
