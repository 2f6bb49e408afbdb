//! Following watched threads through the scheduler's events, in time order across
//! CPUs: each activation's release, start and end, its time on the CPU and the
//! stretches it waited, for attribution afterwards.
//!
//! - **release**: for a thread that sleeps on a timer (clock_nanosleep, a timerfd, a
//!   POSIX timer), the time the timer was armed for — its soft expiry from
//!   `hrtimer_start` in the thread's context, placed on the trace time line through the
//!   clock reading the timer interrupt took (`now` of `hrtimer_expire_entry`, whose
//!   distance to the expiry is the interrupt's lateness). A timer the thread did not
//!   arm releases it at the handler's entry; anything else at `sched_waking`.
//! - **start**: back in its own code — the return from the system call it slept in
//!   (`raw_syscalls/sys_exit`), where a program reads the clock after its sleep and
//!   cyclictest measures; switched in where there is none. **end**: switched out to
//!   wait (sleeping, blocked, exited). Switched out still runnable, it was preempted
//!   and the activation goes on.
//!
//! The tracker keeps no events: what it needs of the past is the timers armed and,
//! per CPU, the timer being expired.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use tame_trace::event::TaskState;
use tame_trace::{Event, EventKind};

/// What released an activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleasedBy {
    /// A timer's expiry (the time it was armed for).
    Timer,
    /// A wakeup by another task or an interrupt (`sched_waking`).
    Wakeup,
    /// Switched in without a wakeup seen (the first activation, lost events): no wake
    /// latency or response is known.
    Unknown,
}

/// What the thread was doing in a stretch of its activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stretch {
    /// Released by a timer whose interrupt had not come yet: from the expiry to the
    /// interrupt's first timer (the CPU idle, interrupts off, or the hypervisor late).
    Delivery,
    /// Released, not yet switched in.
    Waiting,
    Running,
    /// Switched out while runnable, until switched in again.
    Preempted,
}

/// One stretch of an activation on one CPU (ns on the trace time line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub cpu: u32,
    pub from_ns: u64,
    pub to_ns: u64,
    pub stretch: Stretch,
}

/// A finished activation of a watched thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    pub tid: u32,
    pub release_ns: u64,
    pub released_by: ReleasedBy,
    /// Released by a timer: when its interrupt began expiring timers, and on which CPU.
    pub delivered: Option<(u32, u64)>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Time on a CPU between start and end.
    pub run_ns: u64,
    /// The CPU it was switched in on first.
    pub cpu: u32,
    pub intervals: Vec<Interval>,
    pub page_faults: u32,
    pub migrations: u32,
    /// Switched out while runnable.
    pub involuntary_switches: u32,
}

impl Activation {
    /// Released (and, where the release is unknown, started) at `release_ns` on `cpu`.
    fn new(
        tid: u32,
        release_ns: u64,
        released_by: ReleasedBy,
        delivered: Option<(u32, u64)>,
        cpu: u32,
    ) -> Self {
        Activation {
            tid,
            release_ns,
            released_by,
            delivered,
            start_ns: if released_by == ReleasedBy::Unknown {
                release_ns
            } else {
                0
            },
            end_ns: 0,
            run_ns: 0,
            cpu,
            intervals: Vec::with_capacity(4),
            page_faults: 0,
            migrations: 0,
            involuntary_switches: 0,
        }
    }

    /// start − release (`None` when the release is unknown).
    pub fn wake_latency_ns(&self) -> Option<u64> {
        self.known().then(|| self.start_ns - self.release_ns)
    }

    /// end − release.
    pub fn response_ns(&self) -> Option<u64> {
        self.known().then(|| self.end_ns - self.release_ns)
    }

