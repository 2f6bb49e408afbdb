//! The cache-thrashing competitor: a child process pinned to another CPU that writes one
//! word per cache line through a buffer of at least twice the last-level cache, over and
//! over, while told to run; paused, it sleeps.
//!
//! A process rather than a thread: with -p on cgroup v2 the whole tame process joins the
//! partition with its measuring thread, and a thread of it could no longer stay on a CPU
//! outside. The child is forked before any measuring thread exists and stays in tame's
//! cgroup (the system partition). The two sides talk through a shared page of atomics, so
//! the measuring thread starts and stops it without a system call.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tame_host::CpuList;
use tame_launch::spawn::fork::Fork;

const PAUSE: u32 = 1;
const RUN: u32 = 2;
const EXIT: u32 = 3;
/// Lines written between looks at the command word.
const CHUNK_LINES: usize = 4096;

/// The shared page.
#[repr(C)]
struct Control {
    /// What the parent wants: PAUSE, RUN or EXIT.
    command: AtomicU32,
    /// What the child is doing (0 until it is ready).
    state: AtomicU32,
    /// Cache lines written so far.
    lines: AtomicU64,
    /// An errno the child failed with before it was ready.
    error: AtomicI32,
}

/// A running competitor; dropping it ends and reaps the child.
pub struct Competitor {
    pid: libc::pid_t,
    control: *mut Control,
    /// Lines in the buffer: one pass over it writes this many.
    pub buffer_lines: u64,
}

// SAFETY: the control page is shared memory accessed only through atomics.
unsafe impl Send for Competitor {}
// SAFETY: as for Send: every access to the page is atomic.
unsafe impl Sync for Competitor {}

