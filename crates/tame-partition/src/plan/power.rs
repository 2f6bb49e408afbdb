//! Power: an idle limit per CPU (resume-latency QoS, else disabling deeper idle
//! states) and the cpufreq governor.

use tame_host::power::{governor_path, idle_disable_path, pm_qos_path};
use tame_host::HostModel;

use super::{Builder, ValueKind};
use crate::spec::{IdleLimit, Spec};

pub(super) fn steps(spec: &Spec, host: &HostModel, b: &mut Builder) {
    for p in &spec.partitions {
        let limit = p.idle_limit().ok().flatten();
        for cpu in p.cpus.iter() {
            if let Some(limit) = limit {
                idle_limit(host, b, cpu, limit);
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

fn idle_limit(host: &HostModel, b: &mut Builder, cpu: u32, limit: IdleLimit) {
    let qos = pm_qos_path(cpu);
    if b.exists(&qos) {
        // "n/a" is the kernel's spelling of a zero latency limit: poll only.
        let value = match limit {
            IdleLimit::Poll => "n/a".to_string(),
            IdleLimit::MaxLatencyUs(us) => us.to_string(),
        };
        b.write(qos, value, ValueKind::Text, "limit idle exit latency");
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
