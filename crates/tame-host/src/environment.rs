//! The facts every measurement records about the machine it ran on, so a
//! result can be judged (and compared) without knowing where it came from.

use serde::{Deserialize, Serialize};

use crate::kernel::{self, Preemption};
use crate::reader::Reader;
use crate::sched::RtBandwidth;
use crate::{cpu, sched, virt, CpuList, Root};

/// Self-characterisation of the host, captured once per run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEnvironment {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v` (build flags such as PREEMPT_DYNAMIC / PREEMPT_RT appear here).
    pub kernel_version: String,
    /// none | voluntary | full | rt, and `dynamic(<mode>)` where the mode is readable.
    pub preemption_model: String,
    /// The isolation-related boot parameters (isolcpus=, nohz_full=, rcu_nocbs=, ...).
    pub isolation_parameters: Vec<String>,
    /// The CPU-vulnerability mitigation boot parameters (mitigations=, pti=, spectre_v2=, ...):
    /// not isolation, but they set the cost of every kernel entry. Absent in older results,
    /// which listed `mitigations=` among `isolation_parameters`.
    #[serde(default)]
    pub security_parameters: Vec<String>,
    pub cpuidle_driver: Option<String>,
    pub clocksource: Option<String>,
    /// Hypervisor vendor if the CPU reports one (e.g. "KVM"), `None` on bare metal.
    pub hypervisor: Option<String>,
    /// constant_tsc and nonstop_tsc are both present.
    pub invariant_tsc: bool,
    pub online_cpus: CpuList,
    /// RT throttling during the run: real-time tasks get at most `runtime_us` of each
    /// `period_us` per CPU (`runtime_us` -1: no limit). Absent in older results and where
    /// the sysctls cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_bandwidth: Option<RtBandwidth>,
}

/// Boot parameters that change how isolated CPUs behave.
pub const ISOLATION_PARAMETERS: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "idle",
    "processor.max_cstate",
    "intel_idle.max_cstate",
    "skew_tick",
    "tsc",
    "nosoftlockup",
    "nmi_watchdog",
    "preempt",
    "threadirqs",
];

/// Boot parameters that switch CPU-vulnerability mitigations (the kernel's
/// admin-guide/kernel-parameters): they change what a system call or an interrupt costs.
pub const SECURITY_PARAMETERS: &[&str] = &[
    "mitigations",
    "nopti",
    "pti",
    "kpti",
    "nospectre_v1",
    "nospectre_v2",
    "spectre_v2",
    "spectre_v2_user",
    "spectre_bhi",
    "spec_store_bypass_disable",
    "nospec_store_bypass_disable",
    "ssbd",
    "l1tf",
    "mds",
    "tsx_async_abort",
    "mmio_stale_data",
    "retbleed",
    "srbds",
    "gather_data_sampling",
    "reg_file_data_sampling",
    "spec_rstack_overflow",
];

impl RunEnvironment {
    /// Capture what can be read; unreadable facts stay empty rather than failing a run.
    pub fn capture(root: &Root) -> Self {
        let mut r = Reader::new(root);
        let cmdline = r.value(kernel::CMDLINE).unwrap_or_default();
        let version = r.value(kernel::VERSION).unwrap_or_default();
        let flags = cpu_flags(&r.optional(cpu::PROC_CPUINFO).unwrap_or_default());
        let clocksources: Vec<String> = r
            .value(&format!("{}/available_clocksource", sched::CLOCKSOURCE))
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Self {
            kernel_release: r.value(kernel::OSRELEASE).unwrap_or_default(),
            preemption_model: preemption_model(
                &version,
                root.read_trimmed(kernel::DEBUGFS_PREEMPT).ok().as_deref(),
            ),
            kernel_version: version,
            isolation_parameters: isolation_parameters(&cmdline),
            security_parameters: security_parameters(&cmdline),
            cpuidle_driver: r.value(&format!("{}/cpuidle/current_driver", cpu::SYS_CPU)),
            clocksource: r.value(&format!("{}/current_clocksource", sched::CLOCKSOURCE)),
            hypervisor: hypervisor(&mut r, &flags, &clocksources),
            invariant_tsc: flags.iter().any(|f| f == "constant_tsc")
                && flags.iter().any(|f| f == "nonstop_tsc"),
            online_cpus: r
                .cpu_list(&format!("{}/online", cpu::SYS_CPU))
                .unwrap_or_default(),
            rt_bandwidth: root.rt_bandwidth().ok(),
        }
    }
}

/// The flags of the first processor in /proc/cpuinfo.
pub use crate::cpu::cpu_flags;

fn hypervisor(r: &mut Reader, flags: &[String], clocksources: &[String]) -> Option<String> {
    if !flags.iter().any(|f| f == "hypervisor") {
        return None;
    }
    let found = [virt::HYPERVISOR_TYPE, virt::DMI_VENDOR]
        .iter()
        .find_map(|p| r.value(p).filter(|v| !v.is_empty()))
        .or_else(|| virt::vendor_from_clocksources(clocksources).map(str::to_string));
    Some(found.unwrap_or_else(|| "unknown hypervisor".to_string()))
}

