//! Run-time isolation (tame's cpuset partitions on cgroup v1 and v2), the cpuidle
//! driver and the next step, on fixture trees.

use std::path::Path;

use tame_check::{check, CheckReport, Finding, Severity, Target};
use tame_host::{CpuList, HostModel, Root};
use tame_testing::synthetic::{CgroupLayout, SyntheticHost};

fn cpus(s: &str) -> CpuList {
    CpuList::parse(s).unwrap()
}

fn get<'a>(r: &'a CheckReport, id: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id}"))
}

fn put(base: &Path, path: &str, text: &str) {
    let p = base.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// An 8-CPU box without boot isolation (CPUs 2-7 are to be isolated at run time).
fn no_boot_isolation(cgroups: CgroupLayout) -> SyntheticHost {
    let mut h = SyntheticHost::rt_8cpu();
    h.cgroups = cgroups;
    h.isolated = CpuList::new();
    h.nohz_full = None;
    h.managed_avoid = None;
    h.irqbalance = None;
    h.cmdline = "root=/dev/sda2 ro".into();
    h
}

/// What `tame apply` leaves on cgroup v1 for a spec with system 0-1 and an isolated
/// partition `rt` on 2-7 (`load_balance`: the isolated cpuset's sched_load_balance).
fn v1_applied(base: &Path, load_balance: &str) {
    no_boot_isolation(CgroupLayout::V1).write(base).unwrap();
    let d = "/sys/fs/cgroup/cpuset";
    put(base, &format!("{d}/cpuset.sched_load_balance"), "0\n");
    for (name, list, balance) in [("system", "0-1", "1\n"), ("rt", "2-7", load_balance)] {
        let g = format!("{d}/tame-{name}");
        put(base, &format!("{g}/cpuset.cpus"), &format!("{list}\n"));
        put(
            base,
            &format!("{g}/cpuset.effective_cpus"),
            &format!("{list}\n"),
        );
        put(base, &format!("{g}/cpuset.mems"), "0\n");
        put(base, &format!("{g}/cpuset.cpu_exclusive"), "1\n");
        put(base, &format!("{g}/cpuset.sched_load_balance"), balance);
        put(base, &format!("{g}/tasks"), "");
    }
}

fn read(base: &Path) -> HostModel {
    HostModel::read(&Root::new(base))
}

#[test]
fn an_applied_v1_partition_isolates_at_run_time() {
    let dir = tame_testing::scratch_dir("check-v1-");
    v1_applied(dir.path(), "0\n");
    let m = read(dir.path());
    // Without --cpus the partition's CPUs are checked, as tame status shows them.
    let t = Target::default_for(&m);
    assert_eq!(t.cpus, cpus("2-7"));
    let r = check(&m, &t);
    let f = get(&r, "cpus.isolcpus");
    assert_eq!(f.severity, Severity::Ok, "{f:?}");
    assert!(
        f.found.contains("CPUs 2-7 at run time by partition \"rt\" (tame apply: cgroup v1 cpuset with cpu_exclusive on and sched_load_balance off)"),
        "{}",
        f.found
    );
    // What only the boot line does, and where the report says more.
    for rest in [
        "only boot parameters stop the tick (nohz_full=, see cpus.nohz_full)",
        "offload RCU callbacks (rcu_nocbs=, see cpus.rcu_nocbs)",
        "keep kernel-managed IRQs off (isolcpus=managed_irq, see irqs.managed)",
    ] {
        assert!(f.found.contains(rest), "{rest}: {}", f.found);
    }
    assert!(
        r.next.starts_with(
            "measure in the applied partition: `tame bench cycle -p rt`, then run the work there with `tame run -p rt -- CMD`"
        ),
        "{}",
        r.next
    );
    // CPUs outside it are not isolated, and the finding says which ones are.
    let r = check(&m, &Target::asked(&m, cpus("1-2")));
    let f = get(&r, "cpus.isolcpus");
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.found
            .starts_with("CPU 1 is not isolated from the scheduler (isolated: CPU 2 at run time by partition \"rt\""),
        "{}",
        f.found
    );
    assert!(
        r.next.starts_with("isolate CPU 1: write a spec"),
        "{}",
        r.next
    );
}

