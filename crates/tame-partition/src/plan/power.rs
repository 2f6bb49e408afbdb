//! Power: an idle limit per CPU (resume-latency QoS, else disabling deeper idle
//! states) and the cpufreq governor.

use tame_host::power::{governor_path, idle_disable_path, pm_qos_path};
use tame_host::HostModel;

use super::{Builder, ValueKind};
use crate::spec::{IdleLimit, Spec};

pub(super) fn steps(spec: &Spec, host: &HostModel, b: &mut Builder) {
    let ineffective = IdleIneffective::on(host).map(|i| i.note());
    for p in &spec.partitions {
        let limit = p.idle_limit().ok().flatten();
        for cpu in p.cpus.iter() {
            if let Some(limit) = limit {
                idle_limit(host, b, cpu, limit, ineffective);
            }
            if let Some(g) = &p.governor {
                b.write(
                    governor_path(cpu),
                    g.clone(),
                    ValueKind::Text,
                    "cpufreq governor",
                );
            }
        }
    }
}

/// Why an idle limit changes nothing on this host. The limit is read by cpuidle's
/// governor alone: without a cpuidle driver the idle loop uses the architecture's
/// halt (a VM's vCPU exits to the hypervisor), and `idle=` at boot overrides cpuidle.
/// apply still makes the write: it is journaled and harmless, and takes effect once a
/// driver is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleIneffective {
    /// Booted with `idle=poll`: every CPU polls already.
    BootPoll,
    /// Booted with `idle=halt`: an idle CPU halts whatever the limit.
    BootHalt,
    /// No cpuidle driver (`current_driver` is `none`, or there is no cpuidle).
    NoDriver,
}

impl IdleIneffective {
    pub(crate) fn on(host: &HostModel) -> Option<Self> {
        match host.kernel.boot.idle.as_deref() {
            Some("poll") => return Some(Self::BootPoll),
            Some("halt") => return Some(Self::BootHalt),
            _ => {}
        }
        let driver = host.power.cpuidle_driver.as_deref().map(str::trim);
        match driver {
            None | Some("" | "none") => Some(Self::NoDriver),
            Some(_) => None,
        }
    }

    /// The short note on each write the plan lists.
    fn note(self) -> &'static str {
        match self {
            Self::BootPoll => "no effect here: booted with idle=poll, every CPU polls already",
            Self::BootHalt => "no effect here: booted with idle=halt",
            Self::NoDriver => "no effect here: no cpuidle driver",
        }
    }

    /// The warning for a partition's `idle` setting: why it changes nothing, that apply
    /// still writes it, and what works instead.
    pub(crate) fn warning(self, partition: &str, idle: &str) -> String {
        const SPIN: &str = "a task that spins until its next period instead of sleeping (e.g. `tame bench cycle --busy-wait`)";
        let head =
            format!("partition {partition:?}: idle = {idle:?} changes nothing on this machine");
        let kept = "apply still makes the write (journaled, harmless; it takes effect once a cpuidle driver runs)";
        match self {
            Self::BootPoll => format!(
                "{head}: the kernel was booted with idle=poll, so every CPU polls already — {kept}; leave `idle` out to say so"
            ),
            Self::BootHalt => format!(
                "{head}: the kernel was booted with idle=halt, so an idle CPU halts whatever the limit — {kept}. What works instead: drop idle=halt from the kernel command line, boot with idle=poll, or {SPIN}"
            ),
            Self::NoDriver => format!(
                "{head}: it has no cpuidle driver (cpuidle current_driver: none), so an idle CPU halts whatever pm_qos_resume_latency_us says — {kept}. What works instead: boot with idle=poll (every CPU polls); on a KVM guest, the haltpoll cpuidle driver (boot with cpuidle_haltpoll.force=1), which polls a while before halting; or {SPIN}"
            ),
        }
    }
}

fn idle_limit(
    host: &HostModel,
    b: &mut Builder,
    cpu: u32,
    limit: IdleLimit,
    ineffective: Option<&str>,
) {
    let qos = pm_qos_path(cpu);
    if b.exists(&qos) {
        // "n/a" is the kernel's spelling of a zero latency limit: poll only.
        let value = match limit {
            IdleLimit::Poll => "n/a".to_string(),
            IdleLimit::MaxLatencyUs(us) => us.to_string(),
        };
        b.write_noting(
            qos,
            value,
            ValueKind::Text,
            "limit idle exit latency",
            ineffective,
        );
        return;
    }
    let max = match limit {
        IdleLimit::Poll => 0,
        IdleLimit::MaxLatencyUs(us) => u64::from(us),
    };
    for state in host.power.idle_states(cpu) {
        if state.latency_us > max && state.name != "POLL" {
            b.write(
                idle_disable_path(cpu, state.index),
                "1".into(),
                ValueKind::Text,
                "disable idle states deeper than the limit",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(driver: Option<&str>, idle: Option<&str>) -> HostModel {
        let dir = tempfile::tempdir().unwrap();
        let mut m = HostModel::read(&tame_host::Root::new(dir.path()));
        m.power.cpuidle_driver = driver.map(str::to_string);
        m.kernel.boot.idle = idle.map(str::to_string);
        m
    }

    #[test]
    fn an_idle_limit_needs_a_cpuidle_driver_and_no_idle_override() {
        assert_eq!(IdleIneffective::on(&host(Some("haltpoll"), None)), None);
        assert_eq!(
            IdleIneffective::on(&host(Some("intel_idle"), Some("nomwait"))),
            None
        );
        for none in [None, Some("none"), Some("")] {
            assert_eq!(
                IdleIneffective::on(&host(none, None)),
                Some(IdleIneffective::NoDriver),
                "{none:?}"
            );
        }
        assert_eq!(
            IdleIneffective::on(&host(Some("none"), Some("poll"))),
            Some(IdleIneffective::BootPoll)
        );
        assert_eq!(
            IdleIneffective::on(&host(Some("intel_idle"), Some("halt"))),
            Some(IdleIneffective::BootHalt)
        );
    }

    #[test]
    fn the_warning_says_why_and_what_works_instead() {
        let w = IdleIneffective::NoDriver.warning("rt", "poll");
        for want in [
            "partition \"rt\": idle = \"poll\" changes nothing on this machine",
            "no cpuidle driver (cpuidle current_driver: none)",
            "apply still makes the write (journaled, harmless",
            "boot with idle=poll",
            "haltpoll cpuidle driver (boot with cpuidle_haltpoll.force=1)",
            "`tame bench cycle --busy-wait`",
        ] {
            assert!(w.contains(want), "{want:?} missing from {w}");
        }
        let w = IdleIneffective::BootPoll.warning("rt", "10us");
        assert!(
            w.contains("booted with idle=poll, so every CPU polls already"),
            "{w}"
        );
        assert!(!w.contains("What works instead"), "{w}");
        let w = IdleIneffective::BootHalt.warning("rt", "poll");
        assert!(w.contains("drop idle=halt"), "{w}");
    }
}
