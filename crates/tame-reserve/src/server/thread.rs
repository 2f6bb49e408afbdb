//! The threads and processes the server changes, named so that a reused id is never
//! touched: a thread by (pid, tid, its start time) — `/proc/PID/task/TID` exists only
//! while TID is a thread of PID, and a new thread that got the same id has another start
//! time — and a process by a pidfd opened at admission. Every change looks first and
//! drops a thread that is no longer the one admitted.
//!
//! The scheduler threads look through a descriptor per thread (pidfd_open with
//! PIDFD_THREAD) that fires when it exits, drained before each switch, and in `/proc`
//! only where there is none. What remains is the gap between looking and the system
//! call (at most one switch, a millisecond for 1024 threads): the id would have to be
//! freed and handed out again within it, which takes the kernel's pid counter going
//! round all of `pid_max` ids.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use serde::{Deserialize, Serialize};
use tame_host::{CpuList, Root};
use tame_rt::sched::ThreadSched;

/// A client thread as admitted, with its state from before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    /// Clock ticks after boot (`/proc/PID/task/TID/stat` field 22).
    pub start_time: u64,
    pub sched: ThreadSched,
    pub affinity: CpuList,
}

/// Why a thread was not changed.
#[derive(Debug)]
pub enum SetError {
    /// It exited, or its id now names another thread: drop it.
    Gone,
    Failed(io::Error),
}

impl SetError {
    pub fn from_io(e: io::Error) -> Self {
        if e.raw_os_error() == Some(libc::ESRCH) {
            SetError::Gone
        } else {
            SetError::Failed(e)
        }
    }
}

/// A thread's start time, while it is a live thread of `pid`.
pub fn start_time(root: &Root, pid: u32, tid: u32) -> Option<u64> {
    root.process(pid)
        .task(tid)
        .stat()
        .ok()
        .filter(|s| !matches!(s.state, 'Z' | 'X'))
        .map(|s| s.start_time)
}

impl Thread {
    /// Capture thread `tid` of `pid` as it is now; None when it is gone.
    pub fn capture(root: &Root, pid: u32, tid: u32) -> io::Result<Option<Self>> {
        let Some(start_time) = start_time(root, pid, tid) else {
            return Ok(None);
        };
        let state = root
            .thread_sched(tid)
            .and_then(|s| root.affinity(tid).map(|a| (s, a)));
        let (sched, affinity) = match state {
            Ok(s) => s,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        // Still the same thread: the state read belongs to it.
        if start_time != self::start_time(root, pid, tid).unwrap_or(u64::MAX) {
            return Ok(None);
        }
        Ok(Some(Self {
            pid,
            tid,
            start_time,
            sched,
            affinity,
        }))
    }

    /// The admitted thread is still there (not exited, its id not reused).
    pub fn is_same(&self, root: &Root) -> bool {
        start_time(root, self.pid, self.tid) == Some(self.start_time)
    }

    pub fn set_sched(&self, root: &Root, s: &ThreadSched) -> Result<(), SetError> {
        if !self.is_same(root) {
            return Err(SetError::Gone);
        }
        root.set_thread_sched(self.tid, s)
            .map_err(SetError::from_io)
    }

    pub fn set_affinity(&self, root: &Root, cpus: &CpuList) -> Result<(), SetError> {
        if !self.is_same(root) {
            return Err(SetError::Gone);
        }
        root.set_affinity(self.tid, cpus).map_err(SetError::from_io)
    }

    /// Give the thread its state from before: policy first (so it never runs at the
    /// raised priority on CPUs outside its slice's), then affinity.
    pub fn restore(&self, root: &Root) -> Result<(), SetError> {
        self.set_sched(root, &self.sched)?;
        self.set_affinity(root, &self.affinity)
    }
}

/// A client process: its pid, start time and (on the real system) a pidfd, which says
/// the process exited even when its pid has been reused since.
#[derive(Debug)]
pub struct Process {
    pub pid: u32,
    pub start_time: u64,
    pidfd: Option<OwnedFd>,
}

impl Process {
    /// Open process `pid` admitted with `start_time`; None when it is no longer that process.
    pub fn open(root: &Root, pid: u32, start_time: u64) -> Option<Self> {
        // A fixture root has no process to watch: liveness then comes from /proc alone.
        let pidfd = root.pidfd(pid).ok();
        // Opened after the start time was read: check the descriptor names that process.
        let stat = root.process(pid).stat().ok()?;
        (stat.start_time == start_time && !matches!(stat.state, 'Z' | 'X')).then_some(Self {
            pid,
            start_time,
            pidfd,
        })
    }

