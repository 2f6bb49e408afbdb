//! detach / attach on a fixture tree through the fixture backend: threads join a
//! partition's cpuset, take the CPUs and policy, and attach — a revert of the
//! process's journal — gives every thread, and one born since, its old placement.

use std::path::Path;
use std::sync::Arc;

use tame_host::cgroup::CgroupModel;
use tame_host::reader::Reader;
use tame_host::CpuList;
use tame_launch::detach::{self, DetachRequest, Store, ThreadSelection};
use tame_launch::target::PartitionCgroup;
use tame_rt::sched::SchedSpec;
use tame_rt::Policy;
use tame_testing::{snapshot_tree, FixtureBackend};

fn stat(tid: u32) -> String {
    format!("{tid} (worker) S 1 40 40 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 3 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
}

/// Process 40 (threads 40 and 41, CPUs 0-3, root's) in a cgroup v1 cpuset hierarchy
/// whose root task list is `root_tasks`, beside partition `tame-rt` on CPUs 2-3.
struct V1Process {
    dir: tempfile::TempDir,
    base: std::path::PathBuf,
    backend: Arc<FixtureBackend>,
    root: tame_host::Root,
}

impl V1Process {
    fn new(root_tasks: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("root");
        let backend = Arc::new(FixtureBackend::new());
        let root = backend.root(&base);
        let fx = Self {
            dir,
            base,
            backend,
            root,
        };
        fx.put(
            "/proc/mounts",
            "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n",
        );
        fx.put("/sys/fs/cgroup/cpuset/tasks", root_tasks);
        fx.put("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n");
        fx.put("/sys/fs/cgroup/cpuset/tame-rt/tasks", "");
        fx.put("/sys/fs/cgroup/cpuset/tame-rt/cpuset.cpus", "2-3\n");
        fx.put("/proc/40/stat", &stat(40));
        fx.put("/proc/40/status", "Uid:\t0\t0\t0\t0\n");
        for tid in [40, 41] {
            fx.put(&format!("/proc/40/task/{tid}/stat"), &stat(tid));
            fx.put(&format!("/proc/40/task/{tid}/cgroup"), "3:cpuset:/\n0::/\n");
            fx.backend.add_thread(tid, CpuList::parse("0-3").unwrap());
        }
        fx
    }

    fn put(&self, p: &str, t: &str) {
        let f = self.root.path(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    }
}

#[test]
fn detach_then_attach_on_a_fixture_restores_every_thread() {
    let fx = V1Process::new("1\n40\n41\n");
    let (dir, base, backend, root) = (
        &fx.dir,
        fx.base.clone(),
        fx.backend.clone(),
        fx.root.clone(),
    );
    let put = |p: &str, t: &str| fx.put(p, t);
    backend.set_thread(
        41,
        tame_testing::FixtureThread {
            affinity: CpuList::parse("1").unwrap(),
            sched: tame_rt::sched::ThreadSched::default(),
        },
    );
    let before = snapshot_tree(&base);
    let state = dir.path().join("state");
    let store = Store::new(&state);
    let req = DetachRequest {
        pid: 40,
        cpus: CpuList::parse("3").unwrap(),
        threads: ThreadSelection::All,
        sched: Some(SchedSpec::static_priority(Policy::Fifo, 5)),
        cgroup: Some(partition(&root, "/tame-rt")),
    };
    let record = detach::detach(&root, &store, &req, 0).unwrap();
    assert_eq!(record.threads.len(), 2);
    assert_eq!(record.threads[1].affinity.to_string(), "1");
    assert_eq!(
        root.read("/sys/fs/cgroup/cpuset/tame-rt/tasks").unwrap(),
        "40\n41\n"
    );
    for tid in [40, 41] {
        let t = backend.thread(tid).unwrap();
        assert_eq!(t.affinity.to_string(), "3");
        assert_eq!((t.sched.policy, t.sched.priority), (libc::SCHED_FIFO, 5));
    }
    let listed = store.list();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].pid, listed[0].kind.as_str()), (40, "detach"));
    // Placed again while placed: refused, nothing changed.
    let again = detach::detach(&root, &store, &req, 0).unwrap_err();
    assert!(again.to_string().contains("already placed"), "{again}");

    // Thread 42 is born in the partition with the detached placement.
    put("/proc/40/task/42/stat", &stat(42));
    backend.set_thread(42, backend.thread(40).unwrap());
    put("/sys/fs/cgroup/cpuset/tame-rt/tasks", "40\n41\n42\n");
    let report = detach::attach(&root, &store, 40, 0).unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(report.restored, vec![40, 41]);
    assert_eq!(report.adopted, vec![42]);
    assert_eq!(backend.thread(40).unwrap().affinity.to_string(), "0-3");
    assert_eq!(backend.thread(41).unwrap().affinity.to_string(), "1");
    assert_eq!(backend.thread(42).unwrap().affinity.to_string(), "0-3");
    assert!([40, 41, 42]
        .iter()
        .all(|&t| backend.thread(t).unwrap().sched.policy == libc::SCHED_OTHER));
    assert_eq!(
        root.read("/sys/fs/cgroup/cpuset/tasks").unwrap(),
        "1\n40\n41\n42\n"
    );
    assert!(store.list().is_empty());
    assert!(!state.join("placed").exists());
    std::fs::remove_dir_all(root.path("/proc/40/task/42")).unwrap();
    put("/sys/fs/cgroup/cpuset/tasks", "1\n40\n41\n");
    assert_eq!(snapshot_tree(&base), before);
    // Nothing left to attach.
    assert!(detach::attach(&root, &store, 40, 0).is_err());
}

