//! Reading the cgroup setup: the hierarchies from the mount table, every cpuset
//! below the cpuset controller's home, and the files of tame's own groups (as knobs).

use super::{
    parse_partition, CgroupModel, CgroupVersion, Cgroups, ControllerHome, Cpuset, Group,
    V1Hierarchy, V2Hierarchy, TAME_PREFIX, V1_CONTROLLERS,
};
use crate::mounts::{read_mounts, Mount};
use crate::reader::Reader;

/// Deepest cgroup level walked when listing cpusets; systemd trees are shallow.
const MAX_DEPTH: usize = 8;
/// Most cgroups visited, so a machine with thousands of containers stays fast.
const MAX_CGROUPS: usize = 4096;

impl CgroupModel {
    pub fn read(r: &mut Reader) -> Self {
        let mounts = read_mounts(r);
        Self::from_mounts(r, &mounts)
    }

    /// Read with a mount table already parsed (shared with tracing/resctrl).
    pub fn from_mounts(r: &mut Reader, mounts: &[Mount]) -> Self {
        let mut model = CgroupModel::default();
        for m in mounts {
            match m.fstype.as_str() {
                "cgroup" => model.v1.push(v1_hierarchy(m)),
                "cgroup2" if model.v2.is_none() => model.v2 = Some(v2_hierarchy(r, m)),
                _ => {}
            }
        }
        model.cpuset = model.controller_home("cpuset");
        model.cpu = model.controller_home("cpu");
        if let Some(home) = model.cpuset.clone() {
            let mut visited = 0;
            walk_cpusets(r, &home, "/", 0, &mut visited, &mut model.cpusets);
        }
        if let Some(cpuset) = Cgroups::for_controller(&model, "cpuset") {
            read_cpuset_knobs(r, &cpuset);
        }
        model
    }
}

fn v1_hierarchy(m: &Mount) -> V1Hierarchy {
    V1Hierarchy {
        mount: m.target.clone(),
        controllers: m
            .options
            .iter()
            .filter(|o| V1_CONTROLLERS.contains(&o.as_str()))
            .cloned()
            .collect(),
        name: m
            .options
            .iter()
            .find_map(|o| o.strip_prefix("name=").map(str::to_string)),
    }
}