impl Competitor {
    /// Fork the competitor onto `cpu` with a buffer of `bytes`, and wait until it is pinned,
    /// has its buffer and is paused.
    pub fn start(cpu: u32, bytes: u64) -> Result<Competitor, String> {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "the competitor could not start on CPU {cpu}: beyond the kernel's CPU mask"
            ));
        }
        // SAFETY: a fresh shared anonymous page; checked.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(format!(
                "cannot map the competitor's control page: {}",
                io::Error::last_os_error()
            ));
        }
        let control = page.cast::<Control>();
        // SAFETY: the page is zeroed by the kernel, which is a valid Control; set PAUSE.
        unsafe { (*control).command.store(PAUSE, Ordering::Release) };
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // Pinned (checked) and bound to die with us by the one door before `child` runs.
        let place = Fork::new(format!("the competitor on CPU {cpu}"))
            .die_with_parent(libc::SIGKILL)
            .cpus(&CpuList::from_cpus([cpu]));
        // SAFETY: `child` keeps the fork door's rules: async-signal-safe calls on the
        // inherited shared page and its own mapping only, and it ends with _exit.
        let started = unsafe { place.run(|| child(control, parent, bytes as usize)) };
        let pid = match started {
            Ok(forked) => forked.pid,
            Err(e) => {
                // SAFETY: our own page; no child uses it.
                unsafe { libc::munmap(page, 4096) };
                // The kernel's refusal as before: "could not start on CPU N: <errno>".
                let os = std::iter::successors(std::error::Error::source(&e), |s| s.source())
                    .find_map(|s| s.downcast_ref::<io::Error>())
                    .and_then(io::Error::raw_os_error);
                return Err(match os {
                    Some(errno) => format!(
                        "the competitor could not start on CPU {cpu}: {}",
                        io::Error::from_raw_os_error(errno)
                    ),
                    None => format!("cannot fork the competitor: {e}"),
                });
            }
        };
        let competitor = Competitor {
            pid,
            control,
            buffer_lines: bytes / 64,
        };
        competitor.wait_ready(cpu)?;
        Ok(competitor)
    }

    fn control(&self) -> &Control {
        // SAFETY: mapped until drop.
        unsafe { &*self.control }
    }

    fn wait_ready(&self, cpu: u32) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let refused = |errno: i32| {
            format!(
                "the competitor could not start on CPU {cpu}: {}",
                io::Error::from_raw_os_error(errno)
            )
        };
        loop {
            let errno = self.control().error.load(Ordering::Acquire);
            if errno != 0 {
                return Err(refused(errno));
            }
            if self.control().state.load(Ordering::Acquire) == PAUSE {
                return Ok(());
            }
            let mut status = 0;
            // SAFETY: our own child.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                // It may have stored its errno and exited since the check above.
                let errno = self.control().error.load(Ordering::Acquire);
                if errno != 0 {
                    return Err(refused(errno));
                }
                return Err(format!(
                    "the competitor on CPU {cpu} exited before it was ready"
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the competitor on CPU {cpu} was not ready within 30 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Tell it to write and return at once (no system call).
    #[inline]
    pub fn run(&self) {
        self.control().command.store(RUN, Ordering::Release);
    }

    /// Tell it to pause (no system call).
    #[inline]
    pub fn pause(&self) {
        self.control().command.store(PAUSE, Ordering::Release);
    }

    /// Whether it is doing what it was last told.
    #[inline]
    pub fn state(&self) -> u32 {
        self.control().state.load(Ordering::Acquire)
    }

    /// Whether it is paused.
    #[inline]
    pub fn is_paused(&self) -> bool {
        self.state() == PAUSE
    }

    /// Cache lines written so far.
    #[inline]
    pub fn lines(&self) -> u64 {
        self.control().lines.load(Ordering::Relaxed)
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        self.control().command.store(EXIT, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut status = 0;
        loop {
            // SAFETY: our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if r == self.pid || r < 0 {
                break;
            }
            if Instant::now() > deadline {
                // SAFETY: our own child, not yet reaped.
                unsafe {
                    libc::kill(self.pid, libc::SIGKILL);
                    libc::waitpid(self.pid, &mut status, 0);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: the page we mapped; the child is gone.
        unsafe { libc::munmap(self.control.cast(), 4096) };
    }
}

/// The child, pinned by the fork door: map and touch the buffer, then obey the command word
/// until EXIT (the parent-death signal ends it with the parent). Only async-signal-safe
/// calls (the parent may have threads).
unsafe fn child(control: *mut Control, parent: libc::pid_t, bytes: usize) -> ! {
    // SAFETY: the control page is shared and valid; the buffer is ours; only
    // async-signal-safe libc calls.
    unsafe {
        let c = &*control;
        let fail = |c: &Control| -> ! {
            c.error.store(*libc::__errno_location(), Ordering::Release);
            libc::_exit(1)
        };
        let buf = libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if buf == libc::MAP_FAILED {
            fail(c);
        }
        let words = buf.cast::<u64>();
        let lines = bytes / 64;
        for i in 0..lines {
            words.add(i * 8).write_volatile(i as u64);
        }
        c.state.store(PAUSE, Ordering::Release);
        let mut at = 0usize;
        let mut value = 0u64;
        let nap = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000,
        };
        loop {
            match c.command.load(Ordering::Acquire) {
                RUN => {
                    c.state.store(RUN, Ordering::Release);
                    value = value.wrapping_add(1);
                    for _ in 0..CHUNK_LINES {
                        words.add(at * 8).write_volatile(value);
                        at += 1;
                        if at == lines {
                            at = 0;
                        }
                    }
                    c.lines.fetch_add(CHUNK_LINES as u64, Ordering::Relaxed);
                }
                PAUSE => {
                    c.state.store(PAUSE, Ordering::Release);
                    libc::nanosleep(&nap, std::ptr::null_mut());
                    if libc::getppid() != parent {
                        libc::_exit(0);
                    }
                }
                _ => libc::_exit(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_competitor_writes_only_while_told_and_is_reaped() {
        let c = Competitor::start(0, 8 << 20).unwrap();
        assert!(c.is_paused());
        let before = c.lines();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.lines(), before, "paused: no writes");
        c.run();
        assert!(tame_testing::poll::until(Duration::from_secs(10), || c
            .lines()
            >= before + c.buffer_lines));
        c.pause();
        assert!(tame_testing::poll::until(Duration::from_secs(5), || c.is_paused()));
        let pid = c.pid;
        drop(c);
        // Reaped: the pid is no child of ours any more.
        // SAFETY: probing a pid; no status is written.
        let waited = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(waited, -1);
    }

    #[test]
    fn a_cpu_it_cannot_run_on_is_reported() {
        let e = Competitor::start(1000, 1 << 20)
            .err()
            .expect("CPU 1000 is refused");
        assert!(e.contains("could not start on CPU 1000"), "{e}");
    }
}