    fn known(&self) -> bool {
        self.released_by != ReleasedBy::Unknown
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not seen yet: whether it sleeps or runs is unknown.
    Unknown,
    Asleep,
    Released,
    Running {
        since: u64,
        cpu: u32,
    },
    Preempted {
        since: u64,
        cpu: u32,
    },
}

struct Thread {
    phase: Phase,
    current: Option<Activation>,
}

/// A timer a watched thread armed: the time asked for.
#[derive(Clone, Copy, Debug)]
struct Armed {
    soft_expiry_ns: u64,
}

/// The timer interrupt pass and the timer being expired on one CPU.
#[derive(Clone, Copy, Debug, Default)]
struct CpuTimers {
    /// `now` of the current pass and the trace time of its first expiry: the clock
    /// was read just before it, so `first − (now − expiry)` is the expiry on the trace line.
    pass: Option<(u64, u64)>,
    /// The release a wakeup inside the running timer callback gets, and when the
    /// interrupt's pass began.
    expiring: Option<(u64, u64)>,
}

/// A return from a system call this long after the switch in is not the sleep's end.
const MAX_RETURN_NS: u64 = 200_000;

/// Timers remembered at most (a thread re-arms one timer; stale ones are dropped).
const MAX_ARMED: usize = 4096;

/// Follows the watched threads; [`Tracker::take`] hands over finished activations.
#[derive(Default)]
pub struct Tracker {
    threads: BTreeMap<u32, Thread>,
    armed: HashMap<u64, Armed>,
    cpus: BTreeMap<u32, CpuTimers>,
    done: Vec<Activation>,
    /// Each thread's name and kernel priority as last switched in, kept after it exits
    /// (a program started by tame is still called `tame` until it execs).
    seen: BTreeMap<u32, (String, Option<i32>)>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Follow `tid` from now on (no effect when already followed).
    pub fn watch(&mut self, tid: u32) {
        self.threads.entry(tid).or_insert(Thread {
            phase: Phase::Unknown,
            current: None,
        });
    }

    pub fn watches(&self, tid: u32) -> bool {
        self.threads.contains_key(&tid)
    }

    /// The name and kernel priority last seen for `tid` (also after it exited).
    pub fn seen(&self, tid: u32) -> Option<&(String, Option<i32>)> {
        self.seen.get(&tid)
    }

    /// Finished activations since the last call, in the order they ended.
    pub fn take(&mut self) -> Vec<Activation> {
        std::mem::take(&mut self.done)
    }

    /// Apply one event; events must come in time order across CPUs.
    pub fn apply(&mut self, e: &Event) {
        match &e.kind {
            EventKind::HrtimerStart {
                hrtimer,
                softexpires_ns,
                ..
            } if self.threads.contains_key(&e.task) => {
                if self.armed.len() >= MAX_ARMED {
                    self.armed.clear();
                }
                self.armed.insert(
                    *hrtimer,
                    Armed {
                        soft_expiry_ns: *softexpires_ns,
                    },
                );
            }
            EventKind::HrtimerEntry {
                hrtimer, now_ns, ..
            } => self.timer_entry(e.cpu, e.ts, *hrtimer, *now_ns),
            EventKind::HrtimerExit => {
                self.cpus.entry(e.cpu).or_default().expiring = None;
            }
            EventKind::Waking { pid, .. } => self.waking(e.cpu, e.ts, *pid),
            EventKind::MigrateTask { pid, .. } => {
                if let Some(a) = self.current_of(*pid) {
                    a.migrations += 1;
                }
            }
            EventKind::SysExit => self.returned(e.task, e.ts),
            EventKind::PageFault => {
                if let Some(a) = self.current_of(e.task) {
                    a.page_faults += 1;
                }
            }
            EventKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                next_comm,
                next_prio,
                ..
            } => {
                if self.threads.contains_key(prev_pid) {
                    self.switched_out(*prev_pid, e.ts, *prev_state);
                }
                if self.threads.contains_key(next_pid) {
                    let seen = self.seen.entry(*next_pid).or_default();
                    if seen.0 != *next_comm {
                        seen.0.clone_from(next_comm);
                    }
                    seen.1 = next_prio.or(seen.1);
                    self.switched_in(*next_pid, e.cpu, e.ts);
                }
            }
            _ => {}
        }
    }

