//! Plan, apply, status and revert on fixture trees (no root needed).

use crate::common::*;
use tame_host::cgroup::{CgroupVersion, V1Hierarchy};
use tame_host::irq::{Irq, ManagedSource};
use tame_host::{CpuList, HostModel, Root};
use tame_partition::status::Drift;
use tame_partition::{apply, plan, revert, status, ApplyError, Spec, Step};
use tame_partition::{Applied, AppliedSpecError};
use tame_testing::synthetic::SyntheticHost;

fn spec(text: &str) -> Spec {
    Spec::parse("test.toml", text).unwrap()
}

fn write_paths(plan: &tame_partition::Plan) -> Vec<String> {
    plan.runtime
        .iter()
        .filter_map(|s| match s {
            Step::Write { path, .. } | Step::Mkdir { path, .. } | Step::Owner { path, .. } => {
                Some(path.clone())
            }
            Step::MoveTasks { .. } => None,
        })
        .collect()
}

#[test]
fn v1_apply_status_second_apply_and_revert() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let s = spec(MINIMAL_8);
    let host = HostModel::read(&f.root);
    let p = plan(&s, &host).unwrap();
    let paths = write_paths(&p);
    for want in [
        "/sys/fs/cgroup/cpuset/tame-rt",
        "/sys/fs/cgroup/cpuset/tame-rt/cpuset.cpu_exclusive",
        "/sys/fs/cgroup/cpuset/tame-rt/cpuset.sched_load_balance",
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        "/proc/irq/default_smp_affinity",
        "/sys/devices/virtual/workqueue/cpumask",
        "/proc/sys/kernel/timer_migration",
        "/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us",
    ] {
        assert!(
            paths.iter().any(|p| p == want),
            "{want} missing from {paths:#?}"
        );
    }
    // Only the per-CPU kernel threads stay; everything else moves.
    assert!(p.stay.iter().all(|t| t.pinned_by_kernel));
    assert!(p.stay.iter().any(|t| t.comm == "ksoftirqd/3"));

    let report = apply(&f.root, &s, MINIMAL_8, &f.journal, None).unwrap();
    assert!(!report.unchanged);
    assert!(report.tasks_moved >= 4, "{report:?}");
    let r = &f.root;
    assert_eq!(
        r.read("/sys/fs/cgroup/cpuset/tame-rt/cpuset.cpus").unwrap(),
        "2-7"
    );
    assert_eq!(
        r.read("/sys/fs/cgroup/cpuset/tame-rt/cpuset.sched_load_balance")
            .unwrap(),
        "0"
    );
    assert_eq!(
        r.read("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance")
            .unwrap(),
        "0"
    );
    assert_eq!(r.read("/proc/irq/default_smp_affinity").unwrap(), "03");
    assert_eq!(
        r.read("/sys/devices/virtual/workqueue/cpumask").unwrap(),
        "03"
    );
    assert_eq!(
        r.read("/sys/devices/system/cpu/cpu5/power/pm_qos_resume_latency_us")
            .unwrap(),
        "n/a"
    );
    let root_tasks = r.read("/sys/fs/cgroup/cpuset/tasks").unwrap();
    let system_tasks = r.read("/sys/fs/cgroup/cpuset/tame-system/tasks").unwrap();
    assert!(system_tasks.lines().count() >= 4);
    // Every task left in the root is one the kernel places itself.
    assert!(!root_tasks.is_empty());
    for t in tame_host::cgroup::members::read(r, "/sys/fs/cgroup/cpuset/tasks") {
        assert!(t.kernel_places(), "{t:?} was not moved");
    }
    // Movable IRQs no longer allow isolated CPUs (managed ones are left alone).
    for irq in HostModel::read(r).irqs.irqs.iter().filter(|i| !i.managed) {
        let aff = irq.affinity.clone().unwrap();
        assert!(
            aff.intersection(&CpuList::parse("2-7").unwrap()).is_empty(),
            "IRQ {} on {aff}",
            irq.number
        );
    }

    let st = status(&f.root, &f.journal).unwrap();
    assert!(st.applied);
    assert_eq!(st.interrupted, 0);
    assert!(st.drift.is_empty(), "{:?}", st.drift);
    assert_eq!(st.spec.as_deref(), Some(MINIMAL_8));
    // The audit finds the per-CPU threads of isolated CPUs (which cannot move) and nothing movable.
    assert!(st
        .audit
        .tasks
        .iter()
        .any(|t| t.comm == "migration/4" && t.bound_by_kernel));

    // Someone changes a value: status reports drift; a second apply repairs only that.
    put(&f.root, "/proc/sys/kernel/timer_migration", "1\n");
    let st = status(&f.root, &f.journal).unwrap();
    assert_eq!(st.drift.len(), 1);
    assert_eq!(st.drift[0].path, "/proc/sys/kernel/timer_migration");
    let again = apply(&f.root, &s, MINIMAL_8, &f.journal, None).unwrap();
    assert_eq!(again.writes, 1, "{again:?}");
    // And a third apply changes nothing at all.
    let journal_before = std::fs::read(f.journal.join("journal")).unwrap();
    let third = apply(&f.root, &s, MINIMAL_8, &f.journal, None).unwrap();
    assert!(third.unchanged, "{third:?}");
    assert_eq!(
        std::fs::read(f.journal.join("journal")).unwrap(),
        journal_before
    );

    // Another spec is refused while this one is applied.
    let other = MINIMAL_8.replace("2-7", "3-7");
    assert!(matches!(
        apply(&f.root, &spec(&other), &other, &f.journal, None),
        Err(ApplyError::OtherSpecApplied { .. })
    ));

    let rep = revert(&f.root, &f.journal).unwrap();
    assert!(rep.not_restored.is_empty(), "{rep:?}");
    assert!(rep.journal_removed);
    let after = snapshot(&f.root);
    assert!(
        differences(&before, &after).is_empty(),
        "{:#?}",
        differences(&before, &after)
    );
    assert!(!status(&f.root, &f.journal).unwrap().applied);
}