#[test]
fn a_v1_partition_balancing_load_again_does_not_isolate() {
    let dir = tame_testing::scratch_dir("check-v1-drift-");
    v1_applied(dir.path(), "1\n");
    let m = read(dir.path());
    let r = check(&m, &Target::asked(&m, cpus("2-7")));
    let f = get(&r, "cpus.isolcpus");
    assert_eq!(f.severity, Severity::Warn, "{f:?}");
    assert_eq!(f.found, "CPUs 2-7 are not isolated from the scheduler");
    // Nor when the root balances across every cpuset.
    let dir = tame_testing::scratch_dir("check-v1-root-");
    v1_applied(dir.path(), "0\n");
    put(
        dir.path(),
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        "1\n",
    );
    let m = read(dir.path());
    let r = check(&m, &Target::asked(&m, cpus("2-7")));
    assert_eq!(get(&r, "cpus.isolcpus").severity, Severity::Warn);
}

#[test]
fn an_applied_v2_partition_isolates_at_run_time() {
    let dir = tame_testing::scratch_dir("check-v2-");
    no_boot_isolation(CgroupLayout::V2 {
        partitions: vec![("/tame-rt".into(), cpus("2-7"), "isolated".into())],
    })
    .write(dir.path())
    .unwrap();
    let m = read(dir.path());
    let t = Target::default_for(&m);
    assert_eq!(t.cpus, cpus("2-7"));
    let r = check(&m, &t);
    let f = get(&r, "cpus.isolcpus");
    assert_eq!(f.severity, Severity::Ok);
    assert!(
        f.found.contains(
            "CPUs 2-7 at run time by partition \"rt\" (tame apply: isolated cgroup v2 cpuset partition)"
        ),
        "{}",
        f.found
    );
    assert!(f.found.contains("only boot parameters stop the tick"));
    assert!(r.next.contains("`tame bench cycle -p rt`"), "{}", r.next);
}

#[test]
fn boot_isolation_and_foreign_partitions_are_named_as_such() {
    // rt-8cpu: isolcpus=managed_irq,domain,2-7 nohz_full=2-7 and a v2 partition /rt on 2-7.
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture("rt-8cpu")));
    let r = check(&m, &Target::asked(&m, cpus("2-7")));
    let f = get(&r, "cpus.isolcpus");
    assert_eq!(f.severity, Severity::Ok);
    assert_eq!(
        f.found,
        "CPUs 2-7 are isolated: CPUs 2-7 at boot (isolcpus=domain)"
    );
    // Nothing left to move there: measure, and tame run takes boot-isolated CPUs.
    assert_eq!(
        r.next,
        "measure there: `tame bench cycle --cpus 2-7`, then run the work there with `tame run --cpus 2-7 -- CMD`"
    );
    // two-socket-smt: /rt0 (12-23) is somebody else's isolated partition.
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture(
        "two-socket-smt",
    )));
    let r = check(&m, &Target::asked(&m, cpus("12-23")));
    let f = get(&r, "cpus.isolcpus");
    assert!(
        f.found.contains(
            "CPUs 12-23 at run time by cgroup /rt0 (isolated cgroup v2 cpuset partition)"
        ),
        "{}",
        f.found
    );
}

#[test]
fn the_boot_line_can_cover_what_run_time_isolation_cannot() {
    let dir = tame_testing::scratch_dir("check-v1-boot-");
    v1_applied(dir.path(), "0\n");
    put(
        dir.path(),
        "/proc/cmdline",
        "root=/dev/sda2 nohz_full=2-7 isolcpus=managed_irq,2-7\n",
    );
    let m = read(dir.path());
    let f = check(&m, &Target::asked(&m, cpus("2-7")))
        .findings
        .into_iter()
        .find(|f| f.id == "cpus.isolcpus")
        .unwrap();
    assert_eq!(f.severity, Severity::Ok);
    assert!(
        f.found
            .ends_with("the boot line does what run-time isolation cannot (nohz_full, rcu_nocbs, isolcpus=managed_irq)"),
        "{}",
        f.found
    );
}

