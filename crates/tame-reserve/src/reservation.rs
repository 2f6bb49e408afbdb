//! Making, listing and releasing reservations through any [`Backend`]: a request is
//! validated before anything is written; a program is started held, reserved for, and only
//! then runs, so not one instruction of it runs unreserved; release finds the reservation
//! wherever it is held.

use std::ffi::OsString;

use serde::Serialize;
use tame_host::{CpuList, Root};
use tame_launch::spawn::{self, Exited, Launched, Placement};
use tame_launch::target::Caller;
use tame_rt::duration::format_ns;

use crate::backend::{self, Backend, Listing, Places};
use crate::bandwidth::Limits;
use crate::error::{invalid, Result};
use crate::spec::{self, Request};

/// The order `--list` shows backends in.
const LIST_ORDER: [spec::Backend; 3] = [
    spec::Backend::Server,
    spec::Backend::Deadline,
    spec::Backend::Cgroup,
];
/// The order `--release` tries them in.
const RELEASE_ORDER: [spec::Backend; 3] = [
    spec::Backend::Server,
    spec::Backend::Cgroup,
    spec::Backend::Deadline,
];

/// The real user id of this process: owners of other processes must be root to reserve for them.
pub(crate) fn caller_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// A request for `backend`, checked against the host's `limits` and the backend's own rules
/// before anything is started or written. `cpu` is the CPU asked for, if any.
pub fn request(
    backend: &dyn Backend,
    share_ppm: u64,
    period_ns: u64,
    cpu: Option<u32>,
    limits: &Limits,
) -> Result<Request> {
    let cpu = backend.cpu(cpu, limits)?;
    let req = Request {
        share_ppm,
        period_ns,
        cpu,
        backend: backend.kind(),
    };
    req.validate(backend.cap_ppm(limits), &limits.online)?;
    backend.check(&req)?;
    Ok(req)
}

/// Reserve for the running process `pid`, which must exist and be the caller's (or the
/// caller root).
pub fn reserve_running(backend: &dyn Backend, root: &Root, pid: u32, req: &Request) -> Result<()> {
    let info = tame_launch::proc::inspect(root, pid)?;
    tame_launch::detach::check_owner(&info, caller_uid())?;
    backend.reserve(pid, req)
}

/// A program running with its reservation; [`Running::wait`] gives the share back.
pub struct Running<'a> {
    backend: &'a dyn Backend,
    root: Root,
    launched: Launched,
    pid: u32,
}

/// How a program started with its reservation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The exit code a shell would show (128 + N for signal N).
    pub code: i32,
    /// Where its CPU time went, when the backend reserves only the program's own thread
    /// and what it started used enough to say so (see [`CpuSplit::worth_saying`]).
    pub unreserved: Option<CpuSplit>,
}

/// Where the CPU time of a program started with a reservation went, read as it exited.
/// The server and deadline backends reserve the program's one thread (it is reserved
/// before exec); threads and processes it starts run outside the reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuSplit {
    /// The reserved (main) thread.
    pub reserved_ns: u64,
    /// The other threads of the process.
    pub threads_ns: u64,
    /// The processes it started and waited for (with theirs).
    pub children_ns: u64,
}

impl CpuSplit {
    /// Unreserved time below this is not worth a word (a shell's start, a helper thread).
    const QUIET_NS: u64 = 20_000_000;
    /// Nor is less than this share of the total, in percent.
    const QUIET_PERCENT: u64 = 5;

    /// From what the kernel said of the exited program and of its main thread.
    pub fn of(exited: &Exited, main_thread_ns: Option<u64>) -> Option<Self> {
        let process = exited.process_cpu_ns?;
        let reserved = main_thread_ns.map_or(process, |m| m.min(process));
        Some(CpuSplit {
            reserved_ns: reserved,
            threads_ns: process - reserved,
            children_ns: exited.children_cpu_ns().unwrap_or(0),
        })
    }

    pub fn unreserved_ns(&self) -> u64 {
        self.threads_ns + self.children_ns
    }

    pub fn total_ns(&self) -> u64 {
        self.reserved_ns + self.unreserved_ns()
    }

