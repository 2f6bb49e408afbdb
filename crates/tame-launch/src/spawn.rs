//! The one door for every process tame starts ([`Spawn`]), and the fork-and-run door for
//! the two children that run a function of tame's instead of a program ([`fork`]).
//!
//! Between fork and exec the child places itself — dies with its parent, joins a cgroup,
//! takes its CPU affinity, RT-time limit and scheduling policy — so neither it nor
//! anything it starts ever runs elsewhere; all of these survive execve. Every one of those
//! calls is checked: a refusal fails the spawn and says which call failed and why (the
//! child reports it on a pipe of its own, see `child.rs`), and no program runs unplaced.
//! Memory locking does not survive exec, so the preload library does it inside the new
//! program.
//!
//! **Program resolution** has one rule, [`resolve`]: a name with a `/` is that path; any
//! other name is the first *executable regular file* of that name in `PATH`'s directories,
//! in order (an empty entry is the current directory; no `PATH`, no match). The spawner
//! resolves before it forks and execs the file it found (the program still sees the name
//! it was given as `argv[0]`), so a name that cannot run is refused before anything starts,
//! and what a check found is what runs.

mod child;
pub mod fork;

use nix::fcntl::OFlag;
use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Write as _};
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;

use tame_host::CpuList;
use tame_rt::sched::{self, SchedSpec};

use crate::error::{invalid, io_failed, LaunchError};
use crate::preload::Preload;
use child::{Step, Steps, REPORT_LEN};

/// Where and how the program runs (what `tame run` asks for).
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

impl Placement {
    /// Only CPU affinity; the caller's policy, no cgroup, no limits, no memory locking.
    pub fn on_cpus(cpus: CpuList) -> Self {
        Placement {
            cpus,
            sched: None,
            reset_on_fork: false,
            rttime_us: None,
            cgroup_procs: None,
            mlock: false,
            prefault_bytes: 0,
        }
    }
}

/// A running, placed program; derefs to its [`Child`].
pub struct Launched {
    pub child: Child,
    /// Keeps the preload memfd open until the program is gone.
    _preload: Option<Preload>,
}

impl Deref for Launched {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for Launched {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

/// A child process to start: the program, its arguments, and how it is placed. Nothing
/// happens until [`Spawn::spawn`], [`Spawn::spawn_held`] or [`Spawn::output`].
///
/// ```no_run
/// # use tame_launch::spawn::Spawn;
/// # use tame_host::CpuList;
/// let load = Spawn::program("stress-ng")
///     .args(["--cpu", "1"])
///     .cpus(&CpuList::parse("3").unwrap())
///     .process_group()
///     .die_with_parent(libc::SIGTERM)
///     .null_stdio()
///     .spawn()?;
/// # Ok::<(), tame_launch::LaunchError>(())
/// ```
#[derive(Debug)]
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    /// How errors name it ("cannot start {what}: …"); the program's name when not given.
    what: Option<String>,
    cpus: Option<CpuList>,
    policy: Option<SchedSpec>,
    reset_on_fork: bool,
    rttime_us: Option<u64>,
    cgroup_procs: Option<String>,
    mlock: Option<u64>,
    process_group: bool,
    die_with_parent: Option<libc::c_int>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    env: Vec<(OsString, OsString)>,
    current_dir: Option<PathBuf>,
}

impl Spawn {
    /// `program` (resolved by [`resolve`]) with no arguments, placed nowhere in particular.
    pub fn program(program: impl AsRef<OsStr>) -> Self {
        Spawn {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            what: None,
            cpus: None,
            policy: None,
            reset_on_fork: false,
            rttime_us: None,
            cgroup_procs: None,
            mlock: None,
            process_group: false,
            die_with_parent: None,
            stdin: None,
            stdout: None,
            stderr: None,
            env: Vec::new(),
            current_dir: None,
        }
    }

