//! Scheduler and timer checks: RT throttling, fair server, watchdogs, timer migration, clocksource.
use tame_host::kernel::ReleaseNumber;
use tame_host::{CpuList, HostModel};

use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Timers;

/// The deadline fair server arrived in Linux 6.12.
const FAIR_SERVER_SINCE: ReleaseNumber = ReleaseNumber {
    major: 6,
    minor: 12,
    patch: 0,
};

pub fn rt_throttling(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "timers.rt_throttling";
    let why = "RT throttling stops every real-time thread on a CPU once it has used sched_rt_runtime_us of each period, e.g. 50 ms of every second.";
    let s = &m.sched;
    match (s.rt_runtime_us, s.rt_period_us) {
        (Some(r), Some(p)) if r >= 0 => Finding::new(
            id,
            C,
            Severity::Warn,
            format!(
                "RT throttling on: {} ms of every {} ms reserved for non-RT tasks",
                (p as i64 - r) / 1000,
                p / 1000
            ),
            why,
        )
        .fix("sysctl -w kernel.sched_rt_runtime_us=-1")
        .as_vec(),
        (Some(_), _) => Finding::new(
            id,
            C,
            Severity::Ok,
            "RT throttling off (sched_rt_runtime_us = -1)",
            why,
        )
        .as_vec(),
        _ => Vec::new(),
    }
}

pub fn fair_server(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "timers.fair_server";
    let why = "Since 6.12 a deadline server gives normal tasks a slice (50 ms per second by default) ahead of real-time threads on any CPU where they wait.";
    let fs = &m.sched.fair_server;
    if !fs.cpus.is_empty() {
        let on: CpuList = fs
            .cpus
            .iter()
            .filter(|c| c.runtime_ns > 0 && t.cpus.contains(c.cpu))
            .map(|c| c.cpu)
            .collect();
        if on.is_empty() {
            return Finding::new(
                id,
                C,
                Severity::Ok,
                format!("fair server off on {}", t.cpus.named()),
                why,
            )
            .as_vec();
        }
        let ex = fs
            .cpus
            .iter()
            .find(|c| on.contains(c.cpu))
            .map(|c| (c.runtime_ns, c.period_ns))
            .unwrap_or((0, 0));
        let mut f = Finding::new(
            id,
            C,
            Severity::Warn,
            format!(
                "fair server active on {}: {} ms of every {} ms",
                on.named(),
                ex.0 / 1_000_000,
                ex.1 / 1_000_000
            ),
            why,
        );
        f = if m.kernel.lockdown.blocks_debugfs() {
            f.fix("cannot be changed under lockdown (see kernel.lockdown); keep normal tasks off these CPUs instead (isolcpus/tame apply)")
        } else {
            f.fix("for each CPU N: echo 0 > /sys/kernel/debug/sched/fair_server/cpuN/runtime")
        };
        return f.as_vec();
    }
    let has = m.kernel.release_number().map(|r| r >= FAIR_SERVER_SINCE);
    match has {
        Some(false) => Finding::new(
            id,
            C,
            Severity::Ok,
            format!("kernel {} predates the fair server", m.kernel.release),
            why,
        )
        .as_vec(),
        _ => {
            let (found, fix) = if !m.kernel.debugfs_mounted {
                ("fair server presumably active (kernel 6.12+); debugfs is not mounted so it cannot be read", "mount -t debugfs none /sys/kernel/debug, then see /sys/kernel/debug/sched/fair_server")
            } else {
                ("fair server presumably active (kernel 6.12+); debugfs sched/fair_server is not readable", "see kernel.lockdown; keep normal tasks off the real-time CPUs so the server has nothing to run")
            };
            Finding::new(id, C, Severity::Info, found, why)
                .fix(fix)
                .as_vec()
        }
    }
}

pub fn nmi_watchdog(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "timers.nmi_watchdog";
    let why = "The NMI watchdog fires a performance-counter NMI on every CPU periodically, an interrupt nothing can mask.";
    match m.sched.nmi_watchdog {
        Some(true) => Finding::new(id, C, Severity::Warn, "NMI watchdog on", why)
            .fix("sysctl -w kernel.nmi_watchdog=0 (boot: nmi_watchdog=0)")
            .as_vec(),
        Some(false) => Finding::new(id, C, Severity::Ok, "NMI watchdog off", why).as_vec(),
        None => Vec::new(),
    }
}

pub fn soft_watchdog(m: &HostModel, t: &Target) -> Vec<Finding> {
    let id = "timers.soft_watchdog";
    let why = "The softlockup watchdog runs an hrtimer and a stopper thread on each CPU in watchdog_cpumask every few seconds.";
    let s = &m.sched;
    let on =
        s.watchdog.unwrap_or(true) && s.soft_watchdog == Some(true) && !m.kernel.boot.nosoftlockup;
    if s.soft_watchdog.is_none() {
        return Vec::new();
    }
    let hit = s
        .watchdog_cpus
        .clone()
        .unwrap_or_else(|| m.cpus.online.clone())
        .intersection(&t.cpus);
    if !on || hit.is_empty() {
        return Finding::new(
            id,
            C,
            Severity::Ok,
            format!("softlockup watchdog does not run on {}", t.cpus.named()),
            why,
        )
        .as_vec();
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!("softlockup watchdog runs on {}", hit.named()),
        why,
    )
    .fix(if t.housekeeping.is_empty() {
        // No CPU is left to keep it on: only turning it off keeps it off these.
        "sysctl -w kernel.soft_watchdog=0 (boot: nosoftlockup)".to_string()
    } else {
        format!(
            "sysctl -w kernel.watchdog_cpumask={} (or kernel.soft_watchdog=0; boot: nosoftlockup)",
            t.housekeeping
        )
    })
    .as_vec()
}

pub fn timer_migration(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "timers.timer_migration";
    let why = "With timer migration on, timers of idle CPUs are handed to busy ones, so a real-time CPU may expire other CPUs' timers.";
    match m.sched.timer_migration {
        Some(true) => Finding::new(id, C, Severity::Warn, "timer migration on", why)
            .fix("sysctl -w kernel.timer_migration=0")
            .as_vec(),
        Some(false) => Finding::new(id, C, Severity::Ok, "timer migration off", why).as_vec(),
        None => Vec::new(),
    }
}

pub fn clocksource(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "timers.clocksource";
    let why = "Reading the time through a clocksource other than the TSC is slower and may trap to the hypervisor or hit a shared bus.";
    let s = &m.sched;
    match s.clocksource.as_deref() {
        Some("tsc") => {
            let invariant = m.cpus.has_flag("constant_tsc") && m.cpus.has_flag("nonstop_tsc");
            let found = if invariant {
                "clocksource tsc (invariant)"
            } else {
                "clocksource tsc"
            };
            Finding::new(id, C, Severity::Ok, found, why).as_vec()
        }
        Some(cs) if !m.cpus.has_flag("tsc") => Finding::new(
            id,
            C,
            Severity::Ok,
            format!("clocksource {cs} (this CPU has no TSC)"),
            why,
        )
        .as_vec(),
        Some(cs) => {
            let f = Finding::new(
                id,
                C,
                Severity::Warn,
                format!("clocksource {cs}, not tsc"),
                why,
            );
            if s.clocksources_available.iter().any(|c| c == "tsc") {
                f.fix("echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource")
            } else {
                f.boot_fix("boot with tsc=reliable (only if the TSC is invariant and synchronised)")
            }
            .as_vec()
        }
        None => Vec::new(),
    }
}
