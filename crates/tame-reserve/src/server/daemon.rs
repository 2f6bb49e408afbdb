//! `tame serve`: admits clients over a Unix socket and runs one scheduler thread per CPU
//! in use (`scheduler.rs`). Who may reserve what is the policy's (`policy.rs`); the socket
//! is root's, group-owned, mode 0660. Each connection is served on its own thread with a
//! bounded request (`conn.rs`). Clients are pinned to the CPU while they hold the
//! reservation; their previous policy and affinity come back on release, on exit of the
//! server, through the watchdog if the server dies, and from the restore record
//! (`tame serve --recover`) if both die.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tame_host::{CpuList, Root};

use super::conn::{self, ReadError, Slots, REQUEST_TIME};
use super::live::{self, Live, Snapshot, Turned};
use super::policy::{Ask, Asker, Policy, Reservable};
use super::protocol::{ClientInfo, ErrorKind, Request, Response, Status, PROTOCOL_VERSION};
use super::record::{self, lock_path, record_path, Record, Recovered};
use super::scheduler::{self, Client, Cpu};
use super::thread::{Process, SetError, Thread};
use super::watchdog::{self, Watchdog, MAX_WATCHED};
use crate::bandwidth::Limits;
use crate::error::{failed, invalid, io_failed, refused, Result};
use crate::spec::{self, percent, Backend};

/// How long a starting server (or a recovery) waits for the lock: a dead server's
/// watchdog holds it while it restores.
const LOCK_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct Config {
    pub socket: PathBuf,
    /// Who may reserve what, and the admission cap per CPU (`policy.cap_ppm`).
    pub policy: Policy,
    /// Where the applied partition spec is read (the policy's reservable CPUs).
    pub journal_dir: PathBuf,
    pub root: Root,
}

