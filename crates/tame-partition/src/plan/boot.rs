//! Boot parameters: isolation the kernel only offers from boot, each listed only
//! when this kernel supports it and the command line lacks it.

use tame_host::HostModel;

use super::{irq_cpus, BootParameter};
use crate::spec::Spec;

pub(super) fn parameters(spec: &Spec, host: &HostModel) -> Vec<BootParameter> {
    let isolated = spec.isolated_cpus();
    if isolated.is_empty() {
        return Vec::new();
    }
    let cmdline = &host.kernel.cmdline;
    // The kernel honours a parameter's last value.
    let has = |param: &str| match param.split_once('=') {
        Some((key, value)) => cmdline.get(key) == Some(value),
        None => cmdline.has(param),
    };
    let config = host.kernel.config.as_ref();
    let mut out = Vec::new();
    // `None`: every kernel has the parameter; an unreadable config counts as supporting it.
    let mut add = |option: Option<&str>, param: String, why: &str| {
        let supported = option.is_none_or(|o| config.is_none_or(|c| c.enabled(o)));
        if supported && !has(&param) {
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
    out
}
