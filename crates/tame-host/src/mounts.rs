//! The mount table (/proc/mounts): where cgroup hierarchies, tracefs, resctrl and
//! debugfs are mounted.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;

pub const PROC_MOUNTS: &str = "/proc/mounts";

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

/// Read and parse the mount table; a missing or malformed one is a recorded problem
/// and reads as no mounts.
pub fn read_mounts(r: &mut Reader) -> Vec<Mount> {
    let mounts = match r.required(PROC_MOUNTS).map(|t| parse_mounts(&t)) {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            r.parse_problem(PROC_MOUNTS, e);
            return Vec::new();
        }
        None => return Vec::new(),
    };
    if r.root().is_system() {
        return mounts;
    }
    as_host_paths(mounts, r.root().base())
}

/// Mount targets as host paths, which the rest of tame resolves below the root.
///
/// Under `--root DIR` in a container (the DaemonSet's `--root /host`), DIR/proc/mounts is
/// the reading process's own table (`/proc/mounts` is `/proc/self/mounts`): the host's
/// mounts it sees through the bind of `/sys` are listed at `DIR/sys/fs/resctrl`, … . DIR is
/// taken off those, or tame would read `DIR/DIR/sys/fs/resctrl`. A target beside DIR (the
/// container's own `/sys/fs/cgroup`, every target of a fixture tree's table) is already a
/// host path and kept. Where both name one place with one file system, the one found
/// below DIR is the host's and stays; the container's own is dropped, so a hierarchy is
/// not counted twice.
fn as_host_paths(mounts: Vec<Mount>, base: &Path) -> Vec<Mount> {
    // A relative `--root` names the same directory as its absolute form in the table.
    let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
    let mapped: Vec<(Mount, bool)> = mounts
        .into_iter()
        .map(|mut m| {
            let host = match Path::new(&m.target).strip_prefix(&base) {
                Ok(rel) => Path::new("/").join(rel).to_string_lossy().into_owned(),
                Err(_) => return (m, false),
            };
            m.target = host;
            (m, true)
        })
        .collect();
    let shadowed = |m: &Mount| {
        mapped
            .iter()
            .any(|(h, below)| *below && h.target == m.target && h.fstype == m.fstype)
    };
    mapped
        .iter()
        .filter(|(m, below)| *below || !shadowed(m))
        .map(|(m, _)| m.clone())
        .collect()
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
        assert_eq!(mounts_of_type(&m, "cgroup").count(), 3);
    }

    #[test]
    fn mounts_of_every_fixture_tree_parse() {
        for name in ["dev-vm", "rt-8cpu", "two-socket-smt"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts");
            let text = std::fs::read_to_string(dir.join(name).join("proc/mounts")).unwrap();
            let m = parse_mounts(&text).unwrap();
            assert!(mounts_of_type(&m, "cgroup2").next().is_some(), "{name}");
        }
    }

    /// The DaemonSet's view: `--root /host` in a pod, whose own mount table lists the
    /// host's resctrl, tracefs and cgroup mounts below /host.
    #[test]
    fn mounts_below_the_root_read_as_host_paths() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("host");
        let b = base.display();
        std::fs::create_dir_all(base.join("proc")).unwrap();
        std::fs::write(
            base.join("proc/mounts"),
            format!(
                "overlay / overlay rw 0 0\n\
                 cgroup2 /sys/fs/cgroup cgroup2 ro 0 0\n\
                 sysfs {b}/sys sysfs ro 0 0\n\
                 cgroup2 {b}/sys/fs/cgroup cgroup2 rw 0 0\n\
                 resctrl {b}/sys/fs/resctrl resctrl rw 0 0\n\
                 tracefs {b}/sys/kernel/tracing tracefs rw 0 0\n\
                 proc {b}/proc proc rw 0 0\n"
            ),
        )
        .unwrap();
        let root = crate::Root::new(&base);
        let m = read_mounts(&mut Reader::new(&root));
        let targets: Vec<(&str, &str)> = m
            .iter()
            .map(|m| (m.fstype.as_str(), m.target.as_str()))
            .collect();
        assert_eq!(
            targets,
            [
                ("overlay", "/"),
                ("sysfs", "/sys"),
                ("cgroup2", "/sys/fs/cgroup"),
                ("resctrl", "/sys/fs/resctrl"),
                ("tracefs", "/sys/kernel/tracing"),
                ("proc", "/proc"),
            ]
        );
        // The host's cgroup2 mount (rw), not the container's (ro).
        assert_eq!(m[2].options, ["rw"]);
        // A fixture tree's table names host paths: unchanged.
        let fixture = crate::Root::new(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/rt-8cpu"),
        );
        let text = std::fs::read_to_string(fixture.path(PROC_MOUNTS)).unwrap();
        assert_eq!(
            read_mounts(&mut Reader::new(&fixture)),
            parse_mounts(&text).unwrap()
        );
    }
}
