//! The guard: a pass every interval (and a look at the tasks a tracepoint names in
//! between), what changed since the pass before logged and counted, repairs made when asked.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tame_host::cgroup::members::{kernel_places, read_ids};
use tame_host::error::Error;
use tame_host::irq::InterruptsTable;
use tame_host::utc::now_unix_ns;
use tame_host::Root;
use tame_partition::status::AuditTask;
use tame_partition::Applied;

use crate::backoff::{Backoff, Rules, Verdict};
use crate::event::{Action, Event, Kind};
use crate::metrics::Metrics;
use crate::observe::{irq_rates, observe, task_item, Fix, Key, Observation, Scope};
use crate::repair::repair_all;
use crate::waker::Waker;

/// How the guard runs.
#[derive(Clone, Debug)]
pub struct Config {
    pub root: Root,
    pub journal_dir: PathBuf,
    /// Isolated partitions to watch (empty: all).
    pub partitions: Vec<String>,
    pub repair: bool,
    pub interval: Duration,
    /// Interrupts per second above which an isolated CPU is reported.
    pub max_irq_rate: u64,
    pub backoff: Rules,
    /// Use tracepoints to wake early where tracefs allows (false: the /proc scan only).
    pub trace: bool,
}

/// The longest the loop waits before it looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);
/// The sweep of every task's affinity runs this many times per interval: an affinity change
/// (taskset) fires no tracepoint, and a full pass (the whole host model) is too costly to
/// run as often; the sweep reads only each task's stat and status.
const SWEEPS_PER_PASS: u32 = 4;
/// How long the tasks tracepoints name are gathered before one look at them all.
const COALESCE: Duration = Duration::from_millis(20);
/// The shortest time between sweeps.
const MIN_SWEEP: Duration = Duration::from_millis(100);

/// What the guard knows between passes.
pub struct Guard {
    config: Config,
    applied: Applied,
    scope: Scope,
    /// What the last pass (and looks since) saw and did not repair.
    seen: Observation,
    backoff: Backoff<Key>,
    metrics: Arc<Mutex<Metrics>>,
    last_irqs: Option<(InterruptsTable, Instant)>,
    started: Instant,
}

