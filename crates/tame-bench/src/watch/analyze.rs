//! The event stream turned into per-thread figures as it comes: events (in time
//! order across CPUs) drive the [`Tracker`]; each finished activation is attributed
//! against its CPUs' time lines, built from the events kept of the recent past; the
//! period is inferred from the first releases; misses are counted and the first few
//! drawn as snapshots. Memory stays bounded however long the watch: events are kept
//! for [`Analyzer::keep_ns`], figures go into histograms.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tame_trace::attribute::{AttributedGap, Gap, Timeline};
use tame_trace::{Event, NoiseClass};

use super::snapshot::{self, Snapshot, SnapshotSpan};
use super::track::{Activation, ReleasedBy, Stretch, Tracker};
use super::{Cause, Releases, ThreadFindings, INFER_ACTIVATIONS};
use crate::distribution::Distribution;
use crate::result::{GroupResult, Metric};
use crate::stats::Recorder;

/// Events kept at least this long, whatever the snapshot window.
const MIN_KEEP_NS: u64 = 200_000_000;

/// What the analysis needs to know up front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalyzerConfig {
    pub period_ns: Option<u64>,
    pub deadline_ns: Option<u64>,
    pub window_ns: u64,
    pub snapshots: u32,
}

/// A time line owner as watch names it: the idle task's time is the CPU waking up.
pub(super) fn classify(class: Option<NoiseClass>, source: &str) -> (Option<NoiseClass>, &str) {
    if class == Some(NoiseClass::Thread) && source.starts_with("swapper/") {
        (Some(NoiseClass::Idle), "idle")
    } else {
        (class, source)
    }
}

/// Events before the earliest stretch a batch attributes that its time line still needs:
/// what ran when the stretch began (a handler entered just before it, the task).
const LEAD_NS: u64 = 5_000_000;

/// A batch's time lines, built on first use from the events its activations need.
#[derive(Default)]
struct Timelines {
    /// Per CPU, the earliest time an activation of the batch needs (none: all kept).
    from: BTreeMap<u32, u64>,
    built: HashMap<(u32, u32), (Timeline, u64)>,
}

impl Timelines {
    /// For `activations`: their stretches, and a snapshot's window before each end.
    fn for_activations<'a>(
        activations: impl Iterator<Item = &'a Activation>,
        window: Option<u64>,
    ) -> Self {
        let mut from: BTreeMap<u32, u64> = BTreeMap::new();
        let mut need = |cpu: u32, t: u64| {
            let f = from.entry(cpu).or_insert(t);
            *f = (*f).min(t);
        };
        for a in activations {
            for i in &a.intervals {
                need(i.cpu, i.from_ns);
            }
            if let (Some(w), Some(last)) = (window, a.intervals.last()) {
                need(last.cpu, a.end_ns.saturating_sub(w));
            }
        }
        Timelines {
            from,
            built: HashMap::new(),
        }
    }
}

/// One activation's delay by one cause.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Part {
    class: NoiseClass,
    source: String,
    prio: Option<i32>,
    ns: u64,
}

/// A finished activation with its attributed delay, waiting for the period.
struct Done {
    activation: Activation,
    parts: Vec<Part>,
    /// Its number among the thread's activations (1 = the first).
    number: u64,
}

struct ThreadStats {
    pid: u32,
    comm: String,
    activations: u64,
    releases: Releases,
    wake: Recorder,
    response: Recorder,
    run: Recorder,
    period_ns: Option<u64>,
    period_inferred: bool,
    /// Activations held until the period is known.
    pending: Vec<Done>,
    distances: Vec<u64>,
    last_release: Option<u64>,
    /// The previous release [`ThreadStats::judge`] saw, for missed periods.
    judged_release: Option<u64>,
    misses: u64,
    /// Responses beyond the period: the next release came before the activation ended.
    overruns: u64,
    missed_periods: u64,
    page_faults: u64,
    migrations: u64,
    involuntary_switches: u64,
    causes: BTreeMap<(NoiseClass, String), Cause>,
    snapshot_ids: Vec<usize>,
}

/// The analysis in progress.
pub struct Analyzer {
    config: AnalyzerConfig,
    tracker: Tracker,
    history: BTreeMap<u32, VecDeque<Event>>,
    threads: BTreeMap<u32, ThreadStats>,
    snapshots: Vec<Snapshot>,
    latest_ns: u64,
}

