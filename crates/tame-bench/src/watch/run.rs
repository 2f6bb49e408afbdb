//! The watch session: find the threads, trace every online CPU in a private
//! instance, read the pipes into the [`Analyzer`] as the run goes (events a short lag
//! behind "now", merged across CPUs in time order), stop on the duration, Ctrl-C or
//! the program's end, and restore tracing.
//!
//! tame's own threads stay off the CPUs the watched threads may use where any other
//! CPU is left: the reader and the analysis are noise the program would otherwise see.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;
use tame_host::{CpuList, Root};
use tame_launch::spawn::{Held, Launched};
use tame_rt::clock::Clock;
use tame_rt::ClockKind;
use tame_trace::capture::{Capture, Sink};
use tame_trace::tracefs::{CaptureSpec, TraceClock, TraceError, TraceSession};
use tame_trace::Event;

use super::analyze::{Analyzer, AnalyzerConfig, ThreadRecorders};
use super::{TraceStatus, WatchFindings, WatchResult, WatchSettings, BENCH};
use crate::engine::{self, RunControl};
use crate::error::{failed, invalid, io_failed, Result};
use crate::result::{unix_now_ns, BenchResult, GroupResult};

/// The events watch needs beyond the attribution ones.
pub const WATCH_EVENTS: &[&str] = &[
    "sched/sched_waking",
    "sched/sched_migrate_task",
    "timer/hrtimer_start",
    "exceptions/page_fault_user",
    "raw_syscalls/sys_exit",
];
/// Attribution events watch does without: each event on a watched thread's wakeup path
/// costs it time (about 0.3–0.4 µs here, docs/benchmarks.md). sched_waking says all a
/// wakeup needs, earlier; the timer interrupt's own entry and exit leave its time
/// outside timer callbacks to whoever it interrupted (idle, mostly).
const WITHOUT_EVENTS: &[&str] = &[
    "sched/sched_wakeup",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
];
/// Events kept only when a watched thread emits them: unfiltered, a memory- or
/// syscall-heavy load elsewhere would flood the buffers, and the timers the kernel
/// re-arms on the way out of idle would cost a wakeup an event each. (A thread the
/// program starts is in the filter from the next look-up, 50 ms on; sched_waking is not
/// filtered, or a new thread's first activations would be lost.)
const PER_THREAD: &[&str] = &[
    "exceptions/page_fault_user",
    "raw_syscalls/sys_exit",
    "timer/hrtimer_start",
];
const PAGE_FAULTS: &str = "exceptions/page_fault_user";
/// A page-fault filter names at most this many threads (tracefs filters are short).
const MAX_FILTERED_THREADS: usize = 64;
/// Per-CPU trace buffer: under heavy load (stress-ng io and vm here: about 150 000
/// events a second) the reader, an ordinary thread, falls behind for a while.
const BUFFER_KB: u32 = 8192;
/// How often the pipes are read: the analysis lags anyway, and reading far behind the
/// kernel's writer keeps the reader off the traced CPUs' buffer pages.
const READ_EVERY: Duration = Duration::from_millis(40);
/// Events are analysed once this much older than now: every CPU's pipe has been
/// read up to there (the reader wakes every [`READ_EVERY`]).
const LAG_NS: u64 = 150_000_000;
/// How often the analysis runs and the watched threads are looked up again.
const TICK: Duration = Duration::from_millis(50);
/// Every this many ticks, the CPUs the watched threads are pinned to are read again.
const REPLACE_EVERY: u64 = 10;

/// Which threads of the watched processes.
#[derive(Clone, Debug)]
pub enum ThreadFilter {
    All,
    Tids(Vec<u32>),
    /// Threads whose name (comm) matches.
    Name(Regex),
}

impl ThreadFilter {
    /// `--threads`: a list of thread ids (`4411,4412`), else a regular expression on names.
    pub fn parse(text: &str) -> Result<Self> {
        let ids: std::result::Result<Vec<u32>, _> =
            text.split(',').map(|t| t.trim().parse::<u32>()).collect();
        if let Ok(ids) = ids {
            return Ok(ThreadFilter::Tids(ids));
        }
        Regex::new(text).map(ThreadFilter::Name).map_err(|e| {
            invalid(format!(
                "--threads {text:?} is neither thread ids nor a regular expression on thread names: {e} — give ids (4411,4412) or a pattern (^cyclictest$)"
            ))
        })
    }

