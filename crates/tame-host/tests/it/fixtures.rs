//! The host layer on every fixture host: the committed trees under
//! fixtures/hosts/ and the generated 256-CPU machine. No root needed.

use std::path::PathBuf;

use tame_host::cgroup::{CgroupVersion, PartitionKind};
use tame_host::irq::ManagedSource;
use tame_host::kernel::PreemptModel;
use tame_host::process::SchedPolicy;
use tame_host::{CpuList, HostModel, Root};
use tame_testing::synthetic::SyntheticHost;

fn scratch() -> tempfile::TempDir {
    tame_testing::scratch_dir("host-fixture-")
}

fn fixture(name: &str) -> PathBuf {
    tame_testing::committed_fixture(name)
}

fn read(name: &str) -> HostModel {
    HostModel::read(&Root::new(fixture(name)))
}

#[test]
fn dev_vm_capture_shows_the_known_facts_of_this_machine() {
    let m = read("dev-vm");
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.cpus.online.to_string(), "0-1");
    let irq36 = m.irqs.irq(36).expect("IRQ 36 in the capture");
    assert_eq!(irq36.name, "virtio1-req.0");
    assert!(irq36.managed);
    assert_eq!(irq36.managed_source, ManagedSource::NameHeuristic);
    assert_eq!(irq36.fires_on().unwrap().to_string(), "1");
    assert!(m.irqs.irqs.iter().filter(|i| i.managed).count() == 1);
    assert!(m.irqs.vector("LOC").is_some_and(|v| v.counts.len() == 2));
    assert_eq!(m.kernel.preemption.model, PreemptModel::Dynamic);
    assert_eq!(m.kernel.config.as_ref().unwrap().source, "/proc/config.gz");
    assert_eq!(m.kernel.supports_nohz_full(), Some(false));
    assert_eq!(m.kernel.lockdown.state.as_deref(), Some("integrity"));
    assert_eq!(m.power.cpuidle_driver.as_deref(), Some("haltpoll"));
    assert!(m.power.cpufreq.is_empty());
    assert_eq!(m.power.idle_states(1)[0].name, "POLL");
    assert_eq!(m.sched.clocksource.as_deref(), Some("tsc"));
    assert_eq!(m.sched.rt_runtime_us, Some(950_000));
    assert!(m.virt.hypervisor);
    assert_eq!(m.virt.vendor.as_deref(), Some("KVM"));
    let cpuset = m.cgroups.cpuset.as_ref().unwrap();
    assert_eq!(cpuset.version, CgroupVersion::V1);
    assert_eq!(cpuset.mount, "/sys/fs/cgroup/cpuset");
    let v2 = m.cgroups.v2.as_ref().unwrap();
    assert_eq!(v2.mount, "/sys/fs/cgroup/unified");
    assert!(!v2.controllers.iter().any(|c| c == "cpuset" || c == "cpu"));
    assert!(m
        .processes
        .tasks
        .iter()
        .any(|t| t.kthread && t.comm == "ksoftirqd/1"));
    assert!(!m.processes.irqbalance.running());
}