    fn current_of(&mut self, tid: u32) -> Option<&mut Activation> {
        self.threads.get_mut(&tid)?.current.as_mut()
    }

    fn timer_entry(&mut self, cpu: u32, ts: u64, hrtimer: u64, now_ns: Option<u64>) {
        let timers = self.cpus.entry(cpu).or_default();
        let Some(now) = now_ns else {
            timers.expiring = Some((ts, ts));
            return;
        };
        let first = match timers.pass {
            Some((pass_now, first)) if pass_now == now => first,
            _ => {
                timers.pass = Some((now, ts));
                ts
            }
        };
        let release = match self.armed.get(&hrtimer) {
            Some(a) => first.saturating_sub(now.saturating_sub(a.soft_expiry_ns)),
            None => ts,
        };
        timers.expiring = Some((release, first));
    }

    fn waking(&mut self, cpu: u32, ts: u64, tid: u32) {
        let expiring = self.cpus.get(&cpu).and_then(|t| t.expiring);
        let Some(thread) = self.threads.get_mut(&tid) else {
            return;
        };
        if !matches!(thread.phase, Phase::Asleep | Phase::Unknown) {
            return;
        }
        let (release_ns, released_by, delivered) = match expiring {
            // The clamps guard a clock read that lagged the trace stamp.
            Some((release, first)) => {
                let release = release.min(ts);
                (
                    release,
                    ReleasedBy::Timer,
                    Some((cpu, first.clamp(release, ts))),
                )
            }
            None => (ts, ReleasedBy::Wakeup, None),
        };
        thread.phase = Phase::Released;
        thread.current = Some(Activation::new(
            tid,
            release_ns,
            released_by,
            delivered,
            cpu,
        ));
    }