#[test]
fn v2_isolated_and_shared_partitions_with_resctrl() {
    let f = fixture(&SyntheticHost::two_socket_smt());
    add_available_governors(&f.root, "performance powersave");
    let before = snapshot(&f.root);
    let text = r#"
rt_runtime_us = -1

[[partition]]
name = "system"
cpus = "0-3,24-27"
role = "system"

[[partition]]
name = "rt"
cpus = "4-5,28-29"
role = "isolated"
mems = "0"
idle = "10us"
governor = "performance"
cache_ways = 4
mem_bandwidth = 50

[[partition]]
name = "pool"
cpus = "6-7,30-31"
role = "shared"
"#;
    let s = spec(text);
    let host = HostModel::read(&f.root);
    assert_eq!(
        host.cgroups.cpuset.as_ref().unwrap().version,
        CgroupVersion::V2
    );
    let p = plan(&s, &host).unwrap();
    // v2 partitions take their CPUs from every other cgroup: nothing to move by hand.
    assert!(p
        .runtime
        .iter()
        .all(|s| !matches!(s, Step::MoveTasks { .. })));
    apply(&f.root, &s, text, &f.journal, None).unwrap();
    let r = &f.root;
    assert_eq!(
        r.read("/sys/fs/cgroup/tame-rt/cpuset.cpus.partition")
            .unwrap(),
        "isolated"
    );
    assert_eq!(
        r.read("/sys/fs/cgroup/tame-pool/cpuset.cpus.partition")
            .unwrap(),
        "root"
    );
    assert_eq!(r.read("/sys/fs/cgroup/tame-rt/cpuset.mems").unwrap(), "0");
    assert!(
        !r.exists("/sys/fs/cgroup/tame-system"),
        "the v2 system partition is the rest"
    );
    assert_eq!(
        r.read("/sys/fs/resctrl/tame-rt/schemata").unwrap(),
        "L3:0=f00;1=f00\nMB:0=50;1=50\n"
    );
    assert_eq!(
        r.read("/sys/fs/resctrl/tame-rt/cpus_list").unwrap(),
        "4-5,28-29"
    );
    assert_eq!(
        r.read("/sys/fs/resctrl/schemata").unwrap(),
        "L3:0=ff;1=ff\n"
    );
    assert_eq!(
        r.read("/proc/sys/kernel/sched_rt_runtime_us").unwrap(),
        "-1"
    );
    assert_eq!(
        r.read("/sys/devices/system/cpu/cpu28/power/pm_qos_resume_latency_us")
            .unwrap(),
        "10"
    );
    assert_eq!(
        r.read("/sys/devices/system/cpu/cpu4/cpufreq/scaling_governor")
            .unwrap(),
        "performance"
    );
    // Movable IRQs may land on the system partition only; managed NVMe queues are left to the kernel.
    let rt = CpuList::parse("4-7,28-31").unwrap();
    for irq in HostModel::read(r).irqs.irqs.iter().filter(|i| !i.managed) {
        assert!(
            irq.affinity.clone().unwrap().intersection(&rt).is_empty(),
            "IRQ {}",
            irq.number
        );
    }
    let rep = revert(&f.root, &f.journal).unwrap();
    assert!(rep.not_restored.is_empty(), "{rep:?}");
    assert!(
        differences(&before, &snapshot(&f.root)).is_empty(),
        "{:#?}",
        differences(&before, &snapshot(&f.root))
    );
}

#[test]
fn v2_without_cpuset_in_subtree_control_enables_it_and_reverts() {
    let f = fixture(&SyntheticHost::two_socket_smt());
    put(
        &f.root,
        "/sys/fs/cgroup/cgroup.subtree_control",
        "cpu io memory pids\n",
    );
    let before = snapshot(&f.root);
    let text = "[[partition]]\nname = \"s\"\ncpus = \"0-3\"\nrole = \"system\"\n[[partition]]\nname = \"r\"\ncpus = \"8\"\nrole = \"isolated\"\n";
    apply(&f.root, &spec(text), text, &f.journal, None).unwrap();
    // The kernel (here the fixture backend) takes `+cpuset` and lists it first.
    assert_eq!(
        f.root
            .read("/sys/fs/cgroup/cgroup.subtree_control")
            .unwrap(),
        "cpuset cpu io memory pids\n"
    );
    let rep = revert(&f.root, &f.journal).unwrap();
    assert!(rep.not_restored.is_empty(), "{rep:?}");
    assert!(differences(&before, &snapshot(&f.root)).is_empty());
}

#[test]
fn v2_status_and_plan_agree_that_an_enabled_controller_is_no_change() {
    const SC: &str = "/sys/fs/cgroup/cgroup.subtree_control";
    let f = fixture(&SyntheticHost::two_socket_smt());
    put(&f.root, SC, "cpu io memory pids\n");
    let text = "[[partition]]\nname = \"s\"\ncpus = \"0-3\"\nrole = \"system\"\n[[partition]]\nname = \"r\"\ncpus = \"8\"\nrole = \"isolated\"\n";
    let s = spec(text);
    assert!(write_paths(&plan(&s, &HostModel::read(&f.root)).unwrap()).contains(&SC.to_string()));
    apply(&f.root, &s, text, &f.journal, None).unwrap();
    // apply wrote `+cpuset`; the kernel (the fixture backend) prints the enabled set.
    assert_eq!(f.root.read(SC).unwrap(), "cpuset cpu io memory pids\n");
    let st = status(&f.root, &f.journal).unwrap();
    assert!(st.drift.is_empty(), "{:#?}", st.drift);
    assert!(!write_paths(&plan(&s, &HostModel::read(&f.root)).unwrap()).contains(&SC.to_string()));
    // Someone disables cpuset again: status says so, and plan would enable it.
    put(&f.root, SC, "cpu io memory pids\n");
    let st = status(&f.root, &f.journal).unwrap();
    assert_eq!(
        st.drift,
        vec![Drift {
            path: SC.into(),
            applied: "+cpuset".into(),
            now: Some("cpu io memory pids".into()),
            // What it is for, and that re-applying the spec writes it back.
            what: Some("enable cpusets for child cgroups".into()),
            reapply_fixes: true,
        }]
    );
    assert!(write_paths(&plan(&s, &HostModel::read(&f.root)).unwrap()).contains(&SC.to_string()));
}

