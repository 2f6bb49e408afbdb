//! Every check on every fixture host, without root.

use std::collections::BTreeSet;
use std::path::PathBuf;

use tame_check::{check, Category, CheckReport, Finding, Severity, Target, CHECKS};
use tame_host::{CpuList, HostModel, Root};
use tame_testing::synthetic::SyntheticHost;

fn scratch() -> tempfile::TempDir {
    tame_testing::scratch_dir("host-fixture-")
}

fn fixture(name: &str) -> PathBuf {
    tame_testing::committed_fixture(name)
}

fn model(name: &str) -> HostModel {
    HostModel::read(&Root::new(fixture(name)))
}

fn cpus(s: &str) -> CpuList {
    CpuList::parse(s).unwrap()
}

fn get<'a>(r: &'a CheckReport, id: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id}"))
}

/// What every report must satisfy, whatever the machine.
fn assert_well_formed(m: &HostModel, r: &CheckReport) {
    for f in &r.findings {
        assert!(!f.found.is_empty(), "{f:?}");
        assert!(
            f.why.ends_with('.') && f.why.len() > 20,
            "why must be a sentence: {f:?}"
        );
        if f.severity >= Severity::Warn && f.id != "virt.steal" {
            assert!(f.fix.is_some(), "a warning or failure needs a fix: {f:?}");
        }
        if f.needs_reboot {
            assert!(f.fix.is_some(), "{f:?}");
        }
    }
    let ids: Vec<&str> = r
        .findings
        .iter()
        .map(|f| f.id.as_str())
        .filter(|i| *i != "host.unreadable")
        .collect();
    let unique: BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicate ids: {ids:?}");
    assert_eq!(r.scores.len(), Category::ALL.len());
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| f.id == "host.unreadable")
            .count(),
        m.problems.len()
    );
    let json = serde_json::to_string(r).unwrap();
    let back: CheckReport = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, r);
}

#[test]
fn every_check_runs_on_every_fixture() {
    let big = scratch();
    SyntheticHost::big_256().write(big.path()).unwrap();
    let models = vec![
        model("dev-vm"),
        model("two-socket-smt"),
        model("rt-8cpu"),
        HostModel::read(&Root::new(big.path())),
    ];
    for m in &models {
        let target = Target::default_for(m);
        assert!(!target.cpus.is_empty());
        assert!(target.cpus.is_subset(&m.cpus.online));
        for c in CHECKS {
            for f in c(m, &target) {
                assert!(!f.id.is_empty());
            }
        }
        let r = check(m, &target);
        assert!(r.findings.len() >= 20, "{}", r.findings.len());
        assert_well_formed(m, &r);
    }
}

#[test]
fn dev_vm_managed_disk_irq_on_cpu1_fails() {
    let m = model("dev-vm");
    let t = Target::default_for(&m);
    assert_eq!(t.cpus.to_string(), "1");
    assert_eq!(t.housekeeping.to_string(), "0");
    let r = check(&m, &t);
    let managed = get(&r, "irqs.managed");
    assert_eq!(managed.severity, Severity::Fail);
    assert!(
        managed.found.contains("36 (virtio1-req.0)"),
        "{}",
        managed.found
    );
    assert!(managed.needs_reboot);
    assert!(managed
        .fix
        .as_deref()
        .unwrap()
        .contains("isolcpus=managed_irq,domain,1"));
    assert!(r.has_failures());
    // On CPU 0 the managed IRQ is not in the way.
    let r0 = check(&m, &Target::asked(&m, cpus("0")));
    assert_eq!(get(&r0, "irqs.managed").severity, Severity::Ok);
    assert_eq!(get(&r, "virt.hypervisor").severity, Severity::Warn);
    assert_eq!(get(&r, "power.governor").severity, Severity::Info);
    assert_eq!(get(&r, "power.idle_states").severity, Severity::Ok);
    assert_eq!(get(&r, "timers.clocksource").severity, Severity::Ok);
    assert_eq!(get(&r, "timers.rt_throttling").severity, Severity::Warn);
    assert_eq!(get(&r, "timers.fair_server").severity, Severity::Info);
    assert_eq!(get(&r, "kernel.nohz_full").severity, Severity::Warn);
    assert_eq!(get(&r, "cpus.nohz_full").severity, Severity::Info);
    assert_eq!(get(&r, "kernel.lockdown").severity, Severity::Warn);
    assert_eq!(get(&r, "kernel.preempt_rt").severity, Severity::Warn);
}