#[test]
fn next_step_follows_the_findings() {
    // dev-vm, nothing isolated: CPU 1 carries a kernel-managed IRQ.
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture("dev-vm")));
    let r = check(&m, &Target::default_for(&m));
    assert_eq!(
        r.next,
        "isolate CPU 1: write a spec with it in an isolated partition (see examples/minimal.toml), check it with `tame plan SPEC` and apply it with `tame apply SPEC` (CPUs with the kernel-managed IRQs of irqs.managed cannot be freed at run time: choose others, as tame assess does) — or `tame assess --cpus 1` chooses CPUs, applies a partition, measures shared against partitioned and reverts"
    );
    // Every CPU checked: housekeeping first.
    let r = check(&m, &Target::asked(&m, m.cpus.online.clone()));
    assert_eq!(
        r.next,
        "leave at least one online CPU out of the checked ones for housekeeping, e.g. --cpus 1 (see cpus.housekeeping)"
    );
    // A failure fixed at run time comes before isolating: irqbalance spreading IRQs.
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture(
        "two-socket-smt",
    )));
    let r = check(&m, &Target::asked(&m, cpus("12-23")));
    assert_eq!(get(&r, "irqs.irqbalance").severity, Severity::Fail);
    assert!(
        r.next
            .starts_with("fix irqs.irqbalance first (the fix is above, no reboot needed)"),
        "{}",
        r.next
    );
    // Isolated by a foreign partition with threads still allowed there: a tame partition moves them.
    let mut m = m;
    m.processes.irqbalance.pids.clear();
    let r = check(&m, &Target::asked(&m, cpus("12-23")));
    assert_eq!(get(&r, "cpus.threads").severity, Severity::Warn);
    assert!(
        r.next
            .starts_with("move what still runs on CPUs 12-23: a spec"),
        "{}",
        r.next
    );
}

#[test]
fn next_step_is_in_the_json_and_old_reports_still_read() {
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture("rt-8cpu")));
    let r = check(&m, &Target::default_for(&m));
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["next"].as_str(), Some(r.next.as_str()));
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("next");
    let back: CheckReport = serde_json::from_value(old).unwrap();
    assert_eq!(back.next, "");
}

#[test]
fn cpuidle_driver_present_absent_and_idle_poll() {
    // dev-vm was captured with the haltpoll driver.
    let mut m = HostModel::read(&Root::new(tame_testing::committed_fixture("dev-vm")));
    let t = Target::default_for(&m);
    let f = get(&check(&m, &t), "power.cpuidle").clone();
    assert_eq!(f.severity, Severity::Ok);
    assert!(
        f.found.starts_with("cpuidle driver haltpoll"),
        "{}",
        f.found
    );
    // The same guest without a driver (this VM's kernel now): halt through the hypervisor.
    m.power.cpuidle_driver = Some("none".into());
    let f = get(&check(&m, &t), "power.cpuidle").clone();
    assert_eq!(f.severity, Severity::Warn);
    for part in [
        "no cpuidle driver (current_driver is none)",
        "runs the architecture's halt",
        "idle = \"poll\" in a spec (a PM QoS limit) changes nothing here",
        "goes through the hypervisor",
        "can wake more slowly (median) than a busy shared one",
    ] {
        assert!(f.found.contains(part), "{part}: {}", f.found);
    }
    let fix = f.fix.as_deref().unwrap();
    for part in [
        "boot with idle=poll",
        // CONFIG_HALTPOLL_CPUIDLE=y in this guest's kernel.
        "boot with cpuidle_haltpoll.force=1",
        "tame bench cycle --busy-wait",
    ] {
        assert!(fix.contains(part), "{part}: {fix}");
    }
    assert!(!f.needs_reboot, "a spinning task needs no reboot");

    // Bare metal without a driver: worth knowing, halt is the hardware's own.
    let dir = tame_testing::scratch_dir("check-idle-");
    let mut h = SyntheticHost::two_socket_smt();
    h.cpuidle_driver = "none".into();
    h.write(dir.path()).unwrap();
    let m = read(dir.path());
    let f = get(&check(&m, &Target::asked(&m, cpus("12"))), "power.cpuidle").clone();
    assert_eq!(f.severity, Severity::Info);
    assert!(!f.found.contains("hypervisor"), "{}", f.found);
    assert!(
        f.found
            .ends_with("its median wakeup can be slower than a busy shared CPU's"),
        "{}",
        f.found
    );
    assert!(!f.fix.as_deref().unwrap().contains("haltpoll"));
    // idle=poll on the boot line: idle CPUs never halt.
    let m = HostModel::read(&Root::new(tame_testing::committed_fixture("rt-8cpu")));
    let f = get(&check(&m, &Target::default_for(&m)), "power.cpuidle").clone();
    assert_eq!(f.severity, Severity::Ok);
    assert!(f.found.starts_with("idle=poll"), "{}", f.found);
}
