//! One CPU's scheduler thread: SCHED_FIFO 99 pinned to its CPU, it raises the EDF choice
//! among its clients to SCHED_FIFO 98 for the slice and drops it back to nice 19
//! afterwards. It looks before every change: a thread that exited (or whose id now names
//! another thread) is dropped the moment it is seen, and never changed again — seen
//! through a descriptor per thread that fires on exit, drained before each switch, or in
//! `/proc` ([`Thread`]) where there is none. Its own CPU time for each client is charged
//! to that client ([`Account`]): a client with many threads pays for them from its share.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tame_host::Root;
use tame_rt::clock::{monotonic_ns, sleep_until, thread_cpu_ns};
use tame_rt::sched::{self, ThreadSched};

use super::account::Account;
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

/// The applied partition whose cgroup a scheduler thread joins to reach its CPU.
pub struct Home {
    pub partition: String,
    /// Its cgroup in the v1 cpuset hierarchy, where a thread joins alone.
    pub group: tame_host::cgroup::Group,
}

/// Everything a scheduler thread needs.
pub struct Setup {
    pub cpu: u32,
    /// Where it goes before pinning itself; `None`: the CPU is in the server's cpuset.
    pub home: Option<Home>,
    pub shared: Arc<Cpu>,
    pub watchdog: Arc<Watchdog>,
    pub stop: Arc<AtomicBool>,
    pub root: Root,
}

/// The thread's whole life; `ready` says whether it could take its CPU at FIFO 99.
pub fn run(s: Setup, ready: mpsc::Sender<Result<()>>) {
    let cpu = s.cpu;
    let setup = join_home(&s)
        .and_then(|()| sched::pin_current_thread(cpu).map_err(|e| invalid(format!("cannot run the server on CPU {cpu}: {e} — the CPU may be outside this server's cpuset (or a partition is being applied: retry)"))))
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

/// Move the calling thread into its partition's cgroup, if it has one to go to. Not
/// journaled: the membership is this thread's and ends with it (a revert hands it back).
fn join_home(s: &Setup) -> Result<()> {
    let Some(home) = &s.home else {
        return Ok(());
    };
    home.group.join_calling_thread(&s.root).map_err(|e| {
        failed(format!(
            "cannot move the server's thread for CPU {} into partition {:?} (cgroup {}): {e} — is the spec still applied? see tame status",
            s.cpu,
            home.partition,
            home.group.path()
        ))
    })
}

/// A client thread as its scheduler thread watches it.
struct Watched {
    thread: Thread,
    /// Readable once the thread exited; registered with the loop's epoll. None (a fixture,
    /// an older kernel, no descriptor left): the thread is looked at in `/proc` instead.
    exit: Option<OwnedFd>,
}

/// A client as its scheduler thread holds it.
struct Tracked {
    client: Client,
    /// Its threads not yet found gone.
    live: Vec<Watched>,
    account: Account,
}

impl Tracked {
    fn pid(&self) -> u32 {
        self.client.info.pid
    }
}

struct Loop<'a> {
    s: &'a Setup,
    edf: Edf,
    tracked: Vec<Tracked>,
    /// Says which watched threads exited (their thread pidfds): work per wake-up grows
    /// with the exits, not with the threads.
    exits: Option<Epoll>,
    seen: u64,
    running: Option<u32>,
}