    fn switched_in(&mut self, tid: u32, cpu: u32, ts: u64) {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return;
        };
        match (thread.phase, thread.current.as_mut()) {
            (Phase::Released, Some(a)) => {
                a.start_ns = ts;
                a.cpu = cpu;
                let mut waiting_from = a.release_ns;
                if let Some((timer_cpu, delivered)) = a.delivered {
                    if delivered > a.release_ns {
                        a.intervals.push(Interval {
                            cpu: timer_cpu,
                            from_ns: a.release_ns,
                            to_ns: delivered,
                            stretch: Stretch::Delivery,
                        });
                        waiting_from = delivered;
                    }
                }
                a.intervals.push(Interval {
                    cpu,
                    from_ns: waiting_from,
                    to_ns: ts,
                    stretch: Stretch::Waiting,
                });
            }
            (Phase::Preempted { since, cpu: left }, Some(a)) => {
                a.intervals.push(Interval {
                    cpu: left,
                    from_ns: since,
                    to_ns: ts,
                    stretch: Stretch::Preempted,
                });
            }
            _ => {
                // Running without a wakeup seen: an activation whose release is unknown.
                thread.current = Some(Activation::new(tid, ts, ReleasedBy::Unknown, None, cpu));
            }
        }
        thread.phase = Phase::Running { since: ts, cpu };
    }

    /// Back from a system call right after the first switch in: the thread is in its
    /// own code again — where a program sees the clock after its sleep, and what
    /// cyclictest measures. That is the start; without one, the switch in is.
    fn returned(&mut self, tid: u32, ts: u64) {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return;
        };
        let Phase::Running { since, .. } = thread.phase else {
            return;
        };
        let Some(a) = thread.current.as_mut() else {
            return;
        };
        let first_stint = a.start_ns == since
            && a.released_by != ReleasedBy::Unknown
            && a.intervals
                .last()
                .is_some_and(|i| i.stretch == Stretch::Waiting);
        if first_stint && ts.saturating_sub(since) <= MAX_RETURN_NS {
            a.start_ns = ts;
        }
    }

    fn switched_out(&mut self, tid: u32, ts: u64, state: Option<TaskState>) {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return;
        };
        let Phase::Running { since, cpu, .. } = thread.phase else {
            // Seen leaving before it was seen arriving: only its phase is learnt.
            thread.phase = match state {
                Some(TaskState::Runnable) => Phase::Unknown,
                _ => Phase::Asleep,
            };
            thread.current = None;
            return;
        };
        if let Some(a) = thread.current.as_mut() {
            a.run_ns += ts.saturating_sub(since);
            a.intervals.push(Interval {
                cpu,
                from_ns: since,
                to_ns: ts,
                stretch: Stretch::Running,
            });
        }
        if state == Some(TaskState::Runnable) {
            if let Some(a) = thread.current.as_mut() {
                a.involuntary_switches += 1;
            }
            thread.phase = Phase::Preempted { since: ts, cpu };
            return;
        }
        if let Some(mut a) = thread.current.take() {
            a.end_ns = ts;
            self.done.push(a);
        }
        if state == Some(TaskState::Exited) {
            self.threads.remove(&tid);
        } else {
            thread.phase = Phase::Asleep;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const T: u32 = 4411;

    /// An event of `cpu` at `ts` emitted in idle's context (the tests' default).
    pub(in crate::watch) fn ev(cpu: u32, ts: u64, kind: EventKind) -> Event {
        Event {
            cpu,
            ts,
            task: 0,
            kind,
        }
    }

    fn switch(cpu: u32, ts: u64, prev: u32, state: TaskState, next: u32) -> Event {
        ev(
            cpu,
            ts,
            EventKind::Switch {
                prev_pid: prev,
                prev_comm: String::new(),
                prev_prio: Some(120),
                prev_state: Some(state),
                next_comm: if next == T { "loop" } else { "other" }.into(),
                next_pid: next,
                next_prio: Some(if next == T { 19 } else { 120 }),
                inferred: false,
            },
        )
    }

    fn armed(cpu: u32, ts: u64, expiry: u64) -> Event {
        // In the thread's own context: the timer it arms.
        Event {
            task: T,
            ..ev(
                cpu,
                ts,
                EventKind::HrtimerStart {
                    hrtimer: 0xabc,
                    function: "hrtimer_wakeup".into(),
                    expires_ns: expiry,
                    softexpires_ns: expiry,
                },
            )
        }
    }

    fn entry(cpu: u32, ts: u64, hrtimer: u64, now: u64) -> Event {
        ev(
            cpu,
            ts,
            EventKind::HrtimerEntry {
                function: "hrtimer_wakeup".into(),
                hrtimer,
                now_ns: Some(now),
            },
        )
    }

    fn waking(cpu: u32, ts: u64, pid: u32) -> Event {
        ev(
            cpu,
            ts,
            EventKind::Waking {
                comm: "loop".into(),
                pid,
                prio: Some(19),
                target_cpu: Some(cpu),
            },
        )
    }

    fn run(events: &[Event]) -> Vec<Activation> {
        let mut t = Tracker::new();
        t.watch(T);
        for e in events {
            t.apply(e);
        }
        t.take()
    }

    /// A clock_nanosleep loop: the timer's clock reads `now` 4 µs after the expiry it was
    /// armed for; the trace line is 1 000 000 ns ahead of the timer's clock.
    #[test]
    fn a_timer_release_is_the_expiry_asked_for_on_the_trace_line() {
        let off = 1_000_000;
        let got = run(&[
            armed(1, 10_000 + off, 50_000),
            switch(1, 10_100 + off, T, TaskState::Sleeping, 0),
            // Another timer first in the same pass (the tick): the pass began at its entry.
            entry(1, 54_000 + off, 0x999, 54_000),
            ev(1, 55_000 + off, EventKind::HrtimerExit),
            entry(1, 55_500 + off, 0xabc, 54_000),
            waking(1, 55_800 + off, T),
            ev(1, 56_000 + off, EventKind::HrtimerExit),
            switch(1, 60_000 + off, 0, TaskState::Runnable, T),
            Event {
                task: T,
                ..ev(1, 60_800 + off, EventKind::SysExit)
            },
            Event {
                task: T,
                ..ev(1, 61_000 + off, EventKind::PageFault)
            },
            switch(1, 90_000 + off, T, TaskState::Sleeping, 0),
        ]);
        assert_eq!(got.len(), 1, "{got:#?}");
        let a = &got[0];
        assert_eq!(a.released_by, ReleasedBy::Timer);
        assert_eq!(a.release_ns, 50_000 + off, "expiry on the trace line");
        assert_eq!(
            a.wake_latency_ns(),
            Some(10_800),
            "to the return to user space"
        );
        assert_eq!(a.response_ns(), Some(40_000));
        assert_eq!(a.run_ns, 30_000);
        assert_eq!(a.page_faults, 1);
        assert_eq!(
            a.intervals
                .iter()
                .map(|i| (i.stretch, i.from_ns - off, i.to_ns - off))
                .collect::<Vec<_>>(),
            vec![
                (Stretch::Delivery, 50_000, 54_000),
                (Stretch::Waiting, 54_000, 60_000),
                (Stretch::Running, 60_000, 90_000)
            ],
            "the interrupt's pass began at 54 µs"
        );
        assert_eq!(a.delivered, Some((1, 54_000 + off)));
    }

    #[test]
    fn a_preemption_continues_the_activation_and_is_counted() {
        let got = run(&[
            switch(0, 100, T, TaskState::Sleeping, 0),
            waking(0, 1_000, T),
            switch(0, 1_500, 0, TaskState::Runnable, T),
            switch(0, 2_000, T, TaskState::Runnable, 77),
            ev(
                0,
                2_100,
                EventKind::MigrateTask {
                    pid: T,
                    orig_cpu: 0,
                    dest_cpu: 1,
                },
            ),
            switch(1, 5_000, 0, TaskState::Runnable, T),
            switch(1, 6_000, T, TaskState::Sleeping, 0),
        ]);
        let a = &got[0];
        assert_eq!(a.released_by, ReleasedBy::Wakeup);
        assert_eq!(a.release_ns, 1_000);
        assert_eq!(a.response_ns(), Some(5_000));
        assert_eq!(a.run_ns, 1_500);
        assert_eq!(a.involuntary_switches, 1);
        assert_eq!(a.migrations, 1);
        assert_eq!(
            a.intervals[2],
            Interval {
                cpu: 0,
                from_ns: 2_000,
                to_ns: 5_000,
                stretch: Stretch::Preempted
            },
            "the wait is charged to the CPU it was taken off"
        );
    }

    #[test]
    fn without_a_wakeup_the_release_is_unknown_and_an_exit_ends_the_watch() {
        let mut t = Tracker::new();
        t.watch(T);
        for e in [
            switch(0, 100, 0, TaskState::Runnable, T),
            switch(0, 900, T, TaskState::Exited, 0),
        ] {
            t.apply(&e);
        }
        let got = t.take();
        assert_eq!(got[0].released_by, ReleasedBy::Unknown);
        assert_eq!(got[0].wake_latency_ns(), None);
        assert!(!t.watches(T));
    }

    #[test]
    fn other_threads_and_a_waking_of_a_running_thread_change_nothing() {
        let got = run(&[
            switch(0, 100, T, TaskState::Sleeping, 0),
            waking(0, 200, 55),
            waking(0, 1_000, T),
            waking(0, 1_100, T),
            switch(0, 1_500, 0, TaskState::Runnable, T),
            waking(0, 1_600, T),
            switch(0, 2_000, T, TaskState::Sleeping, 0),
        ]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].release_ns, 1_000);
        assert_eq!(got[0].end_ns, 2_000);
    }
}
