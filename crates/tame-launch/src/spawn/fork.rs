//! The fork-and-run door: a child that runs a function of tame's rather than a program.
//! Two children need it, because they must share memory or descriptors with the parent
//! that an exec would lose, and must exist before any thread of the parent does real-time
//! work: the cache competitor (`tame_bench::cache::competitor`, a shared page of atomics)
//! and the reservation server's watchdog (`tame_reserve::server::watchdog`, the read end
//! of the pipe whose only write end is in the server).
//!
//! The door places the child as [`super::Spawn`] does (dies with the parent, a session of
//! its own, CPU affinity, scheduling policy), every call checked and a refusal reported
//! back on a pipe: [`Fork::run`] returns only once the child is placed, or fails and
//! leaves no child behind.
//!
//! # The rules for the child's function
//!
//! The child is a copy of a process that may have had other threads; their locks (the
//! allocator's, stdio's, the environment's) may be held forever in the copy. So the
//! function, and everything it calls, must:
//! - make only async-signal-safe calls (signal-safety(7)): raw system calls, no
//!   allocation, no `println!`, no `std::env`, no mutex, no `Drop` that frees memory;
//! - use only memory and descriptors made before the fork;
//! - never return nor unwind: it ends with `libc::_exit` (it returns `Infallible`, a
//!   value no code can make, so only a diverging function fits).

use std::convert::Infallible;
use std::os::fd::AsRawFd;

use tame_host::CpuList;
use tame_rt::sched::{self, SchedSpec};

use super::child::{Step, Steps, REPORT_LEN};
use super::{pipe, step_error};
use crate::error::{io_failed, LaunchError};

/// A child to fork that runs a function; see the module doc for its rules.
#[derive(Clone, Debug)]
pub struct Fork {
    what: String,
    steps: Steps,
}

/// A forked, placed child; the caller waits for it (waitpid) — it is not reaped here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forked {
    pub pid: libc::pid_t,
}

impl Fork {
    /// `what` names the child in errors ("cannot start {what}: …").
    pub fn new(what: impl Into<String>) -> Self {
        Fork {
            what: what.into(),
            steps: Steps::default(),
        }
    }

    /// The kernel sends it `signal` when the thread that forked it ends.
    pub fn die_with_parent(mut self, signal: libc::c_int) -> Self {
        // SAFETY: getpid has no preconditions.
        self.steps.die_with_parent = Some((signal, unsafe { libc::getpid() }));
        self
    }

    /// A session (and process group) of its own: signals to ours do not reach it.
    pub fn new_session(mut self) -> Self {
        self.steps.new_session = true;
        self
    }

    pub fn cpus(mut self, cpus: &CpuList) -> Self {
        self.steps.cpus = Some(sched::cpu_set(cpus.iter()));
        self
    }

    pub fn policy(mut self, spec: SchedSpec, reset_on_fork: bool) -> Self {
        self.steps.policy = Some((spec, reset_on_fork));
        self
    }

    /// Fork; in the child take the steps, then run `child`. Returns once the child is
    /// placed; a refused step is the error, and that child has already exited (reaped).
    ///
    /// # Safety
    /// `child` runs in the forked copy and must keep the rules of the module doc.
    pub unsafe fn run<F: FnOnce() -> Infallible>(self, child: F) -> Result<Forked, LaunchError> {
        let (read, write) = pipe()?;
        // SAFETY: the caller's contract for `child`; the steps are async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io_failed(
                format!("cannot fork {}", self.what),
                std::io::Error::last_os_error(),
            ));
        }
        if pid == 0 {
            // SAFETY: in the fresh child: the steps, then the caller's function.
            unsafe {
                libc::close(read.as_raw_fd());
                if self.steps.take(write.as_raw_fd()).is_err() {
                    libc::_exit(127);
                }
                // Placed: say so (a whole record, so a copy of the write end that another
                // fork holds cannot keep the parent waiting for EOF).
                let ok = [0u8; REPORT_LEN];
                libc::write(write.as_raw_fd(), ok.as_ptr().cast(), ok.len());
                libc::close(write.as_raw_fd());
            }
            // `child` cannot return: its Infallible is the proof.
            #[allow(unreachable_code)]
            match child() {}
        }
        drop(write);
        match read_report(&read, pid) {
            Ok(()) => Ok(Forked { pid }),
            Err(refused) => {
                let mut status = 0;
                // SAFETY: reaping our own child, which exited after reporting.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                Err(match refused {
                    Some((step, errno)) => step_error(&self.what, step, errno),
                    None => io_failed(
                        format!("cannot start {}", self.what),
                        std::io::Error::other("the child exited before it was placed"),
                    ),
                })
            }
        }
    }
}

/// The child's report: Ok once placed, the refused step, or `None` when it died silent.
fn read_report(read: &std::os::fd::OwnedFd, pid: libc::pid_t) -> Result<(), Option<(Step, i32)>> {
    let mut bytes = [0u8; REPORT_LEN];
    if !super::read_while(read, &mut bytes, || !exited(pid)) {
        return Err(None);
    }
    match super::child::decode(bytes) {
        Some(refused) => Err(Some(refused)),
        None => Ok(()),
    }
}

/// Whether our child `pid` has died (killed before it could say a word); left unreaped.
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: an all-zero siginfo_t is valid; WNOWAIT leaves the child unreaped.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with a live, writable siginfo_t.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after waitid filled (or zeroed) the struct.
    r == 0 && unsafe { info.si_pid() } == pid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_function_runs_placed_and_a_refused_step_fails_the_fork() {
        let (read, write) = pipe().unwrap();
        let wfd = write.as_raw_fd();
        let cpus = CpuList::parse("0").unwrap();
        // SAFETY: the child only calls sched_getcpu, write and _exit.
        let forked = unsafe {
            Fork::new("the test child")
                .cpus(&cpus)
                .die_with_parent(libc::SIGKILL)
                .run(move || {
                    let cpu = libc::sched_getcpu();
                    let b = [cpu as u8];
                    libc::write(wfd, b.as_ptr().cast(), 1);
                    libc::_exit(0)
                })
        }
        .unwrap();
        drop(write);
        let mut status = 0;
        // SAFETY: reaping our own child.
        let reaped = unsafe { libc::waitpid(forked.pid, &mut status, 0) };
        assert_eq!(reaped, forked.pid);
        let mut b = [9u8];
        // SAFETY: reading one byte into a live buffer.
        let n = unsafe { libc::read(read.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        assert_eq!(n, 1);
        assert_eq!(b[0], 0, "ran on CPU 0");
        // No such CPU: the affinity is refused, no child runs the function.
        // SAFETY: as above; the function must never run.
        let err = unsafe {
            Fork::new("the test child")
                .cpus(&CpuList::parse("1000").unwrap())
                .run(|| libc::_exit(3))
        }
        .unwrap_err();
        assert!(!err.is_bad_input(), "{err}");
        assert!(
            err.to_string()
                .starts_with("cannot start the test child: sched_setaffinity"),
            "{err}"
        );
    }
}
