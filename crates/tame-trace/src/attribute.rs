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
//! All times here are nanoseconds on one time line; the caller converts event
//! timestamps and gaps with the same function.

use std::collections::BTreeMap;

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
    /// Not visible to the guest: hypervisor, SMI, hardware.
    Unexplained,
}

impl NoiseClass {
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
    pub source: String,
    pub net_ns: u64,
}

/// A gap and what filled it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributedGap {
    pub start_ns: u64,
    pub duration_ns: u64,
    /// In order of first appearance in the gap.
    pub shares: Vec<Share>,
    pub unexplained_ns: u64,
}

impl AttributedGap {
    /// The share that took most of the gap (unexplained included): the gap's
    /// class and source in one word, for the CSV.
    pub fn main_cause(&self) -> (NoiseClass, &str) {
        let top = self.shares.iter().max_by_key(|s| s.net_ns);
        match top {
            Some(s) if s.net_ns >= self.unexplained_ns => (s.class, s.source.as_str()),
            _ => (NoiseClass::Unexplained, "unexplained"),
        }
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
    Switch { next_pid: u32, next_comm: String },
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
        EventKind::HrtimerEntry { function } => {
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
            ..
        } => Action::Switch {
            next_pid: *next_pid,
            next_comm: next_comm.clone(),
        },
        EventKind::Wakeup { .. } => return,
    };
    actions.push((e.ts, action));
}

/// The task running before the first switch: that switch's `prev`.
fn first_prev(events: &[Event]) -> Option<u32> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Switch { prev_pid, .. } => Some((e.ts, *prev_pid)),
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
    fn new(first_prev: Option<u32>, detector_pid: u32) -> Self {
        let mut builder = Builder {
            detector_pid,
            occurrences: Vec::new(),
            stack: Vec::new(),
            task: Owner::Detector,
            segments: Vec::new(),
        };
        if let Some(pid) = first_prev.filter(|&pid| pid != detector_pid) {
            let comm = if pid == 0 { "swapper" } else { "?" };
            let thread = builder.occur(NoiseClass::Thread, thread_name(comm, pid));
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
        self.occurrences.push(Occurrence { class, source });
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
            } => {
                // Work items run in task context: a switch ends what the old task was doing.
                self.stack.retain(|(k, _)| *k != Key::Work);
                self.task = if next_pid == self.detector_pid {
                    Owner::Detector
                } else {
                    Owner::Occurrence(
                        self.occur(NoiseClass::Thread, thread_name(&next_comm, next_pid)),
                    )
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

    fn finish(self) -> Timeline {
        Timeline {
            segments: self.segments,
            occurrences: self.occurrences,
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
                Owner::Occurrence(o) => match shares.iter_mut().find(|(id, _)| *id == o) {
                    Some((_, t)) => *t += overlap,
                    None => shares.push((o, overlap)),
                },
            }
            i += 1;
        }
        AttributedGap {
            start_ns: gap.start_ns,
            duration_ns: gap.duration_ns,
            shares: shares
                .into_iter()
                .filter(|(_, t)| *t > 0)
                .map(|(o, t)| Share {
                    class: self.occurrences[o].class,
                    source: self.occurrences[o].source.clone(),
                    net_ns: t,
                })
                .collect(),
            unexplained_ns: unexplained,
        }
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
/// once per gap that has some.
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
            sources
                .entry((NoiseClass::Unexplained, "unexplained".into()))
                .or_default()
                .add(g.unexplained_ns);
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
        Event { cpu: 1, ts, kind }
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
                next_comm: comm.into(),
                next_pid: next,
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
    fn nested_interrupts_are_subtracted_from_their_parent() {
        let events = vec![
            vec_entry(1_000, "local_timer"),
            ev(
                1_200,
                EventKind::HrtimerEntry {
                    function: "tick_nohz_handler".into(),
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
                function: "f".into()
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
                    next_comm: "t".into(),
                    next_pid: n
                }),
        ];
        (0u64..10_000, kind).prop_map(|(ts, kind)| Event { cpu: 0, ts, kind })
    }

    proptest! {
        #[test]
        fn attributed_plus_unexplained_is_the_gap_exactly(
            events in proptest::collection::vec(arb_event(), 0..80),
            gaps in proptest::collection::vec((0u64..12_000, 0u64..3_000), 0..20),
        ) {
            let tl = Timeline::build(&events, DET);
            let gaps: Vec<Gap> = gaps.into_iter().map(|(s, d)| gap(s, d)).collect();
            for g in tl.attribute(&gaps) {
                let attributed: u64 = g.shares.iter().map(|s| s.net_ns).sum();
                prop_assert_eq!(attributed + g.unexplained_ns, g.duration_ns);
                prop_assert!(g.shares.iter().all(|s| s.net_ns > 0));
            }
        }
    }
}
