//! The one interface to cgroups: [`Cgroups::for_controller`] gives a handle on a
//! controller where it is usable; its [`Group`]s know the file names of their
//! version and turn intentions (create, configure, enable, attach) into
//! operations that are plain data — a planner can show them, and
//! [`CreateGroup::run`], [`write_all`] and [`Attach::run`] make them through the
//! journal, previous value first.
//!
//! Removing a group is reverting the journal that created it: revert hands the
//! tasks that joined it back to the group named at creation, then removes it.

use std::io;

use super::proc::{proc_cgroup_path, read_memberships, thread_cgroup_path};
use super::{v1, v2, CgroupModel, CgroupVersion, Membership};
use crate::journal::{Journal, JournalError, WriteRequest};
use crate::{CpuList, HostError, Root};

/// A controller (`cpuset`, `cpu`) in the hierarchy where it is usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroups {
    controller: String,
    version: CgroupVersion,
    mount: String,
}

impl Cgroups {
    /// Where `controller` can be used: the v2 hierarchy when it offers it, else
    /// the v1 hierarchy it is bound to; `None` when it is mounted nowhere.
    pub fn for_controller(model: &CgroupModel, controller: &str) -> Option<Self> {
        let home = model.controller_home(controller)?;
        Some(Self {
            controller: controller.to_string(),
            version: home.version,
            mount: home.mount,
        })
    }

    /// `controller` in the hierarchy of `version` mounted at `mount`, already found
    /// (as a resolved partition cgroup carries it): no second walk of the model.
    pub fn at(controller: &str, version: CgroupVersion, mount: &str) -> Self {
        Self {
            controller: controller.to_string(),
            version,
            mount: mount.to_string(),
        }
    }

    pub fn controller(&self) -> &str {
        &self.controller
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    pub fn mount(&self) -> &str {
        &self.mount
    }

    /// The root group (the mount itself).
    pub fn root(&self) -> Group {
        Group::new(self.version, &self.mount, "/")
    }

    /// A group by its path below the mount (`/tame-rt`); it may not exist yet.
    pub fn group(&self, rel: &str) -> Group {
        Group::new(self.version, &self.mount, rel)
    }

    /// The group a task is in, from its parsed `/proc/PID/cgroup`.
    pub fn group_of(&self, memberships: &[Membership]) -> Option<Group> {
        super::proc::group_path(memberships, self.version, &self.controller)
            .map(|rel| self.group(rel))
    }

    /// The group process `pid` is in now, from `/proc/PID/cgroup`; `None` when
    /// that names no group in this controller's hierarchy.
    pub fn group_of_process(&self, root: &Root, pid: u32) -> Result<Option<Group>, HostError> {
        let memberships = read_memberships(root, &proc_cgroup_path(pid))?;
        Ok(self.group_of(&memberships))
    }

    /// The group thread `tid` of process `pid` is in now. v1 places threads one
    /// by one, so the thread's own line counts; a v2 domain group holds whole
    /// processes, so there it is the process's `0::` group.
    pub fn group_of_thread(
        &self,
        root: &Root,
        pid: u32,
        tid: u32,
    ) -> Result<Option<Group>, HostError> {
        match self.version {
            CgroupVersion::V1 => {
                let memberships = read_memberships(root, &thread_cgroup_path(pid, tid))?;
                Ok(self.group_of(&memberships))
            }
            CgroupVersion::V2 => self.group_of_process(root, pid),
        }
    }
}

/// A cgroup: a directory of a hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    version: CgroupVersion,
    mount: String,
    /// `/` for the root, else `/a/b`.
    rel: String,
}