impl Analyzer {
    pub fn new(config: AnalyzerConfig) -> Self {
        Analyzer {
            config,
            tracker: Tracker::new(),
            history: BTreeMap::new(),
            threads: BTreeMap::new(),
            snapshots: Vec::new(),
            latest_ns: 0,
        }
    }

    /// How long events are kept: a snapshot's window twice over, at least 200 ms.
    pub fn keep_ns(&self) -> u64 {
        self.config.window_ns.saturating_mul(2).max(MIN_KEEP_NS)
    }

    /// Follow thread `tid` of process `pid` from now on.
    pub fn watch(&mut self, tid: u32, pid: u32, comm: &str) {
        self.tracker.watch(tid);
        self.threads.entry(tid).or_insert_with(|| ThreadStats {
            pid,
            comm: comm.to_string(),
            activations: 0,
            releases: Releases::default(),
            wake: Recorder::new(),
            response: Recorder::new(),
            run: Recorder::new(),
            period_ns: None,
            period_inferred: false,
            pending: Vec::new(),
            distances: Vec::new(),
            last_release: None,
            judged_release: None,
            misses: 0,
            overruns: 0,
            missed_periods: 0,
            page_faults: 0,
            migrations: 0,
            involuntary_switches: 0,
            causes: BTreeMap::new(),
            snapshot_ids: Vec::new(),
        });
    }

    pub fn watches(&self, tid: u32) -> bool {
        self.tracker.watches(tid)
    }

    /// Feed events in time order (across CPUs): track, attribute, count.
    pub fn feed(&mut self, events: impl IntoIterator<Item = Event>) {
        for e in events {
            self.tracker.apply(&e);
            self.latest_ns = self.latest_ns.max(e.ts);
            self.history.entry(e.cpu).or_default().push_back(e);
        }
        let finished = self.tracker.take();
        if !finished.is_empty() {
            // Held activations (period not yet known) may be judged, and drawn, in this batch.
            let held = self
                .threads
                .values()
                .flat_map(|t| t.pending.iter().map(|d| &d.activation));
            let mut timelines =
                Timelines::for_activations(finished.iter().chain(held), self.snapshot_window());
            self.contiguous();
            for activation in finished {
                self.finished(activation, &mut timelines);
            }
        }
        let keep_from = self.latest_ns.saturating_sub(self.keep_ns());
        for events in self.history.values_mut() {
            while events.front().is_some_and(|e| e.ts < keep_from) {
                events.pop_front();
            }
        }
    }

    /// The window a snapshot still to be taken needs before an activation's end.
    fn snapshot_window(&self) -> Option<u64> {
        (self.snapshots.len() < self.config.snapshots as usize).then_some(self.config.window_ns)
    }

    /// Each CPU's kept events in one slice, for building time lines without copying.
    fn contiguous(&mut self) {
        for events in self.history.values_mut() {
            events.make_contiguous();
        }
    }