#[test]
fn two_socket_host_topology_numa_cgroups_resctrl() {
    let m = read("two-socket-smt");
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.cpus.online.len(), 48);
    assert_eq!(m.cpus.packages(), vec![0, 1]);
    assert_eq!(m.cpus.core_count(), 24);
    assert_eq!(m.cpus.cpu(0).unwrap().thread_siblings.to_string(), "0,24");
    assert_eq!(m.cpus.online_siblings(13).to_string(), "37");
    assert_eq!(m.cpus.nodes.len(), 2);
    assert_eq!(m.cpus.nodes[1].cpus.to_string(), "12-23,36-47");
    assert_eq!(m.cpus.cpu(40).unwrap().node, Some(1));
    let l3: Vec<_> = m.cpus.caches.iter().filter(|c| c.level == 3).collect();
    assert_eq!(l3.len(), 2);
    assert_eq!(
        m.cpus.last_level_cache(5).unwrap().cpus.to_string(),
        "0-11,24-35"
    );
    assert_eq!(m.cpus.caches.len(), 24 * 3 + 2);
    assert!(m.cpus.pci_devices.iter().any(|d| d.numa_node == Some(1)));
    assert_eq!(m.irqs.irqs.len(), 300);
    let managed: Vec<_> = m.irqs.irqs.iter().filter(|i| i.managed).collect();
    assert_eq!(managed.len(), 96);
    assert!(managed
        .iter()
        .all(|i| i.managed_source == ManagedSource::Debugfs));
    let cpuset = m.cgroups.cpuset.as_ref().unwrap();
    assert_eq!(cpuset.version, CgroupVersion::V2);
    let parts: Vec<_> = m.cgroups.partitions().collect();
    assert_eq!(parts.len(), 2);
    let rt0 = parts.iter().find(|p| p.path == "/rt0").unwrap();
    let state = rt0.partition.as_ref().unwrap();
    assert_eq!((state.kind, state.valid), (PartitionKind::Isolated, true));
    let broken = parts.iter().find(|p| p.path == "/broken").unwrap();
    let state = broken.partition.as_ref().unwrap();
    assert!(!state.valid);
    assert!(state.reason.as_deref().unwrap().contains("not exclusive"));
    let resctrl = m.tracing.resctrl.as_ref().unwrap();
    let names: Vec<&str> = resctrl.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["L3", "L3_MON", "MB"]);
    assert_eq!(resctrl.resources[0].cbm_mask.as_deref(), Some("fff"));
    assert_eq!(resctrl.resources[2].bandwidth_gran, Some(10));
    assert_eq!(resctrl.groups, vec!["rt0"]);
    assert!(m
        .tracing
        .tracefs
        .as_ref()
        .unwrap()
        .tracers
        .iter()
        .any(|t| t == "osnoise"));
    assert_eq!(m.memory.thp_enabled.as_deref(), Some("always"));
    assert_eq!(m.memory.swaps.len(), 1);
    assert_eq!(
        m.power.cpufreq(3).unwrap().governor.as_deref(),
        Some("powersave")
    );
    assert_eq!(m.power.boost, Some(true));
    assert!(m.processes.irqbalance.running());
    assert_eq!(m.processes.irqbalance.banned_cpus, None);
}

#[test]
fn rt_host_boot_isolation_and_config_gz() {
    let m = read("rt-8cpu");
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.kernel.preemption.model, PreemptModel::Rt);
    assert_eq!(m.kernel.config.as_ref().unwrap().source, "/proc/config.gz");
    let iso = m.kernel.boot.isolcpus.as_ref().unwrap();
    assert_eq!(iso.flags, vec!["managed_irq", "domain"]);
    assert_eq!(iso.cpus.to_string(), "2-7");
    assert_eq!(m.kernel.boot.nohz_full.as_ref().unwrap().to_string(), "2-7");
    assert_eq!(
        m.kernel.boot.irqaffinity.as_ref().unwrap().to_string(),
        "0-1"
    );
    assert_eq!(m.cpus.isolated.to_string(), "2-7");
    assert_eq!(
        m.processes
            .irqbalance
            .banned_cpus
            .as_ref()
            .unwrap()
            .to_string(),
        "2-7"
    );
    assert_eq!(
        m.processes.irqbalance.banned_source.as_deref(),
        Some("/etc/default/irqbalance")
    );
    let fs = &m.sched.fair_server.cpus;
    assert_eq!(fs.len(), 8);
    assert!(fs.iter().all(|c| (c.runtime_ns == 0) == (c.cpu >= 2)));
    let rt: Vec<_> = m.processes.realtime().filter(|t| !t.kthread).collect();
    assert_eq!(rt.len(), 1);
    assert_eq!(
        (rt[0].comm.as_str(), rt[0].policy, rt[0].rt_priority),
        ("control_loop", SchedPolicy::Fifo, 80)
    );
    assert_eq!(m.processes.kthreads_bound_to(5).count(), 4);
    let four_and_five = CpuList::parse("4-5").unwrap();
    assert_eq!(
        m.processes.kthreads_bound_within(&four_and_five).count(),
        m.processes.kthreads_bound_to(4).count() + 4
    );
    assert!(m
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed)
        .all(|i| i.fires_on().unwrap().is_subset(&"0-1".parse().unwrap())));
}

#[test]
fn generated_256_cpu_host_with_2000_irqs() {
    let dir = scratch();
    SyntheticHost::big_256().write(dir.path()).unwrap();
    let m = HostModel::read(&Root::new(dir.path()));
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    assert_eq!(m.cpus.online.len(), 256);
    assert_eq!(m.irqs.irqs.len(), 2000);
    assert_eq!(m.irqs.irqs.iter().filter(|i| i.managed).count(), 1024);
    assert_eq!(m.irqs.vector("LOC").unwrap().counts.len(), 256);
    assert_eq!(m.power.idle.len(), 256);
    assert_eq!(m.processes.kthreads_bound_to(255).count(), 4);
}

