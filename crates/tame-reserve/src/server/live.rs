//! The server's live figures for `tame serve --metrics`: counters the request threads
//! bump (atomics), and a snapshot of the clients the accept loop publishes after each
//! request and once a second. A reader takes the snapshot (an `Arc` clone under a lock
//! held for nothing else) and formats it with no lock held: the scheduler threads never
//! see a reader, and a reader never waits on the server's own locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tame_host::Root;

use super::protocol::Status;

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
}