    /// The time line of `cpu` with `tid` as its detector, built once per batch from the
    /// events the batch's activations need (history made contiguous first).
    fn timeline<'a>(
        history: &BTreeMap<u32, VecDeque<Event>>,
        timelines: &'a mut Timelines,
        cpu: u32,
        tid: u32,
    ) -> &'a (Timeline, u64) {
        let from = timelines
            .from
            .get(&cpu)
            .map_or(0, |f| f.saturating_sub(LEAD_NS));
        timelines.built.entry((cpu, tid)).or_insert_with(|| {
            let events: &[Event] = history.get(&cpu).map_or(&[], |h| h.as_slices().0);
            let events = &events[events.partition_point(|e| e.ts < from)..];
            let first = events.first().map_or(u64::MAX, |e| e.ts);
            (Timeline::build(events, tid), first)
        })
    }

    fn finished(&mut self, activation: Activation, timelines: &mut Timelines) {
        let parts = self.attribute(&activation, timelines);
        let Some(stats) = self.threads.get_mut(&activation.tid) else {
            return;
        };
        stats.activations += 1;
        match activation.released_by {
            ReleasedBy::Timer => stats.releases.timer += 1,
            ReleasedBy::Wakeup => stats.releases.wakeup += 1,
            ReleasedBy::Unknown => stats.releases.unknown += 1,
        }
        stats.page_faults += u64::from(activation.page_faults);
        stats.migrations += u64::from(activation.migrations);
        stats.involuntary_switches += u64::from(activation.involuntary_switches);
        stats.run.record(activation.run_ns);
        for p in &parts {
            let c = stats
                .causes
                .entry((p.class, p.source.clone()))
                .or_insert_with(|| Cause {
                    class: p.class,
                    source: p.source.clone(),
                    prio: p.prio,
                    count: 0,
                    total_ns: 0,
                    max_ns: 0,
                });
            c.count += 1;
            c.total_ns += p.ns;
            c.max_ns = c.max_ns.max(p.ns);
        }
        if activation.released_by != ReleasedBy::Unknown {
            if let Some(last) = stats.last_release {
                if stats.distances.len() < INFER_ACTIVATIONS {
                    stats
                        .distances
                        .push(activation.release_ns.saturating_sub(last));
                }
            }
            stats.last_release = Some(activation.release_ns);
        }
        let done = Done {
            activation,
            parts,
            number: stats.activations,
        };
        if stats.period_ns.is_none() {
            if let Some(p) = self.config.period_ns {
                stats.period_ns = Some(p);
            } else if stats.distances.len() >= INFER_ACTIVATIONS {
                stats.period_ns = median(&stats.distances);
                stats.period_inferred = true;
            }
        }
        if stats.period_ns.is_none() {
            stats.pending.push(done);
            return;
        }
        let mut ready = std::mem::take(&mut stats.pending);
        ready.push(done);
        for d in ready {
            self.judge(d, timelines);
        }
    }

    /// What delayed the activation: each stretch attributed on its CPU. While it
    /// ran, its own time is its work; waiting or preempted, the time is what ran instead.
    fn attribute(&self, a: &Activation, timelines: &mut Timelines) -> Vec<Part> {
        let mut parts: Vec<Part> = Vec::new();
        for i in &a.intervals {
            let (timeline, first) = Self::timeline(&self.history, timelines, i.cpu, a.tid);
            let from = i.from_ns.max(*first).min(i.to_ns);
            if from > i.from_ns {
                add(
                    &mut parts,
                    NoiseClass::Unexplained,
                    "before the events kept",
                    None,
                    from - i.from_ns,
                );
            }
            if i.to_ns <= from {
                continue;
            }
            let gap = timeline.attribute(&[Gap {
                start_ns: from,
                duration_ns: i.to_ns - from,
            }]);
            let Some(g) = gap.first() else { continue };
            add_gap(&mut parts, g, i.stretch);
        }
        parts.sort_by_key(|p| std::cmp::Reverse(p.ns));
        parts
    }

    /// Record an activation's figures against the period and deadline now known.
    fn judge(&mut self, d: Done, timelines: &mut Timelines) {
        let a = &d.activation;
        let Some(stats) = self.threads.get_mut(&a.tid) else {
            return;
        };
        let (Some(wake), Some(response)) = (a.wake_latency_ns(), a.response_ns()) else {
            return;
        };
        stats.wake.record(wake);
        stats.response.record(response);
        let period = stats.period_ns.unwrap_or(0);
        // Between two timer releases (a wakeup keeps no period): a release two periods
        // after the previous one means one period had none.
        match (stats.judged_release, a.released_by) {
            (Some(prev), ReleasedBy::Timer) if period > 0 => {
                let d = a.release_ns.saturating_sub(prev);
                if d > period + period / 2 {
                    stats.missed_periods += (d + period / 2) / period - 1;
                }
            }
            _ => {}
        }
        stats.judged_release = (a.released_by == ReleasedBy::Timer).then_some(a.release_ns);
        if period > 0 && response > period {
            stats.overruns += 1;
        }
        let deadline = self.config.deadline_ns.or(stats.period_ns);
        let Some(deadline) = deadline.filter(|&dl| response > dl) else {
            return;
        };
        stats.misses += 1;
        if self.snapshots.len() < self.config.snapshots as usize {
            if let Some(s) = self.snapshot(&d, deadline, timelines) {
                let stats = self.threads.get_mut(&a.tid).expect("checked above");
                stats.snapshot_ids.push(self.snapshots.len());
                self.snapshots.push(s);
            }
        }
    }

    /// The miss as a snapshot: the last `window_ns` of the CPU it ended on, while
    /// the events are still kept.
    fn snapshot(&self, d: &Done, deadline_ns: u64, timelines: &mut Timelines) -> Option<Snapshot> {
        let a = &d.activation;
        let cpu = a.intervals.last().map_or(a.cpu, |i| i.cpu);
        let (timeline, first) = Self::timeline(&self.history, timelines, cpu, a.tid);
        let from = a.end_ns.saturating_sub(self.config.window_ns).max(*first);
        if from >= a.end_ns {
            return None;
        }
        let stats = &self.threads[&a.tid];
        let spans: Vec<SnapshotSpan> =
            snapshot::spans_from(&timeline.spans(from, a.end_ns), from, &stats.comm);
        let rel = |t: u64| t as i64 - from as i64;
        Some(Snapshot {
            schema: snapshot::SCHEMA.into(),
            thread: stats.comm.clone(),
            tid: a.tid,
            prio: self.tracker.seen(a.tid).and_then(|s| s.1),
            cpu,
            activation: d.number,
            released_by: Some(a.released_by),
            window_start_ns: from,
            window_ns: a.end_ns - from,
            release_ns: rel(a.release_ns),
            start_ns: rel(a.start_ns),
            deadline_ns: rel(a.release_ns.saturating_add(deadline_ns)),
            end_ns: rel(a.end_ns),
            wake_latency_ns: a.start_ns - a.release_ns,
            response_ns: a.end_ns - a.release_ns,
            run_ns: a.run_ns,
            causes: d
                .parts
                .iter()
                .map(|p| Cause {
                    class: p.class,
                    source: p.source.clone(),
                    prio: p.prio,
                    count: 1,
                    total_ns: p.ns,
                    max_ns: p.ns,
                })
                .collect(),
            spans,
        })
    }

    /// Finish: periods still unknown are inferred from what there is, held
    /// activations judged. Returns each thread's findings with its group, labelled
    /// by name (`#2`… for namesakes, in thread-id order), all threads merged, and the
    /// snapshots.
    pub fn finish(mut self) -> Finished {
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        // Held activations may be drawn: every event kept is needed.
        let mut timelines = Timelines::default();
        self.contiguous();
        for tid in &tids {
            let stats = self.threads.get_mut(tid).expect("listed");
            if stats.period_ns.is_none() {
                stats.period_ns = median(&stats.distances);
                stats.period_inferred = stats.period_ns.is_some();
            }
            let pending = std::mem::take(&mut stats.pending);
            for d in pending {
                self.judge(d, &mut timelines);
            }
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::with_capacity(tids.len());
        let mut all = [Recorder::new(), Recorder::new(), Recorder::new()];
        let mut recorders = Vec::with_capacity(tids.len());
        let mut counters: BTreeMap<String, u64> = BTreeMap::new();
        for tid in tids {
            let mut stats = self.threads.remove(&tid).expect("listed");
            let (comm, prio) = self.tracker.seen(tid).cloned().unwrap_or_default();
            if !comm.is_empty() {
                stats.comm = comm;
            }
            for (merged, own) in all
                .iter_mut()
                .zip([&stats.wake, &stats.response, &stats.run])
            {
                merged.merge(own);
            }
            let n = seen.entry(stats.comm.clone()).or_insert(0);
            *n += 1;
            let label = if *n == 1 {
                stats.comm.clone()
            } else {
                format!("{} #{n}", stats.comm)
            };
            for &i in &stats.snapshot_ids {
                self.snapshots[i].thread = label.clone();
            }
            recorders.push(ThreadRecorders {
                wake: stats.wake.clone(),
                response: stats.response.clone(),
                run: stats.run.clone(),
                misses: stats.misses,
                overruns: stats.overruns,
            });
            let (f, group) = findings(tid, label, prio, stats, self.config.deadline_ns);
            for (k, v) in &group.counters {
                *counters.entry(k.clone()).or_default() += v;
            }
            out.push((f, group));
        }
        let [wake, response, run] = all;
        Finished {
            threads: out,
            merged: GroupResult {
                label: "all".into(),
                cpu: None,
                metrics: metrics(&wake, &response, &run),
                counters,
                derived: BTreeMap::new(),
                spread: BTreeMap::new(),
                timeline: None,
                not_measured: None,
            },
            snapshots: self.snapshots,
            recorders,
        }
    }
}

