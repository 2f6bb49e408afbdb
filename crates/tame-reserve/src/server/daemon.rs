//! `tame serve`: admits clients over a Unix socket and runs one scheduler thread per CPU
//! in use. The scheduler thread runs SCHED_FIFO 99 pinned to its CPU; it raises the EDF
//! choice among its clients to SCHED_FIFO 98 for the slice and drops it back to nice 19
//! afterwards. Clients are pinned to the CPU while they hold the reservation; their previous
//! policy and affinity come back on release, on exit of the server, or — through the
//! watchdog — to SCHED_OTHER if the server dies.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tame_host::Root;
use tame_rt::clock::{monotonic_ns, sleep_until};
use tame_rt::sched::{self, ThreadSched};

use super::edf::Edf;
use super::protocol::{ClientInfo, ErrorKind, Request, Response, Status, PROTOCOL_VERSION};
use super::watchdog::{Watchdog, MAX_WATCHED};
use super::{CLIENT_PRIORITY, SERVER_PRIORITY};
use crate::bandwidth::Limits;
use crate::error::{failed, invalid, io_failed, refused, Result};
use crate::spec::{self, percent, Backend, PPM};

const SCHED_OTHER: i32 = 0;
const SCHED_FIFO: i32 = 1;
const SCHED_BATCH: i32 = 3;
const SCHED_IDLE: i32 = 5;
/// Clients wait at SCHED_OTHER nice 19 between slices. SCHED_IDLE would be the obvious
/// choice, but right after each slice the fair class hands a task just lowered to SCHED_IDLE
/// ~19 % of the CPU (measured here), at nice 19 ~8 %: less time in small, cache-cold pieces.
const WAIT_NICE: i32 = 19;
/// The longest a scheduler thread sleeps before looking for new or vanished clients.
const POLL_NS: u64 = 50_000_000;
const LIVENESS_NS: u64 = 100_000_000;

#[derive(Clone, Debug)]
pub struct Config {
    pub socket: PathBuf,
    /// Admission cap per CPU, ppm.
    pub cap_ppm: u64,
    pub root: Root,
}

/// A thread's state before it became a client.
#[derive(Clone, Debug)]
struct Saved {
    tid: u32,
    sched: ThreadSched,
    affinity: Vec<u32>,
}

#[derive(Clone, Debug)]
struct Client {
    info: ClientInfo,
    start_time: u64,
    saved: Vec<Saved>,
}

#[derive(Default)]
struct CpuState {
    clients: Vec<Client>,
    /// Released or vanished clients the scheduler thread must restore.
    leaving: Vec<Client>,
}

struct Cpu {
    state: Mutex<CpuState>,
    generation: AtomicU64,
    acked: AtomicU64,
}

struct Server {
    config: Config,
    limits: Limits,
    watchdog: Arc<Watchdog>,
    stop: Arc<AtomicBool>,
    cpus: BTreeMap<u32, (Arc<Cpu>, std::thread::JoinHandle<()>)>,
}

/// Check what can be checked before anything starts (cap, socket).
pub fn validate(config: &Config) -> Result<Limits> {
    let limits = Limits::read(&config.root)?;
    if config.cap_ppm == 0 || config.cap_ppm > limits.rt_cap_ppm() {
        return Err(invalid(format!(
            "cap {} must be above 0 and at most the RT throttling limit of {} ({}) — real-time work beyond it is stopped by the kernel",
            percent(config.cap_ppm),
            percent(limits.rt_cap_ppm()),
            crate::bandwidth::RT_RUNTIME
        )));
    }
    if UnixStream::connect(&config.socket).is_ok() {
        return Err(invalid(format!(
            "a server already listens on {} — stop it first, or give another --socket",
            config.socket.display()
        )));
    }
    Ok(limits)
}

/// Run until `stop` is set. Forks the watchdog first: call before making threads.
pub fn serve(config: Config, stop: Arc<AtomicBool>) -> Result<()> {
    let limits = validate(&config)?;
    let watchdog =
        Arc::new(Watchdog::spawn().map_err(|e| io_failed("cannot start the watchdog", e))?);
    let listener = bind(&config.socket)?;
    let mut server = Server {
        config,
        limits,
        watchdog,
        stop: stop.clone(),
        cpus: BTreeMap::new(),
    };
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => server.handle(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let socket = server.config.socket.clone();
    server.shutdown();
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

fn bind(socket: &Path) -> Result<UnixListener> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| io_failed(format!("cannot create {}", dir.display()), e))?;
    }
    // validate() found nobody listening: a file there is a stale socket.
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)
        .map_err(|e| io_failed(format!("cannot listen on {}", socket.display()), e))?;
    // Anyone may ask; the server checks the asker may change the process (SO_PEERCRED).
    let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666));
    listener
        .set_nonblocking(true)
        .map_err(|e| io_failed(format!("cannot set up {}", socket.display()), e))?;
    Ok(listener)
}