fn v2_hierarchy(r: &mut Reader, m: &Mount) -> V2Hierarchy {
    let words = |text: Option<String>| -> Vec<String> {
        text.map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let root = Group::new(CgroupVersion::V2, &m.target, "/");
    V2Hierarchy {
        mount: m.target.clone(),
        controllers: words(r.optional(&root.file(super::v2::CONTROLLERS))),
        // tame enables cpuset here: a knob.
        subtree_control: words(r.knob(&root.file(super::v2::SUBTREE_CONTROL))),
    }
}

fn walk_cpusets(
    r: &mut Reader,
    home: &ControllerHome,
    rel: &str,
    depth: usize,
    visited: &mut usize,
    out: &mut Vec<Cpuset>,
) {
    *visited += 1;
    let g = Group::new(home.version, &home.mount, rel);
    let dir = g.path();
    let partition = match g.partition_file() {
        Some(p) if !g.is_root() => r
            .optional(&p)
            .and_then(|t| parse_partition(&t).map_err(|e| r.parse_problem(&p, e)).ok()),
        _ => None,
    };
    out.push(Cpuset {
        path: rel.to_string(),
        version: home.version,
        cpus: r.cpu_list(&g.cpus()),
        effective_cpus: r.cpu_list(&g.effective_cpus()),
        mems: r.cpu_list(&g.mems()),
        cpu_exclusive: g.cpu_exclusive_file().and_then(|f| r.flag(&f)),
        partition,
    });
    if depth >= MAX_DEPTH {
        return;
    }
    for name in r.list(&dir) {
        if *visited >= MAX_CGROUPS {
            return;
        }
        let child = g.child(&name);
        if !r.is_dir(&child.path()) {
            continue;
        }
        walk_cpusets(r, home, child.rel(), depth + 1, visited, out);
    }
}

/// The files a partition plan writes in the cpuset hierarchy: the root's (v1 load
/// balancing and task list) and those of tame's groups directly below it, which
/// are read even where the walk stopped early.
fn read_cpuset_knobs(r: &mut Reader, cpuset: &Cgroups) {
    let root = cpuset.root();
    if let Some(f) = root.sched_load_balance_file() {
        r.knob(&f);
    }
    if cpuset.version() == CgroupVersion::V1 {
        // Where the tasks a plan moves are listed.
        r.knob(&root.members());
    }
    for name in r.list(&root.path()) {
        if !name.starts_with(TAME_PREFIX) {
            continue;
        }
        let g = root.child(&name);
        if !r.is_dir(&g.path()) {
            continue;
        }
        crate::knobs::keep_dir(r, &g.path(), Some(&g.members()));
        for file in [Some(g.cpus()), Some(g.mems())]
            .into_iter()
            .chain([g.cpu_exclusive_file(), g.sched_load_balance_file()])
            .chain([g.partition_file()])
            .flatten()
        {
            r.knob(&file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::PartitionKind;

    const THIS_VM: &str = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (p, s) in files {
            let path = dir.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        }
        dir
    }

    #[test]
    fn v1_cpuset_when_v2_has_no_controllers() {
        let dir = tree(&[
            ("/proc/mounts", THIS_VM),
            ("/sys/fs/cgroup/unified/cgroup.controllers", "\n"),
            ("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n"),
            ("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-1\n"),
            ("/sys/fs/cgroup/cpuset/cpuset.mems", "0\n"),
            ("/sys/fs/cgroup/cpuset/rt/cpuset.cpus", "1\n"),
            ("/sys/fs/cgroup/cpuset/rt/cpuset.cpu_exclusive", "1\n"),
        ]);
        let root = crate::Root::new(dir.path());
        let mut r = Reader::new(&root);
        let m = CgroupModel::read(&mut r);
        assert_eq!(
            m.cpuset,
            Some(ControllerHome {
                version: CgroupVersion::V1,
                mount: "/sys/fs/cgroup/cpuset".into()
            })
        );
        assert_eq!(m.cpu.unwrap().mount, "/sys/fs/cgroup/cpu");
        assert_eq!(m.v2.unwrap().controllers, Vec::<String>::new());
        assert_eq!(
            m.v1.iter()
                .find(|h| h.name.is_some())
                .unwrap()
                .name
                .as_deref(),
            Some("systemd")
        );
        assert_eq!(m.cpusets.len(), 2);
        assert_eq!(m.cpusets[1].path, "/rt");
        assert_eq!(m.cpusets[1].cpus.as_ref().unwrap().to_string(), "1");
        assert_eq!(m.cpusets[1].cpu_exclusive, Some(true));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    #[test]
    fn tame_groups_and_the_root_task_list_are_knobs() {
        let dir = tree(&[
            ("/proc/mounts", THIS_VM),
            ("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n"),
            ("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n"),
            ("/sys/fs/cgroup/cpuset/tasks", "1\n2\n"),
            ("/sys/fs/cgroup/cpuset/tame-rt/cpuset.cpus", "1\n"),
            (
                "/sys/fs/cgroup/cpuset/tame-rt/cpuset.sched_load_balance",
                "0\n",
            ),
            ("/sys/fs/cgroup/cpuset/tame-rt/tasks", ""),
            ("/sys/fs/cgroup/cpuset/other/cpuset.cpus", "0\n"),
        ]);
        let root = crate::Root::new(dir.path());
        let mut r = Reader::new(&root);
        CgroupModel::read(&mut r);
        let k = &r.knobs;
        assert_eq!(k.text("/sys/fs/cgroup/cpuset/tasks"), Some("1\n2\n"));
        assert_eq!(
            k.text("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance"),
            Some("1\n")
        );
        assert_eq!(
            k.text("/sys/fs/cgroup/cpuset/tame-rt/cpuset.sched_load_balance"),
            Some("0\n")
        );
        assert!(k.has_dir("/sys/fs/cgroup/cpuset/tame-rt"));
        assert!(!k.has_dir("/sys/fs/cgroup/cpuset/other"));
        assert!(k.owner("/sys/fs/cgroup/cpuset/tame-rt/tasks").is_some());
        assert!(!k.exists("/sys/fs/cgroup/cpuset/other/cpuset.cpus"));
    }

    #[test]
    fn v2_partitions_of_the_two_socket_fixture() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/hosts/two-socket-smt");
        let root = crate::Root::new(dir);
        let mut r = Reader::new(&root);
        let m = CgroupModel::read(&mut r);
        assert_eq!(m.cpuset.as_ref().unwrap().version, CgroupVersion::V2);
        let kinds: Vec<(bool, PartitionKind)> = m
            .partitions()
            .map(|c| {
                let p = c.partition.as_ref().unwrap();
                (p.valid, p.kind)
            })
            .collect();
        assert!(
            kinds.contains(&(true, PartitionKind::Isolated)),
            "{kinds:?}"
        );
        assert!(kinds.iter().any(|(valid, _)| !valid), "{kinds:?}");
        assert!(r
            .knobs
            .text("/sys/fs/cgroup/cgroup.subtree_control")
            .is_some());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}
