//! Attribution: which OS activity filled each gap the detector saw.
//!
//! The events of one CPU are turned into a timeline of segments, each owned by
//! the innermost activity running then (an NMI inside an IRQ inside a softirq
//! …, or the running task). Time is charged to the innermost owner only, so
//! nested interrupts are subtracted from their parents. A gap is the sum of
//! the segments it overlaps: time owned by other activity is attributed to it,
//! time owned by the detector thread itself (the guest believed it was running)
//! is **unexplained** — hypervisor, SMI or hardware. Because the segments
//! partition the whole time line, attributed + unexplained == gap, exactly.
//!
//! A hypervisor stall can also strike while the guest is inside a handler: the
//! guest then sees a tick or an RCU softirq that took milliseconds. So each
//! handler occurrence (not a task or work item, whose length is theirs) is
//! judged against its source's typical duration over the whole time line
//! ([`typical_of`], [`excess_of`]); what it took far beyond that is moved from
//! its share to the gap's unexplained time, named "within SOURCE" in
//! [`AttributedGap::unexplained_within`]. The sum above stays exact.
//!
//! Threads carry their kernel priority, so a consumer can ask which shares
//! would preempt a task of a given priority ([`Share::can_preempt`]).
//!
//! All times here are nanoseconds on one time line; the caller converts event
//! timestamps and gaps with the same function.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::event::{Event, EventKind};

/// What kind of OS activity took the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseClass {
    Nmi,
    /// A device interrupt handler (or an uncommon APIC vector).
    Irq,
    /// An inter-processor interrupt: call_function, reschedule, irq_work, …
    Ipi,
    /// The local timer interrupt (the tick and hrtimer expiry) outside its callbacks.
    Tick,
    /// An hrtimer callback, named by its function.
    Timer,
    Softirq,
    Workqueue,
    /// Another task ran on the CPU.
    Thread,
    /// The CPU was idle and had to wake up (a C-state exit; on a VM, the hypervisor
    /// delivering the interrupt): how `tame watch` names the idle task's time while a
    /// thread waited for its CPU. The noise bench never sees it.
    Idle,
    /// Not visible to the guest: hypervisor, SMI, hardware.
    Unexplained,
}

impl NoiseClass {
    /// Interrupt context, whose length is the handler's, not a task's choice: the
    /// classes whose far-too-long occurrences are judged a stall.
    pub fn is_handler(self) -> bool {
        matches!(
            self,
            NoiseClass::Nmi
                | NoiseClass::Irq
                | NoiseClass::Ipi
                | NoiseClass::Tick
                | NoiseClass::Timer
                | NoiseClass::Softirq
        )
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            NoiseClass::Nmi => "nmi",
            NoiseClass::Irq => "irq",
            NoiseClass::Ipi => "ipi",
            NoiseClass::Tick => "tick",
            NoiseClass::Timer => "timer",
            NoiseClass::Softirq => "softirq",
            NoiseClass::Workqueue => "workqueue",
            NoiseClass::Thread => "thread",
            NoiseClass::Idle => "idle",
            NoiseClass::Unexplained => "unexplained",
        }
    }
}

impl std::fmt::Display for NoiseClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gap the detector saw, on the common time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// One occurrence of OS activity inside a gap, with its net time there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub class: NoiseClass,
    /// A thread's is `comm/pid`.
    pub source: String,
    pub net_ns: u64,
    /// A thread's kernel priority when the trace gave it (lower preempts: -1
    /// deadline, 0..=98 real-time, 100..=139 normal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
}

/// Kernel priorities from here on are normal (CFS/EEVDF) tasks: `MAX_RT_PRIO`.
pub const NORMAL_PRIO: i32 = 100;

impl Share {
    /// Whether this activity would take its time from a task of kernel priority
    /// `work_prio` too, rather than wait for it. Interrupt context (and what the guest
    /// cannot see) preempts any task. Work items run in normal kworkers. A thread
    /// preempts with a lower priority number, as a deadline task or in the stop
    /// class (`migration/N`, printed with any priority); normal tasks share the CPU
    /// with each other. A thread of unknown priority is assumed normal.
    pub fn can_preempt(&self, work_prio: i32) -> bool {
        let work_is_normal = work_prio >= NORMAL_PRIO;
        match self.class {
            NoiseClass::Thread => thread_preempts(&self.source, self.prio, work_prio),
            NoiseClass::Workqueue => work_is_normal,
            NoiseClass::Idle => false,
            _ => true,
        }
    }
}

fn thread_preempts(source: &str, prio: Option<i32>, work_prio: i32) -> bool {
    // The idle task only runs when nothing else can.
    if source.starts_with("swapper/") && source.ends_with("/0") {
        return false;
    }
    if source.starts_with("migration/") {
        return true;
    }
    let prio = prio.unwrap_or(NORMAL_PRIO + 20);
    prio == -1 || prio < work_prio || (prio >= NORMAL_PRIO && work_prio >= NORMAL_PRIO)
}

/// A gap and what filled it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributedGap {
    pub start_ns: u64,
    pub duration_ns: u64,
    /// In order of first appearance in the gap.
    pub shares: Vec<Share>,
    pub unexplained_ns: u64,
    /// Of `unexplained_ns`, what passed inside a handler far beyond its typical
    /// duration: class `unexplained`, source `within HANDLER`. The rest passed with
    /// the detector believed running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexplained_within: Vec<Share>,
}

impl AttributedGap {
    /// The share that took most of the gap (unexplained included): the gap's
    /// class and source in one word, for the CSV.
    pub fn main_cause(&self) -> (NoiseClass, &str) {
        let top = self.shares.iter().max_by_key(|s| s.net_ns);
        match top {
            Some(s) if s.net_ns >= self.unexplained_ns => (s.class, s.source.as_str()),
            _ => (NoiseClass::Unexplained, self.main_unexplained()),
        }
    }

    /// The largest part of the unexplained time: `within HANDLER`, or `unexplained`.
    fn main_unexplained(&self) -> &str {
        let within = self.unexplained_within.iter().max_by_key(|s| s.net_ns);
        match within {
            Some(w) if w.net_ns > self.unexplained_plain_ns() => w.source.as_str(),
            _ => "unexplained",
        }
    }

    /// The unexplained time that passed with the detector believed running.
    pub fn unexplained_plain_ns(&self) -> u64 {
        let within: u64 = self.unexplained_within.iter().map(|s| s.net_ns).sum();
        self.unexplained_ns.saturating_sub(within)
    }
}