#[test]
fn apply_returns_the_applied_partitions_and_the_journal_gives_them_back() {
    let f = v1_fixture();
    let read = |f: &Fixture| Applied::read(&f.root, &f.journal);
    assert!(read(&f).unwrap().is_none());
    let s = spec(MINIMAL_8);
    let applied = apply(&f.root, &s, MINIMAL_8, &f.journal, None)
        .unwrap()
        .applied;
    assert_eq!(applied.spec, s);
    assert_eq!(applied.text, MINIMAL_8);
    // Typed where it is born: each partition with its CPUs and its cgroup (v1: every
    // partition has its own, below the cpuset mount).
    for (p, q) in applied.partitions.iter().zip(&s.partitions) {
        assert_eq!((&p.name, p.role, &p.cpus), (&q.name, q.role, &q.cpus));
        let cgroup = p.cgroup.as_ref().expect("a cpuset hierarchy is mounted");
        assert!(
            cgroup.path.ends_with(&format!("tame-{}", p.name)),
            "{cgroup:?}"
        );
        assert!(f.root.exists(&cgroup.dir), "{cgroup:?}");
    }
    assert_eq!(read(&f).unwrap(), Some(applied));
    revert(&f.root, &f.journal).unwrap();
    assert!(read(&f).unwrap().is_none());
    // A journal whose note is no spec is damaged, not "nothing applied".
    let mut j = tame_host::journal::Journal::open(&f.root, &f.journal).unwrap();
    j.note(tame_partition::apply::SPEC_NOTE, b"[[partition]\n")
        .unwrap();
    let e = read(&f).unwrap_err();
    assert!(
        matches!(e, AppliedSpecError::Spec(_)) && e.to_string().starts_with("applied spec:1:"),
        "{e}"
    );
}

#[test]
fn big_host_plans_apply_and_revert() {
    let f = fixture(&SyntheticHost::big_256());
    let before = snapshot(&f.root);
    let text = "[[partition]]\nname = \"system\"\ncpus = \"0-15,128-143\"\nrole = \"system\"\n\
                [[partition]]\nname = \"rt\"\ncpus = \"16-63,144-191\"\nrole = \"isolated\"\nidle = \"poll\"\n";
    let s = spec(text);
    let host = HostModel::read(&f.root);
    assert_eq!(host.cpus.online.len(), 256);
    let p = plan(&s, &host).unwrap();
    let irq_writes = p
        .runtime
        .iter()
        .filter(|s| matches!(s, Step::Write { path, .. } if path.starts_with("/proc/irq/") && path.ends_with("smp_affinity_list")))
        .count();
    assert!(irq_writes > 900, "{irq_writes} IRQ writes");
    // Managed IRQs on the isolated CPUs are named in a warning.
    assert!(
        p.warnings.iter().any(|w| w.contains("kernel-managed")),
        "{:?}",
        p.warnings
    );
    assert!(p
        .needs_reboot
        .iter()
        .any(|b| b.parameter == "nohz_full=16-63,144-191"));
    apply(&f.root, &s, text, &f.journal, None).unwrap();
    let rep = revert(&f.root, &f.journal).unwrap();
    assert!(rep.not_restored.is_empty());
    assert!(differences(&before, &snapshot(&f.root)).is_empty());
}

#[test]
fn every_error_is_reported_before_anything_is_written() {
    let f = fixture(&SyntheticHost::two_socket_smt());
    add_available_governors(&f.root, "performance powersave");
    let before = snapshot(&f.root);
    let text = r#"
[[partition]]
name = "system"
cpus = "0-3"
role = "system"

[[partition]]
name = "rt"
cpus = "3-5,99"
role = "isolated"
mems = "7"
irqs = true
governor = "turbo"
cache_ways = 12
"#;
    let err = apply(&f.root, &spec(text), text, &f.journal, None).unwrap_err();
    let ApplyError::Invalid(inv) = err else {
        panic!("expected a validation error, got {err}");
    };
    let all = inv.errors.join("\n");
    for want in [
        "CPU 99 is not online",
        "CPU 3 is already in another partition",
        "memory node 7 has no memory",
        "takes no device IRQs",
        "governor \"turbo\" is not available",
        "beyond the hardware",
    ] {
        assert!(all.contains(want), "missing {want:?} in:\n{all}");
    }
    assert!(differences(&before, &snapshot(&f.root)).is_empty());
    assert!(!f.journal.exists());

    let no_system = "[[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\n";
    let err = plan(&spec(no_system), &HostModel::read(&f.root)).unwrap_err();
    assert!(err.errors[0].contains("exactly one must"), "{err}");
}