fn peer_uid(stream: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for the call.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

fn error_response(e: crate::ReserveError) -> Response {
    let kind = match e {
        crate::ReserveError::Invalid(_) => ErrorKind::Invalid,
        crate::ReserveError::Refused(_) => ErrorKind::Refused,
        crate::ReserveError::Failed(_) => ErrorKind::Failed,
    };
    Response::Error {
        kind,
        message: e.to_string(),
    }
}

impl Server {
    fn handle(&mut self, stream: UnixStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let uid = peer_uid(&stream);
        let mut line = String::new();
        let mut reader = BufReader::new(&stream);
        let response = match reader.read_line(&mut line) {
            Ok(_) => match serde_json::from_str::<Request>(&line) {
                Ok(req) => self.dispatch(req, uid),
                Err(e) => error_response(invalid(format!("not a tame serve request: {e}"))),
            },
            Err(e) => error_response(io_failed("cannot read the request", e)),
        };
        let mut text = serde_json::to_string(&response).unwrap_or_default();
        text.push('\n');
        let _ = (&stream).write_all(text.as_bytes());
    }

    fn dispatch(&mut self, req: Request, uid: Option<u32>) -> Response {
        let result = match req {
            Request::List => Ok(()),
            Request::Reserve {
                pid,
                share_ppm,
                period_ns,
                cpu,
            } => self.admit(pid, share_ppm, period_ns, cpu, uid),
            Request::Release { pid } => self.release(pid, uid),
        };
        match result {
            Ok(()) => Response::Ok {
                status: self.status(),
            },
            Err(e) => error_response(e),
        }
    }

    fn status(&self) -> Status {
        let mut clients = Vec::new();
        for (cpu, _) in self.cpus.values() {
            let st = cpu.state.lock().unwrap_or_else(|p| p.into_inner());
            clients.extend(st.clients.iter().map(|c| c.info.clone()));
        }
        clients.sort_by_key(|c| c.pid);
        Status {
            version: PROTOCOL_VERSION,
            server_pid: std::process::id(),
            watchdog_pid: self.watchdog.pid(),
            cap_ppm: self.config.cap_ppm,
            clients,
            notes: self.limits.notes(),
        }
    }

    fn reserved_on(&self, cpu: u32) -> u64 {
        self.cpus.get(&cpu).map_or(0, |(c, _)| {
            let st = c.state.lock().unwrap_or_else(|p| p.into_inner());
            st.clients.iter().map(|c| c.info.share_ppm).sum()
        })
    }

    fn find(&self, pid: u32) -> Option<u32> {
        self.cpus.iter().find_map(|(&n, (c, _))| {
            let st = c.state.lock().unwrap_or_else(|p| p.into_inner());
            st.clients.iter().any(|c| c.info.pid == pid).then_some(n)
        })
    }

    fn admit(
        &mut self,
        pid: u32,
        share_ppm: u64,
        period_ns: u64,
        cpu: u32,
        uid: Option<u32>,
    ) -> Result<()> {
        let request = spec::Request {
            share_ppm,
            period_ns,
            cpu: Some(cpu),
            backend: Backend::Server,
        };
        request.validate(self.config.cap_ppm, &self.limits.online)?;
        let info = tame_host::process::inspect(&self.config.root, pid)
            .map_err(|e| invalid(e.to_string()))?;
        if let Some(uid) = uid {
            if uid != 0 && uid != info.uid {
                return Err(invalid(format!(
                    "no permission: process {pid} belongs to uid {}, you are uid {uid} — reserve your own processes, or ask as root",
                    info.uid
                )));
            }
        }
        if self.find(pid).is_some() {
            return Err(invalid(format!(
                "process {pid} already holds a reservation — release it first (tame reserve --release {pid})"
            )));
        }
        let mut used = self.reserved_on(cpu);
        if used + share_ppm > self.config.cap_ppm && self.prune_exited(cpu) {
            used = self.reserved_on(cpu);
        }
        if used + share_ppm > self.config.cap_ppm {
            return Err(refused(format!(
                "admission refused: CPU {cpu} has {} reserved, {} asked, cap {} ({} free) — ask for less, another CPU, or release a reservation",
                percent(used),
                percent(share_ppm),
                percent(self.config.cap_ppm),
                percent(self.config.cap_ppm - used)
            )));
        }
        let watched: usize = self.status().clients.iter().map(|c| c.tids.len()).sum();
        if watched + info.tids.len() > MAX_WATCHED {
            return Err(refused(format!(
                "the server watches at most {MAX_WATCHED} client threads — release some reservations"
            )));
        }
        let mut saved = Vec::new();
        for &tid in &info.tids {
            let t = tid as libc::pid_t;
            match (sched::get_thread_sched(t), sched::get_affinity(t)) {
                (Ok(s), Ok(a)) => {
                    if s.policy != SCHED_OTHER && s.policy != SCHED_BATCH && s.policy != SCHED_IDLE
                    {
                        restore(&self.watchdog, &saved);
                        return Err(invalid(format!(
                            "thread {tid} of process {pid} already runs at a real-time or deadline policy ({}) — the server schedules ordinary processes; return it to SCHED_OTHER first",
                            s.policy
                        )));
                    }
                    saved.push(Saved {
                        tid,
                        sched: s,
                        affinity: a,
                    });
                }
                _ => continue,
            }
        }
        // The watchdog knows a thread before it is ever raised.
        for s in &saved {
            if let Err(e) = self.watchdog.watch(s.tid) {
                restore(&self.watchdog, &saved);
                return Err(io_failed("cannot reach the watchdog", e));
            }
        }
        let mut tids = Vec::new();
        for s in &saved {
            let t = s.tid as libc::pid_t;
            let pinned = sched::set_affinity(t, [cpu]);
            let idle = set_policy(s.tid, SCHED_OTHER, 0, WAIT_NICE);
            if let Err(e) = pinned.and(idle) {
                if e.raw_os_error() == Some(libc::ESRCH) {
                    continue;
                }
                restore(&self.watchdog, &saved);
                return Err(if e.raw_os_error() == Some(libc::EINVAL) {
                    invalid(format!(
                        "cannot pin thread {} to CPU {cpu}: the CPU is outside the cpuset the process may use — choose another --cpu (or wait if a partition is being applied)",
                        s.tid
                    ))
                } else {
                    io_failed(format!("cannot take over thread {}", s.tid), e)
                });
            }
            tids.push(s.tid);
        }
        let client = Client {
            info: ClientInfo {
                pid,
                cpu,
                share_ppm,
                period_ns,
                tids,
            },
            start_time: info.start_time,
            saved,
        };
        let cpu_state = match self.scheduler(cpu) {
            Ok(c) => c,
            Err(e) => {
                restore(&self.watchdog, &client.saved);
                return Err(e);
            }
        };
        let mut st = cpu_state.state.lock().unwrap_or_else(|p| p.into_inner());
        st.clients.push(client);
        drop(st);
        cpu_state.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The scheduler thread of `cpu`, started on first use.
    fn scheduler(&mut self, cpu: u32) -> Result<Arc<Cpu>> {
        if let Some((c, handle)) = self.cpus.get(&cpu) {
            if !handle.is_finished() {
                return Ok(c.clone());
            }
        }
        let shared = Arc::new(Cpu {
            state: Mutex::new(CpuState::default()),
            generation: AtomicU64::new(0),
            acked: AtomicU64::new(0),
        });
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread_shared = shared.clone();
        let watchdog = self.watchdog.clone();
        let stop = self.stop.clone();
        let root = self.config.root.clone();
        let handle = std::thread::Builder::new()
            .name(format!("tame-serve-cpu{cpu}"))
            .spawn(move || scheduler_thread(cpu, thread_shared, watchdog, stop, root, ready_tx))
            .map_err(|e| io_failed("cannot start the scheduler thread", e))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {
                self.cpus.insert(cpu, (shared.clone(), handle));
                Ok(shared)
            }
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => Err(failed("the scheduler thread ended before it started")),
        }
    }

    /// Clients of `cpu` that exited since the scheduler thread last looked: remove them now
    /// (their share returns before admission decides). True when any were removed.
    fn prune_exited(&mut self, cpu: u32) -> bool {
        let Some((c, _)) = self.cpus.get(&cpu) else {
            return false;
        };
        let mut st = c.state.lock().unwrap_or_else(|p| p.into_inner());
        let before = st.clients.len();
        let (kept, gone): (Vec<Client>, Vec<Client>) = std::mem::take(&mut st.clients)
            .into_iter()
            .partition(|k| alive(&self.config.root, k.info.pid, k.start_time));
        st.clients = kept;
        let removed = st.clients.len() != before;
        st.leaving.extend(gone);
        drop(st);
        if removed {
            let generation = c.generation.fetch_add(1, Ordering::Release) + 1;
            wait_acked(c, generation);
        }
        removed
    }

    fn release(&mut self, pid: u32, uid: Option<u32>) -> Result<()> {
        let Some(cpu) = self.find(pid) else {
            return Err(invalid(format!(
                "process {pid} holds no server reservation — see tame reserve --list"
            )));
        };
        let (c, _) = &self.cpus[&cpu];
        let mut st = c.state.lock().unwrap_or_else(|p| p.into_inner());
        let i = st
            .clients
            .iter()
            .position(|c| c.info.pid == pid)
            .expect("found above");
        if let Some(uid) = uid {
            let owner = tame_host::process::inspect(&self.config.root, pid)
                .map(|i| i.uid)
                .ok();
            if uid != 0 && owner.is_some_and(|o| o != uid) {
                return Err(invalid(format!(
                    "no permission: process {pid} is not yours — release it as root"
                )));
            }
        }
        let client = st.clients.remove(i);
        st.leaving.push(client);
        drop(st);
        let generation = c.generation.fetch_add(1, Ordering::Release) + 1;
        wait_acked(c, generation);
        Ok(())
    }

    fn shutdown(self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, (_, handle)) in self.cpus {
            let _ = handle.join();
        }
        if let Ok(w) = Arc::try_unwrap(self.watchdog) {
            w.shutdown();
        }
    }
}