/// Who owns a segment of the time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// The detector thread (or, before any switch is seen, whoever is assumed to run).
    Detector,
    Occurrence(usize),
}

#[derive(Clone, Debug)]
struct Occurrence {
    class: NoiseClass,
    source: String,
    /// A thread's kernel priority.
    prio: Option<i32>,
    /// The time it owned the time line; `None` while it still owns it at the end.
    net_ns: Option<u64>,
    /// Of `net_ns`, what is beyond its source's typical duration by far (else 0).
    excess_ns: u64,
}

/// What closes an open activity.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Key {
    Irq(u32),
    Softirq(u32),
    Vector(String),
    Hrtimer,
    Work,
    Nmi,
}

enum Action {
    Push(Key, NoiseClass, String),
    Pop(Key),
    Switch {
        next_pid: u32,
        next_comm: String,
        next_prio: Option<i32>,
    },
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    start: u64,
    owner: Owner,
}

/// The owner time line of one CPU.
pub struct Timeline {
    /// Sorted by start; segment i lasts until segment i+1 starts (the last one forever).
    segments: Vec<Segment>,
    occurrences: Vec<Occurrence>,
}

fn vector_class(name: &str) -> NoiseClass {
    match name {
        "local_timer" => NoiseClass::Tick,
        "call_function"
        | "call_function_single"
        | "reschedule"
        | "irq_work"
        | "x86_platform_ipi"
        | "reboot" => NoiseClass::Ipi,
        _ => NoiseClass::Irq,
    }
}

fn thread_name(comm: &str, pid: u32) -> String {
    format!("{comm}/{pid}")
}

/// The events as pushes, pops and switches, sorted by timestamp (stably).
fn actions(events: &[Event]) -> Vec<(u64, Action)> {
    let mut actions = Vec::with_capacity(events.len() + 8);
    for e in events {
        push_actions(e, &mut actions);
    }
    actions.sort_by_key(|(ts, _)| *ts);
    actions
}

/// The actions of one event: none (a wakeup), one, or two (an NMI).
fn push_actions(e: &Event, actions: &mut Vec<(u64, Action)>) {
    let action = match &e.kind {
        EventKind::IrqEntry { irq, name } => {
            Action::Push(Key::Irq(*irq), NoiseClass::Irq, format!("irq {irq} {name}"))
        }
        EventKind::IrqExit { irq } => Action::Pop(Key::Irq(*irq)),
        EventKind::SoftirqEntry { vec, action } => {
            Action::Push(Key::Softirq(*vec), NoiseClass::Softirq, action.clone())
        }
        EventKind::SoftirqExit { vec } => Action::Pop(Key::Softirq(*vec)),
        EventKind::VectorEntry { name } => {
            Action::Push(Key::Vector(name.clone()), vector_class(name), name.clone())
        }
        EventKind::VectorExit { name } => Action::Pop(Key::Vector(name.clone())),
        EventKind::HrtimerEntry { function, .. } => {
            Action::Push(Key::Hrtimer, NoiseClass::Timer, function.clone())
        }
        EventKind::HrtimerExit => Action::Pop(Key::Hrtimer),
        EventKind::WorkStart { function } => {
            Action::Push(Key::Work, NoiseClass::Workqueue, function.clone())
        }
        EventKind::WorkEnd => Action::Pop(Key::Work),
        EventKind::Nmi { handler, delta_ns } => {
            // Emitted at the end of the handler: it began delta_ns earlier.
            actions.push((
                e.ts.saturating_sub(*delta_ns),
                Action::Push(Key::Nmi, NoiseClass::Nmi, handler.clone()),
            ));
            Action::Pop(Key::Nmi)
        }
        EventKind::Switch {
            next_pid,
            next_comm,
            next_prio,
            ..
        } => Action::Switch {
            next_pid: *next_pid,
            next_comm: next_comm.clone(),
            next_prio: *next_prio,
        },
        // Wakeups, migrations, timer starts and faults own no time on the CPU.
        EventKind::Wakeup { .. }
        | EventKind::Waking { .. }
        | EventKind::MigrateTask { .. }
        | EventKind::HrtimerStart { .. }
        | EventKind::PageFault
        | EventKind::SysExit => return,
    };
    actions.push((e.ts, action));
}

/// The task running before the first switch: that switch's `prev` (pid, priority).
fn first_prev(events: &[Event]) -> Option<(u32, Option<i32>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Switch {
                prev_pid,
                prev_prio,
                ..
            } => Some((e.ts, (*prev_pid, *prev_prio))),
            _ => None,
        })
        .min_by_key(|(ts, _)| *ts)
        .map(|(_, p)| p)
}

/// Replays the actions in time order: the open activities (innermost last), the
/// running task, and the segments they give.
struct Builder {
    detector_pid: u32,
    occurrences: Vec<Occurrence>,
    stack: Vec<(Key, usize)>,
    task: Owner,
    segments: Vec<Segment>,
}

impl Builder {
    /// From time 0, `first_prev` runs (the detector when it is unknown).
    fn new(first_prev: Option<(u32, Option<i32>)>, detector_pid: u32) -> Self {
        let mut builder = Builder {
            detector_pid,
            occurrences: Vec::new(),
            stack: Vec::new(),
            task: Owner::Detector,
            segments: Vec::new(),
        };
        if let Some((pid, prio)) = first_prev.filter(|&(pid, _)| pid != detector_pid) {
            let comm = if pid == 0 { "swapper" } else { "?" };
            let thread = builder.occur(NoiseClass::Thread, thread_name(comm, pid));
            builder.occurrences[thread].prio = prio;
            builder.task = Owner::Occurrence(thread);
        }
        builder.segments.push(Segment {
            start: 0,
            owner: builder.task,
        });
        builder
    }