#[test]
fn rt_runtime_zero_is_refused_with_its_consequence() {
    let f = v1_fixture();
    let host = HostModel::read(&f.root);
    let zero = format!("rt_runtime_us = 0\n{MINIMAL_8}");
    let err = plan(&spec(&zero), &host).unwrap_err();
    let all = err.errors.join("\n");
    for want in [
        "rt_runtime_us = 0",
        "stops every real-time thread, your own loop included",
        "write -1 for no RT throttling, or a positive runtime up to the period (1000000)",
    ] {
        assert!(all.contains(want), "missing {want:?} in:\n{all}");
    }
    let beyond = format!("rt_runtime_us = 1000001\n{MINIMAL_8}");
    let err = plan(&spec(&beyond), &host).unwrap_err();
    assert!(
        err.errors[0].contains("must be -1 (no RT throttling) or from 1 to the period"),
        "{err}"
    );
    for fine in ["-1", "1", "950000", "1000000"] {
        let text = format!("rt_runtime_us = {fine}\n{MINIMAL_8}");
        assert!(plan(&spec(&text), &host).is_ok(), "{fine} refused");
    }
}

/// The development VM: 2 CPUs, the disk queue IRQ 36 kernel-managed on CPU 1
/// (the model of an empty tree, with those facts set).
fn dev_vm_model() -> HostModel {
    let dir = tempfile::tempdir().unwrap();
    let mut m = HostModel::read(&Root::new(dir.path()));
    m.cpus.online = CpuList::parse("0-1").unwrap();
    m.cpus.possible = CpuList::parse("0-1").unwrap();
    m.cgroups.v1 = vec![V1Hierarchy {
        mount: "/sys/fs/cgroup/cpuset".into(),
        controllers: vec!["cpuset".into()],
        name: None,
    }];
    m.cgroups.cpuset = m.cgroups.controller_home("cpuset");
    m.kernel.release = "6.18.0".into();
    let irq = |number: u32, name: &str, managed: bool| Irq {
        number,
        counts: vec![0, 1],
        chip: None,
        hwirq: None,
        name: name.into(),
        affinity: CpuList::parse("0-1").ok(),
        effective_affinity: CpuList::parse("1").ok(),
        node: None,
        managed,
        managed_source: ManagedSource::NameHeuristic,
    };
    m.irqs.irqs = vec![irq(26, "ttyS0", false), irq(36, "virtio1-req.0", true)];
    m
}

#[test]
fn a_managed_irq_on_the_isolated_cpu_is_named_and_cpu_0_is_suggested() {
    let text = "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n\
                [[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\n";
    let p = plan(&spec(text), &dev_vm_model()).unwrap();
    let w = p.warnings.join("\n");
    assert!(
        w.contains("IRQ 36 (virtio1-req.0) is kernel-managed"),
        "{w}"
    );
    assert!(w.contains("isolate CPU 0 instead"), "{w}");
    // The managed IRQ is not written (the kernel would refuse it); the other one moves.
    let paths = write_paths(&p);
    assert!(paths.contains(&"/proc/irq/26/smp_affinity_list".to_string()));
    assert!(!paths.iter().any(|p| p.starts_with("/proc/irq/36/")));
    // Isolating CPU 0 instead leaves no managed IRQ behind, but warns about CPU 0.
    let swapped = text
        .replace("\"0\"", "\"x\"")
        .replace("\"1\"", "\"0\"")
        .replace("\"x\"", "\"1\"");
    let p = plan(&spec(&swapped), &dev_vm_model()).unwrap();
    assert!(
        !p.warnings.iter().any(|w| w.contains("kernel-managed")),
        "{:?}",
        p.warnings
    );
    assert!(p.warnings.iter().any(|w| w.contains("isolates CPU 0")));
}

#[test]
fn a_failure_at_any_step_rolls_back_to_the_snapshot() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let s = spec(MINIMAL_8);
    let total = count_steps(&f, MINIMAL_8);
    assert!(total > 20, "only {total} steps");
    for k in 0..total {
        let hook = move |st: tame_host::journal::Stage| match st {
            tame_host::journal::Stage::Journaled(n) if n == k => {
                Err(std::io::Error::from_raw_os_error(libc::EBUSY))
            }
            _ => Ok(()),
        };
        match apply(&f.root, &s, MINIMAL_8, &f.journal, Some(Box::new(hook))) {
            Err(ApplyError::Failed { rollback, .. }) => {
                assert!(rollback.not_restored.is_empty(), "step {k}: {rollback:?}");
                assert!(rollback.journal_removed);
            }
            // IRQ writes and task moves may be refused without failing apply: it says so.
            Ok(report) => {
                assert!(
                    report.refused.iter().any(|r| r.reason.contains("busy")),
                    "step {k} failed silently: {report:?}"
                );
                let rep = revert(&f.root, &f.journal).unwrap();
                assert!(rep.journal_removed, "{rep:?}");
            }
            Err(e) => panic!("step {k}: {e}"),
        }
        let d = differences(&before, &snapshot(&f.root));
        assert!(d.is_empty(), "after a failure at step {k}: {d:#?}");
    }
}

#[test]
fn the_examples_plan_on_their_kind_of_host() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let v1 = v1_fixture();
    for name in ["minimal.toml", "isolate-cpu0.toml"] {
        let p = plan(&spec(&read(name)), &HostModel::read(&v1.root)).unwrap();
        assert!(!p.is_empty(), "{name}");
    }
    let big = fixture(&SyntheticHost::two_socket_smt());
    let text = read("numa-resctrl.toml");
    let p = plan(&spec(&text), &HostModel::read(&big.root)).unwrap();
    assert!(write_paths(&p).contains(&"/sys/fs/resctrl/tame-rt0/schemata".to_string()));
    assert!(write_paths(&p).contains(&"/proc/sys/kernel/sched_rt_runtime_us".to_string()));
    // Whole cores, every CPU in a partition: no SMT split, no CPU left out. What it
    // still warns about is the host's: managed NVMe queues on every CPU, irqbalance.
    for w in &p.warnings {
        assert!(
            w.contains("kernel-managed") || w.starts_with("irqbalance is running"),
            "numa-resctrl.toml warns: {w}"
        );
    }
    assert_eq!(p.warnings.len(), 2, "{:#?}", p.warnings);
    // Every CPU carries managed queues: no swap helps, so the layout is kept.
    assert!(
        p.recommendation.as_ref().is_some_and(|r| r.keep),
        "{:?}",
        p.recommendation
    );
}

