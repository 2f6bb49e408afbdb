//! The three ways to hold a reservation behind one interface: the scheduling server
//! (`tame serve`), SCHED_DEADLINE and a cgroup bandwidth cap. What differs between them —
//! which CPU a request runs on, its admission cap, extra checks, how a reservation is made,
//! released and listed — is a [`Backend`] method; what they share lives in
//! [`crate::reservation`].

use std::path::PathBuf;

use serde::Serialize;
use tame_host::Root;

use crate::bandwidth::{self, Limits};
use crate::error::Result;
use crate::server::client;
use crate::server::protocol::Request as Wire;
use crate::spec::{self, Request, DEFAULT_CAP_PPM, PPM};
use crate::{cgroup, deadline};

/// Where the backends find what they work with.
#[derive(Clone, Debug)]
pub struct Places {
    /// The host (`/`, or a fixture tree).
    pub root: Root,
    /// The scheduling server's socket.
    pub socket: PathBuf,
    /// Where cgroup and deadline reservations keep their journals.
    pub state_dir: PathBuf,
}

/// One reservation found by [`Backend::list`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reservation {
    pub backend: spec::Backend,
    pub pid: u32,
    pub share_ppm: u64,
    pub period_ns: u64,
    pub cpu: Option<u32>,
    pub detail: String,
}

/// What listing found, and what it could not look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub reservations: Vec<Reservation>,
    pub notes: Vec<String>,
}

/// One way to hold a reservation.
pub trait Backend {
    fn kind(&self) -> spec::Backend;

    /// The CPU a request runs on, from the one asked for (`None`: any CPU), or why not.
    fn cpu(&self, asked: Option<u32>, limits: &Limits) -> Result<Option<u32>> {
        let _ = limits;
        Ok(asked)
    }

    /// The most one reservation may ask for, in ppm of a CPU.
    fn cap_ppm(&self, limits: &Limits) -> u64;

    /// Checks of a request that only this backend needs; nothing is written.
    fn check(&self, req: &Request) -> Result<()> {
        let _ = req;
        Ok(())
    }

    /// The CPUs a program started for `req` is placed on before it runs.
    fn program_cpus(&self, req: &Request, limits: &Limits) -> Vec<u32> {
        req.cpu.map_or_else(|| limits.online.clone(), |c| vec![c])
    }

    /// Hold `req` for every thread of the running process `pid`.
    fn reserve(&self, pid: u32, req: &Request) -> Result<()>;

    /// Give back `pid`'s reservation; `Ok(false)` when this backend holds none for it.
    fn release(&self, pid: u32) -> Result<bool>;

    /// Give back what outlives the program `pid`, which has exited.
    fn release_exited(&self, pid: u32) -> Result<()>;

    /// Add this backend's reservations (or why they could not be listed) to `into`.
    fn list(&self, into: &mut Listing);

    /// What the user should know about a reservation of this kind: by default what
    /// bounds real-time work here (RT throttling, the fair server), which is what the
    /// server and deadline backends hand out, and that they hold only the threads found.
    fn notes(&self, limits: &Limits) -> Vec<String> {
        let mut notes = limits.notes();
        notes.push(crate::reservation::offspring_note(self.kind()));
        notes
    }

    /// Whether threads and processes the reserved process starts later are held by the
    /// reservation too (a cgroup: they join it), or run outside it (the server and
    /// SCHED_DEADLINE: raised with reset-on-fork, only the threads found at admission).
    fn holds_what_it_starts(&self) -> bool {
        false
    }
}

/// The backend of `kind`.
pub fn open(kind: spec::Backend, at: &Places) -> Box<dyn Backend> {
    match kind {
        spec::Backend::Server => Box::new(Server {
            socket: at.socket.clone(),
            root: at.root.clone(),
            journal_dir: at.state_dir.clone(),
        }),
        spec::Backend::Deadline => Box::new(Deadline {
            root: at.root.clone(),
            state_dir: at.state_dir.clone(),
        }),
        spec::Backend::Cgroup => Box::new(Cgroup {
            root: at.root.clone(),
            state_dir: at.state_dir.clone(),
        }),
    }
}

/// The user-space scheduling server: pins, so it needs a CPU (default the highest CPU of
/// the applied isolated and shared partitions, else the highest online).
struct Server {
    socket: PathBuf,
    root: Root,
    /// Where tame apply's journal says which partitions are applied.
    journal_dir: PathBuf,
}

impl Server {
    /// The highest CPU the applied spec's isolated and shared partitions hold: the server
    /// hands out only those (and CPUs isolated at boot), never the system partition's.
    fn partition_cpu(&self) -> Option<u32> {
        tame_partition::Applied::read(&self.root, &self.journal_dir)
            .ok()
            .flatten()?
            .cpus_apart_from_system()
            .last()
    }
}

impl Backend for Server {
    fn kind(&self) -> spec::Backend {
        spec::Backend::Server
    }

    fn cpu(&self, asked: Option<u32>, limits: &Limits) -> Result<Option<u32>> {
        Ok(asked
            .or_else(|| self.partition_cpu())
            .or_else(|| limits.online.last().copied()))
    }

    fn cap_ppm(&self, _limits: &Limits) -> u64 {
        DEFAULT_CAP_PPM
    }

    fn reserve(&self, pid: u32, req: &Request) -> Result<()> {
        client::call(
            &self.socket,
            &Wire::Reserve {
                pid,
                share_ppm: req.share_ppm,
                period_ns: req.period_ns,
                cpu: req.cpu.unwrap_or(0),
            },
        )?;
        Ok(())
    }

