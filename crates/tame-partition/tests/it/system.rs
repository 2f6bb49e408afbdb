//! On this machine, for real (root only): isolate one CPU with cgroup v1 cpusets,
//! IRQ affinity, the workqueue mask and an idle limit; check in /proc that nothing
//! movable is left there; run a short loop there; revert; every touched file must
//! be byte-identical. A guard reverts even when an assertion fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{is_root, require};

use tame_host::cgroup::members::{kernel_places, read_ids};
use tame_host::cgroup::CgroupVersion;
use tame_host::{CpuList, HostModel, Root};
use tame_partition::{apply, plan, revert, status, Spec, Step};

/// Reverts the journal in its directory when dropped, whatever happened before.
struct RevertOnDrop {
    root: Root,
    dir: PathBuf,
}

impl Drop for RevertOnDrop {
    fn drop(&mut self) {
        match revert(&self.root, &self.dir) {
            Ok(r) if r.not_restored.is_empty() => {}
            Ok(r) => eprintln!("revert left values unrestored: {r:?}"),
            Err(e) => eprintln!("revert failed: {e}"),
        }
    }
}

fn snapshot(root: &Root, paths: &[String]) -> BTreeMap<String, Vec<u8>> {
    paths
        .iter()
        .filter_map(|p| root.read_bytes(p).ok().map(|b| (p.clone(), b)))
        .collect()
}

#[test]
fn isolate_one_cpu_for_real_and_revert_byte_for_byte() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        is_root(),
        "root to change cpusets, IRQ affinity and idle limits",
    ) {
        return;
    }
    let root = Root::system();
    let host = HostModel::read(&root);
    let last = host.cpus.online.iter().last().filter(|&c| c > 0);
    if !require(last.is_some(), "a second online CPU to isolate")
        || !require(
            host.cgroups.cpuset.as_ref().map(|c| c.version) == Some(CgroupVersion::V1),
            "the cgroup v1 cpuset hierarchy mounted (this test exercises it)",
        )
    {
        return;
    }
    let isolated = last.expect("checked above");
    let system = host.cpus.online.difference(&CpuList::from_cpus([isolated]));
    let text = format!(
        "[[partition]]\nname = \"system\"\ncpus = \"{system}\"\nrole = \"system\"\n\n\
         [[partition]]\nname = \"systest\"\ncpus = \"{isolated}\"\nrole = \"isolated\"\nidle = \"poll\"\n"
    );
    let spec = Spec::parse("system-test.toml", &text).unwrap();
    let p = plan(&spec, &host).unwrap();
    let touched: Vec<String> = p
        .runtime
        .iter()
        .filter_map(|s| match s {
            Step::Write {
                path, old: Some(_), ..
            } => Some(path.clone()),
            _ => None,
        })
        .collect();
    assert!(touched.iter().any(|p| p.ends_with("workqueue/cpumask")));
    assert!(touched
        .iter()
        .any(|p| p.contains("pm_qos_resume_latency_us")));
    let before = snapshot(&root, &touched);

    let journal = tempfile::tempdir().unwrap();
    let guard = RevertOnDrop {
        root: root.clone(),
        dir: journal.path().to_path_buf(),
    };
    let max_tid_before = HostModel::read(&root)
        .processes
        .tasks
        .iter()
        .map(|t| t.tid)
        .max()
        .unwrap_or(0);
    let report = apply(&root, &spec, &text, journal.path(), None).unwrap();
    assert!(report.tasks_moved > 0, "{report:?}");

    let iso = CpuList::from_cpus([isolated]);
    // No movable task may run on the isolated CPU; kernel threads born after apply
    // start in the root cpuset and are the only exception.
    for t in HostModel::read(&root).processes.tasks {
        let pinned = kernel_places(t.kthread, t.affinity_locked, &t.comm);
        // A zombie never runs again (and cannot be attached anywhere): not a disturbance.
        if t.affinity.intersection(&iso).is_empty() || pinned || t.state == 'Z' {
            continue;
        }
        let in_partition =
            read_ids(&root, "/sys/fs/cgroup/cpuset/tame-systest/tasks").contains(&t.tid);
        assert!(
            in_partition || (t.kthread && t.tid > max_tid_before),
            "{t:?} may still run on isolated CPU {isolated}"
        );
    }
    // No movable IRQ may be routed there; kernel-managed ones are named in the plan.
    for irq in HostModel::read(&root).irqs.irqs {
        let aff = irq.affinity.clone().unwrap_or_default();
        if irq.managed {
            if !aff.intersection(&iso).is_empty() {
                assert!(p
                    .warnings
                    .iter()
                    .any(|w| w.contains(&format!("IRQ {} ", irq.number))));
            }
            continue;
        }
        assert!(
            aff.intersection(&iso).is_empty(),
            "IRQ {} ({}) allowed on {aff}",
            irq.number,
            irq.name
        );
    }
    assert_eq!(
        root.read_trimmed(tame_host::knobs::WORKQUEUE_CPUMASK)
            .map(|m| CpuList::parse_mask(&m).unwrap())
            .unwrap(),
        system
    );
    assert_eq!(
        root.read_trimmed(tame_host::power::pm_qos_path(isolated))
            .unwrap(),
        "n/a"
    );
    let st = status(&root, journal.path()).unwrap();
    assert!(st.drift.is_empty(), "{:?}", st.drift);

    // A short loop on the isolated CPU: a thread joins the partition's cpuset.
    let ran_on = std::thread::spawn(move || {
        let tid = nix::unistd::gettid();
        std::fs::write("/sys/fs/cgroup/cpuset/tame-systest/tasks", tid.to_string()).unwrap();
        let start = std::time::Instant::now();
        let mut cpus = std::collections::BTreeSet::new();
        let mut worst = std::time::Duration::ZERO;
        let mut last = start;
        while start.elapsed() < std::time::Duration::from_millis(100) {
            let now = std::time::Instant::now();
            worst = worst.max(now - last);
            last = now;
            // SAFETY: sched_getcpu has no preconditions.
            cpus.insert(unsafe { libc::sched_getcpu() });
        }
        eprintln!("loop on the isolated CPU: longest gap {worst:?}");
        cpus
    })
    .join()
    .unwrap();
    assert_eq!(ran_on, [isolated as i32].into_iter().collect());

    drop(guard);
    assert!(
        !journal.path().join("journal").exists(),
        "revert kept its journal"
    );
    let after = snapshot(&root, &touched);
    for (path, old) in &before {
        assert_eq!(
            after.get(path),
            Some(old),
            "{path} is {:?}, was {:?}",
            after
                .get(path)
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            String::from_utf8_lossy(old)
        );
    }
    for name in root.list_dir("/sys/fs/cgroup/cpuset").unwrap() {
        assert!(!name.starts_with("tame-"), "cpuset {name} left behind");
    }
    assert!(Path::new("/sys/fs/cgroup/cpuset/tasks").exists());
}
