//! `tame run`: start a program on a resolved [`Target`], note it for `tame ps`
//! while it runs, and give back the exit code a shell would show.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tame_host::Root;
use tame_rt::duration::format_ns;

use crate::detach::{self, Placed, Store};
use crate::error::LaunchError;
use crate::proc;
use crate::spawn::{self, Placement};
use crate::target::Target;

/// How the program runs, beyond where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Children start as SCHED_OTHER (SCHED_RESET_ON_FORK).
    pub reset_on_fork: bool,
    /// RLIMIT_RTTIME in µs.
    pub rttime_us: Option<u64>,
    /// Lock all memory after exec.
    pub mlock: bool,
    /// Heap bytes to fault in and lock after exec (implies `mlock`).
    pub prefault_bytes: Option<u64>,
}

/// The placement `spawn` gives the child: the target's CPUs, policy and
/// partition cgroup (as a path below `root`'s base).
pub fn placement(root: &Root, target: &Target, options: &RunOptions) -> Placement {
    Placement {
        cpus: target.cpus.clone(),
        sched: target.sched,
        reset_on_fork: options.reset_on_fork,
        rttime_us: options.rttime_us,
        cgroup_procs: target
            .cgroup
            .as_ref()
            .map(|c| root.path(c.procs()).display().to_string()),
        mlock: options.mlock || options.prefault_bytes.is_some(),
        prefault_bytes: options.prefault_bytes.unwrap_or(0),
    }
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The exit code a shell would show (128 + N for signal N).
    pub code: i32,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

impl Ended {
    pub fn of(status: ExitStatus) -> Self {
        Self {
            code: spawn::exit_code(status),
            signal: status.signal(),
        }
    }

    /// Why the program ended, when tame knows more than the exit code says: killed
    /// by SIGKILL or SIGXCPU under an RT-time limit, which is what RLIMIT_RTTIME
    /// sends a real-time thread that runs that long without blocking (SIGKILL at
    /// the hard limit, which tame sets equal to the soft one).
    pub fn explain(&self, options: &RunOptions) -> Option<String> {
        let us = options.rttime_us?;
        let name = match self.signal? {
            libc::SIGKILL => "SIGKILL",
            libc::SIGXCPU => "SIGXCPU",
            _ => return None,
        };
        let limit = format_ns(us.saturating_mul(1_000));
        // As an option's value: one word (`1s`, which the duration parser reads).
        let flag = |text: &str| text.replace(' ', "");
        Some(format!(
            "the program was killed by {name} (exit {}): the RT-time guard (--rttime {}, RLIMIT_RTTIME) stops a real-time thread that runs {limit} without blocking — let the loop block (sleep or wait) within each cycle, or raise the limit, e.g. --rttime {}",
            self.code,
            flag(&limit),
            flag(&format_ns(us.saturating_mul(2_000)))
        ))
    }
}

/// Start `argv` placed, wait for it (forwarding signals), say how it ended.
pub fn run(
    root: &Root,
    store: &Store,
    target: &Target,
    options: &RunOptions,
    argv: &[OsString],
) -> Result<Ended, LaunchError> {
    let mut launched = spawn::spawn(&placement(root, target, options), argv)?;
    let pid = launched.child.id();
    let noted = note(root, store, pid, target);
    let status = spawn::wait_forwarding(&mut launched)?;
    if noted {
        store.remove(pid);
    }
    Ok(Ended::of(status))
}

/// A note for `tame ps`; best effort (the program runs either way), removed
/// when the program ends. Whether it was written.
fn note(root: &Root, store: &Store, pid: u32, target: &Target) -> bool {
    let Ok(info) = proc::inspect(root, pid) else {
        return false;
    };
    let counters = info
        .tids
        .iter()
        .map(|&t| (t, proc::counters(root, pid, t).unwrap_or_default()))
        .collect();
    store
        .record_run(
            root,
            &Placed {
                version: detach::RECORD_VERSION,
                kind: "run".into(),
                pid,
                start_time: info.start_time,
                comm: info.comm,
                cpus: target.cpus.clone(),
                cpuset: target.cpuset(),
                counters,
            },
        )
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::PartitionCgroup;
    use tame_host::cgroup::CgroupVersion;
    use tame_host::CpuList;

    #[test]
    fn the_child_joins_the_partition_cgroup_below_the_root_base() {
        let root = Root::new("/tmp/fixture");
        let target = Target {
            cpus: CpuList::parse("1").unwrap(),
            cgroup: Some(PartitionCgroup::new(
                CgroupVersion::V2,
                "/sys/fs/cgroup/unified",
                "/",
            )),
            sched: None,
        };
        let p = placement(
            &root,
            &target,
            &RunOptions {
                prefault_bytes: Some(4096),
                ..Default::default()
            },
        );
        assert_eq!(
            p.cgroup_procs.as_deref(),
            Some("/tmp/fixture/sys/fs/cgroup/unified/cgroup.procs")
        );
        assert!(p.mlock, "prefault implies mlock");
        assert_eq!((p.prefault_bytes, p.cpus.to_string()), (4096, "1".into()));
    }

    #[test]
    fn a_kill_under_an_rt_time_limit_is_explained() {
        // Raw wait statuses: killed by signal N is N; exited with code C is C << 8.
        let killed = |sig: i32| Ended::of(ExitStatus::from_raw(sig));
        assert_eq!(
            killed(libc::SIGKILL),
            Ended {
                code: 137,
                signal: Some(libc::SIGKILL)
            }
        );
        let guarded = RunOptions {
            rttime_us: Some(500_000),
            ..Default::default()
        };
        assert_eq!(
            killed(libc::SIGKILL).explain(&guarded).as_deref(),
            Some("the program was killed by SIGKILL (exit 137): the RT-time guard (--rttime 500ms, RLIMIT_RTTIME) stops a real-time thread that runs 500 ms without blocking — let the loop block (sleep or wait) within each cycle, or raise the limit, e.g. --rttime 1s")
        );
        let xcpu = killed(libc::SIGXCPU).explain(&guarded).unwrap();
        assert!(
            xcpu.starts_with("the program was killed by SIGXCPU (exit 152)"),
            "{xcpu}"
        );
        // No limit, another signal, or a normal exit: nothing to add.
        assert_eq!(killed(libc::SIGKILL).explain(&RunOptions::default()), None);
        assert_eq!(killed(libc::SIGTERM).explain(&guarded), None);
        assert_eq!(
            Ended::of(ExitStatus::from_raw(3 << 8)).explain(&guarded),
            None
        );
    }

    #[test]
    fn run_notes_the_program_while_it_runs_and_forgets_it_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let cpu = tame_rt::sched::allowed_cpus()[0];
        let target = Target {
            cpus: CpuList::from_cpus([cpu]),
            cgroup: None,
            sched: None,
        };
        let out = dir.path().join("listed");
        // The program sees its own note (a journal named by its pid) while it runs.
        let script = format!(
            "i=0; while [ ! -d {p}/$$ ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -d {p}/$$ ] && echo noted > {out}; exit 3",
            p = dir.path().join("placed").display(),
            out = out.display()
        );
        let argv: Vec<OsString> = ["sh", "-c", &script].iter().map(OsString::from).collect();
        let code = run(
            &Root::system(),
            &store,
            &target,
            &RunOptions::default(),
            &argv,
        )
        .unwrap();
        assert_eq!(
            code,
            Ended {
                code: 3,
                signal: None
            }
        );
        assert!(out.exists(), "a note while it ran");
        assert!(store.list().is_empty());
        assert!(!dir.path().join("placed").exists());
    }
}