#[test]
fn capture_of_a_fixture_reads_back_to_the_same_model() {
    let dir = scratch();
    let source = Root::new(fixture("two-socket-smt"));
    let report = tame_host::capture::capture(&source, dir.path()).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(report.files > 1000);
    let original = HostModel::read(&source);
    let copy = HostModel::read(&Root::new(dir.path()));
    assert_eq!(copy, original);
}

#[test]
fn missing_and_malformed_files_become_problems_naming_path_and_line() {
    let dir = scratch();
    SyntheticHost::rt_8cpu().write(dir.path()).unwrap();
    let root = Root::new(dir.path());
    std::fs::remove_file(root.path("/proc/interrupts")).unwrap();
    std::fs::write(
        root.path("/proc/swaps"),
        "Filename Type Size Used Priority\n/swap file big 0 -2\n",
    )
    .unwrap();
    std::fs::write(root.path("/proc/sys/kernel/timer_migration"), "maybe\n").unwrap();
    let m = HostModel::read(&root);
    let find = |p: &str| {
        m.problems
            .iter()
            .find(|x| x.path == p)
            .unwrap_or_else(|| panic!("no problem for {p}: {:?}", m.problems))
    };
    assert!(find("/proc/interrupts").error.starts_with("ENOENT"));
    assert!(find("/proc/swaps").error.starts_with("line 2:"));
    assert!(find("/proc/sys/kernel/timer_migration")
        .error
        .contains("line 1"));
    assert!(m.irqs.irqs.is_empty());
    assert_eq!(m.sched.timer_migration, None);
    // The rest of the model is still there.
    assert_eq!(m.cpus.online.len(), 8);
}

#[test]
fn model_serialises_and_deserialises() {
    let m = read("rt-8cpu");
    let json = serde_json::to_string(&m).unwrap();
    let back: HostModel = serde_json::from_str(&json).unwrap();
    assert_eq!(back, m);
}

/// System test: the live machine, captured and read back, gives the same
/// hardware, kernel and IRQ facts (processes and affinities may change meanwhile).
#[test]
fn live_machine_capture_reads_back() {
    let live_root = Root::system();
    if !tame_testing::require::require(live_root.exists("/proc/interrupts"), "/proc/interrupts") {
        return;
    }
    let dir = scratch();
    let report = tame_host::capture::capture(&live_root, dir.path()).unwrap();
    assert!(report.files > 50, "{report:?}");
    let mut live = HostModel::read(&live_root);
    let mut copy = HostModel::read(&Root::new(dir.path()));
    // Free (and, with a memory balloon, total) memory moves between the two reads.
    for n in live.cpus.nodes.iter_mut().chain(copy.cpus.nodes.iter_mut()) {
        n.mem_free_kib = None;
        n.mem_total_kib = None;
    }
    assert!(!live.cpus.online.is_empty());
    assert_eq!(copy.cpus, live.cpus);
    assert_eq!(copy.kernel, live.kernel);
    assert_eq!(copy.power.idle.len(), live.power.idle.len());
    let names = |m: &HostModel| -> Vec<(u32, String, bool)> {
        m.irqs
            .irqs
            .iter()
            .map(|i| (i.number, i.name.clone(), i.managed))
            .collect()
    };
    assert_eq!(names(&copy), names(&live));
    assert_eq!(copy.cgroups.cpuset, live.cgroups.cpuset);
    assert!(!copy.processes.tasks.is_empty());
}

#[test]
fn unreadable_debugfs_irq_files_fall_back_to_the_name_rule_with_one_problem() {
    let dir = scratch();
    SyntheticHost::rt_8cpu().write(dir.path()).unwrap();
    let root = Root::new(dir.path());
    // A directory where a file is expected reads as EISDIR, like EPERM under lockdown.
    let first = root.path("/sys/kernel/debug/irq/irqs/0");
    std::fs::remove_file(&first).unwrap();
    std::fs::create_dir(&first).unwrap();
    let m = HostModel::read(&root);
    assert_eq!(m.problems.len(), 1, "{:?}", m.problems);
    assert!(
        m.problems[0].error.starts_with("EISDIR"),
        "{:?}",
        m.problems
    );
    assert!(m
        .irqs
        .irqs
        .iter()
        .all(|i| i.managed_source == ManagedSource::NameHeuristic));
    // nvmeNqM (M > 0) are still recognised as managed.
    assert_eq!(m.irqs.irqs.iter().filter(|i| i.managed).count(), 8);
}