    /// The admitted process has not exited.
    pub fn alive(&self, root: &Root) -> bool {
        if let Some(fd) = &self.pidfd {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, no waiting.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            if n == 0 {
                return true;
            }
            if n > 0 {
                // Readable: the process exited.
                return false;
            }
        }
        root.process(self.pid)
            .stat()
            .is_ok_and(|st| !matches!(st.state, 'Z' | 'X') && st.start_time == self.start_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tame_testing::fixture::FixtureBackend;

    fn stat_line(tid: u32, start: u64) -> String {
        // Fields 3…22: state S, then zeros, start time last.
        let mut f = vec!["S".to_string()];
        f.extend((4..22).map(|_| "0".to_string()));
        f.push(start.to_string());
        f.extend((23..=52).map(|_| "0".to_string()));
        format!("{tid} (client) {}\n", f.join(" "))
    }

    fn write_thread(base: &std::path::Path, pid: u32, tid: u32, start: u64) {
        let dir = base.join(format!("proc/{pid}/task/{tid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), stat_line(tid, start)).unwrap();
        std::fs::write(base.join(format!("proc/{pid}/stat")), stat_line(pid, 100)).unwrap();
    }

    fn raised() -> ThreadSched {
        ThreadSched {
            policy: libc::SCHED_FIFO,
            priority: 98,
            nice: 0,
            reset_on_fork: true,
            ..ThreadSched::default()
        }
    }

    #[test]
    fn a_reused_thread_id_is_never_changed() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(FixtureBackend::new());
        let root = backend.root(dir.path());
        write_thread(dir.path(), 10, 10, 100);
        write_thread(dir.path(), 10, 11, 150);
        backend.add_thread(10, CpuList::parse("0-3").unwrap());
        backend.add_thread(11, CpuList::parse("0-3").unwrap());
        let t = Thread::capture(&root, 10, 11).unwrap().unwrap();
        assert_eq!(t.start_time, 150);
        assert_eq!(t.affinity.to_string(), "0-3");
        t.set_sched(&root, &raised()).unwrap();
        t.set_affinity(&root, &CpuList::parse("1").unwrap())
            .unwrap();
        assert_eq!(backend.thread(11).unwrap().sched, raised());
        t.restore(&root).unwrap();
        assert_eq!(backend.thread(11).unwrap().sched, ThreadSched::default());
        assert_eq!(backend.thread(11).unwrap().affinity.to_string(), "0-3");

        // Thread 11 exits and its id goes to a new thread of the same process.
        write_thread(dir.path(), 10, 11, 900);
        assert!(!t.is_same(&root));
        assert!(matches!(t.set_sched(&root, &raised()), Err(SetError::Gone)));
        assert!(matches!(t.restore(&root), Err(SetError::Gone)));
        assert_eq!(backend.thread(11).unwrap().sched, ThreadSched::default());

        // … or to another process: /proc/10/task/11 is no more.
        std::fs::remove_dir_all(dir.path().join("proc/10/task/11")).unwrap();
        write_thread(dir.path(), 11, 11, 150);
        assert!(!t.is_same(&root));
        assert!(matches!(t.set_sched(&root, &raised()), Err(SetError::Gone)));
        assert_eq!(backend.thread(11).unwrap().sched, ThreadSched::default());
        assert!(Thread::capture(&root, 10, 11).unwrap().is_none());
    }

    #[test]
    fn a_process_is_alive_while_it_is_the_one_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(FixtureBackend::new()).root(dir.path());
        write_thread(dir.path(), 10, 10, 100);
        let p = Process::open(&root, 10, 100).unwrap();
        assert!(p.alive(&root));
        assert!(Process::open(&root, 10, 99).is_none(), "another start time");
        // The pid now names another process.
        std::fs::write(dir.path().join("proc/10/stat"), stat_line(10, 500)).unwrap();
        assert!(!p.alive(&root));
    }

    #[test]
    fn a_pidfd_tells_an_exited_process() {
        let root = Root::system();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = root.process(pid).stat().unwrap().start_time;
        let p = Process::open(&root, pid, start).unwrap();
        assert!(p.pidfd.is_some(), "pidfd_open (Linux ≥ 5.3)");
        assert!(p.alive(&root));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!p.alive(&root));
    }
}
