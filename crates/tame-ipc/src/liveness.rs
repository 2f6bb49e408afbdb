//! Whether a process recorded in a segment still exists: pid plus start time
//! (/proc/PID/stat field 22), so a recycled pid is not mistaken for the peer.
//!
//! Checked on demand only (a few system calls, never a wait on the peer); the
//! real-time side decides when, or leaves it to the ordinary side.

use std::io;
use std::path::{Path, PathBuf};

use crate::layout::unpack_owner;

/// Where /proc is; injectable so tests can use fixture trees.
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

/// What /proc says about a pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// One-letter state (R, S, D, Z, X, ...).
    pub state: char,
    /// Start time in clock ticks after boot (field 22).
    pub start_ticks: u64,
}

/// Liveness of a recorded process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// The same process (pid and start time match) exists and is not a zombie.
    Alive,
    /// No such process, a zombie, or the pid now belongs to another process.
    Dead,
    /// /proc could not be read (another pid namespace, hidepid, permission).
    Unknown,
}

impl Liveness {
    pub fn name(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Dead => "dead",
            Liveness::Unknown => "unknown",
        }
    }
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads and parses /proc/PID/stat. `Ok(None)` when the process does not exist.
    pub fn stat(&self, pid: u32) -> io::Result<Option<ProcStat>> {
        let path = self.root.join(pid.to_string()).join("stat");
        match std::fs::read(&path) {
            Ok(bytes) => parse_stat(&bytes).map(Some).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("cannot parse {}", path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            // ESRCH: the process exited while we read.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The start time of the calling process.
    pub fn own_start_ticks(&self) -> io::Result<u64> {
        let pid = std::process::id();
        self.stat(pid)?.map(|s| s.start_ticks).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}/{pid}/stat is missing", self.root.display()),
            )
        })
    }

    /// Liveness of the process with this pid and start time (all 64 bits compared).
    pub fn liveness(&self, pid: u32, start_ticks: u64) -> Liveness {
        self.liveness_masked(pid, start_ticks, u64::MAX)
    }

    /// Liveness of a packed role-slot owner (start time compared on its low 32 bits).
    pub fn owner_liveness(&self, owner: u64) -> Liveness {
        let (pid, start_low) = unpack_owner(owner);
        self.liveness_masked(pid, u64::from(start_low), 0xffff_ffff)
    }

    fn liveness_masked(&self, pid: u32, start_ticks: u64, mask: u64) -> Liveness {
        if pid == 0 || pid > i32::MAX as u32 {
            return Liveness::Dead;
        }
        match self.stat(pid) {
            Ok(None) => Liveness::Dead,
            Ok(Some(stat)) if stat.state == 'Z' || stat.state == 'X' => Liveness::Dead,
            Ok(Some(stat)) if stat.start_ticks & mask != start_ticks & mask => Liveness::Dead,
            Ok(Some(_)) => Liveness::Alive,
            Err(_) => Liveness::Unknown,
        }
    }
}

/// Parses the state (field 3) and start time (field 22) of a /proc/PID/stat line.
/// The command name (field 2) may contain spaces and parentheses, so fields are
/// counted after the last ')'.
pub fn parse_stat(bytes: &[u8]) -> Option<ProcStat> {
    let close = bytes.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&bytes[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // Fields 4..=21 precede the start time.
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(ProcStat { state, start_ticks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::pack_owner;
    use proptest::prelude::*;

    const SAMPLE: &[u8] = b"1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 98765 1000 100 18446744073709551615\n";

    #[test]
    fn parses_field_22_after_odd_command_names() {
        assert_eq!(
            parse_stat(SAMPLE),
            Some(ProcStat {
                state: 'S',
                start_ticks: 98765
            })
        );
        assert_eq!(parse_stat(b"1 (x) S 1 2"), None);
        assert_eq!(parse_stat(b"no paren"), None);
    }

    #[test]
    fn own_process_is_alive_and_a_wrong_start_time_is_dead() {
        let proc = ProcFs::default();
        let me = std::process::id();
        let start = proc.own_start_ticks().unwrap();
        assert_eq!(proc.liveness(me, start), Liveness::Alive);
        assert_eq!(proc.liveness(me, start + 1), Liveness::Dead);
        assert_eq!(proc.owner_liveness(pack_owner(me, start)), Liveness::Alive);
        assert_eq!(proc.liveness(0, 0), Liveness::Dead);
    }

    #[test]
    fn exited_child_is_dead() {
        let proc = ProcFs::default();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: the pid is gone (or reused with another start time).
        assert_eq!(proc.liveness(pid, 1), Liveness::Dead);
    }

    #[test]
    fn fixture_tree_drives_liveness() {
        let dir = std::env::temp_dir().join(format!("tame-ipc-proc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("77")).unwrap();
        std::fs::create_dir_all(dir.join("78")).unwrap();
        std::fs::write(dir.join("77/stat"), SAMPLE).unwrap();
        std::fs::write(
            dir.join("78/stat"),
            b"78 (zombie) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0\n",
        )
        .unwrap();
        let proc = ProcFs::new(&dir);
        assert_eq!(proc.liveness(77, 98765), Liveness::Alive);
        assert_eq!(proc.liveness(77, 98764), Liveness::Dead);
        assert_eq!(proc.liveness(78, 5), Liveness::Dead);
        assert_eq!(proc.liveness(79, 5), Liveness::Dead);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    proptest! {
        #[test]
        fn parse_stat_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_stat(&bytes);
        }
    }
}