#[test]
fn a_foreign_v1_cpuset_sharing_cpus_is_an_error_before_any_write() {
    let f = v1_fixture();
    put(&f.root, "/sys/fs/cgroup/cpuset/docker/cpuset.cpus", "0-7\n");
    let before = snapshot(&f.root);
    let err = apply(&f.root, &spec(MINIMAL_8), MINIMAL_8, &f.journal, None).unwrap_err();
    assert!(
        err.to_string()
            .contains("cpuset /docker (made by someone else) uses CPU 0-7"),
        "{err}"
    );
    assert!(differences(&before, &snapshot(&f.root)).is_empty());
}

#[test]
fn user_and_group_own_the_partition_task_list() {
    let f = v1_fixture();
    let (uid, gid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    );
    put(
        &f.root,
        "/etc/passwd",
        &format!("root:x:0:0::/root:/bin/sh\nme:x:{uid}:{gid}::/:/bin/sh\n"),
    );
    put(
        &f.root,
        "/etc/group",
        &format!("root:x:0:\nteam:x:{gid}:me\n"),
    );
    let before = snapshot(&f.root);
    let text = format!("{MINIMAL_8}user = \"me\"\ngroup = \"team\"\n");
    apply(&f.root, &spec(&text), &text, &f.journal, None).unwrap();
    let own =
        tame_host::journal::Ownership::of(&f.root.path("/sys/fs/cgroup/cpuset/tame-rt/tasks"))
            .unwrap();
    assert_eq!((own.uid, own.gid, own.mode), (uid, gid, 0o664));
    assert!(revert(&f.root, &f.journal).unwrap().journal_removed);
    assert!(differences(&before, &snapshot(&f.root)).is_empty());

    let bad = format!("{MINIMAL_8}user = \"nobody-here\"\ngroup = \"no-team\"\n");
    let err = plan(&spec(&bad), &HostModel::read(&f.root)).unwrap_err();
    assert!(
        err.errors
            .iter()
            .any(|e| e.contains("user \"nobody-here\" does not exist")),
        "{err}"
    );
    assert!(
        err.errors
            .iter()
            .any(|e| e.contains("group \"no-team\" does not exist")),
        "{err}"
    );
}

#[test]
fn the_plan_reads_nothing_but_the_host_model() {
    let f = v1_fixture();
    put(
        &f.root,
        "/etc/passwd",
        "root:x:0:0::/root:/bin/sh\nme:x:1000:1000::/:/bin/sh\n",
    );
    put(&f.root, "/etc/group", "root:x:0:\nteam:x:1000:me\n");
    let text = format!("{MINIMAL_8}user = \"me\"\ngroup = \"team\"\n");
    let host = HostModel::read(&f.root);
    let json = |p: &tame_partition::Plan| serde_json::to_string(p).unwrap();
    let before = json(&plan(&spec(&text), &host).unwrap());
    assert!(before.contains("move_tasks") && before.contains("\"owner\""));
    // Without the tree the same model gives the same plan.
    std::fs::remove_dir_all(f.root.base()).unwrap();
    assert_eq!(json(&plan(&spec(&text), &host).unwrap()), before);
}

/// `dev_vm_model` with `n` CPUs and the managed IRQ 36 on `managed_on`.
fn vm_with(n: u32, managed_on: &str) -> HostModel {
    let mut m = dev_vm_model();
    let all = CpuList::from_cpus(0..n);
    m.cpus.online = all.clone();
    m.cpus.possible = all;
    m.irqs.irqs[1].effective_affinity = CpuList::parse(managed_on).ok();
    m
}

const SYSTEM_0_RT_1: &str = "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n\
                             [[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\n";

#[test]
fn where_every_choice_warns_the_least_bad_layout_is_recommended() {
    use tame_partition::plan::recommend::Change;
    // Isolating CPU 1 (managed IRQ 36): swap it with CPU 0, whose housekeeping weighs less.
    let p = plan(&spec(SYSTEM_0_RT_1), &dev_vm_model()).unwrap();
    let r = p.recommendation.expect("a recommendation");
    assert!(!r.keep && r.every_choice_warns, "{r:?}");
    assert_eq!(
        r.changes,
        vec![
            Change {
                partition: "system".into(),
                cpus: CpuList::parse("1").unwrap(),
                spec_cpus: CpuList::parse("0").unwrap(),
            },
            Change {
                partition: "rt".into(),
                cpus: CpuList::parse("0").unwrap(),
                spec_cpus: CpuList::parse("1").unwrap(),
            },
        ]
    );
    let why = r.why.join("\n");
    for want in [
        "CPU 1 → system: kernel-managed IRQ 36 (virtio1-req.0) fires there and cannot leave at run time",
        "CPU 0 → isolated: housekeeping the kernel cannot move",
        "a kernel-managed IRQ weighs more than CPU 0's housekeeping",
    ] {
        assert!(why.contains(want), "{want:?} missing from:\n{why}");
    }
    assert_eq!(
        r.without_warnings.as_deref(),
        Some("boot with isolcpus=managed_irq,domain,1 (it keeps kernel-managed IRQs off CPU 1), then isolate CPU 1")
    );
    // A queue whose affinity is CPU 1 alone has no housekeeping CPU to go to: it stays.
    let mut per_cpu = dev_vm_model();
    per_cpu.irqs.irqs[1].affinity = CpuList::parse("1").ok();
    let r = plan(&spec(SYSTEM_0_RT_1), &per_cpu)
        .unwrap()
        .recommendation
        .unwrap();
    assert_eq!(
        r.without_warnings.as_deref(),
        Some("boot with isolcpus=managed_irq,domain,1 (it keeps kernel-managed IRQs off CPU 1 unless a queue serves only CPUs there: IRQ 36 (virtio1-req.0) would stay), then isolate CPU 1")
    );
    // Isolating CPU 0, which warns too, is that least bad layout: keep it.
    let swapped = "[[partition]]\nname = \"system\"\ncpus = \"1\"\nrole = \"system\"\n\
                   [[partition]]\nname = \"rt\"\ncpus = \"0\"\nrole = \"isolated\"\n";
    let p = plan(&spec(swapped), &dev_vm_model()).unwrap();
    assert!(p.warnings.iter().any(|w| w.contains("isolates CPU 0")));
    let r = p.recommendation.expect("a recommendation");
    assert!(
        r.keep && r.every_choice_warns && r.changes.is_empty(),
        "{r:?}"
    );
    assert!(r.why[0].starts_with("CPU 1 → system"), "{:?}", r.why);
}