    fn admits(&self, tid: u32, comm: &str) -> bool {
        match self {
            ThreadFilter::All => true,
            ThreadFilter::Tids(ids) => ids.contains(&tid),
            ThreadFilter::Name(re) => re.is_match(comm),
        }
    }
}

/// What is watched.
pub enum Watched {
    /// These processes (all their threads, as they come and go).
    Pids(Vec<u32>),
    /// Every thread listed in this cgroup file (a partition's `tasks`/`cgroup.threads`).
    Group { threads_file: String },
    /// A program started held by the caller: it runs once tracing is on.
    Command(Held),
}

/// A finished watch: the result, and the program's exit status when tame started it.
pub struct WatchRun {
    pub result: WatchResult,
    pub exit_code: Option<i32>,
    /// Each thread's distributions as recorded, in `result.watch.threads`' order.
    pub recorders: Vec<ThreadRecorders>,
}

/// Events the reader hands over, shared with the analysis.
#[derive(Default)]
struct Shared {
    events: BTreeMap<u32, Vec<Event>>,
    lost: BTreeMap<u32, u64>,
    errors: Vec<String>,
    read: u64,
    idle_exits_inferred: BTreeMap<u32, u64>,
}

/// The reader's end gathers a pass's events and hands them over under one lock: a lock
/// per event made the reader and the analysis wake each other, and their own switches
/// became events to read.
#[derive(Clone, Default)]
struct Handover {
    shared: Arc<Mutex<Shared>>,
    gathered: Vec<Event>,
}

