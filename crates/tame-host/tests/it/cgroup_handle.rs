//! The cgroup interface on fixture trees, as its users drive it: tame-reserve (a capped
//! group and a process attached, reverted through the journal) and tame-launch (a thread
//! joins a partition's cpuset). The fixture backend moves task ids as the kernel would.

use std::collections::BTreeMap;
use std::path::Path;

use tame_host::cgroup::proc::{read_memberships, thread_cgroup_path};
use tame_host::cgroup::{parse_proc_cgroup, write_all, CgroupModel, Cgroups};
use tame_host::journal::{self, Journal};
use tame_host::reader::Reader;
use tame_host::Root;

/// Every file below `dir` with its bytes, and every directory.
fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let key = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(key, None);
                stack.push(p);
            } else {
                out.insert(key, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

struct Tree {
    dir: tempfile::TempDir,
    root: Root,
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = tame_testing::fixture_root(dir.path().join("root"));
        for (p, s) in files {
            let path = root.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        }
        Tree { dir, root }
    }

    fn model(&self) -> CgroupModel {
        CgroupModel::read(&mut Reader::new(&self.root))
    }

    fn read(&self, p: &str) -> String {
        self.root.read(p).unwrap()
    }

    fn journal(&self) -> std::path::PathBuf {
        self.dir.path().join("journal")
    }
}

/// What tame-reserve does: a capped group for a process, next to the group it
/// is in, through the journal; revert gives the tree back.
fn reserve_on(tree: &Tree, expect: &[(&str, &str)]) {
    let before = snapshot(tree.root.base());
    let cpu = Cgroups::for_controller(&tree.model(), "cpu").unwrap();
    let text = tree.read("/proc/42/cgroup");
    let parent = cpu.group_of(&parse_proc_cgroup(&text).unwrap()).unwrap();
    let group = cpu.root().child("tame-reserve-42");
    let mut j = Journal::open(&tree.root, &tree.journal()).unwrap();
    group.create(&parent).run(&mut j).unwrap().unwrap();
    let results = write_all(&mut j, &group.cpu_bandwidth(10_000, 40_000)).unwrap();
    assert!(results.iter().all(Result::is_ok));
    let moved = group
        .attach_process(&parent, 42, &[42, 43])
        .run(&mut j)
        .unwrap();
    assert!(moved.iter().all(Result::is_ok), "{moved:?}");
    for (path, want) in expect {
        assert_eq!(tree.read(path), *want, "{path}");
    }
    drop(j);
    let report = journal::revert(&tree.root, &tree.journal()).unwrap();
    assert!(report.not_restored.is_empty(), "{report:?}");
    assert_eq!(snapshot(tree.root.base()), before);
}

#[test]
fn cpu_bandwidth_and_process_attach_on_v1() {
    let tree = Tree::new(&[
        (
            "/proc/mounts",
            "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n",
        ),
        ("/sys/fs/cgroup/cpu/tasks", "1\n42\n43\n"),
        ("/proc/42/cgroup", "5:cpu:/\n"),
    ]);
    reserve_on(
        &tree,
        &[
            (
                "/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_period_us",
                "40000",
            ),
            (
                "/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_quota_us",
                "10000",
            ),
            ("/sys/fs/cgroup/cpu/tame-reserve-42/tasks", "42\n43\n"),
            ("/sys/fs/cgroup/cpu/tasks", "1\n"),
        ],
    );
}

#[test]
fn cpu_bandwidth_and_process_attach_on_v2() {
    let tree = Tree::new(&[
        (
            "/proc/mounts",
            "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime 0 0\n",
        ),
        ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"),
        ("/sys/fs/cgroup/cgroup.subtree_control", "cpu\n"),
        ("/sys/fs/cgroup/cgroup.procs", "1\n42\n"),
        ("/proc/42/cgroup", "0::/\n"),
    ]);
    reserve_on(
        &tree,
        &[
            ("/sys/fs/cgroup/tame-reserve-42/cpu.max", "10000 40000"),
            ("/sys/fs/cgroup/tame-reserve-42/cgroup.procs", "42\n"),
            ("/sys/fs/cgroup/cgroup.procs", "1\n"),
        ],
    );
}

/// What tame-launch does: one thread joins the cpuset of partition `rt`, from
/// the group /proc says it is in.
fn join_partition(tree: &Tree, expect: &[(&str, &str)]) {
    let cpuset = Cgroups::for_controller(&tree.model(), "cpuset").unwrap();
    let ms = read_memberships(&tree.root, &thread_cgroup_path(42, 43)).unwrap();
    let from = cpuset.group_of(&ms).unwrap();
    let to = cpuset.group(&format!("/{}rt", tame_host::cgroup::TAME_PREFIX));
    let mut j = Journal::open(&tree.root, &tree.journal()).unwrap();
    let res = to.attach_thread(&from, 42, 43).run(&mut j).unwrap();
    assert!(res.iter().all(Result::is_ok), "{res:?}");
    for (path, want) in expect {
        assert_eq!(tree.read(path), *want, "{path}");
    }
}

#[test]
fn a_thread_joins_a_partition_on_v1() {
    let tree = Tree::new(&[
        (
            "/proc/mounts",
            "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n",
        ),
        ("/sys/fs/cgroup/cpuset/tasks", "42\n43\n"),
        ("/sys/fs/cgroup/cpuset/tame-rt/tasks", ""),
        (
            "/proc/42/task/43/cgroup",
            "3:cpuset:/\n1:name=systemd:/user.slice\n",
        ),
    ]);
    join_partition(
        &tree,
        &[
            ("/sys/fs/cgroup/cpuset/tame-rt/tasks", "43\n"),
            ("/sys/fs/cgroup/cpuset/tasks", "42\n"),
        ],
    );
}

#[test]
fn a_thread_joins_a_partition_on_v2_with_its_process() {
    let tree = Tree::new(&[
        ("/proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
        ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"),
        ("/sys/fs/cgroup/cgroup.procs", "1\n"),
        ("/sys/fs/cgroup/user.slice/cgroup.procs", "42\n"),
        ("/sys/fs/cgroup/tame-rt/cgroup.procs", ""),
        ("/proc/42/task/43/cgroup", "0::/user.slice\n"),
    ]);
    join_partition(
        &tree,
        &[
            ("/sys/fs/cgroup/tame-rt/cgroup.procs", "42\n"),
            ("/sys/fs/cgroup/user.slice/cgroup.procs", ""),
        ],
    );
}