#[test]
fn two_socket_host_flags_what_a_default_server_gets_wrong() {
    let m = model("two-socket-smt");
    let t = Target::asked(&m, cpus("12-23"));
    let r = check(&m, &t);
    let smt = get(&r, "cpus.smt_siblings");
    assert_eq!(smt.severity, Severity::Warn);
    assert!(smt.found.contains("36-47"));
    assert_eq!(get(&r, "irqs.irqbalance").severity, Severity::Fail);
    let managed = get(&r, "irqs.managed");
    assert_eq!(managed.severity, Severity::Fail);
    assert!(
        managed.found.starts_with("24 kernel-managed IRQs"),
        "{}",
        managed.found
    );
    assert_eq!(get(&r, "irqs.on_cpus").severity, Severity::Warn);
    assert_eq!(get(&r, "power.governor").severity, Severity::Warn);
    assert_eq!(get(&r, "power.boost").severity, Severity::Warn);
    let idle = get(&r, "power.idle_states");
    assert_eq!(idle.severity, Severity::Warn);
    assert!(
        idle.found.contains("C6 (133 µs)") && !idle.found.contains("C1 "),
        "{}",
        idle.found
    );
    for id in [
        "memory.thp",
        "memory.swap",
        "memory.numa_balancing",
        "timers.nmi_watchdog",
        "timers.soft_watchdog",
        "timers.timer_migration",
    ] {
        assert_eq!(get(&r, id).severity, Severity::Warn, "{id}");
    }
    // The isolated partition /rt0 covers 12-23; the invalid /broken one does not count.
    assert_eq!(get(&r, "cpus.isolcpus").severity, Severity::Ok);
    let r2 = check(&m, &Target::asked(&m, cpus("0-3")));
    assert_eq!(get(&r2, "cpus.isolcpus").severity, Severity::Warn);
    // Taking whole cores removes the sibling warning but says the set holds siblings.
    let r3 = check(&m, &Target::asked(&m, cpus("12-23,36-47")));
    assert_eq!(get(&r3, "cpus.smt_siblings").severity, Severity::Info);
    let irqs = r
        .scores
        .iter()
        .find(|s| s.category == Category::Irqs)
        .unwrap();
    assert_eq!((irqs.fail, irqs.warn, irqs.score), (2, 2, 25));
}

#[test]
fn tuned_rt_host_passes() {
    let m = model("rt-8cpu");
    let t = Target::default_for(&m);
    assert_eq!(t.cpus.to_string(), "2-7");
    let r = check(&m, &t);
    let bad: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(r.scores.iter().all(|s| s.score == 100), "{:?}", r.scores);
    assert!(!r.has_failures());
    // The same host, checked on a housekeeping CPU, is not isolated there.
    let r0 = check(&m, &Target::asked(&m, cpus("0")));
    assert_eq!(get(&r0, "cpus.isolcpus").severity, Severity::Warn);
    assert_eq!(get(&r0, "irqs.on_cpus").severity, Severity::Warn);
}