impl Guard {
    /// The applied partitions to watch; bad input when nothing is applied or `-p` names
    /// no isolated partition.
    pub fn new(config: Config, metrics: Arc<Mutex<Metrics>>) -> Result<Guard, Error> {
        let dir = &config.journal_dir;
        let applied = Applied::read(&config.root, dir)
            .map_err(|e| Error::Invalid(format!("cannot read the applied partitions: {e}")))?
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "no partition is applied (no journal in {}): tame guard watches applied partitions — apply a spec first (sudo tame apply SPEC), or give the --journal-dir it was applied with",
                    dir.display()
                ))
            })?;
        let scope = Scope::of(&applied, &config.partitions).map_err(Error::Invalid)?;
        Ok(Guard {
            backoff: Backoff::new(config.backoff),
            config,
            applied,
            scope,
            seen: Observation::new(),
            metrics,
            last_irqs: None,
            started: Instant::now(),
        })
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    fn metrics(&self) -> std::sync::MutexGuard<'_, Metrics> {
        self.metrics.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mono_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Log and count one event.
    pub fn emit(&self, mut e: Event, out: &mut dyn Write) {
        e.ts_ns = now_unix_ns();
        self.metrics().count(&e);
        // A closed stdout must not stop the guard: the metrics still count.
        let _ = writeln!(out, "{}", e.logfmt()).and_then(|()| out.flush());
    }

    /// One full pass: status and the interrupt rates read, compared with the pass before.
    /// `false` when the partitions are no longer applied.
    pub fn pass(&mut self, out: &mut dyn Write) -> Result<bool, Error> {
        let t0 = Instant::now();
        let status = tame_partition::status(&self.config.root, &self.config.journal_dir)
            .map_err(Error::from_layer)?;
        if !status.applied {
            return Ok(false);
        }
        let table = self.config.root.interrupts().ok();
        let now = Instant::now();
        let rates = match (&self.last_irqs, &table) {
            (Some((before, at)), Some(after)) => irq_rates(
                before,
                after,
                u64::try_from(now.duration_since(*at).as_nanos()).unwrap_or(u64::MAX),
            ),
            _ => Default::default(),
        };
        self.last_irqs = table.map(|t| (t, now));
        let isolated = self.scope.isolated_cpus();
        let observed = observe(&status, &self.scope, &rates, self.config.max_irq_rate);
        self.settle(observed, true, out);
        let took = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut m = self.metrics();
        m.irq_rate = rates
            .into_iter()
            .filter(|(c, _)| isolated.contains(*c))
            .collect();
        m.passes += 1;
        m.last_pass_ns = took;
        m.pass_ns_total += took;
        Ok(true)
    }

    /// Look at the tasks of the processes a tracepoint named, or of every process (the
    /// sweep between passes, `source` "sweep"): a stray among them is reported (and
    /// repaired) now; nothing is reported gone until a pass.
    pub fn look_at(&mut self, pids: &BTreeSet<u32>, source: &str, out: &mut dyn Write) {
        let root = self.config.root.clone();
        let own: BTreeSet<u32> = self
            .applied
            .partitions
            .iter()
            .filter(|p| p.is_isolated())
            .filter_map(|p| p.cgroup.as_ref())
            .flat_map(|c| read_ids(&root, &c.group().members()))
            .collect();
        let mut observed = Observation::new();
        for &pid in pids {
            for tid in root.process(pid).threads() {
                if own.contains(&tid) {
                    continue;
                }
                // A kernel thread just created has not its final flags yet (a workqueue
                // worker is marked unmovable after it starts): the next pass judges it.
                let Some(t) = tame_host::process::read_one(&root, pid, tid).filter(|t| !t.kthread)
                else {
                    continue;
                };
                let audit = AuditTask {
                    pid,
                    tid,
                    bound_by_kernel: kernel_places(t.kthread, t.affinity_locked, &t.comm),
                    comm: t.comm,
                    kernel_thread: t.kthread,
                    cpus_allowed: t.affinity,
                };
                observed.extend(task_item(&audit, &self.scope, source));
            }
        }
        if source == "tracepoint" {
            self.metrics().wakeups += 1;
        }
        self.settle(observed, false, out);
    }

    /// Report what appeared (and, after a full pass, what went), repair what may be
    /// repaired, and remember the rest for the next comparison.
    pub fn settle(&mut self, observed: Observation, complete: bool, out: &mut dyn Write) {
        let now = self.mono_ns();
        let mut lines = Vec::new();
        if complete {
            let gone: Vec<Key> = self
                .seen
                .keys()
                .filter(|k| !observed.contains_key(*k))
                .cloned()
                .collect();
            for k in gone {
                if let Some(item) = self.seen.remove(&k) {
                    let mut e = item.event;
                    e.kind = e.kind.gone();
                    e.action = Action::Cleared;
                    e.detail = None;
                    e.source = Some("scan".into());
                    lines.push(e);
                }
            }
        }
        let mut fixes: Vec<(Key, Fix, Event)> = Vec::new();
        for (k, item) in observed {
            let new = !self.seen.contains_key(&k);
            let mut e = item.event.clone();
            let verdict = match (&item.fix, self.config.repair) {
                (Some(_), true) => Some(self.backoff.decide(&k, now)),
                _ => None,
            };
            match (verdict, item.fix.clone()) {
                (Some(Verdict::Repair), Some(fix)) => fixes.push((k.clone(), fix, e)),
                (Some(Verdict::StartBackoff { pause_ns, .. }), _) => {
                    let r = self.backoff.rules;
                    e.action = Action::Backoff;
                    e.detail = Some(format!(
                        "repaired {} times within {} s and back again: another writer? repairs of it pause for {} s",
                        r.limit,
                        r.window_ns / 1_000_000_000,
                        pause_ns / 1_000_000_000
                    ));
                    lines.push(e);
                }
                (Some(Verdict::BackingOff { until_ns }), _) if new => {
                    e.detail = Some(format!(
                        "repairs of it pause for {} s more (backoff)",
                        until_ns.saturating_sub(now).div_ceil(1_000_000_000)
                    ));
                    lines.push(e);
                }
                _ if new => lines.push(e),
                _ => {}
            }
            self.seen.insert(k, item);
        }
        if !fixes.is_empty() {
            let results = repair_all(
                &self.config.root,
                &self.config.journal_dir,
                &self.applied,
                &self.scope,
                &fixes.iter().map(|(_, f, _)| f.clone()).collect::<Vec<_>>(),
            );
            for ((k, _, mut e), r) in fixes.into_iter().zip(results) {
                match r {
                    Ok(what) => {
                        e.action = Action::Repaired;
                        e.detail = Some(what);
                        // Gone once put back: if it comes back, it is new again (and counts
                        // towards a backoff).
                        self.seen.remove(&k);
                    }
                    Err(why) => {
                        e.action = Action::RepairFailed;
                        e.detail = Some(why);
                    }
                }
                lines.push(e);
            }
        }
        if complete {
            let seen = &self.seen;
            self.backoff.retain(now, |k| seen.contains_key(k));
        }
        for e in lines {
            self.emit(e, out);
        }
        self.gauges();
    }

    fn gauges(&self) {
        let mut strays: std::collections::BTreeMap<String, u64> = self
            .scope
            .partitions
            .iter()
            .map(|(n, _)| (n.clone(), 0))
            .collect();
        let (mut irqs, mut drifted) = (0, 0);
        for (k, item) in &self.seen {
            match k {
                Key::Task(_) => {
                    for p in item.event.partition.iter().flat_map(|p| p.split(',')) {
                        *strays.entry(p.to_string()).or_insert(0) += 1;
                    }
                }
                Key::Irq(_) => irqs += 1,
                Key::Drift(_) => drifted += 1,
                Key::Rate(_) => {}
            }
        }
        let mut m = self.metrics();
        m.strays = strays;
        m.irqs_on_isolated = irqs;
        m.drifted = drifted;
    }
}

