//! Kernel checks: preemption model, tick-stopping support, lockdown, unreadable files.
use tame_host::kernel::PreemptModel;
use tame_host::HostModel;

use crate::{Category, Finding, Severity, Target};

const C: Category = Category::Kernel;

pub fn preempt_rt(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let p = &m.kernel.preemption;
    let id = "kernel.preempt_rt";
    let why = "Without PREEMPT_RT, interrupt handlers, softirqs and long kernel sections run with preemption off, so worst-case wakeup latency is bounded only in the millisecond range.";
    if p.model == PreemptModel::Rt {
        return Finding::new(id, C, Severity::Ok, "PREEMPT_RT kernel", why).as_vec();
    }
    if p.model == PreemptModel::Unknown {
        return Finding::new(
            id,
            C,
            Severity::Info,
            "preemption model unknown: /proc/sys/kernel/version and the kernel config are unreadable",
            why,
        )
        .as_vec();
    }
    let mut fix = "boot a PREEMPT_RT kernel (Debian: apt install linux-image-rt-amd64; Ubuntu Pro: pro enable realtime-kernel)".to_string();
    if p.model == PreemptModel::Dynamic && p.dynamic_current.as_deref() != Some("full") {
        fix.push_str("; meanwhile boot this one with preempt=full");
    }
    Finding::new(
        id,
        C,
        Severity::Warn,
        format!(
            "{} is not PREEMPT_RT (preemption {})",
            m.kernel.release,
            p.summary()
        ),
        why,
    )
    .boot_fix(fix)
    .as_vec()
}

pub fn nohz_full_support(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "kernel.nohz_full";
    let why = "Only a kernel built with CONFIG_NO_HZ_FULL can stop the scheduler tick on a CPU running one task; otherwise the tick interrupts it HZ times a second.";
    let hz = m.kernel.hz.map_or("HZ".to_string(), |h| h.to_string());
    match m.kernel.supports_nohz_full() {
        Some(true) => Finding::new(id, C, Severity::Ok, "kernel built with CONFIG_NO_HZ_FULL", why).as_vec(),
        Some(false) => Finding::new(
            id,
            C,
            Severity::Warn,
            format!("CONFIG_NO_HZ_FULL is not set: the tick fires {hz} times a second on every busy CPU"),
            why,
        )
        .boot_fix("boot a kernel built with CONFIG_NO_HZ_FULL=y (most distribution kernels and all -rt kernels are)")
        .as_vec(),
        None => Finding::new(
            id,
            C,
            Severity::Info,
            "kernel configuration not readable (/proc/config.gz and /boot/config-RELEASE missing): NO_HZ_FULL support unknown",
            why,
        )
        .fix("modprobe configs (for /proc/config.gz), or install the kernel's config file")
        .as_vec(),
    }
}

pub fn lockdown(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let id = "kernel.lockdown";
    let why = "Kernel lockdown at integrity or above refuses debugfs writes, so run-time knobs such as sched/preempt and the deadline fair server cannot be changed.";
    let l = &m.kernel.lockdown;
    if !l.blocks_debugfs() {
        let found = match &l.state {
            Some(s) => format!("lockdown {s}"),
            None => "no lockdown in effect that tame can see".to_string(),
        };
        return Finding::new(id, C, Severity::Ok, found, why).as_vec();
    }
    let state = l.state.clone().unwrap_or_default();
    let source = l.source.clone().unwrap_or_default();
    let (fix, severity) = if source == "config" {
        ("boot a kernel built without LOCK_DOWN_KERNEL_FORCE_INTEGRITY/CONFIDENTIALITY (the built-in level cannot be lowered at boot)", Severity::Warn)
    } else {
        ("boot with lockdown=none and Secure Boot off (lockdown cannot be lowered while running)", Severity::Warn)
    };
    let mut found = format!("lockdown {state} (from {source}): debugfs knobs cannot be written");
    if m.kernel.debugfs_knobs_refused {
        found.push_str("; reading sched/preempt was refused");
    }
    Finding::new(id, C, severity, found, why)
        .boot_fix(fix)
        .as_vec()
}