#[test]
fn a_clean_layout_is_recommended_where_there_is_one_and_none_where_nothing_warns() {
    // 4 CPUs, IRQ 36 on CPU 1: isolating 0-1 draws both warnings; 2-3 carry nothing.
    let text = "[[partition]]\nname = \"system\"\ncpus = \"2-3\"\nrole = \"system\"\n\
                [[partition]]\nname = \"rt\"\ncpus = \"0-1\"\nrole = \"isolated\"\n";
    let r = plan(&spec(text), &vm_with(4, "1"))
        .unwrap()
        .recommendation
        .expect("a recommendation");
    assert!(!r.keep && !r.every_choice_warns, "{r:?}");
    let rt = r.changes.iter().find(|c| c.partition == "rt").unwrap();
    assert_eq!(rt.cpus.to_string(), "2-3");
    assert_eq!(r.without_warnings, None);
    // A shared pool keeps its CPUs: only system CPUs are swapped in.
    let pool = "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n\
                [[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\n\
                [[partition]]\nname = \"pool\"\ncpus = \"2-3\"\nrole = \"shared\"\n";
    let r = plan(&spec(pool), &vm_with(4, "1"))
        .unwrap()
        .recommendation
        .unwrap();
    assert!(r.changes.iter().all(|c| c.partition != "pool"), "{r:?}");
    // Isolated CPUs that carry nothing: no recommendation.
    let p = plan(&spec(text), &vm_with(4, "0")).unwrap();
    assert!(p.recommendation.is_some(), "CPU 0 is isolated");
    let clean = "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n\
                 [[partition]]\nname = \"rt\"\ncpus = \"2-3\"\nrole = \"isolated\"\n";
    let p = plan(&spec(clean), &vm_with(4, "1")).unwrap();
    assert!(p.recommendation.is_none(), "{:?}", p.recommendation);
}

#[test]
fn a_recommended_swap_keeps_smt_siblings_together() {
    // Every CPU of this host carries managed NVMe queues; CPU 0 carries housekeeping too.
    let f = fixture(&SyntheticHost::two_socket_smt());
    let text = "[[partition]]\nname = \"system\"\ncpus = \"1-3,25-27\"\nrole = \"system\"\n\
                [[partition]]\nname = \"rt\"\ncpus = \"0,24\"\nrole = \"isolated\"\n";
    let r = plan(&spec(text), &HostModel::read(&f.root))
        .unwrap()
        .recommendation
        .unwrap();
    assert!(r.every_choice_warns, "{r:?}");
    let rt = r.changes.iter().find(|c| c.partition == "rt").unwrap();
    // The whole core 3/27 (the highest system core) for the whole core 0/24.
    assert_eq!(rt.cpus.to_string(), "3,27");
}

/// The v1 fixture, with `driver` as its cpuidle driver.
fn v1_fixture_with_idle_driver(driver: &str) -> Fixture {
    let f = v1_fixture();
    put(
        &f.root,
        "/sys/devices/system/cpu/cpuidle/current_driver",
        &format!("{driver}\n"),
    );
    f
}