    /// At least 20 ms, and 5 % of all, ran outside the reservation.
    pub fn worth_saying(&self) -> bool {
        let out = self.unreserved_ns();
        out >= Self::QUIET_NS && out.saturating_mul(100) >= self.total_ns() * Self::QUIET_PERCENT
    }

    /// What the user should know, for process `pid` reserved by `backend`.
    pub fn warning(&self, pid: u32, backend: spec::Backend) -> String {
        let mut parts = Vec::new();
        if self.children_ns > 0 {
            parts.push(format!(
                "{} in processes it started",
                format_ns(self.children_ns)
            ));
        }
        if self.threads_ns > 0 {
            parts.push(format!(
                "{} in threads it started",
                format_ns(self.threads_ns)
            ));
        }
        format!(
            "process {pid} used {} of CPU time in its reserved thread, but {} ran outside the reservation ({}) — {}; {ADVICE}",
            format_ns(self.reserved_ns),
            format_ns(self.unreserved_ns()),
            parts.join(", "),
            unreserved_why(backend)
        )
    }
}

/// What to do when the work runs in threads or processes the reserved one starts.
pub const ADVICE: &str = "reserve the process that does the work (exec it: sh -c 'exec PROGRAM', not a wrapper that forks it such as timeout), or use --backend cgroup, whose cap holds for everything the program starts (a cap, not a guarantee)";

/// The note of a backend that reserves only the threads a process has when it is reserved.
pub fn offspring_note(backend: spec::Backend) -> String {
    format!(
        "only the threads the process has now hold the reservation (a program started here: its one thread, reserved before exec): {} — {ADVICE}",
        unreserved_why(backend)
    )
}

/// Why threads and processes a reserved program starts are not reserved, per backend.
pub fn unreserved_why(backend: spec::Backend) -> &'static str {
    match backend {
        spec::Backend::Deadline => "SCHED_DEADLINE is set with reset-on-fork (without it the kernel refuses the process every fork), so what it starts runs as SCHED_OTHER",
        spec::Backend::Server => "the server schedules the threads it found at admission, raised with reset-on-fork, so what the process starts later runs as SCHED_OTHER on its CPU",
        spec::Backend::Cgroup => "the cgroup holds what the program starts too",
    }
}

/// Start `argv` with `req` in place from its first instruction: the child is placed on the
/// backend's CPUs and held before exec until the reservation holds. Refused, it never runs.
/// A CPU asked for that lies in an applied partition (the journal in `at.state_dir`) puts
/// the child in that partition's cgroup, where the caller may use it.
pub fn start<'a>(
    backend: &'a dyn Backend,
    at: &Places,
    req: &Request,
    limits: &Limits,
    argv: &[OsString],
) -> Result<Running<'a>> {
    let cpus = CpuList::from_cpus(backend.program_cpus(req, limits));
    let placement = match req.cpu {
        Some(_) => {
            tame_launch::target::placement_on(&at.root, &at.state_dir, &cpus, &Caller::current())?
        }
        // Every CPU: the kernel keeps the child within the cpuset it starts in.
        None => Placement::on_cpus(cpus),
    };
    let held = spawn::spawn_held(&placement, argv)?;
    let pid = held.pid();
    // On an error `held` is dropped: the child gives up before exec.
    backend.reserve(pid, req)?;
    match held.go() {
        Ok(launched) => Ok(Running {
            backend,
            root: at.root.clone(),
            launched,
            pid,
        }),
        Err(e) => {
            let _ = backend.release_exited(pid);
            Err(e.into())
        }
    }
}

impl Running<'_> {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Wait for the program (passing on signals sent to us), give the share back, and say
    /// how it ended: the exit code a shell would show and, where the backend reserved only
    /// its own thread, how much of its work ran outside the reservation.
    pub fn wait(mut self) -> Result<Ended> {
        let root = self.root.clone();
        let covers_all = self.backend.holds_what_it_starts();
        // Read before the program is reaped, while its pid and main thread are still its own.
        let waited = spawn::wait_forwarding_with(&mut self.launched, |exited| {
            if covers_all {
                return None;
            }
            let main = root
                .process(exited.pid)
                .task(exited.pid)
                .schedstat()
                .ok()
                .map(|s| s.run_ns);
            CpuSplit::of(exited, main)
        });
        // The program is gone: give the share back now, even if waiting failed.
        self.backend.release_exited(self.pid)?;
        let (status, split) = waited?;
        Ok(Ended {
            code: spawn::exit_code(status),
            unreserved: split.flatten().filter(CpuSplit::worth_saying),
        })
    }
}

