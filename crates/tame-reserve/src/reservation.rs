//! Making, listing and releasing reservations through any [`Backend`]: a request is
//! validated before anything is written; a program is started held, reserved for, and only
//! then runs, so not one instruction of it runs unreserved; release finds the reservation
//! wherever it is held.

use std::ffi::OsString;

use serde::Serialize;
use tame_host::{CpuList, Root};
use tame_launch::spawn::{self, Launched, Placement};

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
    launched: Launched,
    pid: u32,
}

/// Start `argv` with `req` in place from its first instruction: the child is placed on the
/// backend's CPUs and held before exec until the reservation holds. Refused, it never runs.
pub fn start<'a>(
    backend: &'a dyn Backend,
    req: &Request,
    limits: &Limits,
    argv: &[OsString],
) -> Result<Running<'a>> {
    let placement = Placement::on_cpus(CpuList::from_cpus(backend.program_cpus(req, limits)));
    let held = spawn::spawn_held(&placement, argv)?;
    let pid = held.pid();
    // On an error `held` is dropped: the child gives up before exec.
    backend.reserve(pid, req)?;
    match held.go() {
        Ok(launched) => Ok(Running {
            backend,
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

    /// Wait for the program (passing on signals sent to us), give the share back, and return
    /// the exit code a shell would show.
    pub fn wait(mut self) -> Result<i32> {
        let status = spawn::wait_forwarding(&mut self.launched);
        // The program is gone: give the share back now, even if waiting failed.
        self.backend.release_exited(self.pid)?;
        Ok(spawn::exit_code(status?))
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
        // Real-time backends are bounded by RT throttling and the fair server.
        for kind in [spec::Backend::Server, spec::Backend::Deadline] {
            let made = Made::new(&*backend::open(kind, &at), &req(kind), 42, &limits());
            assert_eq!(made.runtime_ns, 10_000_000);
            assert_eq!(made.notes, limits().notes(), "{kind}");
            assert!(
                made.notes[0].starts_with("RT throttling"),
                "{:?}",
                made.notes
            );
        }
        // A cgroup cap is on ordinary work: only its own note.
        let cgroup = backend::open(spec::Backend::Cgroup, &at);
        let made = Made::new(&*cgroup, &req(spec::Backend::Cgroup), 42, &limits());
        assert_eq!(made.notes.len(), 1, "{:?}", made.notes);
        assert!(made.notes[0].contains("a cap, not a guarantee"));
        assert!(made.notes.iter().all(|n| !n.contains("RT throttling")));
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
