//! Whether a process recorded in a segment still exists: pid plus start time
//! (/proc/PID/stat field 22), so a recycled pid is not mistaken for the peer.
//!
//! A pid means something only in its pid namespace, and /proc may hide processes
//! (hidepid=1/2, another namespace's /proc). So "dead" is reported only when it is
//! certain: the recorder wrote down its pid namespace, it is the namespace this /proc
//! shows and we live in, and the pid is absent there (kill(pid, 0) says ESRCH, which
//! hidepid cannot fake), a zombie, or another process (other start time). Anything
//! less certain is `Unknown`, and callers never take a role over or delete a segment
//! on `Unknown`.
//!
//! Checked on demand only (a few system calls, never a wait on the peer); the
//! real-time side decides when, or leaves it to the ordinary side.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::layout::unpack_owner;

/// The /proc whose pids are those of this process's own namespace.
pub const LIVE_PROC: &str = "/proc";

/// Where /proc is; injectable so tests can use fixture trees. A fixture tree states
/// its pid namespace with a symlink `self/ns/pid -> pid:[INODE]`, as /proc does.
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
    /// The namespace whose pids this /proc shows, read once.
    pid_ns: Arc<OnceLock<Option<u32>>>,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new(LIVE_PROC)
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
    /// Certainly gone: no such process in the recorder's pid namespace (which is
    /// ours), a zombie, or the pid now belongs to another process.
    Dead,
    /// Cannot be decided: another or unrecorded pid namespace, a process /proc hides
    /// (hidepid), /proc unreadable. Never treated as dead.
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