    /// A new occurrence of activity; returns its index.
    fn occur(&mut self, class: NoiseClass, source: String) -> usize {
        self.occurrences.push(Occurrence {
            class,
            source,
            prio: None,
            net_ns: None,
            excess_ns: 0,
        });
        self.occurrences.len() - 1
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Push(key, class, source) => {
                let occurrence = self.occur(class, source);
                self.stack.push((key, occurrence));
            }
            Action::Pop(key) => {
                // An exit without its entry (tracing began inside the handler) changes nothing.
                if let Some(pos) = self.stack.iter().rposition(|(k, _)| *k == key) {
                    self.stack.truncate(pos);
                }
            }
            Action::Switch {
                next_pid,
                next_comm,
                next_prio,
            } => {
                // Work items run in task context: a switch ends what the old task was doing.
                self.stack.retain(|(k, _)| *k != Key::Work);
                self.task = if next_pid == self.detector_pid {
                    Owner::Detector
                } else {
                    let thread = self.occur(NoiseClass::Thread, thread_name(&next_comm, next_pid));
                    self.occurrences[thread].prio = next_prio;
                    Owner::Occurrence(thread)
                };
            }
        }
    }

    /// From `ts` on, the innermost open activity (or the task) owns the time line.
    fn mark(&mut self, ts: u64) {
        let owner = self
            .stack
            .last()
            .map_or(self.task, |(_, i)| Owner::Occurrence(*i));
        match self.segments.last_mut() {
            Some(last) if last.start == ts => last.owner = owner,
            Some(last) if last.owner == owner => {}
            _ => self.segments.push(Segment { start: ts, owner }),
        }
    }

    fn finish(mut self) -> Timeline {
        own_times(&self.segments, &mut self.occurrences);
        judge_handlers(&mut self.occurrences);
        Timeline {
            segments: self.segments,
            occurrences: self.occurrences,
        }
    }
}

/// Each occurrence's net time: the segments it owns. One that owns the last
/// segment (open when the trace ended) has no known length.
fn own_times(segments: &[Segment], occurrences: &mut [Occurrence]) {
    for (i, seg) in segments.iter().enumerate() {
        let Owner::Occurrence(o) = seg.owner else {
            continue;
        };
        let occurrence = &mut occurrences[o];
        occurrence.net_ns = match segments.get(i + 1) {
            Some(next) => Some(occurrence.net_ns.unwrap_or(0) + (next.start - seg.start)),
            None => None,
        };
    }
}

/// With fewer occurrences of a source than this, its median says little.
pub const MIN_OCCURRENCES: usize = 8;
/// A handler that owns the CPU this much longer than its median did not run all that
/// time: the tick and most IRQs take µs; ten times is beyond their cache-cold or
/// batch-heavy runs, while a stall of the whole guest takes hundreds of µs or ms.
pub const EXCESS_FACTOR: u64 = 10;
/// … and at least this much beyond it, so that µs jitter of a very short handler
/// (median 1 µs, one run 12 µs) is not called a stall.
pub const EXCESS_MARGIN_NS: u64 = 50_000;
/// For a source seen too rarely to have a distribution: what no handler should take
/// (interrupt context holding a CPU for a millisecond is already a bug report). It is
/// conceded to the handler; only the time beyond counts as a stall.
pub const HANDLER_CEILING_NS: u64 = 1_000_000;

/// What a source's occurrences are judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Typical {
    /// The median of its occurrences' net times (enough of them were seen; of an even
    /// count the upper middle one, which leaves the handler the more).
    Median(u64),
    /// Too few occurrences: the fixed ceiling [`HANDLER_CEILING_NS`].
    Ceiling,
}

/// The typical duration of a source from its occurrences' net times.
pub fn typical_of(nets: &mut [u64]) -> Typical {
    if nets.len() < MIN_OCCURRENCES {
        return Typical::Ceiling;
    }
    nets.sort_unstable();
    Typical::Median(nets[nets.len() / 2])
}

/// The part of a handler occurrence of `net_ns` that is far beyond `typical` (else 0):
/// with a median, more than [`EXCESS_FACTOR`] times it and [`EXCESS_MARGIN_NS`] beyond
/// it, the time beyond the median; without, the time beyond [`HANDLER_CEILING_NS`].
pub fn excess_of(net_ns: u64, typical: Typical) -> u64 {
    match typical {
        Typical::Median(m) => {
            // net > 10 m >= m: the subtraction cannot wrap.
            let far = net_ns > m.saturating_mul(EXCESS_FACTOR) && net_ns - m > EXCESS_MARGIN_NS;
            if far {
                net_ns - m
            } else {
                0
            }
        }
        Typical::Ceiling => net_ns.saturating_sub(HANDLER_CEILING_NS),
    }
}

/// Set each handler occurrence's excess against its source's typical duration.
fn judge_handlers(occurrences: &mut [Occurrence]) {
    let mut by_source: BTreeMap<(NoiseClass, &str), Vec<usize>> = BTreeMap::new();
    for (i, o) in occurrences.iter().enumerate() {
        if o.class.is_handler() && o.net_ns.is_some() {
            by_source
                .entry((o.class, o.source.as_str()))
                .or_default()
                .push(i);
        }
    }
    let groups: Vec<Vec<usize>> = by_source.into_values().collect();
    for group in groups {
        let mut nets: Vec<u64> = group
            .iter()
            .filter_map(|&i| occurrences[i].net_ns)
            .collect();
        let typical = typical_of(&mut nets);
        for i in group {
            let o = &mut occurrences[i];
            o.excess_ns = o.net_ns.map_or(0, |net| excess_of(net, typical));
        }
    }
}

impl Timeline {
    /// Build the time line of one CPU from its events (any order; sorted here
    /// by timestamp, stably). `detector_pid` is the measuring thread's id.
    pub fn build(events: &[Event], detector_pid: u32) -> Self {
        let mut builder = Builder::new(first_prev(events), detector_pid);
        for (ts, action) in actions(events) {
            builder.apply(action);
            builder.mark(ts);
        }
        builder.finish()
    }