#[test]
fn a_refused_placement_puts_back_the_threads_already_moved() {
    // Thread 41 is in no task list: the kernel refuses to move it (ESRCH).
    let fx = V1Process::new("1\n40\n");
    let (dir, base, backend, root) = (
        &fx.dir,
        fx.base.clone(),
        fx.backend.clone(),
        fx.root.clone(),
    );
    let before = snapshot_tree(&base);
    let store = Store::new(&dir.path().join("state"));
    let req = DetachRequest {
        pid: 40,
        cpus: CpuList::parse("3").unwrap(),
        threads: ThreadSelection::All,
        sched: None,
        cgroup: Some(partition(&root, "/tame-rt")),
    };
    let err = detach::detach(&root, &store, &req, 0).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot move thread 41 into the partition's cpuset"),
        "{err}"
    );
    assert_eq!(backend.thread(40).unwrap().affinity.to_string(), "0-3");
    assert_eq!(
        snapshot_tree(&base),
        before,
        "thread 40 is back in the root cpuset"
    );
    assert!(store.list().is_empty());
    assert!(!dir.path().join("state/placed").exists());
}

/// A fixture host with process 40 (threads 40 and 41, affinities 0-3 and 1) and `files`.
fn host(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<FixtureBackend>, tame_host::Root) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FixtureBackend::new());
    let root = backend.root(dir.path().join("root"));
    let mut all = vec![
        ("/proc/40/stat".to_string(), stat(40)),
        ("/proc/40/status".into(), "Uid:\t0\t0\t0\t0\n".into()),
        ("/proc/40/task/40/stat".into(), stat(40)),
        ("/proc/40/task/41/stat".into(), stat(41)),
    ];
    all.extend(files.iter().map(|(p, t)| (p.to_string(), t.to_string())));
    for (p, text) in all {
        let f = root.path(&p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }
    backend.add_thread(40, CpuList::parse("0-3").unwrap());
    backend.add_thread(41, CpuList::parse("1").unwrap());
    (dir, backend, root)
}

/// The cgroup `path` of this host's cpuset hierarchy, as `tame detach -p` resolves it.
fn partition(root: &tame_host::Root, path: &str) -> PartitionCgroup {
    let model = CgroupModel::read(&mut Reader::new(root));
    let home = model.controller_home("cpuset").expect("a cpuset hierarchy");
    PartitionCgroup::new(home.version, &home.mount, path)
}