/// Parses a namespace link's target, `pid:[4026531836]`.
pub fn parse_pid_ns_link(target: &str) -> Option<u32> {
    let inode = target.strip_prefix("pid:[")?.strip_suffix(']')?;
    inode.parse().ok().filter(|&ino| ino != 0)
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs {
            root: root.into(),
            pid_ns: Arc::new(OnceLock::new()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True for the system's /proc, where kill(2) can confirm what /proc shows.
    fn is_live(&self) -> bool {
        self.root == Path::new(LIVE_PROC)
    }

    /// The pid namespace (inode of `ns/pid`) whose pids this /proc shows and in which
    /// this process lives; `None` when that cannot be established: for the live
    /// /proc, `self` must be our own pid (a /proc mounted for another namespace
    /// resolves it to another pid or not at all). Read once per `ProcFs`.
    pub fn pid_ns(&self) -> Option<u32> {
        *self.pid_ns.get_or_init(|| {
            if self.is_live() {
                let me = std::fs::read_link(self.root.join("self")).ok()?;
                if me.to_str()? != std::process::id().to_string() {
                    return None;
                }
            }
            let target = std::fs::read_link(self.root.join("self/ns/pid")).ok()?;
            parse_pid_ns_link(target.to_str()?)
        })
    }

    /// Reads and parses /proc/PID/stat. `Ok(None)` when /proc shows no such process
    /// (which under hidepid does not mean there is none).
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

    /// Liveness of a process of this /proc's own pid namespace (one we know: this
    /// process, a child we started) with this pid and start time (all 64 bits).
    pub fn liveness(&self, pid: u32, start_ticks: u64) -> Liveness {
        self.check(pid, start_ticks, u64::MAX)
    }

    /// Liveness of a process recorded by someone else, with the pid namespace it
    /// recorded (`pid_ns`, 0: not recorded). `Dead` only when `pid_ns` is ours.
    pub fn recorded_liveness(&self, pid: u32, start_ticks: u64, pid_ns: u32) -> Liveness {
        if !possible_pid(pid) {
            return Liveness::Dead;
        }
        self.judge(self.check(pid, start_ticks, u64::MAX), pid_ns)
    }

    /// Liveness of a packed role-slot owner (start time compared on its low 32 bits)
    /// with the pid namespace recorded for it (0: not recorded).
    pub fn owner_liveness(&self, owner: u64, pid_ns: u32) -> Liveness {
        let (pid, start_low) = unpack_owner(owner);
        if !possible_pid(pid) {
            return Liveness::Dead;
        }
        self.judge(self.check(pid, u64::from(start_low), 0xffff_ffff), pid_ns)
    }

    /// Keeps a verdict only as far as the recorded namespace supports it.
    fn judge(&self, seen: Liveness, pid_ns: u32) -> Liveness {
        let ours = pid_ns != 0 && self.pid_ns() == Some(pid_ns);
        match seen {
            Liveness::Dead if ours => Liveness::Dead,
            // A pid of another namespace says nothing about the process we see here.
            Liveness::Alive if pid_ns == 0 || ours => Liveness::Alive,
            Liveness::Dead | Liveness::Alive | Liveness::Unknown => Liveness::Unknown,
        }
    }

    /// What this /proc (and, for the live one, kill(2)) says about `pid`, assuming
    /// the pid is of our namespace.
    fn check(&self, pid: u32, start_ticks: u64, mask: u64) -> Liveness {
        if !possible_pid(pid) {
            return Liveness::Dead;
        }
        match self.stat(pid) {
            Ok(Some(stat)) if stat.state == 'Z' || stat.state == 'X' => Liveness::Dead,
            Ok(Some(stat)) if stat.start_ticks & mask != start_ticks & mask => Liveness::Dead,
            Ok(Some(_)) => Liveness::Alive,
            Ok(None) if !self.is_live() => Liveness::Dead,
            // /proc shows nothing, which hidepid also produces: ask the kernel.
            Ok(None) => match signal_zero(pid) {
                Err(libc::ESRCH) => Liveness::Dead,
                _ => Liveness::Unknown,
            },
            Err(_) => Liveness::Unknown,
        }
    }
}

/// PID_MAX_LIMIT on 64-bit Linux: no pid of any namespace is larger.
const PID_MAX_LIMIT: u32 = 1 << 22;

/// No namespace has pid 0 or pids beyond the kernel's limit: such a recorded pid is
/// certainly no process, in whatever namespace it was recorded.
fn possible_pid(pid: u32) -> bool {
    pid != 0 && pid <= PID_MAX_LIMIT
}

/// kill(pid, 0): whether a process with this pid exists in our pid namespace
/// (`Err(ESRCH)`: none), whatever /proc shows. Sends nothing.
fn signal_zero(pid: u32) -> Result<(), i32> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| libc::ESRCH)?;
    // SAFETY: signal 0 performs only the existence and permission checks; no signal
    // is delivered and no memory of ours is touched.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return Ok(());
    }
    Err(std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL))
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
        let ns = proc.pid_ns().expect("our own /proc shows our namespace");
        assert_eq!(
            proc.owner_liveness(pack_owner(me, start), ns),
            Liveness::Alive
        );
        assert_eq!(
            proc.owner_liveness(pack_owner(me, start), 0),
            Liveness::Alive
        );
        assert_eq!(proc.liveness(0, 0), Liveness::Dead);
        // Another start time: dead if recorded in our namespace, else undecidable.
        assert_eq!(proc.recorded_liveness(me, start + 1, ns), Liveness::Dead);
        assert_eq!(proc.recorded_liveness(me, start + 1, 0), Liveness::Unknown);
        assert_eq!(proc.recorded_liveness(me, start, ns + 1), Liveness::Unknown);
    }

    #[test]
    fn exited_child_is_dead() {
        let proc = ProcFs::default();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: the pid is gone (or reused with another start time).
        assert_eq!(proc.liveness(pid, 1), Liveness::Dead);
        let ns = proc.pid_ns().unwrap();
        assert_eq!(proc.recorded_liveness(pid, 1, ns), Liveness::Dead);
        assert_eq!(proc.recorded_liveness(pid, 1, 0), Liveness::Unknown);
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
        // Without a namespace link the fixture's namespace is unknown: recorded pids
        // are never judged dead.
        assert_eq!(proc.pid_ns(), None);
        assert_eq!(proc.recorded_liveness(79, 5, 4026531836), Liveness::Unknown);
        assert_eq!(proc.recorded_liveness(77, 98765, 0), Liveness::Alive);
        std::fs::create_dir_all(dir.join("self/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026531836]", dir.join("self/ns/pid")).unwrap();
        let proc = ProcFs::new(&dir);
        assert_eq!(proc.pid_ns(), Some(4026531836));
        assert_eq!(proc.recorded_liveness(79, 5, 4026531836), Liveness::Dead);
        assert_eq!(proc.recorded_liveness(78, 5, 4026531836), Liveness::Dead);
        assert_eq!(
            proc.recorded_liveness(77, 98764, 4026531836),
            Liveness::Dead
        );
        assert_eq!(
            proc.recorded_liveness(77, 98765, 4026531836),
            Liveness::Alive
        );
        // Recorded in another namespace: neither dead nor alive can be concluded.
        assert_eq!(proc.recorded_liveness(79, 5, 4026531999), Liveness::Unknown);
        assert_eq!(
            proc.recorded_liveness(77, 98765, 4026531999),
            Liveness::Unknown
        );
        assert_eq!(proc.recorded_liveness(79, 5, 0), Liveness::Unknown);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn namespace_links_parse() {
        assert_eq!(parse_pid_ns_link("pid:[4026531836]"), Some(4026531836));
        for bad in [
            "pid:[]",
            "pid:[0]",
            "net:[4026531836]",
            "pid:[99999999999]",
            "pid:4",
        ] {
            assert_eq!(parse_pid_ns_link(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn parse_stat_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_stat(&bytes);
        }
    }
}
