//! The watchdog: a process forked by the server before anything runs real-time. It holds
//! the read end of a pipe whose only write end is in the server; the server sends it each
//! client thread — its identity and its policy and affinity from before — before the
//! thread is ever changed. When the pipe reaches end-of-file the server is gone (exited,
//! crashed, SIGKILLed — the kernel closes the pipe in every case) and the watchdog gives
//! every thread that is still the one admitted (same pid, tid and start time) its policy
//! and affinity back, removes the restore record, and exits.
//!
//! It runs in its own session, so a signal to the server's process group (a terminal's
//! ^C, `kill -KILL -PGID`) does not reach it, and ignores SIGINT, SIGHUP and SIGTERM. A
//! kill of the whole cgroup (systemd's final SIGKILL, `systemctl kill -s KILL`) takes it
//! too: that case is the restore record's (`tame serve --recover`, see `record.rs`).
//!
//! Messages are fixed-size packets on an `O_DIRECT` pipe (one write is one read). The
//! child allocates nothing and takes no lock — the parent may have had threads — and
//! its storage is allocated before the fork.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use tame_host::Root;
use tame_launch::spawn::fork::Fork;
use tame_rt::sched::{SchedSpec, ThreadSched};

use super::thread::Thread;

/// The most threads one watchdog tracks; the server refuses clients beyond it.
pub const MAX_WATCHED: usize = 1024;
/// The watchdog's SCHED_FIFO priority: the top, above every client (FIFO 98).
pub const PRIORITY: i32 = 99;
/// CPUs a message carries (as `cpu_set_t`); admission refuses affinities beyond.
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

const OP_WATCH: u32 = 1;
const OP_FORGET: u32 = 2;
const OP_SHUTDOWN: u32 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Message {
    op: u32,
    pid: u32,
    tid: u32,
    policy: i32,
    priority: i32,
    nice: i32,
    reset_on_fork: u32,
    _pad: u32,
    start_time: u64,
    affinity: [u64; MAX_CPUS / 64],
}

const EMPTY: Message = Message {
    op: 0,
    pid: 0,
    tid: 0,
    policy: 0,
    priority: 0,
    nice: 0,
    reset_on_fork: 0,
    _pad: 0,
    start_time: 0,
    affinity: [0; MAX_CPUS / 64],
};

impl Message {
    fn watch(t: &Thread) -> io::Result<Self> {
        let mut m = Message {
            op: OP_WATCH,
            pid: t.pid,
            tid: t.tid,
            policy: t.sched.policy,
            priority: t.sched.priority,
            nice: t.sched.nice,
            reset_on_fork: u32::from(t.sched.reset_on_fork),
            start_time: t.start_time,
            ..EMPTY
        };
        for cpu in t.affinity.iter() {
            let c = cpu as usize;
            if c >= MAX_CPUS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "thread {} may run on CPU {cpu}, but the watchdog can restore affinities only below CPU {MAX_CPUS} — pin the client to lower CPUs (taskset) before reserving",
                        t.tid
                    ),
                ));
            }
            m.affinity[c / 64] |= 1 << (c % 64);
        }
        Ok(m)
    }

    fn sched(&self) -> ThreadSched {
        ThreadSched {
            policy: self.policy,
            priority: self.priority,
            nice: self.nice,
            reset_on_fork: self.reset_on_fork != 0,
            ..ThreadSched::default()
        }
    }
}

pub struct Watchdog {
    pipe: OwnedFd,
    pid: libc::pid_t,
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} holds a NUL byte, which no file name can — pass another path",
                p.display()
            ),
        )
    })
}

