//! `/proc/PID/cgroup`: which group a task is in, per hierarchy
//! (`HIERARCHY-ID:CONTROLLERS:PATH`; v2 is `0::PATH`).

use super::CgroupVersion;
use crate::error::ParseError;
use crate::{HostError, Root};

/// The cgroups of a process (its main thread).
pub fn proc_cgroup_path(pid: u32) -> String {
    format!("/proc/{pid}/cgroup")
}

/// The cgroups of one thread.
pub fn thread_cgroup_path(pid: u32, tid: u32) -> String {
    format!("/proc/{pid}/task/{tid}/cgroup")
}

/// One line of `/proc/PID/cgroup`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The hierarchy id (0 for the v2 unified hierarchy).
    pub hierarchy: u32,
    /// v1: the controllers bound there (`cpu`, `cpuacct`, `name=systemd`); v2: none.
    pub controllers: Vec<String>,
    /// The group, below the hierarchy's mount (`/user.slice`).
    pub path: String,
}

/// Parse `/proc/PID/cgroup`.
pub fn parse_proc_cgroup(text: &str) -> Result<Vec<Membership>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(ParseError::new(
                i + 1,
                format!("expected ID:CONTROLLERS:PATH, found {line:?}"),
            ));
        };
        let hierarchy = id
            .parse()
            .map_err(|_| ParseError::new(i + 1, format!("hierarchy id {id:?} is not a number")))?;
        out.push(Membership {
            hierarchy,
            controllers: controllers
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
            path: path.to_string(),
        });
    }
    Ok(out)
}

/// Read and parse a task's cgroups (`path` from [`proc_cgroup_path`] or [`thread_cgroup_path`]).
pub fn read_memberships(root: &Root, path: &str) -> Result<Vec<Membership>, HostError> {
    let text = root.read(path)?;
    parse_proc_cgroup(&text).map_err(|e| e.at(root.path(path)))
}

/// The path of the group holding `controller`: v2's unified line, or the v1 line
/// that lists the controller.
pub(crate) fn group_path<'a>(
    memberships: &'a [Membership],
    version: CgroupVersion,
    controller: &str,
) -> Option<&'a str> {
    memberships
        .iter()
        .find(|m| match version {
            CgroupVersion::V2 => m.hierarchy == 0 && m.controllers.is_empty(),
            CgroupVersion::V1 => m.controllers.iter().any(|c| c == controller),
        })
        .map(|m| m.path.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{CgroupModel, Cgroups, ControllerHome, V1Hierarchy, V2Hierarchy};

    const MIXED: &str =
        "12:cpuset:/\n5:cpu:/user.slice\n4:cpuacct:/\n1:name=systemd:/a:b\n0::/init.scope\n";

    #[test]
    fn parses_v1_and_v2_lines() {
        let m = parse_proc_cgroup(MIXED).unwrap();
        assert_eq!(m.len(), 5);
        assert_eq!(m[3].controllers, vec!["name=systemd"]);
        assert_eq!(m[3].path, "/a:b", "the path may hold ':'");
        assert_eq!(m[4].hierarchy, 0);
        assert!(m[4].controllers.is_empty());
        assert_eq!(parse_proc_cgroup("x:cpu:/\n").unwrap_err().line, 1);
        assert_eq!(parse_proc_cgroup("0::/\nbroken\n").unwrap_err().line, 2);
    }

    #[test]
    fn finds_the_group_of_a_controller() {
        let m = parse_proc_cgroup(MIXED).unwrap();
        assert_eq!(
            group_path(&m, CgroupVersion::V1, "cpu"),
            Some("/user.slice")
        );
        assert_eq!(group_path(&m, CgroupVersion::V1, "cpuset"), Some("/"));
        assert_eq!(
            group_path(&m, CgroupVersion::V2, "cpu"),
            Some("/init.scope")
        );
        let joint = parse_proc_cgroup("3:cpu,cpuacct:/a\n").unwrap();
        assert_eq!(group_path(&joint, CgroupVersion::V1, "cpu"), Some("/a"));
        assert_eq!(group_path(&joint, CgroupVersion::V1, "cpuset"), None);
    }

    #[test]
    fn the_handle_names_the_group_on_each_version() {
        let m = parse_proc_cgroup(MIXED).unwrap();
        let v1 = CgroupModel {
            v1: vec![V1Hierarchy {
                mount: "/sys/fs/cgroup/cpu".into(),
                controllers: vec!["cpu".into()],
                name: None,
            }],
            ..Default::default()
        };
        let g = Cgroups::for_controller(&v1, "cpu")
            .unwrap()
            .group_of(&m)
            .unwrap();
        assert_eq!(g.path(), "/sys/fs/cgroup/cpu/user.slice");
        let v2 = CgroupModel {
            v2: Some(V2Hierarchy {
                mount: "/sys/fs/cgroup".into(),
                controllers: vec!["cpu".into(), "cpuset".into()],
                subtree_control: vec![],
            }),
            cpu: Some(ControllerHome {
                version: CgroupVersion::V2,
                mount: "/sys/fs/cgroup".into(),
            }),
            ..Default::default()
        };
        let g = Cgroups::for_controller(&v2, "cpuset")
            .unwrap()
            .group_of(&m)
            .unwrap();
        assert_eq!(g.members(), "/sys/fs/cgroup/init.scope/cgroup.procs");
    }
}