/// Derive the preemption model from `uname -v` and, where readable, the
/// dynamic-preemption mode (`none voluntary (full) lazy` marks the current one).
pub fn preemption_model(kernel_version: &str, dynamic_mode: Option<&str>) -> String {
    Preemption::derive(kernel_version, None, None, dynamic_mode).summary()
}

/// The isolation-related `key=value` words of a kernel command line.
pub fn isolation_parameters(cmdline: &str) -> Vec<String> {
    parameters(cmdline, ISOLATION_PARAMETERS)
}

/// The mitigation `key=value` words of a kernel command line.
pub fn security_parameters(cmdline: &str) -> Vec<String> {
    parameters(cmdline, SECURITY_PARAMETERS)
}

/// The words of `cmdline` whose key is one of `keys`, as written.
fn parameters(cmdline: &str, keys: &[&str]) -> Vec<String> {
    kernel::parse_cmdline(cmdline)
        .params
        .into_iter()
        .filter(|p| keys.contains(&p.key.as_str()))
        .map(|p| match p.value {
            Some(v) => format!("{}={v}", p.key),
            None => p.key,
        })
        .collect()
}

/// Whether systemd is the running init system (its own test, sd_booted: the directory it
/// creates at start). Live machine only: a host tree has no running init.
pub fn systemd_running() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_model_from_uname_v() {
        assert_eq!(
            preemption_model("#1 SMP PREEMPT_DYNAMIC @0", None),
            "dynamic"
        );
        assert_eq!(
            preemption_model("#1 SMP PREEMPT_DYNAMIC", Some("none voluntary (full) lazy")),
            "dynamic(full)"
        );
        assert_eq!(preemption_model("#1 SMP PREEMPT_RT Tue", None), "rt");
        assert_eq!(preemption_model("#1 SMP PREEMPT Tue", None), "full");
        assert_eq!(preemption_model("#1 SMP Tue", None), "none or voluntary");
    }

    #[test]
    fn picks_isolation_parameters_only() {
        let got = isolation_parameters("BOOT_IMAGE=/vmlinuz root=/dev/vda isolcpus=managed_irq,domain,1 nohz_full=1 quiet idle=poll mitigations=off");
        assert_eq!(
            got,
            vec!["isolcpus=managed_irq,domain,1", "nohz_full=1", "idle=poll"]
        );
    }

    #[test]
    fn mitigations_are_security_parameters_not_isolation() {
        let cmdline = "root=/dev/vda isolcpus=1 mitigations=off nopti spectre_v2=retpoline quiet";
        assert_eq!(
            security_parameters(cmdline),
            vec!["mitigations=off", "nopti", "spectre_v2=retpoline"]
        );
        assert_eq!(isolation_parameters(cmdline), vec!["isolcpus=1"]);
        assert!(ISOLATION_PARAMETERS
            .iter()
            .all(|k| !SECURITY_PARAMETERS.contains(k)));
    }

    #[test]
    fn an_older_result_without_security_parameters_still_reads() {
        let mut v = serde_json::to_value(RunEnvironment::default()).unwrap();
        v.as_object_mut().unwrap().remove("security_parameters");
        v["isolation_parameters"] = serde_json::json!(["mitigations=off"]);
        let env: RunEnvironment = serde_json::from_value(v).unwrap();
        assert!(env.security_parameters.is_empty());
        assert_eq!(env.isolation_parameters, vec!["mitigations=off"]);
    }

    #[test]
    fn capture_reads_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let path = dir.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w(
            "/proc/cmdline",
            "root=/dev/vda nohz_full=1 mitigations=auto\n",
        );
        w("/proc/sys/kernel/osrelease", "6.18.0\n");
        w("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
        w(
            "/proc/cpuinfo",
            "processor : 0\nflags : fpu constant_tsc nonstop_tsc hypervisor\n",
        );
        w("/sys/devices/system/cpu/online", "0-1\n");
        w(
            "/sys/devices/system/cpu/cpuidle/current_driver",
            "haltpoll\n",
        );
        let env = RunEnvironment::capture(&Root::new(dir.path()));
        assert_eq!(env.rt_bandwidth, None, "unreadable: left out");
        w("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
        w("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
        let env = RunEnvironment::capture(&Root::new(dir.path()));
        assert_eq!(
            env.rt_bandwidth,
            Some(RtBandwidth {
                runtime_us: 950_000,
                period_us: 1_000_000
            })
        );
        assert_eq!(env.kernel_release, "6.18.0");
        assert_eq!(env.preemption_model, "dynamic");
        assert_eq!(env.isolation_parameters, vec!["nohz_full=1"]);
        assert_eq!(env.security_parameters, vec!["mitigations=auto"]);
        assert!(env.invariant_tsc);
        assert_eq!(env.hypervisor.as_deref(), Some("unknown hypervisor"));
        assert_eq!(env.cpuidle_driver.as_deref(), Some("haltpoll"));
        assert_eq!(env.clocksource, None);
        assert_eq!(env.online_cpus.to_string(), "0-1");
    }
}
