//! Watch results: the fixtures written from the Rust types (so they match the schema
//! exactly), and the report of one and of two overlaid — each thread's figures, its
//! causes with priorities in words, every snapshot drawn, names escaped.
//!
//! After an intended change of the watch's types, rewrite the fixtures with
//! `TAME_REPORT_BLESS=1 cargo test -p tame-report --test it watch::` and review the diff.

use crate::common::*;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};
use tame_bench::distribution::Distribution;
use tame_bench::result::Calibration;
use tame_bench::watch::snapshot::{SnapshotSpan, SCHEMA};
use tame_bench::watch::{
    Cause, Releases, Snapshot, ThreadFindings, TraceStatus, WatchFindings, WatchResult,
    WatchSettings,
};
use tame_bench::{BenchResult, GroupResult, Metric, Recorder};
use tame_host::environment::RunEnvironment;
use tame_host::CpuList;
use tame_rt::ClockKind;
use tame_trace::tracefs::TraceClock;
use tame_trace::NoiseClass;

/// The fixtures: a control loop and a logger watched on a shared machine, and again in
/// a partition.
const FIXTURES: [(&str, bool); 2] = [("watch.json", false), ("watch-partitioned.json", true)];

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// A deterministic stream of numbers (xorshift64).
struct Noise(u64);

impl Noise {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// One thread's activations as the watch records them: wake latency, response, run time.
struct Recorded {
    wake: Recorder,
    response: Recorder,
    run: Recorder,
}

impl Recorded {
    fn new() -> Self {
        Recorded {
            wake: Recorder::new(),
            response: Recorder::new(),
            run: Recorder::new(),
        }
    }

    fn record(&mut self, wake: u64, run: u64, response: u64) {
        self.wake.record(wake);
        self.run.record(run);
        self.response.record(response);
    }

    fn merge(&mut self, other: &Recorded) {
        self.wake.merge(&other.wake);
        self.response.merge(&other.response);
        self.run.merge(&other.run);
    }

