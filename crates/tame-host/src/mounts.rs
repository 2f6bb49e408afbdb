//! The mount table (/proc/mounts): where cgroup hierarchies, tracefs, resctrl and
//! debugfs are mounted.

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
    match r.required(PROC_MOUNTS).map(|t| parse_mounts(&t)) {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            r.parse_problem(PROC_MOUNTS, e);
            Vec::new()
        }
        None => Vec::new(),
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
}
