//! Control groups, in one module tree (the shape of youki's libcgroups):
//!
//! - this module: the model — the v1 hierarchies and the v2 unified hierarchy,
//!   where each controller lives, and the cpusets that exist (including v2
//!   partitions: `root`, `isolated`, and their `invalid` states); `read` fills it;
//! - [`Cgroups`] and [`Group`]: the one interface every user calls; it knows each
//!   version's file names and makes journaled operations (create, configure,
//!   enable a controller, attach tasks; revert removes);
//! - [`v1`] and [`v2`]: the file names and values per version, a file per controller;
//! - [`proc`]: `/proc/PID/cgroup`; [`members`]: the tasks in a task list.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::CpuList;

mod handle;
pub mod members;
pub mod proc;
mod read;
pub mod v1;
pub mod v2;

pub use handle::{
    write_all, Attach, CgroupWrite, Cgroups, CpusetConfig, CreateGroup, Group, Setting,
};
// The mount table has its own module now; these names stay for callers of the old path.
pub use crate::mounts::{mounts_of_type, parse_mounts, Mount, PROC_MOUNTS};
pub use proc::{parse_proc_cgroup, Membership};

/// Every directory tame creates (cgroups, resctrl groups) starts with this.
pub const TAME_PREFIX: &str = "tame-";

/// The controllers a v1 mount may carry, as named in mount options.
pub const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// A mounted v1 hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct V1Hierarchy {
    pub mount: String,
    /// Controllers bound to it (`cpu`, `cpuset`, …); may be empty for named hierarchies.
    pub controllers: Vec<String>,
    /// `name=systemd` style hierarchy name.
    pub name: Option<String>,
}

/// The mounted v2 unified hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct V2Hierarchy {
    pub mount: String,
    /// `cgroup.controllers` of the root: the controllers available to v2
    /// (a controller bound to a v1 hierarchy is missing here).
    pub controllers: Vec<String>,
    /// `cgroup.subtree_control` of the root.
    pub subtree_control: Vec<String>,
}

/// Where a controller lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerHome {
    pub version: CgroupVersion,
    pub mount: String,
}

/// A cgroup v2 cpuset partition type, as read from `cpuset.cpus.partition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionKind {
    Member,
    Root,
    Isolated,
}

/// The state of `cpuset.cpus.partition`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub kind: PartitionKind,
    /// False for `root invalid (…)` / `isolated invalid (…)`: the kernel
    /// refused the partition and treats the cpuset as a member.
    pub valid: bool,
    /// The kernel's reason when invalid.
    pub reason: Option<String>,
}

/// Parse `cpuset.cpus.partition`.
pub fn parse_partition(text: &str) -> Result<PartitionState, ParseError> {
    let t = text.trim();
    let (word, rest) = t.split_once(' ').unwrap_or((t, ""));
    let kind = match word {
        "member" => PartitionKind::Member,
        "root" => PartitionKind::Root,
        "isolated" => PartitionKind::Isolated,
        other => {
            return Err(ParseError::new(
                1,
                format!("unknown partition type {other:?}"),
            ))
        }
    };
    let rest = rest.trim();
    if rest.is_empty() {
        return Ok(PartitionState {
            kind,
            valid: true,
            reason: None,
        });
    }
    let Some(after) = rest.strip_prefix("invalid") else {
        return Err(ParseError::new(
            1,
            format!("unexpected {rest:?} after {word}"),
        ));
    };
    let reason = after
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    Ok(PartitionState {
        kind,
        valid: false,
        reason: (!reason.is_empty()).then(|| reason.to_string()),
    })
}

/// An existing cpuset (v1 or v2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpuset {
    /// Path below the controller's mount (`/` for the root, `/tame/rt0`).
    pub path: String,
    pub version: CgroupVersion,
    /// `cpuset.cpus` as configured (empty in v2 means "inherit").
    pub cpus: Option<CpuList>,
    /// `cpuset.effective_cpus` (v1) / `cpuset.cpus.effective` (v2).
    pub effective_cpus: Option<CpuList>,
    pub mems: Option<CpuList>,
    /// v1 `cpuset.cpu_exclusive`.
    pub cpu_exclusive: Option<bool>,
    /// v2 `cpuset.cpus.partition` (absent on the root and in v1).
    pub partition: Option<PartitionState>,
}

/// The cgroup setup of the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupModel {
    pub v1: Vec<V1Hierarchy>,
    pub v2: Option<V2Hierarchy>,
    /// Where the cpuset controller is usable (v2 wins where it is enabled there).
    pub cpuset: Option<ControllerHome>,
    pub cpu: Option<ControllerHome>,
    /// Every cpuset below the cpuset controller's home, root first.
    pub cpusets: Vec<Cpuset>,
}

impl CgroupModel {
    /// systemd manages cpusets itself (`AllowedCPUs=`): cgroup v2 is the unified hierarchy
    /// at /sys/fs/cgroup (not a hybrid's /sys/fs/cgroup/unified) and no v1 hierarchy holds
    /// the cpuset controller.
    pub fn systemd_cpusets(&self) -> bool {
        let v1_cpuset = self
            .v1
            .iter()
            .any(|h| h.controllers.iter().any(|c| c == "cpuset"));
        self.v2
            .as_ref()
            .is_some_and(|v2| v2.mount == "/sys/fs/cgroup")
            && !v1_cpuset
    }

    /// Where a controller can be used: the v2 hierarchy when it lists it,
    /// else the v1 hierarchy it is bound to.
    pub fn controller_home(&self, controller: &str) -> Option<ControllerHome> {
        if let Some(v2) = &self.v2 {
            if v2.controllers.iter().any(|c| c == controller) {
                return Some(ControllerHome {
                    version: CgroupVersion::V2,
                    mount: v2.mount.clone(),
                });
            }
        }
        self.v1
            .iter()
            .find(|h| h.controllers.iter().any(|c| c == controller))
            .map(|h| ControllerHome {
                version: CgroupVersion::V1,
                mount: h.mount.clone(),
            })
    }

    /// Partitions (v2 cpusets whose partition type is root or isolated).
    pub fn partitions(&self) -> impl Iterator<Item = &Cpuset> {
        self.cpusets.iter().filter(|c| {
            c.partition
                .as_ref()
                .is_some_and(|p| p.kind != PartitionKind::Member)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_states() {
        let p = parse_partition("isolated\n").unwrap();
        assert_eq!(p.kind, PartitionKind::Isolated);
        assert!(p.valid);
        let p = parse_partition("root invalid (Cpu list in cpuset.cpus not exclusive)").unwrap();
        assert_eq!(p.kind, PartitionKind::Root);
        assert!(!p.valid);
        assert_eq!(
            p.reason.as_deref(),
            Some("Cpu list in cpuset.cpus not exclusive")
        );
        assert!(!parse_partition("isolated invalid").unwrap().valid);
        assert_eq!(parse_partition("bogus").unwrap_err().line, 1);
        assert!(parse_partition("root sideways").is_err());
    }
}