fn fifo_request(root: &tame_host::Root, threads: ThreadSelection) -> DetachRequest {
    DetachRequest {
        pid: 40,
        cpus: CpuList::parse("3").unwrap(),
        threads,
        sched: Some(SchedSpec::static_priority(Policy::Fifo, 5)),
        cgroup: Some(partition(root, "/tame-rt")),
    }
}

/// Detach into tame-rt, check `placed`, attach: every thread as before, the tree byte for byte.
fn detach_and_attach(
    dir: &Path,
    backend: &FixtureBackend,
    root: &tame_host::Root,
    placed: &[(&str, &str)],
) {
    let before = snapshot_tree(root.base());
    let store = Store::new(&dir.join("state"));
    let record =
        detach::detach(root, &store, &fifo_request(root, ThreadSelection::All), 0).unwrap();
    for (path, want) in placed {
        assert_eq!(root.read(path).unwrap(), *want, "{path}");
    }
    for tid in [40, 41] {
        let t = backend.thread(tid).unwrap();
        assert_eq!(t.affinity.to_string(), "3");
        assert_eq!((t.sched.policy, t.sched.priority), (libc::SCHED_FIFO, 5));
    }
    let report = detach::attach(root, &store, 40, 0).unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(report.restored, vec![40, 41]);
    assert_eq!(backend.thread(40).unwrap().affinity.to_string(), "0-3");
    assert_eq!(backend.thread(41).unwrap().affinity.to_string(), "1");
    assert!([40, 41]
        .iter()
        .all(|&t| backend.thread(t).unwrap().sched.policy == libc::SCHED_OTHER));
    assert_eq!(snapshot_tree(root.base()), before, "{record:?}");
    assert!(store.list().is_empty());
}

/// v1: each thread joins tame-rt/tasks from its own cpuset, and goes back to it.
#[test]
fn v1_threads_go_back_to_their_own_cpusets() {
    let (dir, backend, root) = host(&[
        (
            "/proc/mounts",
            "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n",
        ),
        ("/sys/fs/cgroup/cpuset/tasks", "1\n40\n"),
        ("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n"),
        ("/sys/fs/cgroup/cpuset/a/tasks", "41\n"),
        ("/sys/fs/cgroup/cpuset/a/cpuset.cpus", "1\n"),
        ("/sys/fs/cgroup/cpuset/tame-rt/tasks", ""),
        ("/sys/fs/cgroup/cpuset/tame-rt/cpuset.cpus", "2-3\n"),
        ("/proc/40/task/40/cgroup", "3:cpuset:/\n"),
        ("/proc/40/task/41/cgroup", "3:cpuset:/a\n"),
    ]);
    detach_and_attach(
        dir.path(),
        &backend,
        &root,
        &[
            ("/sys/fs/cgroup/cpuset/tame-rt/tasks", "40\n41\n"),
            ("/sys/fs/cgroup/cpuset/tasks", "1\n"),
            ("/sys/fs/cgroup/cpuset/a/tasks", ""),
        ],
    );
}

/// cgroup v2 at /sys/fs/cgroup/unified; process 40 in /user.slice/s.scope, where
/// cpuset is not enabled (its `cpuset` file names the root, where it is effective).
const V2: &[(&str, &str)] = &[
    (
        "/proc/mounts",
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n",
    ),
    ("/sys/fs/cgroup/unified/cgroup.controllers", "cpuset cpu\n"),
    ("/sys/fs/cgroup/unified/cgroup.subtree_control", "cpuset\n"),
    ("/sys/fs/cgroup/unified/cgroup.procs", "1\n"),
    ("/sys/fs/cgroup/unified/user.slice/cgroup.procs", "7\n"),
    (
        "/sys/fs/cgroup/unified/user.slice/s.scope/cgroup.procs",
        "40\n",
    ),
    ("/sys/fs/cgroup/unified/tame-rt/cgroup.procs", ""),
    ("/sys/fs/cgroup/unified/tame-rt/cpuset.cpus", "2-3\n"),
    ("/proc/40/cgroup", "0::/user.slice/s.scope\n"),
    ("/proc/40/task/40/cgroup", "0::/user.slice/s.scope\n"),
    ("/proc/40/task/41/cgroup", "0::/user.slice/s.scope\n"),
    ("/proc/40/task/40/cpuset", "/\n"),
    ("/proc/40/task/41/cpuset", "/\n"),
];