/// Guard until `stop` is set (or the partitions are reverted): the first line says how it
/// watches (tracepoints, or a /proc scan and why), the last that it stopped; the tracing
/// instance is removed before it returns.
pub fn run(
    config: Config,
    stop: Arc<AtomicBool>,
    metrics: Arc<Mutex<Metrics>>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut guard = Guard::new(config.clone(), metrics.clone())?;
    let isolated = guard.scope().isolated_cpus();
    let names: Vec<String> = guard
        .scope()
        .partitions
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    let sweep_every = (config.interval / SWEEPS_PER_PASS).max(MIN_SWEEP);
    let (tx, rx) = mpsc::channel();
    let (waker, mode, how) = if config.trace {
        match Waker::start(&config.root, &isolated, tx) {
            Ok(w) => {
                let how = format!(
                    "tracepoints {} in {} wake a look at the tasks they name; a sweep of every task's affinity every {} ms and a full pass every {} ms catch the rest",
                    crate::waker::WAKE_EVENTS.join(","),
                    w.dir().unwrap_or_default(),
                    sweep_every.as_millis(),
                    config.interval.as_millis()
                );
                (Some(w), "tracepoints", how)
            }
            Err(why) => (
                None,
                "proc_scan",
                format!(
                    "no tracepoints ({why}): a sweep of every task's affinity every {} ms and a full pass every {} ms",
                    sweep_every.as_millis(),
                    config.interval.as_millis()
                ),
            ),
        }
    } else {
        drop(tx);
        (
            None,
            "proc_scan",
            format!(
                "tracepoints not asked for: a sweep of every task's affinity every {} ms and a full pass every {} ms",
                sweep_every.as_millis(),
                config.interval.as_millis()
            ),
        )
    };
    *metrics.lock().unwrap_or_else(|p| p.into_inner()) = Metrics::new(now_unix_ns(), mode, &names);
    let mut first = Event::new(Kind::Started);
    first.cpu = Some(isolated);
    first.partition = Some(names.join(","));
    first.source = Some(mode.to_string());
    first.detail = Some(format!(
        "{how}; repair {}; max irq rate {}/s",
        if config.repair { "on" } else { "off" },
        config.max_irq_rate
    ));
    guard.emit(first, out);
    let rx = waker.as_ref().map(|_| rx);
    let mut next = Instant::now();
    let mut next_sweep = next + sweep_every;
    let mut why_stopped = "asked to stop (SIGTERM/SIGINT)".to_string();
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let now = Instant::now();
        if now >= next {
            match guard.pass(out) {
                Ok(true) => {}
                Ok(false) => {
                    why_stopped = "the partitions were reverted: nothing left to guard".into();
                    break Ok(());
                }
                Err(e) => break Err(e),
            }
            next += config.interval;
            if next < Instant::now() {
                next = Instant::now() + config.interval;
            }
            next_sweep = Instant::now() + sweep_every;
            continue;
        }
        if now >= next_sweep && next_sweep < next {
            let mut pids: BTreeSet<u32> = config.root.pids().into_iter().collect();
            pids.remove(&std::process::id());
            guard.look_at(&pids, "sweep", out);
            next_sweep = Instant::now() + sweep_every;
            continue;
        }
        let wait = (next.min(next_sweep) - now).min(STOP_CHECK);
        match &rx {
            Some(rx) => match rx.recv_timeout(wait) {
                Ok(pid) => {
                    // A fork storm names thousands of tasks a second: gather for a moment,
                    // then look once (at most 1/COALESCE looks a second).
                    let mut pids = BTreeSet::from([pid]);
                    let until = Instant::now() + COALESCE;
                    while let Some(left) = until.checked_duration_since(Instant::now()) {
                        match rx.recv_timeout(left) {
                            Ok(p) => {
                                pids.insert(p);
                            }
                            Err(_) => break,
                        }
                    }
                    pids.remove(&std::process::id());
                    guard.look_at(&pids, "tracepoint", out);
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The reader ended: the scan goes on.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
            },
            None => std::thread::sleep(wait),
        }
    };
    let left = waker.map(Waker::stop).unwrap_or_default();
    let mut last = Event::new(Kind::Stopped);
    last.detail = Some(if left.is_empty() {
        why_stopped
    } else {
        format!(
            "{why_stopped}; tracing settings not restored: {}",
            left.join("; ")
        )
    });
    guard.emit(last, out);
    result
}
