use tame_trace::event::TaskState;
use tame_trace::EventKind;

use super::*;
use crate::watch::track::tests::ev;

const T: u32 = 500;
const RIVAL: u32 = 812;
const PERIOD: u64 = 1_000_000;

fn switch(ts: u64, prev: u32, state: TaskState, next: u32, next_prio: i32) -> Event {
    ev(
        0,
        ts,
        EventKind::Switch {
            prev_pid: prev,
            prev_comm: String::new(),
            prev_prio: None,
            prev_state: Some(state),
            next_comm: match next {
                T => "loop".into(),
                RIVAL => "rival".into(),
                _ => "swapper/0".into(),
            },
            next_pid: next,
            next_prio: Some(next_prio),
            inferred: false,
        },
    )
}

fn arm(ts: u64, due: u64) -> Event {
    // In the loop's own context: the timer it arms.
    Event {
        task: T,
        ..ev(
            0,
            ts,
            EventKind::HrtimerStart {
                hrtimer: 0xfeed,
                function: "hrtimer_wakeup".into(),
                expires_ns: due,
                softexpires_ns: due,
            },
        )
    }
}

/// Activation k: released at k ms by its timer (the interrupt 3 µs late), switched in
/// 2 µs later, runs 100 µs and arms the timer for the next; every 10th, a FIFO 90
/// thread switched in just before holds the CPU for 600 µs first.
fn program(activations: u64) -> Vec<Event> {
    let mut out = vec![arm(1_000, PERIOD)];
    for k in 1..=activations {
        let due = k * PERIOD;
        let rival = k % 10 == 0;
        if rival {
            out.push(switch(due - 10_000, 0, TaskState::Runnable, RIVAL, 9));
        }
        out.push(ev(
            0,
            due + 3_000,
            EventKind::HrtimerEntry {
                function: "hrtimer_wakeup".into(),
                hrtimer: 0xfeed,
                now_ns: Some(due + 3_000),
            },
        ));
        out.push(ev(
            0,
            due + 3_500,
            EventKind::Waking {
                comm: "loop".into(),
                pid: T,
                prio: Some(19),
                target_cpu: Some(0),
            },
        ));
        out.push(ev(0, due + 4_000, EventKind::HrtimerExit));
        let start = if rival {
            out.push(switch(due + 600_000, RIVAL, TaskState::Sleeping, T, 19));
            due + 600_000
        } else {
            out.push(switch(due + 5_000, 0, TaskState::Runnable, T, 19));
            due + 5_000
        };
        out.push(arm(start + 99_000, due + PERIOD));
        out.push(switch(start + 100_000, T, TaskState::Sleeping, 0, 120));
    }
    out.sort_by_key(|e| e.ts);
    out
}

fn analyze(
    config: AnalyzerConfig,
    events: Vec<Event>,
) -> (Vec<(ThreadFindings, GroupResult)>, Vec<Snapshot>) {
    let f = analyze_all(config, events);
    (f.threads, f.snapshots)
}

fn analyze_all(config: AnalyzerConfig, events: Vec<Event>) -> Finished {
    let mut a = Analyzer::new(config);
    a.watch(T, T, "loop");
    // In batches, as the reader hands them over.
    for chunk in events.chunks(37) {
        a.feed(chunk.to_vec());
    }
    a.finish()
}

fn config(snapshots: u32) -> AnalyzerConfig {
    AnalyzerConfig {
        period_ns: None,
        deadline_ns: Some(500_000),
        window_ns: 3_000_000,
        snapshots,
    }
}

#[test]
fn every_miss_is_counted_and_named_by_the_thread_that_caused_it() {
    let (threads, snapshots) = analyze(config(3), program(200));
    let (f, group) = &threads[0];
    assert_eq!(f.activations, 200);
    assert_eq!(f.releases.timer, 200);
    assert_eq!(f.period_ns, Some(PERIOD), "inferred from the releases");
    assert!(f.period_inferred);
    assert_eq!(f.misses, 20, "every 10th of 200");
    assert_eq!(group.counters["misses"], 20);
    let wake = group.metric("wake_latency").unwrap();
    assert_eq!(wake.summary.count, 200);
    // 5 µs from the expiry asked for, within the histogram's precision.
    assert!(
        (4_990..=5_010).contains(&wake.summary.p50),
        "{:?}",
        wake.summary
    );
    let top = &f.causes[0];
    assert_eq!(
        (top.class, top.source.as_str(), top.prio),
        (NoiseClass::Thread, "rival/812", Some(9))
    );
    assert_eq!(top.count, 20);
    assert_eq!(snapshots.len(), 3, "at most --snapshots");
    let s = &snapshots[0];
    assert_eq!(s.activation, 10);
    assert_eq!(s.main_cause().unwrap(), "thread rival/812 (real-time 90)");
    assert!(s
        .spans
        .iter()
        .any(|sp| sp.source == "rival/812" && sp.prio == Some(9)));
    assert!(s
        .spans
        .iter()
        .any(|sp| sp.class.is_none() && sp.source == "loop"));
    assert!(s.release_ns < s.start_ns && s.start_ns < s.end_ns && s.deadline_ns < s.end_ns);
    assert_eq!(
        s.spans.iter().map(|sp| sp.duration_ns).sum::<u64>(),
        s.window_ns,
        "the spans cover the window"
    );
}

#[test]
fn a_given_period_is_used_from_the_first_activation_and_a_gap_is_missed_periods() {
    let mut events = program(30);
    // Activations 11..=13 never happen: 10 armed its timer for 14 (the program was busy).
    events.retain(|e| !(11 * PERIOD - 20_000..14 * PERIOD - 20_000).contains(&e.ts));
    for e in events.iter_mut() {
        if let EventKind::HrtimerStart {
            expires_ns,
            softexpires_ns,
            ..
        } = &mut e.kind
        {
            if *expires_ns == 11 * PERIOD {
                *expires_ns = 14 * PERIOD;
                *softexpires_ns = 14 * PERIOD;
            }
        }
    }
    let c = AnalyzerConfig {
        period_ns: Some(PERIOD),
        deadline_ns: None,
        ..config(0)
    };
    let (threads, snapshots) = analyze(c, events);
    let f = &threads[0].0;
    assert!(!f.period_inferred);
    assert_eq!(f.deadline_ns, Some(PERIOD));
    assert_eq!(f.missed_periods, 3, "{f:#?}");
    assert!(snapshots.is_empty());
}