#[test]
fn an_idle_limit_without_a_cpuidle_driver_is_marked_ineffective_and_still_written() {
    let f = v1_fixture_with_idle_driver("none");
    let p = plan(&spec(MINIMAL_8), &HostModel::read(&f.root)).unwrap();
    let w = p.warnings.join("\n");
    for want in [
        "partition \"rt\": idle = \"poll\" changes nothing on this machine: it has no cpuidle driver",
        "apply still makes the write",
        "boot with idle=poll",
        "cpuidle_haltpoll.force=1",
        "tame bench cycle --busy-wait",
    ] {
        assert!(w.contains(want), "{want:?} missing from:\n{w}");
    }
    let qos: Vec<_> = p
        .runtime
        .iter()
        .filter_map(|s| match s {
            Step::Write {
                path, ineffective, ..
            } if path.ends_with("pm_qos_resume_latency_us") => Some(ineffective.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(qos.len(), 6, "CPUs 2-7");
    assert!(qos
        .iter()
        .all(|i| i.as_deref() == Some("no effect here: no cpuidle driver")));
    // Kept: journaled and made, and reverted with the rest.
    apply(&f.root, &spec(MINIMAL_8), MINIMAL_8, &f.journal, None).unwrap();
    assert_eq!(
        f.root
            .read("/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us")
            .unwrap(),
        "n/a"
    );
    revert(&f.root, &f.journal).unwrap();

    // With a driver the same write is a plain one.
    let f = v1_fixture_with_idle_driver("intel_idle");
    let p = plan(&spec(MINIMAL_8), &HostModel::read(&f.root)).unwrap();
    assert!(
        !p.warnings.iter().any(|w| w.contains("changes nothing")),
        "{:?}",
        p.warnings
    );
    assert!(p.runtime.iter().all(|s| !matches!(
        s,
        Step::Write {
            ineffective: Some(_),
            ..
        }
    )));
}

/// Add a thread `tid` (comm `comm`) to process `pid` of the fixture, listed in the root cpuset.
fn add_thread(root: &Root, pid: u32, tid: u32, comm: &str) {
    let d = format!("/proc/{pid}/task/{tid}");
    put(
        root,
        &format!("{d}/stat"),
        &format!("{tid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
    );
    put(
        root,
        &format!("{d}/status"),
        &format!("Name:\t{comm}\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{tid}\nCpus_allowed_list:\t0-7\n"),
    );
    let list = "/sys/fs/cgroup/cpuset/tasks";
    let mut ids = root.read(list).unwrap();
    ids.push_str(&format!("{tid}\n"));
    put(root, list, &ids);
}

#[test]
fn apply_counts_threads_as_the_plan_does_and_says_where_they_differ() {
    let f = v1_fixture();
    let host = HostModel::read(&f.root);
    let sshd = host
        .processes
        .tasks
        .iter()
        .find(|t| t.comm == "sshd")
        .unwrap()
        .pid;
    // A second thread of sshd: threads are counted, and the processes they belong to.
    add_thread(&f.root, sshd, 5000, "sshd-worker");
    let p = plan(&spec(MINIMAL_8), &HostModel::read(&f.root)).unwrap();
    let (listed, processes) = p
        .runtime
        .iter()
        .find_map(|s| match s {
            Step::MoveTasks {
                tasks, processes, ..
            } => Some((tasks.clone(), *processes)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        processes + 1,
        listed.len(),
        "sshd's two threads are one process"
    );
    let kernel = listed.iter().filter(|t| t.kernel_thread).count();
    assert_eq!(
        tame_partition::plan::describe(&p.runtime.iter().find(|s| matches!(s, Step::MoveTasks { .. })).unwrap().clone()),
        format!(
            "{} threads of {processes} processes ({kernel} of them kernel threads) listed now: /sys/fs/cgroup/cpuset/tasks → /sys/fs/cgroup/cpuset/tame-system/tasks",
            listed.len()
        )
    );
    // Between the plan apply makes and its moves, one listed thread exits and one starts.
    let root = f.root.clone();
    let mut once = false;
    let hook = move |_st: tame_host::journal::Stage| {
        if !once {
            once = true;
            add_thread(&root, sshd, 5001, "sshd-new");
            let list = "/sys/fs/cgroup/cpuset/tasks";
            let ids = root.read(list).unwrap().replace("5000\n", "");
            put(&root, list, &ids);
            std::fs::remove_dir_all(root.path(format!("/proc/{sshd}/task/5000"))).unwrap();
        }
        Ok(())
    };
    let report = apply(
        &f.root,
        &spec(MINIMAL_8),
        MINIMAL_8,
        &f.journal,
        Some(Box::new(hook)),
    )
    .unwrap();
    assert_eq!(report.tasks_listed, listed.len(), "{report:?}");
    assert_eq!(
        (report.tasks_started, report.tasks_gone),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(
        report.tasks_moved,
        report.tasks_listed - report.tasks_gone + report.tasks_started
    );
    // The threads the kernel keeps are counted apart, with why; none is a refusal.
    assert_eq!(report.kept.len(), p.stay.len());
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.comm == "ksoftirqd/3"
                && k.because == tame_partition::plan::KeptBecause::PerCpu)
    );
    assert!(
        report.refused.iter().all(|r| !r.what.starts_with("task ")),
        "{:?}",
        report.refused
    );
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn status_says_what_drifted_and_whether_reapplying_the_noted_file_repairs_it() {
    let f = v1_fixture();
    let file = f.journal.with_file_name("rt.toml");
    std::fs::write(&file, MINIMAL_8).unwrap();
    let s = spec(MINIMAL_8);
    tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&file), &f.journal, None).unwrap();
    let st = status(&f.root, &f.journal).unwrap();
    assert!(st.drift.is_empty());
    assert_eq!(st.spec_file.as_deref(), Some(file.to_str().unwrap()));
    assert!(st.spec_file_matches);

    put(&f.root, "/proc/sys/kernel/timer_migration", "1\n");
    // An IRQ pinned narrower than apply left it still fits the spec: re-applying leaves it.
    let irq = HostModel::read(&f.root)
        .irqs
        .irqs
        .iter()
        .find(|i| !i.managed && i.affinity.as_ref().is_some_and(|a| a.to_string() == "0-1"))
        .map(|i| i.number)
        .unwrap();
    put(
        &f.root,
        &format!("/proc/irq/{irq}/smp_affinity_list"),
        "0\n",
    );
    let st = status(&f.root, &f.journal).unwrap();
    assert_eq!(st.reapply_refused, None);
    let timer = st
        .drift
        .iter()
        .find(|d| d.path == "/proc/sys/kernel/timer_migration")
        .unwrap();
    assert_eq!(
        (timer.what.as_deref(), timer.reapply_fixes),
        (Some("timers are not pulled onto busy isolated CPUs"), true)
    );
    let pinned = st
        .drift
        .iter()
        .find(|d| d.path.starts_with(&format!("/proc/irq/{irq}/")))
        .unwrap();
    assert!(!pinned.reapply_fixes && pinned.what.is_none(), "{pinned:?}");

    // The file no longer holds the applied spec: status says so.
    std::fs::write(&file, MINIMAL_8.replace("2-7", "3-7")).unwrap();
    assert!(!status(&f.root, &f.journal).unwrap().spec_file_matches);
    // Re-applying from the noted path repairs what drifted, and notes nothing new.
    std::fs::write(&file, MINIMAL_8).unwrap();
    let again =
        tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&file), &f.journal, None).unwrap();
    assert_eq!(again.writes, 1, "{again:?}");
    let st = status(&f.root, &f.journal).unwrap();
    assert_eq!(
        st.drift.len(),
        1,
        "only the narrower IRQ pin: {:?}",
        st.drift
    );
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn a_no_op_reapply_from_another_file_notes_that_file() {
    let f = v1_fixture();
    let dir = f.journal.parent().unwrap();
    let (first, second) = (dir.join("rt.toml"), dir.join("moved.toml"));
    std::fs::write(&first, MINIMAL_8).unwrap();
    std::fs::write(&second, MINIMAL_8).unwrap();
    let s = spec(MINIMAL_8);
    tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&first), &f.journal, None).unwrap();

    // Nothing drifted: the plan is empty, yet status names the file used last.
    let again = tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&second), &f.journal, None)
        .unwrap();
    assert!(again.unchanged, "{again:?}");
    let st = status(&f.root, &f.journal).unwrap();
    assert_eq!(st.spec_file.as_deref(), Some(second.to_str().unwrap()));
    assert!(st.spec_file_matches);
    // The same file again notes nothing.
    let journal_before = std::fs::read(f.journal.join("journal")).unwrap();
    tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&second), &f.journal, None).unwrap();
    assert_eq!(
        std::fs::read(f.journal.join("journal")).unwrap(),
        journal_before
    );

    // A no-op apply with nothing applied in its journal directory creates no journal.
    let fresh = dir.join("other-journal");
    let noop =
        tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&second), &fresh, None).unwrap();
    assert!(noop.unchanged, "{noop:?}");
    assert!(tame_host::journal::load(&fresh).unwrap().is_none());
    assert!(!status(&f.root, &fresh).unwrap().applied);
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn status_does_not_follow_a_spec_file_swapped_for_a_fifo_a_symlink_or_a_huge_file() {
    let f = v1_fixture();
    let file = f.journal.with_file_name("rt.toml");
    std::fs::write(&file, MINIMAL_8).unwrap();
    let s = spec(MINIMAL_8);
    tame_partition::apply_file(&f.root, &s, MINIMAL_8, Some(&file), &f.journal, None).unwrap();
    assert_eq!(status(&f.root, &f.journal).unwrap().spec_file_unread, None);

    let unread = |why: &str| {
        let st = status(&f.root, &f.journal).unwrap();
        assert!(!st.spec_file_matches);
        assert_eq!(st.spec_file_unread.as_deref(), Some(why));
    };
    // A symlink, even to a file that holds the applied spec.
    let real = f.journal.with_file_name("real.toml");
    std::fs::write(&real, MINIMAL_8).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&real, &file).unwrap();
    unread("is a symbolic link (not followed)");
    // A FIFO with no writer: status returns at once.
    std::fs::remove_file(&file).unwrap();
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    unread("is a FIFO, not a regular file");
    // A file over the cap (sparse: the spec, then 2 MiB of nothing).
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, MINIMAL_8).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    unread("is larger than 1024 KiB");
    revert(&f.root, &f.journal).unwrap();
}