    /// The first of `argv` is the program, the rest its arguments.
    pub fn argv(argv: &[OsString]) -> Result<Self, LaunchError> {
        let (program, args) = argv.split_first().ok_or_else(no_program)?;
        Ok(Spawn::program(program).args(args))
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn args(mut self, args: impl IntoIterator<Item = impl AsRef<OsStr>>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// How errors name the child: "cannot start {what}: …" (default: the program).
    pub fn what(mut self, what: impl Into<String>) -> Self {
        self.what = Some(what.into());
        self
    }

    /// Run only on `cpus` (sched_setaffinity before exec).
    pub fn cpus(mut self, cpus: &CpuList) -> Self {
        self.cpus = Some(cpus.clone());
        self
    }

    /// Run with this scheduling policy (set before exec).
    pub fn policy(mut self, spec: SchedSpec) -> Self {
        self.policy = Some(spec);
        self
    }

    /// With [`Spawn::policy`]: the program's own children start as SCHED_OTHER.
    pub fn reset_on_fork(mut self, reset: bool) -> Self {
        self.reset_on_fork = reset;
        self
    }

    /// RLIMIT_RTTIME in µs: the most CPU time a real-time thread may use without blocking.
    pub fn rttime_limit_us(mut self, us: u64) -> Self {
        self.rttime_us = Some(us);
        self
    }

    /// Join the cgroup whose task file (absolute host path) this is, before exec.
    pub fn cgroup(mut self, procs: impl Into<String>) -> Self {
        self.cgroup_procs = Some(procs.into());
        self
    }

    /// Lock the program's memory (the preload library, after exec), faulting in this many
    /// heap bytes first.
    pub fn mlock(mut self, prefault_bytes: u64) -> Self {
        self.mlock = Some(prefault_bytes);
        self
    }

    /// Everything a [`Placement`] says.
    pub fn placement(mut self, p: &Placement) -> Self {
        self.cpus = Some(p.cpus.clone());
        self.policy = p.sched;
        self.reset_on_fork = p.reset_on_fork;
        self.rttime_us = p.rttime_us;
        self.cgroup_procs = p.cgroup_procs.clone();
        self.mlock = p.mlock.then_some(p.prefault_bytes);
        self
    }

    /// A process group of its own (the child leads it), so a signal to the group reaches
    /// it and everything it starts, and a terminal's Ctrl-C to ours does not.
    pub fn process_group(mut self) -> Self {
        self.process_group = true;
        self
    }

    /// The kernel sends it `signal` when the thread that started it ends (PR_SET_PDEATHSIG:
    /// the forking *thread*, so spawn from a thread that outlives the child; not with
    /// [`Spawn::spawn_held`], which forks on a thread of its own).
    pub fn die_with_parent(mut self, signal: libc::c_int) -> Self {
        self.die_with_parent = Some(signal);
        self
    }

    pub fn stdin(mut self, s: impl Into<Stdio>) -> Self {
        self.stdin = Some(s.into());
        self
    }

    pub fn stdout(mut self, s: impl Into<Stdio>) -> Self {
        self.stdout = Some(s.into());
        self
    }

    pub fn stderr(mut self, s: impl Into<Stdio>) -> Self {
        self.stderr = Some(s.into());
        self
    }

    /// stdin, stdout and stderr all /dev/null.
    pub fn null_stdio(self) -> Self {
        self.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
    }

    /// Set one environment variable (a `PATH` set here is also the one [`resolve`] uses).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.current_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The program as given, and its arguments.
    pub fn program_and_args(&self) -> (&OsStr, &[OsString]) {
        (&self.program, &self.args)
    }

    /// Fork, place, exec. A refusal (no such program, a step the kernel refused) leaves
    /// nothing behind: the child never runs the program.
    pub fn spawn(self) -> Result<Launched, LaunchError> {
        let what = self.what_name();
        let program = self.program.clone();
        let prepared = self.prepare(None)?;
        let Prepared {
            mut cmd,
            preload,
            report,
        } = prepared;
        let spawned = cmd.spawn();
        // The children have their copies; ours of the write end must go before we read.
        drop(cmd);
        let child = spawned.map_err(|e| spawn_error(&what, &program, &report, e))?;
        Ok(Launched {
            child,
            _preload: preload,
        })
    }

    /// Spawn with stdout and stderr captured (unless set otherwise) and wait for it.
    pub fn output(self) -> Result<Output, LaunchError> {
        let what = self.what_name();
        let mut s = self;
        s.stdout = Some(s.stdout.unwrap_or_else(Stdio::piped));
        s.stderr = Some(s.stderr.unwrap_or_else(Stdio::piped));
        let launched = s.spawn()?;
        let Launched { child, _preload } = launched;
        child
            .wait_with_output()
            .map_err(|e| io_failed(format!("cannot wait for {what}"), e))
    }

    /// Like [`Spawn::spawn`], but the child stops before exec until [`Held::go`]: whatever
    /// the caller sets up for its pid in between (a reservation) holds from the program's
    /// first instruction. Dropped without `go`, it never runs.
    pub fn spawn_held(self) -> Result<Held, LaunchError> {
        let what = self.what_name();
        if self.die_with_parent.is_some() {
            // Its spawning thread ends once the program runs: the signal would kill it then.
            return Err(crate::error::failed(format!(
                "cannot start {what} held with a parent-death signal — a defect in tame, please report it"
            )));
        }
        let program = self.program.clone();
        let (placed_read, placed_write) = pipe()?;
        let (go_read, go_write) = pipe()?;
        let fds = HoldFds {
            placed: placed_write.as_raw_fd(),
            go: go_read.as_raw_fd(),
            go_parent: go_write.as_raw_fd(),
        };
        let Prepared {
            mut cmd,
            preload,
            report,
        } = self.prepare(Some(fds))?;
        let spawning = std::thread::spawn(move || {
            let child = cmd.spawn();
            // The child has exec'd or failed: our copies of its ends can go.
            drop((cmd, placed_write, go_read));
            child
        });
        let sent = read_pid(&placed_read, &spawning);
        let mut held = Held {
            pid: sent.unwrap_or(0),
            go: Some(go_write),
            spawning: Some(spawning),
            what,
            program,
            report,
            preload,
        };
        match sent {
            Some(_) => Ok(held),
            // The child ended before it was placed: the spawn says why.
            None => Err(match held.finish() {
                // Not sent, yet started: never leave a program running unplaced.
                Ok(mut child) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    io_failed(
                        format!("cannot start {}", held.what),
                        io::Error::other(
                            "the child started but never reported its placement (killed, or out of memory before exec?) — see dmesg and retry",
                        ),
                    )
                }
                Err(e) => e,
            }),
        }
    }

    fn what_name(&self) -> String {
        self.what
            .clone()
            .unwrap_or_else(|| self.program.to_string_lossy().into_owned())
    }

    /// The `Command` that resolves, places itself between fork and exec (and, held, then
    /// waits for the go), with the preload library when memory is to be locked.
    fn prepare(self, hold: Option<HoldFds>) -> Result<Prepared, LaunchError> {
        let path_var = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"));
        let Some(resolved) = resolve_in(&self.program, path_var.as_deref()) else {
            return Err(invalid(format!(
                "cannot run {}: no such program — check the name or give its path",
                self.program.to_string_lossy()
            )));
        };
        // Absolute, so a `current_dir` for the child cannot make it name another file.
        let resolved = if resolved.is_absolute() {
            resolved
        } else {
            std::env::current_dir()
                .map_err(|e| io_failed("cannot read the working directory", e))?
                .join(resolved)
        };
        let mut cmd = Command::new(&resolved);
        cmd.arg0(&self.program).args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        if let Some(s) = self.stdin {
            cmd.stdin(s);
        }
        if let Some(s) = self.stdout {
            cmd.stdout(s);
        }
        if let Some(s) = self.stderr {
            cmd.stderr(s);
        }
        if self.process_group {
            cmd.process_group(0);
        }
        let preload = match self.mlock {
            Some(prefault_bytes) => {
                let p = Preload::new()?;
                p.pass_to(&mut cmd);
                let existing = std::env::var("LD_PRELOAD").unwrap_or_default();
                let entry = if existing.is_empty() {
                    p.ld_preload_entry()
                } else {
                    format!("{} {existing}", p.ld_preload_entry())
                };
                cmd.env("LD_PRELOAD", entry)
                    .env("TAME_MLOCK", "1")
                    .env("TAME_PREFAULT_BYTES", prefault_bytes.to_string());
                Some(p)
            }
            None => None,
        };
        // Everything the child needs is built now: after fork only async-signal-safe calls.
        let steps = Steps {
            // SAFETY: getpid has no preconditions.
            die_with_parent: self
                .die_with_parent
                .map(|sig| (sig, unsafe { libc::getpid() })),
            new_session: false,
            cgroup_procs: self
                .cgroup_procs
                .as_ref()
                .map(|p| {
                    CString::new(p.as_str())
                        .map_err(|_| invalid(format!("cgroup path {p:?} contains a NUL byte")))
                })
                .transpose()?,
            cpus: self.cpus.as_ref().map(|c| sched::cpu_set(c.iter())),
            rttime_us: self.rttime_us,
            policy: self.policy.map(|p| (p, self.reset_on_fork)),
        };
        // Non-blocking: the parent reads a report only after the spawn failed, and the child
        // writes its few bytes into an empty pipe.
        let (report_read, report_write) = pipe_with(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let report_fd = report_write.as_raw_fd();
        // SAFETY: the closure only makes async-signal-safe system calls on pre-built data
        // (Steps::take, wait_for_go); it owns `report_write`, so the descriptor stays open
        // as long as the command does.
        unsafe {
            cmd.pre_exec(move || {
                let _keep = &report_write;
                steps
                    .take(report_fd)
                    .map_err(io::Error::from_raw_os_error)?;
                match hold {
                    Some(fds) => wait_for_go(fds),
                    None => Ok(()),
                }
            });
        }
        Ok(Prepared {
            cmd,
            preload,
            report: report_read,
        })
    }
}

/// A command ready to spawn, with what must outlive it.
struct Prepared {
    cmd: Command,
    preload: Option<Preload>,
    /// Where the child reports a refused step.
    report: OwnedFd,
}

/// Fork, place, exec (a [`Placement`], as `tame run` asks for it).
pub fn spawn(placement: &Placement, argv: &[OsString]) -> Result<Launched, LaunchError> {
    placed(placement, argv)?.spawn()
}

/// Like [`spawn`], but the child stops before exec until [`Held::go`].
pub fn spawn_held(placement: &Placement, argv: &[OsString]) -> Result<Held, LaunchError> {
    placed(placement, argv)?.spawn_held()
}

fn placed(placement: &Placement, argv: &[OsString]) -> Result<Spawn, LaunchError> {
    let s = Spawn::argv(argv)?.placement(placement);
    let what = format!("{} placed", s.program.to_string_lossy());
    Ok(s.what(what))
}

/// A program forked and placed (cgroup, affinity, limits, policy) that waits before exec
/// until [`Held::go`]. Dropped without `go`, it never runs.
pub struct Held {
    pid: u32,
    /// Our end of the go pipe: one byte lets the child exec; closing it makes the child give up.
    go: Option<OwnedFd>,
    /// std's spawn returns only once the child has exec'd, so it runs on a thread of its own.
    spawning: Option<JoinHandle<io::Result<Child>>>,
    what: String,
    program: OsString,
    report: OwnedFd,
    preload: Option<Preload>,
}

/// The pipe ends the held child uses between fork and exec.
#[derive(Clone, Copy)]
struct HoldFds {
    /// The child writes its pid here once placed.
    placed: RawFd,
    /// The child waits here for the parent's go.
    go: RawFd,
    /// The parent's end of the go pipe: the child closes its copy, or it would never see EOF.
    go_parent: RawFd,
}

impl Held {
    /// The held child's pid (the program's, once it runs).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Let the program run (exec) and return it running.
    pub fn go(mut self) -> Result<Launched, LaunchError> {
        if let Some(fd) = self.go.take() {
            // A failed write means the child is gone; the spawn then says why.
            let _ = std::fs::File::from(fd).write_all(b"g");
        }
        let child = self.finish()?;
        Ok(Launched {
            child,
            _preload: self.preload.take(),
        })
    }

    /// Never run the program: the child gives up before exec and is reaped.
    pub fn abandon(self) {
        drop(self);
    }

    /// Wait for std's spawn to return (after exec, or the child's failure).
    fn finish(&mut self) -> Result<Child, LaunchError> {
        let result = match self.spawning.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the spawning thread panicked"))),
            // Not reachable through the public API (finish consumes the spawn's only
            // chance); said as what it would be, a defect.
            None => Err(io::Error::other(
                "tame asked for the program's start twice, a defect in tame — please report it",
            )),
        };
        result.map_err(|e| spawn_error(&self.what, &self.program, &self.report, e))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.spawning.is_none() {
            return;
        }
        // The child waits in read() for the go and has run none of the program. Killed before
        // the go pipe closes, it cannot have been reaped yet, so the pid is still its own.
        // (EOF alone would do, but a held child forked meanwhile may hold a copy of our end.)
        // Never 0 or negative: kill() would then signal a whole process group.
        if let Ok(pid) = libc::pid_t::try_from(self.pid) {
            if pid > 0 {
                // SAFETY: signalling our own child, which is not reaped before `finish` below.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        self.go.take();
        // Killed before it could report an error, std sees it as started: reap it here.
        if let Ok(mut child) = self.finish() {
            let _ = child.wait();
        }
    }
}

fn no_program() -> LaunchError {
    invalid("no program given — write it after `--`, e.g. tame run --cpus 1 -- ./loop")
}

/// The executable `program` names, by the spawner's one rule (see the module doc): a name
/// with a `/` is that path; any other name the first executable regular file of that name
/// in `PATH`. `None` when nothing runnable is found.
pub fn resolve(program: impl AsRef<OsStr>) -> Option<PathBuf> {
    resolve_in(program.as_ref(), std::env::var_os("PATH").as_deref())
}

fn resolve_in(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    let p = Path::new(program);
    let executable = |c: &Path| {
        std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.is_empty() {
        return None;
    }
    if program.as_bytes().contains(&b'/') {
        return executable(p).then(|| p.to_path_buf());
    }
    path?
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| Path::new(OsStr::from_bytes(dir)).join(p))
        .find(|c| executable(c))
}

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    pipe_with(OFlag::O_CLOEXEC)
}

fn pipe_with(flags: OFlag) -> Result<(OwnedFd, OwnedFd), LaunchError> {
    nix::unistd::pipe2(flags).map_err(|e| io_failed("cannot make a pipe", e.into()))
}

/// The step the child reported refused, if it reported one (the read end is non-blocking:
/// the child wrote before it failed, and the spawn has returned its failure by now).
pub(crate) fn reported(report: &OwnedFd) -> Option<(Step, i32)> {
    let mut bytes = [0u8; REPORT_LEN];
    // SAFETY: reading into a live buffer of REPORT_LEN bytes from a descriptor we own.
    let n = unsafe { libc::read(report.as_raw_fd(), bytes.as_mut_ptr().cast(), REPORT_LEN) };
    (n == REPORT_LEN as isize)
        .then(|| child::decode(bytes))
        .flatten()
}

/// A refused step as an error: bad input when it was a permission (the caller may run as
/// someone else, or ask for less), a failure otherwise; the OS error kept as the source.
pub(crate) fn step_error(what: &str, step: Step, errno: i32) -> LaunchError {
    let e = io::Error::from_raw_os_error(errno);
    if matches!(errno, libc::EPERM | libc::EACCES) {
        return invalid(format!(
            "cannot start {what}: {step} was refused: {e} — the placement needs privileges you do not have (run as root, or ask for less)"
        ));
    }
    io_failed(format!("cannot start {what}: {step} failed"), e)
}

/// Why the spawn failed: the step the child reported, or else std's (exec's) error.
fn spawn_error(what: &str, program: &OsStr, report: &OwnedFd, e: io::Error) -> LaunchError {
    match reported(report) {
        Some((step, errno)) => step_error(what, step, errno),
        None => start_error(what, program, e),
    }
}

/// The held child's pid from the placed pipe; None when the spawn ended without it. The
/// spawn is watched too, not only the pipe: a child another thread forks meanwhile inherits
/// our write end until it execs, so EOF alone could come late.
fn read_pid(placed: &OwnedFd, spawning: &JoinHandle<io::Result<Child>>) -> Option<u32> {
    let mut bytes = [0u8; 4];
    read_while(placed, &mut bytes, || !spawning.is_finished()).then(|| u32::from_ne_bytes(bytes))
}

/// Fill `buf` from the pipe `fd`, polling every 20 ms and asking `writer_alive` while nothing
/// comes (another fork's copy of the write end can hold EOF back); false at EOF, on an
/// error, or once the writer is gone with the record incomplete.
pub(crate) fn read_while(
    fd: &OwnedFd,
    buf: &mut [u8],
    mut writer_alive: impl FnMut() -> bool,
) -> bool {
    let mut got = 0;
    while got < buf.len() {
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for a descriptor we own, for the duration of the call.
        if unsafe { libc::poll(&mut poll, 1, 20) } > 0 {
            match nix::unistd::read(fd.as_raw_fd(), &mut buf[got..]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got += n,
            }
        } else if !writer_alive() {
            return false;
        }
    }
    true
}

/// The kernel's or std's refusal to exec, as bad input where the user can fix it.
fn start_error(what: &str, program: &OsStr, e: io::Error) -> LaunchError {
    let program = program.to_string_lossy();
    match e.kind() {
        io::ErrorKind::NotFound => invalid(format!(
            "cannot run {program}: no such program — check the name or give its path"
        )),
        io::ErrorKind::PermissionDenied => invalid(format!(
            "cannot run {program}: {e} — the program is not executable by you"
        )),
        _ => io_failed(format!("cannot start {what}"), e),
    }
}

/// In the held child, placed: tell the parent our pid, then wait for its go. EOF means the
/// parent gave up; the error makes std report the spawn as failed and reap us.
///
/// # Safety
/// Runs between fork and exec: only async-signal-safe calls, on descriptors this child owns.
unsafe fn wait_for_go(fds: HoldFds) -> io::Result<()> {
    // SAFETY: closing a descriptor number this child inherited; no other code uses it here.
    unsafe { libc::close(fds.go_parent) };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let bytes = pid.to_ne_bytes();
    // SAFETY: writing 4 bytes from a live stack buffer to an open pipe.
    if unsafe { libc::write(fds.placed, bytes.as_ptr().cast(), bytes.len()) }
        != bytes.len() as isize
    {
        return Err(io::Error::last_os_error());
    }
    let mut byte = 0u8;
    loop {
        // SAFETY: reading 1 byte into a live stack variable from an open pipe.
        let n = unsafe { libc::read(fds.go, (&mut byte as *mut u8).cast(), 1) };
        match n {
            1 => return Ok(()),
            0 => return Err(io::Error::from_raw_os_error(libc::ECANCELED)),
            _ => {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
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
    wait_forwarding_with(launched, |_| ()).map(|(status, _)| status)
}

/// The program as it exited, not yet reaped: its pid is still its own, so what
/// /proc says of it (its main thread's schedstat) is about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exited {
    pub pid: u32,
    /// CPU time of the process itself, every thread it had (the kernel's
    /// CLOCK_PROCESS_CPUTIME of it); `None` when the kernel would not say.
    pub process_cpu_ns: Option<u64>,
    /// CPU time of the process and of the processes it started and waited for
    /// (`RUSAGE_BOTH` of the exited child, user + system); `None` when unknown.
    pub with_children_cpu_ns: Option<u64>,
}

impl Exited {
    /// CPU time of the processes it started (and waited for), when both figures are known.
    pub fn children_cpu_ns(&self) -> Option<u64> {
        Some(
            self.with_children_cpu_ns?
                .saturating_sub(self.process_cpu_ns?),
        )
    }
}

/// Like [`wait_forwarding`], but once the program has exited and before it is reaped,
/// `at_exit` sees it ([`Exited`]); what it returns comes back with the status. When the
/// exit cannot be watched without reaping (the kernel refused `waitid`), `at_exit` is
/// not called and `None` comes back.
pub fn wait_forwarding_with<T>(
    launched: &mut Launched,
    at_exit: impl FnOnce(&Exited) -> T,
) -> Result<(ExitStatus, Option<T>), LaunchError> {
    use signal_hook::iterator::exfiltrator::WithOrigin;
    use signal_hook::iterator::SignalsInfo;

    let pid = launched.child.id() as libc::pid_t;
    let mut signals = SignalsInfo::<WithOrigin>::new(FORWARDED)
        .map_err(|e| io_failed("cannot install signal forwarding", e))?;
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
    let seen = exited_unreaped(pid).map(|e| at_exit(&e));
    let status = launched
        .child
        .wait()
        .map_err(|e| io_failed("cannot wait for the program", e));
    handle.close();
    let _ = forwarder.join();
    Ok((status?, seen))
}

/// Wait until our child `pid` has exited, leaving it unreaped (`WNOWAIT`), and read what
/// it used of the CPU. `None` when the kernel refused (the caller then reaps as usual).
fn exited_unreaped(pid: libc::pid_t) -> Option<Exited> {
    // SAFETY: both are plain C structs for which all-zero bytes are a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // The raw system call: only it takes the rusage argument (RUSAGE_BOTH of the child:
        // itself and the children it reaped), and with WNOWAIT it reaps nothing.
        // SAFETY: waitid on our own child, with pointers to live, writable structs.
        let r = unsafe {
            libc::syscall(
                libc::SYS_waitid,
                libc::P_PID,
                pid,
                &mut info as *mut libc::siginfo_t,
                libc::WEXITED | libc::WNOWAIT,
                &mut usage as *mut libc::rusage,
            )
        };
        if r == 0 {
            break;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    let tv_ns = |tv: libc::timeval| {
        u64::try_from(tv.tv_sec).unwrap_or(0) * 1_000_000_000
            + u64::try_from(tv.tv_usec).unwrap_or(0) * 1_000
    };
    Some(Exited {
        pid: pid as u32,
        process_cpu_ns: process_cpu_ns(pid),
        with_children_cpu_ns: Some(tv_ns(usage.ru_utime) + tv_ns(usage.ru_stime)),
    })
}

/// The CPU time of process `pid` (all its threads), from its CPU-time clock; the kernel
/// keeps it for an exited process until it is reaped.
fn process_cpu_ns(pid: libc::pid_t) -> Option<u64> {
    // The clock id of a process's CPU-time clock (CPUCLOCK_SCHED of MAKE_PROCESS_CPUCLOCK in
    // the kernel's posix-timers.h), which glibc's clock_getcpuclockid computes the same way.
    let clock = ((!pid) << 3) | 2;
    // SAFETY: an all-zero timespec is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a clock id and a pointer to a live, writable timespec.
    if unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut ts) } != 0 {
        return None;
    }
    Some(u64::try_from(ts.tv_sec).ok()? * 1_000_000_000 + u64::try_from(ts.tv_nsec).ok()?)
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
        Placement::on_cpus(CpuList::parse(cpus).unwrap())
    }

    fn sh(script: &str) -> Vec<OsString> {
        ["sh", "-c", script].iter().map(OsString::from).collect()
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

    /// Read as it exits: the process's own CPU time apart from its children's.
    #[test]
    fn the_exited_program_shows_its_own_cpu_time_and_its_childrens() {
        let busy = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";
        let exited = |script: &str| {
            let mut l = spawn(&placement("0"), &sh(script)).unwrap();
            let pid = l.child.id();
            let (status, seen) = wait_forwarding_with(&mut l, |e| *e).unwrap();
            let seen = seen.expect("waitid watched the exit");
            assert_eq!(seen.pid, pid);
            (exit_code(status), seen)
        };
        // The work in a subshell, a child: little of it in the process itself.
        let (code, e) = exited(&format!("({busy}); exit 5"));
        assert_eq!(code, 5);
        let (own, children) = (e.process_cpu_ns.unwrap(), e.children_cpu_ns().unwrap());
        assert!(children > 20_000_000, "{e:?}");
        assert!(children > 5 * own, "{e:?}");
        // The work in the process itself: little in children.
        let (code, e) = exited(&format!("{busy}; exit 6"));
        assert_eq!(code, 6);
        let (own, children) = (e.process_cpu_ns.unwrap(), e.children_cpu_ns().unwrap());
        assert!(own > 20_000_000, "{e:?}");
        assert!(own > 5 * children, "{e:?}");
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

    /// One rule: a name with a slash is that path; any other the first executable regular
    /// file of that name in PATH, in order; a file without an execute bit is skipped.
    #[test]
    fn programs_resolve_by_one_rule() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir(d).unwrap();
        }
        let make = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        make(&a.join("tool"), 0o644);
        make(&b.join("tool"), 0o755);
        make(&a.join("first"), 0o755);
        make(&b.join("first"), 0o755);
        let path = OsString::from(format!("{}:{}", a.display(), b.display()));
        let found = |name: &str| resolve_in(OsStr::new(name), Some(&path));
        assert_eq!(
            found("tool"),
            Some(b.join("tool")),
            "not executable: skipped"
        );
        assert_eq!(found("first"), Some(a.join("first")), "PATH order");
        assert_eq!(found("missing"), None);
        assert_eq!(found(""), None);
        let slash = a.join("first");
        assert_eq!(found(slash.to_str().unwrap()), Some(slash));
        assert_eq!(found(a.join("tool").to_str().unwrap()), None);
        assert_eq!(
            resolve_in(OsStr::new("sh"), None),
            None,
            "no PATH, no match"
        );
        // What the spawner found is what runs, whatever the child's working directory.
        let out = Spawn::program("sh")
            .args(["-c", "pwd"])
            .current_dir(&b)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            b.to_str().unwrap()
        );
    }

    #[test]
    fn a_missing_program_is_bad_input() {
        let argv = vec![OsString::from("/nonexistent/program")];
        let err = spawn(&placement("0"), &argv).err().unwrap();
        assert!(matches!(err, LaunchError::Invalid(_)), "{err}");
    }

    #[test]
    fn a_held_program_is_placed_but_runs_only_after_go() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let argv = sh(&format!("touch {}", mark.display()));
        let held = spawn_held(&placement("0"), &argv).unwrap();
        // Placed already: the waiting child is on CPU 0 before the program has run.
        let status = std::fs::read_to_string(format!("/proc/{}/status", held.pid())).unwrap();
        let allowed = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap();
        assert!(allowed.ends_with("\t0"), "{allowed}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!mark.exists(), "ran before go");
        let pid = held.pid();
        let mut launched = held.go().unwrap();
        assert_eq!(launched.child.id(), pid, "the held child is the program");
        assert_eq!(exit_code(wait_forwarding(&mut launched).unwrap()), 0);
        assert!(mark.exists());
    }

    #[test]
    fn an_abandoned_held_program_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let held = spawn_held(&placement("0"), &sh(&format!("touch {}", mark.display()))).unwrap();
        let pid = held.pid();
        held.abandon();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!mark.exists());
        // Reaped, not left a zombie.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn a_held_program_that_cannot_run_is_refused_before_anything_starts() {
        let argv = vec![OsString::from("/nonexistent/program")];
        let err = spawn_held(&placement("0"), &argv).err().unwrap();
        assert!(err.is_bad_input(), "{err}");
        assert!(err.to_string().contains("no such program"), "{err}");
        let err = spawn_held(&placement("0"), &[]).err().unwrap();
        assert!(err.is_bad_input(), "{err}");
    }

    #[test]
    fn a_held_program_keeps_its_exit_status() {
        let held = spawn_held(&placement("0"), &sh("exit 7")).unwrap();
        let mut launched = held.go().unwrap();
        assert_eq!(exit_code(wait_forwarding(&mut launched).unwrap()), 7);
    }

    #[test]
    fn a_held_child_whose_placement_is_refused_reports_it() {
        // No such CPU: the kernel refuses the affinity before the child could report.
        let err = spawn_held(&placement("1000"), &sh("exit 0")).err().unwrap();
        assert!(!err.is_bad_input(), "{err}");
        assert!(
            err.to_string().starts_with("cannot start sh placed: "),
            "{err}"
        );
    }

    #[test]
    fn held_children_abandoned_in_any_order_do_not_wait_on_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let argv = sh(&format!("touch {}", mark.display()));
        // The second child is forked while the first one's go pipe is open: it holds a copy.
        let first = spawn_held(&placement("0"), &argv).unwrap();
        let second = spawn_held(&placement("0"), &argv).unwrap();
        first.abandon();
        let mut launched = second.go().unwrap();
        assert_eq!(exit_code(wait_forwarding(&mut launched).unwrap()), 0);
        assert!(mark.exists());
    }
}