/// Boot parameters tame could not understand (a typo there is silently ignored by the kernel too).
pub fn cmdline_errors(m: &HostModel, _t: &Target) -> Vec<Finding> {
    m.kernel
        .boot
        .errors
        .iter()
        .map(|e| {
            Finding::new(
                "kernel.cmdline",
                C,
                Severity::Warn,
                format!("cannot read the boot parameter {e}"),
                "A malformed isolation parameter is ignored or half-applied by the kernel, so the CPUs it names are not isolated as intended.",
            )
            .boot_fix("correct the parameter in the boot loader configuration (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub)")
        })
        .collect()
}

/// What tracing and cache partitioning offer (no score impact: info only).
pub fn tracing(m: &HostModel, _t: &Target) -> Vec<Finding> {
    let why = "Noise attribution (tame trace) needs tracefs with the irq, sched and timer events; osnoise/timerlat add kernel-side noise measurement.";
    let mut out = Vec::new();
    match &m.tracing.tracefs {
        Some(t) => {
            let has = |n: &str| t.tracers.iter().any(|x| x == n);
            let missing: Vec<&str> = ["osnoise", "timerlat"]
                .into_iter()
                .filter(|n| !has(n))
                .collect();
            let found = format!(
                "tracefs at {} with {} event groups; tracers: {}{}",
                t.mount,
                t.event_groups.len(),
                t.tracers.join(" "),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(" (no {})", missing.join(", "))
                }
            );
            out.push(Finding::new(
                "kernel.tracing",
                C,
                Severity::Info,
                found,
                why,
            ));
        }
        None => out.push(
            Finding::new(
                "kernel.tracing",
                C,
                Severity::Info,
                "tracefs is not mounted",
                why,
            )
            .fix("mount -t tracefs nodev /sys/kernel/tracing"),
        ),
    }
    let why = "Cache and memory-bandwidth allocation (resctrl) can keep other work from evicting the real-time task's cache lines.";
    let found = match (&m.tracing.resctrl, m.tracing.resctrl_capable) {
        (Some(r), _) => format!(
            "resctrl at {} offers {}",
            r.mount,
            r.resources.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
        (None, true) => "the CPU supports cache allocation but resctrl is not mounted (mount -t resctrl resctrl /sys/fs/resctrl)".to_string(),
        (None, false) => "no cache allocation (resctrl) on this machine".to_string(),
    };
    out.push(Finding::new(
        "cpus.resctrl",
        Category::Cpus,
        Severity::Info,
        found,
        why,
    ));
    out
}

/// Files the host layer needed but could not use.
pub fn unreadable_files(m: &HostModel, _t: &Target) -> Vec<Finding> {
    m.problems
        .iter()
        .map(|p| {
            Finding::new(
                "host.unreadable",
                category_of(&p.path),
                Severity::Warn,
                p.to_string(),
                "A fact tame cannot read is a fact it cannot check, so the findings in this area may be incomplete.",
            )
            .fix("run tame check as root, or mount the file system that provides it (sysfs, procfs, debugfs, securityfs)")
        })
        .collect()
}

fn category_of(path: &str) -> Category {
    if path.contains("/irq") || path.contains("interrupts") {
        Category::Irqs
    } else if path.contains("cpufreq") || path.contains("cpuidle") || path.contains("/power/") {
        Category::Power
    } else if path.contains("/mm/") || path.contains("swap") || path.contains("/vm/") {
        Category::Memory
    } else if path.contains("clocksource") || path.contains("watchdog") || path.contains("sched") {
        Category::Timers
    } else if path.contains(tame_host::cpu::SYS_CPU)
        || path.contains("cpuinfo")
        || path.contains("/task/")
    {
        Category::Cpus
    } else {
        Category::Kernel
    }
}