/// Wait (at most a second) until the scheduler thread has taken in `generation`:
/// released clients are restored by then.
fn wait_acked(c: &Cpu, generation: u64) {
    let deadline = monotonic_ns() + 1_000_000_000;
    while c.acked.load(Ordering::Acquire) < generation && monotonic_ns() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn set_policy(tid: u32, policy: i32, priority: i32, nice: i32) -> std::io::Result<()> {
    let s = ThreadSched {
        policy,
        priority,
        nice,
        // Threads a raised client starts begin as SCHED_OTHER, never inheriting its slice.
        reset_on_fork: policy == SCHED_FIFO,
        dl_runtime_ns: 0,
        dl_deadline_ns: 0,
        dl_period_ns: 0,
    };
    sched::set_thread_sched(tid as libc::pid_t, &s)
}

/// Give threads back what they had, and tell the watchdog to forget them.
fn restore(watchdog: &Watchdog, saved: &[Saved]) {
    for s in saved {
        let t = s.tid as libc::pid_t;
        let _ = sched::set_thread_sched(t, &s.sched);
        let _ = sched::set_affinity(t, s.affinity.iter().copied());
        watchdog.forget(s.tid);
    }
}

/// The same process is still there (pid not reused) and has not exited.
fn alive(root: &Root, pid: u32, start_time: u64) -> bool {
    root.process(pid)
        .stat()
        .is_ok_and(|st| !matches!(st.state, 'Z' | 'X') && st.start_time == start_time)
}

fn scheduler_thread(
    cpu: u32,
    shared: Arc<Cpu>,
    watchdog: Arc<Watchdog>,
    stop: Arc<AtomicBool>,
    root: Root,
    ready: mpsc::Sender<Result<()>>,
) {
    let setup = sched::pin_current_thread(cpu)
        .map_err(|e| invalid(format!("cannot run the server on CPU {cpu}: {e} — the CPU may be outside this server's cpuset (or a partition is being applied: retry)")))
        .and_then(|()| {
            set_policy(0, SCHED_FIFO, SERVER_PRIORITY, 0).map_err(|e| {
                failed(format!(
                    "cannot run the server thread at SCHED_FIFO {SERVER_PRIORITY}: {e} — run tame serve as root (or with CAP_SYS_NICE)"
                ))
            })
        });
    let ok = setup.is_ok();
    let _ = ready.send(setup);
    if !ok {
        return;
    }
    let mut edf = Edf::new();
    let mut clients: Vec<Client> = Vec::new();
    let mut seen = 0u64;
    let mut running: Option<u32> = None;
    let mut misses = Vec::new();
    let mut next_liveness = 0u64;
    // Per client: the release its period began with, and its CPU time then.
    let mut period_start: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let now = monotonic_ns();
        let generation = shared.generation.load(Ordering::Acquire);
        // try_lock: the admitting thread may hold the lock while a raised client keeps it
        // off this CPU; never wait for it here, look again at the next wake-up.
        let locked = (generation != seen)
            .then(|| shared.state.try_lock())
            .and_then(Result::ok);
        if let Some(mut st) = locked {
            for gone in st.leaving.drain(..) {
                edf.remove(gone.info.pid);
                if running == Some(gone.info.pid) {
                    running = None;
                }
                restore(&watchdog, &gone.saved);
            }
            for c in &st.clients {
                if !clients.iter().any(|k| k.info.pid == c.info.pid) {
                    edf.add(
                        c.info.pid,
                        spec::runtime_ns(c.info.share_ppm, c.info.period_ns),
                        c.info.period_ns,
                        now,
                    );
                }
            }
            clients = st.clients.clone();
            drop(st);
            seen = generation;
            shared.acked.store(generation, Ordering::Release);
        }
        if now >= next_liveness {
            next_liveness = now + LIVENESS_NS;
            let dead: Vec<u32> = clients
                .iter()
                .filter(|c| !alive(&root, c.info.pid, c.start_time))
                .map(|c| c.info.pid)
                .collect();
            if !dead.is_empty() {
                // A client that exits is removed and its share returned.
                let Ok(mut st) = shared.state.try_lock() else {
                    next_liveness = now;
                    continue;
                };
                for pid in dead {
                    if let Some(i) = st.clients.iter().position(|c| c.info.pid == pid) {
                        let c = st.clients.remove(i);
                        st.leaving.push(c);
                    }
                }
                drop(st);
                shared.generation.fetch_add(1, Ordering::Release);
                continue;
            }
        }
        misses.clear();
        edf.replenish(now, &mut misses);
        // Budgets count the CPU time each client really got since its period began, read
        // from the kernel: a client also runs a little while it waits (the fair class places
        // it well after each slice) and loses time when the vCPU is stolen — wall-clock
        // slices would give ~10 % too much here, CPU-time accounting gives the share.
        for job in edf.jobs().to_vec() {
            let Some(client) = clients.iter().find(|c| c.info.pid == job.pid) else {
                continue;
            };
            let exec = cpu_time_ns(&root, client);
            let base = match period_start.get(&job.pid) {
                Some(&(release, base)) if release == job.next_release_ns => base,
                _ => {
                    period_start.insert(job.pid, (job.next_release_ns, exec));
                    exec
                }
            };
            edf.set_used(job.pid, exec.saturating_sub(base));
        }
        period_start.retain(|pid, _| clients.iter().any(|c| c.info.pid == *pid));
        let decision = edf.decide_late(now);
        if decision.run != running {
            if let Some(pid) = running {
                set_client(&clients, pid, SCHED_OTHER, 0, WAIT_NICE);
            }
            if let Some(pid) = decision.run {
                set_client(&clients, pid, SCHED_FIFO, CLIENT_PRIORITY, 0);
            }
            running = decision.run;
        }
        sleep_until(decision.until_ns.min(now + POLL_NS));
    }
    // Shutdown: everyone gets back what they had.
    let st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    for c in st.clients.iter().chain(st.leaving.iter()) {
        restore(&watchdog, &c.saved);
    }
}

/// CPU time of all of a client's threads (schedstat's first field, ns).
fn cpu_time_ns(root: &Root, client: &Client) -> u64 {
    client
        .info
        .tids
        .iter()
        .filter_map(|&tid| {
            let task = root.process(client.info.pid).task(tid);
            task.schedstat().ok().map(|s| s.run_ns)
        })
        .sum()
}

fn set_client(clients: &[Client], pid: u32, policy: i32, priority: i32, nice: i32) {
    if let Some(c) = clients.iter().find(|c| c.info.pid == pid) {
        for &tid in &c.info.tids {
            let _ = set_policy(tid, policy, priority, nice);
        }
    }
}

/// Share left on `cpu` under `cap` given the reservations, for messages.
pub fn free_ppm(cap_ppm: u64, reserved_ppm: u64) -> u64 {
    cap_ppm.saturating_sub(reserved_ppm).min(PPM)
}