#[test]
fn checking_every_cpu_says_no_housekeeping_cpu_is_left() {
    let m = model("dev-vm");
    let t = Target::asked(&m, cpus("0-1"));
    assert!(t.housekeeping.is_empty(), "{}", t.housekeeping);
    let r = check(&m, &t);
    assert_well_formed(&m, &r);
    assert!(r.housekeeping.is_empty());
    let hk = get(&r, "cpus.housekeeping");
    assert_eq!(hk.severity, Severity::Warn);
    assert_eq!(
        hk.found,
        "the checked CPUs 0-1 are every online CPU: no CPU is left for housekeeping"
    );
    assert_eq!(
        hk.fix.as_deref(),
        Some(
            "leave at least one online CPU out of the checked ones for housekeeping, e.g. --cpus 1"
        )
    );
    // No fix moves work onto a checked CPU or isolates every CPU at boot.
    for f in &r.findings {
        let fix = f.fix.as_deref().unwrap_or_default();
        for contradiction in [
            "irqaffinity=",
            "smp_affinity",
            "isolcpus=",
            "nohz_full=",
            "rcu_nocbs=",
            "taskset",
            "watchdog_cpumask",
        ] {
            assert!(!fix.contains(contradiction), "{}: {fix}", f.id);
        }
    }
    for id in [
        "irqs.on_cpus",
        "irqs.default_affinity",
        "irqs.managed",
        "cpus.isolcpus",
        "cpus.rcu_nocbs",
    ] {
        let f = get(&r, id);
        assert!(f.severity >= Severity::Warn, "{id}: {f:?}");
        assert_eq!(
            f.fix.as_deref(),
            Some(
                "fix cpus.housekeeping first: this needs a CPU left for housekeeping, and none is"
            ),
            "{id}"
        );
        assert!(!f.needs_reboot, "{id}");
    }
    assert_eq!(
        get(&r, "timers.soft_watchdog").fix.as_deref(),
        Some("sysctl -w kernel.soft_watchdog=0 (boot: nosoftlockup)")
    );

    // One online CPU: checking fewer is no way out.
    let mut one = m.clone();
    one.cpus.online = cpus("0");
    let t = Target::default_for(&one);
    assert_eq!((t.cpus.to_string(), t.housekeeping.len()), ("0".into(), 0));
    let r = check(&one, &t);
    assert_eq!(
        get(&r, "cpus.housekeeping").fix.as_deref(),
        Some("real-time isolation needs a CPU for housekeeping besides CPU 0: give the machine a second CPU")
    );
    // With a CPU left, it is named and nothing is wrong.
    let r = check(&m, &Target::asked(&m, cpus("1")));
    let hk = get(&r, "cpus.housekeeping");
    assert_eq!(
        (hk.severity, hk.found.as_str()),
        (Severity::Ok, "housekeeping CPU 0")
    );
    assert!(get(&r, "irqs.on_cpus")
        .fix
        .as_deref()
        .unwrap()
        .contains("irqaffinity=0"));
}

#[test]
fn unreadable_files_become_findings() {
    let dir = scratch();
    SyntheticHost::rt_8cpu().write(dir.path()).unwrap();
    let root = Root::new(dir.path());
    std::fs::remove_file(root.path("/proc/interrupts")).unwrap();
    let m = HostModel::read(&root);
    let r = check(&m, &Target::default_for(&m));
    let f = get(&r, "host.unreadable");
    assert_eq!(f.category, Category::Irqs);
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.found.starts_with("cannot read /proc/interrupts: ENOENT"),
        "{}",
        f.found
    );
}

#[test]
fn scores_count_warnings_half() {
    let f = |s| Finding::new("x", Category::Power, s, "found", "Why it matters here.");
    let all = vec![
        f(Severity::Ok),
        f(Severity::Warn),
        f(Severity::Fail),
        f(Severity::Info),
    ];
    let s = tame_check::score(Category::Power, &all);
    assert_eq!((s.ok, s.info, s.warn, s.fail), (1, 1, 1, 1));
    assert_eq!(s.score, 62);
    assert_eq!(tame_check::score(Category::Memory, &all).score, 100);
}

#[test]
fn irqbalance_honours_bans_and_boot_isolation() {
    let mut m = model("rt-8cpu");
    let t = Target::default_for(&m);
    // irqbalance 1.8+ skips isolcpus/nohz_full CPUs even without a ban.
    m.processes.irqbalance.banned_cpus = None;
    assert_eq!(
        get(&check(&m, &t), "irqs.irqbalance").severity,
        Severity::Ok
    );
    // Without boot isolation and without a ban it will spread IRQs onto 2-7.
    m.kernel.boot.isolcpus = None;
    m.kernel.boot.nohz_full = None;
    let r = check(&m, &Target::asked(&m, cpus("2-7")));
    let f = get(&r, "irqs.irqbalance");
    assert_eq!(f.severity, Severity::Fail);
    assert!(f
        .fix
        .as_deref()
        .unwrap()
        .contains("IRQBALANCE_BANNED_CPULIST=2-7"));
    // Not running: nothing to fix.
    m.processes.irqbalance.pids.clear();
    assert_eq!(
        get(&check(&m, &t), "irqs.irqbalance").severity,
        Severity::Ok
    );
}

#[test]
fn idle_states_respect_disable_and_resume_latency() {
    let mut m = model("two-socket-smt");
    let t = Target::asked(&m, cpus("12"));
    assert_eq!(
        get(&check(&m, &t), "power.idle_states").severity,
        Severity::Warn
    );
    // A resume-latency limit of 10 µs on CPU 12 keeps it out of C6 (133 µs).
    for r in m.power.resume_latency.iter_mut().filter(|r| r.cpu == 12) {
        r.limit = tame_host::power::ResumeLatency::Limit(10);
    }
    assert_eq!(
        get(&check(&m, &t), "power.idle_states").severity,
        Severity::Ok
    );
    let mut m = model("two-socket-smt");
    for c in m.power.idle.iter_mut().filter(|c| c.cpu == 12) {
        for s in c.states.iter_mut().filter(|s| s.latency_us > 10) {
            s.disabled = true;
        }
    }
    assert_eq!(
        get(&check(&m, &t), "power.idle_states").severity,
        Severity::Ok
    );
}