impl Group {
    pub fn new(version: CgroupVersion, mount: &str, rel: &str) -> Self {
        let rel = rel.trim_end_matches('/');
        let rel = if rel.is_empty() {
            "/".to_string()
        } else if rel.starts_with('/') {
            rel.to_string()
        } else {
            format!("/{rel}")
        };
        Self {
            version,
            mount: mount.to_string(),
            rel,
        }
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// Where its hierarchy is mounted.
    pub fn mount(&self) -> &str {
        &self.mount
    }

    /// The path below the mount (`/` for the root).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    pub fn is_root(&self) -> bool {
        self.rel == "/"
    }

    /// The host path of the directory.
    pub fn path(&self) -> String {
        if self.is_root() {
            self.mount.clone()
        } else {
            format!("{}{}", self.mount.trim_end_matches('/'), self.rel)
        }
    }

    pub fn child(&self, name: &str) -> Group {
        let rel = if self.is_root() {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.rel)
        };
        Group {
            version: self.version,
            mount: self.mount.clone(),
            rel,
        }
    }

    /// A file of the group.
    pub fn file(&self, name: &str) -> String {
        format!("{}/{name}", self.path())
    }

    fn by_version(&self, v1_name: &str, v2_name: &str) -> String {
        self.file(match self.version {
            CgroupVersion::V1 => v1_name,
            CgroupVersion::V2 => v2_name,
        })
    }

    fn only(&self, version: CgroupVersion, name: &str) -> Option<String> {
        (self.version == version).then(|| self.file(name))
    }

    /// Where a task is attached and listed: v1 `tasks` (one thread each), v2
    /// `cgroup.procs` (a v2 domain group holds whole processes: writing a thread
    /// id there moves its process).
    pub fn members(&self) -> String {
        self.by_version(v1::TASKS, v2::PROCS)
    }

    /// Every thread of the group: v1 `tasks`, v2 `cgroup.threads`.
    pub fn threads(&self) -> String {
        self.by_version(v1::TASKS, v2::THREADS)
    }

    pub fn cpus(&self) -> String {
        self.by_version(v1::cpuset::CPUS, v2::cpuset::CPUS)
    }

    pub fn mems(&self) -> String {
        self.by_version(v1::cpuset::MEMS, v2::cpuset::MEMS)
    }

    pub fn effective_cpus(&self) -> String {
        self.by_version(v1::cpuset::EFFECTIVE_CPUS, v2::cpuset::EFFECTIVE_CPUS)
    }

    /// v1 `cpuset.cpu_exclusive`.
    pub fn cpu_exclusive_file(&self) -> Option<String> {
        self.only(CgroupVersion::V1, v1::cpuset::CPU_EXCLUSIVE)
    }

    /// v1 `cpuset.sched_load_balance`.
    pub fn sched_load_balance_file(&self) -> Option<String> {
        self.only(CgroupVersion::V1, v1::cpuset::SCHED_LOAD_BALANCE)
    }

    /// v2 `cpuset.cpus.partition` (exclusive CPUs; v1 says that with cpu_exclusive).
    pub fn partition_file(&self) -> Option<String> {
        self.only(CgroupVersion::V2, v2::cpuset::PARTITION)
    }

    /// v2 `cgroup.subtree_control`: the controllers the children may use.
    pub fn subtree_control_file(&self) -> Option<String> {
        self.only(CgroupVersion::V2, v2::SUBTREE_CONTROL)
    }

    /// Whether this group's children may use `controller` now: v2 when the
    /// group's `cgroup.subtree_control` lists it (unreadable: no); always on v1,
    /// where a hierarchy's controllers are fixed at mount.
    pub fn children_may_use(&self, root: &Root, controller: &str) -> bool {
        match self.subtree_control_file() {
            None => true,
            Some(file) => root
                .read(&file)
                .is_ok_and(|t| t.split_whitespace().any(|c| c == controller)),
        }
    }

    /// Create this group; revert hands tasks that joined it back to `hand_back_to`
    /// (its parent, or the group the tasks came from) before removing it.
    pub fn create(&self, hand_back_to: &Group) -> CreateGroup {
        CreateGroup {
            path: self.path(),
            members: (self.members(), hand_back_to.members()),
        }
    }

    /// The writes that make this group an exclusive cpuset, in order.
    pub fn configure_cpuset(&self, config: &CpusetConfig) -> Vec<CgroupWrite> {
        match self.version {
            CgroupVersion::V1 => v1::cpuset::configure(self, config),
            CgroupVersion::V2 => v2::cpuset::configure(self, config),
        }
    }

    /// v1: whether the scheduler balances load across this cpuset's CPUs (the
    /// root must not, for its children's domains to count). v2 has no such file:
    /// partitions decide. `None` on v2.
    pub fn load_balance(&self, on: bool) -> Option<CgroupWrite> {
        (self.version == CgroupVersion::V1).then(|| v1::cpuset::load_balance(self, on))
    }

    /// The writes that cap the group at `quota_us` of CPU time per `period_us`.
    pub fn cpu_bandwidth(&self, quota_us: u64, period_us: u64) -> Vec<CgroupWrite> {
        match self.version {
            CgroupVersion::V1 => v1::cpu::bandwidth(self, quota_us, period_us),
            CgroupVersion::V2 => v2::cpu::bandwidth(self, quota_us, period_us),
        }
    }

    /// v2: let the children use `controller` (restored with `-controller`).
    /// `None` on v1, where a hierarchy's controllers are fixed at mount.
    pub fn enable(&self, controller: &str) -> Option<CgroupWrite> {
        (self.version == CgroupVersion::V2).then(|| v2::enable(self, controller))
    }

    /// Move the calling thread into this group: on v1 the thread alone, on v2 its whole
    /// process (a v2 domain group holds processes). Not journaled: it is this process's own
    /// membership, which ends with it, and a revert hands any member back before it removes
    /// the group. Measuring threads join an applied partition this way (`bench -p`).
    pub fn join_calling_thread(&self, root: &Root) -> io::Result<()> {
        let tid = nix::unistd::gettid().as_raw();
        root.write(self.members(), format!("{tid}\n").as_bytes())
    }

    /// Move process `pid` (every thread of it) into this group, unjournaled as
    /// [`Group::join_calling_thread`]: how a v2 process that joined a partition goes back.
    pub fn rejoin_process(&self, root: &Root, pid: u32) -> io::Result<()> {
        root.write(
            self.file(match self.version {
                CgroupVersion::V1 => v1::PROCS,
                CgroupVersion::V2 => v2::PROCS,
            }),
            format!("{pid}\n").as_bytes(),
        )
    }

    /// Attach tasks (now in `from`) to this group, one id at a time; see [`Group::members`]
    /// for what an id means on each version.
    pub fn attach(&self, from: &Group, ids: Vec<u32>) -> Attach {
        Attach {
            tids: ids,
            from: from.members(),
            to: self.members(),
        }
    }

    /// Attach one thread of process `pid`. On v1 the thread moves alone; a v2
    /// domain group holds whole processes, so there the process moves.
    pub fn attach_thread(&self, from: &Group, pid: u32, tid: u32) -> Attach {
        self.attach_process(from, pid, &[tid])
    }

    /// Attach a whole process: v1 lists threads, so every thread id; v2 the process id.
    pub fn attach_process(&self, from: &Group, pid: u32, tids: &[u32]) -> Attach {
        let ids = match self.version {
            CgroupVersion::V1 => tids.to_vec(),
            CgroupVersion::V2 => vec![pid],
        };
        self.attach(from, ids)
    }
}