    fn metrics(&self) -> Vec<Metric> {
        [
            ("wake_latency", &self.wake),
            ("response", &self.response),
            ("run_time", &self.run),
        ]
        .into_iter()
        .map(|(name, r)| Metric {
            name: name.into(),
            unit: "ns".into(),
            summary: r.summary(),
            distribution: Some(Distribution::of(r)),
        })
        .collect()
    }
}

const DEADLINE_NS: u64 = 500_000;

fn span(start_ns: u64, end_ns: u64, class: Option<NoiseClass>, source: &str) -> SnapshotSpan {
    SnapshotSpan {
        start_ns,
        duration_ns: end_ns - start_ns,
        class,
        source: source.into(),
        prio: (class == Some(NoiseClass::Thread)).then_some(9),
    }
}

fn cause(class: NoiseClass, source: &str, count: u64, total_ns: u64, max_ns: u64) -> Cause {
    Cause {
        class,
        source: source.into(),
        prio: (class == NoiseClass::Thread).then_some(9),
        count,
        total_ns,
        max_ns,
    }
}

/// A miss of `loop` over a 3 ms window: released 700 µs before its end, 500 µs deadline.
/// Shared: a FIFO 90 thread held the CPU 580 µs before it (an interrupt inside that);
/// partitioned: it started at once but lost 590 µs while running, to nothing the trace
/// shows.
fn miss(activation: u64, partitioned: bool, spans: Vec<SnapshotSpan>) -> Snapshot {
    let (start, causes) = if partitioned {
        (
            2_305_000,
            vec![
                cause(NoiseClass::Unexplained, "unexplained", 1, 590_000, 590_000),
                cause(NoiseClass::Idle, "idle", 1, 5_000, 5_000),
            ],
        )
    } else {
        (
            2_900_000,
            vec![
                cause(NoiseClass::Thread, "rival/812", 1, 580_000, 580_000),
                cause(NoiseClass::Irq, "irq 36 virtio0", 1, 20_000, 20_000),
            ],
        )
    };
    Snapshot {
        schema: SCHEMA.into(),
        thread: "loop".into(),
        tid: 4242,
        prio: Some(19),
        cpu: 1,
        activation,
        released_by: Some(tame_bench::watch::ReleasedBy::Timer),
        window_start_ns: 5_000_000_000 + activation * 1_000_000,
        window_ns: 3_000_000,
        release_ns: 2_300_000,
        start_ns: start,
        deadline_ns: 2_300_000 + DEADLINE_NS as i64,
        end_ns: 3_000_000,
        wake_latency_ns: start as u64 - 2_300_000,
        response_ns: 700_000,
        run_ns: if partitioned { 105_000 } else { 100_000 },
        causes,
        spans,
    }
}

fn snapshots(partitioned: bool) -> Vec<Snapshot> {
    let before = |spans: &mut Vec<SnapshotSpan>| {
        spans.extend([
            span(0, 300_000, Some(NoiseClass::Idle), "idle"),
            span(300_000, 303_000, Some(NoiseClass::Timer), "hrtimer_wakeup"),
            span(303_000, 403_000, None, "loop"),
        ]);
    };
    if partitioned {
        let mut spans = Vec::new();
        before(&mut spans);
        spans.extend([
            span(403_000, 2_305_000, Some(NoiseClass::Idle), "idle"),
            span(2_305_000, 2_355_000, None, "loop"),
            span(
                2_355_000,
                2_945_000,
                Some(NoiseClass::Unexplained),
                "unexplained",
            ),
            span(2_945_000, 3_000_000, None, "loop"),
        ]);
        return vec![miss(1234, true, spans)];
    }
    [100, 200]
        .into_iter()
        .map(|activation| {
            let mut spans = Vec::new();
            before(&mut spans);
            spans.extend([
                span(403_000, 2_290_000, Some(NoiseClass::Idle), "idle"),
                span(2_290_000, 2_500_000, Some(NoiseClass::Thread), "rival/812"),
                span(
                    2_500_000,
                    2_520_000,
                    Some(NoiseClass::Irq),
                    "irq 36 virtio0",
                ),
                span(2_520_000, 2_900_000, Some(NoiseClass::Thread), "rival/812"),
                span(2_900_000, 3_000_000, None, "loop"),
            ]);
            miss(activation, false, spans)
        })
        .collect()
}

/// A thread's group and findings from its activations.
#[allow(clippy::too_many_arguments)]
fn thread(
    label: &str,
    tid: u32,
    prio: i32,
    period_ns: u64,
    r: &Recorded,
    misses: u64,
    causes: Vec<Cause>,
    snapshot_ids: Vec<usize>,
) -> (ThreadFindings, GroupResult) {
    let activations = r.wake.count();
    let counters: BTreeMap<String, u64> = [
        ("activations", activations),
        ("misses", misses),
        ("missed_periods", 0),
        ("page_faults", 0),
        ("migrations", 0),
        ("involuntary_switches", misses),
        ("unknown_releases", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let group = GroupResult {
        label: label.into(),
        cpu: None,
        metrics: r.metrics(),
        counters,
        derived: [("period_ns".to_string(), period_ns as f64)]
            .into_iter()
            .collect(),
        spread: BTreeMap::new(),
        timeline: None,
        not_measured: None,
    };
    let findings = ThreadFindings {
        label: label.into(),
        tid,
        pid: 4240,
        comm: label.into(),
        prio: Some(prio),
        activations,
        releases: Releases {
            timer: activations,
            wakeup: 0,
            unknown: 0,
        },
        period_ns: Some(period_ns),
        period_inferred: true,
        deadline_ns: Some(DEADLINE_NS),
        misses,
        missed_periods: 0,
        page_faults: 0,
        migrations: 0,
        involuntary_switches: misses,
        causes,
        snapshot_ids,
    };
    (findings, group)
}

/// The watch of a control loop (1 ms, real-time 80) and its logger (10 ms, nice 0).
fn watch_result(partitioned: bool) -> WatchResult {
    let mut n = Noise(0x2545_f491_4f6c_dd1d);
    let mut control = Recorded::new();
    let mut misses = 0;
    for k in 1..=2_000u64 {
        let (wake, run) = match (partitioned, k) {
            (false, k) if k % 100 == 0 => (600_000 + n.next(10_000), 95_000 + n.next(10_000)),
            (true, 1234) => (5_000, 105_000 + 590_000),
            (false, _) => (4_000 + n.next(8_000), 95_000 + n.next(10_000)),
            (true, _) => (3_000 + n.next(3_000), 95_000 + n.next(10_000)),
        };
        misses += u64::from(wake + run > DEADLINE_NS);
        control.record(wake, run, wake + run);
    }
    let mut logger = Recorded::new();
    for _ in 0..200 {
        let (wake, run) = (20_000 + n.next(30_000), 30_000 + n.next(20_000));
        logger.record(wake, run, wake + run);
    }
    let snapshots = snapshots(partitioned);
    let loop_causes = if partitioned {
        vec![
            cause(NoiseClass::Idle, "idle", 2_000, 6_000_000, 8_000),
            cause(NoiseClass::Unexplained, "unexplained", 1, 590_000, 590_000),
            cause(NoiseClass::Tick, "local_timer", 40, 80_000, 3_000),
        ]
    } else {
        vec![
            cause(NoiseClass::Thread, "rival/812", 20, 11_800_000, 610_000),
            cause(NoiseClass::Idle, "idle", 1_980, 9_500_000, 12_000),
            cause(NoiseClass::Irq, "irq 36 virtio0", 35, 700_000, 25_000),
            cause(NoiseClass::Softirq, "NET_RX", 12, 240_000, 30_000),
            cause(NoiseClass::Tick, "local_timer", 200, 200_000, 3_000),
            cause(NoiseClass::Timer, "tick_nohz_handler", 50, 100_000, 4_000),
            cause(NoiseClass::Workqueue, "vmstat_update", 3, 30_000, 12_000),
        ]
    };
    let snapshot_ids = (0..snapshots.len()).collect();
    let threads = vec![
        thread(
            "loop",
            4242,
            19,
            1_000_000,
            &control,
            misses,
            loop_causes,
            snapshot_ids,
        ),
        thread(
            "logger",
            4243,
            120,
            10_000_000,
            &logger,
            0,
            vec![cause(NoiseClass::Idle, "idle", 200, 4_000_000, 40_000)],
            Vec::new(),
        ),
    ];
    let mut all = Recorded::new();
    all.merge(&control);
    all.merge(&logger);
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    for (_, g) in &threads {
        for (k, v) in &g.counters {
            *counters.entry(k.clone()).or_default() += v;
        }
    }
    let (findings, groups): (Vec<_>, Vec<_>) = threads.into_iter().unzip();
    let cpus = CpuList::parse("1").unwrap();
    let mut command_line: Vec<String> = [
        "tame",
        "watch",
        "--deadline",
        "500us",
        "--window",
        "3ms",
        "--snapshots",
        "2",
    ]
    .map(String::from)
    .to_vec();
    if partitioned {
        command_line.extend(["-p".to_string(), "rt".to_string()]);
    }
    command_line.extend(["--", "./control-loop"].map(String::from));
    let result = BenchResult {
        schema_version: 1,
        bench: "watch".into(),
        tool_version: "0.1.0".into(),
        command_line,
        started_unix_ns: 1_764_400_000_000_000_000,
        elapsed_ns: 2_000_000_000,
        interrupted: false,
        environment: RunEnvironment {
            kernel_release: "6.12.0-rt".into(),
            kernel_version: "#1 SMP PREEMPT_RT".into(),
            preemption_model: "rt".into(),
            clocksource: Some("tsc".into()),
            invariant_tsc: true,
            online_cpus: CpuList::parse("0-1").unwrap(),
            ..RunEnvironment::default()
        },
        calibration: Calibration {
            clock: Some(ClockKind::Monotonic),
            clock_read_cost_ns: 25,
            loop_floor_ns: 20,
            tsc_hz: None,
        },
        load: None,
        partition: partitioned.then(|| "rt".to_string()),
        settings: WatchSettings {
            pids: vec![4240],
            command: Some(vec!["./control-loop".into()]),
            threads: None,
            period_ns: None,
            deadline_ns: Some(DEADLINE_NS),
            duration_ns: None,
            window_ns: 3_000_000,
            snapshots: 2,
            cpus,
            trace_clock: TraceClock::Mono,
        },
        groups,
        merged: GroupResult {
            label: "all".into(),
            cpu: None,
            metrics: all.metrics(),
            counters,
            derived: BTreeMap::new(),
            spread: BTreeMap::new(),
            timeline: None,
            not_measured: None,
        },
    };
    let events_missing = if partitioned {
        vec!["exceptions/page_fault_user".to_string()]
    } else {
        Vec::new()
    };
    WatchResult {
        result,
        watch: WatchFindings {
            threads: findings,
            trace: TraceStatus {
                tracefs_dir: "instances/tame-watch-4240".into(),
                events_enabled: [
                    "sched/sched_switch",
                    "sched/sched_waking",
                    "irq/irq_handler_entry",
                ]
                .map(String::from)
                .to_vec(),
                events_missing,
                lost: [(1, 0)].into_iter().collect(),
                events_read: 123_456,
                idle_exits_inferred: [(1, 1_800)].into_iter().collect(),
                recovered: Vec::new(),
                restore_problems: Vec::new(),
            },
            snapshots,
            snapshot_dir: None,
            exit: Some("0".into()),
            notes: Vec::new(),
        },
    }
}

#[test]
fn the_watch_fixtures_are_what_the_types_write() {
    let bless = std::env::var_os("TAME_REPORT_BLESS").is_some();
    for (name, partitioned) in FIXTURES {
        let want = watch_result(partitioned);
        let path = fixture(name);
        if bless {
            std::fs::write(&path, want.to_json()).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            want.to_json(),
            "{name} is stale — regenerate it with `TAME_REPORT_BLESS=1 cargo test -p tame-report --test it watch::` and commit it"
        );
        let read: WatchResult = serde_json::from_str(&text).unwrap();
        assert_eq!(read, want, "{name} reads back as the watch's types");
    }
}

#[test]
fn a_watch_result_shows_each_thread_its_causes_and_every_miss() {
    let f = fixture("watch.json");
    let (inputs, r) = render(std::slice::from_ref(&f));
    let v = json(&f);
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    let html = &r.html;
    // The table of threads: priority in words, misses as the result holds them.
    assert_cell(html, "loop", "prio", "real-time 80");
    assert_cell(html, "logger", "prio", "normal, nice 0");
    assert_cell(html, "loop", "period_from", "inferred");
    assert_cell(html, "loop", "deadline_ns", "500.00µs");
    assert_value(html, "loop", "deadline_ns", "500000");
    assert_cell(html, "loop", "misses", "20");
    // The causes: the competitor first with its priority; the seventh left out, said so.
    assert_cell(html, "rival/812", "prio", "real-time 90");
    assert_cell(html, "rival/812", "total_ns", "11.800ms");
    assert_value(html, "rival/812", "total_ns", "11800000");
    assert!(html.contains("the 6 largest of 7"));
    assert!(!html.contains("vmstat_update"));
    // Each snapshot a figure, its title naming thread, CPU, response and main cause.
    let miss = r.figures().find(|f| f.id == "watch-miss-1").unwrap();
    assert_eq!(miss.kind, "snapshot");
    assert_eq!(
        miss.title,
        "loop: activation 100 on CPU 1, response 700 µs, mostly thread rival/812 (real-time 90)"
    );
    assert!(miss.svg.contains("irq 36 virtio0") || miss.svg.contains(">\nirq\n<"));
    assert!(has_figure(&r, "watch-miss-2"));
    assert!(has_figure(&r, "watch-response-tail"));
    assert!(html.contains("watched the command ./control-loop on CPUs 1"));
    assert!(html.contains("the program exited with 0"));
    // The partitioned run: its stall in black, the event this kernel lacks noted.
    let (_, r) = render(&[fixture("watch-partitioned.json")]);
    let miss = r.figures().find(|f| f.id == "watch-miss-1").unwrap();
    assert!(miss.title.contains("mostly unexplained"), "{}", miss.title);
    assert!(miss.svg.contains("fill=\"#000000\""));
    assert!(r
        .html
        .contains("not in this kernel, so not traced: exceptions/page_fault_user"));
}

#[test]
fn two_watch_results_are_overlaid_thread_by_thread() {
    let files: Vec<PathBuf> = FIXTURES.iter().map(|(n, _)| fixture(n)).collect();
    let (inputs, r) = render(&files);
    let raw: Vec<Value> = files.iter().map(|f| json(f)).collect();
    check_expected(&inputs, &raw, &r);
    let tail = r
        .figures()
        .find(|f| f.id == "watch-wake-latency-tail")
        .unwrap();
    for series in ["shared: loop", "partition rt: loop", "partition rt: logger"] {
        assert!(tail.svg.contains(series), "{series}");
    }
    assert_cell(&r.html, "partition rt: loop", "misses", "1");
    assert!(has_figure(&r, "watch-shared-miss-2"));
    assert!(has_figure(&r, "watch-partition-rt-miss-1"));
}

#[test]
fn names_in_a_watch_result_are_escaped_and_a_result_without_findings_still_draws() {
    let mut v = json(&fixture("watch.json"));
    let odd = "a<b&c";
    v["groups"][0]["label"] = json!(odd);
    v["watch"]["threads"][0]["label"] = json!(odd);
    for s in v["watch"]["snapshots"].as_array_mut().unwrap() {
        s["thread"] = json!(odd);
        s["spans"][2]["source"] = json!(odd);
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "odd.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    assert!(r.html.contains("a&lt;b&amp;c"));
    assert!(!r.html.contains(odd));
    for f in r.figures() {
        assert!(!f.svg.contains(odd), "{}", f.id);
    }
    // Without its findings: the figures of the common part, and a note of what is missing.
    v.as_object_mut().unwrap().remove("watch");
    let f = write_json(dir.path(), "bare.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    assert!(r
        .html
        .contains("a watch result without its `watch` findings"));
    assert!(has_figure(&r, "watch-run-time-histogram"));
}