impl Watchdog {
    /// Fork the watchdog. Call it before the server makes threads or goes real-time.
    /// `record` is removed after a restore, under the server's `lock` (so a server that
    /// started since, and holds the lock, keeps its own record).
    /// `root` says where procfs is (the watchdog reads thread start times there itself).
    pub fn spawn(root: &Root, record: &Path, lock: &Path) -> io::Result<Self> {
        let record = c_path(record)?;
        let lock = c_path(lock)?;
        let proc_dir = root.proc_dir();
        let proc_dir = proc_dir.as_os_str().as_bytes();
        if proc_dir.len() > PROC_DIR_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the procfs path {} is longer than the watchdog's {PROC_DIR_MAX} bytes — use a shorter --root",
                    root.proc_dir().display()
                ),
            ));
        }
        let mut proc = [0u8; PROC_DIR_MAX];
        proc[..proc_dir.len()].copy_from_slice(proc_dir);
        let proc = Proc {
            dir: proc,
            len: proc_dir.len(),
        };
        // Allocated here: the child must not allocate.
        let mut storage = vec![EMPTY; MAX_WATCHED].into_boxed_slice();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a writable array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_DIRECT) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both ends are fresh descriptors we own.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Room for a large client's messages without the server waiting (best effort).
        // SAFETY: fcntl on our own descriptor with an integer argument.
        unsafe { libc::fcntl(write_end.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        // The one fork-and-run door: a session of its own (signals to the server's process
        // group do not reach it) and the top FIFO priority, both checked before it runs; at
        // that priority it runs the moment the pipe closes, even beside a spinning FIFO 98
        // client on every CPU. It blocks otherwise and costs nothing.
        let read_fd = read_end.as_raw_fd();
        let place = Fork::new("the watchdog").new_session().policy(
            SchedSpec::static_priority(tame_rt::Policy::Fifo, PRIORITY),
            true,
        );
        // SAFETY: watch_loop keeps the door's rules: async-signal-safe calls only, on storage
        // allocated above and descriptors it inherited, and it ends with _exit.
        let forked =
            unsafe { place.run(|| watch_loop(read_fd, &mut storage, &proc, &record, &lock)) }
                .map_err(io::Error::other)?;
        drop(read_end);
        Ok(Self {
            pipe: write_end,
            pid: forked.pid,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    fn send(&self, m: &Message) -> io::Result<()> {
        let size = std::mem::size_of::<Message>();
        loop {
            // SAFETY: writing `size` bytes from a live Message.
            let n =
                unsafe { libc::write(self.pipe.as_raw_fd(), (m as *const Message).cast(), size) };
            if n == size as isize {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if n < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(if n < 0 {
                e
            } else {
                io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the watchdog took only part of a message (it is dying?) — restart tame serve",
                )
            });
        }
    }

    /// From now on, restore `t` if the server dies.
    pub fn watch(&self, t: &Thread) -> io::Result<()> {
        self.send(&Message::watch(t)?)
    }

    pub fn forget(&self, tid: u32) {
        let _ = self.send(&Message {
            op: OP_FORGET,
            tid,
            ..EMPTY
        });
    }

    /// The server restored every client itself: let the watchdog go without restoring.
    pub fn shutdown(&self) {
        let _ = self.send(&Message {
            op: OP_SHUTDOWN,
            ..EMPTY
        });
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }

    /// The watchdog is still there to restore clients.
    pub fn alive(&self) -> bool {
        let mut status = 0;
        // SAFETY: polling our own child without waiting.
        unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) == 0 }
    }
}

/// The child's whole life. No allocation, no locks: the parent may have had threads.
fn watch_loop(
    fd: libc::c_int,
    watched: &mut [Message],
    proc: &Proc,
    record: &CString,
    lock: &CString,
) -> ! {
    // SAFETY: async-signal-safe calls only, on our own process and known descriptors.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // Nothing of the server's but the pipe: no socket, no lock, no listener.
        close_all_but(fd);
    }
    let mut count = 0usize;
    let mut m = EMPTY;
    let size = std::mem::size_of::<Message>();
    loop {
        // SAFETY: reading at most one Message into a live, writable Message.
        let n = unsafe { libc::read(fd, (&mut m as *mut Message).cast(), size) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            // EOF (or a broken pipe): the server is gone.
            restore_all(&watched[..count], proc, record, lock);
            // SAFETY: ending the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        if n as usize != size {
            continue;
        }
        match m.op {
            // SAFETY: ending the child without running the parent's exit handlers.
            OP_SHUTDOWN => unsafe { libc::_exit(0) },
            OP_WATCH => {
                if let Some(i) = watched[..count].iter().position(|w| w.tid == m.tid) {
                    watched[i] = m;
                } else if count < watched.len() {
                    watched[count] = m;
                    count += 1;
                }
            }
            OP_FORGET => {
                if let Some(i) = watched[..count].iter().position(|w| w.tid == m.tid) {
                    watched[i] = watched[count - 1];
                    count -= 1;
                }
            }
            _ => {}
        }
    }
}

