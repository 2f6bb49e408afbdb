//! One CPU's scheduler thread: SCHED_FIFO 99 pinned to its CPU, it raises the EDF choice
//! among its clients to SCHED_FIFO 98 for the slice and drops it back to nice 19
//! afterwards. Every change goes through [`Thread`], which looks first: a thread that
//! exited (or whose id now names another thread) is dropped the moment it is seen, and
//! never changed again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tame_host::Root;
use tame_rt::clock::{monotonic_ns, sleep_until};
use tame_rt::sched::{self, ThreadSched};

use super::edf::Edf;
use super::protocol::ClientInfo;
use super::thread::{Process, SetError, Thread};
use super::watchdog::Watchdog;
use super::{CLIENT_PRIORITY, SERVER_PRIORITY};
use crate::error::{failed, invalid, Result};
use crate::spec;

/// Clients wait at SCHED_OTHER nice 19 between slices. SCHED_IDLE would be the obvious
/// choice, but right after each slice the fair class hands a task just lowered to SCHED_IDLE
/// ~19 % of the CPU (measured here), at nice 19 ~8 %: less time in small, cache-cold pieces.
const WAIT_NICE: i32 = 19;
/// The longest a scheduler thread sleeps before looking for new or vanished clients.
const POLL_NS: u64 = 50_000_000;
/// How often client processes and threads are checked for having exited.
const LIVENESS_NS: u64 = 100_000_000;

/// A client as the server holds it.
#[derive(Clone, Debug)]
pub struct Client {
    pub info: ClientInfo,
    /// Who asked for it (the policy's per-user share counts it).
    pub asker_uid: u32,
    pub process: Arc<Process>,
    /// Its threads at admission, each with its state from before.
    pub threads: Vec<Thread>,
}

#[derive(Default)]
pub struct CpuState {
    pub clients: Vec<Client>,
    /// Released or vanished clients the scheduler thread must restore.
    pub leaving: Vec<Client>,
}

pub struct Cpu {
    pub state: Mutex<CpuState>,
    pub generation: AtomicU64,
    pub acked: AtomicU64,
}

impl Default for Cpu {
    fn default() -> Self {
        Self::new()
    }
}

