//! What a child does to itself between fork and exec (or before its function runs),
//! every call checked. Everything is built in the parent first; the child then makes only
//! async-signal-safe system calls on that pre-built data: it may be the copy of a
//! multi-threaded process, whose locks (the allocator's among them) another thread held at
//! the fork. A refused step is written to the report pipe as (step, errno), so the parent
//! can say which call failed and why.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::RawFd;

use tame_rt::sched::{self, CpuSet, SchedSpec};

/// One checked call of the child, as the parent names it in an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Step {
    /// prctl(PR_SET_PDEATHSIG), and the check that the parent had not died before it.
    DieWithParent = 1,
    /// setsid().
    NewSession = 2,
    /// Joining the cgroup (a write of "0" to its task file).
    Cgroup = 3,
    /// sched_setaffinity().
    Affinity = 4,
    /// setrlimit(RLIMIT_RTTIME).
    RtTimeLimit = 5,
    /// sched_setscheduler() / sched_setattr().
    Policy = 6,
}

impl Step {
    fn from_raw(raw: u32) -> Option<Step> {
        [
            Step::DieWithParent,
            Step::NewSession,
            Step::Cgroup,
            Step::Affinity,
            Step::RtTimeLimit,
            Step::Policy,
        ]
        .into_iter()
        .find(|s| *s as u32 == raw)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::DieWithParent => "prctl(PR_SET_PDEATHSIG) (die with the parent)",
            Step::NewSession => "setsid (a session of its own)",
            Step::Cgroup => "joining the cgroup",
            Step::Affinity => "sched_setaffinity (CPU affinity)",
            Step::RtTimeLimit => "setrlimit(RLIMIT_RTTIME)",
            Step::Policy => "setting the scheduling policy",
        })
    }
}

/// A refused step as the child reports it: 8 bytes, the step then the errno.
pub(crate) const REPORT_LEN: usize = 8;

pub(crate) fn decode(bytes: [u8; REPORT_LEN]) -> Option<(Step, i32)> {
    let step = u32::from_ne_bytes(bytes[..4].try_into().ok()?);
    let errno = i32::from_ne_bytes(bytes[4..].try_into().ok()?);
    Some((Step::from_raw(step)?, errno))
}

/// The steps, in the order the child takes them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Steps {
    /// The signal, and the parent's pid to check it is still the parent after the prctl.
    pub die_with_parent: Option<(libc::c_int, libc::pid_t)>,
    pub new_session: bool,
    pub cgroup_procs: Option<CString>,
    pub cpus: Option<CpuSet>,
    pub rttime_us: Option<u64>,
    pub policy: Option<(SchedSpec, bool)>,
}

impl Steps {
    /// Take every step; on a refusal, report it on `report` and return the errno.
    ///
    /// # Safety
    /// Only in a freshly forked child, before exec or the child's function: it changes
    /// the calling process, and `report` must be the write end of the report pipe.
    pub(crate) unsafe fn take(&self, report: RawFd) -> Result<(), i32> {
        // SAFETY: the caller's contract; each call below is async-signal-safe.
        unsafe {
            let refuse = |step: Step, errno: i32| {
                let mut bytes = [0u8; REPORT_LEN];
                bytes[..4].copy_from_slice(&(step as u32).to_ne_bytes());
                bytes[4..].copy_from_slice(&errno.to_ne_bytes());
                // A pipe write of 8 bytes is atomic; if it fails the parent still sees
                // the errno from the spawn itself, without the step.
                libc::write(report, bytes.as_ptr().cast(), bytes.len());
                Err(errno)
            };
            let errno = || {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL)
            };
            if let Some((signal, parent)) = self.die_with_parent {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) != 0 {
                    return refuse(Step::DieWithParent, errno());
                }
                // The parent died before the prctl: the signal will never come.
                if libc::getppid() != parent {
                    return refuse(Step::DieWithParent, libc::ESRCH);
                }
            }
            if self.new_session && libc::setsid() < 0 {
                return refuse(Step::NewSession, errno());
            }
            if let Some(path) = &self.cgroup_procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return refuse(Step::Cgroup, errno());
                }
                // "0" attaches the writing task itself.
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = errno();
                libc::close(fd);
                if n != 1 {
                    return refuse(Step::Cgroup, e);
                }
            }
            if let Some(set) = &self.cpus {
                if libc::sched_setaffinity(0, set.size_bytes(), set.as_ptr()) != 0 {
                    return refuse(Step::Affinity, errno());
                }
            }
            if let Some(us) = self.rttime_us {
                let limit = libc::rlimit {
                    rlim_cur: us,
                    rlim_max: us,
                };
                if libc::setrlimit(libc::RLIMIT_RTTIME, &limit) != 0 {
                    return refuse(Step::RtTimeLimit, errno());
                }
            }
            if let Some((spec, reset)) = &self.policy {
                let e = sched::apply_raw(0, spec, *reset);
                if e != 0 {
                    return refuse(Step::Policy, e);
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_the_step_and_its_errno() {
        let mut bytes = [0u8; REPORT_LEN];
        bytes[..4].copy_from_slice(&(Step::Affinity as u32).to_ne_bytes());
        bytes[4..].copy_from_slice(&libc::EINVAL.to_ne_bytes());
        assert_eq!(decode(bytes), Some((Step::Affinity, libc::EINVAL)));
        assert_eq!(decode([0; REPORT_LEN]), None);
    }
}
