//! The deadline backend: SCHED_DEADLINE with runtime = share × period, deadline = period,
//! reset-on-fork (children start as SCHED_OTHER). The kernel does the admission; its
//! refusals are translated into what they mean here.

use serde::{Deserialize, Serialize};
use tame_host::Root;
use tame_rt::sched::{self, Policy, SchedSpec, ThreadSched};

use crate::bandwidth::{deadline_threads, exhausted_message, free_deadline_ppm, Limits};
use crate::error::{invalid, io_failed, refused, Result};
use crate::spec::Request;

const SCHED_DEADLINE: i32 = 6;

/// The spec a reservation applies.
pub fn spec(req: &Request) -> SchedSpec {
    SchedSpec {
        policy: Policy::Deadline,
        priority: 0,
        dl_runtime_ns: req.runtime_ns(),
        dl_deadline_ns: req.period_ns,
        dl_period_ns: req.period_ns,
    }
}

/// Why `--cpu` does not combine with this backend.
pub fn pinning_refusal(cpu: u32) -> String {
    format!(
        "--cpu {cpu} with the deadline backend: the kernel refuses SCHED_DEADLINE (EPERM) for a thread whose CPU affinity is a strict subset of its root domain — reserve on any CPU (leave out --cpu), place the program in an exclusive tame partition first (tame apply; tame run -p …), or use --backend server, which pins"
    )
}

/// What was applied, per thread, with what it replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub pid: u32,
    pub threads: Vec<(u32, ThreadSched)>,
}

/// Reserve for every thread of `pid`. Checks our view of free bandwidth first, so a refusal
/// names numbers; on any failure the threads already changed get their old attributes back.
pub fn reserve_pid(root: &Root, pid: u32, req: &Request) -> Result<Applied> {
    if let Some(cpu) = req.cpu {
        return Err(invalid(pinning_refusal(cpu)));
    }
    let info = tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))?;
    let limits = Limits::read(root)?;
    let existing: Vec<_> = deadline_threads(root)
        .into_iter()
        .filter(|t| t.pid != pid)
        .collect();
    let asked = req.share_ppm * info.tids.len() as u64;
    if asked > free_deadline_ppm(&limits, &existing) {
        return Err(refused(exhausted_message(asked, &limits, &existing)));
    }
    let spec = spec(req);
    let mut applied = Applied {
        pid,
        threads: Vec::new(),
    };
    for &tid in &info.tids {
        let before = match sched::get_thread_sched(tid as libc::pid_t) {
            Ok(b) => b,
            // The thread ended since we listed it: nothing to reserve for it.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) => {
                undo(&applied);
                return Err(io_failed(format!("cannot read thread {tid}'s policy"), e));
            }
        };
        match sched::apply_raw(tid as libc::pid_t, &spec, true) {
            0 => applied.threads.push((tid, before)),
            libc::ESRCH => continue,
            errno => {
                undo(&applied);
                return Err(translate(errno, tid, req, &limits, &existing));
            }
        }
    }
    if applied.threads.is_empty() {
        return Err(invalid(format!(
            "process {pid} has no threads left — it exited"
        )));
    }
    Ok(applied)
}

/// Put back what `reserve_pid` replaced (best effort: threads may have exited).
pub fn undo(applied: &Applied) {
    for (tid, before) in &applied.threads {
        let _ = sched::set_thread_sched(*tid as libc::pid_t, before);
    }
}

fn translate(
    errno: i32,
    tid: u32,
    req: &Request,
    limits: &Limits,
    existing: &[crate::bandwidth::DeadlineThread],
) -> crate::ReserveError {
    match errno {
        libc::EBUSY => refused(exhausted_message(req.share_ppm, limits, existing)),
        libc::EPERM => {
            let affinity = sched::get_affinity(tid as libc::pid_t).unwrap_or_default();
            if !affinity.is_empty() && affinity.len() < limits.online.len() {
                invalid(format!(
                    "SCHED_DEADLINE refused for thread {tid}: its affinity (CPUs {}) is a strict subset of its root domain — unpin it (taskset -p -c {} {tid}) or place it in an exclusive tame partition, or use --backend server",
                    crate::spec::join(&affinity),
                    crate::spec::join(&limits.online)
                ))
            } else {
                invalid(format!(
                    "SCHED_DEADLINE refused for thread {tid}: permission denied — run as root (or with CAP_SYS_NICE) and check the process is yours"
                ))
            }
        }
        libc::EINVAL => invalid(format!(
            "SCHED_DEADLINE refused {} ns of {} ns for thread {tid} as invalid — the kernel's limits (sched_deadline_period_min_us/max_us) exclude this period",
            req.runtime_ns(),
            req.period_ns
        )),
        e => io_failed(
            format!("cannot set SCHED_DEADLINE on thread {tid}"),
            std::io::Error::from_raw_os_error(e),
        ),
    }
}

/// Return every SCHED_DEADLINE thread of `pid` to SCHED_OTHER; how many were changed.
pub fn release_pid(root: &Root, pid: u32) -> Result<usize> {
    let info = tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))?;
    let mut released = 0;
    for tid in info.tids {
        let Ok(now) = sched::get_thread_sched(tid as libc::pid_t) else {
            continue;
        };
        if now.policy == SCHED_DEADLINE {
            match sched::apply_raw(tid as libc::pid_t, &SchedSpec::other(), false) {
                0 | libc::ESRCH => released += 1,
                e => {
                    return Err(io_failed(
                        format!("cannot return thread {tid} to SCHED_OTHER"),
                        std::io::Error::from_raw_os_error(e),
                    ))
                }
            }
        }
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Backend;

    #[test]
    fn spec_is_share_times_period_with_implicit_deadline() {
        let req = Request {
            share_ppm: 250_000,
            period_ns: 40_000_000,
            cpu: None,
            backend: Backend::Deadline,
        };
        let s = spec(&req);
        assert_eq!(
            (s.dl_runtime_ns, s.dl_deadline_ns, s.dl_period_ns),
            (10_000_000, 40_000_000, 40_000_000)
        );
        assert!(pinning_refusal(1).contains("strict subset"));
    }
}
