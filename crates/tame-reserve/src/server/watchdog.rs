//! The watchdog: a process forked by the server before anything runs real-time. It holds
//! the read end of a pipe whose only write end is in the server; the server tells it each
//! client thread it may raise. When the pipe reaches end-of-file the server is gone (exited,
//! crashed, SIGKILLed — the kernel closes the pipe in every case) and the watchdog returns
//! every client thread still at a real-time or idle policy to SCHED_OTHER, and one still at
//! the waiting nice (19) to nice 0, then exits.
//!
//! Messages are 4-byte native-endian i32: +tid watch, −tid forget, 0 clean shutdown (the
//! server restored everyone itself). Writes of 4 bytes to a pipe are atomic.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The most threads one watchdog tracks; the server refuses clients beyond it.
pub const MAX_WATCHED: usize = 1024;

pub struct Watchdog {
    pipe: OwnedFd,
    pid: libc::pid_t,
}

impl Watchdog {
    /// Fork the watchdog. Call it before the server makes threads or goes real-time:
    /// the child uses only async-signal-safe calls and fixed storage regardless.
    pub fn spawn() -> io::Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a writable array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both ends are fresh descriptors we own.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child only calls async-signal-safe functions (watch_loop) and _exits.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // SAFETY: closing our copy of the write end, so EOF means the server is gone.
                unsafe { libc::close(write_end.as_raw_fd()) };
                watch_loop(read_end.as_raw_fd())
            }
            pid => {
                drop(read_end);
                Ok(Self {
                    pipe: write_end,
                    pid,
                })
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    fn send(&self, value: i32) -> io::Result<()> {
        let bytes = value.to_ne_bytes();
        // SAFETY: writing 4 bytes from a valid buffer.
        let n = unsafe { libc::write(self.pipe.as_raw_fd(), bytes.as_ptr().cast(), 4) };
        if n == 4 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// From now on, reset `tid` if the server dies.
    pub fn watch(&self, tid: u32) -> io::Result<()> {
        self.send(tid as i32)
    }

    pub fn forget(&self, tid: u32) {
        let _ = self.send(-(tid as i32));
    }

    /// The server restored every client itself: let the watchdog go without resetting.
    pub fn shutdown(self) {
        let _ = self.send(0);
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// The child's whole life. No allocation, no locks: the parent may have had threads.
fn watch_loop(fd: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls only, on our own process and known descriptors.
    unsafe {
        // Terminal signals meant for the server must not take the watchdog with it.
        libc::setpgid(0, 0);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        // At the top priority it runs the moment the pipe closes, even beside a spinning
        // FIFO 98 client on every CPU. It blocks otherwise and costs nothing.
        let param = libc::sched_param { sched_priority: 99 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO | tame_rt::sched::RESET_ON_FORK, &param);
        let mut watched = [0i32; MAX_WATCHED];
        let mut count = 0usize;
        let mut buf = [0i32; 64];
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf));
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                // EOF (or a broken pipe): the server is gone.
                for &tid in &watched[..count] {
                    reset(tid);
                }
                libc::_exit(0);
            }
            for &value in &buf[..n as usize / 4] {
                if value == 0 {
                    libc::_exit(0);
                } else if value > 0 {
                    if count < MAX_WATCHED && !watched[..count].contains(&value) {
                        watched[count] = value;
                        count += 1;
                    }
                } else if let Some(i) = watched[..count].iter().position(|&t| t == -value) {
                    watched[i] = watched[count - 1];
                    count -= 1;
                }
            }
        }
    }
}

/// Return a thread to SCHED_OTHER at nice 0 unless it already is at SCHED_OTHER with
/// another nice than the waiting one (a thread id reused by an unrelated task is left alone).
unsafe fn reset(tid: i32) {
    // SAFETY: takes a plain thread id and passes no memory; a stale tid gives -1.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    if policy < 0 {
        return;
    }
    if policy & !tame_rt::sched::RESET_ON_FORK != libc::SCHED_OTHER {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a live sched_param for the whole call; the kernel only reads it.
        unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param) };
    }
    // getpriority can return -1 legitimately; 19 is all that matters here.
    // SAFETY: takes plain integers and passes no memory.
    if unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) } == 19 {
        // SAFETY: takes plain integers and passes no memory.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 0) };
    }
}
