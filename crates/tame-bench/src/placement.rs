//! Measuring inside an applied partition (`tame bench … -p NAME`, `tame assess`): each
//! measuring thread joins the partition's cgroup before it pins itself, so it may use the
//! partition's CPUs, while everything else of the run — the thread that waits, the trace
//! reader, the load — stays where tame runs (the system partition after `tame apply`).
//!
//! That holds on cgroup v1, where a thread joins alone. A v2 domain cgroup holds whole
//! processes: there all of tame joins with its first measuring thread, and its other
//! threads (the waiting thread, the trace reader) share the partition's CPUs until the
//! measuring threads are done and [`Joined::leave`] moves the process back. On v2 those
//! helpers can show up as noise in the partition; measuring from a child process would
//! avoid it (not done yet).

use std::sync::Arc;

use tame_host::cgroup::{CgroupVersion, Cgroups, Group};
use tame_host::{CpuList, Root};

use crate::error::{invalid, io_failed, BenchError, Failure, Result};

/// An applied partition to measure in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The partition's name in the applied spec.
    pub partition: String,
    /// Its CPUs.
    pub cpus: CpuList,
    /// Its cgroup in the cpuset hierarchy.
    pub group: Group,
}

impl Placement {
    /// The CPUs to measure: `asked` (which must lie in the partition), else all of the partition's.
    pub fn cpus_to_measure(&self, asked: Option<&CpuList>) -> Result<CpuList> {
        let Some(asked) = asked else {
            return Ok(self.cpus.clone());
        };
        let outside = asked.difference(&self.cpus);
        if !outside.is_empty() {
            return Err(invalid(format!(
                "CPU {outside} is not in partition {:?} (its CPUs: {}) — measure CPUs of the partition, or leave out --cpus to measure all of them",
                self.partition, self.cpus
            )));
        }
        Ok(asked.clone())
    }
}

/// How measuring threads join the partition, shared by them.
#[derive(Debug)]
pub struct JoinGroup {
    root: Root,
    group: Group,
}

impl JoinGroup {
    /// Move the calling thread (v2: its process) into the partition's cgroup.
    pub fn join(&self) -> std::io::Result<()> {
        self.group.join_calling_thread(&self.root)
    }
}

/// A run placed in a partition: what its measuring threads join, and where the process
/// was before (for v2, where it has to go back).
#[derive(Debug)]
pub struct Joined {
    pub join: Arc<JoinGroup>,
    root: Root,
    origin: Option<Group>,
}

impl Joined {
    /// Prepare to join `placement`'s cgroup, which must exist; remember where this
    /// process is now.
    pub fn prepare(root: &Root, placement: &Placement) -> Result<Self> {
        let group = &placement.group;
        if !root.exists(group.members()) {
            return Err(invalid(format!(
                "partition {:?}: its cgroup {} does not exist — is the spec still applied? see `tame status`",
                placement.partition,
                group.path()
            )));
        }
        let hierarchy = Cgroups::at("cpuset", group.version(), group.mount());
        let origin = hierarchy
            .group_of_process(root, std::process::id())
            .map_err(|source| {
                BenchError::Failed(Failure::Host {
                    what: "cannot tell which cgroup tame runs in".into(),
                    source,
                })
            })?;
        Ok(Joined {
            join: Arc::new(JoinGroup {
                root: root.clone(),
                group: group.clone(),
            }),
            root: root.clone(),
            origin,
        })
    }

    /// After measuring: on v2 the whole process joined, so move it back where it was
    /// (on v1 only the measuring threads joined, and they have ended).
    pub fn leave(&self) -> Result<()> {
        if self.join.group.version() != CgroupVersion::V2 {
            return Ok(());
        }
        let Some(origin) = &self.origin else {
            return Ok(());
        };
        origin
            .rejoin_process(&self.root, std::process::id())
            .map_err(|e| {
                io_failed(
                    format!(
                        "cannot move tame back to cgroup {} after measuring in {}",
                        origin.path(),
                        self.join.group.path()
                    ),
                    e,
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement() -> Placement {
        Placement {
            partition: "rt".into(),
            cpus: CpuList::parse("2-3").unwrap(),
            group: Group::new(CgroupVersion::V1, "/sys/fs/cgroup/cpuset", "/tame-rt"),
        }
    }

    #[test]
    fn measured_cpus_default_to_the_partition_and_must_lie_in_it() {
        let p = placement();
        assert_eq!(p.cpus_to_measure(None).unwrap().to_string(), "2-3");
        let three = CpuList::parse("3").unwrap();
        assert_eq!(p.cpus_to_measure(Some(&three)).unwrap().to_string(), "3");
        let e = p
            .cpus_to_measure(Some(&CpuList::parse("1-2").unwrap()))
            .unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(
            e.to_string()
                .starts_with("CPU 1 is not in partition \"rt\" (its CPUs: 2-3)"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_partition_cgroup_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let e = Joined::prepare(&Root::new(dir.path()), &placement()).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(
            e.to_string()
                .contains("its cgroup /sys/fs/cgroup/cpuset/tame-rt does not exist"),
            "{e}"
        );
    }
}