#[test]
fn watchdog_false_takes_the_partitions_cpus_out_of_the_watchdog_and_revert_puts_them_back() {
    let f = v1_fixture();
    let before = snapshot(&f.root);
    let path = "/proc/sys/kernel/watchdog_cpumask";
    assert_eq!(f.root.read(path).unwrap().trim(), "0-7");
    let text = format!("{MINIMAL_8}watchdog = false\n");
    let s = spec(&text);
    let p = plan(&s, &HostModel::read(&f.root)).unwrap();
    assert!(write_paths(&p).iter().any(|w| w == path), "{p:#?}");
    apply(&f.root, &s, &text, &f.journal, None).unwrap();
    assert_eq!(f.root.read(path).unwrap().trim(), "0-1");
    // The kernel prints it back as written: no drift, and a second apply writes nothing.
    let st = status(&f.root, &f.journal).unwrap();
    assert!(st.drift.is_empty(), "{:?}", st.drift);
    revert(&f.root, &f.journal).unwrap();
    assert_eq!(snapshot(&f.root), before);
}

#[test]
fn watchdog_on_a_kernel_without_the_lockup_detectors_is_refused() {
    let f = v1_fixture();
    std::fs::remove_file(f.root.path("/proc/sys/kernel/watchdog_cpumask")).unwrap();
    let text = format!("{MINIMAL_8}watchdog = false\n");
    let e = plan(&spec(&text), &HostModel::read(&f.root)).unwrap_err();
    assert!(
        e.to_string().contains("no kernel.watchdog_cpumask")
            && e.to_string().contains("remove `watchdog`"),
        "{e}"
    );
}

/// Issue 34: a journal renamed away (its directory's parent writable by others) made
/// `tame revert` say "Nothing to revert" and exit 0 with the partition still applied.
/// Revert now notices tame's groups on the host and refuses, saying what to do.
#[test]
fn revert_without_the_journal_of_an_applied_partition_refuses_naming_its_groups() {
    let f = v1_fixture();
    let s = spec(MINIMAL_8);
    apply(&f.root, &s, MINIMAL_8, &f.journal, None).unwrap();
    let moved = f.journal.with_file_name("moved-away");
    std::fs::rename(&f.journal, &moved).unwrap();
    let err = revert(&f.root, &f.journal).unwrap_err();
    assert!(
        matches!(&err, ApplyError::AppliedWithoutJournal { groups, .. }
            if groups.iter().any(|g| g == "/sys/fs/cgroup/cpuset/tame-rt")),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("give the --journal-dir it was applied with") && text.contains("tame-rt"),
        "{text}"
    );
    assert!(tame_host::error::LayerError::is_bad_input(&err));
    // With its journal back, revert undoes it, and then there is nothing to revert.
    std::fs::rename(&moved, &f.journal).unwrap();
    assert!(!revert(&f.root, &f.journal).unwrap().nothing_to_revert);
    assert!(revert(&f.root, &f.journal).unwrap().nothing_to_revert);
}
