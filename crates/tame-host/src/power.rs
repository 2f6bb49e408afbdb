//! Power management: cpufreq driver, governor and boost; cpuidle driver and
//! states (exit latency, disabled or not); per-CPU resume-latency limits.

use serde::{Deserialize, Serialize};

use crate::cpu::SYS_CPU;
use crate::reader::Reader;

/// Frequency scaling of one CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFreq {
    pub cpu: u32,
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    pub hw_max_khz: Option<u64>,
}

/// One idle state of one CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    /// Exit latency.
    pub latency_us: u64,
    pub residency_us: u64,
    pub disabled: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdle {
    pub cpu: u32,
    pub states: Vec<IdleState>,
}

/// pm_qos_resume_latency_us of a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "us")]
pub enum ResumeLatency {
    /// `0`: no limit.
    NoConstraint,
    /// `n/a`: no exit latency allowed (polling only).
    Zero,
    Limit(u64),
}

/// Parse `pm_qos_resume_latency_us` (`0` means no constraint, `n/a` means zero).
pub fn parse_resume_latency(text: &str) -> Option<ResumeLatency> {
    match text.trim() {
        "n/a" => Some(ResumeLatency::Zero),
        "0" => Some(ResumeLatency::NoConstraint),
        t => t.parse().ok().map(ResumeLatency::Limit),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuResumeLatency {
    pub cpu: u32,
    pub limit: ResumeLatency,
}

/// The cpufreq governor of a CPU (writable).
pub fn governor_path(cpu: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/cpufreq/scaling_governor")
}

/// The governors a CPU's cpufreq driver offers.
pub fn available_governors_path(cpu: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/cpufreq/scaling_available_governors")
}

/// A CPU's resume-latency limit (writable; see [`parse_resume_latency`]).
pub fn pm_qos_path(cpu: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// Whether an idle state of a CPU is disabled (writable, `0`/`1`).
pub fn idle_disable_path(cpu: u32, state: u32) -> String {
    format!("{SYS_CPU}/cpu{cpu}/cpuidle/state{state}/disable")
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Power {
    /// Empty when the machine has no cpufreq (typical of VMs).
    pub cpufreq: Vec<CpuFreq>,
    /// cpufreq/boost (acpi-cpufreq, amd-pstate) or the inverse of intel_pstate/no_turbo.
    pub boost: Option<bool>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    pub idle: Vec<CpuIdle>,
    pub resume_latency: Vec<CpuResumeLatency>,
}

impl Power {
    pub fn idle_states(&self, cpu: u32) -> &[IdleState] {
        self.idle
            .iter()
            .find(|c| c.cpu == cpu)
            .map_or(&[], |c| &c.states)
    }

    pub fn cpufreq(&self, cpu: u32) -> Option<&CpuFreq> {
        self.cpufreq.iter().find(|c| c.cpu == cpu)
    }

    pub fn read(r: &mut Reader, cpus: &[u32]) -> Self {
        let mut p = Power {
            boost: r.flag(&format!("{SYS_CPU}/cpufreq/boost")).or_else(|| {
                r.flag("/sys/devices/system/cpu/intel_pstate/no_turbo")
                    .map(|n| !n)
            }),
            cpuidle_driver: r.value(&format!("{SYS_CPU}/cpuidle/current_driver")),
            cpuidle_governor: r
                .value(&format!("{SYS_CPU}/cpuidle/current_governor"))
                .or_else(|| r.value(&format!("{SYS_CPU}/cpuidle/current_governor_ro"))),
            ..Default::default()
        };
        for &cpu in cpus {
            let base = format!("{SYS_CPU}/cpu{cpu}");
            let f = format!("{base}/cpufreq");
            if r.is_dir(&f) {
                p.cpufreq.push(CpuFreq {
                    cpu,
                    driver: r.value(&format!("{f}/scaling_driver")),
                    governor: r.knob_value(&governor_path(cpu)),
                    min_khz: r.number(&format!("{f}/scaling_min_freq")),
                    max_khz: r.number(&format!("{f}/scaling_max_freq")),
                    hw_max_khz: r.number(&format!("{f}/cpuinfo_max_freq")),
                });
            }
            let idle_dir = format!("{base}/cpuidle");
            let mut states = Vec::new();
            for index in r.numbered(&idle_dir, "state") {
                let d = format!("{idle_dir}/state{index}");
                states.push(IdleState {
                    index,
                    name: r.value(&format!("{d}/name")).unwrap_or_default(),
                    latency_us: r.number(&format!("{d}/latency")).unwrap_or(0),
                    residency_us: r.number(&format!("{d}/residency")).unwrap_or(0),
                    disabled: r.knob_flag(&idle_disable_path(cpu, index)).unwrap_or(false),
                });
            }
            if !states.is_empty() {
                p.idle.push(CpuIdle { cpu, states });
            }
            if let Some(limit) = r
                .knob(&pm_qos_path(cpu))
                .and_then(|t| parse_resume_latency(&t))
            {
                p.resume_latency.push(CpuResumeLatency { cpu, limit });
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_latency_spellings() {
        assert_eq!(
            parse_resume_latency("0\n"),
            Some(ResumeLatency::NoConstraint)
        );
        assert_eq!(parse_resume_latency("n/a"), Some(ResumeLatency::Zero));
        assert_eq!(parse_resume_latency("20"), Some(ResumeLatency::Limit(20)));
        assert_eq!(parse_resume_latency("x"), None);
    }
}