impl<'a> Loop<'a> {
    fn new(s: &'a Setup) -> Self {
        Self {
            s,
            edf: Edf::new(),
            tracked: Vec::new(),
            exits: Epoll::new().ok(),
            seen: 0,
            running: None,
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
                // Threads that exited since the last look are never touched.
                self.drop_exited_threads();
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

    fn find(&mut self, pid: u32) -> Option<&mut Tracked> {
        self.tracked.iter_mut().find(|t| t.pid() == pid)
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
            self.tracked.retain(|t| t.pid() != gone.info.pid);
            restore(&self.s.root, &self.s.watchdog, &gone.threads);
        }
        let current: BTreeSet<u32> = st.clients.iter().map(|c| c.info.pid).collect();
        for t in &self.tracked {
            if !current.contains(&t.pid()) {
                self.edf.remove(t.pid());
            }
        }
        self.tracked.retain(|t| current.contains(&t.pid()));
        let new: Vec<Client> = st
            .clients
            .iter()
            .filter(|c| !self.tracked.iter().any(|t| t.pid() == c.info.pid))
            .cloned()
            .collect();
        drop(st);
        for client in new {
            let took = thread_cpu_ns();
            self.edf.add(
                client.info.pid,
                spec::runtime_ns(client.info.share_ppm, client.info.period_ns),
                client.info.period_ns,
                now,
            );
            let live = self.watch(&client);
            let mut tracked = Tracked {
                client,
                live,
                account: Account::default(),
            };
            tracked.account.charge(thread_cpu_ns().saturating_sub(took));
            self.tracked.push(tracked);
        }
        self.seen = generation;
        self.s.shared.acked.store(generation, Ordering::Release);
    }

    /// A descriptor per thread that says when it exits, opened once: checked against the
    /// admitted thread after opening, so it names that thread and no later one.
    fn watch(&self, client: &Client) -> Vec<Watched> {
        let root = &self.s.root;
        let mut live = Vec::with_capacity(client.threads.len());
        for t in &client.threads {
            let exit = self.exits.as_ref().and_then(|epoll| {
                let fd = root.thread_pidfd(t.tid).ok()?;
                epoll.add(&fd, key(t.pid, t.tid)).ok()?;
                Some(fd)
            });
            // Looked at after opening: a descriptor of a thread that is no longer the
            // admitted one is closed here (and leaves the epoll set with it).
            if !t.is_same(root) {
                self.s.watchdog.forget(t.tid);
                continue;
            }
            live.push(Watched {
                thread: t.clone(),
                exit,
            });
        }
        live
    }

    /// Forget the threads whose exit descriptor fired.
    fn drop_exited_threads(&mut self) {
        let Some(epoll) = &self.exits else {
            return;
        };
        // Empty (no allocation) unless a thread exited.
        let mut keys = Vec::new();
        epoll.drain(&mut keys);
        let setup = self.s;
        for k in keys {
            let (pid, tid) = ((k >> 32) as u32, k as u32);
            if let Some(t) = self.find(pid) {
                // Closing the descriptor takes it out of the epoll set.
                t.live.retain(|w| w.thread.tid != tid);
                setup.watchdog.forget(tid);
            }
        }
    }

    /// Drop threads that exited or were reused; hand clients whose process exited back
    /// (their share returns). False when the state lock was busy.
    fn remove_exited(&mut self) -> bool {
        self.drop_exited_threads();
        let root = &self.s.root;
        for t in &mut self.tracked {
            // Threads without an exit descriptor: look in /proc, charged to the client.
            if t.live.iter().any(|w| w.exit.is_none()) {
                let took = thread_cpu_ns();
                let watchdog = &self.s.watchdog;
                t.live.retain(|w| {
                    let keep = w.exit.is_some() || w.thread.is_same(root);
                    if !keep {
                        watchdog.forget(w.thread.tid);
                    }
                    keep
                });
                t.account.charge(thread_cpu_ns().saturating_sub(took));
            }
        }
        let dead: Vec<u32> = self
            .tracked
            .iter()
            .filter(|t| !t.client.process.alive(root))
            .map(Tracked::pid)
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
    /// from the kernel (one read of its process's CPU-time clock, whatever its threads), and
    /// the server's own work for it: a client also runs a little while it waits (the fair
    /// class places it well after each slice) and loses time when the vCPU is stolen —
    /// wall-clock slices would give ~10 % too much here, CPU-time accounting gives the share.
    fn count_budgets(&mut self) {
        let root = &self.s.root;
        // By index: set_used changes the jobs read here (and no copy is made per wake-up).
        for i in 0..self.edf.jobs().len() {
            let job = &self.edf.jobs()[i];
            let (pid, release_ns, runtime_ns) = (job.pid, job.next_release_ns, job.runtime_ns);
            let Some(t) = self.tracked.iter_mut().find(|t| t.pid() == pid) else {
                continue;
            };
            let Ok(exec) = root.process_cpu_time_ns(pid) else {
                continue;
            };
            let used = t.account.used(release_ns, exec, runtime_ns);
            self.edf.set_used(pid, used);
        }
    }

    /// Raise or lower every live thread of client `pid`; what it cost the server is
    /// charged to the client.
    fn set_client(&mut self, pid: u32, s: &ThreadSched) {
        let took = thread_cpu_ns();
        let setup = self.s;
        let (root, watchdog) = (&setup.root, &setup.watchdog);
        let Some(t) = self.find(pid) else {
            return;
        };
        t.live.retain(|w| {
            // With an exit descriptor the thread was seen alive just now (its exits
            // drained before the switch); without one, set_sched looks in /proc first.
            let set = match &w.exit {
                Some(_) => root
                    .set_thread_sched(w.thread.tid, s)
                    .map_err(SetError::from_io),
                None => w.thread.set_sched(root, s),
            };
            if let Err(SetError::Gone) = set {
                watchdog.forget(w.thread.tid);
                return false;
            }
            true
        });
        t.account.charge(thread_cpu_ns().saturating_sub(took));
    }
}

/// The epoll key of a thread: its pid and tid.
fn key(pid: u32, tid: u32) -> u64 {
    (u64::from(pid) << 32) | u64::from(tid)
}

/// An epoll set of thread exit descriptors.
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> std::io::Result<Self> {
        // SAFETY: epoll_create1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn add(&self, fd: &OwnedFd, key: u64) -> std::io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: key,
        };
        // SAFETY: both descriptors are live; the event is read during the call only.
        let r = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The keys of every descriptor that fired, without waiting.
    fn drain(&self, keys: &mut Vec<u64>) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: the buffer holds `events.len()` entries; no waiting.
            let n = unsafe {
                libc::epoll_wait(
                    self.0.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    0,
                )
            };
            if n <= 0 {
                return;
            }
            keys.extend(events[..n as usize].iter().map(|e| e.u64));
            if (n as usize) < events.len() {
                return;
            }
        }
    }
}