/// What an exclusive cpuset should hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpusetConfig {
    pub cpus: CpuList,
    pub mems: CpuList,
    /// No load balancing (v1 sched_load_balance 0, v2 an `isolated` partition);
    /// otherwise the CPUs are balanced among the group's own tasks.
    pub isolated: bool,
}

/// Which setting a cgroup write makes (callers explain and compare by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Cpus,
    Mems,
    /// v1 cpu_exclusive.
    CpuExclusive,
    /// v1 sched_load_balance.
    SchedLoadBalance,
    /// v2 cpuset.cpus.partition.
    Partition,
    /// v2 cgroup.subtree_control.
    SubtreeControl,
    /// v2 cpu.max.
    CpuMax,
    /// v1 cpu.cfs_period_us.
    CfsPeriod,
    /// v1 cpu.cfs_quota_us.
    CfsQuota,
}

impl Setting {
    /// The kernel prints it as a CPU list (compare as sets, not text).
    pub fn is_cpu_list(self) -> bool {
        matches!(self, Setting::Cpus | Setting::Mems)
    }
}

/// A directory to create, with its task list and where tasks go back on revert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateGroup {
    pub path: String,
    /// (this group's task list, the list its tasks are handed back to).
    pub members: (String, String),
}

impl CreateGroup {
    /// Create it through the journal. The outer error is the journal's; the inner one the kernel's.
    pub fn run(&self, journal: &mut Journal) -> Result<io::Result<()>, JournalError> {
        journal.create_dir(&self.path, Some((&self.members.0, &self.members.1)))
    }
}