/// v2: the process joins tame-rt/cgroup.procs and goes back to the exact `0::` group.
#[test]
fn v2_the_process_goes_back_to_its_exact_group() {
    let (dir, backend, root) = host(V2);
    detach_and_attach(
        dir.path(),
        &backend,
        &root,
        &[
            ("/sys/fs/cgroup/unified/tame-rt/cgroup.procs", "40\n"),
            ("/sys/fs/cgroup/unified/user.slice/s.scope/cgroup.procs", ""),
            ("/sys/fs/cgroup/unified/user.slice/cgroup.procs", "7\n"),
            ("/sys/fs/cgroup/unified/cgroup.procs", "1\n"),
        ],
    );
}

/// v2: a thread born in the partition gets the main thread's previous placement.
#[test]
fn v2_a_thread_born_since_detach_is_given_the_main_threads_placement() {
    let (dir, backend, root) = host(V2);
    let store = Store::new(&dir.path().join("state"));
    detach::detach(&root, &store, &fifo_request(&root, ThreadSelection::All), 0).unwrap();
    let f = root.path("/proc/40/task/42/stat");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, stat(42)).unwrap();
    backend.set_thread(42, backend.thread(40).unwrap());
    let report = detach::attach(&root, &store, 40, 0).unwrap();
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!((report.restored, report.adopted), (vec![40, 41], vec![42]));
    let t = backend.thread(42).unwrap();
    assert_eq!(
        (t.affinity.to_string(), t.sched.policy),
        ("0-3".to_string(), libc::SCHED_OTHER)
    );
    assert_eq!(
        root.read("/sys/fs/cgroup/unified/user.slice/s.scope/cgroup.procs")
            .unwrap(),
        "40\n"
    );
}

/// A PID that does not exist is said first, before anything about the target.
#[test]
fn a_missing_process_is_refused_before_the_target() {
    let (dir, _backend, root) = host(V2);
    let store = Store::new(&dir.path().join("state"));
    let before = snapshot_tree(root.base());
    // Main threads of a v2 partition would be refused too; the PID comes first.
    let req = DetachRequest {
        pid: 999_999,
        ..fifo_request(&root, ThreadSelection::Main)
    };
    let err = detach::detach(&root, &store, &req, 0).unwrap_err();
    assert!(err.is_bad_input());
    assert_eq!(
        err.to_string(),
        "no process 999999 — check the PID (ps -e), it may have exited"
    );
    let err = detach::vet(&root, 999_999, 0).unwrap_err().to_string();
    assert!(err.starts_with("no process 999999"), "{err}");
    // Another user's process is refused by vet too, whatever the target.
    let err = detach::vet(&root, 40, 1000).unwrap_err().to_string();
    assert!(
        err.contains("belongs to uid 0, and you are uid 1000"),
        "{err}"
    );
    assert_eq!(detach::vet(&root, 40, 0).unwrap().pid, 40);
    assert_eq!(snapshot_tree(root.base()), before);
    assert!(!dir.path().join("state/placed").exists());
}

/// v2 refusals come before anything is written: a part of the threads, a missing partition.
#[test]
fn v2_refusals_change_nothing() {
    let (dir, _backend, root) = host(V2);
    let store = Store::new(&dir.path().join("state"));
    let before = snapshot_tree(root.base());
    let err = detach::detach(
        &root,
        &store,
        &fifo_request(&root, ThreadSelection::Main),
        0,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cgroup v2 moves whole processes"), "{err}");
    let gone = DetachRequest {
        cgroup: Some(partition(&root, "/tame-gone")),
        ..fifo_request(&root, ThreadSelection::All)
    };
    let err = detach::detach(&root, &store, &gone, 0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("partition cgroup /sys/fs/cgroup/unified/tame-gone does not exist"),
        "{err}"
    );
    assert_eq!(snapshot_tree(root.base()), before);
    assert!(!dir.path().join("state/placed").exists());
}
