//! `tame run`: start a program already placed. Between fork and exec the child
//! joins the partition's cgroup, takes its CPU affinity, RT-time limit and
//! scheduling policy, so neither it nor anything it starts ever runs elsewhere;
//! all of these survive execve. Memory locking does not survive exec, so the
//! preload library does it inside the new program.

use std::ffi::{CString, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

use tame_host::CpuList;
use tame_rt::sched::{self, SchedSpec};

use crate::error::{failed, invalid, LaunchError};
use crate::preload::Preload;

/// Where and how the program runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub cpus: CpuList,
    /// None keeps the caller's policy.
    pub sched: Option<SchedSpec>,
    pub reset_on_fork: bool,
    /// RLIMIT_RTTIME in µs: the most CPU time a real-time thread may use without blocking.
    pub rttime_us: Option<u64>,
    /// A cgroup task file (absolute host path) the child attaches itself to before exec.
    pub cgroup_procs: Option<String>,
    pub mlock: bool,
    /// Heap bytes the preload library faults in and locks after exec.
    pub prefault_bytes: u64,
}

/// A running, placed program.
pub struct Launched {
    pub child: Child,
    /// Keeps the preload memfd open until the program is gone.
    _preload: Option<Preload>,
}

/// Fork, place, exec. Everything that can be checked was checked by the caller;
/// a refusal by the kernel here still leaves nothing behind (the child never runs the program).
pub fn spawn(placement: &Placement, argv: &[OsString]) -> Result<Launched, LaunchError> {
    let (program, args) = argv.split_first().ok_or_else(|| {
        invalid("no program given — write it after `--`, e.g. tame run --cpus 1 -- ./loop")
    })?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let preload = if placement.mlock {
        let p = Preload::new()?;
        let existing = std::env::var("LD_PRELOAD").unwrap_or_default();
        let entry = if existing.is_empty() {
            p.ld_preload_entry()
        } else {
            format!("{} {existing}", p.ld_preload_entry())
        };
        cmd.env("LD_PRELOAD", entry)
            .env("TAME_MLOCK", "1")
            .env("TAME_PREFAULT_BYTES", placement.prefault_bytes.to_string());
        Some(p)
    } else {
        None
    };
    // Everything the child needs is built now: after fork only async-signal-safe calls are allowed.
    let cpu_set = sched::cpu_set(placement.cpus.iter());
    let cgroup = placement
        .cgroup_procs
        .as_ref()
        .map(|p| {
            CString::new(p.as_str())
                .map_err(|_| invalid(format!("cgroup path {p:?} contains a NUL byte")))
        })
        .transpose()?;
    let sched_spec = placement.sched;
    let reset = placement.reset_on_fork;
    let rttime = placement.rttime_us;
    // SAFETY: the closure only makes async-signal-safe system calls on pre-built data.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(path) = &cgroup {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0" attaches the writing task itself.
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(err);
                }
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpu_set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(us) = rttime {
                let limit = libc::rlimit {
                    rlim_cur: us,
                    rlim_max: us,
                };
                if libc::setrlimit(libc::RLIMIT_RTTIME, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(spec) = &sched_spec {
                let errno = sched::apply_raw(0, spec, reset);
                if errno != 0 {
                    return Err(std::io::Error::from_raw_os_error(errno));
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => invalid(format!(
            "cannot run {}: no such program — check the name or give its path",
            program.to_string_lossy()
        )),
        std::io::ErrorKind::PermissionDenied => invalid(format!(
            "cannot run {}: {e} — the program is not executable by you, or the placement was refused",
            program.to_string_lossy()
        )),
        _ => failed(format!("cannot start {} placed: {e}", program.to_string_lossy())),
    })?;
    Ok(Launched {
        child,
        _preload: preload,
    })
}

/// Signals forwarded to the program when they come from another process
/// (a terminal's Ctrl-C already reaches the program itself, being in the
/// same foreground process group).
pub const FORWARDED: &[libc::c_int] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Wait for the program, forwarding signals; returns its exit status.
pub fn wait_forwarding(launched: &mut Launched) -> Result<ExitStatus, LaunchError> {
    use signal_hook::iterator::exfiltrator::WithOrigin;
    use signal_hook::iterator::SignalsInfo;

    let pid = launched.child.id() as libc::pid_t;
    let mut signals = SignalsInfo::<WithOrigin>::new(FORWARDED)
        .map_err(|e| failed(format!("cannot install signal forwarding: {e}")))?;
    let handle = signals.handle();
    let forwarder = std::thread::spawn(move || {
        for info in signals.forever() {
            // From the kernel (a terminal) the program got it too; from a process, pass it on.
            if info.process.is_some() {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, info.signal) };
            }
        }
    });
    let status = launched
        .child
        .wait()
        .map_err(|e| failed(format!("cannot wait for the program: {e}")));
    handle.close();
    let _ = forwarder.join();
    status
}

/// The exit code a shell would show: the program's code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(cpus: &str) -> Placement {
        Placement {
            cpus: CpuList::parse(cpus).unwrap(),
            sched: None,
            reset_on_fork: false,
            rttime_us: None,
            cgroup_procs: None,
            mlock: false,
            prefault_bytes: 0,
        }
    }

    fn run_capture(p: &Placement, script: &str) -> (i32, String) {
        let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        let mut l = spawn(p, &argv).unwrap();
        let status = wait_forwarding(&mut l).unwrap();
        (exit_code(status), String::new())
    }

    #[test]
    fn affinity_is_set_before_the_program_runs_and_survives_exec() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("aff");
        // sh execs into cat, which reads its own status: placement survived execve.
        let script = format!(
            "exec grep Cpus_allowed_list /proc/self/status > {}",
            out.display()
        );
        let (code, _) = run_capture(&placement("0"), &script);
        assert_eq!(code, 0);
        let text = std::fs::read_to_string(out).unwrap();
        assert!(text.trim().ends_with("\t0"), "{text}");
    }

    #[test]
    fn exit_status_is_the_programs() {
        assert_eq!(run_capture(&placement("0"), "exit 7").0, 7);
        assert_eq!(
            run_capture(&placement("0"), "kill -TERM $$").0,
            128 + libc::SIGTERM
        );
    }

    #[test]
    fn mlock_is_done_inside_the_program_after_exec() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("lck");
        let mut p = placement("0");
        p.mlock = true;
        p.prefault_bytes = 4 << 20;
        let script = format!("exec grep VmLck /proc/self/status > {}", out.display());
        let (code, _) = run_capture(&p, &script);
        assert_eq!(code, 0);
        let text = std::fs::read_to_string(out).unwrap();
        let kb: u64 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        // SAFETY: no arguments.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            assert!(
                kb >= 4096,
                "at least the 4 MiB prefaulted heap is locked: {text}"
            );
        }
    }

    #[test]
    fn a_missing_program_is_bad_input() {
        let argv = vec![OsString::from("/nonexistent/program")];
        let err = spawn(&placement("0"), &argv).err().unwrap();
        assert!(matches!(err, LaunchError::Invalid(_)), "{err}");
    }
}
