//! Control groups: the v1 hierarchies and the v2 unified hierarchy, where the
//! cpuset and cpu controllers live, and the cpusets that already exist
//! (including v2 partitions: `root`, `isolated`, and their `invalid` states).

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;
use crate::CpuList;

pub const PROC_MOUNTS: &str = "/proc/mounts";

/// Deepest cgroup level walked when listing cpusets; systemd trees are shallow.
const MAX_DEPTH: usize = 8;
/// Most cgroups visited, so a machine with thousands of containers stays fast.
const MAX_CGROUPS: usize = 4096;

/// One line of /proc/mounts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub fstype: String,
    pub options: Vec<String>,
}

/// Parse /proc/mounts (octal escapes such as `\040` decoded).
pub fn parse_mounts(text: &str) -> Result<Vec<Mount>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            return Err(ParseError::new(
                i + 1,
                format!(
                    "expected SOURCE TARGET TYPE OPTIONS, found {} fields",
                    f.len()
                ),
            ));
        }
        out.push(Mount {
            source: unescape(f[0]),
            target: unescape(f[1]),
            fstype: f[2].to_string(),
            options: f[3].split(',').map(str::to_string).collect(),
        });
    }
    Ok(out)
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

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

    pub fn read(r: &mut Reader) -> Self {
        let mounts = match r.required(PROC_MOUNTS).map(|t| parse_mounts(&t)) {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                r.parse_problem(PROC_MOUNTS, e);
                Vec::new()
            }
            None => Vec::new(),
        };
        Self::from_mounts(r, &mounts)
    }

    /// Read with a mount table already parsed (shared with tracing/resctrl).
    pub fn from_mounts(r: &mut Reader, mounts: &[Mount]) -> Self {
        let mut model = CgroupModel::default();
        for m in mounts {
            match m.fstype.as_str() {
                "cgroup" => model.v1.push(V1Hierarchy {
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
                }),
                "cgroup2" if model.v2.is_none() => {
                    let words = |r: &mut Reader, f: &str| -> Vec<String> {
                        r.optional(&format!("{}/{f}", m.target))
                            .map(|t| t.split_whitespace().map(str::to_string).collect())
                            .unwrap_or_default()
                    };
                    model.v2 = Some(V2Hierarchy {
                        mount: m.target.clone(),
                        controllers: words(r, "cgroup.controllers"),
                        subtree_control: words(r, "cgroup.subtree_control"),
                    });
                }
                _ => {}
            }
        }
        model.cpuset = model.controller_home("cpuset");
        model.cpu = model.controller_home("cpu");
        if let Some(home) = model.cpuset.clone() {
            let mut visited = 0;
            walk_cpusets(r, &home, "/", 0, &mut visited, &mut model.cpusets);
        }
        model
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
    let dir = if rel == "/" {
        home.mount.clone()
    } else {
        format!("{}{rel}", home.mount.trim_end_matches('/'))
    };
    let v2 = home.version == CgroupVersion::V2;
    let effective = if v2 {
        "cpuset.cpus.effective"
    } else {
        "cpuset.effective_cpus"
    };
    let partition = if v2 && rel != "/" {
        let p = format!("{dir}/cpuset.cpus.partition");
        r.optional(&p)
            .and_then(|t| parse_partition(&t).map_err(|e| r.parse_problem(&p, e)).ok())
    } else {
        None
    };
    out.push(Cpuset {
        path: rel.to_string(),
        version: home.version,
        cpus: r.cpu_list(&format!("{dir}/cpuset.cpus")),
        effective_cpus: r.cpu_list(&format!("{dir}/{effective}")),
        mems: r.cpu_list(&format!("{dir}/cpuset.mems")),
        cpu_exclusive: if v2 {
            None
        } else {
            r.flag(&format!("{dir}/cpuset.cpu_exclusive"))
        },
        partition,
    });
    if depth >= MAX_DEPTH {
        return;
    }
    for name in r.list(&dir) {
        if *visited >= MAX_CGROUPS {
            return;
        }
        let child = format!("{dir}/{name}");
        if !r.is_dir(&child) {
            continue;
        }
        let child_rel = if rel == "/" {
            format!("/{name}")
        } else {
            format!("{rel}/{name}")
        };
        walk_cpusets(r, home, &child_rel, depth + 1, visited, out);
    }
}

/// The mounts of one file-system type (`tracefs`, `resctrl`).
pub fn mounts_of_type<'a>(mounts: &'a [Mount], fstype: &'a str) -> impl Iterator<Item = &'a Mount> {
    mounts.iter().filter(move |m| m.fstype == fstype)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS_VM: &str = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
/dev/vda /my\\040disk ext4 rw 0 0
";

    #[test]
    fn parses_mounts_with_escapes() {
        let m = parse_mounts(THIS_VM).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[5].target, "/my disk");
        assert_eq!(m[1].options, vec!["rw", "relatime", "cpu"]);
        let e = parse_mounts("a b c d\nbroken\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

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

    #[test]
    fn v1_cpuset_when_v2_has_no_controllers() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, s: &str| {
            let path = dir.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w("/proc/mounts", THIS_VM);
        w("/sys/fs/cgroup/unified/cgroup.controllers", "\n");
        w("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n");
        w("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-1\n");
        w("/sys/fs/cgroup/cpuset/cpuset.mems", "0\n");
        w("/sys/fs/cgroup/cpuset/rt/cpuset.cpus", "1\n");
        w("/sys/fs/cgroup/cpuset/rt/cpuset.cpu_exclusive", "1\n");
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
}