#[test]
fn lockdown_turns_the_fair_server_fix_into_advice() {
    let mut m = model("rt-8cpu");
    let t = Target::asked(&m, cpus("0-1"));
    let r = check(&m, &t);
    let f = get(&r, "timers.fair_server");
    assert_eq!(f.severity, Severity::Warn);
    assert!(f
        .fix
        .as_deref()
        .unwrap()
        .contains("fair_server/cpuN/runtime"));
    m.kernel.lockdown.state = Some("integrity".into());
    m.kernel.lockdown.source = Some("securityfs".into());
    let r = check(&m, &t);
    assert!(get(&r, "timers.fair_server")
        .fix
        .as_deref()
        .unwrap()
        .contains("lockdown"));
    let l = get(&r, "kernel.lockdown");
    assert_eq!(l.severity, Severity::Warn);
    assert!(l.needs_reboot);
}

#[test]
fn clocksource_and_hypervisor() {
    let mut m = model("dev-vm");
    let t = Target::default_for(&m);
    m.sched.clocksource = Some("kvm-clock".into());
    let f = check(&m, &t);
    let cs = get(&f, "timers.clocksource");
    assert_eq!(cs.severity, Severity::Warn);
    assert!(!cs.needs_reboot, "tsc is available: switch at run time");
    let hv = get(&f, "virt.hypervisor");
    assert!(hv.found.contains("KVM"), "{}", hv.found);
    let bare = model("rt-8cpu");
    assert_eq!(
        get(
            &check(&bare, &Target::default_for(&bare)),
            "virt.hypervisor"
        )
        .severity,
        Severity::Ok
    );
}

#[test]
fn malformed_boot_parameters_are_reported() {
    let dir = scratch();
    SyntheticHost::rt_8cpu().write(dir.path()).unwrap();
    let root = Root::new(dir.path());
    std::fs::write(
        root.path("/proc/cmdline"),
        "root=/dev/sda2 nohz_full=2-x isolcpus=bogus,2-7\n",
    )
    .unwrap();
    let m = HostModel::read(&root);
    let r = check(&m, &Target::asked(&m, cpus("2-7")));
    let errs: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.id == "kernel.cmdline")
        .collect();
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs.iter().any(|f| f.found.contains("nohz_full=2-x")));
    assert!(errs
        .iter()
        .all(|f| f.needs_reboot && f.severity == Severity::Warn));
    assert_eq!(get(&r, "cpus.nohz_full").severity, Severity::Warn);
}

#[test]
fn the_threads_that_may_run_on_the_cpus_are_named_kernel_threads_too() {
    // Only an unbound kernel thread is left: its name is listed (before, the list after
    // the colon stayed empty, as only user threads were named).
    let mut m = model("dev-vm");
    let task = |comm: &str, kthread: bool| tame_host::process::Task {
        pid: 7,
        tid: 7,
        comm: comm.into(),
        state: 'S',
        kthread,
        affinity_locked: false,
        policy: tame_host::process::SchedPolicy::Other,
        rt_priority: 0,
        nice: 0,
        affinity: cpus("0-1"),
        last_cpu: Some(1),
    };
    m.processes.tasks = vec![task("kworker/u4:2", true)];
    let r = check(&m, &Target::asked(&m, cpus("0")));
    assert_eq!(
        get(&r, "cpus.threads").found,
        "1 thread (0 user, 1 unbound kernel) may run on CPU 0: [kworker/u4:2]"
    );
    // User threads first, then kernel threads in brackets, six at most.
    m.processes.tasks = ["sshd", "bash", "kworker/u4:2", "cron", "a", "b", "c"]
        .iter()
        .map(|c| task(c, c.starts_with("kworker")))
        .collect();
    let r = check(&m, &Target::asked(&m, cpus("0")));
    assert_eq!(
        get(&r, "cpus.threads").found,
        "7 threads (6 user, 1 unbound kernel) may run on CPU 0: a, b, bash, c, cron, sshd, …"
    );
}
