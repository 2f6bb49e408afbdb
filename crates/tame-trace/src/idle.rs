//! Switches out of the idle task that the trace lacks.
//!
//! On this project's development VM (kernel 6.18, KVM) the `sched_switch` from the
//! idle task to the task an interrupt woke is often not in the trace: on CPU 1 none
//! of them, on CPU 0 some (a raw `trace_pipe` of sched_switch alone shows 147 720
//! switches to `swapper/1` and none from it). Idle would then seem to run on while
//! the woken task works, and the work's time would be charged to idle.
//!
//! Every event names the task that emitted it, so the first event of another task
//! while idle is believed running proves the switch happened. It is put at idle's
//! last event (the end of the interrupt that woke the task, µs before the real
//! switch), and counted, so a report can say how many switches were inferred.

use std::collections::VecDeque;

use crate::event::{Event, EventKind, TaskState};

/// Names and priorities remembered from wakeups and switches, for the inferred
/// switch's `next_comm` and `next_prio`.
const NAMES: usize = 32;

/// The kernel priority of a normal task at nice 0, as the idle task prints.
const IDLE_PRIO: i32 = 120;

/// One CPU's events in trace order, with the missing switches out of idle put back.
#[derive(Debug, Default)]
pub struct IdleExits {
    /// The task on the CPU by the last switch (`None` before the first).
    current: Option<u32>,
    last_ts: u64,
    names: VecDeque<(u32, String, Option<i32>)>,
    /// Switches inferred so far.
    pub inferred: u64,
}

impl IdleExits {
    pub fn new() -> Self {
        Self::default()
    }

    /// Pass `e` on through `out`, preceded by the switch out of idle it proves.
    pub fn push(&mut self, e: Event, mut out: impl FnMut(Event)) {
        let proves = match &e.kind {
            // A switch away from a task that idle is believed to be running.
            EventKind::Switch { prev_pid, .. } => Some(*prev_pid),
            _ => Some(e.task),
        }
        .filter(|&task| task != 0 && self.current == Some(0));
        if let Some(task) = proves {
            self.inferred += 1;
            out(Event {
                cpu: e.cpu,
                ts: self.last_ts.min(e.ts),
                task: 0,
                kind: EventKind::Switch {
                    prev_pid: 0,
                    prev_comm: String::new(),
                    prev_prio: Some(IDLE_PRIO),
                    prev_state: Some(TaskState::Runnable),
                    next_comm: self.name(task),
                    next_pid: task,
                    next_prio: self.prio(task),
                    inferred: true,
                },
            });
            self.current = Some(task);
        }
        match &e.kind {
            EventKind::Switch {
                prev_pid,
                prev_comm,
                prev_prio,
                next_pid,
                next_comm,
                next_prio,
                ..
            } => {
                // A capture may keep only some wakeups: switches name every task too.
                if *prev_pid != 0 && !prev_comm.is_empty() {
                    self.remember(*prev_pid, prev_comm, *prev_prio);
                }
                if *next_pid != 0 {
                    self.remember(*next_pid, next_comm, *next_prio);
                }
                self.current = Some(*next_pid);
            }
            EventKind::Waking {
                comm, pid, prio, ..
            } => self.remember(*pid, comm, *prio),
            EventKind::Wakeup { comm, pid } => self.remember(*pid, comm, None),
            _ => {}
        }
        self.last_ts = e.ts;
        out(e);
    }

    fn remember(&mut self, pid: u32, comm: &str, prio: Option<i32>) {
        if let Some(known) = self
            .names
            .iter_mut()
            .find(|(p, c, _)| *p == pid && c == comm)
        {
            known.2 = prio.or(known.2);
            return;
        }
        if self.names.len() == NAMES {
            self.names.pop_front();
        }
        self.names.push_back((pid, comm.to_string(), prio));
    }

    fn known(&self, pid: u32) -> Option<&(u32, String, Option<i32>)> {
        self.names.iter().rev().find(|(p, _, _)| *p == pid)
    }

    fn name(&self, pid: u32) -> String {
        self.known(pid)
            .map_or_else(|| "?".to_string(), |(_, c, _)| c.clone())
    }

    fn prio(&self, pid: u32) -> Option<i32> {
        self.known(pid).and_then(|k| k.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{parse_text, Timestamp};

    /// As captured on CPU 1 of the development VM: idle wakes the loop, the loop's
    /// next event is its own switch out.
    const CPU1: &str = "\
        missloop-29360   [001] d..2.   100: sched_switch: prev_comm=missloop prev_pid=29360 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh3.  5000: sched_waking: comm=missloop pid=29360 prio=49 target_cpu=001
          <idle>-0       [001] dNh3.  5020: local_timer_exit: vector=236
        missloop-29360   [001] d..2.  9000: sched_switch: prev_comm=missloop prev_pid=29360 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";

    #[test]
    fn the_switch_out_of_idle_is_put_at_idles_last_event() {
        let mut events = Vec::new();
        parse_text(CPU1, Timestamp::Counter, &mut events);
        let mut fixed = Vec::new();
        let mut idle = IdleExits::new();
        for e in events {
            idle.push(e, |e| fixed.push(e));
        }
        assert_eq!(idle.inferred, 1);
        assert_eq!(fixed.len(), 5);
        assert_eq!(fixed[3].ts, 5020, "right after the interrupt that woke it");
        assert_eq!(
            fixed[3].kind,
            EventKind::Switch {
                prev_pid: 0,
                prev_comm: String::new(),
                prev_prio: Some(120),
                prev_state: Some(TaskState::Runnable),
                next_comm: "missloop".into(),
                next_pid: 29360,
                next_prio: Some(49),
                inferred: true,
            }
        );
    }

    #[test]
    fn without_its_wakeup_a_task_is_named_from_its_last_switch() {
        let text = "\
      competitor-773     [001] d..2.   100: sched_switch: prev_comm=competitor prev_pid=773 prev_prio=39 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] d.h1.   900: local_timer_exit: vector=236
      competitor-773     [001] d.h1.  5000: local_timer_entry: vector=236
";
        let mut events = Vec::new();
        parse_text(text, Timestamp::Counter, &mut events);
        let mut idle = IdleExits::new();
        let mut fixed = Vec::new();
        for e in events {
            idle.push(e, |e| fixed.push(e));
        }
        match &fixed[2].kind {
            EventKind::Switch {
                next_comm,
                next_prio,
                inferred,
                ..
            } => assert_eq!(
                (next_comm.as_str(), *next_prio, *inferred),
                ("competitor", Some(39), true)
            ),
            other => panic!("not the inferred switch: {other:?}"),
        }
    }

    #[test]
    fn a_traced_switch_out_of_idle_is_left_alone() {
        let text = "\
          <idle>-0       [000] d..2.   100: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=7 next_prio=120
               a-7       [000] d..2.   200: sched_switch: prev_comm=a prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [000] d..2.   300: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=b next_pid=8 next_prio=120
               b-8       [000] d.h1.   400: local_timer_entry: vector=236
";
        let mut events = Vec::new();
        parse_text(text, Timestamp::Counter, &mut events);
        let mut idle = IdleExits::new();
        let mut n = 0;
        for e in events {
            idle.push(e, |_| n += 1);
        }
        assert_eq!((idle.inferred, n), (0, 4));
    }
}