/// Close every descriptor from 3 up, except `keep`.
///
/// # Safety
/// Only for the freshly forked child: descriptors other code holds are closed.
unsafe fn close_all_but(keep: libc::c_int) {
    let close_range = |from: libc::c_uint, to: libc::c_uint| {
        // SAFETY: close_range takes plain integers; closing is what the caller asked for.
        unsafe { libc::syscall(libc::SYS_close_range, from, to, 0) == 0 }
    };
    let keep = keep as libc::c_uint;
    let done = (keep <= 3 || close_range(3, keep - 1)) && close_range(keep + 1, libc::c_uint::MAX);
    if !done {
        for fd in 3..4096 {
            if fd != keep as libc::c_int {
                // SAFETY: closing a descriptor number; a closed one gives EBADF.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Restore every watched thread that is still the one admitted; then, holding the
/// server's lock, remove the record when nothing was left undone. The dead server's lock
/// is released a moment after its pipe (both when its files are put away): wait for it a
/// little. A server started since holds it for good, and keeps its own record.
fn restore_all(watched: &[Message], proc: &Proc, record: &CString, lock: &CString) {
    let mut all_done = true;
    for m in watched {
        all_done &= restore_one(m, proc);
    }
    if !all_done {
        return;
    }
    // SAFETY: open on a path prepared before the fork.
    let lock_fd = unsafe {
        libc::open(
            lock.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if lock_fd < 0 {
        return;
    }
    for _ in 0..200 {
        // SAFETY: flock on our own descriptor.
        if unsafe { libc::flock(lock_fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            // SAFETY: unlink of a path prepared before the fork.
            unsafe { libc::unlink(record.as_ptr()) };
            break;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        // SAFETY: a live timespec; no remainder wanted.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
    // SAFETY: our own descriptor; closing it releases the lock.
    unsafe { libc::close(lock_fd) };
}

/// Restore one thread; true when it is restored or no longer the admitted one.
fn restore_one(m: &Message, proc: &Proc) -> bool {
    let mut buf = [0u8; 1024];
    if thread_start_time(proc, m.pid, m.tid, &mut buf) != Some(m.start_time) {
        return true;
    }
    let gone = |rc: io::Result<()>| match rc {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::ESRCH),
    };
    let sched_ok = gone(tame_rt::sched::set_thread_sched(
        m.tid as libc::pid_t,
        &m.sched(),
    ));
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for (word, bits) in m.affinity.iter().enumerate() {
        for bit in 0..64 {
            if bits & (1 << bit) != 0 {
                // SAFETY: word * 64 + bit < MAX_CPUS = CPU_SETSIZE: the bit lies in `set`.
                unsafe { libc::CPU_SET(word * 64 + bit, &mut set) };
            }
        }
    }
    // SAFETY: `set` is a live cpu_set_t of exactly the size passed.
    let rc = unsafe {
        libc::sched_setaffinity(
            m.tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    let affinity_ok = rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    sched_ok && affinity_ok
}

/// Where procfs is, for the child (no allocation there).
struct Proc {
    dir: [u8; PROC_DIR_MAX],
    len: usize,
}

const PROC_DIR_MAX: usize = 256;

/// The start time of thread `tid` of `pid` while it is a live thread of `pid`, read from
/// procfs's `PID/task/TID/stat` with stack buffers only (`buf` holds the file).
fn thread_start_time(proc: &Proc, pid: u32, tid: u32, buf: &mut [u8]) -> Option<u64> {
    let mut path = [0u8; PROC_DIR_MAX + 64];
    let mut at = 0;
    for part in [
        &proc.dir[..proc.len],
        b"/",
        digits(pid, &mut [0; 10]),
        b"/task/",
        digits(tid, &mut [0; 10]),
        b"/stat\0",
    ] {
        path[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    // SAFETY: path is NUL-terminated above.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reading into the unused tail of `buf`.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if n <= 0 {
            break;
        }
        len += n as usize;
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    parse_start_time(&buf[..len])
}

/// Field 22 of a stat line, counted after the command name's last `)`; None for a
/// zombie or dead task.
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty());
    let state = fields.next()?;
    if matches!(state.first(), Some(b'Z' | b'X')) {
        return None;
    }
    // The state was field 3; field 22 is 19 further on.
    let field = fields.nth(18)?;
    let mut value = 0u64;
    for &d in field {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(value)
}

/// The decimal digits of `n`, in `out`.
fn digits(mut n: u32, out: &mut [u8; 10]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::CpuList;

    fn proc_of(root: &Root) -> Proc {
        let dir = root.proc_dir();
        let bytes = dir.as_os_str().as_bytes();
        let mut p = Proc {
            dir: [0; PROC_DIR_MAX],
            len: bytes.len(),
        };
        p.dir[..bytes.len()].copy_from_slice(bytes);
        p
    }

    #[test]
    fn the_start_time_is_read_without_allocating_as_tame_host_reads_it() {
        let root = Root::system();
        let proc = proc_of(&root);
        let pid = std::process::id();
        // SAFETY: plain query.
        let tid = unsafe { libc::gettid() } as u32;
        let want = root.process(pid).task(tid).stat().unwrap().start_time;
        let mut buf = [0u8; 1024];
        assert_eq!(thread_start_time(&proc, pid, tid, &mut buf), Some(want));
        assert_eq!(thread_start_time(&proc, pid, 999_999_999, &mut buf), None);
        let line = b"12 (a) b)) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 20 21\n";
        assert_eq!(parse_start_time(line), Some(4242));
        assert_eq!(
            parse_start_time(b"12 (a) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242"),
            None
        );
        assert_eq!(parse_start_time(b"12 (a) R 1 2"), None);
        assert_eq!(digits(0, &mut [0; 10]), b"0");
        assert_eq!(digits(4_294_967_295, &mut [0; 10]), b"4294967295");
    }

    #[test]
    fn a_message_carries_the_whole_state_from_before() {
        let t = Thread {
            pid: 7,
            tid: 8,
            start_time: 99,
            sched: ThreadSched {
                policy: libc::SCHED_BATCH,
                priority: 0,
                nice: 3,
                reset_on_fork: true,
                dl_runtime_ns: 0,
                dl_deadline_ns: 0,
                dl_period_ns: 0,
            },
            affinity: CpuList::parse("0,5,64,1023").unwrap(),
        };
        let m = Message::watch(&t).unwrap();
        assert_eq!(m.sched(), t.sched);
        assert_eq!(m.affinity[0], 1 | 1 << 5);
        assert_eq!(m.affinity[1], 1);
        assert_eq!(m.affinity[15], 1 << 63);
        let far = Thread {
            affinity: CpuList::parse("1024").unwrap(),
            ..t
        };
        assert!(Message::watch(&far).is_err());
        assert!(std::mem::size_of::<Message>() <= libc::PIPE_BUF);
    }
}