    fn release(&self, pid: u32) -> Result<bool> {
        // No server, or not one of its clients: nothing held here.
        let Ok(status) = client::call(&self.socket, &Wire::List) else {
            return Ok(false);
        };
        if !status.clients.iter().any(|c| c.pid == pid) {
            return Ok(false);
        }
        client::call(&self.socket, &Wire::Release { pid })?;
        Ok(true)
    }

    fn release_exited(&self, pid: u32) -> Result<()> {
        // The server also drops clients that exited; telling it is only sooner.
        let _ = client::call(&self.socket, &Wire::Release { pid });
        Ok(())
    }

    fn list(&self, into: &mut Listing) {
        match client::call(&self.socket, &Wire::List) {
            Ok(status) => {
                into.reservations
                    .extend(status.clients.into_iter().map(|c| Reservation {
                        backend: spec::Backend::Server,
                        pid: c.pid,
                        share_ppm: c.share_ppm,
                        period_ns: c.period_ns,
                        cpu: Some(c.cpu),
                        detail: format!("threads {:?}", c.tids),
                    }));
            }
            Err(_) => into
                .notes
                .push(format!("no scheduling server at {}", self.socket.display())),
        }
    }
}

/// SCHED_DEADLINE: the kernel admits and enforces; it cannot pin outside an exclusive cpuset.
struct Deadline {
    root: Root,
    /// Where its journals are (one per reservation: deadline::journal_dir).
    state_dir: PathBuf,
}

impl Backend for Deadline {
    fn kind(&self) -> spec::Backend {
        spec::Backend::Deadline
    }

    fn cpu(&self, asked: Option<u32>, _limits: &Limits) -> Result<Option<u32>> {
        match asked {
            Some(cpu) => Err(crate::error::invalid(deadline::pinning_refusal(cpu))),
            None => Ok(None),
        }
    }

    fn cap_ppm(&self, limits: &Limits) -> u64 {
        limits.deadline_cap_ppm()
    }

    fn program_cpus(&self, _req: &Request, limits: &Limits) -> Vec<u32> {
        limits.online.clone()
    }

    fn reserve(&self, pid: u32, req: &Request) -> Result<()> {
        deadline::reserve_pid(&self.root, &self.state_dir, pid, req)?;
        Ok(())
    }

    fn release(&self, pid: u32) -> Result<bool> {
        let held = bandwidth::deadline_threads(&self.root)
            .iter()
            .any(|t| t.pid == pid);
        if !held {
            return Ok(false);
        }
        let info = tame_launch::proc::inspect(&self.root, pid)?;
        tame_launch::detach::check_owner(&info, crate::reservation::caller_uid())?;
        if !tame_host::journal::journal_path(&deadline::journal_dir(&self.state_dir, pid)).exists()
        {
            return Err(crate::error::invalid(format!(
                "process {pid} runs under SCHED_DEADLINE, but not by a reservation of tame's (no journal in {}) — return it yourself (chrt -o -p 0 {pid}), or give the --state-dir it was reserved with",
                deadline::journal_dir(&self.state_dir, pid).display()
            )));
        }
        deadline::release_pid(&self.root, &self.state_dir, pid)?;
        Ok(true)
    }

    fn release_exited(&self, pid: u32) -> Result<()> {
        // The kernel's reservation ends with the threads; the journal goes with it.
        deadline::release_pid(&self.root, &self.state_dir, pid)?;
        Ok(())
    }

    fn list(&self, into: &mut Listing) {
        into.reservations.extend(
            bandwidth::deadline_threads(&self.root)
                .into_iter()
                .map(|t| Reservation {
                    backend: spec::Backend::Deadline,
                    pid: t.pid,
                    share_ppm: t.share_ppm(),
                    period_ns: t.period_ns,
                    cpu: None,
                    detail: format!("thread {} ({})", t.tid, t.comm),
                }),
        );
    }
}

/// A cgroup CPU bandwidth cap, journaled: a cap, not a guarantee.
struct Cgroup {
    root: Root,
    state_dir: PathBuf,
}

impl Backend for Cgroup {
    fn kind(&self) -> spec::Backend {
        spec::Backend::Cgroup
    }

    fn cap_ppm(&self, _limits: &Limits) -> u64 {
        PPM
    }

    fn check(&self, req: &Request) -> Result<()> {
        cgroup::quota_period_us(req)?;
        cgroup::controller(&self.root)?;
        Ok(())
    }

    fn reserve(&self, pid: u32, req: &Request) -> Result<()> {
        cgroup::reserve_pid(&self.root, &self.state_dir, pid, req)?;
        Ok(())
    }

    fn release(&self, pid: u32) -> Result<bool> {
        cgroup::release_pid(&self.root, &self.state_dir, pid)
    }

    fn release_exited(&self, pid: u32) -> Result<()> {
        cgroup::release_pid(&self.root, &self.state_dir, pid)?;
        Ok(())
    }

    fn list(&self, into: &mut Listing) {
        into.reservations.extend(
            cgroup::list(&self.state_dir)
                .into_iter()
                .map(|r| Reservation {
                    backend: spec::Backend::Cgroup,
                    pid: r.pid,
                    share_ppm: r.share_ppm,
                    period_ns: r.period_us * 1_000,
                    cpu: None,
                    detail: r.group,
                }),
        );
    }

    /// Only its own: a cap on ordinary (SCHED_OTHER) work, which RT throttling and
    /// the fair server do not bound.
    fn notes(&self, _limits: &Limits) -> Vec<String> {
        vec![
            "cgroup bandwidth is a cap, not a guarantee: the process may use at most this share, but may get less".into(),
            "threads and processes it starts join its group and share the cap with it; any still running when the reservation is released leave the group, uncapped".into(),
        ]
    }

    fn holds_what_it_starts(&self) -> bool {
        true
    }
}