    /// Who owned the time line from `from` to `to`, stretch by stretch (adjacent
    /// segments of one owner joined): the raw material of a snapshot.
    pub fn spans(&self, from: u64, to: u64) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        let mut i = self
            .segments
            .partition_point(|s| s.start <= from)
            .saturating_sub(1);
        while i < self.segments.len() {
            let seg = self.segments[i];
            if seg.start >= to {
                break;
            }
            let seg_end = self.segments.get(i + 1).map_or(to, |s| s.start).min(to);
            let start = seg.start.max(from);
            i += 1;
            if seg_end <= start {
                continue;
            }
            let owner = match seg.owner {
                Owner::Detector => None,
                Owner::Occurrence(o) => Some(o),
            };
            if let Some(last) = out.last_mut() {
                if last.occurrence == owner && last.start_ns + last.duration_ns == start {
                    last.duration_ns += seg_end - start;
                    continue;
                }
            }
            let (class, source, prio) = match owner {
                None => (None, String::new(), None),
                Some(o) => {
                    let occ = &self.occurrences[o];
                    (Some(occ.class), occ.source.clone(), occ.prio)
                }
            };
            out.push(Span {
                start_ns: start,
                duration_ns: seg_end - start,
                class,
                source,
                prio,
                occurrence: owner,
            });
        }
        out
    }

    /// Attribute gaps (sorted or not) against this time line.
    pub fn attribute(&self, gaps: &[Gap]) -> Vec<AttributedGap> {
        gaps.iter().map(|g| self.attribute_one(*g)).collect()
    }

    fn attribute_one(&self, gap: Gap) -> AttributedGap {
        let (start, end) = (gap.start_ns, gap.start_ns.saturating_add(gap.duration_ns));
        // The segment containing `start` (segments[0] starts at 0).
        let mut i = self
            .segments
            .partition_point(|s| s.start <= start)
            .saturating_sub(1);
        let mut shares: Vec<(usize, u64)> = Vec::new();
        // Where each occurrence's share is: a gap of seconds (a starved thread's wait)
        // spans tens of thousands of occurrences, and a scan per segment was quadratic.
        let mut index: HashMap<usize, usize> = HashMap::new();
        let mut unexplained = 0u64;
        while i < self.segments.len() {
            let seg = self.segments[i];
            if seg.start >= end {
                break;
            }
            let seg_end = self.segments.get(i + 1).map_or(u64::MAX, |s| s.start);
            let overlap = seg_end.min(end) - seg.start.max(start);
            match seg.owner {
                Owner::Detector => unexplained += overlap,
                Owner::Occurrence(o) => match index.get(&o) {
                    Some(&at) => shares[at].1 += overlap,
                    None => {
                        index.insert(o, shares.len());
                        shares.push((o, overlap));
                    }
                },
            }
            i += 1;
        }
        self.gap_of(gap, &shares, unexplained)
    }

    /// The gap from its occurrences' time in it and the detector's, each handler's
    /// excess moved to the unexplained time.
    fn gap_of(&self, gap: Gap, times: &[(usize, u64)], unexplained: u64) -> AttributedGap {
        let mut g = AttributedGap {
            start_ns: gap.start_ns,
            duration_ns: gap.duration_ns,
            shares: Vec::with_capacity(times.len()),
            unexplained_ns: unexplained,
            unexplained_within: Vec::new(),
        };
        for &(o, t) in times {
            let occurrence = &self.occurrences[o];
            let excess = self.excess_within(o, t);
            if excess > 0 {
                g.unexplained_ns += excess;
                add_within(&mut g.unexplained_within, &occurrence.source, excess);
            }
            if t > excess {
                g.shares.push(Share {
                    class: occurrence.class,
                    source: occurrence.source.clone(),
                    net_ns: t - excess,
                    prio: occurrence.prio,
                });
            }
        }
        g
    }

    /// Of `t`, occurrence `o`'s time in one gap, its excess. Where in the handler the
    /// stall fell is unknown, so a handler that spans gaps has its excess spread in
    /// proportion to its time in each (all of it in the usual one gap).
    fn excess_within(&self, o: usize, t: u64) -> u64 {
        let occurrence = &self.occurrences[o];
        match occurrence.net_ns {
            Some(net) if occurrence.excess_ns > 0 && net > 0 => {
                let part = u128::from(t) * u128::from(occurrence.excess_ns) / u128::from(net);
                // t <= net, so part <= excess <= t; min() only guards the arithmetic.
                u64::try_from(part).unwrap_or(t).min(t)
            }
            _ => 0,
        }
    }
}

/// A stretch of one CPU's time line and who owned it ([`Timeline::spans`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub start_ns: u64,
    pub duration_ns: u64,
    /// `None`: the detector (the thread measured or watched) owned it.
    pub class: Option<NoiseClass>,
    /// A thread's is `comm/pid`; empty for the detector.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<i32>,
    /// Which occurrence, so stretches of one are joined and no two are.
    #[serde(skip)]
    occurrence: Option<usize>,
}

/// Add `ns` unexplained within `handler` to a gap's list, one entry per handler.
fn add_within(within: &mut Vec<Share>, handler: &str, ns: u64) {
    let source = format!("within {handler}");
    match within.iter_mut().find(|s| s.source == source) {
        Some(s) => s.net_ns += ns,
        None => within.push(Share {
            class: NoiseClass::Unexplained,
            source,
            net_ns: ns,
            prio: None,
        }),
    }
}