/// A reservation made, as reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Made {
    pub backend: spec::Backend,
    pub pid: u32,
    pub share_ppm: u64,
    pub period_ns: u64,
    pub runtime_ns: u64,
    pub cpu: Option<u32>,
    /// What bounds the guarantee here, and what this kind of reservation does not promise.
    pub notes: Vec<String>,
}

impl Made {
    pub fn new(backend: &dyn Backend, req: &Request, pid: u32, limits: &Limits) -> Self {
        Made {
            backend: req.backend,
            pid,
            share_ppm: req.share_ppm,
            period_ns: req.period_ns,
            runtime_ns: req.runtime_ns(),
            cpu: req.cpu,
            notes: backend.notes(limits),
        }
    }
}

/// Every reservation of every backend.
pub fn list(at: &Places) -> Listing {
    let mut listing = Listing::default();
    for kind in LIST_ORDER {
        backend::open(kind, at).list(&mut listing);
    }
    listing
}

/// Release `pid`'s reservations, whichever backends hold them; the backends that did.
pub fn release(at: &Places, pid: u32) -> Result<Vec<spec::Backend>> {
    let mut released = Vec::new();
    for kind in RELEASE_ORDER {
        if backend::open(kind, at).release(pid)? {
            released.push(kind);
        }
    }
    if released.is_empty() {
        return Err(invalid(format!(
            "process {pid} holds no reservation — see tame reserve --list"
        )));
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            rt_runtime_us: 950_000,
            rt_period_us: 1_000_000,
            online: vec![0, 1],
            kernel_release: "6.18.0".into(),
            fair_server: true,
        }
    }

    fn places(dir: &std::path::Path) -> Places {
        Places {
            root: Root::new(dir.join("root")),
            socket: dir.join("no-server.sock"),
            state_dir: dir.join("state"),
        }
    }

    #[test]
    fn each_backend_resolves_the_cpu_and_cap_its_own_way() {
        let dir = tempfile::tempdir().unwrap();
        let at = places(dir.path());
        let server = backend::open(spec::Backend::Server, &at);
        let req = request(&*server, 250_000, 40_000_000, None, &limits()).unwrap();
        assert_eq!(
            req.cpu,
            Some(1),
            "the server pins to the highest online CPU"
        );
        assert_eq!(server.program_cpus(&req, &limits()), vec![1]);
        // With a spec applied, the highest CPU of its isolated and shared partitions: the
        // system partition's are never handed out.
        let mut journal = tame_host::journal::Journal::open(&at.root, &at.state_dir).unwrap();
        let spec = "[[partition]]\nname = \"system\"\ncpus = \"1\"\nrole = \"system\"\n\n[[partition]]\nname = \"rt\"\ncpus = \"0\"\nrole = \"isolated\"\n";
        journal
            .note(tame_partition::apply::SPEC_NOTE, spec.as_bytes())
            .unwrap();
        let req = request(&*server, 250_000, 40_000_000, None, &limits()).unwrap();
        assert_eq!(req.cpu, Some(0), "the server pins to the partition's CPU");
        let e = request(&*server, 950_000, 40_000_000, None, &limits()).unwrap_err();
        assert!(e.to_string().contains("cap of 90 %"), "{e}");

        let deadline = backend::open(spec::Backend::Deadline, &at);
        let e = request(&*deadline, 250_000, 40_000_000, Some(1), &limits()).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("strict subset"),
            "{e}"
        );
        let req = request(&*deadline, 250_000, 40_000_000, None, &limits()).unwrap();
        assert_eq!(req.cpu, None);
        assert_eq!(deadline.program_cpus(&req, &limits()), vec![0, 1]);
        // 95 % RT cap less the fair server's 5 %.
        let e = request(&*deadline, 910_000, 40_000_000, None, &limits()).unwrap_err();
        assert!(e.to_string().contains("cap of 90 %"), "{e}");

        // No cgroup CPU controller in an empty tree: refused before anything is written.
        let cgroup = backend::open(spec::Backend::Cgroup, &at);
        let e = request(&*cgroup, 250_000, 2_000_000_000, None, &limits()).unwrap_err();
        assert!(e.to_string().contains("1 s"), "{e}");
        let e = request(&*cgroup, 250_000, 40_000_000, None, &limits()).unwrap_err();
        assert!(e.to_string().contains("no cgroup CPU controller"), "{e}");
    }

    #[test]
    fn made_carries_the_notes_that_concern_its_backend() {
        let dir = tempfile::tempdir().unwrap();
        let at = places(dir.path());
        let req = |backend| Request {
            share_ppm: 250_000,
            period_ns: 40_000_000,
            cpu: None,
            backend,
        };
        // Real-time backends are bounded by RT throttling and the fair server, and hold
        // only the threads they found: what the process starts is said to run outside.
        for kind in [spec::Backend::Server, spec::Backend::Deadline] {
            let b = backend::open(kind, &at);
            let made = Made::new(&*b, &req(kind), 42, &limits());
            assert_eq!(made.runtime_ns, 10_000_000);
            let mut expect = limits().notes();
            expect.push(offspring_note(kind));
            assert_eq!(made.notes, expect, "{kind}");
            assert!(
                made.notes[0].starts_with("RT throttling"),
                "{:?}",
                made.notes
            );
            assert!(!b.holds_what_it_starts(), "{kind}");
        }
        let deadline = offspring_note(spec::Backend::Deadline);
        assert!(
            deadline.starts_with("only the threads the process has now hold the reservation (a program started here: its one thread, reserved before exec): SCHED_DEADLINE is set with reset-on-fork"),
            "{deadline}"
        );
        assert!(
            deadline.ends_with("or use --backend cgroup, whose cap holds for everything the program starts (a cap, not a guarantee)"),
            "{deadline}"
        );
        assert!(offspring_note(spec::Backend::Server)
            .contains("the server schedules the threads it found at admission"));
        // A cgroup cap is on ordinary work: only its own notes; what the program starts shares it.
        let cgroup = backend::open(spec::Backend::Cgroup, &at);
        let made = Made::new(&*cgroup, &req(spec::Backend::Cgroup), 42, &limits());
        assert_eq!(made.notes.len(), 2, "{:?}", made.notes);
        assert!(made.notes[0].contains("a cap, not a guarantee"));
        assert!(made.notes[1].starts_with("threads and processes it starts join its group"));
        assert!(made.notes.iter().all(|n| !n.contains("RT throttling")));
        assert!(cgroup.holds_what_it_starts());
    }

    fn exited(process_ns: u64, with_children_ns: u64) -> Exited {
        Exited {
            pid: 42,
            process_cpu_ns: Some(process_ns),
            with_children_cpu_ns: Some(with_children_ns),
        }
    }

    #[test]
    fn cpu_split_separates_the_reserved_thread_from_what_it_started() {
        // `timeout 3 sh -c 'loop'`: timeout waits, its child does the work.
        let split = CpuSplit::of(&exited(4_000_000, 2_990_000_000), Some(4_000_000)).unwrap();
        assert_eq!(
            split,
            CpuSplit {
                reserved_ns: 4_000_000,
                threads_ns: 0,
                children_ns: 2_986_000_000
            }
        );
        assert!(split.worth_saying());
        assert_eq!(
            split.warning(42, spec::Backend::Deadline),
            format!("process 42 used 4 ms of CPU time in its reserved thread, but 2.986 s ran outside the reservation (2.986 s in processes it started) — SCHED_DEADLINE is set with reset-on-fork (without it the kernel refuses the process every fork), so what it starts runs as SCHED_OTHER; {ADVICE}")
        );
        // Worker threads: the process's time beyond its main thread's.
        let split = CpuSplit::of(&exited(1_000_000_000, 1_000_000_000), Some(100_000_000)).unwrap();
        assert_eq!(
            (split.reserved_ns, split.threads_ns, split.children_ns),
            (100_000_000, 900_000_000, 0)
        );
        let text = split.warning(7, spec::Backend::Server);
        assert!(text.contains("(900 ms in threads it started)"), "{text}");
        assert!(
            text.contains("the server schedules the threads it found at admission"),
            "{text}"
        );
        // The work in the reserved thread itself: nothing to say.
        let own = CpuSplit::of(&exited(2_000_000_000, 2_010_000_000), Some(2_000_000_000)).unwrap();
        assert!(!own.worth_saying(), "{own:?}");
        // Little unreserved time, even as a large share, is not worth a word.
        let small = CpuSplit::of(&exited(1_000_000, 11_000_000), Some(1_000_000)).unwrap();
        assert!(!small.worth_saying(), "{small:?}");
        // Without the main thread's figure, the whole process counts as reserved.
        let whole = CpuSplit::of(&exited(50_000_000, 50_000_000), None).unwrap();
        assert_eq!(whole.unreserved_ns(), 0);
        // Without the process's own figure there is no split.
        let unknown = Exited {
            process_cpu_ns: None,
            ..exited(0, 5)
        };
        assert_eq!(CpuSplit::of(&unknown, Some(1)), None);
    }

    /// A backend that holds nothing, as the deadline or cgroup one would see it.
    struct Nothing(spec::Backend);

    impl Backend for Nothing {
        fn kind(&self) -> spec::Backend {
            self.0
        }
        fn cap_ppm(&self, _limits: &Limits) -> u64 {
            spec::PPM
        }
        fn reserve(&self, _pid: u32, _req: &Request) -> Result<()> {
            Ok(())
        }
        fn release(&self, _pid: u32) -> Result<bool> {
            Ok(true)
        }
        fn release_exited(&self, _pid: u32) -> Result<()> {
            Ok(())
        }
        fn list(&self, _into: &mut Listing) {}
        fn holds_what_it_starts(&self) -> bool {
            self.0 == spec::Backend::Cgroup
        }
    }

    fn run_started(kind: spec::Backend, script: &str) -> Ended {
        let backend = Nothing(kind);
        let req = Request {
            share_ppm: 100_000,
            period_ns: 20_000_000,
            cpu: None,
            backend: kind,
        };
        let cpus = tame_rt::sched::allowed_cpus();
        let limits = Limits {
            online: cpus,
            ..limits()
        };
        let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        let at = Places {
            root: Root::system(),
            ..places(std::path::Path::new("/nonexistent"))
        };
        start(&backend, &at, &req, &limits, &argv)
            .unwrap()
            .wait()
            .unwrap()
    }

    /// The work in a child of the reserved process (a subshell here, `timeout` in the
    /// issue): said at the end, with the backend's reason; not for a cgroup, which holds it.
    #[test]
    fn work_done_outside_the_reserved_thread_is_said_at_the_end() {
        let forking = "(i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done); exit 3";
        let ended = run_started(spec::Backend::Deadline, forking);
        assert_eq!(ended.code, 3);
        let split = ended.unreserved.expect("the child's work is said");
        assert!(split.children_ns > 20_000_000, "{split:?}");
        assert!(split.children_ns > 5 * split.reserved_ns, "{split:?}");
        let ended = run_started(spec::Backend::Cgroup, forking);
        assert_eq!(
            ended,
            Ended {
                code: 3,
                unreserved: None
            }
        );
        // The same work in the reserved process itself: nothing to say.
        let own = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exit 4";
        assert_eq!(
            run_started(spec::Backend::Deadline, own),
            Ended {
                code: 4,
                unreserved: None
            }
        );
    }

    #[test]
    fn nothing_held_is_nothing_released() {
        let dir = tempfile::tempdir().unwrap();
        let at = places(dir.path());
        let e = release(&at, 999_999_999).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains("holds no reservation"));
        let listing = list(&at);
        assert!(listing.reservations.is_empty());
        assert_eq!(
            listing.notes,
            vec![format!("no scheduling server at {}", at.socket.display())]
        );
    }
}