/// What the analysis found, per thread and for all.
pub struct Finished {
    pub threads: Vec<(ThreadFindings, GroupResult)>,
    pub merged: GroupResult,
    pub snapshots: Vec<Snapshot>,
    /// Each thread's distributions as recorded (in `threads`' order), for a caller
    /// that merges them with others (`tame assess -- CMD`).
    pub recorders: Vec<ThreadRecorders>,
}

/// One thread's recorded distributions and counts.
#[derive(Clone, Debug)]
pub struct ThreadRecorders {
    pub wake: Recorder,
    pub response: Recorder,
    pub run: Recorder,
    pub misses: u64,
    pub overruns: u64,
}

fn metrics(wake: &Recorder, response: &Recorder, run: &Recorder) -> Vec<Metric> {
    let metric = |name: &str, r: &Recorder| Metric {
        name: name.into(),
        unit: "ns".into(),
        summary: r.summary(),
        distribution: Some(Distribution::of(r)),
    };
    vec![
        metric("wake_latency", wake),
        metric("response", response),
        metric("run_time", run),
    ]
}

fn findings(
    tid: u32,
    label: String,
    prio: Option<i32>,
    s: ThreadStats,
    deadline_ns: Option<u64>,
) -> (ThreadFindings, GroupResult) {
    let counters: BTreeMap<String, u64> = [
        ("activations", s.activations),
        ("misses", s.misses),
        ("overruns", s.overruns),
        ("missed_periods", s.missed_periods),
        ("page_faults", s.page_faults),
        ("migrations", s.migrations),
        ("involuntary_switches", s.involuntary_switches),
        ("unknown_releases", s.releases.unknown),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut derived = BTreeMap::new();
    if let Some(p) = s.period_ns {
        derived.insert("period_ns".to_string(), p as f64);
    }
    let group = GroupResult {
        label: label.clone(),
        cpu: None,
        metrics: metrics(&s.wake, &s.response, &s.run),
        counters,
        derived,
        spread: BTreeMap::new(),
        timeline: None,
        not_measured: None,
    };
    let mut causes: Vec<Cause> = s.causes.into_values().collect();
    causes.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
    let findings = ThreadFindings {
        label,
        tid,
        pid: s.pid,
        comm: s.comm,
        prio,
        activations: s.activations,
        releases: s.releases,
        period_ns: s.period_ns,
        period_inferred: s.period_inferred,
        deadline_ns: deadline_ns.or(s.period_ns),
        misses: s.misses,
        missed_periods: s.missed_periods,
        page_faults: s.page_faults,
        migrations: s.migrations,
        involuntary_switches: s.involuntary_switches,
        causes,
        snapshot_ids: s.snapshot_ids,
    };
    (findings, group)
}

/// The median of the distances (the upper middle of an even count); `None` when empty.
fn median(values: &[u64]) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

fn add(parts: &mut Vec<Part>, class: NoiseClass, source: &str, prio: Option<i32>, ns: u64) {
    if ns == 0 {
        return;
    }
    match parts
        .iter_mut()
        .find(|p| p.class == class && p.source == source)
    {
        Some(p) => p.ns += ns,
        None => parts.push(Part {
            class,
            source: source.to_string(),
            prio,
            ns,
        }),
    }
}

/// Where a timer's interrupt came late while a task ran: the task did not delay it
/// (no task holds off interrupts for long; the hypervisor or the kernel did).
pub const LATE_INTERRUPT: &str = "timer interrupt late";

/// A stretch's attribution into the parts: everything that was not the thread, and
/// where it was not running, also the time it is said to own (the trace disagrees
/// with itself there: unexplained).
fn add_gap(parts: &mut Vec<Part>, g: &AttributedGap, stretch: Stretch) {
    for s in &g.shares {
        let (class, source) = match classify(Some(s.class), &s.source) {
            (Some(NoiseClass::Thread), _) if stretch == Stretch::Delivery => {
                (Some(NoiseClass::Unexplained), LATE_INTERRUPT)
            }
            other => other,
        };
        add(
            parts,
            class.unwrap_or(s.class),
            source,
            s.prio.filter(|_| class == Some(NoiseClass::Thread)),
            s.net_ns,
        );
    }
    for w in &g.unexplained_within {
        add(parts, NoiseClass::Unexplained, &w.source, None, w.net_ns);
    }
    if stretch != Stretch::Running {
        add(
            parts,
            NoiseClass::Unexplained,
            "unexplained",
            None,
            g.unexplained_plain_ns(),
        );
    }
}

#[cfg(test)]
mod tests;