/// A value to write to a cgroup file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupWrite {
    pub path: String,
    pub value: String,
    /// What to write on revert when writing the old text back would not work
    /// (`cgroup.subtree_control` takes `-cpuset`, not the list it prints).
    pub restore_with: Option<String>,
    pub setting: Setting,
}

impl CgroupWrite {
    pub(crate) fn new(path: String, value: impl Into<String>, setting: Setting) -> Self {
        Self {
            path,
            value: value.into(),
            restore_with: None,
            setting,
        }
    }

    pub fn request(&self) -> WriteRequest {
        WriteRequest {
            path: self.path.clone(),
            new: self.value.clone().into_bytes(),
            restore_with: self.restore_with.clone().map(String::into_bytes),
        }
    }
}

/// Make `writes` through the journal, behind one sync; one result per write.
pub fn write_all(
    journal: &mut Journal,
    writes: &[CgroupWrite],
) -> Result<Vec<io::Result<()>>, JournalError> {
    let requests: Vec<WriteRequest> = writes.iter().map(CgroupWrite::request).collect();
    journal.write_batch(&requests)
}

/// Tasks to attach to a group, each journaled with the list it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attach {
    pub tids: Vec<u32>,
    pub from: String,
    pub to: String,
}

impl Attach {
    /// Attach them through the journal; one result per id (ESRCH: it exited meanwhile).
    pub fn run(&self, journal: &mut Journal) -> Result<Vec<io::Result<()>>, JournalError> {
        journal.move_tasks(&self.tids, &self.from, &self.to)
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn file_names_per_version() {
        let v1 = Group::new(CgroupVersion::V1, "/sys/fs/cgroup/cpuset", "/");
        let v2 = Group::new(CgroupVersion::V2, "/sys/fs/cgroup", "tame-rt");
        assert_eq!(v1.members(), "/sys/fs/cgroup/cpuset/tasks");
        assert_eq!(v1.threads(), v1.members());
        assert_eq!(v2.members(), "/sys/fs/cgroup/tame-rt/cgroup.procs");
        assert_eq!(v2.threads(), "/sys/fs/cgroup/tame-rt/cgroup.threads");
        assert_eq!(
            v1.effective_cpus(),
            "/sys/fs/cgroup/cpuset/cpuset.effective_cpus"
        );
        assert_eq!(
            v2.effective_cpus(),
            "/sys/fs/cgroup/tame-rt/cpuset.cpus.effective"
        );
        assert!(v1.partition_file().is_none() && v2.cpu_exclusive_file().is_none());
        assert!(v2.sched_load_balance_file().is_none() && v1.subtree_control_file().is_none());
        assert_eq!(v2.child("a").child("b").rel(), "/tame-rt/a/b");
        assert_eq!(v1.child("x").path(), "/sys/fs/cgroup/cpuset/x");
        assert!(v1.enable("cpuset").is_none() && v2.load_balance(false).is_none());
        let e = v2.enable("cpuset").unwrap();
        assert_eq!(
            (e.value.as_str(), e.restore_with.as_deref()),
            ("+cpuset", Some("-cpuset"))
        );
    }

    /// A root on a temporary tree holding `files`.
    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        for (p, text) in files {
            let path = root.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        (dir, root)
    }

    #[test]
    fn the_group_of_a_task_comes_from_proc() {
        let (_dir, root) = tree(&[
            // The thread sits in another v1 cpuset than its process.
            ("/proc/7/cgroup", "3:cpuset:/\n0::/user.slice/a.scope\n"),
            (
                "/proc/7/task/8/cgroup",
                "3:cpuset:/tame-rt\n0::/user.slice/a.scope\n",
            ),
        ]);
        let v1 = Cgroups {
            controller: "cpuset".into(),
            version: CgroupVersion::V1,
            mount: "/sys/fs/cgroup/cpuset".into(),
        };
        let rel = |g: Option<Group>| g.unwrap().rel().to_string();
        assert_eq!(rel(v1.group_of_process(&root, 7).unwrap()), "/");
        assert_eq!(rel(v1.group_of_thread(&root, 7, 8).unwrap()), "/tame-rt");
        let v2 = Cgroups {
            version: CgroupVersion::V2,
            mount: "/sys/fs/cgroup".into(),
            ..v1.clone()
        };
        // v2: the process's `0::` group, for every thread.
        let g = v2.group_of_thread(&root, 7, 8).unwrap().unwrap();
        assert_eq!(
            g.members(),
            "/sys/fs/cgroup/user.slice/a.scope/cgroup.procs"
        );
        let cpu = Cgroups {
            controller: "cpu".into(),
            ..v1
        };
        assert_eq!(cpu.group_of_process(&root, 7).unwrap(), None);
        assert!(v2.group_of_process(&root, 9).is_err(), "no such process");
    }

    #[test]
    fn children_may_use_what_subtree_control_lists() {
        let (_dir, root) = tree(&[
            ("/cg2/cgroup.subtree_control", "cpuset cpu\n"),
            ("/cg2/a/cgroup.subtree_control", "cpuset\n"),
        ]);
        let g = Group::new(CgroupVersion::V2, "/cg2", "/");
        assert!(g.children_may_use(&root, "cpu"));
        assert!(!g.child("a").children_may_use(&root, "cpu"));
        assert!(!g.child("gone").children_may_use(&root, "cpu"));
        assert!(Group::new(CgroupVersion::V1, "/cg1", "/").children_may_use(&root, "cpu"));
    }

    #[test]
    fn one_cpuset_config_in_each_version_s_files() {
        let config = CpusetConfig {
            cpus: CpuList::parse("2-3").unwrap(),
            mems: CpuList::parse("0").unwrap(),
            isolated: true,
        };
        let files = |g: Group| -> Vec<(String, String)> {
            g.configure_cpuset(&config)
                .into_iter()
                .map(|w| (w.path.rsplit('/').next().unwrap().to_string(), w.value))
                .collect()
        };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            files(Group::new(CgroupVersion::V1, "/c", "/p")),
            pairs(&[
                ("cpuset.cpus", "2-3"),
                ("cpuset.mems", "0"),
                ("cpuset.cpu_exclusive", "1"),
                ("cpuset.sched_load_balance", "0"),
            ])
        );
        assert_eq!(
            files(Group::new(CgroupVersion::V2, "/c", "/p")),
            pairs(&[
                ("cpuset.cpus", "2-3"),
                ("cpuset.mems", "0"),
                ("cpuset.cpus.partition", "isolated"),
            ])
        );
    }
}
