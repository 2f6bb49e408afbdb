//! Power checks: cpufreq governor and boost, deep idle states, the cpuidle driver.
use tame_host::power::ResumeLatency;
use tame_host::{CpuList, HostModel};

use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Power;

/// Idle states whose exit latency exceeds this are "deep" (C1 is ~1–2 µs, C6 ~100 µs).
pub const DEEP_IDLE_LATENCY_US: u64 = 10;

pub fn governor(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "power.governor";
    let why = "A governor other than performance changes the clock with load, so the same work takes a different time from one period to the next.";
    if m.power.cpufreq.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Info,
            "no cpufreq on this machine: the frequency is set by firmware or the hypervisor",
            why,
        )
        .as_vec();
    }
    let mut slow = CpuList::new();
    let mut governors = Vec::new();
    for cpu in t.cpus.iter() {
        if let Some(g) = m.power.cpufreq(cpu).and_then(|f| f.governor.clone()) {
            if g != "performance" {
                slow.insert(cpu);
                if !governors.contains(&g) {
                    governors.push(g);
                }
            }
        }
    }
    if slow.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("governor performance on {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    Finding::new(id, C, Severity::Warn, format!("governor {} on {}", governors.join("/"), slow.named()), why)
        .fix(format!("cpupower -c {slow} frequency-set -g performance (or echo performance > /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)"))
        .as_vec()
}

pub fn boost(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "power.boost";
    let why = "Turbo/boost raises the clock only while thermal and power headroom lasts, so speed depends on what the other cores do.";
    match m.power.boost {
        Some(true) => {
            let fix = if m.cpus.cpus.is_empty()
                || !m
                    .power
                    .cpufreq
                    .iter()
                    .any(|f| f.driver.as_deref() == Some("intel_pstate"))
            {
                "echo 0 > /sys/devices/system/cpu/cpufreq/boost"
            } else {
                "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"
            };
            Finding::new(
                id,
                C,
                Severity::Warn,
                "frequency boost (turbo) is enabled",
                why,
            )
            .fix(fix)
            .as_vec()
        }
        Some(false) => Finding::new(id, C, Severity::Ok, "frequency boost is off", why).as_vec(),
        None => Vec::new(),
    }
}

pub fn idle_states(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "power.idle_states";
    let why = "Waking from a deep idle state takes its exit latency (tens to hundreds of µs) before the real-time thread can run.";
    if m.kernel.boot.idle.as_deref() == Some("poll") {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            "idle=poll: CPUs never enter idle states",
            why,
        )
        .as_vec();
    }
    let mut deep: Vec<(String, u64)> = Vec::new();
    let mut cpus = CpuList::new();
    for cpu in t.cpus.iter() {
        let limit = m
            .power
            .resume_latency
            .iter()
            .find(|r| r.cpu == cpu)
            .map(|r| r.limit);
        for s in m.power.idle_states(cpu) {
            let allowed = match limit {
                Some(ResumeLatency::Zero) => false,
                Some(ResumeLatency::Limit(us)) => s.latency_us < us,
                _ => true,
            };
            if !s.disabled && allowed && s.latency_us > DEEP_IDLE_LATENCY_US {
                cpus.insert(cpu);
                if !deep.iter().any(|(n, _)| n == &s.name) {
                    deep.push((s.name.clone(), s.latency_us));
                }
            }
        }
    }
    let driver = m
        .power
        .cpuidle_driver
        .clone()
        .unwrap_or_else(|| "none".into());
    if deep.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("no idle state deeper than {DEEP_IDLE_LATENCY_US} µs exit latency is usable on {} (cpuidle driver {driver})", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    let names = deep
        .iter()
        .map(|(n, l)| format!("{n} ({l} µs)"))
        .collect::<Vec<_>>()
        .join(", ");
    Finding::new(id, C, Severity::Warn, format!("deep idle states {names} enabled on {}", cpus.named()), why)
        .fix(format!(
            "for each CPU in {cpus}: echo {DEEP_IDLE_LATENCY_US} > /sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us (or echo 1 > …/cpuidle/stateK/disable); at boot: processor.max_cstate=1 intel_idle.max_cstate=0"
        ))
        .as_vec()
}

/// The cpuidle driver in use, if any (the kernel prints `none` when there is none;
/// the directory is missing when the kernel has no cpuidle at all).
fn cpuidle_driver(m: &HostModel) -> Option<&str> {
    m.power
        .cpuidle_driver
        .as_deref()
        .filter(|d| !d.is_empty() && *d != "none")
}

pub fn cpuidle(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "power.cpuidle";
    let why = "Without a cpuidle driver an idle CPU runs the architecture's halt and PM QoS limits have no idle state to act on; in a guest, waking a halted vCPU goes through the hypervisor.";
    if m.kernel.boot.idle.as_deref() == Some("poll") {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            "idle=poll: idle CPUs spin instead of halting",
            why,
        )
        .as_vec();
    }
    if let Some(driver) = cpuidle_driver(m) {
        let governor = m.power.cpuidle_governor.as_deref().unwrap_or("unknown");
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("cpuidle driver {driver} (governor {governor}): PM QoS limits (idle = \"poll\" in a spec) choose among its idle states"),
            why,
        )
        .as_vec();
    }
    let seen = if m.power.cpuidle_driver.is_some() {
        "current_driver is none"
    } else {
        "no cpuidle in sysfs"
    };
    let guest = m.virt.hypervisor;
    let slower = if guest {
        "in this guest each wakeup of a halted vCPU goes through the hypervisor, so an isolated CPU that idles between activations can wake more slowly (median) than a busy shared one"
    } else {
        "an isolated CPU that idles between activations wakes from halt, so its median wakeup can be slower than a busy shared CPU's"
    };
    let found = format!(
        "no cpuidle driver ({seen}): an idle CPU runs the architecture's halt (HLT on x86, WFI on arm64) and idle = \"poll\" in a spec (a PM QoS limit) changes nothing here; {slower}"
    );
    let mut fixes = vec![
        "boot with idle=poll (idle CPUs spin: more power, and in a guest a host CPU kept busy)"
            .to_string(),
    ];
    if guest {
        let haltpoll = m
            .kernel
            .config
            .as_ref()
            .and_then(|c| c.get("HALTPOLL_CPUIDLE"));
        fixes.push(match haltpoll {
            Some("m") => "in a KVM guest load the haltpoll cpuidle driver, which polls a while before it halts: modprobe cpuidle-haltpoll force=1".to_string(),
            Some("y") => "in a KVM guest boot with cpuidle_haltpoll.force=1 (the haltpoll cpuidle driver, built in here, polls a while before it halts)".to_string(),
            _ => "in a KVM guest a kernel with the haltpoll cpuidle driver (CONFIG_HALTPOLL_CPUIDLE), which polls a while before it halts".to_string(),
        });
    }
    fixes.push(
        "spin in the task itself instead of sleeping (tame bench cycle --busy-wait measures that)"
            .to_string(),
    );
    Finding::new(
        id,
        C,
        if guest {
            Severity::Warn
        } else {
            Severity::Info
        },
        found,
        why,
    )
    .fix(fixes.join("; or "))
    .as_vec()
}
