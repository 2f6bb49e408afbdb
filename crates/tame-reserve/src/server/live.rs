//! The server's live figures for `tame serve --metrics`: counters the request threads
//! bump (atomics), and a snapshot of the clients the accept loop publishes after each
//! request and once a second. A reader takes the snapshot (an `Arc` clone under a lock
//! held for nothing else) and formats it with no lock held: the scheduler threads never
//! see a reader, and a reader never waits on the server's own locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Instant;

use tame_host::Root;

use super::protocol::{ClientInfo, Status};
use super::scheduler::{Client, Cpu};

/// What the server held when it last published.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `None` before the first publication.
    pub status: Option<Status>,
    /// CPUs with a scheduler thread running.
    pub scheduler_cpus: Vec<u32>,
    pub watchdog_alive: bool,
}

/// Why a request was turned down, as the protocol names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turned {
    Invalid,
    Refused,
    Failed,
}

#[derive(Debug)]
pub struct Live {
    pub root: Root,
    pub started_unix_ns: u64,
    started: Instant,
    pub requests: AtomicU64,
    pub admitted: AtomicU64,
    pub released: AtomicU64,
    /// Per [`Turned`]: invalid, refused (admission control or policy), failed.
    turned: [AtomicU64; 3],
    /// Connections refused before a request was read (too many open, peer unknown).
    pub connections_refused: AtomicU64,
    snapshot: Mutex<Arc<Snapshot>>,
}

impl Live {
    pub fn new(root: Root) -> Self {
        Self {
            root,
            started_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            started: Instant::now(),
            requests: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            released: AtomicU64::new(0),
            turned: Default::default(),
            connections_refused: AtomicU64::new(0),
            snapshot: Mutex::new(Arc::new(Snapshot::default())),
        }
    }

    pub fn uptime_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    pub fn count_turned(&self, why: Turned) {
        self.turned[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn turned(&self, why: Turned) -> u64 {
        self.turned[why as usize].load(Ordering::Relaxed)
    }

    /// Replace the snapshot (the lock is held for the swap only).
    pub fn publish(&self, snapshot: Snapshot) {
        let fresh = Arc::new(snapshot);
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    }

    /// The latest snapshot (the lock is held for the clone only).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// One CPU's clients for the live figures, never waiting: `None` while another thread
/// holds its state. The lock is held for the copy only; a publisher (SCHED_OTHER) preempted
/// there delays nothing of the scheduler's (SCHED_FIFO), which takes the lock with
/// `try_lock` too and looks again at its next wake-up. A lock poisoned by a panic still
/// holds the clients: read it, so that publication never stops.
pub(super) fn clients_now(cpu: &Cpu) -> Option<Vec<Client>> {
    match cpu.state.try_lock() {
        Ok(st) => Some(st.clients.clone()),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner().clients.clone()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The clients to publish: each CPU's as read now, or for a CPU whose lock was busy
/// (`None`) those the last snapshot had there — its series go on rather than vanish for a
/// second.
pub(super) fn merge(
    per_cpu: impl IntoIterator<Item = (u32, Option<Vec<ClientInfo>>)>,
    last: Option<&Status>,
) -> Vec<ClientInfo> {
    let mut all = Vec::new();
    for (cpu, now) in per_cpu {
        match now {
            Some(clients) => all.extend(clients),
            None => all.extend(
                last.iter()
                    .flat_map(|s| s.clients.iter())
                    .filter(|c| c.cpu == cpu)
                    .cloned(),
            ),
        }
    }
    all.sort_by_key(|c| c.pid);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_snapshots_are_read_back() {
        let live = Live::new(Root::new("/"));
        live.count_turned(Turned::Refused);
        live.count_turned(Turned::Refused);
        live.count_turned(Turned::Failed);
        assert_eq!(live.turned(Turned::Refused), 2);
        assert_eq!(live.turned(Turned::Invalid), 0);
        assert_eq!(live.turned(Turned::Failed), 1);
        assert!(live.snapshot().status.is_none());
        let held = live.snapshot();
        live.publish(Snapshot {
            scheduler_cpus: vec![3],
            watchdog_alive: true,
            ..Snapshot::default()
        });
        // A reader keeps what it took; the next reader sees the new one.
        assert!(held.scheduler_cpus.is_empty());
        assert_eq!(live.snapshot().scheduler_cpus, vec![3]);
        assert!(live.started_unix_ns > 0);
    }

    fn info(pid: u32, cpu: u32) -> ClientInfo {
        ClientInfo {
            pid,
            cpu,
            share_ppm: 100_000,
            period_ns: 10_000_000,
            tids: vec![pid],
        }
    }

    #[test]
    fn a_busy_cpu_keeps_its_last_clients_and_a_poisoned_one_is_read() {
        let cpu = Arc::new(Cpu::new());
        assert_eq!(clients_now(&cpu).map(|c| c.len()), Some(0));
        let held = cpu.state.lock().unwrap();
        assert!(clients_now(&cpu).is_none(), "a busy lock is not waited for");
        drop(held);
        let poisoner = cpu.clone();
        let _ = std::thread::spawn(move || {
            let _st = poisoner.state.lock().unwrap();
            panic!("a scheduler thread panics holding its state");
        })
        .join();
        assert!(cpu.state.is_poisoned());
        assert_eq!(clients_now(&cpu).map(|c| c.len()), Some(0));

        let last = Status {
            version: 1,
            server_pid: 1,
            watchdog_pid: 2,
            cap_ppm: 900_000,
            clients: vec![info(30, 3), info(10, 1), info(20, 2)],
            notes: vec![],
        };
        // CPU 1 read now (its client left), CPU 2 busy (kept), CPU 3 read (a new client).
        let got = merge(
            [(1, Some(vec![])), (2, None), (3, Some(vec![info(40, 3)]))],
            Some(&last),
        );
        assert_eq!(got.iter().map(|c| c.pid).collect::<Vec<_>>(), vec![20, 40]);
        // Busy before any snapshot: nothing to keep.
        assert!(merge([(2, None)], None).is_empty());
    }
}