/// Check what can be checked before anything starts (cap, socket).
pub fn validate(config: &Config) -> Result<Limits> {
    let limits = Limits::read(&config.root)?;
    if config.policy.cap_ppm == 0 || config.policy.cap_ppm > limits.rt_cap_ppm() {
        return Err(invalid(format!(
            "cap {} must be above 0 and at most the RT throttling limit of {} ({}) — real-time work beyond it is stopped by the kernel",
            percent(config.policy.cap_ppm),
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

/// How often the accept loop publishes the live figures besides after each request (a
/// client that exited is gone from them within this).
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Run until `stop` is set. Forks the watchdog first: call before making threads.
pub fn serve(config: Config, stop: Arc<AtomicBool>) -> Result<()> {
    serve_with(config, stop, None, || Ok(None))
}

/// [`serve`], publishing its live figures to `live`; `after_start` runs once the watchdog
/// is forked and the socket listens (threads made there are not in the watchdog's fork):
/// `tame serve --metrics` starts its HTTP thread there, which must end once `stop` is set.
pub fn serve_with(
    config: Config,
    stop: Arc<AtomicBool>,
    live: Option<Arc<Live>>,
    after_start: impl FnOnce() -> Result<Option<std::thread::JoinHandle<()>>>,
) -> Result<()> {
    let limits = validate(&config)?;
    raise_descriptor_limit();
    super::log::limit_server_panics();
    let lock = take_lock(&config.socket)?;
    // A server that died before us may have left clients changed.
    let recovered = recover_locked(&config.root, &config.socket)?;
    if recovered != Recovered::default() {
        eprintln!("tame serve: {}", describe(&recovered));
    }
    let watchdog = Arc::new(
        Watchdog::spawn(
            &config.root,
            &record_path(&config.socket),
            &lock_path(&config.socket),
        )
        .map_err(|e| io_failed("cannot start the watchdog", e))?,
    );
    let listener = match bind(&config.socket, config.policy.socket_gid) {
        Ok(l) => l,
        Err(e) => {
            watchdog.shutdown();
            return Err(e);
        }
    };
    let observer = match after_start() {
        Ok(h) => h,
        Err(e) => {
            drop(listener);
            let _ = std::fs::remove_file(&config.socket);
            watchdog.shutdown();
            return Err(e);
        }
    };
    // Once it listens, so the line says the server is up (the unit's journal, a terminal).
    eprintln!("{}", started(&config, watchdog.pid()));
    let server = Arc::new(Mutex::new(Server {
        record: Record::new(record_path(&config.socket)),
        config,
        limits,
        watchdog,
        stop: stop.clone(),
        cpus: BTreeMap::new(),
        stopping: false,
        live: live.clone(),
    }));
    server.lock().unwrap_or_else(|p| p.into_inner()).publish();
    let slots = Slots::default();
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut published = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if published.elapsed() >= PUBLISH_EVERY {
            // Never wait for a request in progress: publish at the next turn instead.
            if let Ok(s) = server.try_lock() {
                s.publish();
                published = Instant::now();
            }
        }
        // Wait for a connection, looking at the stop flag every 50 ms.
        let mut p = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd for the call.
        if unsafe { libc::poll(&mut p, 1, 50) } <= 0 {
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                workers.retain(|w| !w.is_finished());
                if let Some(w) = accept(&server, &slots, stream, live.clone()) {
                    workers.push(w);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    drop(listener);
    // Requests in flight end within their time limit.
    for w in workers {
        let _ = w.join();
    }
    let mut server = server.lock().unwrap_or_else(|p| p.into_inner());
    let socket = server.config.socket.clone();
    server.shutdown();
    let _ = std::fs::remove_file(&socket);
    drop(server);
    if let Some(h) = observer {
        let _ = h.join();
    }
    drop(lock);
    Ok(())
}

/// The scheduler threads hold a descriptor per client thread (it says when the thread
/// exits): up to the watchdog's 1024 besides the server's own, beyond the soft limit of
/// 1024 a service gets by default. The hard limit is the administrator's.
fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Give the clients of a server that is no longer running their state back, from its
/// restore record (`tame serve --recover`, the unit's `ExecStopPost=`).
pub fn recover(root: &Root, socket: &Path) -> Result<Recovered> {
    if UnixStream::connect(socket).is_ok() {
        return Err(invalid(format!(
            "a server is running on {}: it restores its own clients — recovery is for after it stopped",
            socket.display()
        )));
    }
    let _lock = take_lock(socket)?;
    recover_locked(root, socket)
}

fn recover_locked(root: &Root, socket: &Path) -> Result<Recovered> {
    let path = record_path(socket);
    record::recover(root, &path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::InvalidData => {
            invalid(e.to_string())
        }
        _ => io_failed(format!("cannot recover from {}", path.display()), e),
    })
}

/// The line a server prints when it listens: where, who may connect, under which
/// policy and cap, and what guards its clients.
pub fn started(config: &Config, watchdog_pid: u32) -> String {
    let who = match config.policy.socket_gid {
        Some(gid) => format!("root and group {gid}"),
        None => "root only".into(),
    };
    format!(
        "tame serve: listening on {} ({who} may connect); policy {}, cap {} per CPU; watchdog pid {} (SCHED_FIFO {}) restores the clients if the server dies; restore record {}",
        config.socket.display(),
        config.policy.origin,
        percent(config.policy.cap_ppm),
        watchdog_pid,
        watchdog::PRIORITY,
        record_path(&config.socket).display()
    )
}

/// One line on what recovery did.
pub fn describe(r: &Recovered) -> String {
    if *r == Recovered::default() {
        return "nothing to recover: no restore record (the server stopped cleanly, or its watchdog restored its clients)".into();
    }
    let mut text = format!(
        "recovered from a stopped server: {} given their policy and affinity back, {} gone",
        tame_rt::plural::count(r.restored.len() as u64, "thread", "threads"),
        r.gone.len()
    );
    for (tid, why) in &r.failed {
        text.push_str(&format!("; thread {tid} not restored: {why}"));
    }
    text
}

/// The server's lock: one server (or recovery) per socket at a time.
fn take_lock(socket: &Path) -> Result<File> {
    let path = lock_path(socket);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| io_failed(format!("cannot create {}", dir.display()), e))?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| io_failed(format!("cannot open the lock {}", path.display()), e))?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        if Instant::now() >= deadline {
            return Err(invalid(format!(
                "another tame serve (or its recovery) holds {} — stop it first, or give another --socket",
                path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Listen on `socket`: root's, group `gid` (None: root's group), mode 0660. The socket is
/// made under umask 0177, so it is never open to others, not even for a moment.
/// ([`tame_host::socket::bind`] says how a link swapped in is kept from being followed.)
fn bind(socket: &Path, gid: Option<u32>) -> Result<UnixListener> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| io_failed(format!("cannot create {}", dir.display()), e))?;
    }
    // validate() found nobody listening: a socket there is stale. Anything else is not ours.
    tame_host::socket::remove_stale(socket).map_err(|e| {
        invalid(format!(
            "{}: {e} — remove it or give another --socket",
            socket.display()
        ))
    })?;
    // Made in a private directory and renamed into place: group and mode are never set
    // by a path that someone who may write the directory could swap for a link.
    let listener = tame_host::socket::bind(socket, gid, 0o660)
        .map_err(|e| io_failed(format!("cannot listen on {}", socket.display()), e))?;
    Ok(listener)
}

/// Take a connection on: who is asking (refused when that cannot be told), whether it
/// may have another connection, then its own thread.
fn accept(
    server: &Arc<Mutex<Server>>,
    slots: &Slots,
    stream: UnixStream,
    live: Option<Arc<Live>>,
) -> Option<std::thread::JoinHandle<()>> {
    // Counted without the server's lock: a refusal never waits for a request in progress.
    let count_refused = || {
        if let Some(l) = &live {
            l.connections_refused.fetch_add(1, Ordering::Relaxed);
        }
    };
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let asker = match identify(&stream) {
        Ok(a) => a,
        Err(refusal) => {
            count_refused();
            reply(&stream, &refusal);
            return None;
        }
    };
    let Some(slot) = slots.take(asker.uid) else {
        count_refused();
        reply(
            &stream,
            &error_response(refused(format!(
                "refused: too many connections open (uid {} may hold {}, everyone {}) — retry in a moment",
                asker.uid,
                if asker.uid == 0 { conn::MAX_FOR_ROOT } else { conn::MAX_PER_UID },
                conn::MAX_CONNECTIONS
            ))),
        );
        return None;
    };
    let server = server.clone();
    std::thread::Builder::new()
        .name("tame-serve-conn".into())
        .spawn(move || {
            let _slot = slot;
            handle(&server, &stream, &asker, live.as_deref());
        })
        .ok()
}

/// Who is asking; a peer that cannot be told is refused, never taken for anyone.
fn identify(stream: &UnixStream) -> std::result::Result<Asker, Response> {
    conn::peer(stream).map_err(|e| {
        error_response(refused(format!(
            "refused: the server cannot tell who is asking (SO_PEERCRED: {e})"
        )))
    })
}

/// Read one request within the size and time limits, answer it, close.
fn handle(server: &Mutex<Server>, stream: &UnixStream, asker: &Asker, live: Option<&Live>) {
    let deadline = Instant::now() + REQUEST_TIME;
    let response = match conn::read_request(stream, deadline) {
        Ok(bytes) => match serde_json::from_slice::<Request>(&bytes) {
            // Numbers checked before the lock is taken: nothing a client sends reaches
            // arithmetic under it unchecked.
            Ok(req) => match req.check_numbers() {
                Ok(()) => dispatch_guarded(server, req, asker),
                Err(e) => {
                    let r = error_response(e);
                    count(live, Some(&RequestKind::of(&req)), &r);
                    r
                }
            },
            Err(e) => {
                // Nothing changed: counted without the server's lock, nothing published.
                let r = error_response(invalid(format!("not a tame serve request: {e}")));
                count(live, None, &r);
                r
            }
        },
        Err(ReadError::Closed) => return,
        Err(e) => {
            let r = error_response(invalid(format!(
                "{e} — send one JSON request on one line (see docs/reserve.md)"
            )));
            count(live, None, &r);
            r
        }
    };
    reply(stream, &response);
}

/// Dispatch under the server's lock. Should a bug still panic there, the request is
/// refused and the server goes on (the panic hook logs it, rate-limited): the lock's
/// poison is ignored by every taker, who find the state as the panic left it.
fn dispatch_guarded(server: &Mutex<Server>, req: Request, asker: &Asker) -> Response {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .dispatch(req, asker)
    }))
    .unwrap_or_else(|_| {
        error_response(failed(
            "the server failed on this request (its log says why) — see tame reserve --list for what holds, and report it",
        ))
    })
}

fn reply(mut stream: &UnixStream, response: &Response) {
    let mut text = serde_json::to_string(response).unwrap_or_default();
    text.push('\n');
    let _ = stream.write_all(text.as_bytes());
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

/// Count a request (`None`: one that could not be read) and its outcome in the live figures.
fn count(live: Option<&Live>, request: Option<&RequestKind>, response: &Response) {
    let Some(live) = live else {
        return;
    };
    live.requests.fetch_add(1, Ordering::Relaxed);
    match (request, response) {
        (Some(RequestKind::Reserve), Response::Ok { .. }) => {
            live.admitted.fetch_add(1, Ordering::Relaxed);
        }
        (Some(RequestKind::Release), Response::Ok { .. }) => {
            live.released.fetch_add(1, Ordering::Relaxed);
        }
        (_, Response::Error { kind, .. }) => live.count_turned(match kind {
            ErrorKind::Invalid => Turned::Invalid,
            ErrorKind::Refused => Turned::Refused,
            ErrorKind::Failed => Turned::Failed,
        }),
        _ => {}
    }
}

/// What a request asked for, for the live figures' counters.
enum RequestKind {
    Reserve,
    Release,
    List,
}

impl RequestKind {
    fn of(req: &Request) -> Self {
        match req {
            Request::Reserve { .. } => RequestKind::Reserve,
            Request::Release { .. } => RequestKind::Release,
            Request::List => RequestKind::List,
        }
    }
}

struct Server {
    config: Config,
    limits: Limits,
    watchdog: Arc<Watchdog>,
    record: Record,
    stop: Arc<AtomicBool>,
    cpus: BTreeMap<u32, (Arc<Cpu>, std::thread::JoinHandle<()>)>,
    stopping: bool,
    /// Where `tame serve --metrics` reads the live figures (None without it).
    live: Option<Arc<Live>>,
}

impl Server {
    fn dispatch(&mut self, req: Request, asker: &Asker) -> Response {
        let req_kind = RequestKind::of(&req);
        let result = match req {
            _ if self.stopping => Err(failed(
                "the server is stopping and admits nobody — retry once tame serve runs again",
            )),
            Request::List => Ok(()),
            Request::Reserve {
                pid,
                share_ppm,
                period_ns,
                cpu,
            } => self.admit(pid, share_ppm, period_ns, cpu, asker),
            Request::Release { pid } => self.release(pid, asker),
        };
        let response = match result {
            Ok(()) => Response::Ok {
                status: self.status(),
            },
            Err(e) => error_response(e),
        };
        self.observe(&req_kind, &response);
        response
    }

    /// Count a request and its outcome, and publish what the server holds now: the
    /// status the response carries when it has one (not computed twice).
    fn observe(&self, request: &RequestKind, response: &Response) {
        let Some(live) = &self.live else {
            return;
        };
        count(Some(live), Some(request), response);
        match response {
            Response::Ok { status } => self.publish_status(live, status.clone()),
            _ => self.publish(),
        }
    }

    /// Give the live figures what the server holds now (nothing without --metrics),
    /// never waiting for a scheduler thread's lock (see [`live::clients_now`]).
    fn publish(&self) {
        let Some(live) = &self.live else {
            return;
        };
        let last = live.snapshot();
        let per_cpu = self.cpus.iter().map(|(&n, (cpu, _))| {
            let now = live::clients_now(cpu)
                .map(|clients| clients.into_iter().map(|c| self.info(c)).collect());
            (n, now)
        });
        let clients = live::merge(per_cpu, last.status.as_ref());
        self.publish_status(live, self.status_of(clients));
    }

    fn publish_status(&self, live: &Live, status: Status) {
        live.publish(Snapshot {
            status: Some(status),
            scheduler_cpus: self
                .cpus
                .iter()
                .filter(|(_, (_, h))| !h.is_finished())
                .map(|(&c, _)| c)
                .collect(),
            watchdog_alive: self.watchdog.alive(),
        });
    }

    fn clients(&self) -> Vec<Client> {
        let mut all = Vec::new();
        for (cpu, _) in self.cpus.values() {
            let st = cpu.state.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(st.clients.iter().cloned());
        }
        all
    }

    /// A client as the protocol gives it: its threads that still run.
    fn info(&self, c: Client) -> ClientInfo {
        let root = &self.config.root;
        ClientInfo {
            // Threads that exited (or were reused) are no longer the client's.
            tids: c
                .threads
                .iter()
                .filter(|t| t.is_same(root))
                .map(|t| t.tid)
                .collect(),
            ..c.info
        }
    }

    fn status(&self) -> Status {
        let mut clients: Vec<ClientInfo> =
            self.clients().into_iter().map(|c| self.info(c)).collect();
        clients.sort_by_key(|c| c.pid);
        self.status_of(clients)
    }

    fn status_of(&self, clients: Vec<ClientInfo>) -> Status {
        Status {
            version: PROTOCOL_VERSION,
            server_pid: std::process::id(),
            watchdog_pid: self.watchdog.pid(),
            cap_ppm: self.config.policy.cap_ppm,
            clients,
            notes: self.limits.notes(),
        }
    }

    fn reserved_on(&self, cpu: u32, uid: Option<u32>) -> u64 {
        self.cpus.get(&cpu).map_or(0, |(c, _)| {
            let st = c.state.lock().unwrap_or_else(|p| p.into_inner());
            st.clients
                .iter()
                .filter(|c| match uid {
                    Some(u) => c.asker_uid == u,
                    None => true,
                })
                .map(|c| c.info.share_ppm)
                .sum()
        })
    }

    /// Threads and reservations `uid` holds, every CPU (the policy's per-user bounds).
    fn held_by(&self, uid: u32) -> (usize, usize) {
        self.clients()
            .iter()
            .filter(|c| c.asker_uid == uid)
            .fold((0, 0), |(threads, n), c| (threads + c.threads.len(), n + 1))
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
        asker: &Asker,
    ) -> Result<()> {
        let request = spec::Request {
            share_ppm,
            period_ns,
            cpu: Some(cpu),
            backend: Backend::Server,
        };
        request.validate(self.config.policy.cap_ppm, &self.limits.online)?;
        let root = self.config.root.clone();
        let info = tame_host::process::inspect(&root, pid).map_err(|e| invalid(e.to_string()))?;
        if asker.uid != 0 && asker.uid != info.uid {
            return Err(invalid(format!(
                "no permission: process {pid} belongs to uid {}, you are uid {} — reserve your own processes, or ask as root",
                info.uid, asker.uid
            )));
        }
        if self.find(pid).is_some() {
            return Err(invalid(format!(
                "process {pid} already holds a reservation — release it first (tame reserve --release {pid})"
            )));
        }
        if self.reserved_on(cpu, None) + share_ppm > self.config.policy.cap_ppm {
            self.prune_exited(cpu);
        }
        let (held_threads, held_reservations) = self.held_by(asker.uid);
        let ask = Ask {
            cpu,
            share_ppm,
            period_ns,
            threads: info.tids.len(),
            held_ppm: self.reserved_on(cpu, Some(asker.uid)),
            held_threads,
            held_reservations,
        };
        let online = CpuList::from_cpus(self.limits.online.iter().copied());
        let journal_dir = self.config.journal_dir.clone();
        self.config.policy.check(asker, &ask, || {
            Reservable::read(&root, &journal_dir, &online)
        })?;
        let used = self.reserved_on(cpu, None);
        if used + share_ppm > self.config.policy.cap_ppm {
            return Err(refused(format!(
                "admission refused: CPU {cpu} has {} reserved, {} asked, cap {} ({} free) — ask for less, another CPU, or release a reservation",
                percent(used),
                percent(share_ppm),
                percent(self.config.policy.cap_ppm),
                percent(self.config.policy.cap_ppm - used)
            )));
        }
        let watched: usize = self.clients().iter().map(|c| c.threads.len()).sum();
        if watched + info.tids.len() > MAX_WATCHED {
            return Err(refused(format!(
                "the server watches at most {MAX_WATCHED} client threads — release some reservations"
            )));
        }
        if !self.watchdog.alive() {
            return Err(failed(
                "the server's watchdog is gone: no new client is taken without it — restart tame serve",
            ));
        }
        let process = Process::open(&root, pid, info.start_time)
            .ok_or_else(|| invalid(format!("no process {pid} — it exited")))?;
        let threads = self.capture(pid, &info.tids)?;
        // Recorded before anything changes: the record, then the watchdog, know each
        // thread before it is ever pinned or raised.
        self.record.add(&root, &threads).map_err(|e| {
            io_failed(
                format!(
                    "cannot write the restore record {}",
                    self.record.path().display()
                ),
                e,
            )
        })?;
        for t in &threads {
            if let Err(e) = self.watchdog.watch(t) {
                self.undo(pid, &threads);
                return Err(io_failed("cannot reach the watchdog", e));
            }
        }
        let pinned = CpuList::from_cpus([cpu]);
        let mut kept = Vec::new();
        for t in &threads {
            let changed = t
                .set_affinity(&root, &pinned)
                .and_then(|()| t.set_sched(&root, &scheduler::waiting()));
            match changed {
                Ok(()) => kept.push(t.clone()),
                Err(SetError::Gone) => self.watchdog.forget(t.tid),
                Err(SetError::Failed(e)) => {
                    self.undo(pid, &threads);
                    return Err(if e.raw_os_error() == Some(libc::EINVAL) {
                        invalid(self.outside_cpuset(pid, t.tid, cpu))
                    } else {
                        io_failed(format!("cannot take over thread {}", t.tid), e)
                    });
                }
            }
        }
        let client = Client {
            info: ClientInfo {
                pid,
                cpu,
                share_ppm,
                period_ns,
                tids: kept.iter().map(|t| t.tid).collect(),
            },
            asker_uid: asker.uid,
            process: Arc::new(process),
            threads: kept,
        };
        let cpu_state = match self.scheduler(cpu) {
            Ok(c) => c,
            Err(e) => {
                self.undo(pid, &threads);
                return Err(e);
            }
        };
        let mut st = cpu_state.state.lock().unwrap_or_else(|p| p.into_inner());
        st.clients.push(client);
        drop(st);
        cpu_state.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Each thread of `pid` with its state from before; only ordinary policies are taken.
    fn capture(&self, pid: u32, tids: &[u32]) -> Result<Vec<Thread>> {
        let mut threads = Vec::new();
        for &tid in tids {
            let t = match Thread::capture(&self.config.root, pid, tid) {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(e) => {
                    return Err(io_failed(
                        format!(
                            "cannot read thread {tid} of process {pid} (is it exiting?) — retry"
                        ),
                        e,
                    ))
                }
            };
            if !matches!(
                t.sched.policy,
                libc::SCHED_OTHER | libc::SCHED_BATCH | libc::SCHED_IDLE
            ) {
                return Err(invalid(format!(
                    "thread {tid} of process {pid} already runs at a real-time or deadline policy ({}) — the server schedules ordinary processes; return it to SCHED_OTHER first",
                    t.sched.policy
                )));
            }
            threads.push(t);
        }
        if threads.is_empty() {
            return Err(invalid(format!("no process {pid} — it exited")));
        }
        Ok(threads)
    }

    /// A failed admission: give back what was changed, forget it everywhere.
    fn undo(&self, pid: u32, threads: &[Thread]) {
        scheduler::restore(&self.config.root, &self.watchdog, threads);
        let _ = self.record.remove(pid);
    }

    /// Why thread `tid` of client `pid` cannot be pinned to `cpu`, and what to do.
    fn outside_cpuset(&self, pid: u32, tid: u32, cpu: u32) -> String {
        let what = format!("cannot pin thread {tid} of process {pid} to CPU {cpu}");
        match self.partition_of(cpu) {
            Some(p) => format!(
                "{what}: the CPU belongs to partition {0:?} and the process runs outside it — let tame reserve start the program there (tame reserve … --cpu {cpu} -- PROGRAM), or move the process in first (tame detach {pid} -p {0})",
                p.name
            ),
            None => format!(
                "{what}: the CPU is outside the cpuset the process may use — choose another --cpu"
            ),
        }
    }

    /// The applied partition (the journal in the configured directory) that holds `cpu`.
    fn partition_of(&self, cpu: u32) -> Option<tame_partition::AppliedPartition> {
        let applied = tame_partition::Applied::read(&self.config.root, &self.config.journal_dir)
            .ok()
            .flatten()?;
        applied.holding(&CpuList::from_cpus([cpu])).cloned()
    }

    /// Where the scheduler thread of `cpu` goes before it pins itself: the applied
    /// partition's cgroup when `cpu` lies outside the server's cpuset — after tame apply the
    /// server runs in the system partition, and the CPUs it serves are the partitions'.
    fn home_of(&self, cpu: u32) -> Result<Option<scheduler::Home>> {
        if tame_rt::sched::allowed_cpus().contains(&cpu) {
            return Ok(None);
        }
        let Some(p) = self.partition_of(cpu) else {
            return Ok(None);
        };
        let Some(cgroup) = p.cgroup else {
            return Ok(None);
        };
        if cgroup.version != tame_host::cgroup::CgroupVersion::V1 {
            return Err(invalid(format!(
                "CPU {cpu} belongs to partition {0:?}, outside the server's cpuset, and on cgroup v2 one thread cannot join a partition's cgroup alone — run the server in the partition (tame run -p {0} -- tame serve …) to serve its CPUs",
                p.name
            )));
        }
        Ok(Some(scheduler::Home {
            partition: p.name,
            group: cgroup.group(),
        }))
    }

    /// The scheduler thread of `cpu`, started on first use.
    fn scheduler(&mut self, cpu: u32) -> Result<Arc<Cpu>> {
        if let Some((c, handle)) = self.cpus.get(&cpu) {
            if !handle.is_finished() {
                return Ok(c.clone());
            }
        }
        let home = self.home_of(cpu)?;
        let shared = Arc::new(Cpu::new());
        let (ready_tx, ready_rx) = mpsc::channel();
        let setup = scheduler::Setup {
            cpu,
            home,
            shared: shared.clone(),
            watchdog: self.watchdog.clone(),
            stop: self.stop.clone(),
            root: self.config.root.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("tame-serve-cpu{cpu}"))
            .spawn(move || scheduler::run(setup, ready_tx))
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

    /// Clients of `cpu` whose process exited since the scheduler thread last looked:
    /// remove them now (their share returns before admission decides).
    fn prune_exited(&mut self, cpu: u32) {
        let Some((c, _)) = self.cpus.get(&cpu) else {
            return;
        };
        let root = &self.config.root;
        let mut st = c.state.lock().unwrap_or_else(|p| p.into_inner());
        let (kept, gone): (Vec<Client>, Vec<Client>) = std::mem::take(&mut st.clients)
            .into_iter()
            .partition(|k| k.process.alive(root));
        st.clients = kept;
        let pids: Vec<u32> = gone.iter().map(|g| g.info.pid).collect();
        st.leaving.extend(gone);
        drop(st);
        if !pids.is_empty() && c.changed_and_wait() {
            for pid in pids {
                let _ = self.record.remove(pid);
            }
        }
    }

    fn release(&mut self, pid: u32, asker: &Asker) -> Result<()> {
        let Some(cpu) = self.find(pid) else {
            return Err(invalid(format!(
                "process {pid} holds no server reservation — see tame reserve --list"
            )));
        };
        let owner = tame_host::process::inspect(&self.config.root, pid)
            .map(|i| i.uid)
            .ok();
        let (c, _) = &self.cpus[&cpu];
        let mut st = c.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = st.clients.iter().position(|c| c.info.pid == pid) else {
            return Err(invalid(format!(
                "process {pid} holds no server reservation — see tame reserve --list"
            )));
        };
        let allowed =
            asker.uid == 0 || st.clients[i].asker_uid == asker.uid || owner == Some(asker.uid);
        if !allowed {
            return Err(invalid(format!(
                "no permission: the reservation of process {pid} is neither yours nor of a process of yours — release it as root"
            )));
        }
        let client = st.clients.remove(i);
        st.leaving.push(client);
        drop(st);
        // Forgotten by the record only once restored: a crash in between is recovered.
        if c.changed_and_wait() {
            let _ = self.record.remove(pid);
        }
        Ok(())
    }

    /// Stop every scheduler thread (each restores its clients), let the watchdog go,
    /// remove the record.
    fn shutdown(&mut self) {
        self.stopping = true;
        self.stop.store(true, Ordering::Relaxed);
        for (_, (_, handle)) in std::mem::take(&mut self.cpus) {
            let _ = handle.join();
        }
        self.watchdog.shutdown();
        let _ = self.record.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    #[test]
    fn the_start_line_says_where_it_listens_and_what_guards_the_clients() {
        let mut config = Config {
            socket: "/run/tame/serve.sock".into(),
            policy: Policy::builtin(),
            journal_dir: "/var/lib/tame".into(),
            root: Root::new("/"),
        };
        assert_eq!(
            started(&config, 4242),
            "tame serve: listening on /run/tame/serve.sock (root only may connect); policy built-in, cap 90 % per CPU; watchdog pid 4242 (SCHED_FIFO 99) restores the clients if the server dies; restore record /run/tame/serve.record"
        );
        config.policy.socket_gid = Some(1001);
        config.policy.origin = "/etc/tame/serve.toml".into();
        let line = started(&config, 7);
        assert!(
            line.contains("(root and group 1001 may connect); policy /etc/tame/serve.toml,"),
            "{line}"
        );
    }

    #[test]
    fn a_peer_that_cannot_be_told_is_refused() {
        let mut fds = [0; 2];
        // SAFETY: fds is a writable array of two ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors we own; a pipe posing as a socket makes SO_PEERCRED fail.
        let (not_a_socket, _other) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let stream = UnixStream::from(not_a_socket);
        match identify(&stream) {
            Err(Response::Error { kind, message }) => {
                assert_eq!(kind, ErrorKind::Refused);
                assert!(message.contains("cannot tell who is asking"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(identify(&a).is_ok());
    }
}