impl Cpu {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(CpuState::default()),
            generation: AtomicU64::new(0),
            acked: AtomicU64::new(0),
        }
    }

    /// Tell the scheduler thread its clients changed; wait (at most a second) until it
    /// has taken the change in — released clients are restored by then. False on timeout.
    pub fn changed_and_wait(&self) -> bool {
        let generation = self.generation.fetch_add(1, Ordering::Release) + 1;
        let deadline = monotonic_ns() + 1_000_000_000;
        while self.acked.load(Ordering::Acquire) < generation {
            if monotonic_ns() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

/// What a client waits at between slices.
pub fn waiting() -> ThreadSched {
    ThreadSched::ordinary(libc::SCHED_OTHER, WAIT_NICE)
}

fn raised() -> ThreadSched {
    ThreadSched {
        policy: libc::SCHED_FIFO,
        priority: CLIENT_PRIORITY,
        nice: 0,
        // Threads a raised client starts begin as SCHED_OTHER, never inheriting its slice.
        reset_on_fork: true,
        ..ThreadSched::default()
    }
}

/// Give a client's threads their state from before, and tell the watchdog to forget them.
pub fn restore(root: &Root, watchdog: &Watchdog, threads: &[Thread]) {
    for t in threads {
        let _ = t.restore(root);
        watchdog.forget(t.tid);
    }
}

/// Everything a scheduler thread needs.
pub struct Setup {
    pub cpu: u32,
    pub shared: Arc<Cpu>,
    pub watchdog: Arc<Watchdog>,
    pub stop: Arc<AtomicBool>,
    pub root: Root,
}

/// The thread's whole life; `ready` says whether it could take its CPU at FIFO 99.
pub fn run(s: Setup, ready: mpsc::Sender<Result<()>>) {
    let cpu = s.cpu;
    let setup = sched::pin_current_thread(cpu)
        .map_err(|e| invalid(format!("cannot run the server on CPU {cpu}: {e} — the CPU may be outside this server's cpuset (or a partition is being applied: retry)")))
        .and_then(|()| {
            let me = ThreadSched {
                policy: libc::SCHED_FIFO,
                priority: SERVER_PRIORITY,
                ..ThreadSched::default()
            };
            sched::set_thread_sched(0, &me).map_err(|e| {
                failed(format!(
                    "cannot run the server thread at SCHED_FIFO {SERVER_PRIORITY}: {e} — run tame serve as root (or with CAP_SYS_NICE)"
                ))
            })
        });
    let ok = setup.is_ok();
    let _ = ready.send(setup);
    if ok {
        Loop::new(&s).run();
    }
    // Shutdown: everyone gets back what they had.
    let st = s.shared.state.lock().unwrap_or_else(|p| p.into_inner());
    for c in st.clients.iter().chain(st.leaving.iter()) {
        restore(&s.root, &s.watchdog, &c.threads);
    }
}

struct Loop<'a> {
    s: &'a Setup,
    edf: Edf,
    clients: Vec<Client>,
    /// Threads found exited or reused: never changed again.
    dropped: BTreeSet<(u32, u32)>,
    seen: u64,
    running: Option<u32>,
    /// Per client: the release its period began with, and its CPU time then.
    period_start: BTreeMap<u32, (u64, u64)>,
}

impl<'a> Loop<'a> {
    fn new(s: &'a Setup) -> Self {
        Self {
            s,
            edf: Edf::new(),
            clients: Vec::new(),
            dropped: BTreeSet::new(),
            seen: 0,
            running: None,
            period_start: BTreeMap::new(),
        }
    }

    fn run(mut self) {
        let s = self.s;
        let mut misses = Vec::new();
        let mut next_liveness = 0u64;
        while !s.stop.load(Ordering::Relaxed) {
            let now = monotonic_ns();
            self.take_changes(now);
            if now >= next_liveness {
                next_liveness = if self.remove_exited() {
                    now + LIVENESS_NS
                } else {
                    // The admitting thread holds the lock: look again soon, but go on
                    // scheduling meanwhile (a raised client must still be lowered on time).
                    now + 1_000_000
                };
            }
            misses.clear();
            self.edf.replenish(now, &mut misses);
            self.count_budgets();
            let decision = self.edf.decide_late(now);
            if decision.run != self.running {
                if let Some(pid) = self.running {
                    self.set_client(pid, &waiting());
                }
                if let Some(pid) = decision.run {
                    self.set_client(pid, &raised());
                }
                self.running = decision.run;
            }
            sleep_until(
                decision
                    .until_ns
                    .min(now + POLL_NS)
                    .min(next_liveness.max(now)),
            );
        }
    }

    /// New and leaving clients. try_lock: the admitting thread may hold the lock while a
    /// raised client keeps it off this CPU; never wait for it here, look again at the next
    /// wake-up.
    fn take_changes(&mut self, now: u64) {
        let generation = self.s.shared.generation.load(Ordering::Acquire);
        if generation == self.seen {
            return;
        }
        let Ok(mut st) = self.s.shared.state.try_lock() else {
            return;
        };
        for gone in st.leaving.drain(..) {
            self.edf.remove(gone.info.pid);
            if self.running == Some(gone.info.pid) {
                self.running = None;
            }
            restore(&self.s.root, &self.s.watchdog, &gone.threads);
        }
        for c in &st.clients {
            if !self.clients.iter().any(|k| k.info.pid == c.info.pid) {
                self.edf.add(
                    c.info.pid,
                    spec::runtime_ns(c.info.share_ppm, c.info.period_ns),
                    c.info.period_ns,
                    now,
                );
            }
        }
        self.clients = st.clients.clone();
        drop(st);
        let pids: BTreeSet<u32> = self.clients.iter().map(|c| c.info.pid).collect();
        self.dropped.retain(|(pid, _)| pids.contains(pid));
        self.seen = generation;
        self.s.shared.acked.store(generation, Ordering::Release);
    }

    /// Drop threads that exited or were reused; hand clients whose process exited back
    /// (their share returns). False when the state lock was busy.
    fn remove_exited(&mut self) -> bool {
        let root = &self.s.root;
        for c in &self.clients {
            for t in &c.threads {
                if !self.dropped.contains(&(t.pid, t.tid)) && !t.is_same(root) {
                    self.dropped.insert((t.pid, t.tid));
                    self.s.watchdog.forget(t.tid);
                }
            }
        }
        let dead: Vec<u32> = self
            .clients
            .iter()
            .filter(|c| !c.process.alive(root))
            .map(|c| c.info.pid)
            .collect();
        if dead.is_empty() {
            return true;
        }
        let Ok(mut st) = self.s.shared.state.try_lock() else {
            return false;
        };
        for pid in dead {
            if let Some(i) = st.clients.iter().position(|c| c.info.pid == pid) {
                let c = st.clients.remove(i);
                st.leaving.push(c);
            }
        }
        drop(st);
        self.s.shared.generation.fetch_add(1, Ordering::Release);
        true
    }

    /// Budgets count the CPU time each client really got since its period began, read
    /// from the kernel: a client also runs a little while it waits (the fair class places
    /// it well after each slice) and loses time when the vCPU is stolen — wall-clock
    /// slices would give ~10 % too much here, CPU-time accounting gives the share.
    fn count_budgets(&mut self) {
        for job in self.edf.jobs().to_vec() {
            let Some(client) = self.clients.iter().find(|c| c.info.pid == job.pid) else {
                continue;
            };
            let exec = self.cpu_time_ns(client);
            let base = match self.period_start.get(&job.pid) {
                Some(&(release, base)) if release == job.next_release_ns => base,
                _ => {
                    self.period_start
                        .insert(job.pid, (job.next_release_ns, exec));
                    exec
                }
            };
            self.edf.set_used(job.pid, exec.saturating_sub(base));
        }
        let clients = &self.clients;
        self.period_start
            .retain(|pid, _| clients.iter().any(|c| c.info.pid == *pid));
    }

    /// CPU time of a client's live threads (schedstat's first field, ns).
    fn cpu_time_ns(&self, client: &Client) -> u64 {
        client
            .threads
            .iter()
            .filter(|t| !self.dropped.contains(&(t.pid, t.tid)))
            .filter_map(|t| {
                let task = self.s.root.process(t.pid).task(t.tid);
                task.schedstat().ok().map(|s| s.run_ns)
            })
            .sum()
    }

    fn set_client(&mut self, pid: u32, s: &ThreadSched) {
        let Some(c) = self.clients.iter().find(|c| c.info.pid == pid) else {
            return;
        };
        for t in &c.threads {
            if self.dropped.contains(&(t.pid, t.tid)) {
                continue;
            }
            if let Err(SetError::Gone) = t.set_sched(&self.s.root, s) {
                self.dropped.insert((t.pid, t.tid));
                self.s.watchdog.forget(t.tid);
            }
        }
    }
}