/// Count, total and worst of one class or source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl Tally {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTally {
    pub class: NoiseClass,
    #[serde(flatten)]
    pub tally: Tally,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTally {
    pub class: NoiseClass,
    pub source: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// Per-class and per-source totals over all gaps of one CPU, top offenders
/// (largest total) first. Each occurrence counts once; unexplained counts
/// once per gap that has some (its class with the gap's whole unexplained time,
/// its sources each part: `unexplained`, `within HANDLER`).
pub fn tally(gaps: &[AttributedGap]) -> (Vec<ClassTally>, Vec<SourceTally>) {
    let mut classes: BTreeMap<NoiseClass, Tally> = BTreeMap::new();
    let mut sources: BTreeMap<(NoiseClass, String), Tally> = BTreeMap::new();
    for g in gaps {
        for s in &g.shares {
            classes.entry(s.class).or_default().add(s.net_ns);
            sources
                .entry((s.class, s.source.clone()))
                .or_default()
                .add(s.net_ns);
        }
        if g.unexplained_ns > 0 {
            classes
                .entry(NoiseClass::Unexplained)
                .or_default()
                .add(g.unexplained_ns);
        }
        // The unexplained sources split the class's time: inside which handler, or not.
        let plain = g.unexplained_plain_ns();
        if plain > 0 {
            sources
                .entry((NoiseClass::Unexplained, "unexplained".into()))
                .or_default()
                .add(plain);
        }
        for w in g.unexplained_within.iter().filter(|w| w.net_ns > 0) {
            sources
                .entry((NoiseClass::Unexplained, w.source.clone()))
                .or_default()
                .add(w.net_ns);
        }
    }
    let mut classes: Vec<ClassTally> = classes
        .into_iter()
        .map(|(class, tally)| ClassTally { class, tally })
        .collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.tally.total_ns));
    let mut sources: Vec<SourceTally> = sources
        .into_iter()
        .map(|((class, source), tally)| SourceTally {
            class,
            source,
            tally,
        })
        .collect();
    sources.sort_by_key(|s| std::cmp::Reverse(s.tally.total_ns));
    (classes, sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DET: u32 = 100;

    fn ev(ts: u64, kind: EventKind) -> Event {
        Event {
            cpu: 1,
            ts,
            task: 0,
            kind,
        }
    }

    fn vec_entry(ts: u64, name: &str) -> Event {
        ev(ts, EventKind::VectorEntry { name: name.into() })
    }

    fn vec_exit(ts: u64, name: &str) -> Event {
        ev(ts, EventKind::VectorExit { name: name.into() })
    }

    fn switch(ts: u64, prev: u32, next: u32, comm: &str) -> Event {
        ev(
            ts,
            EventKind::Switch {
                prev_pid: prev,
                prev_comm: String::new(),
                prev_prio: None,
                prev_state: None,
                next_comm: comm.into(),
                next_pid: next,
                next_prio: None,
                inferred: false,
            },
        )
    }

    fn gap(start: u64, dur: u64) -> Gap {
        Gap {
            start_ns: start,
            duration_ns: dur,
        }
    }

    #[test]
    fn spans_show_who_owned_a_window_and_join_one_owner() {
        let events = vec![
            switch(100, 7, 9, "other"),
            vec_entry(200, "local_timer"),
            vec_exit(250, "local_timer"),
            switch(400, 9, 7, "det"),
        ];
        let t = Timeline::build(&events, 7);
        let spans = t.spans(150, 500);
        let owners: Vec<(u64, u64, Option<NoiseClass>, &str)> = spans
            .iter()
            .map(|s| (s.start_ns, s.duration_ns, s.class, s.source.as_str()))
            .collect();
        assert_eq!(
            owners,
            vec![
                (150, 50, Some(NoiseClass::Thread), "other/9"),
                (200, 50, Some(NoiseClass::Tick), "local_timer"),
                (250, 150, Some(NoiseClass::Thread), "other/9"),
                (400, 100, None, ""),
            ]
        );
        assert_eq!(spans.iter().map(|s| s.duration_ns).sum::<u64>(), 350);
    }

    #[test]
    fn nested_interrupts_are_subtracted_from_their_parent() {
        let events = vec![
            vec_entry(1_000, "local_timer"),
            ev(
                1_200,
                EventKind::HrtimerEntry {
                    function: "tick_nohz_handler".into(),
                    hrtimer: 0,
                    now_ns: None,
                },
            ),
            ev(1_800, EventKind::HrtimerExit),
            vec_exit(2_000, "local_timer"),
            ev(
                2_100,
                EventKind::SoftirqEntry {
                    vec: 1,
                    action: "TIMER".into(),
                },
            ),
            ev(2_500, EventKind::SoftirqExit { vec: 1 }),
        ];
        let tl = Timeline::build(&events, DET);
        let g = &tl.attribute(&[gap(900, 1_700)])[0];
        let net: Vec<(NoiseClass, &str, u64)> = g
            .shares
            .iter()
            .map(|s| (s.class, s.source.as_str(), s.net_ns))
            .collect();
        assert_eq!(
            net,
            vec![
                (NoiseClass::Tick, "local_timer", 400),
                (NoiseClass::Timer, "tick_nohz_handler", 600),
                (NoiseClass::Softirq, "TIMER", 400),
            ]
        );
        // 900..1000, 2000..2100, 2500..2600 ran "as the detector": unexplained.
        assert_eq!(g.unexplained_ns, 300);
        assert_eq!(g.main_cause(), (NoiseClass::Timer, "tick_nohz_handler"));
    }

    #[test]
    fn another_thread_is_named_and_its_interrupts_are_not_its_time() {
        let events = vec![
            switch(10_000, DET, 7, "competitor"),
            ev(
                20_000,
                EventKind::IrqEntry {
                    irq: 36,
                    name: "virtio1-req.0".into(),
                },
            ),
            ev(20_000 + 3_000, EventKind::IrqExit { irq: 36 }),
            switch(60_000, 7, DET, "noise"),
        ];
        let tl = Timeline::build(&events, DET);
        let g = &tl.attribute(&[gap(9_000, 52_000)])[0];
        assert_eq!(g.shares[0].source, "competitor/7");
        assert_eq!(g.shares[0].net_ns, 47_000);
        assert_eq!(g.shares[1].source, "irq 36 virtio1-req.0");
        assert_eq!(g.shares[1].class, NoiseClass::Irq);
        assert_eq!(g.unexplained_ns, 2_000);
        let (classes, sources) = tally(&tl.attribute(&[gap(9_000, 52_000)]));
        assert_eq!(classes[0].class, NoiseClass::Thread);
        assert_eq!(sources[0].tally.count, 1);
    }

    #[test]
    fn a_gap_with_no_events_is_all_unexplained() {
        let tl = Timeline::build(
            &[vec_entry(5, "reschedule"), vec_exit(9, "reschedule")],
            DET,
        );
        let g = &tl.attribute(&[gap(100, 50)])[0];
        assert!(g.shares.is_empty());
        assert_eq!(g.unexplained_ns, 50);
    }

    #[test]
    fn nmi_is_placed_before_its_event_and_nests() {
        let events = vec![
            ev(
                1_000,
                EventKind::IrqEntry {
                    irq: 5,
                    name: "eth0".into(),
                },
            ),
            ev(
                1_500,
                EventKind::Nmi {
                    handler: "perf_event_nmi_handler".into(),
                    delta_ns: 200,
                },
            ),
            ev(2_000, EventKind::IrqExit { irq: 5 }),
        ];
        let tl = Timeline::build(&events, DET);
        let g = &tl.attribute(&[gap(1_000, 1_000)])[0];
        assert_eq!(g.shares[0].net_ns, 800, "irq minus the NMI");
        assert_eq!(g.shares[1].class, NoiseClass::Nmi);
        assert_eq!(g.shares[1].net_ns, 200);
    }

    #[test]
    fn tally_counts_occurrences_and_puts_the_worst_first() {
        let events = vec![
            vec_entry(100, "local_timer"),
            vec_exit(110, "local_timer"),
            vec_entry(200, "call_function_single"),
            vec_exit(260, "call_function_single"),
            vec_entry(300, "local_timer"),
            vec_exit(315, "local_timer"),
        ];
        let tl = Timeline::build(&events, DET);
        let gaps = tl.attribute(&[gap(100, 10), gap(200, 60), gap(300, 15)]);
        let (classes, sources) = tally(&gaps);
        assert_eq!(classes[0].class, NoiseClass::Ipi);
        assert_eq!(classes[1].class, NoiseClass::Tick);
        assert_eq!(
            classes[1].tally,
            Tally {
                count: 2,
                total_ns: 25,
                max_ns: 15
            }
        );
        assert_eq!(sources[0].source, "call_function_single");
    }

    /// Every kind of event, out of order, with an exit whose entry was not traced, a switch
    /// that ends a work item, an NMI inside a softirq and one before time 0, and events that
    /// share a timestamp.
    fn every_kind_of_event() -> Vec<Event> {
        vec![
            ev(
                1_100,
                EventKind::HrtimerEntry {
                    function: "tick_sched_timer".into(),
                    hrtimer: 0,
                    now_ns: None,
                },
            ),
            vec_entry(1_000, "local_timer"),
            ev(100, EventKind::IrqExit { irq: 9 }),
            ev(
                50,
                EventKind::Nmi {
                    handler: "early".into(),
                    delta_ns: 80,
                },
            ),
            ev(1_400, EventKind::HrtimerExit),
            vec_exit(1_500, "local_timer"),
            ev(
                1_500,
                EventKind::SoftirqEntry {
                    vec: 3,
                    action: "RCU".into(),
                },
            ),
            ev(
                1_700,
                EventKind::Nmi {
                    handler: "perf_event_nmi_handler".into(),
                    delta_ns: 100,
                },
            ),
            ev(2_000, EventKind::SoftirqExit { vec: 3 }),
            ev(
                3_000,
                EventKind::WorkStart {
                    function: "vmstat_update".into(),
                },
            ),
            ev(
                3_200,
                EventKind::IrqEntry {
                    irq: 11,
                    name: "ahci".into(),
                },
            ),
            ev(3_300, EventKind::IrqExit { irq: 11 }),
            ev(
                3_900,
                EventKind::Wakeup {
                    comm: "kworker/1:1".into(),
                    pid: 55,
                },
            ),
            switch(4_000, 0, 55, "kworker/1:1"),
            vec_entry(4_500, "reschedule"),
            vec_exit(4_600, "reschedule"),
            switch(5_000, 55, DET, "detector"),
            vec_entry(6_000, "call_function_single"),
            vec_exit(6_050, "call_function_single"),
            switch(8_000, 77, DET, "detector"),
            switch(7_000, DET, 77, "competitor"),
            ev(
                7_200,
                EventKind::WorkStart {
                    function: "flush_to_ldisc".into(),
                },
            ),
            ev(7_300, EventKind::WorkEnd),
            ev(7_400, EventKind::WorkEnd),
        ]
    }

    /// A gap as (start, duration, shares as (class, source, ns), unexplained).
    type Flat<'a> = (u64, u64, Vec<(NoiseClass, &'a str, u64)>, u64);

    /// The expected shares were produced by the code before `build` was split into
    /// pieces, so the pieces keep its behaviour.
    #[test]
    fn a_literal_trace_is_attributed_as_before() {
        let tl = Timeline::build(&every_kind_of_event(), DET);
        let gaps = tl.attribute(&[
            gap(0, 10_000),
            gap(900, 700),
            gap(2_500, 3_000),
            gap(7_500, 1_000),
            gap(20_000, 5),
        ]);
        let got: Vec<Flat> = gaps
            .iter()
            .map(|g| {
                let shares = g
                    .shares
                    .iter()
                    .map(|s| (s.class, s.source.as_str(), s.net_ns))
                    .collect();
                (g.start_ns, g.duration_ns, shares, g.unexplained_ns)
            })
            .collect();
        use NoiseClass::*;
        let expected: Vec<Flat> = vec![
            (
                0,
                10_000,
                vec![
                    (Nmi, "early", 50),
                    (Thread, "swapper/0", 1950),
                    (Tick, "local_timer", 200),
                    (Timer, "tick_sched_timer", 300),
                    (Softirq, "RCU", 400),
                    (Nmi, "perf_event_nmi_handler", 100),
                    (Workqueue, "vmstat_update", 900),
                    (Irq, "irq 11 ahci", 100),
                    (Thread, "kworker/1:1/55", 900),
                    (Ipi, "reschedule", 100),
                    (Ipi, "call_function_single", 50),
                    (Thread, "competitor/77", 900),
                    (Workqueue, "flush_to_ldisc", 100),
                ],
                3950,
            ),
            (
                900,
                700,
                vec![
                    (Thread, "swapper/0", 100),
                    (Tick, "local_timer", 200),
                    (Timer, "tick_sched_timer", 300),
                    (Softirq, "RCU", 100),
                ],
                0,
            ),
            (
                2_500,
                3_000,
                vec![
                    (Thread, "swapper/0", 500),
                    (Workqueue, "vmstat_update", 900),
                    (Irq, "irq 11 ahci", 100),
                    (Thread, "kworker/1:1/55", 900),
                    (Ipi, "reschedule", 100),
                ],
                500,
            ),
            (7_500, 1_000, vec![(Thread, "competitor/77", 500)], 500),
            (20_000, 5, vec![], 5),
        ];
        assert_eq!(got, expected);
    }

    use crate::event::{parse_text, Timestamp};

    /// The measuring thread of the recorded traces below.
    const NOISE: u32 = 4242;

    fn parsed(text: &str) -> Vec<Event> {
        let mut events = Vec::new();
        parse_text(text, Timestamp::SecsUsecs, &mut events);
        events
    }

    /// `812.000000 + at_us` as the trace writes it, and in ns.
    fn stamp(at_us: u64) -> (String, u64) {
        let s = format!("812.{at_us:06}");
        (s, 812_000_000_000 + at_us * 1_000)
    }

    /// A local timer interrupt on the detector's CPU, as captured: entry and exit lines.
    fn tick_lines(at_us: u64, lasts_us: u64) -> String {
        let (entry, _) = stamp(at_us);
        let (exit, _) = stamp(at_us + lasts_us);
        format!(
            "      tame-noise-4242    [002] d.h1.   {entry}: local_timer_entry: vector=236\n      \
             tame-noise-4242    [002] d.h1.   {exit}: local_timer_exit: vector=236\n"
        )
    }

    /// Twelve ticks 4 ms apart, 5 µs each but the one at 20 ms: 3 ms (a stall of the
    /// whole guest while it was inside the tick).
    fn ticks_with_a_stall() -> String {
        (0..12)
            .map(|k| tick_lines(k * 4_000, if k == 5 { 3_000 } else { 5 }))
            .collect()
    }

    #[test]
    fn a_tick_far_beyond_its_median_has_the_excess_unexplained_within_it() {
        let tl = Timeline::build(&parsed(&ticks_with_a_stall()), NOISE);
        // The detector saw a gap around a normal tick and one around the long tick.
        let gaps = tl.attribute(&[
            gap(stamp(4_000).1, 5_000),
            gap(stamp(20_000).1 - 2_000, 3_003_000),
        ]);
        let tick = |ns| Share {
            class: NoiseClass::Tick,
            source: "local_timer".into(),
            net_ns: ns,
            prio: None,
        };
        assert_eq!(gaps[0].shares, vec![tick(5_000)]);
        assert_eq!(gaps[0].unexplained_ns, 0);
        assert!(gaps[0].unexplained_within.is_empty());
        // The median tick (5 µs) stays the tick's; the 2 995 µs beyond it are a stall.
        assert_eq!(gaps[1].shares, vec![tick(5_000)]);
        assert_eq!(
            gaps[1].unexplained_within,
            vec![Share {
                class: NoiseClass::Unexplained,
                source: "within local_timer".into(),
                net_ns: 2_995_000,
                prio: None,
            }]
        );
        assert_eq!(gaps[1].unexplained_ns, 2_000 + 2_995_000 + 1_000);
        assert_eq!(gaps[1].unexplained_plain_ns(), 3_000);
        assert_eq!(
            gaps[1].main_cause(),
            (NoiseClass::Unexplained, "within local_timer")
        );
        let (classes, sources) = tally(&gaps);
        assert_eq!(classes[0].class, NoiseClass::Unexplained);
        assert_eq!(
            classes[0].tally,
            Tally {
                count: 1,
                total_ns: 2_998_000,
                max_ns: 2_998_000
            }
        );
        let named: Vec<(&str, u64)> = sources
            .iter()
            .map(|s| (s.source.as_str(), s.tally.total_ns))
            .collect();
        assert_eq!(
            named,
            vec![
                ("within local_timer", 2_995_000),
                ("local_timer", 10_000),
                ("unexplained", 3_000)
            ]
        );
    }

    /// A recorded VM's worst gap: an RCU softirq of 9 ms, seen only three times, so it
    /// is judged against the fixed ceiling: 1 ms stays RCU's, 8 ms are unexplained.
    #[test]
    fn a_rare_handler_is_judged_against_the_ceiling() {
        let mut text = String::new();
        for (at, lasts) in [(1_000, 12), (30_000, 9_000), (60_000, 700)] {
            let (entry, _) = stamp(at);
            let (exit, _) = stamp(at + lasts);
            text += &format!(
                "      tame-noise-4242    [002] ..s1.   {entry}: softirq_entry: vec=9 [action=RCU]\n      \
                 tame-noise-4242    [002] ..s1.   {exit}: softirq_exit: vec=9 [action=RCU]\n"
            );
        }
        let tl = Timeline::build(&parsed(&text), NOISE);
        let gaps = tl.attribute(&[
            gap(stamp(30_000).1, 9_000_000),
            gap(stamp(60_000).1, 700_000),
        ]);
        assert_eq!(gaps[0].shares[0].net_ns, 1_000_000);
        assert_eq!(gaps[0].unexplained_ns, 8_000_000);
        assert_eq!(gaps[0].unexplained_within[0].source, "within RCU");
        // 700 µs is long for RCU, but within what a handler may take.
        assert_eq!(gaps[1].shares[0].net_ns, 700_000);
        assert_eq!(gaps[1].unexplained_ns, 0);
    }

    #[test]
    fn the_typical_duration_and_the_excess_rule() {
        assert_eq!(typical_of(&mut [5; 7]), Typical::Ceiling);
        // Of an even count, the upper middle one: the handler keeps the more.
        assert_eq!(
            typical_of(&mut [9, 1, 8, 2, 7, 3, 6, 4]),
            Typical::Median(6)
        );
        // Ten times the median is not enough without 50 µs beyond it, nor the reverse.
        assert_eq!(excess_of(60_000, Typical::Median(1_000)), 59_000);
        assert_eq!(excess_of(50_000, Typical::Median(1_000)), 0);
        assert_eq!(excess_of(90_000, Typical::Median(10_000)), 0);
        assert_eq!(excess_of(5, Typical::Median(0)), 0);
        assert_eq!(excess_of(u64::MAX, Typical::Median(u64::MAX / 2)), 0);
        assert_eq!(excess_of(1_000_000, Typical::Ceiling), 0);
        assert_eq!(excess_of(1_000_001, Typical::Ceiling), 1);
    }

    /// A handler still open when the trace ends has no known length: it is not judged.
    #[test]
    fn an_unfinished_handler_is_not_judged() {
        let (entry, at) = stamp(100);
        let text = format!(
            "      tame-noise-4242    [002] d.h1.   {entry}: local_timer_entry: vector=236\n"
        );
        let tl = Timeline::build(&parsed(&text), NOISE);
        let g = &tl.attribute(&[gap(at, 5_000_000)])[0];
        assert_eq!(g.shares[0].net_ns, 5_000_000);
        assert_eq!(g.unexplained_ns, 0);
    }

    /// Priorities from recorded switches: which threads would preempt the work running
    /// SCHED_FIFO 95 (kernel priority 4), and which a normal one (120).
    #[test]
    fn threads_carry_their_priority_and_say_whom_they_preempt() {
        let text = "\
      tame-noise-4242    [002] d..2.   812.000100: sched_switch: prev_comm=tame-noise prev_pid=4242 prev_prio=98 prev_state=R+ ==> next_comm=watchdog-rt next_pid=500 next_prio=0
     watchdog-rt-500     [002] d..2.   812.000200: sched_switch: prev_comm=watchdog-rt prev_pid=500 prev_prio=0 prev_state=S ==> next_comm=irq/36-virtio1 next_pid=311 next_prio=49
  irq/36-virtio1-311     [002] d..2.   812.000500: sched_switch: prev_comm=irq/36-virtio1 prev_pid=311 prev_prio=49 prev_state=S ==> next_comm=migration/2 next_pid=27 next_prio=0
     migration/2-27      [002] d..2.   812.000550: sched_switch: prev_comm=migration/2 prev_pid=27 prev_prio=0 prev_state=S ==> next_comm=stress-ng-cpu next_pid=900 next_prio=120
   stress-ng-cpu-900     [002] d..2.   812.000800: sched_switch: prev_comm=stress-ng-cpu prev_pid=900 prev_prio=120 prev_state=R ==> next_comm=tame-noise next_pid=4242 next_prio=98
";
        let tl = Timeline::build(&parsed(text), NOISE);
        let g = &tl.attribute(&[gap(stamp(100).1, 700_000)])[0];
        let got: Vec<(&str, u64, Option<i32>, bool, bool)> = g
            .shares
            .iter()
            .map(|s| {
                (
                    s.source.as_str(),
                    s.net_ns,
                    s.prio,
                    s.can_preempt(4),
                    s.can_preempt(120),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("watchdog-rt/500", 100_000, Some(0), true, true),
                ("irq/36-virtio1/311", 300_000, Some(49), false, true),
                ("migration/2/27", 50_000, Some(0), true, true),
                ("stress-ng-cpu/900", 250_000, Some(120), false, true),
            ]
        );
    }

    #[test]
    fn what_preempts_a_real_time_task_by_class() {
        let share = |class, source: &str, prio| Share {
            class,
            source: source.into(),
            net_ns: 1,
            prio,
        };
        use NoiseClass::*;
        // Interrupt context and what the guest cannot see preempt anyone.
        for class in [Nmi, Irq, Ipi, Tick, Timer, Softirq, Unexplained] {
            assert!(share(class, "x", None).can_preempt(0), "{class}");
        }
        // Work items run in normal kworkers.
        assert!(!share(Workqueue, "vmstat_update", None).can_preempt(4));
        assert!(share(Workqueue, "vmstat_update", None).can_preempt(120));
        // Deadline tasks preempt real-time ones; the stop class prints any priority.
        assert!(share(Thread, "dl/9", Some(-1)).can_preempt(4));
        assert!(share(Thread, "migration/1/21", Some(99)).can_preempt(0));
        // Equal priority waits (FIFO); unknown priority is assumed normal.
        assert!(!share(Thread, "peer/8", Some(4)).can_preempt(4));
        assert!(!share(Thread, "old/7", None).can_preempt(4));
        // The idle task takes nobody's time.
        assert!(!share(Thread, "swapper/2/0", Some(120)).can_preempt(120));
    }

    #[test]
    fn old_json_without_the_new_fields_still_reads() {
        let g: AttributedGap = serde_json::from_str(
            r#"{"start_ns":1,"duration_ns":10,"shares":[{"class":"tick","source":"local_timer","net_ns":4}],"unexplained_ns":6}"#,
        )
        .unwrap();
        assert_eq!(g.shares[0].prio, None);
        assert!(g.unexplained_within.is_empty());
        assert_eq!(g.unexplained_plain_ns(), 6);
        // And without them, the new writes as the old did.
        let json = serde_json::to_string(&g).unwrap();
        assert!(!json.contains("prio") && !json.contains("unexplained_within"));
    }

    fn arb_event() -> impl Strategy<Value = Event> {
        let kind = prop_oneof![
            (0u32..4).prop_map(|i| EventKind::IrqEntry {
                irq: i,
                name: format!("dev{i}")
            }),
            (0u32..4).prop_map(|i| EventKind::IrqExit { irq: i }),
            (0u32..3).prop_map(|v| EventKind::SoftirqEntry {
                vec: v,
                action: "X".into()
            }),
            (0u32..3).prop_map(|v| EventKind::SoftirqExit { vec: v }),
            Just(EventKind::VectorEntry {
                name: "local_timer".into()
            }),
            Just(EventKind::VectorExit {
                name: "local_timer".into()
            }),
            Just(EventKind::HrtimerEntry {
                function: "f".into(),
                hrtimer: 0,
                now_ns: None,
            }),
            Just(EventKind::HrtimerExit),
            Just(EventKind::WorkStart {
                function: "w".into()
            }),
            Just(EventKind::WorkEnd),
            (0u64..500).prop_map(|d| EventKind::Nmi {
                handler: "n".into(),
                delta_ns: d
            }),
            (
                prop_oneof![Just(DET), 0u32..5],
                prop_oneof![Just(DET), 0u32..5]
            )
                .prop_map(|(p, n)| EventKind::Switch {
                    prev_pid: p,
                    prev_comm: String::new(),
                    prev_prio: None,
                    prev_state: None,
                    next_comm: "t".into(),
                    next_pid: n,
                    next_prio: None,
                    inferred: false,
                }),
        ];
        (0u64..10_000, kind).prop_map(|(ts, kind)| Event {
            cpu: 0,
            ts,
            task: 0,
            kind,
        })
    }

    proptest! {
        /// At ns scale nothing is judged a stall; at µs scale (handlers of up to ms among
        /// short ones) many are, and the sum must still be exact.
        #[test]
        fn attributed_plus_unexplained_is_the_gap_exactly(
            events in proptest::collection::vec(arb_event(), 0..80),
            gaps in proptest::collection::vec((0u64..12_000, 0u64..3_000), 0..20),
            scale in prop_oneof![Just(1u64), Just(1_000u64)],
        ) {
            let events: Vec<Event> = events
                .into_iter()
                .map(|e| Event { ts: e.ts * scale, ..e })
                .collect();
            let tl = Timeline::build(&events, DET);
            let gaps: Vec<Gap> = gaps.into_iter().map(|(s, d)| gap(s * scale, d * scale)).collect();
            for g in tl.attribute(&gaps) {
                let attributed: u64 = g.shares.iter().map(|s| s.net_ns).sum();
                prop_assert_eq!(attributed + g.unexplained_ns, g.duration_ns);
                prop_assert!(g.shares.iter().all(|s| s.net_ns > 0));
                let within: u64 = g.unexplained_within.iter().map(|s| s.net_ns).sum();
                prop_assert!(within <= g.unexplained_ns);
            }
        }
    }
}