impl Handover {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sink for Handover {
    fn event(&mut self, event: Event) {
        self.gathered.push(event);
    }
    fn flush(&mut self) {
        if self.gathered.is_empty() {
            return;
        }
        let gathered = std::mem::take(&mut self.gathered);
        let mut s = self.lock();
        s.read += gathered.len() as u64;
        for event in gathered {
            s.events.entry(event.cpu).or_default().push(event);
        }
    }
    fn lost(&mut self, cpu: u32, n: u64) {
        *self.lock().lost.entry(cpu).or_default() += n;
    }
    fn bytes(&mut self, _n: u64) {}
    fn error(&mut self, error: String) {
        self.lock().errors.push(error);
    }
    fn idle_exits_inferred(&mut self, cpu: u32, n: u64) {
        if n > 0 {
            self.lock().idle_exits_inferred.insert(cpu, n);
        }
    }
    fn poll_interval(&self) -> Duration {
        READ_EVERY
    }
}

/// Settings checked before anything runs.
pub fn validate(settings: &WatchSettings) -> Result<()> {
    if settings.period_ns == Some(0) {
        return Err(invalid("--period must be more than 0 — give the program's period, such as 1ms, or leave it out to infer it"));
    }
    if settings.deadline_ns == Some(0) {
        return Err(invalid(
            "--deadline must be more than 0 — give the response the program must keep, such as 500us",
        ));
    }
    if settings.window_ns == 0 || settings.window_ns > 1_000_000_000 {
        return Err(invalid(
            "--window must be from 1us to 1s — a snapshot shows that much of the CPU's time line before the miss",
        ));
    }
    Ok(())
}

/// Watch until `settings.duration_ns`, Ctrl-C (`control`) or the program's end.
pub fn run(
    root: &Root,
    settings: WatchSettings,
    filter: &ThreadFilter,
    watched: Watched,
    control: &RunControl,
    partition: Option<String>,
    command_line: Vec<String>,
) -> Result<WatchRun> {
    validate(&settings)?;
    let environment = tame_host::environment::RunEnvironment::capture(root);
    let kind = engine::preferred_clock(root);
    let clock = engine::make_clock(kind, environment.invariant_tsc)?;
    let calibration = engine::calibrate(&clock);
    let trace_clock = match kind {
        ClockKind::Tsc => TraceClock::X86Tsc,
        ClockKind::Monotonic => TraceClock::Mono,
    };
    let online: Vec<u32> = environment.online_cpus.iter().collect();
    let spec = CaptureSpec {
        extra_events: WATCH_EVENTS,
        without_events: WITHOUT_EVENTS,
        buffer_kb: Some(BUFFER_KB),
        ..CaptureSpec::new(online.clone(), trace_clock, "watch")
    };
    let mut session = TraceSession::start(root, &spec).map_err(|e| match e {
        TraceError::Unavailable(why) => invalid(format!(
            "cannot trace the scheduler here: {why} — tame watch follows threads through tracefs (sched, irq and timer events), as root"
        )),
        TraceError::Failed(why) => failed(format!("cannot set up tracing: {why}")),
    })?;
    let pipes: Vec<_> = online.iter().map(|&c| (c, session.pipe_path(c))).collect();
    let handover = Handover::default();
    let mut threads = Threads::new(root, filter);
    let mut analyzer = Analyzer::new(AnalyzerConfig {
        period_ns: settings.period_ns,
        deadline_ns: settings.deadline_ns,
        window_ns: settings.window_ns,
        snapshots: settings.snapshots,
    });
    let (pids, mut child, group) = match watched {
        Watched::Pids(p) => (p, None, None),
        Watched::Group { threads_file } => (Vec::new(), None, Some(threads_file)),
        Watched::Command(held) => (vec![held.pid()], Some(held), None),
    };
    threads.refresh(&pids, group.as_deref(), &mut analyzer);
    if threads.tids.is_empty() && child.is_none() {
        return Err(invalid(if group.is_some() {
            "no thread to watch: the partition runs no thread --threads admits — start the program in it first (tame run -p NAME -- CMD), or watch it by pid"
        } else {
            "no thread to watch: none of the processes has a thread --threads admits — check the pids (tame ps) and the pattern"
        }));
    }
    let online_cpus = environment.online_cpus.clone();
    let mut reader_cpus = threads.cpus_to_keep_off(&online_cpus);
    let mut own = OwnThreads::new();
    own.place(&reader_cpus, None);
    let capture = Capture::start_into(
        &pipes,
        trace_clock.timestamp(),
        &reader_cpus,
        handover.clone(),
    )
    .map_err(|e| io_failed("cannot read the trace pipes", e))?;
    threads.filter_per_thread(&mut session);
    session
        .begin()
        .map_err(|e| failed(format!("cannot start tracing: {e}")))?;
    let started_unix_ns = unix_now_ns();
    let started = clock.now();
    let mut launched: Option<Launched> = match child.take() {
        Some(held) => Some(held.go()?),
        None => None,
    };
    let mut merger = Merger::new(clock, trace_clock);
    let mut exit_code = None;
    let mut interrupted = false;
    let mut ticks = 0u64;
    loop {
        std::thread::sleep(TICK);
        ticks += 1;
        if threads.refresh(&pids, group.as_deref(), &mut analyzer) {
            threads.filter_per_thread(&mut session);
        }
        // A program pins its threads after it starts (cyclictest -a): follow it.
        if ticks % REPLACE_EVERY == 1 {
            let cpus = threads.cpus_to_keep_off(&online_cpus);
            if cpus != reader_cpus || ticks == 1 {
                own.place(&cpus, capture.reader_tid());
                reader_cpus = cpus;
            }
        }
        merger.take(&handover);
        analyzer.feed(merger.ready(Some(merger.now_ns().saturating_sub(LAG_NS))));
        if control.stopped() {
            interrupted = true;
            break;
        }
        if settings
            .duration_ns
            .is_some_and(|d| clock.now().saturating_sub(started) >= d)
        {
            break;
        }
        if let Some(l) = launched.as_mut() {
            if let Ok(Some(status)) = l.child.try_wait() {
                exit_code = Some(tame_launch::spawn::exit_code(status));
                break;
            }
        } else if group.is_none() && pids.iter().all(|&p| !root.process(p).exists()) {
            break;
        }
    }
    let elapsed_ns = clock.now().saturating_sub(started);
    let mut trace = TraceStatus::default();
    if let Err(e) = session.end() {
        trace.restore_problems.push(e.to_string());
    }
    if let Some(mut l) = launched.take() {
        exit_code = exit_code.or_else(|| Some(stop(&mut l)));
    }
    match capture.finish_sink() {
        Some(h) => merger.take(&h),
        None => trace
            .restore_problems
            .push("the trace reader panicked".into()),
    }
    analyzer.feed(merger.ready(None));
    trace.tracefs_dir = session.dir().to_string();
    let (on, missing) = session.events();
    trace.events_enabled = on.to_vec();
    trace.events_missing = missing.to_vec();
    trace.recovered = session.recovered().to_vec();
    {
        let shared = handover.lock();
        trace.lost = shared.lost.clone();
        trace.events_read = shared.read;
        trace.idle_exits_inferred = shared.idle_exits_inferred.clone();
        trace.restore_problems.extend(shared.errors.iter().cloned());
    }
    trace
        .restore_problems
        .extend(session.restore().not_restored);
    let finished = analyzer.finish();
    let mut notes = std::mem::take(&mut threads.notes);
    if trace.lost.values().any(|&n| n > 0) {
        notes.push(format!(
            "the kernel dropped {} events before they were read: activations around them may be missing or merged",
            trace.lost.values().sum::<u64>()
        ));
    }
    let snapshots = finished.snapshots;
    let merged = finished.merged;
    let recorders = finished.recorders;
    let (findings, groups): (Vec<_>, Vec<GroupResult>) = finished.threads.into_iter().unzip();
    let settings = WatchSettings {
        pids: if pids.is_empty() {
            threads.pids()
        } else {
            pids
        },
        cpus: online_cpus,
        trace_clock,
        ..settings
    };
    let result = BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: BENCH.into(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns,
        elapsed_ns,
        interrupted,
        environment,
        calibration,
        load: None,
        partition,
        settings,
        groups,
        merged,
    };
    Ok(WatchRun {
        result: WatchResult {
            result,
            watch: WatchFindings {
                threads: findings,
                trace,
                snapshots,
                snapshot_dir: None,
                exit: exit_code.map(|c| c.to_string()),
                notes,
            },
        },
        exit_code,
        recorders,
    })
}

/// Stop a program tame started (the watch ended first): SIGTERM, then SIGKILL after 2 s.
fn stop(l: &mut Launched) -> i32 {
    let pid = l.child.id() as libc::pid_t;
    // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    for _ in 0..40 {
        if let Ok(Some(status)) = l.child.try_wait() {
            return tame_launch::spawn::exit_code(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = l.child.kill();
    l.child
        .wait()
        .map(tame_launch::spawn::exit_code)
        .unwrap_or(-1)
}

/// tame's own threads during the watch — this one (the caller's, which analyses) and
/// the trace reader — and where they may run. On CPUs no watched thread uses they run
/// at SCHED_FIFO 1, so a loaded machine cannot starve them into losing events (150 000
/// a second under stress-ng io and vm here; an ordinary reader fell seconds behind);
/// anywhere a watched thread may run they stay ordinary. This thread gets its place
/// and policy back afterwards (a caller such as assess goes on measuring).
struct OwnThreads {
    affinity: Option<Vec<u32>>,
    sched: Option<tame_rt::sched::ThreadSched>,
}

impl OwnThreads {
    fn new() -> Self {
        OwnThreads {
            affinity: tame_rt::sched::get_affinity(0).ok(),
            sched: tame_rt::sched::get_thread_sched(0).ok(),
        }
    }

    /// Onto `cpus` at FIFO 1, or (empty: nowhere to keep off) ordinary where they were.
    /// Best effort: where they cannot move, it is noise the report shows.
    fn place(&mut self, cpus: &[u32], reader: Option<u32>) {
        use tame_rt::sched::{apply_raw, set_affinity, SchedSpec};
        let spec = if cpus.is_empty() {
            SchedSpec::other()
        } else {
            SchedSpec::static_priority(tame_rt::Policy::Fifo, 1)
        };
        for tid in [Some(0), reader.map(|t| t as libc::pid_t)]
            .into_iter()
            .flatten()
        {
            if !cpus.is_empty() {
                let _ = set_affinity(tid, cpus.to_vec());
            }
            let _ = apply_raw(tid, &spec, false);
        }
    }
}

impl Drop for OwnThreads {
    fn drop(&mut self) {
        if let Some(s) = self.sched.take() {
            let _ = tame_rt::sched::set_thread_sched(0, &s);
        }
        if let Some(cpus) = self.affinity.take() {
            let _ = tame_rt::sched::set_affinity(0, cpus);
        }
    }
}

/// The watched threads, looked up again as the program starts and ends threads.
struct Threads<'a> {
    root: &'a Root,
    filter: &'a ThreadFilter,
    tids: BTreeMap<u32, u32>,
    notes: Vec<String>,
    /// Too many threads to name in a filter: said once.
    unfiltered: bool,
}

impl<'a> Threads<'a> {
    fn new(root: &'a Root, filter: &'a ThreadFilter) -> Self {
        Threads {
            root,
            filter,
            tids: BTreeMap::new(),
            notes: Vec::new(),
            unfiltered: false,
        }
    }

    fn pids(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.tids.values().copied().collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Look the threads up; true when new ones were added.
    fn refresh(&mut self, pids: &[u32], group: Option<&str>, analyzer: &mut Analyzer) -> bool {
        let mut found: Vec<(u32, u32)> = Vec::new();
        for &pid in pids {
            for tid in self.root.process(pid).threads() {
                found.push((tid, pid));
            }
        }
        if let Some(file) = group {
            if let Ok(text) = self.root.read(file) {
                for tid in text
                    .split_whitespace()
                    .filter_map(|t| t.parse::<u32>().ok())
                {
                    let pid = self
                        .root
                        .process(tid)
                        .status()
                        .ok()
                        .and_then(|s| s.number("Tgid"))
                        .map_or(tid, |p| p as u32);
                    found.push((tid, pid));
                }
            }
        }
        let mut added = false;
        for (tid, pid) in found {
            if self.tids.contains_key(&tid) || analyzer.watches(tid) {
                continue;
            }
            let task = self.root.process(pid).task(tid);
            let Ok(stat) = task.stat() else { continue };
            if !self.filter.admits(tid, &stat.comm) {
                continue;
            }
            analyzer.watch(tid, pid, &stat.comm);
            self.tids.insert(tid, pid);
            added = true;
        }
        added
    }

    /// Where tame's own threads should run: the online CPUs no pinned watched thread
    /// may use. Threads allowed everywhere pin nothing (they could meet tame anywhere);
    /// empty when nothing is pinned or nothing is left.
    fn cpus_to_keep_off(&self, online: &CpuList) -> Vec<u32> {
        let mut pinned = CpuList::default();
        for (&tid, &pid) in &self.tids {
            let allowed = self
                .root
                .process(pid)
                .task(tid)
                .status()
                .ok()
                .and_then(|s| s.cpus_allowed());
            if let Some(cpus) = allowed.filter(|c| c != online) {
                pinned = pinned.union(&cpus);
            }
        }
        if pinned.is_empty() {
            return Vec::new();
        }
        online.difference(&pinned).iter().collect()
    }

    /// Keep the per-thread events to the watched threads. Past the filter's reach they
    /// are all kept (costlier, and page faults of every task are then not counted).
    fn filter_per_thread(&mut self, session: &mut TraceSession) {
        if self.tids.is_empty() {
            return;
        }
        let too_many = self.tids.len() > MAX_FILTERED_THREADS;
        if too_many && !self.unfiltered {
            self.notes.push(format!(
                "more than {MAX_FILTERED_THREADS} threads are watched: page faults are not counted and every task's wakeups and timers are traced"
            ));
            self.unfiltered = true;
        }
        for event in PER_THREAD {
            if !session.events().0.iter().any(|e| e == event) {
                continue;
            }
            let filter = match (too_many, *event == PAGE_FAULTS) {
                (true, true) => "common_pid == 0".to_string(),
                // "0" clears a filter: every occurrence is kept.
                (true, false) => "0".to_string(),
                (false, _) => self
                    .tids
                    .keys()
                    .map(|t| format!("common_pid == {t}"))
                    .collect::<Vec<_>>()
                    .join(" || "),
            };
            if let Err(e) = session.set_filter(event, &filter) {
                self.notes.push(format!("{event} is not followed: {e}"));
            }
        }
    }
}

/// Events per CPU in the trace's order, converted to ns and handed on merged in time
/// order once every CPU has been read past them.
struct Merger {
    clock: Clock,
    trace_clock: TraceClock,
    pending: BTreeMap<u32, VecDeque<Event>>,
}

impl Merger {
    fn new(clock: Clock, trace_clock: TraceClock) -> Self {
        Merger {
            clock,
            trace_clock,
            pending: BTreeMap::new(),
        }
    }

    /// Now on the converted trace time line.
    fn now_ns(&self) -> u64 {
        self.to_ns(self.clock.raw())
    }

    fn to_ns(&self, ts: u64) -> u64 {
        match (self.trace_clock, self.clock.calibration()) {
            (TraceClock::X86Tsc, Some(c)) => c.cycles_to_ns(ts),
            _ => ts,
        }
    }

    fn take(&mut self, handover: &Handover) {
        let taken = std::mem::take(&mut handover.lock().events);
        for (cpu, events) in taken {
            let converted: Vec<Event> = events
                .into_iter()
                .map(|mut e| {
                    e.ts = self.to_ns(e.ts);
                    e
                })
                .collect();
            self.pending.entry(cpu).or_default().extend(converted);
        }
    }

    /// Events before `until` (all with `None`), in time order.
    fn ready(&mut self, until: Option<u64>) -> Vec<Event> {
        let mut out = Vec::new();
        for queue in self.pending.values_mut() {
            while queue
                .front()
                .is_some_and(|e| until.is_none_or(|u| e.ts < u))
            {
                out.extend(queue.pop_front());
            }
        }
        out.sort_by_key(|e| e.ts);
        out
    }
}
